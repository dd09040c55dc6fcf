//! The I-quants' native dots (q8_k; q8_0 for iq4_nl) against the f64 dot of the dequantized
//! rows, on quantized and on arbitrary weight blocks; ggml's own results are checked by the
//! conformance suite (tests/golden.rs, `native_dot_matches_ggml`).

#[path = "support/native_dot.rs"]
mod native_dot;

use proptest::prelude::*;
use qforge_core::Format;
use qforge_golden::conformance::values;

fn acts() -> Vec<&'static dyn Format> {
    qforge_k::FORMATS.iter().chain(qforge_legacy::FORMATS).copied().collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Rows of 1..=4 blocks quantized from every value shape, quantized activations.
    #[test]
    fn dot_matches_the_f64_reference(x in values(1024), a in values(1024)) {
        native_dot::check_quantized(qforge_iq::FORMATS, &acts(), &x, &a).map_err(TestCaseError::fail)?;
    }

    /// Arbitrary weight bytes (NaN / Inf scales included): never a panic; where every weight
    /// decodes finite, the f64 reference.
    #[test]
    fn arbitrary_weight_blocks(bytes in prop::collection::vec(any::<u8>(), 4 * 136), nb in 1usize..=4, a in values(1024)) {
        native_dot::check_arbitrary(qforge_iq::FORMATS, &acts(), &bytes, nb, &a).map_err(TestCaseError::fail)?;
    }
}
