//! What q1_0 and q2_0 differ in — block size, bits per code, the value of each code and
//! ggml's rule for the scale and the codes — as one small trait. Everything else (packing,
//! decode, encode, the importance-weighted refinement, the dot product) is generic over it.

/// Code bytes of a block: both formats store exactly 16 (`128 × 1` and `64 × 2` bits).
pub const QS_BYTES: usize = 16;

/// The largest block (q1_0's): the size of the stack buffers of codes.
pub const MAX_QK: usize = 128;

/// The value of code `c` in units of the scale.
#[inline(always)]
pub fn level<S: Spec>(c: u8) -> i8 {
    S::STEP * c as i8 - 1
}

/// One low-bit format's specifics. Codes are packed LSB first: element `j` is bits
/// `BITS·j mod 8 ..` of byte `BITS·j / 8` (ggml's `j / 8, j % 8` and `j / 4, 2·(j % 4)`).
pub trait Spec: Send + Sync + 'static {
    /// Elements per block.
    const QK: usize;
    /// Bits per code (1 or 2).
    const BITS: usize;
    /// The code of a padded position: the code nearest 0 (q1_0 has no zero; its two codes
    /// are equally near, and ggml's zero input gives code 1).
    const PAD: u8;
    /// The value of code `c` in units of the scale `d` is `STEP·c − 1`: q1_0's codes 0, 1
    /// are −1, +1; q2_0's codes 0..=3 are −1, 0, 1, 2.
    const STEP: i8;

    /// ggml's `quantize_row_*_ref` of the real elements of one block: writes the code of
    /// each element of `x` into `codes` and returns the f32 scale before it is rounded to
    /// f16. `x` is finite and not empty; for a partial block the scale comes from `x` alone.
    fn ggml_codes(x: &[f32], codes: &mut [u8]) -> f32;

    /// The code nearest `v` (a value in units of a finite positive scale): the importance-
    /// weighted refinement's codes.
    fn nearest(v: f32) -> u8;

    /// The candidate scales of the refinement, as multiples `k / 32` of the block's largest
    /// magnitude.
    const TRIALS: std::ops::RangeInclusive<u32>;
}

/// q1_0: the sign of each weight, `x = ±d`, `d` = the mean magnitude.
#[derive(Clone, Copy, Debug, Default)]
pub struct Q1_0;

impl Spec for Q1_0 {
    const QK: usize = 128;
    const BITS: usize = 1;
    const PAD: u8 = 1;
    const STEP: i8 = 2;

    /// `quantize_row_q1_0_ref`: `d = Σ|x| / 128` summed in order in f32, bit = `x >= 0`.
    /// A partial block divides by its real element count (its mean magnitude, not one
    /// shrunk by the padding); for a whole block that is ggml's `/ 128`.
    fn ggml_codes(x: &[f32], codes: &mut [u8]) -> f32 {
        let mut sum = 0f32;
        for (c, &v) in codes.iter_mut().zip(x) {
            sum += v.abs();
            *c = u8::from(v >= 0.0);
        }
        sum / x.len() as f32
    }

    fn nearest(v: f32) -> u8 {
        u8::from(v >= 0.0)
    }

    // The codes do not depend on the scale: one least-squares fit is all there is.
    const TRIALS: std::ops::RangeInclusive<u32> = 32..=32;
}

/// q2_0: `x = (c - 1)·d` with the 2-bit code `c`, `d` = the largest magnitude.
#[derive(Clone, Copy, Debug, Default)]
pub struct Q2_0;

/// ggml's `(int)roundf(v) + 1` clamped to `0..=3`. `roundf` rounds half away from zero, so
/// the code is the number of the thresholds `v > −0.5`, `v ≥ 0.5`, `v ≥ 1.5` that `v` passes:
/// three exact comparisons, branch-free, where `f32::round` is a `roundf` call in a plain
/// x86-64 build (a fifth of q2_0's quantize time). A NaN or infinite `v` (only when `1/d`
/// overflows for a subnormal `d`) makes x86's float-to-int conversion give `INT_MIN`, so the
/// clamp gives code 0; reproduced here (NaN fails every comparison, `+∞` the finiteness test).
#[inline(always)]
pub(crate) fn ggml_q2_code(v: f32) -> u8 {
    let f = v.abs() < f32::INFINITY;
    u8::from(f && v > -0.5) + u8::from(f && v >= 0.5) + u8::from(f && v >= 1.5)
}

impl Spec for Q2_0 {
    const QK: usize = 64;
    const BITS: usize = 2;
    const PAD: u8 = 1;
    const STEP: i8 = 1;

    /// `quantize_row_q2_0_ref`: `d = amax`, `id = 1/d` (of the f32 `d`, not of its f16
    /// rounding), `c = clamp(roundf(x·id) + 1, 0, 3)`.
    fn ggml_codes(x: &[f32], codes: &mut [u8]) -> f32 {
        let mut amax = 0f32;
        for &v in x {
            if v.abs() > amax {
                amax = v.abs();
            }
        }
        let id = if amax > 0.0 { 1.0 / amax } else { 0.0 };
        for (c, &v) in codes.iter_mut().zip(x) {
            *c = ggml_q2_code(v * id);
        }
        amax
    }

    fn nearest(v: f32) -> u8 {
        ggml_q2_code(v)
    }

    // Level 2 reaches twice the scale, so scales down to half the largest magnitude compete.
    const TRIALS: std::ops::RangeInclusive<u32> = 14..=40;
}

#[cfg(test)]
mod tests {
    use super::*;

    const fn packs_into_16_bytes<S: Spec>() -> bool {
        S::QK * S::BITS / 8 == QS_BYTES && S::QK.is_multiple_of(32) && S::QK <= MAX_QK
    }
    const _: () = assert!(packs_into_16_bytes::<Q1_0>() && packs_into_16_bytes::<Q2_0>());

    #[test]
    fn q2_codes_round_half_away_from_zero_and_clamp() {
        let c = |v: f32| ggml_q2_code(v);
        assert_eq!([c(-3.0), c(-1.5), c(-0.5), c(-0.49), c(-0.0), c(0.49), c(0.5)], [0, 0, 0, 1, 1, 1, 2]);
        assert_eq!([c(1.0000001), c(1.5), c(2.5), c(100.0)], [2, 3, 3, 3]);
        assert_eq!([c(f32::NAN), c(f32::INFINITY), c(f32::NEG_INFINITY)], [0, 0, 0]);
    }

    /// The comparisons are ggml's `clamp((int)roundf(v) + 1, 0, 3)` (`f32::round` rounds half
    /// away from zero, as `roundf`) on every value around the thresholds and a spread of others.
    #[test]
    fn q2_codes_are_the_rounded_formula() {
        let formula = |v: f32| if v.is_finite() { (v.round() + 1.0).clamp(0.0, 3.0) as u8 } else { 0 };
        let mut values = vec![f32::NAN, f32::INFINITY, f32::NEG_INFINITY, f32::MAX, f32::MIN, 0.0, -0.0];
        for t in [-1.5f32, -0.5, 0.5, 1.5, 2.5] {
            let mut v = t;
            for _ in 0..64 {
                v = v.next_down();
            }
            for _ in 0..129 {
                values.push(v);
                v = v.next_up();
            }
        }
        values.extend((0..1 << 16).map(|i: u32| f32::from_bits(i.wrapping_mul(0x9e37_79b9))));
        for v in values {
            assert_eq!(ggml_q2_code(v), formula(v), "{v:e} ({:#x})", v.to_bits());
        }
    }

    #[test]
    fn q1_scale_is_the_mean_magnitude_of_the_real_elements() {
        let mut codes = [9u8; 128];
        let x = [1.0, -3.0, 0.0, -0.0];
        assert_eq!(Q1_0::ggml_codes(&x, &mut codes), 1.0);
        assert_eq!(&codes[..5], &[1, 0, 1, 1, 9]);
    }
}
