//! qforge-iq against the golden vectors ggml's own C code produced (tests/golden/gen.py).

use qforge_core::{Format, OutRow, bf16, f16};
use qforge_golden as golden;

const NAMES: [&str; 9] = ["iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq1_s", "iq1_m", "iq4_nl", "iq4_xs"];

fn format(name: &str) -> &'static dyn Format {
    *qforge_iq::FORMATS.iter().find(|f| f.desc().name == name).unwrap_or_else(|| panic!("{name} not registered"))
}

fn dequant(f: &dyn Format, bytes: &[u8], cols: usize) -> Vec<f32> {
    let mut out = vec![0f32; cols];
    f.dequant_row(bytes, OutRow::F32(&mut out)).unwrap();
    out
}

#[test]
fn registry_matches_the_manifest() {
    let names: Vec<_> = qforge_iq::FORMATS.iter().map(|f| f.desc().name).collect();
    assert_eq!(names, NAMES);
    let mut reg = qforge_core::Registry::new();
    reg.register_all(qforge_iq::FORMATS).unwrap();
    for f in qforge_iq::FORMATS {
        let d = f.desc();
        let e = golden::entry(d.name);
        assert_eq!((d.ggml_type, d.block_size, d.block_bytes), (Some(e.ggml_type), e.block_size, e.block_bytes));
        assert_eq!((d.family, d.role), ("iq", qforge_core::Role::Weight));
        // ggml's type_traits vec_dot_type: q8_0 for iq4_nl (32-blocks), q8_k for the others.
        assert_eq!(d.dot_type, Some(if d.name == "iq4_nl" { "q8_0" } else { "q8_k" }));
        assert!(d.cuda.is_none() && !d.summary.is_empty() && !d.summary.contains('\n'));
    }
}

#[test]
fn decode_random_blocks_bit_exact_in_f32_f16_bf16() {
    let mut saw_nan = false;
    for f in qforge_iq::FORMATS {
        let name = f.desc().name;
        let want = golden::random_f32(name).expect("ggml has a to_float for every I-quant");
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
    assert!(saw_nan, "the random blocks should cover NaN / Inf scales");
}

struct Row {
    dataset: String,
    ours: f64,
    ggml: f64,
    identical: bool,
}

/// Quantizes every dataset row by row and compares with ggml's bytes and (weighted) RMSE.
/// Without an imatrix, the formats ggml refuses to quantize that way are compared with
/// ggml's uniform-imatrix output, which is what qforge does without weights.
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
    let mut differ = Vec::new();
    for name in NAMES {
        for r in compare(name, with_imatrix) {
            println!(
                "{name:7} imatrix={with_imatrix:5} {:13} ours {:.6e} ggml {:.6e} bytes {}",
                r.dataset,
                r.ours,
                r.ggml,
                if r.identical { "identical" } else { "DIFFER" }
            );
            if r.ours.is_nan() || r.ours > r.ggml * (1.0 + 1e-6) {
                failures.push(format!("{name} {}: rmse {} > ggml {}", r.dataset, r.ours, r.ggml));
            }
            if !r.identical {
                differ.push(format!("{name} {}", r.dataset));
            }
        }
    }
    // Every format reproduces ggml's quantizer byte for byte on every dataset: keep it so.
    assert!(failures.is_empty(), "{failures:#?}");
    assert!(differ.is_empty(), "bytes differ from ggml: {differ:#?}");
}

#[test]
fn quantize_matches_ggml_reference() {
    check_quantizer(false);
}

#[test]
fn quantize_with_imatrix_matches_ggml() {
    check_quantizer(true);
}

/// With the skewed golden importance matrix the importance-weighted error drops compared with
/// quantizing without one, for every format (all nine honour importance weights), on every
/// dataset but all-zero (where both are 0). One exception, as in ggml: iq4_xs on the `tiny`
/// dataset (|x| ~ 1e-5), whose super-block scale `max / 32 / 127` underflows f16 to 0 with
/// or without weights, so both decode to zeros.
#[test]
fn imatrix_lowers_the_weighted_error() {
    let m = golden::manifest();
    let cols = m.cols;
    let inputs = golden::inputs();
    let imatrix = golden::imatrix();
    let mut failures = Vec::new();
    for f in qforge_iq::FORMATS {
        let name = f.desc().name;
        let rb = f.row_bytes(cols).unwrap();
        let mut r0 = 0;
        let (mut tot_plain, mut tot_im, mut n) = (0f64, 0f64, 0f64);
        for ds in &m.datasets {
            let x = &inputs[r0 * cols..(r0 + ds.rows) * cols];
            r0 += ds.rows;
            let decode = |w: Option<&[f32]>| {
                let mut y = Vec::with_capacity(x.len());
                for xr in x.chunks_exact(cols) {
                    let mut q = vec![0u8; rb];
                    f.quantize_row(xr, w, &mut q).unwrap();
                    y.extend(dequant(*f, &q, cols));
                }
                y
            };
            let (y_plain, y_im) = (decode(None), decode(Some(&imatrix)));
            let (plain, im) = (golden::weighted_rmse(x, &y_plain, &imatrix), golden::weighted_rmse(x, &y_im, &imatrix));
            if name == "iq4_xs" && ds.name == "tiny" {
                assert!(y_plain.iter().chain(&y_im).all(|v| *v == 0.0), "iq4_xs tiny: the f16 scale should underflow");
                continue;
            }
            if ds.name == "all_zero" {
                assert_eq!((plain, im), (0.0, 0.0));
                continue;
            }
            let rms = golden::weighted_rmse(x, &vec![0.0; x.len()], &imatrix);
            n += 1.0;
            tot_plain += (plain / rms).powi(2);
            tot_im += (im / rms).powi(2);
            println!(
                "{name:7} {:13} weighted rmse without {plain:.6e} with imatrix {im:.6e} ({:+.1}%)",
                ds.name,
                100.0 * (im / plain - 1.0)
            );
            if im.is_nan() || im >= plain {
                failures.push(format!("{name} {}: {im} >= {plain}", ds.name));
            }
        }
        println!(
            "{name:7} mean relative weighted error: {:.4} without, {:.4} with imatrix",
            (tot_plain / n).sqrt(),
            (tot_im / n).sqrt()
        );
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
