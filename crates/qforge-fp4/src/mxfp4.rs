//! mxfp4: OCP microscaling FP4 — 32 E2M1 values sharing one E8M0 power-of-two scale.

use crate::e2m1::{E2M1_X2_F32, amax, decode_group, encode_group};
use crate::scale::{e8m0_from_amax, e8m0_to_f32_half};
use crate::weighted;
use bytemuck::{Pod, Zeroable};
use qforge_core::{BlockFormat, Elem, FormatDesc, Role};
use qforge_simd::half_lut::{self, Codes32, Fifth, GroupSink, TableGroups, Tables, table};

/// Elements per mxfp4 block (ggml's `QK_MXFP4`).
pub const QK_MXFP4: usize = 32;

qforge_core::c_block! {
    /// ggml's `block_mxfp4` (17 bytes): `e` is the E8M0 exponent; byte `j` of `qs` holds element
    /// `j` in its low nibble and element `j + 16` in its high nibble.
    #[repr(C)]
    #[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
    pub struct BlockMxfp4 {
        /// The E8M0 scale: `2^(e - 127)`.
        pub e: u8,
        /// The 32 E2M1 codes, two per byte (see above).
        pub qs: [u8; QK_MXFP4 / 2],
    }
}

/// The mxfp4 format (GGML type 39).
#[derive(Clone, Copy, Debug, Default)]
pub struct Mxfp4;

impl BlockFormat for Mxfp4 {
    type Block = BlockMxfp4;
    const CUDA_CODES32: bool = true;
    const DESC: FormatDesc = FormatDesc {
        name: "mxfp4",
        family: "fp4",
        ggml_type: Some(39),
        block_size: QK_MXFP4,
        block_bytes: 17,
        role: Role::Weight,
        dot_type: Some("q8_0"),
        summary: "4.25 bpw OCP MXFP4: E2M1 values with one E8M0 power-of-two scale per 32 weights",
        cuda: crate::cuda::device_code("qf_mxfp4"),
    };
    /// ggml's quantizer ignores importance weights (`GGML_UNUSED(quant_weights)`).
    const GGML_USES_IMPORTANCE: bool = false;
    const DIRECT_16BIT: bool = true;

    /// ggml's `dequantize_row_mxfp4`: `x = E2M1_X2[code] · 2^(e - 128)`.
    #[inline(always)]
    fn decode<O: Elem>(b: &BlockMxfp4, out: &mut [O]) {
        decode_group(&b.qs, e8m0_to_f32_half(b.e), out);
    }

    /// ggml's `quantize_row_mxfp4_ref` (which ignores importance weights). With weights, the
    /// neighbouring exponents are tried as well and the one with the least weighted squared
    /// error kept (ggml's exponent on ties), so weighted error never exceeds ggml's.
    fn encode(x: &[f32], weights: Option<&[f32]>, out: &mut BlockMxfp4) {
        let e0 = e8m0_from_amax(amax(x));
        let encode_with = |e: u8, blk: &mut BlockMxfp4| {
            blk.e = e;
            encode_group(x, e8m0_to_f32_half(e), &mut blk.qs);
        };
        encode_with(e0, out);
        if let Some(w) = weights {
            let err = |b: &BlockMxfp4| {
                let mut y = [0f32; QK_MXFP4];
                Self::decode(b, &mut y);
                weighted::weighted_sse(x, w, &y)
            };
            weighted::refine(out, &[e0.checked_sub(1), e0.checked_add(1)], encode_with, err);
        }
    }

    #[inline(always)]
    fn decode_row<O: Elem>(blocks: &[BlockMxfp4], out: &mut [O]) {
        if half_lut::decode_row::<Self, O>(blocks, out) {
            return;
        }
        for (b, dst) in blocks.iter().zip(out.chunks_mut(QK_MXFP4)) {
            Self::decode(b, dst);
        }
    }
}
/// One group per block: `E2M1_X2[c]·2^(e-128)`, `decode_group`'s product.
impl TableGroups for Mxfp4 {
    /// f32 rows by table lookup too: 5.9 -> 12.1 Gel/s against the own block decode (Zen 5,
    /// one thread, 1M elements; 6.5 -> 12.5 at the AVX2 level).
    const F32: bool = true;
    type Block = BlockMxfp4;
    const BLOCK: usize = QK_MXFP4;
    #[inline(always)]
    fn groups(b: &BlockMxfp4, mut f: impl GroupSink) {
        let d = e8m0_to_f32_half(b.e);
        f.group(Tables::One(table(&E2M1_X2_F32, |k| k * d)), Codes32::SplitHalf(&b.qs), Fifth::None);
    }
}
