//! Numeric helpers shared by every I-quant encoder, each a step-for-step port of the ggml
//! helper of the same name (f32 arithmetic in ggml's order of operations), and the common
//! preparation of a block: padding and importance weights. The searches ggml shares with the
//! other families (`nearest_int`, `make_qp_quants`, ...) come from `qforge-ggml-search`.

/// Elements per super-block (ggml's `QK_K`).
pub(crate) const QK_K: usize = 256;

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
    fn best_index_picks_the_nearest_value() {
        let v = crate::tables::KVALUES_IQ4NL;
        assert_eq!(best_index_int8(&v, -1000.0), 0);
        assert_eq!(best_index_int8(&v, 1000.0), 15);
        assert_eq!(best_index_int8(&v, 0.0), 8);
        assert_eq!(best_index_int8(&v, 7.0), 9); // equidistant from 1 and 13: the upper one
        assert!(best_index_int8(&v, f32::NAN) < 16);
    }
}
