//! Property tests: round-trip error bounds, importance weights, partial blocks, arbitrary
//! bytes, extreme finite input, non-finite input.

use bytemuck::Zeroable;
use proptest::prelude::*;
use qforge_core::{BlockFormat, Format, OutRow, QuantError, bf16, f16};
use qforge_tq::{BlockTq1_0, BlockTq2_0, FORMATS, QK_K, Tq1_0, Tq2_0};

fn quantize(f: &dyn Format, x: &[f32], w: Option<&[f32]>) -> Vec<u8> {
    let mut q = vec![0u8; f.row_bytes(x.len()).unwrap()];
    f.quantize_row(x, w, &mut q).unwrap();
    q
}

fn dequantize(f: &dyn Format, q: &[u8], n: usize) -> Vec<f32> {
    let mut y = vec![0f32; n];
    f.dequant_row(q, OutRow::F32(&mut y)).unwrap();
    y
}

fn amax(x: &[f32]) -> f32 {
    x.iter().fold(0f32, |m, v| m.max(v.abs()))
}

/// Values of several shapes with magnitudes around 10^e, e in [-1, 3) (f16 scales stay
/// normal and finite).
fn values(max_len: usize) -> impl Strategy<Value = Vec<f32>> {
    let shape = prop_oneof![
        prop::collection::vec(-1.0f32..1.0, 1..=max_len),
        prop::collection::vec((-1.0f32..1.0).prop_map(|u| u.powi(5)), 1..=max_len),
        prop::collection::vec(prop_oneof![-1.0f32..-0.9, Just(0.0), 0.9f32..1.0], 1..=max_len),
        prop::collection::vec(prop_oneof![9 => -1.0f32..1.0, 1 => -30.0f32..30.0], 1..=max_len),
    ];
    (shape, -1.0f32..3.0).prop_map(|(u, e)| u.iter().map(|v| v * 10f32.powf(e)).collect())
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
        for f in FORMATS {
            let y = dequantize(*f, &quantize(*f, &x, None), x.len());
            for (blk, (xs, ys)) in x.chunks(QK_K).zip(y.chunks(QK_K)).enumerate() {
                let m = amax(xs);
                for (a, b) in xs.iter().zip(ys) {
                    let lim = if a.abs() == m { m * 2f32.powi(-11) } else { 0.5 * m + m * 2f32.powi(-11) };
                    prop_assert!((a - b).abs() <= lim, "{} block {blk}: {a} -> {b} (amax {m})", f.desc().name);
                }
            }
        }
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

    /// Through `Format`, a row's whole blocks are encoded as on their own, whatever its tail.
    #[test]
    fn full_blocks_do_not_depend_on_the_tail(x in values(QK_K), tail in values(QK_K - 1)) {
        let mut head = x.clone();
        head.resize(QK_K, 0.25);
        let mut row = head.clone();
        row.extend_from_slice(&tail);
        for f in FORMATS {
            let alone = quantize(*f, &head, None);
            let with_tail = quantize(*f, &row, None);
            prop_assert_eq!(&with_tail[..alone.len()], &alone[..], "{}", f.desc().name);
        }
    }

    /// Any bytes decode without panicking, to every dtype and any row length; f16 / bf16 are
    /// the rounded f32 values and a partial row is the prefix of the whole one.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 132), cut in 0usize..QK_K) {
        for f in FORMATS {
            let bb = f.desc().block_bytes;
            let q = &bytes[..2 * bb];
            let n = 2 * QK_K - cut;
            let y = dequantize(*f, q, n);
            let whole = dequantize(*f, q, 2 * QK_K);
            for i in 0..n {
                prop_assert!(qforge_golden::same_f32(y[i], whole[i]));
            }
            let mut h = vec![f16::ZERO; n];
            f.dequant_row(q, OutRow::F16(&mut h)).unwrap();
            let mut b = vec![bf16::ZERO; n];
            f.dequant_row(q, OutRow::Bf16(&mut b)).unwrap();
            for i in 0..n {
                prop_assert!(h[i].to_bits() == f16::from_f32(y[i]).to_bits() || (y[i].is_nan() && h[i].is_nan()));
                prop_assert!(b[i].to_bits() == bf16::from_f32(y[i]).to_bits() || (y[i].is_nan() && b[i].is_nan()));
            }
            prop_assert!(f.dequant_row(&bytes[..2 * bb - 1], OutRow::F32(&mut vec![0f32; n])).is_err());
        }
    }

    /// Any finite values (subnormal to f32::MAX) with any finite non-negative weights encode
    /// without panicking; while the block maximum fits an f16 the decoded values are finite.
    #[test]
    fn arbitrary_finite_input_never_panics(
        x in prop::collection::vec(any::<f32>().prop_filter("finite", |v| v.is_finite()), 1..=300),
        wseed in any::<u32>(),
    ) {
        let w: Vec<f32> = x.iter().enumerate().map(|(i, v)| {
            match (wseed as usize + i) % 4 { 0 => 0.0, 1 => v.abs(), 2 => f32::MAX, _ => 1.0 }
        }).collect();
        for f in FORMATS {
            for q in [quantize(*f, &x, None), quantize(*f, &x, Some(&w))] {
                let y = dequantize(*f, &q, x.len());
                for (xs, ys) in x.chunks(QK_K).zip(y.chunks(QK_K)) {
                    if amax(xs) <= 65504.0 {
                        prop_assert!(ys.iter().all(|v| v.is_finite()), "{}", f.desc().name);
                    }
                }
            }
        }
    }

    /// NaN or infinity anywhere in the input is rejected with a typed error.
    #[test]
    fn non_finite_input_is_rejected(
        x in values(300),
        pos in any::<prop::sample::Index>(),
        bad in prop_oneof![Just(f32::NAN), Just(f32::INFINITY), Just(f32::NEG_INFINITY)],
    ) {
        let mut x = x;
        let at = pos.index(x.len());
        x[at] = bad;
        for f in FORMATS {
            let mut q = vec![0u8; f.row_bytes(x.len()).unwrap()];
            match f.quantize_row(&x, None, &mut q) {
                Err(QuantError::NonFinite { index, .. }) => prop_assert_eq!(index, at),
                other => prop_assert!(false, "{}: expected NonFinite, got {:?}", f.desc().name, other),
            }
        }
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
