//! qforge-tq against the golden vectors ggml's own C code produced (tests/golden/gen.py).

use qforge_core::{Format, OutRow, bf16, f16};
use qforge_golden as golden;
use qforge_tq::FORMATS;

fn dequant(f: &dyn Format, bytes: &[u8], cols: usize) -> Vec<f32> {
    let mut out = vec![0f32; cols];
    f.dequant_row(bytes, OutRow::F32(&mut out)).unwrap();
    out
}

#[test]
fn registry_matches_the_manifest() {
    let names: Vec<_> = FORMATS.iter().map(|f| f.desc().name).collect();
    assert_eq!(names, ["tq1_0", "tq2_0"]);
    for f in FORMATS {
        let d = f.desc();
        let e = golden::entry(d.name);
        assert_eq!((d.ggml_type, d.block_size, d.block_bytes), (Some(e.ggml_type), e.block_size, e.block_bytes));
        assert!(e.has_to_float && !e.uniform_imatrix);
    }
}

/// ggml's random blocks (NaN / Inf f16 scales, every code byte, tq2_0's unused code 3)
/// decode bit for bit in f32, and f16 / bf16 are the nearest-even rounding of that f32 value.
#[test]
fn decode_random_blocks_bit_exact_in_f32_f16_bf16() {
    let mut saw_nan = false;
    for f in FORMATS {
        let name = f.desc().name;
        let want = golden::random_f32(name).expect("ggml has a to_float");
        let raw = golden::random_blocks(name);
        let got = dequant(*f, &raw, want.len());
        if let Some((i, g, w)) = golden::first_mismatch(&got, &want) {
            panic!("{name}: element {i} (block {}) decodes to {g:e}, ggml gives {w:e}", i / f.desc().block_size);
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
    assert!(saw_nan, "the random blocks should include NaN / Inf scales");
}

struct Row {
    dataset: String,
    ours: f64,
    ggml: f64,
    identical: bool,
}

/// Quantizes every dataset row by row (as ggml's `quantize_<type>` does) and compares with
/// ggml's bytes and RMSE.
fn compare(f: &dyn Format) -> Vec<Row> {
    let name = f.desc().name;
    let m = golden::manifest();
    let cols = m.cols;
    let inputs = golden::inputs();
    let want = golden::quant(name, false).expect("golden quantization missing");
    assert!(golden::quant(name, true).is_none(), "ggml ignores importance weights for {name}");
    let rb = f.row_bytes(cols).unwrap();
    let mut rows = Vec::new();
    let mut r0 = 0;
    for ds in &m.datasets {
        let x = &inputs[r0 * cols..(r0 + ds.rows) * cols];
        let theirs = &want[r0 * rb..(r0 + ds.rows) * rb];
        let mut ours = vec![0u8; theirs.len()];
        for (xr, qr) in x.chunks_exact(cols).zip(ours.chunks_exact_mut(rb)) {
            f.quantize_row(xr, None, qr).unwrap();
        }
        let dq = |q: &[u8]| q.chunks_exact(rb).flat_map(|r| dequant(f, r, cols)).collect::<Vec<_>>();
        rows.push(Row {
            dataset: ds.name.clone(),
            ours: golden::rmse(x, &dq(&ours)),
            ggml: golden::rmse(x, &dq(theirs)),
            identical: ours == theirs,
        });
        r0 += ds.rows;
    }
    rows
}

/// Without importance weights the bytes are ggml's, dataset by dataset (hence equal RMSE).
#[test]
fn quantize_matches_ggml_bytes() {
    let mut failures = Vec::new();
    for f in FORMATS {
        let name = f.desc().name;
        for r in compare(*f) {
            println!(
                "{name:5} {:13} ours {:.6e} ggml {:.6e} bytes {}",
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

/// With the golden importance matrix (which ggml ignores for the ternary formats), the weighted RMSE is no
/// worse than that of ggml's bytes on any dataset, and strictly better somewhere.
#[test]
fn quantize_with_imatrix_is_no_worse_than_ggml() {
    let m = golden::manifest();
    let (cols, inputs, im) = (m.cols, golden::inputs(), golden::imatrix());
    let mut improved = 0;
    for f in FORMATS {
        let name = f.desc().name;
        let want = golden::quant(name, false).unwrap();
        let rb = f.row_bytes(cols).unwrap();
        let mut r0 = 0;
        for ds in &m.datasets {
            let x = &inputs[r0 * cols..(r0 + ds.rows) * cols];
            let (mut ours, mut theirs) = (Vec::new(), Vec::new());
            for (i, xr) in x.chunks_exact(cols).enumerate() {
                let mut q = vec![0u8; rb];
                f.quantize_row(xr, Some(&im), &mut q).unwrap();
                ours.extend(dequant(*f, &q, cols));
                theirs.extend(dequant(*f, &want[(r0 + i) * rb..(r0 + i + 1) * rb], cols));
            }
            let (o, g) = (golden::weighted_rmse(x, &ours, &im), golden::weighted_rmse(x, &theirs, &im));
            println!("{name:5} imatrix {:13} ours {o:.6e} ggml {g:.6e}", ds.name);
            assert!(o <= g * (1.0 + 1e-6) + 1e-30, "{name} {}: weighted rmse {o} > ggml {g}", ds.name);
            improved += usize::from(o < g * (1.0 - 1e-4));
            r0 += ds.rows;
        }
    }
    assert!(improved > 0, "importance weights should help somewhere");
}

/// tq1_0 and tq2_0 quantize with the same scale and codes, so they decode every dataset to
/// the same values (a cross-check of the two packings).
#[test]
fn both_packings_decode_to_the_same_values() {
    let m = golden::manifest();
    let inputs = golden::inputs();
    let decoded: Vec<Vec<f32>> = FORMATS
        .iter()
        .map(|f| {
            let rb = f.row_bytes(m.cols).unwrap();
            inputs
                .chunks_exact(m.cols)
                .flat_map(|x| {
                    let mut q = vec![0u8; rb];
                    f.quantize_row(x, None, &mut q).unwrap();
                    dequant(*f, &q, m.cols)
                })
                .collect()
        })
        .collect();
    assert!(golden::first_mismatch(&decoded[0], &decoded[1]).is_none());
}
