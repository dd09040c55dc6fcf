//! Integer dot products against q8_k activations (ggml's `ggml_vec_dot_q*_K_q8_K`), shared
//! by every super-block format dotted with q8_k: the K-quants here, q8_k itself (qforge's own
//! self-dot) and the ternary formats of `qforge-tq`.
//!
//! A format only says how to unpack one block ([`Q8KDot::unpack`]): its 256 signed integer
//! codes in element order and the integer scale (and min) of each 16-element group. The
//! kernel then computes per block, exactly in integers,
//!
//! ```text
//! isum  = Σ_g scale[g] · Σ_{i in g} code[i] · a.qs[i]
//! summs = Σ_g min[g] · a.bsums[g]                        (formats with mins)
//! sumf += (d·a.d)·isum − (dmin·a.d)·summs                (f32, once per block, as ggml)
//! ```
//!
//! Formats with 32-element sub-blocks (q4_k, q5_k) repeat each scale / min over its two
//! groups, which gives ggml's `m[j]·(bsums[2j] + bsums[2j+1])`. Scaling the codes before the
//! products (`|code·scale| ≤ 4096`, an `i16`) keeps the inner loop vertical: i16×i8 products
//! summed in 16 `i32` lanes over fixed-size arrays, no bounds checks, no per-group
//! horizontal sums.

use crate::QK_K;
use crate::q8k::BlockQ8K;
use qforge_core::BlockFormat;

/// Groups of 16 elements per super-block (one q8_k `bsums` entry each).
pub const GROUPS: usize = QK_K / 16;

/// The integer scale and min of each 16-element group of a block.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GroupScales {
    pub scales: [i16; GROUPS],
    /// Ignored unless [`Q8KDot::HAS_MINS`].
    pub mins: [i16; GROUPS],
}

impl GroupScales {
    /// Every scale 1, no mins (q8_k, the ternary formats).
    pub const ONES: GroupScales = GroupScales { scales: [1; GROUPS], mins: [0; GROUPS] };

    /// One scale (and min) per 32-element sub-block, each repeated over its two groups.
    #[inline(always)]
    pub fn per_32(scales: [u8; 8], mins: [u8; 8]) -> GroupScales {
        GroupScales {
            scales: std::array::from_fn(|g| i16::from(scales[g / 2])),
            mins: std::array::from_fn(|g| i16::from(mins[g / 2])),
        }
    }
}

/// A 256-element super-block format with ggml's integer dot against q8_k.
///
/// Codes and scales must be small enough that `|code · scale| < 2^15` (true of every ggml
/// format: at most 32 · 128).
pub trait Q8KDot: BlockFormat {
    /// Whether the format subtracts `dmin · Σ min[g]·bsums[g]`.
    const HAS_MINS: bool;

    /// The block's super-block scale `d` and min scale `dmin` (0 without mins), in f32.
    fn d_dmin(b: &Self::Block) -> (f32, f32);

    /// Writes the block's 256 signed integer codes, in element order, to `q` and returns the
    /// integer scale (and min) of each 16-element group: element `i` decodes (up to f32
    /// rounding) to `d·scale[i/16]·q[i] − dmin·min[i/16]`.
    fn unpack(b: &Self::Block, q: &mut [i8; QK_K]) -> GroupScales;
}

/// `Σ_g scale[g] · Σ_{i in g} q[i]·a[i]`, exact (`|result| ≤ 256 · 2^15 · 128 < 2^31`).
///
/// The portable kernel; [`crate::simd`] has an AVX2 one with the same (exact) result.
#[inline(always)]
pub(crate) fn scaled_isum(q: &[i8; QK_K], a: &[i8; QK_K], scales: &[i16; GROUPS]) -> i32 {
    let mut acc = [0i32; 16];
    for ((q, a), &s) in q.chunks_exact(16).zip(a.chunks_exact(16)).zip(scales) {
        for ((acc, &q), &a) in acc.iter_mut().zip(q).zip(a) {
            *acc += i32::from(i16::from(q) * s) * i32::from(a);
        }
    }
    acc.iter().sum()
}

/// ggml's `vec_dot` of a row of `F` blocks with a row of q8_k blocks (`w.len() == a.len()`,
/// checked by the caller).
///
/// Runs the AVX2 kernel where the CPU has it (checked once, in the crate's private `simd` module), the portable
/// one elsewhere. Both compute the same integer `isum` per block and the same f32 operations
/// in the same order, so the result is bit-identical either way.
#[inline]
pub fn q8k_vec_dot<F: Q8KDot>(w: &[F::Block], a: &[BlockQ8K]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if let Some(sumf) = crate::simd::q8k_vec_dot::<F>(w, a) {
        return sumf;
    }
    q8k_vec_dot_with::<F>(w, a, scaled_isum)
}

/// The body of [`q8k_vec_dot`], with the block's integer sum computed by `isum` (one of the
/// [`scaled_isum`] kernels).
#[inline(always)]
pub(crate) fn q8k_vec_dot_with<F: Q8KDot>(
    w: &[F::Block],
    a: &[BlockQ8K],
    isum: impl Fn(&[i8; QK_K], &[i8; QK_K], &[i16; GROUPS]) -> i32,
) -> f32 {
    let mut sumf = 0.0f32;
    let mut q = [0i8; QK_K];
    for (w, a) in w.iter().zip(a) {
        let g = F::unpack(w, &mut q);
        let isum = isum(&q, &a.qs, &g.scales) as f32;
        let (d, dmin) = F::d_dmin(w);
        let ad = a.d.get();
        sumf += if F::HAS_MINS {
            let summs: i32 = g.mins.iter().zip(&a.bsums).map(|(&m, s)| i32::from(m) * i32::from(s.get())).sum();
            (d * ad) * isum - (dmin * ad) * summs as f32
        } else {
            (d * ad) * isum
        };
    }
    sumf
}

/// The codes of a 2-bit code plane (q2_k, q3_k's low bits), in element order: element
/// `128h + 32k + l` is `qs[32h + l] >> 2k & 3`, passed through `f(4h + k, l, code)`.
#[inline(always)]
pub(crate) fn unpack_2bit(qs: &[u8; QK_K / 4], q: &mut [i8; QK_K], f: impl Fn(usize, usize, u8) -> i8) {
    for (h, (qh, src)) in q.chunks_exact_mut(128).zip(qs.chunks_exact(32)).enumerate() {
        for (k, plane) in qh.chunks_exact_mut(32).enumerate() {
            for (l, (q, &b)) in plane.iter_mut().zip(src).enumerate() {
                *q = f(4 * h + k, l, b >> (2 * k) & 3);
            }
        }
    }
}

/// Implements `NativeDot` with q8_k activations through [`q8k_vec_dot`] for each format.
#[macro_export]
macro_rules! q8k_native_dot {
    ($($fmt:ty),+ $(,)?) => {$(
        impl qforge_core::NativeDot for $fmt {
            type Act = $crate::Q8K;

            fn vec_dot(w: &[<Self as qforge_core::BlockFormat>::Block], a: &[$crate::BlockQ8K]) -> f32 {
                $crate::dot::q8k_vec_dot::<Self>(w, a)
            }
        }
    )+};
}
