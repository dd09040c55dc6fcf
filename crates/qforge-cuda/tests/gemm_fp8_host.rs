//! The FP8 block-scaled GEMM (`kernels-cuda/gemm_fp8.cuh`) compiled for the host — the very
//! 1 × 128 e4m3 activation quantizer, tile loop, predication, fragment loads (the s8
//! m16n8k32 layout for the e4m3 body, ldmatrix for the f16 body, with `warp.cuh`'s host mma
//! models following the PTX ISA's layouts), per-block promotion and epilogue the GPU runs —
//! against the CPU's `--act-quant fp8-1x128` mat-mul:
//!
//! - the quantizer bit for bit against qforge-cpu's `QuantAct::new(Fp8x128)` (codes and
//!   scales), and its pieces (the code values, the f32 → e4m3 conversion) against qforge-fp8's
//!   codec on every code and on every rounding boundary;
//! - both bodies (sm_89 e4m3 mma, sm_80 f16) of every fp8 weight format on every K ∈ {1, 33,
//!   100, 128, 257, 288, 4097} × N ∈ {1, 7, 129} × M ∈ {1, 9, 17, 100, 257}, within the bound
//!   of `support/fp8_ref.rs` (products exact, only the order of a block's sum differs);
//! - f16 / bf16 output: the RNE of the same f32 result, bit for bit.
//!
//! No GPU needed.
#![cfg(feature = "cuda")]

use qforge_core::{ActKind, DType, QuantTensor};
use qforge_cpu::QuantAct;
use qforge_cuda::host_fp8;
use qforge_fp8::{E4m3, E5m2};

mod support;
use support::fp8_ref::{fp8_formats, odd_shapes, output_types};

fn host_body(mma: bool) -> impl Fn(&QuantTensor<'_>, &[f32], usize, DType) -> Vec<u8> {
    move |w, x, m, out| {
        let h = host_fp8::get(w.format().desc().name).expect("an fp8 format has host wrappers");
        h.gemm(w, x, m, mma, out).unwrap()
    }
}

#[test]
fn fp8_code_values_are_the_codec() {
    for (e5m2, want) in [(false, qforge_fp8::to_f32::<E4m3> as fn(u8) -> f32), (true, qforge_fp8::to_f32::<E5m2>)] {
        let got = host_fp8::fp8_code_values(e5m2);
        for c in 0..=255u8 {
            let (g, w) = (got[c as usize], want(c));
            assert!(
                g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
                "e5m2={e5m2} code {c:#04x}: {g:e} vs {w:e}"
            );
            // Every value is exact in f16 (the sm_80 body's shared-memory type).
            assert!(w.is_nan() || half::f16::from_f32(w).to_f32() == w, "code {c:#04x}");
        }
    }
}

#[test]
fn e4m3_conversion_is_the_codecs() {
    let mut xs: Vec<f32> =
        vec![0.0, -0.0, 448.0, 449.0, 464.0, 1e30, f32::INFINITY, f32::NAN, f32::MIN_POSITIVE, 1e-45];
    // Every code's value, its neighbours and the midpoints to the next code (ties to even).
    let vals: Vec<f32> = (0..0x7fu8).map(qforge_fp8::to_f32::<E4m3>).collect();
    for w in vals.windows(2) {
        let mid = (w[0] + w[1]) / 2.0;
        for v in [w[0], w[1], mid, f32::from_bits(mid.to_bits() + 1), f32::from_bits(mid.to_bits().saturating_sub(1))] {
            xs.push(v);
        }
    }
    let mut state = 0x1234_5678_u32;
    for _ in 0..200_000 {
        state ^= state << 13;
        state ^= state >> 17;
        state ^= state << 5;
        // Exponents around e4m3's range (2^-12 .. 2^10), any mantissa and sign.
        xs.push(f32::from_bits((state & 0x807f_ffff) | ((115 + (state >> 8) % 22) << 23)));
    }
    for x in xs.iter().flat_map(|&x| [x, -x]) {
        assert_eq!(host_fp8::e4m3_from_f32(x), qforge_fp8::from_f32::<E4m3>(x), "{x:e} ({:#010x})", x.to_bits());
    }
}

/// The device quantizer (one CTA per row and 128-column group, an amax reduction over its
/// threads) gives the CPU's codes and scales exactly.
#[test]
fn fp8_1x128_quantizer_is_the_cpus() {
    let mut rows: Vec<Vec<f32>> = vec![
        vec![0.0; 5],
        vec![3.5; 300],
        vec![-1e-3; 7],
        (0..300).map(|i| i as f32 * 0.25 - 30.0).collect(),
        vec![1e-30, -1e-30, 0.0],
        vec![1e-44, 0.0, -3e-45],
        vec![65504.0, -3.0, 1.0, 1e-6],
    ];
    for (i, k) in [1usize, 33, 100, 128, 257, 4097].into_iter().enumerate() {
        let mut r = qforge_golden::signal(k, i as u64 + 11);
        r.iter_mut().for_each(|v| *v *= (i as f32 * 3.0).exp2());
        if k > 200 {
            r[128..256].fill(0.0); // an all-zero group: scale 1
        }
        rows.push(r);
    }
    for x in rows {
        let k = x.len();
        let got = host_fp8::quantize_fp8_1x128(&x, 1, k).unwrap();
        let QuantAct::Tiled { q, scales, .. } = QuantAct::new(ActKind::Fp8x128, &x, k).unwrap() else {
            panic!("fp8-1x128 quantizes to tiles")
        };
        let bits = |v: &[f32]| v.iter().map(|s| s.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&got.scales), bits(&scales), "K={k} {:?}", &x[..k.min(4)]);
        assert_eq!(&got.q[..k], &q[..], "K={k}");
        assert!(got.q[k..].iter().all(|&v| v == 0), "the row's padding is zero codes");
        assert_eq!(got.lda, k.div_ceil(128) * 128);
    }
    // Several rows at once: row r's codes start at r · lda.
    let x = support::fp8_ref::activations(5, 257, 9);
    let got = host_fp8::quantize_fp8_1x128(&x, 5, 257).unwrap();
    for r in 0..5 {
        let QuantAct::Tiled { q, scales, .. } =
            QuantAct::new(ActKind::Fp8x128, &x[r * 257..(r + 1) * 257], 257).unwrap()
        else {
            panic!()
        };
        assert_eq!(&got.q[r * got.lda..r * got.lda + 257], &q[..], "row {r}");
        assert_eq!(&got.scales[r * 3..r * 3 + 3], &scales[..], "row {r}");
    }
}

#[test]
fn fp8_mma_body_every_odd_shape_is_the_cpus_fp8_matmul() {
    for f in fp8_formats() {
        odd_shapes(f, &host_body(true), f64::powi(2.0, -24));
    }
}

#[test]
fn fp8_f16_body_every_odd_shape_is_the_cpus_fp8_matmul() {
    for f in fp8_formats() {
        odd_shapes(f, &host_body(false), f64::powi(2.0, -24));
    }
}

#[test]
fn fp8_output_types_are_the_f32_result_rounded() {
    for f in fp8_formats() {
        for mma in [true, false] {
            output_types(f, &host_body(mma));
        }
    }
}

/// The format modules hold the quantizer and the f16 body; the sm_89 module the quantizer and
/// every format's e4m3 mma body, and only it uses the e4m3 mma.
#[test]
fn fp8_modules_hold_their_kernels() {
    for f in fp8_formats() {
        let name = f.desc().name;
        let ptx = qforge_cuda::module_ptx(name).expect("embedded").expect("inflates");
        for k in qforge_cuda::codegen::fp8_kernel_names(name) {
            assert!(ptx.contains(&format!(".entry {k}(")), "{name}: the PTX lacks {k}");
        }
        assert!(!ptx.contains(".e4m3"), "{name}: the sm_80 module has no fp8 mma");
    }
    let sm89 = qforge_cuda::sm89_ptx().expect("inflates");
    assert!(sm89.contains(".target sm_89"));
    for k in qforge_cuda::codegen::sm89_kernel_names() {
        assert!(sm89.contains(&format!(".entry {k}(")), "sm_89 module lacks {k}");
    }
    assert!(sm89.contains("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32"));
    assert!(sm89.contains("mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e4m3.f32"));
    let without = qforge_formats::registry().iter().filter(|f| qforge_cuda::codegen::fp8_gemm(f.desc()).is_none());
    assert!(without.into_iter().all(|f| qforge_cuda::codegen::fp8_kernel_names(f.desc().name).is_empty()));
}

/// Every instance, whole and split along K (the shapes that cross its tile edges, several
/// CTAs along N and M, K ranges of one block and of several, empty ranges past K's end),
/// against the CPU within the same bound, and split f16 / bf16 output the RNE of the split f32
/// result.
#[test]
fn fp8_every_instance_and_split_is_the_cpus_fp8_matmul() {
    use support::fp8_ref::check;
    let h = |f: &'static dyn qforge_core::Format| host_fp8::get(f.desc().name).expect("host wrappers");
    for f in fp8_formats() {
        for (tile, t) in qforge_tiling::FP8_GEMM_TILES.iter().enumerate() {
            let (tok, rows) = (t.tok as usize, t.rows as usize);
            for mma in [true, false] {
                for &(m, n, k, splits) in &[
                    (tok + 3, rows + 5, 300, 1),
                    (2 * tok + 1, 2 * rows + 1, 513, 3),
                    (5, 17, 1000, 4),
                    (3, rows, 128, 2),
                    (tok, 9, 4097, 16),
                ] {
                    let run = |w: &QuantTensor<'_>, x: &[f32], m: usize, out: DType| {
                        h(f).gemm_on(w, x, m, mma, out, tile, splits).unwrap()
                    };
                    check(f, &run, (m, n, k), f64::powi(2.0, -24));
                }
            }
        }
        // Split output types: one rounding of the f32 sum of the splits.
        let w = support::fp8_ref::weights(f, 70, 700, 5);
        let x = support::fp8_ref::activations(9, 700, 6);
        let y32 = h(f).gemm_on(&w, &x, 9, true, DType::F32, 0, 3).unwrap();
        let want: Vec<u8> = y32
            .chunks_exact(4)
            .flat_map(|b| half::bf16::from_f32(f32::from_le_bytes([b[0], b[1], b[2], b[3]])).to_le_bytes())
            .collect();
        assert_eq!(h(f).gemm_on(&w, &x, 9, true, DType::Bf16, 0, 3).unwrap(), want);
    }
}

/// The runtime launches each FP8 instance with exactly the shared memory its kernel lays out
/// (qforge-tiling's `fp8_smem_bytes` against `qf_fp8_cfg::SMEM_BYTES`): a smaller launch would
/// overrun it on the GPU, which no host check would see.
#[test]
fn fp8_launch_smem_is_the_kernels() {
    for (i, t) in qforge_tiling::FP8_GEMM_TILES.iter().enumerate() {
        assert_eq!(host_fp8::fp8_kernel_smem(i), Some(qforge_tiling::fp8_smem_bytes(t)), "{}", t.name());
    }
    assert_eq!(host_fp8::fp8_kernel_smem(qforge_tiling::FP8_GEMM_TILES.len()), None);
}
