//! qforge-core: the contract every qforge format implements and every other layer enumerates.
//!
//! * [`BlockFormat`] is what a format crate implements: a `#[repr(C)]` block layout, its
//!   descriptor ([`FormatDesc`]: name, GGML type id, block size, bytes per block, CUDA device
//!   code slot) and the scalar reference `decode` / `encode` of one block. `decode` is generic
//!   over the output element ([`Elem`]: f32, f16, bf16) so that f16 / bf16 output is produced
//!   directly, each value rounded to nearest-even from the f32 value, with no f32 buffer.
//! * [`Layout`] is a format's tensor layout as data (row blocks, groups with their scale
//!   dtype, or values plus a scale grid with its tile): every layer above the format crates
//!   reads sizes, side sections and split granularity from it ([`Format::layout`]).
//! * [`Format`] is the object-safe, row-level view of a format that [`Registry`] stores and
//!   that the CPU kernels, the CLI and the test matrix use. [`Registered`] turns any
//!   `BlockFormat` into a `&'static dyn Format` with one line.
//! * [`QuantTensor`] is a quantized 2-D (or n-D, rows × row length) tensor: format, logical
//!   shape, padded row length and its bytes, borrowed or owned, validated on construction.
//! * [`Params`] carries run-time parameters (int4g's group size and scale dtype);
//!   `<dyn Format>::with_params` returns the matching variant.
//! * [`NativeDot`], [`DotKernel`] and [`ActRow`] are the dot-product contract behind mat-vec
//!   and mat-mul: each format says how it wants activations quantized ([`ActKind`]) and may
//!   supply an exact integer kernel for them.
//! * [`QuantError`] is the typed error for every way input can be wrong.
//! * [`le`] has alignment-1, little-endian scalar wrappers used inside block layouts so that a
//!   block can be viewed in place in any byte buffer (memory maps included).
//! * [`cpu`] says which SIMD kernels this CPU runs (detected once at run time), for every
//!   family's dispatch.
//! * [`rand`] has the deterministic pseudo-random data the tests, checks and benchmarks of
//!   every crate share.
//!
//! # Example
//!
//! A format is one [`BlockFormat`] impl and one [`Registered`] line; everything else talks to
//! it through [`Format`]. (Real formats live in the family crates; `qforge-formats` has the
//! registry of all of them, `qforge-cpu` works on whole tensors.)
//!
//! ```
//! use qforge_core::{BlockFormat, Elem, Format, FormatDesc, QuantTensor, Registered, Registry, Role, Shape, f16};
//!
//! /// A toy format: blocks of 4 signed bytes, value = code / 16.
//! struct Toy;
//!
//! impl BlockFormat for Toy {
//!     type Block = [u8; 4];
//!     const DESC: FormatDesc = FormatDesc {
//!         name: "toy",
//!         family: "example",
//!         ggml_type: None,
//!         block_size: 4,
//!         block_bytes: 4,
//!         role: Role::Weight,
//!         dot_type: None,
//!         summary: "4 x i8 codes, fixed scale 1/16",
//!         cuda: None,
//!     };
//!     fn decode<O: Elem>(block: &[u8; 4], out: &mut [O]) {
//!         for (o, &b) in out.iter_mut().zip(block) {
//!             *o = O::from_f32(b as i8 as f32 / 16.0);
//!         }
//!     }
//!     fn encode(x: &[f32], _weights: Option<&[f32]>, out: &mut [u8; 4]) {
//!         *out = [0; 4]; // padded positions (x.len() < 4) get the code of 0
//!         for (o, &v) in out.iter_mut().zip(x) {
//!             *o = (v * 16.0).round().clamp(-128.0, 127.0) as i8 as u8;
//!         }
//!     }
//! }
//!
//! static TOY: &dyn Format = &Registered::<Toy>::NEW;
//!
//! let mut registry = Registry::new();
//! registry.register(TOY)?;
//! let toy = registry.get("TOY")?; // names are case-insensitive
//! assert_eq!(toy.desc().bits_per_weight(), 8.0);
//!
//! // A 2 x 6 tensor: each row is padded to whole blocks (2 blocks = 8 bytes per row).
//! let shape = Shape::new([2, 6])?;
//! let x = [0.5, -1.0, 0.25, 2.0, 1.5, -0.5, 0.0, 1.0, -2.0, 3.0, 0.125, 7.0];
//! let row_bytes = toy.row_bytes(shape.cols())?;
//! assert_eq!(row_bytes, 8);
//! let mut data = vec![0u8; shape.rows() * row_bytes];
//! for (xs, out) in x.chunks(shape.cols()).zip(data.chunks_mut(row_bytes)) {
//!     toy.quantize_row(xs, None, out)?;
//! }
//! let t = QuantTensor::new(toy, shape, data)?; // checks the byte count against the shape
//!
//! // Dequantize a row to f32, or straight to f16 (no f32 buffer).
//! let mut y = [0f32; 6];
//! toy.dequant_row(t.row(1).unwrap(), f32::out_row(&mut y))?;
//! assert_eq!(y, [0.0, 1.0, -2.0, 3.0, 0.125, 7.0]);
//! let mut h = [f16::ZERO; 6];
//! toy.dequant_row(t.row(0).unwrap(), f16::out_row(&mut h))?;
//! assert_eq!(h[3], f16::from_f32(2.0));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![deny(unsafe_code)]

mod block;
mod clayout;
pub mod cpu;
mod dot;
mod dtype;
mod error;
mod format;
mod layout;
pub mod le;
mod params;
pub mod rand;
mod registry;
pub mod round;
mod tensor;

pub use block::{BlockFormat, CudaDeviceCode, FormatDesc, Role, decode_blocks_default, encode_blocks};
pub use clayout::{CField, CLayout, CType, c_struct};
pub use dot::{ActKind, ActRow, DotKernel, GgmlDot, MAX_DOT_ROWS, MAX_PACKED_DOT_ROWS, NativeDot, NoDot, Packing};
pub use dtype::{DType, Elem, OutRow};
pub use error::QuantError;
pub use format::{Format, Registered, check_row_input, tile_mismatch};
pub use half::{bf16, f16};
pub use layout::{ElemType, Layout};
pub use params::Params;
pub use registry::Registry;
pub use tensor::{QuantTensor, Shape};

/// Result alias for qforge-core operations.
pub type Result<T, E = QuantError> = std::result::Result<T, E>;
