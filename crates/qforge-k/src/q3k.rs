//! q3_k: 3-bit codes (2 low bits + a high-bit mask), sixteen 16-element sub-blocks with signed
//! 6-bit scales packed into 12 bytes ([`crate::pack::pack_scales_q3`]).

use crate::decode::{self, DecodeBlock};
use crate::dot::{Field, Q8KCodes, chunk_fields, fields_chunk, plane};
use crate::pack::{pack_2bit, pack_scales_q3, scale_q3, scales_q3, split_high_bit};
use crate::symmetric::{NSUB, SUB, max_abs_scale, requantize, sub_block_scales};
use crate::{K_DOT, QK_K};
use bytemuck::{Pod, Zeroable};
use qforge_core::le::F16Le;
use qforge_core::{BlockFormat, FormatDesc, Role};
use qforge_ggml_search::{SymWeights, importance_weights, make_q3_quants, make_qx_quants, nearest_int, padded, sigma2};
use qforge_simd::half_lut::{CODES8, Codes32, Fifth, GroupSink, Tables, table};
use std::mem::offset_of;

qforge_core::c_block! {
    /// ggml's `block_q3_K` (110 bytes): `x = d * (sc[j] - 32) * (q - 4)`, `q in 0..8`.
    #[repr(C)]
    #[derive(Clone, Copy, Debug, Pod, Zeroable)]
    pub struct BlockQ3K {
        /// Third code bit of element `i` at bit `i / 32` of byte `i % 32`.
        pub hmask: [u8; QK_K / 8],
        /// Low 2 bits of the codes, see the crate's private `pack` module.
        pub qs: [u8; QK_K / 4],
        /// Sixteen 6-bit scales, biased by 32.
        pub scales: [u8; 12],
        /// Super-block scale (f16) applied to the 6-bit sub-block scales.
        pub d: F16Le,
    }
}

/// The q3_k format (GGML type 11).
pub struct Q3K;

/// Code of the value 0.
const ZERO: i32 = 4;

impl DecodeBlock for Q3K {
    /// ggml's `dequantize_row_q3_K`: `d * (sc - 32) * (q - (high bit ? 0 : 4))`.
    #[inline(always)]
    fn decode_f32(b: &BlockQ3K, y: &mut [f32; QK_K]) {
        let d = b.d.get();
        let dl: [f32; NSUB] = std::array::from_fn(|j| d * (scale_q3(j, &b.scales) as i32 - 32) as f32);
        // The high bit of element 128h + 32k + l is bit 4h + k of hmask[l].
        decode::two_bit_planes(&b.qs, y, |j, hk, l, low| {
            let high = (b.hmask[l] >> hk & 1) as i32;
            dl[j] * (low as i32 - 4 + 4 * high) as f32
        });
    }

    const TABLE_GROUPS: bool = true;
    const F32_BY_TABLE: bool = true;

    /// [`decode::two_bit_planes`]' groups: bits `2k..2k+2` of `qs[32h..32h+32]` with bit
    /// `4h + k` of `hmask` as the code's bit 2, one table per 16-element sub-block with
    /// `decode_f32`'s `dl·(c - 4)` (`c - 4 = low - 4 + 4·high`, exact).
    #[inline(always)]
    fn groups(b: &BlockQ3K, mut f: impl GroupSink) {
        let d = b.d.get();
        let sub = |j: usize| {
            let dl = d * (scale_q3(j, &b.scales) as i32 - 32) as f32;
            table(&CODES8, |c| dl * (c - 4.0))
        };
        for (h, q) in b.qs.as_chunks::<32>().0.iter().enumerate() {
            for k in 0..4 {
                let j = 8 * h + 2 * k;
                let high = Some((&b.hmask, (4 * h + k) as u32));
                let codes = Codes32::Field { q, shift: 2 * k as u32, width: 2, high };
                f.group(Tables::Halves8([sub(j), sub(j + 1)]), codes, Fifth::None);
            }
        }
    }
}

/// The codes of chunk `4h + k` (elements `32c .. 32c + 32`, `c = 4h + k`): bits `2k..2k+2`
/// of `qs[32h .. 32h + 32]`, and bit `c` of `hmask` as bit 2.
const CHUNK_FIELDS: [[Field; 2]; 8] =
    chunk_fields(plane(offset_of!(BlockQ3K, qs), 2, 0), plane(offset_of!(BlockQ3K, hmask), 1, 2));

/// ggml's `ggml_vec_dot_q3_K_q8_K`: codes `low + 4·high` with zero 4, signed 6-bit scales
/// `sc − 32` per 16 elements.
impl Q8KCodes for Q3K {
    const HAS_MINS: bool = false;
    const CODE_BITS: u32 = 3;
    const ZERO: u8 = ZERO as u8;
    const SCALE_PICK_TABLE_VNNI: bool = true;

    #[inline(always)]
    fn d_dmin(b: &BlockQ3K) -> [F16Le; 2] {
        [b.d, F16Le([0, 0])]
    }

    const FIELDS: Option<[[Field; 2]; 8]> = Some(CHUNK_FIELDS);

    #[inline(always)]
    fn chunk(b: &BlockQ3K, c: usize) -> [u8; 32] {
        fields_chunk::<Self>(b, CHUNK_FIELDS[c])
    }

    #[inline(always)]
    fn scales(b: &BlockQ3K) -> ([i8; 16], [u8; 16]) {
        (scales_q3(&b.scales), [0; 16])
    }
}

impl BlockFormat for Q3K {
    type Block = BlockQ3K;
    const CUDA_CODES32: bool = true;
    const DESC: FormatDesc = FormatDesc {
        name: "q3_k",
        family: "k",
        ggml_type: Some(11),
        block_size: QK_K,
        block_bytes: 110,
        role: Role::Weight,
        dot_type: K_DOT,
        summary: "3.4375 bpw K-quant: 3-bit codes, 16x16 sub-blocks with signed 6-bit scales",
        cuda: crate::cuda("qf_q3_k"),
    };

    crate::decode::block_decoders!(BlockQ3K);

    fn encode_row(x: &[f32], weights: Option<&[f32]>, blocks: &mut [BlockQ3K]) {
        crate::encode_row::<Self>(x, weights, blocks)
    }

    #[inline(always)]
    fn encode(x: &[f32], weights: Option<&[f32]>, out: &mut BlockQ3K) {
        let n = x.len().min(QK_K);
        let xs = padded::<QK_K>(x).0;
        let mut codes = [ZERO as i8; QK_K];
        let (d, sc6) = match weights {
            // quantize_row_q3_K_ref: make_q3_quants per sub-block, scales relative to the
            // largest-magnitude one.
            None => {
                let scales = sub_block_scales(&xs, n, &mut codes, |xj, lj, _| make_q3_quants::<SUB>(xj, ZERO, lj));
                let (max_scale, _) = max_abs_scale(&scales);
                if max_scale != 0.0 {
                    let iscale = -32.0f32 / max_scale;
                    let sc6 = scales.map(|s| ((nearest_int(iscale * s) as i8).clamp(-32, 31) + 32) as u8);
                    (F16Le::from_f32(1.0 / iscale), sc6)
                } else {
                    (F16Le::from_f32(0.0), [0u8; NSUB])
                }
            }
            // quantize_row_q3_K_impl: weighted make_qx_quants per sub-block, then the scales
            // themselves with make_qx_quants weighted by each sub-block's total weight.
            Some(qw) => {
                let sigma2 = sigma2(&xs[..n], n, 2.0);
                let mut sw = [0.0f32; NSUB];
                let mut w = [0.0f32; SUB];
                let scales = sub_block_scales(&xs, n, &mut codes, |xj, lj, j| {
                    let wj = &mut w[..xj.len()];
                    sw[j] = importance_weights(xj, &qw[SUB * j..SUB * j + xj.len()], sigma2, wj);
                    make_qx_quants::<SUB, _>(xj, ZERO, lj, SymWeights::Given(wj))
                });
                let mut ls = [0i8; NSUB];
                let d_block = make_qx_quants::<NSUB, _>(&scales, 32, &mut ls, SymWeights::Given(&sw));
                (F16Le::from_f32(d_block), ls.map(|l| l as u8))
            }
        };
        out.scales = pack_scales_q3(&sc6);
        out.d = d;
        let sc: [i32; NSUB] = std::array::from_fn(|j| scale_q3(j, &out.scales) as i32 - 32);
        requantize(&xs, d.get(), &sc, ZERO, &mut codes);
        let mut codes = codes.map(|c| c as u8);
        split_high_bit(&mut codes, 2, &mut out.hmask);
        pack_2bit(&codes, &mut out.qs);
    }
}
