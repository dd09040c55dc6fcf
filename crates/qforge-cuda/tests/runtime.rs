//! The runtime: on a machine without a GPU, opening a device is a typed error (never a
//! panic); with a GPU, every format's kernels against the CPU reference (dequant bit for bit
//! in f32 / f16 / bf16, mat-vec against the host-compiled device code).
#![cfg(feature = "cuda")]

use qforge_core::{DType, QuantTensor, Shape};
use qforge_cuda::{Cuda, CudaError, host};

fn device() -> Option<Cuda> {
    match Cuda::new(0) {
        Ok(c) => Some(c),
        Err(e @ (CudaError::NoDriver(_) | CudaError::NoDevice { .. })) => {
            eprintln!("no GPU here ({e}); GPU checks skipped");
            None
        }
        Err(e) => panic!("opening the device failed with an unexpected error: {e}"),
    }
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
    let mut s = seed;
    let x: Vec<f32> = (0..n * k)
        .map(|_| {
            s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32 - 0.5) * 4.0
        })
        .collect();
    qforge_cpu::quantize(f, Shape::new([n, k]).unwrap(), &x, None).unwrap()
}

#[test]
fn every_format_on_the_gpu_matches_the_cpu() {
    let Some(gpu) = device() else { return };
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
