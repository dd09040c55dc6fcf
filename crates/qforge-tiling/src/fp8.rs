//! The instances of qforge-cuda's FP8 block-scaled GEMM (`kernels-cuda/gemm_fp8.cuh`) and
//! which one runs a shape, with how many K splits: a transposed GEMM ([`crate::TransTile`])
//! whose k-step is one 128-column scale block (the promotion's unit), so no k-step straddles
//! two blocks.

use crate::trans::{TRANS_ROW_BYTES, TransTile, trans_splits, trans_tile};

/// An FP8 GEMM instance.
pub type Fp8Tile = TransTile;

/// K elements per k-step of the FP8 GEMM: one scale block.
pub const FP8_BK: u32 = crate::trans::TRANS_BK;

/// Shared memory per staged row (weight row or token) and k-step: the 128 codes in the
/// 16-byte windows around them (a weight row starts anywhere in its first window).
pub const FP8_ROW_BYTES: u32 = TRANS_ROW_BYTES;

/// Dynamic shared memory of one FP8 GEMM CTA, bytes: `stages` slots of `rows + tok` staged
/// rows, then two 256-entry f16 code tables (the sm_80 body's).
pub const fn fp8_smem_bytes(t: &TransTile) -> u64 {
    t.stages as u64 * (t.rows + t.tok) as u64 * FP8_ROW_BYTES as u64 + 1024
}

/// Every instance, by index, smallest M first (each is its own kernel, so each gets its own
/// register budget; `rows` divides 128, so a CTA's rows share one weight-scale band):
/// - 64 rows × 16 tokens, 4 warps of 16 rows, 4 k-steps in flight (46 KiB: no opt-in): token
///   generation and small batches, where the weights' bytes bound the GEMM — many CTAs along
///   N, deep prefetch;
/// - 128 × 64, 4 × 2 warps of 32 rows × 32 tokens, 3 stages (82 KiB);
/// - 64 × 128, 2 × 4 warps of 32 × 32, 3 stages (82 KiB): large M, each staged weight byte
///   serves 128 tokens.
///
/// Each warp's tile is at most 32 × 32: its two sets of accumulators (the block's partial
/// sums and the promoted ones) fit the registers without spills (ptxas for sm_89 / sm_90:
/// 95, 206 and 206 registers; 32 × 64 warps, or 16 warps of 128 registers, spilled).
///
/// All fit the 99 KiB an sm_89 CTA may take (the e4m3 body's smallest device).
pub const FP8_GEMM_TILES: &[Fp8Tile] = &[
    TransTile { rows: 64, tok: 16, wr: 4, wt: 1, stages: 4 },
    TransTile { rows: 128, tok: 64, wr: 4, wt: 2, stages: 3 },
    TransTile { rows: 64, tok: 128, wr: 2, wt: 4, stages: 3 },
];

/// The instance (index into [`FP8_GEMM_TILES`]) for `m` tokens: the first whose tokens cover
/// `m`, else the largest.
pub fn fp8_tile(m: u64) -> usize {
    trans_tile(FP8_GEMM_TILES, m)
}

/// K splits of instance `t` for an m × n × k GEMM on `sm_count` multiprocessors: where the
/// grid has fewer than two CTAs per multiprocessor, enough splits for about two, each at
/// least two k-steps long where K allows, and at most [`MAX_SPLIT_K`](crate::MAX_SPLIT_K).
pub fn fp8_splits(t: &Fp8Tile, m: u64, n: u64, k: u64, sm_count: u32) -> u32 {
    trans_splits(t, m, n, k, sm_count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instances_are_whole_mma_tiles_fit_an_sm89_cta_and_cover_every_m() {
        crate::trans::tests::check_table(FP8_GEMM_TILES, fp8_tile, fp8_splits);
        for t in FP8_GEMM_TILES {
            assert!(fp8_smem_bytes(t) <= 99 * 1024, "{}: {} B", t.name(), fp8_smem_bytes(t));
        }
        assert!(fp8_smem_bytes(&FP8_GEMM_TILES[0]) <= crate::SMEM_WITHOUT_OPT_IN);
    }
}
