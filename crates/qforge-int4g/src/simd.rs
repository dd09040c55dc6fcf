//! AVX2 kernel of the A8W4DQ dot ([`crate::dot::dot_portable`]), chosen at run time where the
//! CPU has AVX2 ([`qforge_core::cpu::avx2`]); the portable kernel stays the reference.
//!
//! Per 32 elements of a group (16 bytes of nibbles: 16 low nibbles for elements `j..j+16`,
//! 16 high ones for `H+j..H+j+16`, against the matching activations), with `w = q + 8` the
//! stored unsigned code:
//!
//! ```text
//! Σ (a − zp)·(w − 8) = Σ a·w − zp·Σ w − 8·Σ a + 8·zp·2H
//! ```
//!
//! `Σ a·w` with `vpmaddubsw` (unsigned codes × signed activations: pairs ≤ 2·15·128, no
//! saturation) and `vpmaddwd` into 8 `i32` lanes; `Σ w` and `Σ a` (as `Σ (a ^ 0x80) − 128·n`)
//! with `vpsadbw`. All exact, so each group's integer sum is the portable one, and the f32
//! steps after it are the portable ones in the same order: the same bits. Each weight group
//! is unpacked once for up to [`qforge_simd::rows::MAX_ROWS`] activation rows (mat-mul).
//!
//! Where the CPU has AVX-512 VNNI the same body runs with `vpdpbusd` for `Σ a·w` (one
//! instruction for `vpmaddubsw` + `vpmaddwd` + `vpaddd`): the same exact lanes.
//!
//! The only `unsafe` of the crate's kernels lives here: 16-byte unaligned loads inside
//! slices whose lengths were checked, and the calls into `#[target_feature]` functions with
//! an [`Avx2`] token.
#![allow(unsafe_code)]

use std::arch::x86_64::*;

use crate::block::BlockInt4g;
use crate::dot::Int8Row;
use crate::scale::ScaleKind;
use qforge_simd::Avx2;
use qforge_simd::rows::{RowKernel, by_rows};
use qforge_simd::vnni::{EVEX, Form, NONE, VEX, VnniYmm, dpbusd};

/// Every `out[i]` = the dot with `rows[i]` (lengths already validated), with AVX2; `false`
/// (nothing written) where the CPU lacks it.
pub(crate) fn dot_rows<S: ScaleKind, const H: usize>(
    w: &[BlockInt4g<S, H>],
    rows: &[Int8Row<'_>],
    out: &mut [f32],
) -> bool {
    let Some(avx2) = Avx2::detect() else {
        return false;
    };
    by_rows(&Kernel { w, _avx2: avx2, vnni: VnniYmm::detect().map(VnniYmm::form) }, rows, out);
    true
}

/// The weight row, the proof of AVX2 and the VNNI form whose kernel may run
/// (`VnniYmm::detect`'s).
struct Kernel<'w, S: ScaleKind, const H: usize> {
    w: &'w [BlockInt4g<S, H>],
    _avx2: Avx2,
    vnni: Option<Form>,
}

impl<'a, S: ScaleKind, const H: usize> RowKernel<Int8Row<'a>> for Kernel<'_, S, H> {
    #[inline]
    fn rows<const R: usize>(&self, a: [&Int8Row<'a>; R]) -> [f32; R] {
        // SAFETY: `self` holds an `Avx2` token, which exists only where the CPU has AVX2, FMA
        // and F16C, and the VNNI form `VnniYmm::detect` found (the CPU has its features).
        unsafe { rows_at::<S, H, R, false>(self.vnni, self.w, a, &[]) }
    }
}

/// `S::decode(raw)`, f16 with F16C's `vcvtph2ps` inline (`f16::to_f32` checks the CPU's
/// features at run time on every call from here: a load and a call per group). Exact either
/// way, NaN payloads included.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn scale<S: ScaleKind>(raw: &S::Raw) -> f32 {
    if S::DTYPE == qforge_core::DType::F16 {
        let b = bytemuck::bytes_of(raw);
        let h = _mm_cvtsi32_si128(i32::from(u16::from_le_bytes([b[0], b[1]])));
        _mm_cvtss_f32(_mm_cvtph_ps(h))
    } else {
        S::decode(*raw)
    }
}

/// Sums the four 64-bit lanes of a `vpsadbw` result.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn hsum_u64(v: __m256i) -> i64 {
    let s = _mm_add_epi64(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
    _mm_cvtsi128_si64(_mm_add_epi64(s, _mm_unpackhi_epi64(s, s)))
}

/// Sums the eight 32-bit lanes.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn hsum_i32(v: __m256i) -> i32 {
    let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256::<1>(v));
    let s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    _mm_cvtsi128_si32(_mm_add_epi32(s, _mm_shuffle_epi32::<0b01>(s)))
}

/// 16 bytes at `a[at..at + 16]`.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn load16(a: &[i8], at: usize) -> __m128i {
    let s = &a[at..at + 16];
    // SAFETY: `s` is exactly 16 bytes (the slice above is bounds-checked), so the unaligned
    // 16-byte load reads only inside it.
    unsafe { _mm_loadu_si128(s.as_ptr().cast()) }
}

/// Defines a row kernel `$name`: the dot of the weight row with `R` activation rows, each
/// result the portable kernel's, compiled with `$features`, `Σ a·w` accumulated by
/// [`isum_avx2`] or, in VNNI form `$form`, one `vpdpbusd` (four `u8 × i8` products summed
/// exactly into each lane, `qforge_simd::vnni::dpbusd`).
/// One body for the AVX2 and the VNNI kernels, and for mat-vec: with `PRE` the one activation
/// row's group sums `Σ a` come in `sums` (computed once for every weight row) instead of being
/// summed here per weight row.
macro_rules! rows_kernel {
    ($name:ident, $features:literal, $form:expr) => {
        #[target_feature(enable = $features)]
        fn $name<S: ScaleKind, const H: usize, const R: usize, const PRE: bool>(
            w: &[BlockInt4g<S, H>],
            a: [&Int8Row<'_>; R],
            sums: &[i64],
        ) -> [f32; R] {
            const { assert!(H >= 16 && H.is_multiple_of(16)) };
            const { assert!(!PRE || R == 1, "given group sums belong to one activation row") };
            let (nib, ones, flip, zero) =
                (_mm256_set1_epi8(0x0F), _mm256_set1_epi16(1), _mm256_set1_epi8(0x80u8 as i8), _mm256_setzero_si256());
            let mut acc = [0f32; R];
            for (g, b) in w.iter().enumerate() {
                let base = g * 2 * H;
                let mut sw = zero;
                let mut qq = [zero; R];
                let mut sa = [zero; R];
                for j in (0..H).step_by(16) {
                    let q: &[u8; 16] = b.qs[j..j + 16].try_into().unwrap_or(&[8; 16]);
                    // SAFETY: `q` is exactly 16 bytes: the unaligned load reads only it.
                    let q = unsafe { _mm_loadu_si128(q.as_ptr().cast()) };
                    let wv = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16::<4>(q), q), nib);
                    sw = _mm256_add_epi64(sw, _mm256_sad_epu8(wv, zero));
                    for r in 0..R {
                        let av = _mm256_set_m128i(load16(a[r].q, base + H + j), load16(a[r].q, base + j));
                        qq[r] = if $form == NONE {
                            isum_avx2(qq[r], wv, av, ones)
                        } else {
                            // SAFETY: this function has form `$form`'s features.
                            unsafe { dpbusd::<{ $form }>(qq[r], wv, av) }
                        };
                        if !PRE {
                            sa[r] = _mm256_add_epi64(sa[r], _mm256_sad_epu8(_mm256_xor_si256(av, flip), zero));
                        }
                    }
                }
                let sw = hsum_u64(sw);
                let d = scale::<S>(&b.d);
                let n = 2 * H as i64;
                for r in 0..R {
                    let zp = i64::from(a[r].zp);
                    let suma = if PRE { sums[g] } else { hsum_u64(sa[r]) - 128 * n };
                    let isum = i64::from(hsum_i32(qq[r])) - zp * sw - 8 * suma + 8 * zp * n;
                    acc[r] += isum as i32 as f32 * d;
                }
            }
            std::array::from_fn(|r| acc[r] * a[r].scale)
        }
    };
}

rows_kernel!(rows_avx2, "avx2,fma,f16c", NONE);
rows_kernel!(rows_vnni, "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni", EVEX);
rows_kernel!(rows_avxvnni, "avx2,fma,f16c,avxvnni", VEX);

/// The row kernel of the VNNI form `vnni` (`rows_vnni`, `rows_avxvnni`), or `rows_avx2`.
///
/// # Safety
/// The CPU has AVX2, FMA and F16C, and the features of `vnni`'s form where it is `Some`; with
/// `PRE`, `sums` holds the activation's group sums (as `rows_avx2` requires).
#[inline(always)]
unsafe fn rows_at<S: ScaleKind, const H: usize, const R: usize, const PRE: bool>(
    vnni: Option<Form>,
    w: &[BlockInt4g<S, H>],
    a: [&Int8Row<'_>; R],
    sums: &[i64],
) -> [f32; R] {
    // SAFETY: the caller's contract.
    unsafe {
        match vnni {
            Some(EVEX) => rows_vnni::<S, H, R, PRE>(w, a, sums),
            Some(_) => rows_avxvnni::<S, H, R, PRE>(w, a, sums),
            None => rows_avx2::<S, H, R, PRE>(w, a, sums),
        }
    }
}

/// Mat-vec: `out[i]` = the dot of weight row `i` (groups `i·n .. (i+1)·n` of `w`, `n ≥ 1`)
/// with `a` (length already validated: `n` groups), with AVX2; `false` (nothing written) where the CPU
/// lacks it. The activation's group sums `Σ a` are computed once here for every weight row:
/// the row kernel computes them per weight row (three horizontal sums per group, one of them
/// the activation's).
pub(crate) fn dot_weight_rows<S: ScaleKind, const H: usize>(
    w: &[BlockInt4g<S, H>],
    n: usize,
    a: &Int8Row<'_>,
    out: &mut [f32],
) -> bool {
    let Some(_avx2) = Avx2::detect() else {
        return false;
    };
    let suma: Vec<i64> = a.q.chunks_exact(2 * H).map(|g| g.iter().map(|&v| i64::from(v)).sum()).collect();
    let vnni = VnniYmm::detect().map(VnniYmm::form);
    for (o, wr) in out.iter_mut().zip(w.chunks_exact(n)) {
        // SAFETY: `_avx2` exists only where the CPU has AVX2, FMA and F16C, and `vnni` is the
        // form whose features the CPU has; `suma` is `a`'s group sums.
        let [v] = unsafe { rows_at::<S, H, 1, true>(vnni, wr, [a], &suma) };
        *o = v;
    }
    true
}

/// `acc + Σ₄ w·a` per `i32` lane: `vpmaddubsw` (pairs ≤ 2·15·128, no saturation), `vpmaddwd`
/// with ones, `vpaddd`.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn isum_avx2(acc: __m256i, w: __m256i, a: __m256i, ones: __m256i) -> __m256i {
    _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(w, a), ones))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dot::dot_portable;
    use crate::scale::{Bf16Scale, F16Scale, F32Scale};
    use qforge_core::rand::Rng;

    /// Random groups (every code, scales of every magnitude) against activation rows with
    /// every zero point extreme and `-128` / `127` runs: AVX2 and portable give the same bits
    /// for 1..=9 rows (every chunking by 4), at every SIMD level the machine has (AVX2; AVX-512
    /// VNNI), forced in turn.
    fn same_bits<S: ScaleKind, const H: usize>(seed: u64) {
        let levels = qforge_golden::needs::simd_levels();
        assert!(!levels.is_empty(), "this test needs AVX2 (and runs on every x86-64 CI machine)");
        for level in levels {
            qforge_core::cpu::with_level(level, || same_bits_at::<S, H>(seed));
        }
    }

    fn same_bits_at<S: ScaleKind, const H: usize>(seed: u64) {
        let mut rng = Rng::new(seed);
        for case in 0..60 {
            let nb = 1 + case % 5;
            let mut w = crate::test_data::groups::<S, H>(&mut rng, nb);
            crate::test_data::special_scales(&mut w, case);
            let nrows = 1 + case % 9;
            let qs = crate::test_data::act_codes(&mut rng, case, nrows, nb * 2 * H);
            let rows = crate::test_data::act_rows(&qs, case);
            let mut out = vec![f32::NAN; nrows];
            assert!(dot_rows(&w, &rows, &mut out));
            for (r, (got, row)) in out.iter().zip(&rows).enumerate() {
                let want = dot_portable(&w, row);
                assert_eq!(got.to_bits(), want.to_bits(), "case {case} row {r}: {got:e} vs {want:e}");
            }
            // Mat-vec: the groups as `nw` weight rows of `nb / nw` groups each, against the first
            // activation row cut to one weight row's length.
            let nw = if nb % 2 == 0 { 2 } else { 1 };
            let per = nb / nw;
            let a0 = Int8Row { q: &qs[0][..per * 2 * H], scale: rows[0].scale, zp: rows[0].zp };
            let mut mv = vec![f32::NAN; nw];
            assert!(dot_weight_rows(&w, per, &a0, &mut mv));
            for (i, got) in mv.iter().enumerate() {
                let want = dot_portable(&w[i * per..(i + 1) * per], &a0);
                assert_eq!(got.to_bits(), want.to_bits(), "case {case} mat-vec row {i}: {got:e} vs {want:e}");
            }
        }
    }

    #[test]
    fn avx2_equals_portable_every_group_and_scale() {
        same_bits::<F16Scale, 16>(1);
        same_bits::<F16Scale, 64>(2);
        same_bits::<Bf16Scale, 32>(3);
        same_bits::<F32Scale, 128>(4);
        same_bits::<F16Scale, 2048>(5);
    }
}
