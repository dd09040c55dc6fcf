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
//! * Prompt processing (any M) has two paths: the fused GEMM (`Cuda::gemm`: weights decoded
//!   into shared memory, tensor-core `mma.sync`, from the same templates) and the baseline it
//!   must beat, dequant + cuBLAS (`Cuda::gemm_dequant`: weight rows dequantized in bounded
//!   chunks straight to f16 / bf16, cuBLAS loaded at run time). The 8-bit modes have their own
//!   tensor-core GEMMs: A8W4DQ (`Cuda::gemm_a8`) and FP8 block-scaled (`Cuda::gemm_fp8`, whose
//!   e4m3 body lives in a separate sm_89 module loaded only on such devices).
//! * Without the feature the crate needs no toolkit: [`toolkit`] (where nvcc is), [`codegen`],
//!   and the error type are always there.
//!
//! See `docs/cuda.md`.
//!
//! # Example
//!
//! The generator needs neither a toolkit nor a GPU:
//!
//! ```
//! use qforge_cuda::codegen::{kernel_names, module_source, module_stem};
//!
//! let q4_k = qforge_formats::get("q4_k")?;
//! let cu = module_source(q4_k.desc()).expect("every registered format has device code");
//! assert!(cu.contains("#include \"templates.cuh\""));
//! assert_eq!(module_stem("q4_k"), "qforge_q4_k"); // qforge_q4_k.cu -> qforge_q4_k.ptx
//! assert_eq!(kernel_names("q4_k")[1], "qforge_dequant_q4_k_f16");
//! assert!(qforge_cuda::missing_formats().is_empty());
//! # Ok::<(), qforge_core::QuantError>(())
//! ```
//!
//! With the `cuda` feature, `Cuda` runs the kernels (see its documentation for an example).

pub mod codegen;
mod error;
pub mod toolkit;

pub use error::CudaError;

#[cfg(feature = "cuda")]
#[allow(unsafe_code)] // cuBLAS calls and kernel launches (FFI through cudarc)
mod blas;
#[cfg(feature = "cuda")]
pub use blas::{DEQUANT_WORKSPACE_BYTES, row_chunks};
#[cfg(feature = "cuda")]
mod choose;
#[cfg(feature = "cuda")]
pub use choose::{FUSED_OVER_DEQUANT, GemmPath, choose_gemm_path};
#[cfg(feature = "cuda")]
#[allow(unsafe_code)] // launches the GEMM kernels (FFI through cudarc)
mod gemm;
#[cfg(feature = "cuda")]
#[allow(unsafe_code)] // launches the 8-bit GEMM kernels (FFI through cudarc)
mod gemm8;
#[cfg(feature = "cuda")]
#[allow(unsafe_code)] // launches the FP8 GEMM kernels (FFI through cudarc)
mod gemm_fp8;
#[cfg(feature = "cuda")]
#[allow(unsafe_code)] // launches the int8 GEMM of the GGUF formats (FFI through cudarc)
mod gemmq8;
#[cfg(feature = "cuda")]
pub use gemm_fp8::{Fp8Body, sm89_ptx};
#[cfg(feature = "cuda")]
#[allow(unsafe_code)] // calls into the host-compiled device code (FFI)
pub mod host;
#[cfg(feature = "cuda")]
#[allow(unsafe_code)] // calls into the host-compiled 8-bit GEMM (FFI)
pub mod host8;
#[cfg(feature = "cuda")]
#[allow(unsafe_code)] // calls into the host-compiled FP8 GEMM (FFI)
pub mod host_fp8;
#[cfg(feature = "cuda")]
#[allow(unsafe_code)] // calls into the host-compiled int8 GEMM of the GGUF formats (FFI)
pub mod hostq8;
#[cfg(feature = "cuda")]
#[allow(unsafe_code)] // the CUDA driver API through cudarc
mod runtime;
#[cfg(feature = "cuda")]
pub use runtime::*;
#[cfg(feature = "cuda")]
mod tiler;

/// Formats of the default registry whose device code is missing (they have no kernels).
pub fn missing_formats() -> Vec<&'static str> {
    qforge_formats::registry().iter().map(|f| f.desc()).filter(|d| d.cuda.is_none()).map(|d| d.name).collect()
}

/// Whether this build of qforge-cuda has compiled kernels and a runtime (feature `cuda`).
pub const ENABLED: bool = cfg!(feature = "cuda");
