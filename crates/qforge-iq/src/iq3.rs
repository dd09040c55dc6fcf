//! The 3-bit grid formats iq3_xxs and iq3_s: 256-value super-blocks whose values are a
//! sub-block scale times `g * sign`, with `g` a 4-value point of a D4-lattice-derived grid.

use crate::common::QK_K;
use crate::iq2::{emit8, groups8, u32_at};
use crate::lattice::{Lattice, levels_of};
use crate::search::{GridSearch, Refine, Signs, Start, block_weights, scale_code, search_sub_blocks};
use crate::tables::{IQ3S_GRID, IQ3XXS_GRID, KSIGNS_IQ2XS};
use crate::unpack::{GridSigns, GridWords, ScaleFields, SubBlock, SubBlocks, per32};
use bytemuck::{Pod, Zeroable};
use qforge_core::le::F16Le;
use qforge_core::{BlockFormat, Elem, FormatDesc, Role};
use qforge_ggml_search::NoImatrix;
use std::sync::OnceLock;

fn lattice(
    cell: &'static OnceLock<Lattice<4>>,
    words: &[u32],
    level: fn(u8) -> u8,
    nwant: usize,
) -> &'static Lattice<4> {
    cell.get_or_init(|| Lattice::new(&levels_of(words.iter().map(|&w| w as u64), level), 3, 4096, nwant))
}

/// Two grid words of 4 values as the 8 values of one sign group.
#[inline(always)]
fn pair(lo: u32, hi: u32) -> u64 {
    lo as u64 | (hi as u64) << 32
}

const XXS: GridSearch = GridSearch {
    kmax_q: 8,
    start: Start::Max,
    steps: 15,
    step: 0.2,
    refine: Refine::OffGridOnly,
    eps: Some(1e-8),
    initial_on_grid: true,
    signs: Signs::EvenParity,
};
const S: GridSearch =
    GridSearch { steps: 9, refine: Refine::AllIfAnyOff, eps: None, initial_on_grid: false, signs: Signs::Full, ..XXS };

qforge_core::c_block! {
    /// ggml's `block_iq3_xxs` (98 bytes, 3.0625 bpw).
    #[repr(C)]
    #[derive(Clone, Copy, Debug, Pod, Zeroable)]
    pub struct BlockIq3Xxs {
        /// The block's f16 super-scale.
        pub d: F16Le,
        /// 64 grid indices (one per 4 values), then per 32 values a LE `u32`: four 7-bit sign
        /// groups (bits 0..28) and the 4-bit scale (bits 28..32).
        pub qs: [u8; 96],
    }
}

/// The iq3_xxs format (GGML type 18).
pub struct Iq3Xxs;

impl BlockFormat for Iq3Xxs {
    type Block = BlockIq3Xxs;
    const CUDA_CODES32: bool = true;
    const DESC: FormatDesc = FormatDesc {
        name: "iq3_xxs",
        family: "iq",
        ggml_type: Some(18),
        block_size: QK_K,
        block_bytes: 98,
        role: Role::Weight,
        dot_type: Some("q8_k"),
        summary: "3.06 bpw grid quant: 4-value points of a 256-entry D4 grid, 4-bit scales per 32",
        cuda: crate::device_code("qf_iq3_xxs"),
    };

    /// Straight to f16 / bf16 with AVX2 (`unpack::decode_row`: a table of rounded magnitudes).
    const DIRECT_16BIT: bool = true;

    fn decode_row<O: Elem>(blocks: &[BlockIq3Xxs], out: &mut [O]) {
        crate::unpack::decode_row::<Self, O>(blocks, out)
    }

    fn decode<O: Elem>(b: &BlockIq3Xxs, out: &mut [O]) {
        let d = b.d.get();
        let mut it = groups8(out);
        for ib in 0..QK_K / 32 {
            let aux = u32_at(&b.qs, QK_K / 4 + 4 * ib);
            let db = d * (0.5f32 + (aux >> 28) as f32) * 0.5f32;
            for l in 0..4 {
                let q = &b.qs[8 * ib + 2 * l..8 * ib + 2 * l + 2];
                let grid = pair(IQ3XXS_GRID[q[0] as usize], IQ3XXS_GRID[q[1] as usize]);
                if let Some(dst) = it.next() {
                    emit8(dst, db, grid, KSIGNS_IQ2XS[((aux >> (7 * l)) & 127) as usize]);
                }
            }
        }
    }

    fn encode(x: &[f32], weights: Option<&[f32]>, out: &mut BlockIq3Xxs) {
        static LAT: OnceLock<Lattice<4>> = OnceLock::new();
        let lat = lattice(&LAT, &IQ3XXS_GRID, |b| b / 8, 2);
        let (xs, w) = block_weights(x, weights, 2.0, NoImatrix::XSquared);
        let mut q3 = [0u8; 96];
        let mut sas = [0u32; 8];
        let (scales, max_scale) = search_sub_blocks(lat, &XXS, &xs, &w, 32, |ib, l, signs| {
            for k in 0..8 {
                q3[8 * ib + k] = lat.index_or_nearest(&mut l[4 * k..4 * k + 4]) as u8;
            }
            sas[ib] = signs.iter().enumerate().fold(0, |a, (k, &s)| a | (s as u32) << (7 * k));
        });
        *out = Zeroable::zeroed();
        if max_scale == 0.0 {
            return;
        }
        let d = max_scale / 31.0;
        out.d = F16Le::from_f32(d * 1.0125f32);
        let id = 1.0 / d;
        for (ib, &s) in scales.iter().take(8).enumerate() {
            sas[ib] |= (scale_code(id, s) as u32) << 28;
        }
        out.qs[..QK_K / 4].copy_from_slice(&q3[..QK_K / 4]);
        for (dst, v) in out.qs[QK_K / 4..].chunks_exact_mut(4).zip(sas) {
            dst.copy_from_slice(&v.to_le_bytes());
        }
    }
}

qforge_core::c_block! {
    /// ggml's `block_iq3_s` (110 bytes, 3.4375 bpw).
    #[repr(C)]
    #[derive(Clone, Copy, Debug, Pod, Zeroable)]
    pub struct BlockIq3S {
        /// The block's f16 super-scale.
        pub d: F16Le,
        /// Low 8 bits of the 64 grid indices (one per 4 values).
        pub qs: [u8; 64],
        /// Ninth index bit, one byte per 32 values.
        pub qh: [u8; 8],
        /// One sign byte per 8 values.
        pub signs: [u8; 32],
        /// Two 4-bit scales per 64 values (one per 32).
        pub scales: [u8; 4],
    }
}

/// The iq3_s format (GGML type 21).
pub struct Iq3S;

impl BlockFormat for Iq3S {
    type Block = BlockIq3S;
    const CUDA_CODES32: bool = true;
    const DESC: FormatDesc = FormatDesc {
        name: "iq3_s",
        family: "iq",
        ggml_type: Some(21),
        block_size: QK_K,
        block_bytes: 110,
        role: Role::Weight,
        dot_type: Some("q8_k"),
        summary: "3.44 bpw grid quant: 512-entry D4 grid, 8 sign bits per 8 values, 4-bit odd scales per 32",
        cuda: crate::device_code("qf_iq3_s"),
    };

    /// Straight to f16 / bf16 with AVX2 (`unpack::decode_row`: a table of rounded magnitudes).
    const DIRECT_16BIT: bool = true;

    fn decode_row<O: Elem>(blocks: &[BlockIq3S], out: &mut [O]) {
        crate::unpack::decode_row::<Self, O>(blocks, out)
    }

    fn decode<O: Elem>(b: &BlockIq3S, out: &mut [O]) {
        let d = b.d.get();
        let mut it = groups8(out);
        for ib in 0..QK_K / 32 {
            let nib = (b.scales[ib / 2] >> (4 * (ib % 2))) & 0xf;
            let db = d * (1 + 2 * nib as i32) as f32;
            let qh = b.qh[ib] as usize;
            for l in 0..4 {
                let q = &b.qs[8 * ib + 2 * l..8 * ib + 2 * l + 2];
                let g1 = IQ3S_GRID[q[0] as usize | ((qh << (8 - 2 * l)) & 256)];
                let g2 = IQ3S_GRID[q[1] as usize | ((qh << (7 - 2 * l)) & 256)];
                if let Some(dst) = it.next() {
                    emit8(dst, db, pair(g1, g2), b.signs[4 * ib + l]);
                }
            }
        }
    }

    fn encode(x: &[f32], weights: Option<&[f32]>, out: &mut BlockIq3S) {
        static LAT: OnceLock<Lattice<4>> = OnceLock::new();
        let lat = lattice(&LAT, &IQ3S_GRID, |b| b / 2, 3);
        let (xs, w) = block_weights(x, weights, 2.0, NoImatrix::XSquared);
        *out = Zeroable::zeroed();
        let (scales, max_scale) = search_sub_blocks(lat, &S, &xs, &w, 32, |ib, l, signs| {
            for k in 0..8 {
                let idx = lat.index_or_nearest(&mut l[4 * k..4 * k + 4]);
                out.qs[8 * ib + k] = idx as u8;
                out.qh[ib] |= ((idx >> 8) as u8) << k;
            }
            out.signs[4 * ib..4 * ib + 4].copy_from_slice(signs);
        });
        if max_scale == 0.0 {
            return;
        }
        let d = max_scale / 31.0;
        out.d = F16Le::from_f32(d * 1.033f32);
        let id = 1.0 / d;
        for (ib, &s) in scales.iter().take(8).enumerate() {
            out.scales[ib / 2] |= scale_code(id, s) << (4 * (ib % 2));
        }
    }
}

// ---- Native dots with q8_k (ggml's `ggml_vec_dot_iq3_*_q8_K`) -----------------------------
//
// iq3_xxs values are `d·(2s + 1)/4 · g · sign` (the row's sum takes the 1/4 at the end), iq3_s
// values `d·(2s + 1) · g · sign`; the odd scales multiply exact per-32 integer sums.

impl SubBlocks for Iq3Xxs {
    type Pre = ();
    const D_MUL: f32 = 0.25;

    #[inline(always)]
    fn d_bits(b: &BlockIq3Xxs) -> u16 {
        b.d.bits()
    }

    /// The signs as iq2_xxs's: each 7-bit code looked up in `KSIGNS_PM1`
    /// (`GridSigns::ksigns`, ggml's `signs64`). Computed for the block ahead as sign bits
    /// instead (`ksigns_byte` over the 32 codes, then spread to bytes per sub-block), AVX2
    /// mat-vec read 10.6 Gel/s against 12.1 this way, VNNI 12.3 against 12.7 (Zen 4).
    #[inline(always)]
    fn sub_block<'a>(b: &'a BlockIq3Xxs, _pre: &(), ib: usize) -> SubBlock<'a> {
        let ib = ib & 7; // (in range anyway: lets LLVM drop the bounds checks)
        let q = &b.qs[8 * ib..8 * ib + 8];
        let aux = u32_at(&b.qs, QK_K / 4 + 4 * ib);
        let grid: &'static [u32; 256] = &IQ3XXS_GRID;
        SubBlock::Grid(
            GridWords::W32(std::array::from_fn(|k| &grid[usize::from(q[k])])),
            GridSigns::ksigns(|l| (aux >> (7 * l)) as usize),
        )
    }

    #[inline(always)]
    fn scales(b: &BlockIq3Xxs) -> [i16; QK_K / 16] {
        // A fixed-size view: with a slice's bounds checks (panic paths) the closure was not
        // inlined into the AVX2 kernel.
        let aux: &[u8; QK_K / 8] = b.qs.last_chunk().expect("the sign and scale words");
        per32(|ib| 2 * (aux[(4 * ib + 3) & 31] >> 4) as i16 + 1)
    }
}

impl SubBlocks for Iq3S {
    // Its 64 indices precomputed for the block ahead (as iq2_s) measured 10.1 -> 10.3 Gel/s:
    // not kept.
    type Pre = ();
    #[inline(always)]
    fn d_bits(b: &BlockIq3S) -> u16 {
        b.d.bits()
    }

    #[inline(always)]
    fn sub_block<'a>(b: &'a BlockIq3S, _pre: &(), ib: usize) -> SubBlock<'a> {
        let ib = ib & 7; // (in range anyway: lets LLVM drop the bounds checks)
        let q = &b.qs[8 * ib..8 * ib + 8];
        let qh = usize::from(b.qh[ib]);
        let grid: &'static [u32; 512] = &IQ3S_GRID;
        SubBlock::Grid(
            // Entry k takes bit k of `qh` as its 9th index bit.
            GridWords::W32(std::array::from_fn(|k| &grid[usize::from(q[k]) | ((qh << (8 - k)) & 256)])),
            GridSigns::Bits(b.signs[4 * ib..4 * ib + 4].try_into().expect("4 sign bytes")),
        )
    }

    const SCALE_FIELDS: Option<ScaleFields> = Some(IQ3S_SCALES);
}

/// iq3_s's scales: per 32 values nibble `ib` of `scales`, bits `4 (ib % 4)` .. of its word `ib / 4`.
const IQ3S_SCALES: ScaleFields =
    ScaleFields::strided(size_of::<BlockIq3S>(), std::mem::offset_of!(BlockIq3S, scales), 2, 4, (0, 4, 4));
