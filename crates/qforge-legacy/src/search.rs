//! ggml's scale searches used when importance weights are given, reproduced operation for
//! operation in f32 so that the chosen quants match ggml's bit for bit:
//! `make_qx_quants` (symmetric, q4_0 / q5_0) and `make_qkx3_quants` (affine, q4_1 / q5_1).
//!
//! Both work on the `n <= 32` real elements of a block; the caller handles padding.

use crate::block::QK;

/// ggml's threshold below which a group counts as all zero.
const GROUP_MAX_EPS: f32 = 1e-15;

/// ggml's `nearest_int`: add 1.5·2^23 and read the mantissa, i.e. round half to even for
/// |v| < 2^22. Out-of-range or non-finite input yields a meaningless but defined integer
/// (as in ggml, whose assertion is compiled out), which every caller then clamps.
#[inline(always)]
pub(crate) fn nearest_int(v: f32) -> i32 {
    let bits = (v + 12_582_912.0).to_bits() as i32;
    (bits & 0x007f_ffff) - 0x0040_0000
}

/// `make_qx_quants(n, nmax, x, L, rmse_type = 1, qw)` with weights: the symmetric scale that
/// minimizes the weighted squared error over 19 candidate inverse scales around `-nmax/max`.
/// Writes codes `0..2·nmax` (value `code - nmax`) into `codes[..n]`; returns the scale `d`.
pub(crate) fn make_qx_quants(x: &[f32], w: &[f32; QK], nmax: i32, codes: &mut [i32; QK]) -> f32 {
    let n = x.len().min(QK);
    let x = &x[..n];
    let (mut max, mut amax) = (0f32, 0f32);
    for &v in x {
        let ax = v.abs();
        if ax > amax {
            amax = ax;
            max = v;
        }
    }
    if amax < GROUP_MAX_EPS {
        codes[..n].fill(0);
        return 0.0;
    }
    let nmaxf = nmax as f32;
    let quant = |iscale: f32, v: f32| nearest_int(iscale * v).clamp(-nmax, nmax - 1);
    // Weighted sums Σ w·x·l and Σ w·l² for one candidate inverse scale.
    let sums = |iscale: f32| {
        let (mut sumlx, mut suml2) = (0f32, 0f32);
        for (&v, &wi) in x.iter().zip(w) {
            let l = quant(iscale, v) as f32;
            sumlx += wi * v * l;
            suml2 += wi * l * l;
        }
        (sumlx, suml2)
    };
    let mut fill = |iscale: f32| {
        for (c, &v) in codes.iter_mut().zip(x) {
            *c = nmax + quant(iscale, v);
        }
    };

    let iscale = -nmaxf / max;
    fill(iscale);
    let (sumlx, suml2) = sums(iscale);
    let mut scale = if suml2 != 0.0 { sumlx / suml2 } else { 0.0 };
    let mut best = scale * sumlx;
    for is in (-9..=9).filter(|&is| is != 0) {
        let iscale = -(nmaxf + 0.1 * is as f32) / max;
        let (sumlx, suml2) = sums(iscale);
        if suml2 > 0.0 && sumlx * sumlx > best * suml2 {
            fill(iscale);
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    scale
}

/// `make_qkx3_quants(n, nmax, x, weights, L, &the_min, Laux, rmin, rdelta, nstep,
/// use_mad = false)`: the affine fit `x ≈ d·l + min` (min <= 0) minimizing the weighted
/// squared error over `nstep + 1` candidate inverse scales. Writes codes `0..=nmax` into
/// `codes[..n]`; returns `(d, min)` (ggml returns `-min` through `the_min`).
pub(crate) fn make_qkx3_quants(
    x: &[f32],
    w: &[f32; QK],
    nmax: i32,
    (rmin, rdelta, nstep): (f32, f32, i32),
    codes: &mut [i32; QK],
) -> (f32, f32) {
    let n = x.len().min(QK);
    let x = &x[..n];
    let Some(&x0) = x.first() else { return (0.0, 0.0) };
    let (mut min, mut max) = (x0, x0);
    let mut sum_w = w[0];
    let mut sum_x = sum_w * x0;
    for (&v, &wi) in x.iter().zip(w).skip(1) {
        if v < min {
            min = v;
        }
        if v > max {
            max = v;
        }
        sum_w += wi;
        sum_x += wi * v;
    }
    if min > 0.0 {
        min = 0.0;
    }
    if max <= min {
        codes[..n].fill(0);
        return (0.0, min);
    }
    let nmaxf = nmax as f32;
    let quant = |iscale: f32, min: f32, v: f32| nearest_int(iscale * (v - min)).clamp(0, nmax);
    let sq_err = |scale: f32, min: f32, l: &[i32]| {
        let mut e = 0f32;
        for ((&v, &wi), &l) in x.iter().zip(w).zip(l) {
            let diff = scale * l as f32 + min - v;
            e += wi * (diff * diff);
        }
        e
    };

    let iscale = nmaxf / (max - min);
    let mut scale = 1.0 / iscale;
    for (c, &v) in codes.iter_mut().zip(x) {
        *c = quant(iscale, min, v);
    }
    let mut best = sq_err(scale, min, &codes[..n]);

    let mut aux = [0i32; QK];
    for is in 0..=nstep {
        let iscale = (rmin + rdelta * is as f32 + nmaxf) / (max - min);
        let (mut sum_l, mut sum_l2, mut sum_xl) = (0f32, 0f32, 0f32);
        for ((a, &v), &wi) in aux.iter_mut().zip(x).zip(w) {
            let l = quant(iscale, min, v);
            *a = l;
            let lf = l as f32;
            sum_l += wi * lf;
            sum_l2 += wi * lf * lf;
            sum_xl += wi * lf * v;
        }
        let det = sum_w * sum_l2 - sum_l * sum_l;
        if det > 0.0 {
            let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
            let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
            if this_min > 0.0 {
                this_min = 0.0;
                this_scale = sum_xl / sum_l2;
            }
            let err = sq_err(this_scale, this_min, &aux[..n]);
            if err < best {
                codes[..n].copy_from_slice(&aux[..n]);
                best = err;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    (scale, min)
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
        assert_eq!(nearest_int(-7.49), -7);
        assert_eq!(nearest_int(1234.6), 1235);
    }

    #[test]
    fn searches_survive_degenerate_input() {
        let w = [1.0; QK];
        let mut c = [7; QK];
        assert_eq!(make_qx_quants(&[0.0; 5], &w, 8, &mut c), 0.0);
        assert_eq!(&c[..5], &[0; 5]);
        assert_eq!(make_qkx3_quants(&[], &w, 15, (-0.9, 0.05, 36), &mut c), (0.0, 0.0));
        // All positive and equal: min clamps to 0, max > min, so a real fit happens.
        let (d, m) = make_qkx3_quants(&[2.0; 3], &w, 15, (-0.9, 0.05, 36), &mut c);
        assert!(d > 0.0 && m == 0.0);
    }
}
