//! End-to-end tests of the `qforge` binary: the CLI contract (spellings, exit codes, one
//! line on stderr, never a panic) and round trips through raw files.

mod common;

use common::{Tmp, assert_fails, qforge, read_f32, write_f32};
use std::path::Path;

fn formats_json() -> Vec<serde_json::Value> {
    let out = qforge(&["formats", "--json"]);
    assert!(out.status.success());
    serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap().as_array().unwrap().clone()
}

#[test]
fn formats_json_lists_the_contract_fields() {
    let fs = formats_json();
    for name in ["q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q8_1", "q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "q8_k"] {
        let f = fs.iter().find(|f| f["name"] == name).unwrap_or_else(|| panic!("{name} not listed"));
        for key in ["block_size", "block_bytes", "bits_per_weight", "ggml_type_id"] {
            assert!(f.get(key).is_some(), "{name} lacks {key}");
        }
    }
    let q4 = fs.iter().find(|f| f["name"] == "q4_0").unwrap();
    assert_eq!(q4["block_size"], 32);
    assert_eq!(q4["block_bytes"], 18);
    assert_eq!(q4["bits_per_weight"], 4.5);
    assert_eq!(q4["ggml_type_id"], 2);
    let table = qforge(&["formats"]);
    assert!(table.status.success());
    assert!(String::from_utf8_lossy(&table.stdout).contains("q6_k"));
}

#[test]
fn quantize_dequant_round_trip_every_format_and_dtype() {
    let t = Tmp::new("rt");
    let (rows, cols) = (3usize, 520usize); // 520 is not a multiple of 256: padded rows
    let x: Vec<f32> = (0..rows * cols).map(|i| ((i as f32) * 0.37).sin() * 2.0).collect();
    write_f32(&t.path("x.f32"), &x);
    let shape = format!("{rows},{cols}");
    for f in formats_json() {
        let name = f["name"].as_str().unwrap();
        let upper = name.to_uppercase(); // names are case-insensitive
        let q = t.s(&format!("{name}.bin"));
        let out =
            qforge(&["quantize", "--format", &upper, "--input", &t.s("x.f32"), "--shape", &shape, "--output", &q]);
        assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        let bs = f["block_size"].as_u64().unwrap() as usize;
        let bb = f["block_bytes"].as_u64().unwrap() as usize;
        // fp8 files carry their 128x128 scale grid (f32) after the values (docs/formats/fp8.md).
        let grid = if f["family"] == "fp8" { rows.div_ceil(128) * cols.div_ceil(128) * 4 } else { 0 };
        assert_eq!(std::fs::metadata(&q).unwrap().len() as usize, rows * cols.div_ceil(bs) * bb + grid, "{name}");
        let y = t.s(&format!("{name}.f32"));
        let out = qforge(&["dequant", "--format", name, "--input", &q, "--shape", &shape, "--output", &y]);
        assert!(out.status.success(), "{name}: {}", String::from_utf8_lossy(&out.stderr));
        let y = read_f32(Path::new(&y));
        assert_eq!(y.len(), rows * cols, "{name}: dequant returns exactly the logical shape");
        let rms = (x.iter().zip(&y).map(|(a, b)| (a - b).powi(2)).sum::<f32>() / y.len() as f32).sqrt();
        let signal = (x.iter().map(|a| a * a).sum::<f32>() / x.len() as f32).sqrt();
        // A sanity bound only (ternary and 1-bit formats are coarse); accuracy against ggml
        // is pinned by the golden tests and the test matrix.
        assert!(rms < 0.75 * signal, "{name}: rms error {rms} of signal {signal}");
        for dt in ["f16", "bf16"] {
            let h = t.s(&format!("{name}.{dt}"));
            let out =
                qforge(&["dequant", "--format", name, "--input", &q, "--shape", &shape, "--output", &h, "--dtype", dt]);
            assert!(out.status.success());
            let bytes = std::fs::read(&h).unwrap();
            assert_eq!(bytes.len(), rows * cols * 2);
            for (i, c) in bytes.chunks_exact(2).enumerate() {
                let bits = u16::from_le_bytes([c[0], c[1]]);
                let want = if dt == "f16" {
                    half::f16::from_f32(y[i]).to_bits()
                } else {
                    half::bf16::from_f32(y[i]).to_bits()
                };
                assert_eq!(bits, want, "{name} {dt} element {i}");
            }
        }
    }
}

#[test]
fn imatrix_is_read_and_checked() {
    let t = Tmp::new("im");
    write_f32(&t.path("x.f32"), &(0..512).map(|i| (i as f32).cos()).collect::<Vec<_>>());
    write_f32(&t.path("im.f32"), &(0..256).map(|i| 1.0 + i as f32).collect::<Vec<_>>());
    write_f32(&t.path("short.f32"), &[1.0; 10]);
    let args = |im: &str| {
        qforge(&[
            "quantize",
            "--format",
            "q4_k",
            "--input",
            &t.s("x.f32"),
            "--shape",
            "2,256",
            "--output",
            &t.s("q"),
            "--imatrix",
            im,
        ])
    };
    assert!(args(&t.s("im.f32")).status.success());
    assert_fails(&args(&t.s("short.f32")), 2, "imatrix");
    write_f32(&t.path("neg.f32"), &[-1.0; 256]);
    assert_fails(&args(&t.s("neg.f32")), 2, "weight");
}

#[test]
fn bad_input_exits_2_with_one_line_and_never_panics() {
    let t = Tmp::new("bad");
    write_f32(&t.path("x.f32"), &[0.5; 64]);
    let mut nan = vec![0.5f32; 64];
    nan[37] = f32::NAN;
    write_f32(&t.path("nan.f32"), &nan);
    std::fs::write(t.path("empty"), b"").unwrap();
    std::fs::write(t.path("q17.bin"), [7u8; 17]).unwrap(); // not a whole q4_0 block
    std::fs::write(t.path("q36.bin"), [0u8; 36]).unwrap(); // two q4_0 blocks
    let quant = |fmt: &str, input: &str, shape: &str| {
        qforge(&["quantize", "--format", fmt, "--input", input, "--shape", shape, "--output", &t.s("out.bin")])
    };
    let deq = |fmt: &str, input: &str, shape: &str| {
        qforge(&["dequant", "--format", fmt, "--input", input, "--shape", shape, "--output", &t.s("out.f32")])
    };
    let x = t.s("x.f32");
    assert_fails(&quant("q9_9", &x, "2,32"), 2, "unknown format");
    assert_fails(&quant("q4_0", &x, "3,32"), 2, "bytes");
    assert_fails(&quant("q4_0", &x, "2,x"), 2, "shape");
    assert_fails(&quant("q4_0", &x, "0,64"), 2, "zero");
    assert_fails(&quant("q4_0", &x, "99999999999,99999999999"), 2, "overflow");
    assert_fails(&quant("q4_0", &t.s("missing.f32"), "2,32"), 2, "cannot open");
    assert_fails(&quant("q4_0", &t.s("empty"), "2,32"), 2, "bytes");
    assert_fails(&quant("q4_0", &t.s("nan.f32"), "2,32"), 2, "non-finite");
    assert!(quant("q4_0", &x, "2,32").status.success(), "a valid call succeeds");
    assert_fails(&deq("q4_0", &t.s("q17.bin"), "1,32"), 2, "whole number of q4_0 blocks");
    assert_fails(&deq("q4_0", &t.s("q36.bin"), "1,32"), 2, "bytes");
    assert_fails(&deq("q4_0", &t.s("empty"), "1,32"), 2, "bytes");
    assert!(deq("q4_0", &t.s("q36.bin"), "2,32").status.success());
    let o = qforge(&[
        "dequant",
        "--format",
        "q4_0",
        "--input",
        &t.s("q36.bin"),
        "--shape",
        "2,32",
        "--output",
        &t.s("o"),
        "--dtype",
        "f64",
    ]);
    assert_fails(&o, 2, "dtype");
    let o = qforge(&[
        "dequant",
        "--format",
        "q4_0",
        "--input",
        &t.s("q36.bin"),
        "--shape",
        "2,32",
        "--output",
        &t.s("o"),
        "--device",
        "tpu",
    ]);
    assert_fails(&o, 2, "device");
    let o = qforge(&[
        "dequant",
        "--format",
        "q4_0",
        "--input",
        &t.s("q36.bin"),
        "--shape",
        "2,32",
        "--output",
        &t.s("o"),
        "--group-size",
        "64",
    ]);
    assert_fails(&o, 2, "group");
    let o = qforge(&[
        "dequant",
        "--format",
        "q4_0",
        "--input",
        &t.s("q36.bin"),
        "--shape",
        "2,32",
        "--output",
        &t.s("q36.bin"),
    ]);
    assert_fails(&o, 2, "overwrite");
    assert_eq!(std::fs::read(t.path("q36.bin")).unwrap(), vec![0u8; 36], "input left intact");
    let o = qforge(&["quantize", "--format", "q4_0"]);
    assert_eq!(o.status.code(), Some(2), "missing arguments are a usage error");
}

#[test]
fn failed_output_write_exits_1_and_leaves_nothing() {
    let t = Tmp::new("w");
    write_f32(&t.path("x.f32"), &[0.5; 32]);
    let bad = t.path("no-such-dir").join("out.bin");
    let o = qforge(&[
        "quantize",
        "--format",
        "q8_0",
        "--input",
        &t.s("x.f32"),
        "--shape",
        "1,32",
        "--output",
        &bad.to_string_lossy(),
    ]);
    assert_fails(&o, 1, "cannot create");
    assert!(!bad.exists());
}
