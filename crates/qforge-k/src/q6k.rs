//! q6_k: 6-bit codes (4 low bits + 2 high bits), sixteen 16-element sub-blocks with int8
//! scales.

use crate::decode::DecodeBlock;
use crate::dot::{Q8KCodes, field, or};
use crate::symmetric::{SUB, max_abs_scale, requantize, sub_block_scales, sub_weights};
use crate::{K_DOT, QK_K};
use bytemuck::{Pod, Zeroable};
use qforge_core::le::F16Le;
use qforge_core::{BlockFormat, FormatDesc, Role};
use qforge_ggml_search::{GROUP_MAX_EPS, make_qx_quants, nearest_int, padded};

qforge_core::c_block! {
    /// ggml's `block_q6_K` (210 bytes): `x = d * scales[j] * (q - 32)`, `q in 0..64`.
    ///
    /// Each 128-element half `h` uses 64 bytes of `ql` and 32 of `qh`: element `128h + 32k + l`
    /// (k = 0..4, l = 0..32) has its low nibble in `ql[64h + 32(k % 2) + l]` at bit `4(k / 2)` and
    /// its high 2 bits in `qh[32h + l]` at bit `2k`.
    #[repr(C)]
    #[derive(Clone, Copy, Debug, Pod, Zeroable)]
    pub struct BlockQ6K {
        /// Low 4 bits of the 256 codes (layout above).
        pub ql: [u8; QK_K / 2],
        /// High 2 bits of the 256 codes (layout above).
        pub qh: [u8; QK_K / 4],
        /// Sixteen signed 8-bit scales, one per 16-element sub-block.
        pub scales: [i8; QK_K / 16],
        /// Super-block scale (f16) applied to the 8-bit sub-block scales.
        pub d: F16Le,
    }
}

/// The q6_k format (GGML type 14).
pub struct Q6K;

/// Code of the value 0.
const ZERO: i32 = 32;

impl DecodeBlock for Q6K {
    /// ggml's `dequantize_row_q6_K`: `d * sc * (q - 32)` per 16-element sub-block.
    #[inline(always)]
    fn decode_f32(b: &BlockQ6K, y: &mut [f32; QK_K]) {
        let d = b.d.get();
        // Element 128h + 32k + l (sub-block 8h + 2k + l / 16), as ggml's loop: the inner loop
        // over l writes four planes with constant shifts, so it vectorizes.
        for (h, yh) in y.chunks_exact_mut(128).enumerate() {
            let ql = &b.ql[64 * h..64 * h + 64];
            let qh = &b.qh[32 * h..32 * h + 32];
            for s in 0..2 {
                let dl: [f32; 4] = std::array::from_fn(|k| d * b.scales[8 * h + 2 * k + s] as f32);
                for l in SUB * s..SUB * s + SUB {
                    let c = [
                        (ql[l] & 0xF) | (qh[l] & 3) << 4,
                        (ql[l + 32] & 0xF) | (qh[l] >> 2 & 3) << 4,
                        (ql[l] >> 4) | (qh[l] >> 4 & 3) << 4,
                        (ql[l + 32] >> 4) | (qh[l] >> 6 & 3) << 4,
                    ];
                    for k in 0..4 {
                        yh[32 * k + l] = dl[k] * (c[k] as i32 - ZERO) as f32;
                    }
                }
            }
        }
    }
}

fn pack(codes: &[u8; QK_K], b: &mut BlockQ6K) {
    b.qh.fill(0);
    b.ql.fill(0);
    for (i, &c) in codes.iter().enumerate() {
        let (h, k, l) = (i / 128, i % 128 / 32, i % 32);
        b.ql[64 * h + 32 * (k % 2) + l] |= (c & 0xF) << (4 * (k / 2));
        b.qh[32 * h + l] |= (c >> 4 & 3) << (2 * k);
    }
}

/// ggml's `ggml_vec_dot_q6_K_q8_K`: codes `q` with zero 32 (layout as in the decode), int8
/// scales per 16 elements.
impl Q8KCodes for Q6K {
    const HAS_MINS: bool = false;
    const CODE_BITS: u32 = 6;
    const ZERO: u8 = ZERO as u8;
    const SCALE_PICK_TABLE_VNNI: bool = true;

    #[inline(always)]
    fn d_dmin(b: &BlockQ6K) -> [F16Le; 2] {
        [b.d, F16Le([0, 0])]
    }

    #[inline(always)]
    fn chunk(b: &BlockQ6K, c: usize) -> [u8; 32] {
        let (h, k) = (c / 4, c as u32 % 4);
        let low = &b.ql.as_chunks::<32>().0[2 * h + k as usize % 2];
        let high = &b.qh.as_chunks::<32>().0[h];
        or(field(low, 4 * (k / 2), 4, 0), field(high, 2 * k, 2, 4))
    }

    #[inline(always)]
    fn scales(b: &BlockQ6K) -> ([i8; 16], [u8; 16]) {
        (b.scales, [0; 16])
    }
}

impl BlockFormat for Q6K {
    type Block = BlockQ6K;
    const CUDA_CODES32: bool = true;
    const DESC: FormatDesc = FormatDesc {
        name: "q6_k",
        family: "k",
        ggml_type: Some(14),
        block_size: QK_K,
        block_bytes: 210,
        role: Role::Weight,
        dot_type: K_DOT,
        summary: "6.5625 bpw K-quant: 6-bit codes, 16x16 sub-blocks with int8 scales",
        cuda: crate::cuda("qf_q6_k"),
    };

    crate::decode::block_decoders!(codes BlockQ6K);

    /// ggml's `quantize_row_q6_K_ref` / `_impl` (which use the raw importance weights).
    fn encode_row(x: &[f32], weights: Option<&[f32]>, blocks: &mut [BlockQ6K]) {
        crate::encode_row::<Self>(x, weights, blocks)
    }

    #[inline(always)]
    fn encode(x: &[f32], weights: Option<&[f32]>, out: &mut BlockQ6K) {
        let n = x.len().min(QK_K);
        let xs = padded::<QK_K>(x).0;
        let mut codes = [ZERO as i8; QK_K];
        let scales = sub_block_scales(&xs, n, &mut codes, |xj, lj, j| {
            make_qx_quants::<SUB, _>(xj, ZERO, lj, sub_weights(weights, j, xj.len()))
        });
        let (max_scale, max_abs) = max_abs_scale(&scales);
        if max_abs < GROUP_MAX_EPS {
            *out = BlockQ6K::zeroed();
            return;
        }
        let iscale = -128.0f32 / max_scale;
        out.d = F16Le::from_f32(1.0 / iscale);
        out.scales = scales.map(|s| nearest_int(iscale * s).min(127) as i8);
        let sc = out.scales.map(|s| s as i32);
        requantize(&xs, out.d.get(), &sc, ZERO, &mut codes);
        pack(&codes.map(|c| c as u8), out);
    }
}
