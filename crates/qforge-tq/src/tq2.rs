//! tq2_0: 2.0625 bits per weight — four 2-bit ternary codes per byte.

use crate::ternary::{self, Unpack};
use crate::{QK_K, decode_row};
use bytemuck::{Pod, Zeroable};
use qforge_core::le::F16Le;
use qforge_core::{BlockFormat, Elem, FormatDesc, Role};
use qforge_k::dot::{Q8KCodes, crumbs};
use qforge_simd::half_lut::{self, CODES8, Codes32, Fifth, GroupSink, TableGroups, Tables, table};

qforge_core::c_block! {
    /// ggml's `block_tq2_0` (66 bytes): 64 code bytes, then the f16 scale `d`. Bits `2l..2l+2` of
    /// byte `32h + m` hold the code of element `128h + 32l + m`.
    #[repr(C)]
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
    pub struct BlockTq2_0 {
        /// 256 2-bit codes (`t + 1`), four per byte (see above).
        pub qs: [u8; QK_K / 4],
        /// The f16 scale: `x = t·d`.
        pub d: F16Le,
    }
}

/// Byte and bit shift of element `i`'s 2-bit code.
#[inline(always)]
fn slot(i: usize) -> (usize, usize) {
    (32 * (i / 128) + i % 32, 2 * ((i % 128) / 32))
}

/// ggml's `ggml_vec_dot_tq2_0_q8_K`: the 2-bit fields with zero 1 (the unused field 3 gives
/// 2, as in the decode), one scale `d` per block.
impl Q8KCodes for Tq2_0 {
    const HAS_MINS: bool = false;
    const ZERO: u8 = 1;
    const UNIT_SCALES: bool = true;
    const CODE_BITS: u32 = 2;

    #[inline(always)]
    fn d_dmin(b: &BlockTq2_0) -> [F16Le; 2] {
        [b.d, F16Le([0, 0])]
    }

    #[inline(always)]
    fn chunk(b: &BlockTq2_0, c: usize) -> [u8; 32] {
        crumbs(&b.qs, c)
    }

    #[inline(always)]
    fn scales(_: &BlockTq2_0) -> ([i8; 16], [u8; 16]) {
        ([1; 16], [0; 16])
    }
}

impl Unpack for Tq2_0 {
    #[inline(always)]
    fn d(b: &BlockTq2_0) -> F16Le {
        b.d
    }

    /// Unpacks a whole block's 2-bit fields through `value`, in element order.
    #[inline(always)]
    fn unpack_block<T: Copy>(b: &BlockTq2_0, out: &mut [T; QK_K], value: impl Fn(u8) -> T + Copy) {
        for (half, bytes) in out.chunks_exact_mut(128).zip(b.qs.chunks_exact(32)) {
            for (l, chunk) in half.chunks_exact_mut(32).enumerate() {
                for (o, &byte) in chunk.iter_mut().zip(bytes) {
                    *o = value((byte >> (2 * l)) & 3);
                }
            }
        }
    }
}

/// The tq2_0 format (GGML type 35).
#[derive(Clone, Copy, Debug, Default)]
pub struct Tq2_0;

impl BlockFormat for Tq2_0 {
    type Block = BlockTq2_0;
    const CUDA_CODES32: bool = true;
    const DESC: FormatDesc = FormatDesc {
        name: "tq2_0",
        family: "tq",
        ggml_type: Some(35),
        block_size: QK_K,
        block_bytes: 66,
        role: Role::Weight,
        dot_type: Some("q8_k"),
        summary: "2.0625 bpw ternary (BitNet b1.58 / TriLM): x = t*d, t in {-1,0,1}, 2 bits per code",
        cuda: crate::device_code("qf_tq2_0"),
    };
    /// ggml's `quantize_tq2_0` ignores importance weights (`(void)quant_weights`).
    const GGML_USES_IMPORTANCE: bool = false;
    const DIRECT_16BIT: bool = true;

    /// ggml's `dequantize_row_tq2_0`: `x = (float)(q - 1) · d` for the 2-bit field `q` (the
    /// unused `q = 3` decodes to `2d`). Writes at most `out.len()` elements.
    #[inline(always)]
    fn decode<O: Elem>(b: &BlockTq2_0, out: &mut [O]) {
        ternary::decode::<Self, O>(b, out);
    }

    /// ggml's `quantize_row_tq2_0_ref` (importance weights: see the crate docs).
    fn encode(x: &[f32], weights: Option<&[f32]>, out: &mut BlockTq2_0) {
        let q = ternary::quantize(x, weights);
        out.qs = [0; QK_K / 4];
        for (i, &t) in q.t.iter().enumerate() {
            let (byte, shift) = slot(i);
            out.qs[byte] |= (t & 3) << shift;
        }
        out.d = q.d;
    }

    fn decode_row<O: Elem>(blocks: &[BlockTq2_0], out: &mut [O]) {
        if !half_lut::decode_row::<Self, O>(blocks, out) {
            decode_row::<Self, O>(blocks, out);
        }
    }
}

/// `unpack_block`'s order: group `4h + l` is bits `2l..2l+2` of `qs[32h..32h+32]`, all on the
/// block's table `(c - 1)·d` (ggml's `(q - 1) * d`; `Levels` computes the same product).
impl TableGroups for Tq2_0 {
    /// f32 rows by table lookup too: 3.2-4.6 -> 3.7-5.1 Gel/s on the EPYC against the own f32
    /// decode.
    const F32: bool = true;
    type Block = BlockTq2_0;
    const BLOCK: usize = QK_K;
    /// An f16 `d` times `c - 1`.
    const NEVER_SUBNORMAL: bool = true;
    #[inline(always)]
    fn groups(b: &BlockTq2_0, mut f: impl GroupSink) {
        let d = b.d.get();
        let t = table(&CODES8, |c| (c - 1.0) * d);
        for q in b.qs.as_chunks::<32>().0 {
            for l in 0..4 {
                let codes = Codes32::Field { q, shift: 2 * l, width: 2, high: None };
                f.group(Tables::Halves8([t, t]), codes, Fifth::None);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_cover_every_bit_pair_once() {
        let mut seen = [0u8; QK_K];
        for i in 0..QK_K {
            let (byte, shift) = slot(i);
            seen[byte * 4 + shift / 2] += 1;
        }
        assert!(seen.iter().all(|&c| c == 1));
        assert_eq!(slot(0), (0, 0));
        assert_eq!(slot(32), (0, 2));
        assert_eq!(slot(127), (31, 6));
        assert_eq!(slot(128), (32, 0));
    }
}
