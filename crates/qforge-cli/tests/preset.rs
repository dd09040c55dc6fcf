//! `qforge convert --preset` end to end: the importance matrix reaches exactly the formats whose
//! ggml quantizer uses one (llama-quantize's bytes), and a Hugging Face checkpoint is refused
//! with a typed error that says what to do.

mod common;

use common::{Tmp, assert_fails, qforge};
use qforge_io::{Container, GgufWriter, ModelFile, TensorType, Value, write_safetensors};

const COLS: usize = 256;
const ROWS: usize = 64;

/// A one-layer llama GGUF (f32 weights with real llama.cpp names) and a legacy imatrix
/// (.dat) with random positive weights for its matrices.
fn model(t: &Tmp) -> (String, String) {
    let mut w = GgufWriter::new();
    w.set("general.architecture", Value::String("llama".into())).unwrap();
    w.set("llama.block_count", Value::U32(1)).unwrap();
    w.set("llama.attention.head_count", Value::U32(4)).unwrap();
    w.set("llama.attention.head_count_kv", Value::U32(4)).unwrap();
    let names = ["token_embd.weight", "blk.0.attn_q.weight", "blk.0.ffn_up.weight", "output.weight"];
    let f32t = TensorType::by_name("f32").unwrap();
    for n in names {
        w.add_tensor(n, f32t, &[ROWS, COLS]).unwrap();
    }
    let mut s = w.start(Vec::new()).unwrap();
    let mut rng = qforge_core::rand::Rng::new(11);
    for _ in names {
        let v: Vec<u8> = (0..ROWS * COLS).flat_map(|_| (rng.unit_f32() * 2.0 - 1.0).to_le_bytes()).collect();
        s.write_tensor(&v).unwrap();
    }
    std::fs::write(t.path("m.gguf"), s.finish().unwrap()).unwrap();
    // llama.cpp's legacy imatrix: entry count, then per entry name, ncall, nval, values.
    let mut im = (names.len() as i32).to_le_bytes().to_vec();
    for n in names {
        im.extend((n.len() as i32).to_le_bytes());
        im.extend(n.as_bytes());
        im.extend(1i32.to_le_bytes());
        im.extend((COLS as i32).to_le_bytes());
        im.extend((0..COLS).flat_map(|_| (rng.unit_f32() * 4.0 + 0.01).to_le_bytes()));
    }
    std::fs::write(t.path("m.imatrix"), im).unwrap();
    (t.s("m.gguf"), t.s("m.imatrix"))
}

/// `qforge convert` with `args`, then the named tensor's type and stored bytes.
fn convert(args: &[&str], out: &str, tensor: &str) -> (String, Vec<u8>) {
    let r = qforge(&[&["convert"], args, &[out]].concat());
    assert!(r.status.success(), "{args:?}: {}", String::from_utf8_lossy(&r.stderr));
    let bytes = std::fs::read(out).unwrap();
    let m = ModelFile::parse(&bytes, Container::Gguf).unwrap();
    let t = m.tensor(tensor).unwrap();
    (t.ty.name().to_string(), t.bytes().into_owned())
}

/// --preset emulates llama-quantize: tq1_0 / tq2_0 / q2_0 (ggml ignores the imatrix) come out
/// the same with and without one; q4_0 (ggml uses it) differs. --format keeps using it for
/// every format qforge's quantizer weights.
#[test]
fn preset_gives_the_imatrix_only_to_formats_whose_ggml_quantizer_uses_it() {
    let t = Tmp::new("preset-imatrix");
    let (m, im) = model(&t);
    let q = "blk.0.attn_q.weight";
    for (preset, ty, uses) in
        [("TQ1_0", "tq1_0", false), ("TQ2_0", "tq2_0", false), ("Q2_0", "q2_0", false), ("Q4_0", "q4_0", true)]
    {
        let plain = convert(&[&m, "--preset", preset], &t.s("a.gguf"), q);
        let with = convert(&[&m, "--preset", preset, "--imatrix", &im], &t.s("b.gguf"), q);
        assert_eq!((plain.0.as_str(), with.0.as_str()), (ty, ty), "{preset}");
        assert_eq!(plain.1 != with.1, uses, "{preset}: imatrix changed the bytes: {}", plain.1 != with.1);
    }
    let plain = convert(&[&m, "--format", "tq1_0"], &t.s("a.gguf"), q);
    let with = convert(&[&m, "--format", "tq1_0", "--imatrix", &im], &t.s("b.gguf"), q);
    assert_ne!(plain.1, with.1, "--format tq1_0 uses the importance weights");
}

/// A Hugging Face checkpoint has neither general.architecture nor GGUF tensor names, which
/// llama.cpp's rules key on: exit 2, one line naming the way out.
#[test]
fn preset_on_a_hugging_face_checkpoint_is_a_typed_error() {
    let t = Tmp::new("preset-hf");
    let spec = [qforge_io::StWriteTensor {
        name: "model.layers.0.self_attn.q_proj.weight".into(),
        dtype: qforge_io::StDtype::F32,
        shape: vec![4, 256],
    }];
    let mut s = write_safetensors(Vec::new(), &[], &spec).unwrap();
    s.write_tensor(&vec![0u8; 4 * 256 * 4]).unwrap();
    std::fs::write(t.path("model.safetensors"), s.finish().unwrap()).unwrap();
    let out = qforge(&["convert", &t.s("model.safetensors"), &t.s("o.gguf"), "--preset", "Q4_K_M"]);
    assert_fails(&out, 2, "convert_hf_to_gguf");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--format"));
    assert!(!t.path("o.gguf").exists());
}
