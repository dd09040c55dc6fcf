//! The native dot kernels (q2_k … q6_k against q8_k, and qforge's own q8_k · q8_k) against an
//! f64 reference of the dequantized rows, and their length checks. (Agreement with ggml's own
//! `vec_dot` is the conformance suite's `native_dot_matches_ggml`.)

mod support;
use support::{codes_kernel, dot_props, packed_kernel};

use qforge_core::{BlockFormat, Format, NativeDot};
use qforge_k::dot::Q8KCodes;
use qforge_k::*;

/// `RTOL · Σ_i |dmin·min(i)·a_i|`: the min terms of an affine K-quant (q2_k, q4_k, q5_k)
/// count towards the magnitude of the sum (a weight near 0 is the difference of two rounded
/// f32 values, in the dequantization as in the kernel). q8_k's `bsums` are exact integers and
/// its scale is f32, so nothing else is rounded beyond f32.
pub fn min_terms(f: &dyn Format, w: &[u8], _a: &[u8], ad: &[f32]) -> f64 {
    fn mags<F: Q8KCodes>(w: &[u8], ad: &[f32]) -> f64 {
        let blocks: &[F::Block] = bytemuck::cast_slice(w);
        let mut sum = 0.0;
        for (b, ad) in blocks.iter().zip(ad.chunks_exact(QK_K)) {
            let dmin = F::d_dmin(b)[1].get();
            let (_, mins) = F::scales(b);
            for (&m, a) in mins.iter().zip(ad.chunks_exact(16)) {
                let a: f64 = a.iter().map(|v| f64::from(v.abs())).sum();
                sum += (f64::from(dmin) * f64::from(m)).abs() * a;
            }
        }
        dot_props::RTOL * sum
    }
    match f.desc().name {
        "q2_k" => mags::<Q2K>(w, ad),
        "q4_k" => mags::<Q4K>(w, ad),
        "q5_k" => mags::<Q5K>(w, ad),
        _ => 0.0,
    }
}

#[test]
fn dot_matches_f64_reference() {
    dot_props::dot_matches_f64_reference(FORMATS, &[], min_terms);
}

#[test]
fn wrong_activation_rows_are_rejected() {
    dot_props::wrong_rows_are_rejected(FORMATS, &[]);
}

#[test]
fn dot_type_names_the_activation_format() {
    fn check<F: NativeDot>() {
        assert_eq!(F::DESC.dot_type, Some(<F::Act as BlockFormat>::DESC.name), "{}", F::DESC.name);
    }
    check::<Q2K>();
    check::<Q3K>();
    check::<Q4K>();
    check::<Q5K>();
    check::<Q6K>();
    check::<Q8K>();
}

#[test]
fn codes_match_decode() {
    codes_kernel::codes_match_decode::<Q2K>(1);
    codes_kernel::codes_match_decode::<Q3K>(2);
    codes_kernel::codes_match_decode::<Q4K>(3);
    codes_kernel::codes_match_decode::<Q5K>(4);
    codes_kernel::codes_match_decode::<Q6K>(5);
}

#[test]
fn simd_kernels_equal_portable() {
    codes_kernel::kernels_agree::<Q2K>(11);
    codes_kernel::kernels_agree::<Q3K>(12);
    codes_kernel::kernels_agree::<Q4K>(13);
    codes_kernel::kernels_agree::<Q5K>(14);
    codes_kernel::kernels_agree::<Q6K>(15);
}

#[test]
fn packing_keeps_every_code_and_scale() {
    packed_kernel::pack_keeps_everything::<Q2K>(21);
    packed_kernel::pack_keeps_everything::<Q3K>(22);
    packed_kernel::pack_keeps_everything::<Q4K>(23);
    packed_kernel::pack_keeps_everything::<Q5K>(24);
    packed_kernel::pack_keeps_everything::<Q6K>(25);
}

#[test]
fn packed_kernels_equal_portable_and_exact() {
    packed_kernel::packed_kernels_agree::<Q2K>(31);
    packed_kernel::packed_kernels_agree::<Q3K>(32);
    packed_kernel::packed_kernels_agree::<Q4K>(33);
    packed_kernel::packed_kernels_agree::<Q5K>(34);
    packed_kernel::packed_kernels_agree::<Q6K>(35);
}
