//! `qforge inspect` and `qforge convert` end to end, on fixtures written by gguf-py /
//! ggml-py / the HF safetensors package (tests/fixtures/gen.py).

mod common;

use common::{Tmp, assert_fails, qforge};
use qforge_io::{Container, ModelFile, decode_f32};
use std::path::PathBuf;

fn fixture(name: &str) -> String {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures").join(name).to_string_lossy().into_owned()
}

fn manifest() -> serde_json::Value {
    serde_json::from_slice(&std::fs::read(fixture("manifest.json")).unwrap()).unwrap()
}

fn f32s(path: &str) -> Vec<f32> {
    std::fs::read(path).unwrap().chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
}

#[test]
fn inspect_json_lists_every_tensor_as_gguf_py_sees_it() {
    let out = qforge(&["inspect", &fixture("model.gguf"), "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(j.as_object().unwrap().keys().collect::<Vec<_>>(), ["metadata", "tensors"]);
    assert_eq!(j["metadata"]["test.string"], "héllo wörld");
    assert_eq!(j["metadata"]["tokenizer.ggml.tokens"]["len"], 100);
    let want = manifest()["model.gguf"]["tensors"].clone();
    let got = j["tensors"].as_array().unwrap();
    assert_eq!(got.len(), want.as_array().unwrap().len());
    for (g, w) in got.iter().zip(want.as_array().unwrap()) {
        assert_eq!(g.as_object().unwrap().len(), 5);
        for k in ["name", "type", "shape", "bytes", "offset"] {
            assert_eq!(g[k], w[k], "{k} of {}", w["name"]);
        }
    }
    let text = qforge(&["inspect", &fixture("plain.safetensors")]);
    let s = String::from_utf8_lossy(&text.stdout);
    assert!(text.status.success());
    assert!(s.contains("safetensors") && s.contains("model.up.weight") && s.contains("bits per weight"), "{s}");
}

#[test]
fn inspect_refuses_malformed_files_with_one_line() {
    let t = Tmp::new("inspect-bad");
    let bytes = std::fs::read(fixture("model.gguf")).unwrap();
    for n in [0, 3, 20, 100, 1000, 3200] {
        std::fs::write(t.path("bad.gguf"), &bytes[..n]).unwrap();
        assert_fails(&qforge(&["inspect", &t.s("bad.gguf")]), 2, "bad.gguf");
    }
    let mut huge = (1u64 << 60).to_le_bytes().to_vec();
    huge.extend_from_slice(b"{}");
    std::fs::write(t.path("bad.safetensors"), &huge).unwrap();
    assert_fails(&qforge(&["inspect", &t.s("bad.safetensors"), "--json"]), 2, "safetensors");
    assert_fails(&qforge(&["inspect", &t.s("missing.gguf")]), 2, "missing.gguf");
}

#[test]
fn convert_gguf_to_safetensors_dequantizes_bit_exactly() {
    let t = Tmp::new("conv-deq");
    let out = qforge(&["convert", &fixture("model.gguf"), &t.s("m.safetensors"), "--dtype", "f32"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let bytes = std::fs::read(t.path("m.safetensors")).unwrap();
    let m = ModelFile::parse(&bytes, Container::Safetensors).unwrap();
    let want = f32s(&fixture("model.gguf.expect.f32"));
    let names: Vec<String> = manifest()["model.gguf"]["tensors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().into())
        .collect();
    let mut at = 0;
    for n in &names {
        let got = decode_f32(m.tensor(n).unwrap()).unwrap();
        for (i, (a, b)) in got.iter().zip(&want[at..]).enumerate() {
            assert_eq!(a.to_bits(), b.to_bits(), "{n}[{i}]");
        }
        at += got.len();
    }
    // GGUF metadata travels as safetensors __metadata__ strings.
    assert_eq!(m.metadata.iter().find(|(k, _)| k == "test.u32").unwrap().1.as_str(), Some("4000000000"));
}

#[test]
fn convert_quantizes_with_fallbacks_and_imatrix() {
    let t = Tmp::new("conv-q");
    let out = qforge(&["convert", &fixture("model.gguf"), &t.s("q.gguf"), "--format", "q4_k"]);
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 7, "one fallback line per tensor: {err}");
    assert!(err.contains("blk.0.ffn_down.weight: row length 96") && err.contains("using q5_0"), "{err}");
    assert!(err.contains("output.weight: row length 40") && err.contains("using f16"), "{err}");
    let j: serde_json::Value = serde_json::from_slice(&qforge(&["inspect", &t.s("q.gguf"), "--json"]).stdout).unwrap();
    assert_eq!(j["metadata"]["general.file_type"], 14);
    assert_eq!(j["metadata"]["general.quantization_version"], 2);
    assert_eq!(j["metadata"]["test.i64"], -9_000_000_000_000_000_000i64);
    let types: Vec<&str> = j["tensors"].as_array().unwrap().iter().map(|t| t["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["q4_k", "f32", "q5_0", "q5_0", "q5_0", "q5_0", "q5_0", "q5_0", "q4_k", "f16"]);
    for im in ["imatrix.gguf", "imatrix.dat"] {
        let o = qforge(&[
            "convert",
            &fixture("model.gguf"),
            &t.s("qi.gguf"),
            "--format",
            "q4_k",
            "--imatrix",
            &fixture(im),
        ]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        // What llama-quantize records of the imatrix (both formats carry 7 chunks of fixture.txt).
        let ji: serde_json::Value =
            serde_json::from_slice(&qforge(&["inspect", &t.s("qi.gguf"), "--json"]).stdout).unwrap();
        let md = &ji["metadata"];
        assert_eq!(md["quantize.imatrix.file"], fixture(im).as_str());
        assert_eq!(md["quantize.imatrix.dataset"], "fixture.txt");
        assert_eq!(md["quantize.imatrix.chunks_count"], 7);
        assert!(md["quantize.imatrix.entries_count"].as_u64().unwrap() >= 1);
        let (a, b) = (std::fs::read(t.path("q.gguf")).unwrap(), std::fs::read(t.path("qi.gguf")).unwrap());
        assert!(b.len() > a.len(), "the quantize.imatrix.* keys");
        let (ma, mb) = (ModelFile::parse(&a, Container::Gguf).unwrap(), ModelFile::parse(&b, Container::Gguf).unwrap());
        let data = |m: &ModelFile<'_>| m.tensor("blk.0.ffn_gate_exps.weight").unwrap().bytes().into_owned();
        if im == "imatrix.gguf" {
            assert!(data(&ma) != data(&mb), "the importance weights change the expert tensor's quantization");
        }
    }
    // safetensors -> GGUF and back to bf16.
    let o = qforge(&["convert", &fixture("plain.safetensors"), &t.s("p.gguf"), "--format", "q8_0"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = qforge(&["convert", &t.s("p.gguf"), &t.s("p.safetensors"), "--dtype", "bf16"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
}

#[test]
fn convert_refuses_bad_requests_with_one_line() {
    let t = Tmp::new("conv-bad");
    let m = fixture("model.gguf");
    assert_fails(&qforge(&["convert", &m, &m, "--dtype", "f16"]), 2, "refusing to overwrite");
    std::fs::copy(&m, t.path("in.gguf")).unwrap();
    let via_dot = format!("{}/./in.gguf", t.0.display());
    assert_fails(&qforge(&["convert", &t.s("in.gguf"), &via_dot]), 2, "refusing to overwrite");
    assert_fails(&qforge(&["convert", &m, &t.s("x.bin")]), 2, "extension");
    assert_fails(&qforge(&["convert", &m, &t.s("x.gguf"), "--format", "q4_k", "--group-size", "64"]), 2, "group");
    assert_fails(&qforge(&["convert", &m, &t.s("x.gguf"), "--format", "nope"]), 2, "unknown format");
    assert_fails(&qforge(&["convert", &m, &t.s("x.gguf"), "--dtype", "f8"]), 2, "dtype");
    assert_fails(&qforge(&["convert", &m, &t.s("x.safetensors"), "--format", "q4_k"]), 2, "cannot hold q4_k");
    assert_fails(&qforge(&["convert", &m, &t.s("x.gguf"), "--format", "q4_k", "--imatrix", &m]), 2, "imatrix");
    assert!(qforge(&["convert", &m, &t.s("x.gguf"), "--format", "q4_0", "--dtype", "f16"]).status.code() == Some(2));
    assert_fails(&qforge(&["convert", &m, &t.s("no/such/dir/x.gguf"), "--dtype", "f16"]), 1, "cannot create");
    let leftovers: Vec<_> = std::fs::read_dir(&t.0).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(leftovers, ["in.gguf"], "no partial or temporary output is left behind");
}

/// `qforge inspect big.gguf | head`: the reader closes the pipe early; qforge stops quietly
/// (exit 0, nothing on stderr) instead of reporting "Broken pipe".
#[test]
fn inspect_into_a_closed_pipe_ends_quietly() {
    use std::io::Read;
    let t = Tmp::new("inspect-pipe");
    let mut w = qforge_io::GgufWriter::new();
    w.set("general.architecture", qforge_io::Value::String("llama".into())).unwrap();
    let f32t = qforge_io::TensorType::by_name("f32").unwrap();
    for i in 0..4000 {
        w.add_tensor(&format!("blk.{i}.attn_norm.weight"), f32t, &[4]).unwrap();
    }
    let mut s = w.start(Vec::new()).unwrap();
    for _ in 0..4000 {
        s.write_tensor(&[0u8; 16]).unwrap();
    }
    std::fs::write(t.path("many.gguf"), s.finish().unwrap()).unwrap();
    let mut child = std::process::Command::new(common::qforge_bin())
        .args(["inspect", &t.s("many.gguf")])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut head = [0u8; 64];
    child.stdout.take().unwrap().read_exact(&mut head).unwrap(); // then dropped: the pipe closes
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && err.is_empty(), "exit {:?}, stderr {err:?}", out.status);
}

/// A Hugging Face directory (two shards and an index) converts like a single file, and
/// `inspect` reads it as one model.
#[test]
fn a_sharded_checkpoint_directory_converts_like_one_file() {
    let t = Tmp::new("hf-dir");
    let dir = t.path("ckpt");
    std::fs::create_dir_all(&dir).unwrap();
    let f32t = qforge_io::StDtype::F32;
    let mut map = serde_json::Map::new();
    for (i, name) in ["model.layers.0.mlp.up_proj.weight", "lm_head.weight"].iter().enumerate() {
        let file = format!("model-0000{}-of-00002.safetensors", i + 1);
        let spec = [qforge_io::StWriteTensor { name: name.to_string(), dtype: f32t, shape: vec![4, 64] }];
        let mut s = qforge_io::write_safetensors(Vec::new(), &[], &spec).unwrap();
        let vals: Vec<u8> = (0..256).flat_map(|k| ((k as f32) * 0.01 - i as f32).to_le_bytes()).collect();
        s.write_tensor(&vals).unwrap();
        std::fs::write(dir.join(&file), s.finish().unwrap()).unwrap();
        map.insert(name.to_string(), serde_json::Value::String(file));
    }
    let index = serde_json::json!({ "weight_map": map });
    std::fs::write(dir.join("model.safetensors.index.json"), index.to_string()).unwrap();
    let d = dir.to_string_lossy().into_owned();
    let out = qforge(&["inspect", &d]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stdout).contains("safetensors in 2 files"));
    let out = qforge(&["convert", &d, &t.s("m.gguf"), "--format", "q8_0"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let j: serde_json::Value = serde_json::from_slice(&qforge(&["inspect", &t.s("m.gguf"), "--json"]).stdout).unwrap();
    let names: Vec<&str> = j["tensors"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["model.layers.0.mlp.up_proj.weight", "lm_head.weight"]);
    assert!(j["tensors"].as_array().unwrap().iter().all(|t| t["type"] == "q8_0"));
    std::fs::remove_file(dir.join("model-00002-of-00002.safetensors")).unwrap();
    assert_fails(&qforge(&["inspect", &d]), 2, "model-00002-of-00002.safetensors");
}

/// `qforge quality`: bits per weight per tensor and, against the original, the RMSE and
/// relative error computed here independently from both files' values.
#[test]
fn quality_reports_bits_per_weight_and_error_against_the_original() {
    let t = Tmp::new("quality");
    let orig = fixture("plain.safetensors");
    assert!(qforge(&["convert", &orig, &t.s("q.gguf"), "--format", "q4_0"]).status.success());
    let out = qforge(&["quality", &t.s("q.gguf"), "--against", &orig, "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let (qb, ob) = (std::fs::read(t.path("q.gguf")).unwrap(), std::fs::read(&orig).unwrap());
    let q = ModelFile::parse(&qb, Container::Gguf).unwrap();
    let o = ModelFile::parse(&ob, Container::Safetensors).unwrap();
    let (mut err2, mut ref2, mut n) = (0f64, 0f64, 0usize);
    for row in j["tensors"].as_array().unwrap() {
        let name = row["name"].as_str().unwrap();
        let (a, b) = (decode_f32(q.tensor(name).unwrap()).unwrap(), decode_f32(o.tensor(name).unwrap()).unwrap());
        let e2: f64 = a.iter().zip(&b).map(|(x, y)| (f64::from(*x) - f64::from(*y)).powi(2)).sum();
        let r2: f64 = b.iter().map(|y| f64::from(*y).powi(2)).sum();
        let rmse = (e2 / a.len() as f64).sqrt();
        assert!((row["rmse"].as_f64().unwrap() - rmse).abs() <= 1e-12 * rmse.max(1.0), "{name}");
        let bpw = row["bytes"].as_f64().unwrap() * 8.0 / row["elements"].as_f64().unwrap();
        assert_eq!(row["bits_per_weight"].as_f64().unwrap(), bpw);
        if row["type"] == "q4_0" {
            assert_eq!(bpw, 4.5);
            assert!(rmse > 0.0);
        }
        (err2, ref2, n) = (err2 + e2, ref2 + r2, n + a.len());
    }
    let total = &j["total"];
    assert!((total["rmse"].as_f64().unwrap() - (err2 / n as f64).sqrt()).abs() < 1e-12);
    assert!((total["relative_error"].as_f64().unwrap() - (err2 / ref2).sqrt()).abs() < 1e-12);
    // Without an original: sizes only; an imatrix needs an original.
    let out = qforge(&["quality", &t.s("q.gguf"), "--json"]);
    let j: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(j["total"]["rmse"].is_null() && j["total"]["bits_per_weight"].as_f64().unwrap() > 4.5);
    assert_fails(&qforge(&["quality", &t.s("q.gguf"), "--imatrix", &fixture("imatrix.dat")]), 2, "--against");
}

/// `convert --verbose`: one line per tensor on stderr, in the order written, naming both types.
#[test]
fn convert_verbose_prints_one_line_per_tensor() {
    let t = Tmp::new("verbose");
    let out = qforge(&["convert", &fixture("model.gguf"), &t.s("v.gguf"), "--dtype", "f16", "--verbose"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with('[')).collect();
    assert_eq!(lines.len(), 10, "{err}");
    assert!(lines[0].starts_with("[ 1/10] token_embd.weight") && lines[0].contains("q4_k -> f16"), "{}", lines[0]);
    assert!(lines[9].starts_with("[10/10] "), "{}", lines[9]);
}
