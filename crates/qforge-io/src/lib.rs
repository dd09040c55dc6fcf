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
//!   `safetensors` crate), memory-mapped; a grid-layout weight (FP8) with its `…_scale_inv`
//!   companion is one tensor of its grid format ([`grid`], driven by the format's layout).
//! * [`ModelFile`] is the container-independent view `qforge inspect` and `qforge convert`
//!   use; [`imatrix`] reads llama.cpp importance-matrix files (GGUF and legacy `.dat`).
//!
//! Rules and the split between this crate's own parser and `gguf-rs-lib`: docs/io.md.
//!
//! # Example
//!
//! Write a small GGUF file into memory with [`GgufWriter`], then read it back with
//! [`GgufFile`] and [`ModelFile`]. A file on disk is read the same way from
//! `MappedFile::open(path)?.bytes()`.
//!
//! ```
//! use qforge_core::Shape;
//! use qforge_io::{Container, GgufFile, GgufWriter, ModelFile, Plain, TensorType, Value, decode_f32};
//!
//! // A 2 x 64 weight quantized to q8_0, and a plain f32 vector.
//! let q8_0 = qforge_formats::get("q8_0")?;
//! let w: Vec<f32> = (0..128).map(|i| i as f32 / 64.0 - 1.0).collect();
//! let weight = qforge_cpu::quantize(q8_0, Shape::new([2, 64])?, &w, None)?;
//! let norm = vec![1.0f32; 64];
//!
//! let mut gguf = GgufWriter::new();
//! gguf.set("general.architecture", Value::String("llama".into()))?;
//! gguf.add_tensor("blk.0.ffn_up.weight", TensorType::Quant(q8_0), &[2, 64])?;
//! gguf.add_tensor("blk.0.ffn_norm.weight", TensorType::Plain(Plain::F32), &[64])?;
//! let mut stream = gguf.start(Vec::new())?; // any `Write`: data is streamed tensor by tensor
//! stream.write_tensor(weight.data())?;
//! stream.write_tensor(&norm.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<u8>>())?;
//! let bytes: Vec<u8> = stream.finish()?;
//!
//! // GGUF as stored: `ne` is ggml's order (row length first); tensors are views into `bytes`.
//! let file = GgufFile::parse(&bytes)?;
//! assert_eq!(file.version, 3);
//! assert_eq!(file.get("general.architecture").and_then(|v| v.as_str()), Some("llama"));
//! let up = file.tensor("blk.0.ffn_up.weight").unwrap();
//! assert_eq!(up.ne, [64, 2]);
//! let q = file.quant_tensor(up)?.expect("q8_0 is a block format");
//! assert_eq!(q.data(), weight.data());
//!
//! // The container-independent view (`qforge inspect` / `convert`): shapes outermost first.
//! let model = ModelFile::parse(&bytes, Container::Gguf)?;
//! for t in &model.tensors {
//!     println!("{:<24} {:<5} {:?}", t.name, t.ty.name(), t.dims);
//! }
//! let norm_view = model.tensor("blk.0.ffn_norm.weight").unwrap();
//! assert_eq!(decode_f32(norm_view)?, norm);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod conv;
mod cursor;
mod error;
mod gguf_read;
mod gguf_write;
pub mod grid;
pub mod imatrix;
#[allow(unsafe_code)] // memory-mapping a file is unsafe by nature
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
pub use ttype::{Plain, TensorType};
pub use value::{Array, MAX_NESTING, Value, ValueType};
