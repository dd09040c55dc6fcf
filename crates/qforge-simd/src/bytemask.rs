//! AVX2 byte masks from packed bits, shared by every kernel that spreads one bit per element
//! over a register of 32 bytes (q5's 5th bits and q1_0's codes in [`crate::q8`], the sign bits
//! of the grid I-quants in `qforge-iq`).
//!
//! `#[target_feature]` functions: a caller compiled with AVX2 (every kernel holding an
//! [`crate::Avx2`] token is) calls [`bytes_from_bits`] without `unsafe`; [`select_bytes`] is
//! `unsafe` because its `MASK` form needs AVX-512 BW / VL, which only the caller can vouch for.
#![allow(unsafe_code)]

use std::arch::x86_64::*;

/// Byte `j` = 0xFF where bit `j` of the little-endian `bits` is set, else 0 (ggml's
/// `bytes_from_bits_32`): byte `j` gets byte `j / 8` of the word, every other bit is set by
/// an OR, and only a byte whose bit `j % 8` was set compares equal to all ones.
///
/// # Safety
/// The CPU must have AVX2. A caller that is itself `#[target_feature(enable = "avx2")]`
/// (every AVX2 kernel) calls it without `unsafe`: that caller's own contract covers it.
#[target_feature(enable = "avx2")]
#[inline]
pub fn bytes_from_bits(bits: [u8; 4]) -> __m256i {
    let spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32(i32::from_le_bytes(bits)),
        _mm256_set_epi64x(0x0303_0303_0303_0303, 0x0202_0202_0202_0202, 0x0101_0101_0101_0101, 0),
    );
    let others = _mm256_or_si256(spread, _mm256_set1_epi64x(0x7fbf_dfef_f7fb_fdfe));
    _mm256_cmpeq_epi8(others, _mm256_set1_epi64x(-1))
}

/// Byte `j` = byte `j` of `one` where bit `j` of the little-endian `bits` is set, else byte
/// `j` of `zero`: with AVX2, [`bytes_from_bits`] and a blend by AND / XOR; with `MASK`
/// (AVX-512 BW / VL) the bits are a mask register, one `kmovd` and one `vpblendmb` (or a
/// zero-masked move where `zero` is 0) instead of five instructions.
///
/// # Safety
/// The CPU must have AVX2, and with `MASK` AVX-512 F / BW / VL besides.
#[target_feature(enable = "avx2")]
#[inline]
pub unsafe fn select_bytes<const MASK: bool>(bits: [u8; 4], zero: __m256i, one: __m256i) -> __m256i {
    if MASK {
        // SAFETY: with `MASK` the caller guarantees AVX-512 F / BW / VL.
        unsafe { select_bytes_masked(bits, zero, one) }
    } else {
        let set = bytes_from_bits(bits);
        _mm256_xor_si256(zero, _mm256_and_si256(set, _mm256_xor_si256(zero, one)))
    }
}

/// [`select_bytes`] with the bits as an AVX-512 mask register.
#[target_feature(enable = "avx2,avx512f,avx512bw,avx512vl")]
#[inline]
fn select_bytes_masked(bits: [u8; 4], zero: __m256i, one: __m256i) -> __m256i {
    _mm256_mask_blend_epi8(u32::from_le_bytes(bits), zero, one)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[allow(unsafe_code)]
    fn every_bit_becomes_its_byte() {
        if !qforge_golden::needs::avx2() {
            return;
        }
        for bits in [[0u8; 4], [0xFF; 4], [0x01, 0x80, 0x55, 0xAA], [0x12, 0x34, 0x56, 0x78]] {
            // SAFETY: `needs::avx2()` has just confirmed AVX2 on this CPU.
            let v = unsafe { bytes_from_bits(bits) };
            let got: [u8; 32] = bytemuck::cast(v);
            for (j, g) in got.iter().enumerate() {
                let want = if bits[j / 8] >> (j % 8) & 1 != 0 { 0xFF } else { 0 };
                assert_eq!(*g, want, "{bits:?} byte {j}");
            }
        }
    }

    #[test]
    #[allow(unsafe_code)]
    fn select_bytes_picks_by_bit_at_both_levels() {
        if !qforge_golden::needs::avx2() {
            return;
        }
        let zero: [u8; 32] = std::array::from_fn(|j| j as u8);
        let one: [u8; 32] = std::array::from_fn(|j| 0x80 | (3 * j) as u8);
        let has512 = is_x86_feature_detected!("avx512bw") && is_x86_feature_detected!("avx512vl");
        for bits in [[0u8; 4], [0xFF; 4], [0x01, 0x80, 0x55, 0xAA], [0x12, 0x34, 0x56, 0x78]] {
            let want: [u8; 32] =
                std::array::from_fn(|j| if bits[j / 8] >> (j % 8) & 1 != 0 { one[j] } else { zero[j] });
            let (z, o) = (bytemuck::cast(zero), bytemuck::cast(one));
            // SAFETY: `needs::avx2()` has just confirmed AVX2 on this CPU.
            let got: [u8; 32] = bytemuck::cast(unsafe { select_bytes::<false>(bits, z, o) });
            assert_eq!(got, want, "avx2 {bits:?}");
            if has512 {
                // SAFETY: AVX2 as above, and AVX-512 BW / VL (which imply F) just detected.
                let got: [u8; 32] = bytemuck::cast(unsafe { select_bytes::<true>(bits, z, o) });
                assert_eq!(got, want, "avx512 {bits:?}");
            }
        }
    }
}
