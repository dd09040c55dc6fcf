//! The int8 GEMM's reference (`kernels-cuda/gemm_q8.cuh`), shared by the host check
//! (`gemmq8_host.rs`) and the GPU test (`device/gemm.rs`): the CPU's own `--act-quant native`
//! mat-mul (`qforge_cpu::matmul` with `ActQuant::Native`: ggml's q8_0 / q8_1 / q8_k
//! activations and integer dot). The GEMM quantizes the activations exactly as the CPU does,
//! so the two differ only in the order of their f32 sums: per output, at most
//! `4 · (K/32 + 16) · 2⁻²⁴ · S`, where S = Σ over 32-element sub-blocks of the sub-block's
//! largest |weight| × Σ |activation| (a bound on every partial term, the affine ones'
//! `d·Σ` and `m·s` included), plus one rounding of the output type.

use super::gemm_ref::{EDGE_SHAPES, KS, MS, NS, out_eps, out_tiny, widen};
use qforge_core::{DType, Format, OutRow, QuantTensor};
use qforge_cpu::{ActQuant, QuantAct};

/// The GEMM under test: `(weights, activations, m, out)` → m × N values of `out`, as
/// little-endian bytes.
pub type Q8Gemm<'a> = &'a dyn Fn(&QuantTensor<'_>, &[f32], usize, DType) -> Vec<u8>;

/// The registered formats whose modules have the int8 GEMM (from the registry's data).
pub fn q8_formats() -> Vec<&'static dyn Format> {
    qforge_formats::registry().iter().filter(|f| qforge_cuda::codegen::q8_gemm(f.desc())).collect()
}

/// `m` rows of `k` activations, row r scaled by 1 + r mod 5 and shifted by r mod 3 − 1 (so
/// sub-block sums of both signs and sizes occur).
pub fn activations(m: usize, k: usize, seed: u64) -> Vec<f32> {
    let mut x = qforge_golden::signal(m * k, seed);
    for (r, row) in x.chunks_exact_mut(k).enumerate() {
        let (scale, shift) = ((1 + r % 5) as f32, (r % 3) as f32 - 1.0);
        row.iter_mut().for_each(|v| *v = *v * scale + shift);
    }
    x
}

/// One shape against the CPU's native mat-mul within the bound above.
pub fn check(f: &'static dyn Format, gemm: Q8Gemm<'_>, (m, n, k): (usize, usize, usize), out: DType) {
    let seed = (m * 1_000_003 + n * 1009 + k) as u64;
    let w = super::weights(f, n, k, seed);
    let x = activations(m, k, seed ^ 0x5eed);
    let cpu = qforge_cpu::matmul(&w, &x, m, ActQuant::Native).unwrap();
    let got = widen(&gemm(&w, &x, m, out), out);
    assert_eq!(got.len(), m * n);
    // |w| and |a| in f64: the Rust decode of the weights, the CPU's quantized activations.
    let kind = ActQuant::Native.kind(f);
    let padded = f.desc().padded_cols(k).unwrap();
    let wd: Vec<f64> = w
        .rows_data()
        .chunks_exact(f.row_bytes(k).unwrap())
        .flat_map(|row| {
            let mut v = vec![0f32; k];
            f.dequant_row(row, OutRow::F32(&mut v)).unwrap();
            v.into_iter().map(|v| f64::from(v.abs()))
        })
        .collect();
    let ad: Vec<f64> = x
        .chunks_exact(k)
        .flat_map(|r| {
            QuantAct::new(kind, r, padded).unwrap().dequantize().into_iter().take(k).map(|v| f64::from(v.abs()))
        })
        .collect();
    let eps = 4.0 * (k.div_ceil(32) + 16) as f64 * 2f64.powi(-24);
    for r in 0..m {
        for c in 0..n {
            let (wr, ar) = (&wd[c * k..(c + 1) * k], &ad[r * k..(r + 1) * k]);
            let s: f64 = wr
                .chunks(32)
                .zip(ar.chunks(32))
                .map(|(w, a)| w.iter().fold(0f64, |x, &y| x.max(y)) * a.iter().sum::<f64>())
                .sum();
            let want = f64::from(cpu[r * n + c]);
            let tol = eps * s + out_eps(out) * (want.abs() + eps * s) + out_tiny(out) + 1e-30;
            let g = got[r * n + c];
            assert!(
                (g - want).abs() <= tol,
                "{} q8 -> {out:?} M={m} N={n} K={k}: y[{r}][{c}] = {g}, the CPU's native mat-mul {want} (bound S {s})",
                f.desc().name
            );
        }
    }
}

/// Every shape of the grid (`KS` × `NS` × `MS`), f32 output.
pub fn odd_shapes(f: &'static dyn Format, gemm: Q8Gemm<'_>) {
    for k in KS {
        for n in NS {
            for m in MS {
                check(f, gemm, (m, n, k), DType::F32);
            }
        }
    }
}

/// f16 and bf16 output on the edge-crossing shapes.
pub fn other_types(f: &'static dyn Format, gemm: Q8Gemm<'_>) {
    for out in [DType::F16, DType::Bf16] {
        for shape in EDGE_SHAPES {
            check(f, gemm, shape, out);
        }
    }
}
