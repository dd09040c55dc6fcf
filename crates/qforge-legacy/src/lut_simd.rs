//! AVX2 kernel of [`super::lut_vec_dot`] / [`super::lut_vec_dot_rows`], chosen at run time
//! where the CPU has AVX2, FMA and F16C ([`qforge_core::cpu::avx2`]); everything else runs
//! [`super::lut_vec_dot_portable`].
//!
//! Per 32-element unit, as ggml's `ggml_vec_dot_iq4_nl_q8_0` / `_mxfp4_q8_0`: the 16 code
//! bytes are split into 32 nibble indices (a shift and an AND; nvfp4's 8-byte halves are
//! interleaved back into element order with `vpunpck{l,h}qdq`) and looked up in the table with
//! one `vpshufb`. Against the activations, the sign trick `maddubs(|a|, w·sgn(a))` gives 16
//! exact pair sums for every `i8` activation, -128 included (`|a|` is read unsigned, every
//! table entry is in `-127..=127`, so no product overflows and a pair is at most 2·128·127);
//! `vpmaddwd` with ones makes the 8 lanes of [`super::lanes4`], converted exactly to f32 and
//! fused-multiply-added into the unit's accumulator: the same lanes and f32 operations, in
//! the same order, as the portable kernel, so the same bits (the tests check it).
//!
//! Several activation rows ([`vec_dot_rows`]) share each unit's unpacking: up to
//! [`MAX_ROWS`] rows per pass over the weight row keep their accumulators in registers.
//!
//! The only `unsafe` here: unaligned loads / stores of fixed-size arrays and the calls into
//! the `#[target_feature]` function after the run-time check.
#![allow(unsafe_code)]

use std::arch::x86_64::*;

use super::{LUT_ACCS, LUT_LANES, LutBlock, LutScale, NibbleOrder, lut_finish, table_ok};
use crate::block::{BlockQ8_0, QK};
use qforge_core::le::F16Le;

/// Units whose activation scales (and f16 weight scales) are widened together: widened one by
/// one inside the loop, the f16 load picks up a false dependency on an accumulator register.
const BATCH: usize = 8;

/// Activation rows per pass over the weight row (2 accumulators each, in registers).
const MAX_ROWS: usize = 4;

/// [`super::lut_vec_dot`] with AVX2, or `None` where the CPU lacks it.
#[inline]
pub(super) fn vec_dot<W: LutBlock>(w: &[W], a: &[BlockQ8_0]) -> Option<f32> {
    if !qforge_core::cpu::avx2() {
        return None;
    }
    let n = w.len().min(a.len() / W::UNITS);
    // SAFETY: `cpu::avx2()` has just checked (with `is_x86_feature_detected!`) that this CPU
    // supports AVX2, FMA and F16C, the only requirement of the `#[target_feature]` function.
    Some(unsafe { rows_avx2::<W, 1>(&w[..n], [&a[..n * W::UNITS]]) }[0])
}

/// [`super::lut_vec_dot_rows`] with AVX2 (`out.len() == a.len()`, checked by the caller);
/// `false` (nothing written) where the CPU lacks it.
pub(super) fn vec_dot_rows<W: LutBlock>(w: &[W], a: &[&[BlockQ8_0]], out: &mut [f32]) -> bool {
    if !qforge_core::cpu::avx2() {
        return false;
    }
    let n = w.len();
    if a.iter().any(|a| a.len() / W::UNITS < n) {
        // A short activation row truncates the weight row for that row alone: row by row.
        for (o, a) in out.iter_mut().zip(a) {
            *o = vec_dot(w, a).unwrap_or_default();
        }
        return true;
    }
    let m = n * W::UNITS;
    for (a, out) in a.chunks(MAX_ROWS).zip(out.chunks_mut(MAX_ROWS)) {
        macro_rules! pass {
            ($r:literal) => {{
                let rows: [&[BlockQ8_0]; $r] = std::array::from_fn(|i| &a[i][..m]);
                // SAFETY: `cpu::avx2()` returned true above: AVX2, FMA and F16C are present.
                out.copy_from_slice(&unsafe { rows_avx2::<W, $r>(w, rows) });
            }};
        }
        match a.len() {
            1 => pass!(1),
            2 => pass!(2),
            3 => pass!(3),
            _ => pass!(4),
        }
    }
    true
}

/// `R` dots of the weight row `w` with the activation rows `a[r]` (each of exactly
/// `w.len() · UNITS` blocks), every one as [`super::lut_vec_dot_portable`] computes it.
#[target_feature(enable = "avx2,fma,f16c")]
fn rows_avx2<W: LutBlock, const R: usize>(w: &[W], a: [&[BlockQ8_0]; R]) -> [f32; R] {
    const { assert!(table_ok(&W::TABLE) && BATCH == 8 && BATCH.is_multiple_of(W::UNITS) && LUT_ACCS == 2) };
    const { assert!(LUT_LANES == 8 && (W::UNITS == 1 || !matches!(W::SCALE, LutScale::F16))) };
    let per = BATCH / W::UNITS;
    // SAFETY: `TABLE` is 16 bytes, exactly what the unaligned 16-byte load reads.
    let table = _mm256_broadcastsi128_si256(unsafe { _mm_loadu_si128(W::TABLE.as_ptr().cast()) });
    let ones = _mm256_set1_epi16(1);
    let mut acc = [[_mm256_setzero_ps(); LUT_ACCS]; R];
    // One batch: `per` blocks `w` (the first at a multiple of `per` in the row) against the
    // BATCH activation units `a[r]`; unit `j` of the batch is unit `j` mod BATCH of the row,
    // so its accumulator is `j % 2`. The tail batch is filled up with zero blocks, which add
    // +0 to every lane (never -0 there), leaving it as it was. (A macro, not a function:
    // `#[inline(always)]` is not allowed with `#[target_feature]`, and the accumulators must
    // stay in registers.)
    macro_rules! batch {
        ($w:expr, $a:expr) => {{
            let (w, a): (&[W], [&[BlockQ8_0; BATCH]; R]) = ($w, $a);
            // Per row and unit: `d_a·s_w` (F16), else `d_a` alone.
            let mut d = [[0f32; BATCH]; R];
            let wd = match <&[W; BATCH]>::try_from(w) {
                Ok(w) if W::SCALE == LutScale::F16 => Some(widen(f16_bits(w))),
                _ => None,
            };
            for (d, a) in d.iter_mut().zip(a) {
                let ad = widen(act_bits(a));
                let v = match wd {
                    Some(wd) => _mm256_mul_ps(wd, ad),
                    None => ad,
                };
                // SAFETY: `d` is 8 f32, exactly 32 bytes: the unaligned store writes only it.
                unsafe { _mm256_storeu_ps(d.as_mut_ptr(), v) };
            }
            // Units in pairs, `h` = 0 / 1 the accumulator: constant indices keep the
            // accumulators in registers whether or not LLVM unrolls the pairs.
            for p in 0..BATCH / 2 {
                for h in 0..LUT_ACCS {
                    let j = LUT_ACCS * p + h;
                    let (b, u) = (&w[j / W::UNITS], j % W::UNITS);
                    let wv = unpack::<W>(b.codes(u), table);
                    let sb = b.scale_bytes(u);
                    let sb = [W::BYTE_SCALES[usize::from(sb[0])], W::BYTE_SCALES[usize::from(sb[1])]];
                    for r in 0..R {
                        let av = load_i8(&a[r][j].qs);
                        let p = _mm256_maddubs_epi16(_mm256_abs_epi8(av), _mm256_sign_epi8(wv, av));
                        let lanes = _mm256_cvtepi32_ps(_mm256_madd_epi16(p, ones));
                        let s = match W::SCALE {
                            LutScale::F16 => _mm256_set1_ps(d[r][j]),
                            LutScale::Byte => _mm256_set1_ps(d[r][j] * sb[0]),
                            LutScale::ByteHalves => _mm256_mul_ps(
                                _mm256_set1_ps(d[r][j]),
                                _mm256_set_m128(_mm_set1_ps(sb[1]), _mm_set1_ps(sb[0])),
                            ),
                        };
                        acc[r][h] = _mm256_fmadd_ps(s, lanes, acc[r][h]);
                    }
                }
            }
        }};
    }
    // Row views as whole batches, and the current batch of each row. (Loops, not
    // `array::from_fn`: its closures are not inlined into this function.)
    let mut ac: [&[[BlockQ8_0; BATCH]]; R] = [&[]; R];
    for (c, a) in ac.iter_mut().zip(&a) {
        *c = a.as_chunks::<BATCH>().0;
    }
    let mut ab: [&[BlockQ8_0; BATCH]; R] = [&ZERO_UNITS; R];
    let full = w.len() / per;
    for k in 0..full {
        for (b, c) in ab.iter_mut().zip(&ac) {
            *b = &c[k];
        }
        batch!(&w[k * per..(k + 1) * per], ab);
    }
    let tail = &w[full * per..];
    if !tail.is_empty() {
        let mut wt = [W::zeroed(); BATCH];
        wt[..tail.len()].copy_from_slice(tail);
        let mut at = [ZERO_UNITS; R];
        for ((at, a), b) in at.iter_mut().zip(&a).zip(ab.iter_mut()) {
            let tail = &a[full * BATCH..];
            at[..tail.len()].copy_from_slice(tail);
            *b = at;
        }
        batch!(&wt[..per], ab);
    }
    let mut sums = [0f32; R];
    for (s, acc) in sums.iter_mut().zip(acc) {
        let mut out = [[0f32; LUT_LANES]; LUT_ACCS];
        for (o, v) in out.iter_mut().zip(acc) {
            // SAFETY: `o` is 8 f32, exactly 32 bytes: the unaligned store writes only it.
            unsafe { _mm256_storeu_ps(o.as_mut_ptr(), v) };
        }
        *s = lut_finish(out);
    }
    sums
}

/// A batch of zero activation blocks (`d = +0`, all codes 0).
const ZERO_UNITS: [BlockQ8_0; BATCH] = [BlockQ8_0 { d: F16Le([0; 2]), qs: [0; QK] }; BATCH];

/// The f16 scale bits of 8 blocks (spelled out: LLVM then inserts them into one register).
#[inline(always)]
fn f16_bits<W: LutBlock>(w: &[W; BATCH]) -> [u16; BATCH] {
    [
        w[0].f16_bits(),
        w[1].f16_bits(),
        w[2].f16_bits(),
        w[3].f16_bits(),
        w[4].f16_bits(),
        w[5].f16_bits(),
        w[6].f16_bits(),
        w[7].f16_bits(),
    ]
}

/// The f16 scale bits of 8 activation blocks.
#[inline(always)]
fn act_bits(a: &[BlockQ8_0; BATCH]) -> [u16; BATCH] {
    [
        a[0].d.bits(),
        a[1].d.bits(),
        a[2].d.bits(),
        a[3].d.bits(),
        a[4].d.bits(),
        a[5].d.bits(),
        a[6].d.bits(),
        a[7].d.bits(),
    ]
}

/// The 32 table values of a unit's 16 code bytes, in element order.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn unpack<W: LutBlock>(q: &[u8; 16], table: __m256i) -> __m256i {
    // SAFETY: `q` is 16 bytes, exactly what the unaligned 16-byte load reads.
    let lo = unsafe { _mm_loadu_si128(q.as_ptr().cast()) };
    let hi = _mm_srli_epi16::<4>(lo);
    let idx = match W::ORDER {
        NibbleOrder::Split32 => _mm256_set_m128i(hi, lo),
        // Low nibbles of bytes 0..8 are elements 0..8, high ones 8..16; bytes 8..16 the same
        // for elements 16..32.
        NibbleOrder::Split16 => _mm256_set_m128i(_mm_unpackhi_epi64(lo, hi), _mm_unpacklo_epi64(lo, hi)),
    };
    _mm256_shuffle_epi8(table, _mm256_and_si256(idx, _mm256_set1_epi8(0x0F)))
}

/// 32 bytes of activations.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn load_i8(v: &[i8; 32]) -> __m256i {
    // SAFETY: `v` is 32 bytes, exactly what the unaligned 32-byte load reads.
    unsafe { _mm256_loadu_si256(v.as_ptr().cast()) }
}

/// Eight f16 values (raw bits) widened to f32, exactly (`vcvtph2ps`).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn widen(h: [u16; BATCH]) -> __m256 {
    // SAFETY: `h` is 8 u16, exactly 16 bytes, so the unaligned load reads only `h`.
    _mm256_cvtph_ps(unsafe { _mm_loadu_si128(h.as_ptr().cast()) })
}

#[cfg(test)]
#[path = "lut_simd/tests.rs"]
mod tests;
