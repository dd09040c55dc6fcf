//! Decode and encode of one block, written once for both formats (generic over [`Spec`]).

use crate::spec::{MAX_QK, QS_BYTES, Spec, level};
use qforge_core::Elem;
use qforge_core::le::F16Le;
use qforge_simd::half_lut::{CODES, Codes32, Fifth, GroupSink, Tables, table};

/// The code of element `j` (LSB-first packing, `S::BITS` bits per code).
#[inline(always)]
pub fn code<S: Spec>(qs: &[u8; QS_BYTES], j: usize) -> u8 {
    let bit = j * S::BITS;
    (qs[bit / 8] >> (bit % 8)) & ((1u8 << S::BITS) - 1)
}

/// The f32 value of code `c` (as f32) with scale `d`, as ggml 0.25.3 computes it: q1_0's
/// `bit ? d : −d` (a negation: a NaN scale's sign flips for a 0 bit), q2_0's `(float)(c − 1) ·
/// d` (a multiplication: a NaN keeps its sign, and `0 · d` keeps the sign of `d`); checked by
/// `nan_scale_signs_match_ggml`. Callers pass `c` from behind an optimization barrier
/// ([`qforge_simd::half_lut::table`]), so that LLVM cannot fold q2_0's `-1.0 · d` into `-d`.
#[inline(always)]
fn value<S: Spec>(c: f32, d: f32) -> f32 {
    debug_assert!(S::BITS == 1 || S::STEP == 1, "q2_0's levels are c - 1");
    match S::BITS {
        1 => {
            if c == 0.0 {
                -d
            } else {
                d
            }
        }
        _ => (c - 1.0) * d,
    }
}

/// ggml's `dequantize_row_q1_0` / `q2_0` of one block ([`value`] of each code, then
/// `O::from_f32`). Writes at most `S::QK` elements.
#[inline(always)]
pub fn decode<S: Spec, O: Elem>(d: F16Le, qs: &[u8; QS_BYTES], out: &mut [O]) {
    static CODES4: [f32; 4] = [0.0, 1.0, 2.0, 3.0];
    let d = d.get();
    let c = qforge_simd::barrier::opaque_ref(&CODES4);
    let lut = [0, 1, 2, 3].map(|k| O::from_f32(value::<S>(c[k], d)));
    for (j, o) in out.iter_mut().take(S::QK).enumerate() {
        *o = lut[usize::from(code::<S>(qs, j))];
    }
}

/// The block's 32-element groups for f16 / bf16 rows by table lookup
/// (`qforge_simd::half_lut`): one table of [`value`]s, the codes packed LSB first.
#[inline(always)]
pub fn groups<S: Spec>(d: F16Le, qs: &[u8; QS_BYTES], mut f: impl GroupSink) {
    let d = d.get();
    let t = Tables::One(table(&CODES, |c| value::<S>(c, d)));
    // Plain loops, not `for_each` closures: a closure is a function of its own without the
    // caller's target features, and once the sink's bf16 build (`vcvtne2ps2bf16` with its
    // subnormal check) made it too large to inline, every intrinsic in it became a call
    // (bf16 rows of q1_0 / q2_0 at 0.3 Gel/s on a Zen 5, against 17 for the AVX2 build).
    if S::BITS == 1 {
        for g in qs.as_chunks::<4>().0 {
            f.group(t, Codes32::Bits(*g), Fifth::None);
        }
    } else {
        for g in qs.as_chunks::<8>().0 {
            f.group(t, Codes32::Pairs(*g), Fifth::None);
        }
    }
}

/// One block's scale (as stored) and codes (`S::QK` of them; padded positions `S::PAD`).
struct Coded {
    d: F16Le,
    codes: [u8; MAX_QK],
}

/// ggml's `quantize_row_*_ref` of one block (whole or partial), then, given importance
/// weights, [`refine`]. Returns the scale and the packed codes.
pub fn encode<S: Spec>(x: &[f32], weights: Option<&[f32]>) -> (F16Le, [u8; QS_BYTES]) {
    debug_assert!(!x.is_empty() && x.len() <= S::QK);
    let mut q = Coded { d: F16Le::from_f32(0.0), codes: [S::PAD; MAX_QK] };
    q.d = F16Le::from_f32(S::ggml_codes(x, &mut q.codes[..x.len()]));
    if let Some(w) = weights {
        refine::<S>(x, w, &mut q);
    }
    let mut qs = [0u8; QS_BYTES];
    for (j, &c) in q.codes[..S::QK].iter().enumerate() {
        let bit = j * S::BITS;
        qs[bit / 8] |= c << (bit % 8);
    }
    (q.d, qs)
}

/// `Σ w·(x − level(c)·d)²` over the real elements, with `d` as stored.
fn weighted_sse<S: Spec>(x: &[f32], w: &[f32], d: F16Le, codes: &[u8]) -> f64 {
    let d = f64::from(d.get());
    x.iter()
        .zip(w)
        .zip(codes)
        .map(|((&v, &wi), &c)| f64::from(wi) * (f64::from(v) - f64::from(level::<S>(c)) * d).powi(2))
        .sum()
}

/// Importance-weighted refinement (ggml ignores the weights for q1_0 and q2_0). For each
/// trial scale `s = amax·k/32` (`k` in `S::TRIALS`), every value takes the code nearest
/// `x / s`, and the scale becomes the weighted least-squares fit `Σ w·x·l / Σ w·l²` of those
/// levels `l`, rounded to f16. A trial replaces the encoding only if its weighted squared
/// error (with the f16 scale) is strictly smaller, so the result is never worse than ggml's.
fn refine<S: Spec>(x: &[f32], w: &[f32], q: &mut Coded) {
    let amax = x.iter().fold(0f32, |a, v| a.max(v.abs()));
    if !(amax.is_finite() && amax > 0.0) {
        return;
    }
    let n = x.len();
    let mut best = weighted_sse::<S>(x, w, q.d, &q.codes[..n]);
    let mut trial = [S::PAD; MAX_QK];
    for k in S::TRIALS {
        let s = amax * k as f32 / 32.0;
        let (mut num, mut den) = (0f64, 0f64);
        for ((c, &v), &wi) in trial.iter_mut().zip(x).zip(w) {
            *c = S::nearest(v / s);
            let l = f64::from(level::<S>(*c));
            num += f64::from(wi) * f64::from(v) * l;
            den += f64::from(wi) * l * l;
        }
        if !(num > 0.0 && den > 0.0) {
            continue;
        }
        let d = F16Le::from_f32((num / den) as f32);
        if !(d.get().is_finite() && d.get() > 0.0) {
            continue;
        }
        let e = weighted_sse::<S>(x, w, d, &trial[..n]);
        // ggml's own scale overflows f16 above 65504 (Inf / NaN values): anything finite wins.
        if e < best || (best.is_nan() && !e.is_nan()) {
            best = e;
            q.d = d;
            q.codes[..n].copy_from_slice(&trial[..n]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::{Q1_0, Q2_0};

    fn decoded<S: Spec>(d: F16Le, qs: &[u8; QS_BYTES]) -> Vec<f32> {
        let mut out = vec![0f32; S::QK];
        decode::<S, f32>(d, qs, &mut out);
        out
    }

    #[test]
    fn packing_is_lsb_first() {
        let mut qs = [0u8; QS_BYTES];
        qs[0] = 0b1110_0100;
        qs[15] = 0x80;
        assert_eq!((0..4).map(|j| code::<Q2_0>(&qs, j)).collect::<Vec<_>>(), [0, 1, 2, 3]);
        assert_eq!((0..8).map(|j| code::<Q1_0>(&qs, j)).collect::<Vec<_>>(), [0, 0, 1, 0, 0, 1, 1, 1]);
        assert_eq!((code::<Q1_0>(&qs, 127), code::<Q2_0>(&qs, 63)), (1, 2));
    }

    #[test]
    fn padded_positions_get_the_code_nearest_zero() {
        let (d, qs) = encode::<Q2_0>(&[-2.0, 2.0, 1.0], None);
        assert_eq!(d.get(), 2.0);
        assert_eq!(&decoded::<Q2_0>(d, &qs)[..5], &[-2.0, 2.0, 2.0, 0.0, 0.0]);
        let (d, qs) = encode::<Q1_0>(&[-2.0, 1.0], None);
        assert_eq!(d.get(), 1.5, "the mean magnitude of the two real elements");
        assert_eq!(&decoded::<Q1_0>(d, &qs)[..3], &[-1.5, 1.5, 1.5]);
    }

    /// A subnormal largest magnitude: `1/d` overflows to Inf, every `x·id` is ±Inf or NaN, and
    /// ggml's `(int)roundf` gives `INT_MIN` → code 0 everywhere; `d` rounds to f16 zero. (ggml
    /// 0c1e570's `quantize_row_q2_0_ref` writes 18 zero bytes for this block.)
    #[test]
    fn q2_subnormal_scale_gives_ggml_bytes() {
        let mut x = [0f32; 64];
        (x[0], x[1], x[2]) = (1e-39, -1e-39, 5e-40);
        assert_eq!(encode::<Q2_0>(&x, None), (F16Le::from_f32(0.0), [0; QS_BYTES]));
    }

    #[test]
    fn weights_only_replace_on_strict_improvement() {
        let x: Vec<f32> = (0..64).map(|i| if i == 0 { 4.0 } else { ((i * 37 % 17) as f32 - 8.0) / 8.0 }).collect();
        for refined_beats_plain in [true, false] {
            let w: Vec<f32> = if refined_beats_plain { vec![1.0; 64] } else { vec![0.0; 64] };
            let plain = encode::<Q2_0>(&x, None);
            let weighted = encode::<Q2_0>(&x, Some(&w));
            let err = |(d, qs): (F16Le, [u8; QS_BYTES])| {
                let codes: Vec<u8> = (0..64).map(|j| code::<Q2_0>(&qs, j)).collect();
                weighted_sse::<Q2_0>(&x, &w, d, &codes)
            };
            if refined_beats_plain {
                assert!(err(weighted) < err(plain));
            } else {
                assert_eq!(weighted, plain, "zero weights: nothing to gain, ggml's encoding stays");
            }
        }
    }
}
