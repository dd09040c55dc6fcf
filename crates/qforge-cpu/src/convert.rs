//! f32 → f16 / bf16 conversion of whole slices, each value exactly as `f16::from_f32` /
//! `bf16::from_f32` (round to nearest even; NaN stays NaN), vectorized for the CPU's SIMD
//! level ([`qforge_core::cpu::f32_to_f16_slice`], [`qforge_core::cpu::f32_to_bf16_slice`]).
//!
//! Dequantizing to f16 / bf16 with a format that has no 16-bit row path of its own
//! ([`qforge_core::Format::direct_16bit`]) decodes a row to an f32 scratch row with the
//! format's f32 fast path, then converts it here, with no per-format work, bit-identical to
//! converting each f32 value (every format's `decode` is defined as its f32 value rounded to
//! the output dtype). That conversion is a second pass over the row, which every registered
//! format now skips: the 1- to 5-bit-coded ones look their codes up in a 16-bit table per
//! group (`qforge_simd::half_lut`), the others round their values in registers before the
//! store (`qforge_simd::store8`). It stays for a format added without such a path. Measured
//! figures: docs/matmul.md.

use qforge_core::{OutRow, QuantError, bf16, f16};
use rayon::prelude::*;

/// `dst[i] = from_f32(src[i])` for the dtype of `dst` (each value exactly as
/// [`Elem::from_f32`](qforge_core::Elem::from_f32)), in parallel over the rayon pool.
///
/// # Errors
/// [`QuantError::ShapeMismatch`] when `src.len() != dst.len()`.
pub fn cast_f32(src: &[f32], dst: OutRow<'_>) -> Result<(), QuantError> {
    if src.len() != dst.len() {
        return Err(QuantError::ShapeMismatch { what: "cast output elements", expected: src.len(), actual: dst.len() });
    }
    /// Elements per rayon task.
    const CHUNK: usize = 1 << 16;
    match dst {
        OutRow::F32(d) => d.par_chunks_mut(CHUNK).zip(src.par_chunks(CHUNK)).for_each(|(d, s)| d.copy_from_slice(s)),
        OutRow::F16(d) => d.par_chunks_mut(CHUNK).zip(src.par_chunks(CHUNK)).for_each(|(d, s)| to_f16(s, d)),
        OutRow::Bf16(d) => d.par_chunks_mut(CHUNK).zip(src.par_chunks(CHUNK)).for_each(|(d, s)| to_bf16(s, d)),
    }
    Ok(())
}

/// `dst[i] = from_f32(src[i])` for the dtype of `dst`; `src.len() == dst.len()`.
pub(crate) fn from_f32(src: &[f32], dst: OutRow<'_>) {
    match dst {
        OutRow::F32(d) => d.copy_from_slice(src),
        OutRow::F16(d) => to_f16(src, d),
        OutRow::Bf16(d) => to_bf16(src, d),
    }
}

fn to_bf16(src: &[f32], dst: &mut [bf16]) {
    // `vcvtneps2bf16` where the CPU has AVX-512 BF16, else the branch-free formula compiled
    // for the CPU's level (`qforge_core::cpu`).
    qforge_core::cpu::f32_to_bf16_slice(src, dst);
}

#[cfg(test)]
fn to_bf16_portable(src: &[f32], dst: &mut [bf16]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d = bf16::from_bits(qforge_core::round::f32_to_bf16_bits(*s));
    }
}

fn to_f16(src: &[f32], dst: &mut [f16]) {
    // F16C where the CPU has it (`qforge_core::cpu`, shared with the decoders' batches).
    qforge_core::cpu::f32_to_f16_slice(src, dst);
}

#[cfg(test)]
mod tests {
    use super::*;
    use qforge_core::rand::Rng;

    /// Every kind of f32: random bit patterns (NaNs, infinities, subnormals), halfway cases
    /// and values around the f16 / bf16 overflow thresholds, in every tail length.
    fn values() -> Vec<f32> {
        let mut rng = Rng::new(7);
        let mut v: Vec<f32> = (0..20_000).map(|_| f32::from_bits(rng.next_u64() as u32)).collect();
        v.extend([
            f32::NAN,
            -f32::NAN,
            f32::from_bits(0x7F80_0001),
            f32::from_bits(0xFFC0_1234),
            f32::from_bits(0xFFFF_FFFF),
            f32::from_bits(0x7FFF_FFFF),
            f32::INFINITY,
            f32::NEG_INFINITY,
            0.0,
            -0.0,
            65504.0,
            65520.0,
            -65520.0,
            f32::MAX,
            f32::MIN_POSITIVE,
            1.0 + f32::powi(2.0, -11),
            1.0 + 3.0 * f32::powi(2.0, -11),
            1.0 + f32::powi(2.0, -8),
            1.0 + 3.0 * f32::powi(2.0, -8),
            f32::from_bits(0x7F7F_FFFF),
            f32::from_bits(0x7F7F_8000),
            // Subnormals, which `vcvtneps2bf16` would flush: the smallest, one rounding up to
            // the smallest bf16 subnormal, halfway cases, the largest, negative ones.
            f32::from_bits(0x0000_0001),
            f32::from_bits(0x0000_8000),
            f32::from_bits(0x0001_8000),
            f32::from_bits(0x0000_7FFF),
            f32::from_bits(0x007F_FFFF),
            f32::from_bits(0x807F_8000),
            f32::from_bits(0x8000_0001),
        ]);
        for i in 0..1000u32 {
            v.push(f32::from_bits(0x3F80_0000 + (i << 12)));
        }
        v
    }

    /// At every SIMD level the machine runs (scalar, AVX2, AVX-512), forced in turn.
    #[test]
    fn slices_convert_exactly_as_half_does() {
        for level in qforge_core::cpu::testable_levels() {
            qforge_core::cpu::with_level(level, convert_every_length);
        }
    }

    fn convert_every_length() {
        let src = values();
        for len in [0, 1, 7, 8, 9, 15, 16, 17, 31, 33, src.len()] {
            let s = &src[src.len() - len..];
            let mut h = vec![f16::ZERO; len];
            let mut b = vec![bf16::ZERO; len];
            from_f32(s, OutRow::F16(&mut h));
            from_f32(s, OutRow::Bf16(&mut b));
            for (i, v) in s.iter().enumerate() {
                assert_eq!(h[i].to_bits(), f16::from_f32(*v).to_bits(), "f16 of {:#010x}", v.to_bits());
                assert_eq!(b[i].to_bits(), bf16::from_f32(*v).to_bits(), "bf16 of {:#010x}", v.to_bits());
            }
            let mut p = vec![bf16::ZERO; len];
            to_bf16_portable(s, &mut p);
            assert!(p.iter().zip(&b).all(|(p, b)| p.to_bits() == b.to_bits()), "portable bf16 differs");
        }
    }
}
