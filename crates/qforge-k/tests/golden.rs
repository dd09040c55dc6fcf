//! qforge-k against the golden vectors ggml's own C code produced (tests/golden/gen.py).

use qforge_core::{Format, OutRow, bf16, f16};
use qforge_golden as golden;

fn format(name: &str) -> &'static dyn Format {
    *qforge_k::FORMATS.iter().find(|f| f.desc().name == name).unwrap_or_else(|| panic!("{name} not registered"))
}

const WEIGHT_FORMATS: [&str; 5] = ["q2_k", "q3_k", "q4_k", "q5_k", "q6_k"];

fn dequant(f: &dyn Format, bytes: &[u8], cols: usize) -> Vec<f32> {
    let mut out = vec![0f32; cols];
    f.dequant_row(bytes, OutRow::F32(&mut out)).unwrap();
    out
}

#[test]
fn registry_matches_the_manifest() {
    let names: Vec<_> = qforge_k::FORMATS.iter().map(|f| f.desc().name).collect();
    assert_eq!(names, ["q2_k", "q3_k", "q4_k", "q5_k", "q6_k", "q8_k"]);
    for f in qforge_k::FORMATS {
        let d = f.desc();
        let e = golden::entry(d.name);
        assert_eq!((d.ggml_type, d.block_size, d.block_bytes), (Some(e.ggml_type), e.block_size, e.block_bytes));
        assert_eq!(d.family, "k");
        assert_eq!(d.dot_type, if d.name == "q8_k" { None } else { Some("q8_k") });
    }
}

#[test]
fn decode_random_blocks_bit_exact_in_f32_f16_bf16() {
    let mut saw_nan = false;
    for f in qforge_k::FORMATS {
        let name = f.desc().name;
        let Some(want) = golden::random_f32(name) else { continue };
        let raw = golden::random_blocks(name);
        let got = dequant(*f, &raw, want.len());
        if let Some((i, g, w)) = golden::first_mismatch(&got, &want) {
            panic!("{name}: element {i} (block {}) decodes to {g:e}, ggml gives {w:e}", i / 256);
        }
        saw_nan |= want.iter().any(|v| v.is_nan());

        let mut h = vec![f16::ZERO; want.len()];
        f.dequant_row(&raw, OutRow::F16(&mut h)).unwrap();
        let mut b = vec![bf16::ZERO; want.len()];
        f.dequant_row(&raw, OutRow::Bf16(&mut b)).unwrap();
        for (i, v) in want.iter().enumerate() {
            let (eh, eb) = (f16::from_f32(*v), bf16::from_f32(*v));
            assert!(h[i].to_bits() == eh.to_bits() || (v.is_nan() && h[i].is_nan()), "{name} f16 element {i}");
            assert!(b[i].to_bits() == eb.to_bits() || (v.is_nan() && b[i].is_nan()), "{name} bf16 element {i}");
        }
    }
    assert!(saw_nan, "the random blocks should cover NaN / Inf scales");
}

struct Row {
    dataset: String,
    ours: f64,
    ggml: f64,
    identical: bool,
}

/// Quantizes every dataset row by row and compares with ggml's bytes and RMSE.
fn compare(name: &str, with_imatrix: bool) -> Vec<Row> {
    let f = format(name);
    let m = golden::manifest();
    let cols = m.cols;
    let inputs = golden::inputs();
    let imatrix = golden::imatrix();
    let want = golden::quant(name, with_imatrix).expect("golden quantization missing");
    let rb = f.row_bytes(cols).unwrap();
    let weights = with_imatrix.then_some(&imatrix[..]);
    let mut rows = Vec::new();
    let mut r0 = 0;
    for ds in &m.datasets {
        let x = &inputs[r0 * cols..(r0 + ds.rows) * cols];
        let theirs = &want[r0 * rb..(r0 + ds.rows) * rb];
        let mut ours = vec![0u8; theirs.len()];
        for (xr, qr) in x.chunks_exact(cols).zip(ours.chunks_exact_mut(rb)) {
            f.quantize_row(xr, weights, qr).unwrap();
        }
        let dq = |q: &[u8]| q.chunks_exact(rb).flat_map(|r| dequant(f, r, cols)).collect::<Vec<_>>();
        let err = |y: &[f32]| if with_imatrix { golden::weighted_rmse(x, y, &imatrix) } else { golden::rmse(x, y) };
        rows.push(Row {
            dataset: ds.name.clone(),
            ours: err(&dq(&ours)),
            ggml: err(&dq(theirs)),
            identical: ours == theirs,
        });
        r0 += ds.rows;
    }
    rows
}

fn check_quantizer(with_imatrix: bool) {
    let mut failures = Vec::new();
    for name in WEIGHT_FORMATS {
        for r in compare(name, with_imatrix) {
            println!(
                "{name:5} imatrix={with_imatrix:5} {:13} ours {:.6e} ggml {:.6e} bytes {}",
                r.dataset,
                r.ours,
                r.ggml,
                if r.identical { "identical" } else { "DIFFER" }
            );
            if r.ours.is_nan() || r.ours > r.ggml * (1.0 + 1e-6) {
                failures.push(format!("{name} {}: rmse {} > ggml {}", r.dataset, r.ours, r.ggml));
            }
            if !r.identical {
                failures.push(format!("{name} {}: bytes differ from ggml", r.dataset));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

#[test]
fn quantize_matches_ggml_reference() {
    check_quantizer(false);
}

#[test]
fn quantize_with_imatrix_matches_ggml() {
    check_quantizer(true);
}

#[test]
fn q8_k_quantize_matches_ggml_bytes() {
    let f = format("q8_k");
    let cols = golden::manifest().cols;
    let inputs = golden::inputs();
    let want = golden::quant("q8_k", false).unwrap();
    let rb = f.row_bytes(cols).unwrap();
    let mut got = vec![0u8; want.len()];
    for (x, q) in inputs.chunks_exact(cols).zip(got.chunks_exact_mut(rb)) {
        f.quantize_row(x, None, q).unwrap();
    }
    for (i, (g, w)) in got.chunks_exact(292).zip(want.chunks_exact(292)).enumerate() {
        assert_eq!(g, w, "q8_k block {i} differs from ggml");
    }
}
