//! Hand-checked cases, and proptests that the lane-shaped generic searches equal a plain,
//! sequential reading of ggml's C (`ggml-quants.c`), transcribed below as literally as Rust
//! allows: one loop per C loop, codes as `int`, `MAX(-nmax, MIN(nmax - 1, l))` as written.

// The references keep ggml's index loops on purpose.
#![allow(clippy::needless_range_loop)]

use super::*;
use proptest::prelude::*;

// ---- straightforward transcriptions of ggml ------------------------------------------------

fn ref_clamp(lo: i32, hi: i32, l: i32) -> i32 {
    let l = if hi < l { hi } else { l };
    if lo > l { lo } else { l }
}

/// `make_qx_quants(n, nmax, x, L, rmse_type = 1, qw)`.
fn ref_qx(x: &[f32], nmax: i32, qw: Option<&[f32]>) -> (f32, Vec<i32>) {
    let n = x.len();
    let mut l_out = vec![0i32; n];
    let (mut max, mut amax) = (0.0f32, 0.0f32);
    for &v in x {
        let ax = v.abs();
        if ax > amax {
            amax = ax;
            max = v;
        }
    }
    if amax < GROUP_MAX_EPS {
        return (0.0, l_out);
    }
    let weight = |i: usize| match qw {
        Some(w) => w[i],
        None => x[i] * x[i],
    };
    let mut iscale = -(nmax as f32) / max;
    let (mut sumlx, mut suml2) = (0.0f32, 0.0f32);
    for i in 0..n {
        let l = ref_clamp(-nmax, nmax - 1, nearest_int(iscale * x[i]));
        l_out[i] = l + nmax;
        let w = weight(i);
        sumlx += w * x[i] * l as f32;
        suml2 += w * l as f32 * l as f32;
    }
    let mut scale = if suml2 != 0.0 { sumlx / suml2 } else { 0.0 };
    let mut best = scale * sumlx;
    for is in -9..=9 {
        if is == 0 {
            continue;
        }
        iscale = -(nmax as f32 + 0.1f32 * is as f32) / max;
        sumlx = 0.0;
        suml2 = 0.0;
        for i in 0..n {
            let l = ref_clamp(-nmax, nmax - 1, nearest_int(iscale * x[i]));
            let w = weight(i);
            sumlx += w * x[i] * l as f32;
            suml2 += w * l as f32 * l as f32;
        }
        if suml2 > 0.0 && sumlx * sumlx > best * suml2 {
            for i in 0..n {
                l_out[i] = nmax + ref_clamp(-nmax, nmax - 1, nearest_int(iscale * x[i]));
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    (scale, l_out)
}

/// `make_qkx3_quants(n, nmax, x, weights, L, &the_min, Laux, rmin, rdelta, nstep, use_mad)`.
fn ref_qkx(x: &[f32], w: &[f32], nmax: i32, p: AffineSearch) -> (f32, f32, Vec<i32>) {
    let n = x.len();
    let mut l_out = vec![0i32; n];
    let mut laux = vec![0i32; n];
    let (mut min, mut max) = (x[0], x[0]);
    let mut sum_w = w[0];
    let mut sum_x = sum_w * x[0];
    for i in 1..n {
        if x[i] < min {
            min = x[i];
        }
        if x[i] > max {
            max = x[i];
        }
        sum_w += w[i];
        sum_x += w[i] * x[i];
    }
    if min > 0.0 {
        min = 0.0;
    }
    if max <= min {
        return (0.0, -min, l_out);
    }
    let err = |d: f32| if p.use_mad { d.abs() } else { d * d };
    let mut iscale = nmax as f32 / (max - min);
    let mut scale = 1.0 / iscale;
    let mut best_mad = 0.0f32;
    for i in 0..n {
        let l = nearest_int(iscale * (x[i] - min));
        l_out[i] = ref_clamp(0, nmax, l);
        let diff = scale * l_out[i] as f32 + min - x[i];
        best_mad += w[i] * err(diff);
    }
    if p.nstep < 1 {
        return (scale, -min, l_out);
    }
    for is in 0..=p.nstep {
        iscale = (p.rmin + p.rdelta * is as f32 + nmax as f32) / (max - min);
        let (mut sum_l, mut sum_l2, mut sum_xl) = (0.0f32, 0.0f32, 0.0f32);
        for i in 0..n {
            let l = ref_clamp(0, nmax, nearest_int(iscale * (x[i] - min)));
            laux[i] = l;
            sum_l += w[i] * l as f32;
            sum_l2 += w[i] * l as f32 * l as f32;
            sum_xl += w[i] * l as f32 * x[i];
        }
        let d = sum_w * sum_l2 - sum_l * sum_l;
        if d > 0.0 {
            let mut this_scale = (sum_w * sum_xl - sum_x * sum_l) / d;
            let mut this_min = (sum_l2 * sum_x - sum_l * sum_xl) / d;
            if this_min > 0.0 {
                this_min = 0.0;
                this_scale = sum_xl / sum_l2;
            }
            let mut mad = 0.0f32;
            for i in 0..n {
                let diff = this_scale * laux[i] as f32 + this_min - x[i];
                mad += w[i] * err(diff);
            }
            if mad < best_mad {
                l_out.copy_from_slice(&laux);
                best_mad = mad;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    (scale, -min, l_out)
}

// ---- hand-checked cases --------------------------------------------------------------------

#[test]
fn nearest_int_rounds_half_to_even() {
    assert_eq!(nearest_int(0.5), 0);
    assert_eq!(nearest_int(1.5), 2);
    assert_eq!(nearest_int(2.5), 2);
    assert_eq!(nearest_int(-0.5), 0);
    assert_eq!(nearest_int(-1.5), -2);
    assert_eq!(nearest_int(-2.5), -2);
    assert_eq!(nearest_int(-2.6), -3);
    assert_eq!(nearest_int(-7.49), -7);
    assert_eq!(nearest_int(1234.6), 1235);
    assert_eq!(nearest_int(0.0), 0);
    assert_eq!(nearest_int(-0.0), 0);
}

#[test]
fn nearest_int_is_exact_up_to_4194303_and_defined_beyond() {
    assert_eq!(nearest_int(4_194_303.0), 4_194_303);
    assert_eq!(nearest_int(-4_194_303.0), -4_194_303);
    assert_eq!(nearest_int(4_194_302.5), 4_194_302);
    // Out of range and NaN: deterministic, no panic.
    assert_eq!(nearest_int(f32::NAN), nearest_int(f32::NAN));
    let _ = nearest_int(1e30);
    let _ = nearest_int(-1e30);
    let _ = nearest_int(f32::INFINITY);
}

#[test]
fn c_max_follows_the_macro() {
    assert_eq!(c_max(1.0, 2.0), 2.0);
    assert_eq!(c_max(2.0, 1.0), 2.0);
    assert!(c_max(1.0, f32::NAN).is_nan());
    assert_eq!(c_max(f32::NAN, 1.0), 1.0);
}

#[test]
fn signed_absmax_keeps_the_first_of_equal_magnitudes() {
    assert_eq!(signed_absmax(&[]), (0.0, 0.0));
    assert_eq!(signed_absmax(&[0.0; 9]), (0.0, 0.0));
    assert_eq!(signed_absmax(&[1.0, -3.0, 3.0, 2.0]), (3.0, -3.0));
    let mut x = [0.5f32; 19];
    x[17] = 7.0;
    x[11] = -7.0;
    assert_eq!(signed_absmax(&x), (7.0, -7.0));
    assert_eq!(abs_max(&x), 7.0);
}

#[test]
fn codes_convert_like_c() {
    assert_eq!(i8::from_i32(200), -56);
    assert_eq!(u8::from_i32(-1), 255);
    assert_eq!(i32::from_i32(-5), -5);
    assert_eq!((-3i8).to_i32(), -3);
    assert_eq!(250u8.to_i32(), 250);
}

#[test]
fn qx_fits_an_exact_grid() {
    // max = -4, iscale = 1: l = x exactly, codes l + 4, scale Σx⁴ / Σx⁴ = 1.
    let x = [-4.0f32, -2.0, 0.0, 2.0];
    let mut l = [9i8; 4];
    assert_eq!(make_qx_quants::<16, i8>(&x, 4, &mut l, SymWeights::XSquared), 1.0);
    assert_eq!(l, [0, 2, 4, 6]);
    let mut l = [9i32; 4];
    assert_eq!(make_qx_quants::<32, i32>(&x, 4, &mut l, SymWeights::Given(&[1.0; 4])), 1.0);
    assert_eq!(l, [0, 2, 4, 6]);
}

#[test]
fn q3_fits_an_exact_grid() {
    let x = [-4.0f32, -2.0, 0.0, 2.0];
    let mut l = [9i8; 4];
    assert_eq!(make_q3_quants::<16>(&x, 4, &mut l), 1.0);
    assert_eq!(l, [0, 2, 4, 6]);
}

#[test]
fn qkx_fits_an_exact_affine_grid() {
    let p = AffineSearch { rmin: -0.5, rdelta: 0.1, nstep: 10, use_mad: false };
    // min = -1, max = 2, iscale = 1: l = x + 1 with zero error, which no candidate beats.
    let mut l = [9u8; 4];
    assert_eq!(make_qkx_quants::<32, u8>(&[-1.0, 0.0, 1.0, 2.0], &[1.0; 4], 3, &mut l, p), (1.0, 1.0));
    assert_eq!(l, [0, 1, 2, 3]);
    // All non-negative: min clamps to 0.
    let mut l = [9i32; 4];
    assert_eq!(make_qkx_quants::<32, i32>(&[0.0, 1.0, 2.0, 3.0], &[2.0; 4], 3, &mut l, p), (1.0, 0.0));
    assert_eq!(l, [0, 1, 2, 3]);
}

#[test]
fn qp_fits_an_exact_grid() {
    let mut l = [9u8; 4];
    assert_eq!(make_qp_quants(&[1.0, 2.0, 3.0, 4.0], 4, &mut l, &[1.0; 4]), 1.0);
    assert_eq!(l, [1, 2, 3, 4]);
}

#[test]
fn degenerate_groups() {
    let mut l8 = [7i8; 16];
    assert_eq!(make_qx_quants::<16, i8>(&[0.0; 16], 32, &mut l8, SymWeights::XSquared), 0.0);
    assert_eq!(l8, [0; 16]);
    let mut l8 = [7i8; 16];
    assert_eq!(make_q3_quants::<16>(&[1e-16; 16], 4, &mut l8), 0.0);
    assert_eq!(l8, [0; 16]);
    let mut lu = [7u8; 16];
    assert_eq!(make_qp_quants(&[0.0; 16], 15, &mut lu, &[1.0; 16]), 0.0);
    assert_eq!(lu, [0; 16]);
    // Constant negative group: max <= min, the_min = -min.
    let p = AffineSearch { rmin: -0.9, rdelta: 0.05, nstep: 36, use_mad: false };
    let mut l32 = [7i32; 3];
    assert_eq!(make_qkx_quants::<32, i32>(&[-2.0; 3], &[1.0; 3], 15, &mut l32, p), (0.0, 2.0));
    assert_eq!(l32, [0; 3]);
    assert_eq!(make_qkx_quants::<32, i32>(&[], &[], 15, &mut l32, p), (0.0, 0.0));
    // Only the first n codes are written.
    let mut l8 = [7i8; 16];
    make_qx_quants::<16, i8>(&[0.0; 3], 8, &mut l8, SymWeights::XSquared);
    assert_eq!(&l8[3..], &[7; 13]);
}

#[test]
#[should_panic(expected = "17 > 16")]
fn qx_rejects_groups_longer_than_its_lanes() {
    let mut l = [0i8; 17];
    make_qx_quants::<16, i8>(&[1.0; 17], 4, &mut l, SymWeights::XSquared);
}

// ---- generic == plain reading of ggml -----------------------------------------------------

/// Finite values over many magnitudes, with repeats and exact zeros (which exercise ties).
fn value() -> impl Strategy<Value = f32> {
    prop_oneof![
        4 => -1.0f32..1.0,
        1 => Just(0.0f32),
        1 => (-8i32..8).prop_map(|v| v as f32 * 0.25),
        1 => (-1.0f32..1.0, -30i32..30).prop_map(|(m, e)| m * 2f32.powi(e)),
    ]
}

fn group(max: usize) -> impl Strategy<Value = (Vec<f32>, Vec<f32>)> {
    (1..=max).prop_flat_map(|n| (prop::collection::vec(value(), n), prop::collection::vec(0.0f32..4.0, n)))
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|v| v.to_bits()).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn nearest_int_equals_round_ties_even_in_range(v in -4_194_303.0f32..4_194_303.0) {
        prop_assert_eq!(nearest_int(v), v.round_ties_even() as i32);
    }

    #[test]
    fn signed_absmax_equals_the_sequential_loop(x in prop::collection::vec(value(), 0..40)) {
        let (mut amax, mut max) = (0.0f32, 0.0f32);
        for &v in &x {
            if v.abs() > amax {
                amax = v.abs();
                max = v;
            }
        }
        prop_assert_eq!(bits(&[amax, max]), bits(&[signed_absmax(&x).0, signed_absmax(&x).1]));
    }

    #[test]
    fn qx_equals_ggml((x, w) in group(16), nmax in prop::sample::select(vec![4, 8, 16, 32]), given: bool) {
        let qw = given.then_some(&w[..]);
        let (want, want_l) = ref_qx(&x, nmax, qw);
        let sw = qw.map_or(SymWeights::XSquared, SymWeights::Given);
        let mut l8 = vec![0i8; x.len()];
        let got = make_qx_quants::<16, i8>(&x, nmax, &mut l8, sw);
        prop_assert_eq!(got.to_bits(), want.to_bits());
        prop_assert_eq!(l8.iter().map(|&l| l as i32).collect::<Vec<_>>(), want_l.clone());
        let mut l32 = vec![0i32; x.len()];
        let got = make_qx_quants::<32, i32>(&x, nmax, &mut l32, sw);
        prop_assert_eq!(got.to_bits(), want.to_bits());
        prop_assert_eq!(l32, want_l);
    }

    #[test]
    fn qkx_equals_ggml(
        (x, w) in group(32),
        nmax in prop::sample::select(vec![3, 15, 31]),
        p in prop::sample::select(vec![
            AffineSearch { rmin: -0.5, rdelta: 0.1, nstep: 15, use_mad: false },
            AffineSearch { rmin: -1.0, rdelta: 0.1, nstep: 20, use_mad: false },
            AffineSearch { rmin: -0.9, rdelta: 0.05, nstep: 36, use_mad: false },
            AffineSearch { rmin: -0.5, rdelta: 0.1, nstep: 15, use_mad: true },
            AffineSearch { rmin: -0.5, rdelta: 0.1, nstep: 0, use_mad: false },
        ]),
    ) {
        let (want_d, want_m, want_l) = ref_qkx(&x, &w, nmax, p);
        let mut lu = vec![0u8; x.len()];
        let (d, m) = make_qkx_quants::<32, u8>(&x, &w, nmax, &mut lu, p);
        prop_assert_eq!(bits(&[d, m]), bits(&[want_d, want_m]));
        prop_assert_eq!(lu.iter().map(|&l| l as i32).collect::<Vec<_>>(), want_l.clone());
        let mut l32 = vec![0i32; x.len()];
        let (d, m) = make_qkx_quants::<32, i32>(&x, &w, nmax, &mut l32, p);
        prop_assert_eq!(bits(&[d, m]), bits(&[want_d, want_m]));
        prop_assert_eq!(l32, want_l);
    }
}

/// ggml's `if (amax < ax) { amax = ax; max = v; }` loop, as written.
fn ggml_signed_absmax(x: &[f32]) -> (f32, f32) {
    let (mut amax, mut max) = (0.0f32, 0.0f32);
    for &v in x {
        if amax < v.abs() {
            amax = v.abs();
            max = v;
        }
    }
    (amax, max)
}

proptest! {
    /// Small integer values make ties of equal and opposite magnitude frequent.
    #[test]
    fn signed_absmax_is_ggmls_loop(x in prop::collection::vec(-4i8..=4, 0..70), scale in prop::sample::select(vec![1.0f32, 0.37, 1e-30])) {
        let x: Vec<f32> = x.iter().map(|&v| f32::from(v) * scale).collect();
        let (a, m) = signed_absmax(&x);
        let (ga, gm) = ggml_signed_absmax(&x);
        prop_assert_eq!(a.to_bits(), ga.to_bits());
        prop_assert_eq!(m.to_bits(), gm.to_bits());
    }
}
