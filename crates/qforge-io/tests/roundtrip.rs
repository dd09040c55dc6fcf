//! The writers: what qforge writes, qforge, gguf-rs-lib and llama.cpp's gguf-py read back
//! (gguf-py's check is `#[ignore]`d: it needs Python with gguf-py; CI runs it with `--ignored`);
//! safetensors written by the HF package read bit-exactly; imatrix files give llama.cpp's
//! importance values.

mod common;

use common::{assert_bits_eq, f32_file, manifest, read};
use qforge_core::DType;
use qforge_io::{
    Container, GgufFile, GgufWriter, ModelFile, SafetensorsFile, StWriteTensor, TensorType, Value, decode_f32, encode,
    imatrix, st_dtype, write_safetensors,
};

/// Rewrite a GGUF file through GgufWriter with the same metadata, types and data.
fn rewrite(bytes: &[u8]) -> Vec<u8> {
    let g = GgufFile::parse(bytes).unwrap();
    let mut w = GgufWriter::new();
    for (k, v) in &g.metadata {
        w.set(k, v.clone()).unwrap();
    }
    for t in &g.tensors {
        w.add_tensor(&t.name, t.ty, &t.dims()).unwrap();
    }
    let mut s = w.start(Vec::new()).unwrap();
    for t in &g.tensors {
        s.write_tensor(g.tensor_bytes(t)).unwrap();
    }
    s.finish().unwrap()
}

#[test]
fn rewriting_a_gguf_py_file_reproduces_it_byte_for_byte() {
    for f in ["model.gguf", "align64.gguf", "imatrix.gguf"] {
        let orig = read(f);
        assert!(rewrite(&orig) == orig, "{f}: qforge's rewrite differs from gguf-py's file");
    }
}

/// Quantize the fixture model to q4_k (with fallbacks) as convert does.
fn quantized_model() -> (Vec<u8>, Vec<(String, &'static str)>) {
    let src = read("model.gguf");
    let m = ModelFile::parse(&src, Container::Gguf).unwrap();
    let want = TensorType::by_name("q4_k").unwrap();
    let mut w = GgufWriter::new();
    for (k, v) in &m.metadata {
        w.set(k, v.clone()).unwrap();
    }
    w.set("general.file_type", Value::U32(want.llama_ftype())).unwrap();
    w.set("general.quantization_version", Value::U32(2)).unwrap();
    let mut plan = Vec::new();
    for t in &m.tensors {
        let ty = if t.dims.len() < 2 {
            TensorType::by_name("f32").unwrap()
        } else {
            let cols = *t.dims.last().unwrap();
            let block = |n: &str| TensorType::by_name(n).ok().map(|t| t.block_size());
            match qforge_presets::fallback(want.name(), cols, &block).unwrap() {
                Some(other) => TensorType::by_name(&other).unwrap(),
                None => want,
            }
        };
        w.add_tensor(&t.name, ty, &t.dims).unwrap();
        plan.push((t.name.clone(), ty.name()));
    }
    let mut s = w.start(Vec::new()).unwrap();
    for (t, (_, ty)) in m.tensors.iter().zip(&plan) {
        s.write_tensor(&encode(t, TensorType::by_name(ty).unwrap(), None).unwrap()).unwrap();
    }
    (s.finish().unwrap(), plan)
}

#[test]
fn written_gguf_reads_back_in_qforge_and_gguf_rs_lib() {
    let (out, plan) = quantized_model();
    let types: Vec<&str> = plan.iter().map(|(_, t)| *t).collect();
    assert_eq!(types, ["q4_k", "f32", "q5_0", "q5_0", "q5_0", "q5_0", "q5_0", "q5_0", "q4_k", "f16"]);
    let g = GgufFile::parse(&out).unwrap();
    assert_eq!(g.get("general.file_type"), Some(&Value::U32(14)));
    assert_eq!(g.get("general.quantization_version"), Some(&Value::U32(2)));
    assert_eq!(g.get("test.string"), Some(&Value::String("héllo wörld".into())));
    assert!(g.tensors.iter().all(|t| t.offset % 32 == 0));
    // An independent Rust reader (gguf-rs-lib) agrees on the layout.
    let other = gguf_rs_lib::reader::file_reader::GGUFFileReader::new(std::io::Cursor::new(out.clone())).unwrap();
    assert_eq!(other.tensor_count(), g.tensors.len());
    for t in &g.tensors {
        let info = other.get_tensor_info(&t.name).unwrap();
        assert_eq!(info.data_offset(), t.rel_offset, "{}", t.name);
        assert_eq!(info.expected_data_size(), t.size as u64, "{}", t.name);
    }
}

#[test]
#[ignore = "needs python3 with gguf-py (pip install gguf==0.19.0): cargo test -p qforge-io --test roundtrip -- --ignored"]
fn written_gguf_reads_back_in_gguf_py() {
    let (out, plan) = quantized_model();
    let dir = std::env::temp_dir().join(format!("qforge-io-rt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("q.gguf");
    std::fs::write(&path, &out).unwrap();
    // gguf-py's reader and numpy dequantizer on our file vs qforge's reading of it.
    let script = r#"
import sys, gguf, numpy as np
from gguf.quants import dequantize
r = gguf.GGUFReader(sys.argv[1])
for t in r.tensors:
    y = dequantize(t.data, t.tensor_type).astype('<f4').ravel()
    print(t.name, t.tensor_type.name.lower(), int(t.data_offset), y.tobytes().hex())
print('file_type', int(r.fields['general.file_type'].parts[-1][0]))
"#;
    let run = std::process::Command::new("python3").arg("-c").arg(script).arg(&path).output();
    let _ = std::fs::remove_dir_all(&dir);
    let out_py = match run {
        Ok(o) if o.status.success() => String::from_utf8(o.stdout).unwrap(),
        Ok(o) => panic!("gguf-py failed on qforge's file (pip install gguf): {}", String::from_utf8_lossy(&o.stderr)),
        Err(e) => panic!("this test needs python3 with gguf-py: {e}"),
    };
    let g = GgufFile::parse(&out).unwrap();
    let m = ModelFile::from_gguf(GgufFile::parse(&out).unwrap()).unwrap();
    let lines: Vec<&str> = out_py.lines().collect();
    assert_eq!(lines.len(), plan.len() + 1);
    for ((line, t), v) in lines.iter().zip(&g.tensors).zip(&m.tensors) {
        let f: Vec<&str> = line.split(' ').collect();
        assert_eq!((f[0], f[1], f[2].parse::<u64>().unwrap()), (&*t.name, t.ty.name(), t.offset));
        let py: Vec<f32> = (0..f[3].len() / 8)
            .map(|i| f32::from_le_bytes(u32::from_str_radix(&f[3][8 * i..8 * i + 8], 16).unwrap().to_be_bytes()))
            .collect();
        let ours = decode_f32(v).unwrap();
        // gguf-py's numpy dequantizer computes in its own order of operations; allow one ulp.
        assert_eq!(py.len(), ours.len(), "{}", t.name);
        for (a, b) in py.iter().zip(&ours) {
            assert!((a - b).abs() <= a.abs().max(b.abs()) * 2e-7 + 1e-30, "{}: gguf-py {a} vs qforge {b}", t.name);
        }
    }
    assert_eq!(*lines.last().unwrap(), "file_type 14");
}

#[test]
fn safetensors_from_the_hf_package_read_bit_exactly() {
    let bytes = read("plain.safetensors");
    let s = SafetensorsFile::parse(&bytes).unwrap();
    let m = &manifest()["safetensors"]["plain.safetensors"];
    assert_eq!(s.metadata, vec![("format".into(), "pt".into()), ("qforge.note".into(), "fixture".into())]);
    for w in m["tensors"].as_array().unwrap() {
        let t = s.tensor(w["name"].as_str().unwrap()).unwrap();
        assert_eq!((t.offset, t.data.len() as u64), (w["offset"].as_u64().unwrap(), w["bytes"].as_u64().unwrap()));
    }
    let model = ModelFile::parse(&bytes, Container::Safetensors).unwrap();
    let want = f32_file("plain.safetensors.expect.f32");
    let mut at = 0;
    for name in m["expect_order"].as_array().unwrap() {
        let got = decode_f32(model.tensor(name.as_str().unwrap()).unwrap()).unwrap();
        assert_bits_eq(&got, &want[at..at + got.len()], name.as_str().unwrap());
        at += got.len();
    }
}

#[test]
fn safetensors_write_round_trip_keeps_metadata_and_bytes() {
    let bytes = read("plain.safetensors");
    let m = ModelFile::parse(&bytes, Container::Safetensors).unwrap();
    let specs: Vec<StWriteTensor> = m
        .tensors
        .iter()
        .map(|t| match t.ty {
            TensorType::Plain(p) => StWriteTensor { name: t.name.clone(), dtype: st_dtype(p), shape: t.dims.clone() },
            _ => unreachable!(),
        })
        .collect();
    let meta: Vec<(String, String)> =
        m.metadata.iter().map(|(k, v)| (k.to_string(), v.as_str().unwrap().into())).collect();
    let mut s = write_safetensors(Vec::new(), &meta, &specs).unwrap();
    for t in &m.tensors {
        s.write_tensor(&t.bytes()).unwrap();
    }
    let out = s.finish().unwrap();
    let back = SafetensorsFile::parse(&out).unwrap();
    assert_eq!(back.metadata, SafetensorsFile::parse(&bytes).unwrap().metadata);
    for t in &m.tensors {
        assert_eq!(back.tensor(&t.name).unwrap().data, &t.bytes()[..], "{}", t.name);
    }
    // f16 output is the round-to-nearest-even of each value.
    let up = m.tensor("model.up.weight").unwrap();
    let h = encode(up, TensorType::by_name("f16").unwrap(), None).unwrap();
    let x = decode_f32(up).unwrap();
    for (i, v) in x.iter().enumerate() {
        assert_eq!(&h[2 * i..2 * i + 2], &half::f16::from_f32(*v).to_le_bytes());
    }
    let _ = DType::F16;
}

#[test]
fn imatrix_gguf_and_legacy_give_llama_cpp_values() {
    let want = &manifest()["imatrix"];
    let im = imatrix::parse(&read("imatrix.gguf")).unwrap();
    assert_eq!(im.len(), 2);
    for (name, vals) in want.as_object().unwrap() {
        let w: Vec<f32> = vals.as_array().unwrap().iter().map(|v| v.as_f64().unwrap() as f32).collect();
        assert_bits_eq(&im[name], &w, name);
    }
    let legacy = imatrix::parse(&read("imatrix.dat")).unwrap();
    let name = "blk.0.ffn_down.weight";
    // The legacy file stores sums (values × 7) and ncall 7: dividing back is exact to 1 ulp.
    for (a, b) in legacy[name].iter().zip(&im[name]) {
        assert!((a - b).abs() <= b.abs() * 1.2e-7, "{a} vs {b}");
    }
}
