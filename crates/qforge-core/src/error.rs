//! Typed errors for every way input to qforge can be wrong.

use thiserror::Error;

/// Everything that can be wrong with a request to quantize, dequantize or view a tensor.
///
/// Every variant describes bad *input*; qforge never panics on user data.
#[derive(Debug, Clone, PartialEq, Error)]
#[non_exhaustive]
pub enum QuantError {
    /// No registered format has this name (lookup by name, e.g. `Registry::get`).
    #[error("unknown format '{name}' (run `qforge formats` for the list)")]
    UnknownFormat {
        /// The name as given.
        name: String,
    },

    /// A dequantization dtype name other than `f32`, `f16` or `bf16`.
    #[error("unknown dtype '{name}' (expected f32, f16 or bf16)")]
    UnknownDType {
        /// The name as given.
        name: String,
    },

    #[error("{what}: {len} bytes is not a whole number of {format} blocks ({block_bytes} bytes each)")]
    /// A byte buffer that should hold whole blocks of a format does not: its length is not
    /// a multiple of the format's bytes per block.
    NotWholeBlocks {
        /// Which buffer (e.g. `"quantized row"`).
        what: &'static str,
        /// The format's name.
        format: &'static str,
        /// The buffer's length in bytes.
        len: usize,
        /// Bytes per block of the format.
        block_bytes: usize,
    },

    #[error("{what}: expected {expected}, got {actual}")]
    /// A length does not match what the shape and format imply: tensor or row bytes,
    /// output slice elements, activation rows, a side section.
    ShapeMismatch {
        /// Which length (e.g. `"quantized row bytes"`), which also says its unit.
        what: &'static str,
        /// The length the shape and format require.
        expected: usize,
        /// The length given.
        actual: usize,
    },

    #[error("invalid shape: {reason}")]
    /// A shape that cannot describe a tensor: no dimensions, a zero dimension, a window or
    /// split not on the layout's granularity, or parameters the layout does not allow.
    InvalidShape {
        /// What is wrong with it.
        reason: String,
    },

    #[error("size overflow: {what} does not fit in memory addresses")]
    /// A size computed from a shape (elements, bytes) does not fit in `usize`; all such
    /// arithmetic is checked.
    Overflow {
        /// Which size overflowed.
        what: &'static str,
    },

    #[error("non-finite input value {value} at element {index}: quantization needs finite values")]
    /// Quantization input holds a NaN or an infinity (checked once for every format, before
    /// the format's encoder runs).
    NonFinite {
        /// Index of the first non-finite element (in the row, or in the tensor for
        /// tensor-level calls).
        index: usize,
        /// That element's value.
        value: f32,
    },

    #[error("invalid importance weights: {reason}")]
    /// Importance weights that cannot be used: not one per element (per column for a
    /// tensor), or a value that is negative or not finite.
    InvalidImatrix {
        /// What is wrong with them.
        reason: String,
    },

    #[error("{format}: {reason}")]
    /// The format does not support this operation or parameter (e.g. a group size int4g
    /// refuses, an activation kind with no quantizer, a dtype a device path lacks).
    Unsupported {
        /// The format's name.
        format: &'static str,
        /// What is not supported, and why.
        reason: String,
    },
}

impl QuantError {
    pub(crate) fn shape(reason: impl Into<String>) -> Self {
        QuantError::InvalidShape { reason: reason.into() }
    }
}
