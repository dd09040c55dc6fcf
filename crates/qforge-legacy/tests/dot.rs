//! The native dot kernels (q4_0 … q8_0 against q8_0 / q8_1, and qforge's own q8_1 · q8_1)
//! against an f64 reference of the dequantized rows, and their length checks. (Agreement
//! with ggml's own `vec_dot` is the conformance suite's `native_dot_matches_ggml`.)

#[path = "../../qforge-k/tests/support/dot_props.rs"]
mod dot_props;

use qforge_core::{Format, f16};
use qforge_legacy::FORMATS;

/// q4_1 / q5_1 · q8_1: the min terms `m_w·a` count towards the magnitude of the sum, and
/// ggml's formula adds `m_w · s_a` with q8_1's stored `s = f16(d·Σq)` (f32 `d`) instead of
/// the exact `f16(d)·Σq` of the dequantized row: up to two f16 roundings of that term.
fn min_terms(f: &dyn Format, w: &[u8], a: &[u8], ad: &[f32]) -> f64 {
    let d = f.desc();
    if !(d.name == "q4_1" || d.name == "q5_1") {
        return 0.0;
    }
    let h = |b: &[u8], i: usize| f64::from(f16::from_le_bytes([b[i], b[i + 1]]).to_f32()).abs();
    let blocks = w.chunks_exact(d.block_bytes).zip(a.chunks_exact(36)).zip(ad.chunks_exact(32));
    blocks
        .map(|((w, a), ad)| {
            let sum_abs: f64 = ad.iter().map(|v| f64::from(v.abs())).sum();
            h(w, 2) * (h(a, 2) * 2f64.powi(-10) + dot_props::RTOL * sum_abs + 2f64.powi(-24))
        })
        .sum()
}

#[test]
fn dot_matches_f64_reference() {
    dot_props::dot_matches_f64_reference(FORMATS, &[], min_terms);
}

#[test]
fn wrong_activation_rows_are_rejected() {
    dot_props::wrong_rows_are_rejected(FORMATS, &[]);
}
