//! The 2-bit grid formats iq2_xxs, iq2_xs and iq2_s: 256-value super-blocks whose values are
//! `d * (0.5 + s) / 4 * g * sign`, with `g` an 8-value point of an E8-lattice-derived grid
//! (values 8, 25, 43), a 4-bit sub-block scale `s` and a sign per value.

use crate::common::QK_K;
use crate::lattice::{Lattice, levels_of};
use crate::search::{GridSearch, Refine, Signs, Start, block_weights, scale_code, search_sub_blocks};
use crate::tables::{IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID, KMASK_IQ2XS, KSIGNS_IQ2XS};
use crate::unpack::{
    GridSigns, GridWords, ScaleFields, SubBlock, SubBlocks, ksigns_byte, no_gather_word, per32, spread_bytes,
};
use bytemuck::{Pod, Zeroable};
use qforge_core::le::F16Le;
use qforge_core::{BlockFormat, Elem, FormatDesc, Role};
use qforge_ggml_search::NoImatrix;
use std::sync::OnceLock;

/// Writes the 8 values `db * g[j] * (±1)` of grid word `grid` with sign bits `signs` to
/// `dst` (8 elements).
#[inline(always)]
pub(crate) fn emit8<O: Elem>(dst: &mut [O], db: f32, grid: u64, signs: u8) {
    let g = grid.to_le_bytes();
    if let Ok(dst) = <&mut [O; 8]>::try_from(dst) {
        for ((o, &mask), &b) in dst.iter_mut().zip(&KMASK_IQ2XS).zip(&g) {
            let s = if signs & mask != 0 { -1.0f32 } else { 1.0f32 };
            *o = O::from_f32(db * b as f32 * s);
        }
    }
}

/// `out` as groups of 8 values (a shorter `out` simply gets fewer groups).
#[inline(always)]
pub(crate) fn groups8<O>(out: &mut [O]) -> std::slice::ChunksExactMut<'_, O> {
    out.chunks_exact_mut(8)
}

#[inline(always)]
pub(crate) fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Level of an iq2 grid byte (8, 25, 43 -> 0, 1, 2).
fn iq2_level(b: u8) -> u8 {
    b.saturating_sub(8) / 17
}

fn lattice(cell: &'static OnceLock<Lattice<8>>, words: &[u64], nwant: usize) -> &'static Lattice<8> {
    cell.get_or_init(|| Lattice::new(&levels_of(words.iter().copied(), iq2_level), 2, 43692, nwant))
}

/// The searches of the three formats (ggml's parameters).
const XXS: GridSearch = GridSearch {
    kmax_q: 3,
    start: Start::QpQuants,
    steps: 6,
    step: 0.1,
    refine: Refine::Always,
    eps: Some(qforge_ggml_search::GROUP_MAX_EPS),
    initial_on_grid: true,
    signs: Signs::EvenParity,
};
const XS: GridSearch = GridSearch { start: Start::Max, steps: 9, refine: Refine::OffGridOnly, ..XXS };
const S: GridSearch = GridSearch { eps: Some(1e-8), signs: Signs::Full, ..XS };

qforge_core::c_block! {
    /// ggml's `block_iq2_xxs` (66 bytes, 2.0625 bpw).
    #[repr(C)]
    #[derive(Clone, Copy, Debug, Pod, Zeroable)]
    pub struct BlockIq2Xxs {
        /// The block's f16 super-scale.
        pub d: F16Le,
        /// Per 32 values two LE `u32`: four 8-bit grid indices; then four 7-bit sign groups
        /// (bits 0..28) and the 4-bit scale (bits 28..32). ggml: `uint16_t qs[32]`.
        pub qs: [u8; 64],
    }
}

/// The iq2_xxs format (GGML type 16).
pub struct Iq2Xxs;

impl BlockFormat for Iq2Xxs {
    type Block = BlockIq2Xxs;
    const CUDA_CODES32: bool = true;
    const DESC: FormatDesc = FormatDesc {
        name: "iq2_xxs",
        family: "iq",
        ggml_type: Some(16),
        block_size: QK_K,
        block_bytes: 66,
        role: Role::Weight,
        dot_type: Some("q8_k"),
        summary: "2.06 bpw grid quant: 8-value points of a 256-entry E8 grid, 4-bit scales per 32",
        cuda: crate::device_code("qf_iq2_xxs"),
    };

    /// Straight to f16 / bf16 with AVX2 (`unpack::decode_row`: a table of rounded magnitudes).
    const DIRECT_16BIT: bool = true;

    fn decode_row<O: Elem>(blocks: &[BlockIq2Xxs], out: &mut [O]) {
        crate::unpack::decode_row::<Self, O>(blocks, out)
    }

    fn decode<O: Elem>(b: &BlockIq2Xxs, out: &mut [O]) {
        let d = b.d.get();
        let mut it = groups8(out);
        for ib in 0..QK_K / 32 {
            let (aux0, aux1) = (u32_at(&b.qs, 8 * ib), u32_at(&b.qs, 8 * ib + 4));
            let db = d * (0.5f32 + (aux1 >> 28) as f32) * 0.25f32;
            for l in 0..4 {
                let grid = IQ2XXS_GRID[((aux0 >> (8 * l)) & 255) as usize];
                if let Some(dst) = it.next() {
                    emit8(dst, db, grid, KSIGNS_IQ2XS[((aux1 >> (7 * l)) & 127) as usize]);
                }
            }
        }
    }

    fn encode(x: &[f32], weights: Option<&[f32]>, out: &mut BlockIq2Xxs) {
        static LAT: OnceLock<Lattice<8>> = OnceLock::new();
        let lat = lattice(&LAT, &IQ2XXS_GRID, 2);
        let (xs, w) = block_weights(x, weights, 1.0, NoImatrix::Uniform);
        let mut q2 = [0u32; 16];
        let (scales, max_scale) = search_sub_blocks(lat, &XXS, &xs, &w, 32, |ib, l, signs| {
            for k in 0..4 {
                let idx = lat.index_or_nearest(&mut l[8 * k..8 * k + 8]) as u32;
                q2[2 * ib] |= idx << (8 * k);
                q2[2 * ib + 1] |= (signs[k] as u32) << (7 * k);
            }
        });
        *out = Zeroable::zeroed();
        if max_scale == 0.0 {
            return;
        }
        let d = max_scale / 31.0;
        out.d = F16Le::from_f32(d);
        let id = 1.0 / d;
        for (ib, &s) in scales.iter().take(8).enumerate() {
            q2[2 * ib + 1] |= (scale_code(id, s) as u32) << 28;
        }
        for (dst, v) in out.qs.chunks_exact_mut(4).zip(q2) {
            dst.copy_from_slice(&v.to_le_bytes());
        }
    }
}

qforge_core::c_block! {
    /// ggml's `block_iq2_xs` (74 bytes, 2.3125 bpw).
    #[repr(C)]
    #[derive(Clone, Copy, Debug, Pod, Zeroable)]
    pub struct BlockIq2Xs {
        /// The block's f16 super-scale.
        pub d: F16Le,
        /// Per 8 values a LE `u16`: 9-bit grid index, 7 sign bits. ggml: `uint16_t qs[32]`.
        pub qs: [u8; 64],
        /// Two 4-bit scales per 32 values (one per 16).
        pub scales: [u8; 8],
    }
}

/// The iq2_xs format (GGML type 17).
pub struct Iq2Xs;

impl BlockFormat for Iq2Xs {
    type Block = BlockIq2Xs;
    const CUDA_CODES32: bool = true;
    const DESC: FormatDesc = FormatDesc {
        name: "iq2_xs",
        family: "iq",
        ggml_type: Some(17),
        block_size: QK_K,
        block_bytes: 74,
        role: Role::Weight,
        dot_type: Some("q8_k"),
        summary: "2.31 bpw grid quant: 8-value points of a 512-entry E8 grid, 4-bit scales per 16",
        cuda: crate::device_code("qf_iq2_xs"),
    };

    /// Straight to f16 / bf16 with AVX2 (`unpack::decode_row`: a table of rounded magnitudes).
    const DIRECT_16BIT: bool = true;

    fn decode_row<O: Elem>(blocks: &[BlockIq2Xs], out: &mut [O]) {
        crate::unpack::decode_row::<Self, O>(blocks, out)
    }

    #[inline(always)]
    fn decode<O: Elem>(b: &BlockIq2Xs, out: &mut [O]) {
        let d = b.d.get();
        let mut it = groups8(out);
        for ib in 0..QK_K / 32 {
            let sc = b.scales[ib];
            let db = [d * (0.5f32 + (sc & 0xf) as f32) * 0.25f32, d * (0.5f32 + (sc >> 4) as f32) * 0.25f32];
            for l in 0..4 {
                let q = u16::from_le_bytes([b.qs[8 * ib + 2 * l], b.qs[8 * ib + 2 * l + 1]]);
                if let Some(dst) = it.next() {
                    emit8(dst, db[l / 2], IQ2XS_GRID[(q & 511) as usize], KSIGNS_IQ2XS[(q >> 9) as usize]);
                }
            }
        }
    }

    fn encode(x: &[f32], weights: Option<&[f32]>, out: &mut BlockIq2Xs) {
        static LAT: OnceLock<Lattice<8>> = OnceLock::new();
        let lat = lattice(&LAT, &IQ2XS_GRID, 2);
        let (xs, w) = block_weights(x, weights, 1.0, NoImatrix::Uniform);
        let mut q2 = [0u16; 32];
        let (scales, max_scale) = search_sub_blocks(lat, &XS, &xs, &w, 16, |ib, l, signs| {
            for k in 0..2 {
                let idx = lat.index_or_nearest(&mut l[8 * k..8 * k + 8]) as u16;
                q2[2 * ib + k] = idx | (signs[k] as u16) << 9;
            }
        });
        *out = Zeroable::zeroed();
        if max_scale == 0.0 {
            return;
        }
        let d = max_scale / 31.0;
        out.d = F16Le::from_f32(d);
        let id = 1.0 / d;
        for (ib, &s) in scales.iter().enumerate() {
            out.scales[ib / 2] |= scale_code(id, s) << (4 * (ib % 2));
        }
        for (dst, v) in out.qs.chunks_exact_mut(2).zip(q2) {
            dst.copy_from_slice(&v.to_le_bytes());
        }
    }
}

qforge_core::c_block! {
    /// ggml's `block_iq2_s` (82 bytes, 2.5625 bpw).
    #[repr(C)]
    #[derive(Clone, Copy, Debug, Pod, Zeroable)]
    pub struct BlockIq2S {
        /// The block's f16 super-scale.
        pub d: F16Le,
        /// Low 8 bits of the 32 grid indices, then the 32 sign bytes (one per 8 values).
        pub qs: [u8; 64],
        /// High 2 bits of the grid indices, four per byte.
        pub qh: [u8; 8],
        /// Two 4-bit scales per 32 values (one per 16).
        pub scales: [u8; 8],
    }
}

/// The iq2_s format (GGML type 22).
pub struct Iq2S;

impl BlockFormat for Iq2S {
    type Block = BlockIq2S;
    const CUDA_CODES32: bool = true;
    const DESC: FormatDesc = FormatDesc {
        name: "iq2_s",
        family: "iq",
        ggml_type: Some(22),
        block_size: QK_K,
        block_bytes: 82,
        role: Role::Weight,
        dot_type: Some("q8_k"),
        summary: "2.56 bpw grid quant: 1024-entry E8 grid, 8 sign bits per 8 values, 4-bit scales per 16",
        cuda: crate::device_code("qf_iq2_s"),
    };

    /// Straight to f16 / bf16 with AVX2 (`unpack::decode_row`: a table of rounded magnitudes).
    const DIRECT_16BIT: bool = true;

    fn decode_row<O: Elem>(blocks: &[BlockIq2S], out: &mut [O]) {
        crate::unpack::decode_row::<Self, O>(blocks, out)
    }

    fn decode<O: Elem>(b: &BlockIq2S, out: &mut [O]) {
        let d = b.d.get();
        let mut it = groups8(out);
        for ib in 0..QK_K / 32 {
            let sc = b.scales[ib];
            let db = [d * (0.5f32 + (sc & 0xf) as f32) * 0.25f32, d * (0.5f32 + (sc >> 4) as f32) * 0.25f32];
            for l in 0..4 {
                let idx = b.qs[4 * ib + l] as usize | ((b.qh[ib] as usize) << (8 - 2 * l) & 0x300);
                if let Some(dst) = it.next() {
                    emit8(dst, db[l / 2], IQ2S_GRID[idx], b.qs[QK_K / 8 + 4 * ib + l]);
                }
            }
        }
    }

    fn encode(x: &[f32], weights: Option<&[f32]>, out: &mut BlockIq2S) {
        static LAT: OnceLock<Lattice<8>> = OnceLock::new();
        let lat = lattice(&LAT, &IQ2S_GRID, 1);
        let (xs, w) = block_weights(x, weights, 2.0, NoImatrix::QuarterSigmaPlusXSquared);
        *out = Zeroable::zeroed();
        let (scales, max_scale) = search_sub_blocks(lat, &S, &xs, &w, 16, |ib, l, signs| {
            for k in 0..2 {
                let idx = lat.index_or_nearest(&mut l[8 * k..8 * k + 8]);
                let i8 = 2 * ib + k;
                out.qs[i8] = idx as u8;
                out.qh[i8 / 4] |= ((idx >> 8) as u8) << (2 * (i8 % 4));
                out.qs[QK_K / 8 + i8] = signs[k];
            }
        });
        if max_scale == 0.0 {
            return;
        }
        let d = max_scale / 31.0;
        out.d = F16Le::from_f32(d * 0.9875f32);
        let id = 1.0 / d;
        for (ib, &s) in scales.iter().enumerate() {
            out.scales[ib / 2] |= scale_code(id, s) << (4 * (ib % 2));
        }
    }
}

// ---- Native dots with q8_k (ggml's `ggml_vec_dot_iq2_*_q8_K`) -----------------------------
//
// Values are `d·(2s + 1)/8 · g · sign`: the integer sums of `g·sign·q8` per sub-block are
// multiplied by the odd scale `2s + 1`, summed per block in i32, scaled by `d·d_y` in f32, and
// the row's sum by 1/8 at the end.

impl SubBlocks for Iq2Xxs {
    const VEX_ON_INTEL: bool = true;
    // The sign bytes computed for the block ahead (`ksigns_byte` over the 32 codes, as iq3_xxs
    // once did) measured 16.2 -> 11.8 Gel/s here: the 7-bit codes come out of one word with a
    // shift each.
    type Pre = ();
    const D_MUL: f32 = 0.125;

    #[inline(always)]
    fn d_bits(b: &BlockIq2Xxs) -> u16 {
        b.d.bits()
    }

    #[inline(always)]
    fn sub_block<'a>(b: &'a BlockIq2Xxs, _pre: &(), ib: usize) -> SubBlock<'a> {
        let ib = ib & 7; // (in range anyway: lets LLVM drop the bounds checks)
        let aux1 = u32_at(&b.qs, 8 * ib + 4);
        let grid: &'static [u64; 256] = &IQ2XXS_GRID;
        SubBlock::Grid(
            // Each index byte read from the block on its own (`movzbl` from memory: a load,
            // no ALU work) rather than shifted out of a word in a register, as ggml's
            // `aux8[l]`: AVX2 mat-vec 14.2 -> 15.8 Gel/s, VNNI 14.4 -> 15.0 (Zen 4).
            GridWords::W64(std::array::from_fn(|l| &grid[usize::from(b.qs[(8 * ib + l) & 63])])),
            GridSigns::ksigns(|l| (aux1 >> (7 * l)) as usize),
        )
    }

    #[inline(always)]
    fn scales(b: &BlockIq2Xxs) -> [i16; QK_K / 16] {
        per32(|ib| 2 * (u32_at(&b.qs, 8 * ib + 4) >> 28) as i16 + 1)
    }
}

impl SubBlocks for Iq2Xs {
    const VEX_ON_INTEL: bool = true;
    const D_MUL: f32 = 0.125;
    /// The 32 grid indices and the 32 sign bytes (`KSIGNS_IQ2XS` of the 7-bit codes).
    type Pre = ([u16; QK_K / 8], [u8; QK_K / 8]);

    #[inline(always)]
    fn d_bits(b: &BlockIq2Xs) -> u16 {
        b.d.bits()
    }

    /// The codes' low 9 bits, and their top 7 bits made sign bytes by computing
    /// `KSIGNS_IQ2XS` ([`ksigns_byte`]) rather than looking each up: for all 32 codes at
    /// once, in 16-bit lanes that LLVM vectorizes (as ggml's AVX2 kernel computes them).
    #[inline(always)]
    fn prepare(b: &BlockIq2Xs) -> Self::Pre {
        // (Plain loops: `array::map` was an out-of-line call here.)
        let (codes, _) = b.qs.as_chunks::<2>();
        let (mut idx, mut signs) = ([0u16; QK_K / 8], [0u8; QK_K / 8]);
        for ((i, s), c) in idx.iter_mut().zip(&mut signs).zip(codes) {
            let c = u16::from_le_bytes(*c);
            *i = c & 511;
            *s = ksigns_byte(u32::from(c >> 9));
        }
        (idx, signs)
    }

    #[inline(always)]
    fn sub_block<'a>(_b: &'a BlockIq2Xs, pre: &Self::Pre, ib: usize) -> SubBlock<'a> {
        let ib = ib & 7; // (in range anyway: lets LLVM drop the bounds checks)
        let (idx, signs) = pre;
        let grid: &'static [u64; 512] = &IQ2XS_GRID;
        SubBlock::Grid(
            GridWords::W64(std::array::from_fn(|l| {
                // The index passes through a general register: computed in vector registers,
                // LLVM would otherwise load the entries with a (microcoded, slow) gather.
                &grid[no_gather_word(u64::from(idx[4 * ib + l])) as usize & 511]
            })),
            GridSigns::Bits(signs[4 * ib..4 * ib + 4].try_into().expect("4 sign bytes")),
        )
    }

    const SCALE_FIELDS: Option<ScaleFields> = Some(IQ2XS_SCALES);
}

/// iq2_xs's scales: nibble `k` of `scales`, bits `4 (k % 4)` .. of its word `k / 4`.
const IQ2XS_SCALES: ScaleFields =
    ScaleFields::strided(size_of::<BlockIq2Xs>(), std::mem::offset_of!(BlockIq2Xs, scales), 1, 4, (0, 4, 4));

impl SubBlocks for Iq2S {
    const VEX_ON_INTEL: bool = true;
    /// The 32 grid indices.
    type Pre = [u16; QK_K / 8];
    const D_MUL: f32 = 0.125;

    #[inline(always)]
    fn d_bits(b: &BlockIq2S) -> u16 {
        b.d.bits()
    }

    /// Index `4ib + l`: byte `qs[4ib + l]` and bits `2l, 2l + 1` of `qh[ib]` above it.
    #[inline(always)]
    fn prepare(b: &BlockIq2S) -> Self::Pre {
        let (qs, _) = b.qs.as_chunks::<4>();
        let words: [u64; QK_K / 32] = std::array::from_fn(|ib| {
            // Bits `2l, 2l + 1` of `qh` to 16-bit lane `l`: one multiplication puts a copy of
            // the byte at bit `14l`, apart from the others (no carries).
            let h = (u64::from(b.qh[ib]) * (1 | 1 << 14 | 1 << 28 | 1 << 42)) & 0x0003_0003_0003_0003;
            spread_bytes(qs[ib]) | h << 8
        });
        bytemuck::cast(words)
    }

    #[inline(always)]
    fn sub_block<'a>(b: &'a BlockIq2S, idx: &Self::Pre, ib: usize) -> SubBlock<'a> {
        let ib = ib & 7; // (in range anyway: lets LLVM drop the bounds checks)
        let signs = &b.qs[QK_K / 8..];
        let grid: &'static [u64; 1024] = &IQ2S_GRID;
        SubBlock::Grid(
            GridWords::W64(std::array::from_fn(|l| &grid[no_gather_word(u64::from(idx[4 * ib + l])) as usize & 1023])),
            GridSigns::Bits(signs[4 * ib..4 * ib + 4].try_into().expect("4 sign bytes")),
        )
    }

    const SCALE_FIELDS: Option<ScaleFields> = Some(IQ2S_SCALES);
}

/// iq2_s's scales: nibble `k` of `scales`, bits `4 (k % 4)` .. of its word `k / 4`.
const IQ2S_SCALES: ScaleFields =
    ScaleFields::strided(size_of::<BlockIq2S>(), std::mem::offset_of!(BlockIq2S, scales), 1, 4, (0, 4, 4));

#[cfg(test)]
mod tests {
    use super::*;

    /// iq2_xs's sign bytes, computed, are ggml's table, whatever the index bits below them.
    #[test]
    fn iq2xs_sign_bytes_are_the_table() {
        let mut b = BlockIq2Xs::zeroed();
        for code in 0..128u16 {
            for (k, idx) in [0u16, 1, 255, 256, 511].into_iter().enumerate() {
                b.qs[2 * k..2 * k + 2].copy_from_slice(&(code << 9 | idx).to_le_bytes());
            }
            let (idx, signs) = Iq2Xs::prepare(&b);
            assert_eq!(idx[..5], [0, 1, 255, 256, 511]);
            assert!(signs[..5].iter().all(|&s| s == KSIGNS_IQ2XS[usize::from(code)]), "code {code}");
        }
    }
}
