//! The legacy quantizer compiled for AVX2 (LLVM vectorizes the block loops 8 lanes wide),
//! chosen at run time where the CPU has AVX2, FMA and F16C ([`qforge_core::cpu::avx2`]);
//! everything else runs the portable build of the same code. (The dot products run
//! `qforge-simd`'s shared q8_0 / q8_1 kernel.)
//!
//! The only `unsafe` of the crate lives here: the call into the `#[target_feature]` function
//! after the run-time check.
#![allow(unsafe_code)]

use crate::block::LegacyBlock;

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
    crate::codec::encode_row_portable(x, weights, blocks)
}

#[cfg(test)]
mod tests;
