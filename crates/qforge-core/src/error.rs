//! Typed errors for every way input to qforge can be wrong.

use thiserror::Error;

/// Everything that can be wrong with a request to quantize, dequantize or view a tensor.
///
/// Every variant describes bad *input*; qforge never panics on user data.
#[derive(Debug, Clone, PartialEq, Error)]
#[non_exhaustive]
pub enum QuantError {
    #[error("unknown format '{name}' (run `qforge formats` for the list)")]
    UnknownFormat { name: String },

    #[error("unknown dtype '{name}' (expected f32, f16 or bf16)")]
    UnknownDType { name: String },

    #[error("{what}: {len} bytes is not a whole number of {format} blocks ({block_bytes} bytes each)")]
    NotWholeBlocks { what: &'static str, format: &'static str, len: usize, block_bytes: usize },

    #[error("{what}: expected {expected}, got {actual}")]
    ShapeMismatch { what: &'static str, expected: usize, actual: usize },

    #[error("invalid shape: {reason}")]
    InvalidShape { reason: String },

    #[error("size overflow: {what} does not fit in memory addresses")]
    Overflow { what: &'static str },

    #[error("non-finite input value {value} at element {index}: quantization needs finite values")]
    NonFinite { index: usize, value: f32 },

    #[error("invalid importance weights: {reason}")]
    InvalidImatrix { reason: String },

    #[error("{format}: {reason}")]
    Unsupported { format: &'static str, reason: String },
}

impl QuantError {
    pub(crate) fn shape(reason: impl Into<String>) -> Self {
        QuantError::InvalidShape { reason: reason.into() }
    }
}
