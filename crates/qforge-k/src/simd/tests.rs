//! The AVX2 kernels against the portable ones, bit for bit, on this CPU.

use super::*;

use qforge_core::rand::Rng;
use qforge_golden::needs;

/// Uniform in [lo, hi].
fn range(rng: &mut Rng, lo: i32, hi: i32) -> i32 {
    lo + (rng.next_u64() % (hi - lo + 1) as u64) as i32
}

/// Random blocks within the kernel's contract (`|q·scale| < 2^15`), from small codes with
/// large scales to full-range codes, including all-extreme blocks and codes of -128.
#[test]
fn avx2_isum_equals_portable() {
    if !needs::avx2() {
        return;
    }
    let mut rng = Rng::new(0x9e37_79b9_7f4a_7c15);
    let mut fallbacks = 0;
    for case in 0..20_000 {
        // Largest |code| of this block, and the largest scale that keeps |q·s| < 2^15.
        let qmax = [1, 3, 7, 15, 31, 32, 63, 113, 127, 128][case % 10];
        let smax = (i16::MAX as i32) / qmax;
        let mode = (case / 10) % 4;
        let q: [i8; QK_K] = std::array::from_fn(|_| match mode {
            0 => range(&mut rng, -qmax, qmax.min(127)) as i8,
            1 => [-qmax, qmax.min(127)][(rng.next_u64() & 1) as usize] as i8,
            2 => (-qmax) as i8,
            _ => range(&mut rng, 0, qmax.min(127)) as i8,
        });
        let a: [i8; QK_K] = std::array::from_fn(|_| match mode {
            1 | 2 => [-128, 127][(rng.next_u64() & 1) as usize],
            _ => range(&mut rng, -128, 127) as i8,
        });
        let scales: [i16; GROUPS] = std::array::from_fn(|_| match mode {
            1 | 2 => [-smax, smax][(rng.next_u64() & 1) as usize] as i16,
            _ => range(&mut rng, -smax, smax) as i16,
        });
        fallbacks += usize::from(q.contains(&i8::MIN));
        // SAFETY: `needs::avx2()` returned true above, so AVX2 and FMA are present.
        let fast = unsafe { scaled_isum_avx2(&q, &a, &scales) };
        assert_eq!(fast, scaled_isum(&q, &a, &scales), "case {case}: q {q:?} a {a:?} scales {scales:?}");
    }
    assert!(fallbacks > 0, "no block exercised the -128 fallback");
}

/// Whole rows of q8_k (the signed-code kernel's format here) from random bytes (random codes,
/// f32 scales, NaN / Inf included): the dispatched `q8k_vec_dot` (AVX2 here) and the portable
/// one give the same f32 bits.
#[test]
fn avx2_rows_are_bit_identical() {
    use crate::Q8K;
    fn rows<F: Q8KDot>(rng: &mut Rng) {
        for n in [1usize, 3, 16] {
            let mut bytes = |len: usize| -> Vec<u8> { (0..len).map(|_| rng.next_u64() as u8).collect() };
            let wb = bytes(n * size_of::<F::Block>());
            let ab = bytes(n * size_of::<BlockQ8K>());
            let w: &[F::Block] = bytemuck::cast_slice(&wb);
            let a: &[BlockQ8K] = bytemuck::cast_slice(&ab);
            let fast = crate::dot::q8k_vec_dot::<F>(w, a);
            let safe = q8k_vec_dot_with::<F>(w, a, scaled_isum);
            assert!(fast.to_bits() == safe.to_bits() || (fast.is_nan() && safe.is_nan()), "{fast} vs {safe}");
        }
    }
    if !needs::avx2() {
        return;
    }
    let mut rng = Rng::new(0x1234_5678_9abc_def1);
    for _ in 0..200 {
        rows::<Q8K>(&mut rng);
    }
}

/// Rows of random blocks (finite f16 scales of every magnitude, and raw bytes: NaN and
/// infinite scales too) decode to the same f32 bits with the AVX2 build as with the portable
/// one, whole rows and rows ending in a partial block.
fn decode_equal<F: crate::decode::DecodeBlock>(seed: u64) {
    assert!(qforge_core::cpu::avx2(), "this test needs AVX2 (every x86-64 machine this project builds on has it)");
    let mut rng = Rng::new(seed);
    let bb = size_of::<F::Block>();
    for case in 0..200 {
        let nb = 1 + case % 5;
        let mut bytes: Vec<u8> = (0..nb * bb).map(|_| rng.next_u64() as u8).collect();
        if case % 3 != 0 {
            // Finite scales: clear the top exponent bit of every 16-bit word that holds one.
            for b in bytes.chunks_exact_mut(bb) {
                for i in (1..bb).step_by(2) {
                    b[i] &= 0xBF;
                }
            }
        }
        let blocks: Vec<F::Block> = bytes.chunks_exact(bb).map(bytemuck::pod_read_unaligned).collect();
        let n = nb * QK_K - [0, 1, 100][case % 3];
        let (mut fast, mut slow) = (vec![0f32; n], vec![0f32; n]);
        // SAFETY: AVX2, FMA and F16C are present (asserted above).
        unsafe { decode_row_avx2::<F, f32>(&blocks, &mut fast) };
        crate::decode::decode_row_portable::<F, f32>(&blocks, &mut slow);
        for (i, (a, b)) in fast.iter().zip(&slow).enumerate() {
            assert!(a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()), "case {case} value {i}: {a:e} vs {b:e}");
        }
        // f16 / bf16 rows: the same bits from both builds.
        let (mut fast, mut slow) = (vec![half::f16::ZERO; n], vec![half::f16::ZERO; n]);
        // SAFETY: as above.
        unsafe { decode_row_avx2::<F, half::f16>(&blocks, &mut fast) };
        crate::decode::decode_row_portable::<F, half::f16>(&blocks, &mut slow);
        assert!(fast.iter().zip(&slow).all(|(a, b)| a.to_bits() == b.to_bits()), "case {case}: f16 rows differ");
        let (mut fast, mut slow) = (vec![half::bf16::ZERO; n], vec![half::bf16::ZERO; n]);
        // SAFETY: as above.
        unsafe { decode_row_avx2::<F, half::bf16>(&blocks, &mut fast) };
        crate::decode::decode_row_portable::<F, half::bf16>(&blocks, &mut slow);
        assert!(fast.iter().zip(&slow).all(|(a, b)| a.to_bits() == b.to_bits()), "case {case}: bf16 rows differ");
    }
}

#[test]
fn avx2_decode_equals_portable() {
    decode_equal::<crate::Q2K>(1);
    decode_equal::<crate::Q3K>(2);
    decode_equal::<crate::Q4K>(3);
    decode_equal::<crate::Q5K>(4);
    decode_equal::<crate::Q6K>(5);
    decode_equal::<crate::Q8K>(6);
}

/// The AVX2 build of a format's quantizer writes the portable build's bytes: rows of every
/// tail length (partial super-blocks included), with and without importance weights,
/// ordinary, tiny and huge values.
fn encode_equal<F: qforge_core::BlockFormat>(seed: u64) {
    let mut rng = Rng::new(seed);
    for case in 0..60 {
        let n = 1 + (case * 37) % (2 * QK_K + 40);
        let scale = [1.0f32, 1e-30, 3e30, 0.0][case % 4];
        let x: Vec<f32> = (0..n).map(|_| ((rng.next_u64() % 20001) as f32 - 10000.0) * 1e-4 * scale).collect();
        let w: Vec<f32> = (0..n).map(|_| (rng.next_u64() % 1000) as f32 / 100.0).collect();
        for weights in [None, Some(&w[..])] {
            let nb = n.div_ceil(QK_K);
            let mut fast = vec![bytemuck::Zeroable::zeroed(); nb];
            let mut slow = vec![bytemuck::Zeroable::zeroed(); nb];
            // SAFETY: `needs::avx2()` returned true, so AVX2, FMA and F16C are present.
            unsafe { encode_row_avx2::<F>(&x, weights, &mut fast) };
            qforge_core::encode_blocks::<F>(&x, weights, &mut slow);
            let (fast, slow): (&[u8], &[u8]) = (bytemuck::cast_slice(&fast), bytemuck::cast_slice(&slow));
            assert_eq!(fast, slow, "{} case {case} ({n} values, weights {})", F::DESC.name, weights.is_some());
        }
    }
}

#[test]
fn avx2_quantizers_equal_portable() {
    if !needs::avx2() {
        return;
    }
    encode_equal::<crate::Q2K>(51);
    encode_equal::<crate::Q3K>(52);
    encode_equal::<crate::Q4K>(53);
    encode_equal::<crate::Q5K>(54);
    encode_equal::<crate::Q6K>(55);
    encode_equal::<crate::Q8K>(56);
}
