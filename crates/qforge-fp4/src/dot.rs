//! The native (integer) dot products of mxfp4 and nvfp4 with q8_0 activations, as ggml's CPU
//! `vec_dot` (`ggml_vec_dot_mxfp4_q8_0` / `ggml_vec_dot_nvfp4_q8_0`) computes them.
//!
//! Each E2M1 code becomes its doubled value ([`E2M1_X2`], a small integer), so a group of codes
//! dotted with the q8_0 codes is an exact integer sum; the scale of the group (half the E8M0 /
//! UE4M3 scale, which absorbs the doubling) times the q8_0 scale multiplies it in f32, group by
//! group: mxfp4 `Σ (d_y · e8m0_half) · sumi` per 32 values, nvfp4 `Σ (d_y · ue4m3_half) · sumi`
//! per 16. As in ggml's SIMD kernels the integer sums stay split in lanes and the f32 sum is
//! kept per lane (16 of them); the codes are looked up with vectorized selects.

use crate::e2m1::E2M1_X2;
use crate::mxfp4::{BlockMxfp4, Mxfp4};
use crate::nvfp4::{BlockNvfp4, Nvfp4};
use crate::scale::{e8m0_to_f32_half, ue4m3_to_f32_half};
use qforge_core::NativeDot;
use qforge_legacy::kernels::{idot_lanes, nibble_lut};
use qforge_legacy::{BlockQ8_0, Q8_0};

/// The doubled E2M1 values of `H` bytes of split-half packed codes (`2·H` values).
#[inline(always)]
fn codes<const H: usize, const N: usize>(qs: &[u8; H]) -> [i8; N] {
    nibble_lut(qs, &E2M1_X2)
}

/// Blocks whose scales are widened together: widened one by one inside the loop, the f16
/// load (`vpinsrw`) picks up a false dependency on the accumulator register and serializes
/// the loop on it.
const BATCH: usize = 8;

/// The 16 f32 lanes summed.
#[inline(always)]
fn hsum(acc: [f32; 16]) -> f32 {
    let mut s = 0.0f32;
    for v in acc {
        s += v;
    }
    s
}

impl NativeDot for Mxfp4 {
    type Act = Q8_0;

    /// ggml's `ggml_vec_dot_mxfp4_q8_0`: `Σ_b (d_y · 2^(e-128)) · Σ E2M1_X2[q]·q8`, the exact
    /// integer sums kept in 16 lanes and accumulated in f32 lanes (as ggml's SIMD kernels).
    fn vec_dot(w: &[BlockMxfp4], a: &[BlockQ8_0]) -> f32 {
        let n = w.len().min(a.len());
        let (w, a) = (&w[..n], &a[..n]);
        let mut acc = [0f32; 16];
        #[inline(always)]
        fn block(x: &BlockMxfp4, y: &BlockQ8_0, d: f32, acc: &mut [f32; 16]) {
            let lanes = idot_lanes(&codes::<16, 32>(&x.qs), &y.qs);
            for l in 0..16 {
                acc[l] += d * lanes[l] as f32;
            }
        }
        let (wb, wt) = w.as_chunks::<BATCH>();
        let (ab, at) = a.as_chunks::<BATCH>();
        for (xs, ys) in wb.iter().zip(ab) {
            let d: [f32; BATCH] = std::array::from_fn(|j| ys[j].d.get() * e8m0_to_f32_half(xs[j].e));
            for j in 0..BATCH {
                block(&xs[j], &ys[j], d[j], &mut acc);
            }
        }
        for (x, y) in wt.iter().zip(at) {
            block(x, y, y.d.get() * e8m0_to_f32_half(x.e), &mut acc);
        }
        hsum(acc)
    }
}

impl NativeDot for Nvfp4 {
    type Act = Q8_0;

    /// ggml's `ggml_vec_dot_nvfp4_q8_0`: per 16-value sub-block `s`,
    /// `(d_y · ue4m3_half(d[s])) · Σ E2M1_X2[q]·q8`; two q8_0 blocks per nvfp4 block. The
    /// products of a sub-block are exact integers, scaled and accumulated in 16 f32 lanes.
    fn vec_dot(w: &[BlockNvfp4], a: &[BlockQ8_0]) -> f32 {
        let mut acc = [0f32; 16];
        for (x, ys) in w.iter().zip(a.chunks_exact(2)) {
            let qs: &[[u8; 8]; 4] = bytemuck::cast_ref(&x.qs);
            let dy = [ys[0].d.get(), ys[1].d.get()];
            let d: [f32; 4] = std::array::from_fn(|s| dy[s / 2] * ue4m3_to_f32_half(x.d[s]));
            for (s, q) in qs.iter().enumerate() {
                let aq: &[[i8; 16]; 2] = bytemuck::cast_ref(&ys[s / 2].qs);
                let lanes = idot_lanes(&codes::<8, 16>(q), &aq[s % 2]);
                for l in 0..16 {
                    acc[l] += d[s] * lanes[l] as f32;
                }
            }
        }
        hsum(acc)
    }
}
