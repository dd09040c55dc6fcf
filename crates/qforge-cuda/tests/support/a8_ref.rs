//! The A8 GEMM's reference (`kernels-cuda/gemm8.cuh`), shared by the host check
//! (`gemm8_host.rs`) and the GPU test (`gemm8_device.rs`): the CPU's own
//! `--act-quant int8-dyn` mat-mul (`qforge_cpu::matmul` with `ActQuant::Int8Dyn`), which the
//! GEMM must reproduce bit for bit (same integer group sums, same f32 operations in the
//! same order), rounded once to the output type.

use super::gemm_ref::{EDGE_SHAPES, KS, MS, NS};
use qforge_core::{DType, Format, Params, QuantTensor};
use qforge_cpu::ActQuant;

/// The GEMM under test: `(weights, activations, m, out)` → m × N values of `out`, as
/// little-endian bytes.
pub type A8Gemm<'a> = &'a dyn Fn(&QuantTensor<'_>, &[f32], usize, DType) -> Vec<u8>;

/// The registered formats whose modules have the A8 GEMM (from the registry's data).
pub fn a8_formats() -> Vec<&'static dyn Format> {
    let out: Vec<_> = qforge_formats::registry().iter().filter(|f| qforge_cuda::codegen::a8_gemm(f.desc())).collect();
    assert!(!out.is_empty(), "int4g has an integer group dot and device code");
    out
}

/// Every variant of `f` the CPU side accepts: each group size (powers of two up to 8192)
/// × each scale dtype that `with_params` takes, the registered one first.
pub fn variants(f: &'static dyn Format) -> Vec<&'static dyn Format> {
    let mut out = vec![f];
    for g in (0..14).map(|e| 1usize << e) {
        for dt in DType::ALL {
            if let Ok(v) = f.with_params(&Params { group_size: Some(g), scale_dtype: Some(dt) })
                && !out.iter().any(|o| o.layout() == v.layout())
            {
                out.push(v);
            }
        }
    }
    out
}

/// `m` rows of `k` activations: row r shifted by 2·(r mod 3 − 1), so that rows of mostly
/// negative, centered and mostly positive values (zero points at both ends) all occur.
fn activations(m: usize, k: usize, seed: u64) -> Vec<f32> {
    let mut x = qforge_golden::signal(m * k, seed);
    for (r, row) in x.chunks_exact_mut(k).enumerate() {
        let shift = 2.0 * ((r % 3) as f32 - 1.0);
        row.iter_mut().for_each(|v| *v += shift);
    }
    x
}

fn to_bytes(y: &[f32], out: DType) -> Vec<u8> {
    y.iter()
        .flat_map(|&v| match out {
            DType::F32 => v.to_le_bytes().to_vec(),
            DType::F16 => half::f16::from_f32(v).to_le_bytes().to_vec(),
            DType::Bf16 => half::bf16::from_f32(v).to_le_bytes().to_vec(),
        })
        .collect()
}

/// One shape against the CPU, bit for bit; panics with the first differing output.
pub fn check(f: &'static dyn Format, gemm: A8Gemm<'_>, (m, n, k): (usize, usize, usize), out: DType) {
    let seed = (m * 1_000_003 + n * 1009 + k) as u64;
    let w = super::weights(f, n, k, seed);
    let x = activations(m, k, seed ^ 0x5eed);
    let cpu = qforge_cpu::matmul(&w, &x, m, ActQuant::Int8Dyn).unwrap();
    let want = to_bytes(&cpu, out);
    let got = gemm(&w, &x, m, out);
    assert_eq!(got.len(), want.len());
    let e = out.size();
    if let Some(i) = (0..m * n).find(|i| got[i * e..(i + 1) * e] != want[i * e..(i + 1) * e]) {
        panic!(
            "{} {:?} a8 -> {out:?} M={m} N={n} K={k}: y[{}][{}] bytes {:?}, the CPU's int8-dyn mat-mul {:?} ({})",
            f.desc().name,
            f.layout(),
            i / n,
            i % n,
            &got[i * e..(i + 1) * e],
            &want[i * e..(i + 1) * e],
            cpu[i]
        );
    }
}

/// Every shape of the grid (K × N × M), f32 output.
pub fn odd_shapes(f: &'static dyn Format, gemm: A8Gemm<'_>) {
    for k in KS {
        for n in NS {
            for m in MS {
                check(f, gemm, (m, n, k), DType::F32);
            }
        }
    }
}

/// Every variant × every output type on the edge-crossing shapes.
pub fn every_variant(f: &'static dyn Format, gemm: A8Gemm<'_>) {
    let vs = variants(f);
    assert!(vs.len() >= 24, "{}: the CPU side takes 8 group sizes × 3 scale dtypes", f.desc().name);
    for v in vs {
        for out in DType::ALL {
            for shape in EDGE_SHAPES {
                check(v, gemm, shape, out);
            }
        }
    }
}
