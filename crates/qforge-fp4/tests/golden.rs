//! qforge-fp4 against the golden vectors ggml's own C code produced (tests/golden/gen.py): the
//! shared conformance suite, plus what is specific to mxfp4 / nvfp4.

use qforge_fp4::FORMATS;
use qforge_golden as golden;

/// Finite input, however large or small, never decodes to NaN.
fn no_nan(_: &dyn qforge_core::Format, _: &[f32], y: &[f32]) -> Result<(), String> {
    match y.iter().position(|v| v.is_nan()) {
        Some(i) => Err(format!("element {i} decodes to NaN")),
        None => Ok(()),
    }
}

qforge_golden::conformance_suite!(
    FORMATS,
    names: &["mxfp4", "nvfp4"],
    // ggml's random mxfp4 blocks include E8M0 0xFF = 2^127, which overflows to Inf.
    random_covers: ("Inf", f32::is_infinite),
    // fp4 scales come from each block's own elements and weights only.
    weighted_blocks_independent: true,
    finite_input_check: Some(no_nan),
    // q8_0, the activation format of both native dots (checked against ggml's from_float).
    act_formats: qforge_legacy::FORMATS,
);

/// ggml ignores importance weights for fp4: no quant_imatrix.bin.
#[test]
fn ggml_ignores_importance_weights() {
    golden::ggml_ignores_importance_weights(FORMATS);
}
