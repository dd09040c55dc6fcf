//! The FP8 GEMM's reference (`kernels-cuda/gemm_fp8.cuh`), shared by the host check
//! (`gemm_fp8_host.rs`) and the GPU test (`device/gemm.rs`): the CPU's own
//! `--act-quant fp8-1x128` mat-mul (`qforge_cpu::matmul` with `ActQuant::Fp8x128`).
//!
//! Tolerance. The products e4m3 × e4m3 / e5m2 are exact in f32 (at most 4 × 4 significant
//! bits), both sides quantize the activations to the same codes and scales (checked bit for
//! bit by the quantizer test), and the promotion `acc += (partial · s_w) · s_a` is the same
//! f32 operations in the same block order. Only the order in which a block's ≤ 128 products
//! are summed differs (the CPU: 16 lanes then the lanes; the tensor core: its own). Each
//! side's partial is within `127 · u_p · S_b` of the exact block sum (`S_b` = Σ|products| of
//! the block, `u_p` the unit roundoff of the partial sums), so they differ by at most
//! `2 · 128 · u_p · S_b`; scaled by `s_w · s_a` (two roundings, `2u` relative each side) and
//! added into the accumulator (one rounding per block, each at most `u · Σ|terms|` apart), the
//! outputs differ by at most `(256 · u_p + (2 · blocks + 8) · u) · Σ_k |w_k · a_k|` with
//! `u = 2⁻²⁴`, the terms taken with their scales. On the host `u_p = u`. On a GPU the fp8
//! tensor cores keep fewer accumulator bits (about 14, the reason DeepGEMM promotes every
//! 128), so the device test takes `u_p = 2⁻¹³`; the f16 body accumulates in full f32.

use super::gemm_ref::{EDGE_SHAPES, KS, MS, NS};
use qforge_core::{DType, Format, QuantTensor, Shape};
use qforge_cpu::{ActQuant, QuantAct};

/// The GEMM under test: `(weights, activations, m, out)` → m × N values of `out`, as
/// little-endian bytes.
pub type Fp8Gemm<'a> = &'a dyn Fn(&QuantTensor<'_>, &[f32], usize, DType) -> Vec<u8>;

/// The registered formats with the FP8 GEMM (from the registry's data).
pub fn fp8_formats() -> Vec<&'static dyn Format> {
    let out: Vec<_> =
        qforge_formats::registry().iter().filter(|f| qforge_cuda::codegen::fp8_gemm(f.desc()).is_some()).collect();
    assert!(out.len() >= 2, "fp8_e4m3 and fp8_e5m2 are grid formats with 1 × 128 fp8 activations");
    out
}

/// `m` rows of `k` activations with magnitudes over several binades and an all-zero 128-column
/// group in row 1 (scale 1).
pub fn activations(m: usize, k: usize, seed: u64) -> Vec<f32> {
    let mut x = qforge_golden::signal(m * k, seed);
    for (r, row) in x.chunks_exact_mut(k).enumerate() {
        let gain = [1.0, 0.01, 30.0, 1e-3][r % 4];
        row.iter_mut().for_each(|v| *v *= gain);
        if r == 1 {
            row[..k.min(128)].fill(0.0);
        }
    }
    x
}

/// The weights of one case: seeded gaussian-like values, rows of several magnitudes so that
/// the 128-row scale bands differ.
pub fn weights(f: &'static dyn Format, n: usize, k: usize, seed: u64) -> QuantTensor<'static> {
    let mut w = qforge_golden::signal(n * k, seed);
    for (r, row) in w.chunks_exact_mut(k).enumerate() {
        let gain = 1.0 + (r / 128) as f32 * 7.0;
        row.iter_mut().for_each(|v| *v *= gain);
    }
    qforge_cpu::quantize(f, Shape::new([n, k]).unwrap(), &w, None).unwrap()
}

/// `Σ_k |w_k · a_k|` per output, from the dequantized weights and activations (f64).
pub fn abs_terms(w: &QuantTensor<'_>, x: &[f32], m: usize) -> Vec<f64> {
    let (n, k) = (w.rows(), w.cols());
    let wd: Vec<f32> = qforge_cpu::dequantize(w).unwrap();
    let mut out = vec![0f64; m * n];
    for r in 0..m {
        let a = QuantAct::new(ActQuant::Fp8x128.kind(w.format()), &x[r * k..(r + 1) * k], k).unwrap().dequantize();
        for c in 0..n {
            out[r * n + c] = wd[c * k..(c + 1) * k].iter().zip(&a).map(|(&w, &a)| (w as f64 * a as f64).abs()).sum();
        }
    }
    out
}

/// One shape, f32 output, against the CPU within the bound above with partial-sum roundoff
/// `u_p`; panics with the first output outside it.
pub fn check(f: &'static dyn Format, gemm: Fp8Gemm<'_>, (m, n, k): (usize, usize, usize), u_p: f64) {
    let seed = (m * 1_000_003 + n * 1009 + k) as u64;
    let w = weights(f, n, k, seed);
    let x = activations(m, k, seed ^ 0xf8);
    let cpu = qforge_cpu::matmul(&w, &x, m, ActQuant::Fp8x128).unwrap();
    let got = gemm(&w, &x, m, DType::F32);
    assert_eq!(got.len(), 4 * m * n);
    let terms = abs_terms(&w, &x, m);
    let u = f64::powi(2.0, -24);
    let blocks = k.div_ceil(128) as f64;
    for (i, (g, want)) in got.chunks_exact(4).zip(&cpu).enumerate() {
        let g = f32::from_le_bytes([g[0], g[1], g[2], g[3]]);
        let tol = (256.0 * u_p + (2.0 * blocks + 8.0) * u) * terms[i];
        assert!(
            (g as f64 - *want as f64).abs() <= tol,
            "{} M={m} N={n} K={k}: y[{}][{}] = {g:e}, the CPU's fp8-1x128 mat-mul {want:e} (tolerance {tol:e})",
            f.desc().name,
            i / n,
            i % n
        );
    }
}

/// Every shape of the grid (K × N × M), f32 output.
pub fn odd_shapes(f: &'static dyn Format, gemm: Fp8Gemm<'_>, u_p: f64) {
    for k in KS {
        for n in NS {
            for m in MS {
                check(f, gemm, (m, n, k), u_p);
            }
        }
    }
}

/// f16 / bf16 output on the edge-crossing shapes: the round-to-nearest-even of the same
/// GEMM's f32 output, bit for bit (one conversion in the epilogue).
pub fn output_types(f: &'static dyn Format, gemm: Fp8Gemm<'_>) {
    for (m, n, k) in EDGE_SHAPES {
        let w = weights(f, n, k, 3);
        let x = activations(m, k, 4);
        let y32: Vec<f32> =
            gemm(&w, &x, m, DType::F32).chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
        let want16: Vec<u8> = y32.iter().flat_map(|&v| half::f16::from_f32(v).to_le_bytes()).collect();
        let want_b: Vec<u8> = y32.iter().flat_map(|&v| half::bf16::from_f32(v).to_le_bytes()).collect();
        assert_eq!(gemm(&w, &x, m, DType::F16), want16, "{} f16 M={m} N={n} K={k}", f.desc().name);
        assert_eq!(gemm(&w, &x, m, DType::Bf16), want_b, "{} bf16 M={m} N={n} K={k}", f.desc().name);
    }
}
