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
use qforge_simd::half_lut::{self, Codes32, Fifth, GroupSink, TableGroups, Tables, f32_table, table};

/// Writes `dl * kvalues[q]` for the 32 values of the 16 bytes `qs` (low nibbles, then high
/// nibbles) to `dst` (32 elements).
#[inline(always)]
fn emit32<O: Elem>(dst: &mut [O], dl: f32, qs: &[u8]) {
    // Whole sub-blocks as fixed-size code LLVM vectorizes (codes looked up as bytes, widened,
    // multiplied): the same product per element as the loop below.
    if let (Ok(q), 32) = (<&[u8; 16]>::try_from(qs), dst.len()) {
        // (`k · dl` is `dl · k`: IEEE multiplication commutes exactly.)
        return O::from_f32_slice(&qforge_simd::lut::nibble_values::<16, 32>(q, &KVALUES_IQ4NL, dl), dst);
    }
    let (lo, hi) = dst.split_at_mut(16.min(dst.len()));
    for ((l, h), &q) in lo.iter_mut().zip(hi.iter_mut()).zip(qs) {
        *l = O::from_f32(dl * KVALUES_IQ4NL[(q & 0xf) as usize] as f32);
        *h = O::from_f32(dl * KVALUES_IQ4NL[(q >> 4) as usize] as f32);
    }
}

/// ggml's per-32 search of `quantize_row_iq4_nl_impl` (with `ntry = 7`): the scale `d` of
/// `x ~ d * kvalues[l]` with the best weighted fit, or 0 for a sub-block of (near) zeros.
/// The first fit and the 15 tries are independent: they run side by side, one per lane
/// ([`fits`]), each lane summing in ggml's order, so the bits are ggml's.
fn sub_block_scale(xb: &[f32], w: &[f32]) -> f32 {
    const NTRY: i32 = 7;
    let v0 = KVALUES_IQ4NL[0] as f32;
    let (amax, max) = signed_absmax(xb);
    if amax < GROUP_MAX_EPS {
        return 0.0;
    }
    let mut ids = [0.0f32; FITS];
    ids[0] = 1.0 / (-max / v0);
    for (id, itry) in ids[1..].iter_mut().zip(-NTRY..=NTRY) {
        *id = (itry + KVALUES_IQ4NL[0] as i32) as f32 / max;
    }
    let (sumqx, sumq2) = qforge_core::cpu::dispatch(
        #[inline(always)]
        || fits(xb, w, &ids),
    );
    let mut d = if sumq2[0] > 0.0 { sumqx[0] / sumq2[0] } else { 0.0 };
    let mut best = d * sumqx[0];
    for (&sumqx, &sumq2) in sumqx[1..].iter().zip(&sumq2[1..]) {
        if sumq2 > 0.0 && sumqx * sumqx > best * sumq2 {
            d = sumqx / sumq2;
            best = d * sumqx;
        }
    }
    d
}

/// The fits of [`sub_block_scale`]: the first and the `2·7 + 1` tries.
const FITS: usize = 16;

/// `(Σ w·q·x, Σ w·q·q)` for each inverse scale `ids[t]`, `q` the table value nearest `id·x`
/// ([`nearest_kvalue`]), summed over the values in order: lane `t` is ggml's loop for its
/// scale, and the lanes vectorize (branch-free; the search ran ~16 binary searches with
/// unpredictable branches per value).
#[inline(always)]
fn fits(xb: &[f32], w: &[f32], ids: &[f32; FITS]) -> ([f32; FITS], [f32; FITS]) {
    let (mut sumqx, mut sumq2) = ([0.0f32; FITS], [0.0f32; FITS]);
    for (&x, &wj) in xb.iter().zip(w) {
        for ((sqx, sq2), &id) in sumqx.iter_mut().zip(&mut sumq2).zip(ids) {
            let q = nearest_kvalue(id * x);
            *sqx += wj * q * x;
            *sq2 += wj * q * q;
        }
    }
    (sumqx, sumq2)
}

/// `kvalues_iq4nl` as f32.
const KV: [f32; 16] = {
    let mut t = [0.0f32; 16];
    let mut k = 0;
    while k < 16 {
        t[k] = KVALUES_IQ4NL[k] as f32;
        k += 1;
    }
    t
};

/// `KVALUES_IQ4NL[best_index_int8(v)]` without branches: `lower` the largest entry `≤ v`
/// (the first if none), `upper` the next (the last if none), each built from the table's
/// steps (small integers: exact), then ggml's `v - lower < upper - v`. Below the table that
/// picks `lower` = the first entry, above it both are the last: ggml's two early returns.
#[inline(always)]
fn nearest_kvalue(v: f32) -> f32 {
    let (mut lower, mut upper) = (KV[0], KV[1]);
    for k in 1..16 {
        let step = KV[k] - KV[k - 1];
        lower += if v >= KV[k] { step } else { 0.0 };
        if k >= 2 {
            upper += if v >= KV[k - 1] { step } else { 0.0 };
        }
    }
    if v - lower < upper - v { lower } else { upper }
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
    const DIRECT_16BIT: bool = true;
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

    #[inline(always)]
    fn decode<O: Elem>(b: &BlockIq4Nl, out: &mut [O]) {
        if let Some(dst) = out.chunks_exact_mut(32).next() {
            emit32(dst, b.d.get(), &b.qs);
        }
    }

    /// Every dtype by table ([`half_lut`]); block by block where it declines.
    #[inline(always)]
    fn decode_row<O: Elem>(blocks: &[BlockIq4Nl], out: &mut [O]) {
        if !half_lut::decode_row::<Self, O>(blocks, out) {
            qforge_core::decode_blocks_default::<Self, O>(blocks, out);
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
    const DIRECT_16BIT: bool = true;
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

    #[inline(always)]
    fn decode<O: Elem>(b: &BlockIq4Xs, out: &mut [O]) {
        let d = b.d.get();
        for (ib, dst) in out.chunks_exact_mut(32).enumerate().take(QK_K / 32) {
            emit32(dst, d * xs_scale(b, ib) as f32, &b.qs[16 * ib..16 * ib + 16]);
        }
    }

    /// Every dtype by table ([`half_lut`]); block by block where it declines.
    #[inline(always)]
    fn decode_row<O: Elem>(blocks: &[BlockIq4Xs], out: &mut [O]) {
        if !half_lut::decode_row::<Self, O>(blocks, out) {
            qforge_core::decode_blocks_default::<Self, O>(blocks, out);
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
    const ABS_ACTS: bool = true;
    const SCALE_PICK_TABLE: bool = true;
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

/// `kvalues_iq4nl` as f32, for the f16 / bf16 tables.
static KVALUES_F32: [f32; 16] = f32_table(&KVALUES_IQ4NL);

/// One group per block: `kvalues[c]·d`, `emit32`'s product.
impl TableGroups for Iq4Nl {
    /// f32 rows by table lookup too: 5.6 -> 11.8 Gel/s against `emit32` block by block (Zen 5,
    /// one thread, 1M elements; 6.5 -> 12.3 at the AVX2 level. On the first EPYC, Zen 1, the
    /// block decode was the faster, 3.0 against 1.7).
    const F32: bool = true;
    type Block = BlockIq4Nl;
    const BLOCK: usize = 32;
    /// An f16 `d` times integer values.
    const NEVER_SUBNORMAL: bool = true;
    #[inline(always)]
    fn groups(b: &BlockIq4Nl, mut f: impl GroupSink) {
        let d = b.d.get();
        f.group(Tables::One(table(&KVALUES_F32, |k| k * d)), Codes32::SplitHalf(&b.qs), Fifth::None);
    }
}

/// Eight groups per block, one per sub-block: `kvalues[c]·(d·(ls - 32))`, `emit32`'s product.
impl TableGroups for Iq4Xs {
    /// f32 rows by table lookup too: 2.5 -> 3.1 Gel/s on the EPYC against the own f32 decode.
    const F32: bool = true;
    type Block = BlockIq4Xs;
    const BLOCK: usize = QK_K;
    /// An f16 `d` times integer scales and values.
    const NEVER_SUBNORMAL: bool = true;
    #[inline(always)]
    fn groups(b: &BlockIq4Xs, mut f: impl GroupSink) {
        let d = b.d.get();
        for (ib, qs) in b.qs.as_chunks::<16>().0.iter().enumerate() {
            let dl = d * xs_scale(b, ib) as f32;
            f.group(Tables::One(table(&KVALUES_F32, |k| k * dl)), Codes32::SplitHalf(qs), Fifth::None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::best_index_int8;
    use qforge_core::rand::Rng;

    /// The branch-free nearest entry is ggml's binary search: on every entry, every midpoint
    /// (the ties), their neighbours one ulp away, beyond both ends and at random.
    #[test]
    fn nearest_kvalue_is_best_index_int8() {
        let mut vs: Vec<f32> = vec![-1e30, -200.0, 200.0, 1e30, 0.0, -0.0];
        for k in 0..16 {
            vs.push(KV[k]);
            if k < 15 {
                vs.push((KV[k] + KV[k + 1]) / 2.0);
            }
        }
        for v in vs.clone() {
            vs.extend([v.next_up(), v.next_down()]);
        }
        let mut rng = Rng::new(3);
        vs.extend((0..100_000).map(|_| ((rng.next_u64() % 1_000_000) as f32 / 1_000_000.0 - 0.5) * 300.0));
        for v in vs {
            let want = KV[best_index_int8(&KVALUES_IQ4NL, v)];
            assert_eq!(nearest_kvalue(v).to_bits(), want.to_bits(), "v = {v:e}");
        }
    }
}
