//! Property checks of the native dot kernels shared by the family test suites (legacy, k, tq
//! include this file with `#[path]`): `dot_row` against an f64 reference of the dequantized
//! rows, and wrong activation rows giving an error (or `None`), never a panic.

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use qforge_core::{ActKind, ActRow, Format};
use qforge_golden::conformance::{dequantize, quantize, values};

/// Relative tolerance of a native dot against the f64 reference, of `Σ|w·a|`.
pub const RTOL: f64 = 1e-5;

/// The activation format of `f`'s native dot, looked up in `formats`.
pub fn act_format(f: &dyn Format, formats: &[&'static dyn Format]) -> &'static dyn Format {
    let ActKind::Blocks(name) = f.native_act() else { panic!("{}: no block activations", f.desc().name) };
    *formats.iter().find(|a| a.desc().name == name).unwrap_or_else(|| panic!("{name} not in the act formats"))
}

/// A weight row (any length up to `max_blocks` blocks of `bs`) and an activation row of the
/// same logical length, both from the conformance suite's value shapes.
fn rows(bs: usize, max_blocks: usize) -> impl Strategy<Value = (Vec<f32>, Vec<f32>)> {
    values(bs * max_blocks).prop_flat_map(|w| {
        let n = w.len();
        (
            Just(w),
            values(n).prop_map(move |mut a| {
                a.resize(n, 0.0);
                a
            }),
        )
    })
}

/// Per weight/activation pair: `extra(format, w_bytes, a_bytes, a_dequantized)` is an
/// additional allowed error on top of [`RTOL`]·`Σ|w·a|`: for affine formats the terms of the
/// sum are `scale·code·a` and `min·a` separately (a weight near 0 is the difference of two
/// rounded f32 values, in the dequantization as in the kernel), and the f16 rounding of
/// q8_1's stored `s = d·Σq`, which ggml's formula uses in place of the exact sum.
pub type Extra = fn(&dyn Format, &[u8], &[u8], &[f32]) -> f64;

/// For every format of `formats`: `dot_row` on random rows (partial last blocks included;
/// activation padding is 0) is within [`RTOL`] of `Σ|w·a|` (plus `extra`) of the f64 dot of
/// the dequantized rows.
pub fn dot_matches_f64_reference(formats: &[&'static dyn Format], acts: &[&'static dyn Format], extra: Extra) {
    for &f in formats {
        let all: Vec<&'static dyn Format> = formats.iter().chain(acts).copied().collect();
        let af = act_format(f, &all);
        let bs = f.desc().block_size;
        let mut runner = TestRunner::new(Config { cases: 128, failure_persistence: None, ..Config::default() });
        let result = runner.run(&rows(bs, 4), |(x, y)| {
            let padded = x.len().div_ceil(bs) * bs;
            let mut y = y;
            y.resize(padded, 0.0);
            let wq = quantize(f, &x, None);
            let aq = quantize(af, &y, None);
            let got = match f.dot_row(&wq, 0, &[], ActRow::Blocks(&aq)) {
                Some(Ok(v)) => v,
                other => return Err(TestCaseError::fail(format!("dot_row gave {other:?}"))),
            };
            let wd = dequantize(f, &wq, padded);
            let ad = dequantize(af, &aq, padded);
            let want: f64 = wd.iter().zip(&ad).map(|(&w, &a)| f64::from(w) * f64::from(a)).sum();
            let mag: f64 = wd.iter().zip(&ad).map(|(&w, &a)| (f64::from(w) * f64::from(a)).abs()).sum();
            let tol = RTOL * mag + extra(f, &wq, &aq, &ad) + 1e-30;
            prop_assert!(
                (f64::from(got) - want).abs() <= tol,
                "{}: got {got}, f64 reference {want} (tolerance {tol:e}, Σ|w·a| {mag:e})",
                f.desc().name
            );
            Ok(())
        });
        if let Err(e) = result {
            panic!("{}: {e}", f.desc().name);
        }
    }
}

/// Activation rows of the wrong length or kind, and weight rows that are not whole blocks,
/// give an error or `None`, never a panic or a value.
pub fn wrong_rows_are_rejected(formats: &[&'static dyn Format], acts: &[&'static dyn Format]) {
    for &f in formats {
        let all: Vec<&'static dyn Format> = formats.iter().chain(acts).copied().collect();
        let af = act_format(f, &all);
        let (bs, abb) = (f.desc().block_size, af.desc().block_bytes);
        for blocks in 1..=3 {
            let x: Vec<f32> = (0..blocks * bs).map(|i| (i as f32 * 0.37).sin()).collect();
            let wq = quantize(f, &x, None);
            let aq = quantize(af, &x, None);
            assert!(matches!(f.dot_row(&wq, 0, &[], ActRow::Blocks(&aq)), Some(Ok(_))), "{}", f.desc().name);
            let mut longer = aq.clone();
            longer.extend_from_slice(&aq[..abb]);
            for bad in [&aq[..aq.len() - 1], &aq[..aq.len() - abb], &longer[..], &[][..], &longer[..aq.len() + 1]] {
                assert!(
                    matches!(f.dot_row(&wq, 0, &[], ActRow::Blocks(bad)), Some(Err(_))),
                    "{}: {} activation bytes for {} weight blocks must be an error",
                    f.desc().name,
                    bad.len(),
                    blocks
                );
            }
            assert!(
                matches!(f.dot_row(&wq[..wq.len() - 1], 0, &[], ActRow::Blocks(&aq)), Some(Err(_))),
                "{}: a weight row that is not whole blocks must be an error",
                f.desc().name
            );
            let q = vec![0i8; blocks * bs];
            assert!(f.dot_row(&wq, 0, &[], ActRow::Int8 { q: &q, scale: 1.0, zero_point: 0 }).is_none());
        }
    }
}
