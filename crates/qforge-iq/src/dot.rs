//! The native (integer) dot products of the I-quants with ggml's activation formats: q8_k for
//! the eight 256-value super-block formats, q8_0 for iq4_nl — the results of ggml's CPU
//! `ggml_vec_dot_iq*_q8_K` / `ggml_vec_dot_iq4_nl_q8_0`, up to f32 rounding order.
//!
//! Every format turns a block into its integer values ([`KDot::ints`]: grid value × sign,
//! table value, ...; they all fit an `i8`) and the integer scale of each 16 values (ggml's
//! sub-block scales are integers, so only the f32 rounding order differs from ggml).
//!
//! * The sub-block formats (iq2_xxs, iq2_xs, iq2_s, iq3_xxs, iq3_s, iq4_xs, iq1_s, iq1_m:
//!   [`SubBlocks`]) compute [`LANES`] exact `i32` lanes per block, as ggml's AVX2 kernels do:
//!   lane `j` holds, over the 8 sub-blocks `ib`, `scale[2ib + j/4] · Σ_{e<4}
//!   v[32ib+4j+e]·q8[32ib+4j+e]` (`vpmaddubsw` then `vpmaddwd` with the scales). The block
//!   then goes into one f32 sum as its exact total: `acc = fma(T, d·d_y, acc)`, `T = Σ_j
//!   lane[j]`, block by block. That is the f32 order of the packed layout's kernels
//!   (`qforge_k::packed`), so packing changes no row's bits, and the mat-mul's tile kernel
//!   (`qforge_k::packed::plain_tile`, a tile of weight rows a row per lane) gives every row
//!   the bits of its mat-vec. [`sub_block_vec_dot_portable`] is the reference, the AVX2
//!   kernel (`simd.rs`) gives the same bits: it reduces two blocks' lanes at once
//!   (`qforge_simd::totals`), so there is no horizontal sum per block. (Until 2026-11-30 the
//!   lanes went into eight f32 lanes, `acc[j] = fma(d·d_y, lane[j], acc[j])`, which no tile of
//!   rows in lanes can reproduce.)
//!   iq1_s / iq1_m's values are `8g ± 1` (ggml's `g ± 1/8`, times 8).
//! * iq4_nl: `qforge-simd`'s q8_0 kernel.

use crate::common::QK_K;
use crate::iq1::{Iq1M, Iq1S};
use crate::iq2::{Iq2S, Iq2Xs, Iq2Xxs};
use crate::iq3::{Iq3S, Iq3Xxs};
use crate::iq4::{BlockIq4Nl, Iq4Nl, Iq4Xs};
use crate::tables::KVALUES_IQ4NL;
use crate::unpack::{KDot, SubBlocks};
use qforge_core::NativeDot;
use qforge_k::{BlockQ8K, Q8K};
use qforge_legacy::Q8_0;
use qforge_simd::q8::{Codes, Q8Weight, Scale, Values};

/// Integer lanes per block of the sub-block formats' dot.
pub(crate) const LANES: usize = 8;

/// The [`LANES`] exact integer lanes of one block of a [`SubBlocks`] format against a q8_k
/// block (see the module documentation). Exact in `i32`: a lane is at most
/// `8 · 2 · 2 · 127 · 128 · 32 < 2^24`.
#[inline(always)]
pub(crate) fn sub_block_lanes<F: SubBlocks>(b: &F::Block, a: &BlockQ8K) -> [i32; LANES] {
    let mut v = [[0i8; 8]; QK_K / 8];
    let scales = <F as KDot>::ints(b, &mut v);
    let v: [i8; QK_K] = bytemuck::cast(v);
    let mut lanes = [0i32; LANES];
    for (ib, (v, q)) in v.chunks_exact(32).zip(a.qs.chunks_exact(32)).enumerate() {
        for (j, (v, q)) in v.chunks_exact(4).zip(q.chunks_exact(4)).enumerate() {
            let dot: i32 = v.iter().zip(q).map(|(&v, &q)| i32::from(v) * i32::from(q)).sum();
            lanes[j] += i32::from(scales[2 * ib + j / 4]) * dot;
        }
    }
    lanes
}

/// The reference dot of a [`SubBlocks`] row with a q8_k row (extra blocks on either side are
/// ignored): per block the exact total `T` of its lanes ([`sub_block_lanes`]),
/// `acc = fma(T, d·d_y, acc)`.
pub(crate) fn sub_block_vec_dot_portable<F: SubBlocks>(w: &[F::Block], a: &[BlockQ8K]) -> f32 {
    let mut acc = 0f32;
    for (b, a) in w.iter().zip(a) {
        let t: i32 = sub_block_lanes::<F>(b, a).iter().sum();
        acc = (t as f32).mul_add(<F as KDot>::d(b) * a.d.get(), acc);
    }
    acc
}

/// The sub-block formats: the AVX2 kernel where the CPU has it, else
/// [`sub_block_vec_dot_portable`], with the same bits; a packed layout, each format's
/// values re-coded for `qforge-k`'s row-interleaved kernel (`crate::packed`); and that
/// kernel's mat-mul tile on the plain blocks.
macro_rules! sub_block_dot {
    ($($fmt:ty),*) => {$(
        impl NativeDot for $fmt {
            qforge_k::packed_native_dot_items!();

            fn vec_dot_tile(w: &[Self::Block], n: usize, a: &[&[BlockQ8K]], out: &mut [f32], stride: usize) -> bool {
                qforge_k::packed::plain_tile::<Self>(w, n, a, out, stride)
            }

            const TILE_ROWS: usize = qforge_k::packed::PLAIN_TILE_ROWS;

            type Act = Q8K;
            fn vec_dot(w: &[Self::Block], a: &[BlockQ8K]) -> f32 {
                #[cfg(target_arch = "x86_64")]
                if let Some(v) = crate::simd::vec_dot::<Self>(w, a) {
                    return v;
                }
                sub_block_vec_dot_portable::<Self>(w, a)
            }

            fn vec_dot_rows(w: &[Self::Block], a: &[&[BlockQ8K]], out: &mut [f32]) {
                assert_eq!(a.len(), out.len(), "one output per activation row");
                #[cfg(target_arch = "x86_64")]
                if crate::simd::vec_dot_rows::<Self>(w, a, out) {
                    return;
                }
                for (o, a) in out.iter_mut().zip(a) {
                    *o = sub_block_vec_dot_portable::<Self>(w, a);
                }
            }

            fn vec_dot_weight_rows(w: &[Self::Block], a: &[BlockQ8K], out: &mut [f32]) {
                if out.is_empty() {
                    return;
                }
                assert!(w.len().is_multiple_of(out.len()), "whole weight rows");
                #[cfg(target_arch = "x86_64")]
                if crate::simd::vec_dot_weight_rows::<Self>(w, a, out) {
                    return;
                }
                let n = w.len() / out.len();
                for (j, o) in out.iter_mut().enumerate() {
                    *o = sub_block_vec_dot_portable::<Self>(&w[j * n..(j + 1) * n], a);
                }
            }
        }
    )*};
}

sub_block_dot!(Iq2Xxs, Iq2Xs, Iq2S, Iq3Xxs, Iq3S, Iq1S, Iq1M, Iq4Xs);

/// iq4_nl is a nibble-table format against q8_0: `qforge-simd`'s shared kernel
/// ([`qforge_simd::q8::vec_dot`], AVX2 where the CPU has it) computes ggml's `ggml_vec_dot_iq4_nl_q8_0`,
/// `Σ_b (d_y · d_x) · Σ kvalues_iq4nl[q]·q8`, with the exact integer sums kept in 8 lanes and
/// accumulated in f32 lanes as ggml's AVX2 kernel does.
impl Q8Weight for BlockIq4Nl {
    const UNITS: usize = 1;
    const VALUES: Values = Values::Table(KVALUES_IQ4NL);
    const SCALE: Scale = Scale::F16;
    const PACK_BITS: u32 = 4;

    #[inline(always)]
    fn codes(&self, _: usize) -> Codes<'_> {
        Codes::Nibbles { qs: &self.qs, qh: None }
    }

    #[inline(always)]
    fn d_bits(&self) -> u16 {
        self.d.bits()
    }
}

// The shared q8_0 kernel.
qforge_simd::q8_native_dot!(Iq4Nl => Q8_0);
