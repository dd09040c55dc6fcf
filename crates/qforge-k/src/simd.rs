//! AVX2 kernels of [`crate::dot`], chosen at run time where the CPU has AVX2, FMA and F16C;
//! everything else runs the portable kernels.
//!
//! The only `unsafe` of the crate lives here (and in the submodules): unaligned loads from
//! fixed-size arrays, and the calls into the `#[target_feature]` functions after the run-time
//! check.
//!
//! * `codes`: the kernel of the [`crate::dot::Q8KCodes`] formats (every K-quant weight
//!   format and the ternary ones), one or several activation rows.
//! * `decode`: dequantization of the [`crate::dot::Q8KCodes`] formats without mins (q6_k,
//!   tq1_0) to f32 / f16 / bf16 in one pass.
//! * `packed`: the packed layout's group kernel (AVX2, AVX-512 VNNI), one to seven activation
//!   rows; `tile` (one body) and `tile_isa` (its AVX-512 VNNI and AVX2 register files): its
//!   mat-mul kernel from eight rows, each packed block decoded once for all of them;
//!   `tile_plain` the same kernel on plain blocks (a plain mat-mul's tile).
//! * Here: the block sum of the signed-code formats ([`crate::dot::Q8KDot`]: q8_k itself and
//!   the I-quants of `qforge-iq`).
//!
//! Per 32 codes: `|a|` (unsigned, `-128 → 128`) times `q·sgn(a)` with `vpmaddubsw` gives 16
//! exact `i16` pair sums (`≤ 2·128·127`, no saturation while every `|q| ≤ 127`), `vpmaddwd`
//! with the two groups' scales widens them to `i32` (exact: `|q·scale| < 2^15`), and one
//! horizontal sum per block. A block with a code of `-128` (`q·sgn(a)` would wrap, and pair
//! sums could saturate) is summed by the portable kernel instead, so the result is always the
//! exact integer the portable kernel gives.
#![allow(unsafe_code)]

mod codes;
mod decode;
mod packed;
mod tile;
mod tile_isa;
mod tile_plain;

use std::arch::x86_64::*;

pub(crate) use codes::{codes_dot_rows, codes_dot_weight_rows, store_codes};
pub(crate) use decode::decode_row as decode_codes_row;
pub(crate) use packed::packed_dot_groups;
pub(crate) use tile_plain::plain_tile;

use crate::QK_K;
use crate::dot::{GROUPS, Q8KDot, q8k_vec_dot_with, scaled_isum};
use crate::q8k::BlockQ8K;

/// [`crate::decode::decode_row`] compiled for AVX2, every output type (the f16 / bf16
/// rounding vectorizes too); `false` (nothing written) without AVX2.
pub(crate) fn decode_row<F: crate::decode::DecodeBlock, O: qforge_core::Elem>(
    blocks: &[F::Block],
    out: &mut [O],
) -> bool {
    if !qforge_core::cpu::avx2() {
        return false;
    }
    // SAFETY: `cpu::avx2()` has just checked that this CPU supports AVX2, FMA and F16C, all
    // the `#[target_feature]` function needs.
    unsafe { decode_row_avx2::<F, O>(blocks, out) };
    true
}

#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn decode_row_avx2<F: crate::decode::DecodeBlock, O: qforge_core::Elem>(blocks: &[F::Block], out: &mut [O]) {
    crate::decode::decode_row_portable::<F, O>(blocks, out);
}

/// [`crate::decode_blocks`] compiled for AVX2; `false` (nothing written) without AVX2.
pub(crate) fn decode_blocks<F: qforge_core::BlockFormat, O: qforge_core::Elem>(
    blocks: &[F::Block],
    out: &mut [O],
) -> bool {
    if !qforge_core::cpu::avx2() {
        return false;
    }
    // SAFETY: `cpu::avx2()` has just checked that this CPU supports AVX2, FMA and F16C, all
    // the `#[target_feature]` function needs.
    unsafe { decode_blocks_avx2::<F, O>(blocks, out) };
    true
}

#[target_feature(enable = "avx2,fma,f16c")]
fn decode_blocks_avx2<F: qforge_core::BlockFormat, O: qforge_core::Elem>(blocks: &[F::Block], out: &mut [O]) {
    crate::decode::decode_blocks_portable::<F, O>(blocks, out);
}

/// [`qforge_core::encode_blocks`] (the format's quantizer, block by block) compiled for
/// AVX2; `false` (nothing written) without AVX2. The searches it runs (`qforge-ggml-search`)
/// are `#[inline(always)]`, so they take this build too.
pub(crate) fn encode_row<F: qforge_core::BlockFormat>(
    x: &[f32],
    weights: Option<&[f32]>,
    blocks: &mut [F::Block],
) -> bool {
    if !qforge_core::cpu::avx2() {
        return false;
    }
    // SAFETY: `cpu::avx2()` has just checked that this CPU supports AVX2, FMA and F16C, all
    // the `#[target_feature]` function needs.
    unsafe { encode_row_avx2::<F>(x, weights, blocks) };
    true
}

#[target_feature(enable = "avx2,fma,f16c")]
fn encode_row_avx2<F: qforge_core::BlockFormat>(x: &[f32], weights: Option<&[f32]>, blocks: &mut [F::Block]) {
    qforge_core::encode_blocks::<F>(x, weights, blocks)
}

/// [`crate::dot::q8k_vec_dot`] with the AVX2 block sum, or `None` without AVX2.
#[inline]
pub(crate) fn q8k_vec_dot<F: Q8KDot>(w: &[F::Block], a: &[BlockQ8K]) -> Option<f32> {
    if !qforge_core::cpu::avx2() {
        return None;
    }
    // SAFETY: `cpu::avx2()` has just checked (with `is_x86_feature_detected!`) that this CPU
    // supports AVX2 and FMA, the only requirement of the `#[target_feature]` function.
    Some(unsafe { q8k_vec_dot_avx2::<F>(w, a) })
}

/// The whole row loop compiled for AVX2, so that the format's unpack and the block sum are
/// inlined together.
#[target_feature(enable = "avx2,fma,f16c")]
fn q8k_vec_dot_avx2<F: Q8KDot>(w: &[F::Block], a: &[BlockQ8K]) -> f32 {
    q8k_vec_dot_with::<F>(w, a, |q, a, s| scaled_isum_avx2(q, a, s))
}

/// Loads 32 bytes.
#[target_feature(enable = "avx2")]
#[inline]
fn load_i8(v: &[i8; 32]) -> __m256i {
    // SAFETY: `v` refers to an array of exactly 32 bytes (its type fixes the length), so the
    // unaligned 32-byte load reads only that array; AVX is enabled on this function.
    unsafe { _mm256_loadu_si256(v.as_ptr().cast()) }
}

/// Loads 16 `i16`.
#[target_feature(enable = "avx2")]
#[inline]
fn load_i16(v: &[i16; 16]) -> __m256i {
    // SAFETY: `v` refers to an array of exactly 16 `i16` = 32 bytes (its type fixes the
    // length), so the unaligned 32-byte load reads only that array; AVX is enabled here.
    unsafe { _mm256_loadu_si256(v.as_ptr().cast()) }
}

/// [`scaled_isum`] with AVX2: `Σ_g scale[g] · Σ_{i in g} q[i]·a[i]`, the same exact integer.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(crate) fn scaled_isum_avx2(q: &[i8; QK_K], a: &[i8; QK_K], scales: &[i16; GROUPS]) -> i32 {
    let sc = load_i16(scales);
    // Within each 128-bit lane, the low (high) lane picks `i16` 0 (1) of a 32-bit word.
    #[rustfmt::skip]
    let pick = _mm256_setr_epi8(
        0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1,
        2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3,
    );
    let mut acc = _mm256_setzero_si256();
    let mut min = _mm256_setzero_si256();
    let (qc, _) = q.as_chunks::<32>();
    let (ac, _) = a.as_chunks::<32>();
    for (k, (qc, ac)) in qc.iter().zip(ac).enumerate() {
        let qv = load_i8(qc);
        let av = load_i8(ac);
        min = _mm256_min_epi8(min, qv);
        // |a|·(q·sgn a) = q·a, 16 pair sums; groups 2k (bytes 0..16) and 2k+1 (16..32).
        let p = _mm256_maddubs_epi16(_mm256_abs_epi8(av), _mm256_sign_epi8(qv, av));
        // Every i16 of the low lane = scales[2k], of the high lane = scales[2k+1].
        let s = _mm256_shuffle_epi8(_mm256_permutevar8x32_epi32(sc, _mm256_set1_epi32(k as i32)), pick);
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, s));
    }
    if _mm256_movemask_epi8(_mm256_cmpeq_epi8(min, _mm256_set1_epi8(i8::MIN))) != 0 {
        return scaled_isum(q, a, scales);
    }
    let s = _mm_add_epi32(_mm256_castsi256_si128(acc), _mm256_extracti128_si256::<1>(acc));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b01_00_11_10>(s));
    let s = _mm_add_epi32(s, _mm_shuffle_epi32::<0b10_11_00_01>(s));
    _mm_cvtsi128_si32(s)
}

#[cfg(test)]
mod tests;
