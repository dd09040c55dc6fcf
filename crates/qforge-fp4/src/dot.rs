//! The native dot products of mxfp4 and nvfp4 with q8_0 activations, as ggml's CPU
//! `vec_dot` (`ggml_vec_dot_mxfp4_q8_0` / `ggml_vec_dot_nvfp4_q8_0`) computes them.
//!
//! Each E2M1 code becomes its doubled value ([`E2M1_X2`], a small integer), so a group of codes
//! dotted with the q8_0 codes is an exact integer sum; the scale of the group (half the E8M0 /
//! UE4M3 scale, which absorbs the doubling) times the q8_0 scale multiplies it in f32: mxfp4
//! `Σ (d_y · e8m0_half) · sumi` per 32 values, nvfp4 `Σ (d_y · ue4m3_half) · sumi` per 16.
//! Both describe their units to `qforge-simd`'s shared q8_0 kernel ([`qforge_simd::q8`]: 8
//! integer lanes of 4 products accumulated in f32 lanes as ggml's AVX2 kernels do; `vpshufb` +
//! `vpmaddubsw` where the CPU has AVX2), which runs them.

use crate::e2m1::E2M1_X2;
use crate::mxfp4::{BlockMxfp4, Mxfp4};
use crate::nvfp4::{BlockNvfp4, Nvfp4};
use crate::scale::{E8M0_HALF, UE4M3_HALF};
use qforge_legacy::Q8_0;
use qforge_simd::q8::{Codes, Q8Weight, Scale, Values};

/// ggml's `ggml_vec_dot_mxfp4_q8_0`: `Σ_b (d_y · 2^(e-128)) · Σ E2M1_X2[q]·q8`.
impl Q8Weight for BlockMxfp4 {
    const UNITS: usize = 1;
    const VALUES: Values = Values::Table(E2M1_X2);
    const SCALE: Scale = Scale::Byte(&E8M0_HALF);
    const PACK_BITS: u32 = 4;

    #[inline(always)]
    fn codes(&self, _: usize) -> Codes<'_> {
        Codes::Nibbles { qs: &self.qs, qh: None }
    }

    #[inline(always)]
    fn scale_bytes(&self, _: usize) -> [u8; 2] {
        [self.e, 0]
    }
}

/// ggml's `ggml_vec_dot_nvfp4_q8_0`: per 16-value sub-block `s`,
/// `(d_y · ue4m3_half(d[s])) · Σ E2M1_X2[q]·q8`; two q8_0 blocks per nvfp4 block.
impl Q8Weight for BlockNvfp4 {
    const UNITS: usize = 2;
    const VALUES: Values = Values::Table(E2M1_X2);
    const SCALE: Scale = Scale::ByteHalves(&UE4M3_HALF);
    const PACK_BITS: u32 = 4;

    #[inline(always)]
    fn codes(&self, u: usize) -> Codes<'_> {
        let units: &[[u8; 16]; 2] = bytemuck::cast_ref(&self.qs);
        Codes::Nibbles16(&units[u & 1])
    }

    #[inline(always)]
    fn scale_bytes(&self, u: usize) -> [u8; 2] {
        let u = u & 1;
        [self.d[2 * u], self.d[2 * u + 1]]
    }
}

// Both formats' native dots: the shared q8_0 kernel.
qforge_simd::q8_native_dot!(Mxfp4 => Q8_0, Nvfp4 => Q8_0);
