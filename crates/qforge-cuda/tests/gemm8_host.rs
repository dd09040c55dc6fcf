//! The 8-bit tensor-core GEMM (`kernels-cuda/gemm8.cuh`) compiled for the host — the very
//! activation quantizer, tile loop, int4 → int8 decode into shared memory, predication,
//! m16n8k32 fragment loads (with `warp.cuh`'s host mma following the PTX ISA's layouts),
//! per-group scaling and epilogue the GPU runs — against the CPU's `--act-quant int8-dyn`
//! mat-mul, bit for bit:
//!
//! - the registered format on every K ∈ {1, 33, 100, 128, 257, 288, 4097} × N ∈ {1, 7, 129}
//!   × M ∈ {1, 9, 17, 100, 257} (int4g takes any K: rows are padded to whole groups);
//! - every variant the CPU accepts (group 32 … 4096 × f32 / f16 / bf16 scales) × every
//!   output type (f32, f16, bf16) on the edge-crossing shapes;
//! - every instance of `qforge_tiling::I8_GEMM_TILES` forced on M that cross its token tile
//!   and K that end inside a k-step;
//! - the quantizer against qforge-cpu's `QuantAct::new(Int8Dyn)`, codes, scale and zero
//!   point, on rows that hit both zero-point rules and the clamps.
//!
//! No GPU needed.
#![cfg(feature = "cuda")]

use qforge_core::{ActKind, DType, QuantTensor, Shape};
use qforge_cpu::QuantAct;
use qforge_cuda::host8;

mod support;
use support::a8_ref::{a8_formats, every_variant, odd_shapes};

fn host_a8(w: &QuantTensor<'_>, x: &[f32], m: usize, out: DType) -> Vec<u8> {
    let h = host8::get(w.format().desc().name).expect("an A8 format has host wrappers");
    h.gemm(w, x, m, out).unwrap()
}

#[test]
fn a8_gemm_every_odd_shape_is_the_cpus_int8_dyn_matmul() {
    for f in a8_formats() {
        odd_shapes(f, &host_a8);
    }
}

#[test]
fn a8_gemm_every_variant_and_output_type_is_the_cpus() {
    for f in a8_formats() {
        every_variant(f, &host_a8);
    }
}

/// The device quantizer (one CTA per row, a min / max reduction over its threads) gives the
/// CPU's codes, scale and zero point exactly.
#[test]
fn int8_dyn_quantizer_is_the_cpus() {
    let mut rows: Vec<Vec<f32>> = vec![
        vec![0.0; 5],
        vec![3.5; 40],
        vec![-1e-3; 7],
        (0..300).map(|i| i as f32 * 0.25).collect(),
        (0..300).map(|i| -(i as f32) * 0.25).collect(),
        vec![1e-30, -1e-30, 0.0],
        vec![65504.0, -3.0, 1.0],
    ];
    for (i, k) in [1usize, 33, 100, 257, 4097].into_iter().enumerate() {
        let mut r = qforge_golden::signal(k, i as u64 + 7);
        r.iter_mut().for_each(|v| *v = *v * (i as f32 + 0.5) + (i as f32 - 2.0));
        rows.push(r);
    }
    for x in rows {
        let k = x.len();
        let got = host8::quantize_int8_dyn(&x, 1, k).unwrap();
        let QuantAct::Int8 { q, scale, zero_point } = QuantAct::new(ActKind::Int8Dyn, &x, k).unwrap() else {
            panic!("int8-dyn quantizes to int8")
        };
        assert_eq!((got.scale[0].to_bits(), got.zp[0]), (scale.to_bits(), zero_point), "K={k} {:?}", &x[..k.min(4)]);
        assert_eq!(&got.q[..k], &q[..], "K={k}");
        assert!(got.q[k..].iter().all(|&v| v == 0), "the row's padding is zero");
        assert_eq!(got.lda, k.div_ceil(128) * 128);
    }
}

/// Every instance, whatever M it would be chosen for, gives the CPU's product bit for bit:
/// token tiles partly filled and overflowing, K inside a k-step and across several.
#[test]
fn a8_gemm_every_instance_is_the_cpus() {
    let f = a8_formats()[0];
    let h = host8::get(f.desc().name).unwrap();
    for tile in 0..qforge_tiling::I8_GEMM_TILES.len() {
        for (m, n, k) in [(1, 7, 33), (17, 65, 300), (130, 3, 257)] {
            let on = |w: &QuantTensor<'_>, x: &[f32], m: usize, out: DType| {
                let a = host8::quantize_int8_dyn(x, m, w.cols()).unwrap();
                h.gemm_on(w, &a, m, out, tile).unwrap()
            };
            support::a8_ref::check(f, &on, (m, n, k), DType::F32);
        }
    }
    let w = qforge_cpu::quantize(f, Shape::new([3, 64]).unwrap(), &qforge_golden::signal(192, 1), None).unwrap();
    let a = host8::quantize_int8_dyn(&[0.5; 64], 1, 64).unwrap();
    assert!(h.gemm_on(&w, &a, 1, DType::F32, qforge_tiling::I8_GEMM_TILES.len()).is_err(), "no such instance");
}

/// The runtime launches each int8 instance with exactly the shared memory its kernel lays
/// out (qforge-tiling's `i8_smem_bytes` against `qf_i8_cfg::SMEM_BYTES`): a smaller launch
/// would overrun it on the GPU, which no host check would see.
#[test]
fn int8_launch_smem_is_the_kernels() {
    for (i, t) in qforge_tiling::I8_GEMM_TILES.iter().enumerate() {
        assert_eq!(host8::i8_kernel_smem(i), Some(qforge_tiling::i8_smem_bytes(t)), "{}", t.name());
    }
    assert_eq!(host8::i8_kernel_smem(qforge_tiling::I8_GEMM_TILES.len()), None);
}

/// What the A8 GEMM cannot take is an error, not a wrong result.
#[test]
fn a8_refuses_what_it_cannot_compute() {
    let f = a8_formats()[0];
    let h = host8::get(f.desc().name).unwrap();
    let w = qforge_cpu::quantize(f, Shape::new([3, 64]).unwrap(), &qforge_golden::signal(192, 1), None).unwrap();
    assert!(h.gemm(&w, &[0.0; 63], 1, DType::F32).is_err());
    let q4 = qforge_formats::get("q4_0").unwrap();
    let w = qforge_cpu::quantize(q4, Shape::new([3, 64]).unwrap(), &qforge_golden::signal(192, 1), None).unwrap();
    assert!(h.gemm(&w, &[0.0; 64], 1, DType::F32).is_err(), "a format without an integer group dot");
    assert!(qforge_cuda::codegen::a8_group_args(q4).is_err());
}

/// The A8 module holds the quantizer and the GEMM of every instance.
#[test]
fn a8_modules_hold_their_kernels() {
    for f in a8_formats() {
        let name = f.desc().name;
        let ptx = qforge_cuda::module_ptx(name).expect("embedded").expect("inflates");
        let names = qforge_cuda::codegen::a8_kernel_names(name);
        assert_eq!(names.len(), 1 + qforge_tiling::I8_GEMM_TILES.len());
        for k in names {
            assert!(ptx.contains(&format!(".entry {k}(")), "{name}: the PTX lacks {k}");
        }
        assert!(ptx.contains("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"));
    }
    let without: Vec<_> =
        qforge_formats::registry().iter().filter(|f| !qforge_cuda::codegen::a8_gemm(f.desc())).collect();
    assert!(without.iter().all(|f| qforge_cuda::codegen::a8_kernel_names(f.desc().name).is_empty()));
}
