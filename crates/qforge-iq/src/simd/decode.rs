//! AVX2 dequantization of the grid I-quants (iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s, iq1_s,
//! iq1_m) to f32, f16 or bf16 in one pass: each 32-value sub-block's signed integer values
//! come from [`signed_values`] (the dot kernel's unpack: grid entries loaded straight into a
//! register, signs by `vpsignb`), 8 at a time widened to f32 and multiplied by the 16-value
//! group's factor `D_MUL · d · scale`, then stored as the output type
//! ([`qforge_simd::store8::scaled_i8x32`]: f16 with `vcvtps2ph` in registers, no f32 row).
//!
//! The same bits as each format's `decode` (ggml's `dequantize_row_iq*`): ggml computes
//! `d · (0.5 + s) · 0.25 · g · ±1` (iq2_xxs; the others alike), here `±((d · D_MUL · (2s +
//! 1)) · g)`, the sign flipped with an XOR as ggml's compiled `· -1.f` does (a NaN `d` gives
//! NaNs of both signs there; measured on ggml 0.25.3). Scaling by a power of two commutes
//! with rounding for these magnitudes (an f16 `d` times a scale below 64 is far from f32's
//! overflow and subnormal range), so each product is one rounding of the same real number.
//! iq1's `dl · (g ± 1/8)` is `(dl / 8) · (8g ± 1)` the same way, multiplied by the signed
//! value as ggml does. qforge-cpu's level test (random blocks, NaN and infinite scales
//! included) and each format's conformance suite hold it.
#![allow(unsafe_code)]

use std::arch::x86_64::*;

use qforge_core::Elem;
use qforge_simd::Avx2;
use qforge_simd::store8::scaled_i8x32;

use super::{grid_signs, signed_values};
use crate::common::QK_K;
use crate::unpack::{SubBlock, SubBlocks};

/// Decodes a row of blocks (`out.len()` logical elements, at most `blocks.len() · QK_K`; a
/// partial last block keeps its real elements) with AVX2 and returns `true`; `false` with
/// nothing written where the CPU lacks it.
pub(crate) fn decode_row<F: SubBlocks, O: Elem>(blocks: &[F::Block], out: &mut [O]) -> bool {
    let Some(avx2) = Avx2::detect() else {
        return false;
    };
    qforge_simd::block_rows::<_, O, QK_K>(blocks, out, |b, o| blocks_with::<F, O>(avx2, b, o));
    true
}

/// [`blocks_avx2`] behind the proof of AVX2.
#[inline]
fn blocks_with<F: SubBlocks, O: Elem>(_: Avx2, blocks: &[F::Block], out: &mut [[O; QK_K]]) {
    // SAFETY: the `Avx2` token exists only where the CPU has AVX2, FMA and F16C, everything
    // the `#[target_feature]` function enables.
    unsafe { blocks_avx2::<F, O>(blocks, out) }
}

/// Whole blocks, block `i` into `out[i]`.
#[target_feature(enable = "avx2,fma,f16c")]
fn blocks_avx2<F: SubBlocks, O: Elem>(blocks: &[F::Block], out: &mut [[O; QK_K]]) {
    for (b, o) in blocks.iter().zip(out) {
        // `D_MUL · d`, the f16 widened with `vcvtph2ps` (exact).
        let d = F::D_MUL * _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(F::d_bits(b)))));
        // The values are nonzero integers, so only a NaN `d` makes NaNs (an infinite one
        // makes infinities): bf16 rounds without its NaN case otherwise.
        if d.is_nan() { block::<F, O, true>(b, d, o) } else { block::<F, O, false>(b, d, o) }
    }
}

/// One block with factor `d`, its NaN lanes rounded as NaN where `NAN` (else there are none).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn block<F: SubBlocks, O: Elem, const NAN: bool>(b: &F::Block, d: f32, o: &mut [O; QK_K]) {
    {
        let pre = F::prepare(b);
        let scales = F::scales(b);
        let (subs, _) = o.as_chunks_mut::<32>();
        for (ib, dst) in subs.iter_mut().enumerate() {
            // The grid formats negate `d·s·g` (ggml's `· (sign ? -1.f : 1.f)`, which flips
            // a NaN's sign too): magnitudes and sign bytes apart. iq1's values are signed
            // integers, multiplied as they are (ggml's `dl · (g + delta)`).
            let (v, negate) = match F::sub_block(b, &pre, ib) {
                SubBlock::Grid(g, s) => {
                    let (g, s) = grid_signs(g, s);
                    (g, Some(s))
                }
                sb => (signed_values(sb), None),
            };
            let factors = [d * f32::from(scales[2 * ib]), d * f32::from(scales[2 * ib + 1])];
            // SAFETY: this function's features include the AVX2 and F16C the stores need.
            unsafe { scaled_i8x32::<O, NAN>(v, factors, None, negate, dst) };
        }
    }
}
