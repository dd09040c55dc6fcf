//! Mat-vec / mat-mul against exact semantics (f64) for every format, every activation mode,
//! odd shapes; and the stories15M A8W4DQ layers against a torchao-semantics reference.

use proptest::prelude::*;
use qforge_core::{Format, Params, QuantTensor, Shape};
use qforge_cpu::{ActQuant, matmul, quantize_acts, reference_f64};

fn data(n: usize, seed: u64) -> Vec<f32> {
    qforge_golden::signal(n, seed)
}

fn quantized(f: &'static dyn Format, n: usize, k: usize, seed: u64) -> QuantTensor<'static> {
    qforge_cpu::quantize(f, Shape::new([n, k]).unwrap(), &data(n * k, seed), None).unwrap()
}

/// `matmul` equals the f64 exact semantics of its mode to 1e-5 of Σ|terms|.
fn check(f: &'static dyn Format, w: &QuantTensor<'_>, m: usize, mode: ActQuant, seed: u64) -> Result<(), String> {
    let k = w.cols();
    let x = data(m * k, seed);
    let y = matmul(w, &x, m, mode).map_err(|e| format!("{} {mode}: {e}", f.desc().name))?;
    let acts = quantize_acts(w, &x, m, mode).map_err(|e| e.to_string())?;
    let (r, s) = reference_f64(w, &acts, 1e-5).map_err(|e| e.to_string())?;
    assert_eq!(y.len(), m * w.rows());
    for (i, (v, (r, s))) in y.iter().zip(r.iter().zip(&s)).enumerate() {
        if (*v as f64 - r).abs() > 1e-5 * s + 1e-30 {
            return Err(format!("{} {mode} K={k}: output {i}: {v} vs exact {r} (sum|terms| {s})", f.desc().name));
        }
    }
    Ok(())
}

#[test]
fn odd_shapes_every_format_every_mode() {
    for f in qforge_formats::registry().iter() {
        for k in [1usize, 33, 100, 257, 288, 300, 1000, 4097] {
            let w = quantized(f, 1, k, k as u64);
            for mode in ActQuant::ALL {
                check(f, &w, 1, mode, 7 + k as u64).unwrap();
            }
        }
    }
}

/// Each row of `w`'s mat-mul with the `m` rows of `x` is that row's mat-vec, bit for bit.
fn rows_are_matvecs(w: &QuantTensor<'_>, x: &[f32], m: usize, mode: ActQuant, what: &str) {
    let (n, k) = (w.rows(), x.len() / m);
    let y = matmul(w, x, m, mode).unwrap();
    for (i, xr) in x.chunks_exact(k).enumerate() {
        let v = matmul(w, xr, 1, mode).unwrap();
        let got: Vec<u32> = y[i * n..(i + 1) * n].iter().map(|v| v.to_bits()).collect();
        let want: Vec<u32> = v.iter().map(|v| v.to_bits()).collect();
        assert_eq!(got, want, "{what}: mat-mul row {i} differs from its mat-vec");
    }
}

/// Mat-mul row `i` is the mat-vec of activation row `i`, bit for bit, whatever the kernel's
/// multi-row path (several activation rows per weight block, rows split in chunks, tiles),
/// every format and mode, M across every chunk boundary.
#[test]
fn matmul_rows_are_matvecs_bit_for_bit() {
    for f in qforge_formats::registry().iter() {
        for (n, k) in [(3usize, 300usize), (17, 1024)] {
            let w = quantized(f, n, k, 3 + k as u64);
            let m = 19;
            let x = data(m * k, 11);
            for mode in ActQuant::ALL {
                rows_are_matvecs(&w, &x, m, mode, &format!("{} {mode} {n}x{k}", f.desc().name));
            }
        }
    }
}

/// Past one activation tile: M = 300 at K = 4096 is four tiles of the L2 budget's rows for
/// the row kernels and two for the tile kernels that ask for more (`Format::tile_rows`; at
/// AVX2 iq4_xs's tile kernel splits them again, 80 rows a call), and each mat-mul row is
/// still its mat-vec, bit for bit, at every SIMD level the CPU has.
#[test]
fn matmul_past_one_activation_tile() {
    for level in qforge_core::cpu::testable_levels() {
        qforge_core::cpu::with_level(level, || {
            for f in qforge_formats::registry().iter() {
                let (n, k, m) = (2usize, 4096usize, 300usize);
                let w = quantized(f, n, k, 5);
                let x = data(m * k, 13);
                for mode in ActQuant::ALL {
                    rows_are_matvecs(&w, &x, m, mode, &format!("{} {mode} {level:?}", f.desc().name));
                }
            }
        });
    }
}

#[test]
fn wrong_sizes_are_errors_not_panics() {
    let f = qforge_formats::get("q4_0").unwrap();
    let w = quantized(f, 3, 40, 1);
    assert!(matmul(&w, &data(39, 1), 1, ActQuant::None).is_err());
    assert!(matmul(&w, &data(80, 1), 1, ActQuant::Native).is_err());
    assert!(matmul(&w, &[], 0, ActQuant::None).is_err());
    let mut x = data(40, 1);
    x[17] = f32::NAN;
    assert!(matches!(matmul(&w, &x, 1, ActQuant::Int8Dyn), Err(qforge_core::QuantError::NonFinite { index: 17, .. })));
}

/// The same bits at every thread count (the loops run on qforge-pool's helpers, or on rayon
/// where those are busy: here several tests run at once), mat-vec and mat-mul, and an error
/// names the same element.
#[test]
fn results_do_not_depend_on_threads() {
    for name in ["q4_k", "q8_0", "iq2_xxs", "tq2_0"] {
        let f = qforge_formats::get(name).unwrap();
        let w = quantized(f, 333, 512, 3);
        let x = data(21 * 512, 4);
        let run = |t: usize, m: usize| {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(t).build().unwrap();
            pool.install(|| matmul(&w, &x[..m * 512], m, ActQuant::Native).unwrap())
        };
        for m in [1, 21] {
            let one = run(1, m);
            for t in [2, 3, 7] {
                let y = run(t, m);
                assert!(
                    y.iter().zip(&one).all(|(a, b)| a.to_bits() == b.to_bits()),
                    "{name} M={m}: {t} threads differ"
                );
            }
        }
        let mut bad = x.clone();
        bad[5 * 512 + 9] = f32::INFINITY;
        for t in [1, 2, 3] {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(t).build().unwrap();
            let r = pool.install(|| matmul(&w, &bad, 21, ActQuant::Native));
            assert!(
                matches!(r, Err(qforge_core::QuantError::NonFinite { index, .. }) if index == 5 * 512 + 9),
                "{r:?}"
            );
        }
    }
}

/// torchao's 8da4w reference, written from its documented formulas (not from qforge code):
/// weights int4 symmetric per group (scale = absmax/7.5 in f16), activations per-token
/// asymmetric int8, both fake-quantized, product in f64.
fn torchao_reference(w: &[f32], n: usize, k: usize, g: usize, x: &[f32], m: usize) -> Vec<f64> {
    let mut wq = vec![0f64; n * k];
    for r in 0..n {
        for c0 in (0..k).step_by(g) {
            let grp = &w[r * k + c0..r * k + (c0 + g).min(k)];
            let amax = grp.iter().fold(0f32, |a, v| a.max(v.abs()));
            let scale = half::f16::from_f32((amax / 7.5).max(f32::EPSILON)).to_f32();
            for (i, v) in grp.iter().enumerate() {
                let q = (v / scale).round_ties_even().clamp(-8.0, 7.0);
                wq[r * k + c0 + i] = (q * scale) as f64;
            }
        }
    }
    let mut y = vec![0f64; m * n];
    for i in 0..m {
        let row = &x[i * k..(i + 1) * k];
        let mn = row.iter().fold(0f32, |a, v| a.min(*v));
        let mx = row.iter().fold(0f32, |a, v| a.max(*v));
        let scale = ((mx - mn) / 255.0).max(f32::EPSILON);
        let zp = {
            let (dmin, dmax) = (mn / scale, mx / scale);
            let z = if (-128.0 + dmin) + (127.0 + dmax) > 0.0 { -128.0 - dmin } else { 127.0 - dmax };
            z.clamp(-128.0, 127.0).round_ties_even()
        };
        let xq: Vec<f64> = row
            .iter()
            .map(|v| (((v * (1.0 / scale) + zp).round_ties_even().clamp(-128.0, 127.0) - zp) * scale) as f64)
            .collect();
        for j in 0..n {
            y[i * n + j] = (0..k).map(|c| wq[j * k + c] * xq[c]).sum();
        }
    }
    y
}

fn l2(a: impl Iterator<Item = f64>) -> f64 {
    a.map(|v| v * v).sum::<f64>().sqrt()
}

/// stories15M's linear layers (dim 288, hidden 768) with int4g group 256 — 288 is not a
/// multiple of 256 — and int8-dyn activations: qforge's error against the f64 product is
/// within 10% of the torchao-semantics reference's.
#[test]
fn stories15m_a8w4dq_layers() {
    let f = qforge_formats::get_with("int4g", &Params::group_size(256)).expect("int4g with group 256");
    for (n, k) in [(288usize, 288usize), (768, 288), (288, 768)] {
        let m = 4;
        let w = data(n * k, n as u64 * 31 + k as u64);
        let x = data(m * k, 99);
        let t = qforge_cpu::quantize(f, Shape::new([n, k]).unwrap(), &w, None).unwrap();
        let y = matmul(&t, &x, m, ActQuant::Int8Dyn).unwrap();
        let exact: Vec<f64> =
            (0..m * n).map(|o| (0..k).map(|c| w[(o % n) * k + c] as f64 * x[(o / n) * k + c] as f64).sum()).collect();
        let r = torchao_reference(&w, n, k, 256, &x, m);
        let e_ours = l2(y.iter().zip(&exact).map(|(a, b)| *a as f64 - b));
        let e_ref = l2(r.iter().zip(&exact).map(|(a, b)| a - b));
        assert!(e_ours <= 1.1 * e_ref, "{n}x{k}: error {e_ours:e} vs torchao-semantics {e_ref:e}");
        let native = matmul(&t, &x, m, ActQuant::Native).unwrap();
        assert_eq!(native, y, "int4g's native mode is int8-dyn");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn random_shapes_match_exact_semantics(fi in 0usize..64, n in 1usize..6, k in 1usize..700, m in 1usize..5, mode in 0usize..4, seed in any::<u64>()) {
        let fs: Vec<_> = qforge_formats::registry().iter().collect();
        let f = fs[fi % fs.len()];
        let w = quantized(f, n, k, seed);
        let r = check(f, &w, m, ActQuant::ALL[mode], seed ^ 5);
        prop_assert!(r.is_ok(), "{}", r.unwrap_err());
    }
}

/// `Format::dot_weight_rows` (the mat-vec call: several weight rows, one activation row) gives
/// each row's `dot_row`, bit for bit, for every format with an integer kernel; bytes that are
/// not whole rows are an error, not a panic.
#[test]
fn weight_rows_call_is_dot_row_per_row() {
    for f in qforge_formats::registry().iter() {
        for (n, k) in [(1usize, 256usize), (7, 512), (21, 1024)] {
            let w = quantized(f, n, k, 5 + n as u64);
            for mode in ActQuant::ALL {
                let acts = quantize_acts(&w, &data(k, 13), 1, mode).unwrap();
                let Some(a) = acts[0].as_row() else { continue };
                let (rb, aux) = (w.row_bytes(), w.aux());
                let mut out = vec![f32::NAN; n];
                let Some(r) = f.dot_weight_rows(w.rows_data(), rb, 0, aux, a, &mut out) else { continue };
                r.unwrap();
                for (i, o) in out.iter().enumerate() {
                    let want = f.dot_row(&w.rows_data()[i * rb..(i + 1) * rb], i, aux, a).unwrap().unwrap();
                    assert_eq!(o.to_bits(), want.to_bits(), "{} {mode} {n}x{k}: row {i}", f.desc().name);
                }
                let short = &w.rows_data()[..w.rows_data().len() - 1];
                assert!(f.dot_weight_rows(short, rb, 0, aux, a, &mut out).unwrap().is_err(), "{}", f.desc().name);
            }
        }
    }
}

/// `Format::dot_tile` (the mat-mul call: several weight rows, several activation rows, a
/// strided output) gives each weight row's `dot_rows`, bit for bit, for every format with an
/// integer kernel, and leaves the output's gaps alone; bytes that are not whole rows, a
/// stride below the activation rows and a short output are errors, not panics. At every SIMD
/// level the CPU has, forced in turn (the tile kernels from eight activation rows: 16 weight
/// rows a tile on AVX-512 VNNI, 8 on AVX2; the q8 kernel's AVX2 tile from twelve, passes of
/// four; 40 rows × 5 blocks take several tiles and blocks, with M = 13 three passes of four
/// and one of one, 17 × 1056 a one-row tile and, for the 32-element units of the q8 tile, 33
/// of them: a chunk of K and an odd unit after it; 131 weight rows two calls of the K-quant
/// tile kernel, 128 rows and 3).
#[test]
fn tile_call_is_dot_rows_per_weight_row() {
    for level in qforge_core::cpu::testable_levels() {
        qforge_core::cpu::with_level(level, tile_calls);
    }
}

fn tile_calls() {
    for f in qforge_formats::registry().iter() {
        for (n, k, m) in [
            (1usize, 256usize, 1usize),
            (7, 512, 3),
            (21, 1024, 9),
            (18, 256, 2),
            (40, 1280, 13),
            (17, 1056, 10),
            (131, 256, 9),
        ] {
            let w = quantized(f, n, k, 7 + n as u64);
            for mode in ActQuant::ALL {
                let acts = quantize_acts(&w, &data(m * k, 17), m, mode).unwrap();
                let rows: Vec<_> = acts.iter().filter_map(|a| a.as_row()).collect();
                if rows.len() != m {
                    continue;
                }
                let (rb, aux, name) = (w.row_bytes(), w.aux(), f.desc().name);
                let stride = m + 2;
                let mut out = vec![f32::NAN; (n - 1) * stride + m];
                let Some(r) = f.dot_tile(w.rows_data(), rb, 0, aux, &rows, &mut out, stride) else { continue };
                r.unwrap();
                for i in 0..n {
                    let mut want = vec![0f32; m];
                    f.dot_rows(&w.rows_data()[i * rb..(i + 1) * rb], i, aux, &rows, &mut want).unwrap().unwrap();
                    for (j, want) in want.iter().enumerate() {
                        let got = out[i * stride + j];
                        let lv = qforge_core::cpu::level();
                        assert_eq!(
                            got.to_bits(),
                            want.to_bits(),
                            "{name} {mode} {lv:?} {n}x{k} M={m}: row {i} act {j}"
                        );
                    }
                    if i + 1 < n {
                        assert!(
                            out[i * stride + m..(i + 1) * stride].iter().all(|v| v.is_nan()),
                            "{name}: a gap written"
                        );
                    }
                }
                let data = w.rows_data();
                let short = &data[..data.len() - 1];
                assert!(
                    f.dot_tile(short, rb, 0, aux, &rows, &mut out, stride).unwrap().is_err(),
                    "{name}: not whole rows"
                );
                assert!(f.dot_tile(data, rb, 0, aux, &rows, &mut out, m - 1).unwrap().is_err(), "{name}: stride < M");
                let cut = out.len() - 1;
                assert!(
                    f.dot_tile(data, rb, 0, aux, &rows, &mut out[..cut], stride).unwrap().is_err(),
                    "{name}: short out"
                );
            }
        }
    }
}
