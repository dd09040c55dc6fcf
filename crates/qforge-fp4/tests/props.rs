//! Property tests specific to mxfp4 / nvfp4: round-trip error bounds, importance weights,
//! partial blocks, extreme blocks. The properties every family shares (arbitrary bytes,
//! non-finite input, rows of any length, ...) are the conformance suite in tests/golden.rs.

use bytemuck::Zeroable;
use proptest::prelude::*;
use qforge_core::BlockFormat;
use qforge_fp4::{BlockMxfp4, BlockNvfp4, FORMATS, Mxfp4, Nvfp4, QK_NVFP4_SUB};
use qforge_golden::conformance::{amax, dequantize, for_each_group, quantize, values};

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
        for_each_group(FORMATS, &x, None, |f| bound(f.desc().name).0, |name, g, xs, ys| {
            let (m, frac) = (amax(xs), bound(name).1);
            if name == "nvfp4" && !(m / 6.0 >= 2f32.powi(-6) && m / 6.0 < 256.0) {
                // UE4M3 subnormal scales are coarser, and ggml saturates every scale from
                // 256 up to 448: both are checked against ggml by the golden data.
                return Ok(());
            }
            for (a, b) in xs.iter().zip(ys) {
                prop_assert!((a - b).abs() <= frac * m * (1.0 + 1e-6), "{name} group {g}: {a} -> {b} (amax {m})");
            }
            Ok(())
        })?;
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
