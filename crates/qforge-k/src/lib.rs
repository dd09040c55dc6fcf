//! qforge-k: the GGML K-quant formats q2_k, q3_k, q4_k, q5_k, q6_k and q8_k (256-element
//! super-blocks), bit-exact with ggml.
//!
//! Each format is a [`BlockFormat`](qforge_core::BlockFormat) with ggml's `#[repr(C)]` block
//! layout (alignment 1, viewable in place in any byte buffer) and a scalar reference codec:
//!
//! * `decode` reproduces ggml's `dequantize_row_q*_K` bit for bit in f32 (NaN where ggml gives
//!   NaN) and rounds that value once to f16 / bf16 for the other output types;
//! * `encode` follows ggml's quantizers: `quantize_row_q*_K_ref` without importance weights,
//!   `quantize_row_q*_K_impl` with them (the per-column weights ggml's `quantize_q*_K` receives
//!   as its imatrix), so the bytes match ggml's for whole blocks. A partial block (fewer than
//!   256 real elements) takes its scales from the real elements only and stores the code
//!   nearest 0 in the padded positions.
//!
//! [`FORMATS`] registers them all. The layouts and algorithms are described in
//! `docs/formats/k.md`.
#![deny(unsafe_code)]

mod affine;
mod decode;
pub mod dot;
mod pack;
pub mod packed;
mod q2k;
mod q3k;
mod q4k;
mod q6k;
mod q8k;
#[cfg(target_arch = "x86_64")]
mod simd;
mod symmetric;

pub use decode::{decode_blocks, decode_codes_row};
pub use q2k::{BlockQ2K, Q2K};
pub use q3k::{BlockQ3K, Q3K};
pub use q4k::{BlockQ4K, BlockQ5K, Q4K, Q5K};
pub use q6k::{BlockQ6K, Q6K};
pub use q8k::{BlockQ8K, Q8K};

use qforge_core::{Format, GgmlDot, Registered};

/// Elements per K-quant super-block (ggml's `QK_K`).
pub const QK_K: usize = 256;

/// A K-quant format's row quantizer: [`qforge_core::encode_blocks`] compiled for AVX2 where
/// the CPU has it (the same operations in the same order, so the same bytes), else the
/// portable build. Every format here overrides `BlockFormat::encode_row` with it.
#[inline]
fn encode_row<F: qforge_core::BlockFormat>(x: &[f32], weights: Option<&[f32]>, blocks: &mut [F::Block]) {
    #[cfg(target_arch = "x86_64")]
    if simd::encode_row::<F>(x, weights, blocks) {
        return;
    }
    qforge_core::encode_blocks::<F>(x, weights, blocks)
}

/// The activation format every K-quant weight format is dotted with.
const K_DOT: Option<&str> = Some("q8_k");

q8k_native_dot!(Q2K, Q3K, Q4K, Q5K, Q6K);
q8k_native_dot!(signed: Q8K);

/// The CUDA device code of the format whose traits struct in `cuda/k.cuh` is `traits`
/// (interface: `kernels-cuda/README.md`).
const fn cuda(traits: &'static str) -> Option<qforge_core::CudaDeviceCode> {
    Some(qforge_core::CudaDeviceCode { header: include_str!("../cuda/k.cuh"), header_file: "k.cuh", traits })
}

/// Every format of this family, in GGML type order, for the registry.
pub static FORMATS: &[&dyn Format] = &[
    &Registered::<Q2K, GgmlDot>::NEW,
    &Registered::<Q3K, GgmlDot>::NEW,
    &Registered::<Q4K, GgmlDot>::NEW,
    &Registered::<Q5K, GgmlDot>::NEW,
    &Registered::<Q6K, GgmlDot>::NEW,
    &Registered::<Q8K, GgmlDot>::NEW,
];
