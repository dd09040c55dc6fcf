//! The per-group scale dtypes of int4g: f16 (default), bf16 and f32, as one sealed trait so
//! the block layout and the codec are written once.

use bytemuck::Pod;
use qforge_core::{DType, bf16, f16};

mod sealed {
    pub trait Sealed {}
}

/// A scale dtype. Sealed: the only implementations are [`F16Scale`], [`Bf16Scale`] and
/// [`F32Scale`], whose `Raw` is a plain byte array (alignment 1, no padding, every bit
/// pattern valid), which the block layout's `Pod` implementation relies on.
pub trait ScaleKind: sealed::Sealed + Copy + Default + Send + Sync + std::fmt::Debug + 'static {
    /// The little-endian bytes of one scale (`[u8; 2]` or `[u8; 4]`).
    type Raw: Pod + Default + PartialEq + Eq + std::fmt::Debug;
    /// The dtype this kind stores.
    const DTYPE: DType;
    /// Bytes of one scale.
    const BYTES: usize = std::mem::size_of::<Self::Raw>();

    /// Round a finite, non-negative f32 scale to this dtype, to nearest-even, saturating to
    /// the largest finite value instead of overflowing to infinity.
    fn encode(v: f32) -> Self::Raw;

    /// The stored scale as f32 (exact widening).
    fn decode(raw: Self::Raw) -> f32;
}

/// IEEE half-precision scales (the default; what most int4 kernels read).
#[derive(Clone, Copy, Debug, Default)]
pub struct F16Scale;

/// bfloat16 scales (f32's exponent range: never saturates for finite input).
#[derive(Clone, Copy, Debug, Default)]
pub struct Bf16Scale;

/// f32 scales (torchao's default `scales_precision`): the computed scale, unrounded.
#[derive(Clone, Copy, Debug, Default)]
pub struct F32Scale;

impl sealed::Sealed for F16Scale {}
impl sealed::Sealed for Bf16Scale {}
impl sealed::Sealed for F32Scale {}

impl ScaleKind for F16Scale {
    type Raw = [u8; 2];
    const DTYPE: DType = DType::F16;
    #[inline]
    fn encode(v: f32) -> [u8; 2] {
        let h = f16::from_f32(v);
        if h.is_infinite() { f16::MAX } else { h }.to_le_bytes()
    }
    #[inline(always)]
    fn decode(raw: [u8; 2]) -> f32 {
        f16::from_le_bytes(raw).to_f32()
    }
}

impl ScaleKind for Bf16Scale {
    type Raw = [u8; 2];
    const DTYPE: DType = DType::Bf16;
    #[inline]
    fn encode(v: f32) -> [u8; 2] {
        let b = bf16::from_f32(v);
        if b.is_infinite() { bf16::MAX } else { b }.to_le_bytes()
    }
    #[inline(always)]
    fn decode(raw: [u8; 2]) -> f32 {
        bf16::from_le_bytes(raw).to_f32()
    }
}

impl ScaleKind for F32Scale {
    type Raw = [u8; 4];
    const DTYPE: DType = DType::F32;
    #[inline]
    fn encode(v: f32) -> [u8; 4] {
        v.to_le_bytes()
    }
    #[inline(always)]
    fn decode(raw: [u8; 4]) -> f32 {
        f32::from_le_bytes(raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounding_is_nearest_even_and_saturates() {
        // 1 + 2^-11 is a tie between two f16 values: ties to even (1.0).
        assert_eq!(F16Scale::encode(1.0 + f32::powi(2.0, -11)), f16::ONE.to_le_bytes());
        // Past f16::MAX + half an ulp f16 rounds to inf; the scale saturates instead.
        assert_eq!(F16Scale::decode(F16Scale::encode(1e6)), 65504.0);
        assert_eq!(F16Scale::decode(F16Scale::encode(65519.0)), 65504.0);
        assert_eq!(Bf16Scale::decode(Bf16Scale::encode(f32::MAX)), bf16::MAX.to_f32());
        assert_eq!(Bf16Scale::encode(1.0 + f32::powi(2.0, -8)), bf16::ONE.to_le_bytes());
        assert_eq!(F32Scale::decode(F32Scale::encode(0.1)), 0.1);
        // torchao's eps (2^-23) is exactly representable in every scale dtype.
        let eps = f32::EPSILON;
        assert_eq!(F16Scale::decode(F16Scale::encode(eps)), eps);
        assert_eq!(Bf16Scale::decode(Bf16Scale::encode(eps)), eps);
        assert_eq!((F16Scale::BYTES, Bf16Scale::BYTES, F32Scale::BYTES), (2, 2, 4));
    }
}
