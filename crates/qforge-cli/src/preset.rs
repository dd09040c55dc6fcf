//! `qforge convert --preset NAME` and llama-quantize's per-tensor options: each tensor's type
//! from qforge-presets (llama.cpp's rules), checked against what qforge and the output file
//! can hold, in the order llama-quantize writes tensors.

use crate::exit::{CliResult, bad_input};
use qforge_io::{ModelFile, TensorType, Value};
use qforge_presets::{Ftype, ModelInfo, Options};

/// llama-quantize's per-tensor options, as given on the command line.
#[derive(Default)]
pub struct TensorOptions<'a> {
    pub output_tensor_type: Option<&'a str>,
    pub token_embedding_type: Option<&'a str>,
    pub tensor_types: &'a [String],
    pub pure: bool,
    pub leave_output_tensor: bool,
}

impl TensorOptions<'_> {
    /// Whether any per-tensor option was given.
    pub fn any(&self) -> bool {
        self.output_tensor_type.is_some()
            || self.token_embedding_type.is_some()
            || !self.tensor_types.is_empty()
            || self.pure
            || self.leave_output_tensor
    }
}

/// The plan of a preset conversion: each tensor's type (file order), the order to write
/// them in, and `general.file_type`.
pub struct PresetPlan {
    pub types: Vec<TensorType>,
    pub order: Vec<usize>,
    pub file_type: u32,
}

/// A type name the user gave (`Q8_0`, `q8_0`, `f16`), checked against what qforge has.
fn type_name(flag: &str, name: &str) -> CliResult<String> {
    let lower = name.trim().to_ascii_lowercase();
    TensorType::by_name(&lower).map_err(|e| bad_input(format!("{flag} {name}: {e}")))?;
    Ok(lower)
}

fn block_size(name: &str) -> Option<usize> {
    TensorType::by_name(name).ok().map(|t| t.block_size())
}

/// The hyper-parameters the rules read, from GGUF metadata (`general.architecture` and its
/// `<arch>.*` keys; per-layer arrays give layer 0's value).
pub fn model_info(model: &ModelFile<'_>) -> CliResult<ModelInfo> {
    let get = |k: &str| model.metadata.iter().find(|(key, _)| key == k).map(|(_, v)| v);
    let arch = get("general.architecture")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            bad_input(
                "--preset follows llama.cpp's rules, which read general.architecture and GGUF tensor names \
                 (blk.N.attn_v.weight), and this model has neither (a Hugging Face checkpoint?): make a GGUF \
                 with llama.cpp's convert_hf_to_gguf.py first, or quantize it as it is with --format F",
            )
        })?
        .to_string();
    let num = |key: &str| -> Option<u32> {
        let v = get(&format!("{arch}.{key}"))?;
        let n = match v {
            Value::Array(a) => a.get(0).and_then(|x| x.as_u64()),
            v => v.as_u64(),
        }?;
        u32::try_from(n).ok()
    };
    let n_layer =
        num("block_count").ok_or_else(|| bad_input(format!("--preset: the model has no {arch}.block_count")))?;
    let n_head = num("attention.head_count").unwrap_or(0);
    Ok(ModelInfo {
        n_layer,
        n_head,
        n_head_kv: num("attention.head_count_kv").unwrap_or(n_head),
        n_expert: num("expert_count").unwrap_or(0),
        arch,
    })
}

/// The user's options for the rules.
fn options(o: &TensorOptions<'_>, has_imatrix: bool) -> CliResult<Options> {
    let mut opts = Options {
        output_tensor_type: o.output_tensor_type.map(|t| type_name("--output-tensor-type", t)).transpose()?,
        token_embedding_type: o.token_embedding_type.map(|t| type_name("--token-embedding-type", t)).transpose()?,
        pure: o.pure,
        leave_output_tensor: o.leave_output_tensor,
        has_imatrix,
        ..Options::default()
    };
    for spec in o.tensor_types {
        opts.push_tensor_type(spec).map_err(|e| bad_input(format!("--tensor-type {e}")))?;
        if let Some((_, ty)) = opts.tensor_types.last() {
            type_name("--tensor-type", ty)?;
        }
    }
    Ok(opts)
}

/// Each tensor's type under `preset`, with llama-quantize's refusals: a type qforge lacks, a
/// type that needs an importance matrix when none is given, and requantizing a quantized
/// tensor without `--allow-requantize`.
pub fn plan(
    model: &ModelFile<'_>,
    preset: Ftype,
    o: &TensorOptions<'_>,
    has_imatrix: bool,
    allow_requantize: bool,
) -> CliResult<PresetPlan> {
    let info = model_info(model)?;
    let opts = options(o, has_imatrix)?;
    let tensors: Vec<qforge_presets::TensorInfo<'_>> = model
        .tensors
        .iter()
        .map(|t| qforge_presets::TensorInfo { name: &t.name, dims: &t.dims, ty: t.ty.name() })
        .collect();
    let choices = qforge_presets::plan(preset, &info, &opts, &tensors, &block_size).map_err(|e| match e {
        qforge_presets::PresetError::UnknownType(ty) => bad_input(format!(
            "preset {} needs type {ty}, which qforge does not have; choose another preset",
            preset.name()
        )),
        e => bad_input(format!("--preset {}: {e}", preset.name())),
    })?;
    let mut types = Vec::with_capacity(choices.len());
    for (t, c) in model.tensors.iter().zip(&choices) {
        let ty = TensorType::by_name(&c.ty).map_err(|e| bad_input(format!("tensor '{}': {e}", t.name)))?;
        if let Some(from) = &c.fallback_from {
            eprintln!(
                "qforge: {}: row length {} is not a multiple of {from}'s block size; using {}",
                t.name,
                t.dims.last().copied().unwrap_or(1),
                c.ty
            );
        }
        let converts = ty != t.ty;
        if converts && c.requires_imatrix && !has_imatrix {
            return Err(bad_input(format!(
                "tensor '{}' would be {} in preset {}, which needs an importance matrix (--imatrix FILE), as llama-quantize requires",
                t.name,
                c.ty,
                preset.name()
            )));
        }
        if converts && qforge_presets::is_quantized(t.ty.name()) && !allow_requantize {
            return Err(bad_input(format!(
                "tensor '{}' is already quantized ({}); requantizing loses quality, pass --allow-requantize to do it anyway",
                t.name,
                t.ty.name()
            )));
        }
        if ty.ggml_type().is_none() {
            return Err(bad_input(format!("tensor '{}': GGUF cannot hold {}", t.name, c.ty)));
        }
        types.push(ty);
    }
    let names: Vec<&str> = model.tensors.iter().map(|t| t.name.as_str()).collect();
    Ok(PresetPlan { types, order: qforge_presets::llama_order(&names), file_type: preset.id() })
}
