//! The integer dot products (ggml's `ggml_vec_dot_*_q8_*`): how each legacy block unpacks for
//! `qforge-simd`'s shared q8_0 / q8_1 kernel ([`qforge_simd::q8`]), and the activation side.
//!
//! Per block pair the 32 quant products are summed exactly in integers, then scaled in f32 as
//! ggml's AVX2 kernels do: `(d_w·d_a)·sumi` for the symmetric formats, plus `m_w·s_a` for the
//! affine ones (q4_1, q5_1), where `s_a = d_a·Σq_a` is q8_1's precomputed sum. The q8_1 · q8_1
//! self-dot (qforge's own: ggml has no vec_dot for q8_1) is the symmetric formula.

use crate::block::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0, BlockQ8_1, QK};
use qforge_simd::q8::{Codes, Q8Act, Q8Weight, Scale, Values};

macro_rules! act_block {
    ($($block:ident $(, s = $s:ident)?);*) => {$(
        impl Q8Act for $block {
            #[inline(always)]
            fn d_bits(&self) -> u16 {
                self.d.bits()
            }
            $(
            #[inline(always)]
            fn s_bits(&self) -> u16 {
                self.$s.bits()
            }
            )?
            #[inline(always)]
            fn qs(&self) -> &[i8; QK] {
                &self.qs
            }
        }
    )*};
}

act_block!(BlockQ8_0; BlockQ8_1, s = s);

/// One 32-element unit per block, one f16 scale; `$values` the meaning of the codes, `$bits`
/// their width in the packed layout (0: none), `$codes` (a closure-like body over `b`) where
/// they are, `m` the affine offset if any.
macro_rules! weight_block {
    ($block:ident, $values:expr, $bits:expr, |$b:ident| $codes:expr $(, m = $m:ident)?) => {
        impl Q8Weight for $block {
            const UNITS: usize = 1;
            const VALUES: Values = $values;
            const SCALE: Scale = Scale::F16;
            const AFFINE: bool = weight_block!(@affine $($m)?);
            const PACK_BITS: u32 = $bits;
            #[inline(always)]
            fn codes(&self, _: usize) -> Codes<'_> {
                let $b = self;
                $codes
            }
            #[inline(always)]
            fn d_bits(&self) -> u16 {
                self.d.bits()
            }
            $(
            #[inline(always)]
            fn m_bits(&self) -> u16 {
                self.$m.bits()
            }
            )?
        }
    };
    (@affine) => { false };
    (@affine $m:ident) => { true };
}

weight_block!(BlockQ4_0, Values::Offset(8), 4, |b| Codes::Nibbles { qs: &b.qs, qh: None });
weight_block!(BlockQ4_1, Values::Unsigned, 4, |b| Codes::Nibbles { qs: &b.qs, qh: None }, m = m);
weight_block!(BlockQ5_0, Values::Offset(16), 5, |b| Codes::Nibbles { qs: &b.qs, qh: Some(b.qh) });
weight_block!(BlockQ5_1, Values::Unsigned, 5, |b| Codes::Nibbles { qs: &b.qs, qh: Some(b.qh) }, m = m);
weight_block!(BlockQ8_0, Values::Signed8, 8, |b| Codes::Bytes(&b.qs));
weight_block!(BlockQ8_1, Values::Signed8, 8, |b| Codes::Bytes(&b.qs));

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block::LegacyBlock;
    use qforge_core::rand::Rng;

    /// The shared kernel's unpacking of every legacy block gives the codec's decode-domain
    /// quants (affine formats: the unsigned codes), for random blocks.
    #[test]
    fn unit_values_are_the_codec_quants() {
        fn check<B: LegacyBlock + Q8Weight>(rng: &mut Rng) {
            for _ in 0..500 {
                let b: B = bytemuck::pod_read_unaligned(&rng.bytes(size_of::<B>()));
                let want = b.quants().map(|q| q as i8);
                assert_eq!(qforge_simd::q8::unit_values(&b, 0), want);
            }
        }
        let mut rng = Rng::new(7);
        check::<BlockQ4_0>(&mut rng);
        check::<BlockQ4_1>(&mut rng);
        check::<BlockQ5_0>(&mut rng);
        check::<BlockQ5_1>(&mut rng);
        check::<BlockQ8_0>(&mut rng);
        check::<BlockQ8_1>(&mut rng);
    }
}
