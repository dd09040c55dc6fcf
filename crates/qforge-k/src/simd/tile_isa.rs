//! The tile kernel's register files ([`super::tile::Isa`]): [`Zmm`], AVX-512 VNNI with two
//! groups (16 weight rows) per 512-bit vector and `vpdpbusd`; [`Ymm`], one group per 256-bit
//! vector, in three builds: AVX2 (`Ymm<NONE>`) with `vpmaddubsw` + `vpmaddwd`, the group
//! kernel's dot ([`qforge_simd::planes::dot_avx2`]), or, for a table spanning more than 127,
//! its signed values as `i16` pairs and `vpmaddwd` alone (`tile`'s module docs); and the
//! 256-bit VNNI ones (`Ymm<VEX>`, `Ymm<EVEX>`: [`qforge_simd::vnni`]) with `vpdpbusd` /
//! `vpdpwssd` as [`Zmm`], every table unsigned.

use std::arch::x86_64::*;

use super::tile::{Acts, Isa, RowQ, Tile, passes, rows, signed};
use crate::QK_K;
use crate::packed::{Layout, PackedCodes, ROWS};
use qforge_simd::planes::{dot_avx2, quads};
use qforge_simd::vnni::{EVEX, Form, NONE, dpbusd, dpwssd};

/// AVX-512 VNNI: 16 weight rows (the tile's first group in lanes 0–7), eight activation rows per
/// pass (measured 5–30 % faster than four on Ice Lake).
pub(super) struct Zmm;

/// 256-bit registers, 8 weight rows: AVX2 (`V` = [`NONE`]), four activation rows per pass
/// (AVX2's 16 registers), eight for signed values (`i16` pairs); or the VNNI form `V`, with
/// `vpdpbusd` (any code, never signed) and `vpdpwssd`, four rows per pass in the VEX form (16
/// registers), eight in the EVEX one (32).
pub(super) struct Ymm<const V: Form>;

/// The activation's four `i8` of quad `q` of `qs`, as one `i32`.
#[inline(always)]
fn quad(qs: &[i8; QK_K], q: usize) -> i32 {
    let q = qs[4 * q..].first_chunk::<4>().expect("a quad of the block");
    i32::from_le_bytes(q.map(|x| x as u8))
}

/// `F`'s table of `u` per code (of `u − ZERO` where `V` dots it signed), if it has one.
#[inline(always)]
fn table<V: Isa, F: PackedCodes>() -> Option<[u8; 16]> {
    F::TABLE.map(|t| if signed::<V, F>() { t.map(|u| u.wrapping_sub(F::ZERO)) } else { t })
}

/// The bytes of unit `u` of packed block `b`.
#[inline(always)]
fn unit<F: PackedCodes>(b: &[u8], u: usize) -> &[u8] {
    let l = const { Layout::of::<F>() };
    &b[l.codes + u * l.planes.unit..][..l.planes.unit]
}

/// The 4 × 4 transposes of 32-bit words within each 128-bit lane of four rows `r`: `u[k]`'s
/// lane `L` holds word `4L + k` of `r[0] .. r[3]` (`vpunpck{l,h}dq`, then `vpunpck{l,h}qdq`).
///
/// # Safety
/// As [`Isa`]'s functions.
#[inline(always)]
unsafe fn transpose4<V: Isa>(r: &[V::I], u: &mut [V::I]) {
    // SAFETY: the caller's guarantee.
    unsafe {
        let t0 = V::unpacklo32(r[0], r[1]);
        let t1 = V::unpackhi32(r[0], r[1]);
        let t2 = V::unpacklo32(r[2], r[3]);
        let t3 = V::unpackhi32(r[2], r[3]);
        u[0] = V::unpacklo64(t0, t2);
        u[1] = V::unpackhi64(t0, t2);
        u[2] = V::unpacklo64(t1, t3);
        u[3] = V::unpackhi64(t1, t3);
    }
}

/// The one-intrinsic operations of [`Isa`], for `512` ([`Zmm`]) or `256` ([`Ymm`]): one table,
/// a column per register file.
macro_rules! ops {
    ($w:tt) => {
        qforge_simd::width_ops!($w;
            zero() -> I = _mm512_setzero_si512 | _mm256_setzero_si256;
            zerof() -> F = _mm512_setzero_ps | _mm256_setzero_ps;
            add(a: I, b: I) -> I = _mm512_add_epi32 | _mm256_add_epi32;
            sub(a: I, b: I) -> I = _mm512_sub_epi32 | _mm256_sub_epi32;
            mullo(a: I, b: I) -> I = _mm512_mullo_epi32 | _mm256_mullo_epi32;
            madd(a: I, b: I) -> I = _mm512_madd_epi16 | _mm256_madd_epi16;
            set1(x: i32) -> I = _mm512_set1_epi32 | _mm256_set1_epi32;
            set1f(x: f32) -> F = _mm512_set1_ps | _mm256_set1_ps;
            cvt(a: I) -> F = _mm512_cvtepi32_ps | _mm256_cvtepi32_ps;
            mulf(a: F, b: F) -> F = _mm512_mul_ps | _mm256_mul_ps;
            fmadd(a: F, b: F, c: F) -> F = _mm512_fmadd_ps | _mm256_fmadd_ps;
            subf(a: F, b: F) -> F = _mm512_sub_ps | _mm256_sub_ps;
            unpacklo32(a: I, b: I) -> I = _mm512_unpacklo_epi32 | _mm256_unpacklo_epi32;
            unpackhi32(a: I, b: I) -> I = _mm512_unpackhi_epi32 | _mm256_unpackhi_epi32;
            unpacklo64(a: I, b: I) -> I = _mm512_unpacklo_epi64 | _mm256_unpacklo_epi64;
            unpackhi64(a: I, b: I) -> I = _mm512_unpackhi_epi64 | _mm256_unpackhi_epi64;
        );
    };
}

// In both impls, `Isa`'s contract (the caller has the register file's features: AVX-512 F /
// BW / VL / VNNI, AVX2, FMA and F16C for `Zmm`; AVX2, FMA and F16C for `Ymm`, and form `V`'s
// VNNI features besides) is what makes every intrinsic call sound.
impl Isa for Zmm {
    const ROWS: usize = 2 * ROWS;
    const SIGNED: bool = false;
    type I = __m512i;
    type F = __m512;

    ops!(512);
    #[inline(always)]
    unsafe fn madd_add(acc: __m512i, a: __m512i, b: __m512i) -> __m512i {
        // SAFETY: `Isa`'s contract (the features). `vpdpwssd` adds both `i16` products to the
        // lane with 32-bit wraparound, as `vpmaddwd` then `vpaddd` do.
        unsafe { _mm512_dpwssd_epi32(acc, a, b) }
    }
    #[inline(always)]
    unsafe fn pair(lo: __m512i, hi: __m512i) -> __m512i {
        // SAFETY: `Isa`'s contract (the features).
        unsafe { _mm512_mask_blend_epi16(0xAAAA_AAAA, lo, _mm512_slli_epi32::<16>(hi)) }
    }
    #[inline(always)]
    unsafe fn mullo16(a: __m512i, z: i16) -> __m512i {
        // SAFETY: `Isa`'s contract (the features).
        unsafe { _mm512_mullo_epi16(a, _mm512_set1_epi16(z)) }
    }
    #[inline(always)]
    unsafe fn bytes(b: &[u8], b1: Option<&[u8]>, at: usize, signed: bool) -> __m512i {
        // Each group's 8 bytes loaded straight into its half of the register: copied into one
        // 16-byte array first, the load after two 8-byte stores missed store-to-load
        // forwarding, 26 times per decoded block.
        let lo = b[at..].first_chunk::<ROWS>().expect("8 rows' bytes");
        // SAFETY: `Isa`'s contract (the features); each 8-byte load reads exactly `lo` / the
        // second group's 8 bytes. (A `match`, not `Option::map`'s closure, which need not be
        // inlined here.)
        unsafe {
            let h = match b1 {
                Some(b1) => _mm_loadl_epi64(b1[at..].first_chunk::<ROWS>().expect("8 rows' bytes").as_ptr().cast()),
                None => _mm_setzero_si128(),
            };
            let v = _mm_unpacklo_epi64(_mm_loadl_epi64(lo.as_ptr().cast()), h);
            if signed { _mm512_cvtepi8_epi32(v) } else { _mm512_cvtepu8_epi32(v) }
        }
    }
    #[inline(always)]
    unsafe fn halves(b: &[u8], b1: Option<&[u8]>, at: usize) -> __m512 {
        let lo = b[at..].first_chunk::<{ 2 * ROWS }>().expect("8 f16");
        // SAFETY: `Isa`'s contract (the features); each 16-byte load reads exactly `lo` / the
        // second group's 16 bytes (as `bytes`: no copy through the stack, no closure).
        unsafe {
            let h = match b1 {
                Some(b1) => _mm_loadu_si128(b1[at..].first_chunk::<{ 2 * ROWS }>().expect("8 f16").as_ptr().cast()),
                None => _mm_setzero_si128(),
            };
            let v = _mm256_inserti128_si256::<1>(_mm256_castsi128_si256(_mm_loadu_si128(lo.as_ptr().cast())), h);
            _mm512_cvtph_ps(v)
        }
    }
    #[inline(always)]
    unsafe fn store(v: __m512, out: &mut [f32]) {
        let mut lanes = [0f32; 2 * ROWS];
        // SAFETY: `Isa`'s contract (the features); the store writes exactly the 64 bytes of
        // `lanes`.
        unsafe { _mm512_storeu_ps(lanes.as_mut_ptr(), v) };
        out.copy_from_slice(&lanes[..out.len()]);
    }
    #[inline(always)]
    unsafe fn codes<F: PackedCodes>(b: &[u8], b1: Option<&[u8]>, u: usize, c: &mut [__m512i]) {
        let planes = const { Layout::of::<F>().planes };
        // SAFETY: `Isa`'s contract (the features, AVX2 all `quads` needs); the load reads
        // exactly the 16 bytes of the table.
        unsafe {
            let lo = quads(planes, unit::<F>(b, u));
            let hi = match b1 {
                Some(b1) => quads(planes, unit::<F>(b1, u)),
                None => [_mm256_setzero_si256(); 8],
            };
            // (A `match`, not `Option::map`'s closure, which need not be inlined here.)
            #[allow(clippy::manual_map)]
            let table = match table::<Self, F>() {
                Some(t) => Some(_mm512_broadcast_i32x4(_mm_loadu_si128(t.as_ptr().cast()))),
                None => None,
            };
            for (m, c) in c.iter_mut().enumerate() {
                *c = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo[m]), hi[m]);
                if let Some(t) = table {
                    *c = _mm512_shuffle_epi8(t, *c);
                }
            }
        }
    }
    #[inline(always)]
    unsafe fn transpose_codes(rows: &[[u8; QK_K]; 16], c: &mut [__m512i]) {
        // SAFETY: `Isa`'s contract (the features); each load reads 64 bytes inside a row.
        unsafe {
            for s in 0..QK_K / 64 {
                // (Loops, not `array::from_fn`: its closure would not inherit the features.)
                let mut r = [_mm512_setzero_si512(); 16];
                for (r, row) in r.iter_mut().zip(rows) {
                    *r = _mm512_loadu_si512(row[64 * s..].as_ptr().cast());
                }
                let out = (&mut c[16 * s..16 * s + 16]).try_into().expect("16 vectors");
                qforge_simd::transpose::words16(&r, out);
            }
        }
    }
    #[inline(always)]
    unsafe fn from_u<F: PackedCodes>(_: &mut [__m512i]) {
        // `vpdpbusd` takes every `u` (unsigned bytes): never signed.
        const { assert!(!signed::<Self, F>()) };
    }
    #[inline(always)]
    unsafe fn lanes_bytes(v: &[u8; 16], signed: bool) -> __m512i {
        // SAFETY: `Isa`'s contract (the features); the load reads exactly the 16 bytes of `v`.
        unsafe {
            let v = _mm_loadu_si128(v.as_ptr().cast());
            if signed { _mm512_cvtepi8_epi32(v) } else { _mm512_cvtepu8_epi32(v) }
        }
    }
    #[inline(always)]
    unsafe fn lanes_halves(v: &[u16; 16]) -> __m512 {
        // SAFETY: `Isa`'s contract (the features); the load reads exactly the 32 bytes of `v`.
        unsafe { _mm512_cvtph_ps(_mm256_loadu_si256(v.as_ptr().cast())) }
    }
    #[inline(always)]
    unsafe fn group<F: PackedCodes, const R: usize>(c: &[__m512i], rows: &[RowQ<'_>; R], q0: usize) -> [__m512i; R] {
        // SAFETY: `Isa`'s contract (the features).
        unsafe {
            let mut s = [_mm512_setzero_si512(); R];
            for (m, &c) in c.iter().enumerate() {
                for (s, row) in s.iter_mut().zip(rows) {
                    *s = _mm512_dpbusd_epi32(*s, c, _mm512_set1_epi32(quad(row.qs, q0 + m)));
                }
            }
            s
        }
    }
    passes!(1 2 3 4 5 6 7; 8);
}

impl<const V: Form> Isa for Ymm<V> {
    const ROWS: usize = ROWS;
    const SIGNED: bool = V == NONE;
    type I = __m256i;
    type F = __m256;

    ops!(256);
    #[inline(always)]
    unsafe fn madd_add(acc: __m256i, a: __m256i, b: __m256i) -> __m256i {
        // SAFETY: `Isa`'s contract (the features, form `V`'s where it is not `NONE`).
        // `vpdpwssd` adds both `i16` products to the lane with 32-bit wraparound, as
        // `vpmaddwd` then `vpaddd` do.
        unsafe { if V == NONE { _mm256_add_epi32(acc, _mm256_madd_epi16(a, b)) } else { dpwssd::<V>(acc, a, b) } }
    }
    #[inline(always)]
    unsafe fn pair(lo: __m256i, hi: __m256i) -> __m256i {
        // SAFETY: `Isa`'s contract (the features).
        unsafe { _mm256_blend_epi16::<0xAA>(lo, _mm256_slli_epi32::<16>(hi)) }
    }
    #[inline(always)]
    unsafe fn mullo16(a: __m256i, z: i16) -> __m256i {
        // SAFETY: `Isa`'s contract (the features).
        unsafe { _mm256_mullo_epi16(a, _mm256_set1_epi16(z)) }
    }
    #[inline(always)]
    unsafe fn bytes(b: &[u8], _: Option<&[u8]>, at: usize, signed: bool) -> __m256i {
        let v = b[at..].first_chunk::<ROWS>().expect("8 rows' bytes");
        // SAFETY: `Isa`'s contract (the features); the load reads exactly the 8 bytes of `v`.
        unsafe {
            let v = _mm_loadl_epi64(v.as_ptr().cast());
            if signed { _mm256_cvtepi8_epi32(v) } else { _mm256_cvtepu8_epi32(v) }
        }
    }
    #[inline(always)]
    unsafe fn halves(b: &[u8], _: Option<&[u8]>, at: usize) -> __m256 {
        let h = b[at..].first_chunk::<{ 2 * ROWS }>().expect("8 f16");
        // SAFETY: `Isa`'s contract (the features); the load reads exactly the 16 bytes of `h`.
        unsafe { _mm256_cvtph_ps(_mm_loadu_si128(h.as_ptr().cast())) }
    }
    #[inline(always)]
    unsafe fn store(v: __m256, out: &mut [f32]) {
        let mut lanes = [0f32; ROWS];
        // SAFETY: `Isa`'s contract (the features); the store writes exactly the 32 bytes of
        // `lanes`.
        unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), v) };
        out.copy_from_slice(&lanes[..out.len()]);
    }
    #[inline(always)]
    unsafe fn codes<F: PackedCodes>(b: &[u8], _: Option<&[u8]>, u: usize, c: &mut [__m256i]) {
        let planes = const { Layout::of::<F>().planes };
        // SAFETY: `Isa`'s contract (the features, AVX2 all `quads` needs); the load reads
        // exactly the 16 bytes of the table.
        unsafe {
            let q = quads(planes, unit::<F>(b, u));
            // (A `match`, not `Option::map`'s closure, which need not be inlined here.)
            #[allow(clippy::manual_map)]
            let table = match table::<Self, F>() {
                Some(t) => Some(_mm256_broadcastsi128_si256(_mm_loadu_si128(t.as_ptr().cast()))),
                None => None,
            };
            if signed::<Self, F>() {
                // Each quad's signed bytes `v0 v1 v2 v3` per row as the `i16` pairs `(v0, v2)`
                // and `(v1, v3)`: each `i16` of the bytes shifted up by 8 and back, and shifted
                // down by 8, arithmetically.
                for (c, q) in c.chunks_exact_mut(2).zip(q) {
                    let v = match table {
                        Some(t) => _mm256_shuffle_epi8(t, q),
                        None => q,
                    };
                    c[0] = _mm256_srai_epi16::<8>(_mm256_slli_epi16::<8>(v));
                    c[1] = _mm256_srai_epi16::<8>(v);
                }
                return;
            }
            for (c, q) in c.iter_mut().zip(q) {
                *c = match table {
                    Some(t) => _mm256_shuffle_epi8(t, q),
                    None => q,
                };
            }
        }
    }
    #[inline(always)]
    unsafe fn transpose_codes(rows: &[[u8; QK_K]; 16], c: &mut [__m256i]) {
        // SAFETY: `Isa`'s contract (the features); each load reads 32 bytes inside a row.
        unsafe {
            for s in 0..QK_K / 32 {
                let mut r = [_mm256_setzero_si256(); 8];
                for (r, row) in r.iter_mut().zip(rows) {
                    *r = _mm256_loadu_si256(row[32 * s..].as_ptr().cast());
                }
                // As `Zmm`'s: 128-bit lane `L` of `u[4g + k]` holds word `4L + k` of rows
                // `4g .. 4g + 4`; then lane `L` of `u[k]` and `u[4 + k]` side by side.
                let mut u = [_mm256_setzero_si256(); 8];
                for g in 0..2 {
                    transpose4::<Self>(&r[4 * g..4 * g + 4], &mut u[4 * g..4 * g + 4]);
                }
                for k in 0..4 {
                    c[8 * s + k] = _mm256_permute2x128_si256::<0x20>(u[k], u[4 + k]);
                    c[8 * s + 4 + k] = _mm256_permute2x128_si256::<0x31>(u[k], u[4 + k]);
                }
            }
        }
    }
    #[inline(always)]
    unsafe fn from_u<F: PackedCodes>(c: &mut [__m256i]) {
        if !signed::<Self, F>() {
            return;
        }
        // SAFETY: `Isa`'s contract (the features).
        unsafe {
            let z = _mm256_set1_epi8(F::ZERO as i8);
            // Quad `q` to vectors `2q`, `2q + 1`, from the last: every vector is read before
            // one written over it (`2q ≥ q`).
            for q in (0..QK_K / 4).rev() {
                let v = _mm256_sub_epi8(c[q], z);
                c[2 * q] = _mm256_srai_epi16::<8>(_mm256_slli_epi16::<8>(v));
                c[2 * q + 1] = _mm256_srai_epi16::<8>(v);
            }
        }
    }
    #[inline(always)]
    unsafe fn lanes_bytes(v: &[u8; 16], signed: bool) -> __m256i {
        // SAFETY: `Isa`'s contract (the features); the load reads the first 8 bytes of `v`.
        unsafe {
            let v = _mm_loadl_epi64(v.as_ptr().cast());
            if signed { _mm256_cvtepi8_epi32(v) } else { _mm256_cvtepu8_epi32(v) }
        }
    }
    #[inline(always)]
    unsafe fn lanes_halves(v: &[u16; 16]) -> __m256 {
        // SAFETY: `Isa`'s contract (the features); the load reads the first 16 bytes of `v`.
        unsafe { _mm256_cvtph_ps(_mm_loadu_si128(v.as_ptr().cast())) }
    }
    #[inline(always)]
    unsafe fn group<F: PackedCodes, const R: usize>(c: &[__m256i], rows: &[RowQ<'_>; R], q0: usize) -> [__m256i; R] {
        let umax = const { crate::packed::umax::<F>() };
        // SAFETY: `Isa`'s contract (the features, AVX2 all both dots need).
        unsafe {
            let mut s = [_mm256_setzero_si256(); R];
            if V != NONE {
                // As `Zmm`'s: one `vpdpbusd` per quad and row.
                for (m, &c) in c.iter().enumerate() {
                    for (s, row) in s.iter_mut().zip(rows) {
                        *s = dpbusd::<V>(*s, c, _mm256_set1_epi32(quad(row.qs, q0 + m)));
                    }
                }
                return s;
            }
            if signed::<Self, F>() {
                // `i16` pairs (`tile`'s module docs): vector `2m + h` of quad `q0 + m` holds
                // the values `(v_h, v_{h+2})`, the widened row the activations in that order at
                // `i16` `4(q0 + m) + 2h`. Each vector once, for every row.
                for (j, &v) in c.iter().enumerate() {
                    let at = 4 * q0 + 2 * j;
                    for (s, row) in s.iter_mut().zip(rows) {
                        let pair = row.wide[at..].first_chunk::<2>().expect("a pair of the block");
                        let a = _mm256_set1_epi32(i32::from(pair[0] as u16) | i32::from(pair[1] as u16) << 16);
                        *s = _mm256_add_epi32(*s, _mm256_madd_epi16(v, a));
                    }
                }
                return s;
            }
            // (Loops, not closures: a closure passed to a generic function need not be inlined
            // into the kernel, and then runs without its features.)
            macro_rules! dot {
                ($per:literal) => {{
                    let mut cs = [_mm256_setzero_si256(); $per];
                    cs.copy_from_slice(&c[..$per]);
                    for (s, row) in s.iter_mut().zip(rows) {
                        let mut av = [_mm256_setzero_si256(); $per];
                        for (m, av) in av.iter_mut().enumerate() {
                            *av = _mm256_set1_epi32(quad(row.qs, q0 + m));
                        }
                        *s = dot_avx2(&cs, &av, umax);
                    }
                }};
            }
            if c.len() == 4 {
                dot!(4);
            } else {
                dot!(8);
            }
            s
        }
    }
    // Signed values (`i16` pairs) need no registers for the sign trick: eight rows a pass,
    // each weight vector loaded once for all of them; so does the EVEX form's register file.
    passes!(1 2 3 4 5 6 7; 8, if signed::<Self, F>() || V == EVEX { 8 } else { 4 });
}
