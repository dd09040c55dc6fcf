//! The int8 GEMM of the GGUF formats with an integer dot (`kernels-cuda/gemm_q8.cuh`)
//! compiled for the host — the very native-activation quantizer, transposed tile loop
//! (gemm8.cuh's `qf_gemm_i8t_body`: cp.async staging, `codes32` decode into shared memory,
//! predication, m16n8k32 fragment loads with `warp.cuh`'s host mma following the PTX ISA's
//! layouts, per-sub-block scaling, split-k and its reduction) and epilogue the GPU runs —
//! against the CPU's `--act-quant native` mat-mul:
//!
//! - every format with the int8 GEMM on every K ∈ {1, 33, 100, 128, 257, 288, 4097} × N ∈
//!   {1, 7, 129} × M ∈ {1, 9, 17, 100, 257}, f32 output, and f16 / bf16 output on the
//!   edge-crossing shapes, within f32 summation order (support/q8_ref.rs), on the instance
//!   and splits the tiler picks for an H100;
//! - every instance forced, unsplit and split into more ranges than K has k-steps;
//! - the quantizer against qforge-cpu's `QuantAct::new(native)`: every code and scale bit
//!   for bit (q8_0, q8_1, q8_k), and the sums;
//! - the registry's `CUDA_CODES32` flag against the headers' `codes32` member, both ways.
//!
//! No GPU needed.
#![cfg(feature = "cuda")]

use qforge_core::{DType, QuantTensor, Shape};
use qforge_cpu::{ActQuant, QuantAct};
use qforge_cuda::hostq8;

mod support;
use support::q8_ref::{activations, odd_shapes, other_types, q8_formats};

fn host_q8(w: &QuantTensor<'_>, x: &[f32], m: usize, out: DType) -> Vec<u8> {
    let h = hostq8::get(w.format().desc().name).expect("a q8 format has host wrappers");
    h.gemm(w, x, m, out).unwrap()
}

#[test]
fn q8_gemm_every_odd_shape_is_the_cpus_native_matmul() {
    for f in q8_formats() {
        odd_shapes(f, &host_q8);
    }
}

#[test]
fn q8_gemm_f16_and_bf16_output_is_the_cpus() {
    for f in q8_formats() {
        other_types(f, &host_q8);
    }
}

/// Every instance, unsplit and split (into 2 and into more ranges than K has k-steps, so
/// some ranges are empty), on shapes crossing its tiles, for a 32-block and a 256-block format.
#[test]
fn q8_gemm_every_instance_and_split_is_the_cpus() {
    for name in ["q4_1", "q4_k"] {
        let f = qforge_formats::get(name).unwrap();
        let h = hostq8::get(name).unwrap();
        for tile in 0..qforge_tiling::I8_GEMM_TILES.len() {
            for splits in [1usize, 2, 7] {
                for (m, n, k) in [(3, 65, 512), (70, 7, 768), (130, 129, 256)] {
                    let on = |w: &QuantTensor<'_>, x: &[f32], m: usize, out: DType| {
                        h.gemm_on(w, x, m, out, tile, splits).unwrap()
                    };
                    support::q8_ref::check(f, &on, (m, n, k), DType::F32);
                }
            }
        }
    }
    let f = qforge_formats::get("q4_0").unwrap();
    let h = hostq8::get("q4_0").unwrap();
    let w = qforge_cpu::quantize(f, Shape::new([3, 64]).unwrap(), &qforge_golden::signal(192, 1), None).unwrap();
    assert!(h.gemm_on(&w, &[0.5; 64], 1, DType::F32, qforge_tiling::I8_GEMM_TILES.len(), 1).is_err());
    assert!(h.gemm_on(&w, &[0.5; 64], 1, DType::F32, 0, 0).is_err(), "zero splits");
}

/// Which formats have the int8 GEMM: the registry's flag is true exactly where the header
/// has `codes32`, and these are the formats the path was written for.
#[test]
fn codes32_flag_is_the_headers_member() {
    for f in qforge_formats::registry().iter().filter(|f| f.desc().cuda.is_some()) {
        let name = f.desc().name;
        assert_eq!(hostq8::has_codes32(name), Some(f.cuda_codes32()), "{name}: CUDA_CODES32 and the header disagree");
    }
    let names: Vec<_> = q8_formats().iter().map(|f| f.desc().name).collect();
    assert_eq!(names.len(), 25, "{names:?}");
    for want in [
        "q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "iq4_nl", "iq4_xs", "mxfp4", "nvfp4", "q4_k", "q5_k", "q2_k", "q3_k",
        "q6_k", "iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq1_s", "iq1_m", "tq1_0", "tq2_0", "q1_0", "q2_0",
    ] {
        assert!(names.contains(&want), "{want} has the int8 GEMM: {names:?}");
    }
}

/// The device quantizer gives the CPU's native activations: unit u of row r holds codes and
/// a scale whose products are the CPU's dequantized values bit for bit, and its sum is
/// d·Σq (q8_0, q8_k) or q8_1's stored f16 sum (an f16 value within one f16 rounding of it).
#[test]
fn native_quantizer_is_the_cpus() {
    for f in q8_formats() {
        let h = hostq8::get(f.desc().name).unwrap();
        let kind = ActQuant::Native.kind(f);
        let q8_1 = kind == qforge_core::ActKind::Blocks("q8_1");
        for (i, k) in [1usize, 33, 100, 257, 4097].into_iter().enumerate() {
            let m = 3;
            let mut x = activations(m, k, i as u64 + 11);
            x[k / 2] = 0.0;
            x[k - 1] *= 1e3; // one large value per row: codes of the others round to few levels
            let units = qforge_cuda::codegen::q8_units(f, k).unwrap();
            let padded = units * 32;
            let act = h.quantize_acts(&x, m, k, units).unwrap();
            for r in 0..m {
                let cpu = QuantAct::new(kind, &x[r * k..(r + 1) * k], padded).unwrap().dequantize();
                assert_eq!(cpu.len(), padded);
                for (u, unit) in act[r * units..(r + 1) * units].iter().enumerate() {
                    let name = f.desc().name;
                    for (j, &q) in unit.qs.iter().enumerate() {
                        let (got, want) = (q as f32 * unit.d, cpu[32 * u + j]);
                        assert_eq!(got.to_bits(), want.to_bits(), "{name} K={k} row {r} element {}", 32 * u + j);
                    }
                    let sum = unit.qs.iter().map(|&q| i32::from(q)).sum::<i32>() as f32;
                    if q8_1 {
                        assert_eq!(half::f16::from_f32(unit.s).to_f32(), unit.s, "{name}: q8_1's sum is an f16");
                        let exact = f64::from(sum) * f64::from(unit.d);
                        assert!((f64::from(unit.s) - exact).abs() <= exact.abs() * 2f64.powi(-10) + 1e-30);
                    } else {
                        assert_eq!(unit.s.to_bits(), (unit.d * sum).to_bits(), "{name} K={k} unit {u}");
                    }
                }
            }
        }
    }
}

/// What the int8 GEMM cannot take is an error, not a wrong result.
#[test]
fn q8_refuses_what_it_cannot_compute() {
    let f = q8_formats()[0];
    let h = hostq8::get(f.desc().name).unwrap();
    let w = qforge_cpu::quantize(f, Shape::new([3, 64]).unwrap(), &qforge_golden::signal(192, 1), None).unwrap();
    assert!(h.gemm(&w, &[0.0; 63], 1, DType::F32).is_err());
    // Every weight format with device code and q8 activations has it now; fp8 (its own FP8
    // GEMM) and int4g (A8W4DQ) do not.
    for name in ["fp8_e4m3", "int4g"] {
        let f = qforge_formats::get(name).unwrap();
        assert!(qforge_cuda::codegen::q8_units(f, 256).is_err(), "{name}");
        assert!(qforge_cuda::codegen::q8_kernel_names(name).is_empty(), "{name}");
    }
    let i4 = qforge_formats::get("int4g").unwrap();
    let w = qforge_cpu::quantize(i4, Shape::new([3, 256]).unwrap(), &qforge_golden::signal(768, 1), None).unwrap();
    assert!(h.gemm(&w, &[0.0; 256], 1, DType::F32).is_err(), "a format without codes32");
}

/// The modules of the int8 GEMM's formats hold the quantizer and the GEMM of every instance;
/// no other module does.
#[test]
fn q8_modules_hold_their_kernels() {
    for f in q8_formats() {
        let name = f.desc().name;
        let ptx = qforge_cuda::module_ptx(name).expect("embedded").expect("inflates");
        let names = qforge_cuda::codegen::q8_kernel_names(name);
        assert_eq!(names.len(), 1 + qforge_tiling::I8_GEMM_TILES.len());
        for k in names {
            assert!(ptx.contains(&format!(".entry {k}(")), "{name}: the PTX lacks {k}");
        }
        assert!(ptx.contains("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"));
    }
    for f in qforge_formats::registry().iter().filter(|f| !qforge_cuda::codegen::q8_gemm(f.desc())) {
        let name = f.desc().name;
        assert!(qforge_cuda::codegen::q8_kernel_names(name).is_empty());
        if let Some(Ok(ptx)) = qforge_cuda::module_ptx(name) {
            assert!(!ptx.contains(qforge_cuda::codegen::Q8_QUANTIZE_KERNEL), "{name}");
        }
    }
}
