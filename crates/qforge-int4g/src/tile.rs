//! The A8W4DQ mat-mul tile kernel: several weight rows side by side, one row per 32-bit lane
//! (16 with AVX-512 VNNI, 8 with AVX2), each group's nibbles decoded once for every activation
//! row of the call. The row kernel ([`crate::simd`]) puts 32 codes of one weight row in a
//! register and pays three horizontal sums per group and row; here a group's 16-byte slices of
//! the tile's rows are transposed (`vpunpck*`) so that each vector holds four consecutive codes
//! of every row, and an activation row meets it with its four `i8` broadcast: one `vpdpbusd`
//! (AVX2: `vpmaddubsw`, summed in `i16` over a 32-element unit, then `vpmaddwd`) per four codes
//! of all the tile's rows, no horizontal sum. Where the CPU has 256-bit VNNI but the 512-bit
//! tile may not run (AVX-VNNI, or the `avxvnni` level), the 8-row tile takes `vpdpbusd` in
//! that form ([`qforge_simd::vnni`]): the same exact lanes.
//!
//! Per group, with `w = q + 8` the stored code, every lane computes the portable kernel's
//! exact integer
//!
//! ```text
//! Σ (a − zp)·(w − 8) = Σ a·w − zp·Σ w − (8·Σ a − 8·zp·2H)
//! ```
//!
//! (`Σ w` per row from the same vectors against ones, the bracket per activation row and group
//! computed once per call), then `acc + f32(isum) · scale` in f32 (a multiply and an add, as
//! the portable kernel rounds them), and `acc · scale_a` at the end: the same bits.
#![allow(unsafe_code)]

use std::arch::x86_64::*;

use crate::block::BlockInt4g;
use crate::dot::Int8Row;
use crate::scale::ScaleKind;
use qforge_core::DType;
use qforge_simd::vnni::{EVEX, Form, NONE, VEX, VnniYmm, dpbusd};
use qforge_simd::{Avx2, Vnni};

/// Activation rows from which a call takes the tile kernel (fewer: the row kernel).
pub(crate) const TILE_MIN_ACTS: usize = 2;

/// 32-element units (16 bytes of each row's nibbles) decoded at a time: their codes (8
/// vectors a unit) stay in L1 while every activation row meets them.
const CHUNK_UNITS: usize = 4;

/// Weight row `i` (groups `i·n .. (i+1)·n` of `w`) against every row of `acts`, into `out[i ·
/// stride + j]` (the caller checked the lengths), with AVX-512 VNNI or AVX2; `false` (nothing
/// written) where the CPU has neither.
pub(crate) fn dot_tile<S: ScaleKind, const H: usize>(
    w: &[BlockInt4g<S, H>],
    n: usize,
    acts: &[Int8Row<'_>],
    out: &mut [f32],
    stride: usize,
) -> bool {
    let Some(_avx2) = Avx2::detect() else {
        return false;
    };
    if n == 0 {
        return false;
    }
    let sums = act_sums::<H>(acts, n);
    let t = Tile { w, n, acts, sums: &sums };
    // SAFETY: `_avx2` exists only where the CPU has AVX2, FMA and F16C, all `tile_avx2`
    // needs; `Vnni::detect` checks the AVX-512 F / BW / VL / VNNI `tile_vnni` needs besides.
    // `VnniYmm::detect` finds the 256-bit VNNI form whose features the CPU has, if any.
    unsafe {
        if Vnni::detect().is_some() {
            tile_vnni::<S, H>(t, out, stride);
        } else {
            match VnniYmm::detect().map(VnniYmm::form) {
                Some(EVEX) => tile_ymm_evex::<S, H>(t, out, stride),
                Some(_) => tile_ymm_vex::<S, H>(t, out, stride),
                None => tile_avx2::<S, H>(t, out, stride),
            }
        }
    }
    true
}

/// One call's operands: `n` groups per weight row, and per activation row `j` and group `g`
/// the bracket `8·Σ a − 8·zp·2H` at `sums[j · n + g]`.
#[derive(Clone, Copy)]
struct Tile<'a, S: ScaleKind, const H: usize> {
    w: &'a [BlockInt4g<S, H>],
    n: usize,
    acts: &'a [Int8Row<'a>],
    sums: &'a [i32],
}

/// Every activation row's `8·Σ a − 8·zp·2H` per group, row-major (exact in `i32`: each term at
/// most `8 · 128 · 4096`).
fn act_sums<const H: usize>(acts: &[Int8Row<'_>], n: usize) -> Vec<i32> {
    let mut sums = Vec::with_capacity(acts.len() * n);
    for a in acts {
        let bias = 8 * i32::from(a.zp) * (2 * H) as i32;
        for g in a.q.chunks_exact(2 * H).take(n) {
            let s: i32 = g.iter().map(|&v| i32::from(v)).sum();
            sums.push(8 * s - bias);
        }
    }
    sums
}

/// The vector operations of one register width: `ROWS` weight rows, one per 32-bit lane.
///
/// # Safety
/// Every function needs the CPU features of the `#[target_feature]` function it is inlined
/// into ([`tile_vnni`] for [`Zmm`], [`tile_avx2`] for [`Ymm`]).
trait Lanes {
    const ROWS: usize;
    /// Activation rows per pass over a chunk's codes.
    const PASS: usize;
    type I: Copy;
    type F: Copy;
    unsafe fn zero() -> Self::I;
    unsafe fn zerof() -> Self::F;
    unsafe fn sub(a: Self::I, b: Self::I) -> Self::I;
    unsafe fn mullo(a: Self::I, b: Self::I) -> Self::I;
    unsafe fn set1(x: i32) -> Self::I;
    unsafe fn set1f(x: f32) -> Self::F;
    unsafe fn cvt(a: Self::I) -> Self::F;
    unsafe fn addf(a: Self::F, b: Self::F) -> Self::F;
    unsafe fn mulf(a: Self::F, b: Self::F) -> Self::F;
    /// `ROWS` f32 from the start of `d` (at least that long).
    unsafe fn loadf(d: &[f32]) -> Self::F;
    /// `v` into the first `ROWS` f32 of `out` (at least that long).
    unsafe fn storef(v: Self::F, out: &mut [f32]);
    /// The 8 code vectors of the 16 bytes at `at` of each row's nibbles: per four bytes `q`,
    /// the low nibbles (elements `at + 4q ..`), then the high ones (`H + at + 4q ..`).
    unsafe fn unit(rows: &[&[u8]], at: usize, c: &mut [Self::I]);
    /// `acc + Σ w` per lane over the 8 code vectors `c`.
    unsafe fn code_sum(acc: Self::I, c: &[Self::I]) -> Self::I;
    /// `acc + Σ a·w` per lane over the 8 code vectors `c`, the activations of vector `2q`
    /// at `lo[4q ..]` and of `2q + 1` at `hi[4q ..]`.
    unsafe fn unit_dot(acc: Self::I, c: &[Self::I], lo: &[i8; 16], hi: &[i8; 16]) -> Self::I;
    /// `out[r] = f32(f16 h[r])` for `r < ROWS` (`vcvtph2ps`: exact, as `f16::to_f32`).
    unsafe fn f16s(h: &[u16; 16], out: &mut [f32]);

    /// `acc − zp·sw − bracket`.
    #[inline(always)]
    unsafe fn isum(acc: Self::I, sw: Self::I, zp: i32, bracket: i32) -> Self::I {
        // SAFETY: the caller's guarantee.
        unsafe { Self::sub(Self::sub(acc, Self::mullo(sw, Self::set1(zp))), Self::set1(bracket)) }
    }
    /// `accf + f32(isum) · d`, multiply and add rounded apart.
    #[inline(always)]
    unsafe fn accum(accf: Self::F, isum: Self::I, d: &[f32]) -> Self::F {
        // SAFETY: the caller's guarantee.
        unsafe { Self::addf(accf, Self::mulf(Self::cvt(isum), Self::loadf(d))) }
    }
    /// `accf · scale` into `out[..ROWS]`.
    #[inline(always)]
    unsafe fn store(accf: Self::F, scale: f32, out: &mut [f32]) {
        // SAFETY: the caller's guarantee.
        unsafe { Self::storef(Self::mulf(accf, Self::set1f(scale)), out) }
    }
}

/// The element-wise operations of [`Lanes`] for one register width (`qforge_simd::width_ops!`,
/// as `qforge-k`'s tile kernel), and its f32 loads and stores.
macro_rules! ops {
    ($w:tt) => {
        qforge_simd::width_ops!($w;
            zero() -> I = _mm512_setzero_si512 | _mm256_setzero_si256;
            zerof() -> F = _mm512_setzero_ps | _mm256_setzero_ps;
            sub(a: I, b: I) -> I = _mm512_sub_epi32 | _mm256_sub_epi32;
            mullo(a: I, b: I) -> I = _mm512_mullo_epi32 | _mm256_mullo_epi32;
            set1(x: i32) -> I = _mm512_set1_epi32 | _mm256_set1_epi32;
            set1f(x: f32) -> F = _mm512_set1_ps | _mm256_set1_ps;
            cvt(a: I) -> F = _mm512_cvtepi32_ps | _mm256_cvtepi32_ps;
            addf(a: F, b: F) -> F = _mm512_add_ps | _mm256_add_ps;
            mulf(a: F, b: F) -> F = _mm512_mul_ps | _mm256_mul_ps;
        );
        #[inline(always)]
        unsafe fn loadf(d: &[f32]) -> Self::F {
            let d = &d[..Self::ROWS];
            // SAFETY: `Lanes`' contract (the features); the load reads exactly `d`'s `ROWS` f32.
            unsafe { ops!(@pick $w _mm512_loadu_ps | _mm256_loadu_ps)(d.as_ptr()) }
        }
        #[inline(always)]
        unsafe fn storef(v: Self::F, out: &mut [f32]) {
            let out = &mut out[..Self::ROWS];
            // SAFETY: `Lanes`' contract (the features); the store writes exactly `out`'s `ROWS`
            // f32.
            unsafe { ops!(@pick $w _mm512_storeu_ps | _mm256_storeu_ps)(out.as_mut_ptr(), v) }
        }
    };
    (@pick 512 $f:ident | $_g:ident) => { $f };
    (@pick 256 $_f:ident | $g:ident) => { $g };
}

/// AVX-512 VNNI: 16 rows.
struct Zmm;
/// 256-bit registers, 8 rows: AVX2 (`F` = [`NONE`]) or the VNNI form `F`.
struct Ymm<const F: Form>;

/// 16 bytes at `at` of `b`.
#[inline(always)]
fn bytes16(b: &[u8], at: usize) -> &[u8; 16] {
    b[at..].first_chunk::<16>().expect("16 bytes of a group's nibbles")
}

/// The 4-byte group `k` of `a` as an `i32`, for a broadcast.
#[inline(always)]
fn quad(a: &[i8; 16], k: usize) -> i32 {
    i32::from_le_bytes([a[4 * k] as u8, a[4 * k + 1] as u8, a[4 * k + 2] as u8, a[4 * k + 3] as u8])
}

/// Four vectors per row quarter into the four byte quads of every row, and their nibbles:
/// `z[r]` holds rows `r, r + 4, r + 8, …` one per 128-bit lane; the 4 × 4 transposes within
/// the lanes leave dword `q` of rows `0, 1, 2, 3 | 4, 5, 6, 7 | …` in vector `q`.
macro_rules! transpose_nibbles {
    ($z:expr, $c:expr, $unpacklo32:ident, $unpackhi32:ident, $unpacklo64:ident, $unpackhi64:ident,
     $and:ident, $srli:ident, $mask:expr) => {{
        let z = $z;
        let t0 = $unpacklo32(z[0], z[1]);
        let t1 = $unpackhi32(z[0], z[1]);
        let t2 = $unpacklo32(z[2], z[3]);
        let t3 = $unpackhi32(z[2], z[3]);
        let q = [$unpacklo64(t0, t2), $unpackhi64(t0, t2), $unpacklo64(t1, t3), $unpackhi64(t1, t3)];
        for (k, v) in q.into_iter().enumerate() {
            $c[2 * k] = $and(v, $mask);
            $c[2 * k + 1] = $and($srli::<4>(v), $mask);
        }
    }};
}

impl Lanes for Zmm {
    const ROWS: usize = 16;
    const PASS: usize = 8;
    type I = __m512i;
    type F = __m512;

    ops!(512);
    #[inline(always)]
    unsafe fn unit(rows: &[&[u8]], at: usize, c: &mut [__m512i]) {
        // SAFETY: `Lanes`' contract (the features); each load reads exactly the 16 bytes of
        // its `bytes16` slice.
        unsafe {
            let mut z = [_mm512_setzero_si512(); 4];
            for (r, z) in z.iter_mut().enumerate() {
                let v = _mm512_castsi128_si512(_mm_loadu_si128(bytes16(rows[r], at).as_ptr().cast()));
                let v = _mm512_inserti32x4::<1>(v, _mm_loadu_si128(bytes16(rows[r + 4], at).as_ptr().cast()));
                let v = _mm512_inserti32x4::<2>(v, _mm_loadu_si128(bytes16(rows[r + 8], at).as_ptr().cast()));
                *z = _mm512_inserti32x4::<3>(v, _mm_loadu_si128(bytes16(rows[r + 12], at).as_ptr().cast()));
            }
            transpose_nibbles!(
                z,
                c,
                _mm512_unpacklo_epi32,
                _mm512_unpackhi_epi32,
                _mm512_unpacklo_epi64,
                _mm512_unpackhi_epi64,
                _mm512_and_si512,
                _mm512_srli_epi32,
                _mm512_set1_epi8(0x0F)
            );
        }
    }
    #[inline(always)]
    unsafe fn code_sum(acc: __m512i, c: &[__m512i]) -> __m512i {
        // SAFETY: `Lanes`' contract (the features).
        unsafe {
            // Four chains (exact `i32` sums, in any grouping): one chain of 8 dependent
            // `vpdpbusd` per unit held small-M calls back.
            let ones = _mm512_set1_epi8(1);
            let mut s = [acc, _mm512_setzero_si512(), _mm512_setzero_si512(), _mm512_setzero_si512()];
            for (k, &v) in c.iter().enumerate() {
                s[k % 4] = _mm512_dpbusd_epi32(s[k % 4], v, ones);
            }
            _mm512_add_epi32(_mm512_add_epi32(s[0], s[1]), _mm512_add_epi32(s[2], s[3]))
        }
    }
    #[inline(always)]
    unsafe fn unit_dot(acc: __m512i, c: &[__m512i], lo: &[i8; 16], hi: &[i8; 16]) -> __m512i {
        // SAFETY: `Lanes`' contract (the features).
        unsafe {
            let mut acc = acc;
            for k in 0..4 {
                acc = _mm512_dpbusd_epi32(acc, c[2 * k], _mm512_set1_epi32(quad(lo, k)));
                acc = _mm512_dpbusd_epi32(acc, c[2 * k + 1], _mm512_set1_epi32(quad(hi, k)));
            }
            acc
        }
    }
    #[inline(always)]
    unsafe fn f16s(h: &[u16; 16], out: &mut [f32]) {
        let out = out.first_chunk_mut::<16>().expect("16 rows' scales");
        // SAFETY: `Lanes`' contract (the features); the load reads exactly the 32 bytes of
        // `h`, the store writes exactly the 64 bytes of `out`.
        unsafe { _mm512_storeu_ps(out.as_mut_ptr(), _mm512_cvtph_ps(_mm256_loadu_si256(h.as_ptr().cast()))) }
    }
}

impl<const F: Form> Lanes for Ymm<F> {
    const ROWS: usize = 8;
    const PASS: usize = 4;
    type I = __m256i;
    type F = __m256;

    ops!(256);
    #[inline(always)]
    unsafe fn unit(rows: &[&[u8]], at: usize, c: &mut [__m256i]) {
        // SAFETY: `Lanes`' contract (the features); each load reads exactly the 16 bytes of
        // its `bytes16` slice.
        unsafe {
            let mut z = [_mm256_setzero_si256(); 4];
            for (r, z) in z.iter_mut().enumerate() {
                let lo = _mm_loadu_si128(bytes16(rows[r], at).as_ptr().cast());
                *z = _mm256_set_m128i(_mm_loadu_si128(bytes16(rows[r + 4], at).as_ptr().cast()), lo);
            }
            transpose_nibbles!(
                z,
                c,
                _mm256_unpacklo_epi32,
                _mm256_unpackhi_epi32,
                _mm256_unpacklo_epi64,
                _mm256_unpackhi_epi64,
                _mm256_and_si256,
                _mm256_srli_epi32,
                _mm256_set1_epi8(0x0F)
            );
        }
    }
    #[inline(always)]
    unsafe fn code_sum(acc: __m256i, c: &[__m256i]) -> __m256i {
        // SAFETY: `Lanes`' contract (the features, form `F`'s where it is not `NONE`).
        unsafe {
            let ones = _mm256_set1_epi8(1);
            if F != NONE {
                let mut acc = acc;
                for &v in c {
                    acc = dpbusd::<F>(acc, v, ones);
                }
                return acc;
            }
            // Pair sums of codes ≤ 30, eight vectors ≤ 240 per `i16`.
            let mut p = _mm256_setzero_si256();
            for &v in c {
                p = _mm256_add_epi16(p, _mm256_maddubs_epi16(v, ones));
            }
            _mm256_add_epi32(acc, _mm256_madd_epi16(p, _mm256_set1_epi16(1)))
        }
    }
    #[inline(always)]
    unsafe fn unit_dot(acc: __m256i, c: &[__m256i], lo: &[i8; 16], hi: &[i8; 16]) -> __m256i {
        // SAFETY: `Lanes`' contract (the features, form `F`'s where it is not `NONE`).
        unsafe {
            if F != NONE {
                let mut acc = acc;
                for k in 0..4 {
                    acc = dpbusd::<F>(acc, c[2 * k], _mm256_set1_epi32(quad(lo, k)));
                    acc = dpbusd::<F>(acc, c[2 * k + 1], _mm256_set1_epi32(quad(hi, k)));
                }
                return acc;
            }
            // `vpmaddubsw` pairs of a code ≤ 15 and an `i8`: |p| ≤ 2·15·128 = 3840, eight of
            // them ≤ 30720 < 2^15: the unit's sum in `i16` is exact.
            let mut p = _mm256_setzero_si256();
            for k in 0..4 {
                p = _mm256_add_epi16(p, _mm256_maddubs_epi16(c[2 * k], _mm256_set1_epi32(quad(lo, k))));
                p = _mm256_add_epi16(p, _mm256_maddubs_epi16(c[2 * k + 1], _mm256_set1_epi32(quad(hi, k))));
            }
            _mm256_add_epi32(acc, _mm256_madd_epi16(p, _mm256_set1_epi16(1)))
        }
    }
    #[inline(always)]
    unsafe fn f16s(h: &[u16; 16], out: &mut [f32]) {
        let out = out.first_chunk_mut::<8>().expect("8 rows' scales");
        // SAFETY: `Lanes`' contract (the features, F16C among them); the load reads the first
        // 16 bytes of `h`, the store writes exactly the 32 bytes of `out`.
        unsafe { _mm256_storeu_ps(out.as_mut_ptr(), _mm256_cvtph_ps(_mm_loadu_si128(h.as_ptr().cast()))) }
    }
}

/// The kernel with AVX-512 VNNI.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn tile_vnni<S: ScaleKind, const H: usize>(t: Tile<'_, S, H>, out: &mut [f32], stride: usize) {
    // SAFETY: this function has the features `Zmm`'s functions need.
    unsafe { kernel::<Zmm, S, H>(t, out, stride) }
}

/// The kernel with AVX2.
#[target_feature(enable = "avx2,fma,f16c")]
fn tile_avx2<S: ScaleKind, const H: usize>(t: Tile<'_, S, H>, out: &mut [f32], stride: usize) {
    // SAFETY: this function has the features `Ymm<NONE>`'s functions need.
    unsafe { kernel::<Ymm<NONE>, S, H>(t, out, stride) }
}

/// The 8-row kernel with 256-bit VNNI, EVEX form.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn tile_ymm_evex<S: ScaleKind, const H: usize>(t: Tile<'_, S, H>, out: &mut [f32], stride: usize) {
    // SAFETY: this function has the features `Ymm<EVEX>`'s functions need.
    unsafe { kernel::<Ymm<EVEX>, S, H>(t, out, stride) }
}

/// The 8-row kernel with 256-bit VNNI, VEX form (AVX-VNNI).
#[target_feature(enable = "avx2,fma,f16c,avxvnni")]
fn tile_ymm_vex<S: ScaleKind, const H: usize>(t: Tile<'_, S, H>, out: &mut [f32], stride: usize) {
    // SAFETY: this function has the features `Ymm<VEX>`'s functions need.
    unsafe { kernel::<Ymm<VEX>, S, H>(t, out, stride) }
}

/// Every tile of `V::ROWS` weight rows (the last one's missing rows repeat its last row, their
/// results dropped), group by group, against every activation row.
///
/// # Safety
/// As [`Lanes`]' functions.
#[inline(always)]
unsafe fn kernel<V: Lanes, S: ScaleKind, const H: usize>(t: Tile<'_, S, H>, out: &mut [f32], stride: usize) {
    let Tile { w, n, acts, sums } = t;
    let (nrows, m) = (w.len() / n, acts.len());
    let units = H / 16;
    // SAFETY: the caller's guarantee.
    unsafe {
        let mut accf = vec![V::zerof(); m];
        let mut iacc = vec![V::zero(); m];
        let mut codes = [V::zero(); 8 * CHUNK_UNITS];
        let mut d = [0f32; 16];
        let mut res = [0f32; 16];
        for i0 in (0..nrows).step_by(V::ROWS) {
            let valid = (nrows - i0).min(V::ROWS);
            accf.fill(V::zerof());
            for g in 0..n {
                let blocks: [&BlockInt4g<S, H>; 16] = std::array::from_fn(|r| &w[(i0 + r.min(valid - 1)) * n + g]);
                let rows: [&[u8]; 16] = std::array::from_fn(|r| &blocks[r].qs[..]);
                if S::DTYPE == DType::F16 {
                    let h: [u16; 16] = std::array::from_fn(|r| {
                        let b = bytemuck::bytes_of(&blocks[r].d);
                        u16::from_le_bytes([b[0], b[1]])
                    });
                    V::f16s(&h, &mut d);
                } else {
                    for (d, b) in d.iter_mut().zip(blocks) {
                        *d = S::decode(b.d);
                    }
                }
                let mut sw = V::zero();
                for u0 in (0..units).step_by(CHUNK_UNITS) {
                    let cu = (units - u0).min(CHUNK_UNITS);
                    for u in 0..cu {
                        V::unit(&rows[..V::ROWS], 16 * (u0 + u), &mut codes[8 * u..8 * u + 8]);
                        sw = V::code_sum(sw, &codes[8 * u..8 * u + 8]);
                    }
                    let mut j = 0;
                    while j < m {
                        let p = (m - j).min(V::PASS);
                        pass::<V>(
                            &codes[..8 * cu],
                            &acts[j..j + p],
                            g * 2 * H,
                            16 * u0,
                            H,
                            u0 == 0,
                            &mut iacc[j..j + p],
                        );
                        j += p;
                    }
                }
                for (j, a) in acts.iter().enumerate() {
                    let isum = V::isum(iacc[j], sw, i32::from(a.zp), sums[j * n + g]);
                    accf[j] = V::accum(accf[j], isum, &d[..V::ROWS]);
                }
            }
            for (j, a) in acts.iter().enumerate() {
                V::store(accf[j], a.scale, &mut res[..V::ROWS]);
                for (r, v) in res[..valid].iter().enumerate() {
                    out[(i0 + r) * stride + j] = *v;
                }
            }
        }
    }
}

/// Activation rows `a` (`P` of them, at most `V::PASS`) against a chunk's `codes` (8 vectors
/// per unit, the chunk's first unit at byte `at` of the group starting at element `base`),
/// into their `iacc` (started from zero on a group's first chunk). `P` a constant: the
/// accumulators stay in registers, and each code vector is loaded once for all `P` rows.
///
/// # Safety
/// As [`Lanes`]' functions.
#[inline(always)]
unsafe fn chunk_pass<V: Lanes, const P: usize>(
    codes: &[V::I],
    a: &[Int8Row<'_>],
    base: usize,
    at: usize,
    h: usize,
    first: bool,
    iacc: &mut [V::I],
) {
    let a: &[Int8Row<'_>; P] = a.first_chunk().expect("P activation rows");
    let iacc: &mut [V::I; P] = iacc.first_chunk_mut().expect("P accumulators");
    // SAFETY: the caller's guarantee.
    unsafe {
        let mut acc = if first { [V::zero(); P] } else { *iacc };
        for (u, c) in codes.chunks_exact(8).enumerate() {
            let lo = base + at + 16 * u;
            for r in 0..P {
                let q = a[r].q;
                acc[r] = V::unit_dot(acc[r], c, as16(&q[lo..]), as16(&q[lo + h..]));
            }
        }
        *iacc = acc;
    }
}

/// [`chunk_pass`] for the `a.len()` (1 to 8) rows given.
///
/// # Safety
/// As [`Lanes`]' functions.
#[inline(always)]
unsafe fn pass<V: Lanes>(
    codes: &[V::I],
    a: &[Int8Row<'_>],
    base: usize,
    at: usize,
    h: usize,
    first: bool,
    iacc: &mut [V::I],
) {
    // SAFETY: the caller's guarantee.
    unsafe {
        match a.len() {
            1 => chunk_pass::<V, 1>(codes, a, base, at, h, first, iacc),
            2 => chunk_pass::<V, 2>(codes, a, base, at, h, first, iacc),
            3 => chunk_pass::<V, 3>(codes, a, base, at, h, first, iacc),
            4 => chunk_pass::<V, 4>(codes, a, base, at, h, first, iacc),
            5 => chunk_pass::<V, 5>(codes, a, base, at, h, first, iacc),
            6 => chunk_pass::<V, 6>(codes, a, base, at, h, first, iacc),
            7 => chunk_pass::<V, 7>(codes, a, base, at, h, first, iacc),
            _ => chunk_pass::<V, 8>(codes, a, base, at, h, first, iacc),
        }
    }
}

/// The first 16 activations of `a`.
#[inline(always)]
fn as16(a: &[i8]) -> &[i8; 16] {
    a.first_chunk::<16>().expect("16 activations of the group")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dot::dot_portable;
    use crate::scale::{Bf16Scale, F16Scale, F32Scale};
    use qforge_core::rand::Rng;

    /// Random weight rows (every code, scales of every magnitude) against activation rows with
    /// extreme zero points and `-128` / `127` runs: the tile kernel gives the portable kernel's
    /// bits for 1 to 35 weight rows (partial tiles of 8 and 16) and 2 to 11 activation rows
    /// (partial passes), into a strided output whose gaps it must leave alone, at every SIMD
    /// level the machine has, forced in turn.
    fn same_bits<S: ScaleKind, const H: usize>(seed: u64) {
        let levels = qforge_golden::needs::simd_levels();
        assert!(!levels.is_empty(), "this test needs AVX2 (and runs on every x86-64 CI machine)");
        for level in levels {
            qforge_core::cpu::with_level(level, || same_bits_at::<S, H>(seed));
        }
    }

    fn same_bits_at<S: ScaleKind, const H: usize>(seed: u64) {
        let mut rng = Rng::new(seed);
        for case in 0..24 {
            let (nrows, n, m) = (1 + (case * 7) % 35, 1 + case % 3, TILE_MIN_ACTS + case % 10);
            let w = crate::test_data::groups::<S, H>(&mut rng, nrows * n);
            let mut w = w;
            crate::test_data::special_scales(&mut w, case);
            let qs = crate::test_data::act_codes(&mut rng, case, m, n * 2 * H);
            let rows = crate::test_data::act_rows(&qs, case);
            let stride = m + case % 3;
            let mut out = vec![f32::NAN; (nrows - 1) * stride + m];
            assert!(dot_tile(&w, n, &rows, &mut out, stride));
            for i in 0..nrows {
                for (j, row) in rows.iter().enumerate() {
                    let (got, want) = (out[i * stride + j], dot_portable(&w[i * n..(i + 1) * n], row));
                    assert!(
                        got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                        "case {case} weight row {i} act {j}: {got:e} vs {want:e}"
                    );
                }
                for gap in out.iter().skip(i * stride + m).take(stride - m) {
                    assert!(gap.is_nan(), "case {case}: the gaps of a strided output are not written");
                }
            }
        }
    }

    #[test]
    fn tile_equals_portable_every_group_and_scale() {
        same_bits::<F16Scale, 16>(11);
        same_bits::<F16Scale, 64>(12);
        same_bits::<Bf16Scale, 32>(13);
        same_bits::<F32Scale, 128>(14);
        same_bits::<F16Scale, 2048>(15);
    }
}
