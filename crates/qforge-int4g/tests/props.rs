//! int4g properties: every property of the conformance suite (`property_suite!`: the checks
//! against ggml's vectors need a ggml type, which int4g is not), plus the format's own bounds, the importance
//! weights and the A8W4 dot against an f64 reference.

use proptest::prelude::*;
use qforge_core::{ActKind, ActRow, DType, Format, OutRow, Params, QuantError};
use qforge_golden::conformance as c;
use qforge_int4g::{Bf16Scale, F16Scale, F32Scale, FORMATS, GROUP_SIZES, Int4gFormat, lookup};

/// A spread of variants: every scale dtype, the smallest and largest group.
static VARIANTS: &[&dyn Format] = &[
    &Int4gFormat::<F32Scale, 16>::NEW,
    &Int4gFormat::<F16Scale, 64>::NEW,
    &Int4gFormat::<Bf16Scale, 128>::NEW,
    &Int4gFormat::<F16Scale, 2048>::NEW,
];

fn no_nan(_: &dyn Format, _: &[f32], y: &[f32]) -> Result<(), String> {
    match y.iter().position(|v| !v.is_finite()) {
        Some(i) => Err(format!("element {i} decodes to {}", y[i])),
        None => Ok(()),
    }
}

// Every property of the conformance suite that needs no ggml vectors, as the block formats
// run them.
qforge_golden::property_suite!(
    VARIANTS,
    cases: 48,
    weighted_blocks_independent: true,
    finite_input_check: Some(no_nan),
);

fn all_variants() -> impl Iterator<Item = &'static dyn Format> {
    GROUP_SIZES.into_iter().flat_map(|g| DType::ALL.map(|d| lookup(g, d).unwrap()))
}

/// The f32 scale of group `i` of a quantized row.
fn scale_of(f: &dyn Format, q: &[u8], i: usize) -> f64 {
    let d = f.desc();
    let b = &q[i * d.block_bytes..];
    f64::from(match f.params().scale_dtype.unwrap() {
        DType::F32 => f32::from_le_bytes(b[..4].try_into().unwrap()),
        DType::F16 => half::f16::from_le_bytes([b[0], b[1]]).to_f32(),
        DType::Bf16 => half::bf16::from_le_bytes([b[0], b[1]]).to_f32(),
    })
}

/// Gaussian-ish deterministic data (Box-Muller on an LCG), standard deviation 1.
fn gaussian(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    let mut u = || {
        s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        ((s >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    };
    (0..n).map(|_| ((-2.0 * u().ln()).sqrt() * (std::f64::consts::TAU * u()).cos()) as f32).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// |w − ŵ| ≤ scale/2 for every value that is not clamped, and a partial last group takes
    /// its scale from its real elements: scale = RNE(max(amax/7.5, 2^-23)).
    #[test]
    fn error_within_half_a_scale(x in c::values(600), gi in 0..GROUP_SIZES.len(), di in 0..3usize) {
        let f = lookup(GROUP_SIZES[gi], DType::ALL[di]).unwrap();
        let g = f.desc().block_size;
        let q = c::quantize(f, &x, None);
        let y = c::dequantize(f, &q, x.len());
        for (i, (xs, ys)) in x.chunks(g).zip(y.chunks(g)).enumerate() {
            let s = scale_of(f, &q, i);
            let amax = c::amax(xs);
            let want = (amax / 7.5).clamp(f32::EPSILON, qforge_int4g::SCALE_MAX);
            let rounded = match DType::ALL[di] {
                DType::F32 => want,
                DType::F16 => half::f16::from_f32(want).to_f32(),
                DType::Bf16 => half::bf16::from_f32(want).to_f32(),
            };
            prop_assert_eq!(s, f64::from(rounded), "group {} of {}", i, x.len());
            for (&a, &b) in xs.iter().zip(ys) {
                let r = f64::from(a) / s;
                let err = (f64::from(a) - f64::from(b)).abs();
                if (-8.5..=7.5).contains(&r) {
                    prop_assert!(err <= s / 2.0 * (1.0 + 1e-6) + 1e-30, "{} -> {} (scale {})", a, b, s);
                } else {
                    // Clamped: only when rounding the scale down pushed |w|/scale past 7.5, by
                    // at most the scale dtype's relative rounding error (2^-9 for bf16).
                    prop_assert!(err <= s / 2.0 + f64::from(amax) * 2f64.powi(-8), "{} -> {} (scale {})", a, b, s);
                }
            }
        }
    }

    /// Importance weights never raise the weighted error of any group above torchao's
    /// (unweighted) encoding.
    #[test]
    fn importance_weights_only_lower_the_weighted_error(
        (x, w) in c::values_and_weights(600), gi in 0..4usize, di in 0..3usize,
    ) {
        let f = lookup(GROUP_SIZES[gi], DType::ALL[di]).unwrap();
        let g = f.desc().block_size;
        let plain = c::dequantize(f, &c::quantize(f, &x, None), x.len());
        let weighted = c::dequantize(f, &c::quantize(f, &x, Some(&w)), x.len());
        let sse = |y: &[f32], r: std::ops::Range<usize>| -> f64 {
            r.map(|i| f64::from(w[i]) * (f64::from(x[i]) - f64::from(y[i])).powi(2)).sum()
        };
        for start in (0..x.len()).step_by(g) {
            let r = start..(start + g).min(x.len());
            prop_assert!(sse(&weighted, r.clone()) <= sse(&plain, r.clone()), "group at {}", start);
        }
    }

    /// The A8W4 dot equals the f64 dot of the dequantized weights with the dequantized
    /// activations, to f32 accumulation error; padded positions contribute nothing.
    #[test]
    fn a8w4_dot_matches_f64_reference(
        x in c::values(700), a in prop::collection::vec(any::<i8>(), 4096), zp in -128i32..=127,
        ascale in 1e-3f32..10.0, gi in 0..GROUP_SIZES.len(), di in 0..3usize,
    ) {
        let f = lookup(GROUP_SIZES[gi], DType::ALL[di]).unwrap();
        prop_assert_eq!(f.native_act(), ActKind::Int8Dyn);
        let q = c::quantize(f, &x, None);
        let padded = f.desc().blocks_per_row(x.len()) * f.desc().block_size;
        let act = &a[..padded];
        let got = f.dot_row(&q, 0, &[], ActRow::Int8 { q: act, scale: ascale, zero_point: zp }).unwrap().unwrap();
        let mut wf = vec![0f32; padded];
        f.dequant_row(&q, OutRow::F32(&mut wf)).unwrap_or_else(|e| panic!("{e}"));
        let terms: Vec<f64> = wf.iter().zip(act)
            .map(|(&w, &qa)| f64::from(w) * f64::from(ascale) * f64::from(i32::from(qa) - zp)).collect();
        let want: f64 = terms.iter().sum();
        let mag: f64 = terms.iter().map(|t| t.abs()).sum();
        prop_assert!((f64::from(got) - want).abs() <= 1e-5 * mag + 1e-30, "got {} want {} (mag {})", got, want, mag);
        // Garbage in the activation's padded positions changes nothing.
        let mut act2 = act.to_vec();
        for v in &mut act2[x.len()..] { *v = 127; }
        let got2 = f.dot_row(&q, 0, &[], ActRow::Int8 { q: &act2, scale: ascale, zero_point: zp }).unwrap().unwrap();
        prop_assert_eq!(got.to_bits(), got2.to_bits());
    }
}

#[test]
fn dot_lengths_and_kinds_are_checked() {
    for f in all_variants() {
        let q = c::quantize(f, &[1.0; 100], None);
        let n = f.desc().blocks_per_row(100) * f.desc().block_size;
        let a = vec![1i8; n + 1];
        let dot = |q8: &[i8], zp| f.dot_row(&q, 0, &[], ActRow::Int8 { q: q8, scale: 1.0, zero_point: zp });
        assert!(matches!(dot(&a[..n - 1], 0), Some(Err(QuantError::ShapeMismatch { .. }))));
        assert!(matches!(dot(&a, 0), Some(Err(QuantError::ShapeMismatch { .. }))));
        assert!(matches!(dot(&a[..n], 128), Some(Err(QuantError::Unsupported { .. }))));
        // 100 ones: amax 1, scale 1/7.5 → q = 7 (7.5 rounds to 8, clamped), ŵ = 7 · scale.
        let got = dot(&a[..n], 0).unwrap().unwrap();
        let s = scale_of(f, &q, 0);
        assert!((f64::from(got) - 700.0 * s).abs() < 1e-3, "{got}");
        assert!(f.dot_row(&q, 0, &[], ActRow::Blocks(&[])).is_none());
        assert!(f.dot_row(&q, 0, &[], ActRow::Fp8 { q: &[], scales: &[] }).is_none());
        // A row of the wrong byte length is a typed error.
        assert!(matches!(
            f.dot_row(&q[1..], 0, &[], ActRow::Int8 { q: &a[..n], scale: 1.0, zero_point: 0 }),
            Some(Err(_))
        ));
    }
}

#[test]
fn nibble_order_is_q4_0s() {
    for f in all_variants() {
        let g = f.desc().block_size;
        let sb = f.params().scale_dtype.unwrap().size();
        // amax 7.5 → scale 1 exactly in every dtype: element i = q value.
        let mut x = vec![0f32; g];
        x[0] = 7.5; // q = 8 → clamped to 7 (half to even gives 8)
        x[1] = -3.0;
        x[g / 2] = 5.0;
        x[g - 1] = -7.0;
        let q = c::quantize(f, &x, None);
        assert_eq!(scale_of(f, &q, 0), 1.0);
        assert_eq!(q[sb], (7 + 8) | ((5 + 8) << 4), "byte 0: element 0 low, element g/2 high");
        assert_eq!(q[sb + 1], (8 - 3) | (8 << 4));
        assert_eq!(q[sb + g / 2 - 1], 8 | (1 << 4), "element g-1: high nibble of the last byte");
        assert_eq!(c::dequantize(f, &q, g)[g - 1], -7.0);
    }
}

#[test]
fn ties_round_half_to_even() {
    let f = lookup(32, DType::F32).unwrap();
    let x: Vec<f32> = [7.5f32, 0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5, 6.5, -6.5].to_vec();
    let y = c::dequantize(f, &c::quantize(f, &x, None), x.len());
    assert_eq!(y, [7.0, 0.0, 2.0, 2.0, -0.0, -2.0, -2.0, 4.0, 6.0, -6.0]);
}

#[test]
fn f16_scales_saturate_instead_of_overflowing() {
    let f = FORMATS[0];
    let x = [1e7f32, -3e6, 0.5];
    let q = c::quantize(f, &x, None);
    assert_eq!(scale_of(f, &q, 0), 65504.0);
    let y = c::dequantize(f, &q, 3);
    assert_eq!(y, [7.0 * 65504.0, -8.0 * 65504.0, 0.0]);
}

#[test]
fn huge_f32_scales_stay_decodable() {
    for dt in DType::ALL {
        let f = lookup(64, dt).unwrap();
        let x = [f32::MAX, -f32::MAX, 1.0];
        let q = c::quantize(f, &x, None);
        let y = c::dequantize(f, &q, 3);
        assert!(y.iter().all(|v| v.is_finite()), "{dt}: {y:?}");
        assert!(y[0] > 0.0 && y[1] < 0.0, "{dt}: {y:?}");
    }
}

#[test]
fn params_round_trip_through_the_registry_instance() {
    let f = FORMATS[0];
    assert_eq!(f.params(), Params { group_size: Some(128), scale_dtype: Some(DType::F16) });
    let v = f.with_params(&Params { group_size: Some(256), scale_dtype: Some(DType::Bf16) }).unwrap();
    assert_eq!((v.desc().name, v.desc().block_size, v.desc().block_bytes), ("int4g", 256, 130));
    let e = f.with_params(&Params::group_size(48)).unwrap_err();
    assert!(e.to_string().contains("48") && e.to_string().contains("power of two"), "{e}");
}

/// RMSE on unit gaussian data per group size and scale dtype (printed: docs figures).
#[test]
fn gaussian_rmse_per_group_size() {
    let x = gaussian(64 * 4096, 7);
    let mut prev = 0.0;
    for g in GROUP_SIZES {
        let mut line = format!("int4g g{g:<5}");
        for dt in DType::ALL {
            let f = lookup(g, dt).unwrap();
            let y = c::dequantize(f, &c::quantize(f, &x, None), x.len());
            let rmse = (x.iter().zip(&y).map(|(a, b)| f64::from(a - b).powi(2)).sum::<f64>() / x.len() as f64).sqrt();
            line += &format!("  {dt} {rmse:.5}");
            if dt == DType::F16 {
                assert!(rmse >= prev && rmse < 0.16, "g{g}: rmse {rmse}");
                prev = rmse;
            }
        }
        println!("{line}");
    }
}

#[test]
fn importance_weights_help_on_gaussian_data() {
    let x = gaussian(32 * 1024, 11);
    let w: Vec<f32> = gaussian(x.len(), 12).iter().map(|v| v * v + 0.01).collect();
    for g in [32, 128, 1024] {
        let f = lookup(g, DType::F16).unwrap();
        let err = |y: &[f32]| -> f64 {
            x.iter().zip(y).zip(&w).map(|((a, b), wi)| f64::from(*wi) * f64::from(a - b).powi(2)).sum()
        };
        let plain = err(&c::dequantize(f, &c::quantize(f, &x, None), x.len()));
        let weighted = err(&c::dequantize(f, &c::quantize(f, &x, Some(&w)), x.len()));
        println!("int4g g{g}: weighted sse without imatrix {plain:.4}, with {weighted:.4}");
        assert!(weighted < 0.97 * plain, "g{g}: {weighted} vs {plain}");
    }
}
