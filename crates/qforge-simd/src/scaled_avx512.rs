//! The AVX-512 form of [`crate::store8::scaled_i8x32_with`], taken by the decoders' AVX-512
//! BF16 builds ([`crate::bf16_builds!`]) for every output type: 32 signed bytes times a factor
//! per 16, sixteen lanes per register (widened with one `vpmovsxbd`, converted, multiplied,
//! the sign flips and tails applied), then stored with one conversion per 16 values
//! (`vcvtps2ph`, or one `vcvtne2ps2bf16` for all 32). The AVX2 form does each step 8 lanes at
//! a time, and bf16 by a five-instruction formula per 8 values. The same operations in the
//! same order on the same operands, so the same bits (qforge-cpu's level test holds it for
//! every format).
#![allow(unsafe_code)]

use std::arch::x86_64::*;

use crate::Tail;
use qforge_core::{DType, Elem, OutRow};

/// [`crate::store8::scaled_i8x32_with`]`::<O, _, true, NORMAL>` with 512-bit registers.
/// Returns `false` with nothing written for bf16 output where a lane is subnormal (possible
/// only without `NORMAL`): `vcvtne2ps2bf16` reads it as zero, and the caller's AVX2 path,
/// which rounds it by formula, takes the group.
///
/// # Safety
/// The CPU must have AVX2, F16C and AVX-512 F / BW / VL / DQ / BF16, and the caller's
/// `#[target_feature]` set must enable them (this inlines into it). With `NORMAL` and bf16
/// output, every factor and tail value must pass [`crate::store8::never_subnormal`] (else a
/// subnormal lane may come out as zero: wrong, never undefined); f32 and f16 ignore it.
#[inline(always)]
pub(crate) unsafe fn scaled_i8x32<O: Elem, const NORMAL: bool>(
    v: __m256i,
    factors: [f32; 2],
    tails: [Tail; 2],
    negate: Option<__m256i>,
    dst: &mut [O; 32],
) -> bool {
    /// `vfpclassps` category: subnormal.
    const SUBNORMAL: i32 = 0x20;
    // SAFETY: the caller guarantees the features of every intrinsic here; each store writes
    // the 128 (f32) or 64 (f16, bf16) bytes of `dst`; `__m512bh` and `__m512i` are both 64
    // bytes of plain bits.
    unsafe {
        // No closures: one would not take the caller's features, and its intrinsics would
        // stay calls.
        let mut x = [_mm512_setzero_ps(); 2];
        for (h, x) in x.iter_mut().enumerate() {
            let bytes = if h == 0 { _mm256_castsi256_si128(v) } else { _mm256_extracti128_si256::<1>(v) };
            let mut y = _mm512_mul_ps(_mm512_set1_ps(factors[h]), _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(bytes)));
            if let Some(n) = negate {
                // The bytes widened to 32 bits keep their sign bit.
                let n = if h == 0 { _mm256_castsi256_si128(n) } else { _mm256_extracti128_si256::<1>(n) };
                let sign = _mm512_and_si512(_mm512_cvtepi8_epi32(n), _mm512_set1_epi32(i32::MIN));
                y = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(y), sign));
            }
            *x = match tails[h] {
                Tail::None => y,
                Tail::Add(m) => _mm512_add_ps(y, _mm512_set1_ps(m)),
                Tail::Sub(m) => _mm512_sub_ps(y, _mm512_set1_ps(m)),
            };
        }
        if O::DTYPE == DType::Bf16
            && !NORMAL
            && _mm512_fpclass_ps_mask::<SUBNORMAL>(x[0]) | _mm512_fpclass_ps_mask::<SUBNORMAL>(x[1]) != 0
        {
            return false;
        }
        match O::out_row(dst) {
            OutRow::F32(o) => {
                _mm512_storeu_ps(o.as_mut_ptr(), x[0]);
                _mm512_storeu_ps(o.as_mut_ptr().add(16), x[1]);
            }
            OutRow::F16(o) => {
                let (h0, h1) = (
                    _mm512_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(x[0]),
                    _mm512_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(x[1]),
                );
                _mm512_storeu_si512(o.as_mut_ptr().cast(), _mm512_inserti64x4::<1>(_mm512_castsi256_si512(h0), h1));
            }
            OutRow::Bf16(o) => {
                // NaN lanes come out quiet with their top bits, as the formula's. The second
                // operand fills the low half.
                let h = std::mem::transmute::<__m512bh, __m512i>(_mm512_cvtne2ps_pbh(x[1], x[0]));
                _mm512_storeu_si512(o.as_mut_ptr().cast(), h);
            }
        }
        true
    }
}
