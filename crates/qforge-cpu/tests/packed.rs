//! [`PackedMatrix`] against the exact semantics of the native mode (f64) and against the plain
//! native mat-mul, for every format with a packed layout, on odd shapes (N not a multiple of
//! the group's 8 rows, K not a multiple of the block) and M > 1 (each row the bits of its own
//! mat-vec); errors are typed.

use qforge_core::{ActRow, Format, MAX_PACKED_DOT_ROWS, QuantError, QuantTensor, Shape};
use qforge_cpu::{ActQuant, PackedMatrix, matmul, quantize_acts, reference_f64};

fn data(n: usize, seed: u64) -> Vec<f32> {
    qforge_golden::signal(n, seed)
}

fn quantized(f: &'static dyn Format, n: usize, k: usize, seed: u64) -> QuantTensor<'static> {
    qforge_cpu::quantize(f, Shape::new([n, k]).unwrap(), &data(n * k, seed), None).unwrap()
}

/// The formats with a packed layout (those dotted with q8_k but q8_k itself, and every one
/// dotted with q8_0 / q8_1).
fn packed_formats() -> Vec<&'static dyn Format> {
    let fs: Vec<_> = qforge_formats::registry().iter().filter(|f| f.packing().is_some()).collect();
    let names: Vec<_> = fs.iter().map(|f| f.desc().name).collect();
    let want = [
        "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q8_1", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "iq2_xxs", "iq2_xs",
        "iq2_s", "iq3_xxs", "iq3_s", "iq1_s", "iq1_m", "iq4_nl", "iq4_xs", "tq1_0", "tq2_0", "q1_0", "q2_0", "mxfp4",
        "nvfp4",
    ];
    assert_eq!(names, want, "the formats with a packed layout");
    fs
}

/// The formats whose plain kernels sum in the packed layout's f32 order (one term per block):
/// packing does not change their bits. (Every format dotted with q8_k.)
const SAME_ORDER: [&str; 15] = [
    "q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "tq1_0", "tq2_0", "iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s",
    "iq1_s", "iq1_m", "iq4_xs",
];

#[test]
fn packed_matmul_is_the_native_dot() {
    for f in packed_formats() {
        for (n, k, m) in [
            (1usize, 256usize, 1usize),
            (7, 300, 2),
            (8, 512, 1),
            (19, 1000, 3),
            (16, 256, 9),
            (40, 4097, 1),
            // More rows than one kernel call takes: the calls' results placed side by side.
            (25, 512, MAX_PACKED_DOT_ROWS + 6),
        ] {
            let w = quantized(f, n, k, (n * k) as u64);
            let p = PackedMatrix::new(&w).unwrap();
            assert_eq!((p.rows(), p.cols()), (n, k));
            let x = data(m * k, 5 + k as u64);
            let y = p.matmul(&x, m).unwrap();
            assert_eq!(y.len(), m * n);
            let acts = quantize_acts(&w, &x, m, ActQuant::Native).unwrap();
            let (exact, terms) = reference_f64(&w, &acts, 1e-5).unwrap();
            let plain = matmul(&w, &x, m, ActQuant::Native).unwrap();
            let name = f.desc().name;
            // The q8_k-dotted formats' plain kernels sum in the packed layout's f32 order.
            let same_order = SAME_ORDER.contains(&name);
            for (i, (v, (r, s))) in y.iter().zip(exact.iter().zip(&terms)).enumerate() {
                assert!(
                    !same_order || v.to_bits() == plain[i].to_bits(),
                    "{name} {n}x{k} M={m} output {i}: packed {v} vs plain {}, not the same bits",
                    plain[i]
                );
                assert!(
                    (*v as f64 - r).abs() <= 1e-5 * s + 1e-30,
                    "{name} {n}x{k} M={m} output {i}: {v} vs exact {r} ({s})"
                );
                assert!(
                    (v - plain[i]).abs() as f64 <= 2e-5 * s + 1e-30,
                    "{name} {n}x{k} M={m} output {i}: packed {v} vs plain {}",
                    plain[i]
                );
            }
            // Several activation rows share each packed block's unpacking (up to four per pass,
            // or from eight rows the tile kernel: each block decoded once for up to
            // `MAX_PACKED_DOT_ROWS` rows per kernel call): every row is still the bits of its
            // own mat-vec.
            for (mi, (x, y)) in x.chunks_exact(k).zip(y.chunks_exact(n)).enumerate() {
                let one = p.matvec(x).unwrap();
                assert!(
                    one.iter().zip(y).all(|(a, b)| a.to_bits() == b.to_bits()),
                    "{name} {n}x{k} M={m}: row {mi} differs from its mat-vec"
                );
            }
        }
    }
}

/// The same packed results on one thread and on several (tasks split by whole groups).
/// One thread, so that a task holds a quarter of the groups: 61 groups of 18 KiB (q4_0, 4096
/// columns) make a task several 256 KiB weight tiles, whose results land side by side in each
/// output row (a misplaced tile is caught here, not by the small shapes above).
#[test]
fn a_task_of_several_weight_tiles_places_each() {
    let f = qforge_formats::get("q4_0").unwrap();
    let (n, k, m) = (489usize, 4096usize, 3usize);
    let w = quantized(f, n, k, 12);
    let x = data(m * k, 13);
    let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    let y = pool.install(|| PackedMatrix::new(&w).unwrap().matmul(&x, m).unwrap());
    let acts = quantize_acts(&w, &x, m, ActQuant::Native).unwrap();
    let (exact, terms) = reference_f64(&w, &acts, 1e-5).unwrap();
    for (i, (v, (r, s))) in y.iter().zip(exact.iter().zip(&terms)).enumerate() {
        assert!((*v as f64 - r).abs() <= 1e-5 * s + 1e-30, "output {i} (row {}): {v} vs exact {r}", i % n);
    }
}

#[test]
fn packed_results_do_not_depend_on_threads() {
    let f = qforge_formats::get("q4_k").unwrap();
    let w = quantized(f, 333, 512, 9);
    let x = data(21 * 512, 10);
    let run = |t: usize| {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(t).build().unwrap();
        pool.install(|| {
            let p = PackedMatrix::new(&w).unwrap();
            (p.data().to_vec(), p.matmul(&x, 21).unwrap())
        })
    };
    let one = run(1);
    for t in [2, 3, 7] {
        let (bytes, y) = run(t);
        assert!(bytes == one.0, "{t} threads packed other bytes");
        assert!(y.iter().zip(&one.1).all(|(a, b)| a.to_bits() == b.to_bits()), "{t} threads gave other results");
    }
}

#[test]
fn packed_errors_are_typed() {
    let q8k = quantized(qforge_formats::get("q8_k").unwrap(), 3, 256, 1);
    assert!(matches!(PackedMatrix::new(&q8k), Err(QuantError::Unsupported { format: "q8_k", .. })));
    let p = PackedMatrix::new(&quantized(qforge_formats::get("q6_k").unwrap(), 9, 300, 2)).unwrap();
    assert!(matches!(p.matvec(&data(299, 1)), Err(QuantError::ShapeMismatch { .. })));
    assert!(matches!(p.matmul(&[], 0), Err(QuantError::InvalidShape { .. })));
    let mut x = data(600, 3);
    x[417] = f32::INFINITY;
    assert!(matches!(p.matmul(&x, 2), Err(QuantError::NonFinite { index: 417, .. })));
    // The format's multi-row packed dot checks its output parts.
    let (f, acts) = (p.format(), [ActRow::Blocks(&[]), ActRow::Blocks(&[])]);
    let mut out = [0f32; 24];
    let r = f.packed_dot_rows(p.data(), 2 * 210, &acts, &mut out[..23]);
    assert!(matches!(r, Some(Err(QuantError::ShapeMismatch { .. }))), "{r:?}");
    let r = f.packed_dot_rows(p.data(), 2 * 210, &acts[..1], &mut out[..8]);
    assert!(matches!(r, Some(Err(QuantError::ShapeMismatch { .. }))), "{r:?}");
}
