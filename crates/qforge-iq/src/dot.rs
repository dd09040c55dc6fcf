//! The native (integer) dot products of the I-quants with ggml's activation formats: q8_k for
//! the eight 256-value super-block formats, q8_0 for iq4_nl — the results of ggml's CPU
//! `ggml_vec_dot_iq*_q8_K` / `ggml_vec_dot_iq4_nl_q8_0`, up to f32 rounding order.
//!
//! Every format turns a block into its integer values ([`KDot::ints`]: grid value × sign,
//! table value, ...; they all fit an `i8`), the driver [`q8k_dot`] takes the exact integer dot
//! with the q8_k codes per 16 values, and the format applies its sub-block scales and the f32
//! block scales in ggml's order ([`KDot::accumulate`]). The integer loops run over fixed-size
//! arrays and vectorize; the grids are looked up once per 8 (or 4) values.

use crate::common::QK_K;
use crate::iq1::{Iq1M, Iq1S};
use crate::iq2::{Iq2S, Iq2Xs, Iq2Xxs};
use crate::iq3::{Iq3S, Iq3Xxs};
use crate::iq4::{BlockIq4Nl, Iq4Nl, Iq4Xs};
use crate::tables::KVALUES_IQ4NL;
use qforge_core::{BlockFormat, NativeDot};
use qforge_k::{BlockQ8K, Q8K};
use qforge_legacy::{BlockQ8_0, Q8_0};

/// `Σ w[i]·a[i]` in i32 over fixed-length lanes (vectorizes: widen, multiply, add).
#[inline(always)]
pub(crate) fn idot<const N: usize>(w: &[i8; N], a: &[i8; N]) -> i32 {
    // i8 · i8 fits an i16 (|-128 · -128| = 2^14): the widening multiply-add pattern.
    w.iter().zip(a).map(|(&x, &y)| i32::from(i16::from(x) * i16::from(y))).sum()
}

/// The 8 values of grid word `grid` (bytes, each < 128), negated where bit `j` of `signs`
/// is set (ggml's `signs & kmask_iq2xs[j] ? -1 : 1`).
#[inline(always)]
pub(crate) fn signed8(grid: u64, signs: u8) -> [i8; 8] {
    let (g, s) = (grid.to_le_bytes(), &SIGN_MULT[usize::from(signs)]);
    std::array::from_fn(|j| g[j] as i8 * s[j])
}

/// `SIGN_MULT[b][j]` is −1 where bit `j` of `b` is set, else 1.
static SIGN_MULT: [[i8; 8]; 256] = {
    let mut t = [[1i8; 8]; 256];
    let mut b = 0;
    while b < 256 {
        let mut j = 0;
        while j < 8 {
            if b >> j & 1 != 0 {
                t[b][j] = -1;
            }
            j += 1;
        }
        b += 1;
    }
    t
};

/// `table[q]` for the 32 codes of the 16 bytes `qs`: low nibbles (values 0..16), then high
/// nibbles (values 16..32), as iq4_nl / iq4_xs pack them.
#[inline(always)]
pub(crate) fn nibble_values(qs: &[u8; 16], table: &[i8; 16]) -> [i8; 32] {
    let mut out = [0i8; 32];
    let (lo, hi) = out.split_at_mut(16);
    for ((l, h), &q) in lo.iter_mut().zip(hi.iter_mut()).zip(qs) {
        *l = table[usize::from(q & 0x0F)];
        *h = table[usize::from(q >> 4)];
    }
    out
}

/// A 256-value I-quant dotted with q8_k activations.
pub(crate) trait KDot: BlockFormat {
    /// ggml's final factor of the sum (its `0.125f * sumf` for iq2, `0.25f` for iq3_xxs).
    const FINAL: f32 = 1.0;

    /// The block's integer values in element order, as 32 groups of 8.
    fn ints(b: &Self::Block, w: &mut [[i8; 8]; QK_K / 8]);

    /// Adds the block's contribution to `sumf`, from the exact integer sums `sums[k]` of
    /// `ints · q8` over values `16k..16k + 16`, in ggml's f32 order.
    fn accumulate(b: &Self::Block, y: &BlockQ8K, sums: &[i32; QK_K / 16], sumf: &mut f32);
}

/// The dot of a row of `F` blocks with as many q8_k blocks.
#[inline]
pub(crate) fn q8k_dot<F: KDot>(w: &[F::Block], a: &[BlockQ8K]) -> f32 {
    let mut sumf = 0.0f32;
    let mut v = [[0i8; 8]; QK_K / 8];
    for (x, y) in w.iter().zip(a) {
        F::ints(x, &mut v);
        let wv: &[[i8; 16]; QK_K / 16] = bytemuck::cast_ref(&v);
        let av: &[[i8; 16]; QK_K / 16] = bytemuck::cast_ref(&y.qs);
        let sums: [i32; QK_K / 16] = std::array::from_fn(|k| idot(&wv[k], &av[k]));
        F::accumulate(x, y, &sums, &mut sumf);
    }
    F::FINAL * sumf
}

/// `Σ_k (sums[2k] + sums[2k+1]) · ls(k)` over the 8 sub-blocks of 32 values.
#[inline(always)]
pub(crate) fn scaled32(sums: &[i32; QK_K / 16], ls: impl Fn(usize) -> i32) -> i32 {
    (0..QK_K / 32).map(|k| (sums[2 * k] + sums[2 * k + 1]) * ls(k)).sum()
}

/// `Σ_k sums[k] · ls(k)` over the 16 sub-blocks of 16 values.
#[inline(always)]
pub(crate) fn scaled16(sums: &[i32; QK_K / 16], ls: impl Fn(usize) -> i32) -> i32 {
    sums.iter().enumerate().map(|(k, &s)| s * ls(k)).sum()
}

macro_rules! q8k_native_dot {
    ($($fmt:ty),*) => {$(
        impl NativeDot for $fmt {
            type Act = Q8K;
            fn vec_dot(w: &[Self::Block], a: &[BlockQ8K]) -> f32 {
                q8k_dot::<Self>(w, a)
            }
        }
    )*};
}

q8k_native_dot!(Iq2Xxs, Iq2Xs, Iq2S, Iq3Xxs, Iq3S, Iq1S, Iq1M, Iq4Xs);

impl NativeDot for Iq4Nl {
    type Act = Q8_0;

    /// ggml's `ggml_vec_dot_iq4_nl_q8_0`: `Σ_b (d_y · d_x) · Σ kvalues_iq4nl[q]·q8`.
    fn vec_dot(w: &[BlockIq4Nl], a: &[BlockQ8_0]) -> f32 {
        let mut sumf = 0.0f32;
        for (x, y) in w.iter().zip(a) {
            let d = y.d.get() * x.d.get();
            sumf += d * idot(&nibble_values(&x.qs, &KVALUES_IQ4NL), &y.qs) as f32;
        }
        sumf
    }
}
