//! AVX2 and AVX-512 VNNI kernels of the q8 packed layout ([`super::packed`]): per unit, the
//! 8 quads of 8 rows' codes ([`crate::planes::quad`]), looked up in the unsigned table
//! (`vpshufb`, table formats), dotted with the broadcast activation quads (`vpdpbusd`, or
//! `vpmaddubsw` + `vpmaddwd`), the zero's `z·Σa` subtracted, and one `vfmadd` with the 8 rows'
//! `d` times the activation's. The integers and f32 steps are the portable kernel's, so both
//! give the same bits.
#![allow(unsafe_code)]

use std::arch::x86_64::*;

use super::packed::{Layout, unsigned_form};
use super::{Q8Act, Q8Weight, Values, f16};
use crate::planes::{ROWS, dot_avx2, dot_vnni, quad};
use crate::{Avx2, Vnni};

/// [`super::packed::dot_groups`] with the SIMD kernel (arguments checked by the caller):
/// `false` (nothing written) without AVX2.
pub(super) fn dot_groups<W: Q8Weight, A: Q8Act>(p: &[u8], n: usize, a: &[A], out: &mut [f32]) -> bool {
    if Avx2::detect().is_none() {
        return false;
    }
    // SAFETY: `Avx2::detect` has just checked that this CPU has AVX2, FMA and F16C, all
    // `groups_avx2` needs, and `Vnni::detect` (where `Some`) the AVX-512 VNNI features
    // `groups_vnni` needs besides.
    unsafe {
        match Vnni::detect() {
            Some(_) => groups_vnni::<W, A>(p, n, a, out),
            None => groups_avx2::<W, A>(p, n, a, out),
        }
    }
    true
}

/// Defines a group kernel (the body below) compiled with `$features`, its four-code dots from
/// `$dot` ([`dot_vnni`] or [`dot_avx2`]).
macro_rules! group_kernel {
    ($name:ident, $features:literal, $dot:ident) => {
        /// Every group of `p` against `a` (see [`dot_groups`]).
        #[target_feature(enable = $features)]
        fn $name<W: Q8Weight, A: Q8Act>(p: &[u8], n: usize, a: &[A], out: &mut [f32]) {
            let l = const { Layout::of::<W>() };
            let (table, z) = const {
                match unsigned_form::<W>() {
                    Some(f) => f,
                    None => ([0; 16], 0),
                }
            };
            let is_table = matches!(W::VALUES, Values::Table(_));
            // The largest unsigned value (how many `vpmaddubsw` sums fit an `i16`).
            let umax =
                if is_table { u32::from(*table.iter().max().unwrap_or(&127)) } else { (1u32 << W::PACK_BITS) - 1 };
            // SAFETY: the load reads exactly the 16 bytes of `table`.
            let tv = _mm256_broadcastsi128_si256(unsafe { _mm_loadu_si128(table.as_ptr().cast()) });
            // Each activation unit's `z·Σa` (the zero of the unsigned form), once per call.
            let zs: Vec<i32> =
                a.iter().map(|a| i32::from(z) * a.qs().iter().map(|&q| i32::from(q)).sum::<i32>()).collect();
            for (pg, out) in p.chunks_exact(n * l.size).zip(out.chunks_exact_mut(ROWS)) {
                let (mut acc, mut accm) = (_mm256_setzero_ps(), _mm256_setzero_ps());
                for (b, pb) in pg.chunks_exact(l.size).enumerate() {
                    // The rows' `d` (`m`): 8 f16 at `at`, widened.
                    macro_rules! half8 {
                        ($at:expr) => {{
                            let h = pb[$at..].first_chunk::<16>().expect("8 f16");
                            // SAFETY: the load reads exactly the 16 bytes of `h`.
                            _mm256_cvtph_ps(unsafe { _mm_loadu_si128(h.as_ptr().cast()) })
                        }};
                    }
                    let dv = half8!(l.d);
                    for u in 0..W::UNITS {
                        let j = b * W::UNITS + u;
                        let act = &a[j];
                        let ub = &pb[l.codes + u * l.planes.unit..][..l.planes.unit];
                        let pl = l.planes;
                        // SAFETY: this function has AVX2 enabled.
                        let mut c = unsafe {
                            [
                                quad::<0>(pl, ub),
                                quad::<1>(pl, ub),
                                quad::<2>(pl, ub),
                                quad::<3>(pl, ub),
                                quad::<4>(pl, ub),
                                quad::<5>(pl, ub),
                                quad::<6>(pl, ub),
                                quad::<7>(pl, ub),
                            ]
                        };
                        if is_table {
                            for c in c.iter_mut() {
                                *c = _mm256_shuffle_epi8(tv, *c);
                            }
                        }
                        let mut av = [_mm256_setzero_si256(); 8];
                        for (m, v) in av.iter_mut().enumerate() {
                            let q = act.qs()[4 * m..].first_chunk::<4>().expect("a quad of the unit");
                            *v = _mm256_set1_epi32(i32::from_le_bytes(q.map(|x| x as u8)));
                        }
                        let s = _mm256_sub_epi32($dot::<8>(&c, &av, umax), _mm256_set1_epi32(zs[j]));
                        let x = _mm256_mul_ps(dv, _mm256_set1_ps(f16(act.d_bits())));
                        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s), x, acc);
                        if W::AFFINE {
                            accm = _mm256_fmadd_ps(half8!(l.m), _mm256_set1_ps(f16(act.s_bits())), accm);
                        }
                    }
                }
                let r = if W::AFFINE { _mm256_add_ps(acc, accm) } else { acc };
                let out: &mut [f32; ROWS] = out.try_into().expect("8 outputs");
                // SAFETY: `out` is 8 f32, exactly 32 bytes: the store writes only it.
                unsafe { _mm256_storeu_ps(out.as_mut_ptr(), r) };
            }
        }
    };
}

group_kernel!(groups_avx2, "avx2,fma,f16c", dot_avx2);
group_kernel!(groups_vnni, "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni", dot_vnni);
