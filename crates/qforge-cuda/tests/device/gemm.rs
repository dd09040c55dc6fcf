//! The GEMMs on the GPU: the fused one (`Cuda::gemm`) for every format with device code on
//! the odd shapes of `support/gemm_ref.rs`, against the same f64 reference the host check
//! uses; the dequant + cuBLAS one (`Cuda::gemm_dequant_into`) on every input / output type
//! with a workspace small enough to take several row chunks; and the runtime's size checks. `#[ignore = "needs a CUDA GPU"]`: listed as ignored without one;
//! the GPU kit runs it with `--include-ignored`, where it fails if no GPU answers.
#![cfg(feature = "cuda")]

use qforge_core::{DType, QuantTensor, Shape};
use qforge_cuda::cudarc::driver::CudaStream;
use qforge_cuda::{Cuda, CudaError, DeviceBuffer};
use std::sync::Arc;

use crate::support::a8_ref::{a8_formats, every_variant};
use crate::support::gemm_ref::{every_type_any_order, instance, multi_cta, odd_shapes, other_types, split_k};

fn device() -> Cuda {
    Cuda::new(0).unwrap_or_else(|e| panic!("this test needs a CUDA GPU and none answered: {e}"))
}

/// `len` elements of `out` on the device, all NaN: an element the GEMM fails to write fails
/// the check.
fn nan_buffer(s: &Arc<CudaStream>, len: usize, out: DType) -> DeviceBuffer {
    match out {
        DType::F32 => DeviceBuffer::F32(s.clone_htod(&vec![f32::NAN; len]).unwrap()),
        DType::F16 => DeviceBuffer::F16(s.clone_htod(&vec![0x7e00u16; len]).unwrap()),
        DType::Bf16 => DeviceBuffer::Bf16(s.clone_htod(&vec![0x7fc0u16; len]).unwrap()),
    }
}

/// `len` elements of `out` filled by `$call` (a GEMM `_into` entry point on `$b`, the output
/// slice of whichever element type `out` has) from a [`nan_buffer`], back on the host as bytes.
macro_rules! gemm_bytes {
    ($s:expr, $len:expr, $out:expr, |$b:ident| $call:expr) => {{
        let mut y = nan_buffer($s, $len, $out);
        match &mut y {
            DeviceBuffer::F32($b) => $call,
            DeviceBuffer::F16($b) | DeviceBuffer::Bf16($b) => $call,
        }
        .unwrap();
        y.to_host_bytes($s).unwrap()
    }};
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

#[test]
#[ignore = "needs a CUDA GPU"]
fn dequant_cublas_every_format_every_type_in_row_chunks() {
    let gpu = device();
    let s = gpu.default_stream();
    let run = |w: &QuantTensor<'_>, x: &[f32], m: usize, input: DType, out: DType| -> Vec<u8> {
        let dw = gpu.upload(w, &s).unwrap();
        let dx = s.clone_htod(x).unwrap();
        let n = w.shape().rows();
        // Three rows' worth of workspace: N = 7 and 129 take several chunks (a grid format's
        // chunks are whole tile rows, 128, whatever the bound).
        let ws = 3 * w.shape().cols() * input.size();
        gemm_bytes!(&s, m * n, out, |b| gpu.gemm_dequant_into(&dw, &dx.slice(..), m, input, b, out, ws, &s))
    };
    for f in qforge_formats::registry().iter().filter(|f| f.desc().cuda.is_some()) {
        every_type_any_order(f, &run);
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn gemm_auto_is_the_path_it_chooses() {
    // gemm_auto gives the chosen path's bits, at an M of each measured range.
    let gpu = device();
    let s = gpu.default_stream();
    let f = qforge_formats::get("q4_0").unwrap();
    let (n, k) = (130, 288);
    let t = qforge_cpu::quantize(f, Shape::new([n, k]).unwrap(), &qforge_golden::signal(n * k, 5), None).unwrap();
    let w = gpu.upload(&t, &s).unwrap();
    for m in [1, 17, 600] {
        let x = s.clone_htod(&qforge_golden::signal(m * k, 6 + m as u64)).unwrap();
        let auto = gpu.gemm_auto(&w, &x.slice(..), m, DType::F16, DType::F32, &s).unwrap().to_host_bytes(&s).unwrap();
        let chosen = match gpu.gemm_path(m) {
            qforge_cuda::GemmPath::Fused => gpu.gemm(&w, &x.slice(..), m, DType::F16, DType::F32, &s),
            qforge_cuda::GemmPath::DequantCublas => gpu.gemm_dequant(&w, &x.slice(..), m, DType::F16, DType::F32, &s),
        };
        assert_eq!(auto, chosen.unwrap().to_host_bytes(&s).unwrap(), "m = {m}");
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn dense_cublas_matches_dequant_cublas_bit_for_bit() {
    // Same dequantized f16 weights, same cuBLAS call: the dense entry point (the benchmarks'
    // ceiling) and the dequant path with one chunk give the same bits.
    let gpu = device();
    let s = gpu.default_stream();
    let f = qforge_formats::get("q4_k").unwrap();
    let (m, n, k) = (33, 300, 512);
    let t = qforge_cpu::quantize(f, Shape::new([n, k]).unwrap(), &qforge_golden::signal(n * k, 3), None).unwrap();
    let w = gpu.upload(&t, &s).unwrap();
    let x = s.clone_htod(&qforge_golden::signal(m * k, 4)).unwrap();
    let a = gpu.gemm_dequant(&w, &x.slice(..), m, DType::F16, DType::F32, &s).unwrap().to_host_bytes(&s).unwrap();
    let Ok(DeviceBuffer::F16(w16)) = gpu.dequantize(&w, DType::F16, &s) else { panic!("f16 dequant") };
    let mut y = s.clone_htod(&vec![0f32; m * n]).unwrap();
    gpu.gemm_dense_into(&w16.slice(..), n, k, DType::F16, &x.slice(..), m, &mut y, DType::F32, &s).unwrap();
    let b: Vec<u8> = s.clone_dtoh(&y).unwrap().iter().flat_map(|v| v.to_le_bytes()).collect();
    assert_eq!(a, b);
    let r = gpu.gemm_dense_into(&w16.slice(..10), n, k, DType::F16, &x.slice(..), m, &mut y, DType::F32, &s);
    assert!(matches!(r, Err(CudaError::Size { .. })), "{r:?}");
}

/// The fused GEMM on the device as the host checks' `run`: instance `tile` (`None`: the
/// tiler's choice, `gemm_split_into`), K in `splits` ranges, into a [`nan_buffer`].
fn fused_run<'a>(
    gpu: &'a Cuda,
    s: &'a Arc<CudaStream>,
    tile: Option<usize>,
    splits: usize,
) -> impl Fn(&QuantTensor<'_>, &[f32], usize, DType, DType) -> Vec<u8> + 'a {
    move |w, x, m, mma, out| {
        let dw = gpu.upload(w, s).unwrap();
        let dx = s.clone_htod(x).unwrap();
        let x = dx.slice(..);
        gemm_bytes!(s, m * w.shape().rows(), out, |b| match tile {
            Some(t) => gpu.gemm_tile_into(&dw, &x, m, mma, b, out, t, splits, s),
            None => gpu.gemm_split_into(&dw, &x, m, mma, b, out, splits, s),
        })
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn split_k_every_format_on_the_gpu() {
    let gpu = device();
    let s = gpu.default_stream();
    for splits in [2, 3, 7] {
        let run = fused_run(&gpu, &s, None, splits);
        for f in qforge_formats::registry().iter().filter(|f| f.desc().cuda.is_some()) {
            split_k(f, &run, splits);
        }
    }
}

/// Fused GEMM instance `tile`, every format, on the edge-crossing shapes (every instance but
/// the general one also on grids of several CTAs), whole and split-k: the host check's cases
/// on the device.
fn every_format_on_instance(tile: usize) {
    let gpu = device();
    let s = gpu.default_stream();
    for splits in [1, 3] {
        let run = fused_run(&gpu, &s, Some(tile), splits);
        for f in qforge_formats::registry().iter().filter(|f| f.desc().cuda.is_some()) {
            instance(f, &run, splits);
            if tile > 0 {
                multi_cta(f, &run, splits);
            }
        }
    }
}

/// One GPU test per fused GEMM instance (every config qforge-tiling can return), so that the
/// test harness runs them side by side: as one test they ran past the GPU kit's 170-second
/// step on an H200 (2026-11-28).
macro_rules! instance_tests {
    ($($name:ident = $tile:literal),+ $(,)?) => {
        $(
            #[test]
            #[ignore = "needs a CUDA GPU"]
            fn $name() {
                every_format_on_instance($tile);
            }
        )+
        /// Every instance of `FUSED_GEMM_TILES` has its GPU test above.
        #[test]
        fn every_instance_has_a_gpu_test() {
            assert_eq!([$($tile),+], std::array::from_fn::<usize, { qforge_cuda::codegen::FUSED_GEMM_TILES.len() }, _>(|i| i));
        }
    };
}
instance_tests!(
    instance_0_every_format_on_the_gpu = 0,
    instance_1_every_format_on_the_gpu = 1,
    instance_2_every_format_on_the_gpu = 2,
    instance_3_every_format_on_the_gpu = 3,
);

/// The device description comes from the device: its SM count and compute capability are
/// the ones `info` reports, and every shape gets a config whose kernel is loaded.
#[test]
#[ignore = "needs a CUDA GPU"]
fn configs_come_from_the_devices_description() {
    let gpu = device();
    let info = gpu.info().unwrap();
    let d = gpu.tiling_device().unwrap();
    assert_eq!(d.sm_count as i32, info.multiprocessors);
    assert_eq!((d.cc_major as i32, d.cc_minor as i32), info.compute_capability);
    let s = gpu.default_stream();
    let f = qforge_formats::get("q4_0").unwrap();
    let t = qforge_cpu::quantize(f, Shape::new([4096, 4096]).unwrap(), &qforge_golden::signal(4096 * 4096, 5), None)
        .unwrap();
    let w = gpu.upload(&t, &s).unwrap();
    for m in [1, 16, 64, 512, 4096] {
        let (tile, c) = gpu.gemm_config(&w, m, DType::F16, DType::F32).unwrap();
        assert!(tile < qforge_cuda::codegen::FUSED_GEMM_TILES.len(), "{}", c.summary());
        eprintln!("M = {m}: {}", c.summary());
    }
}

// ---- the 8-bit tensor-core GEMM (`Cuda::gemm_a8`, kernels-cuda/gemm8.cuh): activations
// quantized on the device, mma.sync.m16n8k32 s8, against the CPU's int8-dyn mat-mul bit for
// bit on the host check's cases (`support/a8_ref.rs`). In this binary, not one of its own, so
// that the GPU kit carries no further test binary.

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
        crate::support::a8_ref::odd_shapes(f, &run);
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

// ---- the int8 GEMM of the GGUF formats (`Cuda::gemm_q8`, kernels-cuda/gemm_q8.cuh): native
// q8 activations quantized on the device, mma.sync.m16n8k32 s8, against the CPU's native
// mat-mul within f32 summation order on the host check's cases (`support/q8_ref.rs`).

#[test]
#[ignore = "needs a CUDA GPU"]
fn q8_gemm_on_the_gpu_is_the_cpus_native_matmul() {
    let gpu = device();
    let s = gpu.default_stream();
    let run = |w: &QuantTensor<'_>, x: &[f32], m: usize, out: DType| -> Vec<u8> {
        let dw = gpu.upload(w, &s).unwrap();
        let dx = s.clone_htod(x).unwrap();
        gpu.gemm_q8(&dw, &dx.slice(..), m, out, &s).unwrap().to_host_bytes(&s).unwrap()
    };
    for f in crate::support::q8_ref::q8_formats() {
        crate::support::q8_ref::odd_shapes(f, &run);
        crate::support::q8_ref::other_types(f, &run);
    }
}

/// The int8 GEMMs on the GPU on a forced instance (and, for q8, K split): `q8` selects
/// `Cuda::gemm_q8_tile_into`, else `Cuda::gemm_a8_tile_into` (never split).
fn i8_on_gpu<'a>(
    gpu: &'a Cuda,
    s: &'a Arc<CudaStream>,
    q8: bool,
    tile: usize,
    splits: usize,
) -> impl Fn(&QuantTensor<'_>, &[f32], usize, DType) -> Vec<u8> + 'a {
    move |w, x, m, out| {
        let dw = gpu.upload(w, s).unwrap();
        let dx = s.clone_htod(x).unwrap();
        let (xv, dw) = (dx.slice(..), &dw);
        if q8 {
            gemm_bytes!(s, m * w.rows(), out, |b| gpu.gemm_q8_tile_into(dw, &xv, m, b, out, tile, splits, s))
        } else {
            gemm_bytes!(s, m * w.rows(), out, |b| gpu.gemm_a8_tile_into(dw, &xv, m, b, out, tile, s))
        }
    }
}

/// Every int8 instance on the GPU (q8: whole and split along K; A8W4DQ: whole, bit for bit),
/// for a 32-block, a 256-block and a per-16-offset format, on shapes that cross each
/// instance's edges.
#[test]
#[ignore = "needs a CUDA GPU"]
fn int8_every_instance_and_split_on_the_gpu() {
    let gpu = device();
    let s = gpu.default_stream();
    for (tile, t) in qforge_tiling::I8_GEMM_TILES.iter().enumerate() {
        let (tok, rows) = (t.tok as usize, t.rows as usize);
        for &(m, n, k, splits) in &[(tok + 3, rows + 5, 512, 1), (2 * tok + 1, 2 * rows + 1, 768, 3), (5, 17, 4096, 16)]
        {
            for name in ["q4_1", "q4_k", "q2_k"] {
                let f = qforge_formats::get(name).unwrap();
                crate::support::q8_ref::check(f, &i8_on_gpu(&gpu, &s, true, tile, splits), (m, n, k), DType::F32);
            }
            for f in a8_formats() {
                crate::support::a8_ref::check(f, &i8_on_gpu(&gpu, &s, false, tile, 1), (m, n, k + 33), DType::F32);
            }
        }
    }
}

// ---- the FP8 block-scaled GEMM (`Cuda::gemm_fp8_into`, kernels-cuda/gemm_fp8.cuh): 1 × 128
// e4m3 activations quantized on the device, both bodies (the e4m3 tensor cores where the
// device has them, sm_89+, and the exact-f16 one) against the CPU's fp8-1x128 mat-mul within
// `support/fp8_ref.rs`'s bound (u_p = 2⁻¹³ for the fp8 tensor cores' shorter accumulator).
/// The FP8 bodies this device runs, each with its partial-sum roundoff `u_p` for the bound.
fn fp8_bodies(gpu: &Cuda) -> Vec<(qforge_cuda::Fp8Body, f64)> {
    use qforge_cuda::Fp8Body;
    let mut bodies = vec![(Fp8Body::F16, f64::powi(2.0, -24))];
    if gpu.info().unwrap().compute_capability >= (8, 9) {
        assert_eq!(gpu.fp8_body().unwrap(), Fp8Body::Mma);
        bodies.push((Fp8Body::Mma, f64::powi(2.0, -13)));
    }
    bodies
}

/// The FP8 GEMM on the GPU as `support/fp8_ref.rs` calls it: body `body`, on the instance and
/// splits the runtime chooses, or on `(instance, splits)`.
fn fp8_on_gpu<'a>(
    gpu: &'a Cuda,
    s: &'a Arc<CudaStream>,
    body: qforge_cuda::Fp8Body,
    forced: Option<(usize, usize)>,
) -> impl Fn(&QuantTensor<'_>, &[f32], usize, DType) -> Vec<u8> + 'a {
    move |w, x, m, out| {
        let dw = gpu.upload(w, s).unwrap();
        let dx = s.clone_htod(x).unwrap();
        let (xv, dw) = (dx.slice(..), &dw);
        match forced {
            None => gemm_bytes!(s, m * w.rows(), out, |b| gpu.gemm_fp8_into(dw, &xv, m, b, out, body, s)),
            Some((t, k)) => {
                gemm_bytes!(s, m * w.rows(), out, |b| gpu.gemm_fp8_tile_into(dw, &xv, m, b, out, body, t, k, s))
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn fp8_gemm_on_the_gpu_is_the_cpus_fp8_matmul() {
    let gpu = device();
    let s = gpu.default_stream();
    for (body, u_p) in fp8_bodies(&gpu) {
        let run = fp8_on_gpu(&gpu, &s, body, None);
        for f in crate::support::fp8_ref::fp8_formats() {
            crate::support::fp8_ref::odd_shapes(f, &run, u_p);
            crate::support::fp8_ref::output_types(f, &run);
        }
    }
}

/// Every FP8 instance whole and split along K on the GPU (`Cuda::gemm_fp8_tile_into`), both
/// bodies where the device has them, on shapes that cross each instance's edges.
#[test]
#[ignore = "needs a CUDA GPU"]
fn fp8_every_instance_and_split_on_the_gpu() {
    let gpu = device();
    let s = gpu.default_stream();
    for (body, u_p) in fp8_bodies(&gpu) {
        for (tile, t) in qforge_tiling::FP8_GEMM_TILES.iter().enumerate() {
            let (tok, rows) = (t.tok as usize, t.rows as usize);
            for &(m, n, k, splits) in &[
                (tok + 3, rows + 5, 300, 1),
                (2 * tok + 1, 2 * rows + 1, 513, 3),
                (5, 17, 1000, 4),
                (tok, 9, 4097, 16),
            ] {
                let run = fp8_on_gpu(&gpu, &s, body, Some((tile, splits)));
                for f in crate::support::fp8_ref::fp8_formats() {
                    crate::support::fp8_ref::check(f, &run, (m, n, k), u_p);
                }
            }
        }
    }
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn q8_gemm_checks_its_arguments() {
    let gpu = device();
    let s = gpu.default_stream();
    let q4 = qforge_formats::get("q4_0").unwrap();
    let t = qforge_cpu::quantize(q4, Shape::new([5, 64]).unwrap(), &qforge_golden::signal(320, 1), None).unwrap();
    let w = gpu.upload(&t, &s).unwrap();
    let x = s.clone_htod(&[0.5f32; 128]).unwrap();
    assert!(matches!(gpu.gemm_q8(&w, &x.slice(..), 3, DType::F32, &s), Err(CudaError::Size { .. })));
    let mut y = s.clone_htod(&[0u16; 10]).unwrap();
    let r = gpu.gemm_q8_into(&w, &x.slice(..), 2, &mut y, DType::F32, &s);
    assert!(matches!(r, Err(CudaError::Size { what: "output element bytes", .. })), "{r:?}");
    let q2 = qforge_formats::get("q2_k").unwrap();
    let t = qforge_cpu::quantize(q2, Shape::new([5, 256]).unwrap(), &qforge_golden::signal(1280, 1), None).unwrap();
    let w = gpu.upload(&t, &s).unwrap();
    let x = s.clone_htod(&[0.5f32; 512]).unwrap();
    assert!(matches!(gpu.gemm_q8(&w, &x.slice(..), 2, DType::F32, &s), Err(CudaError::Quant(_))));
}

#[test]
#[ignore = "needs a CUDA GPU"]
fn fp8_gemm_checks_its_arguments() {
    let gpu = device();
    let s = gpu.default_stream();
    let f = crate::support::fp8_ref::fp8_formats()[0];
    let t = qforge_cpu::quantize(f, Shape::new([5, 64]).unwrap(), &qforge_golden::signal(320, 1), None).unwrap();
    let w = gpu.upload(&t, &s).unwrap();
    let x = s.clone_htod(&[0.5f32; 128]).unwrap();
    assert!(matches!(gpu.gemm_fp8(&w, &x.slice(..), 3, DType::F32, &s), Err(CudaError::Size { .. })));
    let q4 = qforge_formats::get("q4_0").unwrap();
    let t = qforge_cpu::quantize(q4, Shape::new([5, 64]).unwrap(), &qforge_golden::signal(320, 1), None).unwrap();
    let w = gpu.upload(&t, &s).unwrap();
    assert!(matches!(gpu.gemm_fp8(&w, &x.slice(..), 2, DType::F32, &s), Err(CudaError::Quant(_))));
}
