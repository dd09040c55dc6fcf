//! The cost model (depends on device descriptions only). Every constant lives in [`model`] so GPU measurements can calibrate them
//! in one place; docs/tiling.md explains each.

use crate::device::Device;

/// What limits the predicted time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Bound {
    /// The math (tensor or CUDA cores, weight decode included) dominates.
    Compute,
    /// DRAM or L2 traffic dominates.
    Memory,
    /// Load latency the pipeline stages cannot hide dominates (too few stages or CTAs).
    Latency,
}

impl Bound {
    /// Lower-case name: `compute`, `memory`, `latency`.
    pub fn name(self) -> &'static str {
        match self {
            Bound::Compute => "compute",
            Bound::Memory => "memory",
            Bound::Latency => "latency",
        }
    }
}

/// Model constants (see docs/tiling.md, "Cost model").
pub mod model {
    /// Round-trip latency of a global load that the pipeline must hide, microseconds.
    pub const MEM_LATENCY_US: f64 = 0.6;
    /// L2 -> SM bandwidth as a multiple of DRAM bandwidth.
    pub const L2_BW_FACTOR: f64 = 2.5;
    /// One SM can pull up to this many times its fair share of L2 bandwidth when few SMs are busy.
    pub const SM_BW_BURST: f64 = 2.0;
    /// Fraction of the SMs that must be streaming to saturate DRAM.
    pub const DRAM_SAT_FRACTION: f64 = 0.5;
    /// Fixed cost of one kernel launch, microseconds.
    pub const LAUNCH_US: f64 = 3.0;
    /// Fixed cost of the split-k reduction pass (a second launch), microseconds.
    pub const REDUCE_LAUNCH_US: f64 = 2.0;
    /// Fraction of the tensor peak each variant reaches at full tile efficiency.
    pub const EFF_WGMMA: f64 = 0.80;
    /// Fraction of the tensor peak `mma.sync` with a `cp.async` pipeline reaches (sm_80+).
    pub const EFF_MMA_SYNC: f64 = 0.70;
    /// mma.sync on sm_90 only reaches about 60 % of the wgmma peak.
    pub const EFF_MMA_SYNC_ON_SM90: f64 = 0.45;
    /// Fraction of the tensor peak the sm_75 `mma.sync` variant reaches.
    pub const EFF_SM75: f64 = 0.60;
    /// Fraction of the fp32 CUDA-core peak for the CUDA-core variants.
    pub const EFF_SIMT: f64 = 0.50;
    /// Fraction of the fp32 CUDA-core peak the gemv variant reaches.
    pub const EFF_GEMV: f64 = 0.50;
    /// Fraction of the fp32 CUDA-core peak the minimal `simple` kernel reaches.
    pub const EFF_SIMPLE: f64 = 0.10;
    /// Warp-tile intensity (harmonic, m n / (m + n)) at which the tensor pipes are fed at full rate.
    pub const WARP_TILE_FULL: f64 = 32.0;
    /// CUDA-core ops to decode one quantized weight (unpack, scale, convert).
    pub const DEQUANT_OPS_QUANT: f64 = 4.0;
    /// CUDA-core ops to convert one dense / fp8 weight to the MMA input type when they differ.
    pub const DEQUANT_OPS_CONVERT: f64 = 1.0;
    /// The fused GEMM's tiled instances (qforge-cuda's `gemm_tiled.cuh`): ops per weight
    /// decoded into shared memory (any layout) and per f32 activation rounded there, each
    /// k-step, on the warps that run the mma. Calibrated on an H200 (2026-11-28): 128 × 128 ×
    /// 32 and 64 × 64 × 32 ran a k-step in 3.3–3.8× the mma time plus `DEQUANT_OPS_QUANT`'s
    /// decode, i.e. 42–57 ops per (weight + activation) element.
    pub const FUSED_DECODE_OPS: f64 = 32.0;
    /// See [`FUSED_DECODE_OPS`].
    pub const FUSED_ACT_OPS: f64 = 16.0;
    /// TMA multicast in a 2-CTA cluster saves this fraction of operand traffic (wgmma only).
    pub const WGMMA_MULTICAST_SAVING: f64 = 0.25;
    /// A weight matrix smaller than this fraction of L2 is read from DRAM once however many M tiles.
    pub const L2_RESIDENT_FRACTION: f64 = 0.5;
}

/// What one candidate costs per K iteration and per tile (all per CTA).
#[derive(Clone, Copy, Debug)]
pub(crate) struct TileCost {
    /// Compute time of one K iteration, µs (tensor or CUDA-core math plus weight decode).
    pub t_compute: f64,
    /// Bytes loaded by one K iteration.
    pub bytes_iter: f64,
    /// Bytes written by the epilogue of one tile.
    pub bytes_epilogue: f64,
    /// Pipeline depth (loads in flight per CTA).
    pub stages: f64,
}

/// Outcome of [`estimate`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Estimate {
    pub time_us: f64,
    pub bound: Bound,
}

/// Predicted kernel time: waves x K iterations x per-iteration SM time, floored by DRAM,
/// plus launch and split-k reduction.
#[allow(clippy::too_many_arguments)]
pub(crate) fn estimate(
    d: &Device,
    tc: &TileCost,
    tiles: u64,
    ctas_per_sm: u64,
    k_iters: u64,
    dram_bytes: f64,
    reduce_bytes: f64,
) -> Estimate {
    use model::*;
    let sms = d.sm_count as u64;
    let conc = sms * ctas_per_sm;
    let bw = d.mem_bandwidth_gbs * 1e3; // bytes per µs
    let l2_bw = bw * L2_BW_FACTOR;
    // SM time of one K iteration with `ctas` resident CTAs while `active` SMs stream.
    let iter = |ctas: f64, active: f64| -> (f64, f64, f64, f64) {
        let bw_sm = (l2_bw / active).min(l2_bw / sms as f64 * SM_BW_BURST);
        let c = ctas * tc.t_compute;
        let m = ctas * tc.bytes_iter / bw_sm;
        let l = (MEM_LATENCY_US + tc.t_compute + tc.bytes_iter / bw_sm) / tc.stages;
        (c.max(m).max(l), c, m, bw_sm)
    };
    let full_waves = tiles / conc;
    let rem = tiles % conc;
    let kf = k_iters as f64;
    let mut main = 0.0;
    let mut dominant = (0.0, 0.0, 0.0);
    if full_waves > 0 {
        let (t, c, m, bw_sm) = iter(ctas_per_sm as f64, sms as f64);
        main += full_waves as f64 * (kf * t + ctas_per_sm as f64 * tc.bytes_epilogue / bw_sm);
        dominant = (c, m, t);
    }
    if rem > 0 {
        let ctas = rem.div_ceil(sms) as f64;
        let active = rem.min(sms) as f64;
        let (t, c, m, bw_sm) = iter(ctas, active);
        main += kf * t + ctas * tc.bytes_epilogue / bw_sm;
        if full_waves == 0 {
            dominant = (c, m, t);
        }
    }
    let active = tiles.min(sms) as f64;
    let dram_bw = bw * (active / (sms as f64 * DRAM_SAT_FRACTION)).min(1.0);
    let t_dram = dram_bytes / dram_bw;
    let reduce = if reduce_bytes > 0.0 { REDUCE_LAUNCH_US + reduce_bytes / bw } else { 0.0 };
    let bound = if t_dram >= main {
        Bound::Memory
    } else if dominant.0 >= dominant.1 && dominant.0 >= dominant.2 * 0.999 {
        Bound::Compute
    } else if dominant.1 >= dominant.2 * 0.999 {
        Bound::Memory
    } else {
        Bound::Latency
    };
    Estimate { time_us: main.max(t_dram) + LAUNCH_US + reduce, bound }
}
