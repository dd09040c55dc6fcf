//! The CUDA cells of the test matrix: every format × {dequant_f32, dequant_f16, dequant_bf16,
//! matvec, matmul}. `missing` for a format without device code; `skip` (with the reason) where
//! there is no GPU or xtask was built without its `cuda` feature; else pass / fail against the
//! same references as the CPU (dequant bit for bit; mat-vec within 1e-5 of Σ|terms| of an f64
//! dot of the reference-dequantized weights and the q8_1 activations; matmul: the fused GEMM
//! and dequant + cuBLAS, f16 inputs, within (16 + K)·2⁻²³ of Σ|terms| of an f64 dot of the
//! f16-rounded reference-dequantized weights and activations).

use super::{Backend, Cell, CellError, DecodeRef, cell, dequant_cell, skipped};
use qforge_core::{DType, Format, QuantTensor, Shape};

pub const OPS: [&str; 5] = ["dequant_f32", "dequant_f16", "dequant_bf16", "matvec", "matmul"];

pub struct Cuda {
    #[cfg(feature = "cuda")]
    gpu: Result<qforge_cuda::Cuda, String>,
}

impl Cuda {
    pub fn new() -> Cuda {
        Cuda {
            #[cfg(feature = "cuda")]
            gpu: qforge_cuda::Cuda::new(0).map_err(|e| e.to_string()),
        }
    }
}

impl Backend for Cuda {
    fn name(&self) -> &'static str {
        "cuda"
    }
    fn available(&self) -> Result<(), String> {
        #[cfg(feature = "cuda")]
        return self.gpu.as_ref().map(drop).map_err(Clone::clone);
        #[cfg(not(feature = "cuda"))]
        Err("xtask built without its `cuda` feature (cargo run -p xtask --features cuda -- test-matrix)".into())
    }
    fn dequant(&self, t: &QuantTensor<'_>, dtype: DType) -> Result<Vec<u8>, CellError> {
        #[cfg(feature = "cuda")]
        {
            let gpu = self.gpu.as_ref().map_err(|e| CellError::Failed(e.clone()))?;
            let s = gpu.default_stream();
            let f = |e: qforge_cuda::CudaError| CellError::Failed(e.to_string());
            let dt = gpu.upload(t, &s).map_err(f)?;
            gpu.dequantize(&dt, dtype, &s).map_err(f)?.to_host_bytes(&s).map_err(f)
        }
        #[cfg(not(feature = "cuda"))]
        {
            let _ = (t, dtype);
            Err(CellError::Missing)
        }
    }
    fn quantize(&self, _: &'static dyn Format, _: Shape, _: &[f32], _: Option<&[f32]>) -> Result<Vec<u8>, CellError> {
        // Not a CUDA op: quantization runs on the CPU; the matrix has no CUDA quantize cells.
        Err(CellError::Missing)
    }
}

/// The four CUDA cells of format `f`.
pub fn cells(f: &'static dyn Format, dev: &dyn Backend, r: &DecodeRef) -> Vec<Cell> {
    if f.desc().cuda.is_none() {
        return OPS
            .iter()
            .map(|op| {
                let mut c = cell(f, dev, op);
                c.status = "missing";
                c.detail = "no CUDA device code (FormatDesc::cuda is None): no kernels".into();
                c
            })
            .collect();
    }
    if let Err(why) = dev.available() {
        return OPS.iter().map(|op| skipped(f, dev, op, &why)).collect();
    }
    let mut out: Vec<Cell> = DType::ALL.iter().map(|&dt| dequant_cell(f, dev, r, dt)).collect();
    out.push(matvec_cell(f, dev));
    out.push(matmul_cell(f, dev));
    out
}

#[cfg(not(feature = "cuda"))]
fn matvec_cell(f: &'static dyn Format, dev: &dyn Backend) -> Cell {
    skipped(f, dev, "matvec", "xtask built without its `cuda` feature")
}

#[cfg(not(feature = "cuda"))]
fn matmul_cell(f: &'static dyn Format, dev: &dyn Backend) -> Cell {
    skipped(f, dev, "matmul", "xtask built without its `cuda` feature")
}

#[cfg(feature = "cuda")]
fn matmul_cell(f: &'static dyn Format, dev: &dyn Backend) -> Cell {
    let mut c = cell(f, dev, "matmul");
    c.reference = "f64 dot of f16-rounded reference-dequantized weights and activations; fused GEMM and \
                   dequant + cuBLAS, f16 inputs, f32 out, M = 19"
        .into();
    match matmul_check(f) {
        Ok(worst) if worst <= 1.0 => {
            c.status = "pass";
            c.detail = format!("max error {worst:.2} of the (16 + K)·2⁻²³·Σ|terms| bound");
            c.max_abs_err = Some(worst);
        }
        Ok(worst) => c.detail = format!("error {worst:.2} × the (16 + K)·2⁻²³·Σ|terms| bound"),
        Err(e) => c.detail = e,
    }
    c
}

/// The largest |y − reference| / bound over both GEMM paths, M = 19, a 67 × (2 blocks + 37)
/// weight matrix (every edge of the 64 × 64 tile crossed).
#[cfg(feature = "cuda")]
fn matmul_check(f: &'static dyn Format) -> Result<f64, String> {
    let e = |e: &dyn std::fmt::Display| e.to_string();
    let (n, k, m) = (67, 2 * f.desc().block_size + 37, 19);
    let x: Vec<f32> = (0..(n + m) * k).map(|i| ((i * 7919 % 1013) as f32 / 506.5 - 1.0) * 3.0).collect();
    let w = qforge_cpu::quantize(f, Shape::new([n, k]).map_err(|x| e(&x))?, &x[..n * k], None).map_err(|x| e(&x))?;
    let h = |v: f32| f64::from(qforge_core::f16::from_f32(v).to_f32());
    let wf: Vec<f64> = qforge_cpu::dequantize(&w).map_err(|x| e(&x))?.into_iter().map(h).collect();
    let xs = &x[n * k..];
    let xf: Vec<f64> = xs.iter().map(|&v| h(v)).collect();
    let gpu = qforge_cuda::Cuda::new(0).map_err(|x| e(&x))?;
    let s = gpu.default_stream();
    let dw = gpu.upload(&w, &s).map_err(|x| e(&x))?;
    let dx = s.clone_htod(xs).map_err(|x| format!("{x:?}"))?;
    let fused = gpu.gemm(&dw, &dx.slice(..), m, DType::F16, DType::F32, &s).map_err(|x| e(&x))?;
    let blas = gpu.gemm_dequant(&dw, &dx.slice(..), m, DType::F16, DType::F32, &s).map_err(|x| e(&x))?;
    let bound = (16 + k) as f64 * 2f64.powi(-23);
    let mut worst = 0f64;
    for y in [fused, blas] {
        let y = y.to_host_bytes(&s).map_err(|x| e(&x))?;
        for (i, b) in y.chunks_exact(4).enumerate() {
            let got = f64::from(f32::from_le_bytes([b[0], b[1], b[2], b[3]]));
            let (r, c) = (i / n, i % n);
            let terms = xf[r * k..(r + 1) * k].iter().zip(&wf[c * k..(c + 1) * k]).map(|(a, b)| a * b);
            let (sum, abs) = terms.fold((0f64, 0f64), |(s, t), p| (s + p, t + p.abs()));
            let err = (got - sum).abs() / (bound * abs).max(f64::MIN_POSITIVE);
            worst = if err.is_nan() { f64::INFINITY } else { worst.max(err) };
        }
    }
    Ok(worst)
}

#[cfg(feature = "cuda")]
fn matvec_cell(f: &'static dyn Format, dev: &dyn Backend) -> Cell {
    let mut c = cell(f, dev, "matvec");
    c.reference = "f64 dot of reference-dequantized weights and q8_1 activations, M = 1, 4, 8".into();
    match matvec_check(f) {
        Ok(rel) if rel <= 1e-5 => {
            c.status = "pass";
            c.detail = format!("max error {rel:.2e} of Σ|terms|");
            c.max_abs_err = Some(rel);
        }
        Ok(rel) => c.detail = format!("error {rel:.2e} of Σ|terms| (limit 1e-5)"),
        Err(e) => c.detail = e,
    }
    c
}

/// The largest |y - reference| / Σ|terms| over a 64 × (2 blocks + 37) weight matrix.
#[cfg(feature = "cuda")]
fn matvec_check(f: &'static dyn Format) -> Result<f64, String> {
    use qforge_cuda::host;
    let e = |e: &dyn std::fmt::Display| e.to_string();
    let d = f.desc();
    let (n, k) = (64, 2 * d.block_size + 37);
    let x: Vec<f32> = (0..(n + 8) * k).map(|i| ((i * 7919 % 1013) as f32 / 506.5 - 1.0) * 3.0).collect();
    let w = qforge_cpu::quantize(f, Shape::new([n, k]).map_err(|x| e(&x))?, &x[..n * k], None).map_err(|x| e(&x))?;
    let wf: Vec<f32> = qforge_cpu::dequantize(&w).map_err(|x| e(&x))?;
    let gpu = qforge_cuda::Cuda::new(0).map_err(|x| e(&x))?;
    let s = gpu.default_stream();
    let dw = gpu.upload(&w, &s).map_err(|x| e(&x))?;
    let nblocks = host::q8_1_blocks(d, k);
    let mut worst = 0f64;
    for m in [1, 4, 8] {
        let xs = &x[x.len() - m * k..];
        let dx = s.clone_htod(xs).map_err(|x| format!("{x:?}"))?;
        let y = gpu.matvec(&dw, &dx.slice(..), m, &s).map_err(|x| e(&x))?;
        let y = s.clone_dtoh(&y).map_err(|x| format!("{x:?}"))?;
        let act = host::quantize_q8_1(xs, m, k, nblocks);
        for (&got, (sum, abs)) in y.iter().zip(host::matvec_reference(&wf, &act, n, k, m)) {
            let err = (f64::from(got) - sum).abs() / abs.max(f64::MIN_POSITIVE);
            worst = if err.is_nan() { f64::INFINITY } else { worst.max(err) };
        }
    }
    Ok(worst)
}
