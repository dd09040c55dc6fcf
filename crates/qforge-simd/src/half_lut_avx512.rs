//! The AVX-512 lookups of [`crate::half_lut`]'s AVX-512 BF16 build: a group's 16-bit table
//! (two tables for [`Tables::Halves`], ...) in one register of 32 words, and its 32 codes
//! looked up with one `vpermw`; f32 rows from the f32 tables with one `vpermps` per 16 codes.
//! The AVX2 kernel splits each table into low and high bytes for two `vpshufb`, blends two
//! 8-entry `vpermps` per 8 codes, and unpacks and reorders the bytes afterwards: about twice
//! the instructions per group. The tables are rounded as there
//! ([`crate::half_lut_avx2::words16`]), so the bits are the same.
//!
//! [`Tables::Linear`] groups have no table: their values are computed and converted sixteen
//! at a time (`crate::scaled_avx512`, through `store8::scaled_i8x32_with`).
#![allow(unsafe_code)]

use std::arch::x86_64::*;

use crate::half_lut::{Half, Tables};
use crate::half_lut_avx2::words16;

/// Word `i` of a 32-word index vector: 0 for elements `0..16`, `add` for `16..32` (the
/// second half's table sits at word `add`).
///
/// # Safety
/// The CPU must have AVX-512 F.
#[inline(always)]
unsafe fn second_half(add: u16) -> __m512i {
    // SAFETY: the caller guarantees AVX-512 F.
    unsafe { _mm512_inserti64x4::<1>(_mm512_setzero_si512(), _mm256_set1_epi16(add as i16)) }
}

/// The 32 values of the codes `c` (bytes, element order: `0..16` in the low 128-bit lane)
/// in `tables`, rounded to `H`, into `out`; `false` with nothing written for
/// [`Tables::Linear`]. Codes must be below 16 (below 8 for [`Tables::Halves8`]; the
/// magnitude below 8 and bit 3 the sign for [`Tables::Signed8`]), as the format contract of
/// [`Tables`] says. `normal`: no table entry is an f32 subnormal (the format's
/// [`crate::half_lut::TableGroups::NEVER_SUBNORMAL`]), so bf16 tables round unchecked (a
/// subnormal entry would come out as zero).
///
/// # Safety
/// The CPU must have AVX2, F16C and AVX-512 F / BW / VL / DQ / BF16, and the caller's
/// `#[target_feature]` set must enable them (this inlines into it).
#[inline(always)]
pub(crate) unsafe fn lookup_store16<H: Half>(tables: &Tables, c: __m256i, out: &mut [u16; 32], normal: bool) -> bool {
    // SAFETY: the caller guarantees the features of every intrinsic here and of `words16`'s
    // bf16 build; every load reads 8 f32 of an array of 8 or 16, and the store writes the 64
    // bytes of `out`.
    unsafe {
        let idx = _mm512_cvtepu8_epi16(c);
        let (table, idx) = match tables {
            Tables::One(t) => (_mm512_castsi256_si512(words16::<H, true>(load8(t, 0), load8(t, 8), normal)), idx),
            Tables::Halves([a, b]) => {
                let (a, b) = (
                    words16::<H, true>(load8(a, 0), load8(a, 8), normal),
                    words16::<H, true>(load8(b, 0), load8(b, 8), normal),
                );
                (_mm512_inserti64x4::<1>(_mm512_castsi256_si512(a), b), _mm512_or_si512(idx, second_half(16)))
            }
            Tables::Halves8([a, b]) => {
                debug_assert!(codes_below(c, 8), "Halves8 codes are below 8");
                let t = words16::<H, true>(load8(a, 0), load8(b, 0), normal);
                (_mm512_castsi256_si512(t), _mm512_or_si512(idx, second_half(8)))
            }
            Tables::Signed8([a, b]) => {
                // [a | b] rounded, spread to [a, -a | b, -b]: the rounded value of `-x` is the
                // rounded `x` with its sign flipped, NaN included.
                let t = _mm512_castsi256_si512(words16::<H, true>(load8(a, 0), load8(b, 0), normal));
                const SPREAD: [u16; 32] = [
                    0, 1, 2, 3, 4, 5, 6, 7, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13,
                    14, 15,
                ];
                const SIGN: i64 = 0x8000_8000_8000_8000_u64 as i64;
                let spread = _mm512_loadu_si512(SPREAD.as_ptr().cast());
                let sign = _mm512_set_epi64(SIGN, SIGN, 0, 0, SIGN, SIGN, 0, 0);
                let t = _mm512_xor_si512(_mm512_permutexvar_epi16(spread, t), sign);
                (t, _mm512_or_si512(idx, second_half(16)))
            }
            Tables::Linear(_) => return false,
        };
        _mm512_storeu_si512(out.as_mut_ptr().cast(), _mm512_permutexvar_epi16(idx, table));
        true
    }
}

/// [`lookup_store16`] to f32: per 16 codes, the half's f32 table (16 entries, or 8 twice)
/// looked up with `vpermps`, [`Tables::Signed8`]'s codes `8..16` negated by a sign flip.
///
/// # Safety
/// As [`lookup_store16`].
#[inline(always)]
pub(crate) unsafe fn lookup_store_f32(tables: &Tables, c: __m256i, out: &mut [f32; 32]) -> bool {
    // SAFETY: the caller guarantees AVX-512 F / DQ; every load reads 8 or 16 f32 of an array
    // of that many, and each store writes 16 of `out`'s 32 (`h < 2`).
    unsafe {
        let (t, signed) = match tables {
            Tables::One(t) => ([_mm512_loadu_ps(t.as_ptr()); 2], false),
            Tables::Halves([a, b]) => ([_mm512_loadu_ps(a.as_ptr()), _mm512_loadu_ps(b.as_ptr())], false),
            Tables::Halves8([a, b]) => ([eight(a), eight(b)], false),
            Tables::Signed8([a, b]) => ([eight(a), eight(b)], true),
            Tables::Linear(_) => return false,
        };
        let bytes = [_mm256_castsi256_si128(c), _mm256_extracti128_si256::<1>(c)];
        for h in 0..2 {
            let idx = _mm512_cvtepu8_epi32(bytes[h]);
            let mut v = _mm512_permutexvar_ps(idx, t[h]);
            if signed {
                // Bit 3 of each code to the lane's sign bit.
                let bit3 = _mm512_and_si512(_mm512_slli_epi32::<28>(idx), _mm512_set1_epi32(i32::MIN));
                v = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(v), bit3));
            }
            _mm512_storeu_ps(out.as_mut_ptr().add(16 * h), v);
        }
        true
    }
}

/// 8 f32 of `t` from `i` (`i + 8 ≤ t.len()`, checked).
///
/// # Safety
/// The CPU must have AVX.
#[inline(always)]
unsafe fn load8(t: &[f32], i: usize) -> __m256 {
    let t = &t[i..i + 8];
    // SAFETY: the caller guarantees AVX; `t` is 8 f32, the 32 bytes the load reads.
    unsafe { _mm256_loadu_ps(t.as_ptr()) }
}

/// The 8 f32 of `t` in both halves of a register.
///
/// # Safety
/// The CPU must have AVX-512 F / DQ.
#[inline(always)]
unsafe fn eight(t: &[f32; 8]) -> __m512 {
    // SAFETY: the caller guarantees AVX-512 F / DQ; `t` is the 32 bytes the load reads.
    unsafe { _mm512_broadcast_f32x8(_mm256_loadu_ps(t.as_ptr())) }
}

/// Whether every byte of `c` is below `n` (debug checks).
///
/// # Safety
/// The CPU must have AVX2.
#[inline(always)]
unsafe fn codes_below(c: __m256i, n: u8) -> bool {
    let mut b = [0u8; 32];
    // SAFETY: the caller guarantees AVX; the store writes the 32 bytes of `b`.
    unsafe { _mm256_storeu_si256(b.as_mut_ptr().cast(), c) };
    b.iter().all(|&x| x < n)
}
