//! qforge-ggml-search: ggml's scalar quantization searches, reproduced bit for bit, written
//! once and shared by the format families (`qforge-legacy`, `qforge-k`, `qforge-iq`).
//!
//! ggml's reference quantizers (`ggml-quants.c`) choose their integer codes with a handful of
//! small searches: [`nearest_int`] (round half to even through a magic number),
//! [`make_qx_quants`] (symmetric scale, 19 candidates), [`make_q3_quants`] (symmetric, with
//! coordinate descent), [`make_qkx_quants`] (ggml's `make_qkx2_quants` / `make_qkx3_quants`:
//! affine scale + min) and [`make_qp_quants`] (non-negative, for super-block scales). A format
//! whose bytes must equal ggml's has to pick exactly the same codes, so every function here
//! follows ggml's C step for step, in `f32`, in the same order of operations:
//!
//! * C's implicit conversions are spelled out: `int * float` converts the integer to `f32`
//!   first, `a * b * c` is `(a * b) * c`, and storing an `int` into a narrower integer
//!   truncates ([`Code::from_i32`] is an `as` cast).
//! * Sums run sequentially from index 0, as ggml's loops do. Only the per-element products are
//!   computed ahead, in fixed-length "lanes" (`[f32; N]` arrays whose tail beyond the `n` real
//!   elements is padding that is computed but never summed), which is what lets the compiler
//!   vectorize them without changing a single rounding.
//! * Rust never contracts `a * b + c` into an FMA, so native CPU flags cannot change a result.
//!
//! Inputs are finite (the format layer rejects anything else before encoding); the functions
//! never panic on out-of-range intermediate values, which, as in ggml, give meaningless but
//! deterministic codes that are clamped before use.
//!
//! The block preparation those quantizers share is here too: [`padded`], [`sigma2`] and the
//! importance-weighted search weights ([`importance`], [`importance_weights`],
//! [`search_weights`] with a format's [`NoImatrix`] default).
//!
//! This crate has no dependencies: it sits below the family crates and beside `qforge-core`.
#![forbid(unsafe_code)]

mod weights;

pub use weights::{NoImatrix, importance, importance_weights, padded, search_weights, sigma2, sum_sq};

/// Smallest group maximum ggml treats as non-zero (`GROUP_MAX_EPS`).
pub const GROUP_MAX_EPS: f32 = 1e-15;

/// ggml's `nearest_int`: add 1.5·2^23 and read the mantissa, i.e. round to nearest with ties to
/// even, exact for `|v| <= 4194303`. Outside that range, or for NaN, it returns the same
/// deterministic garbage as ggml (whose assertion is compiled out), never panicking; every
/// caller clamps the result.
#[inline(always)]
pub fn nearest_int(v: f32) -> i32 {
    let bits = (v + 12_582_912.0f32).to_bits() as i32;
    (bits & 0x007f_ffff) - 0x0040_0000
}

/// C's `MAX(a, b)` macro: `a > b ? a : b` (so a NaN `b` wins and a NaN `a` loses).
#[inline(always)]
pub fn c_max(a: f32, b: f32) -> f32 {
    if a > b { a } else { b }
}

/// Lanes of the vectorizable maximum in [`abs_max`].
const LANES: usize = 8;

/// `max |x[i]|` (0 for an empty or all-zero `x`) over finite `x`, computed in independent
/// lanes so that it vectorizes; for finite input the maximum does not depend on the order.
#[inline(always)]
pub fn abs_max(x: &[f32]) -> f32 {
    let mut lanes = [0.0f32; LANES];
    let mut chunks = x.chunks_exact(LANES);
    for c in &mut chunks {
        for (m, &v) in lanes.iter_mut().zip(c) {
            *m = if v.abs() > *m { v.abs() } else { *m };
        }
    }
    let rest = chunks.remainder().iter().map(|v| v.abs());
    lanes.into_iter().chain(rest).fold(0.0f32, |m, a| if a > m { a } else { m })
}

/// `(amax, max)`: the largest magnitude in finite `x` and the first element of that magnitude,
/// `(0, 0)` if none exceeds 0. This is ggml's `if (ax > amax) { amax = ax; max = x[i]; }` loop,
/// computed as [`abs_max`] followed by a search for the first element of that magnitude.
#[inline(always)]
pub fn signed_absmax(x: &[f32]) -> (f32, f32) {
    let amax = abs_max(x);
    if amax > 0.0 { (amax, first_of_magnitude(x, amax)) } else { (0.0, 0.0) }
}

/// The first element of `x` whose magnitude is `amax` (> 0), i.e. `amax` or `-amax`. Whether
/// `+amax` and `-amax` occur is two or-reductions that vectorize; only when both occur does
/// the order matter, and then (rarely) the first is searched for. A search on every block
/// exits at an unpredictable place and cost a third of q4_0's quantize time.
#[inline(always)]
fn first_of_magnitude(x: &[f32], amax: f32) -> f32 {
    let (pos, neg) = x.iter().fold((false, false), |(p, n), &v| (p | (v == amax), n | (v == -amax)));
    match (pos, neg) {
        (true, false) => amax,
        (false, true) => -amax,
        _ => x.iter().copied().find(|v| v.abs() == amax).unwrap_or(0.0),
    }
}

/// An integer type the searches write their codes as (`i8`, `u8` or `i32`), converted the way
/// C converts an `int` stored into it.
pub trait Code: Copy + Default {
    /// C's `(T)v`: truncation to the type's width (an `as` cast).
    fn from_i32(v: i32) -> Self;
    /// The code as an `int` again (sign- or zero-extended).
    fn to_i32(self) -> i32;
}

macro_rules! impl_code {
    ($($t:ty),*) => {$(
        impl Code for $t {
            #[inline(always)]
            fn from_i32(v: i32) -> Self {
                v as $t
            }
            #[inline(always)]
            fn to_i32(self) -> i32 {
                self as i32
            }
        }
    )*};
}
impl_code!(i8, u8, i32);

/// The weights of a symmetric search ([`make_qx_quants`] with ggml's `rmse_type == 1`).
#[derive(Clone, Copy, Debug)]
pub enum SymWeights<'a> {
    /// Explicit per-element weights (`quant_weights`, or a format's combined weights), at
    /// least as many as elements.
    Given(&'a [f32]),
    /// `x[i]^2`: ggml's weights when `quant_weights` is NULL.
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

/// ggml's `make_qx_quants(n, nmax, x, L, rmse_type = 1, qw)`: the symmetric scale that best
/// fits `x[i] ≈ scale · (L[i] - nmax)` in weighted least squares, trying the inverse scale
/// `-nmax / max` and 18 candidates `-(nmax + 0.1·is) / max` around it (`max` is the element of
/// largest magnitude). Writes codes `L[i] in [0, 2·nmax)` into `l_out[..n]` and returns the
/// scale (0, with all codes 0, for a group whose magnitude is below [`GROUP_MAX_EPS`]).
///
/// `N` is the lane length: the longest group the caller uses (`x.len() <= N`, checked).
#[inline(always)]
pub fn make_qx_quants<const N: usize, C: Code>(x: &[f32], nmax: i32, l_out: &mut [C], w: SymWeights<'_>) -> f32 {
    let n = x.len();
    assert!(n <= N, "make_qx_quants on {n} > {N} elements");
    let l_out = &mut l_out[..n];
    let (amax, max) = signed_absmax(x);
    if amax < GROUP_MAX_EPS {
        l_out.fill(C::from_i32(0));
        return 0.0;
    }
    let quant = |iscale: f32, v: f32| nearest_int(iscale * v).clamp(-nmax, nmax - 1);
    // ggml's products `(w * x) * l` and `(w * l) * l`, formed in fixed-length lanes; padding
    // (x = w = 0) is computed but never summed.
    let (mut xs, mut wv, mut wx) = ([0.0f32; N], [0.0f32; N], [0.0f32; N]);
    for i in 0..n {
        xs[i] = x[i];
        wv[i] = w.at(x, i);
        wx[i] = wv[i] * x[i];
    }
    let sums = |iscale: f32| {
        let (mut a, mut b) = ([0.0f32; N], [0.0f32; N]);
        for i in 0..N {
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
    let fill = |iscale: f32, l_out: &mut [C]| {
        for (l, &v) in l_out.iter_mut().zip(x) {
            *l = C::from_i32(nmax + quant(iscale, v));
        }
    };
    let iscale = -(nmax as f32) / max;
    fill(iscale, l_out);
    let (sumlx, suml2) = sums(iscale);
    let mut scale = if suml2 != 0.0 { sumlx / suml2 } else { 0.0 };
    let mut best = scale * sumlx;
    for is in (-9..=9).filter(|&is| is != 0) {
        let iscale = -(nmax as f32 + 0.1f32 * is as f32) / max;
        let (sumlx, suml2) = sums(iscale);
        if suml2 > 0.0 && sumlx * sumlx > best * suml2 {
            fill(iscale, l_out);
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    scale
}

/// ggml's `make_q3_quants(n, nmax, x, L, do_rmse = true)`: symmetric codes `L[i] in [0,
/// 2·nmax)` for `x[i] ≈ scale · (L[i] - nmax)`, starting from the inverse scale `-nmax / max`
/// and refined by up to five rounds of coordinate descent on the `x²`-weighted least-squares
/// error. Writes `l_out[..n]`; returns the scale (0 for a group below [`GROUP_MAX_EPS`]).
///
/// Its descent differs from [`make_qp_quants`]'s in ggml itself (signed codes clamped to
/// `[-nmax, nmax)`, the `sl2 > 0` test after the new code instead of before), so the two are
/// kept as ggml writes them rather than merged behind flags.
///
/// `N` is the lane length (`x.len() <= N`, checked): the first pass and the per-element
/// products the descent reuses (`w = x²`, `w·x`) are formed in fixed-length lanes; every sum
/// still runs sequentially from index 0.
#[inline(always)]
pub fn make_q3_quants<const N: usize>(x: &[f32], nmax: i32, l_out: &mut [i8]) -> f32 {
    let n = x.len();
    assert!(n <= N, "make_q3_quants on {n} > {N} elements");
    let l_out = &mut l_out[..n];
    let (amax, max) = signed_absmax(x);
    if amax < GROUP_MAX_EPS {
        l_out.fill(0);
        return 0.0;
    }
    let iscale = -(nmax as f32) / max;
    let (mut xs, mut wv, mut wx) = ([0.0f32; N], [0.0f32; N], [0.0f32; N]);
    xs[..n].copy_from_slice(x);
    let (mut l, mut a, mut b) = ([0i32; N], [0.0f32; N], [0.0f32; N]);
    for i in 0..N {
        wv[i] = xs[i] * xs[i];
        wx[i] = wv[i] * xs[i];
        l[i] = nearest_int(iscale * xs[i]).clamp(-nmax, nmax - 1);
        let lf = l[i] as f32;
        a[i] = wx[i] * lf;
        b[i] = wv[i] * lf * lf;
    }
    let (mut sumlx, mut suml2) = (0.0f32, 0.0f32);
    for i in 0..n {
        sumlx += a[i];
        suml2 += b[i];
    }
    for _ in 0..5 {
        let mut n_changed = 0;
        for i in 0..n {
            let (w, wxi) = (wv[i], wx[i]);
            let li = l[i] as f32;
            let mut slx = sumlx - wxi * li;
            if slx > 0.0 {
                let mut sl2 = suml2 - w * li * li;
                let new_l = nearest_int(xs[i] * sl2 / slx).clamp(-nmax, nmax - 1);
                if new_l != l[i] {
                    slx += wxi * new_l as f32;
                    sl2 += w * new_l as f32 * new_l as f32;
                    if sl2 > 0.0 && slx * slx * suml2 > sumlx * sumlx * sl2 {
                        l[i] = new_l;
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
    for (o, &li) in l_out.iter_mut().zip(&l) {
        *o = (li + nmax) as i8;
    }
    if suml2 > 0.0 { sumlx / suml2 } else { 0.0 }
}

/// Parameters of the affine grid search [`make_qkx_quants`]: candidate inverse scales
/// `(rmin + rdelta·is + nmax) / (max - min)` for `is in 0..=nstep`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AffineSearch {
    /// Offset of the first candidate (added to `nmax` in the numerator; ggml's `rmin`).
    pub rmin: f32,
    /// Step between candidates (ggml's `rdelta`).
    pub rdelta: f32,
    /// Number of steps: candidates `is = 0..=nstep` (ggml's `nstep`).
    pub nstep: i32,
    /// Minimize the weighted absolute error instead of the weighted squared error.
    pub use_mad: bool,
}

/// ggml's `make_qkx2_quants` / `make_qkx3_quants` with explicit weights (the two are the same
/// algorithm then): codes `L[i] in [0, nmax]` for `x[i] ≈ scale · L[i] - the_min`, `the_min >=
/// 0`, trying the inverse scale `nmax / (max - min)` and then `nstep + 1` candidates, for each
/// solving the weighted least-squares `(scale, min)` and keeping the fit with the smallest
/// weighted error. Writes `l_out[..n]` and returns `(scale, the_min)` as ggml does (`the_min`
/// is minus the fitted offset; `(0, -min)` for a constant group, `(0, 0)` for an empty one).
///
/// `weights` has at least `n` elements; `N` is the lane length (`x.len() <= N`, checked).
#[inline(always)]
pub fn make_qkx_quants<const N: usize, C: Code>(
    x: &[f32],
    weights: &[f32],
    nmax: i32,
    l_out: &mut [C],
    p: AffineSearch,
) -> (f32, f32) {
    let n = x.len();
    assert!(n <= N, "make_qkx_quants on {n} > {N} elements");
    if n == 0 {
        return (0.0, 0.0);
    }
    let l_out = &mut l_out[..n];
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
    if max <= min {
        l_out.fill(C::from_i32(0));
        return (0.0, -min);
    }
    let err = |d: f32| if p.use_mad { d.abs() } else { d * d };
    let quant = |iscale: f32, v: f32, min: f32| nearest_int(iscale * (v - min)).clamp(0, nmax);
    let iscale = nmax as f32 / (max - min);
    let mut scale = 1.0 / iscale;
    let mut best_error = 0.0f32;
    for i in 0..n {
        let l = quant(iscale, x[i], min);
        l_out[i] = C::from_i32(l);
        best_error += weights[i] * err(scale * l as f32 + min - x[i]);
    }
    if p.nstep < 1 {
        return (scale, -min);
    }
    // ggml's products `w * l`, `(w * l) * l`, `(w * l) * x` and `w * err`, formed in
    // fixed-length lanes; padding (x = w = 0) is computed but never summed.
    let (mut xs, mut ws) = ([0.0f32; N], [0.0f32; N]);
    xs[..n].copy_from_slice(x);
    ws[..n].copy_from_slice(&weights[..n]);
    let (mut lane_l, mut lane_l2, mut lane_xl) = ([0.0f32; N], [0.0f32; N], [0.0f32; N]);
    let mut codes = [C::default(); N];
    for is in 0..=p.nstep {
        let iscale = (p.rmin + p.rdelta * is as f32 + nmax as f32) / (max - min);
        for i in 0..N {
            let l = quant(iscale, xs[i], min);
            codes[i] = C::from_i32(l);
            let wl = ws[i] * l as f32;
            lane_l[i] = wl;
            lane_l2[i] = wl * l as f32;
            lane_xl[i] = wl * xs[i];
        }
        let (mut sum_l, mut sum_l2, mut sum_xl) = (0.0f32, 0.0f32, 0.0f32);
        for i in 0..n {
            sum_l += lane_l[i];
            sum_l2 += lane_l2[i];
            sum_xl += lane_xl[i];
        }
        let det = sum_w * sum_l2 - sum_l * sum_l;
        if det > 0.0 {
            let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / det;
            let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / det;
            if this_min > 0.0 {
                this_min = 0.0;
                this_scale = sum_xl / sum_l2;
            }
            for i in 0..N {
                lane_l[i] = ws[i] * err(this_scale * codes[i].to_i32() as f32 + this_min - xs[i]);
            }
            let mut cur_error = 0.0f32;
            for &e in &lane_l[..n] {
                cur_error += e;
            }
            if cur_error < best_error {
                l_out.copy_from_slice(&codes[..n]);
                best_error = cur_error;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    (scale, -min)
}

/// ggml's `make_qp_quants(n, nmax, x, L, quant_weights)`: codes `L[i] in [0, nmax]` for
/// non-negative `x[i] ≈ scale · L[i]` (the sub-block scales and mins of a super-block), weighted
/// by `qw`. Starts from the best of the inverse scales `(nmax + 0.1·is) / max`, `is in -4..=4`,
/// then refines the codes by up to five rounds of coordinate descent. Writes `l_out[..n]` and
/// returns the least-squares scale (0, with all codes 0, for a group whose maximum is below
/// [`GROUP_MAX_EPS`]).
#[inline(always)]
pub fn make_qp_quants(x: &[f32], nmax: i32, l_out: &mut [u8], qw: &[f32]) -> f32 {
    let n = x.len();
    let l_out = &mut l_out[..n];
    let max = x.iter().fold(0.0f32, |m, &v| c_max(m, v));
    if max < GROUP_MAX_EPS {
        l_out.fill(0);
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
    for is in (-4..=4).filter(|&is| is != 0) {
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
mod tests;
