//! `xtask gpu-bench [--formats a,b] [--out FILE]` (feature `cuda`, on a GPU): the figures of
//! the GPU kit, all measured in one run on one device, as fractions of a device-to-device copy
//! measured in the same run.
//!
//! * Copy: 1 GiB → 1 GiB with `cuMemcpyDtoDAsync`; bytes read + written per second.
//! * Dequant: every format with device code to f32, f16 and bf16, on a 32768 × 4096 tensor
//!   (128 Mi elements: 512 MiB of f32, 256 MiB of f16 output); bytes read + written per second.
//! * Mat-vec: M = 1, 2, 4, 8 on 4096 × 4096 and 14336 × 4096, activation quantization
//!   included (two launches per call, caller-owned buffers); weight bytes per second. The
//!   timed calls cycle through copies of the weights that together exceed the L2 several times,
//!   so the weights come from device memory, as in a model; each figure is per call, for the
//!   calls enqueued back to back on a stream and for the same calls replayed from a CUDA graph
//!   (launch gaps removed), and the faster of the two is the one compared.
//! * The seed case: direct f16 dequant against f32 dequant followed by the f32 → f16 cast.
//! * GEMM (prompt processing), f16 inputs, f32 output: the fused GEMM and the dequant +
//!   cuBLAS path of each format, and cuBLAS on unquantized f16 weights (the ceiling, once per
//!   shape), N × K ∈ {4096 × 4096, 14336 × 4096, 4096 × 14336}, M ∈ {16, 64, 128, 512, 2048,
//!   8192} for the first weight format of each family ([`full_grid`]); 4096 × 4096 at
//!   M ∈ {16, 512, 2048} for the
//!   others (the run stays within the kit's time). At M ≤ 128 the calls cycle through weight
//!   copies as the mat-vec does (bandwidth); above, one copy (compute). Medians of
//!   [`GEMM_REPS`] runs.
//!
//! Every time is the median of several event-timed runs after warm-up runs. Inputs are real
//! quantized data (a deterministic pseudo-gaussian tensor quantized on the CPU, its 1024 rows
//! repeated to the size measured), never zeros.

use super::{BenchReport, CastRow, CopyJson, DenseRow, DequantRow, DeviceJson, GemmRow, Int8Gemm, MatvecRow};
use anyhow::{Context, Result, anyhow};
use qforge_core::rand::pseudo_gaussian as data;
use qforge_core::{DType, Format, Layout, QuantTensor, Role, Shape};
use qforge_cuda::Cuda;
use qforge_cuda::codegen::FUSED_GEMM_TILES;
use qforge_cuda::cudarc::driver::sys::{CUevent_flags, CUgraphInstantiate_flags, CUstreamCaptureMode};
use qforge_cuda::cudarc::driver::{CudaSlice, CudaStream};
use std::path::Path;
use std::sync::Arc;

const BASE_ROWS: usize = 1024;
const COLS: usize = 4096;
const DEQUANT_ROWS: usize = 32768;
const MATVEC_ROWS: [usize; 2] = [4096, 14336];
const MATVEC_M: [usize; 4] = [1, 2, 4, 8];
/// Weight copies cycled by the mat-vec timings: at least this many bytes together.
const ROTATE_BYTES: usize = 512 << 20;
const COPY_BYTES: usize = 1 << 30;
const WARM: usize = 3;
const REPS: usize = 15;
/// The GEMM shapes (N, K) and activation rows.
const GEMM_SHAPES: [(usize, usize); 3] = [(4096, 4096), (14336, 4096), (4096, 14336)];
const GEMM_M: [usize; 6] = [16, 64, 128, 512, 2048, 8192];
const GEMM_M_SHORT: [usize; 3] = [16, 512, 2048];
/// At most this M, the GEMM calls cycle through weight copies (bandwidth-bound sizes).
const GEMM_ROTATE_MAX_M: usize = 128;
const GEMM_REPS: usize = 7;

/// Whether `f` is measured on every GEMM shape and M (the others: 4096 × 4096,
/// [`GEMM_M_SHORT`]): the first weight format with device code of its family, in registry
/// order — one of each family's layouts and kernels, picked from the registry so that a new
/// family is measured with no edit here.
fn full_grid(f: &dyn Format) -> bool {
    let fam = f.desc().family;
    qforge_formats::registry()
        .iter()
        .find(|g| g.desc().family == fam && g.desc().role == Role::Weight && g.desc().cuda.is_some())
        .is_some_and(|g| g.desc().name == f.desc().name)
}

fn drv<E: std::fmt::Debug>(what: &'static str) -> impl Fn(E) -> anyhow::Error {
    move |e| anyhow!("{what}: {e:?}")
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Median milliseconds of `f` over [`REPS`] runs after [`WARM`] warm-ups, each run between two
/// timing events on `s`.
fn time_ms(s: &Arc<CudaStream>, f: impl FnMut() -> Result<()>) -> Result<f64> {
    time_ms_n(s, WARM, REPS, f)
}

/// Median milliseconds of `f` over `reps` runs after `warm` warm-ups, each run between two
/// timing events on `s` (the GEMMs take fewer: long calls).
fn time_ms_n(s: &Arc<CudaStream>, warm: usize, reps: usize, mut f: impl FnMut() -> Result<()>) -> Result<f64> {
    for _ in 0..warm {
        f()?;
    }
    let mut ms = Vec::with_capacity(reps);
    for _ in 0..reps {
        let a = s.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).map_err(drv("record event"))?;
        f()?;
        let b = s.record_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).map_err(drv("record event"))?;
        ms.push(f64::from(a.elapsed_ms(&b).map_err(drv("event time"))?));
    }
    Ok(median(ms))
}

/// Milliseconds of `f` replayed from a CUDA graph captured on `s`, or why capture failed.
fn time_graph_ms(s: &Arc<CudaStream>, f: impl FnOnce() -> Result<()>) -> Result<f64> {
    s.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL).map_err(drv("begin capture"))?;
    let captured = f();
    let graph = s.end_capture(CUgraphInstantiate_flags(0)).map_err(drv("end capture"));
    captured?;
    let graph = graph?.ok_or_else(|| anyhow!("capture produced no graph"))?;
    graph.upload().map_err(drv("graph upload"))?;
    time_ms(s, || graph.launch().map_err(drv("graph launch")))
}

fn gbps(bytes: u64, ms: f64) -> f64 {
    bytes as f64 / (ms * 1e-3) / 1e9
}

fn copy_bandwidth(s: &Arc<CudaStream>) -> Result<CopyJson> {
    let n = COPY_BYTES / 4;
    let src: CudaSlice<f32> = s.clone_htod(&data(n, 7)).map_err(drv("upload copy source"))?;
    let mut dst: CudaSlice<f32> = s.alloc_zeros(n).map_err(drv("allocate copy target"))?;
    let ms = time_ms(s, || s.memcpy_dtod(&src, &mut dst).map_err(drv("device-to-device copy")))?;
    let bytes = 2 * COPY_BYTES as u64;
    Ok(CopyJson { bytes, ms, gbps: gbps(bytes, ms) })
}

/// `base`'s rows repeated to `rows` rows (a multiple of its row count).
fn repeat(base: &QuantTensor<'_>, rows: usize) -> Result<QuantTensor<'static>> {
    let copies = vec![base.clone(); rows / base.rows()];
    qforge_pack::concat(&copies, qforge_pack::Axis::N).map_err(|e| anyhow!("repeating rows: {e}"))
}

struct Ctx<'a> {
    gpu: &'a Cuda,
    s: Arc<CudaStream>,
    copy_gbps: f64,
    /// The device's multiprocessors (read once with its other attributes).
    sms: u32,
    /// `--gemm-m`: the GEMM's activation rows for every format and shape instead of
    /// [`GEMM_M`] / [`GEMM_M_SHORT`].
    gemm_m: Option<Vec<usize>>,
}

impl Ctx<'_> {
    /// The M the GEMM benchmarks measure (`full`: the format's full grid).
    fn gemm_ms(&self, full: bool) -> Vec<usize> {
        self.gemm_m.clone().unwrap_or_else(|| if full { GEMM_M.to_vec() } else { GEMM_M_SHORT.to_vec() })
    }
}

/// `--gemm-m 1,16,32`: positive activation row counts.
pub fn parse_gemm_m(s: &str) -> Result<Vec<usize>> {
    s.split(',')
        .map(|v| match v.trim().parse::<usize>() {
            Ok(m) if m > 0 => Ok(m),
            _ => Err(anyhow!("--gemm-m: `{v}` is not a positive row count (e.g. --gemm-m 1,16,32)")),
        })
        .collect()
}

impl Ctx<'_> {
    fn dequant(&self, f: &'static dyn Format, base: &QuantTensor<'_>, r: &mut BenchReport) -> Result<()> {
        let (gpu, s) = (self.gpu, &self.s);
        let big = repeat(base, DEQUANT_ROWS)?;
        let n = big.shape().numel();
        let read = big.data().len() as u64;
        let w = gpu.upload(&big, s)?;
        drop(big);
        let mut out32: CudaSlice<f32> = s.alloc_zeros(n).map_err(drv("allocate f32 output"))?;
        let mut out16: CudaSlice<u16> = s.alloc_zeros(n).map_err(drv("allocate 16-bit output"))?;
        let mut ms_of = [0f64; 3];
        for (i, dtype) in DType::ALL.into_iter().enumerate() {
            let ms = match dtype {
                DType::F32 => time_ms(s, || Ok(gpu.dequantize_into(&w, &mut out32, dtype, s)?))?,
                _ => time_ms(s, || Ok(gpu.dequantize_into(&w, &mut out16, dtype, s)?))?,
            };
            ms_of[i] = ms;
            let written = (n * dtype.size()) as u64;
            let g = gbps(read + written, ms);
            r.dequant.push(DequantRow {
                format: f.desc().name.into(),
                dtype: dtype.to_string(),
                rows: DEQUANT_ROWS,
                cols: COLS,
                bytes_read: read,
                bytes_written: written,
                ms,
                gbps: g,
                of_copy: g / self.copy_gbps,
            });
        }
        let cast_ms = time_ms(s, || Ok(gpu.cast_f32_to_f16(&out32.slice(..), &mut out16, s)?))?;
        let detour_ms = time_ms(s, || {
            gpu.dequantize_into(&w, &mut out32, DType::F32, s)?;
            Ok(gpu.cast_f32_to_f16(&out32.slice(..), &mut out16, s)?)
        })?;
        let direct = ms_of[DType::ALL.iter().position(|d| *d == DType::F16).unwrap_or(1)];
        r.f16_direct_vs_cast.push(CastRow {
            format: f.desc().name.into(),
            elements: n as u64,
            direct_f16_ms: direct,
            f32_ms: ms_of[0],
            cast_ms,
            detour_ms,
            speedup: detour_ms / direct,
        });
        Ok(())
    }

    fn matvec(&self, f: &'static dyn Format, base: &QuantTensor<'_>, r: &mut BenchReport) -> Result<()> {
        let (gpu, s) = (self.gpu, &self.s);
        for rows in MATVEC_ROWS {
            let t = repeat(base, rows)?;
            let wbytes = t.data().len();
            let copies = ROTATE_BYTES.div_ceil(wbytes).clamp(2, 64);
            let ws = (0..copies).map(|_| gpu.upload(&t, s)).collect::<Result<Vec<_>, _>>()?;
            for m in MATVEC_M {
                let x = s.clone_htod(&data(m * COLS, m as u64)).map_err(drv("upload activations"))?;
                let mut scratch = gpu.matvec_scratch(&ws[0], m, s)?;
                let mut y: CudaSlice<f32> = s.alloc_zeros(m * rows).map_err(drv("allocate output"))?;
                let mut all = || -> Result<()> {
                    for w in &ws {
                        gpu.matvec_into(w, &x.slice(..), m, &mut scratch, &mut y, s)?;
                    }
                    Ok(())
                };
                let ms_stream = time_ms(s, &mut all)? / copies as f64;
                let ms_graph = match time_graph_ms(s, &mut all) {
                    Ok(ms) => Some(ms / copies as f64),
                    Err(e) => {
                        r.errors.push(format!("{} {rows}x{COLS} m={m}: no graph timing ({e:#})", f.desc().name));
                        None
                    }
                };
                let best = ms_graph.map_or(ms_stream, |g| g.min(ms_stream));
                let g = gbps(wbytes as u64, best);
                r.matvec.push(MatvecRow {
                    format: f.desc().name.into(),
                    n: rows,
                    k: COLS,
                    m,
                    weight_bytes: wbytes as u64,
                    ms_stream,
                    ms_graph,
                    weight_gbps: g,
                    of_copy: g / self.copy_gbps,
                });
            }
        }
        Ok(())
    }
}

impl Ctx<'_> {
    /// The quantized weights of `f` for an N × K shape: a base of rows quantized on the CPU
    /// (K columns), its rows repeated.
    fn weights(&self, f: &'static dyn Format, n: usize, k: usize) -> Result<QuantTensor<'static>> {
        // A power of two, so that it divides every N measured.
        let rows = 1usize << (BASE_ROWS * COLS / k).max(1).ilog2();
        let base = qforge_cpu::quantize(f, Shape::new([rows, k])?, &data(rows * k, 42), None)
            .map_err(|e| anyhow!("quantize: {e}"))?;
        repeat(&base, n)
    }

    /// Uploads `copies` of `t` (one when `m` is past [`GEMM_ROTATE_MAX_M`]).
    fn copies(&self, t: &QuantTensor<'_>, m: usize) -> Result<Vec<qforge_cuda::DeviceQuantTensor>> {
        let n = if m > GEMM_ROTATE_MAX_M { 1 } else { ROTATE_BYTES.div_ceil(t.data().len()).clamp(2, 64) };
        Ok((0..n).map(|_| self.gpu.upload(t, &self.s)).collect::<Result<Vec<_>, _>>()?)
    }

    /// The fused GEMM and dequant + cuBLAS of `f` on its shapes.
    fn gemm(&self, f: &'static dyn Format, r: &mut BenchReport) -> Result<()> {
        let (gpu, s) = (self.gpu, &self.s);
        let full = full_grid(f);
        for (n, k) in GEMM_SHAPES.into_iter().filter(|sh| full || *sh == GEMM_SHAPES[0]) {
            let t = self.weights(f, n, k)?;
            for m in self.gemm_ms(full) {
                let ws = self.copies(&t, m)?;
                let x = s.clone_htod(&data(m * k, m as u64)).map_err(drv("upload activations"))?;
                let mut y: CudaSlice<f32> = s.alloc_zeros(m * n).map_err(drv("allocate output"))?;
                let fused_ms = per_call_ms(s, &ws, |w| {
                    Ok(gpu.gemm_into(w, &x.slice(..), m, DType::F16, &mut y, DType::F32, s)?)
                })?;
                let dequant_cublas_ms = per_call_ms(s, &ws, |w| {
                    Ok(gpu.gemm_dequant_into(
                        w,
                        &x.slice(..),
                        m,
                        DType::F16,
                        &mut y,
                        DType::F32,
                        qforge_cuda::DEQUANT_WORKSPACE_BYTES,
                        s,
                    )?)
                })?;
                let (tile, c) = gpu.gemm_config(&ws[0], m, DType::F16, DType::F32)?;
                let fused_config = format!("{} split {}", FUSED_GEMM_TILES[tile].name(), c.split_k);
                let skinny_ms = self.skinny_beyond(&ws, &x, m, &mut y)?;
                let tiled_ms = self.tiled_unsplit(&ws, &x, m, &mut y)?;
                let int8 = self.int8_gemm(&ws, &x, m, &mut y)?;
                let flop = 2.0 * (m * n * k) as f64;
                r.gemm.push(GemmRow {
                    format: f.desc().name.into(),
                    n,
                    k,
                    m,
                    fused_ms,
                    dequant_cublas_ms,
                    fused_tflops: flop / (fused_ms * 1e-3) / 1e12,
                    fused_config: Some(fused_config),
                    skinny_ms,
                    tiled_ms,
                    int8,
                });
            }
        }
        Ok(())
    }

    /// Above `SKINNY_MAX_M`, up to twice it, the largest skinny instance (split as the tiler
    /// splits it) on the same call as the tiled one the tiler chose: where the two cross.
    fn skinny_beyond(
        &self,
        ws: &[qforge_cuda::DeviceQuantTensor],
        x: &CudaSlice<f32>,
        m: usize,
        y: &mut CudaSlice<f32>,
    ) -> Result<Option<f64>> {
        let max = qforge_cuda::codegen::SKINNY_MAX_M as usize;
        if m <= max || m > 2 * max {
            return Ok(None);
        }
        let Some(tile) =
            (0..FUSED_GEMM_TILES.len()).filter(|&i| FUSED_GEMM_TILES[i].skinny).max_by_key(|&i| FUSED_GEMM_TILES[i].bm)
        else {
            return Ok(None);
        };
        let (n, k) = (ws[0].shape().rows(), ws[0].shape().cols());
        let splits = qforge_cuda::codegen::skinny_split(&FUSED_GEMM_TILES[tile], m as u64, n as u64, k as u64, self.sms)
            as usize;
        Ok(Some(self.time_tile(ws, x, m, y, tile, splits)?))
    }

    /// Milliseconds per call of fused instance `tile` with `splits` K ranges, over the weight
    /// copies `ws` (f16 inputs, f32 output).
    fn time_tile(
        &self,
        ws: &[qforge_cuda::DeviceQuantTensor],
        x: &CudaSlice<f32>,
        m: usize,
        y: &mut CudaSlice<f32>,
        tile: usize,
        splits: usize,
    ) -> Result<f64> {
        per_call_ms(&self.s, ws, |w| {
            Ok(self.gpu.gemm_tile_into(w, &x.slice(..), m, DType::F16, y, DType::F32, tile, splits, &self.s)?)
        })
    }

    /// Above `SKINNY_MAX_M`, every tiled instance unsplit on the same call: the tiler's choice
    /// against the best instance measured.
    fn tiled_unsplit(
        &self,
        ws: &[qforge_cuda::DeviceQuantTensor],
        x: &CudaSlice<f32>,
        m: usize,
        y: &mut CudaSlice<f32>,
    ) -> Result<Vec<(String, f64)>> {
        if m <= qforge_cuda::codegen::SKINNY_MAX_M as usize {
            return Ok(Vec::new());
        }
        let mut out = Vec::new();
        for (tile, t) in FUSED_GEMM_TILES.iter().enumerate().filter(|(_, t)| !t.skinny) {
            let ms = self.time_tile(ws, x, m, y, tile, 1)?;
            out.push((t.name(), ms));
        }
        Ok(out)
    }

    /// The format's integer tensor-core GEMM, if it has one: the native q8 activations
    /// (`gemm_q8`), int8-dyn (`gemm_a8`) or FP8 1 × 128 (`gemm_fp8`), activation quantization
    /// on the GPU included; per call, like the fused f16 GEMM.
    fn int8_gemm(
        &self,
        ws: &[qforge_cuda::DeviceQuantTensor],
        x: &CudaSlice<f32>,
        m: usize,
        y: &mut CudaSlice<f32>,
    ) -> Result<Option<Int8Gemm>> {
        let (gpu, s) = (self.gpu, &self.s);
        let Some(w0) = ws.first() else { return Ok(None) };
        let fp8 = gpu.fp8_body()?;
        let call = |path: &str, w: &qforge_cuda::DeviceQuantTensor, y: &mut CudaSlice<f32>| match path {
            "q8" => gpu.gemm_q8_into(w, &x.slice(..), m, y, DType::F32, s),
            "int8-dyn" => gpu.gemm_a8_into(w, &x.slice(..), m, y, DType::F32, s),
            _ => gpu.gemm_fp8_into(w, &x.slice(..), m, y, DType::F32, fp8, s),
        };
        // Which one, by the predicates the runtime and the CLI use (`qforge matmul --device
        // cuda` picks its GEMM the same way).
        let f = w0.format();
        let path = if Cuda::has_gemm_q8(w0) {
            "q8"
        } else if qforge_cuda::codegen::a8_group_args(f).is_ok() {
            "int8-dyn"
        } else if qforge_cuda::codegen::fp8_gemm(f.desc()).is_some() {
            "fp8-1x128"
        } else {
            return Ok(None);
        };
        let ms = per_call_ms(s, ws, |w| Ok(call(path, w, y)?))?;
        let (config, instances) = self.int8_instances(ws, x, m, y, path, fp8)?;
        Ok(Some(Int8Gemm { path: path.into(), ms, config, instances }))
    }

    /// The transposed 8-bit GEMM's instance and split count as chosen (`qforge_tiling::fp8_tile`
    /// and `fp8_splits`, or `i8_tile` and `i8_splits`), and every instance's time per call
    /// unsplit and split as the tiler would split it on this device (A8W4DQ never splits).
    fn int8_instances(
        &self,
        ws: &[qforge_cuda::DeviceQuantTensor],
        x: &CudaSlice<f32>,
        m: usize,
        y: &mut CudaSlice<f32>,
        path: &str,
        body: qforge_cuda::Fp8Body,
    ) -> Result<(Option<String>, Timings)> {
        use qforge_cuda::codegen::{FP8_GEMM_TILES, I8_GEMM_TILES, fp8_splits, fp8_tile, i8_splits, i8_tile};
        let (gpu, s) = (self.gpu, &self.s);
        let (n, k) = (ws[0].shape().rows() as u64, ws[0].shape().cols() as u64);
        let (tiles, chosen) =
            if path == "fp8-1x128" { (FP8_GEMM_TILES, fp8_tile(m as u64)) } else { (I8_GEMM_TILES, i8_tile(m as u64)) };
        let split = |t| match path {
            "fp8-1x128" => fp8_splits(t, m as u64, n, k, self.sms) as usize,
            "q8" => i8_splits(t, m as u64, n, k, self.sms) as usize,
            _ => 1,
        };
        let config = format!("{} split {}", tiles[chosen].name(), split(&tiles[chosen]));
        let mut out = Vec::new();
        for (i, t) in tiles.iter().enumerate() {
            let mut counts = vec![1, split(t)];
            counts.dedup();
            for splits in counts {
                let ms = per_call_ms(s, ws, |w| {
                    let xs = x.slice(..);
                    Ok(match path {
                        "fp8-1x128" => gpu.gemm_fp8_tile_into(w, &xs, m, y, DType::F32, body, i, splits, s),
                        "q8" => gpu.gemm_q8_tile_into(w, &xs, m, y, DType::F32, i, splits, s),
                        _ => gpu.gemm_a8_tile_into(w, &xs, m, y, DType::F32, i, s),
                    }?)
                })?;
                out.push((format!("{} s{splits}", t.name()), ms));
            }
        }
        Ok((Some(config), out))
    }

    /// cuBLAS on unquantized f16 weights (the values of the most precise block weight format
    /// with device code, dequantized once), every GEMM shape and M: the ceiling.
    fn gemm_dense(&self, r: &mut BenchReport) -> Result<()> {
        let (gpu, s) = (self.gpu, &self.s);
        let f = qforge_formats::registry()
            .iter()
            .filter(|f| {
                let d = f.desc();
                d.role == Role::Weight && d.cuda.is_some() && matches!(f.layout(), Layout::Blocks { .. })
            })
            .max_by(|a, b| a.desc().bits_per_weight().total_cmp(&b.desc().bits_per_weight()))
            .ok_or_else(|| anyhow!("no block weight format has device code"))?;
        for (n, k) in GEMM_SHAPES {
            let t = self.weights(f, n, k)?;
            let w = gpu.upload(&t, s)?;
            let bytes = n * k * 2;
            let copies = ROTATE_BYTES.div_ceil(bytes).clamp(2, 64);
            let mut dense = Vec::with_capacity(copies);
            for _ in 0..copies {
                match gpu.dequantize(&w, DType::F16, s)? {
                    qforge_cuda::DeviceBuffer::F16(b) => dense.push(b),
                    _ => return Err(anyhow!("f16 dequant returned another type")),
                }
            }
            for m in self.gemm_ms(true) {
                let use_n = if m > GEMM_ROTATE_MAX_M { 1 } else { copies };
                let x = s.clone_htod(&data(m * k, m as u64)).map_err(drv("upload activations"))?;
                let mut y: CudaSlice<f32> = s.alloc_zeros(m * n).map_err(drv("allocate output"))?;
                let ms = time_ms_n(s, 1, GEMM_REPS, || {
                    for w16 in &dense[..use_n] {
                        gpu.gemm_dense_into(&w16.slice(..), n, k, DType::F16, &x.slice(..), m, &mut y, DType::F32, s)?;
                    }
                    Ok(())
                })? / use_n as f64;
                let tflops = 2.0 * (m * n * k) as f64 / (ms * 1e-3) / 1e12;
                r.gemm_dense.push(DenseRow { n, k, m, ms, tflops });
            }
        }
        Ok(())
    }
}

/// Milliseconds per call of `call` over the weight copies `ws` (one timed run calls it once per
/// copy, so the weights come from device memory, not L2): the GEMM rows' unit.
fn per_call_ms<W>(s: &Arc<CudaStream>, ws: &[W], mut call: impl FnMut(&W) -> Result<()>) -> Result<f64> {
    Ok(time_ms_n(s, 1, GEMM_REPS, || ws.iter().try_for_each(&mut call))? / ws.len().max(1) as f64)
}

/// Named timings (ms per call), in the order measured.
type Timings = Vec<(String, f64)>;

fn write_json(r: &BenchReport, p: &Path) -> Result<()> {
    std::fs::write(p, serde_json::to_string_pretty(r)?).with_context(|| format!("writing {}", p.display()))
}

/// Runs every benchmark on device 0; writes the JSON to `out` (or stdout) and a table to
/// stderr. `Ok(false)` if a format could not be measured.
/// The benchmark groups `--ops` selects from (all by default).
pub const OPS: [&str; 3] = ["dequant", "matvec", "gemm"];

pub fn run(formats: Option<&str>, ops: Option<&str>, gemm_m: Option<&str>, out: Option<&Path>) -> Result<bool> {
    let gemm_m = gemm_m.map(parse_gemm_m).transpose()?;
    let ops: Vec<&str> = ops.map_or(OPS.to_vec(), |o| o.split(',').map(str::trim).collect());
    if let Some(bad) = ops.iter().find(|o| !OPS.contains(o)) {
        anyhow::bail!("--ops: unknown group `{bad}` (groups: {})", OPS.join(", "));
    }
    let on = |op: &str| ops.contains(&op);
    let gpu = Cuda::new(0).context("gpu-bench needs a CUDA GPU")?;
    let info = gpu.info()?;
    let s = gpu.new_stream()?;
    // SAFETY: every allocation, copy, launch and free of this benchmark is on the one stream
    // `s` (the context's default stream is never used), so stream order alone orders every
    // use of every buffer; cudarc's cross-stream events are not needed, and they would break
    // graph capture.
    unsafe { gpu.context().disable_event_tracking() };
    let copy = copy_bandwidth(&s)?;
    let mut r = BenchReport {
        device: DeviceJson {
            name: info.name.clone(),
            compute_capability: format!("{}.{}", info.compute_capability.0, info.compute_capability.1),
            multiprocessors: info.multiprocessors,
            l2_cache_bytes: info.l2_cache_bytes,
            memory_bytes: info.memory_bytes,
            driver_cuda: info.driver_cuda(),
        },
        copy: copy.clone(),
        method: format!(
            "median of {REPS} event-timed runs after {WARM} warm-ups; one stream; copy = {} MiB device-to-device; \
             dequant on {DEQUANT_ROWS}x{COLS}; mat-vec weights (and GEMM weights at M <= {GEMM_ROTATE_MAX_M}) cycled over copies of at least {} MiB together; GEMM: median of {GEMM_REPS} runs after one warm-up, f16 inputs, f32 output",
            COPY_BYTES >> 20,
            ROTATE_BYTES >> 20
        ),
        ..BenchReport::default()
    };
    eprintln!("gpu-bench: {} (cc {}), driver CUDA {}", info.name, r.device.compute_capability, r.device.driver_cuda);
    eprintln!("gpu-bench: device-to-device copy {:.0} GB/s (read + written)", copy.gbps);
    let sms = u32::try_from(info.multiprocessors).unwrap_or(1);
    let ctx = Ctx { gpu: &gpu, s: s.clone(), copy_gbps: copy.gbps, sms, gemm_m };
    if on("gemm")
        && let Err(e) = ctx.gemm_dense(&mut r)
    {
        eprintln!("gpu-bench: cuBLAS f16 GEMM FAILED: {e:#}");
        r.errors.push(format!("cuBLAS f16 (dense): {e:#}"));
    }
    let wanted: Option<Vec<&str>> = formats.map(|f| f.split(',').map(str::trim).collect());
    for f in qforge_formats::registry().iter() {
        let d = f.desc();
        if d.cuda.is_none() || wanted.as_ref().is_some_and(|w| !w.contains(&d.name)) {
            continue;
        }
        let started = std::time::Instant::now();
        let result = qforge_cpu::quantize(f, Shape::new([BASE_ROWS, COLS])?, &data(BASE_ROWS * COLS, 42), None)
            .map_err(|e| anyhow!("quantize: {e}"))
            .and_then(|base| {
                if on("dequant") {
                    ctx.dequant(f, &base, &mut r)?;
                }
                if on("matvec") {
                    ctx.matvec(f, &base, &mut r)?;
                }
                if on("gemm") {
                    ctx.gemm(f, &mut r)?;
                }
                Ok(())
            });
        s.synchronize().map_err(drv("synchronize"))?;
        match result {
            Ok(()) => eprintln!("gpu-bench: {:<9} done in {:.1} s", d.name, started.elapsed().as_secs_f64()),
            Err(e) => {
                eprintln!("gpu-bench: {:<9} FAILED: {e:#}", d.name);
                r.errors.push(format!("{}: {e:#}", d.name));
            }
        }
        // The figures so far, after every format: a run stopped by its time limit still
        // leaves everything it measured.
        if let Some(p) = out {
            write_json(&r, p)?;
        }
    }
    let failed = r.errors.iter().any(|e| !e.contains("no graph timing"));
    match out {
        Some(p) => write_json(&r, p)?,
        None => println!("{}", serde_json::to_string_pretty(&r)?),
    }
    eprint!("{}", super::report::bench_markdown(&r));
    Ok(!failed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gemm_m_takes_positive_row_counts_only() {
        assert_eq!(parse_gemm_m("1, 16,64").unwrap(), vec![1, 16, 64]);
        for bad in ["", "0", "16,x", "-1", "16,,32"] {
            let e = parse_gemm_m(bad).unwrap_err().to_string();
            assert!(e.contains("--gemm-m"), "{bad}: {e}");
        }
    }
}
