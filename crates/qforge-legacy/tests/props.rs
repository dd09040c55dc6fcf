//! Property tests specific to the legacy formats: round-trip error bounds, importance weights,
//! partial blocks, the block-level API. The properties every family shares (arbitrary bytes,
//! non-finite input, rows of any length, extreme input, zeros, ...) are the conformance suite
//! in tests/golden.rs.

use bytemuck::Zeroable;
use proptest::prelude::*;
use qforge_core::{BlockFormat, bf16, f16};
use qforge_legacy::*;

/// The f16 scale `d` every legacy block starts with, and the f16 `m` of the affine ones.
fn header<B: bytemuck::Pod>(b: &B) -> (f32, f32) {
    let bytes = bytemuck::bytes_of(b);
    let h = |i: usize| f16::from_le_bytes([bytes[i], bytes[i + 1]]).to_f32();
    (h(0), h(2))
}

fn decode<F: BlockFormat>(b: &F::Block) -> [f32; 32] {
    let mut y = [0f32; 32];
    F::decode(b, &mut y);
    y
}

fn encode<F: BlockFormat>(x: &[f32], w: Option<&[f32]>) -> F::Block {
    let mut b = F::Block::zeroed();
    F::encode(x, w, &mut b);
    b
}

fn amax(x: &[f32]) -> f32 {
    x.iter().fold(0f32, |a, v| a.max(v.abs()))
}

/// 32 values of magnitude up to 10^e, e in [-2, 3] (f16 scales stay normal).
fn block_values() -> impl Strategy<Value = Vec<f32>> {
    (prop::collection::vec(-1f32..1f32, 32), -2i32..=3, any::<bool>())
        .prop_map(|(v, e, shift)| v.iter().map(|x| (x + if shift { 1.5 } else { 0.0 }) * 10f32.powi(e)).collect())
}

/// Without weights each element is rounded to the nearest level of the f32 scale, except that
/// q4_0 / q5_0 clamp the level opposite the largest magnitude (`-max/d = +nmax` is stored as
/// `nmax - 1`), an error of up to one step. Storing `d` (and `m`) as f16 adds at most
/// 2^-11 relative per term, covered by the `amax·2^-8` slack.
fn check_unweighted<F: BlockFormat>(x: &[f32], steps: f32) -> Result<(), TestCaseError> {
    let b = encode::<F>(x, None);
    let y = decode::<F>(&b);
    let (d, _) = header(&b);
    let bound = steps * d.abs() + amax(x) * 2f32.powi(-8) + 1e-30;
    for (i, (&xi, &yi)) in x.iter().zip(&y).enumerate() {
        prop_assert!((xi - yi).abs() <= bound, "{}: element {i}: {xi} -> {yi}, bound {bound}", F::DESC.name);
    }
    Ok(())
}

/// With importance weights ggml searches scales around the plain one and refits the scale
/// (and min) by weighted least squares, so an element of low weight may land more than one
/// step away; it stays within 4 steps of `2·amax / (2^bits - 1)`.
fn check_weighted<F: BlockFormat>(x: &[f32], w: &[f32], bits: i32) -> Result<(), TestCaseError> {
    let y = decode::<F>(&encode::<F>(x, Some(w)));
    let bound = 4.0 * 2.0 * amax(x) / (2f32.powi(bits) - 1.0) + 1e-30;
    for (i, (&xi, &yi)) in x.iter().zip(&y).enumerate() {
        prop_assert!((xi - yi).abs() <= bound, "{}: element {i}: {xi} -> {yi}, bound {bound}", F::DESC.name);
    }
    Ok(())
}

/// Partial block of `n` real elements: same scale (and min) and same quants for the real
/// elements as the full block padded with copies of `x[0]` (which changes neither the
/// extremes nor the largest magnitude), and padded positions decode to the value nearest 0.
/// `affine_levels` is `Some(2^bits)` for q4_1 / q5_1.
fn check_partial<F: BlockFormat>(x: &[f32], affine_levels: Option<i32>) -> Result<(), TestCaseError> {
    let n = x.len();
    let mut full = [x[0]; 32];
    full[..n].copy_from_slice(x);
    let (bp, bf) = (encode::<F>(x, None), encode::<F>(&full, None));
    let (hp, hf) = (header(&bp), header(&bf));
    prop_assert_eq!(hp.0.to_bits(), hf.0.to_bits(), "{}: scale differs", F::DESC.name);
    if affine_levels.is_some() {
        prop_assert_eq!(hp.1.to_bits(), hf.1.to_bits(), "{}: min differs", F::DESC.name);
    }
    let (yp, yf) = (decode::<F>(&bp), decode::<F>(&bf));
    for i in 0..n {
        prop_assert_eq!(yp[i].to_bits(), yf[i].to_bits(), "{}: real element {} differs", F::DESC.name, i);
    }
    for &v in &yp[n..] {
        if let Some(levels) = affine_levels {
            let (d, m) = hp;
            let nearest = (0..levels).map(|c| (c as f32 * d + m).abs()).fold(f32::INFINITY, f32::min);
            prop_assert!(v.abs() <= nearest, "{}: padded value {v}, nearest-0 level {nearest}", F::DESC.name);
        } else {
            prop_assert_eq!(v, 0.0, "{}: padded value is not 0", F::DESC.name);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn roundtrip_error_is_bounded(x in block_values()) {
        check_unweighted::<Q4_0>(&x, 1.0)?;
        check_unweighted::<Q5_0>(&x, 1.0)?;
        check_unweighted::<Q4_1>(&x, 0.5)?;
        check_unweighted::<Q5_1>(&x, 0.5)?;
        check_unweighted::<Q8_0>(&x, 0.5)?;
        check_unweighted::<Q8_1>(&x, 0.5)?;
    }

    #[test]
    fn weighted_roundtrip_error_is_bounded(x in block_values(), w in prop::collection::vec(0f32..10.0, 32)) {
        check_weighted::<Q4_0>(&x, &w, 4)?;
        check_weighted::<Q5_0>(&x, &w, 5)?;
        check_weighted::<Q4_1>(&x, &w, 4)?;
        check_weighted::<Q5_1>(&x, &w, 5)?;
        // ggml's 8-bit quantizers ignore importance weights.
        prop_assert_eq!(encode::<Q8_0>(&x, Some(&w)), encode::<Q8_0>(&x, None));
        prop_assert_eq!(encode::<Q8_1>(&x, Some(&w)), encode::<Q8_1>(&x, None));
    }

    #[test]
    fn partial_blocks_use_real_elements_only(x in block_values(), n in 1usize..=32) {
        let x = &x[..n];
        check_partial::<Q4_0>(x, None)?;
        check_partial::<Q5_0>(x, None)?;
        check_partial::<Q8_0>(x, None)?;
        check_partial::<Q8_1>(x, None)?;
        check_partial::<Q4_1>(x, Some(16))?;
        check_partial::<Q5_1>(x, Some(32))?;
    }

    /// The block-level API decodes any bytes without panicking (`decode_row` is overridden
    /// with a fast path, so the suite's row-level check does not reach `decode` itself).
    #[test]
    fn block_decode_of_arbitrary_bytes_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        for blk in bytes.chunks_exact(18) {
            let b: BlockQ4_0 = bytemuck::pod_read_unaligned(blk);
            let mut y = [bf16::ZERO; 32];
            Q4_0::decode(&b, &mut y);
        }
    }
}
