//! Choosing, per shape, between the two GEMM paths that compute the same product — `y = x ·
//! Wᵀ` with f16 / bf16 tensor-core inputs and f32 accumulation: the format's fused kernel
//! ([`Cuda::gemm`]) and dequantization + cuBLAS ([`Cuda::gemm_dequant`]).
//!
//! The choice is data, not a guess: [`FUSED_OVER_DEQUANT`] holds, per measured M, the worst
//! ratio (dequant + cuBLAS time ÷ fused time) over the formats and shapes measured on the
//! device the GPU kit last ran on. Where that ratio is above 1 the fused kernel is chosen; a
//! new kit run that makes a fused kernel faster updates the table from its `gpu-report.md`.

use crate::CudaError;
use crate::runtime::{Cuda, DeviceBuffer, DeviceQuantTensor};
use cudarc::driver::{CudaStream, CudaView};
use qforge_core::DType;
use std::sync::Arc;

/// One of the two paths of an f16 / bf16 GEMM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GemmPath {
    /// The format's fused kernel: blocks decoded into shared memory, `mma.sync`.
    Fused,
    /// Weight rows dequantized to the input type in bounded chunks, then `cublasGemmEx`.
    DequantCublas,
}

/// (M, the smallest dequant + cuBLAS ÷ fused time ratio over the formats and shapes measured
/// at that M), ascending M; the fused f16 GEMM or the format's int8 / FP8 one, whichever was
/// faster. NVIDIA H200, the kit's `gpu-bench`. M = 1 to 64 (the skinny instances):
/// 2026-11-27, second session, q4_0, iq2_xxs, mxfp4, fp8_e4m3 on N × K = 4096², 14336 × 4096,
/// 4096 × 14336 and q8_0, q4_k, q5_k, q6_k, iq4_xs, nvfp4 on 4096². M = 128 to 8192 (the tiled
/// instances since they stage raw blocks, `gemm_tiled.cuh`): 2026-11-28, q4_0, iq2_xxs,
/// fp8_e4m3 on the three shapes and q4_k on 4096² (the best: q4_0 4096 × 14336, 1.08× at
/// M = 128, 0.51× at 8192). The skinny instances beat dequant + cuBLAS up to M = 32 on every
/// format and shape (1.04–2.96×); at 48 the 64-token one does on 12 of the 18 format × shape
/// cells, at 64 on 5 (0.78–1.51×); the tiled ones on 1 of 10 cells at M = 128 and none above.
pub const FUSED_OVER_DEQUANT: &[(usize, f64)] = &[
    (1, 1.43),
    (8, 1.46),
    (16, 1.39),
    (24, 1.11),
    (32, 1.04),
    (48, 0.90),
    (64, 0.78),
    (128, 0.61),
    (512, 0.33),
    (2048, 0.20),
    (8192, 0.16),
];

/// The measured ratio that decides `m`: the one measured at `m`; below the first measured M
/// the first, above the last the last; between two measured M the smaller of the two (no
/// measurement says the fused kernel wins there unless both of its neighbours do).
fn ratio_at(m: usize) -> f64 {
    let t = FUSED_OVER_DEQUANT;
    match t.iter().position(|(at, _)| *at >= m) {
        None => t.last().map_or(0.0, |e| e.1),
        Some(0) => t[0].1,
        Some(i) if t[i].0 == m => t[i].1,
        Some(i) => t[i - 1].1.min(t[i].1),
    }
}

/// The path for `m` activation rows: the fused kernel where the measured ratio that decides
/// `m` ([`FUSED_OVER_DEQUANT`]) is above 1, or where cuBLAS is not available; dequant +
/// cuBLAS otherwise.
pub fn choose_gemm_path(m: usize, cublas: bool) -> GemmPath {
    if !cublas {
        return GemmPath::Fused;
    }
    if ratio_at(m) > 1.0 { GemmPath::Fused } else { GemmPath::DequantCublas }
}

impl Cuda {
    /// The path [`Cuda::gemm_auto`] takes for `m` rows on this machine.
    pub fn gemm_path(&self, m: usize) -> GemmPath {
        choose_gemm_path(m, crate::blas::cublas_present())
    }

    /// `y = x · Wᵀ` with `mma` (f16 or bf16) inputs and f32 accumulation on the faster path
    /// for this shape ([`Cuda::gemm_path`]): the same product as [`Cuda::gemm`] and
    /// [`Cuda::gemm_dequant`] with `input = mma`, up to f32 summation order. Returns m × N
    /// values of `out` on the device.
    ///
    /// # Errors
    /// As the path taken: [`Cuda::gemm_into`] or [`Cuda::gemm_dequant_into`].
    pub fn gemm_auto(
        &self,
        w: &DeviceQuantTensor,
        x: &CudaView<'_, f32>,
        m: usize,
        mma: DType,
        out: DType,
        stream: &Arc<CudaStream>,
    ) -> Result<DeviceBuffer, CudaError> {
        match self.gemm_path(m) {
            GemmPath::Fused => self.gemm(w, x, m, mma, out, stream),
            GemmPath::DequantCublas => self.gemm_dequant(w, x, m, mma, out, stream),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_decides_and_no_cublas_means_fused() {
        assert!(FUSED_OVER_DEQUANT.windows(2).all(|w| w[0].0 < w[1].0), "ascending M");
        for m in [1, 16, 17, 100, 512, 4096, 1 << 20] {
            assert_eq!(choose_gemm_path(m, false), GemmPath::Fused, "m = {m}");
        }
        // At a measured M its own ratio, between two the smaller, outside the nearest.
        let at = |m: usize| FUSED_OVER_DEQUANT.iter().find(|e| e.0 == m).unwrap().1;
        assert_eq!(ratio_at(16), at(16));
        assert_eq!(ratio_at(1), FUSED_OVER_DEQUANT[0].1);
        assert_eq!(ratio_at(40), at(32).min(at(48)));
        assert_eq!(ratio_at(1 << 20), FUSED_OVER_DEQUANT.last().unwrap().1);
        // The H200 measurements: the skinny fused GEMM up to M = 32, dequant + cuBLAS above.
        for m in [1, 8, 16, 20, 32] {
            assert_eq!(choose_gemm_path(m, true), GemmPath::Fused, "m = {m}");
        }
        for m in [33, 48, 64, 100, 8192] {
            assert_eq!(choose_gemm_path(m, true), GemmPath::DequantCublas, "m = {m}");
        }
    }
}
