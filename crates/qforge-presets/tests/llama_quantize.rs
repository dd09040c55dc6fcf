//! qforge-presets against llama-quantize itself: `tests/presets/expected.json` holds, for small
//! models the project makes (`tests/presets/gen.py`), the type llama-quantize (built from
//! llama.cpp's source) gave every tensor under every preset, with and without an importance
//! matrix and with its per-tensor options, or the error it stopped with. The plan must give
//! the same type for every tensor, the same `general.file_type` and the same tensor order.

use qforge_presets::{Ftype, ModelInfo, Options, TensorInfo};
use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Deserialize)]
struct Expected {
    llama_cpp: String,
    models: Vec<Model>,
}

#[derive(Deserialize)]
struct Hparams {
    n_layer: u32,
    n_head: u32,
    n_head_kv: u32,
    n_expert: u32,
}

#[derive(Deserialize)]
struct Model {
    name: String,
    arch: String,
    hparams: Hparams,
    tensors: Vec<(String, Vec<usize>, String)>,
    llama_order: Vec<usize>,
    cases: BTreeMap<String, Case>,
}

#[derive(Deserialize)]
struct Case {
    types: Option<String>,
    file_type: Option<u32>,
    error: Option<String>,
}

fn expected() -> Expected {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/presets/expected.json");
    let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    serde_json::from_str(&text).expect("expected.json parses")
}

/// GGML block sizes of every type the presets use.
fn block_size(ty: &str) -> Option<usize> {
    Some(match ty {
        "f32" | "f16" | "bf16" => 1,
        "q4_0" | "q4_1" | "q5_0" | "q5_1" | "q8_0" | "iq4_nl" | "mxfp4" => 32,
        "q2_0" => 64,
        "q1_0" => 128,
        "q2_k" | "q3_k" | "q4_k" | "q5_k" | "q6_k" | "iq2_xxs" | "iq2_xs" | "iq2_s" | "iq3_xxs" | "iq3_s" | "iq1_s"
        | "iq1_m" | "iq4_xs" | "tq1_0" | "tq2_0" => 256,
        _ => return None,
    })
}

/// A case label (`Q4_K_M +imatrix`, `Q4_K_M --pure`, `Q4_K_M --tensor-type attn_v=q8_0 …`)
/// as a preset and options.
fn parse_case(label: &str) -> (Ftype, Options) {
    let mut words = label.split_whitespace();
    let preset = qforge_presets::preset(words.next().unwrap()).unwrap();
    let mut o = Options::default();
    while let Some(w) = words.next() {
        match w {
            "+imatrix" => o.has_imatrix = true,
            "--pure" => o.pure = true,
            "--leave-output-tensor" => o.leave_output_tensor = true,
            "--output-tensor-type" => o.output_tensor_type = words.next().map(str::to_string),
            "--token-embedding-type" => o.token_embedding_type = words.next().map(str::to_string),
            "--tensor-type" => o.push_tensor_type(words.next().unwrap()).unwrap(),
            other => panic!("unknown option {other} in case {label:?}"),
        }
    }
    (preset, o)
}

#[test]
fn every_preset_gives_llama_quantizes_types() {
    let e = expected();
    assert!(!e.llama_cpp.is_empty(), "expected.json names the llama.cpp it came from");
    let (mut same, mut refused, mut no_fallback) = (0, 0, 0);
    for m in &e.models {
        let info = ModelInfo {
            arch: m.arch.clone(),
            n_layer: m.hparams.n_layer,
            n_head: m.hparams.n_head,
            n_head_kv: m.hparams.n_head_kv,
            n_expert: m.hparams.n_expert,
        };
        let tensors: Vec<TensorInfo<'_>> =
            m.tensors.iter().map(|(n, d, t)| TensorInfo { name: n, dims: d, ty: t }).collect();
        let names: Vec<&str> = tensors.iter().map(|t| t.name).collect();
        assert_eq!(qforge_presets::llama_order(&names), m.llama_order, "{}: tensor order", m.name);
        for (label, case) in &m.cases {
            let (preset, opts) = parse_case(label);
            let what = format!("{} {label}", m.name);
            let got = qforge_presets::plan(preset, &info, &opts, &tensors, &block_size);
            match (&case.types, &case.error) {
                (Some(want), _) => {
                    let choices =
                        got.unwrap_or_else(|e| panic!("{what}: llama-quantize succeeded, the plan failed: {e}"));
                    let got: Vec<&str> = choices.iter().map(|c| c.ty.as_str()).collect();
                    let want: Vec<&str> = want.split(' ').collect();
                    for ((name, g), w) in names.iter().zip(&got).zip(&want) {
                        assert_eq!(g, w, "{what}: tensor {name}");
                    }
                    assert_eq!(got.len(), want.len(), "{what}");
                    assert_eq!(case.file_type, Some(preset.id()), "{what}: general.file_type");
                    // llama-quantize only ran because nothing it quantized needed an imatrix.
                    let needs = choices.iter().zip(&tensors).any(|(c, t)| c.requires_imatrix && c.ty != t.ty);
                    assert!(!needs || opts.has_imatrix, "{what}: the plan wants an imatrix llama-quantize did not");
                    same += 1;
                }
                (None, Some(err)) if !err.contains("imatrix") && !err.contains("importance") => {
                    // The other refusal: a row that is not whole blocks of a type llama.cpp
                    // has no fallback for (q1_0's 128 on a 320-wide model).
                    let e = got.expect_err(&what);
                    assert!(
                        matches!(&e, qforge_presets::PresetError::Tensor { why, .. } if why.contains("no fallback")),
                        "{what}: llama-quantize failed ({err}), the plan gives {e}"
                    );
                    no_fallback += 1;
                }
                (None, Some(err)) => {
                    // The one refusal the presets produce: a type that needs an importance matrix.
                    assert!(err.contains("imatrix") || err.contains("importance"), "{what}: unexpected error {err}");
                    let choices = got.unwrap_or_else(|e| panic!("{what}: {e}"));
                    let needs = choices.iter().zip(&tensors).any(|(c, t)| c.requires_imatrix && c.ty != t.ty);
                    assert!(needs && !opts.has_imatrix, "{what}: llama-quantize wanted an imatrix, the plan does not");
                    refused += 1;
                }
                (None, None) => panic!("{what}: neither types nor error"),
            }
        }
    }
    eprintln!(
        "{same} cases with llama-quantize's types, {refused} refusals for want of an imatrix, {no_fallback} for want of a fallback"
    );
    assert!(no_fallback > 0, "the Q1_0 cases of the 320-wide model fail in llama-quantize");
    assert!(same > 300, "only {same} cases compared");
}

#[test]
fn unknown_presets_and_bad_overrides_are_typed_errors() {
    assert!(matches!(qforge_presets::preset("Q4_K_X"), Err(qforge_presets::PresetError::UnknownPreset(_))));
    assert_eq!(qforge_presets::preset("q4_k").unwrap(), Ftype::Q4KM, "aliases, any case");
    let mut o = Options::default();
    assert!(o.push_tensor_type("attn_v").is_err());
    assert!(o.push_tensor_type("attn_v=").is_err());
    assert!(o.push_tensor_type("([=q8_0").is_err());
    assert!(o.push_tensor_type("attn_v=Q8_0").is_ok() && o.tensor_types[0].1 == "q8_0");
}

#[test]
fn fallbacks_follow_llama_cpp() {
    let f = |want: &str, cols: usize| qforge_presets::fallback(want, cols, &block_size);
    assert_eq!(f("q4_k", 512), Ok(None));
    assert_eq!(f("q4_k", 96), Ok(Some("q5_0".into())));
    assert_eq!(f("q3_k", 96), Ok(Some("q4_0".into())));
    assert_eq!(f("iq2_xs", 320), Ok(Some("iq4_nl".into())));
    assert_eq!(f("q6_k", 40), Ok(Some("f16".into())), "q8_0 does not fit 40 either");
    assert_eq!(f("q8_0", 40), Ok(Some("f16".into())));
    assert!(f("q1_0", 320).is_err(), "llama.cpp has no fallback for q1_0");
    assert_eq!(f("q2_0", 320), Ok(None));
    assert_eq!(f("q2_0", 96), Ok(Some("q4_0".into())));
    assert!(f("q3_0", 40).is_err(), "a type without a block size");
}
