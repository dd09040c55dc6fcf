//! The fused GEMM on the GPU (`Cuda::gemm`): every format with device code on the odd shapes
//! of `support/gemm_ref.rs`, against the same f64 reference the host check uses, and the
//! runtime's size checks. `#[ignore = "needs a CUDA GPU"]`: listed as ignored without one;
//! the GPU kit runs it with `--include-ignored`, where it fails if no GPU answers.
#![cfg(feature = "cuda")]

use qforge_core::{DType, QuantTensor, Shape};
use qforge_cuda::{Cuda, CudaError};

mod support;
use support::gemm_ref::{odd_shapes, other_types};

fn device() -> Cuda {
    Cuda::new(0).unwrap_or_else(|e| panic!("this test needs a CUDA GPU and none answered: {e}"))
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn every_format_every_odd_shape_on_the_gpu() {
    let gpu = device();
    let s = gpu.default_stream();
    let run = |w: &QuantTensor<'_>, x: &[f32], m: usize, mma: DType, out: DType| -> Vec<u8> {
        let dw = gpu.upload(w, &s).unwrap();
        let dx = s.clone_htod(x).unwrap();
        gpu.gemm(&dw, &dx.slice(..), m, mma, out, &s).unwrap().to_host_bytes(&s).unwrap()
    };
    for f in qforge_formats::registry().iter().filter(|f| f.desc().cuda.is_some()) {
        odd_shapes(f, &run);
        other_types(f, &run);
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gemm_checks_its_arguments() {
    let gpu = device();
    let s = gpu.default_stream();
    let f = qforge_formats::get("q4_0").unwrap();
    let t = qforge_cpu::quantize(f, Shape::new([5, 64]).unwrap(), &qforge_golden::signal(320, 1), None).unwrap();
    let w = gpu.upload(&t, &s).unwrap();
    let x = s.clone_htod(&[0.5f32; 128]).unwrap();
    assert!(matches!(gpu.gemm(&w, &x.slice(..), 3, DType::F16, DType::F32, &s), Err(CudaError::Size { .. })));
    assert!(gpu.gemm(&w, &x.slice(..), 2, DType::F32, DType::F32, &s).is_err());
    let mut y = s.clone_htod(&[0u16; 10]).unwrap();
    let r = gpu.gemm_into(&w, &x.slice(..), 2, DType::F16, &mut y, DType::F32, &s);
    assert!(matches!(r, Err(CudaError::Size { what: "output element bytes", .. })), "{r:?}");
    let y = gpu.gemm(&w, &x.slice(..), 2, DType::F16, DType::F32, &s).unwrap().to_host_bytes(&s).unwrap();
    assert_eq!(y.len(), 2 * 5 * 4);
}
