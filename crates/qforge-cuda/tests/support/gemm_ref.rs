//! The fused GEMM's reference, shared by the host check (`gemm_host.rs`) and the GPU test
//! (`device/gemm.rs`): the CPU dequantization of the weights, weights and activations rounded
//! to the tensor-core input type (f16 / bf16, round to nearest even, with `half`), products
//! summed in f64; and the odd shapes every format runs.

use qforge_core::{DType, Format, QuantTensor};

/// The shapes of the issue: K, N and M off every tile and block boundary.
pub const KS: [usize; 7] = [1, 33, 100, 128, 257, 288, 4097];
pub const NS: [usize; 3] = [1, 7, 129];
pub const MS: [usize; 5] = [1, 9, 17, 100, 257];

fn round_to(v: f32, mma: DType) -> f64 {
    match mma {
        DType::F16 => f64::from(half::f16::from_f32(v).to_f32()),
        DType::Bf16 => f64::from(half::bf16::from_f32(v).to_f32()),
        DType::F32 => f64::from(v),
    }
}

pub fn widen(bytes: &[u8], out: DType) -> Vec<f64> {
    match out {
        DType::F32 => bytes.chunks_exact(4).map(|b| f64::from(f32::from_le_bytes(b.try_into().unwrap()))).collect(),
        DType::F16 => {
            bytes.chunks_exact(2).map(|b| f64::from(half::f16::from_le_bytes([b[0], b[1]]).to_f32())).collect()
        }
        DType::Bf16 => {
            bytes.chunks_exact(2).map(|b| f64::from(half::bf16::from_le_bytes([b[0], b[1]]).to_f32())).collect()
        }
    }
}

/// Absolute rounding of a tiny output value stored as `out` (half of f16's smallest subnormal).
pub fn out_tiny(out: DType) -> f64 {
    if out == DType::F16 { 2f64.powi(-25) } else { 0.0 }
}

/// Relative rounding of one output value stored as `out`.
pub fn out_eps(out: DType) -> f64 {
    match out {
        DType::F32 => 0.0,
        DType::F16 => 2f64.powi(-11),
        DType::Bf16 => 2f64.powi(-8),
    }
}

/// Σ a·b and Σ |a·b| in f64, eight lanes (vectorizes: the reference is most of the time).
fn dot_abs(a: &[f64], b: &[f64]) -> (f64, f64) {
    let (mut s, mut t) = ([0f64; 8], [0f64; 8]);
    let (ac, at) = a.as_chunks::<8>();
    let (bc, bt) = b.as_chunks::<8>();
    for (x, y) in ac.iter().zip(bc) {
        for l in 0..8 {
            let p = x[l] * y[l];
            s[l] += p;
            t[l] += p.abs();
        }
    }
    for (l, (x, y)) in at.iter().zip(bt).enumerate() {
        s[l] += x * y;
        t[l] += (x * y).abs();
    }
    (s.iter().sum(), t.iter().sum())
}

/// The GEMM under test: `(weights, activations, m, mma, out)` → m × N values of `out`, as
/// little-endian bytes.
pub type Gemm<'a> = &'a dyn Fn(&QuantTensor<'_>, &[f32], usize, DType, DType) -> Vec<u8>;

/// How the GEMM under test sums: the fused kernel's known order, or any order (cuBLAS).
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// k16 steps, at most 16 roundings inside one.
    Fused,
    /// Any summation tree: the textbook bound, (K − 1) roundings.
    Any,
    /// The fused order in each of this many K ranges, then one f32 sum of the ranges.
    Split(usize),
}

/// Checks one shape against the f64 reference; panics with the first wrong output.
fn check(
    f: &'static dyn Format,
    gemm: Gemm<'_>,
    (m, n, k): (usize, usize, usize),
    mma: DType,
    out: DType,
    order: Order,
) {
    let name = f.desc().name;
    let seed = (m * 1_000_003 + n * 1009 + k) as u64;
    let w = super::weights(f, n, k, seed);
    let wd: Vec<f64> = qforge_cpu::dequantize(&w).unwrap().iter().map(|&v| round_to(v, mma)).collect();
    let x = qforge_golden::signal(m * k, seed ^ 0x5eed);
    let xd: Vec<f64> = x.iter().map(|&v| round_to(v, mma)).collect();
    let y = widen(&gemm(&w, &x, m, mma, out), out);
    assert_eq!(y.len(), m * n);
    // f32 accumulation: at most 16 roundings inside a k16 step and one per step (2x margin,
    // since the tensor cores add in their own order); in any order, at most K − 1 roundings.
    let acc_eps = match order {
        Order::Fused => (16 + k.div_ceil(16)) as f64 * 2f64.powi(-23),
        Order::Any => (16 + k) as f64 * 2f64.powi(-23),
        Order::Split(s) => (16 + k.div_ceil(16) + s) as f64 * 2f64.powi(-23),
    };
    for r in 0..m {
        for c in 0..n {
            let (sum, abs) = dot_abs(&xd[r * k..(r + 1) * k], &wd[c * k..(c + 1) * k]);
            let got = y[r * n + c];
            let tol = acc_eps * abs + out_eps(out) * (sum.abs() + acc_eps * abs) + out_tiny(out) + 1e-30;
            assert!(
                (got - sum).abs() <= tol,
                "{name} gemm {mma:?}->{out:?} M={m} N={n} K={k}: y[{r}][{c}] = {got}, reference {sum} (Σ|terms| {abs})"
            );
        }
    }
}

/// Edge-crossing shapes (M, N, K) for the other input / output types.
pub const EDGE_SHAPES: [(usize, usize, usize); 5] =
    [(17, 7, 33), (100, 129, 257), (9, 1, 4097), (257, 7, 128), (1, 129, 1)];

/// Every (tensor-core input, output) pair besides (f16, f32).
const OTHER_TYPES: [(DType, DType); 5] = [
    (DType::Bf16, DType::F32),
    (DType::F16, DType::F16),
    (DType::F16, DType::Bf16),
    (DType::Bf16, DType::Bf16),
    (DType::Bf16, DType::F16),
];

/// Every shape of the grid (`KS` × `NS` × `MS`), f16 inputs, f32 output.
pub fn odd_shapes(f: &'static dyn Format, gemm: Gemm<'_>) {
    for k in KS {
        for n in NS {
            for m in MS {
                check(f, gemm, (m, n, k), DType::F16, DType::F32, Order::Fused);
            }
        }
    }
}

/// The other input / output types on the edge-crossing shapes.
pub fn other_types(f: &'static dyn Format, gemm: Gemm<'_>) {
    for (mma, out) in OTHER_TYPES {
        for shape in EDGE_SHAPES {
            check(f, gemm, shape, mma, out, Order::Fused);
        }
    }
}

/// Split-k with `splits` K ranges on the edge-crossing shapes (some with fewer k-steps than
/// splits: empty ranges), f16 → f32 and bf16 → bf16.
#[allow(dead_code)] // not every test binary uses every case list
pub fn split_k(f: &'static dyn Format, gemm: Gemm<'_>, splits: usize) {
    for (mma, out) in [(DType::F16, DType::F32), (DType::Bf16, DType::Bf16)] {
        for shape in EDGE_SHAPES {
            check(f, gemm, shape, mma, out, Order::Split(splits));
        }
    }
}

/// One fused GEMM instance on the edge-crossing shapes, every (input, output) pair, K cut
/// into `splits` ranges.
#[allow(dead_code)] // not every test binary uses every case list
pub fn instance(f: &'static dyn Format, gemm: Gemm<'_>, splits: usize) {
    for (mma, out) in std::iter::once((DType::F16, DType::F32)).chain(OTHER_TYPES) {
        for shape in EDGE_SHAPES {
            check(f, gemm, shape, mma, out, Order::Split(splits));
        }
    }
}

/// Shapes whose grid holds several CTAs along N and M (the skinny instances' 256-row CTAs and
/// the large tiled one's 128 × 128: the edge shapes fit one or two), each with partial edges,
/// and K over many 256-element phases.
pub const MULTI_CTA_SHAPES: [(usize, usize, usize); 3] = [(40, 600, 1000), (64, 513, 300), (3, 257, 4100)];

/// One fused GEMM instance on [`MULTI_CTA_SHAPES`], f16 → f32 and bf16 → bf16, K cut into
/// `splits` ranges.
#[allow(dead_code)] // used by the host tests only
pub fn multi_cta(f: &'static dyn Format, gemm: Gemm<'_>, splits: usize) {
    for (mma, out) in [(DType::F16, DType::F32), (DType::Bf16, DType::Bf16)] {
        for shape in MULTI_CTA_SHAPES {
            check(f, gemm, shape, mma, out, Order::Split(splits));
        }
    }
}

/// Every input type (f32 included: the exact path) × every output type on the
/// edge-crossing shapes, summed in any order: the dequant + cuBLAS GEMM.
#[allow(dead_code)] // used by the GPU test only
pub fn every_type_any_order(f: &'static dyn Format, gemm: Gemm<'_>) {
    for input in DType::ALL {
        for out in DType::ALL {
            for shape in EDGE_SHAPES {
                check(f, gemm, shape, input, out, Order::Any);
            }
        }
    }
}
