//! The runtime: on a machine without a GPU, opening a device is a typed error (never a
//! panic); with a GPU, every format's kernels against the CPU reference (dequant bit for bit
//! in f32 / f16 / bf16, mat-vec against the host-compiled device code).
//!
//! The tests that need a GPU are `#[ignore = "needs a CUDA GPU"]`: `cargo test` lists them
//! as ignored on a machine without one, and the GPU kit (`cargo xtask gpu-kit`, docs/cuda.md)
//! runs them with `--include-ignored`, where they fail, never pass, if no GPU answers.
#![cfg(feature = "cuda")]

use qforge_core::{DType, QuantTensor, Shape};
use qforge_cuda::{Cuda, CudaError, host};

/// Device 0; a test that calls this needs a GPU and fails without one.
fn device() -> Cuda {
    Cuda::new(0).unwrap_or_else(|e| panic!("this test needs a CUDA GPU and none answered: {e}"))
}

#[test]
fn no_gpu_is_a_typed_error_and_a_gpu_is_usable() {
    let present = qforge_cuda::driver_present();
    match Cuda::new(0) {
        Ok(c) => assert!(present && c.name().is_ok()),
        Err(CudaError::NoDriver(_)) => assert!(!present, "driver present but reported missing"),
        Err(CudaError::NoDevice { ordinal: 0, count: 0 }) => assert!(present),
        Err(e) => panic!("unexpected error: {e}"),
    }
    assert!(matches!(Cuda::new(usize::MAX), Err(CudaError::NoDriver(_) | CudaError::NoDevice { .. })));
}

fn random_weights(f: &'static dyn qforge_core::Format, n: usize, k: usize, seed: u64) -> QuantTensor<'static> {
    let x = qforge_core::rand::pseudo_gaussian(n * k, seed);
    qforge_cpu::quantize(f, Shape::new([n, k]).unwrap(), &x, None).unwrap()
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn every_format_on_the_gpu_matches_the_cpu() {
    let gpu = device();
    let stream = gpu.default_stream();
    for f in qforge_formats::registry().iter().filter(|f| f.desc().cuda.is_some()) {
        let d = f.desc();
        let (n, k) = (67, 5 * d.block_size + 13);
        let t = random_weights(f, n, k, 7);
        let dt = gpu.upload(&t, &stream).unwrap();
        for dtype in DType::ALL {
            let got = gpu.dequantize(&dt, dtype, &stream).unwrap().to_host_bytes(&stream).unwrap();
            let want = qforge_cpu::dequantize_dyn(&t, dtype).unwrap();
            assert!(got == want.le_bytes().as_ref(), "{} {dtype}: GPU dequant differs from the CPU", d.name);
        }
        for m in 1..=8 {
            let x: Vec<f32> = (0..m * k).map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0).collect();
            let xd = stream.clone_htod(&x).unwrap();
            let y = gpu.matvec(&dt, &xd.slice(..), m, &stream).unwrap();
            let y = stream.clone_dtoh(&y).unwrap();
            let nblocks = host::q8_1_blocks(d, k);
            let act = host::quantize_q8_1(&x, m, k, nblocks);
            let want = host::get(d.name).unwrap().matvec(&t, &act, m).unwrap();
            for (i, (g, w)) in y.iter().zip(&want).enumerate() {
                assert!((g - w).abs() <= 1e-4 * w.abs().max(1.0), "{} m={m} y[{i}]: GPU {g}, host {w}", d.name);
            }
        }
        let bad = gpu.matvec(&dt, &stream.clone_htod(&[0f32; 3]).unwrap().slice(..), 1, &stream);
        assert!(matches!(bad, Err(CudaError::Size { .. })));
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn device_info_names_the_device_and_driver() {
    let gpu = device();
    let info = gpu.info().unwrap();
    assert!(!info.name.is_empty());
    assert!(info.compute_capability.0 >= 8, "PTX is built for sm_80: {:?}", info.compute_capability);
    assert!(info.multiprocessors > 0 && info.memory_bytes > 0 && info.l2_cache_bytes > 0);
    assert!(info.driver_cuda_version >= 13000, "driver CUDA {}", info.driver_cuda());
}

/// The cast the benchmarks measure direct f16 against: RNE like `half`, every element
/// written (odd lengths take the scalar tail), and cast(f32 dequant) equals direct f16.
#[test]
#[ignore = "needs a CUDA GPU"]
fn cast_f32_to_f16_rounds_to_nearest_even_and_matches_direct_f16() {
    let gpu = device();
    let s = gpu.default_stream();
    let mut rng = qforge_core::rand::Rng::new(99);
    for n in [1usize, 3, 4, 1027, 1 << 20] {
        let x: Vec<f32> = (0..n)
            .map(|i| {
                let v = f32::from_bits((rng.next_u64() >> 32) as u32);
                if v.is_nan() { i as f32 } else { v }
            })
            .collect();
        let dx = s.clone_htod(&x).unwrap();
        let mut out = s.clone_htod(&vec![0x7e00u16; n]).unwrap();
        gpu.cast_f32_to_f16(&dx.slice(..), &mut out, &s).unwrap();
        let got = s.clone_dtoh(&out).unwrap();
        for (i, (&g, &v)) in got.iter().zip(&x).enumerate() {
            assert_eq!(g, qforge_core::f16::from_f32(v).to_bits(), "n={n} x[{i}] = {v:e}");
        }
        let mut short = s.clone_htod(&vec![0u16; n + 1]).unwrap();
        assert!(matches!(gpu.cast_f32_to_f16(&dx.slice(..), &mut short, &s), Err(CudaError::Size { .. })));
    }
    for f in qforge_formats::registry().iter().filter(|f| f.desc().cuda.is_some()) {
        let t = random_weights(f, 33, 3 * f.desc().block_size + 5, 3);
        let dt = gpu.upload(&t, &s).unwrap();
        let Ok(qforge_cuda::DeviceBuffer::F32(y32)) = gpu.dequantize(&dt, DType::F32, &s) else { panic!("f32") };
        let mut cast = s.clone_htod(&vec![0u16; y32.len()]).unwrap();
        gpu.cast_f32_to_f16(&y32.slice(..), &mut cast, &s).unwrap();
        let direct = gpu.dequantize(&dt, DType::F16, &s).unwrap().to_host_bytes(&s).unwrap();
        let cast: Vec<u8> = s.clone_dtoh(&cast).unwrap().iter().flat_map(|v| v.to_le_bytes()).collect();
        assert!(cast == direct, "{}: direct f16 differs from cast(f32)", f.desc().name);
    }
}

/// `matvec_into` with caller-owned buffers gives `matvec`'s result and checks its sizes.
#[test]
#[ignore = "needs a CUDA GPU"]
fn matvec_into_reuses_buffers_and_checks_sizes() {
    let gpu = device();
    let s = gpu.new_stream().unwrap();
    let f = qforge_formats::registry().get("q4_k").unwrap();
    let (n, k) = (45, 700);
    let t = random_weights(f, n, k, 5);
    let w = gpu.upload(&t, &s).unwrap();
    let mut scratch = gpu.matvec_scratch(&w, 8, &s).unwrap();
    for m in [1, 5, 8] {
        let x: Vec<f32> = (0..m * k).map(|i| ((i * 13 % 97) as f32 - 48.0) / 17.0).collect();
        let dx = s.clone_htod(&x).unwrap();
        let want = s.clone_dtoh(&gpu.matvec(&w, &dx.slice(..), m, &s).unwrap()).unwrap();
        let mut y = s.clone_htod(&vec![f32::NAN; m * n]).unwrap();
        gpu.matvec_into(&w, &dx.slice(..), m, &mut scratch, &mut y, &s).unwrap();
        assert_eq!(s.clone_dtoh(&y).unwrap(), want, "m = {m}");
    }
    let dx = s.clone_htod(&vec![1f32; 8 * k]).unwrap();
    let mut small = gpu.matvec_scratch(&w, 1, &s).unwrap();
    let mut y = s.clone_htod(&vec![0f32; 8 * n]).unwrap();
    let r = gpu.matvec_into(&w, &dx.slice(..), 8, &mut small, &mut y, &s);
    assert!(matches!(r, Err(CudaError::Size { what: "mat-vec scratch bytes", .. })), "{r:?}");
    let mut y1 = s.clone_htod(&vec![0f32; n]).unwrap();
    let r = gpu.matvec_into(&w, &dx.slice(..), 8, &mut scratch, &mut y1, &s);
    assert!(matches!(r, Err(CudaError::Size { .. })), "{r:?}");
}
