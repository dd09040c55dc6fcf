//! The non-linear 4-bit formats iq4_nl (32-value blocks) and iq4_xs (256-value super-blocks
//! with 6-bit sub-block scales): `x = scale * kvalues_iq4nl[q]` with a 16-entry table of
//! non-uniformly spaced values. Both encoders are ggml's `quantize_row_iq4_nl_impl`.

use crate::common::{QK_K, best_index_int8};
use crate::tables::KVALUES_IQ4NL;
use crate::unpack::{SubBlock, SubBlocks, per32};
use bytemuck::{Pod, Zeroable};
use qforge_core::le::{F16Le, U16Le};
use qforge_core::{BlockFormat, Elem, FormatDesc, Role};
use qforge_ggml_search::{GROUP_MAX_EPS, NoImatrix, nearest_int, padded, search_weights, signed_absmax, sum_sq};

/// Writes `dl * kvalues[q]` for the 32 values of the 16 bytes `qs` (low nibbles, then high
/// nibbles) to `dst` (32 elements).
#[inline(always)]
fn emit32<O: Elem>(dst: &mut [O], dl: f32, qs: &[u8]) {
    let (lo, hi) = dst.split_at_mut(16.min(dst.len()));
    for ((l, h), &q) in lo.iter_mut().zip(hi.iter_mut()).zip(qs) {
        *l = O::from_f32(dl * KVALUES_IQ4NL[(q & 0xf) as usize] as f32);
        *h = O::from_f32(dl * KVALUES_IQ4NL[(q >> 4) as usize] as f32);
    }
}

/// ggml's per-32 search of `quantize_row_iq4_nl_impl` (with `ntry = 7`): the scale `d` of
/// `x ~ d * kvalues[l]` with the best weighted fit, or 0 for a sub-block of (near) zeros.
fn sub_block_scale(xb: &[f32], w: &[f32]) -> f32 {
    const NTRY: i32 = 7;
    let v0 = KVALUES_IQ4NL[0] as f32;
    let (amax, max) = signed_absmax(xb);
    if amax < GROUP_MAX_EPS {
        return 0.0;
    }
    let fit = |id: f32| {
        let (mut sumqx, mut sumq2) = (0.0f32, 0.0f32);
        for (&x, &wj) in xb.iter().zip(w) {
            let q = KVALUES_IQ4NL[best_index_int8(&KVALUES_IQ4NL, id * x)] as f32;
            sumqx += wj * q * x;
            sumq2 += wj * q * q;
        }
        (sumqx, sumq2)
    };
    let d = -max / v0;
    let (sumqx, sumq2) = fit(1.0 / d);
    let mut d = if sumq2 > 0.0 { sumqx / sumq2 } else { 0.0 };
    let mut best = d * sumqx;
    for itry in -NTRY..=NTRY {
        let (sumqx, sumq2) = fit((itry + KVALUES_IQ4NL[0] as i32) as f32 / max);
        if sumq2 > 0.0 && sumqx * sumqx > best * sumq2 {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    d
}

/// Packs codes `L` (one per value, 32 per sub-block) into nibbles: byte `j` of sub-block
/// `i` holds values `j` (low) and `j + 16` (high).
fn pack(l: &[u8], q4: &mut [u8]) {
    for (q, l) in q4.chunks_exact_mut(16).zip(l.chunks_exact(32)) {
        for j in 0..16 {
            q[j] = l[j] | (l[16 + j] << 4);
        }
    }
}

/// `sigma2 = 2 * sum(x^2) / n` the way ggml writes it (`sigma2 *= 2.f / n`), and the search
/// weights of the `n` real values (0 for padding).
fn weights<const N: usize>(xs: &[f32; N], n: usize, qw: Option<&[f32]>) -> [f32; N] {
    let s2 = sum_sq(xs) * (2.0f32 / n.max(1) as f32);
    let mut w = [0.0f32; N];
    search_weights(xs, n, qw, s2, NoImatrix::XSquared, &mut w);
    w
}

qforge_core::c_block! {
    /// ggml's `block_iq4_nl` (18 bytes, 4.5 bpw).
    #[repr(C)]
    #[derive(Clone, Copy, Debug, Pod, Zeroable)]
    pub struct BlockIq4Nl {
        /// The block's f16 super-scale.
        pub d: F16Le,
        /// 4-bit indices into `kvalues_iq4nl`: byte `j` holds values `j` (low) and `j + 16`.
        pub qs: [u8; 16],
    }
}

/// The iq4_nl format (GGML type 20).
pub struct Iq4Nl;

impl BlockFormat for Iq4Nl {
    type Block = BlockIq4Nl;
    const CUDA_CODES32: bool = true;
    const DESC: FormatDesc = FormatDesc {
        name: "iq4_nl",
        family: "iq",
        ggml_type: Some(20),
        block_size: 32,
        block_bytes: 18,
        role: Role::Weight,
        dot_type: Some("q8_0"),
        summary: "4.5 bpw non-linear quant: 4-bit indices into a 16-value table, f16 scale per 32",
        cuda: crate::device_code("qf_iq4_nl"),
    };

    fn decode<O: Elem>(b: &BlockIq4Nl, out: &mut [O]) {
        if let Some(dst) = out.chunks_exact_mut(32).next() {
            emit32(dst, b.d.get(), &b.qs);
        }
    }

    fn encode(x: &[f32], weights_in: Option<&[f32]>, out: &mut BlockIq4Nl) {
        let (xs, n) = padded::<32>(x);
        let w = weights(&xs, n, weights_in);
        let d = sub_block_scale(&xs, &w);
        out.d = F16Le::from_f32(d);
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        let l = xs.map(|v| best_index_int8(&KVALUES_IQ4NL, id * v) as u8);
        pack(&l, &mut out.qs);
    }
}

qforge_core::c_block! {
    /// ggml's `block_iq4_xs` (136 bytes, 4.25 bpw).
    #[repr(C)]
    #[derive(Clone, Copy, Debug, Pod, Zeroable)]
    pub struct BlockIq4Xs {
        /// The block's f16 super-scale.
        pub d: F16Le,
        /// High 2 bits of the eight 6-bit sub-block scales (biased by 32).
        pub scales_h: U16Le,
        /// Low 4 bits of the sub-block scales, two per byte.
        pub scales_l: [u8; 4],
        /// 4-bit indices into `kvalues_iq4nl`, 16 bytes per 32 values as in iq4_nl.
        pub qs: [u8; 128],
    }
}

/// The iq4_xs format (GGML type 23).
pub struct Iq4Xs;

impl BlockFormat for Iq4Xs {
    type Block = BlockIq4Xs;
    const CUDA_CODES32: bool = true;
    const DESC: FormatDesc = FormatDesc {
        name: "iq4_xs",
        family: "iq",
        ggml_type: Some(23),
        block_size: QK_K,
        block_bytes: 136,
        role: Role::Weight,
        dot_type: Some("q8_k"),
        summary: "4.25 bpw non-linear quant: 16-value table, 6-bit scales per 32, f16 scale per 256",
        cuda: crate::device_code("qf_iq4_xs"),
    };

    fn decode<O: Elem>(b: &BlockIq4Xs, out: &mut [O]) {
        let d = b.d.get();
        for (ib, dst) in out.chunks_exact_mut(32).enumerate().take(QK_K / 32) {
            emit32(dst, d * xs_scale(b, ib) as f32, &b.qs[16 * ib..16 * ib + 16]);
        }
    }

    fn encode(x: &[f32], weights_in: Option<&[f32]>, out: &mut BlockIq4Xs) {
        let (xs, n) = padded::<QK_K>(x);
        let w = weights(&xs, n, weights_in);
        let mut scales = [0.0f32; QK_K / 32];
        let (mut max_scale, mut amax_scale) = (0.0f32, 0.0f32);
        for (ib, s) in scales.iter_mut().enumerate() {
            *s = sub_block_scale(&xs[32 * ib..32 * ib + 32], &w[32 * ib..32 * ib + 32]);
            if s.abs() > amax_scale {
                amax_scale = s.abs();
                max_scale = *s;
            }
        }
        *out = Zeroable::zeroed();
        let d = -max_scale / 32.0;
        out.d = F16Le::from_f32(d);
        let id = if d != 0.0 { 1.0 / d } else { 0.0 };
        let mut l = [0u8; QK_K];
        let mut scales_h = 0u16;
        for (ib, &s) in scales.iter().enumerate() {
            let ls = nearest_int(id * s).clamp(-32, 31);
            let dl = d * ls as f32;
            let idl = if dl != 0.0 { 1.0 / dl } else { 0.0 };
            for (lj, &v) in l[32 * ib..32 * ib + 32].iter_mut().zip(&xs[32 * ib..32 * ib + 32]) {
                *lj = best_index_int8(&KVALUES_IQ4NL, idl * v) as u8;
            }
            let ls = (ls + 32) as u8;
            out.scales_l[ib / 2] |= (ls & 0xf) << (4 * (ib % 2));
            scales_h |= ((ls >> 4) as u16) << (2 * (ib % 8));
        }
        out.scales_h = U16Le::new(scales_h);
        pack(&l, &mut out.qs);
    }
}

/// The signed 6-bit scale (`ls - 32`) of iq4_xs's 32-value sub-block `ib`.
#[inline(always)]
fn xs_scale(b: &BlockIq4Xs, ib: usize) -> i32 {
    let sh = b.scales_h.get() as i32;
    let ls = ((b.scales_l[ib / 2] as i32 >> (4 * (ib % 2))) & 0xf) | (((sh >> (2 * ib)) & 3) << 4);
    ls - 32
}

/// ggml's `ggml_vec_dot_iq4_xs_q8_K`: per 32 values `(d·d_y)·(ls - 32) · Σ kvalues[q]·q8`;
/// the sub-block scales are integers, so the block's sums are taken exactly in integer lanes
/// and scaled once per block (as ggml's SIMD kernels do; `dot::sub_block_lanes`).
impl SubBlocks for Iq4Xs {
    type Pre = ();
    #[inline(always)]
    fn d_bits(b: &BlockIq4Xs) -> u16 {
        b.d.bits()
    }

    #[inline(always)]
    fn sub_block<'a>(b: &'a BlockIq4Xs, _pre: &(), ib: usize) -> SubBlock<'a> {
        let qs: &[[u8; 16]; QK_K / 32] = bytemuck::cast_ref(&b.qs);
        SubBlock::Nibbles(&qs[ib & 7])
    }

    #[inline(always)]
    fn scales(b: &BlockIq4Xs) -> [i16; QK_K / 16] {
        per32(|ib| xs_scale(b, ib) as i16)
    }
}
