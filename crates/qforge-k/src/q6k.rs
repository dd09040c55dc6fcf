//! q6_k: 6-bit codes (4 low bits + 2 high bits), sixteen 16-element sub-blocks with int8
//! scales.

use crate::decode::{self, emit};
use crate::search::{GROUP_MAX_EPS, make_qx_quants, nearest_int};
use crate::symmetric::{NSUB, SUB, max_abs_scale, requantize, sub_block_scales, sub_weights};
use crate::{K_DOT, QK_K, padded};
use bytemuck::{Pod, Zeroable};
use qforge_core::le::F16Le;
use qforge_core::{BlockFormat, Elem, FormatDesc, Role};

/// ggml's `block_q6_K` (210 bytes): `x = d * scales[j] * (q - 32)`, `q in 0..64`.
///
/// Each 128-element half `h` uses 64 bytes of `ql` and 32 of `qh`: element `128h + 32k + l`
/// (k = 0..4, l = 0..32) has its low nibble in `ql[64h + 32(k % 2) + l]` at bit `4(k / 2)` and
/// its high 2 bits in `qh[32h + l]` at bit `2k`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
pub struct BlockQ6K {
    pub ql: [u8; QK_K / 2],
    pub qh: [u8; QK_K / 4],
    pub scales: [i8; QK_K / 16],
    pub d: F16Le,
}

/// The q6_k format (GGML type 14).
pub struct Q6K;

/// Code of the value 0.
const ZERO: i32 = 32;

#[inline(always)]
fn code(b: &BlockQ6K, i: usize) -> i32 {
    let (h, k, l) = (i / 128, i % 128 / 32, i % 32);
    let low = b.ql[64 * h + 32 * (k % 2) + l] >> (4 * (k / 2)) & 0xF;
    let high = b.qh[32 * h + l] >> (2 * k) & 3;
    (low | high << 4) as i32
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

impl BlockFormat for Q6K {
    type Block = BlockQ6K;
    const DESC: FormatDesc = FormatDesc {
        name: "q6_k",
        family: "k",
        ggml_type: Some(14),
        block_size: QK_K,
        block_bytes: 210,
        role: Role::Weight,
        dot_type: K_DOT,
        summary: "6.5625 bpw K-quant: 6-bit codes, 16x16 sub-blocks with int8 scales",
        cuda: None,
    };

    fn decode<O: Elem>(b: &BlockQ6K, out: &mut [O]) {
        let d = b.d.get();
        let dl: [f32; NSUB] = std::array::from_fn(|j| d * b.scales[j] as f32);
        emit(out, SUB, &dl, &[0.0; NSUB], |i| code(b, i) - ZERO);
    }

    fn decode_row<O: Elem>(blocks: &[BlockQ6K], out: &mut [O]) {
        decode::decode_row::<Self, O>(blocks, out);
    }

    /// ggml's `quantize_row_q6_K_ref` / `_impl` (which use the raw importance weights).
    fn encode(x: &[f32], weights: Option<&[f32]>, out: &mut BlockQ6K) {
        let n = x.len().min(QK_K);
        let xs = padded(x);
        let mut codes = [ZERO as i8; QK_K];
        let scales = sub_block_scales(&xs, n, &mut codes, |xj, lj, j| {
            make_qx_quants(xj, ZERO, lj, sub_weights(weights, j, xj.len()))
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
