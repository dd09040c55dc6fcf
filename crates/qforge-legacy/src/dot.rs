//! Integer dot products (ggml's `ggml_vec_dot_*_q8_*`): one weight row of legacy blocks
//! against an activation row of q8_0 / q8_1 blocks.
//!
//! Per block pair the 32 quant products are summed in integers (`sumi`), then scaled in f32
//! as ggml does: `sumf += (d_w·d_a)·sumi` for the symmetric formats, plus `m_w·s_a` for the
//! affine ones (q4_1, q5_1), where `s_a = d_a·Σq_a` is q8_1's precomputed sum. Like ggml's
//! SIMD kernels, `sumi` stays split in 16 lanes and the f32 sum is kept per lane. The q8_1 ·
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

/// Lanes of the f32 accumulator of [`vec_dot`].
pub(crate) const LANES: usize = QK / 2;

/// `Σ w[i]·a[i]` over one block as [`LANES`] partial sums (lane `l`: elements `l` and
/// `l + 16`), each exact in `i32` (|w|, |a| ≤ 128). Fixed-length arrays, widening multiplies
/// and one add: one 16-lane vector, no bounds checks and no horizontal sum per block.
///
/// The portable kernel; [`crate::simd`] has an AVX2 one giving the same lanes.
#[inline(always)]
pub(crate) fn isum_lanes(w: &[i8; QK], a: &[i8; QK]) -> [i32; LANES] {
    let p: [i16; QK] = std::array::from_fn(|i| i16::from(w[i]) * i16::from(a[i]));
    std::array::from_fn(|l| i32::from(p[l]) + i32::from(p[l + LANES]))
}

/// Blocks whose f16 scales are widened together in [`vec_dot`].
const BATCH: usize = 8;

/// ggml's `vec_dot` of a weight row with its activation row (`w.len() == a.len()`, checked by
/// the caller; extra blocks on either side would be ignored).
///
/// As ggml's SIMD kernels do, the exact integer partial sums of each block are converted to
/// f32, scaled by `d_w·d_a` and accumulated in f32 lanes (one horizontal sum per row, not per
/// block); the affine formats' `m_w·s_a` terms are summed separately and added at the end.
/// The scales of [`BATCH`] blocks are widened from f16 up front: widened one by one inside
/// the loop, the f16 load (`vpinsrw`) picks up a false dependency on the accumulator register
/// and serializes the whole loop on it.
///
/// Runs the AVX2 lane sums where the CPU has them (checked once, [`crate::simd`]): the same
/// exact integer lanes and the same f32 operations in the same order, so the same result.
#[inline]
pub(crate) fn vec_dot<W: LegacyBlock, A: ActBlock>(w: &[W], a: &[A]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if let Some(sumf) = crate::simd::vec_dot(w, a) {
        return sumf;
    }
    vec_dot_with(w, a, isum_lanes)
}

/// The body of [`vec_dot`], with each block's integer lanes computed by `isum` (one of the
/// [`isum_lanes`] kernels).
#[inline(always)]
pub(crate) fn vec_dot_with<W: LegacyBlock, A: ActBlock>(
    w: &[W],
    a: &[A],
    isum: impl Fn(&[i8; QK], &[i8; QK]) -> [i32; LANES] + Copy,
) -> f32 {
    let n = w.len().min(a.len());
    let (w, a) = (&w[..n], &a[..n]);
    let mut acc = [0f32; LANES];
    let mut summs = [0.0f32; BATCH];
    #[inline(always)]
    fn block<W: LegacyBlock, A: ActBlock>(
        w: &W,
        a: &A,
        d: f32,
        acc: &mut [f32; LANES],
        isum: impl Fn(&[i8; QK], &[i8; QK]) -> [i32; LANES],
    ) {
        let lanes = isum(&w.quants_i8(), a.qs());
        for l in 0..LANES {
            acc[l] += d * lanes[l] as f32;
        }
    }
    let (wb, wt) = w.as_chunks::<BATCH>();
    let (ab, at) = a.as_chunks::<BATCH>();
    for (wb, ab) in wb.iter().zip(ab) {
        let d: [f32; BATCH] = std::array::from_fn(|j| wb[j].d() * ab[j].d());
        for j in 0..BATCH {
            block(&wb[j], &ab[j], d[j], &mut acc, isum);
        }
        if W::KIND == Kind::Affine {
            let ms: [f32; BATCH] = std::array::from_fn(|j| wb[j].m() * ab[j].s());
            for j in 0..BATCH {
                summs[j] += ms[j];
            }
        }
    }
    // Block i's affine term always goes to slot i % BATCH, tail included, so appending zero
    // blocks (padding) never regroups the sums and cannot change the result.
    for (j, (w, a)) in wt.iter().zip(at).enumerate() {
        block(w, a, w.d() * a.d(), &mut acc, isum);
        if W::KIND == Kind::Affine {
            summs[j] += w.m() * a.s();
        }
    }
    let mut sumf = 0.0f32;
    for v in acc {
        sumf += v;
    }
    let mut m = 0.0f32;
    for v in summs {
        m += v;
    }
    sumf + m
}
