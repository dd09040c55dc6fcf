//! The legacy quantizer compiled for AVX2 (LLVM vectorizes the block loops 8 lanes wide),
//! chosen at run time where the CPU has AVX2, FMA and F16C ([`qforge_core::cpu::avx2`]);
//! everything else runs the portable build of the same code. The 4- and 5-bit reference
//! quantizers (no importance weights) run [`fit`]'s intrinsics instead, block by block. (The dot products run
//! `qforge-simd`'s shared q8_0 / q8_1 kernel.)
//!
//! The only `unsafe` of the crate lives here: the call into the `#[target_feature]` function
//! after the run-time check, and the float → int conversion the quantizers truncate with.
#![allow(unsafe_code)]

use crate::block::{LegacyBlock, QK};

/// `trunc(v)` of every value of a block, as x86's `cvttps2dq` (what ggml's `(int)` casts
/// compile to), when every `|v| < 2^22` (the usual case); `None` otherwise (NaN included).
/// One instruction per 8 values in the AVX2 build, 4 in the portable one, where Rust's
/// saturating `as` needs range fix-ups that keep LLVM from vectorizing the loop.
#[inline(always)]
pub(crate) fn trunc_in_range(v: &[f32; QK]) -> Option<[i32; QK]> {
    if !v.iter().fold(true, |ok, x| ok & (x.abs() < 4_194_304.0)) {
        return None;
    }
    let mut t = [0i32; QK];
    for (t, &x) in t.iter_mut().zip(v) {
        // SAFETY: |x| < 2^22 (checked above, false for NaN), so x is finite and its
        // truncation fits in i32: the conversion is defined, and is truncation toward zero.
        *t = unsafe { x.to_int_unchecked::<i32>() };
    }
    Some(t)
}

/// [`crate::codec::encode_row`] compiled for AVX2; `false` (nothing written) where the CPU
/// lacks it.
pub(crate) fn encode_row<B: LegacyBlock>(x: &[f32], weights: Option<&[f32]>, blocks: &mut [B]) -> bool {
    if !qforge_core::cpu::avx2() {
        return false;
    }
    // SAFETY: `cpu::avx2()` has just checked that this CPU supports AVX2, FMA and F16C, all
    // the `#[target_feature]` function needs.
    unsafe { encode_row_avx2(x, weights, blocks) };
    true
}

#[target_feature(enable = "avx2,fma,f16c")]
fn encode_row_avx2<B: LegacyBlock>(x: &[f32], weights: Option<&[f32]>, blocks: &mut [B]) {
    match (weights.filter(|_| B::USES_WEIGHTS), B::STORE_PACKED) {
        (None, Some(store)) => fit::encode_row_ref(x, store, blocks),
        _ => crate::codec::encode_row_portable(x, weights, blocks),
    }
}

mod fit;
#[cfg(test)]
mod tests;
