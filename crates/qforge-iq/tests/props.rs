//! Property tests specific to the I-quants: round-trip error bounds, partial blocks, iq3_s's
//! documented deviation from ggml. The properties every family shares (arbitrary bytes,
//! non-finite input, rows of any length, zeros, ...) are the conformance suite in
//! tests/golden.rs.

use proptest::prelude::*;
use qforge_core::Format;
use qforge_golden::conformance::{dequantize, for_each_group, quantize, values as block_values, values_and_weights};
use qforge_iq::{FORMATS, QK_K};

/// Worst per-block relative error in the measure ggml's I-quant searches are driven by, the
/// large values: `sqrt(Σ q·x²·(x−y)² / Σ q·x⁴)`, `q` the importance weight (1 without), without
/// and with weights. About 1.35x the worst seen over 60000 random rows of every value shape
/// below. The grids of 1.5-2.5 bits have no zero and iq1_m weighs by `x²` without an imatrix,
/// so values far below their block's largest can decode to anything near the block scale: their
/// plain `rmse / rms` has no useful bound (iq1_m reached 14 on heavy-tailed blocks, bit-exact
/// with ggml).
fn weighted_bound(name: &str) -> [f32; 2] {
    match name {
        "iq2_xxs" => [0.52, 1.0],
        "iq2_xs" => [0.4, 0.95],
        "iq2_s" => [0.42, 1.0],
        // 0.323 on an 8-value partial block (±2.9…3.8, the rest of the block zeros: the
        // regressions file's second case), the same error as ggml's own iq3_xxs on that block
        // padded with zeros (ggml-py 0.10.1, 2026-11-30).
        "iq3_xxs" => [0.44, 0.75],
        "iq3_s" => [0.23, 0.47],
        "iq1_s" => [0.75, 1.2],
        "iq1_m" => [0.7, 1.05],
        "iq4_nl" | "iq4_xs" => [0.1, 0.18],
        _ => unreachable!("{name}"),
    }
}

/// Worst per-block `rmse / rms(x)` and `max |error| / max |x|`, without and with weights, for
/// the formats whose every value is represented closely (about 1.3x the worst seen over 60000
/// rows): the 4-bit non-linear grids and iq3_s.
fn plain_bound(name: &str) -> Option<[(f32, f32); 2]> {
    match name {
        "iq3_s" => Some([(0.67, 0.6), (0.52, 0.7)]),
        "iq4_nl" => Some([(0.24, 0.19), (0.23, 0.25)]),
        "iq4_xs" => Some([(0.24, 0.2), (0.23, 0.28)]),
        _ => None,
    }
}

/// Typical quality: worst per-block `rmse / rms(x)` on whole blocks of uniform values in
/// [-1, 1] (about 1.3x the worst seen).
fn uniform_bound(name: &str) -> f32 {
    match name {
        "iq2_xxs" => 0.47,
        "iq2_xs" => 0.41,
        "iq2_s" => 0.35,
        "iq3_xxs" => 0.29,
        "iq3_s" => 0.22,
        "iq1_s" => 0.61,
        "iq1_m" => 0.77,
        "iq4_nl" => 0.09,
        "iq4_xs" => 0.09,
        _ => unreachable!("{name}"),
    }
}

fn block_size(f: &dyn Format) -> usize {
    f.desc().block_size
}

/// `(rmse / rms, max error / max |x|)` of a block.
fn block_error(x: &[f32], y: &[f32]) -> (f32, f32) {
    let amax = x.iter().fold(0f32, |m, v| m.max(v.abs()));
    let max_err = x.iter().zip(y).fold(0f32, |m, (a, b)| m.max((a - b).abs()));
    let rms = (x.iter().map(|v| v * v).sum::<f32>() / x.len() as f32).sqrt();
    let rmse = (x.iter().zip(y).map(|(a, b)| (a - b) * (a - b)).sum::<f32>() / x.len() as f32).sqrt();
    (rmse / rms, max_err / amax)
}

/// `sqrt(Σ q·x²·(x−y)² / Σ q·x⁴)` of a block, `q` its importance weights (1 without), in f64.
fn weighted_error(x: &[f32], y: &[f32], q: Option<&[f32]>) -> f32 {
    let (mut num, mut den) = (0f64, 0f64);
    for (i, (&a, &b)) in x.iter().zip(y).enumerate() {
        let w = q.map_or(1.0, |q| q[i] as f64) * (a as f64).powi(2);
        num += w * (a as f64 - b as f64).powi(2);
        den += w * (a as f64).powi(2);
    }
    (num / den).sqrt() as f32
}

fn check_round_trip(x: &[f32], w: Option<&[f32]>) -> Result<(), TestCaseError> {
    for_each_group(
        FORMATS,
        x,
        w,
        |_| QK_K,
        |name, blk, xb, yb| {
            let with = w.is_some() as usize;
            let q = w.map(|w| &w[blk * QK_K..blk * QK_K + xb.len()]);
            let (e_w, bound) = (weighted_error(xb, yb, q), weighted_bound(name)[with]);
            prop_assert!(
                e_w <= bound,
                "{name}: block {blk}: weighted error {e_w} (bound {bound}), weights {}",
                w.is_some()
            );
            if let Some(bounds) = plain_bound(name) {
                let ((rel_rms, rel_max), (e_rms, e_max)) = (bounds[with], block_error(xb, yb));
                prop_assert!(
                    e_rms <= rel_rms && e_max <= rel_max,
                    "{name}: block {blk}: rmse/rms {e_rms} (bound {rel_rms}), max err/max {e_max} (bound {rel_max}), weights {}",
                    w.is_some()
                );
            }
            Ok(())
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

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

    /// On ordinary data (whole blocks of uniform values) every format is far better than the
    /// worst-case bounds above.
    #[test]
    fn uniform_blocks_round_trip_well(u in prop::collection::vec(-1.0f32..1.0, QK_K), scale in 0.01f32..100.0) {
        let x: Vec<f32> = u.iter().map(|v| v * scale).collect();
        for f in FORMATS {
            let y = dequantize(*f, &quantize(*f, &x, None), x.len());
            let (e_rms, _) = block_error(&x, &y);
            prop_assert!(e_rms <= uniform_bound(f.desc().name), "{}: rmse/rms {}", f.desc().name, e_rms);
        }
    }

    /// A partial block: padded positions carry weight 0, so for the formats whose default
    /// weight is `x^2` the block encodes exactly like the zero-padded whole block (its scales
    /// come from the real values only); iq4_nl / iq4_xs store the code nearest 0 there.
    #[test]
    fn partial_blocks_ignore_the_padding(x in block_values(QK_K - 1)) {
        for f in FORMATS {
            let name = f.desc().name;
            let bs = block_size(*f);
            let n = x.len() % bs;
            if n == 0 {
                continue;
            }
            let part = &x[x.len() - n..];
            let q = quantize(*f, part, None);
            if ["iq3_xxs", "iq3_s", "iq1_m", "iq4_nl", "iq4_xs"].contains(&name) {
                let mut full = part.to_vec();
                full.resize(bs, 0.0);
                prop_assert_eq!(&q, &quantize(*f, &full, None), "{}", name);
            }
            if name.starts_with("iq4") {
                let y = dequantize(*f, &q, bs);
                for p in n..bs {
                    let sub = &y[p / 32 * 32..(p / 32 * 32 + 32).min(n).max(p / 32 * 32)];
                    let nearest = sub.iter().fold(f32::INFINITY, |m, v| m.min(v.abs()));
                    prop_assert!(y[p].abs() <= nearest, "{}: padded {} decodes to {}, {} is representable", name, p, y[p], nearest);
                }
            }
        }
    }
}

/// ggml's iq3_s quantizer does not advance its grid-index and sign write positions past an
/// exactly-zero 32-value sub-block, so every later sub-block's codes land one slot early.
/// qforge stores every sub-block in place: the non-zero sub-blocks after a zero one decode as
/// well as they would without it.
#[test]
fn iq3_s_keeps_sub_blocks_in_place_after_a_zero_one() {
    let f = *FORMATS.iter().find(|f| f.desc().name == "iq3_s").unwrap();
    let x: Vec<f32> = (0..QK_K).map(|i| if i < 32 { 0.0 } else { ((i * 37 % 101) as f32 - 50.0) / 25.0 }).collect();
    let y = dequantize(f, &quantize(f, &x, None), QK_K);
    let (e_rms, _) = block_error(&x[32..], &y[32..]);
    assert!(e_rms < 0.2, "sub-blocks after a zero sub-block decode badly: rmse/rms {e_rms}");
}
