//! The block preparation ggml's importance-weighted quantizers share: the block padded to its
//! full size, `sigma2` (the mean square of the block's or row's real elements, scaled), and the
//! per-element search weights `qw·sqrt(sigma2 + x²)` (with each family's default when no
//! importance weights are given).

/// The real elements of a block (at most `N` of them) followed by zeros, and their count.
#[inline]
pub fn padded<const N: usize>(x: &[f32]) -> ([f32; N], usize) {
    let mut xs = [0.0f32; N];
    let n = x.len().min(N);
    xs[..n].copy_from_slice(&x[..n]);
    (xs, n)
}

/// `Σ x²`, summed in order in f32 (padding zeros add nothing).
#[inline]
pub fn sum_sq(x: &[f32]) -> f32 {
    x.iter().fold(0.0f32, |s, &v| s + v * v)
}

/// ggml's `sigma2 = factor · Σx² / n` over `x` (its zero padding adds nothing) with `n` real
/// elements: per super-block with `factor` 2 (q3_k, iq*), per row with 1 (legacy). 0 for
/// `n = 0`.
#[inline]
pub fn sigma2(x: &[f32], n: usize, factor: f32) -> f32 {
    factor * sum_sq(x) / n.max(1) as f32
}

/// ggml's importance-weighted search weight of one element: `qw · sqrt(sigma2 + x²)`.
#[inline(always)]
pub fn importance(qw: f32, sigma2: f32, x: f32) -> f32 {
    qw * (sigma2 + x * x).sqrt()
}

/// [`importance`] of each element of `x` with its `qw` into `w` (as far as all three
/// reach); returns their sum, in order.
#[inline]
pub fn importance_weights(x: &[f32], qw: &[f32], sigma2: f32, w: &mut [f32]) -> f32 {
    let mut sum = 0.0f32;
    for ((wi, &xi), &q) in w.iter_mut().zip(x).zip(qw) {
        *wi = importance(q, sigma2, xi);
        sum += *wi;
    }
    sum
}

/// The search weights of a format when no importance weights are given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoImatrix {
    /// `x²`.
    XSquared,
    /// `0.25 · sigma2 + x²` (iq2_s).
    QuarterSigmaPlusXSquared,
    /// `sqrt(sigma2 + x²)`: uniform importance, exactly ggml with an all-ones imatrix (for the
    /// formats ggml refuses to quantize without one).
    Uniform,
}

/// The per-element search weights of a block: [`importance`] with importance weights `qw`,
/// else the format's `default`. Padded positions (`i >= n`) get 0, so they never influence a
/// scale.
pub fn search_weights(x: &[f32], n: usize, qw: Option<&[f32]>, sigma2: f32, default: NoImatrix, out: &mut [f32]) {
    for (i, (o, &v)) in out.iter_mut().zip(x).enumerate() {
        *o = if i >= n {
            0.0
        } else {
            match (qw, default) {
                (Some(q), _) => importance(q[i], sigma2, v),
                (None, NoImatrix::XSquared) => v * v,
                (None, NoImatrix::QuarterSigmaPlusXSquared) => 0.25f32 * sigma2 + v * v,
                (None, NoImatrix::Uniform) => importance(1.0, sigma2, v),
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padded_keeps_the_real_elements() {
        let (xs, n) = padded::<4>(&[1.0, -2.0]);
        assert_eq!((xs, n), ([1.0, -2.0, 0.0, 0.0], 2));
        let (xs, n) = padded::<2>(&[1.0, 2.0, 3.0]);
        assert_eq!((xs, n), ([1.0, 2.0], 2));
    }

    #[test]
    fn sigma2_is_the_scaled_mean_square_of_the_real_elements() {
        assert_eq!(sigma2(&[1.0, 3.0, 0.0, 0.0], 2, 2.0), 10.0);
        assert_eq!(sigma2(&[], 0, 2.0), 0.0);
    }

    #[test]
    fn weights_follow_ggml_and_ignore_padding() {
        let x = [3.0f32, -4.0, 7.0];
        let mut w = [9.0f32; 3];
        assert_eq!(importance_weights(&x, &[2.0, 0.5], 16.0, &mut w), 10.0 + 0.5 * 32f32.sqrt());
        assert_eq!(w, [10.0, 0.5 * 32f32.sqrt(), 9.0]);
        let mut w = [9.0f32; 3];
        search_weights(&x, 2, None, 16.0, NoImatrix::Uniform, &mut w);
        assert_eq!(w, [5.0, 32f32.sqrt(), 0.0]);
        search_weights(&x, 2, None, 16.0, NoImatrix::QuarterSigmaPlusXSquared, &mut w);
        assert_eq!(w, [13.0, 20.0, 0.0]);
        search_weights(&x, 3, Some(&[1.0, 2.0, 0.0]), 0.0, NoImatrix::XSquared, &mut w);
        assert_eq!(w, [3.0, 8.0, 0.0]);
    }
}
