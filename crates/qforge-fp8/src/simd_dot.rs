//! The fp8 dot of several rows at once (AVX2 and AVX-512): one side of the dot decoded once
//! to f32 by the caller (the *plain* row, pre-scaled), the other side's codes (the *coded*
//! rows, up to [`MAX_PASS`] of them per pass over the plain row) viewed as f16 and widened by
//! `vcvtph2ps` in the loop.
//!
//! An fp8 code sign-extended to 16 bits, shifted left by `10 − MBITS` and masked to the sign,
//! exponent and mantissa fields is the f16 whose value is the code's times `2^(BIAS − 15)`
//! (exactly: f16 has more exponent and mantissa bits than either encoding, subnormals
//! included), e5m2's Inf / NaN codes included. e4m3's NaN code (`0x7F` magnitude) becomes a
//! finite f16, so a block holding one is found separately and its partial set to NaN, which
//! is what any sum with a NaN product is. The plain row carries the factor `2^(15 − BIAS)`.
//!
//! The sums are the format's ([`crate::block_dot`]): element `k` of a 128-element block adds
//! into lane `k % 16`, the lanes then summed in order. Every product of two fp8 values is
//! exact in f32 (at most 8 significant bits, exponents far inside f32's range), so
//! `fma(w, a, lane)` rounds exactly as `lane + w·a` does: the same bits, NaN payloads aside.
#![allow(unsafe_code)]

use std::arch::x86_64::*;

use qforge_simd::{Avx2, Vnni};

use crate::Fp8Kind;
use crate::grid::BLOCK;

/// The most coded rows one pass dots with the plain row.
pub(crate) const MAX_PASS: usize = 4;

/// 16 f32 lanes of a block's partial sums: two 256-bit registers (AVX2) or one 512-bit one.
trait Lanes: Copy {
    /// All lanes +0.
    ///
    /// # Safety
    /// The CPU must have the features of the kernel the type belongs to.
    unsafe fn zero() -> Self;
    /// `lanes[l] = fma(f16(h[l]), plain[l], lanes[l])` for `l < 16`.
    ///
    /// # Safety
    /// As [`Lanes::zero`]; `plain` is valid for reading 16 f32.
    unsafe fn fma(self, h: __m256i, plain: *const f32) -> Self;
    /// The lanes, in order.
    ///
    /// # Safety
    /// As [`Lanes::zero`].
    unsafe fn get(self) -> [f32; 16];
    /// The partials of four blocks of four rows, `acc[b][r]`: each one's lanes summed in
    /// order from +0 (`((0 + l0) + l1) + …`, as [`crate::block_dot`] adds them), `[b][r]`.
    /// The lanes are transposed so that one vector add takes a lane of every row of two
    /// (AVX2) or all four (AVX-512) blocks: a block's 16 dependent adds one after the other,
    /// the next block's waiting behind them, ran the kernel at half its speed.
    ///
    /// # Safety
    /// As [`Lanes::zero`].
    unsafe fn sums_4x4(acc: [[Self; 4]; 4]) -> [[f32; 4]; 4];
    /// Whether one of the `BLOCK` bytes at `p` is e4m3's NaN (`c & 0x7F == 0x7F`).
    ///
    /// # Safety
    /// As [`Lanes::zero`]; `p` is valid for reading `BLOCK` bytes.
    unsafe fn any_nan_e4m3(p: *const u8) -> bool;
}

/// `[z0, z1, z2, z3]` transposed within each 128-bit lane: lane `k` of result `i` holds
/// element `4k + i` of the four inputs (eight unpacks, AVX2 or AVX-512 alike).
macro_rules! transpose_4x4 {
    ($z:expr, $lo:ident, $hi:ident, $lopd:ident, $hipd:ident, $cast_pd:ident, $cast_ps:ident) => {{
        let [z0, z1, z2, z3] = $z;
        let (t0, t1, t2, t3) = ($lo(z0, z1), $hi(z0, z1), $lo(z2, z3), $hi(z2, z3));
        let (t0, t1, t2, t3) = ($cast_pd(t0), $cast_pd(t1), $cast_pd(t2), $cast_pd(t3));
        [$cast_ps($lopd(t0, t2)), $cast_ps($hipd(t0, t2)), $cast_ps($lopd(t1, t3)), $cast_ps($hipd(t1, t3))]
    }};
}

impl Lanes for [__m256; 2] {
    #[inline(always)]
    unsafe fn zero() -> Self {
        // SAFETY: the caller's CPU has AVX (part of AVX2).
        unsafe { [_mm256_setzero_ps(); 2] }
    }

    #[inline(always)]
    unsafe fn fma(self, h: __m256i, plain: *const f32) -> Self {
        // SAFETY: AVX2, FMA and F16C are the caller's; `plain` holds 16 f32, the two loads'.
        unsafe {
            let lo = _mm256_cvtph_ps(_mm256_castsi256_si128(h));
            let hi = _mm256_cvtph_ps(_mm256_extracti128_si256::<1>(h));
            [
                _mm256_fmadd_ps(lo, _mm256_loadu_ps(plain), self[0]),
                _mm256_fmadd_ps(hi, _mm256_loadu_ps(plain.add(8)), self[1]),
            ]
        }
    }

    #[inline(always)]
    unsafe fn get(self) -> [f32; 16] {
        let mut out = [0f32; 16];
        // SAFETY: `out` holds the 16 f32 the two stores write; AVX is the caller's.
        unsafe {
            _mm256_storeu_ps(out.as_mut_ptr(), self[0]);
            _mm256_storeu_ps(out.as_mut_ptr().add(8), self[1]);
        }
        out
    }

    #[inline(always)]
    unsafe fn sums_4x4(acc: [[Self; 4]; 4]) -> [[f32; 4]; 4] {
        let mut out = [[0f32; 4]; 4];
        // SAFETY: AVX is the caller's; each store writes the 8 f32 of two `out` entries.
        unsafe {
            for pair in 0..2 {
                let (b0, b1) = (2 * pair, 2 * pair + 1);
                let mut s = _mm256_setzero_ps();
                for h in 0..2 {
                    // `u[b][i]`, 128-bit lane `k`: lane `8h + 4k + i` of the block's four rows.
                    let mut u = [[_mm256_setzero_ps(); 4]; 2];
                    for (u, b) in u.iter_mut().zip([b0, b1]) {
                        let a = &acc[b];
                        *u = transpose_4x4!(
                            [a[0][h], a[1][h], a[2][h], a[3][h]],
                            _mm256_unpacklo_ps,
                            _mm256_unpackhi_ps,
                            _mm256_unpacklo_pd,
                            _mm256_unpackhi_pd,
                            _mm256_castps_pd,
                            _mm256_castpd_ps
                        );
                    }
                    // Lanes 8h + 0..4 (the low halves), then 8h + 4..8 (the high ones).
                    for (a, b) in u[0].iter().zip(&u[1]) {
                        s = _mm256_add_ps(s, _mm256_permute2f128_ps::<0x20>(*a, *b));
                    }
                    for (a, b) in u[0].iter().zip(&u[1]) {
                        s = _mm256_add_ps(s, _mm256_permute2f128_ps::<0x31>(*a, *b));
                    }
                }
                _mm256_storeu_ps(out[b0..=b1].as_flattened_mut().as_mut_ptr(), s);
            }
        }
        out
    }

    #[inline(always)]
    unsafe fn any_nan_e4m3(p: *const u8) -> bool {
        // SAFETY: AVX2 is the caller's; the four loads read the BLOCK = 128 bytes at `p`.
        unsafe {
            let m7 = _mm256_set1_epi8(0x7F);
            let mut m = _mm256_setzero_si256();
            for i in 0..BLOCK / 32 {
                m = _mm256_max_epu8(m, _mm256_and_si256(_mm256_loadu_si256(p.add(32 * i).cast()), m7));
            }
            _mm256_movemask_epi8(_mm256_cmpeq_epi8(m, m7)) != 0
        }
    }
}

impl Lanes for __m512 {
    #[inline(always)]
    unsafe fn zero() -> Self {
        // SAFETY: the caller's CPU has AVX-512 F.
        unsafe { _mm512_setzero_ps() }
    }

    #[inline(always)]
    unsafe fn fma(self, h: __m256i, plain: *const f32) -> Self {
        // SAFETY: AVX-512 F is the caller's; `plain` holds the 16 f32 the load reads.
        unsafe { _mm512_fmadd_ps(_mm512_cvtph_ps(h), _mm512_loadu_ps(plain), self) }
    }

    #[inline(always)]
    unsafe fn get(self) -> [f32; 16] {
        let mut out = [0f32; 16];
        // SAFETY: `out` holds the 16 f32 the store writes; AVX-512 F is the caller's.
        unsafe { _mm512_storeu_ps(out.as_mut_ptr(), self) };
        out
    }

    #[inline(always)]
    unsafe fn sums_4x4(acc: [[Self; 4]; 4]) -> [[f32; 4]; 4] {
        let mut out = [[0f32; 4]; 4];
        // SAFETY: AVX-512 F is the caller's; the store writes the 16 f32 of `out`.
        unsafe {
            // `u[b][i]`, 128-bit lane `k`: lane `4k + i` of block `b`'s four rows.
            let mut u = [[_mm512_setzero_ps(); 4]; 4];
            for (u, rows) in u.iter_mut().zip(acc) {
                *u = transpose_4x4!(
                    rows,
                    _mm512_unpacklo_ps,
                    _mm512_unpackhi_ps,
                    _mm512_unpacklo_pd,
                    _mm512_unpackhi_pd,
                    _mm512_castps_pd,
                    _mm512_castpd_ps
                );
            }
            // `v[i][k]`: lane `4k + i` of every block's rows (128-bit lane `b`: block `b`).
            let mut v = [[_mm512_setzero_ps(); 4]; 4];
            for (i, v) in v.iter_mut().enumerate() {
                let t0 = _mm512_shuffle_f32x4::<0b01_00_01_00>(u[0][i], u[1][i]);
                let t1 = _mm512_shuffle_f32x4::<0b11_10_11_10>(u[0][i], u[1][i]);
                let t2 = _mm512_shuffle_f32x4::<0b01_00_01_00>(u[2][i], u[3][i]);
                let t3 = _mm512_shuffle_f32x4::<0b11_10_11_10>(u[2][i], u[3][i]);
                *v = [
                    _mm512_shuffle_f32x4::<0b10_00_10_00>(t0, t2),
                    _mm512_shuffle_f32x4::<0b11_01_11_01>(t0, t2),
                    _mm512_shuffle_f32x4::<0b10_00_10_00>(t1, t3),
                    _mm512_shuffle_f32x4::<0b11_01_11_01>(t1, t3),
                ];
            }
            let mut s = _mm512_setzero_ps();
            for k in 0..4 {
                for v in &v {
                    s = _mm512_add_ps(s, v[k]);
                }
            }
            _mm512_storeu_ps(out.as_flattened_mut().as_mut_ptr(), s);
        }
        out
    }

    #[inline(always)]
    unsafe fn any_nan_e4m3(p: *const u8) -> bool {
        // SAFETY: AVX-512 BW is the caller's; the two loads read the BLOCK = 128 bytes at `p`.
        unsafe {
            let m7 = _mm512_set1_epi8(0x7F);
            let a = _mm512_and_si512(_mm512_loadu_si512(p.cast()), m7);
            let b = _mm512_and_si512(_mm512_loadu_si512(p.add(64).cast()), m7);
            (_mm512_cmpeq_epi8_mask(a, m7) | _mm512_cmpeq_epi8_mask(b, m7)) != 0
        }
    }
}

/// 16 codes of kind `C` as f16 bits whose values are the codes' times `2^(BIAS − 15)`.
///
/// # Safety
/// The CPU must have AVX2.
#[inline(always)]
unsafe fn f16_view<C: Fp8Kind>(x: __m128i) -> __m256i {
    const { assert!(C::MBITS == 2 || C::MBITS == 3) };
    // SAFETY: AVX2 is the caller's.
    unsafe {
        let w = _mm256_cvtepi8_epi16(x);
        let (shifted, mask) = if C::MBITS == 3 {
            (_mm256_slli_epi16::<7>(w), 0x8000u16 | 0x7F << 7)
        } else {
            (_mm256_slli_epi16::<8>(w), 0x8000u16 | 0x7F << 8)
        };
        _mm256_and_si256(shifted, _mm256_set1_epi16(mask as i16))
    }
}

/// The factor the plain row carries for coded rows of kind `C`: `2^(15 − BIAS)`.
pub(crate) const fn plain_factor<C: Fp8Kind>() -> f32 {
    f32::from_bits(((127 + 15 - C::BIAS) as u32) << 23)
}

/// A block's partial: NaN where e4m3's NaN code is in the block's codes (its f16 view is
/// finite), else the lane sum `sum`.
///
/// # Safety
/// As [`Lanes::zero`].
#[inline(always)]
unsafe fn checked<L: Lanes, C: Fp8Kind>(sum: f32, block: &[u8]) -> f32 {
    let nan = !C::IEEE_SPECIALS
        && if block.len() == BLOCK {
            // SAFETY: `block` is BLOCK bytes; the CPU has `L`'s features.
            unsafe { L::any_nan_e4m3(block.as_ptr()) }
        } else {
            block.iter().any(|&c| c & 0x7F == 0x7F)
        };
    if nan { f32::NAN } else { sum }
}

/// The block partials of `R` coded rows (each `len` codes) against `plain` (at least `len`
/// rounded up to 16 values, zeros past `len`): `out[kb][r]`.
///
/// # Safety
/// The CPU has the features `L`'s methods need; `coded[r].len() == len` for every `r`,
/// `plain.len() >= len.next_multiple_of(16)`, `out.len() == len.div_ceil(BLOCK)`.
#[inline(always)]
unsafe fn partials<L: Lanes, C: Fp8Kind, const R: usize>(coded: [&[u8]; R], plain: &[f32], out: &mut [[f32; R]]) {
    let len = coded[0].len();
    let whole = len / BLOCK;
    let rows = coded.map(<[u8]>::as_ptr);
    // The lanes of block `kb` of every row. (A macro: a closure here stays out of line,
    // without the caller's target features.)
    macro_rules! block {
        ($kb:expr) => {{
            let kb: usize = $kb;
            // SAFETY: the caller's CPU has `L`'s features.
            let mut acc = [unsafe { L::zero() }; R];
            for j in 0..BLOCK / 16 {
                let at = kb * BLOCK + 16 * j;
                for (a, row) in acc.iter_mut().zip(rows) {
                    // SAFETY: `kb < whole`: every row has 16 codes at `at` and `plain` 16
                    // values (`at + 16 <= whole · BLOCK <= len`); the CPU has AVX2 and `L`'s
                    // features.
                    unsafe { *a = a.fma(f16_view::<C>(_mm_loadu_si128(row.add(at).cast())), plain.as_ptr().add(at)) };
                }
            }
            acc
        }};
    }
    // Four rows: the whole blocks four at a time through `sums_4x4`.
    let mut kb = 0;
    if R == 4 {
        while kb + 4 <= whole {
            // SAFETY: the caller's CPU has `L`'s features.
            let mut acc = [[unsafe { L::zero() }; 4]; 4];
            for (b, acc) in acc.iter_mut().enumerate() {
                let a = block!(kb + b);
                // `R` is 4 here; `% R` only lets the other instances compile.
                *acc = [a[0], a[1 % R], a[2 % R], a[3 % R]];
            }
            // SAFETY: the CPU has `L`'s features.
            let sums = unsafe { L::sums_4x4(acc) };
            for (b, s) in sums.iter().enumerate() {
                out[kb + b].copy_from_slice(&s[..R]);
            }
            kb += 4;
        }
    }
    for (kb, o) in out[..whole].iter_mut().enumerate().skip(kb) {
        for (o, a) in o.iter_mut().zip(block!(kb)) {
            // SAFETY: the CPU has `L`'s features.
            *o = lane_sum(unsafe { a.get() });
        }
    }
    if !C::IEEE_SPECIALS {
        for (kb, o) in out[..whole].iter_mut().enumerate() {
            for (o, row) in o.iter_mut().zip(coded) {
                // SAFETY: the CPU has `L`'s features.
                *o = unsafe { checked::<L, C>(*o, &row[kb * BLOCK..(kb + 1) * BLOCK]) };
            }
        }
    }
    if whole == out.len() {
        return;
    }
    // The last, partial block: chunks of 16, the last padded with zero codes (their +0
    // products leave the lanes as they were, as in the portable block sum).
    let start = whole * BLOCK;
    // SAFETY: the caller's CPU has `L`'s features.
    let mut acc = [unsafe { L::zero() }; R];
    for at in (start..len).step_by(16) {
        let n = (len - at).min(16);
        for (a, row) in acc.iter_mut().zip(coded) {
            let mut pad = [0u8; 16];
            pad[..n].copy_from_slice(&row[at..at + n]);
            // SAFETY: `pad` is 16 bytes and `plain` has 16 values at `at` (`at + 16 <=
            // len.next_multiple_of(16)`); the CPU has AVX2 and `L`'s features.
            unsafe { *a = a.fma(f16_view::<C>(_mm_loadu_si128(pad.as_ptr().cast())), plain[at..at + 16].as_ptr()) };
        }
    }
    for ((o, a), row) in out[whole].iter_mut().zip(acc).zip(coded) {
        // SAFETY: the CPU has `L`'s features.
        *o = unsafe { checked::<L, C>(lane_sum(a.get()), &row[start..]) };
    }
}

/// The lanes summed in order from +0.
#[inline(always)]
fn lane_sum(lanes: [f32; 16]) -> f32 {
    let mut s = 0f32;
    for v in lanes {
        s += v;
    }
    s
}

#[target_feature(enable = "avx2,fma,f16c")]
fn partials_avx2<C: Fp8Kind, const R: usize>(coded: [&[u8]; R], plain: &[f32], out: &mut [[f32; R]]) {
    // SAFETY: this function's features are the `[__m256; 2]` lanes'; the lengths are the
    // caller's (`coded_partials` checked them).
    unsafe { partials::<[__m256; 2], C, R>(coded, plain, out) }
}

#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn partials_avx512<C: Fp8Kind, const R: usize>(coded: [&[u8]; R], plain: &[f32], out: &mut [[f32; R]]) {
    // SAFETY: this function's features include the `__m512` lanes' and AVX2; the lengths
    // are the caller's (`coded_partials` checked them).
    unsafe { partials::<__m512, C, R>(coded, plain, out) }
}

/// The SIMD level a caller holds: the AVX2 or the AVX-512 kernel.
#[derive(Clone, Copy)]
pub(crate) enum Level {
    Avx2(Avx2),
    Avx512(Vnni),
}

impl Level {
    /// The highest level this thread may run, if it has AVX2.
    pub(crate) fn detect() -> Option<Level> {
        Vnni::detect().map(Level::Avx512).or_else(|| Avx2::detect().map(Level::Avx2))
    }
}

/// [`partials`] at `level`, after checking the lengths (a mismatch is a caller's bug: it
/// panics rather than reading out of bounds).
pub(crate) fn coded_partials<C: Fp8Kind, const R: usize>(
    level: Level,
    coded: [&[u8]; R],
    plain: &[f32],
    out: &mut [[f32; R]],
) {
    let len = coded[0].len();
    assert!(coded.iter().all(|c| c.len() == len), "coded rows of one length");
    assert!(plain.len() >= len.next_multiple_of(16), "plain row padded to 16");
    assert_eq!(out.len(), len.div_ceil(BLOCK), "one partial per block");
    match level {
        // SAFETY: the token proves AVX2, FMA and F16C, the function's features.
        Level::Avx2(_) => unsafe { partials_avx2::<C, R>(coded, plain, out) },
        // SAFETY: the token proves AVX2, FMA, F16C and AVX-512 F / BW / VL / VNNI.
        Level::Avx512(_) => unsafe { partials_avx512::<C, R>(coded, plain, out) },
    }
}

/// Weight rows side by side with activation rows, both decoded (the mat-mul tile), with
/// AVX-512: the block partials of the 4 × 4 pairs of `w` and `a` (each at least
/// `len.next_multiple_of(16)` values, zeros past `len`), `out[kb][i][j]` for `w[i]` · `a[j]`.
/// Per 16 values, four weight and four activation vectors loaded, 16 `fma` (each exact product
/// added as `lane + w·a` rounds it), so nothing is converted in the loop; each pair's lanes
/// summed in order ([`Lanes::sums_4x4`]). NaN and infinite values are in the decoded rows
/// themselves, so the sums are the portable ones with no e4m3 NaN check.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn plain_partials_avx512(w: [&[f32]; 4], a: [&[f32]; 4], len: usize, out: &mut [[[f32; 4]; 4]]) {
    let (wp, ap) = (w.map(<[f32]>::as_ptr), a.map(<[f32]>::as_ptr));
    for (kb, o) in out.iter_mut().enumerate() {
        let end = ((kb + 1) * BLOCK).min(len);
        let mut acc = [[_mm512_setzero_ps(); 4]; 4];
        for at in (kb * BLOCK..end).step_by(16) {
            // SAFETY: `at + 16 <= len.next_multiple_of(16)`, which every row holds
            // (`plain_partials` checked it).
            unsafe {
                // (No closure: one need not be inlined into this target-feature function.)
                let wv = [
                    _mm512_loadu_ps(wp[0].add(at)),
                    _mm512_loadu_ps(wp[1].add(at)),
                    _mm512_loadu_ps(wp[2].add(at)),
                    _mm512_loadu_ps(wp[3].add(at)),
                ];
                for (j, ap) in ap.iter().enumerate() {
                    let av = _mm512_loadu_ps(ap.add(at));
                    for (acc, wv) in acc.iter_mut().zip(wv) {
                        acc[j] = _mm512_fmadd_ps(wv, av, acc[j]);
                    }
                }
            }
        }
        // SAFETY: this function has AVX-512 F, all `__m512`'s lanes need.
        *o = unsafe { <__m512 as Lanes>::sums_4x4(acc) };
    }
}

/// [`plain_partials_avx512`] with AVX2: 2 × 2 pairs per pass (8 accumulators of 8 lanes;
/// 4 × 4 pairs' 32 would spill), four blocks' lanes gathered before [`Lanes::sums_4x4`] sums
/// them (`[block][pair]`).
#[target_feature(enable = "avx2,fma,f16c")]
fn plain_partials_avx2(w: [&[f32]; 2], a: [&[f32]; 2], len: usize, out: &mut [[[f32; 4]; 4]]) {
    let (wp, ap) = (w.map(<[f32]>::as_ptr), a.map(<[f32]>::as_ptr));
    let nb = out.len();
    let mut kb = 0;
    while kb < nb {
        let g = (nb - kb).min(4);
        // `lanes[b][2i + j]`: block `kb + b`, pair `(i, j)`.
        let mut lanes = [[[_mm256_setzero_ps(); 2]; 4]; 4];
        for (b, lanes) in lanes.iter_mut().enumerate().take(g) {
            let k = kb + b;
            for at in (k * BLOCK..((k + 1) * BLOCK).min(len)).step_by(16) {
                // `h` picks the half in four pairs' lanes and the offset in four rows.
                #[allow(clippy::needless_range_loop)]
                for h in 0..2 {
                    // SAFETY: `at + 8h + 8 <= len.next_multiple_of(16)`, which every row holds
                    // (`plain_partials` checked it).
                    unsafe {
                        let (w0, w1) = (_mm256_loadu_ps(wp[0].add(at + 8 * h)), _mm256_loadu_ps(wp[1].add(at + 8 * h)));
                        let (a0, a1) = (_mm256_loadu_ps(ap[0].add(at + 8 * h)), _mm256_loadu_ps(ap[1].add(at + 8 * h)));
                        lanes[0][h] = _mm256_fmadd_ps(w0, a0, lanes[0][h]);
                        lanes[1][h] = _mm256_fmadd_ps(w0, a1, lanes[1][h]);
                        lanes[2][h] = _mm256_fmadd_ps(w1, a0, lanes[2][h]);
                        lanes[3][h] = _mm256_fmadd_ps(w1, a1, lanes[3][h]);
                    }
                }
            }
        }
        // SAFETY: this function has AVX2 and FMA, all `[__m256; 2]`'s lanes need.
        let sums = unsafe { <[__m256; 2] as Lanes>::sums_4x4(lanes) };
        for (o, s) in out[kb..kb + g].iter_mut().zip(sums) {
            *o = [[s[0], s[1], 0.0, 0.0], [s[2], s[3], 0.0, 0.0], [0.0; 4], [0.0; 4]];
        }
        kb += 4;
    }
}

impl Level {
    /// Weight rows × activation rows per pass of [`plain_partials`].
    pub(crate) fn tile_shape(self) -> (usize, usize) {
        match self {
            Level::Avx2(_) => (2, 2),
            Level::Avx512(_) => (4, 4),
        }
    }
}

/// The block partials of the first `level.tile_shape()` rows of `w` × of `a` (decoded rows,
/// each at least `len.next_multiple_of(16)` values, zeros past `len`) into `out[kb][i][j]`,
/// after checking the lengths (a mismatch is a caller's bug: it panics rather than reading
/// out of bounds).
pub(crate) fn plain_partials(level: Level, w: [&[f32]; 4], a: [&[f32]; 4], len: usize, out: &mut [[[f32; 4]; 4]]) {
    let padded = len.next_multiple_of(16);
    assert!(w.iter().chain(&a).all(|r| r.len() >= padded), "decoded rows padded to 16");
    assert_eq!(out.len(), len.div_ceil(BLOCK), "one partial per block");
    match level {
        // SAFETY: the token proves AVX2, FMA and F16C, the function's features.
        Level::Avx2(_) => unsafe { plain_partials_avx2([w[0], w[1]], [a[0], a[1]], len, out) },
        // SAFETY: the token proves AVX2, FMA, F16C and AVX-512 F / BW / VL / VNNI.
        Level::Avx512(_) => unsafe { plain_partials_avx512(w, a, len, out) },
    }
}
