//! Output element types of dequantization.

use half::{bf16, f16};
use std::fmt;
use std::str::FromStr;

/// A floating-point element type qforge can dequantize to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DType {
    /// IEEE 754 binary32 (the exact result of ggml's `to_float`).
    F32,
    /// IEEE 754 binary16: the f32 result rounded to nearest, ties to even.
    F16,
    /// bfloat16: the f32 result rounded to nearest, ties to even, to 8 mantissa bits.
    Bf16,
}

impl DType {
    /// All output dtypes, in the order the test matrix lists them.
    pub const ALL: [DType; 3] = [DType::F32, DType::F16, DType::Bf16];

    /// Lower-case name as the CLI spells it.
    pub fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::F16 => "f16",
            DType::Bf16 => "bf16",
        }
    }

    /// Size of one element in bytes.
    pub fn size(self) -> usize {
        match self {
            DType::F32 => 4,
            DType::F16 | DType::Bf16 => 2,
        }
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for DType {
    type Err = crate::QuantError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "f32" => Ok(DType::F32),
            "f16" => Ok(DType::F16),
            "bf16" => Ok(DType::Bf16),
            _ => Err(crate::QuantError::UnknownDType { name: s.to_string() }),
        }
    }
}

/// An element a block can be decoded into. `from_f32` must be the round-to-nearest-even
/// conversion of the f32 value (identity for f32), so that every dtype's output is the
/// correctly rounded f32 result, bit for bit.
pub trait Elem: Copy + Default + Send + Sync + PartialEq + fmt::Debug + 'static {
    /// The [`DType`] tag of this element type.
    const DTYPE: DType;
    /// `v` rounded to nearest, ties to even, into this type (identity for f32; NaN stays NaN).
    fn from_f32(v: f32) -> Self;
    /// The value widened exactly to f32.
    fn to_f32(self) -> f32;
    /// Little-endian bytes of one element appended to `out`.
    fn write_le(self, out: &mut Vec<u8>);
    /// View a slice of this type as the dtype-tagged [`OutRow`] a [`crate::Format`] takes.
    fn out_row(slice: &mut [Self]) -> OutRow<'_>;
    /// Convert `src` into `dst` (same length), each value exactly as [`Elem::from_f32`]
    /// would: a loop that vectorizes (f16 / bf16 rounding is branch-free arithmetic).
    /// Decoders that build a block in f32 registers / stack use this for the final store.
    fn from_f32_slice(src: &[f32], dst: &mut [Self]);
}

impl Elem for f32 {
    const DTYPE: DType = DType::F32;
    fn out_row(slice: &mut [Self]) -> OutRow<'_> {
        OutRow::F32(slice)
    }
    #[inline]
    fn from_f32_slice(src: &[f32], dst: &mut [Self]) {
        dst.copy_from_slice(src);
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        v
    }
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }
    fn write_le(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
}

impl Elem for f16 {
    const DTYPE: DType = DType::F16;
    fn out_row(slice: &mut [Self]) -> OutRow<'_> {
        OutRow::F16(slice)
    }
    #[inline(always)]
    fn from_f32_slice(src: &[f32], dst: &mut [Self]) {
        // F16C where the CPU has it: LLVM does not turn the branch-free rounding into
        // `vcvtps2ph`, and the plain loop ran at a fifth of its speed.
        crate::cpu::f32_to_f16_slice(src, dst);
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        f16::from_bits(crate::round::f32_to_f16_bits(v))
    }
    #[inline(always)]
    fn to_f32(self) -> f32 {
        f16::to_f32(self)
    }
    fn write_le(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
}

impl Elem for bf16 {
    const DTYPE: DType = DType::Bf16;
    fn out_row(slice: &mut [Self]) -> OutRow<'_> {
        OutRow::Bf16(slice)
    }
    #[inline(always)]
    fn from_f32_slice(src: &[f32], dst: &mut [Self]) {
        // `vcvtneps2bf16` where the CPU has AVX-512 BF16, else the formula for the level.
        crate::cpu::f32_to_bf16_slice(src, dst);
    }
    #[inline(always)]
    fn from_f32(v: f32) -> Self {
        bf16::from_bits(crate::round::f32_to_bf16_bits(v))
    }
    #[inline(always)]
    fn to_f32(self) -> f32 {
        bf16::to_f32(self)
    }
    fn write_le(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_le_bytes());
    }
}

/// A mutable output row of one of the supported dtypes: the object-safe way to ask a
/// [`crate::Format`] for output of any dtype.
pub enum OutRow<'a> {
    /// An f32 output row.
    F32(&'a mut [f32]),
    /// An f16 output row.
    F16(&'a mut [f16]),
    /// A bf16 output row.
    Bf16(&'a mut [bf16]),
}

impl OutRow<'_> {
    /// Number of elements in the row.
    pub fn len(&self) -> usize {
        match self {
            OutRow::F32(s) => s.len(),
            OutRow::F16(s) => s.len(),
            OutRow::Bf16(s) => s.len(),
        }
    }
    /// Whether the row has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The row's element type.
    pub fn dtype(&self) -> DType {
        match self {
            OutRow::F32(_) => DType::F32,
            OutRow::F16(_) => DType::F16,
            OutRow::Bf16(_) => DType::Bf16,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_and_bf16_round_to_nearest_even() {
        // 1 + 2^-11 is exactly halfway between two f16 values: ties go to the even one (1.0).
        assert_eq!(f16::from_f32(1.0 + f32::powi(2.0, -11)).to_bits(), 0x3c00);
        // 1 + 3*2^-11 is halfway again: ties to even rounds up this time.
        assert_eq!(f16::from_f32(1.0 + 3.0 * f32::powi(2.0, -11)).to_bits(), 0x3c02);
        // bf16: 1 + 2^-8 is halfway, ties to even -> 1.0; 1 + 3*2^-8 -> up.
        assert_eq!(<bf16 as Elem>::from_f32(1.0 + f32::powi(2.0, -8)).to_bits(), 0x3f80);
        assert_eq!(<bf16 as Elem>::from_f32(1.0 + 3.0 * f32::powi(2.0, -8)).to_bits(), 0x3f82);
        assert!(<bf16 as Elem>::from_f32(f32::NAN).to_f32().is_nan());
        assert!(<f16 as Elem>::from_f32(f32::NAN).to_f32().is_nan());
    }

    #[test]
    fn slice_conversion_equals_scalar_conversion() {
        let src: Vec<f32> = (0..1000u32)
            .map(|i| f32::from_bits(i.wrapping_mul(2_654_435_761)))
            .chain([f32::NAN, f32::INFINITY, -0.0, 65520.0, 1.0 + f32::powi(2.0, -11)])
            .collect();
        let mut h = vec![f16::ZERO; src.len()];
        let mut b = vec![bf16::ZERO; src.len()];
        f16::from_f32_slice(&src, &mut h);
        bf16::from_f32_slice(&src, &mut b);
        for (i, v) in src.iter().enumerate() {
            let (eh, eb) = (<f16 as Elem>::from_f32(*v), <bf16 as Elem>::from_f32(*v));
            assert!(h[i].to_bits() == eh.to_bits() || (h[i].is_nan() && eh.is_nan()), "f16 {v:e}");
            assert!(b[i].to_bits() == eb.to_bits() || (b[i].is_nan() && eb.is_nan()), "bf16 {v:e}");
        }
    }

    #[test]
    fn dtype_parse_is_case_insensitive() {
        assert_eq!("BF16".parse::<DType>().unwrap(), DType::Bf16);
        assert!("f64".parse::<DType>().is_err());
    }
}
