//! qforge-io: model files in and out — GGUF (v2 / v3) and safetensors — for qforge.
//!
//! * [`GgufFile`] parses a GGUF file from a byte slice (usually a [`MappedFile`]): header,
//!   metadata of every value type (arrays of strings and nested arrays included), tensor
//!   infos and `general.alignment`. Every count, length, dimension product and offset is
//!   checked against the file size with checked arithmetic before anything is allocated or
//!   read, so a hostile file gives a typed [`IoError`], never a panic, a hang or an
//!   allocation larger than a small multiple of the file. Tensors are zero-copy views;
//!   quantized ones become [`qforge_core::QuantTensor`]s borrowing the map.
//! * [`GgufWriter`] writes GGUF v3 that gguf-py and llama.cpp read: metadata preserved,
//!   tensors aligned, data streamed tensor by tensor.
//! * [`SafetensorsFile`] / [`write_safetensors`] read and write safetensors (with the
//!   `safetensors` crate), memory-mapped; an FP8 weight with its `…_scale_inv` companion is
//!   one fp8 block-scaled tensor ([`fp8`]).
//! * [`ModelFile`] is the container-independent view `qforge inspect` and `qforge convert`
//!   use; [`imatrix`] reads llama.cpp importance-matrix files (GGUF and legacy `.dat`).
//!
//! Rules and the split between this crate's own parser and `gguf-rs-lib`: docs/io.md.

mod conv;
mod cursor;
mod error;
pub mod fp8;
mod gguf_read;
mod gguf_write;
pub mod imatrix;
mod mmap;
mod model;
mod source;
mod st;
mod ttype;
mod value;

pub use conv::{decode_f32, encode, to_dtype};
pub use error::{IoError, Result};
pub use gguf_read::{DEFAULT_ALIGNMENT, GGUF_MAGIC, GgufFile, GgufTensor, MAX_DIMS};
pub use gguf_write::{GgufStream, GgufWriter, MAX_NAME, owned_metadata};
pub use mmap::MappedFile;
pub use model::st_dtype;
pub use model::{Container, ModelFile, TensorData, TensorView};
pub use safetensors::Dtype as StDtype;
pub use source::{ModelSource, SAFETENSORS_INDEX};
pub use st::{SafetensorsFile, StStream, StTensor, StWriteTensor, st_bytes, write_safetensors};
pub use ttype::{FP8_BLOCK, Plain, TensorType, is_fp8};
pub use value::{Array, MAX_NESTING, Value, ValueType};
