//! AVX2 kernel of [`Q8KCodes`] formats against q8_k (ggml's scheme), one weight block
//! unpacked once for up to four activation rows.
//!
//! Per block: the format's eight 32-code chunks become eight vectors of unsigned bytes
//! (`u < 64`), its sixteen `i8` group scales eight vectors of `i16` (group `2c` in the low
//! lane, `2c + 1` in the high lane of chunk `c`'s). Per row, per chunk: `vpmaddubsw` (unsigned
//! codes × signed activations: pair sums `≤ 2·63·128`, exact for every `i8`, `-128` included),
//! `vpmaddwd` with the scales into eight `i32` lanes, `bsums` against `min[g]` (the mins)
//! and against `−ZERO·scale[g]` (the zero code: then the block's lanes are summed into its
//! exact total), and one `vfmadd` per lane vector into the row's f32 accumulators. All integer steps are exact or wrap like the portable
//! kernel's and the f32 steps are the same (fused) operations, so every row gets the
//! portable result's bits.

use std::arch::x86_64::*;

use crate::dot::{GROUPS, LANES, Q8KCodes, finish};
use crate::q8k::BlockQ8K;
use qforge_simd::Avx2;
use qforge_simd::rows::{RowKernel, by_rows};

/// [`crate::dot::q8k_codes_vec_dot_rows`] with AVX2 (rows taken up to four at a time);
/// `false` (nothing written) without AVX2. `a.len() == out.len()` and every `a[r]` holds at
/// least `w.len()` blocks (checked by the caller).
pub(crate) fn codes_dot_rows<F: Q8KCodes>(w: &[F::Block], a: &[&[BlockQ8K]], out: &mut [f32]) -> bool {
    let Some(avx2) = Avx2::detect() else {
        return false;
    };
    by_rows(&Kernel::<F> { w, _avx2: avx2 }, a, out);
    true
}

/// The weight row and the proof of AVX2.
struct Kernel<'w, F: Q8KCodes> {
    w: &'w [F::Block],
    _avx2: Avx2,
}

impl<'a, F: Q8KCodes> RowKernel<&'a [BlockQ8K]> for Kernel<'_, F> {
    #[inline]
    fn rows<const R: usize>(&self, a: [&&'a [BlockQ8K]; R]) -> [f32; R] {
        let a = a.map(|a| &a[..self.w.len()]);
        // SAFETY: `self` holds an `Avx2` token, which exists only where the CPU has AVX2, FMA
        // and F16C, the only requirement of the `#[target_feature]` function.
        unsafe { rows_avx2::<F, R>(self.w, a) }
    }
}

/// The rows `a` (each exactly `w.len()` blocks): the row loop, compiled for AVX2 with the
/// format's unpacking inlined.
#[target_feature(enable = "avx2,fma,f16c")]
fn rows_avx2<F: Q8KCodes, const R: usize>(w: &[F::Block], a: [&[BlockQ8K]; R]) -> [f32; R] {
    let mut acc = [[_mm256_setzero_ps(); 2]; R];
    for (i, b) in w.iter().enumerate() {
        // SAFETY: this function has AVX2, FMA and F16C enabled.
        let u = unsafe { unpack::<F>(b) };
        for (acc, a) in acc.iter_mut().zip(&a) {
            let a = &a[i];
            // SAFETY: as above.
            let (isum, summs) = unsafe { block_lanes::<F>(&u, a) };
            let ad = a.d.get();
            acc[0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_set1_ps(u.dm[0] * ad), acc[0]);
            if F::HAS_MINS {
                acc[1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(summs), _mm256_set1_ps(u.dm[1] * ad), acc[1]);
            }
        }
    }
    let mut out = [0f32; R];
    for (o, acc) in out.iter_mut().zip(&acc) {
        let mut lanes = [[0f32; LANES]; 2];
        for (l, v) in lanes.iter_mut().zip(acc) {
            // SAFETY: `l` is 8 f32, exactly 32 bytes, so the unaligned store writes only it.
            unsafe { _mm256_storeu_ps(l.as_mut_ptr(), *v) };
        }
        *o = finish(F::HAS_MINS, &lanes);
    }
    out
}

/// One weight block, ready for the rows.
struct Unpacked {
    /// The codes of chunk `c` (elements `32c .. 32c + 32`), unsigned bytes.
    q: [__m256i; 8],
    /// Chunk `c`'s scales: `scale[2c]` in every `i16` of the low lane, `scale[2c + 1]` of
    /// the high lane.
    sc: [__m256i; 8],
    /// `−ZERO·scale[g]` per group (`|·| ≤ 32·128`, an `i16`).
    off: __m256i,
    /// `min[g]` per group.
    mins: __m256i,
    /// `d`, `dmin` widened to f32.
    dm: [f32; 2],
}

/// The block's codes, scales and mins as vectors.
///
/// # Safety
/// The CPU must have AVX2, FMA and F16C: only the `#[target_feature]` row loop calls this
/// (and inlines it: `#[inline(always)]` is not allowed on a `#[target_feature]` function,
/// and without it the vectors would go through memory).
#[inline(always)]
unsafe fn unpack<F: Q8KCodes>(b: &F::Block) -> Unpacked {
    // Constant chunk indices, so that every shift in the format's `chunk` is a constant.
    let c = |c| F::chunk(b, c);
    let q = bytemuck::cast::<[[u8; 32]; 8], [__m256i; 8]>([c(0), c(1), c(2), c(3), c(4), c(5), c(6), c(7)]);
    let (sc, mins) = F::scales(b);
    let sc = bytemuck::cast::<[i8; GROUPS], [u8; 16]>(sc);
    let dm = F::d_dmin(b).map(|h| h.bits());
    // SAFETY: the caller guarantees AVX2, FMA and F16C; the loads read exactly their arrays.
    // (No closures around intrinsics here: a closure does not inherit the caller's target
    // features, so it would stay an out-of-line call.)
    unsafe {
        let sc = _mm_loadu_si128(sc.as_ptr().cast());
        let off = _mm256_mullo_epi16(_mm256_cvtepi8_epi16(sc), _mm256_set1_epi16(-i16::from(F::ZERO)));
        // Even groups' scales widened into the low lane, odd groups' into the high lane.
        let split = _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
        let eo = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sc, split));
        // Chunk c: `i16` c of each lane, broadcast over that lane.
        let mut sc = [eo; 8];
        for (c, v) in sc.iter_mut().enumerate() {
            let c = c as u8;
            *v = _mm256_shuffle_epi8(eo, _mm256_set1_epi16(i16::from_le_bytes([2 * c, 2 * c + 1])));
        }
        let dm = _mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(dm[0]) | i32::from(dm[1]) << 16));
        Unpacked {
            q,
            sc,
            off,
            mins: _mm256_cvtepu8_epi16(_mm_loadu_si128(mins.as_ptr().cast())),
            dm: [_mm_cvtss_f32(dm), _mm_cvtss_f32(_mm_movehdup_ps(dm))],
        }
    }
}

/// The integer lanes `(isum, summs)` of the block against one activation block, as
/// [`Q8KCodes`] defines them.
///
/// # Safety
/// As [`unpack`]: AVX2, FMA and F16C.
#[inline(always)]
unsafe fn block_lanes<F: Q8KCodes>(u: &Unpacked, a: &BlockQ8K) -> (__m256i, __m256i) {
    let (qs, _) = a.qs.as_chunks::<32>();
    // SAFETY: the caller guarantees AVX2, FMA and F16C; each 32-byte load reads exactly a
    // 32-byte array (`qs` chunks, `bsums`).
    unsafe {
        let mut acc = _mm256_setzero_si256();
        if F::UNIT_SCALES {
            // |u − ZERO| ≤ 15: eight chunks of pair sums stay within `i16` (see the trait).
            let mut acc16 = _mm256_setzero_si256();
            for (q, a) in u.q.iter().zip(qs) {
                acc16 = _mm256_add_epi16(acc16, _mm256_maddubs_epi16(*q, _mm256_loadu_si256(a.as_ptr().cast())));
            }
            acc = _mm256_madd_epi16(acc16, _mm256_set1_epi16(1));
        } else {
            for ((q, sc), a) in u.q.iter().zip(&u.sc).zip(qs) {
                acc = _mm256_add_epi32(
                    acc,
                    _mm256_madd_epi16(_mm256_maddubs_epi16(*q, _mm256_loadu_si256(a.as_ptr().cast())), *sc),
                );
            }
        }
        let bsums = _mm256_loadu_si256(a.bsums.as_ptr().cast());
        if F::ZERO != 0 {
            // The zero code through `bsums`, and the block as its exact total in lane 0.
            let v = _mm256_add_epi32(acc, _mm256_madd_epi16(bsums, u.off));
            let v = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
            let v = _mm_add_epi32(v, _mm_unpackhi_epi64(v, v));
            let v = _mm_add_epi32(v, _mm_srli_epi64::<32>(v));
            acc = _mm256_zextsi128_si256(_mm_cvtsi32_si128(_mm_cvtsi128_si32(v)));
        }
        let m = if F::HAS_MINS { _mm256_madd_epi16(bsums, u.mins) } else { _mm256_setzero_si256() };
        (acc, m)
    }
}
