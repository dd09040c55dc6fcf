//! Exact totals of integer lanes, two blocks at a time (x86-64): the step with which the
//! kernels that sum in the packed layout's f32 order (one exact integer per block, `acc =
//! fma(T, scale, acc)` block by block: `qforge-k`'s K-quants and tq, `qforge-iq`'s sub-block
//! I-quants) leave their per-block lanes without a horizontal sum per block.
#![allow(unsafe_code)]

use std::arch::x86_64::*;

use crate::Avx2;

/// The wrapping `i32` totals of two blocks' eight lanes `v0`, `v1`, as f32 `[T0, T1, T0, T1]`
/// (`vcvtdq2ps` rounds to nearest, as `as f32`): two `vphaddd`, one add.
#[inline(always)]
pub fn pair(v0: __m256i, v1: __m256i, _: Avx2) -> __m128 {
    // SAFETY: `Avx2` exists only where the CPU has AVX2; register operations only.
    unsafe {
        let h = _mm256_hadd_epi32(v0, v1);
        let h = _mm256_hadd_epi32(h, h);
        _mm_cvtepi32_ps(_mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256::<1>(h)))
    }
}

/// The wrapping `i32` totals of four blocks' (or two blocks' two sums') eight lanes, as f32
/// `[T0, T1, T2, T3]`: three `vphaddd`, one add.
#[inline(always)]
pub fn quad([v0, v1, v2, v3]: [__m256i; 4], _: Avx2) -> __m128 {
    // SAFETY: `Avx2` exists only where the CPU has AVX2; register operations only.
    unsafe {
        // [v0 01, v0 23, v1 01, v1 23 | v0 45, v0 67, v1 45, v1 67] and the same of v2, v3,
        // then the pairs of those: per 128-bit half [T0, T1, T2, T3].
        let h = _mm256_hadd_epi32(_mm256_hadd_epi32(v0, v1), _mm256_hadd_epi32(v2, v3));
        _mm_cvtepi32_ps(_mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256::<1>(h)))
    }
}
