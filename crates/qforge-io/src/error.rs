//! [`IoError`]: every way a model file (or a request to write one) can be wrong.

use qforge_core::QuantError;
use std::path::PathBuf;
use thiserror::Error;

/// A typed error for reading or writing model files. Every malformed-input case has its own
/// variant; none of them is ever a panic.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum IoError {
    /// An operating-system I/O call on a file failed (open, map, read, write, …).
    #[error("cannot {op} {path}: {source}")]
    Io {
        /// The operation that failed, as a verb (`"open"`, `"map"`, `"read"`, `"write"`).
        op: &'static str,
        /// The file it was applied to (for a writer: a placeholder such as `GGUF output`).
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },

    /// The file ends before a structure it declares: a header, string, array or tensor
    /// table whose length or count points past the end. Lengths are checked before anything
    /// is allocated, so a lying count fails here instead of exhausting memory.
    #[error("truncated file: {what} needs {need} bytes at offset {at}, but the file has {len}")]
    Truncated {
        /// What was being read (e.g. `"tensor name"`, `"array elements"`).
        what: &'static str,
        /// Bytes that structure needs, starting at `at`.
        need: u64,
        /// Byte offset in the file where it starts.
        at: u64,
        /// Total file length in bytes.
        len: u64,
    },

    /// The first four bytes are not the GGUF magic `"GGUF"`.
    #[error("not a GGUF file (magic bytes {found:02x?}, expected \"GGUF\")")]
    BadMagic {
        /// The four bytes found at offset 0.
        found: [u8; 4],
    },

    /// The GGUF header names a version other than 2 or 3 (version 1, or a big-endian file,
    /// whose version reads as a huge number).
    #[error("unsupported GGUF version {version} (qforge reads little-endian versions 2 and 3)")]
    UnsupportedVersion {
        /// The version field as read (little-endian `u32`).
        version: u32,
    },

    /// A metadata value (or array element) type id that is not a `gguf_type` (0..=12).
    #[error("unknown GGUF metadata value type {id} at offset {at}")]
    UnknownValueType {
        /// The type id as read.
        id: u32,
        /// Byte offset of the type id in the file.
        at: u64,
    },

    /// A tensor's GGML type id is not in ggml's type table at all.
    #[error("tensor '{tensor}': unknown GGML type id {id}")]
    UnknownTensorType {
        /// The tensor's name.
        tensor: String,
        /// The `ggml_type` id as read.
        id: u32,
    },

    /// A tensor's GGML type id is a known ggml type that qforge has no format for (for
    /// example one of ggml's removed types such as `Q4_2`).
    #[error("tensor '{tensor}': GGML type {name} (id {id}) is not supported by qforge")]
    UnsupportedTensorType {
        /// The tensor's name.
        tensor: String,
        /// The `ggml_type` id as read.
        id: u32,
        /// ggml's name for that type.
        name: &'static str,
    },

    /// A string (key, tensor name or string value) is not valid UTF-8.
    #[error("{what} at offset {at} is not valid UTF-8")]
    InvalidUtf8 {
        /// What the string was (e.g. `"metadata key"`).
        what: &'static str,
        /// Byte offset of the string's bytes in the file.
        at: u64,
    },

    /// The GGUF metadata holds the same key twice.
    #[error("duplicate metadata key '{key}'")]
    DuplicateKey {
        /// The repeated key.
        key: String,
    },

    /// Two tensors have the same name: in one file's tensor table, across the shards of a
    /// checkpoint, or among the tensors handed to a writer.
    #[error("duplicate tensor name '{name}'")]
    DuplicateTensor {
        /// The repeated tensor name.
        name: String,
    },

    /// A size computed from the file (element count, byte size, offset) does not fit in
    /// `u64` / `usize`; all such arithmetic is checked.
    #[error("size overflow: {what}")]
    Overflow {
        /// Which size overflowed, in words.
        what: String,
    },

    /// Metadata arrays nest deeper than the reader allows (arrays of arrays of …), which
    /// would otherwise let a small file drive unbounded recursion.
    #[error("metadata array nesting deeper than {max} levels at offset {at}")]
    TooDeep {
        /// The deepest nesting the reader accepts.
        max: usize,
        /// Byte offset of the array that exceeds it.
        at: u64,
    },

    /// A tensor's description is invalid or the tensor cannot be used as asked: too many or
    /// zero dimensions, a misaligned data offset, a length that is not whole blocks, a
    /// dtype qforge does not read, a conversion that does not exist, a bad grid companion.
    #[error("tensor '{tensor}': {reason}")]
    BadTensor {
        /// The tensor's name.
        tensor: String,
        /// What is wrong with it.
        reason: String,
    },

    /// A tensor's data range (offset + size, in bytes) runs past the end of the file.
    #[error(
        "tensor '{tensor}': data at offset {offset} + {size} bytes runs past the end of the file ({file_len} bytes)"
    )]
    OutOfBounds {
        /// The tensor's name.
        tensor: String,
        /// Byte offset of its data from the start of the file (for safetensors: the
        /// header's begin offset plus the 8-byte length and the header).
        offset: u64,
        /// Its data size in bytes.
        size: u64,
        /// The file length in bytes.
        file_len: u64,
    },

    /// `general.alignment` is present but not a `u32` power of two (when reading), or a
    /// writer was given such a value.
    #[error("bad general.alignment: {reason}")]
    BadAlignment {
        /// What is wrong with the value.
        reason: String,
    },

    /// A safetensors header is malformed (not JSON, bad dtype / shape / offsets, …) or
    /// cannot be serialized when writing.
    #[error("invalid safetensors file: {reason}")]
    Safetensors {
        /// The parser's (or serializer's) message.
        reason: String,
    },

    /// An importance-matrix file (llama.cpp's legacy `.dat` or GGUF imatrix) is malformed,
    /// or its vector for a tensor does not have one value per column.
    #[error("invalid imatrix file: {reason}")]
    Imatrix {
        /// What is wrong with it.
        reason: String,
    },

    /// A model directory or sharded checkpoint is inconsistent: a bad
    /// `model.safetensors.index.json`, a missing shard, a tensor not where the index says,
    /// or a directory with no model file.
    #[error("{path}: {reason}")]
    Checkpoint {
        /// The directory or index file at fault.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },

    /// A writer was used in a way the container cannot represent: tensor data that does not
    /// match the declared tensors (wrong size, wrong order, too many, too few), or a value
    /// the format has no encoding for.
    #[error("cannot write {container}: {reason}")]
    Unwritable {
        /// The container being written (`"GGUF"` or `"safetensors"`).
        container: &'static str,
        /// What the caller did wrong.
        reason: String,
    },

    /// A tensor's bytes were rejected by qforge-core (e.g. a length that is not whole
    /// blocks for its format, or a quantizer's error during conversion).
    #[error(transparent)]
    Quant(#[from] QuantError),

    /// One file of a model (a single model file or one shard of a checkpoint) failed to
    /// parse: the path of that file, around the parser's own typed error.
    #[error("{}: {source}", path.display())]
    InFile {
        /// The file that failed.
        path: PathBuf,
        /// What was wrong with it, as the parser reported it.
        source: Box<IoError>,
    },
}

impl IoError {
    pub(crate) fn tensor(tensor: &str, reason: impl Into<String>) -> Self {
        IoError::BadTensor { tensor: tensor.to_string(), reason: reason.into() }
    }
    pub(crate) fn overflow(what: impl Into<String>) -> Self {
        IoError::Overflow { what: what.into() }
    }
    /// The error itself, with any [`IoError::InFile`] wrappers (the file it happened in)
    /// taken off: the parser's typed error, to match on.
    pub fn root(&self) -> &IoError {
        match self {
            IoError::InFile { source, .. } => source.root(),
            e => e,
        }
    }
    pub(crate) fn io(op: &'static str, path: &std::path::Path, source: std::io::Error) -> Self {
        IoError::Io { op, path: path.to_path_buf(), source }
    }
}

/// Result alias for qforge-io.
pub type Result<T, E = IoError> = std::result::Result<T, E>;
