//! f32 / f16 / bf16 rows of the formats whose values are signed bytes times one f32 factor
//! per 16 elements (q8_0, q8_1, q8_k), in one pass: under AVX2 each 32-value group is widened
//! 8 at a time, multiplied and stored as the output type by [`crate::store8::scaled_i8x32`]
//! (f16 / bf16 rounded in registers, no f32 row; where the CPU has AVX-512 BF16, 16 values a
//! register and bf16 with `vcvtne2ps2bf16`); elsewhere the portable loop, the reference.
//!
//! A format describes its groups ([`I8Groups`]); [`decode_row`] does the rest. Each value is
//! `O::from_f32(factor · v)`, one f32 multiplication: the f32 decode's (the multiplication
//! commutes, NaN included, as `v` is never NaN).
use qforge_core::Elem;

/// A block format whose values are signed bytes times a factor per 16 elements.
pub trait I8Groups {
    /// The block.
    type Block;
    /// Elements per block, a multiple of 32 and at most 256.
    const BLOCK: usize;
    /// Calls `f` for each 32-element group of `b` in element order (`BLOCK / 32` calls) with
    /// the factors of its two 16-element halves and its 32 values.
    fn groups(b: &Self::Block, f: impl FnMut([f32; 2], &[i8; 32]));
}

/// Decodes a row of blocks (`out.len()` logical elements, at most `blocks.len() · BLOCK`; a
/// partial last block keeps its real elements) into `out`.
#[inline]
pub fn decode_row<F: I8Groups, O: Elem>(blocks: &[F::Block], out: &mut [O]) {
    const { assert!(F::BLOCK > 0 && F::BLOCK.is_multiple_of(32) && F::BLOCK <= 256) };
    let whole = (out.len() / F::BLOCK).min(blocks.len());
    let (body, tail) = out.split_at_mut(whole * F::BLOCK);
    whole_blocks::<F, O>(&blocks[..whole], body);
    if let (false, Some(last)) = (tail.is_empty(), blocks.get(whole)) {
        let mut scratch = [O::default(); 256];
        whole_blocks::<F, O>(std::slice::from_ref(last), &mut scratch[..F::BLOCK]);
        let n = tail.len().min(F::BLOCK);
        tail[..n].copy_from_slice(&scratch[..n]);
    }
}

/// Whole blocks (`out.len() == blocks.len() · BLOCK`), with the AVX2 kernel where allowed.
#[inline]
fn whole_blocks<F: I8Groups, O: Elem>(blocks: &[F::Block], out: &mut [O]) {
    #[cfg(target_arch = "x86_64")]
    if let Some(t) = crate::Avx2::detect() {
        avx2::whole_blocks::<F, O>(t, blocks, out);
        return;
    }
    for (b, dst) in blocks.iter().zip(out.chunks_exact_mut(F::BLOCK)) {
        let mut groups = dst.chunks_exact_mut(32);
        F::groups(b, |f, v| {
            let Some(g) = groups.next() else { return };
            for (i, (o, &v)) in g.iter_mut().zip(v).enumerate() {
                *o = O::from_f32(f[i / 16] * f32::from(v));
            }
        });
    }
}

#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
mod avx2 {
    use std::arch::x86_64::*;

    use super::I8Groups;
    use crate::store8::{never_subnormal, scaled_i8x32_with};
    use qforge_core::Elem;

    // `whole_blocks`: [`super::whole_blocks`] on the AVX2 kernel, or on its AVX-512 BF16 build
    // where bf16 rounds in one instruction (with the AVX2 formula's five instructions per 8
    // values q8_0 / q8_k bf16 rows read 0.52x / 0.54x of their f32 rows on a Zen 5) and every
    // output type goes 16 lanes a register (f16 rows +10 to +50 % on Zen 4).
    crate::bf16_builds! {
        pick: pub(super) whole_blocks, avx2: whole_blocks_avx2, bf16: whole_blocks_bf16, body: whole_blocks_with,
        generics: [F: I8Groups, O: Elem], args: (blocks: &[F::Block], out: &mut [O]),
    }

    /// The row loop of both builds.
    ///
    /// # Safety
    /// The CPU must have AVX2, FMA and F16C, with `BF16` AVX-512 F / BW / VL / DQ / BF16 too;
    /// it inlines into its caller, whose features must include those.
    #[inline(always)]
    unsafe fn whole_blocks_with<F: I8Groups, O: Elem, const BF16: bool>(blocks: &[F::Block], out: &mut [O]) {
        for (b, dst) in blocks.iter().zip(out.chunks_exact_mut(F::BLOCK)) {
            let (groups, _) = dst.as_chunks_mut::<32>();
            let mut groups = groups.iter_mut();
            F::groups(b, |f, v| {
                let Some(g) = groups.next() else { return };
                // SAFETY: `v` is 32 bytes, exactly what the unaligned load reads; this closure
                // runs inside `whole_blocks_with`, whose caller has the features it asks for. A
                // finite factor times a byte is never NaN, so bf16 then rounds without its NaN
                // case; factors that pass `never_subnormal` make no subnormal product (an
                // integer times them), so `vcvtne2ps2bf16` needs no check.
                unsafe {
                    let v = _mm256_loadu_si256(v.as_ptr().cast());
                    let none = [crate::Tail::None; 2];
                    if !(f[0].is_finite() && f[1].is_finite()) {
                        scaled_i8x32_with::<O, true, BF16, false>(v, f, none, None, g);
                    } else if BF16 && never_subnormal(f[0]) && never_subnormal(f[1]) {
                        scaled_i8x32_with::<O, false, BF16, true>(v, f, none, None, g);
                    } else {
                        scaled_i8x32_with::<O, false, BF16, false>(v, f, none, None, g);
                    }
                }
            });
        }
    }
}
