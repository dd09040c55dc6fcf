//! Bit layouts shared by the K-quant blocks: 2-bit / 4-bit code planes, high-bit masks and
//! the two 6-bit scale packings (12 bytes each).
//!
//! Code planes: a 256-element super-block is stored as two 128-element halves. Within a half,
//! element `32 * k + l` (k = 0..4 for 2-bit, 0..2 for 4-bit) lives in byte `l` of the half's
//! plane, at bit offset `2k` (2-bit) or `4k` (4-bit).

use crate::QK_K;

/// Packs 2-bit codes (q2_k, low bits of q3_k): byte `32 * h + l` holds elements
/// `128 h + l + 32 k` at bits `2k..2k+2`.
#[inline(always)]
pub(crate) fn pack_2bit(codes: &[u8; QK_K], qs: &mut [u8; QK_K / 4]) {
    for (plane, src) in qs.chunks_exact_mut(32).zip(codes.chunks_exact(128)) {
        for (l, byte) in plane.iter_mut().enumerate() {
            *byte = (src[l] & 3) | (src[l + 32] & 3) << 2 | (src[l + 64] & 3) << 4 | (src[l + 96] & 3) << 6;
        }
    }
}

/// The inverse of [`pack_2bit`] for element `i`.
#[cfg(test)]
#[inline(always)]
pub(crate) fn get_2bit(qs: &[u8; QK_K / 4], i: usize) -> u8 {
    let (h, r) = (i / 128, i % 128);
    (qs[32 * h + r % 32] >> (2 * (r / 32))) & 3
}

/// Packs 4-bit codes (q4_k, low bits of q5_k): byte `32 * p + l` holds element `64 p + l` in
/// its low nibble and `64 p + l + 32` in its high nibble.
#[inline(always)]
pub(crate) fn pack_4bit(codes: &[u8; QK_K], qs: &mut [u8; QK_K / 2]) {
    for (plane, src) in qs.chunks_exact_mut(32).zip(codes.chunks_exact(64)) {
        for (l, byte) in plane.iter_mut().enumerate() {
            *byte = (src[l] & 0xF) | (src[l + 32] & 0xF) << 4;
        }
    }
}

/// The inverse of [`pack_4bit`] for element `i`.
#[cfg(test)]
#[inline(always)]
pub(crate) fn get_4bit(qs: &[u8; QK_K / 2], i: usize) -> u8 {
    let (p, r) = (i / 64, i % 64);
    (qs[32 * p + r % 32] >> (4 * (r / 32))) & 0xF
}

/// High-bit mask of 32 bytes (q3_k `hmask`, q5_k `qh`): element `i` is bit `i / 32` of byte
/// `i % 32`. Sets the bit where `codes[i] >= 1 << low_bits`, and strips it from the code.
#[inline(always)]
pub(crate) fn split_high_bit(codes: &mut [u8; QK_K], low_bits: u32, mask: &mut [u8; QK_K / 8]) {
    mask.fill(0);
    for (i, c) in codes.iter_mut().enumerate() {
        if *c >> low_bits != 0 {
            mask[i % 32] |= 1 << (i / 32);
            *c -= 1 << low_bits;
        }
    }
}

/// Whether the high bit of element `i` is set in a [`split_high_bit`] mask.
#[cfg(test)]
#[inline(always)]
pub(crate) fn high_bit(mask: &[u8; QK_K / 8], i: usize) -> bool {
    mask[i % 32] >> (i / 32) & 1 != 0
}

/// q4_k / q5_k scale packing: eight 6-bit scales `sc` and eight 6-bit mins `m` in 12 bytes.
///
/// ```text
/// byte 0..4 : sc[j]   (bits 0..6) | sc[j+4] >> 4 (bits 6..8)
/// byte 4..8 : m[j]    (bits 0..6) | m[j+4]  >> 4 (bits 6..8)
/// byte 8..12: sc[j+4] & 0xF (bits 0..4) | (m[j+4] & 0xF) << 4
/// ```
#[inline(always)]
pub(crate) fn pack_scale_min_k4(sc: &[u8; 8], m: &[u8; 8]) -> [u8; 12] {
    let mut out = [0u8; 12];
    for j in 0..8 {
        let (ls, lm) = (sc[j], m[j]);
        if j < 4 {
            out[j] = ls;
            out[j + 4] = lm;
        } else {
            out[j + 4] = (ls & 0xF) | (lm & 0xF) << 4;
            out[j - 4] |= (ls >> 4) << 6;
            out[j] |= (lm >> 4) << 6;
        }
    }
    out
}

/// ggml's `get_scale_min_k4`: the 6-bit (scale, min) of sub-block `j` (0..8).
#[inline(always)]
pub(crate) fn scale_min_k4(j: usize, q: &[u8; 12]) -> (u8, u8) {
    if j < 4 {
        (q[j] & 63, q[j + 4] & 63)
    } else {
        ((q[j + 4] & 0xF) | (q[j - 4] >> 6) << 4, (q[j + 4] >> 4) | (q[j] >> 6) << 4)
    }
}

/// All eight (scale, min) pairs of [`scale_min_k4`] at once, with ggml's 32-bit mask trick
/// (`ggml_vec_dot_q4_K_q8_K`'s `utmp`): `(scales, mins)`.
#[inline(always)]
pub(crate) fn scales_mins_k4(q: &[u8; 12]) -> ([u8; 8], [u8; 8]) {
    const LOW6: u32 = 0x3f3f_3f3f;
    const LOW4: u32 = 0x0f0f_0f0f;
    const LOW2: u32 = 0x0303_0303;
    let w: [u32; 3] = std::array::from_fn(|i| u32::from_le_bytes([q[4 * i], q[4 * i + 1], q[4 * i + 2], q[4 * i + 3]]));
    let sc = [w[0] & LOW6, (w[2] & LOW4) | (w[0] >> 6 & LOW2) << 4];
    let m = [w[1] & LOW6, (w[2] >> 4 & LOW4) | (w[1] >> 6 & LOW2) << 4];
    let bytes = |v: [u32; 2]| {
        let (a, b) = (v[0].to_le_bytes(), v[1].to_le_bytes());
        [a[0], a[1], a[2], a[3], b[0], b[1], b[2], b[3]]
    };
    (bytes(sc), bytes(m))
}

/// q3_k scale packing: sixteen 6-bit scales (stored with a +32 bias) in 12 bytes.
///
/// ```text
/// byte 0..8 : s[j] & 0xF (bits 0..4) | (s[j+8] & 0xF) << 4
/// byte 8..12: (s[j] >> 4) | (s[j+4] >> 4) << 2 | (s[j+8] >> 4) << 4 | (s[j+12] >> 4) << 6
/// ```
#[inline(always)]
pub(crate) fn pack_scales_q3(s: &[u8; 16]) -> [u8; 12] {
    let mut out = [0u8; 12];
    for (j, &l) in s.iter().enumerate() {
        if j < 8 {
            out[j] = l & 0xF;
        } else {
            out[j - 8] |= (l & 0xF) << 4;
        }
        out[j % 4 + 8] |= (l >> 4) << (2 * (j / 4));
    }
    out
}

/// The inverse of [`pack_scales_q3`]: the biased 6-bit scale of sub-block `j` (0..16).
#[inline(always)]
pub(crate) fn scale_q3(j: usize, q: &[u8; 12]) -> u8 {
    let low = if j < 8 { q[j] & 0xF } else { q[j - 8] >> 4 };
    low | ((q[8 + j % 4] >> (2 * (j / 4))) & 3) << 4
}

/// All sixteen scales of [`scale_q3`] at once, less the bias of 32 (`sc − 32`, as `i8`), with
/// ggml's 32-bit mask trick (`ggml_vec_dot_q3_K_q8_K`'s).
#[inline(always)]
pub(crate) fn scales_q3(q: &[u8; 12]) -> [i8; 16] {
    const LOW4: u32 = 0x0f0f_0f0f;
    const LOW2: u32 = 0x0303_0303;
    let w: [u32; 3] = std::array::from_fn(|i| u32::from_le_bytes([q[4 * i], q[4 * i + 1], q[4 * i + 2], q[4 * i + 3]]));
    let v = [
        (w[0] & LOW4) | (w[2] & LOW2) << 4,
        (w[1] & LOW4) | (w[2] >> 2 & LOW2) << 4,
        (w[0] >> 4 & LOW4) | (w[2] >> 4 & LOW2) << 4,
        (w[1] >> 4 & LOW4) | (w[2] >> 6 & LOW2) << 4,
    ];
    // Bytewise `− 32` with no borrow between bytes: bit 7 set first (every byte is < 64),
    // then flipped back.
    bytemuck::cast(v.map(|w| ((w | 0x8080_8080) - 0x2020_2020) ^ 0x8080_8080))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scale_packings_round_trip() {
        let sc: [u8; 8] = [0, 63, 17, 42, 5, 63, 33, 1];
        let m: [u8; 8] = [63, 0, 9, 50, 62, 7, 32, 16];
        let p = pack_scale_min_k4(&sc, &m);
        for j in 0..8 {
            assert_eq!(scale_min_k4(j, &p), (sc[j], m[j]));
        }
        let s: [u8; 16] = [0, 1, 63, 32, 31, 12, 48, 7, 9, 60, 2, 33, 44, 17, 63, 0];
        let p = pack_scales_q3(&s);
        for (j, &v) in s.iter().enumerate() {
            assert_eq!(scale_q3(j, &p), v);
        }
    }

    /// The all-at-once unpackings against the per-index ones, on random bytes.
    #[test]
    fn bulk_scale_unpacking_matches() {
        let mut rng = qforge_core::rand::Rng::new(7);
        for _ in 0..10_000 {
            let q: [u8; 12] = std::array::from_fn(|_| rng.next_u64() as u8);
            let (sc, m) = scales_mins_k4(&q);
            for j in 0..8 {
                assert_eq!((sc[j], m[j]), scale_min_k4(j, &q));
            }
            let s3 = scales_q3(&q);
            for (j, &s) in s3.iter().enumerate() {
                assert_eq!(i32::from(s), i32::from(scale_q3(j, &q)) - 32);
            }
        }
    }

    #[test]
    fn code_planes_round_trip() {
        let mut codes = [0u8; QK_K];
        for (i, c) in codes.iter_mut().enumerate() {
            *c = (i * 7 % 32) as u8;
        }
        let mut split = codes;
        let mut mask = [0u8; QK_K / 8];
        split_high_bit(&mut split, 4, &mut mask);
        let mut q4 = [0u8; QK_K / 2];
        pack_4bit(&split, &mut q4);
        for (i, &c) in codes.iter().enumerate() {
            assert_eq!(get_4bit(&q4, i) | (high_bit(&mask, i) as u8) << 4, c);
        }
        let two: [u8; QK_K] = std::array::from_fn(|i| (i * 5 % 4) as u8);
        let mut q2 = [0u8; QK_K / 4];
        pack_2bit(&two, &mut q2);
        for (i, &c) in two.iter().enumerate() {
            assert_eq!(get_2bit(&q2, i), c);
        }
    }
}
