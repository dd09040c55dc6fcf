//! Pieces shared by the symmetric K-quants (q3_k, q6_k): sixteen 16-element sub-blocks,
//! `x ~ d * sc[j] * (code - zero)` with signed sub-block scales.

use crate::QK_K;
use crate::affine::real_len;
use qforge_ggml_search::{SymWeights, nearest_int};

/// Elements per sub-block.
pub(crate) const SUB: usize = 16;
/// Sub-blocks per block.
pub(crate) const NSUB: usize = QK_K / SUB;

/// Runs `search(x_j, codes_j, j)` over the real elements of every sub-block (1..=QK_K real
/// elements in `xs[..n]`), returning the sub-block scales (0 for sub-blocks of padding only,
/// whose codes stay as initialized).
#[inline(always)]
pub(crate) fn sub_block_scales(
    xs: &[f32; QK_K],
    n: usize,
    codes: &mut [i8; QK_K],
    mut search: impl FnMut(&[f32], &mut [i8], usize) -> f32,
) -> [f32; NSUB] {
    let mut scales = [0.0f32; NSUB];
    for (j, s) in scales.iter_mut().enumerate() {
        let nj = real_len(n, SUB, j);
        if nj > 0 {
            let r = SUB * j..SUB * j + nj;
            *s = search(&xs[r.clone()], &mut codes[r], j);
        }
    }
    scales
}

/// The scale of largest magnitude (the first one on ties) and that magnitude.
#[inline(always)]
pub(crate) fn max_abs_scale(scales: &[f32; NSUB]) -> (f32, f32) {
    let (mut amax, mut max) = (0.0f32, 0.0f32);
    for &s in scales {
        if s.abs() > amax {
            amax = s.abs();
            max = s;
        }
    }
    (max, amax)
}

/// Weights of sub-block `j` (its real elements) for [`qforge_ggml_search::make_qx_quants`].
#[inline(always)]
pub(crate) fn sub_weights(weights: Option<&[f32]>, j: usize, nj: usize) -> SymWeights<'_> {
    match weights {
        Some(w) => SymWeights::Given(&w[SUB * j..SUB * j + nj]),
        None => SymWeights::XSquared,
    }
}

/// Recomputes every code from the stored scales: `code = clamp(nearest_int(x / (d * sc[j])),
/// -zero, zero - 1) + zero`, skipping sub-blocks whose effective scale is zero (ggml keeps the
/// search's codes there). Padded positions hold 0 in `xs`, so they get the code nearest 0.
#[inline(always)]
pub(crate) fn requantize(xs: &[f32; QK_K], d: f32, sc: &[i32; NSUB], zero: i32, codes: &mut [i8; QK_K]) {
    for (j, &s) in sc.iter().enumerate() {
        let dj = d * s as f32;
        if dj == 0.0 {
            continue;
        }
        let r = SUB * j..SUB * (j + 1);
        for (c, &v) in codes[r.clone()].iter_mut().zip(&xs[r]) {
            *c = (nearest_int(v / dj).clamp(-zero, zero - 1) + zero) as i8;
        }
    }
}
