//! qforge-lowbit against the golden vectors ggml's own C code produced (tests/golden/gen.py:
//! q1_0 from ggml-py, q2_0 from a newer ggml given as QFORGE_GGML_LIB): the shared conformance
//! suite, plus what is specific to the two formats.

use qforge_golden as golden;
use qforge_golden::conformance::{amax, dequantize, quantize};
use qforge_lowbit::FORMATS;

/// Every decoded value is ±d (q1_0) or (c−1)·d (q2_0) with the block's f16 scale, which is
/// finite while the block's scale fits an f16 (q1_0: the mean magnitude, q2_0: the largest).
fn finite_while_the_scale_fits_f16(f: &dyn qforge_core::Format, x: &[f32], y: &[f32]) -> Result<(), String> {
    let bs = f.desc().block_size;
    for (b, (xs, ys)) in x.chunks(bs).zip(y.chunks(bs)).enumerate() {
        let scale = if bs == 128 {
            xs.iter().map(|v| f64::from(v.abs())).sum::<f64>() / xs.len() as f64
        } else {
            f64::from(amax(xs))
        };
        if scale <= 65504.0 && !ys.iter().all(|v| v.is_finite()) {
            return Err(format!("block {b} (scale {scale}) decodes to non-finite values"));
        }
    }
    Ok(())
}

qforge_golden::conformance_suite!(
    FORMATS,
    names: &["q1_0", "q2_0"],
    finite_input_check: Some(finite_while_the_scale_fits_f16),
    // The scale and the refinement of a block use that block's elements and weights only.
    weighted_blocks_independent: true,
    // The dots take q8_0 activations: check their quantization against ggml's too.
    act_formats: qforge_legacy::FORMATS,
);

#[test]
fn ggml_ignores_importance_weights_and_the_files_say_where_they_came_from() {
    golden::ggml_ignores_importance_weights(FORMATS);
    let m = golden::manifest();
    for f in FORMATS {
        let name = f.desc().name;
        let e = golden::entry(name);
        assert!(m.ggml_libraries.contains(&e.ggml), "{name}: made by {:?}", e.ggml);
        assert!(m.ggml_types.contains_key(name), "{name} is in ggml's type table");
    }
}

/// Whole blocks of the golden data decode to exactly what the formulas say, from the input
/// alone: q1_0 `±f16(Σ|x|/128)` by sign, q2_0 `(c−1)·f16(amax)`.
#[test]
fn golden_blocks_follow_the_formulas() {
    let m = golden::manifest();
    let inputs = golden::inputs();
    for f in FORMATS {
        let bs = f.desc().block_size;
        let y: Vec<f32> =
            inputs.chunks_exact(m.cols).flat_map(|x| dequantize(*f, &quantize(*f, x, None), m.cols)).collect();
        for (xs, ys) in inputs.chunks_exact(bs).zip(y.chunks_exact(bs)) {
            if bs == 128 {
                let d = half::f16::from_f32(xs.iter().map(|v| v.abs()).sum::<f32>() / 128.0).to_f32();
                for (&x, &v) in xs.iter().zip(ys) {
                    assert_eq!(v.to_bits(), if x >= 0.0 { d } else { -d }.to_bits());
                }
            } else {
                let d = half::f16::from_f32(amax(xs)).to_f32();
                for &v in ys {
                    assert!([-d, 0.0, d, 2.0 * d].contains(&v), "{v} is not a level of {d}");
                }
            }
        }
    }
}
