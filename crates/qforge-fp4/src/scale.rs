//! The two block-scale encodings: E8M0 (mxfp4, a bare power of two) and UE4M3 (nvfp4, an
//! unsigned 8-bit float with 4 exponent and 3 mantissa bits). Both decoders return half the
//! scale, as ggml's do, because the E2M1 table ([`crate::e2m1::E2M1_X2`]) is doubled.

/// [`e8m0_to_f32_half`] of every byte, for the dot kernel.
pub static E8M0_HALF: [f32; 256] = byte_table!(e8m0_to_f32_half);

/// [`ue4m3_to_f32_half`] of every byte, for the dot kernel.
pub static UE4M3_HALF: [f32; 256] = byte_table!(ue4m3_to_f32_half);

/// `[f(0), f(1), ..., f(255)]` at compile time.
macro_rules! byte_table {
    ($f:ident) => {{
        let mut t = [0f32; 256];
        let mut b = 0;
        while b < 256 {
            t[b] = $f(b as u8);
            b += 1;
        }
        t
    }};
}
use byte_table;

/// ggml's `ggml_e8m0_to_fp32_half`: `2^(e - 128)` for every byte `e`. There is no NaN:
/// `e = 0` and `e = 1` give the subnormals 2^-128 and 2^-127, and `e = 0xFF` gives 2^127.
#[inline]
pub const fn e8m0_to_f32_half(e: u8) -> f32 {
    let bits = if e < 2 { 0x0020_0000u32 << e } else { ((e - 1) as u32) << 23 };
    f32::from_bits(bits)
}

/// The E8M0 exponent ggml's `quantize_row_mxfp4_ref` picks for a block whose largest
/// magnitude is `amax`: `floor(log2f(amax)) - 2 + 127` (0 for an all-zero block), so that the
/// largest E2M1 value (6 = 1.5·2²) lands near `amax`.
///
/// `log2f` is ggml's (correctly rounded for these inputs): the logarithm is taken in f64 and
/// rounded to f32 before the floor, so a value just below a power of two whose f32 logarithm
/// rounds up to that integer takes the larger exponent, as in ggml. ggml converts the float to
/// `uint8_t` with a plain C cast; below `amax = 2^-125` the exponent is negative, and x86
/// wraps the truncated integer modulo 256 — reproduced here (such blocks decode to zeros
/// either way).
#[inline]
pub fn e8m0_from_amax(amax: f32) -> u8 {
    if amax <= 0.0 {
        return 0;
    }
    let lg = (f64::from(amax).log2() as f32).floor();
    (lg - 2.0 + 127.0) as i32 as u8
}

/// ggml's `ggml_ue4m3_to_fp32`: half the UE4M3 value of byte `x`. The top bit is ignored, so
/// bytes `0x80..` decode like `x & 0x7F`, except that `0x7F` (the E4M3 NaN pattern) and `0x00`
/// decode to 0 while `0xFF` decodes to 240. Exponent bias 7; exponent 0 is subnormal
/// (`m · 2^-9`). Every result is exact.
#[inline]
pub const fn ue4m3_to_f32_half(x: u8) -> f32 {
    if x == 0 || x == 0x7F {
        return 0.0;
    }
    let exp = ((x >> 3) & 0x0F) as i32;
    let man = (x & 0x07) as f32;
    let raw = if exp == 0 { man * pow2(-9) } else { (1.0 + man / 8.0) * pow2(exp - 7) };
    raw * 0.5
}

/// `2^k` for `-126 <= k <= 127`, exactly.
#[inline]
const fn pow2(k: i32) -> f32 {
    f32::from_bits(((k + 127) as u32) << 23)
}

/// ggml's `ggml_fp32_to_ue4m3`: the UE4M3 byte for a scale `x`. Non-positive (or NaN) scales
/// give 0; scales above 448 are clamped to it; the mantissa is rounded half up on the first
/// dropped bit (no sticky bits), and anything that would need exponent 15 saturates to 0x7E
/// (448). Below 2^-6 the subnormal code is `(int)(x·512 + 0.5)`, clamped to 1..=7 (0 below).
#[inline]
pub fn ue4m3_from_f32(x: f32) -> u8 {
    #[allow(clippy::neg_cmp_op_on_partial_ord)] // NaN must take this branch, as in ggml
    if !(x > 0.0) {
        return 0;
    }
    let x = if x > 448.0 { 448.0 } else { x };
    let bits = x.to_bits();
    let exp = ((bits >> 23) & 0xFF) as i32 - 127 + 7;
    if exp <= 0 {
        let man = (x * 512.0 + 0.5) as i32;
        return if man < 1 { 0 } else { man.min(7) as u8 };
    }
    if exp >= 15 {
        return 0x7E;
    }
    let mut exp = exp;
    let mut man = ((bits >> 20) & 0x7) as i32 + ((bits >> 19) & 1) as i32;
    if man > 7 {
        man = 0;
        exp += 1;
        if exp >= 15 {
            return 0x7E;
        }
    }
    ((exp << 3) | man) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel's tables hold the decoders' values, bit for bit (evaluated at compile time
    /// there, at run time here).
    #[test]
    fn byte_tables_match_the_decoders() {
        for b in 0..=255u8 {
            assert_eq!(E8M0_HALF[usize::from(b)].to_bits(), e8m0_to_f32_half(std::hint::black_box(b)).to_bits());
            assert_eq!(UE4M3_HALF[usize::from(b)].to_bits(), ue4m3_to_f32_half(std::hint::black_box(b)).to_bits());
        }
    }

    #[test]
    fn e8m0_half_is_two_to_the_e_minus_128() {
        for e in 0..=255u8 {
            assert_eq!(f64::from(e8m0_to_f32_half(e)), 2f64.powi(i32::from(e) - 128), "e = {e}");
        }
    }

    #[test]
    fn e8m0_exponent_puts_amax_in_the_top_binade() {
        assert_eq!(e8m0_from_amax(0.0), 0);
        assert_eq!(e8m0_from_amax(1.0), 125);
        assert_eq!(e8m0_from_amax(6.0), 127);
        assert_eq!(e8m0_from_amax(7.99), 127);
        assert_eq!(e8m0_from_amax(8.0), 128);
        // The largest float below 8: its f32 log2 rounds up to 3.0, as ggml's log2f does.
        assert_eq!(e8m0_from_amax(f32::from_bits(8f32.to_bits() - 1)), 128);
        assert_eq!(e8m0_from_amax(f32::MAX), 253);
        assert_eq!(e8m0_from_amax(f32::from_bits(1)), (-24i32) as u8);
    }

    #[test]
    fn ue4m3_decodes_every_byte() {
        for x in 0..=255u8 {
            let e = i32::from((x >> 3) & 15);
            let m = f64::from(x & 7);
            let want = if x == 0 || x == 0x7F {
                0.0
            } else if e == 0 {
                m * 2f64.powi(-9)
            } else {
                (1.0 + m / 8.0) * 2f64.powi(e - 7)
            };
            assert_eq!(f64::from(ue4m3_to_f32_half(x)), want * 0.5, "byte {x:#04x}");
        }
        assert_eq!(ue4m3_to_f32_half(0x7E), 224.0);
        assert_eq!(ue4m3_to_f32_half(0xFF), 240.0);
    }

    #[test]
    fn ue4m3_encode_inverts_decode_on_representable_values() {
        for x in 1..0x7Fu8 {
            let v = 2.0 * ue4m3_to_f32_half(x);
            // ggml never emits exponent 15 except as the saturated 0x7E (448): 256..448 -> 0x7E.
            let want = if x >= 0x78 { 0x7E } else { x };
            assert_eq!(ue4m3_from_f32(v), want, "value {v}");
        }
        assert_eq!(ue4m3_from_f32(0.0), 0);
        assert_eq!(ue4m3_from_f32(-1.0), 0);
        assert_eq!(ue4m3_from_f32(f32::NAN), 0);
        assert_eq!(ue4m3_from_f32(1e30), 0x7E);
        assert_eq!(ue4m3_from_f32(1e-30), 0);
        // 1.0625 is halfway between 1.0 and 1.125: ggml rounds half up.
        assert_eq!(ue4m3_from_f32(1.0625), 0x39);
    }
}
