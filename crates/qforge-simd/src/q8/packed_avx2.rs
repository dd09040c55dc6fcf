//! AVX2 and 256-bit VNNI (AVX-VNNI or AVX-512 VL, [`VnniYmm`]) kernels of the q8 packed layout ([`super::packed`]): per unit, the
//! 8 quads of 8 rows' codes ([`crate::planes::quad`]), looked up in the unsigned table
//! (`vpshufb`, table formats), dotted with the broadcast activation quads (`vpdpbusd`, or
//! `vpmaddubsw` + `vpmaddwd`), the zero's `z·Σa` subtracted, and one `vfmadd` per unit (per
//! half unit) with the 8 rows' scales (`vcvtph2ps` of the f16 `d`, or a `vgatherdps` from the
//! format's scale table) times the activation's. On AVX2, a table spanning more than 127
//! (iq4_nl) is looked up signed and dotted with the sign trick (`vpmaddubsw(|a|, v·sgn a)`,
//! exact: no value is -128), the same integers; 8-bit codes (q8_0, whose weights may be -128)
//! with the trick mirrored, `vpmaddubsw(|v|, a·sgn v)`, for activations without a -128 (a call
//! with one is left to the portable kernel). The integers and f32 steps are the portable
//! kernel's, so every level gives the same bits.
#![allow(unsafe_code)]

use std::arch::x86_64::*;

use super::packed::{Layout, umax, unsigned_form};
use super::{Q8Act, Q8Weight, Scale, Values, f16};
use crate::Avx2;
use crate::planes::{ROWS, dot_avx2, dot_avxvnni, dot_signed_avx2 as dot_signed, dot_vnni, quads};
use crate::vnni::{EVEX, VnniYmm};

/// [`super::packed::dot_groups_rows`] with the SIMD kernel (arguments checked by the
/// caller: every `a[r]` exactly `n · UNITS` blocks, `out` one equal part per row): `false`
/// (nothing written) without AVX2. Up to four rows per pass over the packed blocks, each
/// unit's values unpacked once for all of them.
pub(super) fn dot_groups<W: Q8Weight, A: Q8Act>(p: &[u8], n: usize, a: &[&[A]], out: &mut [f32]) -> bool {
    if Avx2::detect().is_none() {
        return false;
    }
    let form = VnniYmm::detect().map(VnniYmm::form);
    let vnni = form.is_some();
    // The mirrored sign trick of 8-bit codes on AVX2 needs activations without a -128.
    // (`has_min`, not `contains`: that calls `memchr` per block, 10 % of a q8_0 mat-mul.)
    if !vnni && signed8::<W>() && a.iter().any(|a| a.iter().any(|b| super::avx2::has_min(b.qs()))) {
        return false;
    }
    let len = out.len() / a.len().max(1);
    // SAFETY: `Avx2::detect` has just checked that this CPU has AVX2, FMA and F16C.
    let info = unsafe { act_info::<W, A>(a, vnni) };
    let per_row = n * W::UNITS;
    for ((a, info), out) in a.chunks(4).zip(info.chunks(4 * per_row)).zip(out.chunks_mut((4 * len).max(1))) {
        macro_rules! rows {
            ($($r:literal)+) => {{
                let a = [$(a[$r]),+];
                let info = [$(&info[$r * per_row..][..per_row]),+];
                // SAFETY: `Avx2::detect` has just checked that this CPU has AVX2, FMA and F16C,
                // all `groups_avx2` needs, and `VnniYmm::detect` (where it found them) the
                // features of its VNNI form, which `groups_vnni` / `groups_avxvnni` need besides.
                unsafe {
                    match form {
                        Some(EVEX) => groups_vnni::<W, A, { [$($r),+].len() }>(p, n, a, info, out),
                        Some(_) => groups_avxvnni::<W, A, { [$($r),+].len() }>(p, n, a, info, out),
                        None => groups_avx2::<W, A, { [$($r),+].len() }>(p, n, a, info, out),
                    }
                }
            }};
        }
        match a.len() {
            1 => rows!(0),
            2 => rows!(0 1),
            3 => rows!(0 1 2),
            _ => rows!(0 1 2 3),
        }
    }
    true
}

/// What the kernel reads of an activation block besides its quants.
#[derive(Clone, Copy)]
struct ActInfo {
    /// `z·Σq` of each half unit, or of the whole unit in slot 0 where `W`'s scales are per
    /// unit (`z`: the zero of `W`'s unsigned form, 0 where it is dotted signed).
    zs: [i32; 2],
    /// `d` and `s`, widened.
    ds: [f32; 2],
}

/// Every block's [`ActInfo`] of every row (`n · UNITS` each, checked by the caller),
/// row-major: once per call, in plain loops compiled with the kernel's features (computed
/// per kernel pass through closures, which did not inline, this was 20 % of a q8_0 mat-mul).
#[target_feature(enable = "avx2,fma,f16c")]
fn act_info<W: Q8Weight, A: Q8Act>(a: &[&[A]], vnni: bool) -> Vec<ActInfo> {
    let z = match unsigned_form::<W>() {
        Some((_, z)) if !signed::<W>(vnni) => i32::from(z),
        _ => 0,
    };
    let per_half = matches!(W::SCALE, Scale::ByteHalves(_));
    let mut info = Vec::with_capacity(a.iter().map(|a| a.len()).sum());
    for a in a {
        for b in a.iter() {
            let mut zs = [0i32; 2];
            if z != 0 {
                let (lo, hi) = b.qs().split_at(16);
                let (mut s0, mut s1) = (0i32, 0i32);
                for (x, y) in lo.iter().zip(hi) {
                    s0 += i32::from(*x);
                    s1 += i32::from(*y);
                }
                zs = if per_half { [z * s0, z * s1] } else { [z * (s0 + s1), 0] };
            }
            info.push(ActInfo { zs, ds: [f16(b.d_bits()), f16(b.s_bits())] });
        }
    }
    info
}

/// Whether the kernel dots `W`'s values signed (the sign trick), with no zero term: without
/// VNNI, where `vpmaddubsw` cannot take the unsigned ones.
const fn signed<W: Q8Weight>(vnni: bool) -> bool {
    !vnni && umax::<W>() > 127
}

/// Whether `W`'s codes are 8-bit signed values (stored `v + 128`).
const fn signed8<W: Q8Weight>() -> bool {
    matches!(W::VALUES, Values::Signed8)
}

/// The first `N` of `v`, or the last.
#[inline(always)]
fn part<const N: usize>(v: &[__m256i; 8], h: usize) -> [__m256i; N] {
    std::array::from_fn(|i| v[h * N + i])
}

/// Defines a group kernel (the body below) compiled with `$features`, its four-code dots from
/// `$dot` ([`dot_vnni`] or [`dot_avx2`]); `$vnni`: whether `$dot` takes codes up to 255.
macro_rules! group_kernel {
    ($name:ident, $features:literal, $dot:ident, $vnni:literal) => {
        /// Every group of `p` against each of the `R` rows `a[r]`, row `r`'s results into
        /// part `r` of `out` (see [`dot_groups`]).
        #[target_feature(enable = $features)]
        fn $name<W: Q8Weight, A: Q8Act, const R: usize>(
            p: &[u8],
            n: usize,
            a: [&[A]; R],
            info: [&[ActInfo]; R],
            out: &mut [f32],
        ) {
            let l = const { Layout::of::<W>() };
            let table = const {
                match unsigned_form::<W>() {
                    Some((t, _)) => t,
                    None => [0; 16],
                }
            };
            let um = const { umax::<W>() };
            let is_table = const { matches!(W::VALUES, Values::Table(_)) };
            let signed8 = const { signed8::<W>() };
            // Signed values and the sign trick where `vpmaddubsw` cannot take the unsigned ones.
            let signed = const { signed::<W>($vnni) };
            // (The zero term `z·Σa` is in `info`, 0 where the values are dotted signed.)
            let tv = if signed {
                let t = match W::VALUES {
                    Values::Table(t) => t,
                    _ => [0; 16],
                };
                // SAFETY: the load reads exactly the 16 bytes of `t`.
                _mm256_broadcastsi128_si256(unsafe { _mm_loadu_si128(t.as_ptr().cast()) })
            } else {
                // SAFETY: the load reads exactly the 16 bytes of `table`.
                _mm256_broadcastsi128_si256(unsafe { _mm_loadu_si128(table.as_ptr().cast()) })
            };
            let hn = const { if matches!(W::SCALE, Scale::ByteHalves(_)) { 2 } else { 1 } };
            let f16_scales = const { matches!(W::SCALE, Scale::F16) };
            let stable: &[f32; 256] = match W::SCALE {
                Scale::Byte(t) | Scale::ByteHalves(t) => t,
                Scale::F16 => &[0.0; 256],
            };
            let len = out.len() / R;
            for (g, pg) in p.chunks_exact(n * l.size).enumerate() {
                let (mut acc, mut accm) = ([_mm256_setzero_ps(); R], [_mm256_setzero_ps(); R]);
                for (b, pb) in pg.chunks_exact(l.size).enumerate() {
                    // 8 f16 at `at`, widened.
                    macro_rules! half8 {
                        ($at:expr) => {{
                            let h = pb[$at..].first_chunk::<16>().expect("8 f16");
                            // SAFETY: the load reads exactly the 16 bytes of `h`.
                            _mm256_cvtph_ps(unsafe { _mm_loadu_si128(h.as_ptr().cast()) })
                        }};
                    }
                    // The rows' scales of scale slot `k`: looked up in the format's table.
                    macro_rules! gathered {
                        ($k:expr) => {{
                            let s = pb[l.d + $k * ROWS..].first_chunk::<8>().expect("8 scale bytes");
                            // SAFETY: the load reads exactly the 8 bytes of `s`.
                            let idx = _mm256_cvtepu8_epi32(unsafe { _mm_loadl_epi64(s.as_ptr().cast()) });
                            // SAFETY: every index is a byte, below the table's 256 entries.
                            unsafe { _mm256_i32gather_ps::<4>(stable.as_ptr(), idx) }
                        }};
                    }
                    let dv = if f16_scales { half8!(l.d) } else { _mm256_setzero_ps() };
                    for u in 0..W::UNITS {
                        let j = b * W::UNITS + u;
                        let ub = &pb[l.codes + u * l.planes.unit..][..l.planes.unit];
                        let pl = l.planes;
                        // SAFETY: this function has AVX2 enabled.
                        let mut c = unsafe { quads(pl, ub) };
                        if is_table {
                            for c in c.iter_mut() {
                                *c = _mm256_shuffle_epi8(tv, *c);
                            }
                        } else if signed && signed8 {
                            // `v = u − 128`: the sign bit flipped back.
                            for c in c.iter_mut() {
                                *c = _mm256_xor_si256(*c, _mm256_set1_epi8(i8::MIN));
                            }
                        }
                        // The rows' scales of the unit (of each half unit), shared by the rows.
                        let sv = if hn == 2 {
                            [gathered!(2 * u), gathered!(2 * u + 1)]
                        } else if f16_scales {
                            [dv, dv]
                        } else {
                            let s = gathered!(u);
                            [s, s]
                        };
                        let mv = if W::AFFINE { half8!(l.m) } else { _mm256_setzero_ps() };
                        // Row `r`'s integer dot `s` of half unit (or unit) `h`, less its zero
                        // term, times the scales into `acc[r]`: ggml's per-block f32 steps.
                        macro_rules! fold {
                            ($r:expr, $h:expr, $s:expr) => {{
                                let s = _mm256_sub_epi32($s, _mm256_set1_epi32(info[$r][j].zs[$h]));
                                let x = _mm256_mul_ps(sv[$h], _mm256_set1_ps(info[$r][j].ds[0]));
                                acc[$r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), x, acc[$r]);
                            }};
                        }
                        // Row `r`'s affine term (`m · a.s`), for the formats with one.
                        macro_rules! affine {
                            ($r:expr) => {
                                if W::AFFINE {
                                    accm[$r] = _mm256_fmadd_ps(mv, _mm256_set1_ps(info[$r][j].ds[1]), accm[$r]);
                                }
                            };
                        }
                        if signed && signed8 && hn == 1 {
                            // 8-bit codes: every row's dot first, quad by quad (`signed8_dots`).
                            let qs: [&[i8; 32]; R] = std::array::from_fn(|r| a[r][j].qs());
                            // SAFETY: this function has AVX2, all `signed8_dots` needs; no
                            // activation is -128 (checked by `dot_groups`).
                            let sums = unsafe { signed8_dots(&c, &qs) };
                            for (r, s) in sums.into_iter().enumerate() {
                                fold!(r, 0, s);
                                affine!(r);
                            }
                            continue;
                        }
                        for r in 0..R {
                            let act = &a[r][j];
                            let mut av = [_mm256_setzero_si256(); 8];
                            for (m, v) in av.iter_mut().enumerate() {
                                let q = act.qs()[4 * m..].first_chunk::<4>().expect("a quad of the unit");
                                *v = _mm256_set1_epi32(i32::from_le_bytes(q.map(|x| x as u8)));
                            }
                            if hn == 2 {
                                // Each half unit with its own scale (constant halves: `c` and
                                // `av` stay in registers).
                                macro_rules! half_unit {
                                    ($h:literal) => {{
                                        let (ch, ah) = (part::<4>(&c, $h), part::<4>(&av, $h));
                                        // SAFETY: this function has the features both dots need.
                                        let s = unsafe {
                                            if signed && signed8 {
                                                dot_signed::<4>(&ah, &ch)
                                            } else if signed {
                                                dot_signed::<4>(&ch, &ah)
                                            } else {
                                                $dot::<4>(&ch, &ah, um)
                                            }
                                        };
                                        fold!(r, $h, s);
                                    }};
                                }
                                half_unit!(0);
                                half_unit!(1);
                            } else {
                                // (8-bit codes took `signed8_dots` above.)
                                let s = if signed {
                                    // SAFETY: this function has AVX2, all `dot_signed` needs.
                                    unsafe { dot_signed::<8>(&c, &av) }
                                } else {
                                    // SAFETY: this function has the features `$dot` needs.
                                    unsafe { $dot::<8>(&c, &av, um) }
                                };
                                fold!(r, 0, s);
                            }
                            affine!(r);
                        }
                    }
                }
                for r in 0..R {
                    let v = if W::AFFINE { _mm256_add_ps(acc[r], accm[r]) } else { acc[r] };
                    let out: &mut [f32; ROWS] = (&mut out[r * len + g * ROWS..][..ROWS]).try_into().expect("8 outputs");
                    // SAFETY: `out` is 8 f32, exactly 32 bytes: the store writes only it.
                    unsafe { _mm256_storeu_ps(out.as_mut_ptr(), v) };
                }
            }
        }
    };
}

/// Each of the `R` rows' `Σ_m Σ₄ v[m]·q` over a unit's 8 quads of 8-bit signed values `v`
/// (q8_0's codes, `u − 128`; maybe -128) and the rows' quants `qs` (never -128), exactly:
/// [`dot_signed`] with the trick mirrored (`vpmaddubsw(|v|, q·sgn v)`) per row, but quad by
/// quad across the rows, so that one quad's values and magnitudes and the rows' accumulators
/// are all that is live. Row by row, a row's 8 broadcasts beside the 8 values and their 8
/// magnitudes outnumbered AVX2's 16 registers, and q8_0's kernel spilled 17 vectors a unit
/// (quad by quad: q8_0's mat-mul +11 % on Zen 3; the other kinds of values measured slower
/// that way, mxfp4 −25 %, so they keep the row-by-row dots).
///
/// # Safety
/// The CPU must have AVX2: call it only from a function compiled with it, into which it is
/// inlined. No quant may be -128.
#[inline(always)]
unsafe fn signed8_dots<const R: usize>(v: &[__m256i; 8], qs: &[&[i8; 32]; R]) -> [__m256i; R] {
    // SAFETY: the caller guarantees AVX2.
    unsafe {
        let mut s = [_mm256_setzero_si256(); R];
        let ones = _mm256_set1_epi16(1);
        for (m, &v) in v.iter().enumerate() {
            let mag = _mm256_abs_epi8(v);
            for (s, qs) in s.iter_mut().zip(qs) {
                let q = qs[4 * m..].first_chunk::<4>().expect("a quad of the unit");
                let a = _mm256_set1_epi32(i32::from_le_bytes(q.map(|x| x as u8)));
                let p = _mm256_maddubs_epi16(mag, _mm256_sign_epi8(a, v));
                *s = _mm256_add_epi32(*s, _mm256_madd_epi16(p, ones));
            }
        }
        s
    }
}

group_kernel!(groups_avx2, "avx2,fma,f16c", dot_avx2, false);
group_kernel!(groups_vnni, "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni", dot_vnni, true);
group_kernel!(groups_avxvnni, "avx2,fma,f16c,avxvnni", dot_avxvnni, true);
