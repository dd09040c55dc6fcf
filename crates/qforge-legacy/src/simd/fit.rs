//! ggml's reference quantizers of the 4- and 5-bit formats (`quantize_row_q4_0_ref`,
//! `q4_1_ref`, `q5_0_ref`, `q5_1_ref`) written with AVX2 intrinsics: one whole block in four
//! registers, from the reduction to the packed bytes.
//!
//! Every operation is the portable reference's ([`crate::codec`]) on the same values in the
//! same order: the lane reductions are `vminps` / `vmaxps`, whose "`a < b ? a : b`" is the
//! reference's comparison (NaN loses, as there); `v · id + bias` is a multiply then an add (no
//! FMA); the truncation is `cvttps2dq`, which gives `i32::MIN` exactly where the reference's
//! C-style truncation does (NaN, out of range); C's `(int8_t)` / `(uint8_t)` keep the low byte;
//! the f16 fields are `vcvtps2ph` with round-to-nearest-even. The two cases in which the
//! reference looks at element order — a zero minimum or maximum (whose sign comes from the
//! first zero) and a block holding both `+amax` and `-amax` — go to the reference itself.

use crate::block::{Kind, LegacyBlock, Packed, QK};
use core::arch::x86_64::*;
use qforge_core::le::F16Le;

/// `round-to-nearest-even` for `vcvtps2ph`.
const RNE: i32 = _MM_FROUND_TO_NEAREST_INT;

/// The f16 of `v`, as `F16Le::from_f32`.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn f16(v: f32) -> F16Le {
    let h = _mm_cvtps_ph::<RNE>(_mm_set_ss(v));
    F16Le((_mm_extract_epi16::<0>(h) as u16).to_le_bytes())
}

/// Horizontal `op` of the eight lanes (non-NaN lanes: the order does not matter).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn hreduce(v: __m256, op: impl Fn(__m128, __m128) -> __m128) -> f32 {
    let m = op(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let m = op(m, _mm_movehl_ps(m, m));
    _mm_cvtss_f32(op(m, _mm_movehdup_ps(m)))
}

/// `(d, m, id, bias)` of the block, or `None` where the reference must decide.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn scales<B: LegacyBlock>(v: &[__m256; 4]) -> Option<(f32, f32, f32, f32)> {
    let bits = B::BITS as i32;
    match B::KIND {
        Kind::Symmetric => {
            let nmax = 1i32 << (bits - 1);
            // abs_max: lanes `|v| > m ? |v| : m` from 0 (a NaN never enters).
            let abs = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fff_ffff));
            let mut m = _mm256_setzero_ps();
            for &v in v {
                m = _mm256_max_ps(_mm256_and_ps(v, abs), m);
            }
            let amax = hreduce(m, |a, b| _mm_max_ps(a, b));
            let (p, n) = (_mm256_set1_ps(amax), _mm256_set1_ps(-amax));
            let (mut pos, mut neg) = (0, 0);
            for &v in v {
                pos |= _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_EQ_OQ>(v, p));
                neg |= _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_EQ_OQ>(v, n));
            }
            if amax > 0.0 && pos != 0 && neg != 0 {
                return None;
            }
            // `+amax` or `-amax`, whichever occurs, without a branch (which mispredicts on
            // every other block); 0 when all are zero (or NaN).
            let signed = f32::from_bits(amax.to_bits() | u32::from(pos == 0) << 31);
            let max = if amax > 0.0 { signed } else { 0.0 };
            let d = max / -(nmax as f32);
            let id = if d != 0.0 { 1.0 / d } else { 0.0 };
            Some((d, 0.0, id, nmax as f32 + 0.5))
        }
        Kind::Affine => {
            let qmax = (1i32 << bits) - 1;
            let (mut lo, mut hi) = (_mm256_set1_ps(f32::MAX), _mm256_set1_ps(-f32::MAX));
            for &v in v {
                lo = _mm256_min_ps(v, lo);
                hi = _mm256_max_ps(v, hi);
            }
            let min = hreduce(lo, |a, b| _mm_min_ps(a, b));
            let max = hreduce(hi, |a, b| _mm_max_ps(a, b));
            if min == 0.0 || max == 0.0 {
                return None;
            }
            let d = (max - min) / qmax as f32;
            let id = if d != 0.0 { 1.0 / d } else { 0.0 };
            Some((d, min, id, 0.5))
        }
    }
}

/// The block's 32 codes in element order, as the reference stores them (before masking).
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
fn codes<B: LegacyBlock>(v: &[__m256; 4], m: f32, id: f32, bias: f32) -> __m256i {
    let (mv, idv, bv) = (_mm256_set1_ps(m), _mm256_set1_ps(id), _mm256_set1_ps(bias));
    let t = v.map(|v| {
        let v = match B::KIND {
            Kind::Symmetric => v,
            Kind::Affine => _mm256_sub_ps(v, mv),
        };
        _mm256_cvttps_epi32(_mm256_add_ps(_mm256_mul_ps(v, idv), bv))
    });
    let top = (1i8 << B::BITS).wrapping_sub(1);
    // Keep each value's low byte, sign- (int8_t) or zero-extended (uint8_t), so the packs below
    // never saturate; then the bytes back in element order and C's MIN with the top code.
    let bytes = match B::KIND {
        Kind::Symmetric => {
            let t = t.map(|t| _mm256_srai_epi32::<24>(_mm256_slli_epi32::<24>(t)));
            _mm256_packs_epi16(_mm256_packs_epi32(t[0], t[1]), _mm256_packs_epi32(t[2], t[3]))
        }
        Kind::Affine => {
            let t = t.map(|t| _mm256_and_si256(t, _mm256_set1_epi32(0xff)));
            _mm256_packus_epi16(_mm256_packus_epi32(t[0], t[1]), _mm256_packus_epi32(t[2], t[3]))
        }
    };
    let bytes = _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    match B::KIND {
        Kind::Symmetric => _mm256_min_epi8(bytes, _mm256_set1_epi8(top)),
        Kind::Affine => _mm256_min_epu8(bytes, _mm256_set1_epi8(top)),
    }
}

/// One whole block; `false` (nothing written) where the reference must decide.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn fit_block<B: LegacyBlock>(x: &[f32; QK], store: fn(&mut B, Packed), out: &mut B) -> bool {
    // SAFETY: `x` is 32 f32 values, so the four unaligned 8-lane loads stay inside it.
    let v: [__m256; 4] = std::array::from_fn(|i| unsafe { _mm256_loadu_ps(x.as_ptr().add(8 * i)) });
    let Some((d, m, id, bias)) = scales::<B>(&v) else {
        return false;
    };
    let c = codes::<B>(&v, m, id, bias);
    let nib = _mm256_set1_epi8(0x0f);
    let (lo, hi) = (_mm256_castsi256_si128(c), _mm256_extracti128_si256::<1>(c));
    let qs = _mm_or_si128(
        _mm_and_si128(lo, _mm256_castsi256_si128(nib)),
        _mm_slli_epi16::<4>(_mm_and_si128(hi, _mm256_castsi256_si128(nib))),
    );
    // Bit 4 of each code to bit 7 of its byte (the shift's carries land below bit 7).
    let qh = _mm256_movemask_epi8(_mm256_slli_epi16::<3>(c)) as u32;
    let mut qsb = [0u8; 16];
    // SAFETY: `qsb` is 16 bytes, one unaligned 128-bit store.
    unsafe { _mm_storeu_si128(qsb.as_mut_ptr().cast(), qs) };
    store(out, Packed { d: f16(d), m: f16(m), qs: qsb, qh: qh.to_le_bytes() });
    true
}

/// `quantize_row_*_ref` of a row without importance weights: whole blocks here, the rest
/// (a partial last block, the order-dependent cases) by the reference.
#[inline]
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn encode_row_ref<B: LegacyBlock>(x: &[f32], store: fn(&mut B, Packed), blocks: &mut [B]) {
    for (xs, block) in x.chunks(QK).zip(blocks.iter_mut()) {
        match xs.first_chunk::<QK>() {
            Some(full) if fit_block(full, store, block) => {}
            _ => crate::codec::encode_block(xs, None, block),
        }
    }
}
