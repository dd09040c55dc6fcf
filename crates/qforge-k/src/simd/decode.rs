//! AVX2 dequantization of the [`Q8KCodes`] formats (q6_k, q5_k, and the ternary tq1_0
//! of `qforge-tq`) to f32, f16 or bf16 in one pass: each 32-element chunk's codes
//! ([`Q8KCodes::chunk`], the dot kernels' unpack) less the zero code as signed bytes, 8 at
//! a time widened to f32 and multiplied by the 16-element group's factor `d · scale` (less
//! its min term `dmin · min` for q5_k), then stored as the output type
//! ([`qforge_simd::store8::scaled_i8x32`]: f16 with `vcvtps2ph` in registers, no f32 row).
//! Codes below 8 without mins (tq1_0) go to f16 / bf16 by table instead: 8 rounded products
//! per 16 values (per block with unit scales), the codes looked up
//! ([`qforge_simd::half_lut::group_from_codes`]). bf16 on a CPU with AVX-512 BF16 runs a
//! second build of the row loop (`blocks_bf16`) whose stores round with `vcvtne2ps2bf16`.
//!
//! The same bits as ggml's `dequantize_row_q6_K` (`d · sc · (q − 32)`, with `d · sc` first)
//! and `dequantize_row_tq1_0` (`(t − 1) · d`; its unit scales make `d · 1 = d`), and
//! `dequantize_row_q5_K` (`d1 · q − m1`, `d1 = d · sc`, `m1 = dmin · m`): the same
//! operations on the same operands, in the same order. qforge-cpu's level test (random blocks, NaN
//! and infinite scales included) and the formats' conformance suites hold it.
#![allow(unsafe_code)]

use std::arch::x86_64::*;

use qforge_core::{DType, Elem};
use qforge_simd::Avx2;
use qforge_simd::Tail;
use qforge_simd::half_lut::{Tables, group_from_codes, scaled8};
use qforge_simd::store8::{never_subnormal, scaled_i8x32_with};

use crate::QK_K;
use crate::dot::Q8KCodes;

/// Decodes a row of blocks (`out.len()` logical elements, at most `blocks.len() · QK_K`; a
/// partial last block keeps its real elements) with AVX2 and returns `true`; `false` with
/// nothing written where the CPU lacks AVX2.
pub(crate) fn decode_row<F: Q8KCodes, O: Elem>(blocks: &[F::Block], out: &mut [O]) -> bool {
    let Some(avx2) = Avx2::detect() else {
        return false;
    };
    qforge_simd::block_rows::<_, O, QK_K>(blocks, out, |b, o| blocks_with::<F, O>(avx2, b, o));
    true
}

// `blocks_with`: the row loop compiled for AVX2 behind its proof, or its AVX-512 BF16 build
// where bf16 rounds in one instruction (with the AVX2 formula's five instructions per 8 values
// q5_k's and q6_k's bf16 rows read 0.82x and 0.67x of their f32 rows on Zen 4), for every
// output type (16 lanes a register) but tq1_0's f16 and bf16 by table: LLVM widens its code
// unpacking in that build, and both read 0.6x there on Zen 4 (one table per block, so the
// wider rounding has nothing to save).
qforge_simd::bf16_builds! {
    pick: blocks_with, avx2: blocks_avx2, bf16: blocks_bf16, body: blocks,
    wide: !by_table::<F, O>(),
    generics: [F: Q8KCodes, O: Elem], args: (blocks: &[F::Block], out: &mut [[O; QK_K]]),
}

/// The row loop of both builds.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C, with `BF16` AVX-512 F / BW / VL / DQ / BF16 too; it
/// inlines into its caller, whose features must include those.
#[inline(always)]
unsafe fn blocks<F: Q8KCodes, O: Elem, const BF16: bool>(blocks: &[F::Block], out: &mut [[O; QK_K]]) {
    let normal = |b: &F::Block| {
        // SAFETY: the caller guarantees F16C (and the SSE every x86-64 CPU has).
        let (d, dmin) = unsafe { d_dmin::<F>(b) };
        d.is_finite() && dmin.is_finite() && never_subnormal(d) && never_subnormal(dmin)
    };
    if BF16 && !by_table::<F, O>() && blocks.iter().all(normal) {
        // Every block takes the unchecked build (a real weight's always do): one loop of it.
        // (Not for the table path, which has no check: there the extra loop measured 9 %
        // slower for tq1_0.)
        for (b, o) in blocks.iter().zip(out) {
            // SAFETY: the caller guarantees the features `block` needs (with `BF16`, its own);
            // every block passed `normal`, as the unchecked build asks.
            unsafe {
                let (d, dmin) = d_dmin::<F>(b);
                block::<F, O, false, BF16, true>(b, d, dmin, o);
            }
        }
        return;
    }
    for (b, o) in blocks.iter().zip(out) {
        // SAFETY: as above.
        let (d, dmin) = unsafe { d_dmin::<F>(b) };
        // A finite `d` (and `dmin`) times an `i8` scale times a code below 64 (less a finite
        // min term) is finite: no NaN, so bf16 rounds without its NaN case (an infinite `d`
        // times a zero makes one).
        // SAFETY: the caller guarantees the features `block` needs (with `BF16`, its own).
        unsafe {
            if !(d.is_finite() && dmin.is_finite()) {
                block::<F, O, true, BF16, false>(b, d, dmin, o)
            } else if BF16 && never_subnormal(d) && never_subnormal(dmin) {
                // `d · scale` and `dmin · min` (integer scales and mins) then pass it too: no
                // value is subnormal, and `vcvtne2ps2bf16` runs without a check.
                block::<F, O, false, BF16, true>(b, d, dmin, o)
            } else {
                block::<F, O, false, BF16, false>(b, d, dmin, o)
            }
        }
    }
}

/// Whether `block` writes `O` by table (f16 / bf16 of codes below 8 without mins: tq1_0).
const fn by_table<F: Q8KCodes, O: Elem>() -> bool {
    !matches!(O::DTYPE, DType::F32) && !F::HAS_MINS && F::CODE_BITS <= 3
}

/// The block's `d` and `dmin` widened with `vcvtph2ps` (exact).
///
/// # Safety
/// The CPU must have F16C.
#[inline(always)]
unsafe fn d_dmin<F: Q8KCodes>(b: &F::Block) -> (f32, f32) {
    let [d, dmin] = F::d_dmin(b);
    // SAFETY: the caller guarantees F16C (and the SSE that every x86-64 CPU has).
    unsafe {
        let dm = _mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(d.bits()) | i32::from(dmin.bits()) << 16));
        (_mm_cvtss_f32(dm), _mm_cvtss_f32(_mm_movehdup_ps(dm)))
    }
}

/// One block with super-block scale `d`, its NaN lanes rounded as NaN where `NAN` (else
/// there are none), bf16 by `vcvtne2ps2bf16` where `BF16`, without a subnormal check where
/// `NORMAL` (`d` and `dmin` pass `store8::never_subnormal`).
///
/// # Safety
/// As [`blocks`].
#[inline(always)]
unsafe fn block<F: Q8KCodes, O: Elem, const NAN: bool, const BF16: bool, const NORMAL: bool>(
    b: &F::Block,
    d: f32,
    dmin: f32,
    o: &mut [O; QK_K],
) {
    // SAFETY: the caller guarantees AVX2, FMA and F16C, everything the intrinsics, the table
    // lookup and the stores need (with `BF16`, the AVX-512 features of its stores too).
    unsafe {
        let (sc, mins) = F::scales(b);
        let zero = _mm256_set1_epi8(F::ZERO as i8);
        // Constant chunk indices, so that every shift in the format's `chunk` is a constant (as
        // the dot kernel's unpack).
        let ch = |c| F::chunk(b, c);
        let codes =
            bytemuck::cast::<[[u8; 32]; 8], [__m256i; 8]>([ch(0), ch(1), ch(2), ch(3), ch(4), ch(5), ch(6), ch(7)]);
        let (chunks, _) = o.as_chunks_mut::<32>();
        if by_table::<F, O>() {
            // f16 / bf16 of codes below 8 (tq1_0's ternary ones) by table: per 16 elements the 8
            // products `factor · (c − zero)`, rounded once and looked up (`half_lut`), instead
            // of rounding every value; with unit scales one table serves the whole block.
            let levels = const { &levels::<F>() };
            let unit = if F::UNIT_SCALES { Some(scaled8(levels, d * f32::from(sc[0]))) } else { None };
            for (c, (dst, q)) in chunks.iter_mut().zip(codes).enumerate() {
                let tables = Tables::Halves8(match unit {
                    Some(t) => [t, t],
                    None => [scaled8(levels, d * f32::from(sc[2 * c])), scaled8(levels, d * f32::from(sc[2 * c + 1]))],
                });
                group_from_codes::<O>(&tables, q, dst);
            }
            return;
        }
        for (c, (dst, q)) in chunks.iter_mut().zip(codes).enumerate() {
            // Codes below 64 less a zero of at most 32: `i8` without wrapping.
            let v = _mm256_sub_epi8(q, zero);
            let factors = [d * f32::from(sc[2 * c]), d * f32::from(sc[2 * c + 1])];
            // ggml's `m1 = dmin · m` of the formats with mins, subtracted from each product.
            let tails = if F::HAS_MINS {
                [Tail::Sub(dmin * f32::from(mins[2 * c])), Tail::Sub(dmin * f32::from(mins[2 * c + 1]))]
            } else {
                [Tail::None; 2]
            };
            scaled_i8x32_with::<O, NAN, BF16, NORMAL>(v, factors, tails, None, dst);
        }
    }
}

/// `c − ZERO` of the codes `0..8`, as f32 (the values the f32 path widens from `i8`).
const fn levels<F: Q8KCodes>() -> [f32; 8] {
    let mut t = [0f32; 8];
    let mut c = 0;
    while c < 8 {
        t[c] = (c as i32 - F::ZERO as i32) as f32;
        c += 1;
    }
    t
}
