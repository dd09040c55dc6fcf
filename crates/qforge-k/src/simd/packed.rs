//! AVX2 and 256-bit VNNI (AVX-VNNI or AVX-512 VL, [`VnniYmm`]) kernels of the packed layout ([`crate::packed`]): one 256-bit
//! register holds four codes of each of the group's 8 rows, the activation's four `i8` are
//! broadcast, and each 16- (or 32-) element scale group of the 8 rows is summed in `i32`
//! lanes and multiplied by the rows' scales (`vpmulld`). VNNI: one `vpdpbusd` per four
//! codes; AVX2: `vpmaddubsw` (unsigned codes `≤ 127` times `i8`, as many pair sums added in
//! `i16` as cannot overflow) and `vpmaddwd` with ones. A table spanning more than 127 (iq4_xs)
//! is looked up signed on AVX2 and dotted with the sign trick
//! ([`qforge_simd::planes::dot_signed_avx2`]), with no zero to subtract: the same integers.
//! The lanes are [`crate::packed`]'s exact integers and the f32 steps its operations, so both
//! kernels give the portable kernel's bits.

use std::arch::x86_64::*;

use crate::packed::{self, Layout, PackedCodes, ROWS, block_zero_sum, group_bsum, zero_sum};
use crate::q8k::BlockQ8K;
use qforge_simd::Avx2;
use qforge_simd::planes::{dot_avx2, dot_avxvnni, dot_signed_avx2, dot_vnni, quads};
use qforge_simd::vnni::{EVEX, VnniYmm};

/// [`crate::packed::dot_groups_rows`] with the SIMD kernel: `false` (nothing written)
/// without AVX2. `p` holds `len / 8` groups of `n` packed blocks, every `a[r]` at least `n`
/// blocks, and `out` is `a.len()` parts of `len`, row `r`'s results in part `r`.
pub(crate) fn packed_dot_groups<F: PackedCodes>(p: &[u8], n: usize, a: &[&[BlockQ8K]], out: &mut [f32]) -> bool {
    if Avx2::detect().is_none() {
        return false;
    }
    // From `TILE_MIN_ROWS` activation rows (a mat-mul): the tile kernel, each block decoded
    // once for all of them (AVX-512 VNNI or AVX2).
    if super::tile::tile_dot_groups::<F>(p, n, a, out) {
        return true;
    }
    let form = VnniYmm::detect().map(VnniYmm::form);
    let vnni = form.is_some();
    let len = out.len() / a.len().max(1);
    let l = const { Layout::of::<F>() };
    // Where the kernel subtracts a zero whose multiplier is the sum of a group's quants
    // themselves ([`zero_sum`]: a table with `u` above 127, on VNNI), those sums are the same
    // for every group of 8 weight rows: taken here once per activation row, block and scale
    // group (`n · groups` per row, one buffer), not in the kernel for each group.
    // With every scale 1 (tq1_0, tq2_0) one sum per block: the whole block's zero term.
    let unit_zero = F::UNIT_SCALES && F::ZERO != 0 && !sign_trick::<F>(vnni);
    let per_row = if unit_zero { n } else { n * l.groups };
    let sums: Vec<i32> = if unit_zero {
        a.iter().flat_map(|a| &a[..n]).map(|b| block_zero_sum::<F>(b)).collect()
    } else if !sign_trick::<F>(vnni) && F::ZERO != 0 && packed::zero_from_quants::<F>() {
        a.iter().flat_map(|a| &a[..n]).flat_map(|b| (0..l.groups).map(move |k| zero_sum::<F>(b, l.group, k))).collect()
    } else {
        Vec::new()
    };
    let row_sums = |r: usize| sums.get(r * per_row..(r + 1) * per_row).unwrap_or(&[]);
    // Up to four rows per pass over the packed blocks: each unit's codes are unpacked once
    // for all of them.
    for (c, (a, out)) in a.chunks(4).zip(out.chunks_mut((4 * len).max(1))).enumerate() {
        macro_rules! rows {
            ($($r:literal)+) => {{
                let a = [$(&a[$r][..n]),+];
                let zs = [$(row_sums(4 * c + $r)),+];
                // SAFETY: `Avx2::detect` has just checked that this CPU has AVX2, FMA and F16C,
                // all `groups_avx2` needs, and `VnniYmm::detect` (where it found them) the
                // features of its VNNI form, which `groups_vnni` / `groups_avxvnni` need besides.
                unsafe {
                    match form {
                        Some(EVEX) => groups_vnni::<F, { [$($r),+].len() }>(p, n, a, zs, out),
                        Some(_) => groups_avxvnni::<F, { [$($r),+].len() }>(p, n, a, zs, out),
                        None => groups_avx2::<F, { [$($r),+].len() }>(p, n, a, zs, out),
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

/// Whether the kernel at this level dots `F`'s values signed with the sign trick (AVX2, a
/// table with `u` above 127: the tables whose zero sums come from the quants), and so has no
/// zero to subtract.
const fn sign_trick<F: PackedCodes>(vnni: bool) -> bool {
    !vnni && packed::zero_from_quants::<F>()
}

/// Defines a group kernel (the body below) compiled with `$features`, whose four-code dot
/// `s + Σ₄ c·a` is `$dot`: `vpdpbusd` (`$vnni`: any `u8` code) or `vpmaddubsw` + `vpmaddwd` +
/// `vpaddd`.
macro_rules! group_kernel {
    ($name:ident, $features:literal, $dot:ident, $vnni:literal) => {
        /// Every group of `p` against each of the `R` rows `a[r]` (exactly `n` blocks each),
        /// row `r`'s results into part `r` of `out` (see [`packed_dot_groups`]). `zs[r]`: row
        /// `r`'s [`zero_sum`] of every block and scale group (with unit scales, of every
        /// block: [`block_zero_sum`]), or empty (then summed here).
        #[target_feature(enable = $features)]
        fn $name<F: PackedCodes, const R: usize>(
            p: &[u8],
            n: usize,
            a: [&[BlockQ8K]; R],
            zs: [&[i32]; R],
            out: &mut [f32],
        ) {
            let l = const { Layout::of::<F>() };
            let umax = const { packed::umax::<F>() };
            // Signed values and the sign trick where `vpmaddubsw` cannot take the unsigned ones
            // (only a table's `u` exceed 127): then there is no zero to subtract.
            let signed = const {
                let signed = sign_trick::<F>($vnni);
                assert!(!signed || packed::signed_values_fit::<F>(), "a table the sign trick cannot dot");
                signed
            };
            let zero = if signed { 0 } else { F::ZERO };
            // A format's table of `u` per code (of `u − ZERO` where `signed`), in both lanes
            // (`vpshufb` looks codes up).
            let table = F::TABLE.map(|t| {
                let t = if signed { t.map(|u| u.wrapping_sub(F::ZERO)) } else { t };
                // SAFETY: the load reads exactly the 16 bytes of the table.
                _mm256_broadcastsi128_si256(unsafe { _mm_loadu_si128(t.as_ptr().cast()) })
            });
            // The four-code dots of `N` quads: `$dot`, or the sign trick.
            macro_rules! dot {
                ($n:literal, $c:expr, $a:expr) => {
                    // SAFETY: this function has the features `$dot` needs, and AVX2, all
                    // `dot_signed_avx2` needs.
                    unsafe { if signed { dot_signed_avx2::<$n>($c, $a) } else { $dot::<$n>($c, $a, umax) } }
                };
            }
            // 16-element groups without a zero code whose sums fit an `i16` (q2_k): the two
            // groups of a unit scaled with one `vpmaddwd` instead of two `vpmulld`.
            let scale_pairs = const {
                Layout::of::<F>().group == 16
                    && F::ZERO == 0
                    && !F::UNIT_SCALES
                    && 16 * 128 * packed::umax::<F>() <= i16::MAX as u32
            };
            let len = out.len() / R;
            for (g, pg) in p.chunks_exact((n * l.size).max(1)).enumerate() {
                let (mut acc, mut accm) = ([_mm256_setzero_ps(); R], [_mm256_setzero_ps(); R]);
                for (i, pb) in pg.chunks_exact(l.size).enumerate() {
                    let mut t = [_mm256_setzero_si256(); R];
                    for u in 0..QK_UNITS {
                        let (p, ub) = (l.planes, &pb[l.codes + u * l.planes.unit..][..l.planes.unit]);
                        // SAFETY: this function has AVX2 enabled.
                        let mut c = unsafe { quads(p, ub) };
                        if let Some(t) = table {
                            // A loop, not `array::map`: the closure would take this function's
                            // features and, in the VNNI instance, stay an out-of-line call per
                            // `vpshufb` (seen in the binary's symbols).
                            for c in &mut c {
                                *c = _mm256_shuffle_epi8(t, *c);
                            }
                        }
                        for r in 0..R {
                            let a = &a[r][i];
                            // The activation's four `i8` of quad `m` of the unit, broadcast.
                            let act = |m: usize| {
                                let q = a.qs[32 * u + 4 * m..].first_chunk::<4>().expect("a quad of the block");
                                i32::from_le_bytes(q.map(|x| x as u8))
                            };
                            let mut av = [_mm256_setzero_si256(); 8];
                            for (m, v) in av.iter_mut().enumerate() {
                                *v = _mm256_set1_epi32(act(m));
                            }
                            if F::UNIT_SCALES {
                                // Every scale 1: the whole unit in one dot, the zero term once
                                // per block below.
                                t[r] = _mm256_add_epi32(t[r], dot!(8, &c, &av));
                                continue;
                            }
                            // The unit's scale groups (two of 16 elements, or one of 32).
                            let s = if l.group == 16 {
                                let half = |v: &[__m256i; 8], h: usize| -> [__m256i; 4] {
                                    std::array::from_fn(|i| v[4 * h + i])
                                };
                                [dot!(4, &half(&c, 0), &half(&av, 0)), dot!(4, &half(&c, 1), &half(&av, 1))]
                            } else {
                                [dot!(8, &c, &av), _mm256_setzero_si256()]
                            };
                            if scale_pairs {
                                // Both groups' sums as the `i16` pairs of each row's lane (they
                                // fit: `|s| ≤ 16·umax·128`), times the scale pairs: one `vpmaddwd`.
                                let sc = pb[l.sc + 2 * u * ROWS..].first_chunk::<16>().expect("two groups' scales");
                                // SAFETY: this function has AVX2 enabled.
                                let sc = unsafe { pairs(sc, true) };
                                let v = _mm256_blend_epi16::<0xAA>(s[0], _mm256_slli_epi32::<16>(s[1]));
                                t[r] = _mm256_add_epi32(t[r], _mm256_madd_epi16(v, sc));
                                continue;
                            }
                            for (h, s) in s.iter().enumerate().take(32 / l.group) {
                                let k = u * 32 / l.group + h;
                                let mut s = *s;
                                if zero != 0 {
                                    let sum = match zs[r].get(i * l.groups + k) {
                                        Some(&s) => s,
                                        None => zero_sum::<F>(a, l.group, k),
                                    };
                                    let z = i32::from(zero).wrapping_mul(sum);
                                    s = _mm256_sub_epi32(s, _mm256_set1_epi32(z));
                                }
                                let sc = pb[l.sc + k * ROWS..].first_chunk::<8>().expect("the scales");
                                // SAFETY: the load reads exactly the 8 bytes of `sc`.
                                let sc = _mm256_cvtepi8_epi32(unsafe { _mm_loadl_epi64(sc.as_ptr().cast()) });
                                t[r] = _mm256_add_epi32(t[r], _mm256_mullo_epi32(s, sc));
                            }
                        }
                    }
                    if F::UNIT_SCALES && zero != 0 {
                        // `zero · Σa` of the whole block (the same integers as per group,
                        // regrouped): one subtraction per block instead of one per group.
                        // (`zs[r]`: one sum per block, taken once per call.)
                        for r in 0..R {
                            let sum = match zs[r].get(i) {
                                Some(&s) => s,
                                None => block_zero_sum::<F>(&a[r][i]),
                            };
                            let z = i32::from(zero).wrapping_mul(sum);
                            t[r] = _mm256_sub_epi32(t[r], _mm256_set1_epi32(z));
                        }
                    }
                    // The rows' `d` (`dmin`): 8 f16 at `at`, widened.
                    macro_rules! half8 {
                        ($at:expr) => {{
                            let h = pb[$at..].first_chunk::<16>().expect("8 f16");
                            // SAFETY: the load reads exactly the 16 bytes of `h`.
                            _mm256_cvtph_ps(unsafe { _mm_loadu_si128(h.as_ptr().cast()) })
                        }};
                    }
                    let mut d = half8!(l.d);
                    if F::D_MUL != 1.0 {
                        // Exact: a power of two.
                        d = _mm256_mul_ps(d, _mm256_set1_ps(F::D_MUL));
                    }
                    for r in 0..R {
                        let ad = _mm256_set1_ps(a[r][i].d.get());
                        acc[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(t[r]), _mm256_mul_ps(d, ad), acc[r]);
                    }
                    if F::HAS_MINS {
                        let dmin = half8!(l.dmin);
                        for r in 0..R {
                            let mut m = _mm256_setzero_si256();
                            if l.group == 16 {
                                // Two groups per `vpmaddwd`: the rows' mins as `i16` pairs, the
                                // activation's two `bsums` broadcast as one pair (exact products
                                // and sums, as the reference's `i32` lanes).
                                for j in 0..l.groups / 2 {
                                    let mins = pb[l.mins + 2 * j * ROWS..].first_chunk::<16>().expect("the mins");
                                    let b = &a[r][i].bsums;
                                    let bs = i32::from(b[2 * j].get() as u16) | i32::from(b[2 * j + 1].get()) << 16;
                                    // SAFETY: this function has AVX2 enabled.
                                    let mins = unsafe { pairs(mins, false) };
                                    m = _mm256_add_epi32(m, _mm256_madd_epi16(mins, _mm256_set1_epi32(bs)));
                                }
                            } else {
                                for k in 0..l.groups {
                                    let mins = pb[l.mins + k * ROWS..].first_chunk::<8>().expect("the mins");
                                    // SAFETY: the load reads exactly the 8 bytes of `mins`.
                                    let mins = _mm256_cvtepu8_epi32(unsafe { _mm_loadl_epi64(mins.as_ptr().cast()) });
                                    m = _mm256_add_epi32(
                                        m,
                                        _mm256_mullo_epi32(mins, _mm256_set1_epi32(group_bsum(&a[r][i], l.group, k))),
                                    );
                                }
                            }
                            let ad = _mm256_set1_ps(a[r][i].d.get());
                            accm[r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(m), _mm256_mul_ps(dmin, ad), accm[r]);
                        }
                    }
                }
                for r in 0..R {
                    let v = if F::HAS_MINS { _mm256_sub_ps(acc[r], accm[r]) } else { acc[r] };
                    let out: &mut [f32; ROWS] = (&mut out[r * len + g * ROWS..][..ROWS]).try_into().expect("8 outputs");
                    // SAFETY: `out` is 8 f32, exactly 32 bytes: the store writes only it.
                    unsafe { _mm256_storeu_ps(out.as_mut_ptr(), v) };
                }
            }
        }
    };
}

/// Two groups' bytes for the 8 rows (`b[..8]` group `k`, `b[8..]` group `k + 1`) as the `i16`
/// pairs of each row's 32-bit lane: `[x_k[r], x_{k+1}[r]]`, sign- or zero-extended.
///
/// # Safety
/// The CPU must have AVX2: call it only from a function compiled with it (inlined there).
#[inline(always)]
unsafe fn pairs(b: &[u8; 16], signed: bool) -> __m256i {
    // SAFETY: the load reads exactly the 16 bytes of `b`; the caller guarantees AVX2.
    unsafe {
        let x = _mm_loadu_si128(b.as_ptr().cast());
        let x = _mm_unpacklo_epi8(x, _mm_srli_si128::<8>(x));
        if signed { _mm256_cvtepi8_epi16(x) } else { _mm256_cvtepu8_epi16(x) }
    }
}

/// 32-element units per block.
const QK_UNITS: usize = crate::QK_K / 32;

group_kernel!(groups_avx2, "avx2,fma,f16c", dot_avx2, false);
group_kernel!(groups_vnni, "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni", dot_vnni, true);
group_kernel!(groups_avxvnni, "avx2,fma,f16c,avxvnni", dot_avxvnni, true);
