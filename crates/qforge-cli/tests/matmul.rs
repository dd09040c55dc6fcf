//! `qforge matmul`: the CLI contract for Y = X · Wᵀ on raw files, every format, odd shapes.

mod common;

use common::{Tmp, assert_fails, qforge, read_f32, write_f32};

fn names() -> Vec<String> {
    let out = qforge(&["formats", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    v.as_array().unwrap().iter().map(|f| f["name"].as_str().unwrap().to_string()).collect()
}

fn wave(n: usize, phase: f32) -> Vec<f32> {
    (0..n).map(|i| ((i as f32) * 0.731 + phase).sin() * 1.5).collect()
}

/// Every format, K not a multiple of any block (300), M = 2: the output has exactly M×N
/// values and matches the f32 product of the dequantized weights (act-quant none).
#[test]
fn matmul_every_format_odd_k() {
    let t = Tmp::new("mm");
    let (n, k, m) = (5usize, 300usize, 2usize);
    write_f32(&t.path("w.f32"), &wave(n * k, 0.0));
    write_f32(&t.path("x.f32"), &wave(m * k, 1.0));
    let shape = format!("{n},{k}");
    for f in names() {
        let q =
            qforge(&["quantize", "--format", &f, "--input", &t.s("w.f32"), "--shape", &shape, "--output", &t.s("w.q")]);
        assert!(q.status.success(), "{f}: quantize: {}", String::from_utf8_lossy(&q.stderr));
        let d =
            qforge(&["dequant", "--format", &f, "--input", &t.s("w.q"), "--shape", &shape, "--output", &t.s("w.deq")]);
        assert!(d.status.success(), "{f}: dequant: {}", String::from_utf8_lossy(&d.stderr));
        let wd = read_f32(&t.path("w.deq"));
        let x = wave(m * k, 1.0);
        let o = qforge(&[
            "matmul",
            "--format",
            &f,
            "--weights",
            &t.s("w.q"),
            "--shape",
            &shape,
            "--input",
            &t.s("x.f32"),
            "--rows",
            "2",
            "--output",
            &t.s("y.f32"),
            "--act-quant",
            "none",
        ]);
        assert!(o.status.success(), "{f}: matmul: {}", String::from_utf8_lossy(&o.stderr));
        let y = read_f32(&t.path("y.f32"));
        assert_eq!(y.len(), m * n, "{f}");
        for i in 0..m {
            for j in 0..n {
                let r: f64 = (0..k).map(|c| wd[j * k + c] as f64 * x[i * k + c] as f64).sum();
                let s: f64 = (0..k).map(|c| (wd[j * k + c] as f64 * x[i * k + c] as f64).abs()).sum();
                assert!((y[i * n + j] as f64 - r).abs() <= 1e-5 * s + 1e-12, "{f} ({i},{j}): {} vs {r}", y[i * n + j]);
            }
        }
        for mode in ["native", "int8-dyn"] {
            let o = qforge(&[
                "matmul",
                "--format",
                &f,
                "--weights",
                &t.s("w.q"),
                "--shape",
                &shape,
                "--input",
                &t.s("x.f32"),
                "--rows",
                "2",
                "--output",
                &t.s("y2.f32"),
                "--act-quant",
                mode,
            ]);
            assert!(o.status.success(), "{f} {mode}: {}", String::from_utf8_lossy(&o.stderr));
            assert_eq!(read_f32(&t.path("y2.f32")).len(), m * n);
        }
    }
}

#[test]
fn matmul_odd_shapes_q4_k() {
    let t = Tmp::new("mm-odd");
    for k in [1usize, 33, 100, 257, 288, 300, 1000, 4097] {
        let shape = format!("1,{k}");
        write_f32(&t.path("w.f32"), &wave(k, 0.3));
        write_f32(&t.path("x.f32"), &wave(k, 0.7));
        let q = qforge(&[
            "quantize",
            "--format",
            "q4_k",
            "--input",
            &t.s("w.f32"),
            "--shape",
            &shape,
            "--output",
            &t.s("w.q"),
        ]);
        assert!(q.status.success(), "K={k}: {}", String::from_utf8_lossy(&q.stderr));
        let o = qforge(&[
            "matmul",
            "--format",
            "q4_k",
            "--weights",
            &t.s("w.q"),
            "--shape",
            &shape,
            "--input",
            &t.s("x.f32"),
            "--rows",
            "1",
            "--output",
            &t.s("y.f32"),
            "--act-quant",
            "native",
        ]);
        assert!(o.status.success(), "K={k}: {}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(read_f32(&t.path("y.f32")).len(), 1);
    }
}

#[test]
fn matmul_bad_input_exits_2() {
    let t = Tmp::new("mm-bad");
    write_f32(&t.path("w.f32"), &wave(64, 0.0));
    let q =
        qforge(&["quantize", "--format", "q8_0", "--input", &t.s("w.f32"), "--shape", "2,32", "--output", &t.s("w.q")]);
    assert!(q.status.success());
    write_f32(&t.path("x.f32"), &wave(32, 0.0));
    let base = |extra: &[&str]| {
        let mut a = vec![
            "matmul",
            "--format",
            "q8_0",
            "--weights",
            &t.s("w.q"),
            "--shape",
            "2,32",
            "--input",
            &t.s("x.f32"),
            "--output",
            &t.s("y.f32"),
        ]
        .into_iter()
        .map(String::from)
        .collect::<Vec<_>>();
        a.extend(extra.iter().map(|s| s.to_string()));
        let refs: Vec<&str> = a.iter().map(String::as_str).collect();
        qforge(&refs)
    };
    assert_fails(&base(&["--rows", "2"]), 2, "input activations");
    assert_fails(&base(&["--rows", "0"]), 2, "--rows");
    assert_fails(&base(&["--rows", "1", "--act-quant", "int3"]), 2, "--act-quant");
    assert_fails(&base(&["--rows", "1", "--group-size", "64"]), 2, "group");
    let ok = base(&["--rows", "1"]);
    assert!(ok.status.success(), "{}", String::from_utf8_lossy(&ok.stderr));
}
