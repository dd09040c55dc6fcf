//! Property tests specific to the ternary formats: round-trip error bounds, agreement of the
//! two packings, importance weights, partial blocks, extreme blocks. The properties every
//! family shares (arbitrary bytes, non-finite input, rows of any length, ...) are the
//! conformance suite in tests/golden.rs.

use bytemuck::Zeroable;
use proptest::prelude::*;
use qforge_core::BlockFormat;
use qforge_golden::conformance::{amax, dequantize, for_each_group, quantize};
use qforge_tq::{BlockTq1_0, BlockTq2_0, FORMATS, QK_K, Tq1_0, Tq2_0};

/// The suite's ordinary values, or nearly ternary ones (|x| in [0.9, 1] or exactly 0) with
/// magnitudes around 10^e, e in [-1, 3).
fn values(max_len: usize) -> impl Strategy<Value = Vec<f32>> {
    let ternary = prop::collection::vec(prop_oneof![-1.0f32..-0.9, Just(0.0), 0.9f32..1.0], 1..=max_len);
    prop_oneof![
        qforge_golden::conformance::values(max_len),
        (ternary, -1.0f32..3.0).prop_map(|(u, e)| u.iter().map(|v| v * 10f32.powf(e)).collect()),
    ]
}

fn with_weights(max_len: usize) -> impl Strategy<Value = (Vec<f32>, Vec<f32>)> {
    values(max_len).prop_flat_map(|x| {
        let n = x.len();
        (Just(x), prop::collection::vec(0.0f32..10.0, n))
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Each value is within half the block's largest magnitude of its decode (ternary codes
    /// at d = amax), plus the f16 rounding of d; values of magnitude amax are exact up to it.
    #[test]
    fn round_trip_error_is_bounded(x in values(600)) {
        for_each_group(FORMATS, &x, None, |_| QK_K, |name, blk, xs, ys| {
            let m = amax(xs);
            for (a, b) in xs.iter().zip(ys) {
                let lim = if a.abs() == m { m * 2f32.powi(-11) } else { 0.5 * m + m * 2f32.powi(-11) };
                prop_assert!((a - b).abs() <= lim, "{name} block {blk}: {a} -> {b} (amax {m})");
            }
            Ok(())
        })?;
    }

    /// Both packings encode the same codes and scale for any input, weighted or not.
    #[test]
    fn packings_agree((x, w) in with_weights(300), weighted in any::<bool>()) {
        let w = weighted.then_some(&w[..]);
        let a = dequantize(FORMATS[0], &quantize(FORMATS[0], &x, w), x.len());
        let b = dequantize(FORMATS[1], &quantize(FORMATS[1], &x, w), x.len());
        prop_assert_eq!(a, b);
    }

    /// Importance weights never make a block's weighted error worse than ggml's encoding.
    #[test]
    fn weights_never_hurt((x, w) in with_weights(QK_K)) {
        for f in FORMATS {
            let plain = dequantize(*f, &quantize(*f, &x, None), x.len());
            let weighted = dequantize(*f, &quantize(*f, &x, Some(&w)), x.len());
            let sse = |y: &[f32]| -> f64 { x.iter().zip(y).zip(&w).map(|((a, b), wi)| *wi as f64 * (*a as f64 - *b as f64).powi(2)).sum() };
            prop_assert!(sse(&weighted) <= sse(&plain) * (1.0 + 1e-12), "{}", f.desc().name);
        }
    }

    /// A partial block equals the whole block padded with zeros (zeros change no maximum),
    /// and its padded positions decode to exactly 0.
    #[test]
    fn partial_blocks_pad_with_the_zero_code((x, w) in with_weights(QK_K - 1), weighted in any::<bool>()) {
        let n = x.len();
        let mut xp = [0f32; QK_K];
        xp[..n].copy_from_slice(&x);
        let mut wp = [0f32; QK_K];
        wp[..n].copy_from_slice(&w);
        let (w, wp) = if weighted { (Some(&w[..]), Some(&wp[..])) } else { (None, None) };
        let (mut a, mut b) = (BlockTq1_0::zeroed(), BlockTq1_0::zeroed());
        Tq1_0::encode(&x, w, &mut a);
        Tq1_0::encode(&xp, wp, &mut b);
        prop_assert_eq!(a, b);
        let (mut c, mut d) = (BlockTq2_0::zeroed(), BlockTq2_0::zeroed());
        Tq2_0::encode(&x, w, &mut c);
        Tq2_0::encode(&xp, wp, &mut d);
        prop_assert_eq!(c, d);
        let mut y = [1f32; QK_K];
        Tq1_0::decode(&a, &mut y);
        prop_assert!(y[n..].iter().all(|v| *v == 0.0));
        Tq2_0::decode(&c, &mut y);
        prop_assert!(y[n..].iter().all(|v| *v == 0.0));
    }
}

/// Extreme blocks: all zero, subnormal (1/amax overflows: every code is the zero code, as in
/// ggml), and beyond the f16 range (ggml stores an infinite scale; so does qforge).
#[test]
fn extreme_blocks() {
    for f in FORMATS {
        let y = dequantize(*f, &quantize(*f, &[0.0; 300], None), 300);
        assert!(y.iter().all(|v| *v == 0.0));
        let y = dequantize(*f, &quantize(*f, &[1e-45, -1e-45, 0.0, 3e-45], None), 4);
        assert!(y.iter().all(|v| *v == 0.0), "{y:?}");
        let q = quantize(*f, &[f32::MAX, 1.0, -f32::MAX], None);
        let y = dequantize(*f, &q, 3);
        assert_eq!((y[0], y[2]), (f32::INFINITY, f32::NEG_INFINITY));
        assert!(y[1].is_nan(), "0 · Inf, as ggml decodes it");
        let w = [1.0, 1.0, 1.0];
        quantize(*f, &[f32::MAX, 1.0, -f32::MAX], Some(&w));
    }
}
