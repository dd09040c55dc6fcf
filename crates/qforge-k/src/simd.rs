//! AVX2 kernel of [`crate::dot`]'s integer block sum (ggml's `vpmaddubsw` scheme), chosen at
//! run time where the CPU has AVX2; everything else runs the portable kernel.
//!
//! The only `unsafe` of the crate lives here: 32-byte unaligned loads from fixed-size arrays,
//! and the call into the `#[target_feature]` function after the run-time check.
//!
//! Per 32 codes: `|a|` (unsigned, `-128 → 128`) times `q·sgn(a)` with `vpmaddubsw` gives 16
//! exact `i16` pair sums (`≤ 2·128·127`, no saturation while every `|q| ≤ 127`), `vpmaddwd`
//! with the two groups' scales widens them to `i32` (exact: `|q·scale| < 2^15`), and one
//! horizontal sum per block. A block with a code of `-128` (`q·sgn(a)` would wrap, and pair
//! sums could saturate) is summed by the portable kernel instead, so the result is always the
//! exact integer the portable kernel gives.
#![allow(unsafe_code)]

use std::arch::x86_64::*;

use crate::QK_K;
use crate::dot::{GROUPS, Q8KDot, q8k_vec_dot_with, scaled_isum};
use crate::q8k::BlockQ8K;

/// Whether this CPU runs the AVX2 kernels ([`qforge_core::cpu::avx2`]: AVX2, FMA, F16C).
pub(crate) fn has_avx2() -> bool {
    qforge_core::cpu::avx2()
}

/// [`crate::dot::q8k_vec_dot`] with the AVX2 block sum, or `None` without AVX2.
#[inline]
pub(crate) fn q8k_vec_dot<F: Q8KDot>(w: &[F::Block], a: &[BlockQ8K]) -> Option<f32> {
    if !has_avx2() {
        return None;
    }
    // SAFETY: `has_avx2()` has just checked (with `is_x86_feature_detected!`) that this CPU
    // supports AVX2 and FMA, the only requirement of the `#[target_feature]` function.
    Some(unsafe { q8k_vec_dot_avx2::<F>(w, a) })
}

/// The whole row loop compiled for AVX2, so that the format's unpack and the block sum are
/// inlined together.
#[target_feature(enable = "avx2,fma,f16c")]
fn q8k_vec_dot_avx2<F: Q8KDot>(w: &[F::Block], a: &[BlockQ8K]) -> f32 {
    q8k_vec_dot_with::<F>(w, a, |q, a, s| scaled_isum_avx2(q, a, s))
}

/// Loads 32 bytes.
#[target_feature(enable = "avx2")]
#[inline]
fn load_i8(v: &[i8; 32]) -> __m256i {
    // SAFETY: `v` refers to an array of exactly 32 bytes (its type fixes the length), so the
    // unaligned 32-byte load reads only that array; AVX is enabled on this function.
    unsafe { _mm256_loadu_si256(v.as_ptr().cast()) }
}

/// Loads 16 `i16`.
#[target_feature(enable = "avx2")]
#[inline]
fn load_i16(v: &[i16; 16]) -> __m256i {
    // SAFETY: `v` refers to an array of exactly 16 `i16` = 32 bytes (its type fixes the
    // length), so the unaligned 32-byte load reads only that array; AVX is enabled here.
    unsafe { _mm256_loadu_si256(v.as_ptr().cast()) }
}

/// [`scaled_isum`] with AVX2: `Σ_g scale[g] · Σ_{i in g} q[i]·a[i]`, the same exact integer.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(crate) fn scaled_isum_avx2(q: &[i8; QK_K], a: &[i8; QK_K], scales: &[i16; GROUPS]) -> i32 {
    let sc = load_i16(scales);
    // Within each 128-bit lane, the low (high) lane picks `i16` 0 (1) of a 32-bit word.
    #[rustfmt::skip]
    let pick = _mm256_setr_epi8(
        0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1,
        2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3,
    );
    let mut acc = _mm256_setzero_si256();
    let mut min = _mm256_setzero_si256();
    let (qc, _) = q.as_chunks::<32>();
    let (ac, _) = a.as_chunks::<32>();
    for (k, (qc, ac)) in qc.iter().zip(ac).enumerate() {
        let qv = load_i8(qc);
        let av = load_i8(ac);
        min = _mm256_min_epi8(min, qv);
        // |a|·(q·sgn a) = q·a, 16 pair sums; groups 2k (bytes 0..16) and 2k+1 (16..32).
        let p = _mm256_maddubs_epi16(_mm256_abs_epi8(av), _mm256_sign_epi8(qv, av));
        // Every i16 of the low lane = scales[2k], of the high lane = scales[2k+1].
        let s = _mm256_shuffle_epi8(_mm256_permutevar8x32_epi32(sc, _mm256_set1_epi32(k as i32)), pick);
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, s));
    }
    if _mm256_movemask_epi8(_mm256_cmpeq_epi8(min, _mm256_set1_epi8(i8::MIN))) != 0 {
        return scaled_isum(q, a, scales);
    }
    let s = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256::<1>(acc));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01_00_11_10>(s));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b10_11_00_01>(s));
    _mm_cvtsi128_si32(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    use qforge_core::rand::Rng;

    /// Uniform in [lo, hi].
    fn range(rng: &mut Rng, lo: i32, hi: i32) -> i32 {
        lo + (rng.next_u64() % (hi - lo + 1) as u64) as i32
    }

    /// Random blocks within the kernel's contract (`|q·scale| < 2^15`), from small codes with
    /// large scales to full-range codes, including all-extreme blocks and codes of -128.
    #[test]
    fn avx2_isum_equals_portable() {
        if !has_avx2() {
            eprintln!("no AVX2 on this CPU: nothing to compare");
            return;
        }
        let mut rng = Rng::new(0x9e37_79b9_7f4a_7c15);
        let mut fallbacks = 0;
        for case in 0..20_000 {
            // Largest |code| of this block, and the largest scale that keeps |q·s| < 2^15.
            let qmax = [1, 3, 7, 15, 31, 32, 63, 113, 127, 128][case % 10];
            let smax = (i16::MAX as i32) / qmax;
            let mode = (case / 10) % 4;
            let q: [i8; QK_K] = std::array::from_fn(|_| match mode {
                0 => range(&mut rng, -qmax, qmax.min(127)) as i8,
                1 => [-qmax, qmax.min(127)][(rng.next_u64() & 1) as usize] as i8,
                2 => (-qmax) as i8,
                _ => range(&mut rng, 0, qmax.min(127)) as i8,
            });
            let a: [i8; QK_K] = std::array::from_fn(|_| match mode {
                1 | 2 => [-128, 127][(rng.next_u64() & 1) as usize],
                _ => range(&mut rng, -128, 127) as i8,
            });
            let scales: [i16; GROUPS] = std::array::from_fn(|_| match mode {
                1 | 2 => [-smax, smax][(rng.next_u64() & 1) as usize] as i16,
                _ => range(&mut rng, -smax, smax) as i16,
            });
            fallbacks += usize::from(q.contains(&i8::MIN));
            // SAFETY: `has_avx2()` returned true above, so AVX2 and FMA are present.
            let fast = unsafe { scaled_isum_avx2(&q, &a, &scales) };
            assert_eq!(fast, scaled_isum(&q, &a, &scales), "case {case}: q {q:?} a {a:?} scales {scales:?}");
        }
        assert!(fallbacks > 0, "no block exercised the -128 fallback");
    }

    /// Whole rows of every K-quant from random bytes (random codes, scales and f16 scales,
    /// NaN / Inf included): the dispatched `q8k_vec_dot` (AVX2 here) and the portable one
    /// give the same f32 bits.
    #[test]
    fn avx2_rows_are_bit_identical() {
        use crate::{Q2K, Q3K, Q4K, Q5K, Q6K, Q8K};
        fn rows<F: Q8KDot>(rng: &mut Rng) {
            for n in [1usize, 3, 16] {
                let mut bytes = |len: usize| -> Vec<u8> { (0..len).map(|_| rng.next_u64() as u8).collect() };
                let wb = bytes(n * size_of::<F::Block>());
                let ab = bytes(n * size_of::<BlockQ8K>());
                let w: &[F::Block] = bytemuck::cast_slice(&wb);
                let a: &[BlockQ8K] = bytemuck::cast_slice(&ab);
                let fast = crate::dot::q8k_vec_dot::<F>(w, a);
                let safe = q8k_vec_dot_with::<F>(w, a, scaled_isum);
                assert!(fast.to_bits() == safe.to_bits() || (fast.is_nan() && safe.is_nan()), "{fast} vs {safe}");
            }
        }
        if !has_avx2() {
            return;
        }
        let mut rng = Rng::new(0x1234_5678_9abc_def1);
        for _ in 0..200 {
            rows::<Q2K>(&mut rng);
            rows::<Q3K>(&mut rng);
            rows::<Q4K>(&mut rng);
            rows::<Q5K>(&mut rng);
            rows::<Q6K>(&mut rng);
            rows::<Q8K>(&mut rng);
        }
    }
}
