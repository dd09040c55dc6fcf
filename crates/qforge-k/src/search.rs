//! The scale searches shared by every K-quant encoder.
//!
//! Each function follows ggml's reference quantizer of the same name step for step, in `f32`,
//! in the same order of operations, so that the chosen integer codes (and therefore the bytes)
//! are identical. C's implicit conversions are spelled out: `int * float` converts the integer
//! to `f32` first, and storing an `int` into a `uint8_t` / `int8_t` truncates (`as u8` / `as i8`).

/// Smallest group maximum treated as non-zero (ggml's `GROUP_MAX_EPS`).
pub(crate) const GROUP_MAX_EPS: f32 = 1e-15;

/// ggml's `nearest_int`: round to nearest, ties to even, via the 1.5 * 2^23 magic number.
///
/// Exact for |v| <= 4194303; outside that range (or for NaN) it returns the same
/// deterministic garbage as ggml, never panicking.
#[inline(always)]
pub(crate) fn nearest_int(v: f32) -> i32 {
    let bits = (v + 12_582_912.0f32).to_bits() as i32;
    (bits & 0x007f_ffff) - 0x0040_0000
}

/// Index and value of the element with the largest magnitude (first one on ties, 0 if none
/// exceeds 0): ggml's `if (ax > amax) { amax = ax; max = x[i]; }` loop.
///
/// Computed as a lane-parallel maximum (order-independent for finite input) followed by a
/// search for the first element of that magnitude, so that it vectorizes.
#[inline]
pub(crate) fn signed_absmax(x: &[f32]) -> (f32, f32) {
    const LANES: usize = 8;
    let mut lanes = [0.0f32; LANES];
    let mut chunks = x.chunks_exact(LANES);
    for c in &mut chunks {
        for (m, &v) in lanes.iter_mut().zip(c) {
            *m = if v.abs() > *m { v.abs() } else { *m };
        }
    }
    let rest = chunks.remainder().iter().map(|v| v.abs());
    let amax = lanes.into_iter().chain(rest).fold(0.0f32, |m, a| if a > m { a } else { m });
    if amax > 0.0 { (amax, x.iter().copied().find(|v| v.abs() == amax).unwrap_or(0.0)) } else { (0.0, 0.0) }
}

/// Weights of a symmetric search: explicit importance weights, or `x^2` (ggml's
/// `rmse_type == 1` without `quant_weights`).
#[derive(Clone, Copy)]
pub(crate) enum SymWeights<'a> {
    Given(&'a [f32]),
    XSquared,
}

impl SymWeights<'_> {
    #[inline(always)]
    fn at(self, x: &[f32], i: usize) -> f32 {
        match self {
            SymWeights::Given(w) => w[i],
            SymWeights::XSquared => x[i] * x[i],
        }
    }
}

/// Longest group [`make_qx_quants`] is used on (sub-blocks and scale vectors of 16).
const QX_MAX: usize = 16;

/// ggml's `make_qx_quants` with `rmse_type == 1`: symmetric codes `L[i] in [0, 2*nmax)` for
/// `x[i] ~ scale * (L[i] - nmax)`, trying 19 candidate scales around `-nmax / max` and keeping
/// the one with the best weighted least-squares fit. Returns the scale (0 for an all-zero group).
pub(crate) fn make_qx_quants(x: &[f32], nmax: i32, l_out: &mut [i8], w: SymWeights<'_>) -> f32 {
    let n = x.len();
    assert!(n <= QX_MAX, "make_qx_quants on {n} > {QX_MAX} elements");
    let (amax, max) = signed_absmax(x);
    if amax < GROUP_MAX_EPS {
        l_out[..n].fill(0);
        return 0.0;
    }
    let quant = |iscale: f32, v: f32| nearest_int(iscale * v).clamp(-nmax, nmax - 1);
    // The per-element products are formed in independent (vectorizable) lanes exactly as
    // ggml forms them, `(w * x) * l` and `(w * l) * l`; only the sums run in order.
    // Fixed-length lanes (padding with x = w = 0 is computed but never summed).
    let (mut xs, mut wv, mut wx) = ([0.0f32; QX_MAX], [0.0f32; QX_MAX], [0.0f32; QX_MAX]);
    for i in 0..n {
        xs[i] = x[i];
        wv[i] = w.at(x, i);
        wx[i] = wv[i] * x[i];
    }
    let sums = |iscale: f32| {
        let (mut a, mut b) = ([0.0f32; QX_MAX], [0.0f32; QX_MAX]);
        for i in 0..QX_MAX {
            let l = quant(iscale, xs[i]) as f32;
            a[i] = wx[i] * l;
            b[i] = wv[i] * l * l;
        }
        let (mut sumlx, mut suml2) = (0.0f32, 0.0f32);
        for i in 0..n {
            sumlx += a[i];
            suml2 += b[i];
        }
        (sumlx, suml2)
    };
    let mut iscale = -(nmax as f32) / max;
    for i in 0..n {
        l_out[i] = (quant(iscale, x[i]) + nmax) as i8;
    }
    let (sumlx, suml2) = sums(iscale);
    let mut scale = if suml2 != 0.0 { sumlx / suml2 } else { 0.0 };
    let mut best = scale * sumlx;
    for is in -9..=9 {
        if is == 0 {
            continue;
        }
        iscale = -(nmax as f32 + 0.1f32 * is as f32) / max;
        let (sumlx, suml2) = sums(iscale);
        if suml2 > 0.0 && sumlx * sumlx > best * suml2 {
            for i in 0..n {
                l_out[i] = (quant(iscale, x[i]) + nmax) as i8;
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    scale
}

/// ggml's `make_q3_quants` with `do_rmse`: symmetric codes in `[0, 2*nmax)` refined by up to
/// five rounds of coordinate descent on the `x^2`-weighted least-squares error.
pub(crate) fn make_q3_quants(x: &[f32], nmax: i32, l_out: &mut [i8]) -> f32 {
    let n = x.len();
    let (amax, max) = signed_absmax(x);
    if amax < GROUP_MAX_EPS {
        l_out[..n].fill(0);
        return 0.0;
    }
    let iscale = -(nmax as f32) / max;
    let (mut sumlx, mut suml2) = (0.0f32, 0.0f32);
    for i in 0..n {
        let l = nearest_int(iscale * x[i]).clamp(-nmax, nmax - 1);
        l_out[i] = l as i8;
        let w = x[i] * x[i];
        sumlx += w * x[i] * l as f32;
        suml2 += w * l as f32 * l as f32;
    }
    for _ in 0..5 {
        let mut n_changed = 0;
        for i in 0..n {
            let w = x[i] * x[i];
            let li = l_out[i] as f32;
            let mut slx = sumlx - w * x[i] * li;
            if slx > 0.0 {
                let mut sl2 = suml2 - w * li * li;
                let new_l = nearest_int(x[i] * sl2 / slx).clamp(-nmax, nmax - 1);
                if new_l != l_out[i] as i32 {
                    slx += w * x[i] * new_l as f32;
                    sl2 += w * new_l as f32 * new_l as f32;
                    if sl2 > 0.0 && slx * slx * suml2 > sumlx * sumlx * sl2 {
                        l_out[i] = new_l as i8;
                        sumlx = slx;
                        suml2 = sl2;
                        n_changed += 1;
                    }
                }
            }
        }
        if n_changed == 0 {
            break;
        }
    }
    for l in &mut l_out[..n] {
        *l += nmax as i8;
    }
    if suml2 > 0.0 { sumlx / suml2 } else { 0.0 }
}

/// Longest group [`make_qkx_quants`] is used on (32-element sub-blocks).
const QKX_MAX: usize = 32;

/// Parameters of the affine (scale + min) grid search.
#[derive(Clone, Copy)]
pub(crate) struct AffineSearch {
    pub rmin: f32,
    pub rdelta: f32,
    pub nstep: i32,
    /// Minimize the weighted absolute error instead of the weighted squared error.
    pub use_mad: bool,
}

/// ggml's `make_qkx2_quants` / `make_qkx3_quants` (identical when weights are given):
/// codes `L[i] in [0, nmax]` for `x[i] ~ scale * L[i] - min`, with `min >= 0`, searching
/// `nstep + 1` candidate scales and solving the weighted least-squares (scale, min) for each.
/// Returns `(scale, min)`. `x`, `weights` and `l_out` have the same length (>= 1); `aux` is
/// scratch at least as long.
pub(crate) fn make_qkx_quants(
    x: &[f32],
    weights: &[f32],
    nmax: i32,
    l_out: &mut [u8],
    aux: &mut [u8],
    p: AffineSearch,
) -> (f32, f32) {
    let n = x.len();
    assert!(n <= QKX_MAX, "make_qkx_quants on {n} > {QKX_MAX} elements");
    let (mut min, mut max) = (x[0], x[0]);
    let mut sum_w = weights[0];
    let mut sum_x = sum_w * x[0];
    for i in 1..n {
        min = if x[i] < min { x[i] } else { min };
        max = if x[i] > max { x[i] } else { max };
        sum_w += weights[i];
        sum_x += weights[i] * x[i];
    }
    if min > 0.0 {
        min = 0.0;
    }
    if max == min {
        l_out[..n].fill(0);
        return (0.0, -min);
    }
    let err = |d: f32| if p.use_mad { d.abs() } else { d * d };
    let mut iscale = nmax as f32 / (max - min);
    let mut scale = 1.0 / iscale;
    let mut best_error = 0.0f32;
    for i in 0..n {
        let l = nearest_int(iscale * (x[i] - min)).clamp(0, nmax);
        l_out[i] = l as u8;
        best_error += weights[i] * err(scale * l as f32 + min - x[i]);
    }
    if p.nstep < 1 {
        return (scale, -min);
    }
    // The per-element products are formed in fixed-length, vectorizable lanes exactly as
    // ggml forms them (`w * l`, `(w * l) * l`, `(w * l) * x`); only the sums run in order.
    // Padding (x = w = 0) is computed but never summed.
    let (mut xs, mut ws) = ([0.0f32; QKX_MAX], [0.0f32; QKX_MAX]);
    xs[..n].copy_from_slice(&x[..n]);
    ws[..n].copy_from_slice(&weights[..n]);
    let mut lanes = [[0.0f32; QKX_MAX]; 3];
    let mut codes = [0u8; QKX_MAX];
    for is in 0..=p.nstep {
        iscale = (p.rmin + p.rdelta * is as f32 + nmax as f32) / (max - min);
        for i in 0..QKX_MAX {
            let l = nearest_int(iscale * (xs[i] - min)).clamp(0, nmax);
            codes[i] = l as u8;
            let wl = ws[i] * l as f32;
            lanes[0][i] = wl;
            lanes[1][i] = wl * l as f32;
            lanes[2][i] = wl * xs[i];
        }
        let (mut sum_l, mut sum_l2, mut sum_xl) = (0.0f32, 0.0f32, 0.0f32);
        for ((a, b), c) in lanes[0][..n].iter().zip(&lanes[1][..n]).zip(&lanes[2][..n]) {
            sum_l += a;
            sum_l2 += b;
            sum_xl += c;
        }
        aux[..n].copy_from_slice(&codes[..n]);
        let det = sum_w * sum_l2 - sum_l * sum_l;
        if det > 0.0 {
            let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
            let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
            if this_min > 0.0 {
                this_min = 0.0;
                this_scale = sum_xl / sum_l2;
            }
            for i in 0..QKX_MAX {
                lanes[0][i] = ws[i] * err(this_scale * codes[i] as f32 + this_min - xs[i]);
            }
            let mut cur_error = 0.0f32;
            for &e in &lanes[0][..n] {
                cur_error += e;
            }
            if cur_error < best_error {
                l_out[..n].copy_from_slice(&aux[..n]);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    (scale, -min)
}

/// ggml's `make_qp_quants`: non-negative codes `L[i] in [0, nmax]` for non-negative `x[i] ~
/// scale * L[i]` (used for the sub-block scales and mins of a super-block), weighted by `qw`.
pub(crate) fn make_qp_quants(x: &[f32], nmax: i32, l_out: &mut [u8], qw: &[f32]) -> f32 {
    let n = x.len();
    let max = x.iter().fold(0.0f32, |m, &v| if m > v { m } else { v });
    if max < GROUP_MAX_EPS {
        l_out[..n].fill(0);
        return 0.0;
    }
    let mut iscale = nmax as f32 / max;
    for i in 0..n {
        l_out[i] = nearest_int(iscale * x[i]) as u8;
    }
    let scale = 1.0 / iscale;
    let mut best_mse = 0.0f32;
    for i in 0..n {
        let diff = x[i] - scale * l_out[i] as f32;
        best_mse += qw[i] * diff * diff;
    }
    for is in -4..=4 {
        if is == 0 {
            continue;
        }
        let iscale_is = (0.1f32 * is as f32 + nmax as f32) / max;
        let scale_is = 1.0 / iscale_is;
        let mut mse = 0.0f32;
        for i in 0..n {
            let l = nearest_int(iscale_is * x[i]).min(nmax);
            let diff = x[i] - scale_is * l as f32;
            mse += qw[i] * diff * diff;
        }
        if mse < best_mse {
            best_mse = mse;
            iscale = iscale_is;
        }
    }
    let (mut sumlx, mut suml2) = (0.0f32, 0.0f32);
    for i in 0..n {
        let l = nearest_int(iscale * x[i]).min(nmax);
        l_out[i] = l as u8;
        sumlx += qw[i] * x[i] * l as f32;
        suml2 += qw[i] * l as f32 * l as f32;
    }
    for _ in 0..5 {
        let mut n_changed = 0;
        for i in 0..n {
            let w = qw[i];
            let li = l_out[i] as f32;
            let mut slx = sumlx - w * x[i] * li;
            let mut sl2 = suml2 - w * li * li;
            if slx > 0.0 && sl2 > 0.0 {
                let new_l = nearest_int(x[i] * sl2 / slx).min(nmax);
                if new_l != l_out[i] as i32 {
                    slx += w * x[i] * new_l as f32;
                    sl2 += w * new_l as f32 * new_l as f32;
                    if slx * slx * suml2 > sumlx * sumlx * sl2 {
                        l_out[i] = new_l as u8;
                        sumlx = slx;
                        suml2 = sl2;
                        n_changed += 1;
                    }
                }
            }
        }
        if n_changed == 0 {
            break;
        }
    }
    if suml2 > 0.0 { sumlx / suml2 } else { 0.0 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_int_rounds_half_to_even() {
        assert_eq!(nearest_int(0.5), 0);
        assert_eq!(nearest_int(1.5), 2);
        assert_eq!(nearest_int(2.5), 2);
        assert_eq!(nearest_int(-0.5), 0);
        assert_eq!(nearest_int(-1.5), -2);
        assert_eq!(nearest_int(-2.6), -3);
        assert_eq!(nearest_int(4194303.0), 4194303);
        // Out of range and NaN: deterministic, no panic.
        let _ = nearest_int(f32::NAN);
        let _ = nearest_int(1e30);
    }

    #[test]
    fn all_zero_groups_give_zero_scale() {
        let x = [0.0f32; 16];
        let mut l = [7i8; 16];
        assert_eq!(make_qx_quants(&x, 32, &mut l, SymWeights::XSquared), 0.0);
        assert_eq!(l, [0; 16]);
        assert_eq!(make_q3_quants(&x, 4, &mut l), 0.0);
        let mut lu = [7u8; 16];
        assert_eq!(make_qp_quants(&x, 15, &mut lu, &[1.0; 16]), 0.0);
        assert_eq!(lu, [0; 16]);
    }
}
