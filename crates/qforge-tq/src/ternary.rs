//! What tq1_0 and tq2_0 share: one f16 scale `d` per 256 values and a ternary code per value,
//! `x = (t - 1)·d` with `t ∈ {0, 1, 2}` (tq2_0's 2-bit field also allows `t = 3`, `x = 2d`).
//! The formats differ only in how the codes are packed.

use crate::QK_K;
use qforge_core::le::F16Le;
use qforge_core::{BlockFormat, DType, Elem};

/// The codes of one block (`t ∈ {0, 1, 2}`, value `t - 1`) and its scale as stored.
pub(crate) struct Ternary {
    pub t: [u8; QK_K],
    pub d: F16Le,
}

/// The decoded value of each 2-bit code `t`: `O::from_f32((float)(t - 1) * d)`, as ggml
/// computes it (so `0·d` keeps the sign of `d`, and NaN / Inf scales propagate). For f32 the
/// product is computed in place (it vectorizes); other types look the rounded value up.
pub(crate) struct Levels<O> {
    d: f32,
    lut: [O; 4],
}

impl<O: Elem> Levels<O> {
    #[inline(always)]
    pub fn new(d: f32) -> Self {
        // The products from codes the optimizer cannot see, as `get` computes them for f32:
        // with constant codes, `(0 - 1.0) · d` folds into `-d`, which flips a NaN scale's sign.
        let v = qforge_simd::half_lut::table(&qforge_simd::half_lut::CODES8, |c| (c - 1.0) * d);
        Levels { d, lut: std::array::from_fn(|t| O::from_f32(v[t])) }
    }

    #[inline(always)]
    pub fn get(&self, t: u8) -> O {
        if O::DTYPE == DType::F32 { O::from_f32((f32::from(t) - 1.0) * self.d) } else { self.lut[usize::from(t & 3)] }
    }
}

/// What the decode needs of a ternary format: its scale and its codes in element order.
pub(crate) trait Unpack: BlockFormat {
    /// The block's f16 scale `d`.
    fn d(b: &Self::Block) -> F16Le;
    /// The block's 256 codes in element order, each through `value`.
    fn unpack_block<T: Copy>(b: &Self::Block, out: &mut [T; QK_K], value: impl Fn(u8) -> T + Copy);
}

/// `BlockFormat::decode` of a ternary format: `out` itself when it holds a whole block, else
/// a stack scratch block whose first `out.len()` values are copied out (a partial last
/// block). No closure stands between the row loop and the unpacking (a closure called from
/// two places stays out of line), so both take the row's AVX2 build.
#[inline(always)]
pub(crate) fn decode<F: Unpack, O: Elem>(b: &F::Block, out: &mut [O]) {
    let levels = Levels::<O>::new(F::d(b).get());
    if let Some(full) = out.first_chunk_mut::<QK_K>() {
        F::unpack_block(b, full, |c| levels.get(c));
    } else {
        let mut scratch = [O::default(); QK_K];
        F::unpack_block(b, &mut scratch, |c| levels.get(c));
        out.copy_from_slice(&scratch[..out.len()]);
    }
}

/// ggml's `lroundf(v) + 1` as an `int`, for `|v|` at most about 1 (the code of `v` in units
/// of the scale). A NaN or infinite `v` — only when `1/d` overflows for a tiny subnormal
/// `amax` — makes x86's `lroundf` return `LONG_MIN`; `LONG_MIN + 1` truncated to `int` is 1,
/// the zero code, reproduced here.
#[inline(always)]
fn ggml_code(v: f32) -> u8 {
    // lroundf: +1 from 0.5 up, -1 from -0.5 down; NaN compares false either way.
    let t = 1 + u8::from(v >= 0.5) - u8::from(v <= -0.5);
    if v.is_infinite() { 1 } else { t }
}

/// ggml's ternary quantization of one block (`quantize_row_tq1_0_ref` / `tq2_0_ref`):
/// `d = amax`, `t = lroundf(x / d) + 1`, computed as `x · (1/d)` in f32. Padded positions
/// (past `x.len()`) get code 1 (value 0). With importance weights, [`refine`] may replace it
/// by a smaller scale that lowers the weighted error.
pub(crate) fn quantize(x: &[f32], weights: Option<&[f32]>) -> Ternary {
    let amax = x.iter().fold(0f32, |a, v| a.max(v.abs()));
    let id = if amax != 0.0 { 1.0 / amax } else { 0.0 };
    let mut q = Ternary { t: [1; QK_K], d: F16Le::from_f32(amax) };
    for (t, &v) in q.t.iter_mut().zip(x) {
        *t = ggml_code(v * id);
    }
    if let Some(w) = weights {
        refine(x, w, amax, &mut q);
    }
    q
}

/// `Σ w·(x - (t - 1)·d)²` over the real elements, with `d` as stored.
fn weighted_sse(x: &[f32], w: &[f32], q: &Ternary) -> f64 {
    let d = f64::from(q.d.get());
    x.iter()
        .zip(w)
        .zip(&q.t)
        .map(|((&a, &wi), &t)| f64::from(wi) * (f64::from(a) - (f64::from(t) - 1.0) * d).powi(2))
        .sum()
}

/// Importance-weighted refinement (ggml ignores weights for the ternary formats). For each
/// threshold `amax·k/32` (k = 4..=31), values above it become ±1, the rest 0, and the scale is
/// the weighted least-squares fit `Σ w|x| / Σ w` over the ±1 values. A candidate replaces the
/// current encoding only if its weighted squared error (with the f16 scale as stored) is
/// strictly smaller, so the result is never worse than ggml's.
fn refine(x: &[f32], w: &[f32], amax: f32, q: &mut Ternary) {
    if !(amax.is_finite() && amax > 0.0) {
        return;
    }
    let mut best = weighted_sse(x, w, q);
    for k in 4..32 {
        let thr = amax * k as f32 / 32.0;
        let (mut swx, mut sw) = (0f64, 0f64);
        for (&v, &wi) in x.iter().zip(w) {
            if v.abs() > thr {
                swx += f64::from(wi) * f64::from(v.abs());
                sw += f64::from(wi);
            }
        }
        if sw <= 0.0 {
            continue;
        }
        let d = F16Le::from_f32((swx / sw) as f32);
        if !d.get().is_finite() || d.get() <= 0.0 {
            continue;
        }
        let mut trial = Ternary { t: [1; QK_K], d };
        for (t, &v) in trial.t.iter_mut().zip(x) {
            *t = if v.abs() > thr { if v > 0.0 { 2 } else { 0 } } else { 1 };
        }
        let e = weighted_sse(x, w, &trial);
        // ggml's own scale overflows f16 above 65504 (Inf / NaN values): anything finite wins.
        if e < best || (best.is_nan() && !e.is_nan()) {
            best = e;
            *q = trial;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_half_away_from_zero() {
        assert_eq!([ggml_code(-1.0), ggml_code(-0.5), ggml_code(-0.49), ggml_code(0.0)], [0, 0, 1, 1]);
        assert_eq!([ggml_code(0.49), ggml_code(0.5), ggml_code(1.0000001)], [1, 2, 2]);
        assert_eq!([ggml_code(f32::NAN), ggml_code(f32::INFINITY), ggml_code(f32::NEG_INFINITY)], [1, 1, 1]);
    }

    #[test]
    fn weights_only_replace_on_strict_improvement() {
        let x: Vec<f32> = (0..QK_K).map(|i| if i == 0 { 4.0 } else { ((i * 37 % 17) as f32 - 8.0) / 8.0 }).collect();
        let plain = quantize(&x, None);
        let w = vec![1.0; QK_K];
        let weighted = quantize(&x, Some(&w));
        assert!(weighted_sse(&x, &w, &weighted) < weighted_sse(&x, &w, &plain));
        // Zero weights: nothing to gain, ggml's encoding stays.
        let z = quantize(&x, Some(&[0.0; QK_K]));
        assert_eq!((z.t, z.d), (plain.t, plain.d));
    }
}
