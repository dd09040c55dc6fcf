//! The encoder shared by the affine K-quants (q2_k, q4_k, q5_k): each sub-block is
//! `x ~ d * sc[j] * q - dmin * m[j]` with unsigned codes `q in [0, NMAX]` and quantized
//! sub-block scales `sc[j]` and mins `m[j]`.
//!
//! Without importance weights this is ggml's `quantize_row_q*_K_ref`: `make_qkx2_quants` per
//! sub-block, then the largest scale / min sets the super-block `d` / `dmin`. With weights it is
//! ggml's `quantize_row_q*_K_impl`: per-element weights `qw[i] * sqrt(sigma2 + x[i]^2)`,
//! `make_qkx3_quants` per sub-block, then `make_qp_quants` for the sub-block scales and mins.
//! Either way the codes are finally recomputed from the stored (f16-rounded) scales.

use crate::QK_K;
use qforge_core::le::F16Le;
use qforge_ggml_search::{
    AffineSearch, importance_weights, make_qkx_quants, make_qp_quants, nearest_int, padded, sigma2,
};

/// How the unweighted (reference) search weighs each element of a sub-block.
#[derive(Clone, Copy)]
pub(crate) enum RefWeights {
    /// `|x[i]|` (q2_k).
    Abs,
    /// `sqrt(mean(x^2)) + |x[i]|` over the sub-block (q4_k, q5_k).
    RmsPlusAbs,
}

/// The per-format constants of the affine encoder.
pub(crate) trait AffineSpec {
    /// Elements per sub-block (16 or 32).
    const SUB: usize;
    /// Largest element code.
    const NMAX: i32;
    /// Largest sub-block scale / min code (15 for 4-bit, 63 for 6-bit).
    const SCALE_MAX: i32;
    const REF_WEIGHTS: RefWeights;
    const REF_SEARCH: AffineSearch;
    /// Upper clamp ggml applies to the scale / min codes (255: none; stored as in C, truncated).
    const REF_CAP: u8;
    const WEIGHTED_CAP: u8;
    /// `sigma2 = SIGMA_FACTOR * mean(x^2)` in the importance weights.
    const SIGMA_FACTOR: f32;
    /// The packed sub-block scales and mins as stored in the block.
    type Scales: Copy;
    fn pack_scales(sc: &[u8; 16], m: &[u8; 16]) -> Self::Scales;
    fn scale_min(s: &Self::Scales, j: usize) -> (u8, u8);
}

/// Lane length of the sub-block searches: the longest sub-block (32 elements, q4_k / q5_k).
const SUB_MAX: usize = 32;

/// ggml's search parameters for the importance-weighted path (all affine K-quants).
const WEIGHTED_SEARCH: AffineSearch = AffineSearch { rmin: -0.9, rdelta: 0.05, nstep: 36, use_mad: false };

/// The result of the affine encoder: everything but the format's code packing.
pub(crate) struct Affine<S> {
    pub d: F16Le,
    pub dmin: F16Le,
    pub scales: S,
    pub codes: [u8; QK_K],
}

/// Number of real elements in sub-block `j` of a block holding `n` real elements.
#[inline]
pub(crate) fn real_len(n: usize, sub: usize, j: usize) -> usize {
    n.saturating_sub(sub * j).min(sub)
}

/// Quantizes `max`-relative values to codes the way ggml's reference does for super-block
/// scales: `nearest_int(inv * v)` stored into a byte, then capped.
#[inline(always)]
fn scale_codes(values: &[f32], max: f32, scale_max: i32, cap: u8, out: &mut [u8; 16]) {
    let inv = if max > 0.0 { scale_max as f32 / max } else { 0.0 };
    for (o, &v) in out.iter_mut().zip(values) {
        *o = (nearest_int(inv * v) as u8).min(cap);
    }
}

/// Encodes one block of `x` (1..=QK_K real elements) with optional importance weights.
#[inline(always)]
pub(crate) fn encode<S: AffineSpec>(x: &[f32], weights: Option<&[f32]>) -> Affine<S::Scales> {
    let n = x.len().min(QK_K);
    let xs = padded::<QK_K>(x).0;
    let nsub = QK_K / S::SUB;
    let mut codes = [0u8; QK_K];
    let mut scales = [0.0f32; 16];
    let mut mins = [0.0f32; 16];
    let mut w = [0.0f32; 32];

    let (d, dmin, sc, m) = match weights {
        None => {
            for j in 0..nsub {
                let nj = real_len(n, S::SUB, j);
                if nj == 0 {
                    continue;
                }
                let xj = &xs[S::SUB * j..S::SUB * j + nj];
                match S::REF_WEIGHTS {
                    RefWeights::Abs => {
                        for (wi, v) in w.iter_mut().zip(xj) {
                            *wi = v.abs();
                        }
                    }
                    RefWeights::RmsPlusAbs => {
                        let mut sum_x2 = 0.0f32;
                        for v in xj {
                            sum_x2 += v * v;
                        }
                        let av_x = (sum_x2 / nj as f32).sqrt();
                        for (wi, v) in w.iter_mut().zip(xj) {
                            *wi = av_x + v.abs();
                        }
                    }
                }
                let lj = &mut codes[S::SUB * j..S::SUB * j + nj];
                (scales[j], mins[j]) = make_qkx_quants::<SUB_MAX, _>(xj, &w[..nj], S::NMAX, lj, S::REF_SEARCH);
            }
            let max_of = |v: &[f32]| v.iter().fold(0.0f32, |m, &s| if s > m { s } else { m });
            let (max_scale, max_min) = (max_of(&scales[..nsub]), max_of(&mins[..nsub]));
            let (mut sc, mut m) = ([0u8; 16], [0u8; 16]);
            scale_codes(&scales[..nsub], max_scale, S::SCALE_MAX, S::REF_CAP, &mut sc);
            scale_codes(&mins[..nsub], max_min, S::SCALE_MAX, S::REF_CAP, &mut m);
            let d = F16Le::from_f32(max_scale / S::SCALE_MAX as f32);
            let dmin = F16Le::from_f32(max_min / S::SCALE_MAX as f32);
            (d, dmin, sc, m)
        }
        Some(qw) => {
            let sigma2 = sigma2(&xs[..n], n, S::SIGMA_FACTOR);
            let mut sw = [0.0f32; 16];
            for j in 0..nsub {
                let nj = real_len(n, S::SUB, j);
                if nj == 0 {
                    continue;
                }
                let (lo, hi) = (S::SUB * j, S::SUB * j + nj);
                sw[j] = importance_weights(&xs[lo..hi], &qw[lo..hi], sigma2, &mut w[..nj]);
                (scales[j], mins[j]) =
                    make_qkx_quants::<SUB_MAX, _>(&xs[lo..hi], &w[..nj], S::NMAX, &mut codes[lo..hi], WEIGHTED_SEARCH);
            }
            let (mut sc, mut m) = ([0u8; 16], [0u8; 16]);
            let d = make_qp_quants(&scales[..nsub], S::SCALE_MAX, &mut sc[..nsub], &sw[..nsub]);
            let dmin = make_qp_quants(&mins[..nsub], S::SCALE_MAX, &mut m[..nsub], &sw[..nsub]);
            for v in sc.iter_mut().chain(m.iter_mut()) {
                *v = (*v).min(S::WEIGHTED_CAP);
            }
            (F16Le::from_f32(d), F16Le::from_f32(dmin), sc, m)
        }
    };

    // Recompute every code from the scales as stored.
    let packed = S::pack_scales(&sc, &m);
    let (df, dminf) = (d.get(), dmin.get());
    for j in 0..nsub {
        let (s, mm) = S::scale_min(&packed, j);
        let dj = df * s as f32;
        if dj == 0.0 {
            continue;
        }
        let mj = dminf * mm as f32;
        let range = S::SUB * j..S::SUB * (j + 1);
        for (c, &v) in codes[range.clone()].iter_mut().zip(&xs[range]) {
            *c = nearest_int((v + mj) / dj).clamp(0, S::NMAX) as u8;
        }
    }
    Affine { d, dmin, scales: packed, codes }
}
