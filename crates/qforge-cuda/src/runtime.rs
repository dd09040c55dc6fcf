//! The CUDA runtime (feature `cuda`): driver loaded dynamically (cudarc), per-format PTX
//! modules loaded lazily on first use and cached, typed errors.
//!
//! Every operation takes the stream it runs on and only enqueues work there: uploads are the
//! caller's explicit host→device copies, results stay on the device, and nothing falls back
//! to the CPU.

use crate::CudaError;
use cudarc::driver::{
    CudaContext, CudaFunction, CudaSlice, CudaStream, CudaView, DevicePtr, DriverError, LaunchConfig, PushKernelArg,
    sys::CUresult,
};
use qforge_core::{DType, Format, QuantTensor, Shape};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// The cudarc this crate is built on, so callers name the same types (streams, slices, events).
pub use cudarc;

include!(concat!(env!("OUT_DIR"), "/modules.rs"));

/// Bytes of one `qf_block_q8_1` activation block (f32 d, f32 s, 32 × i8).
pub const Q8_1_BLOCK_BYTES: usize = 40;

/// Most activation rows one mat-vec launch takes.
pub const MAX_M: usize = 8;

pub(crate) fn driver(op: &'static str) -> impl Fn(DriverError) -> CudaError {
    move |e| CudaError::Driver { op, msg: format!("{e:?}") }
}

pub(crate) fn alloc_err(bytes: usize) -> impl Fn(DriverError) -> CudaError {
    move |e| {
        if e.0 == CUresult::CUDA_ERROR_OUT_OF_MEMORY {
            CudaError::OutOfMemory { bytes }
        } else {
            CudaError::Driver { op: "allocate", msg: format!("{e:?}") }
        }
    }
}

/// The kernels of one format's module.
pub(crate) struct Kernels {
    dequant: [CudaFunction; 3],
    matvec: CudaFunction,
    /// The M = 1 mat-vec (fewer registers than `matvec`'s M = 8 case needs).
    matvec1: CudaFunction,
    quantize_q8_1: CudaFunction,
    /// The fused GEMM per instance (`codegen::FUSED_GEMM_TILES`), by tensor-core input type
    /// (f16, bf16); the output type is an argument.
    pub(crate) gemm: Vec<[CudaFunction; 2]>,
}

/// A CUDA device with qforge's kernels.
///
/// ```no_run
/// use qforge_core::{DType, Shape};
/// use qforge_cuda::Cuda;
///
/// let f = qforge_formats::get("q4_k")?;
/// let (n, k) = (4096, 4096);
/// let w = vec![0.5f32; n * k];
/// let t = qforge_cpu::quantize(f, Shape::new([n, k])?, &w, None)?;
///
/// let gpu = Cuda::new(0)?; // a typed error, not a panic, without a driver or a GPU
/// let stream = gpu.default_stream();
/// let dw = gpu.upload(&t, &stream)?; // the module of q4_k is loaded on first use
/// let w16 = gpu.dequantize(&dw, DType::F16, &stream)?.to_host_bytes(&stream)?; // direct f16
/// assert_eq!(w16.len(), 2 * n * k);
/// let x = stream.clone_htod(&vec![1.0f32; k])?;
/// let y = gpu.matvec(&dw, &x.slice(..), 1, &stream)?; // q8_1 activations, integer dot
/// let y: Vec<f32> = stream.clone_dtoh(&y)?;
/// assert_eq!(y.len(), n);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Cuda {
    ctx: Arc<CudaContext>,
    modules: Mutex<HashMap<&'static str, Arc<Kernels>>>,
    /// The util module's kernels (`codegen::UTIL_KERNELS`, in that order), loaded on first use.
    util: OnceLock<Vec<CudaFunction>>,
    /// The device's multiprocessor count (split-k decisions), read on first use.
    sms: OnceLock<usize>,
    /// qforge-tiling over this device's attributes: the fused GEMM's configs (built on first use).
    pub(crate) planner: OnceLock<qforge_tiling::Planner>,
    /// The cuBLAS handle of the dequant + cuBLAS GEMM, created on first use.
    pub(crate) blas: Mutex<Option<(cudarc::cublas::CudaBlas, Arc<CudaStream>)>>,
    /// The 8-bit GEMMs' kernels per registered format (`codegen::a8_kernel_names`), loaded on
    /// first use (`gemm8.rs`).
    pub(crate) a8: Mutex<HashMap<&'static str, Arc<Vec<CudaFunction>>>>,
    /// The int8 GEMM's kernels per registered format (`codegen::q8_kernel_names`), loaded on
    /// first use.
    pub(crate) q8: Mutex<HashMap<&'static str, Arc<Vec<CudaFunction>>>>,
    /// The FP8 GEMM's kernels per registered format and body, loaded on first use
    /// (`gemm_fp8.rs`).
    pub(crate) fp8: crate::gemm_fp8::Fp8Cache,
}

/// What a report names a device by: `Cuda::info`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// `NVIDIA H100 80GB HBM3`.
    pub name: String,
    /// (major, minor): (9, 0) on Hopper.
    pub compute_capability: (i32, i32),
    /// Streaming multiprocessors (132 on an H100 SXM).
    pub multiprocessors: i32,
    /// L2 cache size in bytes.
    pub l2_cache_bytes: i64,
    /// Device memory in bytes.
    pub memory_bytes: u64,
    /// The driver's CUDA version as `cuDriverGetVersion` gives it (13000 = 13.0).
    pub driver_cuda_version: i32,
}

impl DeviceInfo {
    /// The driver's CUDA version as text (`13.0`).
    pub fn driver_cuda(&self) -> String {
        format!("{}.{}", self.driver_cuda_version / 1000, self.driver_cuda_version % 1000 / 10)
    }
}

/// A quantized tensor in device memory: its bytes as on the host (the GGUF rows, padded to
/// whole blocks, then the side section: a grid format's scale grid), in one allocation.
pub struct DeviceQuantTensor {
    format: &'static dyn Format,
    shape: Shape,
    data: CudaSlice<u8>,
    /// Bytes of the rows; the side section (the kernels' `grid` argument) follows.
    rows_len: usize,
}

impl DeviceQuantTensor {
    /// The tensor's format (the registered one, or the variant it was quantized with).
    pub fn format(&self) -> &'static dyn Format {
        self.format
    }
    /// Its logical shape: rows × cols (N × K for a weight).
    pub fn shape(&self) -> &Shape {
        &self.shape
    }
    /// Its bytes on the device: the rows, then the side section.
    pub fn data(&self) -> &CudaSlice<u8> {
        &self.data
    }
    /// Bytes of the rows (the scale grid of a grid format follows them in `data`).
    pub(crate) fn rows_len(&self) -> usize {
        self.rows_len
    }
}

/// A dequantized tensor in device memory. f16 / bf16 elements are their IEEE bit patterns.
pub enum DeviceBuffer {
    /// f32 elements.
    F32(CudaSlice<f32>),
    /// f16 elements (bit patterns).
    F16(CudaSlice<u16>),
    /// bf16 elements (bit patterns).
    Bf16(CudaSlice<u16>),
}

impl DeviceBuffer {
    /// `len` elements of `dtype` (f16 / bf16 as u16), uninitialized: for an operation that
    /// writes every one of them.
    ///
    /// # Safety
    /// Nothing may read an element before it is written (on `stream`, or after it).
    pub(crate) unsafe fn uninit(stream: &Arc<CudaStream>, len: usize, dtype: DType) -> Result<DeviceBuffer, CudaError> {
        let bytes = len.saturating_mul(dtype.size());
        // SAFETY: the caller writes every element before anything reads it (this fn's contract).
        Ok(unsafe {
            match dtype {
                DType::F32 => DeviceBuffer::F32(stream.alloc::<f32>(len).map_err(alloc_err(bytes))?),
                DType::F16 => DeviceBuffer::F16(stream.alloc::<u16>(len).map_err(alloc_err(bytes))?),
                DType::Bf16 => DeviceBuffer::Bf16(stream.alloc::<u16>(len).map_err(alloc_err(bytes))?),
            }
        })
    }

    /// The element type.
    pub fn dtype(&self) -> DType {
        match self {
            DeviceBuffer::F32(_) => DType::F32,
            DeviceBuffer::F16(_) => DType::F16,
            DeviceBuffer::Bf16(_) => DType::Bf16,
        }
    }

    /// Copy to the host as little-endian bytes of the dtype (waits for `stream`).
    pub fn to_host_bytes(&self, stream: &Arc<CudaStream>) -> Result<Vec<u8>, CudaError> {
        let op = driver("copy device to host");
        Ok(match self {
            DeviceBuffer::F32(s) => stream.clone_dtoh(s).map_err(op)?.iter().flat_map(|v| v.to_le_bytes()).collect(),
            DeviceBuffer::F16(s) | DeviceBuffer::Bf16(s) => {
                stream.clone_dtoh(s).map_err(op)?.iter().flat_map(|v| v.to_le_bytes()).collect()
            }
        })
    }
}

/// Whether the CUDA driver library can be loaded on this machine (no context is created).
pub fn driver_present() -> bool {
    // SAFETY: tries to dlopen libcuda by its usual names and drops the handle; loading the
    // driver library runs only its own initializers.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

/// Threads per block of the activation quantizer and the mat-vec (4 warps: one output row
/// per warp).
const MATVEC_THREADS: u32 = 4 * 32;

fn launch_1d(items: i64, threads: u32) -> LaunchConfig {
    // At most the grid limit (2^31 - 1 blocks): the dequant and quantize kernels are grid-stride;
    // the mat-vec needs n / 4 blocks, far below it for any real n.
    let blocks = (items.max(1) as u64).div_ceil(u64::from(threads)).min(i32::MAX as u64) as u32;
    LaunchConfig { grid_dim: (blocks, 1, 1), block_dim: (threads, 1, 1), shared_mem_bytes: 0 }
}

/// The PTX text of `format`'s module as this build embeds it (`None`: no device code), for
/// tools that inspect or cache it; the runtime loads the same text.
pub fn module_ptx(format: &str) -> Option<Result<String, CudaError>> {
    MODULES.iter().find(|(f, _)| *f == format).map(|(_, z)| inflate(z))
}

/// The PTX text of the util module (`codegen::UTIL_KERNELS`) as this build embeds it.
pub fn util_ptx() -> Result<String, CudaError> {
    inflate(UTIL_PTX)
}

/// The PTX text of an embedded (deflated) module.
pub(crate) fn inflate(z: &[u8]) -> Result<String, CudaError> {
    let bytes = miniz_oxide::inflate::decompress_to_vec(z)
        .map_err(|e| CudaError::Driver { op: "inflate embedded PTX", msg: format!("{e:?}") })?;
    String::from_utf8(bytes).map_err(|e| CudaError::Driver { op: "inflate embedded PTX", msg: e.to_string() })
}

pub(crate) fn dim(v: usize) -> Result<i64, CudaError> {
    i64::try_from(v).map_err(|_| CudaError::Quant(qforge_core::QuantError::Overflow { what: "tensor dimension" }))
}

impl Cuda {
    /// Opens device `ordinal`. Checks that the driver library loads before creating a
    /// context: no driver → [`CudaError::NoDriver`], no such device → [`CudaError::NoDevice`].
    pub fn new(ordinal: usize) -> Result<Cuda, CudaError> {
        if !driver_present() {
            return Err(CudaError::NoDriver("libcuda.so.1 cannot be loaded".into()));
        }
        // A driver older than the bindings could lack a symbol, which cudarc reports by
        // panicking; keep that a typed error too.
        let count = std::panic::catch_unwind(CudaContext::device_count)
            .map_err(|_| CudaError::NoDriver("the driver library lacks CUDA 13 entry points".into()))?
            .map_err(|e| CudaError::NoDriver(format!("cuInit failed: {e:?}")))?;
        let count = usize::try_from(count).unwrap_or(0);
        if ordinal >= count {
            return Err(CudaError::NoDevice { ordinal, count });
        }
        let ctx = CudaContext::new(ordinal).map_err(driver("create context"))?;
        Ok(Cuda {
            ctx,
            modules: Mutex::new(HashMap::new()),
            util: OnceLock::new(),
            sms: OnceLock::new(),
            planner: OnceLock::new(),
            blas: Mutex::new(None),
            a8: Mutex::new(HashMap::new()),
            q8: Mutex::new(HashMap::new()),
            fp8: Mutex::new(HashMap::new()),
        })
    }

    /// The cudarc context (events, streams, graphs for callers that time or batch work).
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// Name, compute capability, multiprocessors, L2, memory and the driver's CUDA version.
    pub fn info(&self) -> Result<DeviceInfo, CudaError> {
        use cudarc::driver::sys::CUdevice_attribute as A;
        let attr = |a| self.ctx.attribute(a).map_err(driver("device attribute"));
        let mut version = 0i32;
        // SAFETY: cuDriverGetVersion writes one int through the pointer it is given, which
        // points at a live local; the driver library is loaded (a context exists).
        let r = unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut version) };
        if r != CUresult::CUDA_SUCCESS {
            return Err(CudaError::Driver { op: "driver version", msg: format!("{r:?}") });
        }
        Ok(DeviceInfo {
            name: self.name()?,
            compute_capability: self.ctx.compute_capability().map_err(driver("compute capability"))?,
            multiprocessors: attr(A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
            l2_cache_bytes: i64::from(attr(A::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?),
            memory_bytes: self.ctx.total_mem().map_err(driver("total memory"))? as u64,
            driver_cuda_version: version,
        })
    }

    /// The device's name (`NVIDIA H100 80GB HBM3`).
    pub fn name(&self) -> Result<String, CudaError> {
        self.ctx.name().map_err(driver("device name"))
    }

    /// The context's default stream.
    pub fn default_stream(&self) -> Arc<CudaStream> {
        self.ctx.default_stream()
    }

    /// A new stream on this device.
    pub fn new_stream(&self) -> Result<Arc<CudaStream>, CudaError> {
        self.ctx.new_stream().map_err(driver("create stream"))
    }

    /// The kernels of `format`, loading its PTX module on first use.
    pub(crate) fn kernels(&self, format: &'static dyn Format) -> Result<Arc<Kernels>, CudaError> {
        let name = format.desc().name;
        let mut cache = self.modules.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(k) = cache.get(name) {
            return Ok(k.clone());
        }
        // Variants share their registered format's name but not its kernels (int4g group 64).
        if format.desc().cuda.is_none() {
            return Err(CudaError::MissingKernels(name));
        }
        let ptx = MODULES.iter().find(|(f, _)| *f == name).map(|(_, p)| *p).ok_or(CudaError::MissingKernels(name))?;
        let module =
            self.ctx.load_module(cudarc::nvrtc::Ptx::from_src(inflate(ptx)?)).map_err(driver("load PTX module"))?;
        let [f32k, f16k, bf16k, matvec, matvec1, quantize] = crate::codegen::kernel_names(name);
        let load = |n: &str| module.load_function(n).map_err(driver("load kernel"));
        let names = crate::codegen::gemm_kernel_names(name);
        let gemm =
            names.chunks_exact(2).map(|g| Ok([load(&g[0])?, load(&g[1])?])).collect::<Result<Vec<_>, CudaError>>()?;
        // Instances may take more than the default 48 KiB of dynamic shared memory. A device
        // whose per-block limit is lower refuses the attribute; the tiler never chooses such
        // an instance there (and a forced launch fails with the driver's error).
        for (t, fns) in crate::codegen::FUSED_GEMM_TILES.iter().zip(&gemm) {
            fns.iter().for_each(|f| raise_smem_limit(f, t.smem_bytes()));
        }
        let k = Arc::new(Kernels {
            dequant: [load(&f32k)?, load(&f16k)?, load(&bf16k)?],
            matvec: load(&matvec)?,
            matvec1: load(&matvec1)?,
            quantize_q8_1: load(&quantize)?,
            gemm,
        });
        cache.insert(name, k.clone());
        Ok(k)
    }

    /// Copies a quantized tensor to the device, side section (scale grid) included, in one
    /// allocation (enqueued on `stream`).
    pub fn upload(&self, t: &QuantTensor<'_>, stream: &Arc<CudaStream>) -> Result<DeviceQuantTensor, CudaError> {
        let data = stream.clone_htod(t.data()).map_err(alloc_err(t.data().len()))?;
        Ok(DeviceQuantTensor { format: t.format(), shape: t.shape().clone(), data, rows_len: t.rows_data().len() })
    }

    /// Dequantizes `t` into a new device buffer of `dtype`, directly (f16 / bf16 are written
    /// by their own kernels, never through an f32 buffer). Enqueued on `stream`.
    pub fn dequantize(
        &self,
        t: &DeviceQuantTensor,
        dtype: DType,
        stream: &Arc<CudaStream>,
    ) -> Result<DeviceBuffer, CudaError> {
        // SAFETY: the kernel writes every one of the rows × cols elements before anything
        // reads them (same stream).
        let mut out = unsafe { DeviceBuffer::uninit(stream, t.shape.numel(), dtype)? };
        match &mut out {
            DeviceBuffer::F32(o) => self.dequantize_into(t, o, dtype, stream)?,
            DeviceBuffer::F16(o) | DeviceBuffer::Bf16(o) => self.dequantize_into(t, o, dtype, stream)?,
        }
        Ok(out)
    }

    /// Dequantizes `t` into `out` (f32 elements for `DType::F32`, u16 bit patterns for f16 /
    /// bf16; exactly `rows × cols` of them).
    pub fn dequantize_into<T: cudarc::driver::DeviceRepr>(
        &self,
        t: &DeviceQuantTensor,
        out: &mut CudaSlice<T>,
        dtype: DType,
        stream: &Arc<CudaStream>,
    ) -> Result<(), CudaError> {
        if std::mem::size_of::<T>() != dtype.size() {
            return Err(CudaError::Size {
                what: "output element bytes",
                expected: dtype.size(),
                actual: std::mem::size_of::<T>(),
            });
        }
        let n = t.shape.numel();
        if out.len() != n {
            return Err(CudaError::Size { what: "dequant output elements", expected: n, actual: out.len() });
        }
        self.dequantize_rows(t, 0..t.shape.rows(), &mut out.slice_mut(..), dtype, stream)
    }

    /// Dequantizes the weight rows `rows` of `t` into `out` (bytes of `rows.len() × cols`
    /// elements of `dtype`, whatever `T`); `rows.start` is a multiple of the layout's row
    /// split granularity (a grid format's tile rows), so the rows' scales start at a grid row.
    pub(crate) fn dequantize_rows<T: cudarc::driver::DeviceRepr>(
        &self,
        t: &DeviceQuantTensor,
        rows: std::ops::Range<usize>,
        out: &mut cudarc::driver::CudaViewMut<'_, T>,
        dtype: DType,
        stream: &Arc<CudaStream>,
    ) -> Result<(), CudaError> {
        let layout = t.format.layout();
        let cols = t.shape.cols();
        let want = rows.len() * cols * dtype.size();
        if out.len() * std::mem::size_of::<T>() != want || rows.end > t.shape.rows() {
            return Err(CudaError::Size {
                what: "dequant output bytes",
                expected: want,
                actual: out.len() * std::mem::size_of::<T>(),
            });
        }
        let (row_off, side_off) = layout.row_offsets(t.shape.rows(), cols, rows.start)?;
        let k = self.kernels(t.format)?;
        let (n_rows, n_cols) = (dim(rows.len())?, dim(cols)?);
        let d = t.format.desc();
        // One work item per CHUNK elements of the padded rows (a grid format, registered per
        // element, has no padding: rows × cols / 8, not rows × cols × (1 / 8) = 0).
        let items = n_rows * dim(d.padded_cols(cols)?.div_ceil(chunk_hint(d.block_size)))?;
        let f = &k.dequant[DType::ALL.iter().position(|x| *x == dtype).unwrap_or(0)];
        let mut b = stream.launch_builder(f);
        let src = t.data.slice(row_off..t.rows_len);
        let grid = t.data.slice(t.rows_len + side_off..);
        b.arg(&src).arg(&grid).arg(out).arg(&n_rows).arg(&n_cols);
        // SAFETY: the kernel reads n_rows × row_bytes(cols) bytes of `src` (the rows from
        // `rows.start` on, inside the rows section: rows.end ≤ the tensor's rows, checked) and,
        // for a grid format, the scale grid from the grid row of `rows.start` on (the side
        // section's tail; `grid` is only read by grid formats), and writes n_rows × cols
        // elements of `dtype` into `out` (its byte length checked above); the argument types
        // match its signature (u8*, u8*, T*, long long, long long).
        unsafe { b.launch(launch_1d(items, 256)) }.map_err(driver("launch dequant"))?;
        Ok(())
    }

    /// The device's multiprocessor count (read once).
    pub fn multiprocessors(&self) -> Result<usize, CudaError> {
        if let Some(n) = self.sms.get() {
            return Ok(*n);
        }
        let n = usize::try_from(self.info()?.multiprocessors.max(1)).unwrap_or(1);
        Ok(*self.sms.get_or_init(|| n))
    }

    /// The util module's kernels, in `codegen::UTIL_KERNELS` order (loaded on first use).
    pub(crate) fn util(&self) -> Result<&[CudaFunction], CudaError> {
        if let Some(fs) = self.util.get() {
            return Ok(fs);
        }
        let module = self
            .ctx
            .load_module(cudarc::nvrtc::Ptx::from_src(inflate(UTIL_PTX)?))
            .map_err(driver("load PTX module"))?;
        let fs = crate::codegen::UTIL_KERNELS
            .iter()
            .map(|n| module.load_function(n).map_err(driver("load kernel")))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(self.util.get_or_init(|| fs))
    }

    /// `dst = f16(src)`, round to nearest even, element by element (the util module's cast).
    /// This is the detour direct f16 dequantization avoids; it is here so that the detour
    /// can be measured (`xtask gpu-bench`) and for callers that hold f32 data already.
    pub fn cast_f32_to_f16(
        &self,
        src: &CudaView<'_, f32>,
        dst: &mut CudaSlice<u16>,
        stream: &Arc<CudaStream>,
    ) -> Result<(), CudaError> {
        self.cast_f32_into(src, &mut dst.slice_mut(..), DType::F16, stream)
    }

    /// `dst = to(src)` for `to` f16 or bf16 (bit patterns), round to nearest even, element
    /// by element (the util module's casts; `Quant(Unsupported)` for f32).
    pub fn cast_f32_into(
        &self,
        src: &CudaView<'_, f32>,
        dst: &mut cudarc::driver::CudaViewMut<'_, u16>,
        to: DType,
        stream: &Arc<CudaStream>,
    ) -> Result<(), CudaError> {
        if dst.len() != src.len() {
            return Err(CudaError::Size { what: "cast output elements", expected: src.len(), actual: dst.len() });
        }
        let which = match to {
            DType::F16 => 0,
            DType::Bf16 => 1,
            DType::F32 => {
                return Err(CudaError::Quant(qforge_core::QuantError::Unsupported {
                    format: "cast",
                    reason: "the casts write f16 or bf16".into(),
                }));
            }
        };
        let n = dim(src.len())?;
        let mut b = stream.launch_builder(&self.util()?[which]);
        b.arg(src).arg(dst).arg(&n);
        // SAFETY: the kernel reads n f32 of `src` and writes n u16 of `dst` (lengths checked
        // equal above); argument types match (const float*, uint16_t*, long long); it takes
        // the vector path only for 16-byte / 8-byte aligned pointers.
        unsafe { b.launch(launch_1d((n + 3) / 4, 256)) }.map_err(driver("launch cast"))?;
        Ok(())
    }

    /// `y[r][i] = Σ_j W[i][j]·x[r][j]` for `m` (1..=8) activation rows `x` (row-major m × K
    /// f32 on the device). The activations are quantized to q8_1 on the GPU (into a scratch
    /// buffer), then dotted with integer `__dp4a` products. Returns m × N f32 on the device.
    pub fn matvec(
        &self,
        w: &DeviceQuantTensor,
        x: &CudaView<'_, f32>,
        m: usize,
        stream: &Arc<CudaStream>,
    ) -> Result<CudaSlice<f32>, CudaError> {
        if !(1..=MAX_M).contains(&m) {
            return Err(CudaError::Size { what: "activation rows (1..=8)", expected: MAX_M, actual: m });
        }
        let mut scratch = self.matvec_scratch(w, m, stream)?;
        let n = w.shape.rows();
        // SAFETY: the mat-vec writes every element of y before anything reads it (same stream).
        let mut y = unsafe { stream.alloc::<f32>(m * n) }.map_err(alloc_err(4 * m * n))?;
        self.matvec_into(w, x, m, &mut scratch, &mut y, stream)?;
        Ok(y)
    }

    /// The activation scratch buffer `matvec_into` needs for `m` rows against `w` (the q8_1
    /// blocks: `m × ceil(K / 32) × 40` bytes). Reuse it across calls of the same or smaller m.
    pub fn matvec_scratch(
        &self,
        w: &DeviceQuantTensor,
        m: usize,
        stream: &Arc<CudaStream>,
    ) -> Result<CudaSlice<u8>, CudaError> {
        let bytes = m.max(1) * crate::host::q8_1_blocks(w.format.desc(), w.shape.cols()) * Q8_1_BLOCK_BYTES;
        // SAFETY: quantize_q8_1 writes every activation block a mat-vec reads before it reads
        // them (same stream, in order); the bytes are never read otherwise.
        unsafe { stream.alloc::<u8>(bytes) }.map_err(alloc_err(bytes))
    }

    /// [`Cuda::matvec`] into caller-owned buffers: no allocation, two launches (activation
    /// quantization, mat-vec), so a caller can keep the hot path allocation-free or capture it
    /// in a CUDA graph. `scratch` from [`Cuda::matvec_scratch`] (at least that size), `y` m × N.
    pub fn matvec_into(
        &self,
        w: &DeviceQuantTensor,
        x: &CudaView<'_, f32>,
        m: usize,
        scratch: &mut CudaSlice<u8>,
        y: &mut CudaSlice<f32>,
        stream: &Arc<CudaStream>,
    ) -> Result<(), CudaError> {
        let (n, k) = (w.shape.rows(), w.shape.cols());
        if !(1..=MAX_M).contains(&m) {
            return Err(CudaError::Size { what: "activation rows (1..=8)", expected: MAX_M, actual: m });
        }
        if x.len() != m * k {
            return Err(CudaError::Size { what: "activation elements (m × K)", expected: m * k, actual: x.len() });
        }
        if y.len() != m * n {
            return Err(CudaError::Size { what: "mat-vec output elements (m × N)", expected: m * n, actual: y.len() });
        }
        let (ptr, sync) = x.device_ptr(stream);
        if ptr % 4 != 0 {
            return Err(CudaError::Misaligned { what: "activations", addr: ptr, align: 4 });
        }
        drop(sync);
        let kern = self.kernels(w.format)?;
        let d = w.format.desc();
        let nblocks = crate::host::q8_1_blocks(d, k);
        let act_bytes = m * nblocks * Q8_1_BLOCK_BYTES;
        if scratch.len() < act_bytes {
            return Err(CudaError::Size { what: "mat-vec scratch bytes", expected: act_bytes, actual: scratch.len() });
        }
        let (ki, nbi, mi, ni) = (dim(k)?, dim(nblocks)?, dim(m)?, dim(n)?);
        let mut q = stream.launch_builder(&kern.quantize_q8_1);
        q.arg(x).arg(&mut *scratch).arg(&ki).arg(&nbi).arg(&mi);
        // SAFETY: reads m × k f32 of x (length checked), writes m × nblocks 40-byte blocks
        // into `scratch` (at least that size, checked; device allocations are 256-byte aligned).
        unsafe { q.launch(launch_1d(mi * nbi, MATVEC_THREADS)) }.map_err(driver("launch quantize_q8_1"))?;
        let m32 = m as i32;
        let mut mv = stream.launch_builder(if m == 1 { &kern.matvec1 } else { &kern.matvec });
        let grid = w.data.slice(w.rows_len..);
        mv.arg(&w.data).arg(&grid).arg(&*scratch).arg(y).arg(&ni).arg(&ki).arg(&m32);
        // SAFETY: one warp per weight row (n rows of whole blocks in w.data, or of k elements
        // plus the scale grid after them for a grid format), m × nblocks
        // activation blocks in `scratch`, writes m × n f32 of y (length checked); m in 1..=8.
        unsafe { mv.launch(launch_1d(ni * 32, MATVEC_THREADS)) }.map_err(driver("launch matvec"))?;
        Ok(())
    }
}

/// The CHUNK the templates use for a block size (mirrors the headers: 8 for 32-element
/// blocks, 16 for larger ones). Only sizes the launch grid; any value ≥ 1 is correct (the
/// kernels loop grid-stride over their own item count).
fn chunk_hint(block_size: usize) -> usize {
    if block_size <= 32 { 8 } else { 16 }
}

/// Lets `f` take `bytes` of dynamic shared memory per launch where that is over the 48 KiB a
/// kernel gets without opting in. A device whose per-block limit is lower refuses the
/// attribute; no caller chooses such a launch there, and a forced one fails with the driver's
/// error.
pub(crate) fn raise_smem_limit(f: &cudarc::driver::CudaFunction, bytes: u64) {
    if bytes > qforge_tiling::SMEM_WITHOUT_OPT_IN {
        let _ = f.set_attribute(
            cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
            i32::try_from(bytes).unwrap_or(i32::MAX),
        );
    }
}
