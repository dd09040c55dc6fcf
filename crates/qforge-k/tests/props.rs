//! Property tests specific to the k-quants: round-trip error bounds, partial blocks and
//! sub-blocks. The properties every family shares (arbitrary bytes, non-finite input, rows of
//! any length, ...) are the conformance suite in tests/golden.rs.

use proptest::prelude::*;
use qforge_core::BlockFormat;
use qforge_golden::conformance::{
    amax, dequantize, for_each_group, quantize, values as block_values, values_and_weights,
};
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
        // With weights, an element weighing 0.1 beside elements weighing ~9 may be sacrificed:
        // ggml's own quantize_q4_K puts such an element at 0.13 of amax (the recorded
        // regression case, where our partial-block sigma2 gives 0.21).
        "q3_k" => (0.33, 0.6),
        "q4_k" => (0.15, 0.3),
        "q5_k" => (0.08, 0.2),
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

fn check_round_trip(x: &[f32], w: Option<&[f32]>) -> Result<(), TestCaseError> {
    for_each_group(
        FORMATS,
        x,
        w,
        |_| QK_K,
        |name, blk, xb, yb| {
            let (plain, weighted) = bound(name);
            let lim = if w.is_some() { weighted } else { plain };
            let amax = amax(xb);
            for (i, (a, b)) in xb.iter().zip(yb).enumerate() {
                prop_assert!(
                    (a - b).abs() <= lim * amax,
                    "{name}: block {blk} element {i}: {a} decodes to {b} (block max {amax}, weights {})",
                    w.is_some()
                );
            }
            Ok(())
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn round_trip_error_is_bounded(x in block_values(2 * QK_K)) {
        check_round_trip(&x, None)?;
    }

    #[test]
    fn round_trip_with_weights_is_bounded(
        (x, w) in values_and_weights(QK_K)
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
