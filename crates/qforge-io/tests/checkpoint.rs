//! Hugging Face checkpoints as one model: a directory, a sharded index, and what is wrong
//! with them (missing shards, tensors not where the index says, duplicates, paths leaving
//! the folder) as typed errors.

use qforge_io::{Container, ModelSource, StDtype, StWriteTensor, write_safetensors};
use std::path::{Path, PathBuf};

fn tmp(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("qforge-io-ckpt-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A safetensors file of `(name, dtype, shape, bytes)` tensors.
fn shard(path: &Path, tensors: &[(&str, StDtype, Vec<usize>, Vec<u8>)]) {
    let specs: Vec<StWriteTensor> =
        tensors.iter().map(|(n, d, s, _)| StWriteTensor { name: n.to_string(), dtype: *d, shape: s.clone() }).collect();
    let mut s = write_safetensors(Vec::new(), &[("format".into(), "pt".into())], &specs).unwrap();
    for (_, _, _, b) in tensors {
        s.write_tensor(b).unwrap();
    }
    std::fs::write(path, s.finish().unwrap()).unwrap();
}

fn f32s(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn index(dir: &Path, map: &[(&str, &str)]) {
    let m: serde_json::Map<String, serde_json::Value> =
        map.iter().map(|(t, f)| (t.to_string(), serde_json::Value::String(f.to_string()))).collect();
    let j = serde_json::json!({"metadata": {"total_size": 0}, "weight_map": m});
    std::fs::write(dir.join("model.safetensors.index.json"), j.to_string()).unwrap();
}

/// Two shards; an fp8 weight in the first, its scale_inv companion in the second.
fn checkpoint(tag: &str) -> PathBuf {
    let d = tmp(tag);
    shard(
        &d.join("model-00001-of-00002.safetensors"),
        &[
            ("model.embed_tokens.weight", StDtype::F32, vec![2, 3], f32s(&[1., 2., 3., 4., 5., 6.])),
            ("model.layers.0.mlp.down_proj.weight", StDtype::F8_E4M3, vec![2, 4], vec![0x38; 8]),
        ],
    );
    shard(
        &d.join("model-00002-of-00002.safetensors"),
        &[
            ("model.layers.0.mlp.down_proj.weight_scale_inv", StDtype::F32, vec![1, 1], f32s(&[0.5])),
            ("lm_head.weight", StDtype::F32, vec![3, 2], f32s(&[6., 5., 4., 3., 2., 1.])),
        ],
    );
    index(
        &d,
        &[
            ("model.embed_tokens.weight", "model-00001-of-00002.safetensors"),
            ("model.layers.0.mlp.down_proj.weight", "model-00001-of-00002.safetensors"),
            ("model.layers.0.mlp.down_proj.weight_scale_inv", "model-00002-of-00002.safetensors"),
            ("lm_head.weight", "model-00002-of-00002.safetensors"),
        ],
    );
    std::fs::write(d.join("config.json"), r#"{"model_type": "llama", "num_hidden_layers": 1}"#).unwrap();
    d
}

#[test]
fn a_directory_and_its_index_read_as_one_model() {
    let d = checkpoint("ok");
    for path in [d.clone(), d.join("model.safetensors.index.json")] {
        let src = ModelSource::open(&path).unwrap();
        assert_eq!(src.files.len(), 2);
        assert_eq!(src.container, Container::Safetensors);
        assert_eq!(src.config.as_ref().unwrap()["num_hidden_layers"], 1);
        let m = src.model().unwrap();
        let names: Vec<&str> = m.tensors.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["model.embed_tokens.weight", "model.layers.0.mlp.down_proj.weight", "lm_head.weight"]);
        let fp8 = m.tensor("model.layers.0.mlp.down_proj.weight").unwrap();
        assert_eq!(fp8.ty.name(), "fp8_e4m3");
        assert_eq!(fp8.companion.as_deref(), Some("model.layers.0.mlp.down_proj.weight_scale_inv"));
        // 0x38 is 1.0 in e4m3; the companion from the other shard scales it by 0.5.
        assert_eq!(qforge_io::decode_f32(fp8).unwrap(), vec![0.5; 8]);
        assert_eq!(qforge_io::decode_f32(m.tensor("lm_head.weight").unwrap()).unwrap(), [6., 5., 4., 3., 2., 1.]);
        assert_eq!(
            src.total_bytes(),
            d.read_dir()
                .unwrap()
                .flatten()
                .filter(|e| e.path().extension().is_some_and(|x| x == "safetensors"))
                .map(|e| e.metadata().unwrap().len())
                .sum::<u64>()
        );
    }
    // Without an index a directory is its safetensors files in name order.
    std::fs::remove_file(d.join("model.safetensors.index.json")).unwrap();
    assert_eq!(ModelSource::open(&d).unwrap().model().unwrap().tensors.len(), 3);
}

#[test]
fn broken_checkpoints_are_typed_errors() {
    let err = |p: &Path| match ModelSource::open(p).and_then(|s| s.model().map(|m| m.tensors.len())) {
        Ok(n) => panic!("{}: read {n} tensors from a broken checkpoint", p.display()),
        Err(e) => e.to_string(),
    };
    let d = checkpoint("missing-shard");
    std::fs::remove_file(d.join("model-00002-of-00002.safetensors")).unwrap();
    assert!(err(&d).contains("model-00002-of-00002.safetensors"), "{}", err(&d));

    let d = checkpoint("wrong-shard");
    index(&d, &[("lm_head.weight", "model-00001-of-00002.safetensors")]);
    assert!(err(&d).contains("no such tensor"), "{}", err(&d));

    let d = checkpoint("escape");
    index(&d, &[("lm_head.weight", "../model-00002-of-00002.safetensors")]);
    assert!(err(&d).contains("not a file beside the index"), "{}", err(&d));

    let d = checkpoint("not-json");
    std::fs::write(d.join("model.safetensors.index.json"), "{").unwrap();
    assert!(err(&d).contains("not JSON"), "{}", err(&d));
    std::fs::write(d.join("model.safetensors.index.json"), "{}").unwrap();
    assert!(err(&d).contains("weight_map"), "{}", err(&d));

    let d = checkpoint("duplicate");
    shard(&d.join("model-00002-of-00002.safetensors"), &[("lm_head.weight", StDtype::F32, vec![1], f32s(&[1.]))]);
    shard(&d.join("model-00003-of-00002.safetensors"), &[("lm_head.weight", StDtype::F32, vec![1], f32s(&[1.]))]);
    std::fs::remove_file(d.join("model.safetensors.index.json")).unwrap();
    assert!(err(&d).contains("duplicate tensor"), "{}", err(&d));

    let d = tmp("empty");
    assert!(err(&d).contains("no .safetensors or .gguf files"), "{}", err(&d));
}

#[test]
fn a_shard_that_does_not_parse_keeps_its_typed_error() {
    let d = checkpoint("truncated-shard");
    let f = d.join("model-00002-of-00002.safetensors");
    let bytes = std::fs::read(&f).unwrap();
    std::fs::write(&f, &bytes[..bytes.len() - 3]).unwrap();
    let e = match ModelSource::open(&d).and_then(|s| s.model().map(|m| m.tensors.len())) {
        Ok(n) => panic!("read {n} tensors from a truncated shard"),
        Err(e) => e,
    };
    match &e {
        qforge_io::IoError::InFile { path, .. } => assert_eq!(path, &f),
        e => panic!("expected the shard's path around the parser's error, got {e:?}"),
    }
    assert!(matches!(e.root(), qforge_io::IoError::Safetensors { .. }), "{:?}", e.root());
    assert!(e.to_string().contains("model-00002-of-00002.safetensors"), "{e}");
}
