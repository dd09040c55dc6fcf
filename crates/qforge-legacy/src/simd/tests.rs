//! The AVX2 kernel against the portable one, bit for bit, on this CPU.
//!
//! These tests need AVX2, FMA and F16C. On an x86-64 CPU without them they fail (an untested
//! kernel is not a pass) unless `QFORGE_ALLOW_NO_AVX2=1` says to skip them, which they then
//! report on stderr.

use super::*;
use crate::block::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0, BlockQ8_1};
use crate::dot;
use crate::dot::{isum_lanes, vec_dot_portable};
use qforge_core::le::F16Le;

use qforge_core::rand::Rng;

/// The low byte of a draw.
fn byte(rng: &mut Rng) -> u8 {
    rng.next_u64() as u8
}

/// A block with random bytes, its f16 fields (the first `halves` of them) replaced by finite
/// values in a wide range unless `raw` (then any bits: NaN and infinities too), and, when
/// `extreme`, its quant bytes by 0x80 / 0x7f / 0xff / 0x00 (i8 -128, 127, -1, 0).
fn block<B: bytemuck::Pod>(rng: &mut Rng, halves: usize, raw: bool, extreme: bool) -> B {
    let mut bytes = vec![0u8; size_of::<B>()];
    for (i, b) in bytes.iter_mut().enumerate() {
        *b = if extreme && i >= 2 * halves {
            [0x80, 0x7f, 0xff, 0x00][(rng.next_u64() & 3) as usize]
        } else {
            byte(rng)
        };
    }
    if !raw {
        for h in bytes.chunks_exact_mut(2).take(halves) {
            let v = ((rng.next_u64() % 2001) as f32 - 1000.0) * 2f32.powi((rng.next_u64() % 24) as i32 - 20);
            h.copy_from_slice(&F16Le::from_f32(v).0);
        }
    }
    bytemuck::pod_read_unaligned(&bytes)
}

fn same(x: f32, y: f32) -> bool {
    x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan())
}

/// Random rows of 0..=40 blocks (every tail length of a batch), ordinary and extreme
/// blocks, finite and raw scales: the AVX2 result has the portable result's bits.
fn rows_equal<W: LegacyBlock, A: ActBlock>(whalves: usize, ahalves: usize, seed: u64) {
    let mut rng = Rng::new(seed);
    for case in 0..3000 {
        let nb = case % 41;
        let (raw, extreme) = (case % 7 == 3, case % 5 == 1);
        let w: Vec<W> = (0..nb).map(|_| block(&mut rng, whalves, raw, extreme)).collect();
        let a: Vec<A> = (0..nb).map(|_| block(&mut rng, ahalves, raw, extreme)).collect();
        let want = vec_dot_portable(&w, &a);
        // SAFETY: `qforge_golden::needs::avx2()` returned true, so AVX2, FMA and F16C are present.
        let got = unsafe { vec_dot_avx2(&w, &a) };
        assert!(same(got, want), "case {case} ({nb} blocks): avx2 {got:e}, portable {want:e}");
        assert!(same(dot::vec_dot(&w, &a), want), "case {case}: dispatch");
    }
}

#[test]
fn avx2_rows_equal_portable() {
    if !qforge_golden::needs::avx2() {
        return;
    }
    rows_equal::<BlockQ4_0, BlockQ8_0>(1, 1, 1);
    rows_equal::<BlockQ4_1, BlockQ8_1>(2, 2, 2);
    rows_equal::<BlockQ5_0, BlockQ8_0>(1, 1, 3);
    rows_equal::<BlockQ5_1, BlockQ8_1>(2, 2, 4);
    rows_equal::<BlockQ8_0, BlockQ8_0>(1, 1, 5);
    rows_equal::<BlockQ8_1, BlockQ8_1>(2, 2, 6);
}

/// The integer lanes alone, over the whole `i8` range of activations (-128 included) and
/// all-extreme blocks.
fn lanes_equal<W: LegacyBlock, A: ActBlock>(whalves: usize, ahalves: usize, seed: u64) {
    let mut rng = Rng::new(seed);
    for case in 0..20_000 {
        let w: W = block(&mut rng, whalves, false, case % 2 == 0);
        let mut a: A = block(&mut rng, ahalves, false, case % 3 == 0);
        if case % 4 == 1 {
            let qs: &mut [u8] = &mut bytemuck::bytes_of_mut(&mut a)[2 * ahalves..];
            qs.fill(0x80);
        }
        // SAFETY: `qforge_golden::needs::avx2()` returned true, so AVX2, FMA and F16C are present.
        let got = unsafe { isum_lanes_avx2(&w, &a) };
        let mut lanes = [0i32; LANES];
        // SAFETY: `lanes` is 8 i32, exactly 32 bytes, so the unaligned store writes only it.
        unsafe { _mm256_storeu_si256(lanes.as_mut_ptr().cast(), got) };
        assert_eq!(lanes, isum_lanes::<W>(&w.quants_i8(), a.qs()), "case {case}: w {:?} a {:?}", w.quants_i8(), a.qs());
    }
}

#[test]
fn avx2_lanes_equal_portable() {
    if !qforge_golden::needs::avx2() {
        return;
    }
    lanes_equal::<BlockQ4_0, BlockQ8_0>(1, 1, 11);
    lanes_equal::<BlockQ4_1, BlockQ8_1>(2, 2, 12);
    lanes_equal::<BlockQ5_0, BlockQ8_0>(1, 1, 13);
    lanes_equal::<BlockQ5_1, BlockQ8_1>(2, 2, 14);
    lanes_equal::<BlockQ8_0, BlockQ8_0>(1, 1, 15);
    lanes_equal::<BlockQ8_1, BlockQ8_1>(2, 2, 16);
}

/// Appending zero-scale blocks (what padding is: `d = 0` weights against zero activations)
/// never changes a row's result, on either kernel.
fn padding_invariant<W: LegacyBlock, A: ActBlock>(whalves: usize, ahalves: usize, seed: u64) {
    let mut rng = Rng::new(seed);
    for case in 0..500 {
        let nb = case % 37;
        let mut w: Vec<W> = (0..nb).map(|_| block(&mut rng, whalves, false, false)).collect();
        let mut a: Vec<A> = (0..nb).map(|_| block(&mut rng, ahalves, false, false)).collect();
        // SAFETY: `qforge_golden::needs::avx2()` returned true, so AVX2, FMA and F16C are present.
        let (fast, slow) = (unsafe { vec_dot_avx2(&w, &a) }, vec_dot_portable(&w, &a));
        for extra in 1..=9 {
            let mut pad: W = block(&mut rng, whalves, false, false);
            bytemuck::bytes_of_mut(&mut pad)[..2].fill(0); // d = +0; quants arbitrary
            w.push(pad);
            a.push(A::zeroed());
            // SAFETY: as above.
            let got = unsafe { vec_dot_avx2(&w, &a) };
            assert!(same(got, fast), "case {case} + {extra} zero blocks: {got:e} vs {fast:e}");
            assert!(same(vec_dot_portable(&w, &a), slow), "case {case} + {extra}: portable");
        }
    }
}

#[test]
fn padding_never_changes_a_result() {
    if !qforge_golden::needs::avx2() {
        return;
    }
    padding_invariant::<BlockQ4_0, BlockQ8_0>(1, 1, 21);
    padding_invariant::<BlockQ4_1, BlockQ8_1>(2, 2, 22);
    padding_invariant::<BlockQ5_0, BlockQ8_0>(1, 1, 23);
    padding_invariant::<BlockQ5_1, BlockQ8_1>(2, 2, 24);
    padding_invariant::<BlockQ8_0, BlockQ8_0>(1, 1, 25);
    padding_invariant::<BlockQ8_1, BlockQ8_1>(2, 2, 26);
}

/// Several activation rows at once (1..=9: every chunking by 4): each result has the bits of
/// the portable kernel on that row.
fn multi_rows_equal<W: LegacyBlock, A: ActBlock>(whalves: usize, ahalves: usize, seed: u64) {
    let mut rng = Rng::new(seed);
    for case in 0..400 {
        let nb = case % 41;
        let rows = 1 + case % 9;
        let (raw, extreme) = (case % 7 == 3, case % 5 == 1);
        let w: Vec<W> = (0..nb).map(|_| block(&mut rng, whalves, raw, extreme)).collect();
        let a: Vec<Vec<A>> =
            (0..rows).map(|_| (0..nb).map(|_| block(&mut rng, ahalves, raw, extreme)).collect()).collect();
        let refs: Vec<&[A]> = a.iter().map(Vec::as_slice).collect();
        let mut out = vec![f32::NAN; rows];
        assert!(vec_dot_rows(&w, &refs, &mut out));
        for (r, (got, a)) in out.iter().zip(&a).enumerate() {
            let want = vec_dot_portable(&w, a);
            assert!(same(*got, want), "case {case} row {r} of {rows} ({nb} blocks): {got:e} vs {want:e}");
        }
        let mut via_dot = vec![f32::NAN; rows];
        dot::vec_dot_rows(&w, &refs, &mut via_dot);
        assert_eq!(out.map_bits(), via_dot.map_bits(), "case {case}: dispatch");
    }
}

trait Bits {
    fn map_bits(&self) -> Vec<u32>;
}

impl Bits for Vec<f32> {
    fn map_bits(&self) -> Vec<u32> {
        self.iter().map(|v| v.to_bits()).collect()
    }
}

#[test]
fn avx2_multi_rows_equal_portable() {
    if !qforge_golden::needs::avx2() {
        return;
    }
    multi_rows_equal::<BlockQ4_0, BlockQ8_0>(1, 1, 31);
    multi_rows_equal::<BlockQ4_1, BlockQ8_1>(2, 2, 32);
    multi_rows_equal::<BlockQ5_0, BlockQ8_0>(1, 1, 33);
    multi_rows_equal::<BlockQ5_1, BlockQ8_1>(2, 2, 34);
    multi_rows_equal::<BlockQ8_0, BlockQ8_0>(1, 1, 35);
    multi_rows_equal::<BlockQ8_1, BlockQ8_1>(2, 2, 36);
}

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
