//! Alignment-1 little-endian scalars for block layouts.
//!
//! GGUF stores blocks back to back with no padding (a q4_0 block is 18 bytes), so a block in a
//! file or a memory map is at an arbitrary address. Declaring block fields with these wrappers
//! keeps every block struct `align(1)` and `Pod`, so `bytemuck::cast_slice` views any byte
//! buffer as blocks in place, on any host endianness.

use bytemuck::{Pod, Zeroable};
use half::f16;

macro_rules! le_scalar {
    ($(#[$doc:meta])* $name:ident, $ty:ty, $n:literal) => {
        $(#[$doc])*
        #[repr(transparent)]
        #[derive(Clone, Copy, Default, PartialEq, Eq, Hash, Pod, Zeroable)]
        pub struct $name(pub [u8; $n]);

        impl $name {
            /// The value, decoded from its little-endian bytes.
            #[inline(always)]
            pub fn get(self) -> $ty {
                <$ty>::from_le_bytes(self.0)
            }
            /// The little-endian bytes of `v`.
            #[inline(always)]
            pub fn new(v: $ty) -> Self {
                Self(v.to_le_bytes())
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                std::fmt::Debug::fmt(&self.get(), f)
            }
        }
    };
}

le_scalar!(
    /// A little-endian `u16` with alignment 1.
    U16Le, u16, 2
);
le_scalar!(
    /// A little-endian `i16` with alignment 1.
    I16Le, i16, 2
);
le_scalar!(
    /// A little-endian `u32` with alignment 1.
    U32Le, u32, 4
);
le_scalar!(
    /// A little-endian IEEE `f32` with alignment 1.
    F32Le, f32, 4
);

/// A little-endian IEEE half (`ggml_half`) with alignment 1.
#[repr(transparent)]
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash, Pod, Zeroable)]
pub struct F16Le(pub [u8; 2]);

impl F16Le {
    /// The value widened to f32 (exact).
    #[inline(always)]
    pub fn get(self) -> f32 {
        f16::from_le_bytes(self.0).to_f32()
    }
    /// Round `v` to the nearest f16 (ties to even), as ggml's `GGML_FP32_TO_FP16`.
    #[inline(always)]
    pub fn from_f32(v: f32) -> Self {
        Self(f16::from_f32(v).to_le_bytes())
    }
    /// The raw IEEE binary16 bit pattern.
    #[inline(always)]
    pub fn bits(self) -> u16 {
        u16::from_le_bytes(self.0)
    }
}

impl std::fmt::Debug for F16Le {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(&self.get(), f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrappers_are_unaligned_and_little_endian() {
        assert_eq!(std::mem::align_of::<F16Le>(), 1);
        assert_eq!(std::mem::align_of::<F32Le>(), 1);
        assert_eq!(U16Le::new(0x1234).0, [0x34, 0x12]);
        assert_eq!(F32Le::new(1.5).get(), 1.5);
        assert_eq!(F16Le::from_f32(1.0).bits(), 0x3c00);
        assert_eq!(F16Le([0x00, 0x7c]).get(), f32::INFINITY);
        assert!(F16Le([0x01, 0x7c]).get().is_nan());
    }
}
