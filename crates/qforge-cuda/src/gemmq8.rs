//! The int8 tensor-core GEMM of the GGUF formats with an integer dot on the device
//! (`kernels-cuda/gemm_q8.cuh`): the CPU's `--act-quant native` mat-mul. The activations are
//! quantized on the GPU to the format's native q8_0 / q8_1 / q8_k (`qforge_quantize_act8`,
//! the CPU's own encoder, bit for bit), the weights' sub-blocks decoded to int8 codes in
//! shared memory, products on `mma.sync.m16n8k32.s32.s8.s8.s32`, each 32-element step scaled
//! in f32 (`d_w·d_a·Σ + m_w·s_a`): `qforge_gemm_<format>_q8`.

use crate::CudaError;
use crate::codegen::{A8_TILE, q8_kernel_names, q8_units};
use crate::gemm::{check_operands, dtype_index, new_output, out_len, tile_grid};
use crate::runtime::{Cuda, DeviceBuffer, DeviceQuantTensor, alloc_err, dim, driver};
use cudarc::driver::{CudaSlice, CudaStream, CudaView, DeviceRepr, LaunchConfig, PushKernelArg};
use qforge_core::DType;
use std::sync::Arc;

/// Threads of the activation quantizer's CTA (`QF_ACT8_THREADS` in gemm_q8.cuh).
const QUANTIZE_THREADS: u32 = 256;
/// Bytes of one activation unit (`qf_block_q8_1`: f32 d, f32 s, 32 codes).
const UNIT_BYTES: usize = 40;

impl Cuda {
    /// Whether `w` runs on the int8 GEMM ([`Cuda::gemm_q8`]): its format's device code has
    /// `codes32` and its native activations are q8 blocks (`codegen::q8_gemm`).
    pub fn has_gemm_q8(w: &DeviceQuantTensor) -> bool {
        q8_units(w.format(), w.shape().cols()).is_ok()
    }

    /// `y = x · Wᵀ` with the format's native activations (the CPU's `--act-quant native`):
    /// `x` (m × K f32 on the device) quantized on the GPU to the format's q8_0 / q8_1 / q8_k
    /// exactly as the CPU does, the integer dot on the int8 tensor cores; m × N values of `out`
    /// (f32, f16 or bf16). Two launches on `stream` and one workspace allocation.
    pub fn gemm_q8(
        &self,
        w: &DeviceQuantTensor,
        x: &CudaView<'_, f32>,
        m: usize,
        out: DType,
        stream: &Arc<CudaStream>,
    ) -> Result<DeviceBuffer, CudaError> {
        new_output!(stream, out_len(m, w)?, out, |s| self.gemm_q8_into(w, x, m, s, out, stream))
    }

    /// [`Cuda::gemm_q8`] into a caller-owned `y` (m × N elements of `out`: f32, or u16 bit
    /// patterns for f16 / bf16).
    ///
    /// # Errors
    /// `Quant(Unsupported)` for weights without the int8 GEMM; `Size` for a wrong activation /
    /// output length or element size, or M past 65,535 × 64; `MissingKernels`,
    /// `OutOfMemory`, `Driver`. Non-finite activations are not detected on the device (the
    /// CPU path refuses them).
    pub fn gemm_q8_into<T: DeviceRepr>(
        &self,
        w: &DeviceQuantTensor,
        x: &CudaView<'_, f32>,
        m: usize,
        y: &mut CudaSlice<T>,
        out: DType,
        stream: &Arc<CudaStream>,
    ) -> Result<(), CudaError> {
        let (n, k) = (w.shape().rows(), w.shape().cols());
        let units = q8_units(w.format(), k).map_err(CudaError::Quant)?;
        check_operands::<T>(x, m, n, k, y.len(), out)?;
        let (gx, gy) = tile_grid(m, n, A8_TILE.bm as usize, A8_TILE.bn as usize)?;
        if m == 0 || n == 0 {
            return Ok(());
        }
        let name = w.format().desc().name;
        let kern = self.cached_kernels(&self.q8, name, q8_kernel_names(name))?;
        let bytes = m
            .checked_mul(units)
            .and_then(|u| u.checked_mul(UNIT_BYTES))
            .ok_or(CudaError::Quant(qforge_core::QuantError::Overflow { what: "q8 activations" }))?;
        // SAFETY: the quantizer writes all m × units units (zeros past K) before the GEMM (same
        // stream) reads them.
        let mut act = unsafe { stream.alloc::<u8>(bytes) }.map_err(alloc_err(bytes))?;
        let (m64, n64, k64, u64_) = (dim(m)?, dim(n)?, dim(k)?, dim(units)?);
        let items = bytes / UNIT_BYTES; // at least one activation block per unit of 32 … 256
        let blocks = u32::try_from(items.div_ceil(QUANTIZE_THREADS as usize).min(65_535)).unwrap_or(65_535);
        let mut b = stream.launch_builder(&kern[0]);
        b.arg(x).arg(&mut act).arg(&k64).arg(&u64_).arg(&m64);
        let qcfg = LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (QUANTIZE_THREADS, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: grid-stride over the m rows' activation blocks: each thread reads its block's
        // elements of x (m × k checked, zeros past k) and writes its units (m × units × 40
        // bytes allocated); argument types match (const float*, qf_block_q8_1*, long long × 3).
        unsafe { b.launch(qcfg) }.map_err(driver("launch quantize_act8"))?;
        let cfg = LaunchConfig { grid_dim: (gx, gy, 1), block_dim: (A8_TILE.threads(), 1, 1), shared_mem_bytes: 0 };
        let oi = dtype_index(out);
        let mut g = stream.launch_builder(&kern[1]);
        g.arg(&act).arg(w.data()).arg(y).arg(&m64).arg(&n64).arg(&k64).arg(&u64_).arg(&oi);
        // SAFETY: the kernel reads m × units units (written above) and the n weight rows of
        // units · 32 / BLOCK blocks (the layout `upload` sized the allocation from; q8_units
        // checked it is row blocks), and writes m × n elements of `out` into y (length and
        // element size checked); argument types match its signature (const qf_block_q8_1*,
        // const uint8_t*, void*, long long × 4, int); the grid covers every bm × bn tile once
        // with the thread count it was compiled for.
        unsafe { g.launch(cfg) }.map_err(driver("launch gemm q8"))?;
        Ok(())
    }
}
