//! AVX2 (x86-64): 8 f32 lanes stored as a dequantizer's output element type — f32 as they
//! are, f16 with `vcvtps2ph`, bf16 with the round-to-nearest-even formula on the lanes
//! (`qforge_core::round::f32_to_bf16_bits`, NaN kept NaN) — so that a decoder that computes
//! its values 8 at a time in f32 writes every output type in the same pass, with no f32 row
//! to convert afterwards. The same bits as `O::from_f32` of each lane (the tests below and
//! every caller's level tests hold it).
#![allow(unsafe_code)]

use std::arch::x86_64::*;

use qforge_core::{Elem, OutRow};

/// Stores the 8 lanes of `v` into `dst` as `O` (each `O::from_f32` of its lane).
///
/// # Safety
/// The CPU must have AVX2 and F16C.
#[inline(always)]
pub unsafe fn store<O: Elem>(v: __m256, dst: &mut [O; 8]) {
    // SAFETY: the caller's guarantee, passed on.
    unsafe { store_as::<O, true>(v, dst) }
}

/// [`store`] for lanes the caller knows are not NaN (a decoder whose scale is not NaN and
/// whose values are finite and nonzero): bf16 then skips the NaN case of the rounding, 4 of
/// its 9 instructions. A NaN lane would come out as some other bf16 value (wrong, never
/// undefined); f32 and f16 are stored exactly as by [`store`].
///
/// # Safety
/// The CPU must have AVX2 and F16C.
#[inline(always)]
pub unsafe fn store_not_nan<O: Elem>(v: __m256, dst: &mut [O; 8]) {
    // SAFETY: the caller's guarantee, passed on.
    unsafe { store_as::<O, false>(v, dst) }
}

/// [`store`] (`NAN`) or [`store_not_nan`].
///
/// # Safety
/// The CPU must have AVX2 and F16C.
#[inline(always)]
unsafe fn store_as<O: Elem, const NAN: bool>(v: __m256, dst: &mut [O; 8]) {
    // The match is on the type, so it folds away once inlined.
    match O::out_row(dst) {
        OutRow::F32(o) => {
            if let Ok(o) = <&mut [f32; 8]>::try_from(o) {
                // SAFETY: `o` is 8 f32, the 32 bytes the unaligned store writes; the caller
                // guarantees AVX.
                unsafe { _mm256_storeu_ps(o.as_mut_ptr(), v) }
            }
        }
        OutRow::F16(o) => {
            if let Ok(o) = <&mut [qforge_core::f16; 8]>::try_from(o) {
                // SAFETY: `o` is 8 f16, the 16 bytes the unaligned store writes; the caller
                // guarantees AVX2 and F16C.
                unsafe { _mm_storeu_si128(o.as_mut_ptr().cast(), _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(v)) }
            }
        }
        OutRow::Bf16(o) => {
            if let Ok(o) = <&mut [qforge_core::bf16; 8]>::try_from(o) {
                // SAFETY: `o` is 8 bf16, the 16 bytes the unaligned store writes; the caller
                // guarantees AVX2.
                unsafe {
                    let b = if NAN { bf16_bits(v) } else { bf16_bits_not_nan(v) };
                    let packed = _mm_packus_epi32(_mm256_castsi256_si128(b), _mm256_extracti128_si256::<1>(b));
                    _mm_storeu_si128(o.as_mut_ptr().cast(), packed)
                }
            }
        }
    }
}

/// `qforge_core::round::f32_to_bf16_bits` of 8 lanes that are not NaN (round to nearest
/// even: add `0x7fff` and the lowest kept bit, keep the top 16 bits; infinities stay
/// infinite, values that round past the largest finite become infinite), in the low 16 bits
/// of each 32-bit lane.
///
/// # Safety
/// The CPU must have AVX2.
#[inline(always)]
unsafe fn bf16_bits_not_nan(v: __m256) -> __m256i {
    // SAFETY: the caller guarantees AVX2.
    unsafe {
        let x = _mm256_castps_si256(v);
        let odd = _mm256_and_si256(_mm256_srli_epi32::<16>(x), _mm256_set1_epi32(1));
        _mm256_srli_epi32::<16>(_mm256_add_epi32(x, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), odd)))
    }
}

/// `qforge_core::round::f32_to_bf16_bits` of 8 lanes, in the low 16 bits of each 32-bit lane
/// (the high 16 bits zero, so `vpackusdw` narrows them unchanged): [`bf16_bits_not_nan`], a
/// NaN lane replaced by its top 16 bits with the quiet bit set.
///
/// # Safety
/// The CPU must have AVX2.
#[inline(always)]
pub(crate) unsafe fn bf16_bits(v: __m256) -> __m256i {
    // SAFETY: the caller guarantees AVX2.
    unsafe {
        let x = _mm256_castps_si256(v);
        let rounded = bf16_bits_not_nan(v);
        let nan = _mm256_or_si256(_mm256_srli_epi32::<16>(x), _mm256_set1_epi32(0x0040));
        let magnitude = _mm256_and_si256(x, _mm256_set1_epi32(0x7fff_ffff));
        let is_nan = _mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(0x7f80_0000));
        _mm256_blendv_epi8(rounded, nan, is_nan)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use qforge_core::{bf16, f16};

    /// Every lane of many vectors (specials, ties, subnormals, random bits) against
    /// `Elem::from_f32`, bit for bit.
    #[test]
    fn stores_round_like_from_f32() {
        // The CPU's own features, not `cpu::avx2()`: a `QFORGE_CPU` cap must not turn this
        // test into one that checks nothing.
        assert!(
            is_x86_feature_detected!("avx2") && is_x86_feature_detected!("f16c"),
            "the x86-64 tests need a CPU with AVX2 and F16C"
        );
        let mut rng = qforge_core::rand::Rng::new(7);
        let mut values = vec![
            0.0f32,
            -0.0,
            1.0,
            -1.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            -f32::NAN,
            f32::from_bits(0x7f80_0001),
            f32::from_bits(0xff80_0001),
            f32::from_bits(0x7fff_ffff),
            f32::MAX,
            f32::MIN_POSITIVE,
            f32::from_bits(1),
            65504.0,
            65520.0,
            1.0 + f32::EPSILON,
            f32::from_bits(0x3f80_8000),
            f32::from_bits(0x3f81_8000),
            f32::from_bits(0x3380_0000),
        ];
        values.extend((0..8000).map(|_| f32::from_bits(rng.next_u64() as u32)));
        values.resize(values.len().next_multiple_of(8), 0.5);
        for x in values.as_chunks::<8>().0 {
            // SAFETY: AVX2 and F16C checked above; `x` is 8 f32, the 32 bytes loaded.
            let v = unsafe { _mm256_loadu_ps(x.as_ptr()) };
            let (mut a, mut b, mut c) = ([0f32; 8], [f16::ZERO; 8], [bf16::ZERO; 8]);
            // SAFETY: as above.
            unsafe { (store(v, &mut a), store(v, &mut b), store(v, &mut c)) };
            let (mut b2, mut c2) = ([f16::ZERO; 8], [bf16::ZERO; 8]);
            // SAFETY: as above.
            unsafe { (store_not_nan(v, &mut b2), store_not_nan(v, &mut c2)) };
            for i in 0..8 {
                assert_eq!(b2[i].to_bits(), b[i].to_bits());
                if !x[i].is_nan() {
                    assert_eq!(c2[i].to_bits(), c[i].to_bits(), "bf16 (not NaN) of {:#x}", x[i].to_bits());
                }
                assert_eq!(a[i].to_bits(), x[i].to_bits());
                assert_eq!(b[i].to_bits(), <f16 as Elem>::from_f32(x[i]).to_bits(), "f16 of {:#x}", x[i].to_bits());
                assert_eq!(c[i].to_bits(), <bf16 as Elem>::from_f32(x[i]).to_bits(), "bf16 of {:#x}", x[i].to_bits());
            }
        }
    }
}
