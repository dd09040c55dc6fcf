//! The generic reference codec shared by all six formats: decode, ggml's `quantize_row_*_ref`
//! quantizers, the importance-weighted `quantize_row_*_impl` paths, and partial blocks.

use crate::block::{Kind, LegacyBlock, QK};
use crate::search::{make_qkx3_quants, make_qx_quants};
use qforge_core::Elem;
use qforge_core::le::F16Le;

/// ggml's `(int8_t)v` / `(uint8_t)v` on x86-64: truncate toward zero through a 32-bit
/// conversion, where NaN and out-of-range values give `i32::MIN` (the "integer indefinite"
/// value of `cvttss2si`). Callers keep the low byte. Only reachable with scale overflow.
#[inline(always)]
fn c_trunc(v: f32) -> i32 {
    if v.is_nan() || !(-2_147_483_648.0..2_147_483_648.0).contains(&v) { i32::MIN } else { v as i32 }
}

/// Decode one block: `q·d` (symmetric) or `q·d + m` (affine), in f32, exactly as ggml.
#[inline]
pub(crate) fn decode<B: LegacyBlock, O: Elem>(block: &B, out: &mut [O]) {
    let d = block.d();
    let q = block.quants();
    match B::KIND {
        Kind::Symmetric => {
            for (o, &q) in out.iter_mut().zip(&q) {
                *o = O::from_f32(q as f32 * d);
            }
        }
        Kind::Affine => {
            let m = block.m();
            for (o, &q) in out.iter_mut().zip(&q) {
                *o = O::from_f32(q as f32 * d + m);
            }
        }
    }
}

/// Decode a row of blocks; a trailing partial block goes through a stack buffer.
pub(crate) fn decode_row<B: LegacyBlock, O: Elem>(blocks: &[B], out: &mut [O]) {
    for (block, dst) in blocks.iter().zip(out.chunks_mut(QK)) {
        if dst.len() == QK {
            decode(block, dst);
        } else {
            let mut tmp = [O::default(); QK];
            decode(block, &mut tmp);
            dst.copy_from_slice(&tmp[..dst.len()]);
        }
    }
}

/// ggml's `sigma2 = Σx² / n` over a whole row, used to turn an imatrix into block weights.
pub(crate) fn sigma2(x: &[f32]) -> f32 {
    let sum_x2 = x.iter().fold(0f32, |s, &v| s + v * v);
    if x.is_empty() { 0.0 } else { sum_x2 / x.len() as f32 }
}

/// The importance weights ggml's `_impl` quantizers actually minimize with:
/// `imatrix[j] · sqrt(sigma2 + x[j]²)`. Missing weights count as 0.
fn combined_weights(x: &[f32], imatrix: &[f32], sigma2: f32) -> [f32; QK] {
    let mut w = [0f32; QK];
    for ((wj, &xj), &qj) in w.iter_mut().zip(x).zip(imatrix) {
        *wj = qj * (sigma2 + xj * xj).sqrt();
    }
    w
}

/// Result of quantizing the real elements of one block (quants in the decode domain).
struct Fit {
    d: f32,
    m: f32,
    q: [i32; QK],
}

/// `quantize_row_q4_0_ref` / `q5_0_ref`: `d = max / -nmax` where `max` is the value of
/// largest magnitude, codes `min(2·nmax-1, trunc(x/d + nmax + 0.5))`.
fn ref_offset(x: &[f32], nmax: i32) -> Fit {
    let (mut amax, mut max) = (0f32, 0f32);
    for &v in x {
        if amax < v.abs() {
            amax = v.abs();
            max = v;
        }
    }
    let d = max / -(nmax as f32);
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let bias = nmax as f32 + 0.5;
    let mut q = [0; QK];
    for (q, &v) in q.iter_mut().zip(x) {
        let code = i32::from(c_trunc(v * id + bias) as i8).min(2 * nmax - 1);
        *q = code - nmax;
    }
    Fit { d, m: 0.0, q }
}

/// `quantize_row_q8_0_ref` / `q8_1_ref`: `d = amax / 127`, `q = roundf(x/d)`.
fn ref_int8(x: &[f32]) -> Fit {
    let amax = x.iter().fold(0f32, |a, &v| if a > v.abs() { a } else { v.abs() });
    let d = amax / 127.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let mut q = [0; QK];
    for (q, &v) in q.iter_mut().zip(x) {
        *q = i32::from(c_trunc((v * id).round()) as i8);
    }
    Fit { d, m: 0.0, q }
}

/// `quantize_row_q4_1_ref` / `q5_1_ref`: `m = min`, `d = (max - min) / qmax`,
/// codes `trunc((x - min)/d + 0.5)` (at most `qmax` for every finite input).
fn ref_affine(x: &[f32], qmax: i32) -> Fit {
    let (mut min, mut max) = (f32::MAX, -f32::MAX);
    for &v in x {
        if v < min {
            min = v;
        }
        if v > max {
            max = v;
        }
    }
    let d = (max - min) / qmax as f32;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let mut q = [0; QK];
    for (q, &v) in q.iter_mut().zip(x) {
        *q = i32::from(c_trunc((v - min) * id + 0.5) as u8).min(qmax);
    }
    Fit { d, m: min, q }
}

/// The affine code whose decoded value (with the stored f16 `d` and `m`) is nearest 0;
/// the lowest such code on ties.
fn affine_zero_code(d: f32, m: f32, qmax: i32) -> i32 {
    let (d, m) = (F16Le::from_f32(d).get(), F16Le::from_f32(m).get());
    let mut best = (0, f32::INFINITY);
    for c in 0..=qmax {
        let e = (c as f32 * d + m).abs();
        if e < best.1 {
            best = (c, e);
        }
    }
    best.0
}

/// Encode the real elements `x` (`1..=32` of them; more are ignored) of one block.
///
/// `weights` is `(imatrix, sigma2)`: the raw per-column importance of these elements and
/// ggml's row statistic `Σx²/n` of the row the block belongs to. Without weights (or for the
/// 8-bit formats) this is ggml's `quantize_row_*_ref`; with them, its `quantize_row_*_impl`.
/// Padded positions get the quant whose value is nearest 0 (exactly 0 for the symmetric
/// formats).
pub(crate) fn encode_block<B: LegacyBlock>(x: &[f32], weights: Option<(&[f32], f32)>, out: &mut B) {
    let n = x.len().min(QK);
    let x = &x[..n];
    let half = 1i32 << (B::BITS - 1);
    let qmax = (1i32 << B::BITS) - 1;
    let weights = weights.filter(|_| B::USES_WEIGHTS && n > 0);
    let mut fit = match (B::KIND, B::BITS, weights) {
        (Kind::Symmetric, 8, _) => ref_int8(x),
        (Kind::Symmetric, _, None) => ref_offset(x, half),
        (Kind::Affine, _, None) => ref_affine(x, qmax),
        (Kind::Symmetric, _, Some((im, s2))) => {
            let w = combined_weights(x, im, s2);
            let mut codes = [0; QK];
            let d = make_qx_quants(x, &w, half, &mut codes);
            Fit { d, m: 0.0, q: codes.map(|c| c - half) }
        }
        (Kind::Affine, _, Some((im, s2))) => {
            let w = combined_weights(x, im, s2);
            let mut q = [0; QK];
            let (d, m) = make_qkx3_quants(x, &w, qmax, (-0.9, 0.05, 36), &mut q);
            Fit { d, m, q }
        }
    };
    if n == 0 {
        fit = Fit { d: 0.0, m: 0.0, q: [0; QK] };
    }
    let pad = match B::KIND {
        Kind::Symmetric => 0,
        Kind::Affine => affine_zero_code(fit.d, fit.m, qmax),
    };
    fit.q[n..].fill(pad);
    out.store(fit.d, fit.m, &fit.q);
}

/// Encode one row: like ggml's `quantize_<type>` for one row, `sigma2` is taken over the
/// whole row (its real elements), so rows of whole blocks match ggml byte for byte.
pub(crate) fn encode_row<B: LegacyBlock>(x: &[f32], weights: Option<&[f32]>, blocks: &mut [B]) {
    let s2 = match weights {
        Some(_) if B::USES_WEIGHTS => sigma2(x),
        _ => 0.0,
    };
    for (i, (xs, block)) in x.chunks(QK).zip(blocks.iter_mut()).enumerate() {
        let w = weights.map(|w| (w.get(i * QK..).unwrap_or(&[]), s2));
        encode_block(xs, w, block);
    }
}

/// Encode one block on its own: `sigma2` is that of the block's real elements.
pub(crate) fn encode<B: LegacyBlock>(x: &[f32], weights: Option<&[f32]>, out: &mut B) {
    let s2 = if weights.is_some() && B::USES_WEIGHTS { sigma2(&x[..x.len().min(QK)]) } else { 0.0 };
    encode_block(x, weights.map(|w| (w, s2)), out);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block::{BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1};
    use proptest::prelude::*;

    /// With importance weights, a partial block of `n` real elements encodes exactly like the
    /// full block padded with copies of `x[0]` of weight 0 under the same `sigma2`, except
    /// that the padded quants are the ones nearest 0.
    fn check<B: LegacyBlock + PartialEq + std::fmt::Debug>(
        x: &[f32],
        w: &[f32],
        n: usize,
    ) -> Result<(), TestCaseError> {
        let s2 = sigma2(&x[..n]);
        let mut part = B::zeroed();
        encode_block(&x[..n], Some((&w[..n], s2)), &mut part);
        let (mut xf, mut wf) = ([x[0]; QK], [0f32; QK]);
        xf[..n].copy_from_slice(&x[..n]);
        wf[..n].copy_from_slice(&w[..n]);
        let mut full = B::zeroed();
        encode_block(&xf, Some((&wf, s2)), &mut full);
        prop_assert_eq!(part.d().to_bits(), full.d().to_bits());
        prop_assert_eq!(part.m().to_bits(), full.m().to_bits());
        prop_assert_eq!(&part.quants()[..n], &full.quants()[..n]);
        let pad = match B::KIND {
            Kind::Symmetric => 0,
            Kind::Affine => affine_zero_code(part.d(), part.m(), (1 << B::BITS) - 1),
        };
        prop_assert!(part.quants()[n..].iter().all(|&q| q == pad));
        Ok(())
    }

    proptest! {
        #[test]
        fn weighted_partial_blocks_use_real_elements_only(
            x in prop::collection::vec(-3f32..3.0, 32), w in prop::collection::vec(0f32..5.0, 32), n in 1usize..=32,
        ) {
            check::<BlockQ4_0>(&x, &w, n)?;
            check::<BlockQ4_1>(&x, &w, n)?;
            check::<BlockQ5_0>(&x, &w, n)?;
            check::<BlockQ5_1>(&x, &w, n)?;
        }
    }

    #[test]
    fn c_trunc_mimics_x86_conversion() {
        assert_eq!(c_trunc(8.99), 8);
        assert_eq!(c_trunc(-0.7), 0);
        assert_eq!(c_trunc(f32::NAN), i32::MIN);
        assert_eq!(c_trunc(3e9), i32::MIN);
        assert_eq!(c_trunc(-3e9), i32::MIN);
    }
}
