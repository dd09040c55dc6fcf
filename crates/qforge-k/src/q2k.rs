//! q2_k: 2-bit codes, sixteen 16-element sub-blocks with 4-bit scales and mins.

use crate::affine::{self, AffineSpec, RefWeights};
use crate::decode::{self, DecodeBlock};
use crate::dot::{Q8KCodes, crumbs};
use crate::pack::pack_2bit;
use crate::{K_DOT, QK_K};
use bytemuck::{Pod, Zeroable};
use qforge_core::le::F16Le;
use qforge_core::{BlockFormat, FormatDesc, Role};
use qforge_ggml_search::AffineSearch;
use qforge_simd::half_lut::{CODES8, Codes32, Fifth, GroupSink, Tables, table};

qforge_core::c_block! {
    /// ggml's `block_q2_K` (84 bytes): `x = d * (scales[j] & 0xF) * q - dmin * (scales[j] >> 4)`.
    #[repr(C)]
    #[derive(Clone, Copy, Debug, Pod, Zeroable)]
    pub struct BlockQ2K {
        /// Per 16-element sub-block: scale code in the low nibble, min code in the high nibble.
        pub scales: [u8; QK_K / 16],
        /// 2-bit codes, see the crate's private `pack` module.
        pub qs: [u8; QK_K / 4],
        /// Super-block scale (f16) applied to the 4-bit sub-block scale codes.
        pub d: F16Le,
        /// Super-block scale (f16) applied to the 4-bit sub-block min codes.
        pub dmin: F16Le,
    }
}

/// The q2_k format (GGML type 10).
pub struct Q2K;

impl AffineSpec for Q2K {
    const SUB: usize = 16;
    const NMAX: i32 = 3;
    const SCALE_MAX: i32 = 15;
    const REF_WEIGHTS: RefWeights = RefWeights::Abs;
    const REF_SEARCH: AffineSearch = AffineSearch { rmin: -0.5, rdelta: 0.1, nstep: 15, use_mad: true };
    const REF_CAP: u8 = u8::MAX;
    const WEIGHTED_CAP: u8 = u8::MAX;
    const SIGMA_FACTOR: f32 = 1.0;
    type Scales = [u8; 16];

    fn pack_scales(sc: &[u8; 16], m: &[u8; 16]) -> [u8; 16] {
        std::array::from_fn(|j| sc[j] | m[j] << 4)
    }

    fn scale_min(s: &[u8; 16], j: usize) -> (u8, u8) {
        (s[j] & 0xF, s[j] >> 4)
    }
}

impl DecodeBlock for Q2K {
    /// ggml's `dequantize_row_q2_K`: `d * sc * q - dmin * m` per 16-element sub-block.
    #[inline(always)]
    fn decode_f32(b: &BlockQ2K, y: &mut [f32; QK_K]) {
        let (d, dmin) = (b.d.get(), b.dmin.get());
        let dl: [f32; 16] = std::array::from_fn(|j| d * (b.scales[j] & 0xF) as f32);
        let ml: [f32; 16] = std::array::from_fn(|j| dmin * (b.scales[j] >> 4) as f32);
        decode::two_bit_planes(&b.qs, y, |j, _, _, low| dl[j] * low as f32 - ml[j]);
    }

    const TABLE_GROUPS: bool = true;
    const F32_BY_TABLE: bool = true;

    /// [`decode::two_bit_planes`]' groups: bits `2k..2k+2` of `qs[32h..32h+32]`, one table per
    /// 16-element sub-block with `decode_f32`'s `dl·c - ml`.
    #[inline(always)]
    fn groups(b: &BlockQ2K, mut f: impl GroupSink) {
        let (d, dmin) = (b.d.get(), b.dmin.get());
        let sub = |j: usize| {
            let (dl, ml) = (d * (b.scales[j] & 0xF) as f32, dmin * (b.scales[j] >> 4) as f32);
            table(&CODES8, |c| dl * c - ml)
        };
        for (h, q) in b.qs.as_chunks::<32>().0.iter().enumerate() {
            for k in 0..4 {
                let j = 8 * h + 2 * k;
                let codes = Codes32::Field { q, shift: 2 * k as u32, width: 2, high: None };
                f.group(Tables::Halves8([sub(j), sub(j + 1)]), codes, Fifth::None);
            }
        }
    }
}

/// ggml's `ggml_vec_dot_q2_K_q8_K`: codes `0..4`, 4-bit scale and min per 16 elements.
impl Q8KCodes for Q2K {
    const HAS_MINS: bool = true;
    const CODE_BITS: u32 = 2;
    const ZERO: u8 = 0;
    const SCALE_PICK_TABLE: bool = true;

    #[inline(always)]
    fn d_dmin(b: &BlockQ2K) -> [F16Le; 2] {
        [b.d, b.dmin]
    }

    #[inline(always)]
    fn chunk(b: &BlockQ2K, c: usize) -> [u8; 32] {
        crumbs(&b.qs, c)
    }

    #[inline(always)]
    fn scales(b: &BlockQ2K) -> ([i8; 16], [u8; 16]) {
        (b.scales.map(|s| (s & 0xF) as i8), b.scales.map(|s| s >> 4))
    }
}

impl BlockFormat for Q2K {
    type Block = BlockQ2K;
    const CUDA_CODES32: bool = true;
    const DESC: FormatDesc = FormatDesc {
        name: "q2_k",
        family: "k",
        ggml_type: Some(10),
        block_size: QK_K,
        block_bytes: 84,
        role: Role::Weight,
        dot_type: K_DOT,
        summary: "2.625 bpw K-quant: 2-bit codes, 16x16 sub-blocks with 4-bit scales and mins",
        cuda: crate::cuda("qf_q2_k"),
    };

    crate::decode::block_decoders!(BlockQ2K);

    fn encode_row(x: &[f32], weights: Option<&[f32]>, blocks: &mut [BlockQ2K]) {
        crate::encode_row::<Self>(x, weights, blocks)
    }

    #[inline(always)]
    fn encode(x: &[f32], weights: Option<&[f32]>, out: &mut BlockQ2K) {
        let a = affine::encode::<Self>(x, weights);
        out.scales = a.scales;
        out.d = a.d;
        out.dmin = a.dmin;
        pack_2bit(&a.codes, &mut out.qs);
    }
}
