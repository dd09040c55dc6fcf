//! The dequant + cuBLAS GEMM: weight rows dequantized in chunks straight to the GEMM's input
//! type into a bounded workspace, then cuBLAS (`cublasGemmEx`, f32 accumulation). It works
//! for every format with device code, it is what candle and mistral.rs do for prompt
//! processing, and it is the baseline the fused GEMM ([`Cuda::gemm`]) must beat. With f16 /
//! bf16 inputs the weights never pass through f32; with f32 inputs (the exact `none`
//! activation mode) they do, by request.
//!
//! cuBLAS is loaded at run time (cudarc's dynamic loading), so nothing is needed to build;
//! without `libcublas` the calls return [`CudaError::MissingLibrary`], never a panic.

use crate::CudaError;
use crate::runtime::{Cuda, DeviceBuffer, DeviceQuantTensor, alloc_err};
use cudarc::cublas::{CudaBlas, result as blas, sys};
use cudarc::driver::{CudaSlice, CudaStream, CudaView, DevicePtr, DevicePtrMut, DeviceRepr};
use qforge_core::DType;
use std::ffi::c_void;
use std::sync::Arc;

/// Default bound of the dequantized-weight workspace of [`Cuda::gemm_dequant`]: 64 MiB
/// (8192 rows of K = 4096 in f16).
pub const DEQUANT_WORKSPACE_BYTES: usize = 64 << 20;

/// Row chunks `[start, end)` of an `n`-row weight whose dequantized rows (`row_bytes` each)
/// fit in `budget` bytes per chunk, every start a multiple of `granularity` (the layout's
/// row split granularity). At least one granule per chunk, whatever the budget.
pub fn row_chunks(n: usize, row_bytes: usize, granularity: usize, budget: usize) -> Vec<std::ops::Range<usize>> {
    let g = granularity.max(1);
    let fit = (budget / row_bytes.max(1)) / g * g;
    let step = fit.max(g);
    (0..n.div_ceil(step)).map(|i| i * step..((i + 1) * step).min(n)).collect()
}

fn cuda_type(d: DType) -> sys::cudaDataType {
    match d {
        DType::F32 => sys::cudaDataType::CUDA_R_32F,
        DType::F16 => sys::cudaDataType::CUDA_R_16F,
        DType::Bf16 => sys::cudaDataType::CUDA_R_16BF,
    }
}

/// Whether cublasGemmEx writes `out` directly from `input` operands with f32 compute: the
/// output is f32 or the inputs' own type.
fn direct_out(input: DType, out: DType) -> bool {
    out == DType::F32 || out == input
}

fn i32_dim(what: &'static str, v: usize) -> Result<i32, CudaError> {
    i32::try_from(v).map_err(|_| CudaError::Size { what, expected: i32::MAX as usize, actual: v })
}

/// One column-major cuBLAS call for row-major operands: `C[m][n0..n0+nc] = X[m][..] ·
/// W[nc rows][..]ᵀ` with `ldc = n`. `a`, `b`, `c` are device addresses on `stream`.
struct BlasCall {
    a: u64,
    b: u64,
    c: u64,
    input: DType,
    out: DType,
    nc: i32,
    m: i32,
    k: i32,
    ldc: i32,
}

/// Whether libcublas loads on this machine (the dequant + cuBLAS path is available): probed
/// once per process (a dlopen of the candidate names), not on every GEMM that asks.
pub(crate) fn cublas_present() -> bool {
    static PRESENT: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    // SAFETY: tries to dlopen libcublas by cudarc's candidate names and drops the handle;
    // loading the library runs only its own initializers.
    *PRESENT.get_or_init(|| unsafe { sys::is_culib_present() })
}

impl Cuda {
    /// The cached cuBLAS handle, bound to `stream`, passed to `f`.
    fn with_blas<R>(
        &self,
        stream: &Arc<CudaStream>,
        f: impl FnOnce(&CudaBlas) -> Result<R, CudaError>,
    ) -> Result<R, CudaError> {
        let mut slot =
            self.blas.lock().map_err(|_| CudaError::Driver { op: "cuBLAS handle", msg: "poisoned".into() })?;
        if slot.is_none() {
            // Checked first because cudarc panics on a missing library.
            if !cublas_present() {
                return Err(CudaError::MissingLibrary {
                    lib: "cuBLAS",
                    hint: "libcublas.so.13 (or .so) on the library path, e.g. from the nvidia-cublas wheel",
                });
            }
            *slot = Some((CudaBlas::new(stream.clone()).map_err(blas_err("create handle"))?, stream.clone()));
        }
        let Some((h, bound)) = slot.as_mut() else {
            return Err(CudaError::Driver { op: "cuBLAS handle", msg: "not created".into() });
        };
        if !Arc::ptr_eq(bound, stream) {
            // SAFETY: the handle is only used under this lock, and every call enqueues on the
            // stream its caller passed, so rebinding it orders its work like any other call's.
            unsafe { h.set_stream(stream.clone()) }.map_err(blas_err("set stream"))?;
            *bound = stream.clone();
        }
        f(h)
    }

    fn blas_call(&self, h: &CudaBlas, c: &BlasCall) -> Result<(), CudaError> {
        let (alpha, beta) = (1.0f32, 0.0f32);
        // SAFETY: `a` holds nc rows of k `input` elements, `b` m rows of k, `c` at least
        // (m − 1)·ldc + nc `out` elements (the callers size and check them), all on the
        // handle's stream; alpha / beta are f32 as CUBLAS_COMPUTE_32F requires; the type
        // combination is one cublasGemmEx supports (`direct_out`).
        unsafe {
            blas::gemm_ex(
                *h.handle(),
                sys::cublasOperation_t::CUBLAS_OP_T,
                sys::cublasOperation_t::CUBLAS_OP_N,
                c.nc,
                c.m,
                c.k,
                (&alpha) as *const f32 as *const c_void,
                c.a as *const c_void,
                cuda_type(c.input),
                c.k,
                c.b as *const c_void,
                cuda_type(c.input),
                c.k,
                (&beta) as *const f32 as *const c_void,
                c.c as *mut c_void,
                cuda_type(c.out),
                c.ldc,
                sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
                sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT,
            )
        }
        .map_err(blas_err("gemm"))
    }
}

fn blas_err(op: &'static str) -> impl Fn(blas::CublasError) -> CudaError {
    move |e| CudaError::Driver { op, msg: format!("cuBLAS: {e:?}") }
}

impl Cuda {
    /// `y = x · Wᵀ` through dequantization and cuBLAS: `x` is m × K f32 on the device, the
    /// weights are dequantized in row chunks of at most [`DEQUANT_WORKSPACE_BYTES`] to
    /// `input` (f16, bf16, or f32 for the exact reference), the activations cast once to
    /// `input`, and cuBLAS multiplies with f32 accumulation. Returns m × N of `out`.
    ///
    /// # Errors
    /// As [`Cuda::gemm_dequant_into`].
    pub fn gemm_dequant(
        &self,
        w: &DeviceQuantTensor,
        x: &CudaView<'_, f32>,
        m: usize,
        input: DType,
        out: DType,
        stream: &Arc<CudaStream>,
    ) -> Result<DeviceBuffer, CudaError> {
        let len = crate::gemm::out_len(m, w)?;
        // SAFETY: cuBLAS (beta = 0) or the final cast writes all m × N elements before
        // anything reads them.
        let mut y = unsafe { DeviceBuffer::uninit(stream, len, out)? };
        let ws = DEQUANT_WORKSPACE_BYTES;
        match &mut y {
            DeviceBuffer::F32(s) => self.gemm_dequant_into(w, x, m, input, s, out, ws, stream)?,
            DeviceBuffer::F16(s) | DeviceBuffer::Bf16(s) => {
                self.gemm_dequant_into(w, x, m, input, s, out, ws, stream)?
            }
        }
        Ok(y)
    }

    /// [`Cuda::gemm_dequant`] into a caller-owned `y` (m × N of `out`: f32, or u16 bit
    /// patterns for f16 / bf16) with a workspace bound of `workspace_bytes` (at least one
    /// row-split granule of the layout is dequantized at a time, whatever the bound).
    /// Allocates the workspace, the cast activations (m × K of `input` unless f32) and, when
    /// cuBLAS cannot write `out` from `input` operands directly (f16 × f16 → bf16, f32 → f16
    /// or bf16), an m × N f32 result that is cast at the end.
    ///
    /// # Errors
    /// [`CudaError::Size`] for a wrong activation / output length or element size, or a
    /// dimension past `i32::MAX` (cuBLAS's limit); [`CudaError::MissingLibrary`] without
    /// libcublas; [`CudaError::MissingKernels`] for a format without device code;
    /// [`CudaError::OutOfMemory`]; [`CudaError::Driver`] for a failed launch or cuBLAS call.
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_dequant_into<T: DeviceRepr>(
        &self,
        w: &DeviceQuantTensor,
        x: &CudaView<'_, f32>,
        m: usize,
        input: DType,
        y: &mut CudaSlice<T>,
        out: DType,
        workspace_bytes: usize,
        stream: &Arc<CudaStream>,
    ) -> Result<(), CudaError> {
        let (n, k) = (w.shape().rows(), w.shape().cols());
        check_operands::<T>(x, m, n, k, y.len(), out)?;
        if m == 0 || n == 0 {
            return Ok(());
        }
        let granule = w.format().layout().split_granularity().0;
        let chunks = row_chunks(n, k * input.size(), granule, workspace_bytes);
        let rows = chunks.iter().map(|c| c.len()).max().unwrap_or(0);
        let ws_bytes = rows * k * input.size();
        // SAFETY: each chunk's dequantization writes the rows cuBLAS then reads (same
        // stream, in order); nothing else reads the workspace.
        let mut ws = unsafe { stream.alloc::<u8>(ws_bytes) }.map_err(alloc_err(ws_bytes))?;
        let xin = self.cast_activations(x, input, stream)?;
        self.with_output(y, m, n, input, out, stream, |c_addr| {
            for ch in &chunks {
                let mut view = ws.slice_mut(..ch.len() * k * input.size());
                self.dequantize_rows(w, ch.clone(), &mut view, input, stream)?;
                let (a, _ga) = view.device_ptr(stream);
                let (b, _gb) = match &xin {
                    Some(v) => v.device_ptr(stream),
                    None => x.device_ptr(stream),
                };
                let call = BlasCall {
                    a,
                    b,
                    c: c_addr + (ch.start * c_elem(input, out)) as u64,
                    input,
                    out: c_type(input, out),
                    nc: i32_dim("weight rows", ch.len())?,
                    m: i32_dim("activation rows", m)?,
                    k: i32_dim("K", k)?,
                    ldc: i32_dim("weight rows", n)?,
                };
                self.with_blas(stream, |h| self.blas_call(h, &call))?;
            }
            Ok(())
        })
    }

    /// `y = x · Wᵀ` with dense weights already on the device: `w` holds n × k elements of
    /// `input` (f32, or f16 / bf16 bit patterns as u8 bytes' worth of u16), row-major. This
    /// is plain cuBLAS on unquantized weights: the ceiling the GPU benchmarks compare with.
    ///
    /// # Errors
    /// As [`Cuda::gemm_dequant_into`], and `Size` when `w` is not n × k of `input`.
    #[allow(clippy::too_many_arguments)]
    pub fn gemm_dense_into<W: DeviceRepr, T: DeviceRepr>(
        &self,
        w: &CudaView<'_, W>,
        n: usize,
        k: usize,
        input: DType,
        x: &CudaView<'_, f32>,
        m: usize,
        y: &mut CudaSlice<T>,
        out: DType,
        stream: &Arc<CudaStream>,
    ) -> Result<(), CudaError> {
        check_operands::<T>(x, m, n, k, y.len(), out)?;
        if std::mem::size_of::<W>() != input.size() || w.len() != n * k {
            return Err(CudaError::Size { what: "dense weight elements (n × K)", expected: n * k, actual: w.len() });
        }
        if m == 0 || n == 0 {
            return Ok(());
        }
        let xin = self.cast_activations(x, input, stream)?;
        self.with_output(y, m, n, input, out, stream, |c| {
            let (a, _ga) = w.device_ptr(stream);
            let (b, _gb) = match &xin {
                Some(v) => v.device_ptr(stream),
                None => x.device_ptr(stream),
            };
            let call = BlasCall {
                a,
                b,
                c,
                input,
                out: c_type(input, out),
                nc: i32_dim("weight rows", n)?,
                m: i32_dim("activation rows", m)?,
                k: i32_dim("K", k)?,
                ldc: i32_dim("weight rows", n)?,
            };
            self.with_blas(stream, |h| self.blas_call(h, &call))
        })
    }

    /// `x` cast to `input` on the device (`None` for f32: used as it is).
    fn cast_activations(
        &self,
        x: &CudaView<'_, f32>,
        input: DType,
        stream: &Arc<CudaStream>,
    ) -> Result<Option<CudaSlice<u16>>, CudaError> {
        if input == DType::F32 {
            return Ok(None);
        }
        // SAFETY: the cast writes every element before cuBLAS reads it (same stream).
        let mut xin = unsafe { stream.alloc::<u16>(x.len()) }.map_err(alloc_err(2 * x.len()))?;
        self.cast_f32_into(x, &mut xin.slice_mut(..), input, stream)?;
        Ok(Some(xin))
    }

    /// Runs `body` with the device address cuBLAS writes to: `y` itself when cuBLAS can write
    /// `out` from `input` operands, else an m × N f32 buffer cast into `y` afterwards.
    #[allow(clippy::too_many_arguments)]
    fn with_output<T: DeviceRepr>(
        &self,
        y: &mut CudaSlice<T>,
        m: usize,
        n: usize,
        input: DType,
        out: DType,
        stream: &Arc<CudaStream>,
        body: impl FnOnce(u64) -> Result<(), CudaError>,
    ) -> Result<(), CudaError> {
        if direct_out(input, out) {
            let (c, _g) = y.device_ptr_mut(stream);
            return body(c);
        }
        // SAFETY: cuBLAS writes all m × N elements (beta = 0) before the cast reads them.
        let mut y32 = unsafe { stream.alloc::<f32>(m * n) }.map_err(alloc_err(4 * m * n))?;
        {
            let (c, _g) = y32.device_ptr_mut(stream);
            body(c)?;
        }
        let have = y.num_bytes();
        // SAFETY: `T` is 2 bytes here (checked against `out` by `check_operands`, and `out`
        // is f16 or bf16 when the output is not direct), so `y` is m × N u16.
        let mut y16 = unsafe { y.transmute_mut::<u16>(m * n) }.ok_or(CudaError::Size {
            what: "gemm output bytes",
            expected: 2 * m * n,
            actual: have,
        })?;
        self.cast_f32_into(&y32.slice(..), &mut y16, out, stream)
    }
}

/// Bytes per output element of the buffer cuBLAS writes.
fn c_elem(input: DType, out: DType) -> usize {
    c_type(input, out).size()
}

/// The type cuBLAS writes: `out` when it can, else f32 (cast afterwards).
fn c_type(input: DType, out: DType) -> DType {
    if direct_out(input, out) { out } else { DType::F32 }
}

/// [`crate::gemm::check_operands`], and every dimension within cuBLAS's `i32`.
fn check_operands<T>(
    x: &CudaView<'_, f32>,
    m: usize,
    n: usize,
    k: usize,
    y_len: usize,
    out: DType,
) -> Result<(), CudaError> {
    crate::gemm::check_operands::<T>(x, m, n, k, y_len, out)?;
    for (what, v) in [("activation rows", m), ("weight rows", n), ("K", k)] {
        i32_dim(what, v)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_the_rows_once_at_granule_starts_within_the_budget() {
        for (n, row, g, budget) in [
            (4096, 8192, 1, 64 << 20),
            (14336, 8192, 1, 64 << 20),
            (300, 8192, 128, 1 << 20),
            (5, 100, 1, 0),
            (129, 4, 128, 1),
        ] {
            let ch = row_chunks(n, row, g, budget);
            assert_eq!(ch.first().map(|c| c.start), Some(0));
            assert_eq!(ch.last().map(|c| c.end), Some(n));
            for w in ch.windows(2) {
                assert_eq!(w[0].end, w[1].start);
            }
            for c in &ch {
                assert!(c.start % g == 0 && !c.is_empty());
                assert!(c.len() * row <= budget.max(g * row), "{c:?} of {n} rows, {row} B, budget {budget}");
            }
        }
        assert_eq!(row_chunks(14336, 8192, 1, 64 << 20).len(), 2);
        assert!(row_chunks(0, 8192, 1, 64 << 20).is_empty());
    }
}
