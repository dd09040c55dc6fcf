//! The native dot kernels (tq1_0 / tq2_0 against qforge-k's q8_k) against an f64 reference of
//! the dequantized rows, and their length checks. (Agreement with ggml's own `vec_dot` is the
//! conformance suite's `native_dot_matches_ggml`.)

#[path = "../../qforge-k/tests/support/codes_kernel.rs"]
mod codes_kernel;
#[path = "../../qforge-k/tests/support/dot_props.rs"]
mod dot_props;
#[path = "../../qforge-k/tests/support/packed_kernel.rs"]
mod packed_kernel;

use qforge_core::{BlockFormat, NativeDot};
use qforge_tq::{FORMATS, Tq1_0, Tq2_0};

/// Codes are exact integers, scales f16 / f32: nothing is rounded beyond f32.
#[test]
fn dot_matches_f64_reference() {
    dot_props::dot_matches_f64_reference(FORMATS, qforge_k::FORMATS, |_, _, _, _| 0.0);
}

#[test]
fn wrong_activation_rows_are_rejected() {
    dot_props::wrong_rows_are_rejected(FORMATS, qforge_k::FORMATS);
}

#[test]
fn dot_type_names_the_activation_format() {
    fn check<F: NativeDot>() {
        assert_eq!(F::DESC.dot_type, Some(<F::Act as BlockFormat>::DESC.name), "{}", F::DESC.name);
    }
    check::<Tq1_0>();
    check::<Tq2_0>();
}

#[test]
fn codes_match_decode() {
    codes_kernel::codes_match_decode::<Tq1_0>(1);
    codes_kernel::codes_match_decode::<Tq2_0>(2);
}

#[test]
fn simd_kernels_equal_portable() {
    codes_kernel::kernels_agree::<Tq1_0>(11);
    codes_kernel::kernels_agree::<Tq2_0>(12);
}

#[test]
fn packing_keeps_every_code_and_scale() {
    packed_kernel::pack_keeps_everything::<Tq1_0>(21);
    packed_kernel::pack_keeps_everything::<Tq2_0>(22);
}

#[test]
fn packed_kernels_equal_portable_and_exact() {
    packed_kernel::packed_kernels_agree::<Tq1_0>(31);
    packed_kernel::packed_kernels_agree::<Tq2_0>(32);
}
