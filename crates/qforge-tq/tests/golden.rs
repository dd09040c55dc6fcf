//! qforge-tq against the golden vectors ggml's own C code produced (tests/golden/gen.py): the
//! shared conformance suite, plus what is specific to the two ternary packings.

use qforge_golden as golden;
use qforge_golden::conformance::{amax, dequantize, quantize};
use qforge_tq::{FORMATS, QK_K};

/// While a block's largest magnitude fits an f16 (its scale is that maximum) the decoded
/// values are finite; beyond it ggml stores an infinite scale, and so does qforge.
fn finite_while_the_scale_fits_f16(_: &dyn qforge_core::Format, x: &[f32], y: &[f32]) -> Result<(), String> {
    for (b, (xs, ys)) in x.chunks(QK_K).zip(y.chunks(QK_K)).enumerate() {
        if amax(xs) <= 65504.0 && !ys.iter().all(|v| v.is_finite()) {
            return Err(format!("block {b} (max {}) decodes to non-finite values", amax(xs)));
        }
    }
    Ok(())
}

qforge_golden::conformance_suite!(
    FORMATS,
    names: &["tq1_0", "tq2_0"],
    finite_input_check: Some(finite_while_the_scale_fits_f16),
    // The ternary dots take q8_k activations: check their quantization against ggml's too.
    act_formats: qforge_k::FORMATS,
);

/// ggml ignores importance weights for the ternary formats: no quant_imatrix.bin.
#[test]
fn ggml_ignores_importance_weights() {
    golden::ggml_ignores_importance_weights(FORMATS);
}

/// tq1_0 and tq2_0 quantize with the same scale and codes, so they decode every dataset to
/// the same values (a cross-check of the two packings).
#[test]
fn both_packings_decode_to_the_same_values() {
    let m = golden::manifest();
    let inputs = golden::inputs();
    let decoded: Vec<Vec<f32>> = FORMATS
        .iter()
        .map(|f| inputs.chunks_exact(m.cols).flat_map(|x| dequantize(*f, &quantize(*f, x, None), m.cols)).collect())
        .collect();
    assert!(golden::first_mismatch(&decoded[0], &decoded[1]).is_none());
}
