//! Candidate tables (enumerated once), the selection loop and the per-device cache.

use crate::config::{Candidate, Config, Ctx, Explanation, Plan, Reject, Tile, Variant, finish, plan, shape};
use crate::cost::model;
use crate::device::{Device, SIMPLE_TILE};
use crate::error::TilingError;
use crate::problem::Problem;
use std::collections::HashMap;
use std::sync::{OnceLock, RwLock};

/// The candidates of one variant, with the smallest tile edges (which are never "oversized").
pub(crate) struct Table {
    pub tiles: Vec<Tile>,
    pub min: [u32; 3],
}

fn table(
    variant: Variant,
    bms: &[u32],
    bns: &[u32],
    bks: &[u32],
    stages: u32,
    warps: impl Fn(u32, u32) -> u32,
) -> Table {
    let mut tiles = Vec::new();
    for &bm in bms {
        for &bn in bns {
            for &bk in bks {
                for s in 1..=stages {
                    tiles.push(Tile { variant, bm, bn, bk, stages: s, warps: warps(bm, bn) });
                }
            }
        }
    }
    let min = |v: &[u32]| v.iter().copied().min().unwrap_or(1);
    Table { tiles, min: [min(bms), min(bns), min(bks)] }
}

fn pow2_warps(area_per_warp: u32) -> impl Fn(u32, u32) -> u32 {
    move |bm, bn| (bm * bn / area_per_warp).clamp(1, 8).next_power_of_two().min(8)
}

/// The candidate table of a variant (built on first use, then shared).
pub fn candidates(v: Variant) -> &'static [Tile] {
    &tables()[v as usize].tiles
}

/// The fused GEMM's instances as a candidate table of the mma_sync variant.
fn fused_table() -> &'static Table {
    static T: OnceLock<Table> = OnceLock::new();
    T.get_or_init(|| {
        // The skinny instances are chosen by M alone ([`skinny_plan`]), not by the cost model.
        let tiles: Vec<Tile> = crate::fused::FUSED_GEMM_TILES.iter().filter(|f| !f.skinny).map(|f| f.tile()).collect();
        let min = |e: fn(&Tile) -> u32| tiles.iter().map(e).min().unwrap_or(1);
        let min = [min(|t| t.bm), min(|t| t.bn), min(|t| t.bk)];
        Table { tiles, min }
    })
}

fn tables() -> &'static [Table; 6] {
    static T: OnceLock<[Table; 6]> = OnceLock::new();
    T.get_or_init(|| {
        let wg_warps = |bm: u32, _| 4 * ((bm / 64).clamp(1, 2) + 1);
        [
            table(Variant::Wgmma, &[64, 128, 256], &[32, 64, 128, 256], &[32, 64, 128], 8, wg_warps),
            table(
                Variant::MmaSync,
                &[16, 32, 64, 128, 256],
                &[16, 32, 64, 128, 256],
                &[32, 64, 128],
                6,
                pow2_warps(2048),
            ),
            table(Variant::Sm75Mma, &[16, 32, 64, 128], &[16, 32, 64, 128], &[32, 64], 2, pow2_warps(2048)),
            table(Variant::Simt, &[16, 32, 64, 128], &[16, 32, 64, 128], &[8, 16, 32], 2, pow2_warps(1024)),
            table(Variant::Gemv, &[1, 2, 4, 8], &[8, 16, 32, 64, 128], &[64, 128, 256, 512], 2, |_, _| 4),
            table(Variant::Simple, &[SIMPLE_TILE], &[SIMPLE_TILE], &[SIMPLE_TILE], 1, |_, _| 1),
        ]
    })
}

const SPLITS: [u32; 5] = [1, 2, 4, 8, 16];

/// The best plans seen so far, fastest first, distinct by (variant, tile shape, split-k).
struct Top([Option<Plan>; 4]);

impl Top {
    fn key(p: &Plan) -> (Variant, u32, u32, u32, u32) {
        (p.tile.variant, p.tile.bm, p.tile.bn, p.tile.bk, p.split_k)
    }
    /// The time of the 4th best, once four are known.
    fn worst(&self) -> Option<f64> {
        self.0[3].map(|p| p.est.time_us)
    }
    fn offer(&mut self, pl: Plan) {
        let t = pl.est.time_us;
        if let Some(i) = self.0.iter().position(|e| e.is_some_and(|e| Self::key(&e) == Self::key(&pl))) {
            if self.0[i].is_some_and(|e| t < e.est.time_us) {
                self.0[i] = None;
                self.0[i..].rotate_left(1);
            } else {
                return;
            }
        }
        let pos = self.0.iter().position(|e| e.is_none_or(|e| t < e.est.time_us));
        if let Some(pos) = pos {
            self.0[pos..].rotate_right(1);
            self.0[pos] = Some(pl);
        }
    }
}

fn oversized(b: u32, dim: u64, min: u32) -> bool {
    b as u64 > (min as u64).max(dim.next_power_of_two())
}

/// Select the config for `p` on `d`. Total on valid input: the `simple` kernel fits every
/// valid device, so the candidate set is never empty; invalid input is a typed error.
pub fn select(p: &Problem, d: &Device) -> Result<Config, TilingError> {
    p.check()?;
    d.check()?;
    select_checked(p, d)
}

/// Select the config of qforge-cuda's fused GEMM (`qforge_gemm_<format>_<mma>_<out>_<tile>`)
/// for `p` on `d`: the same cost model over [`FUSED_GEMM_TILES`](crate::FUSED_GEMM_TILES)
/// only, with split-k as for [`select`]. Every config it returns is one of those instances
/// ([`FusedTile::of`](crate::FusedTile::of) finds it). A stage count above the K iterations
/// is not a reject here: the kernel's pipeline is predicated.
///
/// # Errors
///
/// As [`select`]; [`TilingError::NoFusedKernel`] when the device has no f16 / bf16
/// `mma.sync` (below sm_80), the activations are not f16 / bf16 (the tensor-core input
/// type), or no instance fits the device.
pub fn select_fused(p: &Problem, d: &Device) -> Result<Config, TilingError> {
    p.check()?;
    d.check()?;
    select_in(p, d, true)
}

/// The fused GEMM's skinny plan for `p` (M ≤ [`SKINNY_MAX_M`](crate::SKINNY_MAX_M)): the
/// smallest skinny instance whose token tile holds M (the largest one, tiled over M, past
/// it), with K split so that about [`SKINNY_CTAS_PER_SM`](crate::SKINNY_CTAS_PER_SM) CTAs run
/// on every multiprocessor (at most one split per K step and [`MAX_SPLIT_K`]). `None` where
/// the instance does not fit the problem or the device (the tiled instances take over).
fn skinny_plan(p: &Problem, d: &Device, cx: &Ctx) -> Option<Plan> {
    use crate::fused::{FUSED_GEMM_TILES, SKINNY_MAX_M};
    if p.m > SKINNY_MAX_M {
        return None;
    }
    let skinny = || FUSED_GEMM_TILES.iter().filter(|f| f.skinny);
    let f = skinny().filter(|f| f.bm as u64 >= p.m).min_by_key(|f| f.bm).or_else(|| skinny().max_by_key(|f| f.bm))?;
    plan(&f.tile(), skinny_split(f, p.m, p.n, p.k, d.sm_count), cx).ok()
}

/// The K splits of skinny instance `f` for an m × n × k GEMM on `sm_count` multiprocessors:
/// about [`SKINNY_CTAS_PER_SM`](crate::SKINNY_CTAS_PER_SM) CTAs on each, at most one split per
/// K step of the instance and [`MAX_SPLIT_K`](crate::MAX_SPLIT_K).
pub fn skinny_split(f: &crate::FusedTile, m: u64, n: u64, k: u64, sm_count: u32) -> u32 {
    let ctas = (m.div_ceil(f.bm as u64) * n.div_ceil(f.bn as u64)).max(1);
    let k_steps = k.div_ceil(f.bk as u64).max(1);
    let split = crate::SKINNY_CTAS_PER_SM * sm_count as u64 / ctas;
    split.clamp(1, k_steps.min(crate::config::MAX_SPLIT_K as u64)) as u32
}

fn select_checked(p: &Problem, d: &Device) -> Result<Config, TilingError> {
    select_in(p, d, false)
}

fn select_in(p: &Problem, d: &Device, fused: bool) -> Result<Config, TilingError> {
    let cx = Ctx { fused, ..Ctx::new(p, d) };
    let mut rejected = [0u32; Reject::COUNT];
    let mut evaluated = 0u32;
    let mut top = Top([None; 4]);
    let tabs = tables();
    let no_fused = |reason: String| Err(TilingError::NoFusedKernel { device: d.name.clone(), reason });
    if fused {
        if !matches!(p.act, crate::problem::ActDType::F16 | crate::problem::ActDType::Bf16) {
            return no_fused(format!("{} activations: its tensor-core input is f16 or bf16", p.act.name()));
        }
        if let Err(r) = cx.kind(Variant::MmaSync) {
            return no_fused(format!("mma_sync: {}", r.describe()));
        }
    } else {
        // The baseline: the always-valid simple kernel.
        match plan(&tabs[Variant::Simple as usize].tiles[0], 1, &cx) {
            Ok(pl) => {
                evaluated += 1;
                top.offer(pl);
            }
            Err(r) => {
                // Unreachable for a device that passed `check`, but never a panic.
                return Err(TilingError::DeviceTooSmall {
                    name: d.name.clone(),
                    reason: format!("the simple kernel does not fit: {}", r.describe()),
                });
            }
        }
    }
    if fused && let Some(pl) = skinny_plan(p, d, &cx) {
        evaluated += 1;
        top.offer(pl);
    }
    let cc = d.cc();
    let variants: &[Variant] = if fused && evaluated > 0 {
        // The skinny plan is the fused GEMM's choice for this M.
        &[]
    } else if fused {
        &[Variant::MmaSync]
    } else {
        &[Variant::Wgmma, Variant::MmaSync, Variant::Sm75Mma, Variant::Simt, Variant::Gemv]
    };
    for &v in variants {
        let tab = if fused { fused_table() } else { &tabs[v as usize] };
        if v == Variant::Sm75Mma && cc >= 80 {
            // Superseded by mma_sync with cp.async: counted, so the explanation covers every
            // candidate of every table.
            rejected[Reject::Superseded as usize] += tab.tiles.len() as u32;
            continue;
        }
        if let Err(r) = cx.kind(v) {
            rejected[r as usize] += tab.tiles.len() as u32;
            continue;
        }
        if v == Variant::Gemv && p.m > crate::config::GEMV_MAX_M as u64 {
            rejected[Reject::GemvLargeM as usize] += tab.tiles.len() as u32;
            continue;
        }
        for group in tab.tiles.chunk_by(|a, b| (a.bm, a.bn, a.bk, a.warps) == (b.bm, b.bn, b.bk, b.warps)) {
            let t = &group[0];
            let n = group.len() as u32;
            if oversized(t.bm, p.m, tab.min[0]) || oversized(t.bn, p.n, tab.min[1]) || oversized(t.bk, p.k, tab.min[2])
            {
                rejected[Reject::Oversized as usize] += n;
                continue;
            }
            let k_tiles = p.k.div_ceil(t.bk as u64);
            let one_wave = p.m.div_ceil(t.bm as u64) * p.n.div_ceil(t.bn as u64) < d.sm_count as u64;
            for &sk in &SPLITS {
                if sk > 1 && (!one_wave || k_tiles < 2 * sk as u64) {
                    break;
                }
                let sh = match shape(t, sk, &cx) {
                    Ok(sh) => sh,
                    Err(r) => {
                        rejected[r as usize] += n;
                        continue;
                    }
                };
                if top.worst().is_some_and(|w| sh.lower_bound_us >= w) {
                    rejected[Reject::Dominated as usize] += n;
                    continue;
                }
                let k_iters = sh.k_iters;
                for (i, t) in group.iter().enumerate() {
                    if !fused && t.stages > 1 && t.stages as u64 > k_iters {
                        rejected[Reject::StagesBeyondK as usize] += 1;
                        continue;
                    }
                    match finish(&sh, t.stages, &cx) {
                        Ok(pl) => {
                            evaluated += 1;
                            top.offer(pl);
                        }
                        Err(Reject::SmemExceeded) => {
                            // Shared memory grows with the stage count: the rest exceed too.
                            rejected[Reject::SmemExceeded as usize] += (group.len() - i) as u32;
                            break;
                        }
                        Err(r) => rejected[r as usize] += 1,
                    }
                }
            }
        }
    }
    let bytes = p.layout.slab_bytes(p.n as f64, p.k as f64)
        + p.m as f64 * p.k as f64 * p.act.bytes() as f64
        + p.m as f64 * p.n as f64 * p.out.bytes() as f64;
    let ideal_us = (p.flops() / cx.ideal_rate()).max(bytes / (d.mem_bandwidth_gbs * 1e3)) + model::LAUNCH_US;
    let cand = |pl: &Option<Plan>| {
        pl.map(|pl| Candidate { tile: pl.tile, split_k: pl.split_k, smem_bytes: pl.smem, predicted_us: pl.est.time_us })
    };
    let explanation =
        Explanation { evaluated, rejected, runner_ups: [cand(&top.0[1]), cand(&top.0[2]), cand(&top.0[3])], ideal_us };
    match &top.0[0] {
        Some(best) => Ok(Config::from_plan(best, &cx, explanation)),
        None if fused => no_fused("no instance fits the device".into()),
        None => Err(TilingError::DeviceTooSmall { name: d.name.clone(), reason: "no candidate fits".into() }),
    }
}

/// Entries the per-device cache holds before it starts over.
pub const CACHE_CAPACITY: usize = 8192;

/// A validated device with a thread-safe cache of selected configs per problem
/// (shape, layout, dtypes). Share one per device (`&Planner` is `Sync`).
pub struct Planner {
    device: Device,
    cache: RwLock<HashMap<Problem, Config>>,
}

impl Planner {
    /// A planner for `device`, with an empty cache.
    ///
    /// # Errors
    ///
    /// [`TilingError::DeviceTooSmall`] when `device` fails [`Device::check`].
    pub fn new(device: Device) -> Result<Planner, TilingError> {
        device.check()?;
        Ok(Planner { device, cache: RwLock::new(HashMap::new()) })
    }

    /// A planner for a built-in device name.
    pub fn builtin(name: &str) -> Result<Planner, TilingError> {
        Planner::new(Device::builtin(name)?)
    }

    /// The (validated) device this planner selects for.
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// [`select`] with a cache. A poisoned lock only disables the cache.
    pub fn select(&self, p: &Problem) -> Result<Config, TilingError> {
        p.check()?;
        if let Some(c) = self.cache.read().ok().and_then(|c| c.get(p).copied()) {
            return Ok(c);
        }
        let c = select_checked(p, &self.device)?;
        if let Ok(mut cache) = self.cache.write() {
            if cache.len() >= CACHE_CAPACITY {
                cache.clear();
            }
            cache.insert(*p, c);
        }
        Ok(c)
    }

    /// [`select_fused`], uncached (a fused selection is a few instances).
    pub fn select_fused(&self, p: &Problem) -> Result<Config, TilingError> {
        p.check()?;
        select_in(p, &self.device, true)
    }

    /// Number of cached configs.
    pub fn cached(&self) -> usize {
        self.cache.read().map_or(0, |c| c.len())
    }
}
