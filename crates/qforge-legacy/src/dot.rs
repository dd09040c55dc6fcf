//! Integer dot products (ggml's `ggml_vec_dot_*_q8_*`): one weight row of legacy blocks
//! against an activation row of q8_0 / q8_1 blocks.
//!
//! Per block pair the 32 quant products are summed in integers (`sumi`), then scaled in f32
//! as ggml does: `sumf += (d_w·d_a)·sumi` for the symmetric formats, plus `m_w·s_a` for the
//! affine ones (q4_1, q5_1), where `s_a = d_a·Σq_a` is q8_1's precomputed sum. The q8_1 ·
//! q8_1 self-dot (qforge's own: ggml has no vec_dot for q8_1) is the symmetric formula.

use crate::block::{BlockQ8_0, BlockQ8_1, Kind, LegacyBlock, QK};

/// An activation block: q8_0 or q8_1.
pub(crate) trait ActBlock: bytemuck::Pod {
    /// The f16 scale, widened.
    fn d(&self) -> f32;
    /// `d·Σq` as stored (q8_1); q8_0 has none and is never paired with an affine weight.
    fn s(&self) -> f32;
    fn qs(&self) -> &[i8; QK];
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
}

/// `Σ w[i]·a[i]` over one block, exact in `i32` (|w|, |a| ≤ 128). Fixed-length arrays and a
/// plain widening multiply-add: this compiles to `pmaddwd`-style SIMD without bounds checks.
#[inline(always)]
fn isum(w: &[i8; QK], a: &[i8; QK]) -> i32 {
    let mut acc = [0i32; 16];
    for (w, a) in w.chunks_exact(16).zip(a.chunks_exact(16)) {
        for ((acc, &w), &a) in acc.iter_mut().zip(w).zip(a) {
            *acc += i32::from(i16::from(w) * i16::from(a));
        }
    }
    acc.iter().sum()
}

/// ggml's `vec_dot` of a weight row with its activation row (`w.len() == a.len()`, checked by
/// the caller; extra blocks on either side would be ignored).
#[inline]
pub(crate) fn vec_dot<W: LegacyBlock, A: ActBlock>(w: &[W], a: &[A]) -> f32 {
    let mut sumf = 0.0f32;
    for (w, a) in w.iter().zip(a) {
        let sumi = isum(&w.quants_i8(), a.qs()) as f32;
        sumf += match W::KIND {
            Kind::Symmetric => (w.d() * a.d()) * sumi,
            Kind::Affine => (w.d() * a.d()) * sumi + w.m() * a.s(),
        };
    }
    sumf
}
