//! Property tests: round-trip error bounds, importance weights, partial blocks, arbitrary
//! bytes, extreme finite input, non-finite input.

use bytemuck::Zeroable;
use proptest::prelude::*;
use qforge_core::{BlockFormat, Format, OutRow, QuantError, bf16, f16};
use qforge_fp4::{BlockMxfp4, BlockNvfp4, FORMATS, Mxfp4, Nvfp4, QK_NVFP4_SUB};

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

/// Values of several shapes with magnitudes around 10^e, e in [-1, 3).
fn values(max_len: usize) -> impl Strategy<Value = Vec<f32>> {
    let shape = prop_oneof![
        prop::collection::vec(-1.0f32..1.0, 1..=max_len),
        prop::collection::vec((-1.0f32..1.0).prop_map(|u| u.powi(5)), 1..=max_len),
        prop::collection::vec(0.5f32..1.5, 1..=max_len),
        prop::collection::vec(prop_oneof![9 => -1.0f32..1.0, 1 => -30.0f32..30.0], 1..=max_len),
        prop::collection::vec(prop_oneof![-1.0f32..1.0, Just(0.0)], 1..=max_len),
    ];
    (shape, -1.0f32..3.0).prop_map(|(u, e)| u.iter().map(|v| v * 10f32.powf(e)).collect())
}

/// Worst error per element allowed, as a fraction of the largest magnitude of the elements
/// sharing its scale: mxfp4's power-of-two scale puts 6·s between amax/4·3 and amax·1.5, the
/// top gap of the E2M1 grid (4 → 6) is 2·s, so at most amax/4; nvfp4's UE4M3 scale is amax/6
/// within 1/16 relative, giving at most (1 + 1/16)·amax/6 (half the 4 → 6 gap).
fn bound(name: &str) -> (usize, f32) {
    match name {
        "mxfp4" => (32, 0.25),
        "nvfp4" => (QK_NVFP4_SUB, 17.0 / 96.0),
        _ => unreachable!(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn round_trip_error_is_bounded(x in values(200)) {
        for f in FORMATS {
            let name = f.desc().name;
            let y = dequantize(*f, &quantize(*f, &x, None), x.len());
            let (group, frac) = bound(name);
            for (g, (xs, ys)) in x.chunks(group).zip(y.chunks(group)).enumerate() {
                let m = amax(xs);
                if name == "nvfp4" && !(m / 6.0 >= 2f32.powi(-6) && m / 6.0 < 256.0) {
                    // UE4M3 subnormal scales are coarser, and ggml saturates every scale from
                    // 256 up to 448: both are checked against ggml by the golden data.
                    continue;
                }
                for (a, b) in xs.iter().zip(ys) {
                    prop_assert!((a - b).abs() <= frac * m * (1.0 + 1e-6), "{name} group {g}: {a} -> {b} (amax {m})");
                }
            }
        }
    }

    /// Importance weights never make the weighted error of a block worse than ggml's
    /// (unweighted) encoding, and never change the encoding of an all-zero block.
    #[test]
    fn weights_never_hurt(
        (x, w) in values(64).prop_flat_map(|x| { let n = x.len(); (Just(x), prop::collection::vec(0.0f32..10.0, n)) })
    ) {
        for f in FORMATS {
            let n = x.len();
            let plain = dequantize(*f, &quantize(*f, &x, None), n);
            let weighted = dequantize(*f, &quantize(*f, &x, Some(&w)), n);
            let sse = |y: &[f32]| -> f64 { x.iter().zip(y).zip(&w).map(|((a, b), wi)| *wi as f64 * (*a as f64 - *b as f64).powi(2)).sum() };
            prop_assert!(sse(&weighted) <= sse(&plain) * (1.0 + 1e-12), "{}", f.desc().name);
        }
    }

    /// A partial block: its scales come from the real elements only — the block equals the
    /// whole block padded with zeros (zeros change no maximum) — and the padded positions hold
    /// code 0, which decodes to exactly 0.
    #[test]
    fn partial_blocks_pad_with_code_zero(x in values(63)) {
        let mut padded = [0f32; 64];
        padded[..x.len()].copy_from_slice(&x);
        let n = x.len().min(31);
        let mut a = BlockMxfp4::zeroed();
        let mut b = BlockMxfp4::zeroed();
        Mxfp4::encode(&x[..n], None, &mut a);
        let mut zero_padded = [0f32; 32];
        zero_padded[..n].copy_from_slice(&x[..n]);
        Mxfp4::encode(&zero_padded, None, &mut b);
        prop_assert_eq!(a, b);
        let mut y = [1f32; 32];
        Mxfp4::decode(&a, &mut y);
        prop_assert!(y[n..].iter().all(|v| *v == 0.0));
        let codes = |qs: &[u8]| -> Vec<u8> { qs.iter().map(|b| b & 15).chain(qs.iter().map(|b| b >> 4)).collect() };
        prop_assert!(codes(&a.qs)[n..].iter().all(|&c| c == 0));

        let mut c = BlockNvfp4::zeroed();
        let mut d = BlockNvfp4::zeroed();
        Nvfp4::encode(&x, None, &mut c);
        Nvfp4::encode(&padded, None, &mut d);
        prop_assert_eq!(c, d);
        let mut y = [1f32; 64];
        Nvfp4::decode(&c, &mut y);
        prop_assert!(y[x.len()..].iter().all(|v| *v == 0.0));
        for s in x.len().div_ceil(QK_NVFP4_SUB)..4 {
            prop_assert_eq!(c.d[s], 0, "an all-padding sub-block has scale 0");
        }
    }

    /// Through `Format`, a row's whole blocks are encoded as on their own, whatever its tail.
    #[test]
    fn full_blocks_do_not_depend_on_the_tail(x in values(64), tail in values(63), weighted in any::<bool>()) {
        let mut head = x.clone();
        head.resize(64, 0.25);
        let mut row = head.clone();
        row.extend_from_slice(&tail);
        let w: Vec<f32> = (0..row.len()).map(|i| 0.5 + (i % 7) as f32).collect();
        for f in FORMATS {
            let wh = weighted.then_some(&w[..head.len()]);
            let alone = quantize(*f, &head, wh);
            let with_tail = quantize(*f, &row, weighted.then_some(&w[..]));
            prop_assert_eq!(&with_tail[..alone.len()], &alone[..], "{}", f.desc().name);
            prop_assert_eq!(dequantize(*f, &with_tail, row.len()).len(), row.len());
        }
    }

    /// Any bytes decode without panicking, to every dtype and any row length; f16 / bf16 are
    /// the rounded f32 values and a partial row is the prefix of the whole one.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 72), cut in 0usize..64) {
        for f in FORMATS {
            let (bb, bs) = (f.desc().block_bytes, f.desc().block_size);
            let q = &bytes[..2 * bb];
            let n = 2 * bs - cut.min(bs - 1);
            let y = dequantize(*f, q, n);
            let whole = dequantize(*f, q, 2 * bs);
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
            // A wrong length is an error, not a panic.
            prop_assert!(f.dequant_row(&bytes[..2 * bb - 1], OutRow::F32(&mut vec![0f32; n])).is_err());
        }
    }

    /// Any finite values (subnormal to f32::MAX) with any finite non-negative weights encode
    /// without panicking, and decode to finite values when the scale cannot overflow.
    #[test]
    fn arbitrary_finite_input_never_panics(
        x in prop::collection::vec(any::<f32>().prop_filter("finite", |v| v.is_finite()), 1..=200),
        wseed in any::<u32>(),
    ) {
        let w: Vec<f32> = x.iter().enumerate().map(|(i, v)| {
            match (wseed as usize + i) % 4 { 0 => 0.0, 1 => v.abs(), 2 => f32::MAX, _ => 1.0 }
        }).collect();
        for f in FORMATS {
            for q in [quantize(*f, &x, None), quantize(*f, &x, Some(&w))] {
                let y = dequantize(*f, &q, x.len());
                prop_assert!(y.iter().all(|v| !v.is_nan()), "{}", f.desc().name);
            }
        }
    }

    /// NaN or infinity anywhere in the input is rejected with a typed error.
    #[test]
    fn non_finite_input_is_rejected(
        x in values(150),
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

/// Extreme blocks: all zero, f32::MAX, the smallest subnormal, a mix.
#[test]
fn extreme_blocks() {
    let cases: [&[f32]; 5] =
        [&[0.0; 64], &[f32::MAX; 64], &[f32::MIN_POSITIVE / 1e6; 40], &[-0.0; 3], &[f32::MAX, -1e-45, 1.0]];
    for x in cases {
        for f in FORMATS {
            let y = dequantize(*f, &quantize(*f, x, None), x.len());
            assert!(y.iter().all(|v| v.is_finite()), "{}: {x:?} -> {y:?}", f.desc().name);
            if amax(x) == 0.0 {
                assert!(y.iter().all(|v| *v == 0.0));
            }
        }
    }
    // f32::MAX itself is representable within the error bound (mxfp4: 1.5·2^127).
    let y = dequantize(FORMATS[0], &quantize(FORMATS[0], &[f32::MAX; 32], None), 32);
    assert!(y.iter().all(|v| (f32::MAX - v) / f32::MAX <= 0.25), "{y:?}");
}
