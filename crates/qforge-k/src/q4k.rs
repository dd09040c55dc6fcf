//! q4_k and q5_k: 4-bit / 5-bit codes, eight 32-element sub-blocks with 6-bit scales and mins
//! packed into 12 bytes ([`crate::pack::pack_scale_min_k4`]).

use crate::affine::{self, AffineSpec, RefWeights};
use crate::decode::DecodeBlock;
use crate::dot::{Q8KCodes, mask_bits, nibbles, or};
use crate::pack::{pack_4bit, pack_scale_min_k4, scale_min_k4, scales_mins_k4, split_high_bit};
use crate::{K_DOT, QK_K};
use bytemuck::{Pod, Zeroable};
use qforge_core::le::F16Le;
use qforge_core::{BlockFormat, FormatDesc, Role};
use qforge_ggml_search::AffineSearch;
use qforge_simd::Tail;
use qforge_simd::half_lut::{CODES, Codes32, Fifth, GroupSink, Line, Tables, table};

qforge_core::c_block! {
    /// ggml's `block_q4_K` (144 bytes): `x = d * sc[j] * q - dmin * m[j]`, `q in 0..16`.
    #[repr(C)]
    #[derive(Clone, Copy, Debug, Pod, Zeroable)]
    pub struct BlockQ4K {
        /// Super-block scale (f16) applied to the eight 6-bit sub-block scales.
        pub d: F16Le,
        /// Super-block scale (f16) applied to the eight 6-bit sub-block mins.
        pub dmin: F16Le,
        /// Eight 6-bit scales and eight 6-bit mins.
        pub scales: [u8; 12],
        /// 4-bit codes, see the crate's private `pack` module.
        pub qs: [u8; QK_K / 2],
    }
}

qforge_core::c_block! {
    /// ggml's `block_q5_K` (176 bytes): as q4_k with a fifth code bit in `qh`, `q in 0..32`.
    #[repr(C)]
    #[derive(Clone, Copy, Debug, Pod, Zeroable)]
    pub struct BlockQ5K {
        /// Super-block scale (f16) applied to the eight 6-bit sub-block scales.
        pub d: F16Le,
        /// Super-block scale (f16) applied to the eight 6-bit sub-block mins.
        pub dmin: F16Le,
        /// Eight 6-bit scales and eight 6-bit mins.
        pub scales: [u8; 12],
        /// Fifth bit of element `i` at bit `i / 32` of byte `i % 32`.
        pub qh: [u8; QK_K / 8],
        /// Low 4 bits of the codes, laid out as q4_k's.
        pub qs: [u8; QK_K / 2],
    }
}

/// The q4_k format (GGML type 12).
pub struct Q4K;
/// The q5_k format (GGML type 13).
pub struct Q5K;

macro_rules! k4_spec {
    ($t:ty, $nmax:expr, $search:expr, $weighted_cap:expr) => {
        impl AffineSpec for $t {
            const SUB: usize = 32;
            const NMAX: i32 = $nmax;
            const SCALE_MAX: i32 = 63;
            const REF_WEIGHTS: RefWeights = RefWeights::RmsPlusAbs;
            const REF_SEARCH: AffineSearch = $search;
            const REF_CAP: u8 = 63;
            const WEIGHTED_CAP: u8 = $weighted_cap;
            const SIGMA_FACTOR: f32 = 2.0;
            type Scales = [u8; 12];

            fn pack_scales(sc: &[u8; 16], m: &[u8; 16]) -> [u8; 12] {
                let first8 = |a: &[u8; 16]| std::array::from_fn(|j| a[j]);
                pack_scale_min_k4(&first8(sc), &first8(m))
            }

            fn scale_min(s: &[u8; 12], j: usize) -> (u8, u8) {
                scale_min_k4(j, s)
            }
        }
    };
}

// ggml caps the weighted scale codes at 63 for q5_k only (they never exceed it in practice).
k4_spec!(Q4K, 15, AffineSearch { rmin: -1.0, rdelta: 0.1, nstep: 20, use_mad: false }, u8::MAX);
k4_spec!(Q5K, 31, AffineSearch { rmin: -0.5, rdelta: 0.1, nstep: 15, use_mad: false }, 63);

/// ggml's `dequantize_row_q4_K` / `q5_K`: `d * sc * q - dmin * m` per 32-element sub-block.
/// Sub-block `j = 2p + s` takes its low 4 bits from byte `32p + l` of `qs` (low nibble for
/// `s = 0`, high for `s = 1`) and its fifth bit, if `qh` is given, from bit `j` of `qh[l]`.
#[inline(always)]
fn decode_k4(
    d: F16Le,
    dmin: F16Le,
    scales: &[u8; 12],
    qs: &[u8; QK_K / 2],
    qh: Option<&[u8; 32]>,
    y: &mut [f32; QK_K],
) {
    let (d, dmin) = (d.get(), dmin.get());
    let zeros = [0u8; 32];
    let qh = qh.unwrap_or(&zeros);
    for (p, yp) in y.chunks_exact_mut(64).enumerate() {
        let sm = [scale_min_k4(2 * p, scales), scale_min_k4(2 * p + 1, scales)];
        let dl = sm.map(|(sc, _)| d * sc as f32);
        let ml = sm.map(|(_, m)| dmin * m as f32);
        let q: &[u8; 32] = qs[32 * p..].first_chunk().expect("32 bytes of codes per 64 values");
        // The 64 codes as bytes first (32 per vector), then widened and scaled: the byte
        // operations and the f32 ones in one loop were vectorized 8 values at a time.
        let (mut c0s, mut c1s) = ([0u8; 32], [0u8; 32]);
        for ((c0, c1), (&q, &h)) in c0s.iter_mut().zip(&mut c1s).zip(q.iter().zip(qh)) {
            *c0 = (q & 0xF) | (h >> (2 * p) & 1) << 4;
            *c1 = (q >> 4) | (h >> (2 * p + 1) & 1) << 4;
        }
        let (y0, y1) = yp.split_at_mut(32);
        for (y, &c) in y0.iter_mut().zip(&c0s) {
            *y = dl[0] * c as f32 - ml[0];
        }
        for (y, &c) in y1.iter_mut().zip(&c1s) {
            *y = dl[1] * c as f32 - ml[1];
        }
    }
}

impl DecodeBlock for Q4K {
    #[inline(always)]
    fn decode_f32(b: &BlockQ4K, y: &mut [f32; QK_K]) {
        decode_k4(b.d, b.dmin, &b.scales, &b.qs, None, y);
    }

    const TABLE_GROUPS: bool = true;

    #[inline(always)]
    fn groups(b: &BlockQ4K, f: impl GroupSink) {
        k4_groups(b.d, b.dmin, &b.scales, &b.qs, None, f);
    }
}

impl DecodeBlock for Q5K {
    #[inline(always)]
    fn decode_f32(b: &BlockQ5K, y: &mut [f32; QK_K]) {
        decode_k4(b.d, b.dmin, &b.scales, &b.qs, Some(&b.qh), y);
    }

    const TABLE_GROUPS: bool = true;

    #[inline(always)]
    fn groups(b: &BlockQ5K, f: impl GroupSink) {
        k4_groups(b.d, b.dmin, &b.scales, &b.qs, Some(&b.qh), f);
    }
}

/// The `half_lut` groups of q4_k / q5_k (`decode_k4`'s layout): per 64 values, two groups on
/// the low and the high nibbles of the same 32 bytes (with their fifth bits from `qh`), each
/// with `decode_k4`'s `dl·c - ml`.
#[inline(always)]
fn k4_groups(
    d: F16Le,
    dmin: F16Le,
    scales: &[u8; 12],
    qs: &[u8; QK_K / 2],
    qh: Option<&[u8; 32]>,
    mut f: impl GroupSink,
) {
    let (d, dmin) = (d.get(), dmin.get());
    // The two groups of each 32 bytes written out, so that each call's code layout is a
    // constant (a loop over `[Low, High]` stayed a jump table per group).
    for (p, q) in qs.as_chunks::<32>().0.iter().enumerate() {
        k4_group(2 * p, Codes32::Low(q), (d, dmin), scales, qh, &mut f);
        k4_group(2 * p + 1, Codes32::High(q), (d, dmin), scales, qh, &mut f);
    }
}

/// Sub-block `j` of [`k4_groups`].
#[inline(always)]
fn k4_group(
    j: usize,
    codes: Codes32<'_>,
    (d, dmin): (f32, f32),
    scales: &[u8; 12],
    qh: Option<&[u8; 32]>,
    f: &mut impl GroupSink,
) {
    let (sc, m) = scale_min_k4(j, scales);
    let (dl, ml) = (d * sc as f32, dmin * m as f32);
    // ggml's `dl · c − ml`; the 5-bit line `(c − 0)·dl − ml` is the same bits.
    match qh {
        None => f.group(Tables::One(table(&CODES, |c| dl * c - ml)), codes, Fifth::None),
        Some(h) => {
            f.group(Tables::Linear(Line { offset: 0, scale: dl, tail: Tail::Sub(ml) }), codes, Fifth::Bit(h, j as u32))
        }
    }
}

macro_rules! k4_dot {
    ($t:ty, $block:ty, $pick_table:expr, $bits:expr, |$b:ident, $c:ident| $chunk:expr) => {
        /// ggml's `ggml_vec_dot_q4_K_q8_K` / `q5_K`: unsigned codes (layout as in
        /// `decode_k4`), a 6-bit scale and min per 32-element sub-block.
        impl Q8KCodes for $t {
            const HAS_MINS: bool = true;
            const ZERO: u8 = 0;
            const SCALE_PICK_TABLE: bool = $pick_table;
            const K4_SCALES: Option<usize> = Some(std::mem::offset_of!($block, scales));
            const CODE_BITS: u32 = $bits;
            const SCALE_GROUP: usize = 32;

            #[inline(always)]
            fn d_dmin(b: &$block) -> [F16Le; 2] {
                [b.d, b.dmin]
            }

            #[inline(always)]
            fn chunk($b: &$block, $c: usize) -> [u8; 32] {
                $chunk
            }

            #[inline(always)]
            fn scales(b: &$block) -> ([i8; 16], [u8; 16]) {
                let (sc, m) = scales_mins_k4(&b.scales);
                (std::array::from_fn(|g| sc[g / 2] as i8), std::array::from_fn(|g| m[g / 2]))
            }
        }
    };
}

k4_dot!(Q4K, BlockQ4K, true, 4, |b, c| nibbles(&b.qs, c));
k4_dot!(Q5K, BlockQ5K, false, 5, |b, c| or(nibbles(&b.qs, c), mask_bits(&b.qh, c, 4)));

impl BlockFormat for Q4K {
    type Block = BlockQ4K;
    const CUDA_CODES32: bool = true;
    const DESC: FormatDesc = FormatDesc {
        name: "q4_k",
        family: "k",
        ggml_type: Some(12),
        block_size: QK_K,
        block_bytes: 144,
        role: Role::Weight,
        dot_type: K_DOT,
        summary: "4.5 bpw K-quant: 4-bit codes, 8x32 sub-blocks with 6-bit scales and mins",
        cuda: crate::cuda("qf_q4_k"),
    };

    crate::decode::block_decoders!(BlockQ4K);

    fn encode_row(x: &[f32], weights: Option<&[f32]>, blocks: &mut [BlockQ4K]) {
        crate::encode_row::<Self>(x, weights, blocks)
    }

    #[inline(always)]
    fn encode(x: &[f32], weights: Option<&[f32]>, out: &mut BlockQ4K) {
        let a = affine::encode::<Self>(x, weights);
        (out.d, out.dmin, out.scales) = (a.d, a.dmin, a.scales);
        pack_4bit(&a.codes, &mut out.qs);
    }
}

impl BlockFormat for Q5K {
    type Block = BlockQ5K;
    const CUDA_CODES32: bool = true;
    const DESC: FormatDesc = FormatDesc {
        name: "q5_k",
        family: "k",
        ggml_type: Some(13),
        block_size: QK_K,
        block_bytes: 176,
        role: Role::Weight,
        dot_type: K_DOT,
        summary: "5.5 bpw K-quant: 5-bit codes, 8x32 sub-blocks with 6-bit scales and mins",
        cuda: crate::cuda("qf_q5_k"),
    };

    crate::decode::block_decoders!(codes16 BlockQ5K);

    fn encode_row(x: &[f32], weights: Option<&[f32]>, blocks: &mut [BlockQ5K]) {
        crate::encode_row::<Self>(x, weights, blocks)
    }

    #[inline(always)]
    fn encode(x: &[f32], weights: Option<&[f32]>, out: &mut BlockQ5K) {
        let mut a = affine::encode::<Self>(x, weights);
        (out.d, out.dmin, out.scales) = (a.d, a.dmin, a.scales);
        split_high_bit(&mut a.codes, 4, &mut out.qh);
        pack_4bit(&a.codes, &mut out.qs);
    }
}
