//! `--device cpu|cuda`: the CUDA side of `dequant` and `bench`. A qforge built without the
//! `cuda` feature, or run on a machine without a GPU, exits 1 with one line saying so.

use crate::exit::{CliResult, bad_input, failed};
use qforge_core::{DType, QuantTensor};

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

    /// Mat-vec on the GPU: `m` (1..=8) f32 activation rows against `w`, q8_1 activations
    /// quantized on the GPU; m × N f32 back on the host.
    pub fn matvec(w: &QuantTensor<'_>, x: &[f32], m: usize) -> CliResult<Vec<f32>> {
        let gpu = open()?;
        let stream = gpu.default_stream();
        let dw = gpu.upload(w, &stream).map_err(fail)?;
        let dx = stream.clone_htod(x).failed()?;
        let y = gpu.matvec(&dw, &dx.slice(..), m, &stream).map_err(fail)?;
        stream.clone_dtoh(&y).failed()
    }

    /// Median seconds per run of `op` (dequant to f32 / matvec with M = 1) on the GPU, runs,
    /// and the device name. Each run is timed to the stream's completion.
    pub fn bench(q: &QuantTensor<'_>, op: &str, min: Duration) -> CliResult<(f64, usize, String)> {
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
                let x = stream.clone_htod(&crate::bench::data(q.cols())).failed()?;
                Box::new(move || gpu.matvec(&dq, &x.slice(..), 1, &stream).map(drop).map_err(fail))
            }
            op => return Err(bad_input(format!("--op {op} --device cuda: expected dequant or matvec"))),
        };
        let (secs, runs) = crate::bench::time(min, || {
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

    pub fn matvec(_: &QuantTensor<'_>, _: &[f32], _: usize) -> CliResult<Vec<f32>> {
        Err(failed("this qforge was built without CUDA support"))
    }

    pub fn dequant(_: &QuantTensor<'_>, _: DType) -> CliResult<Vec<u8>> {
        Err(failed("this qforge was built without CUDA support"))
    }

    pub fn bench(_: &QuantTensor<'_>, _: &str, _: Duration) -> CliResult<(f64, usize, String)> {
        Err(failed("this qforge was built without CUDA support"))
    }
}

pub use imp::{bench, dequant, matvec};
