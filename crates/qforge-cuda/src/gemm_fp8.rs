//! The FP8 block-scaled GEMM on the device (`kernels-cuda/gemm_fp8.cuh`): the CPU's
//! `--act-quant fp8-1x128` mat-mul of a format with fp8 values in 128 × 128 scale tiles. The
//! activations are quantized on the GPU (`qforge_quantize_fp8_1x128`: 1 × 128 e4m3), then one
//! of two bodies runs, chosen from the device: on compute capability 8.9 and up the e4m3
//! tensor cores (`mma.m16n8k32 … e4m3`, from the sm_89 module [`crate::codegen::SM89_MODULE`]), below it the
//! sm_80 body in the format's own module (codes decoded exactly to f16, `mma.m16n8k16`).

use crate::CudaError;
use crate::codegen::{
    FP8_GEMM_TILES, FP8_QUANTIZE_KERNEL, fp8_body_kernel_names, fp8_gemm, fp8_kernel_names, sm89_kernel_names,
};
use crate::gemm::{dtype_index, new_output, out_len, split_workspace, trans_launch};
use crate::runtime::{Cuda, DeviceBuffer, DeviceQuantTensor, MODULES, SM89_PTX, alloc_err, dim, driver, inflate};
use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, CudaView, DeviceRepr, LaunchConfig, PushKernelArg};
use qforge_core::{DType, QuantError};
use std::sync::Arc;

/// Threads of the activation quantizer's CTA (`QF_FP8_ACT_THREADS` in gemm_fp8.cuh).
const QUANTIZE_THREADS: u32 = 128;

/// Which body of the FP8 GEMM runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Fp8Body {
    /// e4m3 codes on the fp8 tensor cores (`mma.m16n8k32`; compute capability 8.9 and up).
    Mma,
    /// Codes decoded exactly to f16, `mma.m16n8k16` (any device the modules run on, sm_80+).
    F16,
}

/// The FP8 GEMM's loaded kernels per (registered format, body): the quantizer, then the GEMM of
/// each instance of `FP8_GEMM_TILES`.
pub(crate) type Fp8Cache = std::sync::Mutex<std::collections::HashMap<(&'static str, Fp8Body), Arc<Vec<CudaFunction>>>>;

/// The PTX text of the sm_89 module (the kernels that need compute capability 8.9).
pub fn sm89_ptx() -> Result<String, CudaError> {
    inflate(SM89_PTX)
}

impl Cuda {
    /// The body [`Cuda::gemm_fp8`] runs on this device: [`Fp8Body::Mma`] from compute
    /// capability 8.9, else [`Fp8Body::F16`].
    pub fn fp8_body(&self) -> Result<Fp8Body, CudaError> {
        let cc = self.context().compute_capability().map_err(driver("compute capability"))?;
        Ok(if cc >= (8, 9) { Fp8Body::Mma } else { Fp8Body::F16 })
    }

    /// The quantizer and body `body`'s GEMM per instance for the registered format `name`,
    /// loading the module that holds them on first use.
    fn fp8_kernels(&self, name: &'static str, body: Fp8Body) -> Result<Arc<Vec<CudaFunction>>, CudaError> {
        let (ptx, names, what) = match body {
            Fp8Body::Mma => {
                let all = sm89_kernel_names();
                let gemm = fp8_body_kernel_names(name, "mma");
                if gemm.iter().any(|g| !all.contains(g)) {
                    return Err(CudaError::MissingKernels(name));
                }
                let names = std::iter::once(FP8_QUANTIZE_KERNEL.to_string()).chain(gemm).collect();
                (Some(SM89_PTX), names, "load PTX module (sm_89)")
            }
            Fp8Body::F16 => {
                (MODULES.iter().find(|(f, _)| *f == name).map(|(_, p)| *p), fp8_kernel_names(name), "load PTX module")
            }
        };
        let smem = FP8_GEMM_TILES.iter().map(qforge_tiling::fp8_smem_bytes).max().unwrap_or(0);
        self.cached_module_kernels(&self.fp8, (name, body), name, ptx, names, what, smem)
    }

    /// `y = x · Wᵀ` in FP8 block-scaled arithmetic (the CPU's `--act-quant fp8-1x128`): `x`
    /// (m × K f32 on the device) quantized on the GPU to 1 × 128 e4m3, `w` fp8 weights with
    /// 128 × 128 scale tiles; m × N values of `out` (f32, f16 or bf16). The body is
    /// [`Cuda::fp8_body`]'s. Two launches on `stream` and two workspace allocations.
    pub fn gemm_fp8(
        &self,
        w: &DeviceQuantTensor,
        x: &CudaView<'_, f32>,
        m: usize,
        out: DType,
        stream: &Arc<CudaStream>,
    ) -> Result<DeviceBuffer, CudaError> {
        let body = self.fp8_body()?;
        new_output!(stream, out_len(m, w)?, out, |s| self.gemm_fp8_into(w, x, m, s, out, body, stream))
    }

    /// [`Cuda::gemm_fp8`] into a caller-owned `y` (m × N elements of `out`: f32, or u16 bit
    /// patterns for f16 / bf16), with the body named (`Fp8Body::Mma` needs compute
    /// capability 8.9). The instance is `qforge_tiling::fp8_tile(m)`'s, the K splits
    /// `qforge_tiling::fp8_splits` for this device's multiprocessors.
    ///
    /// # Errors
    /// `Quant(Unsupported)` for weights that are not fp8 values in 128 × 128 f32 scale tiles;
    /// `Size` for a wrong activation / output length or element size, or M past 65,535 tiles;
    /// `MissingKernels`, `OutOfMemory`, `Driver` (loading the sm_89 module on an older device).
    /// Non-finite activations are not detected on the device (the CPU path refuses them).
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_fp8_into<T: DeviceRepr>(
        &self,
        w: &DeviceQuantTensor,
        x: &CudaView<'_, f32>,
        m: usize,
        y: &mut CudaSlice<T>,
        out: DType,
        body: Fp8Body,
        stream: &Arc<CudaStream>,
    ) -> Result<(), CudaError> {
        let (n, k) = (w.shape().rows(), w.shape().cols());
        let tile = crate::codegen::fp8_tile(m as u64);
        let splits = crate::codegen::fp8_splits(&FP8_GEMM_TILES[tile], m as u64, n as u64, k as u64, self.sms()?);
        self.gemm_fp8_tile_into(w, x, m, y, out, body, tile, splits as usize, stream)
    }

    /// Multiprocessors of this device, for the split choice.
    pub(crate) fn sms(&self) -> Result<u32, CudaError> {
        Ok(u32::try_from(self.multiprocessors()?).unwrap_or(u32::MAX))
    }

    /// [`Cuda::gemm_fp8_into`] on instance `tile` of `FP8_GEMM_TILES` with K cut into `splits`
    /// ranges of whole 128-column blocks (1: no split). With splits > 1 each range's f32 partial
    /// sums go to a workspace (splits × m × N f32) and `qforge_reduce_splits_<out>` adds them
    /// (from the first range on, in f32) into `y`: three launches with the quantizer's.
    ///
    /// # Errors
    /// As [`Cuda::gemm_fp8_into`]; `Size` besides for `tile` past the instances or `splits`
    /// outside 1..=65,535.
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_fp8_tile_into<T: DeviceRepr>(
        &self,
        w: &DeviceQuantTensor,
        x: &CudaView<'_, f32>,
        m: usize,
        y: &mut CudaSlice<T>,
        out: DType,
        body: Fp8Body,
        tile: usize,
        splits: usize,
        stream: &Arc<CudaStream>,
    ) -> Result<(), CudaError> {
        let (n, k) = (w.shape().rows(), w.shape().cols());
        let name = w.format().desc().name;
        if fp8_gemm(w.format().desc()).is_none()
            || w.format().layout() != qforge_formats::get(name).map_err(CudaError::Quant)?.layout()
        {
            return Err(CudaError::Quant(QuantError::Unsupported {
                format: name,
                reason: "the FP8 GEMM takes fp8 values with 128 × 128 f32 scale tiles".into(),
            }));
        }
        let fp8_smem = qforge_tiling::fp8_smem_bytes;
        let Some(cfg) =
            trans_launch::<T>(FP8_GEMM_TILES, tile, "FP8 GEMM instance", fp8_smem, x, (m, n, k), y.len(), out, splits)?
        else {
            return Ok(());
        };
        let kern = self.fp8_kernels(name, body)?;
        let groups = k.div_ceil(128);
        let overflow = || CudaError::Quant(QuantError::Overflow { what: "fp8 activations" });
        let q_len = m.checked_mul(groups * 128).ok_or_else(overflow)?;
        let s_len = m.checked_mul(groups).ok_or_else(overflow)?;
        // SAFETY: the quantizer writes all m × groups·128 codes (zeros past K) and m × groups
        // scales before the GEMM (same stream) reads them.
        let mut q = unsafe { stream.alloc::<u8>(q_len) }.map_err(alloc_err(q_len))?;
        // SAFETY: as above.
        let mut s = unsafe { stream.alloc::<f32>(s_len) }.map_err(alloc_err(4 * s_len))?;
        let qgrid = u32::try_from(s_len).map_err(|_| CudaError::Size {
            what: "activation groups (quantizer grid)",
            expected: u32::MAX as usize,
            actual: s_len,
        })?;
        let (m64, n64, k64, s32) = (dim(m)?, dim(n)?, dim(k)?, splits as i32);
        let mut b = stream.launch_builder(&kern[0]);
        b.arg(x).arg(&mut q).arg(&mut s).arg(&k64);
        let qcfg = LaunchConfig { grid_dim: (qgrid, 1, 1), block_dim: (QUANTIZE_THREADS, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: CTA i quantizes group i % groups of row i / groups: it reads that row's K
        // f32 of x (m × k checked) and writes 128 codes and one scale of it (buffers of
        // m × groups·128 and m × groups); argument types match (const float*, uint8_t*,
        // float*, long long).
        unsafe { b.launch(qcfg) }.map_err(driver("launch quantize_fp8_1x128"))?;
        let grid = w.data().slice(w.rows_len()..);
        let mut g = stream.launch_builder(&kern[1 + tile]);
        g.arg(&q).arg(&s).arg(w.data()).arg(&grid);
        if splits == 1 {
            let o32 = dtype_index(out);
            g.arg(y).arg(&m64).arg(&n64).arg(&k64).arg(&s32).arg(&o32);
            // SAFETY: the kernel reads m × groups·128 codes and m × groups scales (written
            // above), the n × k value bytes of w and the ceil(n/128) × ceil(k/128) f32 grid after
            // them (the allocation `upload` sized from the registered layout, checked equal
            // above), and writes m × n elements of `out` into y (length and element size
            // checked); argument types match its signature (const uint8_t*, const float*, const
            // uint8_t*, const uint8_t*, void*, long long × 3, int splits, int out) — instance `tile`'s
            // kernel; the grid covers every tok × rows tile once, with its thread count and
            // shared memory.
            unsafe { g.launch(cfg) }.map_err(driver("launch gemm fp8"))?;
            return Ok(());
        }
        // SAFETY: split z's CTAs write every element of slice z (the epilogue covers the whole
        // m × n, an empty K range writes zeros) before the reduction reads it (same stream).
        let mut ws = unsafe { split_workspace(stream, splits, m * n) }?;
        let f32_out = dtype_index(DType::F32);
        g.arg(&mut ws).arg(&m64).arg(&n64).arg(&k64).arg(&s32).arg(&f32_out);
        // SAFETY: as for one split, with out = f32: split z writes its m × n partial sums at
        // ws + z·m·n; ws holds splits × m × n f32 (allocated above), grid z = splits.
        unsafe { g.launch(cfg) }.map_err(driver("launch gemm fp8 (split-k)"))?;
        self.reduce_splits(&ws, y, m * n, splits, out, stream)
    }
}
