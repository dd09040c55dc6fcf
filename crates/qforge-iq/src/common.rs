//! Numeric helpers shared by every I-quant encoder, each a step-for-step port of the ggml
//! helper of the same name (f32 arithmetic in ggml's order of operations), and the common
//! preparation of a block: padding and importance weights.

/// Elements per super-block (ggml's `QK_K`).
pub(crate) const QK_K: usize = 256;

/// Smallest group maximum treated as non-zero (ggml's `GROUP_MAX_EPS`).
pub(crate) const GROUP_MAX_EPS: f32 = 1e-15;

/// ggml's `nearest_int`: round to nearest, ties to even, via the 1.5 * 2^23 magic number.
/// Exact for |v| <= 4194303; outside that range (or for NaN) it returns the same
/// deterministic garbage as ggml, never panicking. Callers clamp before indexing.
#[inline(always)]
pub(crate) fn nearest_int(v: f32) -> i32 {
    let bits = (v + 12_582_912.0f32).to_bits() as i32;
    (bits & 0x007f_ffff) - 0x0040_0000
}

/// C's `MAX(a, b)` macro: `a > b ? a : b` (so a NaN `b` wins, a NaN `a` loses).
#[inline(always)]
pub(crate) fn c_max(a: f32, b: f32) -> f32 {
    if a > b { a } else { b }
}

/// ggml's `best_index_int8`: index of the entry of the ascending table `val` nearest `x`
/// (the upper one on ties). Always in range, NaN included.
#[inline]
pub(crate) fn best_index_int8(val: &[i8; 16], x: f32) -> usize {
    if x <= val[0] as f32 {
        return 0;
    }
    if x >= val[15] as f32 {
        return 15;
    }
    let (mut ml, mut mu) = (0usize, 15usize);
    while mu - ml > 1 {
        let mav = (ml + mu) / 2;
        if x < val[mav] as f32 {
            mu = mav;
        } else {
            ml = mav;
        }
    }
    if x - (val[mu - 1] as f32) < val[mu] as f32 - x { mu - 1 } else { mu }
}

/// ggml's `make_qp_quants` (only its returned scale is used by the I-quants): non-negative
/// codes `L[i] in [0, nmax]` for non-negative `x[i] ~ scale * L[i]`, weighted by `qw`.
pub(crate) fn make_qp_quants(x: &[f32], nmax: i32, qw: &[f32]) -> f32 {
    let n = x.len();
    let mut l = [0u8; 32];
    let l = &mut l[..n];
    let max = x.iter().fold(0.0f32, |m, &v| c_max(m, v));
    if max < GROUP_MAX_EPS {
        return 0.0;
    }
    let mut iscale = nmax as f32 / max;
    for i in 0..n {
        l[i] = nearest_int(iscale * x[i]) as u8;
    }
    let scale = 1.0 / iscale;
    let mut best_mse = 0.0f32;
    for i in 0..n {
        let diff = x[i] - scale * l[i] as f32;
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
            let li = nearest_int(iscale_is * x[i]).min(nmax);
            let diff = x[i] - scale_is * li as f32;
            mse += qw[i] * diff * diff;
        }
        if mse < best_mse {
            best_mse = mse;
            iscale = iscale_is;
        }
    }
    let (mut sumlx, mut suml2) = (0.0f32, 0.0f32);
    for i in 0..n {
        let li = nearest_int(iscale * x[i]).min(nmax);
        l[i] = li as u8;
        sumlx += qw[i] * x[i] * li as f32;
        suml2 += qw[i] * li as f32 * li as f32;
    }
    for _ in 0..5 {
        let mut n_changed = 0;
        for i in 0..n {
            let w = qw[i];
            let li = l[i] as f32;
            let mut slx = sumlx - w * x[i] * li;
            let mut sl2 = suml2 - w * li * li;
            if slx > 0.0 && sl2 > 0.0 {
                let new_l = nearest_int(x[i] * sl2 / slx).min(nmax);
                if new_l != l[i] as i32 {
                    slx += w * x[i] * new_l as f32;
                    sl2 += w * new_l as f32 * new_l as f32;
                    if slx * slx * suml2 > sumlx * sumlx * sl2 {
                        l[i] = new_l as u8;
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

/// The real elements of a block (`1..=N` of them) followed by zeros, and their count.
#[inline]
pub(crate) fn padded<const N: usize>(x: &[f32]) -> ([f32; N], usize) {
    let mut xs = [0.0f32; N];
    let n = x.len().min(N);
    xs[..n].copy_from_slice(&x[..n]);
    (xs, n)
}

/// `sum(x^2)` in ggml's order (padding zeros add nothing).
#[inline]
pub(crate) fn sum_sq(x: &[f32]) -> f32 {
    x.iter().fold(0.0f32, |s, &v| s + v * v)
}

/// How a format turns its inputs into the weights its searches minimize with.
#[derive(Clone, Copy)]
pub(crate) enum NoImatrix {
    /// `x^2` when no importance weights are given.
    XSquared,
    /// `0.25 * sigma2 + x^2` (iq2_s).
    QuarterSigmaPlusXSquared,
    /// `1 * sqrt(sigma2 + x^2)`: ggml requires an imatrix for this format; qforge uses
    /// uniform importance (exactly ggml with an all-ones imatrix).
    Uniform,
}

/// ggml's per-element search weights for a block: `qw[i] * sqrt(sigma2 + x[i]^2)` with
/// importance weights `qw`, else the format's default. Padded positions (`i >= n`) get 0,
/// so they never influence a scale.
pub(crate) fn search_weights(
    x: &[f32],
    n: usize,
    qw: Option<&[f32]>,
    sigma2: f32,
    default: NoImatrix,
    out: &mut [f32],
) {
    for (i, (o, &v)) in out.iter_mut().zip(x).enumerate() {
        *o = if i >= n {
            0.0
        } else {
            match (qw, default) {
                (Some(q), _) => q[i] * (sigma2 + v * v).sqrt(),
                (None, NoImatrix::XSquared) => v * v,
                (None, NoImatrix::QuarterSigmaPlusXSquared) => 0.25f32 * sigma2 + v * v,
                (None, NoImatrix::Uniform) => (sigma2 + v * v).sqrt(),
            }
        };
    }
}

/// ggml's `sigma2 = factor * sum(x^2) / QK_K` of a super-block; for a partial block the sum
/// runs over its `n` real elements and divides by `n` (identical for a whole block).
#[inline]
pub(crate) fn sigma2(xs: &[f32], n: usize, factor: f32) -> f32 {
    factor * sum_sq(xs) / n.max(1) as f32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_int_rounds_half_to_even() {
        assert_eq!(nearest_int(0.5), 0);
        assert_eq!(nearest_int(-0.5), 0);
        assert_eq!(nearest_int(1.5), 2);
        assert_eq!(nearest_int(-2.6), -3);
        let _ = nearest_int(f32::NAN);
    }

    #[test]
    fn best_index_picks_the_nearest_value() {
        let v = crate::tables::KVALUES_IQ4NL;
        assert_eq!(best_index_int8(&v, -1000.0), 0);
        assert_eq!(best_index_int8(&v, 1000.0), 15);
        assert_eq!(best_index_int8(&v, 0.0), 8);
        assert_eq!(best_index_int8(&v, 7.0), 9); // equidistant from 1 and 13: the upper one
        assert!(best_index_int8(&v, f32::NAN) < 16);
    }
}
