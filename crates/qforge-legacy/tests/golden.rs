//! Golden tests against vectors produced by ggml's own C code (tests/golden/gen.py).

use qforge_core::{Format, OutRow, bf16, f16};
use qforge_golden as golden;
use qforge_legacy::FORMATS;

fn format(name: &str) -> &'static dyn Format {
    *FORMATS.iter().find(|f| f.desc().name == name).unwrap_or_else(|| panic!("no format {name}"))
}

fn dequant(f: &dyn Format, bytes: &[u8], cols: usize) -> Vec<f32> {
    let mut out = vec![0f32; cols];
    f.dequant_row(bytes, OutRow::F32(&mut out)).unwrap();
    out
}

/// Decoding ggml's random blocks (NaN / Inf scales included) gives ggml's to_float bit for
/// bit, and f16 / bf16 output is the nearest-even rounding of that f32, bit for bit.
#[test]
fn decode_random_blocks_matches_ggml() {
    let manifest = golden::manifest();
    let mut checked = 0;
    for f in FORMATS {
        let d = f.desc();
        let entry = &manifest.formats[d.name];
        assert_eq!((entry.ggml_type, entry.block_size, entry.block_bytes), (d.ggml_type.unwrap(), 32, d.block_bytes));
        let Some(want) = golden::random_f32(d.name) else {
            assert!(!entry.has_to_float, "{}", d.name);
            continue;
        };
        let raw = golden::random_blocks(d.name);
        let n = entry.random_blocks * 32;
        assert_eq!(want.len(), n);
        let got = dequant(*f, &raw, n);
        if let Some((i, g, w)) = golden::first_mismatch(&got, &want) {
            panic!("{}: element {i} (block {}): got {g:e} ({:#x}), ggml {w:e}", d.name, i / 32, g.to_bits());
        }
        assert!(want.iter().any(|v| v.is_nan()) || d.name == "q8_0" || d.name == "q5_0" || d.name == "q4_0");

        let mut h = vec![f16::ZERO; n];
        f.dequant_row(&raw, OutRow::F16(&mut h)).unwrap();
        let mut b = vec![bf16::ZERO; n];
        f.dequant_row(&raw, OutRow::Bf16(&mut b)).unwrap();
        for (i, v) in got.iter().enumerate() {
            let (eh, eb) = (f16::from_f32(*v), bf16::from_f32(*v));
            assert!(h[i].to_bits() == eh.to_bits() || (h[i].is_nan() && eh.is_nan()), "{} f16 at {i}", d.name);
            assert!(b[i].to_bits() == eb.to_bits() || (b[i].is_nan() && eb.is_nan()), "{} bf16 at {i}", d.name);
        }
        checked += 1;
    }
    assert_eq!(checked, 5, "five legacy formats have a ggml to_float");
}

/// q8_1 has no ggml to_float: its random blocks decode as `d·q` with `d` the f16 scale.
#[test]
fn decode_q8_1_random_blocks_is_d_times_q() {
    let raw = golden::random_blocks("q8_1");
    let got = dequant(format("q8_1"), &raw, raw.len() / 36 * 32);
    for (i, blk) in raw.chunks_exact(36).enumerate() {
        let d = f16::from_le_bytes([blk[0], blk[1]]).to_f32();
        for j in 0..32 {
            let want = f32::from(blk[4 + j] as i8) * d;
            assert!(golden::same_f32(got[i * 32 + j], want), "block {i} element {j}");
        }
    }
}

struct Outcome {
    identical: bool,
    ours: f64,
    ggml: f64,
}

/// Quantize every dataset (row by row, as ggml's `quantize_<type>` does) and compare with
/// ggml's bytes and RMSE. Returns one outcome per dataset.
fn quantize_datasets(name: &str, imatrix: Option<&[f32]>) -> Option<Vec<(String, Outcome)>> {
    let manifest = golden::manifest();
    let ggml_bytes = golden::quant(name, imatrix.is_some())?;
    let f = format(name);
    let cols = manifest.cols;
    let row_bytes = f.row_bytes(cols).unwrap();
    let inputs = golden::inputs();
    let total_rows: usize = manifest.datasets.iter().map(|d| d.rows).sum();
    assert_eq!(inputs.len(), total_rows * cols);
    assert_eq!(ggml_bytes.len(), total_rows * row_bytes);

    let mut ours = vec![0u8; ggml_bytes.len()];
    for (x, q) in inputs.chunks_exact(cols).zip(ours.chunks_exact_mut(row_bytes)) {
        f.quantize_row(x, imatrix, q).unwrap();
    }
    let mut outcomes = Vec::new();
    let mut row = 0;
    for ds in &manifest.datasets {
        let xs = &inputs[row * cols..(row + ds.rows) * cols];
        let span = row * row_bytes..(row + ds.rows) * row_bytes;
        let (o, g) = (&ours[span.clone()], &ggml_bytes[span]);
        let dec = |b: &[u8]| -> Vec<f32> { b.chunks_exact(row_bytes).flat_map(|r| dequant(f, r, cols)).collect() };
        let (yo, yg) = (dec(o), dec(g));
        let err = |y: &[f32]| match imatrix {
            Some(w) => golden::weighted_rmse(xs, y, w),
            None => golden::rmse(xs, y),
        };
        outcomes.push((ds.name.clone(), Outcome { identical: o == g, ours: err(&yo), ggml: err(&yg) }));
        row += ds.rows;
    }
    Some(outcomes)
}

fn check_quantize(imatrix: Option<&[f32]>) {
    let label = if imatrix.is_some() { "imatrix" } else { "plain" };
    let mut failures = Vec::new();
    for f in FORMATS {
        let name = f.desc().name;
        let Some(outcomes) = quantize_datasets(name, imatrix) else { continue };
        for (ds, o) in outcomes {
            println!(
                "{label:8} {name:5} {ds:13} ours {:.6e} ggml {:.6e} bytes {}",
                o.ours,
                o.ggml,
                if o.identical { "identical" } else { "DIFFER" }
            );
            if o.ours > o.ggml * (1.0 + 1e-6) {
                failures.push(format!("{name}/{ds}: RMSE {} > ggml {}", o.ours, o.ggml));
            }
            if !o.identical {
                failures.push(format!("{name}/{ds}: bytes differ from ggml"));
            }
        }
    }
    assert!(failures.is_empty(), "{label}: {failures:#?}");
}

/// Without importance weights: bytes identical to ggml's `quantize_<type>` (and, for q8_1,
/// `quantize_row_q8_1_ref`), hence RMSE equal.
#[test]
fn quantize_matches_ggml() {
    check_quantize(None);
}

/// With the golden imatrix: bytes identical to ggml's `quantize_row_*_impl`; weighted RMSE
/// no worse than ggml's.
#[test]
fn quantize_with_imatrix_matches_ggml() {
    let im = golden::imatrix();
    assert_eq!(im.len(), golden::manifest().cols);
    check_quantize(Some(&im));
}
