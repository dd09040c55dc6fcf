//! The GGUF reader against files written by llama.cpp's own writer (gguf-py) with tensors
//! quantized by ggml (ggml-py): layout, metadata and values, bit for bit.

mod common;

use common::{assert_bits_eq, f32_file, fixture, manifest, read};
use qforge_io::{Array, GgufFile, ModelFile, Value, ValueType, decode_f32};

fn check_layout(file: &str, manifest_key: &str) {
    let bytes = read(file);
    let g = GgufFile::parse(&bytes).unwrap();
    let m = &manifest()[manifest_key];
    assert_eq!(g.alignment as u64, m["alignment"].as_u64().unwrap(), "{file} alignment");
    let want = m["tensors"].as_array().unwrap();
    assert_eq!(g.tensors.len(), want.len());
    for (t, w) in g.tensors.iter().zip(want) {
        assert_eq!(t.name, w["name"].as_str().unwrap());
        assert_eq!(t.ty.name(), w["type"].as_str().unwrap(), "{}", t.name);
        let shape: Vec<usize> = w["shape"].as_array().unwrap().iter().map(|d| d.as_u64().unwrap() as usize).collect();
        assert_eq!(t.dims(), shape, "{}", t.name);
        assert_eq!(t.size as u64, w["bytes"].as_u64().unwrap(), "{}", t.name);
        assert_eq!(t.offset, w["offset"].as_u64().unwrap(), "{}", t.name);
        // Zero-copy: the view is the file's own bytes.
        let view = g.tensor_bytes(t);
        assert_eq!(view.as_ptr(), bytes[t.offset as usize..].as_ptr());
    }
}

#[test]
fn layout_matches_gguf_py() {
    check_layout("model.gguf", "model.gguf");
    check_layout("align64.gguf", "align64.gguf");
    assert_eq!(GgufFile::parse(&read("model.gguf")).unwrap().version, 3);
}

#[test]
fn version_2_reads_like_version_3() {
    let (v2, v3) = (read("model_v2.gguf"), read("model.gguf"));
    let (a, b) = (GgufFile::parse(&v2).unwrap(), GgufFile::parse(&v3).unwrap());
    assert_eq!(a.version, 2);
    assert_eq!(a.metadata, b.metadata);
    assert_eq!(a.tensors.len(), b.tensors.len());
    for (x, y) in a.tensors.iter().zip(&b.tensors) {
        assert_eq!((&x.name, &x.ne, x.offset, x.size), (&y.name, &y.ne, y.offset, y.size));
    }
}

#[test]
fn every_metadata_type_reads_exactly() {
    let bytes = read("model.gguf");
    let g = GgufFile::parse(&bytes).unwrap();
    let get = |k: &str| g.get(k).unwrap_or_else(|| panic!("missing {k}")).clone();
    assert_eq!(get("general.architecture"), Value::String("llama".into()));
    assert_eq!(get("general.name"), Value::String("qforge fixture".into()));
    assert_eq!(get("test.u8"), Value::U8(200));
    assert_eq!(get("test.i8"), Value::I8(-100));
    assert_eq!(get("test.u16"), Value::U16(60000));
    assert_eq!(get("test.i16"), Value::I16(-30000));
    assert_eq!(get("test.u32"), Value::U32(4_000_000_000));
    assert_eq!(get("test.i32"), Value::I32(-2_000_000_000));
    assert_eq!(get("test.f32"), Value::F32(0.15625));
    assert_eq!(get("test.bool"), Value::Bool(1));
    assert_eq!(get("test.string"), Value::String("héllo wörld".into()));
    assert_eq!(get("test.u64"), Value::U64(18_000_000_000_000_000_000));
    assert_eq!(get("test.i64"), Value::I64(-9_000_000_000_000_000_000));
    assert_eq!(get("test.f64"), Value::F64(-2.5e-300));
    let arr = |k: &str| match get(k) {
        Value::Array(a) => a,
        v => panic!("{k} is {v:?}"),
    };
    let a = arr("test.array_i32");
    assert_eq!((a.element_type(), a.len()), (ValueType::I32, 3));
    assert_eq!(
        [a.get(0), a.get(1), a.get(2), a.get(3)],
        [Some(Value::I32(1)), Some(Value::I32(-2)), Some(Value::I32(3)), None]
    );
    let a = arr("test.array_f32");
    assert_eq!([a.get(0), a.get(1)], [Some(Value::F32(0.5)), Some(Value::F32(-1.25))]);
    let a = arr("test.array_bool");
    assert_eq!(a.element_type(), ValueType::Bool);
    assert_eq!([a.get(0), a.get(1)], [Some(Value::Bool(1)), Some(Value::Bool(0))]);
    assert_eq!(arr("test.array_str"), Array::Strings(vec!["a".into(), "bc".into(), "".into()]));
    match arr("test.nested") {
        Array::Arrays(v) => {
            assert_eq!(v.len(), 2);
            assert_eq!((v[0].len(), v[0].get(1)), (2, Some(Value::I32(2))));
            assert_eq!((v[1].len(), v[1].get(0)), (1, Some(Value::I32(3))));
        }
        a => panic!("nested: {a:?}"),
    }
    let tokens = arr("tokenizer.ggml.tokens");
    assert_eq!((tokens.len(), tokens.get(99)), (100, Some(Value::String("tok99".into()))));
    // The inspect JSON summarises long arrays and keeps short ones whole.
    let j = tokens.get(0).map(|_| Value::Array(tokens.clone()).to_json(64)).unwrap();
    assert_eq!(j["len"], 100);
    assert_eq!(j["element_type"], "string");
    assert_eq!(j["head"][7], "tok7");
    assert_eq!(get("test.array_i32").to_json(64), serde_json::json!([1, -2, 3]));
}

#[test]
fn values_are_ggml_bit_exact() {
    for file in ["model.gguf", "align64.gguf"] {
        let bytes = read(file);
        let m = ModelFile::parse(&bytes, qforge_io::Container::Gguf).unwrap();
        let want = f32_file(&format!("{file}.expect.f32"));
        let mut at = 0;
        for t in &m.tensors {
            let got = decode_f32(t).unwrap();
            assert_bits_eq(&got, &want[at..at + got.len()], &format!("{file}:{}", t.name));
            at += got.len();
        }
        assert_eq!(at, want.len());
    }
}

#[test]
fn quantized_tensors_borrow_the_map() {
    let map = qforge_io::MappedFile::open(&fixture("model.gguf")).unwrap();
    let g = GgufFile::parse(map.bytes()).unwrap();
    let t = g.tensor("token_embd.weight").unwrap();
    let q = g.quant_tensor(t).unwrap().unwrap();
    assert_eq!(q.format().desc().name, "q4_k");
    assert_eq!(q.shape().dims(), &[4, 256]);
    assert_eq!(q.data().as_ptr(), map.bytes()[t.offset as usize..].as_ptr());
    assert!(g.quant_tensor(g.tensor("output.weight").unwrap()).unwrap().is_none(), "f32 is a plain dtype");
}
