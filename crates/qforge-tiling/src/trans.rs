//! The transposed 8-bit GEMMs' instances (qforge-cuda's FP8 block-scaled GEMM,
//! `kernels-cuda/gemm_fp8.cuh`, and its int8 GEMMs, `kernels-cuda/gemm8.cuh`): what an
//! instance is, which one runs a shape and with how many K splits.
//!
//! Both kernels compute the product transposed (weights the mma's A operand, tokens its B), so
//! one CTA holds `rows` weight rows × `tok` tokens and a CTA at small M still covers many weight
//! rows; both step K by 128 (a scale block of FP8, four 32-element sub-blocks of the int8
//! GEMMs): every K, 128 included, is a whole number of steps (DeepGEMM's empty stage set at
//! K = 128 cannot happen: the pipeline's depth is fixed, the steps past K's end are empty copy
//! groups).

/// One instance: `rows` weight rows × `tok` tokens per CTA on `wr` × `wt` warps (each
/// `rows / wr` rows × `tok / wt` tokens), `stages` k-steps of 128 in flight with `cp.async`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TransTile {
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

/// K elements per k-step of the transposed GEMMs.
pub const TRANS_BK: u32 = 128;

/// Shared memory per staged row (weight row or token) and k-step: the 128 codes in the
/// 16-byte windows around them (a raw fp8 weight row starts anywhere in its first window; the
/// extra 16 bytes also put 8 consecutive rows in distinct banks).
pub const TRANS_ROW_BYTES: u32 = TRANS_BK + 16;

impl TransTile {
    /// Threads per CTA.
    pub const fn threads(&self) -> u32 {
        32 * self.wr * self.wt
    }

    /// The instance's name: `64x16_w4x1_s4` (rows × tokens, warps, stages).
    pub fn name(&self) -> String {
        format!("{}x{}_w{}x{}_s{}", self.rows, self.tok, self.wr, self.wt, self.stages)
    }

    /// The number of CTAs of an m × n product (one K split).
    pub fn ctas(&self, m: u64, n: u64) -> u64 {
        (m.div_ceil(self.tok as u64) * n.div_ceil(self.rows as u64)).max(1)
    }
}

/// The instance (index into `tiles`, smallest `tok` first) for `m` tokens: the first whose
/// tokens cover `m`, else the last.
pub(crate) fn trans_tile(tiles: &[TransTile], m: u64) -> usize {
    tiles.iter().position(|t| t.tok as u64 >= m).unwrap_or(tiles.len().saturating_sub(1))
}

/// K splits of instance `t` for an m × n × k GEMM on `sm_count` multiprocessors: where the
/// grid has fewer than two CTAs per multiprocessor, enough splits for about two, each at
/// least two k-steps long where K allows, and at most [`MAX_SPLIT_K`](crate::MAX_SPLIT_K).
pub(crate) fn trans_splits(t: &TransTile, m: u64, n: u64, k: u64, sm_count: u32) -> u32 {
    let steps = k.div_ceil(TRANS_BK as u64).max(1);
    let want = (2 * sm_count as u64).div_ceil(t.ctas(m, n));
    want.clamp(1, (steps / 2).clamp(1, crate::config::MAX_SPLIT_K as u64)) as u32
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The properties every instance table holds: whole mma tiles, rows in one 128-row band,
    /// at most 256 threads, smallest M first, every M an instance, splits in range.
    pub(crate) fn check_table(
        tiles: &[TransTile],
        pick: fn(u64) -> usize,
        splits: fn(&TransTile, u64, u64, u64, u32) -> u32,
    ) {
        for t in tiles {
            assert!(t.rows % (16 * t.wr) == 0 && t.tok % (8 * t.wt) == 0 && t.stages >= 2, "{}", t.name());
            assert!(128 % t.rows == 0 && t.threads() <= 256, "{}", t.name());
        }
        assert!(tiles.windows(2).all(|w| w[0].tok < w[1].tok), "smallest M first");
        for m in [1u64, 15, 16, 17, 64, 65, 128, 129, 8192, 1 << 31] {
            let i = pick(m);
            let t = &tiles[i];
            assert!(t.tok as u64 >= m || i == tiles.len() - 1, "m = {m}");
            for k in [1u64, 128, 129, 4096, 14336] {
                for n in [1u64, 7, 4096, 14336] {
                    let s = splits(t, m, n, k, 132);
                    assert!(s >= 1 && s as u64 <= k.div_ceil(128).max(1) && s <= crate::config::MAX_SPLIT_K);
                }
            }
        }
        // Token generation on a 4096² weight: 64 CTAs on 132 multiprocessors -> 5 splits.
        assert_eq!(splits(&tiles[0], 1, 4096, 4096, 132), 5);
        // Enough CTAs: no split.
        assert_eq!(splits(&tiles[tiles.len() - 1], 4096, 4096, 4096, 132), 1);
    }
}
