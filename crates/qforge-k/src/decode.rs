//! The decode driver every K-quant shares.
//!
//! Each format implements [`DecodeBlock::decode_f32`]: one whole block into a `[f32; QK_K]`
//! with ggml's own loop structure (per-sub-block `dl = d * scale`, `ml = dmin * min` hoisted,
//! then `dl * q - ml` over plain indexed loops the compiler vectorizes), reproducing ggml's
//! `dequantize_row_q*_K` bit for bit. The driver writes f32 rows in place and converts f16 /
//! bf16 output a whole block at a time (batched, F16C where the CPU has it): every value is
//! the round-to-nearest-even of the f32 result, as [`Elem::from_f32`] defines.

use crate::QK_K;
use qforge_core::{BlockFormat, Elem, OutRow};
use qforge_simd::half_lut::{self, GroupSink, TableGroups};

/// A K-quant format's fast whole-block f32 decoder.
pub(crate) trait DecodeBlock: BlockFormat {
    /// Decodes `b` into `y`, exactly as ggml's `dequantize_row_q*_K` computes each value.
    fn decode_f32(b: &Self::Block, y: &mut [f32; QK_K]);

    /// Whether every value is a code of at most 5 bits looked up in a table per 32 (or 16)
    /// elements (q2_k, q3_k, q4_k, q5_k), which
    /// [`DecodeBlock::groups`] describes: f16 / bf16 rows then skip the f32 pass.
    const TABLE_GROUPS: bool = false;

    /// Whether f32 rows take the table lookup too (`half_lut`'s `vpermps` path; only with
    /// [`DecodeBlock::TABLE_GROUPS`]) rather than [`DecodeBlock::decode_f32`]: q2_k and q3_k,
    /// whose plane loops it beats (Zen 5, one thread, 1M elements: q2_k 11.4 -> 13.4 Gel/s,
    /// q3_k 7.3 -> 11.3, at the AVX2 level alike); q4_k's and q5_k's own loops are faster
    /// (14.3 against 9.5, 9.7 against 7.6).
    const F32_BY_TABLE: bool = false;

    /// The 32-element groups of `b` (`qforge_simd::half_lut::TableGroups::groups`), for the
    /// formats with [`DecodeBlock::TABLE_GROUPS`]; nothing for the others.
    #[inline(always)]
    fn groups(b: &Self::Block, f: impl GroupSink) {
        let _ = (b, f);
    }
}

/// The `half_lut` description of a [`DecodeBlock`] with `TABLE_GROUPS`.
struct Groups<F>(std::marker::PhantomData<F>);

impl<F: DecodeBlock> TableGroups for Groups<F> {
    const F32: bool = F::F32_BY_TABLE;
    type Block = F::Block;
    const BLOCK: usize = QK_K;
    /// The formats with `TABLE_GROUPS` (q2_k … q5_k): f16 `d` and `dmin` times integer
    /// scales, mins and codes.
    const NEVER_SUBNORMAL: bool = true;
    #[inline(always)]
    fn groups(b: &F::Block, f: impl GroupSink) {
        F::groups(b, f);
    }
}

/// The `decode` / `decode_row` of a `BlockFormat` impl whose format implements
/// [`DecodeBlock`] for `$block`.
macro_rules! block_decoders {
    // A `Q8KCodes` format whose rows decode from the codes in one pass ([`codes_row`]) where
    // the CPU allows it, f16 / bf16 without an f32 pass: every dtype (`codes`, q6_k), or f16 /
    // bf16 only with f32 by the family's row decode (`codes16`, q5_k: on the EPYC its 32-entry
    // tables cost f16 / bf16 more than the codes path, whose f32 was ~12 % slower; its groups
    // are lines now, `half_lut::Tables::Linear`, the codes path's own per-value work, and
    // serve where there is no AVX2).
    (codes $block:ty) => {
        $crate::decode::block_decoders!(@codes $block, true);
    };
    (codes16 $block:ty) => {
        $crate::decode::block_decoders!(@codes $block, false);
    };
    (@codes $block:ty, $f32_codes:literal) => {
        const DIRECT_16BIT: bool = true;

        fn decode<O: qforge_core::Elem>(b: &$block, out: &mut [O]) {
            $crate::decode::decode::<Self, O>(b, out);
        }

        fn decode_row<O: qforge_core::Elem>(blocks: &[$block], out: &mut [O]) {
            $crate::decode::codes_row::<Self, O>(blocks, out, $f32_codes);
        }
    };
    ($block:ty) => {
        const DIRECT_16BIT: bool = <Self as $crate::decode::DecodeBlock>::TABLE_GROUPS;

        fn decode<O: qforge_core::Elem>(b: &$block, out: &mut [O]) {
            $crate::decode::decode::<Self, O>(b, out);
        }

        fn decode_row<O: qforge_core::Elem>(blocks: &[$block], out: &mut [O]) {
            $crate::decode::decode_row::<Self, O>(blocks, out);
        }
    };
}
pub(crate) use block_decoders;

/// The traversal of a 2-bit code plane (q2_k, q3_k's low bits), ggml's loop order: element
/// `128h + 32k + l` has code `qs[32h + l] >> 2k & 3` and lies in sub-block `8h + 2k + l / 16`.
/// `value(sub_block, 4h + k, l, code)` gives its f32 value. The loop over `l` is innermost
/// with the four planes unrolled (constant shifts), which is what lets it vectorize.
#[inline(always)]
pub(crate) fn two_bit_planes(qs: &[u8; QK_K / 4], y: &mut [f32; QK_K], value: impl Fn(usize, usize, usize, u8) -> f32) {
    for (h, yh) in y.chunks_exact_mut(128).enumerate() {
        let q = &qs[32 * h..32 * h + 32];
        for s in 0..2 {
            for l in 16 * s..16 * s + 16 {
                let c = [q[l] & 3, q[l] >> 2 & 3, q[l] >> 4 & 3, q[l] >> 6];
                for k in 0..4 {
                    yh[32 * k + l] = value(8 * h + 2 * k + s, 4 * h + k, l, c[k]);
                }
            }
        }
    }
}

/// `BlockFormat::decode`: the whole block, of which the first `out.len()` values are kept.
#[inline(always)]
pub(crate) fn decode<F: DecodeBlock, O: Elem>(b: &F::Block, out: &mut [O]) {
    let mut y = [0.0f32; QK_K];
    F::decode_f32(b, &mut y);
    let n = out.len().min(QK_K);
    O::from_f32_slice(&y[..n], &mut out[..n]);
}

/// Decodes a row of blocks into `out` (at most `blocks.len() * QK_K` elements): f32 output is
/// written in place, other dtypes go through one stack block; a partial last block keeps its
/// real elements. Rows of every output type run compiled for AVX2 where the CPU has it (same
/// operations, same bits).
pub(crate) fn decode_row<F: DecodeBlock, O: Elem>(blocks: &[F::Block], out: &mut [O]) {
    if F::TABLE_GROUPS && half_lut::decode_row::<Groups<F>, O>(blocks, out) {
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if crate::simd::decode_row::<F, O>(blocks, out) {
        return;
    }
    decode_row_portable::<F, O>(blocks, out)
}

/// [`decode_row`] from the codes ([`decode_codes_row`]) where the CPU allows it; f32 by
/// [`decode_row`] unless `f32_codes`.
#[inline(always)]
pub(crate) fn codes_row<F: DecodeBlock + crate::dot::Q8KCodes, O: Elem>(
    blocks: &[F::Block],
    out: &mut [O],
    f32_codes: bool,
) {
    if let (false, OutRow::F32(o)) = (f32_codes, O::out_row(out)) {
        decode_row::<F, f32>(blocks, o);
    } else if !decode_codes_row::<F, O>(blocks, out) {
        decode_row::<F, O>(blocks, out);
    }
}

/// Decodes a row of a [`crate::dot::Q8KCodes`] format (`d · scale · (code − ZERO)`, less
/// `dmin · min` where the format has mins: q6_k, q5_k, tq1_0) straight into `out` (`out.len()` logical elements, at most
/// `blocks.len() · QK_K`) in one pass, f16 / bf16 rounded in registers, and returns `true`;
/// `false` with nothing written where the CPU lacks AVX2. The same values as the format's
/// `decode`.
pub fn decode_codes_row<F: crate::dot::Q8KCodes, O: Elem>(blocks: &[F::Block], out: &mut [O]) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        crate::simd::decode_codes_row::<F, O>(blocks, out)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (blocks, out);
        false
    }
}

/// The body of [`decode_row`], inlined into each build of it (portable, AVX2).
#[inline(always)]
pub(crate) fn decode_row_portable<F: DecodeBlock, O: Elem>(blocks: &[F::Block], out: &mut [O]) {
    if let OutRow::F32(o) = O::out_row(out) {
        decode_row_f32::<F>(blocks, o);
        return;
    }
    for (b, dst) in blocks.iter().zip(out.chunks_mut(QK_K)) {
        decode::<F, O>(b, dst);
    }
}

/// Decodes a row of blocks of any format with its own `BlockFormat::decode`, block by block
/// (at most `blocks.len() · BLOCK` elements; a partial last block writes only the elements
/// `out` has room for), compiled for AVX2 where the CPU has it: the same operations, so the
/// same values, 8 lanes wide. For formats outside this crate (the ternary ones) whose
/// `decode` is `#[inline(always)]`, so that it takes the AVX2 build.
pub fn decode_blocks<F: BlockFormat, O: Elem>(blocks: &[F::Block], out: &mut [O]) {
    #[cfg(target_arch = "x86_64")]
    if crate::simd::decode_blocks::<F, O>(blocks, out) {
        return;
    }
    decode_blocks_portable::<F, O>(blocks, out)
}

/// The body of [`decode_blocks`], inlined into each build of it (portable, AVX2).
#[inline(always)]
pub(crate) fn decode_blocks_portable<F: BlockFormat, O: Elem>(blocks: &[F::Block], out: &mut [O]) {
    for (b, dst) in blocks.iter().zip(out.chunks_mut(F::DESC.block_size)) {
        F::decode(b, dst);
    }
}

/// The f32 row of [`decode_row`], inlined into each build of it.
#[inline(always)]
pub(crate) fn decode_row_f32<F: DecodeBlock>(blocks: &[F::Block], o: &mut [f32]) {
    {
        let mut chunks = o.chunks_exact_mut(QK_K);
        let mut used = 0;
        for (b, y) in blocks.iter().zip(&mut chunks) {
            let y: &mut [f32; QK_K] = y.try_into().expect("chunks_exact yields whole blocks");
            F::decode_f32(b, y);
            used += 1;
        }
        let tail = chunks.into_remainder();
        if let (false, Some(b)) = (tail.is_empty(), blocks.get(used)) {
            decode::<F, f32>(b, tail);
        }
    }
}
