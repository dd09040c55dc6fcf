//! The int8 tensor-core GEMM of the GGUF formats with an integer dot on the device
//! (`kernels-cuda/gemm_q8.cuh`): the CPU's `--act-quant native` mat-mul. The activations are
//! quantized on the GPU to the format's native q8_0 / q8_1 / q8_k (`qforge_quantize_act8`,
//! the CPU's own encoder, bit for bit), the weights' sub-blocks decoded to int8 codes in
//! shared memory, products on `mma.sync.m16n8k32.s32.s8.s8.s32`, each 32-element step scaled
//! in f32 (`d_w·d_a·Σ + m_w·s_a`): `qforge_gemm_<format>_q8_<instance>` on the transposed
//! instances of `qforge_tiling::I8_GEMM_TILES`, K split where the grid is small
//! (`qforge_tiling::i8_splits`).

use crate::CudaError;
use crate::codegen::{I8_GEMM_TILES, i8_smem_bytes, q8_kernel_names, q8_units};
use crate::gemm::{dtype_index, new_output, out_len, split_workspace, trans_launch};
use crate::runtime::{Cuda, DeviceBuffer, DeviceQuantTensor, alloc_err, dim, driver};
use cudarc::driver::{CudaSlice, CudaStream, CudaView, DeviceRepr, LaunchConfig, PushKernelArg};
use qforge_core::DType;
use std::sync::Arc;

/// Threads of the activation quantizer's CTA (`QF_ACT8_THREADS` in gemm_q8.cuh).
const QUANTIZE_THREADS: u32 = 256;

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
    /// patterns for f16 / bf16), on the instance and K splits qforge-tiling picks for the shape
    /// and this device's multiprocessors.
    ///
    /// # Errors
    /// `Quant(Unsupported)` for weights without the int8 GEMM; `Size` for a wrong activation /
    /// output length or element size, or M past 65,535 tiles; `MissingKernels`,
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
        let tile = crate::codegen::i8_tile(m as u64);
        let splits = crate::codegen::i8_splits(&I8_GEMM_TILES[tile], m as u64, n as u64, k as u64, self.sms()?);
        self.gemm_q8_tile_into(w, x, m, y, out, tile, splits as usize, stream)
    }

    /// [`Cuda::gemm_q8_into`] on instance `tile` of `I8_GEMM_TILES` with K cut into `splits`
    /// ranges of whole 128-column k-steps (1: no split). With splits > 1 each range's f32
    /// partial sums go to a workspace (splits × m × N f32) and `qforge_reduce_splits_<out>`
    /// adds them (from the first range on, in f32) into `y`: three launches with the
    /// quantizer's.
    ///
    /// # Errors
    /// As [`Cuda::gemm_q8_into`]; `Size` besides for `tile` past the instances or `splits`
    /// outside 1..=65,535.
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_q8_tile_into<T: DeviceRepr>(
        &self,
        w: &DeviceQuantTensor,
        x: &CudaView<'_, f32>,
        m: usize,
        y: &mut CudaSlice<T>,
        out: DType,
        tile: usize,
        splits: usize,
        stream: &Arc<CudaStream>,
    ) -> Result<(), CudaError> {
        let (n, k) = (w.shape().rows(), w.shape().cols());
        let units = q8_units(w.format(), k).map_err(CudaError::Quant)?;
        let Some(cfg) = trans_launch::<T>(
            I8_GEMM_TILES,
            tile,
            "int8 GEMM instance",
            i8_smem_bytes,
            x,
            (m, n, k),
            y.len(),
            out,
            splits,
        )?
        else {
            return Ok(());
        };
        let name = w.format().desc().name;
        let kern = self.cached_kernels(&self.q8, name, q8_kernel_names(name))?;
        let lda = (units * 32).div_ceil(128) * 128;
        let overflow = || CudaError::Quant(qforge_core::QuantError::Overflow { what: "q8 activations" });
        let c_len = m.checked_mul(lda).ok_or_else(overflow)?;
        let ds_len = c_len / 16; // two f32 per 32 codes
        // SAFETY: the quantizer writes all m × lda codes and m × lda / 32 (d, s) pairs (zeros
        // past the row's units) before the GEMM (same stream) reads them.
        let mut codes = unsafe { stream.alloc::<i8>(c_len) }.map_err(alloc_err(c_len))?;
        // SAFETY: as above.
        let mut ds = unsafe { stream.alloc::<f32>(ds_len) }.map_err(alloc_err(4 * ds_len))?;
        let (m64, n64, k64, lda64, u64_) = (dim(m)?, dim(n)?, dim(k)?, dim(lda)?, dim(units)?);
        let items = m.saturating_mul(units); // at least one activation block per unit of 32 … 256
        let blocks = u32::try_from(items.div_ceil(QUANTIZE_THREADS as usize).min(65_535)).unwrap_or(65_535);
        let mut b = stream.launch_builder(&kern[0]);
        b.arg(x).arg(&mut codes).arg(&mut ds).arg(&k64).arg(&u64_).arg(&lda64).arg(&m64);
        let qcfg = LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (QUANTIZE_THREADS, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: grid-stride over the m rows' activation blocks: each thread reads its block's
        // elements of x (m × k checked, zeros past k) and writes its codes and pairs (and a
        // row's last block the row's padding) inside the m × lda codes and m × lda / 32 pairs
        // allocated; argument types match (const float*, int8_t*, float*, long long × 4).
        unsafe { b.launch(qcfg) }.map_err(driver("launch quantize_act8"))?;
        let s32 = splits as i32;
        let mut g = stream.launch_builder(&kern[1 + tile]);
        g.arg(&codes).arg(&ds).arg(w.data());
        if splits == 1 {
            let oi = dtype_index(out);
            g.arg(y).arg(&m64).arg(&n64).arg(&k64).arg(&lda64).arg(&u64_).arg(&s32).arg(&oi);
            // SAFETY: the kernel reads m × lda codes and m × lda / 32 pairs (written above) and
            // the n weight rows of units · 32 / BLOCK blocks (the layout `upload` sized the
            // allocation from; q8_units checked it is row blocks), and writes m × n elements of
            // `out` into y (length and element size checked); argument types match its
            // signature (const int8_t*, const float*, const uint8_t*, void*, long long × 5, int
            // splits, int out) — instance `tile`'s kernel; the grid covers every tok × rows tile
            // once with its thread count and shared memory.
            unsafe { g.launch(cfg) }.map_err(driver("launch gemm q8"))?;
            return Ok(());
        }
        // SAFETY: split z's CTAs write every element of slice z (the epilogue covers the whole
        // m × n, an empty K range writes zeros) before the reduction reads it (same stream).
        let mut ws = unsafe { split_workspace(stream, splits, m * n) }?;
        let f32_out = dtype_index(DType::F32);
        g.arg(&mut ws).arg(&m64).arg(&n64).arg(&k64).arg(&lda64).arg(&u64_).arg(&s32).arg(&f32_out);
        // SAFETY: as for one split, with out = f32: split z writes its m × n partial sums at
        // ws + z·m·n; ws holds splits × m × n f32 (allocated above), grid z = splits.
        unsafe { g.launch(cfg) }.map_err(driver("launch gemm q8 (split-k)"))?;
        self.reduce_splits(&ws, y, m * n, splits, out, stream)
    }
}
