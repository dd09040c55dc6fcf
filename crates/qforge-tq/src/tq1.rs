//! tq1_0: 1.6875 bits per weight — five ternary codes per byte in base 3.

use crate::ternary::{self, Unpack};
use crate::{QK_K, decode_row};
use bytemuck::{Pod, Zeroable};
use qforge_core::le::F16Le;
use qforge_core::{BlockFormat, Elem, FormatDesc, Role};
use qforge_k::dot::Q8KCodes;

qforge_core::c_block! {
    /// ggml's `block_tq1_0` (54 bytes): 48 bytes of five codes each, 4 bytes of four codes each,
    /// then the f16 scale `d`. See `GROUPS` in the source for which byte holds which element.
    #[repr(C)]
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
    pub struct BlockTq1_0 {
        /// 240 codes, five per byte in base 3.
        pub qs: [u8; 48],
        /// The last 16 codes, four per byte in base 3.
        pub qh: [u8; 4],
        /// The f16 scale: `x = t·d`.
        pub d: F16Le,
    }
}

/// How the 256 codes are spread over the 52 code bytes (`qs` then `qh`): group
/// `(first byte, bytes, codes per byte, first element)` stores code `n` of its byte `m` for
/// element `first element + m + bytes·n`.
const GROUPS: [(usize, usize, usize, usize); 3] = [(0, 32, 5, 0), (32, 16, 5, 160), (48, 4, 4, 240)];

/// `pow3[n]`: multiplying a packed byte by `3^n` (mod 256) brings code `n` to the top.
const POW3: [u8; 5] = [1, 3, 9, 27, 81];

/// Code `n` (0 = most significant) of a packed byte, given `pow3 = 3^n`, as ggml's
/// `dequantize_row_tq1_0` extracts it: `q = byte·3^n mod 256`, `t = (3q) >> 8`. Any byte gives
/// `t ∈ {0, 1, 2}`. Computed in 16-bit lanes (the low byte of `byte·3^n` kept by a mask),
/// which vectorizes.
#[inline(always)]
fn unpack(byte: u8, pow3: u8) -> u8 {
    ((((u16::from(byte) * u16::from(pow3)) & 0xff) * 3) >> 8) as u8
}

/// [`unpack`] of 32 bytes with their powers, in 16-bit lanes as the kernels vectorize it
/// best (AVX2 and AVX-512 alike: multiplies, no byte compares or mask registers): per word,
/// the low byte's `q` is the high byte of `word·(p << 8)` and `⌊3q / 256⌋` the high word of
/// `(q << 8)·3`; the high byte's `q << 8` is `(word & 0xff00)·p` and `⌊3q / 256⌋ << 8` the
/// high word of `(q << 8)·768`, masked. Equal to [`unpack`] for every byte and power (tested).
#[inline(always)]
fn codes32(src: [u8; 32], pow: [u8; 32]) -> [u8; 32] {
    let w: [u16; 16] = bytemuck::cast(src);
    let p: [[u8; 2]; 16] = bytemuck::cast(pow);
    let mut out = [0u16; 16];
    for ((o, &w), p) in out.iter_mut().zip(&w).zip(&p) {
        let lo = w.wrapping_mul(u16::from(p[0]) << 8);
        let hi = (w & 0xff00).wrapping_mul(u16::from(p[1]));
        let lo = ((u32::from(lo) * 3) >> 16) as u16;
        let hi = ((u32::from(hi) * 768) >> 16) as u16 & 0xff00;
        *o = lo | hi;
    }
    bytemuck::cast(out)
}

/// Unpacks one group of [`GROUPS`]: code `n` of byte `m` of `bytes` to `dst[m + N·n]` as
/// `value(code)`, whole `N`-byte rows at a time with a constant multiplier per row (as ggml's
/// SIMD loop does).
#[inline(always)]
fn unpack_group<T: Copy, const N: usize, const C: usize, const E: usize>(
    bytes: &[u8; N],
    dst: &mut [T; E],
    value: impl Fn(u8) -> T,
) {
    debug_assert_eq!(N * C, E);
    for n in 0..C {
        let p = POW3[n];
        let row: &mut [T; N] = (&mut dst[N * n..N * n + N]).try_into().expect("N elements");
        for m in 0..N {
            row[m] = value(unpack(bytes[m], p));
        }
    }
}

/// ggml's `ggml_vec_dot_tq1_0_q8_K`: codes `t` with zero 1, one scale `d` per block.
impl Q8KCodes for Tq1_0 {
    const HAS_MINS: bool = false;
    const ZERO: u8 = 1;
    const UNIT_SCALES: bool = true;
    const CODE_BITS: u32 = 2;

    #[inline(always)]
    fn d_dmin(b: &BlockTq1_0) -> [F16Le; 2] {
        [b.d, F16Le([0, 0])]
    }

    #[inline(always)]
    /// The layout of `GROUPS` (see the source): chunks 0..5 are codes 0..5 of bytes 0..32; chunks 5 and 6
    /// codes (0, 1) and (2, 3) of bytes 32..48; chunk 7 code 4 of bytes 32..48, then codes
    /// 0..4 of the last four bytes.
    fn chunk(b: &BlockTq1_0, c: usize) -> [u8; 32] {
        let (qs, _) = b.qs.as_chunks::<16>();
        // The 32 source bytes and the power of 3 of each (constants once `c` is).
        let (src, pow): ([[u8; 16]; 2], [[u8; 16]; 2]) = match c {
            0..5 => ([qs[0], qs[1]], [[POW3[c]; 16]; 2]),
            5 | 6 => ([qs[2], qs[2]], [[POW3[2 * (c - 5)]; 16], [POW3[2 * (c - 5) + 1]; 16]]),
            _ => {
                let qh: [u8; 16] = std::array::from_fn(|l| b.qh[l % 4]);
                ([qs[2], qh], [[POW3[4]; 16], std::array::from_fn(|l| POW3[l / 4])])
            }
        };
        codes32(bytemuck::cast(src), bytemuck::cast(pow))
    }

    #[inline(always)]
    fn scales(_: &BlockTq1_0) -> ([i8; 16], [u8; 16]) {
        ([1; 16], [0; 16])
    }
}

/// Packs up to five codes, first one most significant, missing low codes 0, and maps the
/// base-3 number `q < 243` to `ceil(q·256 / 243)` so that [`unpack`] recovers every code.
#[inline]
fn pack(codes: impl Iterator<Item = u8>, count: usize) -> u8 {
    let q = codes.take(count).fold(0u16, |q, t| q * 3 + u16::from(t)) * 3u16.pow(5 - count as u32);
    (q * 256).div_ceil(243) as u8
}

impl Unpack for Tq1_0 {
    #[inline(always)]
    fn d(b: &BlockTq1_0) -> F16Le {
        b.d
    }

    /// Unpacks a whole block's codes through `value`, in element order.
    #[inline(always)]
    fn unpack_block<T: Copy>(b: &BlockTq1_0, out: &mut [T; QK_K], value: impl Fn(u8) -> T + Copy) {
        let (head, rest) = out.split_at_mut(160);
        let (mid, tail) = rest.split_at_mut(80);
        let qs32: &[u8; 32] = b.qs[..32].try_into().expect("32 code bytes");
        let qs16: &[u8; 16] = b.qs[32..].try_into().expect("16 code bytes");
        unpack_group::<T, 32, 5, 160>(qs32, head.try_into().expect("160 elements"), value);
        unpack_group::<T, 16, 5, 80>(qs16, mid.try_into().expect("80 elements"), value);
        unpack_group::<T, 4, 4, 16>(&b.qh, tail.try_into().expect("16 elements"), value);
    }
}

/// The tq1_0 format (GGML type 34).
#[derive(Clone, Copy, Debug, Default)]
pub struct Tq1_0;

impl BlockFormat for Tq1_0 {
    type Block = BlockTq1_0;
    const CUDA_CODES32: bool = true;
    const DESC: FormatDesc = FormatDesc {
        name: "tq1_0",
        family: "tq",
        ggml_type: Some(34),
        block_size: QK_K,
        block_bytes: 54,
        role: Role::Weight,
        dot_type: Some("q8_k"),
        summary: "1.6875 bpw ternary (BitNet b1.58 / TriLM): x = t*d, t in {-1,0,1}, 5 codes per byte",
        cuda: crate::device_code("qf_tq1_0"),
    };
    /// ggml's `quantize_tq1_0` ignores importance weights (`(void)quant_weights`).
    const GGML_USES_IMPORTANCE: bool = false;
    /// Straight to f16 / bf16 with AVX2 (`decode_row`).
    const DIRECT_16BIT: bool = true;

    /// ggml's `dequantize_row_tq1_0`: `x = (float)(t - 1) · d`. Writes at most `out.len()`.
    #[inline(always)]
    fn decode<O: Elem>(b: &BlockTq1_0, out: &mut [O]) {
        ternary::decode::<Self, O>(b, out);
    }

    /// ggml's `quantize_row_tq1_0_ref` (importance weights: see the crate docs).
    fn encode(x: &[f32], weights: Option<&[f32]>, out: &mut BlockTq1_0) {
        let q = ternary::quantize(x, weights);
        let mut code_bytes = [0u8; 52];
        for (first, nbytes, count, elem0) in GROUPS {
            for m in 0..nbytes {
                code_bytes[first + m] = pack((0..count).map(|n| q.t[elem0 + m + nbytes * n]), count);
            }
        }
        out.qs.copy_from_slice(&code_bytes[..48]);
        out.qh.copy_from_slice(&code_bytes[48..]);
        out.d = q.d;
    }

    /// From the codes in one pass where the CPU allows it (`qforge_k::decode_codes_row`:
    /// f16 / bf16 by a table of its three levels per block), else block by block.
    fn decode_row<O: Elem>(blocks: &[BlockTq1_0], out: &mut [O]) {
        if !qforge_k::decode_codes_row::<Self, O>(blocks, out) {
            decode_row::<Self, O>(blocks, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_tuple_round_trips() {
        for count in [4, 5] {
            for v in 0..3u32.pow(count as u32) {
                let codes: Vec<u8> = (0..count).rev().map(|i| (v / 3u32.pow(i as u32) % 3) as u8).collect();
                let b = pack(codes.iter().copied(), count);
                let back: Vec<u8> = POW3[..count].iter().map(|&p| unpack(b, p)).collect();
                assert_eq!(back, codes, "count {count} value {v}");
            }
        }
    }

    #[test]
    fn codes32_equals_unpack() {
        // Every byte in both halves of a word, against every power in either half.
        for byte in 0..=255u8 {
            let src: [u8; 32] = std::array::from_fn(|l| byte ^ (l as u8 & 0x81));
            for p in POW3 {
                for q in POW3 {
                    let pow: [u8; 32] = std::array::from_fn(|l| if l % 2 == 0 { p } else { q });
                    let want: [u8; 32] = std::array::from_fn(|l| unpack(src[l], pow[l]));
                    assert_eq!(codes32(src, pow), want, "byte {byte} pow3 {p}, {q}");
                }
            }
        }
    }

    #[test]
    fn groups_cover_every_element_once() {
        let mut seen = [0u8; QK_K];
        for (first, nbytes, count, elem0) in GROUPS {
            assert!(first + nbytes <= 52);
            for n in 0..count {
                for m in 0..nbytes {
                    seen[elem0 + m + nbytes * n] += 1;
                }
            }
        }
        assert!(seen.iter().all(|&c| c == 1));
    }
}
