//! qforge-cuda: every registered format on CUDA, from one set of templates.
//!
//! * `kernels-cuda/` holds the kernel templates (dequant to f32 / f16 / bf16, activation
//!   quantization to q8_1, mat-vec with `__dp4a`); each format crate holds only its
//!   `__host__ __device__` traits struct ([`qforge_core::CudaDeviceCode`]). [`codegen`] turns the
//!   registry into one `.cu` per format; with the `cuda` feature the build script compiles
//!   each to a PTX module (compute_80, `-fmad=false`) and compiles the same device code for
//!   the host, where the tests check it against the Rust reference (no GPU needed).
//! * The runtime (feature `cuda`, `Cuda`) loads the CUDA driver dynamically (cudarc), so a
//!   machine without a GPU gets [`CudaError::NoDriver`] / [`CudaError::NoDevice`], never a
//!   panic; modules are loaded lazily on first use per format and cached.
//! * Without the feature the crate needs no toolkit: [`toolkit`] (where nvcc is), [`codegen`],
//!   and the error type are always there.
//!
//! See `docs/cuda.md`.

pub mod codegen;
mod error;
pub mod toolkit;

pub use error::CudaError;

#[cfg(feature = "cuda")]
pub mod host;
#[cfg(feature = "cuda")]
mod runtime;
#[cfg(feature = "cuda")]
pub use runtime::*;

/// Formats of the default registry whose device code is missing (they have no kernels).
pub fn missing_formats() -> Vec<&'static str> {
    qforge_formats::registry().iter().map(|f| f.desc()).filter(|d| d.cuda.is_none()).map(|d| d.name).collect()
}

/// Whether this build of qforge-cuda has compiled kernels and a runtime (feature `cuda`).
pub const ENABLED: bool = cfg!(feature = "cuda");
