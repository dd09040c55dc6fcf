//! qforge-iq: ggml's nine I-quant ("importance-aware", grid/codebook) block formats —
//! iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s, iq1_s, iq1_m, iq4_nl and iq4_xs — as qforge
//! [`BlockFormat`](qforge_core::BlockFormat)s, bit-exact with ggml.
//!
//! * Layouts: ggml's `#[repr(C)]` blocks (alignment 1, viewable in place in any buffer).
//! * Decode reproduces ggml's `dequantize_row_iq*` bit for bit in f32 for every possible block
//!   (NaN where ggml gives NaN) and rounds that value once to f16 / bf16.
//! * Encode follows ggml's quantizers (`quantize_row_iq*_impl`, `quantize_row_iq4_nl_impl`)
//!   operation for operation, including the grid neighbour maps ggml builds in
//!   `iq2xs_init_impl` / `iq3xs_init_impl` (built lazily, once per process). Importance
//!   weights are honoured where given; iq2_xxs, iq2_xs and iq1_s — which ggml refuses to
//!   quantize without an imatrix — use uniform importance, exactly ggml with an all-ones
//!   imatrix. A partial block takes its scales from its real values only: padded positions
//!   have weight 0 in every search (and get the code nearest 0 in iq4_nl / iq4_xs).
//! * Tables: the grids live once, as data, in `tables/*.txt`; [`tables`] holds them as Rust
//!   constants and [`c_header`] renders them as C for the CUDA device code.
//!
//! [`FORMATS`] registers the family. Layouts and algorithms: `docs/formats/iq.md`.
#![deny(unsafe_code)]

mod common;
mod dot;
mod iq1;
mod iq2;
mod iq3;
mod iq4;
mod lattice;
mod packed;
mod search;
#[cfg(target_arch = "x86_64")]
mod simd;
pub mod tables;
mod unpack;

pub use iq1::{BlockIq1M, BlockIq1S, Iq1M, Iq1S};
pub use iq2::{BlockIq2S, BlockIq2Xs, BlockIq2Xxs, Iq2S, Iq2Xs, Iq2Xxs};
pub use iq3::{BlockIq3S, BlockIq3Xxs, Iq3S, Iq3Xxs};
pub use iq4::{BlockIq4Nl, BlockIq4Xs, Iq4Nl, Iq4Xs};
pub use tables::c_header;

use qforge_core::{CudaDeviceCode, Format, GgmlDot, Registered};

/// The family's CUDA device code: the tables rendered by build.rs from `tables/*.txt` (the
/// same values as [`tables`]) followed by `cuda/iq.cuh` (one traits struct per format, see
/// `kernels-cuda/README.md`).
const FAMILY_CUH: &str =
    concat!(include_str!(concat!(env!("OUT_DIR"), "/iq_tables.cuh")), include_str!("../cuda/iq.cuh"));

/// The `cuda` slot of an I-quant's descriptor.
const fn device_code(traits: &'static str) -> Option<CudaDeviceCode> {
    Some(CudaDeviceCode { header: FAMILY_CUH, header_file: "iq.cuh", traits })
}

/// Elements per I-quant super-block (ggml's `QK_K`; iq4_nl uses 32-element blocks).
pub const QK_K: usize = common::QK_K;

/// Every format of this family, for the registry.
pub static FORMATS: &[&dyn Format] = &[
    &Registered::<Iq2Xxs, GgmlDot>::NEW,
    &Registered::<Iq2Xs, GgmlDot>::NEW,
    &Registered::<Iq2S, GgmlDot>::NEW,
    &Registered::<Iq3Xxs, GgmlDot>::NEW,
    &Registered::<Iq3S, GgmlDot>::NEW,
    &Registered::<Iq1S, GgmlDot>::NEW,
    &Registered::<Iq1M, GgmlDot>::NEW,
    &Registered::<Iq4Nl, GgmlDot>::NEW,
    &Registered::<Iq4Xs, GgmlDot>::NEW,
];
