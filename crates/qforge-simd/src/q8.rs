//! The one dot kernel of every weight format against q8_0 / q8_1 activation blocks (ggml's
//! `ggml_vec_dot_*_q8_0` / `_q8_1`): q4_0 … q8_1, iq4_nl, mxfp4, nvfp4, q1_0, q2_0.
//!
//! A weight block is [`Q8Weight::UNITS`] units of 32 elements, each paired with one
//! activation block. The format says how a unit is stored ([`Codes`]), what its codes mean
//! ([`Values`]) and how its scales are stored ([`Scale`]); everything else is here, once.
//!
//! ## The dot (both kernels)
//!
//! Per unit, the 32 weight values `w` (small integers) and the 32 activation quants `a` give
//! [`LANES`] exact integer sums of four products ([`isum_lanes`]: what `vpmaddubsw` then
//! `vpmaddwd` give). They are converted to
//! f32 and accumulated with one fused multiply-add per lane, `acc = fma(d_a·s_w, lane, acc)`
//! (`s_w` the weight scale of the lane's 16-element half), unit `j` of the row into
//! accumulator `j % ACCS`. Affine formats (q4_1, q5_1) add `m_w·s_a` per unit into slot
//! `j % BATCH`. At the end the accumulators are added lane by lane, the lanes summed in order,
//! the slots summed in order, and the two added ([`finish`]). A unit's accumulator and slot
//! depend only on its index, so padding units (zero scales, zero activations) add `+0` and
//! never change a result.
//!
//! [`vec_dot_portable`] is the reference; the AVX2 kernel (x86-64, chosen at run time where
//! [`crate::Avx2::detect`] finds the CPU features) computes the very same lanes and f32
//! operations in the same order, so both give the same bits (`tests/q8_kernel.rs` checks it
//! for every format that uses this kernel).

use crate::lut::lut16;
use qforge_core::le::F16Le;

/// Elements per unit (and per activation block).
pub const QK8: usize = 32;
/// Integer lanes per unit, and f32 lanes per accumulator.
pub const LANES: usize = 8;
/// Independent f32 accumulators: unit `j` goes to `j % ACCS`.
pub const ACCS: usize = 2;
/// Units whose scales are widened together (and slots of the affine `m·s` sums).
pub const BATCH: usize = 8;

/// An activation block: 32 `i8` quants and an f16 scale `d` (q8_0), plus q8_1's f16 `s =
/// d·Σq`.
pub trait Q8Act: bytemuck::Pod {
    /// The raw f16 bits of `d`.
    fn d_bits(&self) -> u16;
    /// The raw f16 bits of `s` (`0`, i.e. `+0.0`, where the format has none).
    fn s_bits(&self) -> u16 {
        0
    }
    /// The quants.
    fn qs(&self) -> &[i8; QK8];
}

/// How a unit's 32 codes are stored.
#[derive(Clone, Copy, Debug)]
pub enum Codes<'a> {
    /// One `i8` per element (q8_0, q8_1 as weights); pairs with [`Values::Signed8`].
    Bytes(&'a [i8; QK8]),
    /// 4-bit codes: byte `j` holds element `j` (low nibble) and `j + 16` (high); with `qh`,
    /// bit `j` of the little-endian word is bit 4 of element `j` (q5_0, q5_1).
    Nibbles {
        /// The 16 bytes of low nibbles / high nibbles.
        qs: &'a [u8; 16],
        /// The fifth bits, one per element (5-bit formats only).
        qh: Option<[u8; 4]>,
    },
    /// 4-bit codes in two runs of 8 bytes: byte `8h + j` holds element `16h + j` (low) and
    /// `16h + j + 8` (high) (nvfp4's 16-element sub-blocks).
    Nibbles16(&'a [u8; 16]),
    /// 1-bit codes, LSB first: element `j` is bit `j % 8` of byte `j / 8` (q1_0).
    Bits1(&'a [u8; 4]),
    /// 2-bit codes, LSB first: element `j` is bits `2·(j % 4)..` of byte `j / 4` (q2_0).
    Bits2(&'a [u8; 8]),
}

/// What a code means.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Values {
    /// The `i8` itself ([`Codes::Bytes`]).
    Signed8,
    /// The unsigned code (`0..32`): the affine formats, whose offset is `m`.
    Unsigned,
    /// `code − k` (q4_0: 8, q5_0: 16).
    Offset(i8),
    /// `table[code]`, every entry in `-127..=127` (checked at compile time).
    Table([i8; 16]),
}

/// How a block's weight scales are stored.
#[derive(Clone, Copy, Debug)]
pub enum Scale {
    /// One f16 per block, [`Q8Weight::d_bits`] (every unit of the block shares it).
    F16,
    /// One byte per unit (the first of [`Q8Weight::scale_bytes`]), looked up in the table.
    Byte(&'static [f32; 256]),
    /// One byte per 16-element half of a unit, looked up in the table.
    ByteHalves(&'static [f32; 256]),
}

/// A weight block format dotted with q8_0 / q8_1 activations: its per-unit unpacking.
pub trait Q8Weight: bytemuck::Pod {
    /// 32-element units (activation blocks) per block: 1, 2 or 4.
    const UNITS: usize;
    /// What the codes mean.
    const VALUES: Values;
    /// How the scales are stored.
    const SCALE: Scale;
    /// `x = d·q + m`: the dot adds `m_w·s_a` per unit (q8_1 activations; [`Scale::F16`],
    /// one unit per block).
    const AFFINE: bool = false;

    /// Bits of the codes in the packed layout ([`packed`]): 1, 2, 4 or 5 (at least the
    /// codes' width), 8 for [`Values::Signed8`], or 0 for no packed layout (the default).
    /// Only formats whose values have an unsigned form (offset codes, the affine formats'
    /// codes, 8-bit signed codes, tables spanning at most 255) may set it;
    /// [`packed::packable`] checks at compile time.
    const PACK_BITS: u32 = 0;

    /// The codes of unit `u`.
    fn codes(&self, u: usize) -> Codes<'_>;

    /// The raw bits of the f16 scale ([`Scale::F16`]).
    fn d_bits(&self) -> u16 {
        0
    }

    /// The raw bits of the f16 offset `m` ([`Q8Weight::AFFINE`]).
    fn m_bits(&self) -> u16 {
        0
    }

    /// The scale byte of unit `u` ([`Scale::Byte`]: the first) or of its two halves
    /// ([`Scale::ByteHalves`]).
    fn scale_bytes(&self, u: usize) -> [u8; 2] {
        let _ = u;
        [0; 2]
    }
}

/// Whether the kernels can run `W`: checked at compile time by both.
pub(crate) const fn supported<W: Q8Weight>() -> bool {
    let units_ok = matches!(W::UNITS, 1 | 2 | 4);
    let table_ok = match W::VALUES {
        Values::Table(t) => {
            let mut i = 0;
            let mut ok = true;
            while i < 16 {
                ok &= t[i] != i8::MIN;
                i += 1;
            }
            ok
        }
        _ => true,
    };
    let affine_ok = !W::AFFINE || (W::UNITS == 1 && matches!(W::SCALE, Scale::F16));
    units_ok && table_ok && affine_ok
}

/// An f16 value from its bits.
#[inline(always)]
pub(crate) fn f16(bits: u16) -> f32 {
    F16Le(bits.to_le_bytes()).get()
}

/// The 32 codes of unit `u` in element order (unsigned; `i8` bytes as they are).
#[inline(always)]
pub(crate) fn unit_codes<W: Q8Weight>(w: &W, u: usize) -> [u8; QK8] {
    match w.codes(u) {
        Codes::Bytes(q) => bytemuck::cast(*q),
        Codes::Nibbles { qs, qh } => {
            let hi = |i: usize| qh.map_or(0, |h| ((h[i / 8] >> (i % 8)) & 1) << 4);
            std::array::from_fn(|i| (if i < 16 { qs[i] & 0x0F } else { qs[i - 16] >> 4 }) | hi(i))
        }
        Codes::Nibbles16(q) => std::array::from_fn(|i| {
            let (h, e) = (i / 16, i % 16);
            let b = q[8 * h + e % 8];
            if e < 8 { b & 0x0F } else { b >> 4 }
        }),
        Codes::Bits1(b) => std::array::from_fn(|i| (b[i / 8] >> (i % 8)) & 1),
        Codes::Bits2(b) => std::array::from_fn(|i| (b[i / 4] >> (2 * (i % 4))) & 3),
    }
}

/// The 32 integer values of unit `u` of `w`, in element order.
#[inline(always)]
pub fn unit_values<W: Q8Weight>(w: &W, u: usize) -> [i8; QK8] {
    let c = unit_codes(w, u);
    match W::VALUES {
        Values::Signed8 | Values::Unsigned => bytemuck::cast(c),
        Values::Offset(k) => {
            let mut v = [0i8; QK8];
            for (v, &c) in v.iter_mut().zip(&c) {
                *v = c as i8 - k;
            }
            v
        }
        Values::Table(t) => lut16(&t, &c),
    }
}

/// The weight scale of each 16-element half of unit `u` of `w` (the same twice unless
/// [`Scale::ByteHalves`]), in f32.
#[inline(always)]
pub fn half_scales<W: Q8Weight>(w: &W, u: usize) -> [f32; 2] {
    match W::SCALE {
        Scale::F16 => [f16(w.d_bits()); 2],
        Scale::Byte(t) => [t[usize::from(w.scale_bytes(u)[0])]; 2],
        Scale::ByteHalves(t) => w.scale_bytes(u).map(|b| t[usize::from(b)]),
    }
}

/// `Σ w[i]·a[i]` over one unit as [`LANES`] partial sums of four products each, exact in
/// `i32`. Which four is what the AVX2 kernel's instructions give: lane `l` holds elements
/// `4l .. 4l+4` (`vpmaddubsw` then `vpmaddwd`).
#[inline(always)]
pub fn isum_lanes(w: &[i8; QK8], a: &[i8; QK8]) -> [i32; LANES] {
    std::array::from_fn(|l| (4 * l..4 * l + 4).map(|i| i32::from(w[i]) * i32::from(a[i])).sum())
}

/// The end of a row: the accumulators added lane by lane, the lanes summed in order, the
/// affine slots summed in order, and the two added (`+0` slots leave the sum as it is: it
/// is never `-0`).
#[inline(always)]
pub fn finish(acc: [[f32; LANES]; ACCS], summs: [f32; BATCH]) -> f32 {
    let mut lanes = acc[0];
    for a in &acc[1..] {
        for (l, v) in lanes.iter_mut().zip(a) {
            *l += v;
        }
    }
    let mut sumf = 0.0f32;
    for v in lanes {
        sumf += v;
    }
    let mut m = 0.0f32;
    for v in summs {
        m += v;
    }
    sumf + m
}

/// The dot of a row of `W` blocks with its activation row (`UNITS` activation blocks per
/// weight block; extra blocks on either side are ignored): the AVX2 kernel where the CPU has
/// it, else [`vec_dot_portable`], with the same result.
#[inline]
pub fn vec_dot<W: Q8Weight, A: Q8Act>(w: &[W], a: &[A]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if let Some(v) = avx2::vec_dot(w, a) {
        return v;
    }
    vec_dot_portable(w, a)
}

/// `out[i] = vec_dot(w, a[i])` for any number of rows; where the AVX2 kernel runs, each
/// weight unit is unpacked once for up to [`crate::rows::MAX_ROWS`] rows.
///
/// # Panics
/// If `a.len() != out.len()`.
pub fn vec_dot_rows<W: Q8Weight, A: Q8Act>(w: &[W], a: &[&[A]], out: &mut [f32]) {
    assert_eq!(a.len(), out.len(), "one output per activation row");
    #[cfg(target_arch = "x86_64")]
    if avx2::vec_dot_rows(w, a, out) {
        return;
    }
    for (o, a) in out.iter_mut().zip(a) {
        *o = vec_dot_portable(w, a);
    }
}

/// A mat-mul tile ([`qforge_core::NativeDot::vec_dot_tile`]): `out[i·stride + j] =
/// vec_dot(w_i, a[j])` for every weight row `w_i` (`n` blocks each, one after another in `w`)
/// and activation row `a[j]` (each at least `n · UNITS` blocks), each the bits of
/// [`vec_dot`]. The non-affine formats decode each weight unit once for every activation
/// row: 16 weight rows a row per lane from eight activation rows on AVX-512 VNNI, a weight
/// row at a time from twelve on AVX2 (where no activation quant is -128, as the quantizers
/// make them). Otherwise, where the AVX2 kernel runs, the row kernels take the tile with the
/// checks they make per call (which sign trick an 8-bit weight takes: every activation row
/// checked for -128 once, not once per weight row and eight activation rows) made once per
/// tile; `false` (nothing written) without AVX2.
pub fn vec_dot_tile<W: Q8Weight, A: Q8Act>(w: &[W], n: usize, a: &[&[A]], out: &mut [f32], stride: usize) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        avx2::vec_dot_tile(w, n, a, out, stride)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (w, n, a, out, stride);
        false
    }
}

/// `out[i] = vec_dot(w_i, a)` for `out.len()` weight rows `w_i` stored one after another in
/// `w` (each `w.len() / out.len()` blocks); where the AVX2 kernel runs, each activation unit
/// is loaded once for up to [`crate::rows::MAX_ROWS`] weight rows (mat-vec).
///
/// # Panics
/// If `w.len()` is not a multiple of `out.len()`.
pub fn vec_dot_weight_rows<W: Q8Weight, A: Q8Act>(w: &[W], a: &[A], out: &mut [f32]) {
    if out.is_empty() {
        return;
    }
    assert!(w.len().is_multiple_of(out.len()), "whole weight rows");
    let n = w.len() / out.len();
    #[cfg(target_arch = "x86_64")]
    if avx2::vec_dot_weight_rows(w, n, a, out) {
        return;
    }
    for (o, w) in out.iter_mut().zip(w.chunks_exact(n.max(1))) {
        *o = vec_dot_portable(w, a);
    }
}

/// The reference kernel of [`vec_dot`] (see the module documentation).
pub fn vec_dot_portable<W: Q8Weight, A: Q8Act>(w: &[W], a: &[A]) -> f32 {
    const { assert!(supported::<W>()) };
    let mut acc = [[0f32; LANES]; ACCS];
    let mut summs = [0f32; BATCH];
    let mut j = 0;
    for (w, a) in w.iter().zip(a.chunks_exact(W::UNITS)) {
        for (u, a) in a.iter().enumerate() {
            let (ad, ws) = (f16(a.d_bits()), half_scales(w, u));
            let d = [ad * ws[0], ad * ws[1]];
            let lanes = isum_lanes(&unit_values(w, u), a.qs());
            let acc = &mut acc[j % ACCS];
            for (l, (acc, v)) in acc.iter_mut().zip(lanes).enumerate() {
                *acc = d[l / 4].mul_add(v as f32, *acc);
            }
            if W::AFFINE {
                summs[j % BATCH] += f16(w.m_bits()) * f16(a.s_bits());
            }
            j += 1;
        }
    }
    finish(acc, summs)
}

#[cfg(target_arch = "x86_64")]
#[path = "q8/avx2.rs"]
mod avx2;
#[cfg(target_arch = "x86_64")]
#[path = "q8/tile_avx2.rs"]
mod tile_avx2;
#[cfg(target_arch = "x86_64")]
#[path = "q8/tile_vnni.rs"]
mod tile_vnni;

#[path = "q8/packed.rs"]
pub mod packed;

#[cfg(target_arch = "x86_64")]
#[path = "q8/packed_avx2.rs"]
mod packed_avx2;

#[cfg(test)]
mod tests {
    use super::*;

    #[repr(C)]
    #[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
    struct Bits2 {
        d: [u8; 2],
        qs: [u8; 8],
    }

    impl Q8Weight for Bits2 {
        const UNITS: usize = 1;
        const VALUES: Values = Values::Table([-1, 0, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        const SCALE: Scale = Scale::F16;
        fn codes(&self, _: usize) -> Codes<'_> {
            Codes::Bits2(&self.qs)
        }
    }

    #[test]
    fn unpacking_follows_each_layout() {
        let b = Bits2 { d: [0; 2], qs: [0b11_10_01_00, 0b00_01_10_11, 0, 0, 0, 0, 0, 0xFF] };
        let v = unit_values(&b, 0);
        assert_eq!(&v[..8], &[-1, 0, 1, 2, 2, 1, 0, -1]);
        assert_eq!(&v[28..], &[2, 2, 2, 2]);
        let a: [i8; 32] = std::array::from_fn(|i| i as i8 - 16);
        let total: i32 = v.iter().zip(&a).map(|(&x, &y)| i32::from(x) * i32::from(y)).sum();
        assert_eq!(isum_lanes(&v, &a).iter().sum::<i32>(), total);
    }
}
