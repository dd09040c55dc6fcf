//! The AVX2 build of the quantizer against the portable one, byte for byte, on this CPU.
//! (The dot kernels' AVX2 == portable tests are `qforge-simd`'s, on every legacy block type.)
//!
//! These tests need AVX2, FMA and F16C. On an x86-64 CPU without them they fail (an untested
//! kernel is not a pass) unless `QFORGE_ALLOW_NO_AVX2=1` says to skip them, which they then
//! report on stderr.

use super::*;
use crate::block::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0, BlockQ8_1};

use qforge_core::rand::Rng;

/// The AVX2 build of the quantizer writes the portable build's bytes: rows of every tail
/// length, with and without importance weights, ordinary, tiny and huge values.
fn encode_equal<W: LegacyBlock + PartialEq + std::fmt::Debug>(seed: u64) {
    let mut rng = Rng::new(seed);
    for case in 0..300 {
        let n = 1 + case % 97;
        let scale = [1.0f32, 1e-30, 3e30, 0.0][case % 4];
        let x: Vec<f32> = (0..n).map(|_| ((rng.next_u64() % 20001) as f32 - 10000.0) * 1e-4 * scale).collect();
        let w: Vec<f32> = (0..n).map(|_| (rng.next_u64() % 1000) as f32 / 100.0).collect();
        for weights in [None, Some(&w[..])] {
            let nb = n.div_ceil(crate::block::QK);
            let mut fast = vec![W::zeroed(); nb];
            let mut slow = vec![W::zeroed(); nb];
            // SAFETY: `qforge_golden::needs::avx2()` returned true, so AVX2, FMA and F16C are present.
            unsafe { encode_row_avx2(&x, weights, &mut fast) };
            crate::codec::encode_row_portable(&x, weights, &mut slow);
            assert_eq!(fast, slow, "case {case} ({n} values, weights {})", weights.is_some());
        }
    }
}

#[test]
fn avx2_quantizer_equals_portable() {
    if !qforge_golden::needs::avx2() {
        return;
    }
    encode_equal::<BlockQ4_0>(41);
    encode_equal::<BlockQ4_1>(42);
    encode_equal::<BlockQ5_0>(43);
    encode_equal::<BlockQ5_1>(44);
    encode_equal::<BlockQ8_0>(45);
    encode_equal::<BlockQ8_1>(46);
}
