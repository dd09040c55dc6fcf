//! The report's verdict from a run's files: synthetic run folders, each missing or breaking
//! one thing a GPU run must have.

use super::*;
use crate::gpu::{CastRow, CopyJson, DenseRow, DequantRow, GemmRow, MatvecRow};

fn bench() -> BenchReport {
    let mut b = BenchReport { copy: CopyJson { bytes: 2 << 30, ms: 0.7, gbps: 3000.0 }, ..Default::default() };
    for (dtype, of) in [("f32", 0.93), ("f16", 0.88), ("bf16", 0.91)] {
        b.dequant.push(DequantRow {
            format: "q4_0".into(),
            dtype: dtype.into(),
            rows: 32768,
            cols: 4096,
            bytes_read: 1,
            bytes_written: 1,
            ms: 1.0,
            gbps: 3000.0 * of,
            of_copy: of,
        });
    }
    for (n, m, of) in [(4096, 1, 0.6), (14336, 1, 0.87), (14336, 8, 0.5)] {
        b.matvec.push(MatvecRow {
            format: "q4_0".into(),
            n,
            k: 4096,
            m,
            weight_bytes: 1,
            ms_stream: 0.02,
            ms_graph: Some(0.01),
            weight_gbps: 3000.0 * of,
            of_copy: of,
        });
    }
    b.f16_direct_vs_cast.push(CastRow {
        format: "q4_0".into(),
        elements: 1,
        direct_f16_ms: 0.2,
        f32_ms: 0.3,
        cast_ms: 0.1,
        detour_ms: 0.4,
        speedup: 2.0,
    });
    // q4_0 (4.5 bits per weight) beats dense at M = 16 by 2.5×, loses at M = 512 (0.5×);
    // q8_0 counts only at M = 512 (not 4-bit); int4g at M = 2048 has no dense row.
    for (m, ms) in [(16, 0.1), (512, 2.0)] {
        b.gemm_dense.push(DenseRow { n: 4096, k: 4096, m, ms, tflops: 1.0 });
    }
    for (format, m, fused_ms, dequant_cublas_ms) in [
        ("q4_0", 16, 0.04, 0.2),
        ("q4_0", 512, 4.0, 3.0),
        ("q8_0", 16, 0.5, 0.6),
        ("q8_0", 512, 1.8, 2.0),
        ("int4g", 2048, 1.0, 2.0),
    ] {
        b.gemm.push(GemmRow {
            format: format.into(),
            n: 4096,
            k: 4096,
            m,
            fused_ms,
            dequant_cublas_ms,
            fused_tflops: 1.0,
            fused_config: Some("skinny16x256x256_w8 split 16".into()),
            skinny_ms: (m == 512).then_some(0.5),
            tiled_ms: if m == 512 { vec![("64x64x32_w2x2_s2".into(), 0.7)] } else { Vec::new() },
            int8: None,
        });
    }
    b
}

const PASSING_LOG: &str = "running 3 tests\ntest a ... ok\ntest b ... ok\ntest c ... ok\n\n\
    test result: ok. 3 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.5s\n";

/// A complete, passing run folder.
fn run_dir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("qforge-gpu-report-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(
        d.join("steps.tsv"),
        "test:runtime\t0\t1200\ttest-runtime.log\ntest-matrix --device cuda\t0\t9000\tmatrix.log\ngpu-bench\t0\t60000\tbench.log\n",
    )
    .unwrap();
    std::fs::write(d.join("test-runtime.log"), PASSING_LOG).unwrap();
    std::fs::write(d.join("matrix.json"), r#"{"cells": [], "summary": {"cells": 4, "pass": 4, "fail": 0, "skip": 0, "missing": 0, "skipped_because": []}, "ok": true}"#).unwrap();
    std::fs::write(d.join("bench.json"), serde_json::to_string(&bench()).unwrap()).unwrap();
    std::fs::write(d.join("device.txt"), "name, driver_version\nNVIDIA H100 80GB HBM3, 580.159.04\n").unwrap();
    d
}

#[test]
fn a_complete_run_passes_and_reports_targets() {
    let d = run_dir("ok");
    let r = gather(&d, None, Some(300));
    assert!(r.ok, "{:?}", r.failures);
    assert_eq!(r.tests.passed, 3);
    assert_eq!(r.steps.len(), 3);
    let [deq, mv, f16, vs_dequant, small_m, large_m] = &r.targets[..] else { panic!("{:?}", r.targets) };
    assert_eq!((vs_dequant.met, vs_dequant.of), (4, 5));
    assert_eq!(vs_dequant.worst, Some(("q4_0 4096x4096 M=512".to_string(), 0.75)));
    assert_eq!((small_m.met, small_m.of), (1, 1), "only 4-bit formats at M <= 16");
    assert_eq!((large_m.met, large_m.of), (1, 2), "M >= 512 with a dense row");
    assert_eq!(large_m.worst, Some(("q4_0 4096x4096 M=512".to_string(), 0.5)));
    assert_eq!((deq.met, deq.of), (2, 3));
    assert_eq!(deq.worst, Some(("q4_0 f16".to_string(), 0.88)));
    assert_eq!((mv.met, mv.of), (1, 1), "only M = 1 on 14336x4096 counts");
    assert_eq!((f16.met, f16.of), (1, 1));
    let md = markdown(&r);
    assert!(
        md.contains("**PASS**")
            && md.contains("| q4_0 | 2790 GB/s (93%)")
            && md.contains("14336x4096 M=8")
            && md.contains("| q4_0 | 4096×4096 | 16 | 0.040 | 1.0 | 5.00× | 2.50× |")
            && md.contains("| int4g | 4096×4096 | 2048 | 1.000 | 1.0 | 2.00× | - |"),
        "{md}"
    );
    assert!(run(&d, None, None).unwrap());
    assert!(d.join("gpu-report.json").exists() && d.join("gpu-report.md").exists());
}

#[test]
fn every_missing_or_failed_piece_fails_the_run() {
    type Break<'a> = &'a dyn Fn(&std::path::Path);
    let cases: [(&str, Break); 7] = [
        ("no-steps", &|d| std::fs::remove_file(d.join("steps.tsv")).unwrap()),
        ("test-failed", &|d| {
            std::fs::write(
                d.join("test-runtime.log"),
                "test x ... FAILED\ntest result: FAILED. 2 passed; 1 failed; 0 ignored\n",
            )
            .unwrap()
        }),
        ("test-binary-silent", &|d| std::fs::write(d.join("test-runtime.log"), "Segmentation fault\n").unwrap()),
        ("timeout", &|d| {
            let t = std::fs::read_to_string(d.join("steps.tsv")).unwrap().replace("gpu-bench\t0", "gpu-bench\t124");
            std::fs::write(d.join("steps.tsv"), t).unwrap()
        }),
        ("cells-skipped", &|d| {
            let t = std::fs::read_to_string(d.join("matrix.json"))
                .unwrap()
                .replace(r#""pass": 4, "fail": 0, "skip": 0"#, r#""pass": 0, "fail": 0, "skip": 4"#);
            std::fs::write(d.join("matrix.json"), t).unwrap()
        }),
        ("no-bench", &|d| std::fs::remove_file(d.join("bench.json")).unwrap()),
        ("bench-error", &|d| {
            let mut b = bench();
            b.errors.push("iq2_xxs: CUDA driver error in launch matvec: ILLEGAL_ADDRESS".into());
            std::fs::write(d.join("bench.json"), serde_json::to_string(&b).unwrap()).unwrap()
        }),
    ];
    for (tag, break_it) in cases {
        let d = run_dir(tag);
        break_it(&d);
        let r = gather(&d, None, None);
        assert!(!r.ok && !r.failures.is_empty(), "{tag}: a broken run passed");
        assert!(markdown(&r).contains("**FAIL**"), "{tag}");
        assert!(!run(&d, None, None).unwrap(), "{tag}");
    }
}

#[test]
fn graph_capture_notes_do_not_fail_a_run() {
    let d = run_dir("graph-note");
    let mut b = bench();
    b.errors.push("q4_0 4096x4096 m=1: no graph timing (begin capture: ...)".into());
    std::fs::write(d.join("bench.json"), serde_json::to_string(&b).unwrap()).unwrap();
    assert!(gather(&d, None, None).ok);
}

#[test]
fn libtest_result_lines_are_summed() {
    let mut t = Tests::default();
    parse_test_log(PASSING_LOG, &mut t);
    parse_test_log("test result: ok. 0 passed; 0 failed; 4 ignored; 0 measured; 0 filtered out\n", &mut t);
    assert_eq!((t.binaries_reporting, t.passed, t.failed, t.ignored), (2, 3, 0, 4));
    let steps = parse_steps("a\t0\t5\tl\nb\t137\t9\tm\nbad line\nc\t3\tx\tn\n");
    let st: Vec<&str> = steps.iter().map(|s| s.status).collect();
    assert_eq!(st, ["pass", "timeout", "fail"]);
}
