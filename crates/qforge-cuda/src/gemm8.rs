//! The 8-bit tensor-core GEMM on the device (`kernels-cuda/gemm8.cuh`): A8W4DQ, i.e. the
//! CPU's `--act-quant int8-dyn` mat-mul of a format with an integer group dot (int4g, every
//! group size and scale dtype). The activations are quantized on the GPU
//! (`qforge_quantize_int8_dyn`: per-token asymmetric int8), the weights' 4-bit codes decoded
//! to int8 in shared memory, products on `mma.sync.m16n8k32.s32.s8.s8.s32`, the group scales
//! applied per K-group in f32: `qforge_gemm_<format>_a8_<instance>`, on the transposed
//! instances of `qforge_tiling::I8_GEMM_TILES` that the GGUF formats' int8 GEMM
//! ([`Cuda::gemm_q8`]) shares, never split (the result is the CPU's bit for bit).

use crate::CudaError;
use crate::codegen::{I8_GEMM_TILES, a8_group_args, a8_kernel_names, i8_smem_bytes};
use crate::gemm::{dtype_index, new_output, out_len, trans_launch};
use crate::runtime::{Cuda, DeviceBuffer, DeviceQuantTensor, MODULES, alloc_err, dim, driver, inflate};
use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, CudaView, DeviceRepr, LaunchConfig, PushKernelArg};
use qforge_core::DType;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// Threads of the activation quantizer's CTA (`QF_I8DYN_THREADS` in gemm8.cuh).
const QUANTIZE_THREADS: u32 = 256;

impl Cuda {
    /// The A8 kernels of the registered format `name` ([`a8_kernel_names`] order: the
    /// quantizer, then the GEMM per output type), loading its module on first use.
    fn a8_kernels(&self, name: &'static str) -> Result<Arc<Vec<CudaFunction>>, CudaError> {
        self.cached_kernels(&self.a8, name, a8_kernel_names(name))
    }

    /// The int8 GEMM kernels `names` of the registered format `name`'s own module, from
    /// `cache` or loaded (with the module) on first use, their shared-memory limit raised to
    /// the largest instance's; `MissingKernels` for an empty list.
    pub(crate) fn cached_kernels(
        &self,
        cache: &Mutex<HashMap<&'static str, Arc<Vec<CudaFunction>>>>,
        name: &'static str,
        names: Vec<String>,
    ) -> Result<Arc<Vec<CudaFunction>>, CudaError> {
        let ptx = MODULES.iter().find(|(f, _)| *f == name).map(|(_, p)| *p);
        let smem = I8_GEMM_TILES.iter().map(i8_smem_bytes).max().unwrap_or(0);
        self.cached_module_kernels(cache, name, name, ptx, names, "load PTX module", smem)
    }

    /// The kernels `names` of the deflated module `ptx`, cached under `key`, loaded on first
    /// use; `MissingKernels(name)` for no module or an empty list. `what` names the module
    /// load in a driver error; `smem` is the most dynamic shared memory a launch of them takes
    /// (their limit is raised where it is over 48 KiB).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn cached_module_kernels<K: Copy + Eq + std::hash::Hash>(
        &self,
        cache: &Mutex<HashMap<K, Arc<Vec<CudaFunction>>>>,
        key: K,
        name: &'static str,
        ptx: Option<&'static [u8]>,
        names: Vec<String>,
        what: &'static str,
        smem: u64,
    ) -> Result<Arc<Vec<CudaFunction>>, CudaError> {
        let mut cache = cache.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(k) = cache.get(&key) {
            return Ok(k.clone());
        }
        let (Some(ptx), false) = (ptx, names.is_empty()) else { return Err(CudaError::MissingKernels(name)) };
        let module = self.context().load_module(cudarc::nvrtc::Ptx::from_src(inflate(ptx)?)).map_err(driver(what))?;
        let fs = names
            .iter()
            .map(|n| module.load_function(n).map_err(driver("load kernel")))
            .collect::<Result<Vec<_>, _>>()?;
        fs.iter().for_each(|f| crate::runtime::raise_smem_limit(f, smem));
        let k = Arc::new(fs);
        cache.insert(key, k.clone());
        Ok(k)
    }

    /// `y = x · Wᵀ` in A8W4DQ (the CPU's `--act-quant int8-dyn`): `x` (m × K f32 on the device)
    /// quantized on the GPU to per-token asymmetric int8, `w` any variant of a format with an
    /// integer group dot; m × N values of `out` (f32, f16 or bf16). Two launches on `stream`
    /// (the quantizer, the GEMM) and three small workspace allocations.
    pub fn gemm_a8(
        &self,
        w: &DeviceQuantTensor,
        x: &CudaView<'_, f32>,
        m: usize,
        out: DType,
        stream: &Arc<CudaStream>,
    ) -> Result<DeviceBuffer, CudaError> {
        new_output!(stream, out_len(m, w)?, out, |s| self.gemm_a8_into(w, x, m, s, out, stream))
    }

    /// [`Cuda::gemm_a8`] into a caller-owned `y` (m × N elements of `out`: f32, or u16 bit
    /// patterns for f16 / bf16), on the instance `qforge_tiling::i8_tile` picks for m.
    ///
    /// # Errors
    /// `Quant(Unsupported)` for weights without an integer group dot (or groups that are not
    /// a multiple of 32); `Size` for a wrong activation / output length or element size, or M
    /// past 65,535 tiles; `MissingKernels`, `OutOfMemory`, `Driver`. Non-finite activations
    /// are not detected on the device (the CPU path refuses them).
    pub fn gemm_a8_into<T: DeviceRepr>(
        &self,
        w: &DeviceQuantTensor,
        x: &CudaView<'_, f32>,
        m: usize,
        y: &mut CudaSlice<T>,
        out: DType,
        stream: &Arc<CudaStream>,
    ) -> Result<(), CudaError> {
        self.gemm_a8_tile_into(w, x, m, y, out, crate::codegen::i8_tile(m as u64), stream)
    }

    /// [`Cuda::gemm_a8_into`] on instance `tile` of `I8_GEMM_TILES`.
    ///
    /// # Errors
    /// As [`Cuda::gemm_a8_into`]; `Size` besides for `tile` past the instances.
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_a8_tile_into<T: DeviceRepr>(
        &self,
        w: &DeviceQuantTensor,
        x: &CudaView<'_, f32>,
        m: usize,
        y: &mut CudaSlice<T>,
        out: DType,
        tile: usize,
        stream: &Arc<CudaStream>,
    ) -> Result<(), CudaError> {
        let (n, k) = (w.shape().rows(), w.shape().cols());
        let (group, gbytes, sdt) = a8_group_args(w.format()).map_err(CudaError::Quant)?;
        let Some(cfg) =
            trans_launch::<T>(I8_GEMM_TILES, tile, "int8 GEMM instance", i8_smem_bytes, x, (m, n, k), y.len(), out, 1)?
        else {
            return Ok(());
        };
        let kern = self.a8_kernels(w.format().desc().name)?;
        let lda = k.div_ceil(128) * 128;
        let q_len = m
            .checked_mul(lda)
            .ok_or(CudaError::Quant(qforge_core::QuantError::Overflow { what: "int8 activations" }))?;
        // SAFETY: the quantizer writes all m × lda codes (zeros past K) and the m scales and
        // zero points before the GEMM (same stream) reads them.
        let mut q = unsafe { stream.alloc::<i8>(q_len) }.map_err(alloc_err(q_len))?;
        // SAFETY: as above.
        let mut scale = unsafe { stream.alloc::<f32>(m) }.map_err(alloc_err(4 * m))?;
        // SAFETY: as above.
        let mut zp = unsafe { stream.alloc::<i32>(m) }.map_err(alloc_err(4 * m))?;
        let (m64, n64, k64, lda64) = (dim(m)?, dim(n)?, dim(k)?, dim(lda)?);
        let grid_m = u32::try_from(m).map_err(|_| CudaError::Size {
            what: "activation rows (quantizer grid)",
            expected: u32::MAX as usize,
            actual: m,
        })?;
        let mut b = stream.launch_builder(&kern[0]);
        b.arg(x).arg(&mut q).arg(&mut scale).arg(&mut zp).arg(&k64).arg(&lda64);
        let qcfg = LaunchConfig { grid_dim: (grid_m, 1, 1), block_dim: (QUANTIZE_THREADS, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: one CTA per row reads the row's K f32 of x (m × k checked) and writes its lda
        // codes, scale and zero point (buffers of m × lda, m, m); argument types match
        // (const float*, int8_t*, float*, int*, long long, long long).
        unsafe { b.launch(qcfg) }.map_err(driver("launch quantize_int8_dyn"))?;
        let oi = dtype_index(out);
        let mut g = stream.launch_builder(&kern[1 + tile]);
        g.arg(&q).arg(&scale).arg(&zp).arg(w.data()).arg(y).arg(&m64).arg(&n64).arg(&k64).arg(&lda64);
        g.arg(&group).arg(&gbytes).arg(&sdt).arg(&oi);
        // SAFETY: the kernel reads m × lda codes and m scales / zero points (written above),
        // the n weight rows of ceil(k / group) groups of gbytes bytes (the layout `upload`
        // sized the allocation from), and writes m × n elements of `out` into y (length and
        // element size checked); argument types match its signature (const int8_t*, const
        // float*, const int*, const uint8_t*, void*, long long × 4, int × 4) — instance
        // `tile`'s kernel; the grid covers every tok × rows tile once with its thread count and
        // shared memory.
        unsafe { g.launch(cfg) }.map_err(driver("launch gemm a8"))?;
        Ok(())
    }
}
