//! AVX2 kernel of [`crate::dot::vec_dot`], chosen at run time where the CPU has AVX2, FMA and
//! F16C; everything else runs the portable kernel, [`crate::dot::vec_dot_portable`].
//!
//! One generic row loop for every weight / activation pair, parameterized by the block types
//! (their [`Packed`] layout and [`Kind`] select the unpacking at compile time). Per block, as
//! ggml's AVX2 kernels do:
//!
//! * 4-/5-bit weights: the 16 bytes of nibbles are split into 32 codes with a shift and an
//!   AND; the 5th bit is spread from `qh` with a byte shuffle, an OR with a constant and a
//!   compare (ggml's `bytes_from_bits_32`). Affine codes (q4_1, q5_1: `0..32`) multiply the
//!   activations directly with `vpmaddubsw` (unsigned × signed); symmetric ones, less their
//!   offset, use the sign trick `maddubs(|a|, w·sign(a))`. Both are exact for every `i8`
//!   activation (-128 included: `|a|` is read unsigned and `|w| ≤ 16`), with no saturation
//!   (pairs ≤ 2·31·128). `vpmaddwd` with ones then gives 8 `i32` lanes of 4 products.
//! * 8-bit weights (q8_0, q8_1): both sides widened to `i16` in halves and `vpmaddwd`-ed —
//!   exact for every input, where the sign trick would go wrong on `-128`.
//! * The lanes go to f32 (exact: |lane| ≤ 2^16) and are scaled by the broadcast `d_w·d_a`
//!   (eight blocks' scales are widened at once with `vcvtph2ps`) into an f32 accumulator.
//!
//! The lanes and every f32 operation are those of the portable kernel, in the same order
//! (one fused multiply-add per block, as `f32::mul_add` there), so both give the same bits;
//! the tests check that.
//!
//! The only `unsafe` of the crate lives here: unaligned loads of fixed-size arrays and the
//! call into the `#[target_feature]` function after the run-time check.
#![allow(unsafe_code)]

use std::arch::x86_64::*;

use crate::block::{Kind, LegacyBlock, Packed};
use crate::dot::{ACCS, ActBlock, BATCH, LANES, finish};

/// Whether this CPU runs the AVX2 kernels ([`qforge_core::cpu::avx2`]: AVX2, FMA, F16C).
pub(crate) fn has_avx2() -> bool {
    qforge_core::cpu::avx2()
}

/// [`crate::dot::vec_dot`] with AVX2, or `None` where the CPU lacks it.
#[inline]
pub(crate) fn vec_dot<W: LegacyBlock, A: ActBlock>(w: &[W], a: &[A]) -> Option<f32> {
    if !has_avx2() {
        return None;
    }
    // SAFETY: `has_avx2()` has just checked (with `is_x86_feature_detected!`) that this CPU
    // supports AVX2, FMA and F16C, the only requirement of the `#[target_feature]` function.
    Some(unsafe { vec_dot_avx2(w, a) })
}

/// [`crate::dot::vec_dot`] of one weight row with each of the activation rows `a` (all of
/// the weight row's length) into `out`, each weight block unpacked once for up to [`ROWS`]
/// rows; `false` (nothing written) where the CPU lacks AVX2.
pub(crate) fn vec_dot_rows<W: LegacyBlock, A: ActBlock>(w: &[W], a: &[&[A]], out: &mut [f32]) -> bool {
    if !has_avx2() {
        return false;
    }
    for (a, out) in a.chunks(ROWS).zip(out.chunks_mut(ROWS)) {
        // SAFETY: `has_avx2()` has just checked that this CPU supports AVX2, FMA and F16C, the
        // only requirement of the `#[target_feature]` functions.
        unsafe {
            match *a {
                [a0] => out[0] = vec_dot_avx2(w, a0),
                [a0, a1] => out.copy_from_slice(&rows_avx2(w, [a0, a1])),
                [a0, a1, a2] => out.copy_from_slice(&rows_avx2(w, [a0, a1, a2])),
                [a0, a1, a2, a3] => out.copy_from_slice(&rows_avx2(w, [a0, a1, a2, a3])),
                _ => unreachable!("chunks of at most ROWS = 4"),
            }
        }
    }
    true
}

/// [`crate::codec::encode_row`] compiled for AVX2 (LLVM vectorizes the block loops 8 lanes
/// wide); `false` (nothing written) where the CPU lacks AVX2.
pub(crate) fn encode_row<B: LegacyBlock>(x: &[f32], weights: Option<&[f32]>, blocks: &mut [B]) -> bool {
    if !has_avx2() {
        return false;
    }
    // SAFETY: `has_avx2()` has just checked that this CPU supports AVX2, FMA and F16C, all
    // the `#[target_feature]` function needs.
    unsafe { encode_row_avx2(x, weights, blocks) };
    true
}

#[target_feature(enable = "avx2,fma,f16c")]
fn encode_row_avx2<B: LegacyBlock>(x: &[f32], weights: Option<&[f32]>, blocks: &mut [B]) {
    crate::codec::encode_row_portable(x, weights, blocks)
}

/// Activation rows one pass over the weight row serves.
const ROWS: usize = 4;

/// One row: the `R = 1` case of [`rows_avx2`].
#[target_feature(enable = "avx2,fma,f16c")]
pub(crate) fn vec_dot_avx2<W: LegacyBlock, A: ActBlock>(w: &[W], a: &[A]) -> f32 {
    rows_avx2(w, [a])[0]
}

/// The whole row against `R` activation rows, compiled for AVX2 so that unpacking, lane sums
/// and f32 lanes are inlined together. For each row: the same blocks, lanes, slots and order
/// as [`crate::dot::vec_dot_portable`]; each weight block is unpacked once for all `R`.
#[target_feature(enable = "avx2,fma,f16c")]
fn rows_avx2<W: LegacyBlock, A: ActBlock, const R: usize>(w: &[W], a: [&[A]; R]) -> [f32; R] {
    const { assert!(BATCH.is_multiple_of(ACCS) && LANES == 8 && R >= 1) };
    let n = a.iter().fold(w.len(), |n, a| n.min(a.len()));
    let w = &w[..n];
    let a: [&[A]; R] = std::array::from_fn(|r| &a[r][..n]);
    let mut acc = [[_mm256_setzero_ps(); ACCS]; R];
    // Affine formats: `[·, m·s]` pairs of blocks 0..4 and 4..8 of every batch, summed.
    let mut summs = [[_mm256_setzero_ps(); 2]; R];
    // One batch: BATCH blocks, the first at a multiple of BATCH in the row; block j's lanes
    // into `acc[r][j % ACCS]`, and for affine weights `m_w·s_a` into slot j of `summs[r]`.
    // (A macro, not a function: `#[inline(always)]` is not allowed with `#[target_feature]`,
    // and the body must be inlined for the accumulators to stay in registers.)
    macro_rules! batch {
        ($w:expr, $a:expr) => {{
            let (w, a): (&[W; BATCH], [&[A; BATCH]; R]) = ($w, $a);
            let mut ds = [[0f32; BATCH]; R];
            if W::KIND == Kind::Affine {
                // `d, m` (weights) and `d, s` (q8_1) are adjacent f16 pairs: one 32-bit load
                // per block and side, and one product gives `[d_w·d_a, m_w·s_a]` per block.
                let pair = |d: u16, m: u16| u32::from(d) | (u32::from(m) << 16);
                let wp: [u32; BATCH] = std::array::from_fn(|j| pair(w[j].d_bits(), w[j].m_bits()));
                let at = |p: &[u32; BATCH], h: usize| std::array::from_fn(|i| p[4 * h + i]);
                let wv = [widen_pairs(at(&wp, 0)), widen_pairs(at(&wp, 1))];
                for r in 0..R {
                    let ap: [u32; BATCH] = std::array::from_fn(|j| pair(a[r][j].d_bits(), a[r][j].s_bits()));
                    let mut dm = [[0f32; BATCH]; 2];
                    for (h, (dm, s)) in dm.iter_mut().zip(&mut summs[r]).enumerate() {
                        let v = _mm256_mul_ps(wv[h], widen_pairs(at(&ap, h)));
                        // SAFETY: `dm` is 8 f32, exactly 32 bytes: the store writes only it.
                        unsafe { _mm256_storeu_ps(dm.as_mut_ptr(), v) };
                        // Odd lanes: slots 4h..4h+4 of the m·s sums (even lanes are not read).
                        *s = _mm256_add_ps(*s, v);
                    }
                    ds[r] = std::array::from_fn(|j| dm[j / 4][2 * (j % 4)]);
                }
            } else {
                let wd = widen(std::array::from_fn(|j| w[j].d_bits()));
                for r in 0..R {
                    let d = _mm256_mul_ps(wd, widen(std::array::from_fn(|j| a[r][j].d_bits())));
                    // SAFETY: `ds[r]` is 8 f32, exactly 32 bytes: the store writes only it.
                    unsafe { _mm256_storeu_ps(ds[r].as_mut_ptr(), d) };
                }
            }
            for j in 0..BATCH {
                let wv = unpack_avx2(&w[j]);
                let k = j % ACCS;
                for r in 0..R {
                    let lanes = _mm256_cvtepi32_ps(isum_unpacked::<W>(wv, a[r][j].qs()));
                    acc[r][k] = _mm256_fmadd_ps(_mm256_set1_ps(ds[r][j]), lanes, acc[r][k]);
                }
            }
        }};
    }
    let (wb, wt) = w.as_chunks::<BATCH>();
    for (i, w) in wb.iter().enumerate() {
        batch!(w, std::array::from_fn(|r| &a[r].as_chunks::<BATCH>().0[i]));
    }
    if !wt.is_empty() {
        // The tail, filled up with zero blocks: they add +0 to every lane and slot, which
        // leaves each as it was (none is ever -0), so this is the tail alone, bit for bit.
        let start = n - wt.len();
        let mut w8 = [W::zeroed(); BATCH];
        let mut a8 = [[A::zeroed(); BATCH]; R];
        w8[..wt.len()].copy_from_slice(wt);
        for r in 0..R {
            a8[r][..wt.len()].copy_from_slice(&a[r][start..]);
        }
        batch!(&w8, std::array::from_fn(|r| &a8[r]));
    }
    std::array::from_fn(|r| {
        let mut out = [[0f32; LANES]; ACCS];
        for (o, v) in out.iter_mut().zip(acc[r]) {
            // SAFETY: `o` is an `&mut [f32; 8]`, exactly 32 bytes, so the unaligned store
            // writes only that array; AVX is enabled here.
            unsafe { _mm256_storeu_ps(o.as_mut_ptr(), v) };
        }
        let mut pairs = [[0f32; BATCH]; 2];
        for (p, v) in pairs.iter_mut().zip(summs[r]) {
            // SAFETY: as above, `p` is exactly 8 f32.
            unsafe { _mm256_storeu_ps(p.as_mut_ptr(), v) };
        }
        let ms: [f32; BATCH] = std::array::from_fn(|j| pairs[j / 4][2 * (j % 4) + 1]);
        finish(out, ms)
    })
}

/// Four pairs of f16 values (raw bits, the first of each in the low half) widened to f32.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn widen_pairs(p: [u32; 4]) -> __m256 {
    // SAFETY: `p` is 4 u32, exactly 16 bytes, so the unaligned load reads only `p`.
    _mm256_cvtph_ps(unsafe { _mm_loadu_si128(p.as_ptr().cast()) })
}

/// Eight f16 values (raw bits) widened to f32, exactly (`vcvtph2ps`).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn widen(h: [u16; BATCH]) -> __m256 {
    // SAFETY: `h` is 8 u16, exactly 16 bytes, so the unaligned load reads only `h`.
    _mm256_cvtph_ps(unsafe { _mm_loadu_si128(h.as_ptr().cast()) })
}

/// [`crate::dot::isum_lanes`] with AVX2: the same 8 exact `i32` lanes (the tests compare them).
#[cfg(test)]
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(crate) fn isum_lanes_avx2<W: LegacyBlock, A: ActBlock>(w: &W, a: &A) -> __m256i {
    isum_unpacked::<W>(unpack_avx2(w), a.qs())
}

/// A weight block in registers, ready for [`isum_unpacked`]: 8-bit quants widened to `i16`
/// in two halves, or the 32 unpacked 4-/5-bit weights (second half unused).
#[derive(Clone, Copy)]
pub(crate) struct Unpacked(__m256i, __m256i);

/// Unpacks a weight block once, for any number of activation blocks.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(crate) fn unpack_avx2<W: LegacyBlock>(w: &W) -> Unpacked {
    match w.packed() {
        Packed::Bytes(wq) => {
            // SAFETY: `wq` is `&[i8; 32]`, so each 16-byte unaligned load (offsets 0 and 16)
            // reads only inside the array.
            let (w0, w1) =
                unsafe { (_mm_loadu_si128(wq.as_ptr().cast()), _mm_loadu_si128(wq.as_ptr().add(16).cast())) };
            Unpacked(_mm256_cvtepi8_epi16(w0), _mm256_cvtepi8_epi16(w1))
        }
        Packed::Nibbles { qs, qh } => {
            // SAFETY: `qs` is `&[u8; 16]`: the unaligned load reads exactly the array.
            let q = unsafe { _mm_loadu_si128(qs.as_ptr().cast()) };
            // The low four bits of each code (elements 0..16 from the low nibbles).
            let low = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16::<4>(q), q), _mm256_set1_epi8(0x0F));
            // The weights: codes (affine), or codes less 2^(BITS-1) (symmetric). With a 5th
            // bit, `low - 16` is `low | 0xF0` (as i8), so a clear bit sets the top four.
            let wv = match (qh, W::KIND) {
                (None, Kind::Affine) => low,
                (None, Kind::Symmetric) => _mm256_sub_epi8(low, _mm256_set1_epi8(1 << (W::BITS - 1))),
                (Some(qh), Kind::Affine) => {
                    _mm256_or_si256(low, _mm256_and_si256(bytes_from_bits(qh), _mm256_set1_epi8(0x10)))
                }
                (Some(qh), Kind::Symmetric) => {
                    _mm256_or_si256(low, _mm256_andnot_si256(bytes_from_bits(qh), _mm256_set1_epi8(0xF0u8 as i8)))
                }
            };
            Unpacked(wv, wv)
        }
    }
}

/// The 8 exact `i32` lanes of an unpacked weight block against 32 activation quants.
/// * 8-bit weights: both sides widened to `i16` in halves and `vpmaddwd`-ed — exact for every
///   input, where the sign trick would go wrong on `-128`.
/// * 4-/5-bit weights: affine codes (`0..32`) multiply the activations directly with
///   `vpmaddubsw` (unsigned × signed); symmetric ones use `maddubs(|a|, w·sign(a))`, exact for
///   every `i8` activation (`|a|` is read unsigned and `|w| ≤ 16`; pairs ≤ 2·31·128).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(crate) fn isum_unpacked<W: LegacyBlock>(w: Unpacked, aq: &[i8; 32]) -> __m256i {
    if W::BITS == 8 {
        // SAFETY: `aq` is `&[i8; 32]`, so each 16-byte unaligned load (offsets 0 and 16) reads
        // only inside the array.
        let (a0, a1) = unsafe { (_mm_loadu_si128(aq.as_ptr().cast()), _mm_loadu_si128(aq.as_ptr().add(16).cast())) };
        let lo = _mm256_madd_epi16(w.0, _mm256_cvtepi8_epi16(a0));
        let hi = _mm256_madd_epi16(w.1, _mm256_cvtepi8_epi16(a1));
        return _mm256_add_epi32(lo, hi);
    }
    // SAFETY: `aq` is `&[i8; 32]`: the unaligned 32-byte load reads exactly the array.
    let av = unsafe { _mm256_loadu_si256(aq.as_ptr().cast()) };
    let prod = match W::KIND {
        Kind::Affine => _mm256_maddubs_epi16(w.0, av),
        Kind::Symmetric => _mm256_maddubs_epi16(_mm256_abs_epi8(av), _mm256_sign_epi8(w.0, av)),
    };
    _mm256_madd_epi16(prod, _mm256_set1_epi16(1))
}

/// Byte `j` = 0xFF where bit `j` of the little-endian `bits` is set, else 0 (ggml's
/// `bytes_from_bits_32`): byte `j` gets byte `j / 8` of the word, every other bit is set by an
/// OR, and only a byte whose bit `j % 8` was set compares equal to all ones.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn bytes_from_bits(bits: [u8; 4]) -> __m256i {
    let spread = _mm256_shuffle_epi8(
        _mm256_set1_epi32(i32::from_le_bytes(bits)),
        _mm256_set_epi64x(0x0303_0303_0303_0303, 0x0202_0202_0202_0202, 0x0101_0101_0101_0101, 0),
    );
    let others = _mm256_or_si256(spread, _mm256_set1_epi64x(0x7fbf_dfef_f7fb_fdfe));
    _mm256_cmpeq_epi8(others, _mm256_set1_epi64x(-1))
}

#[cfg(test)]
mod tests;
