//! Kernels shared by the dot products of every format that pairs with q8_0 (this crate's,
//! and iq4_nl / mxfp4 / nvfp4 in the iq and fp4 crates, which depend on this one for the q8_0
//! block anyway):
//!
//! * 16-entry table lookups of packed nibbles ([`lut16`], [`nibble_lut`]), safe fixed-size
//!   code that LLVM vectorizes;
//! * the one dot kernel of every "nibble codes through a 16-entry table" weight format
//!   against q8_0 activations ([`LutBlock`], [`lut_vec_dot`], [`lut_vec_dot_rows`]): the
//!   reference here ([`lut_vec_dot_portable`]) and an AVX2 kernel chosen at run time
//!   (`lut_simd.rs`, ggml's `vpshufb` + `vpmaddubsw` scheme) that gives the same bits.
//!
//! ## The dot (both kernels)
//!
//! A weight block is `UNITS` units of 32 elements, each paired with one q8_0 block. Per unit
//! the 32 codes become their table values `w` (in element order), and the exact integer sums
//! of four products, lane `l` = `Σ_{i in 4l..4l+4} w[i]·a[i]` ([`lanes4`]: what `vpmaddubsw`
//! then `vpmaddwd` with ones give), are converted to f32 and accumulated with one fused
//! multiply-add per lane, `acc = fma(d_a · s_w[l / 4], lane, acc)`, where `s_w` is the weight
//! scale of each 16-element half of the unit. Unit `j` of the row goes to accumulator
//! `j % ACCS`; at the end the accumulators are added lane by lane and the lanes summed in
//! order. A unit's accumulator depends only on its index, so padding units (zero scales,
//! zero activations) add `+0` and never change a result.

use crate::block::{BlockQ8_0, QK};
use qforge_core::le::F16Le;

/// `table[q & 15]` for every byte of `q`, as a select per table entry: branch-free and
/// vectorized (compare + blend), where an indexed load per element would not be.
#[inline(always)]
pub fn lut16<const N: usize>(table: &[i8; 16], q: &[u8; N]) -> [i8; N] {
    let mut out = [table[0]; N];
    for (o, &c) in out.iter_mut().zip(q) {
        let c = c & 0x0F;
        let mut v = table[0];
        for (j, &t) in table.iter().enumerate().skip(1) {
            if c == j as u8 {
                v = t;
            }
        }
        *o = v;
    }
    out
}

/// `table[code]` for the `N = 2·H` codes packed in `H` bytes in ggml's split-half order:
/// the low nibbles (elements `0..H`), then the high nibbles (elements `H..N`).
#[inline(always)]
pub fn nibble_lut<const H: usize, const N: usize>(qs: &[u8; H], table: &[i8; 16]) -> [i8; N] {
    const { assert!(N == 2 * H) };
    let both: [u8; N] = std::array::from_fn(|i| if i < H { qs[i] & 0x0F } else { qs[i - H] >> 4 });
    lut16(table, &both)
}

/// How the 16 bytes of a 32-element unit hold its 32 codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NibbleOrder {
    /// Byte `j`: element `j` (low nibble) and element `j + 16` (high): q4_0, iq4_nl, mxfp4.
    Split32,
    /// Two runs of 8 bytes, one per 16 elements: byte `8h + j` holds element `16h + j` (low)
    /// and `16h + j + 8` (high): nvfp4's 16-element sub-blocks.
    Split16,
}

/// How a [`LutBlock`]'s weight scales are stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LutScale {
    /// One f16 per block, [`LutBlock::f16_bits`] (`UNITS == 1`): widened 8 blocks at a time.
    F16,
    /// One byte per unit (`scale_bytes(u)[0]`), decoded by [`LutBlock::BYTE_SCALES`].
    Byte,
    /// One byte per 16-element half of a unit, decoded by [`LutBlock::BYTE_SCALES`].
    ByteHalves,
}

/// A weight block of 4-bit codes looked up in a 16-entry `i8` table and dotted with q8_0
/// activations, one q8_0 block per 32-element unit (iq4_nl, mxfp4, nvfp4).
pub trait LutBlock: bytemuck::Pod {
    /// The value of each code. Every entry must be in `-127..=127` (checked at compile time).
    const TABLE: [i8; 16];
    /// 32-element units (q8_0 blocks) per block: 1 or 2.
    const UNITS: usize;
    /// How a unit's bytes hold its codes.
    const ORDER: NibbleOrder;
    /// How the scales are stored.
    const SCALE: LutScale;
    /// The f32 value of each scale byte ([`LutScale::Byte`], [`LutScale::ByteHalves`]).
    const BYTE_SCALES: &'static [f32; 256] = &[0.0; 256];

    /// The 16 code bytes of unit `u`.
    fn codes(&self, u: usize) -> &[u8; 16];

    /// The raw bits of the f16 scale ([`LutScale::F16`]).
    fn f16_bits(&self) -> u16 {
        0
    }

    /// The scale byte of unit `u` ([`LutScale::Byte`]: the first) or of its two halves
    /// ([`LutScale::ByteHalves`]).
    fn scale_bytes(&self, u: usize) -> [u8; 2] {
        let _ = u;
        [0; 2]
    }
}

/// The weight scale of each 16-element half of unit `u` of `w` (the same twice unless
/// [`LutScale::ByteHalves`]), in f32.
#[inline(always)]
pub fn half_scales<W: LutBlock>(w: &W, u: usize) -> [f32; 2] {
    match W::SCALE {
        LutScale::F16 => [F16Le(w.f16_bits().to_le_bytes()).get(); 2],
        LutScale::Byte => [W::BYTE_SCALES[usize::from(w.scale_bytes(u)[0])]; 2],
        LutScale::ByteHalves => w.scale_bytes(u).map(|b| W::BYTE_SCALES[usize::from(b)]),
    }
}

/// f32 lanes (and integer sums) per unit.
pub(crate) const LUT_LANES: usize = 8;
/// Independent f32 accumulators: unit `j` goes to `j % LUT_ACCS`.
pub(crate) const LUT_ACCS: usize = 2;

/// Whether every entry of a table fits the AVX2 kernel's sign trick (`|v| ≤ 127`).
pub(crate) const fn table_ok(t: &[i8; 16]) -> bool {
    let mut i = 0;
    while i < 16 {
        if t[i] == i8::MIN {
            return false;
        }
        i += 1;
    }
    true
}

/// The 32 table values of unit `u` of `w`, in element order.
#[inline(always)]
pub fn unit_values<W: LutBlock>(w: &W, u: usize) -> [i8; QK] {
    let q = w.codes(u);
    match W::ORDER {
        NibbleOrder::Split32 => nibble_lut::<16, 32>(q, &W::TABLE),
        NibbleOrder::Split16 => {
            let h: &[[u8; 8]; 2] = bytemuck::cast_ref(q);
            let (lo, hi): ([i8; 16], [i8; 16]) = (nibble_lut(&h[0], &W::TABLE), nibble_lut(&h[1], &W::TABLE));
            std::array::from_fn(|i| if i < 16 { lo[i] } else { hi[i - 16] })
        }
    }
}

/// Lane `l` = `Σ_{i in 4l..4l+4} w[i]·a[i]`, exact.
#[inline(always)]
pub fn lanes4(w: &[i8; QK], a: &[i8; QK]) -> [i32; LUT_LANES] {
    std::array::from_fn(|l| (4 * l..4 * l + 4).map(|i| i32::from(w[i]) * i32::from(a[i])).sum())
}

/// The end of a row: the accumulators added lane by lane, then the lanes summed in order.
#[inline(always)]
pub(crate) fn lut_finish(acc: [[f32; LUT_LANES]; LUT_ACCS]) -> f32 {
    let mut lanes = acc[0];
    for a in &acc[1..] {
        for (l, v) in lanes.iter_mut().zip(a) {
            *l += v;
        }
    }
    let mut s = 0.0f32;
    for v in lanes {
        s += v;
    }
    s
}

/// The dot of a row of `W` blocks with its q8_0 activation row (`UNITS` q8_0 blocks per
/// weight block; extra blocks on either side are ignored): the AVX2 kernel where the CPU has
/// it, else [`lut_vec_dot_portable`], with the same result.
#[inline]
pub fn lut_vec_dot<W: LutBlock>(w: &[W], a: &[BlockQ8_0]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if let Some(v) = lut_simd::vec_dot(w, a) {
        return v;
    }
    lut_vec_dot_portable(w, a)
}

/// `out[i] = lut_vec_dot(w, a[i])` for any number of rows, each weight block unpacked once
/// for several rows where the AVX2 kernel runs.
///
/// # Panics
/// If `a.len() != out.len()`.
pub fn lut_vec_dot_rows<W: LutBlock>(w: &[W], a: &[&[BlockQ8_0]], out: &mut [f32]) {
    assert_eq!(a.len(), out.len(), "one output per activation row");
    #[cfg(target_arch = "x86_64")]
    if lut_simd::vec_dot_rows(w, a, out) {
        return;
    }
    for (o, a) in out.iter_mut().zip(a) {
        *o = lut_vec_dot_portable(w, a);
    }
}

/// The reference kernel of [`lut_vec_dot`] (see the module documentation).
pub fn lut_vec_dot_portable<W: LutBlock>(w: &[W], a: &[BlockQ8_0]) -> f32 {
    let mut acc = [[0f32; LUT_LANES]; LUT_ACCS];
    let mut j = 0;
    for (w, a) in w.iter().zip(a.chunks_exact(W::UNITS)) {
        for (u, a) in a.iter().enumerate() {
            let (ad, ws) = (a.d.get(), half_scales(w, u));
            let d = [ad * ws[0], ad * ws[1]];
            let lanes = lanes4(&unit_values(w, u), &a.qs);
            let acc = &mut acc[j % LUT_ACCS];
            for (l, (acc, v)) in acc.iter_mut().zip(lanes).enumerate() {
                *acc = d[l / 4].mul_add(v as f32, *acc);
            }
            j += 1;
        }
    }
    lut_finish(acc)
}

#[cfg(target_arch = "x86_64")]
#[path = "lut_simd.rs"]
mod lut_simd;
