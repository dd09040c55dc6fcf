//! f32 → f16 / bf16, round to nearest even, as branch-free integer and float arithmetic that
//! LLVM vectorizes: the same bits as `half::f16::from_f32` / `half::bf16::from_f32` (F16C's
//! `vcvtps2ph` or half's software path; NaN keeps its sign and top payload bits and becomes
//! quiet), but a loop of them runs 8 lanes wide in an AVX2 build instead of one call (and one
//! CPU-feature check) per value. [`Elem::from_f32`](crate::Elem::from_f32) for f16 / bf16 is
//! these, so every decoder's f16 / bf16 output is; qforge-cpu's slice conversion uses them
//! where it has no F16C. And [`round_ties_even`]: `f32::round_ties_even` without the libm
//! call it is in a plain x86-64 build.

/// `f16::from_f32(v).to_bits()`, branch-free.
#[inline(always)]
pub fn f32_to_f16_bits(v: f32) -> u16 {
    let x = v.to_bits();
    let sign = (x >> 16) & 0x8000;
    let a = x & 0x7fff_ffff;
    // Normal results: re-bias the exponent (127 → 15), round at bit 13 to nearest even; a
    // carry out of the mantissa bumps the exponent, up to infinity for [65520, 65536).
    let normal = (a.wrapping_sub(0x3800_0000).wrapping_add(0x0fff + ((a >> 13) & 1))) >> 13;
    // Subnormal results (|v| < 2^-14): adding 0.5 puts |v| where the f32 ulp is 2^-24, the
    // f16 subnormal step, so the float add itself rounds to nearest even; the bits above
    // 0.5's are the f16 code (1024 = the smallest normal, which is right).
    let sub = (f32::from_bits(a) + 0.5).to_bits().wrapping_sub(0x3f00_0000);
    let nan = 0x7e00 | ((a >> 13) & 0x03ff);
    let r = if a > 0x7f80_0000 {
        nan
    } else if a >= 0x477f_f000 {
        0x7c00
    } else if a < 0x3880_0000 {
        sub
    } else {
        normal
    };
    (sign | r) as u16
}

/// `bf16::from_f32(v).to_bits()`, branch-free: the top half of the f32, rounded to nearest
/// even; NaN made quiet.
#[inline(always)]
pub fn f32_to_bf16_bits(v: f32) -> u16 {
    let x = v.to_bits();
    let rounded = x.wrapping_add(0x7fff + ((x >> 16) & 1)) >> 16;
    let nan = (x >> 16) | 0x0040;
    (if x & 0x7fff_ffff > 0x7f80_0000 { nan } else { rounded }) as u16
}

/// `v.round_ties_even()`, bit for bit (NaN stays NaN, `−0.3` gives `−0.0`), as float adds
/// that vectorize: `f32::round_ties_even` is a libm `rintf` call in a plain x86-64 build (SSE2
/// has no rounding instruction), half of int4g's quantize time. Below 2^23 in magnitude,
/// `|v| + 2^23` lies where the f32 ulp is 1, so the add itself rounds `|v|` to the nearest
/// integer, ties to even (2^23 is even); subtracting 2^23 is exact, and the sign is put back.
/// From 2^23 on, every f32 is already an integer.
#[inline(always)]
pub fn round_ties_even(v: f32) -> f32 {
    const BIG: f32 = 8_388_608.0; // 2^23
    let a = v.abs();
    let r = ((a + BIG) - BIG).copysign(v);
    if a < BIG { r } else { v }
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::{bf16, f16};

    /// Bit for bit `f32::round_ties_even`: every exponent and sign with the mantissas around
    /// each half-integer boundary, the values near ±2^23, ±0, ±Inf, NaN, and a stride through
    /// all 2^32 patterns.
    #[test]
    fn round_ties_even_is_the_std_one() {
        let check = |v: f32| {
            let (got, want) = (round_ties_even(v), v.round_ties_even());
            assert!(got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()), "{v:e}: {got:e} vs {want:e}");
        };
        for v in [0.0f32, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, -2.5, f32::INFINITY, f32::NEG_INFINITY, f32::NAN] {
            check(v);
        }
        for sign in [0u32, 0x8000_0000] {
            for e in 0..=255u32 {
                for m in [0u32, 1, 2, 0x3f_ffff, 0x40_0000, 0x40_0001, 0x7f_fffe, 0x7f_ffff, 0x20_0000, 0x60_0000] {
                    check(f32::from_bits(sign | (e << 23) | m));
                }
            }
        }
        for t in [0.5f32, 1.5, 2.5, 7.5, 8_388_607.5, 8_388_608.0, 4_194_304.5] {
            let (mut lo, mut hi) = (t, -t);
            for _ in 0..40 {
                check(lo);
                check(hi);
                lo = lo.next_down();
                hi = hi.next_up();
            }
        }
        for bits in (0..=u32::MAX).step_by(65_521) {
            check(f32::from_bits(bits));
        }
    }

    fn check(bits: u32) {
        let v = f32::from_bits(bits);
        assert_eq!(f32_to_f16_bits(v), f16::from_f32(v).to_bits(), "f16 of {bits:#010x} ({v:e})");
        assert_eq!(f32_to_bf16_bits(v), bf16::from_f32(v).to_bits(), "bf16 of {bits:#010x} ({v:e})");
    }

    /// Every exponent (both signs) with the mantissas around each rounding boundary of both
    /// targets (f16's bit 13 and, for subnormals, every shift; bf16's bit 16), and a stride
    /// through all 2^32 patterns.
    #[test]
    fn same_bits_as_half() {
        for sign in [0u32, 0x8000_0000] {
            for e in 0..=255u32 {
                for shift in 0..24 {
                    let b = 1u32 << shift;
                    for m in [b - 1, b, b + 1, b | (b >> 1), (b << 1).wrapping_sub(1), 3 * b, 0x7f_ffff & !(b - 1)] {
                        check(sign | (e << 23) | (m & 0x7f_ffff));
                    }
                }
            }
        }
        for bits in (0..=u32::MAX).step_by(65_521) {
            check(bits);
        }
    }

    /// All 2^32 patterns (about a minute in a release build).
    #[test]
    #[ignore = "exhaustive over 2^32 values: run with --release --ignored"]
    fn same_bits_as_half_exhaustive() {
        for bits in 0..=u32::MAX {
            check(bits);
        }
    }
}
