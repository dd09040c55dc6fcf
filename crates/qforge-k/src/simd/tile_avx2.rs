//! The AVX2 form of the tile kernel ([`super::tile`]): one group of 8 weight rows per tile, in
//! 256-bit registers, its block decoded once for every activation row, then dotted four rows
//! per pass with `vpmaddubsw` + `vpmaddwd` (unsigned codes `≤ 127`) or, for a table spanning
//! more than 127 (iq4_xs), its values `u − ZERO` signed with the sign trick and no zero term —
//! the group kernel's dots ([`super::packed`]), on codes unpacked once per block instead of once
//! per four rows. The zero and min terms are the VNNI tile's `vpmaddwd` pairs; the integers and
//! the f32 steps are the portable kernel's, so are its bits.

use std::arch::x86_64::*;

use super::tile::{HALVES, PAIRS, QUADS, RowSums};
use crate::QK_K;
use crate::packed::{self, Layout, PackedCodes, ROWS};
use crate::q8k::BlockQ8K;
use qforge_simd::planes::{dot_avx2, dot_signed_avx2, quads};

/// Activation rows per pass over a scale group's codes: four fill AVX2's 16 registers.
const PASS: usize = 4;

/// One block of one group of 8 weight rows, decoded (see [`super::tile`]).
struct Tile {
    codes: [__m256i; QUADS],
    sc: [__m256i; HALVES],
    zsc: [__m256i; PAIRS],
    mins: [__m256i; PAIRS],
    d: __m256,
    dmin: __m256,
}

/// Whether `F`'s values are dotted signed with the sign trick (a table with `u` above 127),
/// with no zero term.
const fn signed<F: PackedCodes>() -> bool {
    let s = packed::zero_from_quants::<F>();
    assert!(!s || packed::signed_values_fit::<F>(), "a table the sign trick cannot dot");
    s
}

/// The kernel: every group of `p`, block by block, decoded and dotted with every row.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) fn tile_avx2<F: PackedCodes>(p: &[u8], n: usize, a: &[&[BlockQ8K]], sums: &[RowSums], out: &mut [f32]) {
    let l = const { Layout::of::<F>() };
    let len = out.len() / a.len();
    let gb = n * l.size;
    let zero = _mm256_setzero_si256();
    let mut tile = Tile {
        codes: [zero; QUADS],
        sc: [zero; HALVES],
        zsc: [zero; PAIRS],
        mins: [zero; PAIRS],
        d: _mm256_setzero_ps(),
        dmin: _mm256_setzero_ps(),
    };
    let mut acc = vec![_mm256_setzero_ps(); a.len()];
    let mut accm = vec![_mm256_setzero_ps(); if F::HAS_MINS { a.len() } else { 0 }];
    for (g, pg) in p.chunks_exact(gb.max(1)).enumerate().take(len / ROWS) {
        acc.fill(_mm256_setzero_ps());
        accm.fill(_mm256_setzero_ps());
        for i in 0..n {
            decode::<F>(&pg[i * l.size..][..l.size], &mut tile);
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
                    _ => pass!(4),
                }
                r += left.min(PASS);
            }
        }
        for (r, out) in out.chunks_exact_mut(len).enumerate() {
            let v = if F::HAS_MINS { _mm256_sub_ps(acc[r], accm[r]) } else { acc[r] };
            let out: &mut [f32; ROWS] = (&mut out[g * ROWS..][..ROWS]).try_into().expect("8 outputs");
            // SAFETY: `out` is 8 f32, exactly 32 bytes: the store writes only it.
            unsafe { _mm256_storeu_ps(out.as_mut_ptr(), v) };
        }
    }
}

/// Decodes block `b` of a group into `t`.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn decode<F: PackedCodes>(b: &[u8], t: &mut Tile) {
    let l = const { Layout::of::<F>() };
    let table = F::TABLE.map(|t| {
        let t = if signed::<F>() { t.map(|u| u.wrapping_sub(F::ZERO)) } else { t };
        // SAFETY: the load reads exactly the 16 bytes of the table.
        _mm256_broadcastsi128_si256(unsafe { _mm_loadu_si128(t.as_ptr().cast()) })
    });
    for u in 0..QK_K / 32 {
        let at = l.codes + u * l.planes.unit;
        // SAFETY: this function has AVX2 enabled, all `quads` needs.
        let c = unsafe { quads(l.planes, &b[at..][..l.planes.unit]) };
        for (m, c) in c.into_iter().enumerate() {
            t.codes[8 * u + m] = match table {
                Some(t) => _mm256_shuffle_epi8(t, c),
                None => c,
            };
        }
    }
    // The 8 rows' bytes at `at`, widened to `i32` lanes, sign- or zero-extended.
    let lanes = |at: usize, signed: bool| {
        let v = b[at..].first_chunk::<8>().expect("8 rows' bytes");
        // SAFETY: the load reads exactly the 8 bytes of `v`.
        let v = unsafe { _mm_loadl_epi64(v.as_ptr().cast()) };
        if signed { _mm256_cvtepi8_epi32(v) } else { _mm256_cvtepu8_epi32(v) }
    };
    let half_group = |h: usize| h * 16 / l.group;
    if !F::UNIT_SCALES {
        for k in 0..l.groups {
            t.sc[k] = lanes(l.sc + k * ROWS, true);
        }
    }
    if F::ZERO != 0 && !signed::<F>() {
        let z = _mm256_set1_epi16(i16::from(F::ZERO));
        for j in 0..PAIRS {
            t.zsc[j] = if F::UNIT_SCALES {
                z
            } else {
                let (s0, s1) =
                    (lanes(l.sc + half_group(2 * j) * ROWS, true), lanes(l.sc + half_group(2 * j + 1) * ROWS, true));
                let s = _mm256_blend_epi16::<0xAA>(s0, _mm256_slli_epi32::<16>(s1));
                _mm256_mullo_epi16(s, z)
            };
        }
    }
    if F::HAS_MINS {
        for j in 0..PAIRS {
            let (m0, m1) =
                (lanes(l.mins + half_group(2 * j) * ROWS, false), lanes(l.mins + half_group(2 * j + 1) * ROWS, false));
            t.mins[j] = _mm256_blend_epi16::<0xAA>(m0, _mm256_slli_epi32::<16>(m1));
        }
    }
    // The rows' `d` (`dmin`): 8 f16 at `at`, widened.
    let halves = |at: usize| {
        let h = b[at..].first_chunk::<16>().expect("8 f16");
        // SAFETY: the load reads exactly the 16 bytes of `h`.
        _mm256_cvtph_ps(unsafe { _mm_loadu_si128(h.as_ptr().cast()) })
    };
    t.d = halves(l.d);
    if F::D_MUL != 1.0 {
        // Exact: a power of two.
        t.d = _mm256_mul_ps(t.d, _mm256_set1_ps(F::D_MUL));
    }
    if F::HAS_MINS {
        t.dmin = halves(l.dmin);
    }
}

/// Rows `r0 .. r0 + R` of `a` against the decoded block `i` in `t`, into their `acc` (`accm`).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
#[allow(clippy::too_many_arguments)]
fn rows<F: PackedCodes, const R: usize>(
    t: &Tile,
    a: &[&[BlockQ8K]],
    sums: &[RowSums],
    n: usize,
    i: usize,
    r0: usize,
    acc: &mut [__m256],
    accm: &mut [__m256],
) {
    let l = const { Layout::of::<F>() };
    let umax = const { packed::umax::<F>() };
    let qs: [&[i8; QK_K]; R] = std::array::from_fn(|r| &a[r0 + r][i].qs);
    let mut tot = [_mm256_setzero_si256(); R];
    for k in 0..l.groups {
        let mut s = [_mm256_setzero_si256(); R];
        // (Loops, not closures: a closure passed to a generic function need not be inlined
        // into this one, and then runs without its features.)
        macro_rules! dot {
            ($per:literal) => {{
                let mut c = [_mm256_setzero_si256(); $per];
                c.copy_from_slice(&t.codes[k * $per..][..$per]);
                for (r, s) in s.iter_mut().enumerate() {
                    let mut av = [_mm256_setzero_si256(); $per];
                    for (m, av) in av.iter_mut().enumerate() {
                        // The activation's four `i8` of the quad, broadcast.
                        let q = qs[r][4 * (k * $per + m)..].first_chunk::<4>().expect("a quad of the block");
                        *av = _mm256_set1_epi32(i32::from_le_bytes(q.map(|x| x as u8)));
                    }
                    // SAFETY: this function has AVX2 enabled, all both dots need.
                    *s = unsafe { if signed::<F>() { dot_signed_avx2(&c, &av) } else { dot_avx2(&c, &av, umax) } };
                }
            }};
        }
        if l.group == 16 {
            dot!(4);
        } else {
            dot!(8);
        }
        for r in 0..R {
            tot[r] = if F::UNIT_SCALES {
                _mm256_add_epi32(tot[r], s[r])
            } else {
                _mm256_add_epi32(tot[r], _mm256_mullo_epi32(s[r], t.sc[k]))
            };
        }
    }
    for (r, mut tot) in tot.into_iter().enumerate() {
        let row = r0 + r;
        let rs = &sums[row * n + i];
        if F::ZERO != 0 && !signed::<F>() {
            for j in 0..PAIRS {
                tot = _mm256_sub_epi32(tot, _mm256_madd_epi16(t.zsc[j], _mm256_set1_epi32(rs.zero[j])));
            }
        }
        let ad = _mm256_set1_ps(a[row][i].d.get());
        acc[row] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(tot), _mm256_mul_ps(t.d, ad), acc[row]);
        if F::HAS_MINS {
            let mut m = _mm256_setzero_si256();
            for j in 0..PAIRS {
                m = _mm256_add_epi32(m, _mm256_madd_epi16(t.mins[j], _mm256_set1_epi32(rs.bsums[j])));
            }
            accm[row] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(m), _mm256_mul_ps(t.dmin, ad), accm[row]);
        }
    }
}
