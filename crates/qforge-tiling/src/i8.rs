//! The instances of qforge-cuda's transposed int8 GEMMs (`kernels-cuda/gemm8.cuh`: the GGUF
//! formats' integer dot with their native q8 activations, and A8W4DQ) and which one runs a
//! shape, with how many K splits ([`crate::TransTile`]).
//!
//! A k-step is 128 K: four 32-element sub-blocks, each one `mma.m16n8k32` s8 per fragment
//! tile and one fold of its integer sums into f32. The weights' blocks are decoded into shared
//! memory (double-buffered: k-step i + 1 decoded while k-step i is multiplied), the activation
//! codes (and, for q8 activations, their per-sub-block scales and sums) arrive by `cp.async`,
//! `stages` k-steps deep.

use crate::trans::{TRANS_BK, TRANS_ROW_BYTES, TransTile, trans_splits, trans_tile};

/// An int8 GEMM instance.
pub type I8Tile = TransTile;

/// Bytes of per-sub-block activation data per token and k-step: the q8 activations' scale and
/// sum (two f32) for each of the k-step's four sub-blocks.
pub const I8_ACT_SIDE_BYTES: u32 = 8 * (TRANS_BK / 32);

/// Bytes of per-sub-block weight data per weight row and k-step: four f32 (q8: the sub-block's
/// scale and offset, or its halves' two scales and two offsets; A8W4DQ: the group's scale and
/// the sub-block's code sum) for each of the four sub-blocks.
pub const I8_WEIGHT_SIDE_BYTES: u32 = 16 * (TRANS_BK / 32);

/// Dynamic shared memory of one int8 GEMM CTA, bytes: `stages` slots of `tok` staged
/// activation rows with their side data, then two decoded weight tiles (`rows` rows) with
/// theirs.
pub const fn i8_smem_bytes(t: &TransTile) -> u64 {
    t.stages as u64 * t.tok as u64 * (TRANS_ROW_BYTES + I8_ACT_SIDE_BYTES) as u64
        + 2 * t.rows as u64 * (TRANS_ROW_BYTES + I8_WEIGHT_SIDE_BYTES) as u64
}

/// Every instance, by index, smallest M first; the FP8 GEMM's shapes (their two sets of
/// accumulators, the integer sums and the f32 ones, are the same size as its two):
/// - 64 rows × 16 tokens, 4 warps, 4 k-steps in flight (37 KiB: no opt-in): token generation
///   and small batches, many CTAs along N;
/// - 128 × 64 on 4 × 2 warps, 3 stages (85 KiB);
/// - 64 × 128 on 2 × 4 warps, 3 stages (92 KiB): a decoded weight tile serves 128 tokens.
pub const I8_GEMM_TILES: &[I8Tile] = &[
    TransTile { rows: 64, tok: 16, wr: 4, wt: 1, stages: 4 },
    TransTile { rows: 128, tok: 64, wr: 4, wt: 2, stages: 3 },
    TransTile { rows: 64, tok: 128, wr: 2, wt: 4, stages: 3 },
];

/// The instance (index into [`I8_GEMM_TILES`]) for `m` tokens: the first whose tokens cover
/// `m`, else the largest.
pub fn i8_tile(m: u64) -> usize {
    trans_tile(I8_GEMM_TILES, m)
}

/// K splits of instance `t` (as [`crate::fp8_splits`]). Only the q8 GEMM splits: A8W4DQ's
/// result is the CPU's bit for bit, group after group in order, and runs unsplit.
pub fn i8_splits(t: &I8Tile, m: u64, n: u64, k: u64, sm_count: u32) -> u32 {
    trans_splits(t, m, n, k, sm_count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instances_are_whole_mma_tiles_fit_an_sm80_cta_and_cover_every_m() {
        crate::trans::tests::check_table(I8_GEMM_TILES, i8_tile, i8_splits);
        for t in I8_GEMM_TILES {
            // Decode: whole (row, sub-block) items per thread.
            assert!((t.rows * TRANS_BK / 32).is_multiple_of(t.threads()), "{}", t.name());
            assert!(i8_smem_bytes(t) <= 99 * 1024, "{}: {} B", t.name(), i8_smem_bytes(t));
        }
        assert!(i8_smem_bytes(&I8_GEMM_TILES[0]) <= crate::SMEM_WITHOUT_OPT_IN);
    }
}
