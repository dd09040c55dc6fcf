//! The native (integer) dot products of mxfp4 and nvfp4 with q8_0 activations, as ggml's CPU
//! `vec_dot` (`ggml_vec_dot_mxfp4_q8_0` / `ggml_vec_dot_nvfp4_q8_0`) computes them.
//!
//! Each E2M1 code becomes its doubled value ([`E2M1_X2`], a small integer), so a group of codes
//! dotted with the q8_0 codes is an exact integer sum; the scale of the group (half the E8M0 /
//! UE4M3 scale, which absorbs the doubling) times the q8_0 scale multiplies it in f32, group by
//! group, in ggml's order: mxfp4 `Σ (d_y · e8m0_half) · sumi` per 32 values, nvfp4
//! `Σ (d_y · ue4m3_half) · sumi` per 16.

use crate::e2m1::E2M1_X2;
use crate::mxfp4::{BlockMxfp4, Mxfp4};
use crate::nvfp4::{BlockNvfp4, Nvfp4};
use crate::scale::{e8m0_to_f32_half, ue4m3_to_f32_half};
use qforge_core::NativeDot;
use qforge_legacy::{BlockQ8_0, Q8_0};

/// `Σ w[i]·a[i]` in i32 over fixed-length lanes (vectorizes: widen, multiply, add).
#[inline(always)]
fn idot<const N: usize>(w: &[i8; N], a: &[i8; N]) -> i32 {
    w.iter().zip(a).map(|(&x, &y)| i32::from(x) * i32::from(y)).sum()
}

/// The doubled E2M1 values of `H` bytes of codes: low nibbles, then high nibbles.
#[inline(always)]
fn codes<const H: usize>(qs: &[u8; H]) -> ([i8; H], [i8; H]) {
    (qs.map(|q| E2M1_X2[usize::from(q & 0x0F)]), qs.map(|q| E2M1_X2[usize::from(q >> 4)]))
}

/// Integer dot of a split-half packed group (`2·H` codes) with `2·H` activation codes.
#[inline(always)]
fn group_dot<const H: usize>(qs: &[u8; H], a: &[[i8; H]; 2]) -> i32 {
    let (lo, hi) = codes(qs);
    idot(&lo, &a[0]) + idot(&hi, &a[1])
}

impl NativeDot for Mxfp4 {
    type Act = Q8_0;

    /// ggml's `ggml_vec_dot_mxfp4_q8_0`: `Σ_b (d_y · 2^(e-128)) · Σ E2M1_X2[q]·q8`.
    fn vec_dot(w: &[BlockMxfp4], a: &[BlockQ8_0]) -> f32 {
        let mut sumf = 0.0f32;
        for (x, y) in w.iter().zip(a) {
            let d = y.d.get() * e8m0_to_f32_half(x.e);
            let halves: &[[i8; 16]; 2] = bytemuck::cast_ref(&y.qs);
            sumf += d * group_dot(&x.qs, halves) as f32;
        }
        sumf
    }
}

impl NativeDot for Nvfp4 {
    type Act = Q8_0;

    /// ggml's `ggml_vec_dot_nvfp4_q8_0`: per 16-value sub-block `s`,
    /// `(d_y · ue4m3_half(d[s])) · Σ E2M1_X2[q]·q8`; two q8_0 blocks per nvfp4 block.
    fn vec_dot(w: &[BlockNvfp4], a: &[BlockQ8_0]) -> f32 {
        let mut sumf = 0.0f32;
        for (x, ys) in w.iter().zip(a.chunks_exact(2)) {
            let qs: &[[u8; 8]; 4] = bytemuck::cast_ref(&x.qs);
            for (k, y) in ys.iter().enumerate() {
                let dy = y.d.get();
                // Sub-blocks 2k (activation codes 0..16) and 2k + 1 (16..32), split in halves.
                let quarters: &[[[i8; 8]; 2]; 2] = bytemuck::cast_ref(&y.qs);
                for (h, aq) in quarters.iter().enumerate() {
                    let s = 2 * k + h;
                    sumf += dy * ue4m3_to_f32_half(x.d[s]) * group_dot(&qs[s], aq) as f32;
                }
            }
        }
        sumf
    }
}
