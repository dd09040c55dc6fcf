//! The mat-mul tile of [`super::vec_dot_tile`] on AVX-512 VNNI for the non-affine formats:
//! 16 weight rows a row per 32-bit lane, each unit decoded once for every activation row.
//!
//! The row kernels ([`super::avx2`]) dot one weight row with up to eight activation rows per
//! pass: per unit and pair of rows a `vpdpbusd` (or the sign trick), the conversion, the scale
//! and the FMA of eight lanes: about five instructions for 32 products. Here a unit of 16
//! weight rows is transposed once, lane `r` of `t[l]` holding row `r`'s values `4l .. 4l + 4`
//! (as `u8`: the value plus 128), and every activation row then takes, per unit and lane
//! group `l`,
//!
//! ```text
//! x[l] = vpdpbusd(−128·Σ_{i<4} a[4l+i], t[l], a[4l .. 4l+4] broadcast)   (= isum_lanes()[l] of each row, exact)
//! acc[j % 2][l] = fma(d_w[l / 4]·d_a, cvt(x[l]), acc[j % 2][l])           (a row per lane)
//! ```
//!
//! which is [`super::vec_dot_portable`]'s order, lane by lane, for 16 rows at once: 27
//! instructions for 512 products. Each row's sixteen accumulators are summed as
//! [`super::finish`] sums them, so every result is the bits of that pair's mat-vec.
//!
//! The weights' units are decoded a chunk of K at a time ([`CHUNK`] units: 20 KiB, kept in L1),
//! and every activation row passes over the chunk with its accumulators in registers, stored
//! between chunks (16 vectors per row and chunk).
#![allow(unsafe_code)]

use std::arch::x86_64::*;

use super::avx2::{SIGNED, unit_vector, value_table};
use super::{ACCS, BATCH, LANES, Q8Act, Q8Weight, QK8, f16, finish, half_scales};
use crate::Vnni;

/// Activation rows from which the tile pays for its decoding (Zen 4, M = 8: q4_0 34 → 36,
/// q8_0 30 → 32, nvfp4 32 → 37 Gel/s; more above).
pub(super) const MIN_ROWS: usize = 8;
/// Weight rows per tile: the 32-bit lanes of a 512-bit vector.
const ROWS: usize = 16;
/// Units per chunk of K (even, so a unit's accumulator, `j % 2`, is its place in the chunk's).
const CHUNK: usize = 32;

/// `out[i · stride + j]` = the dot of weight row `i` (`n` blocks, one after another in `w`)
/// with `a[j]` (each at least `n · UNITS` blocks), for a non-affine `W`; `n > 0`, `out` holds
/// every result (checked by the caller). `_vnni` proves the features. `false` (nothing
/// written) for an affine `W`.
pub(super) fn tile<W: Q8Weight, A: Q8Act>(
    w: &[W],
    n: usize,
    a: &[&[A]],
    out: &mut [f32],
    stride: usize,
    _vnni: Vnni,
) -> bool {
    if W::AFFINE {
        return false;
    }
    // SAFETY: a `Vnni` token exists only where the CPU has AVX2, FMA, F16C and AVX-512 F / BW
    // / VL / VNNI, all `tile_vnni` needs.
    unsafe { tile_vnni::<W, A>(w, n, a, out, stride) };
    true
}

#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn tile_vnni<W: Q8Weight, A: Q8Act>(w: &[W], n: usize, a: &[&[A]], out: &mut [f32], stride: usize) {
    let units = n * W::UNITS;
    let rows = w.len() / n;
    let m = a.len();
    // Per activation row and unit: `−128 · Σ` of each lane's four quants, and `d`.
    let mut corr = vec![[0i32; LANES]; m * units];
    let mut ad = vec![0f32; m * units];
    for (j, a) in a.iter().enumerate() {
        for (u, a) in a[..units].iter().enumerate() {
            corr[j * units + u] = quad_sums(a.qs()).map(|s| -128 * s);
            ad[j * units + u] = f16(a.d_bits());
        }
    }
    // The values as the row kernels unpack them, plus 128 (as `u8`).
    let (table, bias) = (value_table::<W, SIGNED>(), _mm256_set1_epi8(i8::MIN));
    let mut t = vec![[_mm512_setzero_si512(); LANES]; CHUNK];
    let mut ds = vec![[_mm512_setzero_ps(); 2]; CHUNK];
    let mut acc = vec![[_mm512_setzero_ps(); ACCS * LANES]; m];
    let mut rows_bytes = [[0u8; 2 * QK8]; ROWS];
    let mut lanes = [[0f32; ROWS]; ACCS * LANES];
    for t0 in (0..rows).step_by(ROWS) {
        let width = (rows - t0).min(ROWS);
        // Rows past the weight repeat its tile's first (their lanes are never read).
        let row = |r: usize| &w[(t0 + if r < width { r } else { 0 }) * n..][..n];
        acc.fill([_mm512_setzero_ps(); ACCS * LANES]);
        for c0 in (0..units).step_by(CHUNK) {
            let cu = (units - c0).min(CHUNK);
            // Decode: two units per transposition (a row's 64 bytes), values + 128 as `u8`.
            for p in (0..cu).step_by(2) {
                let mut sc = [[0f32; ROWS]; 4];
                for (r, bytes) in rows_bytes.iter_mut().enumerate() {
                    let wr = row(r);
                    for k in 0..2 {
                        let u = c0 + p + k;
                        if p + k < cu {
                            let v = _mm256_xor_si256(unit_vector(&wr[u / W::UNITS], u % W::UNITS, table), bias);
                            // SAFETY: this function has AVX2; the store writes exactly 32
                            // bytes of `bytes`.
                            unsafe { _mm256_storeu_si256(bytes[QK8 * k..].as_mut_ptr().cast(), v) };
                            let h = half_scales(&wr[u / W::UNITS], u % W::UNITS);
                            sc[2 * k][r] = h[0];
                            sc[2 * k + 1][r] = h[1];
                        }
                    }
                }
                // SAFETY: this function has AVX-512 F; each load reads exactly a 64-byte
                // array.
                unsafe {
                    let mut v = [_mm512_setzero_si512(); ROWS];
                    for (v, b) in v.iter_mut().zip(&rows_bytes) {
                        *v = _mm512_loadu_si512(b.as_ptr().cast());
                    }
                    let mut x = [_mm512_setzero_si512(); ROWS];
                    crate::transpose::words16(&v, &mut x);
                    for k in 0..2 {
                        if p + k < cu {
                            t[p + k].copy_from_slice(&x[LANES * k..LANES * k + LANES]);
                            ds[p + k] = [_mm512_loadu_ps(sc[2 * k].as_ptr()), _mm512_loadu_ps(sc[2 * k + 1].as_ptr())];
                        }
                    }
                }
            }
            for (j, (acc, a)) in acc.iter_mut().zip(a).enumerate() {
                let mut s = *acc;
                // Unit `c0 + $p` into accumulator `$base / LANES` (its parity: `c0` is even),
                // with constant register indices. (A macro: a closure would not inherit the
                // target features, and an index known only at run time put `s` in memory.)
                macro_rules! unit {
                    ($p:expr, $base:literal) => {{
                        let (p, u) = ($p, c0 + $p);
                        let (q, c) = (a[u].qs(), &corr[j * units + u]);
                        let d = _mm512_set1_ps(ad[j * units + u]);
                        let dl = [_mm512_mul_ps(ds[p][0], d), _mm512_mul_ps(ds[p][1], d)];
                        for l in 0..LANES {
                            let aq = bytemuck::cast::<[i8; 4], i32>(*q[4 * l..].first_chunk::<4>().expect("a quad"));
                            let x = _mm512_dpbusd_epi32(_mm512_set1_epi32(c[l]), t[p][l], _mm512_set1_epi32(aq));
                            s[$base + l] = _mm512_fmadd_ps(dl[l / 4], _mm512_cvtepi32_ps(x), s[$base + l]);
                        }
                    }};
                }
                // The even units (accumulator 0) and then the odd ones (accumulator 1): each
                // accumulator's units in order, which is all the order fixes, and eight
                // accumulators live per loop.
                for p in (0..cu).step_by(2) {
                    unit!(p, 0);
                }
                for p in (1..cu).step_by(2) {
                    unit!(p, 8);
                }
                *acc = s;
            }
        }
        for (j, acc) in acc.iter().enumerate() {
            for (lane, v) in lanes.iter_mut().zip(acc) {
                // SAFETY: this function has AVX-512 F; the store writes exactly 16 f32.
                unsafe { _mm512_storeu_ps(lane.as_mut_ptr(), *v) };
            }
            for r in 0..width {
                let mut row_acc = [[0f32; LANES]; ACCS];
                for (k, v) in row_acc.iter_mut().flatten().enumerate() {
                    *v = lanes[k][r];
                }
                out[(t0 + r) * stride + j] = finish(row_acc, [0.0; BATCH]);
            }
        }
    }
}

/// `Σ_{i<4} q[4l + i]` for each lane `l`.
#[inline(always)]
fn quad_sums(q: &[i8; QK8]) -> [i32; LANES] {
    std::array::from_fn(|l| q[4 * l..4 * l + 4].iter().map(|&x| i32::from(x)).sum())
}
