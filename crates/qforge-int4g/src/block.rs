//! The int4g block (one group) and its reference codec.

use crate::scale::ScaleKind;
use bytemuck::{Pod, Zeroable};
use qforge_core::{BlockFormat, CudaDeviceCode, DType, Elem, FormatDesc, Role};

/// The family's CUDA device code (`kernels-cuda/README.md`).
const CUDA_HEADER: &str = include_str!("../cuda/int4g.cuh");
use qforge_simd::half_lut::{self, CODES, Codes32, Fifth, GroupSink, TableGroups, Tables, table};
use std::marker::PhantomData;

/// torchao's `eps` (`torch.finfo(torch.float32).eps` = 2^-23): the smallest scale
/// `choose_qparams_affine` returns (`scale = clamp(amax / 7.5, min=eps)`). It is exactly
/// representable in f16 (a subnormal), bf16 and f32, so a stored scale is never 0.
pub const SCALE_EPS: f32 = f32::EPSILON;

/// The largest scale qforge stores: `(2 - 2^-7) · 2^124`, the largest bf16 value whose
/// product with -8 is finite in f32. torchao's formula exceeds it only for `amax > 3.17e38`,
/// where its own decode `-8 · scale` would overflow to -inf; qforge clamps instead, so every
/// encoding of finite input decodes to finite values. (f16 scales saturate at 65504 first.)
pub const SCALE_MAX: f32 = (2.0 - 1.0 / 128.0) * (1u128 << 124) as f32;

/// `(quant_max - quant_min) / 2` for int4: torchao's symmetric divisor.
pub const QRANGE_HALF: f32 = 7.5;

/// One int4g group of `2·H` weights: the scale (`S::Raw`, little-endian), then `H` bytes of
/// nibbles in ggml's q4_0 order — byte `j` holds element `j` in its low nibble and element
/// `j + H` in its high nibble — each nibble storing `q + 8` for `q` in `-8..=7`.
#[repr(C)]
pub struct BlockInt4g<S: ScaleKind, const H: usize> {
    /// The group's scale, little-endian in the variant's scale dtype (f16, bf16 or f32):
    /// `x = d · q`.
    pub d: S::Raw,
    /// The `2·H` codes as nibbles (`q + 8`), in the order above.
    pub qs: [u8; H],
}

/// Its fields as C sees them (a generic group block cannot go through `c_block!`; the CUDA
/// header's group struct is a template over the group size, checked against the registry's
/// `Layout::Groups`).
impl<S: ScaleKind, const H: usize> qforge_core::CLayout for BlockInt4g<S, H> {
    const FIELDS: &'static [qforge_core::CField] = &[
        qforge_core::CField { name: "d", ctype: "uint8_t", count: S::BYTES, array: true },
        qforge_core::CField { name: "qs", ctype: "uint8_t", count: H, array: true },
    ];
}

impl<S: ScaleKind, const H: usize> Clone for BlockInt4g<S, H> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<S: ScaleKind, const H: usize> Copy for BlockInt4g<S, H> {}

impl<S: ScaleKind, const H: usize> PartialEq for BlockInt4g<S, H> {
    fn eq(&self, o: &Self) -> bool {
        self.d == o.d && self.qs == o.qs
    }
}

impl<S: ScaleKind, const H: usize> std::fmt::Debug for BlockInt4g<S, H> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockInt4g").field("d", &S::decode(self.d)).field("qs", &&self.qs[..]).finish()
    }
}

// SAFETY: `BlockInt4g` is `#[repr(C)]` with two fields, `S::Raw` and `[u8; H]`. `ScaleKind` is
// sealed and its only implementations use `[u8; 2]` / `[u8; 4]` as `Raw`, so both fields are
// byte arrays: alignment 1, hence no padding anywhere, and every bit pattern (all zeros
// included) is a valid value. The struct holds no pointers or interior mutability and is
// `Copy + 'static` (the implementations above). `Registered::NEW` additionally checks at
// compile time that its size equals `DESC.block_bytes` and its alignment is 1.
#[allow(unsafe_code)]
unsafe impl<S: ScaleKind, const H: usize> Zeroable for BlockInt4g<S, H> {}
// SAFETY: see the comment on `Zeroable` above.
#[allow(unsafe_code)]
unsafe impl<S: ScaleKind, const H: usize> Pod for BlockInt4g<S, H> {}

/// The int4g format with group size `2·H` and scale dtype `S` (a [`BlockFormat`]).
pub struct Int4g<S: ScaleKind, const H: usize>(PhantomData<fn() -> S>);

impl<S: ScaleKind, const H: usize> Int4g<S, H> {
    /// Elements per group.
    pub const GROUP: usize = {
        assert!(H >= 16 && H.is_power_of_two(), "int4g groups are powers of two >= 32");
        2 * H
    };

    /// torchao's scale for a group with largest magnitude `amax`, before rounding to `S`
    /// (capped at [`SCALE_MAX`], which only extreme input near `f32::MAX` reaches).
    #[inline]
    pub fn torchao_scale(amax: f32) -> f32 {
        (amax / QRANGE_HALF).clamp(SCALE_EPS, SCALE_MAX)
    }

    /// Writes `x` (at most `2·H` values, the rest padding) quantized with the stored scale
    /// `raw`: `q = clamp(round_half_even(x / scale), -8, 7)`; padded positions get `q = 0`.
    fn encode_with(x: &[f32], raw: S::Raw, out: &mut BlockInt4g<S, H>) {
        let s = S::decode(raw);
        out.d = raw;
        out.qs = [0x88; H];
        let q = |v: f32| (qforge_core::round::round_ties_even(v / s).clamp(-8.0, 7.0) as i32 + 8) as u8;
        let (lo, hi) = x.split_at(x.len().min(H));
        for (b, &v) in out.qs.iter_mut().zip(lo) {
            *b = (*b & 0xF0) | q(v);
        }
        for (b, &v) in out.qs.iter_mut().zip(hi) {
            *b = (*b & 0x0F) | (q(v) << 4);
        }
    }

    /// `Σ w·(x − decode)²` in f64 over the real elements.
    fn weighted_sse(x: &[f32], w: &[f32], b: &BlockInt4g<S, H>) -> f64 {
        let s = S::decode(b.d);
        x.iter()
            .zip(w)
            .enumerate()
            .map(|(i, (&v, &wi))| {
                let y = nibble(&b.qs, i) as f32 * s;
                f64::from(wi) * (f64::from(v) - f64::from(y)).powi(2)
            })
            .sum()
    }

    /// With importance weights: torchao's encoding, then other scales (fixed divisors of amax
    /// and weighted least-squares refits); a candidate replaces the current best only when it
    /// strictly lowers the weighted squared error, so the result is never worse than
    /// torchao's under the given weights.
    fn refine(x: &[f32], w: &[f32], amax: f32, out: &mut BlockInt4g<S, H>) {
        let mut best = Self::weighted_sse(x, w, out);
        if best == 0.0 {
            return;
        }
        let mut trial = *out;
        let mut try_scale = |s: f32, out: &mut BlockInt4g<S, H>, best: &mut f64| {
            if !(s.is_finite() && s > 0.0) {
                return;
            }
            Self::encode_with(x, S::encode(s.clamp(SCALE_EPS, SCALE_MAX)), &mut trial);
            let e = Self::weighted_sse(x, w, &trial);
            if e < *best {
                *best = e;
                *out = trial;
            }
        };
        for div in [8.0, 7.75, 7.25, 7.0, 6.5, 6.0, 5.5] {
            try_scale(amax / div, out, &mut best);
        }
        for _ in 0..2 {
            // Weighted least squares for the scale given the current codes.
            let (mut num, mut den) = (0f64, 0f64);
            for (i, (&v, &wi)) in x.iter().zip(w).enumerate() {
                let q = f64::from(nibble(&out.qs, i));
                num += f64::from(wi) * f64::from(v) * q;
                den += f64::from(wi) * q * q;
            }
            if den > 0.0 {
                try_scale((num / den) as f32, out, &mut best);
            }
        }
    }
}

/// The signed code of element `i` of a group (`i < 2·H`).
#[inline(always)]
pub(crate) fn nibble<const H: usize>(qs: &[u8; H], i: usize) -> i32 {
    let b = qs[i % H];
    i32::from(if i < H { b & 0x0F } else { b >> 4 }) - 8
}

impl<S: ScaleKind, const H: usize> BlockFormat for Int4g<S, H> {
    type Block = BlockInt4g<S, H>;
    const DIRECT_16BIT: bool = true;
    const DESC: FormatDesc = FormatDesc {
        name: "int4g",
        family: "int4g",
        ggml_type: None,
        block_size: Self::GROUP,
        block_bytes: S::BYTES + H,
        role: Role::Weight,
        dot_type: None,
        summary: "4-5 bpw symmetric group-wise int4 (torchao 8da4w): one scale per group; \
                  default group 128 with f16 scales, --group-size any power of two 32..4096",
        // Device code for the registered variant only (group 128, f16 scales): the kernels are
        // found by format name, which every variant shares.
        cuda: if H == 64 && matches!(S::DTYPE, DType::F16) {
            Some(CudaDeviceCode { header: CUDA_HEADER, header_file: "int4g.cuh", traits: "qf_int4g" })
        } else {
            None
        },
    };

    /// `w = q · scale`, the product in f32, then `O::from_f32`. Writes `out.len()` (at most
    /// `2·H`) values, so a partial last group needs no scratch buffer.
    #[inline(always)]
    fn decode<O: Elem>(b: &Self::Block, out: &mut [O]) {
        let s = S::decode(b.d);
        let n = out.len().min(2 * H);
        let (lo, hi) = out[..n].split_at_mut(n.min(H));
        for (o, &q) in lo.iter_mut().zip(&b.qs) {
            *o = O::from_f32((i32::from(q & 0x0F) - 8) as f32 * s);
        }
        for (o, &q) in hi.iter_mut().zip(&b.qs) {
            *o = O::from_f32((i32::from(q >> 4) - 8) as f32 * s);
        }
    }

    /// torchao's `choose_qparams_affine` (symmetric, eps = 2^-23) and
    /// `quantize_affine` for one group, from its real elements only.
    fn encode(x: &[f32], weights: Option<&[f32]>, out: &mut Self::Block) {
        let amax = x.iter().fold(0f32, |m, v| m.max(v.abs()));
        Self::encode_with(x, S::encode(Self::torchao_scale(amax)), out);
        if let Some(w) = weights {
            Self::refine(x, w, amax, out);
        }
    }

    #[inline(always)]
    fn decode_row<O: Elem>(blocks: &[Self::Block], out: &mut [O]) {
        if half_lut::decode_row::<Self, O>(blocks, out) {
            return;
        }
        for (b, dst) in blocks.iter().zip(out.chunks_mut(2 * H)) {
            Self::decode(b, dst);
        }
    }
}

/// The group's `2·H` codes as 32-element groups, all on one table `(c - 8)·scale` (`decode`'s
/// product): a 32-element group in split-half order; a longer one as the low nibbles of its
/// bytes (elements `0..H`), then their high nibbles.
impl<S: ScaleKind, const H: usize> TableGroups for Int4g<S, H> {
    type Block = BlockInt4g<S, H>;
    const BLOCK: usize = 2 * H;
    /// f16 scales times `c - 8`; bf16 and f32 scales reach below 2^-126.
    const NEVER_SUBNORMAL: bool = matches!(S::DTYPE, qforge_core::DType::F16);
    #[inline(always)]
    fn groups(b: &Self::Block, mut f: impl GroupSink) {
        let s = S::decode(b.d);
        let t = table(&CODES, |c| (c - 8.0) * s);
        if let Ok(q) = <&[u8; 16]>::try_from(&b.qs[..]) {
            return f.group(Tables::One(t), Codes32::SplitHalf(q), Fifth::None);
        }
        let (chunks, _) = b.qs.as_chunks::<32>();
        for q in chunks {
            f.group(Tables::One(t), Codes32::Low(q), Fifth::None);
        }
        for q in chunks {
            f.group(Tables::One(t), Codes32::High(q), Fifth::None);
        }
    }
}
