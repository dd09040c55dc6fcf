//! `--device cpu|cuda`: the CUDA side of `dequant` and `bench`. A qforge built without the
//! `cuda` feature, or run on a machine without a GPU, exits 1 with one line saying so.

use crate::exit::{CliResult, bad_input, failed};
use qforge_core::{DType, QuantTensor};
use qforge_cpu::ActQuant;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Device {
    Cpu,
    Cuda,
}

pub fn parse(device: &str) -> CliResult<Device> {
    match device.to_ascii_lowercase().as_str() {
        "cpu" => Ok(Device::Cpu),
        "cuda" if qforge_cuda_enabled() => Ok(Device::Cuda),
        "cuda" => Err(failed(
            "this qforge was built without CUDA support (rebuild with `--features cuda`, see docs/cuda.md); use --device cpu",
        )),
        other => Err(bad_input(format!("--device '{other}': expected cpu or cuda"))),
    }
}

fn qforge_cuda_enabled() -> bool {
    cfg!(feature = "cuda")
}

#[cfg(feature = "cuda")]
mod imp {
    use super::*;
    use crate::exit::Classify;
    use qforge_cuda::{Cuda, CudaError};
    use std::time::Duration;

    fn fail(e: CudaError) -> crate::exit::CliError {
        match e {
            CudaError::Quant(q) => bad_input(q),
            e => failed(e),
        }
    }

    fn open() -> CliResult<Cuda> {
        Cuda::new(0).map_err(fail)
    }

    /// Dequantize on the GPU; little-endian bytes of `dtype`.
    pub fn dequant(t: &QuantTensor<'_>, dtype: DType) -> CliResult<Vec<u8>> {
        let gpu = open()?;
        let stream = gpu.default_stream();
        let dt = gpu.upload(t, &stream).map_err(fail)?;
        gpu.dequantize(&dt, dtype, &stream).map_err(fail)?.to_host_bytes(&stream).map_err(fail)
    }

    /// `Y = X · Wᵀ` on the GPU for any `m`; m × N f32 back on the host. Native: q8_1
    /// activations quantized on the GPU and the integer mat-vec kernel, [`qforge_cuda::MAX_M`]
    /// rows per launch. None: the weights dequantized to f32 in bounded row chunks and cuBLAS
    /// in f32 (the exact reference on the GPU). Int8-dyn / fp8-1x128: the activations are
    /// quantized on the host exactly as on the CPU (`qforge_cpu::quantize_acts`), and the
    /// values they stand for go through the f32 path, so the product has the mode's
    /// semantics (docs/matmul.md) on every format. Except where the weights have an integer
    /// group dot for int8-dyn activations (int4g: A8W4DQ, whether asked for as int8-dyn or
    /// as the format's native mode): there the activations are quantized on the GPU and
    /// the 8-bit tensor-core GEMM (`Cuda::gemm_a8`) computes the CPU's product bit for bit;
    /// Native with a format that has the int8 GEMM (every weight format whose native
    /// activations are q8 blocks: `Cuda::gemm_q8`): the CPU's q8_0 / q8_1 / q8_k activations quantized on the GPU,
    /// the integer dot on the int8 tensor cores (the CPU's result up to f32 summation order).
    /// and fp8 weights with fp8-1x128 activations (asked for as such or as fp8's native
    /// mode): the activations are quantized on the GPU and the FP8 block-scaled GEMM
    /// (`Cuda::gemm_fp8`: e4m3 tensor cores from compute capability 8.9, exact f16 below)
    /// computes the CPU's product up to the order of each 128-column block's sum.
    pub fn matmul(w: &QuantTensor<'_>, x: &[f32], m: usize, mode: ActQuant) -> CliResult<Vec<f32>> {
        let gpu = open()?;
        let stream = gpu.default_stream();
        let dw = gpu.upload(w, &stream).map_err(fail)?;
        let kind = mode.kind(w.format());
        let a8 = kind == qforge_core::ActKind::Int8Dyn && qforge_cuda::codegen::a8_group_args(w.format()).is_ok();
        // fp8 values in the registered 128 × 128 scale tiles: the FP8 tensor-core GEMM.
        let fp8 = kind == qforge_core::ActKind::Fp8x128
            && qforge_cuda::codegen::fp8_gemm(w.format().desc()).is_some()
            && qforge_formats::get(w.format().desc().name).is_ok_and(|f| f.layout() == w.format().layout());
        if a8 || fp8 {
            // The device quantizers cannot refuse a non-finite value as the CPU does: check here.
            if let Some(i) = x.iter().position(|v| !v.is_finite()) {
                return Err(bad_input(format!("activations: value {} at index {i} is not finite", x[i])));
            }
            let dx = stream.clone_htod(x).failed()?;
            let y = if a8 {
                gpu.gemm_a8(&dw, &dx.slice(..), m, DType::F32, &stream)
            } else {
                gpu.gemm_fp8(&dw, &dx.slice(..), m, DType::F32, &stream)
            };
            return Ok(bytemuck::cast_slice(&y.map_err(fail)?.to_host_bytes(&stream).map_err(fail)?).to_vec());
        }
        if mode == ActQuant::Native && qforge_cuda::codegen::q8_units(w.format(), w.cols()).is_ok() {
            // The int8 GEMM: the format's native q8 activations quantized on the GPU as the CPU
            // quantizes them. The device quantizer cannot refuse a non-finite value: check here.
            if let Some(i) = x.iter().position(|v| !v.is_finite()) {
                return Err(bad_input(format!("activations: value {} at index {i} is not finite", x[i])));
            }
            let dx = stream.clone_htod(x).failed()?;
            let y = gpu.gemm_q8(&dw, &dx.slice(..), m, DType::F32, &stream).map_err(fail)?;
            return Ok(bytemuck::cast_slice(&y.to_host_bytes(&stream).map_err(fail)?).to_vec());
        }
        let xq;
        let (x, mode) = match mode {
            ActQuant::Int8Dyn | ActQuant::Fp8x128 => {
                xq = quantized_acts(w, x, m, mode)?;
                (xq.as_slice(), ActQuant::None)
            }
            ActQuant::None | ActQuant::Native => (x, mode),
        };
        let dx = stream.clone_htod(x).failed()?;
        if mode == ActQuant::None {
            let y = gpu.gemm_dequant(&dw, &dx.slice(..), m, DType::F32, DType::F32, &stream).map_err(fail)?;
            return Ok(bytemuck::cast_slice(&y.to_host_bytes(&stream).map_err(fail)?).to_vec());
        }
        let (n, k) = (w.rows(), w.cols());
        let mut y = Vec::with_capacity(m * n);
        let mut scratch = gpu.matvec_scratch(&dw, qforge_cuda::MAX_M, &stream).map_err(fail)?;
        for r0 in (0..m).step_by(qforge_cuda::MAX_M) {
            let rows = qforge_cuda::MAX_M.min(m - r0);
            let xs = dx.slice(r0 * k..(r0 + rows) * k);
            let mut ys = stream.alloc_zeros::<f32>(rows * n).failed()?;
            gpu.matvec_into(&dw, &xs, rows, &mut scratch, &mut ys, &stream).map_err(fail)?;
            y.extend(stream.clone_dtoh(&ys).failed()?);
        }
        Ok(y)
    }

    /// The M rows of `x` quantized for `mode` against `w` and dequantized again: the values
    /// the mode's product multiplies with, K per row.
    fn quantized_acts(w: &QuantTensor<'_>, x: &[f32], m: usize, mode: ActQuant) -> CliResult<Vec<f32>> {
        let k = w.cols();
        let acts = qforge_cpu::quantize_acts(w, x, m, mode).map_err(|e| bad_input(format!("activations: {e}")))?;
        Ok(acts.iter().flat_map(|a| a.dequantize().into_iter().take(k)).collect())
    }

    /// Median seconds per run of `op` (dequant to f32 / matvec with M = 1 / the fused GEMM
    /// with `m` rows) on the GPU, runs, and the device name. Each run is timed to the
    /// stream's completion.
    pub fn bench(q: &QuantTensor<'_>, op: &str, m: usize, min: Duration) -> CliResult<(f64, usize, String)> {
        let gpu = open()?;
        let name = gpu.name().map_err(fail)?;
        let stream = gpu.default_stream();
        let dq = gpu.upload(q, &stream).map_err(fail)?;
        let done = stream.clone();
        let mut run: Box<dyn FnMut() -> CliResult<()>> = match op {
            "dequant" => {
                // SAFETY: every element is written by the kernel before being read.
                let mut out = unsafe { stream.alloc::<f32>(q.shape().numel()) }.failed()?;
                Box::new(move || gpu.dequantize_into(&dq, &mut out, DType::F32, &stream).map_err(fail))
            }
            "matvec" => {
                let x = stream.clone_htod(&crate::measure::data(q.cols())).failed()?;
                Box::new(move || gpu.matvec(&dq, &x.slice(..), 1, &stream).map(drop).map_err(fail))
            }
            "matmul" => {
                // The fused tensor-core GEMM, f16 inputs, f32 output (prompt processing).
                let x = stream.clone_htod(&crate::measure::data(m * q.cols())).failed()?;
                // SAFETY: the GEMM writes all m × N elements before anything reads them.
                let mut y = unsafe { stream.alloc::<f32>(m * q.rows()) }.failed()?;
                Box::new(move || {
                    gpu.gemm_into(&dq, &x.slice(..), m, DType::F16, &mut y, DType::F32, &stream).map_err(fail)
                })
            }
            op => return Err(bad_input(format!("--op {op} --device cuda: expected dequant, matvec or matmul"))),
        };
        let (secs, runs) = crate::measure::time(min, || {
            run()?;
            done.synchronize().failed()
        })?;
        Ok((secs, runs, name))
    }
}

#[cfg(not(feature = "cuda"))]
mod imp {
    use super::*;
    use std::time::Duration;

    pub fn matmul(_: &QuantTensor<'_>, _: &[f32], _: usize, _: ActQuant) -> CliResult<Vec<f32>> {
        Err(failed("this qforge was built without CUDA support"))
    }

    pub fn dequant(_: &QuantTensor<'_>, _: DType) -> CliResult<Vec<u8>> {
        Err(failed("this qforge was built without CUDA support"))
    }

    pub fn bench(_: &QuantTensor<'_>, _: &str, _: usize, _: Duration) -> CliResult<(f64, usize, String)> {
        Err(failed("this qforge was built without CUDA support"))
    }
}

pub use imp::{bench, dequant, matmul};
