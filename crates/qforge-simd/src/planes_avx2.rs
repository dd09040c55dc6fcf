//! AVX2 extraction of one quad of codes from [`crate::planes`]: 8 rows' four codes, one row per
//! 32-bit lane.
#![allow(unsafe_code)]

use std::arch::x86_64::*;

use crate::vnni::{EVEX, Form, VEX, dpbusd};

use crate::planes::Planes;

/// The 32 bytes at `at` of `unit`.
#[inline(always)]
fn load(unit: &[u8], at: usize) -> __m256i {
    let src = unit[at..].first_chunk::<32>().expect("a plane slice inside the unit");
    // SAFETY: `src` is exactly 32 bytes; every caller is inlined into a function with AVX
    // enabled (see `quad`'s contract).
    unsafe { _mm256_loadu_si256(src.as_ptr().cast()) }
}

/// Bits `from .. from + width` of each byte of `v`, moved to bits `to ..` (16-bit shifts: the
/// bits they move across bytes fall outside the mask, as `from + width ≤ 8`, `to + width ≤ 8`).
///
/// # Safety
/// The CPU must have AVX2.
#[inline(always)]
unsafe fn field(v: __m256i, from: u32, width: u32, to: u32) -> __m256i {
    // SAFETY: the caller guarantees AVX2.
    unsafe {
        let v = if from > to {
            _mm256_srl_epi16(v, _mm_cvtsi32_si128((from - to) as i32))
        } else if from < to {
            _mm256_sll_epi16(v, _mm_cvtsi32_si128((to - from) as i32))
        } else {
            v
        };
        _mm256_and_si256(v, _mm256_set1_epi8((((1u32 << width) - 1) << to) as u8 as i8))
    }
}

/// The codes of quad `M` of a unit (`unit`: its bytes, laid out as `p` says), one row per
/// 32-bit lane. With `p` a constant, every branch and shift folds away.
///
/// # Safety
/// The CPU must have AVX2: call it only from a `#[target_feature(enable = "avx2")]` function
/// (into which it is inlined).
#[inline(always)]
pub unsafe fn quad<const M: usize>(p: Planes, unit: &[u8]) -> __m256i {
    let m = M as u32;
    // SAFETY: the caller guarantees AVX2.
    unsafe {
        let mut c = _mm256_setzero_si256();
        if let Some(at) = p.byte {
            c = load(unit, at + M * 32);
        }
        if let Some(at) = p.nib {
            c = field(load(unit, at + M / 2 * 32), 4 * (m % 2), 4, 0);
        }
        if let Some((at, to)) = p.crumb {
            c = _mm256_or_si256(c, field(load(unit, at + M / 4 * 32), 2 * (m % 4), 2, to));
        }
        if let Some((at, to)) = p.bit {
            c = _mm256_or_si256(c, field(load(unit, at), m, 1, to));
        }
        c
    }
}

/// The codes of all 8 quads of a unit ([`quad`] 0 to 7).
///
/// # Safety
/// As [`quad`].
#[inline(always)]
pub unsafe fn quads(p: Planes, unit: &[u8]) -> [__m256i; 8] {
    // SAFETY: the caller's guarantee.
    unsafe {
        [
            quad::<0>(p, unit),
            quad::<1>(p, unit),
            quad::<2>(p, unit),
            quad::<3>(p, unit),
            quad::<4>(p, unit),
            quad::<5>(p, unit),
            quad::<6>(p, unit),
            quad::<7>(p, unit),
        ]
    }
}

/// `Σ_m Σ₄ c[m]·a[m]` per 32-bit lane, exact, for unsigned codes `c ≤ umax ≤ 127` and signed
/// `a`: `vpmaddubsw` pair sums (`≤ 2·umax·128`) added in `i16` as many at a time as cannot
/// overflow, then widened with `vpmaddwd` by ones.
///
/// # Safety
/// The CPU must have AVX2: call it only from a `#[target_feature(enable = "avx2")]` function
/// (into which it is inlined).
#[inline(always)]
pub unsafe fn dot_avx2<const N: usize>(c: &[__m256i; N], a: &[__m256i; N], umax: u32) -> __m256i {
    // Pair sums that fit an `i16` together (a constant once inlined).
    let per = (i16::MAX as usize / (2 * 128 * umax.max(1) as usize)).max(1);
    // SAFETY: the caller guarantees AVX2.
    unsafe {
        let mut s = _mm256_setzero_si256();
        let mut i = 0;
        while i < N {
            let mut p = _mm256_maddubs_epi16(c[i], a[i]);
            let mut j = 1;
            while j < per && i + j < N {
                p = _mm256_add_epi16(p, _mm256_maddubs_epi16(c[i + j], a[i + j]));
                j += 1;
            }
            s = _mm256_add_epi32(s, _mm256_madd_epi16(p, _mm256_set1_epi16(1)));
            i += per;
        }
        s
    }
}

/// `Σ_m Σ₄ v[m]·a[m]` per 32-bit lane, exact, for signed values `v` (never -128) and any `i8`
/// activations `a`: the sign trick, `vpmaddubsw(|a|, v·sgn a)` (`|a|` read unsigned, so -128
/// gives 128; pair sums `≤ 2·128·127`), widened by `vpmaddwd`. What [`dot_avx2`] cannot do: a
/// table of values spanning more than 127 (iq4_nl, iq4_xs), whose unsigned form would
/// overflow its `i16` pair sums. The product is symmetric, so the roles may swap: 8-bit
/// weights, which may be -128, go second, with activations free of -128 first (q8_0's packed
/// kernel, [`crate::q8::packed`]).
///
/// # Safety
/// The CPU must have AVX2: call it only from a `#[target_feature(enable = "avx2")]` function
/// (into which it is inlined).
#[inline(always)]
pub unsafe fn dot_signed_avx2<const N: usize>(v: &[__m256i; N], a: &[__m256i; N]) -> __m256i {
    // SAFETY: the caller guarantees AVX2.
    unsafe {
        let mut s = _mm256_setzero_si256();
        for (v, a) in v.iter().zip(a) {
            let p = _mm256_maddubs_epi16(_mm256_abs_epi8(*a), _mm256_sign_epi8(*v, *a));
            s = _mm256_add_epi32(s, _mm256_madd_epi16(p, _mm256_set1_epi16(1)));
        }
        s
    }
}

/// [`dot_avx2`] with one `vpdpbusd` per four codes in VNNI form `F` (the same exact sums, for
/// any `u8` codes).
///
/// # Safety
/// The CPU must have AVX2 and form `F`'s features: call it only from a function compiled with
/// them (into which it is inlined).
#[inline(always)]
pub unsafe fn dot_dp<const F: Form, const N: usize>(c: &[__m256i; N], a: &[__m256i; N]) -> __m256i {
    // SAFETY: the caller guarantees the features.
    unsafe {
        let mut s = _mm256_setzero_si256();
        for (c, a) in c.iter().zip(a) {
            s = dpbusd::<F>(s, *c, *a);
        }
        s
    }
}

/// `dot_dp` in the EVEX form.
///
/// # Safety
/// The CPU must have AVX2 and AVX-512 F / VL / VNNI: call it only from a function compiled
/// with them (into which it is inlined).
#[inline(always)]
pub unsafe fn dot_vnni<const N: usize>(c: &[__m256i; N], a: &[__m256i; N], _umax: u32) -> __m256i {
    // SAFETY: the caller's contract.
    unsafe { dot_dp::<EVEX, N>(c, a) }
}

/// `dot_dp` in the VEX form.
///
/// # Safety
/// The CPU must have AVX2 and AVX-VNNI: call it only from a function compiled with them (into
/// which it is inlined).
#[inline(always)]
pub unsafe fn dot_avxvnni<const N: usize>(c: &[__m256i; N], a: &[__m256i; N], _umax: u32) -> __m256i {
    // SAFETY: the caller's contract.
    unsafe { dot_dp::<VEX, N>(c, a) }
}
