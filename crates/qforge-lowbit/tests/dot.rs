//! The native dot kernels (q1_0 / q2_0 against qforge-legacy's q8_0) against an f64 reference
//! of the dequantized rows, mat-mul rows against mat-vec, and the length checks. (Agreement with
//! ggml's own `vec_dot` is the conformance suite's `native_dot_matches_ggml`.)

#[path = "../../qforge-k/tests/support/dot_props.rs"]
mod dot_props;

use proptest::prelude::*;
use qforge_core::{ActRow, BlockFormat, NativeDot};
use qforge_golden::conformance::{quantize, values};
use qforge_lowbit::{FORMATS, Q1_0, Q2_0};

/// Codes are exact integers, scales f16: nothing is rounded beyond f32.
#[test]
fn dot_matches_f64_reference() {
    dot_props::dot_matches_f64_reference(FORMATS, qforge_legacy::FORMATS, |_, _, _, _| 0.0);
}

#[test]
fn wrong_activation_rows_are_rejected() {
    dot_props::wrong_rows_are_rejected(FORMATS, qforge_legacy::FORMATS);
}

#[test]
fn dot_type_names_the_activation_format() {
    fn check<F: NativeDot>() {
        assert_eq!(F::DESC.dot_type, Some(<F::Act as BlockFormat>::DESC.name), "{}", F::DESC.name);
    }
    check::<Q1_0>();
    check::<Q2_0>();
}

proptest! {
    /// `dot_rows` (each weight block unpacked once for up to 8 rows, and past 8) gives the bits
    /// of `dot_row` on each activation row.
    #[test]
    fn dot_rows_are_dot_row_bit_for_bit(w in values(512), seeds in prop::collection::vec(any::<u64>(), 1..12)) {
        let q8 = qforge_golden::conformance::find(qforge_legacy::FORMATS, "q8_0");
        for f in FORMATS {
            let padded = w.len().div_ceil(f.desc().block_size) * f.desc().block_size;
            let wq = quantize(*f, &w, None);
            let acts: Vec<Vec<u8>> = seeds.iter().map(|&s| quantize(q8, &qforge_golden::signal(padded, s), None)).collect();
            let rows: Vec<ActRow<'_>> = acts.iter().map(|a| ActRow::Blocks(a)).collect();
            let mut out = vec![0f32; rows.len()];
            f.dot_rows(&wq, 0, &[], &rows, &mut out).unwrap().unwrap();
            for (o, r) in out.iter().zip(&rows) {
                let one = f.dot_row(&wq, 0, &[], *r).unwrap().unwrap();
                prop_assert_eq!(o.to_bits(), one.to_bits(), "{}", f.desc().name);
            }
        }
    }
}
