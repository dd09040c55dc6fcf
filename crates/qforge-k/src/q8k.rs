//! q8_k: the 8-bit activation format K-quant dot products pair with (f32 scale, 16 sums).

use crate::QK_K;
use crate::decode::DecodeBlock;
use crate::dot::{GroupScales, Q8KDot};
use bytemuck::{Pod, Zeroable};
use qforge_core::le::{F32Le, I16Le};
use qforge_core::{BlockFormat, FormatDesc, Role};
use qforge_ggml_search::{nearest_int, padded, signed_absmax};

qforge_core::c_block! {
    /// ggml's `block_q8_K` (292 bytes): `x = d * qs[i]`; `bsums[j]` is the sum of `qs` over
    /// elements `16j..16j+16`.
    #[repr(C)]
    #[derive(Clone, Copy, Debug, Pod, Zeroable)]
    pub struct BlockQ8K {
        /// Scale (f32, unlike the weight formats' f16).
        pub d: F32Le,
        /// The 256 signed 8-bit codes, in element order.
        pub qs: [i8; QK_K],
        /// Sum of `qs` over each 16-element group, for the min terms of the K-quant dot products.
        pub bsums: [I16Le; QK_K / 16],
    }
}

/// The q8_k format (GGML type 15).
pub struct Q8K;

impl DecodeBlock for Q8K {
    /// `d * q` (ggml has no `to_float` for q8_k; this is its `dequantize_row_q8_K`).
    #[inline(always)]
    fn decode_f32(b: &BlockQ8K, y: &mut [f32; QK_K]) {
        let d = b.d.get();
        for (v, &q) in y.iter_mut().zip(&b.qs) {
            *v = d * q as f32;
        }
    }
}

/// Eight 32-value groups per block, `d · q` (`decode_f32`'s product).
impl qforge_simd::i8_groups::I8Groups for Q8K {
    type Block = BlockQ8K;
    const BLOCK: usize = QK_K;

    #[inline(always)]
    fn groups(b: &BlockQ8K, mut f: impl FnMut([f32; 2], &[i8; 32])) {
        let d = b.d.get();
        for g in b.qs.as_chunks::<32>().0 {
            f([d, d], g);
        }
    }
}

/// qforge's own q8_k · q8_k dot (ggml has no `vec_dot` for q8_k): `(d_a·d_b)·Σ q_a·q_b`.
impl Q8KDot for Q8K {
    const HAS_MINS: bool = false;

    #[inline(always)]
    fn d_dmin(b: &BlockQ8K) -> (f32, f32) {
        (b.d.get(), 0.0)
    }

    #[inline(always)]
    fn unpack(b: &BlockQ8K, q: &mut [i8; QK_K]) -> GroupScales {
        *q = b.qs;
        GroupScales::ONES
    }
}

impl BlockFormat for Q8K {
    type Block = BlockQ8K;
    const DESC: FormatDesc = FormatDesc {
        name: "q8_k",
        family: "k",
        ggml_type: Some(15),
        block_size: QK_K,
        block_bytes: 292,
        role: Role::Activation,
        dot_type: Some("q8_k"),
        summary: "9.125 bpw K-quant activations: int8 codes, f32 scale, 16-element code sums",
        cuda: crate::cuda("qf_q8_k"),
    };

    /// Straight to f16 / bf16 (`decode_row`).
    const DIRECT_16BIT: bool = true;

    fn decode<O: qforge_core::Elem>(b: &BlockQ8K, out: &mut [O]) {
        crate::decode::decode::<Self, O>(b, out);
    }

    /// f16 / bf16 in one pass ([`qforge_simd::i8_groups`]: rounded in registers); f32 by
    /// the family's row decode (its loads widen the bytes straight from memory, a few per
    /// cent faster on the EPYC).
    fn decode_row<O: qforge_core::Elem>(blocks: &[BlockQ8K], out: &mut [O]) {
        match O::out_row(out) {
            qforge_core::OutRow::F32(o) => crate::decode::decode_row::<Self, f32>(blocks, o),
            _ => qforge_simd::i8_groups::decode_row::<Self, O>(blocks, out),
        }
    }

    /// ggml's `quantize_row_q8_K_ref`; importance weights do not apply to activations.
    fn encode_row(x: &[f32], weights: Option<&[f32]>, blocks: &mut [BlockQ8K]) {
        crate::encode_row::<Self>(x, weights, blocks)
    }

    #[inline(always)]
    fn encode(x: &[f32], _weights: Option<&[f32]>, out: &mut BlockQ8K) {
        let xs = padded::<QK_K>(x).0;
        let (amax, max) = signed_absmax(&xs);
        if amax == 0.0 {
            *out = BlockQ8K::zeroed();
            return;
        }
        let iscale = -127.0f32 / max;
        for (q, &v) in out.qs.iter_mut().zip(&xs) {
            *q = nearest_int(iscale * v).min(127) as i8;
        }
        for (s, q) in out.bsums.iter_mut().zip(out.qs.chunks_exact(16)) {
            let mut sum = 0i16;
            for &v in q {
                sum += i16::from(v);
            }
            *s = I16Le::new(sum);
        }
        out.d = F32Le::new(1.0 / iscale);
    }
}
