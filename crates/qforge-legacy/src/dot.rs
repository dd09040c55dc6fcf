//! Integer dot products (ggml's `ggml_vec_dot_*_q8_*`): one weight row of legacy blocks
//! against an activation row of q8_0 / q8_1 blocks.
//!
//! Per block pair the 32 quant products are summed in integers (`sumi`), then scaled in f32
//! as ggml does: `sumf += (d_w·d_a)·sumi` for the symmetric formats, plus `m_w·s_a` for the
//! affine ones (q4_1, q5_1), where `s_a = d_a·Σq_a` is q8_1's precomputed sum. Like ggml's
//! AVX2 kernels, `sumi` stays split in 8 lanes of 4 products and the f32 sum is kept per lane
//! (one horizontal sum per row). The q8_1 · q8_1 self-dot (qforge's own: ggml has no vec_dot
//! for q8_1) is the symmetric formula.
//!
//! This file is the reference; [`crate::simd`] computes the very same lanes and the very same
//! f32 operations in the same order with AVX2, so both give the same bits.

use crate::block::{BlockQ8_0, BlockQ8_1, Kind, LegacyBlock, QK};

/// An activation block: q8_0 or q8_1.
pub(crate) trait ActBlock: bytemuck::Pod {
    /// The f16 scale, widened.
    fn d(&self) -> f32;
    /// `d·Σq` as stored (q8_1); q8_0 has none and is never paired with an affine weight.
    fn s(&self) -> f32;
    fn qs(&self) -> &[i8; QK];
    /// The raw f16 bits of `d`.
    fn d_bits(&self) -> u16;
    /// The raw f16 bits of `s` (0, i.e. +0.0, for q8_0).
    fn s_bits(&self) -> u16;
}

impl ActBlock for BlockQ8_0 {
    #[inline(always)]
    fn d(&self) -> f32 {
        self.d.get()
    }
    #[inline(always)]
    fn s(&self) -> f32 {
        0.0
    }
    #[inline(always)]
    fn qs(&self) -> &[i8; QK] {
        &self.qs
    }
    #[inline(always)]
    fn d_bits(&self) -> u16 {
        self.d.bits()
    }
    #[inline(always)]
    fn s_bits(&self) -> u16 {
        0
    }
}

impl ActBlock for BlockQ8_1 {
    #[inline(always)]
    fn d(&self) -> f32 {
        self.d.get()
    }
    #[inline(always)]
    fn s(&self) -> f32 {
        self.s.get()
    }
    #[inline(always)]
    fn qs(&self) -> &[i8; QK] {
        &self.qs
    }
    #[inline(always)]
    fn d_bits(&self) -> u16 {
        self.d.bits()
    }
    #[inline(always)]
    fn s_bits(&self) -> u16 {
        self.s.bits()
    }
}

/// Integer lanes per block, and f32 lanes per accumulator.
pub(crate) const LANES: usize = 8;

/// Independent f32 accumulators: block `i` goes to accumulator `i % ACCS`, so consecutive
/// blocks do not wait on each other's adds.
pub(crate) const ACCS: usize = 2;

/// Blocks whose scales are widened together (and slots of the affine `m·s` sums).
pub(crate) const BATCH: usize = 8;

/// `Σ w[i]·a[i]` over one block as [`LANES`] partial sums of four products each, exact in
/// `i32` (|w|, |a| ≤ 128). Which four is what the AVX2 kernel's instructions give:
///
/// * 4- and 5-bit weights (`maddubs` then `madd` over the unpacked 32 bytes): lane `l` holds
///   elements `4l .. 4l+4`;
/// * 8-bit weights (both sides widened to `i16` in halves, `madd`, then the halves added):
///   lane `l` holds elements `2l, 2l+1, 2l+16, 2l+17`.
#[inline(always)]
pub(crate) fn isum_lanes<W: LegacyBlock>(w: &[i8; QK], a: &[i8; QK]) -> [i32; LANES] {
    let pair: [i32; QK / 2] = std::array::from_fn(|k| {
        i32::from(w[2 * k]) * i32::from(a[2 * k]) + i32::from(w[2 * k + 1]) * i32::from(a[2 * k + 1])
    });
    if W::BITS == 8 {
        std::array::from_fn(|l| pair[l] + pair[l + LANES])
    } else {
        std::array::from_fn(|l| pair[2 * l] + pair[2 * l + 1])
    }
}

/// The end of a row: the accumulators added lane by lane, the lanes summed in order, the
/// affine slots summed in order, and the two added. Shared by both kernels.
#[inline(always)]
pub(crate) fn finish(acc: [[f32; LANES]; ACCS], summs: [f32; BATCH]) -> f32 {
    let mut lanes = acc[0];
    for a in &acc[1..] {
        for l in 0..LANES {
            lanes[l] += a[l];
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

/// ggml's `vec_dot` of a weight row with its activation row (`w.len() == a.len()`, checked by
/// the caller; extra blocks on either side would be ignored).
///
/// Runs the AVX2 kernel where the CPU has it (checked once, [`crate::simd`]): the same exact
/// integer lanes and the same f32 operations in the same order, so the same result.
#[inline]
pub(crate) fn vec_dot<W: LegacyBlock, A: ActBlock>(w: &[W], a: &[A]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if let Some(sumf) = crate::simd::vec_dot(w, a) {
        return sumf;
    }
    vec_dot_portable(w, a)
}

/// [`vec_dot`] of one weight row with each activation row (`out.len() == a.len()`): the
/// AVX2 kernel unpacks each weight block once for several rows; every result is the one
/// [`vec_dot`] gives for that row.
pub(crate) fn vec_dot_rows<W: LegacyBlock, A: ActBlock>(w: &[W], a: &[&[A]], out: &mut [f32]) {
    assert_eq!(a.len(), out.len(), "one output per activation row");
    #[cfg(target_arch = "x86_64")]
    if crate::simd::vec_dot_rows(w, a, out) {
        return;
    }
    for (o, a) in out.iter_mut().zip(a) {
        *o = vec_dot_portable(w, a);
    }
}

/// The reference kernel of [`vec_dot`].
///
/// As ggml's SIMD kernels do, the exact integer lanes of each block are converted to f32,
/// scaled by `d_w·d_a` and accumulated in f32 lanes with one fused multiply-add (`mul_add`, as
/// ggml's `_mm256_fmadd_ps`; a call to libm's `fmaf` where the target has no FMA),
/// block `i` into accumulator `i % ACCS`; the affine formats' `m_w·s_a` terms are summed in
/// [`BATCH`] slots, block `i` into slot `i % BATCH`. A block's accumulator and slot depend only
/// on its index, so appending zero blocks (padding) adds `+0` everywhere and cannot change the
/// result. The scales of [`BATCH`] blocks are widened from f16 up front: widened one by one
/// inside the loop, the f16 load (`vpinsrw`) picks up a false dependency on the accumulator
/// register and serializes the whole loop on it.
pub(crate) fn vec_dot_portable<W: LegacyBlock, A: ActBlock>(w: &[W], a: &[A]) -> f32 {
    let n = w.len().min(a.len());
    let (w, a) = (&w[..n], &a[..n]);
    let mut acc = [[0f32; LANES]; ACCS];
    let mut summs = [0.0f32; BATCH];
    // `w` and `a` hold at most BATCH blocks, the first at a multiple of BATCH.
    let mut batch = |w: &[W], a: &[A]| {
        let d: [f32; BATCH] = std::array::from_fn(|j| if j < w.len() { w[j].d() * a[j].d() } else { 0.0 });
        for (j, (w, a)) in w.iter().zip(a).enumerate() {
            let lanes = isum_lanes::<W>(&w.quants_i8(), a.qs());
            let acc = &mut acc[j % ACCS];
            for l in 0..LANES {
                acc[l] = d[j].mul_add(lanes[l] as f32, acc[l]);
            }
            if W::KIND == Kind::Affine {
                summs[j] += w.m() * a.s();
            }
        }
    };
    let (wb, wt) = w.as_chunks::<BATCH>();
    let (ab, at) = a.as_chunks::<BATCH>();
    for (wb, ab) in wb.iter().zip(ab) {
        batch(wb, ab);
    }
    batch(wt, at);
    finish(acc, summs)
}
