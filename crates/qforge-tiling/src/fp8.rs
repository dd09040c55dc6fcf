//! The instances of qforge-cuda's FP8 block-scaled GEMM (`kernels-cuda/gemm_fp8.cuh`) and
//! which one runs a shape, with how many K splits.
//!
//! The kernel computes the product transposed (weights the mma's A operand), so one CTA holds
//! `rows` weight rows × `tok` tokens, and steps K by one 128-column scale block (the
//! promotion's unit): no k-step straddles two blocks and every K, 128 included, is a whole
//! number of steps (DeepGEMM's empty stage set at K = 128 cannot happen: the pipeline's depth
//! is fixed, the steps past K's end are empty copy groups).

/// One instance: `rows` weight rows × `tok` tokens per CTA on `wr` × `wt` warps (each
/// `rows / wr` rows × `tok / wt` tokens), `stages` k-steps of 128 in flight with `cp.async`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Fp8Tile {
    /// Weight rows (of N) per CTA.
    pub rows: u32,
    /// Activation rows (tokens, of M) per CTA.
    pub tok: u32,
    /// Warps along the weight rows.
    pub wr: u32,
    /// Warps along the tokens.
    pub wt: u32,
    /// K-steps (128 columns each) in flight.
    pub stages: u32,
}

/// K elements per k-step of the FP8 GEMM: one scale block.
pub const FP8_BK: u32 = 128;

/// Shared memory per staged row (weight row or token) and k-step: the 128 codes in the
/// 16-byte windows around them (a weight row starts anywhere in its first window).
pub const FP8_ROW_BYTES: u32 = FP8_BK + 16;

impl Fp8Tile {
    /// Threads per CTA.
    pub const fn threads(&self) -> u32 {
        32 * self.wr * self.wt
    }

    /// Dynamic shared memory of one CTA, bytes: `stages` slots of `rows + tok` staged rows,
    /// then two 256-entry f16 code tables (the sm_80 body's).
    pub const fn smem_bytes(&self) -> u64 {
        self.stages as u64 * (self.rows + self.tok) as u64 * FP8_ROW_BYTES as u64 + 1024
    }

    /// The instance's name: `64x16_w4x1_s4` (rows × tokens, warps, stages).
    pub fn name(&self) -> String {
        format!("{}x{}_w{}x{}_s{}", self.rows, self.tok, self.wr, self.wt, self.stages)
    }
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
    Fp8Tile { rows: 64, tok: 16, wr: 4, wt: 1, stages: 4 },
    Fp8Tile { rows: 128, tok: 64, wr: 4, wt: 2, stages: 3 },
    Fp8Tile { rows: 64, tok: 128, wr: 2, wt: 4, stages: 3 },
];

/// The instance (index into [`FP8_GEMM_TILES`]) for `m` tokens: the first whose tokens cover
/// `m`, else the largest.
pub fn fp8_tile(m: u64) -> usize {
    FP8_GEMM_TILES.iter().position(|t| t.tok as u64 >= m).unwrap_or(FP8_GEMM_TILES.len() - 1)
}

/// K splits of instance `t` for an m × n × k GEMM on `sm_count` multiprocessors: where the
/// grid has fewer than two CTAs per multiprocessor, enough splits for about two, each at
/// least two k-steps long where K allows, and at most [`MAX_SPLIT_K`](crate::MAX_SPLIT_K).
pub fn fp8_splits(t: &Fp8Tile, m: u64, n: u64, k: u64, sm_count: u32) -> u32 {
    let ctas = (m.div_ceil(t.tok as u64) * n.div_ceil(t.rows as u64)).max(1);
    let steps = k.div_ceil(FP8_BK as u64).max(1);
    let want = (2 * sm_count as u64).div_ceil(ctas);
    want.clamp(1, (steps / 2).clamp(1, crate::config::MAX_SPLIT_K as u64)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instances_are_whole_mma_tiles_and_fit_an_sm89_cta() {
        for t in FP8_GEMM_TILES {
            assert!(t.rows % (16 * t.wr) == 0 && t.tok % (8 * t.wt) == 0 && t.stages >= 2, "{}", t.name());
            assert!(
                128 % t.rows == 0 && t.threads() <= 256 && t.smem_bytes() <= 99 * 1024,
                "{}: {} B",
                t.name(),
                t.smem_bytes()
            );
        }
        assert!(FP8_GEMM_TILES[0].smem_bytes() <= crate::SMEM_WITHOUT_OPT_IN);
        assert!(FP8_GEMM_TILES.windows(2).all(|w| w[0].tok < w[1].tok), "smallest M first");
    }

    #[test]
    fn every_m_has_an_instance_and_splits_stay_in_range() {
        for m in [1u64, 15, 16, 17, 64, 65, 128, 129, 8192, 1 << 31] {
            let i = fp8_tile(m);
            let t = &FP8_GEMM_TILES[i];
            assert!(t.tok as u64 >= m || i == FP8_GEMM_TILES.len() - 1, "m = {m}");
            for k in [1u64, 128, 129, 4096, 14336] {
                for n in [1u64, 7, 4096, 14336] {
                    let s = fp8_splits(t, m, n, k, 132);
                    assert!(s >= 1 && s as u64 <= k.div_ceil(128).max(1) && s <= crate::config::MAX_SPLIT_K);
                }
            }
        }
        // Token generation on a 4096² weight: 64 CTAs on 132 multiprocessors -> 5 splits.
        assert_eq!(fp8_splits(&FP8_GEMM_TILES[0], 1, 4096, 4096, 132), 5);
        // Enough CTAs: no split.
        assert_eq!(fp8_splits(&FP8_GEMM_TILES[2], 4096, 4096, 4096, 132), 1);
    }
}
