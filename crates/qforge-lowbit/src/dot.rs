//! The native dot product of q1_0 / q2_0 with q8_0 activations (ggml's
//! `ggml_vec_dot_q1_0_q8_0` / `ggml_vec_dot_q2_0_q8_0`): how a block unpacks for
//! `qforge-simd`'s shared q8_0 kernel ([`qforge_simd::q8`]), written once, generic over
//! [`Spec`]. Each 32 elements pair with one q8_0 block: their levels (`STEP·c − 1`) dotted with
//! the q8_0 codes exactly in integers, then scaled by `d·d_y` in f32 and accumulated in lanes
//! as ggml's AVX2 kernels do (the AVX2 kernel unpacks the codes with `bytes_from_bits` /
//! shifts and one `vpshufb`).

use crate::spec::{QS_BYTES, Spec};
use qforge_simd::q8::Codes;

/// The level of each code (`STEP·c − 1`), as the kernel's 16-entry table.
pub(crate) const fn levels<S: Spec>() -> [i8; 16] {
    let mut t = [0i8; 16];
    let mut c = 0;
    while c < 1 << S::BITS {
        t[c] = S::STEP * c as i8 - 1;
        c += 1;
    }
    t
}

/// The codes of elements `32u .. 32u + 32` of a block.
#[inline(always)]
pub(crate) fn codes<S: Spec>(qs: &[u8; QS_BYTES], u: usize) -> Codes<'_> {
    if S::BITS == 1 {
        Codes::Bits1(&bytemuck::cast_ref::<_, [[u8; 4]; 4]>(qs)[u & 3])
    } else {
        Codes::Bits2(&bytemuck::cast_ref::<_, [[u8; 8]; 2]>(qs)[u & 1])
    }
}

#[cfg(test)]
mod tests {
    use crate::codec::code;
    use crate::spec::{Q1_0, Q2_0, Spec, level};
    use crate::{BlockQ1_0, BlockQ2_0};
    use qforge_core::rand::Rng;
    use qforge_simd::q8::{Q8Weight, unit_values};

    /// The kernel's unpacking gives the codec's levels, element by element.
    #[test]
    fn unit_values_are_the_levels() {
        fn check<S: Spec, B: Q8Weight>(rng: &mut Rng, qs: impl Fn(&B) -> [u8; 16]) {
            for _ in 0..300 {
                let b: B = bytemuck::pod_read_unaligned(&rng.bytes(size_of::<B>()));
                for u in 0..B::UNITS {
                    let want: [i8; 32] = std::array::from_fn(|i| level::<S>(code::<S>(&qs(&b), 32 * u + i)));
                    assert_eq!(unit_values(&b, u), want);
                }
            }
        }
        let mut rng = Rng::new(3);
        check::<Q1_0, BlockQ1_0>(&mut rng, |b| b.qs);
        check::<Q2_0, BlockQ2_0>(&mut rng, |b| b.qs);
    }
}
