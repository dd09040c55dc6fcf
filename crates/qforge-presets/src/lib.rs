//! qforge-presets: the type of every tensor of a model under a llama-quantize preset.
//!
//! llama.cpp users quantize a model with a preset (`Q4_K_M`, `IQ2_XS`, …) and llama-quantize
//! chooses each tensor's type from its name, its layer, its shape and the model's
//! hyper-parameters (attention heads, experts, layers, architecture). This crate is that
//! choice, rule for rule, so that a file qforge writes under a preset holds the same types as
//! llama-quantize's (checked against llama-quantize itself: `tests/presets/`).
//!
//! It knows types by their lower-case GGML names (`q4_k`, `f16`, …) and asks the caller for
//! block sizes, so it depends on no format crate; `qforge convert --preset` glues it to the
//! registry. The rules follow llama.cpp's `src/llama-quant.cpp` (the version in
//! `tests/presets/README.md`): which tensors may be quantized, the category of a tensor from
//! its name, the per-preset rules with their attention-v / feed-forward counters, the user's
//! overrides, and the fallback for rows that are not whole blocks.

mod ftype;
mod rules;

pub use ftype::{Ftype, MOSTLY, PRESETS, Preset, mostly};
pub use rules::{Category, category, fallback, plan};

/// What the rules read from the model's metadata.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ModelInfo {
    /// `general.architecture` (`llama`, `qwen2`, `gemma3`, …).
    pub arch: String,
    /// `<arch>.block_count`.
    pub n_layer: u32,
    /// `<arch>.attention.head_count` (of layer 0 where it is per layer).
    pub n_head: u32,
    /// `<arch>.attention.head_count_kv` (defaults to `n_head`).
    pub n_head_kv: u32,
    /// `<arch>.expert_count` (0 for dense models).
    pub n_expert: u32,
}

impl ModelInfo {
    /// Query heads per key/value head (0 without key/value heads), as `llama_hparams::n_gqa`.
    pub fn n_gqa(&self) -> u32 {
        self.n_head.checked_div(self.n_head_kv).unwrap_or(0)
    }

    /// Whether llama.cpp takes the model for a 70B one (the only size its rules look at).
    pub fn is_70b(&self) -> bool {
        match self.arch.as_str() {
            "llama" => self.n_layer == 80 && self.n_head != self.n_head_kv,
            "qwen2" | "deci" | "olmo" => self.n_layer == 80,
            "jais2" => self.n_layer == 68,
            _ => false,
        }
    }
}

/// One tensor as the rules see it.
#[derive(Clone, Debug)]
pub struct TensorInfo<'a> {
    /// The tensor's name in the file (`blk.0.attn_v.weight`, …), which decides its category.
    pub name: &'a str,
    /// Dimensions outermost first (the last is the row; a 3-D expert tensor is
    /// `[experts, rows, row]`).
    pub dims: &'a [usize],
    /// Its type in the input file (lower-case name).
    pub ty: &'a str,
}

/// The user's options (llama-quantize's flags).
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// `--output-tensor-type`.
    pub output_tensor_type: Option<String>,
    /// `--token-embedding-type`.
    pub token_embedding_type: Option<String>,
    /// `--tensor-type PATTERN=TYPE`, in order (first match wins; regex search in the name).
    pub tensor_types: Vec<(regex::Regex, String)>,
    /// `--pure`: no per-tensor rules (the overrides and the fallback still apply).
    pub pure: bool,
    /// `--leave-output-tensor`: `output.weight` keeps its type.
    pub leave_output_tensor: bool,
    /// An importance matrix is given (some rules depend on it).
    pub has_imatrix: bool,
}

impl Options {
    /// Parses one `--tensor-type PATTERN=TYPE` (split at the last `=`; the type is
    /// lower-cased) and appends it after the earlier ones.
    ///
    /// # Errors
    ///
    /// [`PresetError::BadOverride`] when either side is empty or the pattern is not a valid
    /// regular expression.
    pub fn push_tensor_type(&mut self, spec: &str) -> Result<(), PresetError> {
        let (pattern, ty) = spec
            .rsplit_once('=')
            .filter(|(p, t)| !p.is_empty() && !t.is_empty())
            .ok_or_else(|| PresetError::BadOverride(format!("{spec:?}: expected PATTERN=TYPE")))?;
        let re = regex::Regex::new(pattern)
            .map_err(|e| PresetError::BadOverride(format!("{spec:?}: bad regular expression: {e}")))?;
        self.tensor_types.push((re, ty.trim().to_ascii_lowercase()));
        Ok(())
    }
}

/// The type chosen for one tensor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Choice {
    /// Lower-case type name (`q6_k`, `f16`, …); the input type where the tensor is kept.
    pub ty: String,
    /// Whether the tensor may be quantized at all (norms, 1-D tensors, positional
    /// embeddings… may not: they keep their type).
    pub quantizable: bool,
    /// `Some(wanted)` when the row length did not fit `wanted`'s blocks and `ty` is the fallback.
    pub fallback_from: Option<String>,
    /// llama-quantize refuses this type without an importance matrix.
    pub requires_imatrix: bool,
}

/// Why a preset plan, option or tensor was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PresetError {
    /// A preset name llama-quantize does not accept (the name as given).
    #[error("unknown preset {0:?}; llama-quantize's presets: {list}", list = preset_list())]
    UnknownPreset(String),
    /// A `--tensor-type` that is not `PATTERN=TYPE` or whose pattern is not a valid regular
    /// expression (the message says which).
    #[error("{0}")]
    BadOverride(String),
    /// A type name the caller's `block_size` does not know: the preset's, an override's or a
    /// fallback's.
    #[error("type {0:?} is not known here (no block size)")]
    UnknownType(String),
    /// A tensor the rules cannot place: a MoE tensor without a `blk.N.` prefix or with a
    /// layer past the model's, or a row length that is not whole blocks of the chosen type
    /// when llama.cpp defines no fallback for it.
    #[error("tensor {tensor}: {why}")]
    Tensor {
        /// The tensor's name.
        tensor: String,
        /// Why its type cannot be chosen.
        why: String,
    },
}

fn preset_list() -> String {
    PRESETS.iter().map(|p| p.name).collect::<Vec<_>>().join(" ")
}

/// The preset named `name` (llama-quantize's spellings, case-insensitive).
pub fn preset(name: &str) -> Result<Ftype, PresetError> {
    Ftype::by_name(name).ok_or_else(|| PresetError::UnknownPreset(name.to_string()))
}

/// Whether a type is a quantized one (not f32 / f16 / bf16 / an integer type).
pub fn is_quantized(ty: &str) -> bool {
    !matches!(ty, "f32" | "f16" | "bf16" | "f64" | "i8" | "i16" | "i32" | "i64")
}

/// The order llama-quantize visits (and writes) tensors in: by layer number (`blk.N.`; other
/// tensors first), then by name. The rules' counters run in this order.
pub fn llama_order(names: &[&str]) -> Vec<usize> {
    let layer = |n: &str| -> i64 {
        n.strip_prefix("blk.")
            .and_then(|r| {
                let digits: String = r.chars().take_while(char::is_ascii_digit).collect();
                r[digits.len()..].starts_with('.').then(|| digits.parse().ok()).flatten()
            })
            .unwrap_or(-1)
    };
    let mut order: Vec<usize> = (0..names.len()).collect();
    order.sort_by(|&a, &b| layer(names[a]).cmp(&layer(names[b])).then_with(|| names[a].cmp(names[b])));
    order
}
