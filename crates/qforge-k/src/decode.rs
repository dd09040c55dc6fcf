//! The one decode loop every K-quant shares.
//!
//! Every K-quant value is `dl[j] * q - ml[j]` for an integer code `q` of sub-block `j`, where
//! `dl[j]` / `ml[j]` are f32 products ggml forms once per sub-block (`d * scale`,
//! `dmin * min`). Symmetric formats pass `ml[j] = +0.0`: IEEE `v - (+0.0)` is `v` bit for
//! bit (negative zero and NaN included), so the same loop reproduces ggml's `dl * q` exactly.

use crate::QK_K;
use qforge_core::{BlockFormat, Elem};

/// Writes `O::from_f32(dl[i / sub] * code(i) as f32 - ml[i / sub])` for each output element
/// (at most [`QK_K`]). `dl` and `ml` hold `QK_K / sub` entries.
#[inline(always)]
pub(crate) fn emit<O: Elem>(out: &mut [O], sub: usize, dl: &[f32], ml: &[f32], code: impl Fn(usize) -> i32) {
    for (i, o) in out.iter_mut().take(QK_K).enumerate() {
        let j = i / sub;
        *o = O::from_f32(dl[j] * code(i) as f32 - ml[j]);
    }
}

/// Decodes a row of blocks into `out` (at most `blocks.len() * QK_K` elements) without a heap
/// scratch buffer: every K-quant `decode` writes only as many elements as `out` holds, so the
/// partial last block decodes straight into the row's tail.
#[inline]
pub(crate) fn decode_row<F: BlockFormat, O: Elem>(blocks: &[F::Block], out: &mut [O]) {
    for (block, dst) in blocks.iter().zip(out.chunks_mut(QK_K)) {
        F::decode(block, dst);
    }
}
