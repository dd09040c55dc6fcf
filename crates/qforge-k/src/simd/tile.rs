//! The AVX-512 VNNI mat-mul kernel of the packed layout ([`crate::packed`]): each block of two
//! groups (16 weight rows) decoded once into a tile, then dotted with every activation row.
//!
//! The group kernel ([`super::packed`]) unpacks a unit's codes for at most four activation
//! rows and works in 256-bit registers (8 rows). For many activation rows (a mat-mul), this
//! kernel instead decodes a block of 16 weight rows once, for all of them, into a tile in L1:
//!
//! * `codes`: the block's 64 quads as 512-bit vectors, rows of group `g` in lanes 0–7 and of
//!   group `g + 1` in lanes 8–15, after the format's table (`u`, any `u8`: `vpdpbusd` takes
//!   unsigned codes, so no sign trick);
//! * `sc`: each scale group's scales as `i32` lanes; `zsc`: `ZERO · sc` as the `i16` pairs of the
//!   16-element halves `(2j, 2j + 1)`; `mins` the same pairs of the mins; `d`, `dmin` in `f32`.
//!
//! Per activation row and block, in the lanes' exact wrapping `i32` (the reference's integers,
//! regrouped: the same value modulo 2³²):
//!
//! ```text
//! T = Σ_g sc[g] · Σ_{i in g} u[i]·a.qs[i]  −  Σ_j madd(zsc pair j, zero-sum pair j)
//! M = Σ_j madd(min pair j, bsums pair j)
//! ```
//!
//! where a zero-sum pair holds two 16-element halves' `bsums` (or, for a table with `u` above
//! 127, the sums of their quants: [`packed::zero_sum`]). Every pair product fits: `|ZERO·sc| ≤
//! 255·128 < 2¹⁵` and the `bsums` are `i16`, so each `vpmaddwd` is exact. Then, as the
//! reference: `acc = fma(T, d·a.d, acc)`, `accm = fma(M, dmin·a.d, accm)`, result `acc − accm`:
//! the portable kernel's bits. `d` and `dmin` of group `g + 1`'s lanes are zero where the
//! group does not exist, and those lanes are never stored.

use std::arch::x86_64::*;

use crate::QK_K;
use crate::packed::{self, Layout, PackedCodes, ROWS};
use crate::q8k::BlockQ8K;
use qforge_simd::planes::quads;

/// Activation rows from which [`super::packed::packed_dot_groups`] takes this kernel: below,
/// decoding each block once costs more than the group kernel's unpacking per four rows.
pub(crate) const TILE_MIN_ROWS: usize = 8;

/// Activation rows dotted per pass over a scale group's codes (their sums and totals live
/// in registers beside the codes): eight measured 5–30 % faster than four on Ice Lake.
const PASS: usize = 8;

/// Quads (four elements) per block.
pub(super) const QUADS: usize = QK_K / 4;

/// 16-element halves per block, and their pairs.
pub(super) const HALVES: usize = QK_K / 16;
pub(super) const PAIRS: usize = HALVES / 2;

/// One block of two groups of 8 weight rows, decoded (see the module docs).
struct Tile {
    codes: [__m512i; QUADS],
    sc: [__m512i; HALVES],
    zsc: [__m512i; PAIRS],
    mins: [__m512i; PAIRS],
    d: __m512,
    dmin: __m512,
}

/// Per activation row and block: the zero-sum pairs and the `bsums` pairs (`i16` halves of an
/// `i32`), for [`Tile::zsc`] and [`Tile::mins`].
#[derive(Clone, Copy)]
pub(super) struct RowSums {
    pub(super) zero: [i32; PAIRS],
    pub(super) bsums: [i32; PAIRS],
}

/// Two `i16` as the halves of one `i32` lane (low first).
fn pair(lo: i32, hi: i32) -> i32 {
    i32::from(lo as u16) | i32::from(hi as u16) << 16
}

/// [`crate::packed::dot_groups_rows`] with this kernel, for `a.len() ≥` [`TILE_MIN_ROWS`] on a
/// CPU with AVX-512 VNNI (or in its AVX2 form, [`super::tile_avx2`], on one with AVX2); `false`
/// (nothing written) otherwise. Arguments as
/// [`super::packed::packed_dot_groups`]'s.
pub(crate) fn tile_dot_groups<F: PackedCodes>(p: &[u8], n: usize, a: &[&[BlockQ8K]], out: &mut [f32]) -> bool {
    if a.len() < TILE_MIN_ROWS || qforge_simd::Avx2::detect().is_none() {
        return false;
    }
    // SAFETY: `Avx2::detect` has just checked that this CPU has AVX2, FMA and F16C, all
    // `row_sums` and `tile_avx2` need; `Vnni::detect` the AVX-512 F / BW / VL / VNNI that
    // `tile_vnni` needs besides.
    unsafe {
        let sums = row_sums::<F>(a, n);
        if qforge_simd::Vnni::detect().is_some() {
            tile_vnni::<F>(p, n, a, &sums, out);
        } else {
            super::tile_avx2::tile_avx2::<F>(p, n, a, &sums, out);
        }
    }
    true
}

/// Every row's [`RowSums`] of its first `n` blocks, row-major.
#[target_feature(enable = "avx2,fma,f16c")]
fn row_sums<F: PackedCodes>(a: &[&[BlockQ8K]], n: usize) -> Vec<RowSums> {
    let mut sums = Vec::with_capacity(a.len() * n);
    for a in a {
        for b in &a[..n] {
            let bs = |h: usize| i32::from(b.bsums[h].get());
            let bsums = std::array::from_fn(|j| pair(bs(2 * j), bs(2 * j + 1)));
            let mut zero = bsums;
            if packed::zero_from_quants::<F>() {
                // Each 16 quants' sum: `vpsadbw` of the quants offset to unsigned (`q ^ 0x80 =
                // q + 128`) sums each 8, less 8 · 128.
                let flip = _mm256_set1_epi8(i8::MIN);
                for (j, z) in zero.iter_mut().enumerate() {
                    let q = b.qs[32 * j..].first_chunk::<32>().expect("two halves of the block");
                    // SAFETY: the load reads exactly the 32 bytes of `q`.
                    let v = _mm256_xor_si256(unsafe { _mm256_loadu_si256(q.as_ptr().cast()) }, flip);
                    let mut e = [0i64; 4];
                    // SAFETY: `e` is exactly 32 bytes: the store writes only it.
                    unsafe { _mm256_storeu_si256(e.as_mut_ptr().cast(), _mm256_sad_epu8(v, _mm256_setzero_si256())) };
                    let half = |k: usize| (e[2 * k] + e[2 * k + 1]) as i32 - 16 * 128;
                    *z = pair(half(0), half(1));
                }
            }
            sums.push(RowSums { zero, bsums });
        }
    }
    sums
}

/// The kernel: every pair of groups of `p`, block by block, decoded and dotted with every row.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn tile_vnni<F: PackedCodes>(p: &[u8], n: usize, a: &[&[BlockQ8K]], sums: &[RowSums], out: &mut [f32]) {
    let l = const { Layout::of::<F>() };
    let len = out.len() / a.len();
    let groups = len / ROWS;
    let gb = n * l.size;
    let zero = _mm512_setzero_si512();
    let mut tile = Tile {
        codes: [zero; QUADS],
        sc: [zero; HALVES],
        zsc: [zero; PAIRS],
        mins: [zero; PAIRS],
        d: _mm512_setzero_ps(),
        dmin: _mm512_setzero_ps(),
    };
    let mut acc = vec![_mm512_setzero_ps(); a.len()];
    let mut accm = vec![_mm512_setzero_ps(); if F::HAS_MINS { a.len() } else { 0 }];
    for g in (0..groups).step_by(2) {
        let pg = &p[g * gb..][..gb];
        let pg1 = p.get((g + 1) * gb..(g + 2) * gb);
        acc.fill(_mm512_setzero_ps());
        accm.fill(_mm512_setzero_ps());
        for i in 0..n {
            decode::<F>(&pg[i * l.size..][..l.size], pg1.map(|p| &p[i * l.size..][..l.size]), &mut tile);
            let mut r = 0;
            while r < a.len() {
                let left = a.len() - r;
                macro_rules! pass {
                    ($r:literal) => {
                        rows::<F, $r>(&tile, a, sums, n, i, r, &mut acc, &mut accm)
                    };
                }
                match left {
                    1 => pass!(1),
                    2 => pass!(2),
                    3 => pass!(3),
                    4 => pass!(4),
                    5 => pass!(5),
                    6 => pass!(6),
                    7 => pass!(7),
                    _ => pass!(8),
                }
                r += left.min(PASS);
            }
        }
        let width = if pg1.is_some() { 2 * ROWS } else { ROWS };
        for (r, out) in out.chunks_exact_mut(len).enumerate() {
            let v = if F::HAS_MINS { _mm512_sub_ps(acc[r], accm[r]) } else { acc[r] };
            let mut lanes = [0f32; 2 * ROWS];
            // SAFETY: `lanes` is 16 f32, exactly 64 bytes: the store writes only it.
            unsafe { _mm512_storeu_ps(lanes.as_mut_ptr(), v) };
            out[g * ROWS..][..width].copy_from_slice(&lanes[..width]);
        }
    }
}

/// Decodes block `b` of one group and `b1` of the next (if any: else zero lanes) into `t`.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
#[inline]
fn decode<F: PackedCodes>(b: &[u8], b1: Option<&[u8]>, t: &mut Tile) {
    let l = const { Layout::of::<F>() };
    let table = F::TABLE.map(|t| {
        // SAFETY: the load reads exactly the 16 bytes of the table.
        unsafe { _mm512_broadcast_i32x4(_mm_loadu_si128(t.as_ptr().cast())) }
    });
    for u in 0..QK_K / 32 {
        let at = l.codes + u * l.planes.unit;
        // SAFETY: this function has AVX2 enabled, all `quads` needs.
        let lo = unsafe { quads(l.planes, &b[at..][..l.planes.unit]) };
        let hi = match b1 {
            // SAFETY: as above.
            Some(b1) => unsafe { quads(l.planes, &b1[at..][..l.planes.unit]) },
            None => [_mm256_setzero_si256(); 8],
        };
        for m in 0..8 {
            let mut c = _mm512_inserti64x4::<1>(_mm512_castsi256_si512(lo[m]), hi[m]);
            if let Some(t) = table {
                c = _mm512_shuffle_epi8(t, c);
            }
            t.codes[8 * u + m] = c;
        }
    }
    // Group `k`'s (or, for `zsc` and `mins`, 16-element half `h`'s) bytes of both groups: 16
    // lanes.
    let bytes = |at: usize| -> [u8; 16] {
        let mut v = [0u8; 16];
        v[..ROWS].copy_from_slice(&b[at..][..ROWS]);
        if let Some(b1) = b1 {
            v[ROWS..].copy_from_slice(&b1[at..][..ROWS]);
        }
        v
    };
    let half_group = |h: usize| h * 16 / l.group;
    let load = |v: &[u8; 16]| {
        // SAFETY: the load reads exactly the 16 bytes of `v`.
        unsafe { _mm_loadu_si128(v.as_ptr().cast()) }
    };
    if !F::UNIT_SCALES {
        for k in 0..l.groups {
            t.sc[k] = _mm512_cvtepi8_epi32(load(&bytes(l.sc + k * ROWS)));
        }
    }
    if F::ZERO != 0 {
        let z = _mm512_set1_epi16(i16::from(F::ZERO));
        for j in 0..PAIRS {
            let pair = if F::UNIT_SCALES {
                z
            } else {
                let (s0, s1) = (bytes(l.sc + half_group(2 * j) * ROWS), bytes(l.sc + half_group(2 * j + 1) * ROWS));
                let s = _mm512_or_si512(
                    _mm512_and_si512(_mm512_cvtepi8_epi32(load(&s0)), _mm512_set1_epi32(0xFFFF)),
                    _mm512_slli_epi32::<16>(_mm512_cvtepi8_epi32(load(&s1))),
                );
                _mm512_mullo_epi16(s, z)
            };
            t.zsc[j] = pair;
        }
    }
    if F::HAS_MINS {
        for j in 0..PAIRS {
            let (m0, m1) = (bytes(l.mins + half_group(2 * j) * ROWS), bytes(l.mins + half_group(2 * j + 1) * ROWS));
            t.mins[j] = _mm512_or_si512(
                _mm512_cvtepu8_epi32(load(&m0)),
                _mm512_slli_epi32::<16>(_mm512_cvtepu8_epi32(load(&m1))),
            );
        }
    }
    // The rows' `d` (`dmin`): 8 f16 of each group at `at`, widened (zero for an absent group).
    let halves = |at: usize| -> __m512 {
        let mut h = [0u8; 32];
        h[..16].copy_from_slice(&b[at..][..16]);
        if let Some(b1) = b1 {
            h[16..].copy_from_slice(&b1[at..][..16]);
        }
        // SAFETY: the load reads exactly the 32 bytes of `h`.
        _mm512_cvtph_ps(unsafe { _mm256_loadu_si256(h.as_ptr().cast()) })
    };
    t.d = halves(l.d);
    if F::D_MUL != 1.0 {
        // Exact: a power of two.
        t.d = _mm512_mul_ps(t.d, _mm512_set1_ps(F::D_MUL));
    }
    if F::HAS_MINS {
        t.dmin = halves(l.dmin);
    }
}

/// Rows `r0 .. r0 + R` of `a` against the decoded block `i` in `t`, into their `acc` (`accm`).
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
#[inline]
#[allow(clippy::too_many_arguments)]
fn rows<F: PackedCodes, const R: usize>(
    t: &Tile,
    a: &[&[BlockQ8K]],
    sums: &[RowSums],
    n: usize,
    i: usize,
    r0: usize,
    acc: &mut [__m512],
    accm: &mut [__m512],
) {
    let l = const { Layout::of::<F>() };
    let per = l.group / 4; // quads per scale group
    let qs: [&[i8; QK_K]; R] = std::array::from_fn(|r| &a[r0 + r][i].qs);
    let mut tot = [_mm512_setzero_si512(); R];
    for k in 0..l.groups {
        let mut s = [_mm512_setzero_si512(); R];
        for m in 0..per {
            let c = t.codes[k * per + m];
            for r in 0..R {
                let q = qs[r][4 * (k * per + m)..].first_chunk::<4>().expect("a quad of the block");
                let act = _mm512_set1_epi32(i32::from_le_bytes(q.map(|x| x as u8)));
                if F::UNIT_SCALES {
                    tot[r] = _mm512_dpbusd_epi32(tot[r], c, act);
                } else {
                    s[r] = _mm512_dpbusd_epi32(s[r], c, act);
                }
            }
        }
        if !F::UNIT_SCALES {
            for r in 0..R {
                tot[r] = _mm512_add_epi32(tot[r], _mm512_mullo_epi32(s[r], t.sc[k]));
            }
        }
    }
    for (r, mut tot) in tot.into_iter().enumerate() {
        let row = r0 + r;
        let rs = &sums[row * n + i];
        if F::ZERO != 0 {
            for j in 0..PAIRS {
                tot = _mm512_sub_epi32(tot, _mm512_madd_epi16(t.zsc[j], _mm512_set1_epi32(rs.zero[j])));
            }
        }
        let ad = _mm512_set1_ps(a[row][i].d.get());
        acc[row] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(tot), _mm512_mul_ps(t.d, ad), acc[row]);
        if F::HAS_MINS {
            let mut m = _mm512_setzero_si512();
            for j in 0..PAIRS {
                m = _mm512_add_epi32(m, _mm512_madd_epi16(t.mins[j], _mm512_set1_epi32(rs.bsums[j])));
            }
            accm[row] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(m), _mm512_mul_ps(t.dmin, ad), accm[row]);
        }
    }
}
