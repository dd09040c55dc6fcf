//! Rows to lanes: the 16 × 16 transposition of 32-bit words that the tile kernels use to put
//! 16 weight rows side by side, a row per 32-bit lane (`qforge-k`'s plain tile, the q8 tile).
#![allow(unsafe_code)]

use std::arch::x86_64::*;

/// `out[k]` lane `r` = 32-bit word `k` of `r[r]` (`out` holds 16 vectors, written in place:
/// no array returned and copied): `vpunpck{l,h}dq` and `vpunpck{l,h}qdq` (4 × 4
/// within each 128-bit lane), then `vshufi32x4` across them.
///
/// # Safety
/// The CPU must have AVX-512 F: call it from a function compiled with it (it is inlined there).
#[inline(always)]
pub unsafe fn words16(r: &[__m512i; 16], out: &mut [__m512i; 16]) {
    // SAFETY: the caller guarantees AVX-512 F; register operations only.
    unsafe {
        // 128-bit lane `L` of `u[4g + k]` holds word `4L + k` of rows `4g .. 4g + 4`.
        let mut u = [_mm512_setzero_si512(); 16];
        for g in 0..4 {
            let t0 = _mm512_unpacklo_epi32(r[4 * g], r[4 * g + 1]);
            let t1 = _mm512_unpackhi_epi32(r[4 * g], r[4 * g + 1]);
            let t2 = _mm512_unpacklo_epi32(r[4 * g + 2], r[4 * g + 3]);
            let t3 = _mm512_unpackhi_epi32(r[4 * g + 2], r[4 * g + 3]);
            u[4 * g] = _mm512_unpacklo_epi64(t0, t2);
            u[4 * g + 1] = _mm512_unpackhi_epi64(t0, t2);
            u[4 * g + 2] = _mm512_unpacklo_epi64(t1, t3);
            u[4 * g + 3] = _mm512_unpackhi_epi64(t1, t3);
        }
        // Word `4L + k` of all rows: lane `L` of `u[k]`, `u[4 + k]`, `u[8 + k]`, `u[12 + k]`.
        for k in 0..4 {
            let x0 = _mm512_shuffle_i32x4::<0x44>(u[k], u[4 + k]);
            let x1 = _mm512_shuffle_i32x4::<0xEE>(u[k], u[4 + k]);
            let x2 = _mm512_shuffle_i32x4::<0x44>(u[8 + k], u[12 + k]);
            let x3 = _mm512_shuffle_i32x4::<0xEE>(u[8 + k], u[12 + k]);
            out[k] = _mm512_shuffle_i32x4::<0x88>(x0, x2);
            out[4 + k] = _mm512_shuffle_i32x4::<0xDD>(x0, x2);
            out[8 + k] = _mm512_shuffle_i32x4::<0x88>(x1, x3);
            out[12 + k] = _mm512_shuffle_i32x4::<0xDD>(x1, x3);
        }
    }
}
