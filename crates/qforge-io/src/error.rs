//! [`IoError`]: every way a model file (or a request to write one) can be wrong.

use qforge_core::QuantError;
use std::path::PathBuf;
use thiserror::Error;

/// A typed error for reading or writing model files. Every malformed-input case has its own
/// variant; none of them is ever a panic.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum IoError {
    #[error("cannot {op} {path}: {source}")]
    Io { op: &'static str, path: PathBuf, source: std::io::Error },

    #[error("truncated file: {what} needs {need} bytes at offset {at}, but the file has {len}")]
    Truncated { what: &'static str, need: u64, at: u64, len: u64 },

    #[error("not a GGUF file (magic bytes {found:02x?}, expected \"GGUF\")")]
    BadMagic { found: [u8; 4] },

    #[error("unsupported GGUF version {version} (qforge reads little-endian versions 2 and 3)")]
    UnsupportedVersion { version: u32 },

    #[error("unknown GGUF metadata value type {id} at offset {at}")]
    UnknownValueType { id: u32, at: u64 },

    #[error("tensor '{tensor}': unknown GGML type id {id}")]
    UnknownTensorType { tensor: String, id: u32 },

    #[error("tensor '{tensor}': GGML type {name} (id {id}) is not supported by qforge")]
    UnsupportedTensorType { tensor: String, id: u32, name: &'static str },

    #[error("{what} at offset {at} is not valid UTF-8")]
    InvalidUtf8 { what: &'static str, at: u64 },

    #[error("duplicate metadata key '{key}'")]
    DuplicateKey { key: String },

    #[error("duplicate tensor name '{name}'")]
    DuplicateTensor { name: String },

    #[error("size overflow: {what}")]
    Overflow { what: String },

    #[error("metadata array nesting deeper than {max} levels at offset {at}")]
    TooDeep { max: usize, at: u64 },

    #[error("tensor '{tensor}': {reason}")]
    BadTensor { tensor: String, reason: String },

    #[error(
        "tensor '{tensor}': data at offset {offset} + {size} bytes runs past the end of the file ({file_len} bytes)"
    )]
    OutOfBounds { tensor: String, offset: u64, size: u64, file_len: u64 },

    #[error("bad general.alignment: {reason}")]
    BadAlignment { reason: String },

    #[error("invalid safetensors file: {reason}")]
    Safetensors { reason: String },

    #[error("invalid imatrix file: {reason}")]
    Imatrix { reason: String },

    #[error("{path}: {reason}")]
    Checkpoint { path: PathBuf, reason: String },

    #[error("cannot write {container}: {reason}")]
    Unwritable { container: &'static str, reason: String },

    #[error(transparent)]
    Quant(#[from] QuantError),
}

impl IoError {
    pub(crate) fn tensor(tensor: &str, reason: impl Into<String>) -> Self {
        IoError::BadTensor { tensor: tensor.to_string(), reason: reason.into() }
    }
    pub(crate) fn overflow(what: impl Into<String>) -> Self {
        IoError::Overflow { what: what.into() }
    }
    pub(crate) fn io(op: &'static str, path: &std::path::Path, source: std::io::Error) -> Self {
        IoError::Io { op, path: path.to_path_buf(), source }
    }
}

/// Result alias for qforge-io.
pub type Result<T, E = IoError> = std::result::Result<T, E>;
