//! The AVX2 LUT kernel against the portable one, bit for bit, on this CPU, for one block type
//! of each shape the trait allows (the real formats are checked again in their crates).
//!
//! These tests need AVX2, FMA and F16C. On an x86-64 CPU without them they fail (an untested
//! kernel is not a pass) unless `QFORGE_ALLOW_NO_AVX2=1` says to skip them.

use super::*;
use crate::kernels::{lanes4, lut_vec_dot, lut_vec_dot_portable, lut_vec_dot_rows, unit_values};
use bytemuck::{Pod, Zeroable};
use qforge_core::le::F16Le;
use qforge_core::rand::Rng;

/// A table with both extremes the kernel allows.
const TABLE: [i8; 16] = [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 127];

/// iq4_nl's shape: one f16 scale, split-32 codes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
struct F16Block {
    d: F16Le,
    qs: [u8; 16],
}

impl LutBlock for F16Block {
    const TABLE: [i8; 16] = TABLE;
    const UNITS: usize = 1;
    const ORDER: NibbleOrder = NibbleOrder::Split32;
    const SCALE: LutScale = LutScale::F16;
    fn codes(&self, _: usize) -> &[u8; 16] {
        &self.qs
    }
    fn f16_bits(&self) -> u16 {
        self.d.bits()
    }
}

/// Scale bytes to f32: every class of value, NaN and infinities included.
static BYTE_SCALES: [f32; 256] = {
    let mut t = [0f32; 256];
    let mut e = 0;
    while e < 256 {
        t[e] = match e {
            255 => f32::INFINITY,
            254 => f32::NAN,
            253 => -0.0,
            _ => f32::from_bits(((e as u32) << 23) | ((e as u32) * 977)),
        };
        e += 1;
    }
    t
};

/// mxfp4's shape: one non-f16 scale per unit, split-32 codes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
struct UnitBlock {
    e: u8,
    qs: [u8; 16],
}

impl LutBlock for UnitBlock {
    const TABLE: [i8; 16] = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];
    const UNITS: usize = 1;
    const ORDER: NibbleOrder = NibbleOrder::Split32;
    const SCALE: LutScale = LutScale::Byte;
    const BYTE_SCALES: &'static [f32; 256] = &BYTE_SCALES;
    fn codes(&self, _: usize) -> &[u8; 16] {
        &self.qs
    }
    fn scale_bytes(&self, _: usize) -> [u8; 2] {
        [self.e, 0]
    }
}

/// nvfp4's shape: two units, a scale per 16 elements, split-16 codes.
#[repr(C)]
#[derive(Clone, Copy, Debug, Pod, Zeroable)]
struct HalfBlock {
    d: [u8; 4],
    qs: [u8; 32],
}

impl LutBlock for HalfBlock {
    const TABLE: [i8; 16] = TABLE;
    const UNITS: usize = 2;
    const ORDER: NibbleOrder = NibbleOrder::Split16;
    const SCALE: LutScale = LutScale::ByteHalves;
    const BYTE_SCALES: &'static [f32; 256] = &BYTE_SCALES;
    fn codes(&self, u: usize) -> &[u8; 16] {
        bytemuck::cast_ref::<[u8; 32], [[u8; 16]; 2]>(&self.qs).get(u).expect("unit 0 or 1")
    }
    fn scale_bytes(&self, u: usize) -> [u8; 2] {
        [self.d[2 * u], self.d[2 * u + 1]]
    }
}

fn same(x: f32, y: f32) -> bool {
    x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan())
}

/// Random weight blocks: random bytes, f16 scales finite in a wide range unless `raw`.
fn weights<W: LutBlock>(rng: &mut Rng, n: usize, raw: bool) -> Vec<W> {
    (0..n)
        .map(|_| {
            let mut b: W = bytemuck::pod_read_unaligned(&rng.bytes(size_of::<W>()));
            if W::SCALE == LutScale::F16 && !raw {
                let v = ((rng.next_u64() % 2001) as f32 - 1000.0) * 2f32.powi((rng.next_u64() % 24) as i32 - 20);
                bytemuck::bytes_of_mut(&mut b)[..2].copy_from_slice(&F16Le::from_f32(v).0);
            }
            b
        })
        .collect()
}

/// Random q8_0 blocks; `extreme`: quants only -128 / 127 / -1 / 0.
fn acts(rng: &mut Rng, n: usize, raw: bool, extreme: bool) -> Vec<BlockQ8_0> {
    (0..n)
        .map(|_| {
            let mut b: BlockQ8_0 = bytemuck::pod_read_unaligned(&rng.bytes(size_of::<BlockQ8_0>()));
            if extreme {
                b.qs = std::array::from_fn(|_| [-128, 127, -1, 0][(rng.next_u64() & 3) as usize]);
            }
            if !raw {
                let v = ((rng.next_u64() % 2001) as f32 - 1000.0) * 2f32.powi((rng.next_u64() % 16) as i32 - 12);
                b.d = F16Le::from_f32(v);
            }
            b
        })
        .collect()
}

/// Rows of 0..=40 blocks (every tail length of a batch), ordinary and extreme, finite and
/// raw scales: dispatch, the AVX2 kernel for 1..=4 rows and `lut_vec_dot_rows` for 1..=11
/// rows all give the portable kernel's bits.
fn rows_equal<W: LutBlock>(seed: u64) {
    let mut rng = Rng::new(seed);
    for case in 0..1500 {
        let nb = case % 41;
        let (raw, extreme) = (case % 7 == 3, case % 5 == 1);
        let w: Vec<W> = weights(&mut rng, nb, raw);
        let nrows = 1 + case % 11;
        let a: Vec<Vec<BlockQ8_0>> = (0..nrows).map(|_| acts(&mut rng, nb * W::UNITS, raw, extreme)).collect();
        let want: Vec<f32> = a.iter().map(|a| lut_vec_dot_portable(&w, a)).collect();
        for (r, a) in a.iter().enumerate() {
            assert!(same(lut_vec_dot(&w, a), want[r]), "case {case} row {r}: dispatch");
            // SAFETY: `qforge_golden::needs::avx2()` returned true, so AVX2, FMA and F16C are present.
            let got = unsafe { rows_avx2::<W, 1>(&w, [a]) }[0];
            assert!(same(got, want[r]), "case {case} ({nb} blocks): avx2 {got:e}, portable {:e}", want[r]);
        }
        let refs: Vec<&[BlockQ8_0]> = a.iter().map(Vec::as_slice).collect();
        let mut out = vec![0f32; nrows];
        lut_vec_dot_rows(&w, &refs, &mut out);
        for (r, (o, w)) in out.iter().zip(&want).enumerate() {
            assert!(same(*o, *w), "case {case}: row {r} of {nrows}: {o:e} vs {w:e}");
        }
    }
}

#[test]
fn avx2_rows_equal_portable() {
    if !qforge_golden::needs::avx2() {
        return;
    }
    rows_equal::<F16Block>(1);
    rows_equal::<UnitBlock>(2);
    rows_equal::<HalfBlock>(3);
}

/// Rows of different lengths: each result is that row's own dot (the weight row truncated to
/// it), as the portable kernel gives.
#[test]
fn short_activation_rows() {
    if !qforge_golden::needs::avx2() {
        return;
    }
    let mut rng = Rng::new(4);
    let w: Vec<HalfBlock> = weights(&mut rng, 9, false);
    let a: Vec<Vec<BlockQ8_0>> = (0..6).map(|r| acts(&mut rng, 3 * r + 1, false, false)).collect();
    let refs: Vec<&[BlockQ8_0]> = a.iter().map(Vec::as_slice).collect();
    let mut out = vec![0f32; 6];
    lut_vec_dot_rows(&w, &refs, &mut out);
    for (o, a) in out.iter().zip(&a) {
        assert!(same(*o, lut_vec_dot_portable(&w, a)));
    }
}

/// The reference's pieces: element order of both nibble orders, and the lanes.
#[test]
fn unit_values_and_lanes() {
    let mut rng = Rng::new(5);
    for _ in 0..200 {
        let b: HalfBlock = weights(&mut rng, 1, true)[0];
        for u in 0..2 {
            let v = unit_values(&b, u);
            for (i, v) in v.iter().enumerate() {
                let (h, e) = (i / 16, i % 16);
                let byte = b.qs[16 * u + 8 * h + e % 8];
                assert_eq!(*v, TABLE[usize::from(if e < 8 { byte & 15 } else { byte >> 4 })]);
            }
        }
        let f: F16Block = weights(&mut rng, 1, true)[0];
        let v = unit_values(&f, 0);
        for (i, v) in v.iter().enumerate() {
            let byte = f.qs[i % 16];
            assert_eq!(*v, TABLE[usize::from(if i < 16 { byte & 15 } else { byte >> 4 })]);
        }
        let a = acts(&mut rng, 1, true, false)[0].qs;
        let lanes = lanes4(&v, &a);
        let total: i32 = v.iter().zip(&a).map(|(&x, &y)| i32::from(x) * i32::from(y)).sum();
        assert_eq!(lanes.iter().sum::<i32>(), total);
    }
}

/// Appending padding (zero-scale weight blocks against zero activations) never changes a
/// row's result, on either kernel.
#[test]
fn padding_never_changes_a_result() {
    if !qforge_golden::needs::avx2() {
        return;
    }
    let mut rng = Rng::new(6);
    for case in 0..300 {
        let nb = case % 23;
        let mut w: Vec<F16Block> = weights(&mut rng, nb, false);
        let mut a = acts(&mut rng, nb, false, case % 2 == 0);
        let (fast, slow) = (lut_vec_dot(&w, &a), lut_vec_dot_portable(&w, &a));
        for _ in 0..9 {
            let mut pad: F16Block = weights(&mut rng, 1, false)[0];
            pad.d = F16Le::from_f32(0.0);
            w.push(pad);
            a.push(Zeroable::zeroed());
            assert!(same(lut_vec_dot(&w, &a), fast) && same(lut_vec_dot_portable(&w, &a), slow), "case {case}");
        }
    }
}
