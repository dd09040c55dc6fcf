//! Property tests: round-trip error bounds, partial blocks, arbitrary bytes, non-finite input.

use proptest::prelude::*;
use qforge_core::{BlockFormat, Format, OutRow, QuantError, bf16, f16};
use qforge_k::{FORMATS, QK_K};

/// Worst `max |decode(encode(x)) - x| / max |x|` allowed per format, without and with
/// (strictly positive) importance weights. About 1.3x the worst seen over many random blocks.
fn bound(name: &str) -> (f32, f32) {
    match name {
        // q2_k: in a 16-element sub-block spanning [-amax, 0], ggml's |x|-weighted fit may put
        // every level below 0, so a 0 can decode near the sub-block minimum. ggml's own
        // quantize_row_q2_K_ref does exactly that (recorded regression cases: 0 -> -0.579 of
        // amax 1, 0 -> -7.63 of amax 10.98). The golden tests pin ggml equality; this bound
        // only rules out garbage.
        "q2_k" => (1.0, 1.0),
        "q3_k" => (0.33, 0.42),
        "q4_k" => (0.15, 0.2),
        "q5_k" => (0.08, 0.12),
        "q6_k" => (0.03, 0.12),
        "q8_k" => (0.0045, 0.0045),
        _ => unreachable!("{name}"),
    }
}

/// Elements sharing one scale (and min) in each format.
fn sub_block(name: &str) -> usize {
    match name {
        "q4_k" | "q5_k" => 32,
        "q8_k" => QK_K,
        _ => 16,
    }
}

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

/// Values of one of several shapes, scaled so that the largest magnitude of every block is `scale`
/// (0.1 ..= 1000: well inside the range where the f16 super-block scales are precise).
fn block_values(max_len: usize) -> impl Strategy<Value = Vec<f32>> {
    let shape = prop_oneof![
        prop::collection::vec(-1.0f64..1.0, 1..=max_len),
        prop::collection::vec((-1.0f64..1.0).prop_map(|u| u.powi(5)), 1..=max_len),
        prop::collection::vec(0.5f64..1.5, 1..=max_len),
        prop::collection::vec(prop_oneof![9 => -1.0f64..1.0, 1 => -30.0f64..30.0], 1..=max_len),
        prop::collection::vec(prop_oneof![-1.0f64..1.0, Just(0.0)], 1..=max_len),
    ];
    (shape, -1.0f64..3.0).prop_map(|(u, e)| {
        let scale = 10f64.powf(e);
        let mut x = Vec::with_capacity(u.len());
        for block in u.chunks(QK_K) {
            let m = block.iter().fold(0f64, |m, v| m.max(v.abs()));
            let start = x.len();
            x.extend(block.iter().map(|v| if m == 0.0 { 0.0 } else { (v / m * scale) as f32 }));
            if m == 0.0 {
                x[start] = scale as f32;
            }
        }
        x
    })
}

fn check_round_trip(x: &[f32], w: Option<&[f32]>) -> Result<(), TestCaseError> {
    for f in FORMATS {
        let name = f.desc().name;
        let q = quantize(*f, x, w);
        let y = dequantize(*f, &q, x.len());
        let (plain, weighted) = bound(name);
        let lim = if w.is_some() { weighted } else { plain };
        for (blk, (xb, yb)) in x.chunks(QK_K).zip(y.chunks(QK_K)).enumerate() {
            let amax = xb.iter().fold(0f32, |m, v| m.max(v.abs()));
            for (i, (a, b)) in xb.iter().zip(yb).enumerate() {
                prop_assert!(
                    (a - b).abs() <= lim * amax,
                    "{name}: block {blk} element {i}: {a} decodes to {b} (block max {amax}, weights {})",
                    w.is_some()
                );
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn round_trip_error_is_bounded(x in block_values(2 * QK_K)) {
        check_round_trip(&x, None)?;
    }

    #[test]
    fn round_trip_with_weights_is_bounded(
        (x, w) in block_values(QK_K).prop_flat_map(|x| {
            let n = x.len();
            (Just(x), prop::collection::vec(0.1f32..10.0, n))
        })
    ) {
        check_round_trip(&x, Some(&w))?;
    }

    /// A partial block: scales come from the real elements only, a sub-block of padding only
    /// decodes to 0, and each padded position holds the code nearest 0, so it is no larger in
    /// magnitude than any real value of its sub-block.
    #[test]
    fn partial_blocks_pad_with_the_code_nearest_zero(x in block_values(QK_K - 1), weighted in any::<bool>()) {
        let n = x.len();
        let w: Vec<f32> = (0..n).map(|i| 0.5 + (i % 7) as f32).collect();
        let w = weighted.then_some(&w[..]);
        for f in FORMATS {
            let name = f.desc().name;
            let q = quantize(*f, &x, w);
            // Decode the whole block, padded positions included.
            let full = dequantize(*f, &q, QK_K);
            let sub = sub_block(name);
            for p in n..QK_K {
                let j = p / sub;
                let v = full[p].abs();
                if j * sub >= n {
                    prop_assert_eq!(v, 0.0, "{}: padded sub-block {} must decode to 0", name, j);
                } else {
                    let nearest = full[j * sub..n.min(j * sub + sub)].iter().fold(f32::INFINITY, |m, r| m.min(r.abs()));
                    prop_assert!(v <= nearest * (1.0 + 1e-6) + f32::MIN_POSITIVE,
                        "{}: padded element {} decodes to {}, but {} is representable", name, p, full[p], nearest);
                }
            }
        }
    }

    /// Full blocks of a row are encoded exactly as on their own, whatever the partial tail.
    #[test]
    fn full_blocks_do_not_depend_on_the_tail(x in block_values(QK_K), tail in block_values(QK_K - 1)) {
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

    /// Any bytes decode without panicking, to every dtype and any row length; f16 / bf16
    /// are the rounded f32 values.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 292 * 2), cut in 0usize..QK_K) {
        for f in FORMATS {
            let bb = f.desc().block_bytes;
            let q = &bytes[..2 * bb];
            let n = 2 * QK_K - cut;
            let y = dequantize(*f, q, n);
            let whole = dequantize(*f, q, 2 * QK_K);
            for i in 0..n {
                prop_assert!(qforge_golden::same_f32(y[i], whole[i]), "partial row differs at {}", i);
            }
            let mut h = vec![f16::ZERO; n];
            f.dequant_row(q, OutRow::F16(&mut h)).unwrap();
            let mut b = vec![bf16::ZERO; n];
            f.dequant_row(q, OutRow::Bf16(&mut b)).unwrap();
            for i in 0..n {
                prop_assert!(h[i].to_bits() == f16::from_f32(y[i]).to_bits() || (y[i].is_nan() && h[i].is_nan()));
                prop_assert!(b[i].to_bits() == bf16::from_f32(y[i]).to_bits() || (y[i].is_nan() && b[i].is_nan()));
            }
        }
    }

    /// Any finite values (subnormal to f32::MAX) and any finite non-negative weights encode
    /// without panicking.
    #[test]
    fn arbitrary_finite_input_never_panics(
        x in prop::collection::vec(any::<f32>().prop_filter("finite", |v| v.is_finite()), 1..=300),
        wseed in any::<u32>(),
    ) {
        let w: Vec<f32> = x.iter().enumerate().map(|(i, v)| {
            match (wseed as usize + i) % 4 { 0 => 0.0, 1 => v.abs(), 2 => f32::MAX, _ => 1.0 }
        }).collect();
        for f in FORMATS {
            quantize(*f, &x, None);
            quantize(*f, &x, Some(&w));
        }
    }

    /// NaN or infinity anywhere in the input is rejected with a typed error.
    #[test]
    fn non_finite_input_is_rejected(
        x in block_values(300),
        pos in any::<prop::sample::Index>(),
        bad in prop_oneof![Just(f32::NAN), Just(f32::INFINITY), Just(f32::NEG_INFINITY)],
    ) {
        let mut x = x;
        let at = pos.index(x.len());
        x[at] = bad;
        for f in FORMATS {
            let mut q = vec![0u8; f.row_bytes(x.len()).unwrap()];
            match f.quantize_row(&x, None, &mut q) {
                Err(QuantError::NonFinite { index, value }) => {
                    prop_assert_eq!(index, at);
                    prop_assert!(value.to_bits() == bad.to_bits() || (value.is_nan() && bad.is_nan()));
                }
                other => prop_assert!(false, "{}: expected NonFinite, got {:?}", f.desc().name, other),
            }
        }
    }
}

/// Blocks decoded through `BlockFormat::decode` directly match the row-level view.
#[test]
fn block_and_row_decode_agree() {
    let x: Vec<f32> = (0..QK_K).map(|i| ((i * 37 % 101) as f32 - 50.0) / 7.0).collect();
    let mut b: qforge_k::BlockQ4K = bytemuck::Zeroable::zeroed();
    qforge_k::Q4K::encode(&x, None, &mut b);
    let mut direct = [0f32; QK_K];
    qforge_k::Q4K::decode(&b, &mut direct);
    let row = dequantize(FORMATS[2], bytemuck::bytes_of(&b), QK_K);
    assert_eq!(direct.to_vec(), row);
}

/// The scale and min of a partial sub-block come from its real elements only: real values in
/// [-2, -1] use the whole code range for that interval. Had the padding zeros been included,
/// the range would be [-2, 0] and the error twice as large (checked below as a control).
#[test]
fn partial_sub_block_scales_ignore_the_padding() {
    let x: Vec<f32> = (0..12).map(|i| -1.0 - i as f32 / 11.0).collect();
    let mut zero_padded = x.clone();
    zero_padded.resize(32, 0.0);
    for (name, nmax) in [("q2_k", 3.0f32), ("q4_k", 15.0), ("q5_k", 31.0)] {
        let f = *FORMATS.iter().find(|f| f.desc().name == name).unwrap();
        let max_err = |input: &[f32]| {
            let y = dequantize(f, &quantize(f, input, None), input.len());
            x.iter().zip(&y).map(|(a, b)| (a - b).abs()).fold(0f32, f32::max)
        };
        let step = 1.0 / nmax;
        assert!(max_err(&x) <= 0.45 * step, "{name}: partial block error {} > {}", max_err(&x), 0.45 * step);
        assert!(
            max_err(&zero_padded) > 0.45 * step,
            "{name}: control case should be worse: {} {}",
            max_err(&x),
            max_err(&zero_padded)
        );
    }
}
