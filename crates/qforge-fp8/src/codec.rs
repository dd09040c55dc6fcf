//! The two OCP FP8 element encodings, written once, generic over [`Fp8Kind`]:
//! decoding (a 256-entry table built at compile time) and f32 → fp8 rounding to nearest-even
//! with subnormals and saturation.

/// An FP8 encoding: 1 sign bit, `EBITS` exponent bits (bias `BIAS`), `MBITS` mantissa bits.
pub trait Fp8Kind: Send + Sync + 'static {
    /// The registered format name (`fp8_e4m3`, `fp8_e5m2`).
    const NAME: &'static str;
    /// One-line description for `qforge formats`.
    const SUMMARY: &'static str;
    /// Mantissa bits.
    const MBITS: u32;
    /// Exponent bias.
    const BIAS: i32;
    /// Whether the all-ones exponent encodes Inf / NaN (IEEE-like, e5m2). When false (e4m3's
    /// "fn" variant) only the all-ones magnitude `0x7F` is NaN and there is no Inf.
    const IEEE_SPECIALS: bool;
    /// The largest finite magnitude's code (`0x7E` = 448 for e4m3, `0x7B` = 57344 for e5m2).
    const MAX_CODE: u8;
    /// The largest finite value.
    const MAX: f32 = decode_const::<Self>(Self::MAX_CODE);
    /// Every code's value.
    const TABLE: [f32; 256] = table::<Self>();
}

/// OCP e4m3 "fn": bias 7, no Inf, NaN = 0x7F / 0xFF, max 448.
#[derive(Clone, Copy, Debug, Default)]
pub struct E4m3;

/// OCP e5m2 (IEEE-like): bias 15, Inf = 0x7C / 0xFC, NaN = 0x7D..=0x7F (and negatives), max 57344.
#[derive(Clone, Copy, Debug, Default)]
pub struct E5m2;

impl Fp8Kind for E4m3 {
    const NAME: &'static str = "fp8_e4m3";
    const SUMMARY: &'static str =
        "8 bpw OCP FP8 e4m3fn (max 448) with one f32 scale per 128x128 weight block (DeepSeek-V3)";
    const MBITS: u32 = 3;
    const BIAS: i32 = 7;
    const IEEE_SPECIALS: bool = false;
    const MAX_CODE: u8 = 0x7E;
}

impl Fp8Kind for E5m2 {
    const NAME: &'static str = "fp8_e5m2";
    const SUMMARY: &'static str =
        "8 bpw OCP FP8 e5m2 (max 57344) with one f32 scale per 128x128 weight block (DeepSeek-V3 layout)";
    const MBITS: u32 = 2;
    const BIAS: i32 = 15;
    const IEEE_SPECIALS: bool = true;
    const MAX_CODE: u8 = 0x7B;
}

/// `2^k` for `-126 <= k <= 127`.
const fn pow2(k: i32) -> f32 {
    f32::from_bits(((127 + k) as u32) << 23)
}

const fn decode_const<K: Fp8Kind + ?Sized>(code: u8) -> f32 {
    let mag = code & 0x7F;
    let neg = code & 0x80 != 0;
    let e = (mag >> K::MBITS) as i32;
    let m = (mag & ((1 << K::MBITS) - 1)) as i32;
    let all_ones = (1 << (7 - K::MBITS)) - 1;
    let v = if K::IEEE_SPECIALS && e == all_ones {
        if m == 0 { f32::INFINITY } else { f32::NAN }
    } else if !K::IEEE_SPECIALS && mag == 0x7F {
        f32::NAN
    } else if e == 0 {
        m as f32 * pow2(1 - K::BIAS - K::MBITS as i32)
    } else {
        ((1 << K::MBITS) + m) as f32 * pow2(e - K::BIAS - K::MBITS as i32)
    };
    if neg { -v } else { v }
}

const fn table<K: Fp8Kind + ?Sized>() -> [f32; 256] {
    let mut t = [0f32; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = decode_const::<K>(i as u8);
        i += 1;
    }
    t
}

/// The value of an fp8 code (exact in f32; NaN / ±Inf for the special codes).
#[inline(always)]
pub fn to_f32<K: Fp8Kind>(code: u8) -> f32 {
    K::TABLE[code as usize]
}

/// `x` rounded to the nearest fp8 value, ties to even, subnormals included, saturating to
/// ±MAX instead of overflowing (±Inf saturates too); NaN gives the NaN code `0x7F` / `0xFF`.
/// The sign is kept: negative values that round to zero give `0x80` (-0).
///
/// Branch-free (selects only), so that a loop of it vectorizes: the activation quantizer of
/// the fp8 mat-vec rounds a row per call.
#[inline(always)]
pub fn from_f32<K: Fp8Kind>(x: f32) -> u8 {
    let sign = ((x.to_bits() >> 24) & 0x80) as u8;
    let a = x.abs();
    // The fp8 biased exponent of `a`, at least 1 (the subnormals share exponent 1's quantum);
    // an f32 subnormal has field 0 and lands in the fp8 subnormal range either way. Capped so
    // that the quantum's exponent below stays an f32 exponent for huge `a`, Inf and NaN.
    let e_f32 = (a.to_bits() >> 23) as i32 - 127;
    let e = (e_f32 + K::BIAS).clamp(1, 2 * K::BIAS + 2);
    // a / quantum, exact (a power-of-two scaling of a value that stays in f32's range).
    let n = a * f32::from_bits(((127 + K::BIAS + K::MBITS as i32 - e) as u32) << 23);
    // n < 2^(MBITS+1) for finite `a` below the cap: rounding may carry into the next binade,
    // which the sum handles. Anything at or above MAX (Inf too) ends at or past MAX_CODE and
    // saturates; NaN is selected last.
    let n = n.min(32.0);
    let code = (((e - 1) as u32) << K::MBITS) + crate::rounding::round_ties_even(n) as u32;
    let code = code.min(u32::from(K::MAX_CODE)) as u8;
    sign | if a.is_nan() { 0x7F } else { code }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants() {
        assert_eq!(E4m3::MAX, 448.0);
        assert_eq!(E5m2::MAX, 57344.0);
        assert!(to_f32::<E4m3>(0x7F).is_nan() && to_f32::<E4m3>(0xFF).is_nan());
        assert_eq!(to_f32::<E5m2>(0x7C), f32::INFINITY);
        assert_eq!(to_f32::<E5m2>(0xFC), f32::NEG_INFINITY);
        assert_eq!(to_f32::<E4m3>(0x01), 2f32.powi(-9));
        assert_eq!(to_f32::<E5m2>(0x01), 2f32.powi(-16));
        assert_eq!(from_f32::<E4m3>(1e6), 0x7E);
        assert_eq!(from_f32::<E4m3>(-f32::INFINITY), 0xFE);
        assert_eq!(from_f32::<E5m2>(f32::INFINITY), 0x7B);
        assert_eq!(from_f32::<E4m3>(-1e-30), 0x80);
        // 2^-10 is half the smallest e4m3 subnormal: a tie, to even (0).
        assert_eq!(from_f32::<E4m3>(2f32.powi(-10)), 0x00);
        assert_eq!(from_f32::<E4m3>(3.0 * 2f32.powi(-10)), 0x02);
        // The largest subnormal rounds up into the first normal binade.
        assert_eq!(from_f32::<E4m3>(7.6 * 2f32.powi(-9)), 0x08);
    }
}
