//! The fp8 dot of many rows (mat-vec: weight rows against one activation row; mat-mul: one
//! weight row against activation rows), the same bits as [`crate::row_dot_portable`] per
//! pair of rows. On x86-64 with AVX2 the side shared by all pairs is decoded once
//! ([`plain_row`]) and the other side's rows go through `simd_dot`, four at a time;
//! elsewhere each pair takes the one-row dot.

use crate::grid::{self, BLOCK};
#[cfg(target_arch = "x86_64")]
use crate::simd_dot::MAX_PASS;
use crate::{Fp8Kind, row_dot};
use qforge_core::QuantError;

/// The tail of the format's dot for the `out.len()` (at most [`MAX_PASS`]) rows of a pass:
/// per row `acc += partial · s_w · s_a` per block, in block order, from a pass's block-major
/// partials (`partials[kb · out.len() + r]`) and each row's scales (one per block). The rows'
/// chains of dependent adds run side by side.
#[cfg(target_arch = "x86_64")]
fn finish(partials: &[f32], w_scales: &[&[f32]], a_scales: &[&[f32]], out: &mut [f32]) {
    let n = out.len();
    debug_assert!(n <= MAX_PASS && w_scales.len() == n && a_scales.len() == n);
    let mut acc = [0f32; MAX_PASS];
    for (kb, p) in partials.chunks_exact(n.max(1)).enumerate() {
        for r in 0..n {
            acc[r] += p[r] * w_scales[r][kb] * a_scales[r][kb];
        }
    }
    out.copy_from_slice(&acc[..n]);
}

/// `plain[i] = decode::<P>(codes[i]) · factor` (exact: the factor is 1 or 2^8), zeros
/// after the codes up to a multiple of 16.
#[cfg(target_arch = "x86_64")]
fn plain_row<P: Fp8Kind>(codes: &[u8], factor: f32) -> Vec<f32> {
    let mut v = vec![0f32; codes.len().next_multiple_of(16)];
    qforge_core::cpu::dispatch(
        #[inline(always)]
        || {
            for (o, &c) in v.iter_mut().zip(codes) {
                *o = crate::decode::<P>(c) * factor;
            }
        },
    );
    v
}

/// Dots `rows` (coded, kind `C`) with `plain` in passes of [`crate::simd_dot::MAX_PASS`]
/// rows, then one at a time; after each pass `done(first row, rows in the pass, partials)`,
/// the partials block-major (`partials[kb · rows in the pass + r]`).
#[cfg(target_arch = "x86_64")]
fn in_passes<C: Fp8Kind>(
    level: crate::simd_dot::Level,
    rows: &[&[u8]],
    plain: &[f32],
    nb: usize,
    mut done: impl FnMut(usize, usize, &[f32]) -> Result<(), QuantError>,
) -> Result<(), QuantError> {
    use crate::simd_dot::coded_partials;
    let mut p4 = vec![[0f32; MAX_PASS]; nb];
    let mut p1 = vec![[0f32; 1]; nb];
    let (passes, rest) = rows.as_chunks::<MAX_PASS>();
    for (q, pass) in passes.iter().enumerate() {
        coded_partials::<C, MAX_PASS>(level, *pass, plain, &mut p4);
        done(MAX_PASS * q, MAX_PASS, p4.as_flattened())?;
    }
    for (j, one) in rest.iter().enumerate() {
        coded_partials::<C, 1>(level, [one], plain, &mut p1);
        done(MAX_PASS * passes.len() + j, 1, p1.as_flattened())?;
    }
    Ok(())
}

/// Mat-vec: `out[i]` = the dot of weight row `row0 + i` (`w`'s `i`-th `len`-byte row, kind
/// `K`, the scale grid `aux` of `tile_rows`-row tiles) with the e4m3 activation `(q, a_scales)`
/// (codes, scales). The lengths are the caller's
/// (`q.len() == len`, `a_scales.len() == len.div_ceil(BLOCK)`, `w.len() == out.len() · len`).
pub(crate) fn weight_rows<K: Fp8Kind>(
    w: &[u8],
    len: usize,
    row0: usize,
    aux: &[u8],
    tile_rows: usize,
    (q, a_scales): (&[u8], &[f32]),
    out: &mut [f32],
) -> Result<(), QuantError> {
    if len == 0 {
        out.fill(0.0);
        return Ok(());
    }
    #[cfg(target_arch = "x86_64")]
    if let Some(level) = crate::simd_dot::Level::detect() {
        let plain = plain_row::<crate::E4m3>(q, crate::simd_dot::plain_factor::<K>());
        let rows: Vec<&[u8]> = w.chunks_exact(len).collect();
        // The scale grid rows these weight rows use, read once.
        let tile_rows = tile_rows.max(1);
        let g0 = row0 / tile_rows;
        let grid_rows = (row0 + out.len()).div_ceil(tile_rows) - g0;
        let grid_scales: Vec<Vec<f32>> = (0..grid_rows)
            .map(|g| grid::row_scales(aux, (g0 + g) * tile_rows, len, tile_rows).map(Iterator::collect))
            .collect::<Result<_, _>>()?;
        let scales = |i: usize| &grid_scales[(row0 + i) / tile_rows - g0][..];
        return in_passes::<K>(level, &rows, &plain, len.div_ceil(BLOCK), |i, n, p| {
            let w: [&[f32]; MAX_PASS] = std::array::from_fn(|r| scales(i + r.min(n - 1)));
            finish(p, &w[..n], &[a_scales; MAX_PASS][..n], &mut out[i..i + n]);
            Ok(())
        });
    }
    for (i, (o, w)) in out.iter_mut().zip(w.chunks_exact(len)).enumerate() {
        *o = row_dot::<K>(w, q, grid::row_scales(aux, row0 + i, len, tile_rows)?, a_scales);
    }
    Ok(())
}

/// Mat-mul: `out[i]` = the dot of weight row `row` (`w`, kind `K`, grid as for [`weight_rows`]) with e4m3 activation row
/// `acts[i] = (codes, scales)`. The lengths are the caller's (each activation `w.len()` codes
/// and `w.len().div_ceil(BLOCK)` scales, `out.len() == acts.len()`).
pub(crate) fn act_rows<K: Fp8Kind>(
    w: &[u8],
    row: usize,
    aux: &[u8],
    tile_rows: usize,
    acts: &[(&[u8], &[f32])],
    out: &mut [f32],
) -> Result<(), QuantError> {
    let len = w.len();
    if len == 0 {
        out.fill(0.0);
        return Ok(());
    }
    let w_scales: Vec<f32> = grid::row_scales(aux, row, len, tile_rows)?.collect();
    #[cfg(target_arch = "x86_64")]
    if let Some(level) = crate::simd_dot::Level::detect() {
        let plain = plain_row::<K>(w, crate::simd_dot::plain_factor::<crate::E4m3>());
        let rows: Vec<&[u8]> = acts.iter().map(|a| a.0).collect();
        return in_passes::<crate::E4m3>(level, &rows, &plain, len.div_ceil(BLOCK), |i, n, p| {
            let a: [&[f32]; MAX_PASS] = std::array::from_fn(|r| acts[i + r.min(n - 1)].1);
            finish(p, &[&w_scales[..]; MAX_PASS][..n], &a[..n], &mut out[i..i + n]);
            Ok(())
        });
    }
    for (o, (q, s)) in out.iter_mut().zip(acts) {
        *o = row_dot::<K>(w, q, w_scales.iter().copied(), s);
    }
    Ok(())
}

/// A mat-mul tile: `out[i · stride + j]` = the dot of weight row `row0 + i` (`w`'s `i`-th
/// `len`-byte row, kind `K`, grid as for [`weight_rows`]) with e4m3 activation row `acts[j]`;
/// `Ok(false)` (nothing written) without AVX2. Every activation row is decoded to f32 once
/// per call and every weight row once, then 4 × 4 pairs (AVX2: 2 × 2) go through
/// `simd_dot`'s decoded kernel, so no code is converted in the loop. The lengths are the caller's (`w.len()` a
/// multiple of `len`, each activation `len` codes and `len.div_ceil(BLOCK)` scales, `out`
/// long enough for the stride).
#[cfg(target_arch = "x86_64")]
#[allow(clippy::too_many_arguments)]
pub(crate) fn tile<K: Fp8Kind>(
    w: &[u8],
    len: usize,
    row0: usize,
    aux: &[u8],
    tile_rows: usize,
    acts: &[(&[u8], &[f32])],
    out: &mut [f32],
    stride: usize,
) -> Result<bool, QuantError> {
    use crate::simd_dot::{Level, plain_partials};
    let Some(level) = Level::detect() else { return Ok(false) };
    let (rw, ra) = level.tile_shape();
    let (m, nrows) = (acts.len(), w.len().checked_div(len).unwrap_or(0));
    if len == 0 || m == 0 {
        for i in 0..nrows {
            out[i * stride..][..m].fill(0.0);
        }
        return Ok(true);
    }
    let nb = len.div_ceil(BLOCK);
    let plain_a: Vec<Vec<f32>> = acts.iter().map(|(q, _)| plain_row::<crate::E4m3>(q, 1.0)).collect();
    let mut parts = vec![[[0f32; 4]; 4]; nb];
    for i0 in (0..nrows).step_by(rw) {
        let wn = (nrows - i0).min(rw);
        let plain_w: Vec<Vec<f32>> = (0..wn).map(|i| plain_row::<K>(&w[(i0 + i) * len..][..len], 1.0)).collect();
        let w_scales: Vec<Vec<f32>> = (0..wn)
            .map(|i| grid::row_scales(aux, row0 + i0 + i, len, tile_rows).map(Iterator::collect))
            .collect::<Result<_, _>>()?;
        let wr: [&[f32]; 4] = std::array::from_fn(|i| &plain_w[i.min(wn - 1)][..]);
        for j0 in (0..m).step_by(ra) {
            let an = (m - j0).min(ra);
            let ar: [&[f32]; 4] = std::array::from_fn(|j| &plain_a[j0 + j.min(an - 1)][..]);
            plain_partials(level, wr, ar, len, &mut parts);
            // Per pair `acc += partial · s_w · s_a` in block order; the pairs' chains side by
            // side (one pair's 32 dependent adds after another's were as slow as the dots).
            let mut acc = [[0f32; 4]; 4];
            for (kb, p) in parts.iter().enumerate() {
                for (i, (acc, ws)) in acc.iter_mut().zip(&w_scales).enumerate() {
                    for (j, acc) in acc.iter_mut().enumerate().take(an) {
                        *acc += p[i][j] * ws[kb] * acts[j0 + j].1[kb];
                    }
                }
            }
            for (i, acc) in acc.iter().enumerate().take(wn) {
                out[(i0 + i) * stride + j0..][..an].copy_from_slice(&acc[..an]);
            }
        }
    }
    Ok(true)
}

#[cfg(test)]
mod tests {
    use crate::{E4m3, E5m2, FP8_E4M3, FP8_E5M2, Fp8Format, Fp8Kind, grid, row_dot_portable};
    use qforge_core::rand::Rng;
    use qforge_core::{ActRow, Format};

    /// `n` rows of `len` random codes; every third call may hold NaN / Inf codes.
    fn codes(rng: &mut Rng, n: usize, len: usize, specials: bool) -> Vec<u8> {
        (0..n * len).map(|_| rng.next_u64() as u8 & if specials { 0xFF } else { 0xF7 }).collect()
    }

    /// Mat-vec, mat-mul and mat-mul tiles of 1..=9 rows, lengths with partial chunks and
    /// blocks, rows that straddle a grid row, special codes on either side: at every SIMD
    /// level the machine has, the bits of the portable one-row dot (or both NaN).
    fn same_as_one_row<K: Fp8Kind>(f: &Fp8Format<K>, seed: u64) {
        let mut rng = Rng::new(seed);
        let row0 = 125;
        for len in [0usize, 1, 15, 16, 17, 100, 127, 128, 129, 256, 300, 385] {
            let nb = len.div_ceil(crate::BLOCK);
            for n in 1..=9usize {
                let specials = (len + n) % 3 == 0;
                let w = codes(&mut rng, n, len, specials);
                let acts: Vec<Vec<u8>> = (0..n).map(|i| codes(&mut rng, 1, len, specials && i % 2 == 0)).collect();
                let a_scales: Vec<Vec<f32>> =
                    (0..n).map(|_| (0..nb).map(|_| rng.unit_f32() * 0.02 + 1e-3).collect()).collect();
                let gr = (row0 + n).div_ceil(crate::BLOCK);
                let aux: Vec<u8> = (0..gr * nb).flat_map(|i| (0.5 + i as f32 * 0.25).to_le_bytes()).collect();
                let w_row = |i: usize| &w[i * len..(i + 1) * len];
                // The portable one-row dot (of nothing: 0).
                let one = |w: &[u8], a: &[u8], row: usize, sa: &[f32]| {
                    if len == 0 {
                        0.0
                    } else {
                        row_dot_portable::<K>(w, a, grid::row_scales(&aux, row, len, 128).unwrap(), sa)
                    }
                };
                let same = |got: f32, want: f32| got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan());
                for level in qforge_core::cpu::testable_levels() {
                    qforge_core::cpu::with_level(level, || {
                        // Mat-vec: the n weight rows against activation 0.
                        let act = ActRow::Fp8 { q: &acts[0], scales: &a_scales[0] };
                        let mut out = vec![0f32; n];
                        f.dot_weight_rows(&w, len, row0, &aux, act, &mut out).unwrap().unwrap();
                        for (i, &got) in out.iter().enumerate() {
                            let want = one(w_row(i), &acts[0], row0 + i, &a_scales[0]);
                            assert!(
                                same(got, want),
                                "{} mat-vec len {len} n {n} row {i}: {got:e} {want:e}",
                                level.name()
                            );
                        }
                        // Mat-mul: weight row 1 (if any) against the n activations.
                        let wr = n.min(2) - 1;
                        let rows: Vec<ActRow<'_>> =
                            acts.iter().zip(&a_scales).map(|(q, s)| ActRow::Fp8 { q, scales: s }).collect();
                        f.dot_rows(w_row(wr), row0 + wr, &aux, &rows, &mut out).unwrap().unwrap();
                        for (i, &got) in out.iter().enumerate() {
                            let want = one(w_row(wr), &acts[i], row0 + wr, &a_scales[i]);
                            assert!(
                                same(got, want),
                                "{} mat-mul len {len} n {n} act {i}: {got:e} {want:e}",
                                level.name()
                            );
                        }
                        // A mat-mul tile: the n weight rows against the n activations, into a
                        // strided output whose gaps stay untouched.
                        if len > 0 {
                            let stride = n + 1;
                            let mut t = vec![f32::NAN; (n - 1) * stride + n];
                            f.dot_tile(&w, len, row0, &aux, &rows, &mut t, stride).unwrap().unwrap();
                            for i in 0..n {
                                for (j, a) in acts.iter().enumerate() {
                                    let (got, want) = (t[i * stride + j], one(w_row(i), a, row0 + i, &a_scales[j]));
                                    assert!(
                                        same(got, want),
                                        "{} tile len {len} n {n} row {i} act {j}: {got:e} {want:e}",
                                        level.name()
                                    );
                                }
                                if i + 1 < n {
                                    assert!(t[i * stride + n].is_nan(), "a gap of the strided output written");
                                }
                            }
                        }
                    });
                }
            }
        }
    }

    #[test]
    fn many_rows_equal_the_one_row_dot_at_every_level() {
        same_as_one_row::<E4m3>(&FP8_E4M3, 5);
        same_as_one_row::<E5m2>(&FP8_E5M2, 6);
    }

    #[test]
    fn mismatched_lengths_are_errors() {
        let (w, q, s) = (vec![0u8; 2 * 130], vec![0u8; 130], vec![1f32; 2]);
        let aux: Vec<u8> = (0..2).flat_map(|_| 1f32.to_le_bytes()).collect();
        let act = ActRow::Fp8 { q: &q, scales: &s };
        let mut out = vec![0f32; 2];
        assert!(FP8_E4M3.dot_weight_rows(&w, 130, 0, &aux, act, &mut out).unwrap().is_ok());
        assert!(FP8_E4M3.dot_weight_rows(&w[1..], 130, 0, &aux, act, &mut out).unwrap().is_err());
        let short = ActRow::Fp8 { q: &q[1..], scales: &s };
        assert!(FP8_E4M3.dot_weight_rows(&w, 130, 0, &aux, short, &mut out).unwrap().is_err());
        assert!(FP8_E4M3.dot_rows(&w[..130], 0, &aux, &[act, short], &mut out).unwrap().is_err());
        assert!(FP8_E4M3.dot_rows(&w[..130], 0, &aux, &[act], &mut out).unwrap().is_err());
        // A grid that does not cover the row.
        assert!(FP8_E4M3.dot_rows(&w[..130], 128, &aux, &[act, act], &mut out).unwrap().is_err());
    }
}
