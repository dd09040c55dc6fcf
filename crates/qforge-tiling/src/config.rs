//! Kernel variants, the resource and validity rules of a candidate, and the chosen [`Config`].

use crate::cost::{self, Bound, Estimate, TileCost, model};
use crate::device::{Device, MmaKind, SIMPLE_REGS, SIMPLE_TILE, TensorCores};
use crate::error::TilingError;
use crate::problem::{ActDType, LayoutKind, Problem, act_scale_group};

/// Largest block_m of the gemv variant.
pub const GEMV_MAX_M: u32 = 8;
/// Largest split-k factor.
pub const MAX_SPLIT_K: u32 = 16;

/// The kernel family a config runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Variant {
    /// sm_90a warpgroup MMA fed by TMA, warp-specialized producer, persistent when needed.
    Wgmma,
    /// sm_80+ warp-level `mma.sync` with a `cp.async` multistage pipeline.
    MmaSync,
    /// sm_75 `mma.sync` (m16n8k8 / m8n8k16) with register double buffering.
    Sm75Mma,
    /// CUDA-core tiled GEMM (any arch, any dtype).
    Simt,
    /// Matrix-vector kernel for tiny M: weights streamed to registers, activations in smem.
    Gemv,
    /// The minimal always-valid kernel: 16x16x16 tiles, 1 stage, 1 warp, predicated edges.
    Simple,
}

impl Variant {
    /// Every variant, in the order selection tries them (the most capable first).
    pub const ALL: [Variant; 6] =
        [Variant::Wgmma, Variant::MmaSync, Variant::Sm75Mma, Variant::Simt, Variant::Gemv, Variant::Simple];
    /// The variant's name as `qforge gemm-config` prints it (`wgmma`, `mma_sync`, `sm75_mma`,
    /// `simt`, `gemv`, `simple`).
    pub fn name(self) -> &'static str {
        match self {
            Variant::Wgmma => "wgmma",
            Variant::MmaSync => "mma_sync",
            Variant::Sm75Mma => "sm75_mma",
            Variant::Simt => "simt",
            Variant::Gemv => "gemv",
            Variant::Simple => "simple",
        }
    }
    /// True for the tensor-core variants.
    pub fn is_tensor(self) -> bool {
        matches!(self, Variant::Wgmma | Variant::MmaSync | Variant::Sm75Mma)
    }
}

/// Order in which output tiles are walked inside a swizzle group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Raster {
    /// Consecutive CTAs advance along M (down a column of output tiles).
    AlongM,
    /// Consecutive CTAs advance along N (across a row of output tiles).
    AlongN,
}

/// Why a candidate was not taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Reject {
    /// The variant needs a newer compute capability (wgmma: sm_90; mma_sync: sm_80; sm75_mma: sm_75).
    ArchUnsupported,
    /// The device has no tensor-core instruction for the problem's input kind (nor f16 as fallback).
    DtypeUnsupported,
    /// The tile, warp count or stage count does not fit the instruction shape / warp layout.
    InstrShape,
    /// `block_k` / `block_n` neither divides nor is a multiple of the format's block along K / N.
    BlockAlign,
    /// Split-k is 0, above [`MAX_SPLIT_K`], above the number of K tiles, or not 1 for `simple`.
    SplitK,
    /// Shared memory over the device's per-block opt-in limit.
    SmemExceeded,
    /// More threads than a block (or an SM) may have.
    ThreadsExceeded,
    /// More than 255 registers per thread, or more than the block's register file.
    RegsExceeded,
    /// Not one CTA fits on an SM (shared memory, threads, registers or block slots).
    NoOccupancy,
    /// The gemv variant for M above [`GEMV_MAX_M`].
    GemvLargeM,
    /// A tile edge much larger than the problem, which a smaller tile already covers.
    Oversized,
    /// More pipeline stages than the CTA has K iterations.
    StagesBeyondK,
    /// Its cost lower bound is already above the four best candidates so far (pruned).
    Dominated,
    /// A variant another one replaces on this device (sm75_mma on sm_80+: mma_sync with
    /// cp.async).
    Superseded,
}

impl Reject {
    /// Number of reject reasons (the length of [`Explanation::rejected`]).
    pub const COUNT: usize = 14;
    /// Every reason, in the order of [`Explanation::rejected`].
    pub const ALL: [Reject; Reject::COUNT] = [
        Reject::ArchUnsupported,
        Reject::DtypeUnsupported,
        Reject::InstrShape,
        Reject::BlockAlign,
        Reject::SplitK,
        Reject::SmemExceeded,
        Reject::ThreadsExceeded,
        Reject::RegsExceeded,
        Reject::NoOccupancy,
        Reject::GemvLargeM,
        Reject::Oversized,
        Reject::StagesBeyondK,
        Reject::Dominated,
        Reject::Superseded,
    ];
    /// One line saying why such a candidate was not taken (used by [`Config::explain`]).
    pub fn describe(self) -> &'static str {
        match self {
            Reject::ArchUnsupported => "variant needs a newer architecture",
            Reject::DtypeUnsupported => "no tensor-core instruction for this dtype on this device",
            Reject::InstrShape => "tile is not a multiple of the instruction shape / warp layout",
            Reject::BlockAlign => "block_k (or block_n) not aligned with the format's blocks",
            Reject::SplitK => "split-k larger than the number of K tiles",
            Reject::SmemExceeded => "shared memory exceeds the per-block opt-in limit",
            Reject::ThreadsExceeded => "more threads than a block may have",
            Reject::RegsExceeded => "accumulators need more registers than available",
            Reject::NoOccupancy => "not even one block fits on an SM",
            Reject::GemvLargeM => "gemv is only for M <= 8",
            Reject::Oversized => "tile much larger than the problem (a smaller tile covers it)",
            Reject::StagesBeyondK => "more pipeline stages than K iterations",
            Reject::Dominated => "cost lower bound already above the four best candidates",
            Reject::Superseded => "variant superseded on this device (sm75_mma by mma_sync)",
        }
    }
}

/// One entry of a candidate table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Tile {
    /// The kernel family.
    pub variant: Variant,
    /// Tile rows along M (output rows per CTA).
    pub bm: u32,
    /// Tile columns along N (output columns per CTA).
    pub bn: u32,
    /// Elements along K loaded per pipeline stage (one K iteration).
    pub bk: u32,
    /// Pipeline depth: K iterations in flight in shared memory.
    pub stages: u32,
    /// Warps per CTA.
    pub warps: u32,
}

/// Per-(problem, device) facts shared by all candidates.
pub(crate) struct Ctx<'a> {
    pub p: &'a Problem,
    pub d: &'a Device,
    pub sync_kind: Option<MmaKind>,
    pub wg_kind: Option<MmaKind>,
    pub sm75_kind: Option<MmaKind>,
    /// Selecting among the fused GEMM's instances ([`crate::FUSED_GEMM_TILES`]): their shared
    /// memory is the kernel's ([`crate::FusedTile::smem_bytes`]).
    pub fused: bool,
}

fn preferred_kind(p: &Problem) -> MmaKind {
    let int_weights = matches!(p.layout.kind, LayoutKind::Block | LayoutKind::Group);
    match p.act {
        ActDType::F16 => MmaKind::F16,
        ActDType::Bf16 => MmaKind::Bf16,
        ActDType::F32 => MmaKind::Tf32,
        ActDType::Int8 if int_weights => MmaKind::Int8,
        ActDType::Fp8 if p.layout.kind == LayoutKind::Grid => MmaKind::Fp8,
        // int8 / fp8 activations are exact in f16: upconvert when the weights are not of that kind.
        ActDType::Int8 | ActDType::Fp8 => MmaKind::F16,
    }
}

impl<'a> Ctx<'a> {
    pub fn new(p: &'a Problem, d: &'a Device) -> Ctx<'a> {
        let want = preferred_kind(p);
        let pick = |set: crate::device::KindSet| {
            let usable = |k: MmaKind| set.contains(k) && d.peaks.tensor(k) > 0.0;
            if usable(want) {
                Some(want)
            } else if matches!(want, MmaKind::Fp8 | MmaKind::Int8) && usable(MmaKind::F16) {
                Some(MmaKind::F16)
            } else {
                None
            }
        };
        let sm75_kind = pick(d.tensor.mma_sync).filter(|k| matches!(k, MmaKind::F16 | MmaKind::Int8));
        Ctx { p, d, sync_kind: pick(d.tensor.mma_sync), wg_kind: pick(d.tensor.wgmma), sm75_kind, fused: false }
    }

    pub fn kind(&self, v: Variant) -> Result<Option<MmaKind>, Reject> {
        let (ok_arch, kind) = match v {
            Variant::Wgmma => (self.d.cc_major == 9, self.wg_kind),
            Variant::MmaSync => (self.d.cc() >= 80, self.sync_kind),
            Variant::Sm75Mma => (self.d.cc() >= 75, self.sm75_kind),
            _ => return Ok(None),
        };
        if !ok_arch {
            return Err(Reject::ArchUnsupported);
        }
        kind.map(Some).ok_or(Reject::DtypeUnsupported)
    }

    /// Peak flops/µs of the best tensor kind for this problem (fp32 CUDA cores without one).
    pub fn ideal_rate(&self) -> f64 {
        let t =
            [self.wg_kind, self.sync_kind].into_iter().flatten().map(|k| self.d.peaks.tensor(k)).fold(0.0, f64::max);
        t.max(self.d.peaks.fp32) * 1e6
    }
}

/// Everything derived from one (tile, split-k) on one problem and device.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Plan {
    pub tile: Tile,
    pub split_k: u32,
    pub mma: Option<MmaKind>,
    pub smem: u64,
    pub regs: u32,
    pub ctas_per_sm: u64,
    pub tiles_mn: u64,
    pub tiles: u64,
    pub est: Estimate,
}

fn round_up(v: u64, to: u64) -> u64 {
    v.div_ceil(to) * to
}

/// Shared memory of a tile as `max(stages x per_stage, floor) + extra + stages x per_stage_fixed`.
/// Shared memory is allocated in multiples of this many bytes.
const SMEM_ALIGN: u64 = 128;
/// Threads of one warpgroup (4 warps: the unit a wgmma consumer runs in).
const WARPGROUP_THREADS: u64 = 4 * 32;

#[derive(Clone, Copy, Debug)]
pub(crate) struct SmemParts {
    per_stage: u64,
    floor: u64,
    extra: u64,
    barrier: u64,
}

impl SmemParts {
    pub fn bytes(&self, stages: u64) -> u64 {
        round_up((stages * self.per_stage).max(self.floor) + self.extra + stages * self.barrier, SMEM_ALIGN)
    }
}

fn smem_parts(t: &Tile, kind: Option<MmaKind>, p: &Problem) -> SmemParts {
    let (bm, bn, bk) = (t.bm as u64, t.bn as u64, t.bk as u64);
    let a = p.act.bytes();
    let w_stage = p.layout.slab_bytes(bn as f64, bk as f64).ceil() as u64;
    let group = act_scale_group(p.act);
    let a_scales = if group > 0 { bm * bk.div_ceil(group) * 4 } else { 0 };
    let per_stage = bm * bk * a + w_stage + a_scales;
    match t.variant {
        Variant::Simple => SmemParts { per_stage: bm * bk * a + bn * bk * 4, floor: 0, extra: 0, barrier: 0 },
        Variant::Gemv => SmemParts { per_stage: bm * bk * a + a_scales, floor: 0, extra: 0, barrier: 0 },
        Variant::Simt => SmemParts { per_stage, floor: bm * bn * 4, extra: bn * bk * 4, barrier: 0 },
        _ => {
            let kb = kind.map_or(2, |k| k.bytes());
            let dense_same = p.layout.kind == LayoutKind::Dense && p.layout.block_bytes == kb;
            // Grid values fed to the tensor cores as they are (8-bit floats on fp8 MMA).
            let direct = p.layout.kind == LayoutKind::Grid && kind == Some(MmaKind::Fp8);
            let decode = if dense_same || direct { 0 } else { bn * bk * kb };
            let barrier = if t.variant == Variant::Wgmma { 16 } else { 0 };
            SmemParts { per_stage, floor: bm * bn * p.out.bytes(), extra: decode, barrier }
        }
    }
}

/// The fused GEMM's shared memory (`FusedTile::smem_bytes`, for the instance's own stage
/// count) as [`SmemParts`].
fn fused_smem_parts(f: &crate::fused::FusedTile) -> SmemParts {
    SmemParts { per_stage: 0, floor: 0, extra: f.smem_bytes(), barrier: 0 }
}

fn regs_per_thread(t: &Tile, p: &Problem, kind: Option<MmaKind>) -> u64 {
    let (bm, bn, w) = (t.bm as u64, t.bn as u64, t.warps as u64);
    match t.variant {
        Variant::Simple => SIMPLE_REGS as u64,
        Variant::Wgmma => {
            let consumers = (bm / 64).clamp(1, 2);
            let acc = bm * bn / (consumers * WARPGROUP_THREADS);
            let promote = p.layout.kind == LayoutKind::Grid && kind == Some(MmaKind::Fp8);
            (if promote { acc * 3 / 2 } else { acc }) + 24
        }
        Variant::Gemv => bm * bn.div_ceil(w) + 40,
        Variant::Simt => bm * bn / (w * 32) + 32,
        Variant::MmaSync | Variant::Sm75Mma => bm * bn / (w * 32) + 40,
    }
}

/// Ops per weight to bring it into the multiply's input type.
fn decode_ops(p: &Problem, kind: Option<MmaKind>) -> f64 {
    match p.layout.kind {
        LayoutKind::Block | LayoutKind::Group => model::DEQUANT_OPS_QUANT,
        LayoutKind::Grid if kind == Some(MmaKind::Fp8) => 0.0,
        LayoutKind::Grid => model::DEQUANT_OPS_CONVERT,
        LayoutKind::Dense => {
            let same = match kind {
                None => p.layout.name == "f32",
                Some(MmaKind::Tf32) => p.layout.name == "f32",
                Some(k) => p.layout.name == k.name(),
            };
            if same { 0.0 } else { model::DEQUANT_OPS_CONVERT }
        }
    }
}

/// The stage-independent part of a candidate: checks and costs shared by all stage counts.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Shape {
    pub tile: Tile,
    pub split_k: u32,
    pub mma: Option<MmaKind>,
    pub smem: SmemParts,
    pub regs: u64,
    pub threads: u64,
    pub tiles_mn: u64,
    pub tiles: u64,
    pub k_iters: u64,
    pub tc: TileCost,
    pub dram: f64,
    pub reduce: f64,
    /// A lower bound of the predicted time whatever the stage count, µs.
    pub lower_bound_us: f64,
}

/// Check a (tile, split-k) against the problem and device and, when valid, cost it.
pub(crate) fn plan(t: &Tile, split_k: u32, cx: &Ctx) -> Result<Plan, Reject> {
    finish(&shape(t, split_k, cx)?, t.stages, cx)
}

/// Everything about a candidate that does not depend on `t.stages`.
pub(crate) fn shape(t: &Tile, split_k: u32, cx: &Ctx) -> Result<Shape, Reject> {
    let (p, d) = (cx.p, cx.d);
    let kind = cx.kind(t.variant)?;
    if t.bm == 0 || t.bn == 0 || t.bk == 0 || t.warps == 0 {
        return Err(Reject::InstrShape);
    }
    let (bm, bn, bk) = (t.bm as u64, t.bn as u64, t.bk as u64);
    // Instruction shape and warp layout.
    let shape_ok = match (t.variant, kind) {
        (Variant::Wgmma, Some(k)) => {
            let [im, imax, ik] = TensorCores::shape(k, true, false);
            let consumers = (t.bm / 64).clamp(1, 2);
            t.bm.is_multiple_of(im)
                && t.bn.is_multiple_of(8)
                && t.bn <= imax
                && t.bk.is_multiple_of(ik)
                && t.warps == 4 * (consumers + 1)
        }
        (Variant::MmaSync | Variant::Sm75Mma, Some(k)) => {
            let [im, inn, ik] = TensorCores::shape(k, false, t.variant == Variant::Sm75Mma);
            let im = im.max(16);
            t.bm.is_multiple_of(im)
                && t.bn.is_multiple_of(inn)
                && t.bk.is_multiple_of(ik)
                && t.warps.is_power_of_two()
                && bm * bn / t.warps as u64 >= (im * inn) as u64
        }
        (Variant::Simple, _) => t.bm == SIMPLE_TILE && t.bn == SIMPLE_TILE && t.bk == SIMPLE_TILE && t.warps == 1,
        (Variant::Gemv, _) => t.bm <= GEMV_MAX_M && t.bn.is_multiple_of(t.warps),
        (Variant::Simt, _) => t.bm >= 8 && t.bn >= 8 && bm * bn / t.warps as u64 >= 32,
        _ => false,
    };
    if !shape_ok {
        return Err(Reject::InstrShape);
    }
    // Alignment with the format's blocks (the simple kernel decodes element by element).
    if t.variant != Variant::Simple {
        let (kb, nb) = (p.layout.k_block, p.layout.n_block);
        if !(bk.is_multiple_of(kb) || kb.is_multiple_of(bk)) || !(bn.is_multiple_of(nb) || nb.is_multiple_of(bn)) {
            return Err(Reject::BlockAlign);
        }
    }
    let k_tiles = p.k.div_ceil(bk);
    if split_k == 0
        || split_k as u64 > k_tiles
        || split_k > MAX_SPLIT_K
        || (t.variant == Variant::Simple && split_k != 1)
    {
        return Err(Reject::SplitK);
    }
    let threads = t.warps as u64 * 32;
    if threads > d.max_threads_per_block as u64 || threads > d.max_threads_per_sm as u64 {
        return Err(Reject::ThreadsExceeded);
    }
    let regs = regs_per_thread(t, p, kind);
    if regs > 255 || regs * threads > d.regs_per_block as u64 {
        return Err(Reject::RegsExceeded);
    }
    // Cost.
    let sms = d.sm_count as f64;
    let (mf, nf, kf) = (p.m as f64, p.n as f64, p.k as f64);
    let (bmf, bnf, bkf) = (bm as f64, bn as f64, bk as f64);
    let fp32_sm = d.peaks.fp32 * 1e6 / sms; // flops per µs per SM
    let rate = match (t.variant, kind) {
        (Variant::Simple, _) => fp32_sm * model::EFF_SIMPLE,
        (Variant::Gemv, _) => fp32_sm * model::EFF_GEMV,
        (Variant::Simt, _) | (_, None) => fp32_sm * model::EFF_SIMT,
        (v, Some(k)) => {
            let peak_sm = d.peaks.tensor(k) * 1e6 / sms;
            let (eff, wm, wn) = match v {
                Variant::Wgmma => {
                    let c = (bm / 64).clamp(1, 2) as f64;
                    (model::EFF_WGMMA, bmf / c, bnf)
                }
                _ => {
                    let area = bmf * bnf / t.warps as f64;
                    let wm = area.sqrt().min(bmf);
                    let eff = match v {
                        Variant::Sm75Mma => model::EFF_SM75,
                        _ if d.cc_major == 9 => model::EFF_MMA_SYNC_ON_SM90,
                        _ => model::EFF_MMA_SYNC,
                    };
                    (eff, wm, area / wm)
                }
            };
            let tile_eff = (wm * wn / (wm + wn) / model::WARP_TILE_FULL).min(1.0);
            peak_sm * eff * tile_eff
        }
    };
    // qforge's fused GEMM (gemm_tiled.cuh) produces every k-step on the warps that run the
    // mma: each weight decoded by its format's chunk decode (fp8 grids included: a scale per
    // chunk) and each activation rounded, per CTA (calibrated on an H200, docs/tiling.md).
    let produce = if cx.fused {
        (bnf * model::FUSED_DECODE_OPS + bmf * model::FUSED_ACT_OPS) * bkf
    } else {
        bnf * bkf * decode_ops(p, kind)
    };
    let t_compute = 2.0 * bmf * bnf * bkf / rate + produce / (fp32_sm / 2.0);
    let mut bytes_iter = bmf * bkf * p.act.bytes() as f64 + p.layout.slab_bytes(bnf, bkf);
    if t.variant == Variant::Wgmma {
        bytes_iter *= 1.0 - model::WGMMA_MULTICAST_SAVING;
    }
    let acc_bytes = if split_k > 1 { 4.0 } else { p.out.bytes() as f64 };
    let tc = TileCost { t_compute, bytes_iter, bytes_epilogue: bmf * bnf * acc_bytes, stages: 1.0 };
    let (mt, nt) = (p.m.div_ceil(bm), p.n.div_ceil(bn));
    let tiles_mn = mt * nt;
    let tiles = tiles_mn * split_k as u64;
    let k_iters = k_tiles.div_ceil(split_k as u64);
    let w_total = p.layout.slab_bytes(nf, kf);
    let a_total = mf * kf * p.act.bytes() as f64;
    let l2 = d.l2_bytes as f64 * model::L2_RESIDENT_FRACTION;
    let side = (d.sm_count as f64).sqrt().max(1.0);
    let w_reads = if w_total <= l2 { 1.0 } else { (mt as f64 / side).ceil().max(1.0) };
    let a_reads = if a_total <= l2 { 1.0 } else { (nt as f64 / side).ceil().max(1.0) };
    let mn = mf * nf;
    let c_bytes = if split_k > 1 { mn * 4.0 * split_k as f64 } else { mn * p.out.bytes() as f64 };
    let dram = w_total * w_reads + a_total * a_reads + c_bytes;
    let reduce = if split_k > 1 { mn * 4.0 * split_k as f64 + mn * p.out.bytes() as f64 } else { 0.0 };
    let l2_burst = d.mem_bandwidth_gbs * 1e3 * model::L2_BW_FACTOR * model::SM_BW_BURST;
    let per_tile = k_iters as f64 * tiles as f64;
    let lower_bound_us = (dram / (d.mem_bandwidth_gbs * 1e3))
        .max(per_tile * tc.t_compute / d.sm_count as f64)
        .max(per_tile * tc.bytes_iter / l2_burst)
        + model::LAUNCH_US
        + if reduce > 0.0 { model::REDUCE_LAUNCH_US } else { 0.0 };
    let smem = match crate::fused::FusedTile::of(t) {
        Some(f) if cx.fused => fused_smem_parts(f),
        _ => smem_parts(t, kind, p),
    };
    Ok(Shape {
        tile: *t,
        split_k,
        mma: kind,
        smem,
        regs,
        threads,
        tiles_mn,
        tiles,
        k_iters,
        tc,
        dram,
        reduce,
        lower_bound_us,
    })
}

/// Complete a [`Shape`] with a stage count: shared memory, occupancy, predicted time.
pub(crate) fn finish(s: &Shape, stages: u32, cx: &Ctx) -> Result<Plan, Reject> {
    let d = cx.d;
    if stages == 0 || (s.tile.variant == Variant::Simple && stages != 1) {
        return Err(Reject::InstrShape);
    }
    let smem = s.smem.bytes(stages as u64);
    if smem > d.smem_per_block_optin {
        return Err(Reject::SmemExceeded);
    }
    let ctas_per_sm = (d.max_blocks_per_sm as u64)
        .min(d.smem_per_sm / (smem + d.reserved_smem_per_block))
        .min(d.max_threads_per_sm as u64 / s.threads)
        .min(d.regs_per_sm as u64 / (s.regs * s.threads));
    if ctas_per_sm == 0 {
        return Err(Reject::NoOccupancy);
    }
    let tc = TileCost { stages: stages as f64, ..s.tc };
    let est = cost::estimate(d, &tc, s.tiles, ctas_per_sm, s.k_iters, s.dram, s.reduce);
    let tile = Tile { stages, ..s.tile };
    Ok(Plan {
        tile,
        split_k: s.split_k,
        mma: s.mma,
        smem,
        regs: s.regs as u32,
        ctas_per_sm,
        tiles_mn: s.tiles_mn,
        tiles: s.tiles,
        est,
    })
}

/// A runner-up or the winner, in brief.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Candidate {
    /// Tile, stages and warps.
    pub tile: Tile,
    /// Slices K is split into (1 = no split-k).
    pub split_k: u32,
    /// Dynamic shared memory per CTA, bytes.
    pub smem_bytes: u64,
    /// Predicted kernel time (split-k reduction included), µs.
    pub predicted_us: f64,
}

/// Why the winner won: how many candidates were evaluated, rejected (by reason) and the best
/// runner-ups.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Explanation {
    /// Valid candidates costed (the winner included).
    pub evaluated: u32,
    /// Candidates rejected, per reason, indexed as [`Reject::ALL`].
    pub rejected: [u32; Reject::COUNT],
    /// The next best valid candidates, best first (`None` where there were fewer).
    pub runner_ups: [Option<Candidate>; 3],
    /// Roofline time: max(flops / best peak, compulsory bytes / bandwidth) + launch, µs.
    pub ideal_us: f64,
}

/// The chosen GEMM configuration.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Config {
    /// The kernel family.
    pub variant: Variant,
    /// Tile rows along M (output rows per CTA).
    pub block_m: u32,
    /// Tile columns along N (output columns per CTA).
    pub block_n: u32,
    /// Elements along K per K iteration (a multiple or a divisor of the format's block along K,
    /// except for `simple`).
    pub block_k: u32,
    /// Pipeline depth: K iterations in flight in shared memory.
    pub stages: u32,
    /// Warps per CTA.
    pub warps: u32,
    /// Slices K is split into; above 1, partial sums go to an f32 workspace and a second launch
    /// reduces them.
    pub split_k: u32,
    /// Direction in which CTAs walk the output tiles.
    pub raster: Raster,
    /// Tiles per swizzle group along the shorter side (1 = plain raster).
    pub swizzle: u32,
    /// Persistent CTAs loop over tiles (tile count above the grid limit, or wgmma with more than one wave).
    pub persistent: bool,
    /// CTAs launched.
    pub grid: u64,
    /// Tensor-core input type, `None` for CUDA-core variants.
    pub mma: Option<MmaKind>,
    /// Chosen by [`select_fused`](crate::select_fused): one of qforge-cuda's fused GEMM
    /// instances ([`FUSED_GEMM_TILES`](crate::FUSED_GEMM_TILES)), whose shared memory and
    /// production cost are the kernel's, not the general table's (a tile shape can be both).
    pub fused: bool,
    /// Dynamic shared memory per CTA, bytes (rounded up to 128).
    pub smem_bytes: u64,
    /// Registers per thread the model assumes (accumulators plus a fixed overhead).
    pub regs_per_thread: u32,
    /// CTAs resident per SM (the tightest of shared memory, threads, registers and block slots).
    pub ctas_per_sm: u32,
    /// Output tiles times split-k.
    pub tiles: u64,
    /// tiles / (SMs x CTAs per SM).
    pub waves: f64,
    /// Fraction of launched wave slots doing work.
    pub wave_efficiency: f64,
    /// Roofline time / predicted time.
    pub efficiency: f64,
    /// Predicted kernel time (split-k reduction included), µs.
    pub predicted_us: f64,
    /// What limits the predicted time.
    pub bound: Bound,
    /// Why this config won (see [`Config::explain`]).
    pub explanation: Explanation,
}

impl Config {
    pub(crate) fn from_plan(pl: &Plan, cx: &Ctx, explanation: Explanation) -> Config {
        let d = cx.d;
        let t = pl.tile;
        let conc = d.sm_count as u64 * pl.ctas_per_sm;
        let waves = pl.tiles as f64 / conc as f64;
        let wave_efficiency = waves / waves.ceil();
        let (mt, nt) = (cx.p.m.div_ceil(t.bm as u64), cx.p.n.div_ceil(t.bn as u64));
        let raster = if nt >= mt { Raster::AlongN } else { Raster::AlongM };
        let swizzle = if pl.tiles_mn <= conc { 1 } else { 8u64.min(mt.min(nt)).max(1) as u32 };
        let too_big = pl.tiles_mn > d.max_grid_x || pl.split_k > 65535;
        let persistent = too_big || (t.variant == Variant::Wgmma && pl.tiles > conc);
        let grid = if persistent { pl.tiles.min(conc).min(d.max_grid_x) } else { pl.tiles };
        Config {
            variant: t.variant,
            block_m: t.bm,
            block_n: t.bn,
            block_k: t.bk,
            stages: t.stages,
            warps: t.warps,
            split_k: pl.split_k,
            raster,
            swizzle: swizzle.next_power_of_two().min(8),
            persistent,
            grid,
            mma: pl.mma,
            fused: cx.fused,
            smem_bytes: pl.smem,
            regs_per_thread: pl.regs,
            ctas_per_sm: pl.ctas_per_sm as u32,
            tiles: pl.tiles,
            waves,
            wave_efficiency,
            efficiency: (explanation.ideal_us / pl.est.time_us).min(1.0),
            predicted_us: pl.est.time_us,
            bound: pl.est.bound,
            explanation,
        }
    }

    /// The config's tile, stages and warps as a [`Tile`].
    pub fn tile(&self) -> Tile {
        Tile {
            variant: self.variant,
            bm: self.block_m,
            bn: self.block_n,
            bk: self.block_k,
            stages: self.stages,
            warps: self.warps,
        }
    }

    /// Check that this config runs `p` on `d`: the device and problem are valid, tiles,
    /// stages, warps and split-k are >= 1 and fit the instruction shapes and the format's
    /// blocks, shared memory fits the opt-in limit, registers and threads fit, at least one
    /// CTA fits an SM, and the grid is within the device's limits.
    pub fn validate(&self, p: &Problem, d: &Device) -> Result<(), TilingError> {
        p.check()?;
        d.check()?;
        let bad = |reason: String| Err(TilingError::InvalidConfig { reason });
        if self.fused && crate::fused::FusedTile::of(&self.tile()).is_none() {
            return bad(format!("{} {}: no fused GEMM instance", self.variant.name(), self.shape_str()));
        }
        let cx = Ctx { fused: self.fused, ..Ctx::new(p, d) };
        let pl = match plan(&self.tile(), self.split_k, &cx) {
            Ok(pl) => pl,
            Err(r) => return bad(format!("{} {}: {}", self.variant.name(), self.shape_str(), r.describe())),
        };
        if pl.smem != self.smem_bytes {
            return bad(format!("smem_bytes {} but the tile needs {}", self.smem_bytes, pl.smem));
        }
        if self.smem_bytes > d.smem_per_block_optin {
            return bad(format!("smem_bytes {} over the device's {}", self.smem_bytes, d.smem_per_block_optin));
        }
        if self.tiles != pl.tiles || self.mma != pl.mma {
            return bad("tile count or MMA kind does not match the problem".into());
        }
        if self.persistent && (self.grid == 0 || self.grid > d.max_grid_x) {
            return bad(format!("persistent grid of {} CTAs outside 1..={}", self.grid, d.max_grid_x));
        }
        if !self.persistent && (pl.tiles_mn > d.max_grid_x || self.split_k > 65535 || self.grid != self.tiles) {
            return bad(format!("{} tiles need persistent scheduling", pl.tiles_mn));
        }
        if !(self.predicted_us.is_finite() && self.predicted_us > 0.0) {
            return bad(format!("predicted time {} is not a positive number", self.predicted_us));
        }
        Ok(())
    }

    fn shape_str(&self) -> String {
        format!(
            "{}x{}x{} s{} w{} sk{}",
            self.block_m, self.block_n, self.block_k, self.stages, self.warps, self.split_k
        )
    }

    /// One line: variant, tile, stages, warps, split-k, smem, waves, efficiency, time.
    pub fn summary(&self) -> String {
        format!(
            "{} {}x{}x{} stages={} warps={} split_k={} smem={}B waves={:.2} eff={:.0}% ~{:.1}us ({}-bound{})",
            self.variant.name(),
            self.block_m,
            self.block_n,
            self.block_k,
            self.stages,
            self.warps,
            self.split_k,
            self.smem_bytes,
            self.waves,
            self.efficiency * 100.0,
            self.predicted_us,
            self.bound.name(),
            if self.persistent { ", persistent" } else { "" },
        )
    }

    /// A readable account of why this config won and what was rejected.
    pub fn explain(&self) -> String {
        let e = &self.explanation;
        let mut s = format!(
            "chose {} {}x{}x{}, {} stage(s), {} warps, split-k {}{}: predicted {:.2} us, {}-bound, \
             {:.2} waves ({:.0}% of wave slots used, {} CTA(s)/SM, {} regs/thread), {:.0}% of the roofline ({:.2} us)\n",
            self.variant.name(),
            self.block_m,
            self.block_n,
            self.block_k,
            self.stages,
            self.warps,
            self.split_k,
            self.mma.map_or(" on CUDA cores".to_string(), |k| format!(" ({} tensor cores)", k.name())),
            self.predicted_us,
            self.bound.name(),
            self.waves,
            self.wave_efficiency * 100.0,
            self.ctas_per_sm,
            self.regs_per_thread,
            self.efficiency * 100.0,
            e.ideal_us
        );
        s += &format!(
            "raster {:?}, swizzle {}, {} grid of {} CTAs, {} bytes of shared memory\n",
            self.raster,
            self.swizzle,
            if self.persistent { "persistent" } else { "one-tile-per-CTA" },
            self.grid,
            self.smem_bytes
        );
        s += &format!("why: lowest predicted time of {} valid candidates", e.evaluated);
        for c in e.runner_ups.iter().flatten() {
            s += &format!(
                "\n  runner-up: {} {}x{}x{} s{} w{} split-k {}: {:.2} us (+{:.1}%)",
                c.tile.variant.name(),
                c.tile.bm,
                c.tile.bn,
                c.tile.bk,
                c.tile.stages,
                c.tile.warps,
                c.split_k,
                c.predicted_us,
                (c.predicted_us / self.predicted_us - 1.0) * 100.0
            );
        }
        let total: u32 = e.rejected.iter().sum();
        s += &format!("\nrejected {total} candidate(s)");
        for (r, n) in Reject::ALL.iter().zip(e.rejected) {
            if n > 0 {
                s += &format!("\n  {n:>5}  {}", r.describe());
            }
        }
        s
    }
}
