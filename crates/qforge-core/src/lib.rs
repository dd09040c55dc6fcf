//! qforge-core: the contract every qforge format implements and every other layer enumerates.
//!
//! * [`BlockFormat`] is what a format crate implements: a `#[repr(C)]` block layout, its
//!   descriptor ([`FormatDesc`]: name, GGML type id, block size, bytes per block, CUDA device
//!   code slot) and the scalar reference `decode` / `encode` of one block. `decode` is generic
//!   over the output element ([`Elem`]: f32, f16, bf16) so that f16 / bf16 output is produced
//!   directly, each value rounded to nearest-even from the f32 value, with no f32 buffer.
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
#![forbid(unsafe_code)]

mod dot;
mod dtype;
mod error;
mod format;
pub mod le;
mod params;
mod registry;
mod tensor;

pub use dot::{ActKind, ActRow, DotKernel, GgmlDot, NativeDot, NoDot};
pub use dtype::{DType, Elem, OutRow};
pub use error::QuantError;
pub use format::{BlockFormat, CudaDeviceCode, Format, FormatDesc, Registered, Role, check_row_input};
pub use half::{bf16, f16};
pub use params::Params;
pub use registry::Registry;
pub use tensor::{QuantTensor, Shape};

/// Result alias for qforge-core operations.
pub type Result<T, E = QuantError> = std::result::Result<T, E>;
