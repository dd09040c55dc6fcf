//! AVX2 kernel of [`crate::dot`]'s per-block integer lanes, chosen at run time where the CPU
//! has AVX2; everything else runs the portable kernel.
//!
//! The only `unsafe` of the crate lives here: 32-byte unaligned loads and stores on
//! fixed-size arrays, and the call into the `#[target_feature]` function after the run-time
//! check.
//!
//! Lane `l` of a block is `w[l]·a[l] + w[l+16]·a[l+16]`: the two halves are sign-extended to
//! `i16`, interleaved (`vpunpck{l,h}wd`) and multiplied-added pairwise (`vpmaddwd`) into
//! `i32` — exact for every `i8` input (`|w·a| ≤ 2^14`), so no fallback is needed — and the
//! 16 lanes are put back in order for the shared f32 code of [`crate::dot::vec_dot_with`].
#![allow(unsafe_code)]

use std::arch::x86_64::*;
use std::sync::OnceLock;

use crate::QK;
use crate::block::LegacyBlock;
use crate::dot::{ActBlock, LANES, vec_dot_with};

/// Whether this CPU runs the AVX2 kernels (detected once).
pub(crate) fn has_avx2() -> bool {
    static AVX2: OnceLock<bool> = OnceLock::new();
    *AVX2.get_or_init(|| is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma"))
}

/// [`crate::dot::vec_dot`] with the AVX2 lane sums, or `None` without AVX2.
///
/// Also `None` in builds that target AVX-512BW (e.g. `-C target-cpu=native` on Ice Lake):
/// there LLVM's auto-vectorization of the portable kernel was measured faster (q4_0 10.4 vs
/// 8.6 Gel/s, q8_0 9.0 vs 7.4, one thread), while the AVX2 kernel wins where the build only
/// assumes the x86-64 baseline (q4_0 3.5 → 4.6, q8_0 3.0 → 4.9).
#[inline]
pub(crate) fn vec_dot<W: LegacyBlock, A: ActBlock>(w: &[W], a: &[A]) -> Option<f32> {
    if cfg!(target_feature = "avx512bw") || !has_avx2() {
        return None;
    }
    // SAFETY: `has_avx2()` has just checked (with `is_x86_feature_detected!`) that this CPU
    // supports AVX2 and FMA, the only requirement of the `#[target_feature]` function.
    Some(unsafe { vec_dot_avx2(w, a) })
}

/// The whole row loop compiled for AVX2, so that unpack, lane sums and f32 lanes are inlined
/// together.
#[target_feature(enable = "avx2,fma")]
fn vec_dot_avx2<W: LegacyBlock, A: ActBlock>(w: &[W], a: &[A]) -> f32 {
    vec_dot_with(w, a, |w, a| isum_lanes_avx2(w, a))
}

/// [`crate::dot::isum_lanes`] with AVX2: lane `l` = `w[l]·a[l] + w[l+16]·a[l+16]`, exact.
#[target_feature(enable = "avx2,fma")]
#[inline]
pub(crate) fn isum_lanes_avx2(w: &[i8; QK], a: &[i8; QK]) -> [i32; LANES] {
    // SAFETY: `w` and `a` refer to arrays of exactly QK = 32 bytes (their types fix the
    // length), so each unaligned 32-byte load reads only that array; AVX is enabled here.
    let (wv, av) = unsafe { (_mm256_loadu_si256(w.as_ptr().cast()), _mm256_loadu_si256(a.as_ptr().cast())) };
    // Elements 0..16 and 16..32, as i16.
    let (w0, w1) =
        (_mm256_cvtepi8_epi16(_mm256_castsi256_si128(wv)), _mm256_cvtepi8_epi16(_mm256_extracti128_si256::<1>(wv)));
    let (a0, a1) =
        (_mm256_cvtepi8_epi16(_mm256_castsi256_si128(av)), _mm256_cvtepi8_epi16(_mm256_extracti128_si256::<1>(av)));
    // (w[l], w[l+16]) pairs: `lo` holds lanes 0..4 and 8..12, `hi` lanes 4..8 and 12..16.
    let lo = _mm256_madd_epi16(_mm256_unpacklo_epi16(w0, w1), _mm256_unpacklo_epi16(a0, a1));
    let hi = _mm256_madd_epi16(_mm256_unpackhi_epi16(w0, w1), _mm256_unpackhi_epi16(a0, a1));
    let first = _mm256_permute2x128_si256::<0x20>(lo, hi);
    let second = _mm256_permute2x128_si256::<0x31>(lo, hi);
    let mut out = [0i32; LANES];
    let (halves, _) = out.as_chunks_mut::<8>();
    // SAFETY: each half is an `&mut [i32; 8]`, exactly 32 bytes (its type fixes the length),
    // so each unaligned 32-byte store writes only that half; AVX is enabled here.
    unsafe {
        _mm256_storeu_si256(halves[0].as_mut_ptr().cast(), first);
        _mm256_storeu_si256(halves[1].as_mut_ptr().cast(), second);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dot::isum_lanes;

    /// xorshift64*: reproducible pseudo-random bits without a dependency.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
    }

    /// Random blocks over the whole `i8` range, and all-extreme blocks (±128·±128 pairs).
    #[test]
    fn avx2_lanes_equal_portable() {
        if !has_avx2() {
            eprintln!("no AVX2 on this CPU: nothing to compare");
            return;
        }
        let mut rng = Rng(0x2545_f491_4f6c_dd1d);
        for case in 0..20_000 {
            let pick = |r: u64| match case % 3 {
                0 => r as i8,
                1 => [i8::MIN, i8::MAX, -1, 0][(r & 3) as usize],
                _ => ((r % 16) as i8) - 8,
            };
            let w: [i8; QK] = std::array::from_fn(|_| pick(rng.next()));
            let a: [i8; QK] = std::array::from_fn(|_| if case % 3 == 1 { i8::MIN } else { rng.next() as i8 });
            // SAFETY: `has_avx2()` returned true above, so AVX2 and FMA are present.
            let fast = unsafe { isum_lanes_avx2(&w, &a) };
            assert_eq!(fast, isum_lanes(&w, &a), "case {case}: w {w:?} a {a:?}");
        }
    }
}
