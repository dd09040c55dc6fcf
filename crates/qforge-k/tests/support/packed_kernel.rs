//! The packed (row-interleaved) layout of the [`Q8KCodes`] formats, checked generically (the
//! tq suite includes this file by path, beside `codes_kernel.rs`): packing keeps every code,
//! scale and min; the dispatched kernel, for one activation row and for several, equals the
//! portable one bit for bit at every SIMD level the machine has; and both equal the exact integer dot to f32 rounding.

use super::codes_kernel::{act, same, scale_offsets, weight};
use qforge_core::le::F16Le;
use qforge_core::rand::Rng;
use qforge_k::BlockQ8K;
use qforge_k::dot::{Q8KCodes, codes};
use qforge_k::packed::{Layout, ROWS, dot_group_portable, dot_groups, dot_groups_rows, pack, unpack_codes};

/// Random rows of `n` blocks each (`raw`: any bytes, NaN / Inf scales included).
fn rows<F: Q8KCodes>(rng: &mut Rng, rows: usize, n: usize, raw: bool, extreme: bool) -> Vec<F::Block> {
    let offsets = scale_offsets::<F>();
    (0..rows * n).map(|_| weight::<F>(rng, offsets, raw, extreme)).collect()
}

/// Packing keeps every row's codes (in element order), group scales, mins, `d` and `dmin`;
/// the rows that fill up the last group are zeros.
pub fn pack_keeps_everything<F: Q8KCodes>(seed: u64) {
    let mut rng = Rng::new(seed);
    let l = Layout::of::<F>();
    for case in 0..60 {
        let (nr, n) = (1 + case % 19, case % 4);
        let w = rows::<F>(&mut rng, nr, n, case % 5 == 3, case % 3 == 1);
        let p = pack::<F>(&w, nr, n);
        assert_eq!(p.len(), nr.div_ceil(ROWS) * n * l.size, "{} case {case}", F::DESC.name);
        for row in 0..nr.div_ceil(ROWS) * ROWS {
            for b in 0..n {
                let pb = &p[((row / ROWS) * n + b) * l.size..][..l.size];
                let r = row % ROWS;
                let got = unpack_codes::<F>(pb, r);
                let half = |at: usize| F16Le([pb[at + 2 * r], pb[at + 2 * r + 1]]);
                let sc = |k: usize| if F::UNIT_SCALES { 1 } else { pb[l.sc + k * ROWS + r] as i8 };
                let mins = |k: usize| pb[l.mins + k * ROWS + r];
                if row >= nr {
                    assert!(got.iter().all(|&u| u == 0) && half(l.d) == F16Le([0, 0]), "padding row {row}");
                    continue;
                }
                let blk = &w[row * n + b];
                let name = F::DESC.name;
                assert_eq!(&got[..], codes::<F>(blk).as_flattened(), "{name} case {case} row {row} block {b}: codes");
                let dmin = if F::HAS_MINS { half(l.dmin) } else { F16Le([0, 0]) };
                assert_eq!([half(l.d), dmin], F::d_dmin(blk), "{name} case {case}: d, dmin");
                let (s, m) = F::scales(blk);
                for g in 0..16 {
                    assert_eq!(sc(g * 16 / l.group), s[g], "{name} case {case} group {g}: scale");
                    if F::HAS_MINS {
                        assert_eq!(mins(g * 16 / l.group), m[g], "{name} case {case} group {g}: min");
                    }
                }
            }
        }
    }
}

/// The exact dot of one packed row with `a` in f64, and the sum of its terms' magnitudes:
/// `Σ_b a.d·(d·T − dmin·M)` with `T`, `M` the exact integers of the layout's formula.
fn exact<F: Q8KCodes>(w: &[F::Block], a: &[BlockQ8K]) -> (f64, f64) {
    let (mut sum, mut mag) = (0f64, 0f64);
    for (b, a) in w.iter().zip(a) {
        let u = codes::<F>(b);
        let u = u.as_flattened();
        let (sc, mins) = F::scales(b);
        let [d, dmin] = F::d_dmin(b).map(|h| f64::from(h.get()));
        let ad = f64::from(a.d.get());
        for (g, bsum) in a.bsums.iter().enumerate() {
            let dot: i64 = (16 * g..16 * g + 16).map(|i| i64::from(u[i]) * i64::from(a.qs[i])).sum();
            let t = i64::from(sc[g]) * (dot - i64::from(F::ZERO) * i64::from(bsum.get()));
            let m = if F::HAS_MINS { i64::from(mins[g]) * i64::from(bsum.get()) } else { 0 };
            let (t, m) = (ad * d * t as f64, ad * dmin * m as f64);
            sum += t - m;
            mag += t.abs() + m.abs();
        }
    }
    (sum, mag)
}

/// Activation rows per case: below and from the 8 at which AVX-512 VNNI takes the tile kernel
/// (`qforge_k`'s `simd::tile`), with rests 0, 1, 5 and 7 of its passes of eight.
const ACT_ROWS: [usize; 10] = [1, 2, 3, 4, 5, 6, 8, 9, 13, 23];

/// Groups of rows against random activations: the dispatched kernel equals the portable one
/// bit for bit (finite and raw scales, extreme codes and activations, inconsistent `bsums`) at
/// every SIMD level the machine has, forced in turn; with finite scales and consistent
/// activations, each row is the exact dot to f32 rounding (`6e-6 ·` its terms' magnitudes).
pub fn packed_kernels_agree<F: Q8KCodes>(seed: u64) {
    let check = || {
        let mut rng = Rng::new(seed);
        let l = Layout::of::<F>();
        for case in 0..300 {
            let (nr, n) = (1 + case % 21, case % 7);
            let (raw, extreme) = (case % 13 == 7, case % 4 == 1);
            let w = rows::<F>(&mut rng, nr, n, raw, extreme);
            // 1 to 23 activation rows: the multi-row kernel (up to four per pass) and its rest,
            // and from 8 up, the tile kernel (eight per pass and its rests).
            let m = ACT_ROWS[case % ACT_ROWS.len()];
            let acts: Vec<Vec<BlockQ8K>> =
                (0..m).map(|_| (0..n).map(|_| act(&mut rng, raw || case % 9 == 2, extreme)).collect()).collect();
            let p = pack::<F>(&w, nr, n);
            let groups = nr.div_ceil(ROWS);
            let len = groups * ROWS;
            let mut all = vec![f32::NAN; m * len];
            let rows_a: Vec<&[BlockQ8K]> = acts.iter().map(Vec::as_slice).collect();
            dot_groups_rows::<F>(&p, n, &rows_a, &mut all);
            for (mi, (a, got)) in acts.iter().zip(all.chunks_exact(len)).enumerate() {
                let mut one = vec![f32::NAN; len];
                dot_groups::<F>(&p, n, a, &mut one);
                for (g, got) in got.chunks_exact(ROWS).enumerate() {
                    let want = dot_group_portable::<F>(&p[g * n * l.size..][..n * l.size], a);
                    for (r, (x, y)) in got.iter().zip(&want).enumerate() {
                        let row = g * ROWS + r;
                        assert!(
                            same(*x, *y),
                            "{} case {case} act {mi} row {row}: {x:e} vs portable {y:e}",
                            F::DESC.name
                        );
                        assert!(same(*x, one[row]), "{} case {case} act {mi} row {row}: vs one row", F::DESC.name);
                    }
                }
                if raw || case % 9 == 2 {
                    continue;
                }
                for (row, got) in got.iter().take(nr).enumerate() {
                    let (want, mag) = exact::<F>(&w[row * n..][..n], a);
                    let err = (f64::from(*got) - want).abs();
                    assert!(
                        err <= 6e-6 * mag + 1e-30,
                        "{} case {case} act {mi} row {row}: {got:e} vs exact {want:e} (terms {mag:e})",
                        F::DESC.name
                    );
                }
            }
        }
    };
    if !cfg!(target_arch = "x86_64") {
        return check();
    }
    for level in qforge_golden::needs::simd_levels() {
        qforge_core::cpu::with_level(level, check);
    }
    qforge_core::cpu::with_level(qforge_core::cpu::Level::Scalar, check);
}
