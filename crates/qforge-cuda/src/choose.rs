//! Choosing, per shape, between the two GEMM paths that compute the same product — `y = x ·
//! Wᵀ` with f16 / bf16 tensor-core inputs and f32 accumulation: the format's fused kernel
//! ([`Cuda::gemm`]) and dequantization + cuBLAS ([`Cuda::gemm_dequant`]).
//!
//! The choice is data, not a guess: [`FUSED_OVER_DEQUANT`] holds, per measured M, the best
//! ratio (dequant + cuBLAS time ÷ fused time) any format reached on the device the GPU kit last
//! ran on. Where that ratio is above 1 the fused kernel is chosen; a new kit run that makes a
//! fused kernel faster updates the table from its `gpu-report.md`.

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

/// (M, the best dequant + cuBLAS ÷ fused time ratio over every format measured at that M),
/// ascending M: NVIDIA H200, 2026-11-26, the kit's `gpu-bench` (N × K = 4096², 14336 × 4096,
/// 4096 × 14336; the fused f16 GEMM or the format's int8 / FP8 one, whichever was faster).
/// Below 1 everywhere: dequant + cuBLAS was 2.3–4.8× faster than the best fused kernel.
pub const FUSED_OVER_DEQUANT: &[(usize, f64)] =
    &[(16, 0.43), (64, 0.41), (128, 0.24), (512, 0.30), (2048, 0.21), (8192, 0.21)];

/// The path for `m` activation rows: the fused kernel where the measured ratio at the
/// nearest measured M at or below `m` (the first for smaller `m`) is above 1, or where
/// cuBLAS is not available; dequant + cuBLAS otherwise.
pub fn choose_gemm_path(m: usize, cublas: bool) -> GemmPath {
    if !cublas {
        return GemmPath::Fused;
    }
    let ratio = FUSED_OVER_DEQUANT
        .iter()
        .rev()
        .find(|(at, _)| *at <= m)
        .or(FUSED_OVER_DEQUANT.first())
        .map_or(0.0, |(_, r)| *r);
    if ratio > 1.0 { GemmPath::Fused } else { GemmPath::DequantCublas }
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
            let at = FUSED_OVER_DEQUANT.iter().rev().find(|(a, _)| *a <= m).unwrap_or(&FUSED_OVER_DEQUANT[0]);
            let want = if at.1 > 1.0 { GemmPath::Fused } else { GemmPath::DequantCublas };
            assert_eq!(choose_gemm_path(m, true), want, "m = {m}");
        }
        // The H200 measurements: dequant + cuBLAS at every M.
        assert_eq!(choose_gemm_path(16, true), GemmPath::DequantCublas);
        assert_eq!(choose_gemm_path(8192, true), GemmPath::DequantCublas);
    }
}
