//! The fused GEMM on the device (`qforge_gemm_<format>_<mma>_<tile>`, `kernels-cuda/gemm.cuh`):
//! prompt processing, any M. Weights are decoded from their blocks into shared memory as f16
//! or bf16, activations rounded to the same type, products on the tensor cores with f32
//! accumulators, every edge of M, N and K predicated in the kernel (no padding copies).

use crate::CudaError;
use crate::codegen::{FUSED_GEMM_TILES, UTIL_REDUCE_FIRST};
use crate::runtime::{Cuda, DeviceBuffer, DeviceQuantTensor, alloc_err, dim, driver};
use cudarc::driver::{CudaSlice, CudaStream, CudaView, DevicePtr, DeviceRepr, LaunchConfig, PushKernelArg};
use qforge_core::{DType, QuantError};
use qforge_tiling::TransTile;
use std::sync::Arc;

/// A new m × N output of `out` (`len` elements) filled by an `_into` entry point generic over
/// the element type: `new_output!(stream, len, out, |s| self.gemm_into(…, s, …))`. The entry
/// point must write every element (every GEMM's epilogue covers the whole output).
macro_rules! new_output {
    ($stream:expr, $len:expr, $out:expr, |$s:ident| $fill:expr) => {{
        // SAFETY: the GEMM writes every one of the m × N elements (the epilogue covers the
        // whole output, predicated only at its edges) before anything reads them.
        let mut y = unsafe { DeviceBuffer::uninit($stream, $len, $out)? };
        match &mut y {
            DeviceBuffer::F32($s) => $fill?,
            DeviceBuffer::F16($s) | DeviceBuffer::Bf16($s) => $fill?,
        }
        Ok(y)
    }};
}
pub(crate) use new_output;

/// Largest grid dimension y (the CTA rows over M) and z (the K splits): CUDA's limit.
pub(crate) const MAX_GRID_Y: usize = 65_535;

/// The index of a tensor-core input type in the kernel table (f16 0, bf16 1).
fn mma_index(mma: DType) -> Result<usize, CudaError> {
    match mma {
        DType::F16 => Ok(0),
        DType::Bf16 => Ok(1),
        DType::F32 => Err(CudaError::Quant(qforge_core::QuantError::Unsupported {
            format: "gemm",
            reason: "the tensor-core input type is f16 or bf16 (f32 is not a tensor-core type here)".into(),
        })),
    }
}

impl Cuda {
    /// `y = x · Wᵀ` for `m` activation rows (`x`: m × K f32, row-major, on the device), with
    /// `mma` (f16 or bf16) as the tensor-core input type; returns m × N values of `out` on
    /// the device. One launch (two with split-k, see [`Cuda::gemm_into`]); enqueued on
    /// `stream`.
    pub fn gemm(
        &self,
        w: &DeviceQuantTensor,
        x: &CudaView<'_, f32>,
        m: usize,
        mma: DType,
        out: DType,
        stream: &Arc<CudaStream>,
    ) -> Result<DeviceBuffer, CudaError> {
        new_output!(stream, out_len(m, w)?, out, |s| self.gemm_into(w, x, m, mma, s, out, stream))
    }

    /// [`Cuda::gemm`] into a caller-owned `y` (m × N elements of `out`: f32, or u16 bit
    /// patterns for f16 / bf16). The instance and the split-k count are qforge-tiling's
    /// choice for this shape on this device ([`Cuda::gemm_config`]).
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_into<T: DeviceRepr>(
        &self,
        w: &DeviceQuantTensor,
        x: &CudaView<'_, f32>,
        m: usize,
        mma: DType,
        y: &mut CudaSlice<T>,
        out: DType,
        stream: &Arc<CudaStream>,
    ) -> Result<(), CudaError> {
        if m == 0 || w.shape().rows() == 0 {
            return self.gemm_tile_into(w, x, m, mma, y, out, 0, 1, stream);
        }
        let (tile, c) = self.gemm_config(w, m, mma, out)?;
        self.gemm_tile_into(w, x, m, mma, y, out, tile, c.split_k as usize, stream)
    }

    /// [`Cuda::gemm_into`] with K cut into `splits` ranges of whole k-steps (1: no split), on
    /// the instance qforge-tiling chooses for the shape.
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_split_into<T: DeviceRepr>(
        &self,
        w: &DeviceQuantTensor,
        x: &CudaView<'_, f32>,
        m: usize,
        mma: DType,
        y: &mut CudaSlice<T>,
        out: DType,
        splits: usize,
        stream: &Arc<CudaStream>,
    ) -> Result<(), CudaError> {
        let tile = if m == 0 || w.shape().rows() == 0 { 0 } else { self.gemm_config(w, m, mma, out)?.0 };
        self.gemm_tile_into(w, x, m, mma, y, out, tile, splits, stream)
    }

    /// The fused GEMM on instance `tile` of [`FUSED_GEMM_TILES`] with K cut into `splits`
    /// ranges of whole k-steps (1: no split). With splits > 1 each range's f32 partial sums
    /// go to a workspace (splits × m × N f32, allocated here), and `qforge_reduce_splits_<out>` adds them up (from the first range
    /// on, in f32) into `y`: two launches.
    ///
    /// # Errors
    /// `Size` for a wrong activation / output length or element size, M past 65,535 tiles,
    /// `splits` outside 1..=65,535 or `tile` past the instances; `Quant(Unsupported)` for an
    /// f32 tensor-core type; `MissingKernels`, `OutOfMemory`, `Driver`.
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_tile_into<T: DeviceRepr>(
        &self,
        w: &DeviceQuantTensor,
        x: &CudaView<'_, f32>,
        m: usize,
        mma: DType,
        y: &mut CudaSlice<T>,
        out: DType,
        tile: usize,
        splits: usize,
        stream: &Arc<CudaStream>,
    ) -> Result<(), CudaError> {
        let (n, k) = (w.shape().rows(), w.shape().cols());
        let t = *FUSED_GEMM_TILES.get(tile).ok_or(CudaError::Size {
            what: "fused GEMM instance",
            expected: FUSED_GEMM_TILES.len(),
            actual: tile,
        })?;
        let (bm, bn) = (t.bm as usize, t.bn as usize);
        let mi = mma_index(mma)?;
        check_operands::<T>(x, m, n, k, y.len(), out)?;
        if !(1..=MAX_GRID_Y).contains(&splits) {
            return Err(CudaError::Size { what: "split-k count (grid z)", expected: MAX_GRID_Y, actual: splits });
        }
        let (gx, gy) = tile_grid(m, n, bm, bn)?;
        if m == 0 || n == 0 {
            return Ok(());
        }
        let (ptr, sync) = x.device_ptr(stream);
        if ptr % 4 != 0 {
            return Err(CudaError::Misaligned { what: "activations", addr: ptr, align: 4 });
        }
        drop(sync);
        let kern = self.kernels(w.format())?;
        // Every instance's shared memory is dynamic (the limit raised when the module was
        // loaded where it is over 48 KiB).
        let smem = t.smem_bytes() as u32;
        let cfg =
            LaunchConfig { grid_dim: (gx, gy, splits as u32), block_dim: (t.threads(), 1, 1), shared_mem_bytes: smem };
        let (m64, n64, k64, s32) = (dim(m)?, dim(n)?, dim(k)?, splits as i32);
        let grid = w.data().slice(w.rows_len()..);
        if splits == 1 {
            let o32 = dtype_index(out);
            let mut b = stream.launch_builder(&kern.gemm[tile][mi]);
            b.arg(x).arg(w.data()).arg(&grid).arg(y).arg(&m64).arg(&n64).arg(&k64).arg(&s32).arg(&o32);
            // SAFETY: the kernel reads m × k f32 of x (length checked), the n rows of w (whole
            // blocks, or k elements plus the scale grid after them for a grid format: the
            // allocation `upload` sized from QuantTensor's checks), and writes m × n elements
            // of y (length and element size checked); argument types match its signature
            // (const float*, const uint8_t*, const uint8_t*, void*, long long × 3, int splits, int out),
            // `out` = the index of `out` in DType::ALL, whose size T has (checked); the grid
            // covers every (bm × bn) tile once (z = 1) and the block is the tile's thread count
            // it was compiled for.
            unsafe { b.launch(cfg) }.map_err(driver("launch gemm"))?;
            return Ok(());
        }
        // SAFETY: split z's CTAs write every element of slice z (the epilogue covers the whole
        // m × n, empty K ranges write zeros) before the reduction reads it (same stream).
        let mut ws = unsafe { split_workspace(stream, splits, m * n) }?;
        let f32_out = dtype_index(DType::F32);
        let mut b = stream.launch_builder(&kern.gemm[tile][mi]);
        b.arg(x).arg(w.data()).arg(&grid).arg(&mut ws).arg(&m64).arg(&n64).arg(&k64).arg(&s32).arg(&f32_out);
        // SAFETY: as for one split, with out = f32: the kernel writes split z's m × n partial
        // sums at ws + z·m·n: ws holds splits × m × n f32 (allocated above), grid z = splits.
        unsafe { b.launch(cfg) }.map_err(driver("launch gemm (split-k)"))?;
        self.reduce_splits(&ws, y, m * n, splits, out, stream)
    }

    /// `y[i] = out(Σ_z ws[z·mn + i])` for i < mn, summed from z = 0 up in f32
    /// (`qforge_reduce_splits_<out>`): the epilogue of a split-k GEMM whose `splits` ranges
    /// wrote their f32 partial sums to `ws`. One launch on `stream`.
    pub(crate) fn reduce_splits<T: DeviceRepr>(
        &self,
        ws: &CudaSlice<f32>,
        y: &mut CudaSlice<T>,
        mn: usize,
        splits: usize,
        out: DType,
        stream: &Arc<CudaStream>,
    ) -> Result<(), CudaError> {
        if ws.len() < splits.saturating_mul(mn) || y.len() < mn {
            return Err(CudaError::Size { what: "split-k workspace", expected: splits * mn, actual: ws.len() });
        }
        let reduce = &self.util()?[UTIL_REDUCE_FIRST + dtype_index(out) as usize];
        let (mn64, s32) = (dim(mn)?, splits as i32);
        let mut r = stream.launch_builder(reduce);
        r.arg(ws).arg(y).arg(&mn64).arg(&s32);
        let blocks = mn.div_ceil(256).clamp(1, 1 << 16) as u32;
        let rcfg = LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
        // SAFETY: the reduction reads splits × mn f32 of ws and writes mn elements of `out`
        // into y (both lengths checked above; the caller checked y's element size against
        // `out`); argument types match (const float*, T*, long long, int); grid-stride over mn.
        unsafe { r.launch(rcfg) }.map_err(driver("launch reduce_splits"))?;
        Ok(())
    }
}

/// The f32 workspace of a split-k GEMM: `splits` slices of `mn` partial sums, uninitialized,
/// on `stream`; `Overflow` where the size does not fit.
///
/// # Safety
/// Nothing may read an element before a kernel on `stream` has written it (a split-k GEMM
/// writes every element of its slice, an empty K range zeros).
pub(crate) unsafe fn split_workspace(
    stream: &Arc<CudaStream>,
    splits: usize,
    mn: usize,
) -> Result<CudaSlice<f32>, CudaError> {
    let parts = splits.checked_mul(mn).ok_or(CudaError::Quant(QuantError::Overflow { what: "split-k workspace" }))?;
    // SAFETY: the caller's contract: written before read.
    unsafe { stream.alloc::<f32>(parts) }.map_err(alloc_err(4 * parts))
}

/// What every transposed 8-bit GEMM launch checks and needs (the FP8 GEMM, the int8 GEMMs):
/// instance `tile` of `tiles` (`Size` past them, `what` naming the table), the operands
/// ([`check_operands`]), `splits` in 1..=65,535 and the grid; `None` for an empty product
/// (m or N zero: nothing to launch), else the launch of the instance over (⌈N / rows⌉,
/// ⌈m / tok⌉, splits) with `smem` bytes of dynamic shared memory (the limit raised at load
/// where over 48 KiB).
#[allow(clippy::too_many_arguments)]
pub(crate) fn trans_launch<T>(
    tiles: &[TransTile],
    tile: usize,
    what: &'static str,
    smem: fn(&TransTile) -> u64,
    x: &CudaView<'_, f32>,
    (m, n, k): (usize, usize, usize),
    y_len: usize,
    out: DType,
    splits: usize,
) -> Result<Option<LaunchConfig>, CudaError> {
    let t = tiles.get(tile).ok_or(CudaError::Size { what, expected: tiles.len(), actual: tile })?;
    check_operands::<T>(x, m, n, k, y_len, out)?;
    if !(1..=MAX_GRID_Y).contains(&splits) {
        return Err(CudaError::Size { what: "split-k count (grid z)", expected: MAX_GRID_Y, actual: splits });
    }
    let (gx, gy) = tile_grid(m, n, t.tok as usize, t.rows as usize)?;
    if m == 0 || n == 0 {
        return Ok(None);
    }
    let cfg = LaunchConfig {
        grid_dim: (gx, gy, splits as u32),
        block_dim: (t.threads(), 1, 1),
        shared_mem_bytes: u32::try_from(smem(t)).unwrap_or(u32::MAX),
    };
    Ok(Some(cfg))
}

/// The CTA grid of a GEMM over tiles of `bm` activation rows × `bn` weight rows: `(x, y)` =
/// (⌈n / bn⌉, ⌈m / bm⌉), each within what a launch takes.
pub(crate) fn tile_grid(m: usize, n: usize, bm: usize, bn: usize) -> Result<(u32, u32), CudaError> {
    let gy = m.div_ceil(bm);
    if gy > MAX_GRID_Y {
        return Err(CudaError::Size { what: "activation rows (grid y)", expected: MAX_GRID_Y * bm, actual: m });
    }
    let gx = n.div_ceil(bn);
    let gx = u32::try_from(gx).map_err(|_| CudaError::Size {
        what: "gemm grid x",
        expected: u32::MAX as usize,
        actual: gx,
    })?;
    Ok((gx, gy as u32))
}

/// `out`'s index in [`DType::ALL`], the output-type argument the kernels take.
pub(crate) fn dtype_index(out: DType) -> i32 {
    DType::ALL.iter().position(|d| *d == out).unwrap_or(0) as i32
}

/// m × N, the output length of a GEMM against `w`.
pub(crate) fn out_len(m: usize, w: &DeviceQuantTensor) -> Result<usize, CudaError> {
    m.checked_mul(w.shape().rows())
        .ok_or(CudaError::Quant(qforge_core::QuantError::Overflow { what: "gemm output elements" }))
}

/// The operand checks every GEMM entry point makes: `T` is `out`'s size, `x` holds m × k
/// values and `y` m × n.
pub(crate) fn check_operands<T>(
    x: &CudaView<'_, f32>,
    m: usize,
    n: usize,
    k: usize,
    y_len: usize,
    out: DType,
) -> Result<(), CudaError> {
    if std::mem::size_of::<T>() != out.size() {
        return Err(CudaError::Size {
            what: "output element bytes",
            expected: out.size(),
            actual: std::mem::size_of::<T>(),
        });
    }
    if Some(x.len()) != m.checked_mul(k) {
        return Err(CudaError::Size {
            what: "activation elements (m × K)",
            expected: m.saturating_mul(k),
            actual: x.len(),
        });
    }
    if Some(y_len) != m.checked_mul(n) {
        return Err(CudaError::Size {
            what: "gemm output elements (m × N)",
            expected: m.saturating_mul(n),
            actual: y_len,
        });
    }
    Ok(())
}
