//! The native (integer) dot products of the I-quants with ggml's activation formats: q8_k for
//! the eight 256-value super-block formats, q8_0 for iq4_nl — the results of ggml's CPU
//! `ggml_vec_dot_iq*_q8_K` / `ggml_vec_dot_iq4_nl_q8_0`, up to f32 rounding order.
//!
//! Every format turns a block into its integer values ([`KDot::ints`]: grid value × sign,
//! table value, ...; they all fit an `i8`) and the integer scale of each 16 values, and
//! `qforge-k`'s shared q8_k kernel takes the exact scaled integer dot with the q8_k codes and
//! multiplies it by the f32 block factors once per block (ggml's sub-block scales are
//! integers, so only the f32 rounding order differs from ggml). The grids are looked up once
//! per 8 (or 4) values and signed as one 64-bit word; the 4-bit tables are applied with
//! vectorized selects.

use crate::common::QK_K;
use crate::iq1::{Iq1M, Iq1S};
use crate::iq2::{Iq2S, Iq2Xs, Iq2Xxs};
use crate::iq3::{Iq3S, Iq3Xxs};
use crate::iq4::{BlockIq4Nl, Iq4Nl, Iq4Xs};
use crate::tables::KVALUES_IQ4NL;
use crate::unpack::KDot;
use qforge_core::NativeDot;
use qforge_k::dot::{GroupScales, Q8KDot, q8k_vec_dot};
use qforge_k::{BlockQ8K, Q8K};
use qforge_legacy::{BlockQ8_0, Q8_0};
use qforge_simd::q8::{Codes, Q8Weight, Scale, Values, vec_dot, vec_dot_rows};

macro_rules! q8k_native_dot {
    ($($fmt:ty),*) => {$(
        impl Q8KDot for $fmt {
            const HAS_MINS: bool = false;
            #[inline(always)]
            fn d_dmin(b: &Self::Block) -> (f32, f32) {
                (<Self as KDot>::d(b), 0.0)
            }
            #[inline(always)]
            fn unpack(b: &Self::Block, q: &mut [i8; QK_K]) -> GroupScales {
                let scales = <Self as KDot>::ints(b, bytemuck::cast_mut(q));
                GroupScales { scales, mins: [0; QK_K / 16] }
            }
        }
    )*};
}

q8k_native_dot!(Iq2Xxs, Iq2Xs, Iq2S, Iq3Xxs, Iq3S, Iq1S, Iq1M, Iq4Xs);

/// iq1_s / iq1_m: `qforge-k`'s q8_k kernel on the unpacked values.
macro_rules! q8k_unpacked_dot {
    ($($fmt:ty),*) => {$(
        impl NativeDot for $fmt {
            type Act = Q8K;
            fn vec_dot(w: &[Self::Block], a: &[BlockQ8K]) -> f32 {
                q8k_vec_dot::<Self>(w, a)
            }
        }
    )*};
}

q8k_unpacked_dot!(Iq1S, Iq1M);

/// The sub-block formats: the AVX2 kernel where the CPU has it, else `qforge-k`'s q8_k
/// kernel; the same exact integer block sums and the same f32 operations
/// (`sumf += (d·d_y)·isum` per block, in order), so the same bits.
macro_rules! sub_block_dot {
    ($($fmt:ty),*) => {$(
        impl NativeDot for $fmt {
            type Act = Q8K;
            fn vec_dot(w: &[Self::Block], a: &[BlockQ8K]) -> f32 {
                #[cfg(target_arch = "x86_64")]
                if let Some(v) = crate::simd::vec_dot::<Self>(w, a) {
                    return v;
                }
                q8k_vec_dot::<Self>(w, a)
            }

            fn vec_dot_rows(w: &[Self::Block], a: &[&[BlockQ8K]], out: &mut [f32]) {
                assert_eq!(a.len(), out.len(), "one output per activation row");
                #[cfg(target_arch = "x86_64")]
                if crate::simd::vec_dot_rows::<Self>(w, a, out) {
                    return;
                }
                for (o, a) in out.iter_mut().zip(a) {
                    *o = q8k_vec_dot::<Self>(w, a);
                }
            }
        }
    )*};
}

sub_block_dot!(Iq2Xxs, Iq2Xs, Iq2S, Iq3Xxs, Iq3S, Iq4Xs);

/// iq4_nl is a nibble-table format against q8_0: `qforge-simd`'s shared kernel
/// ([`vec_dot`], AVX2 where the CPU has it) computes ggml's `ggml_vec_dot_iq4_nl_q8_0`,
/// `Σ_b (d_y · d_x) · Σ kvalues_iq4nl[q]·q8`, with the exact integer sums kept in 8 lanes and
/// accumulated in f32 lanes as ggml's AVX2 kernel does.
impl Q8Weight for BlockIq4Nl {
    const UNITS: usize = 1;
    const VALUES: Values = Values::Table(KVALUES_IQ4NL);
    const SCALE: Scale = Scale::F16;

    #[inline(always)]
    fn codes(&self, _: usize) -> Codes<'_> {
        Codes::Nibbles { qs: &self.qs, qh: None }
    }

    #[inline(always)]
    fn d_bits(&self) -> u16 {
        self.d.bits()
    }
}

impl NativeDot for Iq4Nl {
    type Act = Q8_0;

    fn vec_dot(w: &[BlockIq4Nl], a: &[BlockQ8_0]) -> f32 {
        vec_dot(w, a)
    }

    fn vec_dot_rows(w: &[BlockIq4Nl], a: &[&[BlockQ8_0]], out: &mut [f32]) {
        vec_dot_rows(w, a, out)
    }
}
