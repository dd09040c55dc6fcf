//! The GPU side of xtask: the kit that carries qforge to a GPU machine with no Rust there
//! (`gpu-kit`, [`kit`]), the benchmarks it runs there (`gpu-bench`, feature `cuda`), and the
//! report that gathers a run's steps (`gpu-report`, [`report`]).
//!
//! The benchmark's figures are [`BenchReport`]; the report reads them back, so both sides
//! share these types and the targets below.

pub mod kit;
pub mod report;

#[cfg(feature = "cuda")]
#[allow(unsafe_code)] // CUDA event tracking, for graph capture
pub mod bench;

use serde::{Deserialize, Serialize};

/// Dequant target: bytes read + written per second, as a fraction of a device-to-device copy.
pub const DEQUANT_TARGET: f64 = 0.90;
/// Mat-vec target (M = 1 on [`MATVEC_TARGET_SHAPE`]): weight bytes per second, as a fraction
/// of the copy's bytes (read + written) per second.
pub const MATVEC_TARGET: f64 = 0.85;
pub const MATVEC_TARGET_SHAPE: (usize, usize) = (14336, 4096);
/// Direct f16 dequant against f32 dequant followed by an f32 → f16 cast: time ratio.
pub const F16_DIRECT_TARGET: f64 = 1.4;

/// The device the figures were measured on.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct DeviceJson {
    pub name: String,
    pub compute_capability: String,
    pub multiprocessors: i32,
    pub l2_cache_bytes: i64,
    pub memory_bytes: u64,
    /// The driver's CUDA version (`13.0`).
    pub driver_cuda: String,
}

/// A device-to-device copy: the bandwidth every other figure is a fraction of.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct CopyJson {
    /// Bytes read + written by one copy.
    pub bytes: u64,
    pub ms: f64,
    pub gbps: f64,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct DequantRow {
    pub format: String,
    pub dtype: String,
    pub rows: usize,
    pub cols: usize,
    pub bytes_read: u64,
    pub bytes_written: u64,
    pub ms: f64,
    pub gbps: f64,
    /// `gbps` / the copy's.
    pub of_copy: f64,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct MatvecRow {
    pub format: String,
    pub n: usize,
    pub k: usize,
    pub m: usize,
    pub weight_bytes: u64,
    /// Per call, calls enqueued back to back on one stream (launch overhead included).
    pub ms_stream: f64,
    /// Per call, the same calls replayed from a captured CUDA graph (none if capture failed).
    pub ms_graph: Option<f64>,
    /// Weight bytes per second of the faster of the two.
    pub weight_gbps: f64,
    pub of_copy: f64,
}

/// The seed case: direct f16 dequant against f32 dequant then a cast kernel.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct CastRow {
    pub format: String,
    pub elements: u64,
    pub direct_f16_ms: f64,
    pub f32_ms: f64,
    pub cast_ms: f64,
    /// f32 dequant followed by the cast, timed as one sequence.
    pub detour_ms: f64,
    /// `detour_ms / direct_f16_ms`.
    pub speedup: f64,
}

/// GEMM targets (issue 13): the fused GEMM against its own dequant + cuBLAS at every M
/// (time ratio), against cuBLAS f16 on unquantized weights at M ≤ 16 for 4-bit formats and
/// at M ≥ 512.
pub const GEMM_VS_DEQUANT_TARGET: f64 = 1.0;
pub const GEMM_SMALL_M_VS_DENSE_TARGET: f64 = 2.0;
pub const GEMM_LARGE_M_VS_DENSE_TARGET: f64 = 0.8;

/// Prompt processing, one format: `Y[M×N] = X[M×K] · Wᵀ` with f16 tensor-core inputs and
/// f32 output, the fused GEMM and the dequant + cuBLAS path, per call.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct GemmRow {
    pub format: String,
    pub n: usize,
    pub k: usize,
    pub m: usize,
    pub fused_ms: f64,
    /// Dequantization of the weights (bounded row chunks, f16) + cuBLAS, per call.
    pub dequant_cublas_ms: f64,
    /// 2·M·N·K / fused_ms.
    pub fused_tflops: f64,
    /// The fused instance and split-k count qforge-tiling chose (`skinny16x256x256_w8 split 16`).
    #[serde(default)]
    pub fused_config: Option<String>,
    /// Just above `SKINNY_MAX_M` (up to twice it): the largest skinny instance on the same
    /// call, where the tiler chose a tiled one.
    #[serde(default)]
    pub skinny_ms: Option<f64>,
    /// Above `SKINNY_MAX_M`: every tiled instance on the same call, unsplit (`name`, ms): the
    /// tiler's choice against the best one measured.
    #[serde(default)]
    pub tiled_ms: Vec<(String, f64)>,
    /// The format's integer tensor-core GEMM (its activations quantized on the GPU), if it
    /// has one.
    #[serde(default)]
    pub int8: Option<Int8Gemm>,
}

impl GemmRow {
    /// The faster of the format's fused GEMMs (f16 tensor cores, or its integer one): what
    /// the targets compare.
    pub fn best_fused_ms(&self) -> f64 {
        self.int8.as_ref().map_or(self.fused_ms, |i| i.ms.min(self.fused_ms))
    }
}

/// An integer tensor-core GEMM: which activation quantization (`q8`: the format's native q8
/// blocks, `int8-dyn`, `fp8-1x128`) and its time per call; also the instance and split count
/// the tiler chose and every instance's time unsplit and split as the tiler would split it
/// (`name s<splits>`, ms): the tiler's choice against the best.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Int8Gemm {
    pub path: String,
    pub ms: f64,
    #[serde(default)]
    pub config: Option<String>,
    #[serde(default)]
    pub instances: Vec<(String, f64)>,
}

/// The ceiling: cuBLAS on unquantized f16 weights, same shape (`cublasGemmEx`, f32 out).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct DenseRow {
    pub n: usize,
    pub k: usize,
    pub m: usize,
    pub ms: f64,
    pub tflops: f64,
}

/// Everything `xtask gpu-bench` measured in one run.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct BenchReport {
    pub device: DeviceJson,
    pub copy: CopyJson,
    pub dequant: Vec<DequantRow>,
    pub matvec: Vec<MatvecRow>,
    pub f16_direct_vs_cast: Vec<CastRow>,
    #[serde(default)]
    pub gemm: Vec<GemmRow>,
    #[serde(default)]
    pub gemm_dense: Vec<DenseRow>,
    /// Formats that could not be measured, with the reason.
    pub errors: Vec<String>,
    pub method: String,
}
