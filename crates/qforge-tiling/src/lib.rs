//! qforge-tiling: GEMM tile / pipeline-stage / split-k selection for quantized weights, as a
//! **total function** of the shape, the weight layout, the dtypes and the device.
//!
//! DeepGEMM once filtered its stage candidates with `s <= k / 128` and came up empty for an
//! FP8 GEMM with K = 128; CUTLASS sizes stages for the biggest part of an architecture family;
//! cuBLASLt heuristics may return zero algorithms. Here, for every M, N, K in 1..=2^31, every
//! weight layout ([`WeightLayout`]: dense f32/f16/bf16, or any registry format, its block,
//! group or grid tile read from the format's `qforge_core::Layout`) and every valid [`Device`], [`select`] returns a [`Config`]: candidates
//! degrade from wgmma (sm_90) through mma.sync (sm_80+), the sm_75 path, CUDA-core tiles and
//! gemv down to the `simple` kernel (16x16x16, one stage, one warp, predicated edges), which
//! fits every device that [`Device::check`] accepts. Shapes that are not multiples of a tile are
//! predicated, never refused. Invalid input (a zero or too large dimension, an unknown device,
//! a device too small for the simple kernel, an invalid group size) is a [`TilingError`].
//!
//! The choice minimizes a documented cost model (waves x per-tile cost, memory vs compute,
//! pipeline depth, occupancy, split-k with its reduction); all constants are in
//! [`cost::model`], documented in docs/tiling.md, to be calibrated against GPU measurements.
//! Candidate tables are enumerated once; a selection takes tens of microseconds, and
//! [`Planner`] caches results per problem for one device.
//!
//! ```
//! use qforge_tiling::{Device, Problem, WeightLayout, select};
//! let p = Problem::f16(1, 4096, 128, WeightLayout::lookup("fp8_e4m3", None).unwrap()).unwrap();
//! let c = select(&p, &Device::builtin("h100").unwrap()).unwrap();
//! assert!(c.stages >= 1 && c.smem_bytes <= 232448);
//! c.validate(&p, &Device::builtin("h100").unwrap()).unwrap();
//! ```
//!
//! Modules depend one way: `problem` (shapes, layouts from the registry) and `device`
//! (GPUs and the minimal kernel every one must run) know nothing of the rest; `cost` reads
//! devices; `config` (candidate rules) reads all three; `select` enumerates and picks.
#![forbid(unsafe_code)]

mod config;
pub mod cost;
mod device;
mod error;
mod fp8;
mod fused;
mod i8;
mod problem;
mod select;
mod trans;

pub use config::{Candidate, Config, Explanation, GEMV_MAX_M, MAX_SPLIT_K, Raster, Reject, Tile, Variant};
pub use cost::Bound;
pub use device::{
    BUILTIN_DEVICES, CudaProperties, Device, KindSet, MmaKind, Peaks, SIMPLE_REGS, SIMPLE_SMEM_MAX, SIMPLE_TILE,
    TensorCores,
};
pub use error::TilingError;
pub use fp8::{FP8_BK, FP8_GEMM_TILES, FP8_ROW_BYTES, Fp8Tile, fp8_smem_bytes, fp8_splits, fp8_tile};
pub use fused::{
    FUSED_GEMM_TILES, FUSED_ROW_PAD, FusedTile, SKINNY_CTAS_PER_SM, SKINNY_MAX_M, SKINNY_ROW_BYTES, SKINNY_SMEM_MAX,
    SMEM_WITHOUT_OPT_IN, TILED_SMEM_MAX,
};
pub use i8::{I8_ACT_SIDE_BYTES, I8_GEMM_TILES, I8_WEIGHT_SIDE_BYTES, I8Tile, i8_smem_bytes, i8_splits, i8_tile};
pub use problem::{ActDType, LayoutKind, MAX_DIM, OutDType, Problem, WeightLayout, act_scale_group};
pub use select::{CACHE_CAPACITY, Planner, candidates, select, select_fused, skinny_split};
pub use trans::{TRANS_BK, TRANS_ROW_BYTES, TransTile};
