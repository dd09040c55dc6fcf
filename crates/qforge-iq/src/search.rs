//! The sub-block search shared by the grid formats iq2_xxs, iq2_xs, iq2_s, iq3_xxs and
//! iq3_s: ggml's `quantize_row_iq2_*_impl` / `quantize_row_iq3_*_impl` inner loop.
//!
//! A sub-block of `N` values is split into sign bits and magnitudes `xval = |x|`. The
//! magnitudes are approximated by `scale * (2l + 1)` where each group of `G` levels `l` must
//! be a grid point: candidate scales are tried, each group is rounded to its level vector and,
//! if that is not on the grid, replaced by the best of its precomputed neighbours; the
//! weighted least-squares scale of the best candidate wins, and is refined once more.

use crate::common::QK_K;
use crate::lattice::Lattice;
use qforge_ggml_search::{NoImatrix, c_max, make_qp_quants, nearest_int, padded, search_weights, sigma2};

/// Where the candidate scales start.
#[derive(Clone, Copy)]
pub(crate) enum Start {
    /// From `make_qp_quants` (iq2_xxs).
    QpQuants,
    /// From the largest magnitude (the others).
    Max,
}

/// Which groups the final refinement re-rounds with the chosen scale.
#[derive(Clone, Copy)]
pub(crate) enum Refine {
    /// Every group, whenever the scale is positive (iq2_xxs).
    Always,
    /// Every group, if any group of the best candidate was off the grid (iq3_s).
    AllIfAnyOff,
    /// Only the groups that were off the grid (iq2_xs, iq2_s, iq3_xxs).
    OffGridOnly,
}

/// How a format treats the signs of its values.
#[derive(Clone, Copy, PartialEq)]
pub(crate) enum Signs {
    /// Seven sign bits per 8 values, the eighth implied by even parity: an odd count of
    /// negatives flips the least important value (iq2_xxs, iq2_xs, iq3_xxs).
    EvenParity,
    /// All eight sign bits stored (iq2_s, iq3_s).
    Full,
}

/// The parameters of one format's search.
pub(crate) struct GridSearch {
    /// Number of levels (`kMaxQ`): 3 for the 2-bit grids, 8 for the 3-bit ones.
    pub kmax_q: i32,
    pub start: Start,
    /// Candidates `is in -steps..=steps`, scale factor `2 kMaxQ - 1 + is * step`.
    pub steps: i32,
    pub step: f32,
    pub refine: Refine,
    /// A sub-block whose largest magnitude is below this is zero (`None`: exactly zero).
    pub eps: Option<f32>,
    /// The on-grid flags before the first candidate (matters when no candidate is accepted).
    pub initial_on_grid: bool,
    pub signs: Signs,
}

/// Splits `x` into magnitudes (`xval`) and one sign byte per 8 values (`signs`), as ggml does.
pub(crate) fn split_signs(x: &[f32], w: &[f32], mode: Signs, xval: &mut [f32], signs: &mut [u8]) {
    for (k, s_out) in signs.iter_mut().enumerate() {
        let r = 8 * k..8 * k + 8;
        let (xs, ws, xv) = (&x[r.clone()], &w[r.clone()], &mut xval[r]);
        let mut s = 0u8;
        let mut nflip = 0;
        for i in 0..8 {
            if xs[i] >= 0.0 {
                xv[i] = xs[i];
            } else {
                xv[i] = -xs[i];
                nflip += 1;
                s |= 1 << i;
            }
        }
        if mode == Signs::EvenParity && nflip % 2 == 1 {
            let mut imin = 0;
            let mut min = ws[0] * xs[0] * xs[0];
            for i in 1..8 {
                let ax = ws[i] * xs[i] * xs[i];
                if ax < min {
                    min = ax;
                    imin = i;
                }
            }
            xv[imin] = -xv[imin];
            s ^= 1 << imin;
        }
        *s_out = if mode == Signs::EvenParity { s & 127 } else { s };
    }
}

/// The weighted `(sum w x q, sum w q^2)` of levels `l` (`q = 2l + 1`).
#[inline]
fn sums(xval: &[f32], w: &[f32], l: &[i8]) -> (f32, f32) {
    let (mut sumqx, mut sumq2) = (0.0f32, 0.0f32);
    for i in 0..xval.len() {
        let q = (2 * l[i] as i32 + 1) as f32;
        sumqx += w[i] * xval[i] * q;
        sumq2 += w[i] * q * q;
    }
    (sumqx, sumq2)
}

/// One sub-block's magnitudes and the square roots of their weights (ggml's `waux`, used by
/// the neighbour searches).
struct SubBlock<'a> {
    xval: &'a [f32],
    waux: &'a [f32],
}

impl GridSearch {
    /// Rounds group `k` of the sub-block with inverse scale `id` to levels in `l`; a level
    /// vector off the grid is replaced by its best neighbour at `scale`. Returns whether the
    /// rounded vector was on the grid.
    #[inline]
    fn round_group<const G: usize>(
        &self,
        lat: &Lattice<G>,
        sb: &SubBlock,
        id: f32,
        scale: f32,
        l: &mut [i8],
        k: usize,
    ) -> bool {
        let r = G * k..G * k + G;
        for (li, &v) in l[r.clone()].iter_mut().zip(&sb.xval[r.clone()]) {
            *li = nearest_int(0.5f32 * (id * v - 1.0)).clamp(0, self.kmax_q - 1) as i8;
        }
        let key = lat.key(&l[r.clone()]);
        let on_grid = lat.index(key).is_some();
        if !on_grid {
            lat.best_neighbour(key, &sb.xval[r.clone()], &sb.waux[r.clone()], scale, &mut l[r]);
        }
        on_grid
    }

    /// Searches one sub-block of magnitudes `xval` with weights `w`. Returns `None` for a
    /// sub-block treated as zero (its bytes stay as initialized), else the scale (may be
    /// negative only in degenerate cases, which the caller flips) with the levels in `l`.
    pub(crate) fn run<const G: usize>(&self, lat: &Lattice<G>, xval: &[f32], w: &[f32], l: &mut [i8]) -> Option<f32> {
        let n = xval.len();
        let ngroups = n / G;
        let mut waux = [0.0f32; 32];
        for (a, &wi) in waux.iter_mut().zip(w) {
            *a = wi.sqrt();
        }
        let sb = SubBlock { xval, waux: &waux[..n] };
        let max = xval[1..].iter().fold(xval[0], |m, &v| c_max(m, v));
        l.fill(0);
        let is_zero = match self.eps {
            Some(eps) => max < eps,
            None => max == 0.0,
        };
        if is_zero {
            return None;
        }
        let top = (2 * self.kmax_q - 1) as f32;
        let (mut scale, denom) = match self.start {
            Start::QpQuants => {
                // Only the scale is used; the codes go to scratch.
                let s = make_qp_quants(xval, self.kmax_q + 1, &mut [0u8; 32], w);
                let eff_max = s * self.kmax_q as f32;
                if eff_max <= 0.0 {
                    return None;
                }
                (s, eff_max)
            }
            Start::Max => (max / top, max),
        };
        let mut on_grid = [self.initial_on_grid; 8];
        let mut on_grid_aux = [true; 8];
        let mut laux = [0i8; 32];
        let laux = &mut laux[..n];
        let mut best = 0.0f32;
        for is in -self.steps..=self.steps {
            let id = (top + is as f32 * self.step) / denom;
            let this_scale = 1.0 / id;
            for (k, og) in on_grid_aux.iter_mut().enumerate().take(ngroups) {
                *og = self.round_group(lat, &sb, id, this_scale, laux, k);
            }
            let (sumqx, sumq2) = sums(xval, w, laux);
            if sumq2 > 0.0 && sumqx * sumqx > best * sumq2 {
                scale = sumqx / sumq2;
                best = scale * sumqx;
                l.copy_from_slice(laux);
                on_grid = on_grid_aux;
            }
        }
        let any_off = on_grid[..ngroups].iter().any(|&g| !g);
        let refine = match self.refine {
            Refine::Always => scale > 0.0,
            Refine::AllIfAnyOff | Refine::OffGridOnly => any_off && scale > 0.0,
        };
        if refine {
            let id = 1.0 / scale;
            for (k, &og) in on_grid.iter().enumerate().take(ngroups) {
                if !(matches!(self.refine, Refine::OffGridOnly) && og) {
                    self.round_group(lat, &sb, id, scale, l, k);
                }
            }
            let (sumqx, sumq2) = sums(xval, w, l);
            if sumq2 > 0.0 {
                scale = sumqx / sumq2;
            }
        }
        Some(scale)
    }
}

/// ggml's 4-bit sub-block scale code of the grid formats: `clamp(nearest_int(0.5 (s/d - 1)), 0, 15)`
/// with `id = 1/d`.
#[inline]
pub(crate) fn scale_code(id: f32, scale: f32) -> u8 {
    nearest_int(0.5f32 * (id * scale - 1.0)).clamp(0, 15) as u8
}

/// Runs `search` over the `32 / len`-per-32 sub-blocks of `len` values of a padded block and
/// calls `store(ib, scale, levels, signs)` for every sub-block that is not zero. Returns the
/// sub-block scales (0 for zero sub-blocks) and their maximum (C's `MAX` fold).
pub(crate) fn search_sub_blocks<const G: usize>(
    lat: &Lattice<G>,
    search: &GridSearch,
    xs: &[f32; QK_K],
    w: &[f32; QK_K],
    len: usize,
    mut store: impl FnMut(usize, &mut [i8], &[u8]),
) -> ([f32; 16], f32) {
    let mut scales = [0.0f32; 16];
    let mut max_scale = 0.0f32;
    for (ib, scale_out) in scales.iter_mut().enumerate().take(QK_K / len) {
        let r = len * ib..len * (ib + 1);
        let (mut xval, mut signs, mut l) = ([0.0f32; 32], [0u8; 4], [0i8; 32]);
        let (xval, signs, l) = (&mut xval[..len], &mut signs[..len / 8], &mut l[..len]);
        split_signs(&xs[r.clone()], &w[r.clone()], search.signs, xval, signs);
        let Some(mut scale) = search.run(lat, xval, &w[r], l) else { continue };
        if scale < 0.0 {
            // ggml: never happens, but flip scale and signs just in case.
            scale = -scale;
            let keep = if search.signs == Signs::EvenParity { 127 } else { 255 };
            signs.iter_mut().for_each(|s| *s = !*s & keep);
        }
        store(ib, l, signs);
        *scale_out = scale;
        max_scale = c_max(max_scale, scale);
    }
    (scales, max_scale)
}

/// The block's search weights: `sigma2 = factor * sum(x^2) / 256`, then per value.
pub(crate) fn block_weights(
    x: &[f32],
    qw: Option<&[f32]>,
    factor: f32,
    default: NoImatrix,
) -> ([f32; QK_K], [f32; QK_K]) {
    let (xs, n) = padded::<QK_K>(x);
    let s2 = sigma2(&xs, n, factor);
    let mut w = [0.0f32; QK_K];
    search_weights(&xs, n, qw, s2, default, &mut w);
    (xs, w)
}
