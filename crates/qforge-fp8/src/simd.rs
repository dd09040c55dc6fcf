//! AVX2 dequantization of the fp8 formats to f32, f16 or bf16 in one pass, 16 codes at a
//! time, times the block's scale, stored as the output type
//! ([`qforge_simd::store8::store16`]: f16 / bf16 rounded in registers, no f32 row). A block
//! without NaN / Inf codes and with a finite scale (every block of a real model) takes
//! [`block_finite`]'s three integer instructions and two multiplies per 8 codes; any other
//! block the vectorized branch-free [`decode`] with its special-code select. The same bits as
//! [`crate::to_f32`]`(q) · s` (the decode equals the table for all 256 codes, NaN payloads
//! included: `decode_equals_the_table`; qforge-cpu's level test holds both paths to the
//! portable one).
#![allow(unsafe_code)]

use std::arch::x86_64::*;

use qforge_core::{DType, Elem};
use qforge_simd::store8::{never_subnormal, store16_lanes};

use crate::grid::BLOCK;
use crate::{Fp8Kind, decode};

// `decode_row`: `out[i] = O::from_f32(to_f32(bytes[i]) · s)`, `s` the scale of element `i`'s
// 128-element block, with AVX2 (bf16 with `vcvtne2ps2bf16` where the CPU has AVX-512 BF16:
// with the AVX2 formula's five instructions per 8 values fp8_e4m3's bf16 rows read 0.57x of
// its f32 rows on a Zen 5). Only bf16: f16 rows read 0.69x in that build on Zen 4 (the
// plain-Rust special-code scan widened to 512 bits), and f32 rows gain nothing there.
qforge_simd::bf16_builds! {
    pick: pub(crate) decode_row, avx2: row_avx2, bf16: row_bf16, body: row, wide: O::DTYPE == DType::Bf16,
    generics: [K: Fp8Kind, O: Elem], args: (bytes: &[u8], scales: impl Iterator<Item = f32>, out: &mut [O]),
}

/// The row loop of both builds.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C, with `BF16` AVX-512 F / BW / VL / DQ / BF16 too; it
/// inlines into its caller, whose features must include those.
#[inline(always)]
unsafe fn row<K: Fp8Kind, O: Elem, const BF16: bool>(bytes: &[u8], scales: impl Iterator<Item = f32>, out: &mut [O]) {
    // The smallest fp8 magnitude step, 2^(1 - BIAS - MBITS): every value is an integer times it.
    let step = f32::from_bits(((128 - K::BIAS - K::MBITS as i32) as u32) << 23);
    for ((q, o), s) in bytes.chunks(BLOCK).zip(out.chunks_mut(BLOCK)).zip(scales) {
        let n = q.len().min(o.len());
        let (q16, q_rest) = q[..n].as_chunks::<16>();
        let (o16, o_rest) = o[..n].as_chunks_mut::<16>();
        // Without NaN / Inf codes and with a finite scale no product is NaN: bf16 then
        // rounds without its NaN case. (A fold, not `any`: no early exit, so it vectorizes.)
        let special = q.iter().fold(false, |m, &c| m | is_special::<K>(c));
        // SAFETY: the caller guarantees the features `block` / `block_finite` need.
        unsafe {
            if special || !s.is_finite() {
                block::<K, O, BF16>(q16, s, o16);
            } else if BF16 && (s == 0.0 || step * s != 0.0 && never_subnormal(step * s)) {
                // Each value is `k · (step · s)` for an integer `k` (`step · s` exact: a power
                // of two times `s`, at least 2^-100 here; a nonzero `s` whose `step · s`
                // underflows to zero does not pass), so no product is subnormal and
                // `vcvtne2ps2bf16` needs no check (`never_subnormal`).
                block_finite::<K, O, BF16, true>(q16, s, o16);
            } else {
                block_finite::<K, O, BF16, false>(q16, s, o16);
            }
        }
        for (&c, o) in q_rest.iter().zip(o_rest) {
            *o = O::from_f32(decode::<K>(c) * s);
        }
    }
}

/// Whether `c` is a NaN or infinity code (its magnitude's exponent bits all ones for e5m2,
/// the magnitude `0x7F` for e4m3).
#[inline(always)]
fn is_special<K: Fp8Kind>(c: u8) -> bool {
    let mag = c & 0x7F;
    if K::IEEE_SPECIALS { mag >> K::MBITS == 0x7F >> K::MBITS } else { mag == 0x7F }
}

/// 16-code chunks of one block with scale `s`, NaN lanes rounded as NaN.
///
/// # Safety
/// As [`row`].
#[inline(always)]
unsafe fn block<K: Fp8Kind, O: Elem, const BF16: bool>(q16: &[[u8; 16]], s: f32, o16: &mut [[O; 16]]) {
    for (c, dst) in q16.iter().zip(o16) {
        // A plain loop over a fixed array: LLVM vectorizes the decode 8 lanes wide.
        let mut v = [0f32; 16];
        for (v, &c) in v.iter_mut().zip(c) {
            *v = decode::<K>(c) * s;
        }
        // SAFETY: `v` is 16 f32, the 64 bytes the two unaligned loads read; the caller
        // guarantees the features `store16_lanes` needs.
        unsafe {
            store16_lanes::<O, true, BF16, false>(_mm256_loadu_ps(v.as_ptr()), _mm256_loadu_ps(v.as_ptr().add(8)), dst)
        };
    }
}

/// [`block`] of a block without special codes and with a finite scale, in intrinsics: each
/// code sign-extended to 32 bits and shifted so that its magnitude bits land in the f32's
/// exponent and mantissa fields and one of the sign copies on the sign bit (the others
/// masked off), times `2^(127 − BIAS)` (exact, as in [`decode`]; `(−x)·y = −(x·y)`), times
/// `s`. Three integer instructions per 8 codes where the vectorized [`decode`] took the
/// special-code select and the sign OR too (fp8_e4m3 to bf16 ran at 1.3 cycles a value).
/// `NORMAL`: no product is subnormal (bf16 rounds without a check).
///
/// # Safety
/// As [`row`]; with `NORMAL`, `never_subnormal(step · s)` ([`row`]).
#[inline(always)]
unsafe fn block_finite<K: Fp8Kind, O: Elem, const BF16: bool, const NORMAL: bool>(
    q16: &[[u8; 16]],
    s: f32,
    o16: &mut [[O; 16]],
) {
    // SAFETY: the caller guarantees AVX2 and F16C (and with `BF16` the rest
    // `store16_lanes` needs); each load reads the 16 bytes of `c`; `NAN = false` is right: no
    // code is special and `s` is finite, so no product is NaN; `NORMAL` as the caller says.
    unsafe {
        let fields = _mm256_set1_epi32((0x8000_0000u32 | (0x7F << (23 - K::MBITS))) as i32);
        let up = _mm256_set1_ps(f32::from_bits(((127 - K::BIAS + 127) as u32) << 23));
        let sv = _mm256_set1_ps(s);
        let shift = _mm_cvtsi32_si128((23 - K::MBITS) as i32);
        for (c, dst) in q16.iter().zip(o16) {
            let x = _mm_loadu_si128(c.as_ptr().cast());
            let mut v = [_mm256_setzero_ps(); 2];
            for (h, v) in v.iter_mut().enumerate() {
                let c = if h == 0 { x } else { _mm_unpackhi_epi64(x, x) };
                let bits = _mm256_and_si256(_mm256_sll_epi32(_mm256_cvtepi8_epi32(c), shift), fields);
                *v = _mm256_mul_ps(_mm256_mul_ps(_mm256_castsi256_ps(bits), up), sv);
            }
            store16_lanes::<O, false, BF16, NORMAL>(v[0], v[1], dst);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{E4m3, E5m2};
    use qforge_core::rand::Rng;
    use qforge_core::{bf16, f16};
    use qforge_simd::Avx2;

    /// Rows of every length 0..=300 with and without special codes, finite scales of both
    /// signs and sizes (so both [`block_finite`] and the special-code path run, and bf16 with
    /// and without its subnormal check where the CPU has AVX-512 BF16),
    /// and a NaN scale: `O::from_f32(decode(c) · s)` bit for bit (or both NaN).
    fn rows_equal_the_scalar_decode<K: Fp8Kind>(seed: u64) {
        let avx2 = Avx2::detect().expect("the x86-64 tests need a CPU with AVX2, FMA and F16C");
        let mut rng = Rng::new(seed);
        for len in 0..=300usize {
            let mask = if len % 4 == 0 { 0xFF } else { 0xF7 };
            let q: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8 & mask).collect();
            let s: Vec<f32> = (0..len.div_ceil(BLOCK))
                .map(|i| match (len + i) % 8 {
                    0 => f32::NAN,
                    1 => -3.0e-3,
                    2 => 1.0e30,
                    // Subnormal products (the checked bf16 store), a subnormal scale (whose
                    // `step · s` underflows to zero) and zero.
                    3 => -2.0e-36,
                    4 => 3.0e-44,
                    5 => 0.0,
                    _ => rng.unit_f32() * 0.01,
                })
                .collect();
            let want = |i: usize| decode::<K>(q[i]) * s[i / BLOCK];
            let (mut a, mut b, mut c) = (vec![0f32; len], vec![f16::ZERO; len], vec![bf16::ZERO; len]);
            decode_row::<K, f32>(avx2, &q, s.iter().copied(), &mut a);
            decode_row::<K, f16>(avx2, &q, s.iter().copied(), &mut b);
            decode_row::<K, bf16>(avx2, &q, s.iter().copied(), &mut c);
            for i in 0..len {
                let w = want(i);
                let same = |got: u32, want: u32, nan: bool| got == want || nan;
                assert!(same(a[i].to_bits(), w.to_bits(), a[i].is_nan() && w.is_nan()), "f32 len {len} at {i}");
                let (wh, wb) = (f16::from_f32(w), bf16::from_f32(w));
                assert!(
                    same(b[i].to_bits().into(), wh.to_bits().into(), b[i].is_nan() && wh.is_nan()),
                    "f16 {len} {i}"
                );
                assert!(
                    same(c[i].to_bits().into(), wb.to_bits().into(), c[i].is_nan() && wb.is_nan()),
                    "bf16 {len} {i}"
                );
            }
        }
    }

    #[test]
    fn avx2_rows_equal_the_scalar_decode() {
        rows_equal_the_scalar_decode::<E4m3>(3);
        rows_equal_the_scalar_decode::<E5m2>(4);
    }
}
