//! AVX2 dequantization of the grid I-quants (iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s, iq1_s,
//! iq1_m) to f32, f16 or bf16 in one pass: each 32-value sub-block's signed integer values
//! come from [`signed_values`] (the dot kernel's unpack: grid entries loaded straight into a
//! register, signs by `vpsignb`), 8 at a time widened to f32 and multiplied by the 16-value
//! group's factor `D_MUL · d · scale`, then stored as f32
//! ([`qforge_simd::store8::scaled_i8x32`]). To f16 / bf16 the values go by table instead
//! ([`group_16bit`]: each value's magnitude index and sign as a code, 8 rounded products per
//! 16 values looked up), no f32 row either way; bf16 tables with `vcvtne2ps2bf16` where the
//! CPU has AVX-512 BF16 (a second build of the row loop).
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

use qforge_core::{DType, Elem};
use qforge_simd::Avx2;
use qforge_simd::Tail;
use qforge_simd::half_lut::{Tables, group_from_codes_with, scaled8};
use qforge_simd::store8::scaled_i8x32_with;

use super::{grid_signs, signed_values};
use crate::common::QK_K;
use crate::packed::GridValues;
use crate::unpack::{SubBlock, SubBlocks};

/// Decodes a row of blocks (`out.len()` logical elements, at most `blocks.len() · QK_K`; a
/// partial last block keeps its real elements) with AVX2 and returns `true`; `false` with
/// nothing written where the CPU lacks it.
pub(crate) fn decode_row<F: GridValues, O: Elem>(blocks: &[F::Block], out: &mut [O]) -> bool {
    let Some(avx2) = Avx2::detect() else {
        return false;
    };
    qforge_simd::block_rows::<_, O, QK_K>(blocks, out, |b, o| blocks_with::<F, O>(avx2, b, o));
    true
}

// `blocks_with`: [`blocks`] compiled for AVX2 behind its proof, or its AVX-512 BF16 build where
// bf16 rounds in one instruction (with the AVX2 formula iq1_m's bf16 rows read 0.69x of its
// f32 rows on a Zen 5, iq2_xs / iq2_s 0.80x).
qforge_simd::bf16_builds! {
    pick: blocks_with, avx2: blocks_avx2, bf16: blocks_bf16, body: blocks,
    generics: [F: GridValues, O: Elem], args: (blocks: &[F::Block], out: &mut [[O; QK_K]]),
}

/// The row loop of both builds.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C, with `BF16` AVX-512 F / BW / VL / DQ / BF16 too; it
/// inlines into its caller, whose features must include those.
#[inline(always)]
unsafe fn blocks<F: GridValues, O: Elem, const BF16: bool>(blocks: &[F::Block], out: &mut [[O; QK_K]]) {
    for (b, o) in blocks.iter().zip(out) {
        // SAFETY: the caller guarantees F16C (and AVX2, FMA, with `BF16` the rest `block`
        // needs).
        unsafe {
            // `D_MUL · d`, the f16 widened with `vcvtph2ps` (exact).
            let d = <F as SubBlocks>::D_MUL * _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(F::d_bits(b)))));
            // The values are nonzero integers, so only a NaN `d` makes NaNs (an infinite one
            // makes infinities): bf16 rounds without its NaN case otherwise.
            if d.is_nan() { block::<F, O, true, BF16>(b, d, o) } else { block::<F, O, false, BF16>(b, d, o) }
        }
    }
}

/// One block with factor `d`, its NaN lanes rounded as NaN where `NAN` (else there are none).
///
/// # Safety
/// As [`blocks`].
#[inline(always)]
unsafe fn block<F: GridValues, O: Elem, const NAN: bool, const BF16: bool>(b: &F::Block, d: f32, o: &mut [O; QK_K]) {
    let pre = F::prepare(b);
    let scales = <F as SubBlocks>::scales(b);
    let (subs, _) = o.as_chunks_mut::<32>();
    for (ib, dst) in subs.iter_mut().enumerate() {
        let factors = [d * f32::from(scales[2 * ib]), d * f32::from(scales[2 * ib + 1])];
        // The grid formats negate `d·s·g` (ggml's `· (sign ? -1.f : 1.f)`, which flips
        // a NaN's sign too): magnitudes and sign bytes apart. iq1's values are signed
        // integers, multiplied as they are (ggml's `dl · (g + delta)`).
        let (v, negate) = match F::sub_block(b, &pre, ib) {
            SubBlock::Grid(g, s) => {
                // SAFETY: the caller guarantees AVX2.
                let (g, s) = unsafe { grid_signs(g, s) };
                (g, Some(s))
            }
            // SAFETY: as above.
            sb => (unsafe { signed_values(sb) }, None),
        };
        if O::DTYPE != DType::F32 {
            // Magnitudes and signs: the grid's own; iq1's `|v|` and the sign of `v` where
            // no factor is NaN (then `f · −m` is `−(f · m)`, bit for bit).
            let signed = match negate {
                Some(s) => Some((v, s)),
                // SAFETY: the caller guarantees AVX2.
                None if !NAN => Some((unsafe { _mm256_abs_epi8(v) }, v)),
                None => None,
            };
            if let Some((m, s)) = signed {
                // SAFETY: the caller guarantees what `group_16bit` needs.
                unsafe { group_16bit::<F, O, BF16>(m, s, factors, dst) };
                continue;
            }
        }
        // SAFETY: the caller guarantees the AVX2 and F16C the stores need (with `BF16`, the
        // AVX-512 features of their 512-bit form).
        unsafe { scaled_i8x32_with::<O, NAN, BF16, false>(v, factors, [Tail::None; 2], negate, dst) };
    }
}

/// One sub-block to f16 / bf16 by table (`qforge_simd::half_lut`), from its magnitudes `m`
/// (each one of the format's at most 8) and signs (the bytes of `s` negative where the value
/// is): each value's code computed in a register, the 16-bit values of the codes rounded
/// once per 16-value group and looked up (`vpshufb`), instead of rounding every value. The
/// code is the magnitude's index (`m >> grid_shift`), plus 8 where the sign is negative, on
/// a [`Tables::Signed8`] of `factor · magnitude`, whose negation is a flip of the rounded
/// sign bit: the f32 path's XOR. Each entry is the f32 path's product, so the same bits.
///
/// # Safety
/// As [`blocks`].
#[inline(always)]
unsafe fn group_16bit<F: GridValues, O: Elem, const BF16: bool>(
    m: __m256i,
    s: __m256i,
    [f0, f1]: [f32; 2],
    dst: &mut [O; 32],
) {
    let mags = const { &grid_magnitudes(F::VALUES) };
    // SAFETY: the caller guarantees AVX2 and F16C (and with `BF16` the rest the lookup
    // needs); `scaled8` needs AVX2 and FMA besides, which the caller has too.
    unsafe {
        let shift = _mm_cvtsi32_si128(const { grid_shift(F::VALUES) } as i32);
        let index = _mm256_and_si256(_mm256_srl_epi16(m, shift), _mm256_set1_epi8(7));
        // Each byte's sign bit to bit 3 (a 16-bit shift: what it brings down from the next byte
        // lands above bit 3, masked off).
        let sign = _mm256_and_si256(_mm256_srli_epi16::<4>(s), _mm256_set1_epi8(8));
        // One table for both halves where the scales come per 32 (the same vector twice, which
        // LLVM then rounds once).
        let first = scaled8(mags, f0);
        let tables = Tables::Signed8([first, if F::SCALE_GROUP == 32 { first } else { scaled8(mags, f1) }]);
        // `normal`: every grid I-quant's factor is its f16 `d` times integer scales (iq1's
        // `8·g ± 1` over 8), a multiple of 2^-27: never a subnormal entry.
        group_from_codes_with::<O, BF16>(&tables, _mm256_or_si256(index, sign), dst, true);
    }
}

/// The fewest bits a format's positive values (its grid bytes; iq1's `|8g ± 1|`) can be
/// shifted right by for each to land on its own index below 8. Checked at compile time.
const fn grid_shift(values: &[i8]) -> u32 {
    let mut shift = 0;
    while shift < 8 {
        let mut seen = 0u32;
        let (mut i, mut ok) = (0, true);
        while i < values.len() {
            if values[i] > 0 {
                let k = (values[i] as u32) >> shift;
                ok &= k < 8 && seen & (1 << (k & 31)) == 0;
                seen |= 1 << (k & 7);
            }
            i += 1;
        }
        if ok {
            return shift;
        }
        shift += 1;
    }
    panic!("the grid's magnitudes need more than 8 indices")
}

/// Each magnitude (positive value) at its index `value >> grid_shift`.
const fn grid_magnitudes(values: &[i8]) -> [f32; 8] {
    let (mut t, shift, mut i) = ([0f32; 8], grid_shift(values), 0);
    while i < values.len() {
        if values[i] > 0 {
            t[(values[i] as usize >> shift) & 7] = values[i] as f32;
        }
        i += 1;
    }
    t
}
