//! The 8-bit tensor-core GEMM on the GPU (`Cuda::gemm_a8`: activations quantized on the
//! device, `mma.sync.m16n8k32` s8), on the same cases as the host check (`gemm8_host.rs`),
//! against the CPU's `--act-quant int8-dyn` mat-mul bit for bit; and its argument checks.
//! `#[ignore = "needs a CUDA GPU"]`: listed as ignored without one; the GPU kit runs it with
//! `--include-ignored`, where it fails if no GPU answers.
#![cfg(feature = "cuda")]

use qforge_core::{DType, QuantTensor, Shape};
use qforge_cuda::{Cuda, CudaError};

mod support;
use support::a8_ref::{a8_formats, every_variant, odd_shapes};

fn device() -> Cuda {
    Cuda::new(0).unwrap_or_else(|e| panic!("this test needs a CUDA GPU and none answered: {e}"))
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a8_gemm_on_the_gpu_is_the_cpus_int8_dyn_matmul() {
    let gpu = device();
    let s = gpu.default_stream();
    let run = |w: &QuantTensor<'_>, x: &[f32], m: usize, out: DType| -> Vec<u8> {
        let dw = gpu.upload(w, &s).unwrap();
        let dx = s.clone_htod(x).unwrap();
        gpu.gemm_a8(&dw, &dx.slice(..), m, out, &s).unwrap().to_host_bytes(&s).unwrap()
    };
    for f in a8_formats() {
        odd_shapes(f, &run);
        every_variant(f, &run);
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn a8_gemm_checks_its_arguments() {
    let gpu = device();
    let s = gpu.default_stream();
    let f = a8_formats()[0];
    let t = qforge_cpu::quantize(f, Shape::new([5, 64]).unwrap(), &qforge_golden::signal(320, 1), None).unwrap();
    let w = gpu.upload(&t, &s).unwrap();
    let x = s.clone_htod(&[0.5f32; 128]).unwrap();
    assert!(matches!(gpu.gemm_a8(&w, &x.slice(..), 3, DType::F32, &s), Err(CudaError::Size { .. })));
    let mut y = s.clone_htod(&[0u16; 10]).unwrap();
    let r = gpu.gemm_a8_into(&w, &x.slice(..), 2, &mut y, DType::F32, &s);
    assert!(matches!(r, Err(CudaError::Size { what: "output element bytes", .. })), "{r:?}");
    let q4 = qforge_formats::get("q4_0").unwrap();
    let t = qforge_cpu::quantize(q4, Shape::new([5, 64]).unwrap(), &qforge_golden::signal(320, 1), None).unwrap();
    let w = gpu.upload(&t, &s).unwrap();
    assert!(matches!(gpu.gemm_a8(&w, &x.slice(..), 2, DType::F32, &s), Err(CudaError::Quant(_))));
}
