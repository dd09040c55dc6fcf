//! AVX2 kernel of the sub-block I-quants' dots with q8_k (iq2_xxs, iq2_xs, iq2_s, iq3_xxs,
//! iq3_s, iq4_xs: [`SubBlocks`]), chosen at run time where the CPU has AVX2, FMA and F16C
//! ([`qforge_core::cpu::avx2`]); everything else runs `qforge-k`'s q8_k kernel on
//! [`crate::dot::KDot::ints`], the reference.
//!
//! Per 32-value sub-block, as ggml's `ggml_vec_dot_iq*_q8_K`: the values become one register
//! (grid formats: the four 8-byte words of grid value × sign, built with scalar loads and
//! word operations, then `_mm256_set_epi64x`; iq4_xs: nibbles through `kvalues_iq4nl` with one
//! `vpshufb`), `maddubs(|a|, v·sgn(a))` gives 16 exact pair sums for every `i8` activation,
//! -128 included (`|v| ≤ 127`, a pair is at most 2·128·127), and `vpmaddwd` with the two
//! 16-value groups' integer scales adds them into 8 `i32` lanes, exact. At the end of the
//! block the lanes are summed: the block's exact integer sum, the very integer the reference
//! computes, and the f32 operations after it are the reference's (`sumf += (d·d_y)·isum`, in
//! order), so the results are the same bits (the tests check it).
//!
//! Several activation rows ([`vec_dot_rows`]) share each sub-block's values: up to
//! [`MAX_ROWS`] rows per pass over the weight row.
//!
//! The only `unsafe` of the crate: unaligned loads of fixed-size arrays and the calls into the
//! `#[target_feature]` function with an [`Avx2`] token.
#![allow(unsafe_code)]

use std::arch::x86_64::*;

use crate::common::QK_K;
use crate::tables::KVALUES_IQ4NL;
use crate::unpack::{SubBlock, SubBlocks};
use qforge_k::BlockQ8K;
use qforge_simd::Avx2;
use qforge_simd::barrier::opaque;
use qforge_simd::rows::{RowKernel, by_rows};

/// The dot of a weight row with a q8_k row with AVX2, or `None` where the CPU lacks it.
#[inline]
pub(crate) fn vec_dot<F: SubBlocks>(w: &[F::Block], a: &[BlockQ8K]) -> Option<f32> {
    let avx2 = Avx2::detect()?;
    let n = w.len().min(a.len());
    let k = Kernel::<F> { w: &w[..n], _avx2: avx2 };
    Some(RowKernel::<&[BlockQ8K]>::rows::<1>(&k, [&a])[0])
}

/// `out[i]` = the dot of `w` with `a[i]` (`out.len() == a.len()`, checked by the caller) with
/// AVX2; `false` (nothing written) where the CPU lacks it, or for one row of a format whose
/// one-row dot stays on `qforge-k`'s kernel ([`SubBlocks::SIMD_ONE_ROW`]).
pub(crate) fn vec_dot_rows<F: SubBlocks>(w: &[F::Block], a: &[&[BlockQ8K]], out: &mut [f32]) -> bool {
    let Some(avx2) = Avx2::detect() else {
        return false;
    };
    if a.len() < 2 && !F::SIMD_ONE_ROW {
        return false;
    }
    let n = w.len();
    if a.iter().any(|a| a.len() < n) {
        // A short activation row truncates the weight row for that row alone: row by row.
        for (o, a) in out.iter_mut().zip(a) {
            *o = vec_dot::<F>(w, a).unwrap_or_default();
        }
        return true;
    }
    by_rows(&Kernel::<F> { w, _avx2: avx2 }, a, out);
    true
}

/// The weight row and the proof of AVX2; rows of exactly `w.len()` blocks.
struct Kernel<'w, F: SubBlocks> {
    w: &'w [F::Block],
    _avx2: Avx2,
}

impl<'a, F: SubBlocks> RowKernel<&'a [BlockQ8K]> for Kernel<'_, F> {
    #[inline]
    fn rows<const R: usize>(&self, a: [&&'a [BlockQ8K]; R]) -> [f32; R] {
        let n = self.w.len();
        let rows = a.map(|a| &a[..n]);
        // SAFETY: `self` holds an `Avx2` token, which exists only where the CPU has AVX2, FMA
        // and F16C, all the `#[target_feature]` function needs.
        unsafe { rows_avx2::<F, R>(self.w, rows) }
    }
}

/// `R` dots of the weight row `w` with the q8_k rows `a[r]` (each exactly `w.len()` blocks).
#[target_feature(enable = "avx2,fma,f16c")]
fn rows_avx2<F: SubBlocks, const R: usize>(w: &[F::Block], a: [&[BlockQ8K]; R]) -> [f32; R] {
    // SAFETY: `KVALUES_IQ4NL` is 16 bytes, exactly what the unaligned 16-byte load reads.
    let table = _mm256_broadcastsi128_si256(unsafe { _mm_loadu_si128(KVALUES_IQ4NL.as_ptr().cast()) });
    let low4 = _mm256_set1_epi8(0x0F);
    let mut sumf = [0f32; R];
    for (i, b) in w.iter().enumerate() {
        let scales = F::scales(b);
        // Grid formats: the whole block's values first, signed in scalar registers (cheap word
        // operations on the integer ALUs) and stored, then loaded 32 at a time. Stored and
        // reloaded at once, or built lane by lane with `vmovq`, they were both slower.
        let mut words = [0u64; QK_K / 8];
        if let SubBlock::Words(_) = F::sub_block(b, 0) {
            for (ib, w4) in words.as_chunks_mut::<4>().0.iter_mut().enumerate() {
                if let SubBlock::Words(x) = F::sub_block(b, ib) {
                    *w4 = [opaque(x[0]), opaque(x[1]), opaque(x[2]), opaque(x[3])];
                }
            }
        }
        let words = std::hint::black_box(&words);
        let mut acc = [_mm256_setzero_si256(); R];
        for ib in 0..QK_K / 32 {
            let v = match F::sub_block(b, ib) {
                SubBlock::Words(_) => {
                    let w4: &[u64; 4] = words[4 * ib..4 * ib + 4].try_into().expect("4 words");
                    // SAFETY: `w4` is 4 u64 = 32 bytes: the unaligned 32-byte load reads it.
                    unsafe { _mm256_loadu_si256(w4.as_ptr().cast()) }
                }
                SubBlock::Nibbles(q) => {
                    // SAFETY: `q` is 16 bytes, exactly what the unaligned 16-byte load reads.
                    let lo = unsafe { _mm_loadu_si128(q.as_ptr().cast()) };
                    let idx = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16::<4>(lo), lo), low4);
                    _mm256_shuffle_epi8(table, idx)
                }
            };
            // Values 0..16 (low lane) take the scale of group 2·ib, 16..32 that of 2·ib + 1.
            let (s0, s1) = (scales[2 * ib], scales[2 * ib + 1]);
            let s =
                if s0 == s1 { _mm256_set1_epi16(s0) } else { _mm256_set_m128i(_mm_set1_epi16(s1), _mm_set1_epi16(s0)) };
            for r in 0..R {
                let q: &[i8; 32] = a[r][i].qs[32 * ib..32 * ib + 32].try_into().expect("32 bytes");
                // SAFETY: `q` is 32 bytes, exactly what the unaligned 32-byte load reads.
                let av = unsafe { _mm256_loadu_si256(q.as_ptr().cast()) };
                let p = _mm256_maddubs_epi16(_mm256_abs_epi8(av), _mm256_sign_epi8(v, av));
                acc[r] = _mm256_add_epi32(acc[r], _mm256_madd_epi16(p, s));
            }
        }
        let d = F::d(b);
        for r in 0..R {
            let isum = hsum(acc[r]) as f32;
            sumf[r] += (d * a[r][i].d.get()) * isum;
        }
    }
    sumf
}

/// The sum of the 8 `i32` lanes (exact: the caller's lanes sum to an `i32`).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn hsum(v: __m256i) -> i32 {
    let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01_00_11_10>(s));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b10_11_00_01>(s));
    _mm_cvtsi128_si32(s)
}

#[cfg(test)]
mod tests;
