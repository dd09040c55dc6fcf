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
    reference_kernel_checks::<BlockQ4_0>(61);
    reference_kernel_checks::<BlockQ4_1>(62);
    reference_kernel_checks::<BlockQ5_0>(63);
    reference_kernel_checks::<BlockQ5_1>(64);
}

/// Values on which the block kernels' order-sensitive or edge behaviour shows: signed zeros,
/// subnormals (scales whose inverse overflows), exact halves (ties of the `+ 0.5` truncation),
/// the extremes, infinities and NaN.
const SPECIAL: [f32; 16] = [
    0.0,
    -0.0,
    1e-40,
    -1e-40,
    f32::MIN_POSITIVE,
    0.5,
    -0.5,
    7.5,
    -8.0,
    8.0,
    15.0,
    f32::MAX,
    -f32::MAX,
    f32::INFINITY,
    f32::NEG_INFINITY,
    f32::NAN,
];

/// The intrinsics quantizer ([`fit`]) writes the portable reference's bytes on adversarial
/// whole-block rows: blocks drawn from [`SPECIAL`] mixed with small integers and halves (exact
/// ties after scaling), all-equal blocks, and blocks holding both `+amax` and `-amax`.
fn adversarial_equal<W: LegacyBlock + PartialEq + std::fmt::Debug>(seed: u64) {
    let mut rng = Rng::new(seed);
    for case in 0..4000 {
        let nb = 1 + case % 5;
        let mut x = vec![0f32; nb * crate::block::QK];
        for b in x.chunks_mut(crate::block::QK) {
            let style = rng.next_u64() % 6;
            let fill = SPECIAL[(rng.next_u64() % 16) as usize];
            for v in b.iter_mut() {
                let r = rng.next_u64();
                *v = match style {
                    0 => fill,
                    1 => SPECIAL[(r % 16) as usize],
                    2 => (r % 33) as f32 * 0.5 - 8.0,
                    3 if r.is_multiple_of(7) => SPECIAL[(r / 7 % 16) as usize],
                    _ => (r % 2001) as f32 * 1e-3 - 1.0,
                };
            }
            if style == 4 {
                // Both signs of the largest magnitude, the negative one first or not.
                let (i, j) = ((rng.next_u64() % 32) as usize, (rng.next_u64() % 32) as usize);
                b[i] = 2.0;
                b[j] = if i == j { 2.0 } else { -2.0 };
            }
        }
        let mut fast = vec![W::zeroed(); nb];
        let mut slow = vec![W::zeroed(); nb];
        // SAFETY: `qforge_golden::needs::avx2()` returned true, so AVX2, FMA and F16C are present.
        unsafe { encode_row_avx2(&x, None, &mut fast) };
        crate::codec::encode_row_portable(&x, None, &mut slow);
        assert_eq!(fast, slow, "case {case}: {x:?}");
    }
}

/// The intrinsics take ordinary blocks themselves (the reference is only their fallback) and
/// write the reference's bytes.
fn ordinary_blocks_take_the_kernel<W: LegacyBlock + PartialEq + std::fmt::Debug>(seed: u64) {
    let store = W::STORE_PACKED.expect("a 4- or 5-bit layout");
    let x = qforge_core::rand::pseudo_gaussian(64 * crate::block::QK, seed);
    for xb in x.as_chunks::<{ crate::block::QK }>().0 {
        let (mut fast, mut slow) = (W::zeroed(), W::zeroed());
        // SAFETY: `qforge_golden::needs::avx2()` returned true, so AVX2, FMA and F16C are present.
        assert!(unsafe { fit::fit_block(xb, store, &mut fast) }, "{xb:?}");
        crate::codec::encode_block(xb, None, &mut slow);
        assert_eq!(fast, slow, "{xb:?}");
    }
}

/// Both checks of the intrinsics quantizer, per 4- / 5-bit layout.
fn reference_kernel_checks<W: LegacyBlock + PartialEq + std::fmt::Debug>(seed: u64) {
    ordinary_blocks_take_the_kernel::<W>(seed);
    adversarial_equal::<W>(seed + 10);
}
