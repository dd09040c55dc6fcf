//! The fused GEMM's kernel instances: the only configs [`select_fused`](crate::select_fused)
//! returns. qforge-cuda generates one kernel per entry (per format and type pair) from this
//! table, so every config the tiler can return for the fused GEMM has a kernel, and a config
//! added here gets its kernels with no other change.

use crate::config::{Tile, Variant};

/// One kernel instance of the fused GEMM (`qf_gemm_cfg<BM, BN, BK, WM, WN, STAGES>` in
/// qforge-cuda's `kernels-cuda/gemm.cuh`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FusedTile {
    /// Activation rows (of M) per CTA.
    pub bm: u32,
    /// Weight rows (of N) per CTA.
    pub bn: u32,
    /// K elements per main-loop step (a multiple of 16, the mma's k, and of every format's
    /// decode chunk).
    pub bk: u32,
    /// Warps along M.
    pub wm: u32,
    /// Warps along N.
    pub wn: u32,
    /// Pipeline depth: the tiled instances keep 2 phases of raw weight bytes (256 K elements
    /// each) in flight in shared memory; the skinny ones 1.
    pub stages: u32,
    /// The skinny kernel (`qf_gemms_tile`, small M): `bm` activation rows (tokens) and `bn`
    /// weight rows per CTA with the product computed transposed (weights as the mma's A,
    /// decoded straight into fragments in registers, never through shared memory), the
    /// activations of `bk` K elements at a time in shared memory; `wm` is 1, `stages` 1.
    pub skinny: bool,
}

/// Padding of a shared-memory row of the f16 / bf16 operand tiles, in 16-bit elements (16
/// bytes: `ldmatrix` row addresses stay 16-byte aligned and rows fall in different banks).
pub const FUSED_ROW_PAD: u32 = 8;

impl FusedTile {
    /// Warps per CTA.
    pub const fn warps(&self) -> u32 {
        self.wm * self.wn
    }

    /// Threads per CTA.
    pub const fn threads(&self) -> u32 {
        32 * self.warps()
    }

    /// The instance's name, part of its kernels' entry points: `64x64x32_w2x2_s2`.
    pub fn name(&self) -> String {
        if self.skinny {
            format!("skinny{}x{}x{}_w{}", self.bm, self.bn, self.bk, self.wn)
        } else {
            format!("{}x{}x{}_w{}x{}_s{}", self.bm, self.bn, self.bk, self.wm, self.wn, self.stages)
        }
    }

    /// Shared memory of one CTA (dynamic), bytes. Tiled: `stages` phases of raw weight bytes
    /// ([`SKINNY_ROW_BYTES`] per weight row each) and two k-steps of f16 / bf16 activations and
    /// decoded weights, rows padded by [`FUSED_ROW_PAD`]. Skinny: `bm` × `bk` activations as
    /// f16 / bf16 and one phase of raw weight bytes.
    pub const fn smem_bytes(&self) -> u64 {
        let (bm, bn, bk) = (self.bm as u64, self.bn as u64, self.bk as u64);
        if self.skinny {
            return bm * bk * 2 + bn * SKINNY_ROW_BYTES;
        }
        self.stages as u64 * bn * SKINNY_ROW_BYTES + 2 * (bm + bn) * (bk + FUSED_ROW_PAD as u64) * 2
    }

    /// The tiler's candidate for this instance.
    pub const fn tile(&self) -> Tile {
        Tile {
            variant: Variant::MmaSync,
            bm: self.bm,
            bn: self.bn,
            bk: self.bk,
            stages: self.stages,
            warps: self.warps(),
        }
    }

    /// The instance a tiler tile (or config) runs on, if it is one.
    pub fn of(t: &Tile) -> Option<&'static FusedTile> {
        FUSED_GEMM_TILES.iter().find(|f| f.tile() == *t)
    }
}

/// Every kernel instance of the fused GEMM, the first the general one (the host checks run
/// every shape on it). Kept small: each entry is two kernels per format (f16 and bf16
/// tensor-core inputs; the output type is an argument) in every module's PTX. All take
/// dynamic shared memory, the tiled ones up to [`TILED_SMEM_MAX`], the skinny ones up to
/// [`SKINNY_SMEM_MAX`]:
/// - tiled 64 × 64, 2 × 2 warps of 32 × 32, k-steps of 32, raw weight phases 2 deep: the
///   general tile (many CTAs where M or N is small);
/// - tiled 128 × 128, 2 × 4 warps of 64 × 32: large M (each decoded weight serves 128
///   activation rows; 16 mma per warp per 16 K between fragment loads);
/// - skinny 16 × 256, 8 warps of 32 weight rows each, 256 K per phase, and 64 × 128, 8 warps
///   of 16 rows (registers for 64 tokens): M up to [`SKINNY_MAX_M`] (weights streamed once
///   from memory straight into the tensor cores' registers; what bounds the small-M GEMM is
///   the weights' bytes and their decode, not the mma). The 64-token one serves M 17–64
///   in one token tile (at M ≤ 32 with mma columns to spare, which cost little beside the
///   decode); a 32-token instance as well pushed the GPU kit past its transfer limit (each
///   instance is two kernels in all 30 modules).
pub const FUSED_GEMM_TILES: &[FusedTile] = &[
    FusedTile { bm: 64, bn: 64, bk: 32, wm: 2, wn: 2, stages: 2, skinny: false },
    FusedTile { bm: 128, bn: 128, bk: 32, wm: 2, wn: 4, stages: 2, skinny: false },
    FusedTile { bm: 16, bn: 256, bk: 256, wm: 1, wn: 8, stages: 1, skinny: true },
    FusedTile { bm: 64, bn: 128, bk: 256, wm: 1, wn: 8, stages: 1, skinny: true },
];

/// Shared memory of the fused kernels per weight row and phase (both bodies): one 256-element
/// K phase of the row's raw blocks (at most 292 bytes, q8_k's) in the 16-byte windows its copies cover; 16 times an
/// odd number, so that the 8 rows one warp instruction reads start in different banks.
pub const SKINNY_ROW_BYTES: u64 = 336;

/// The most shared memory (dynamic) a skinny instance may take: two CTAs on an sm_90
/// multiprocessor, and within sm_80's per-block limit.
pub const SKINNY_SMEM_MAX: u64 = 100 * 1024;

/// The largest M the fused GEMM runs on its skinny instances (above it, the tiled ones).
pub const SKINNY_MAX_M: u64 = 64;

/// CTAs per multiprocessor the skinny kernel's split-k aims at (its registers allow two
/// CTAs of 8 warps).
pub const SKINNY_CTAS_PER_SM: u64 = 2;

/// The dynamic shared memory a kernel may take without raising its limit first (CUDA's 48 KiB
/// on every architecture): an instance above it has its limit raised when its module loads.
pub const SMEM_WITHOUT_OPT_IN: u64 = 48 * 1024;

/// The most shared memory (dynamic) a tiled instance may take: within sm_80's per-block limit
/// (163 KiB; sm_90's is 227 KiB). Devices with less (sm_86, sm_89: 99 KiB) run the instances
/// that fit: the tiler checks each against the device.
pub const TILED_SMEM_MAX: u64 = 160 * 1024;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instances_are_whole_mma_tiles_distinct_and_fit_their_shared_memory() {
        let mut names = std::collections::HashSet::new();
        for t in FUSED_GEMM_TILES {
            assert!(names.insert(t.name()), "{} twice", t.name());
            if t.skinny {
                // 8-token mma columns, 16-row mma tiles per warp, and whole 64-element slabs.
                assert!(t.wm == 1 && t.stages == 1 && t.bm % 8 == 0 && t.bn % (16 * t.wn) == 0, "{}", t.name());
                assert!(t.bk % 64 == 0, "{}", t.name());
            } else {
                // Whole mma tiles, k-steps that divide a 256-element phase, whole 4-float
                // activation loads and 8-element decode chunks per thread.
                assert!(t.bm % (16 * t.wm) == 0 && t.bn % (8 * t.wn) == 0 && t.bk % 16 == 0, "{}", t.name());
                assert!(256 % t.bk == 0 && (t.bm * t.bk / 4) % t.threads() == 0, "{}", t.name());
                assert!((t.bn * t.bk / 16) % t.threads() == 0 && t.stages == 2, "{}", t.name());
            }
            let max = if t.skinny { SKINNY_SMEM_MAX } else { TILED_SMEM_MAX };
            assert!(t.stages >= 1 && t.smem_bytes() <= max, "{}: {} B", t.name(), t.smem_bytes());
            assert_eq!(FusedTile::of(&t.tile()), Some(t));
        }
        assert_eq!(FUSED_GEMM_TILES[0].name(), "64x64x32_w2x2_s2");
    }
}
