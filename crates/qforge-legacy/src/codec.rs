//! The generic reference codec shared by all six formats: decode, ggml's `quantize_row_*_ref`
//! quantizers, the importance-weighted `quantize_row_*_impl` paths, and partial blocks.

use crate::block::{Kind, LegacyBlock, QK};
use qforge_core::le::F16Le;
use qforge_core::{Elem, OutRow};
use qforge_ggml_search::{
    AffineSearch, SymWeights, abs_max, importance_weights, make_qkx_quants, make_qx_quants, nearest_int, padded,
    sigma2, signed_absmax,
};
use qforge_simd::Tail;
use qforge_simd::half_lut::{CODES, Codes32, Fifth, GroupSink, Line, TableGroups, Tables, table};
use qforge_simd::i8_groups::I8Groups;

/// ggml's `(int8_t)v` / `(uint8_t)v` on x86-64: truncate toward zero through a 32-bit
/// conversion, where NaN and out-of-range values give `i32::MIN` (the "integer indefinite"
/// value of `cvttss2si`). Callers keep the low byte. Only reachable with scale overflow.
/// Written so that loops over it vectorize: Rust's `as` already gives `i32::MIN` below the
/// range (and 0 for NaN, which callers only use through its low byte, 0 either way), so only
/// values at or above 2^31 need a select. NaN is mapped to `i32::MIN` all the same.
#[inline(always)]
fn c_trunc(v: f32) -> i32 {
    let t = v as i32;
    if v >= 2_147_483_648.0 || v.is_nan() { i32::MIN } else { t }
}

/// [`c_trunc`] of every value of a block. Rust's saturating `as` does not vectorize on x86, so
/// when every `|v| < 2^22` (the usual case) the truncation is built from ggml's exact
/// round-to-nearest trick: `r = nearest_int(v)`, then one step toward zero where `r` lies
/// beyond `v`. Otherwise each value goes through [`c_trunc`].
#[inline(always)]
fn c_trunc_block(v: &[f32; QK]) -> [i32; QK] {
    #[cfg(target_arch = "x86_64")]
    if let Some(t) = crate::simd::trunc_in_range(v) {
        return t;
    }
    let small = v.iter().fold(true, |ok, x| ok & (x.abs() < 4_194_304.0));
    let mut t = [0i32; QK];
    if small {
        for (t, &x) in t.iter_mut().zip(v) {
            let r = nearest_int(x);
            let rf = r as f32;
            *t = r - i32::from((rf > x) & (x >= 0.0)) + i32::from((rf < x) & (x < 0.0));
        }
    } else {
        for (t, &x) in t.iter_mut().zip(v) {
            *t = c_trunc(x);
        }
    }
    t
}

/// `c_trunc(roundf(v))` of every value of a block without a libm call: C's `roundf` rounds
/// half away from zero and `v - trunc(v)` is exact, so the rounding is decided on that
/// fraction. Every `v` in range rounds to a value in range (f32 values near ±2^31 are
/// integers), so only out-of-range or NaN input takes the `i32::MIN` of [`c_trunc`].
#[inline(always)]
fn c_round_block(v: &[f32; QK]) -> [i32; QK] {
    let t = c_trunc_block(v);
    let mut r = [0i32; QK];
    for ((r, &t), &x) in r.iter_mut().zip(&t).zip(v) {
        let frac = x - t as f32;
        let up = t.wrapping_add(i32::from(frac >= 0.5)).wrapping_sub(i32::from(frac <= -0.5));
        *r = if (-2_147_483_648.0..2_147_483_648.0).contains(&x) { up } else { i32::MIN };
    }
    r
}

/// Lanes of the vectorizable reduction below.
const LANES: usize = 8;

/// `(min, max)` of finite non-empty `x` as ggml's sequential `if (v < min) min = v` /
/// `if (v > max) max = v` loop finds them: the value is order-independent, and of equal
/// values the first is kept, which only shows for a zero (`-0.0 == 0.0`), so a zero result
/// takes its sign from the first zero of `x`.
#[inline(always)]
fn min_max(x: &[f32]) -> (f32, f32) {
    let (mut lo, mut hi) = ([f32::MAX; LANES], [-f32::MAX; LANES]);
    let mut chunks = x.chunks_exact(LANES);
    for c in &mut chunks {
        for ((l, h), &v) in lo.iter_mut().zip(hi.iter_mut()).zip(c) {
            *l = if v < *l { v } else { *l };
            *h = if v > *h { v } else { *h };
        }
    }
    let (mut min, mut max) = (f32::MAX, -f32::MAX);
    for (l, h) in lo.into_iter().zip(hi).chain(chunks.remainder().iter().map(|&v| (v, v))) {
        min = if l < min { l } else { min };
        max = if h > max { h } else { max };
    }
    let first_zero = || x.iter().copied().find(|&v| v == 0.0).unwrap_or(0.0);
    if min == 0.0 {
        min = first_zero();
    }
    if max == 0.0 {
        max = first_zero();
    }
    (min, max)
}

/// The f32 values of one block, exactly as ggml's `dequantize_row_*`: `q·d` (symmetric) or
/// `q·d + m` (affine).
#[inline(always)]
fn decode_f32<B: LegacyBlock>(block: &B, y: &mut [f32; QK]) {
    let d = block.d();
    let q = block.quants();
    match B::KIND {
        Kind::Symmetric => {
            for (o, &q) in y.iter_mut().zip(&q) {
                *o = q as f32 * d;
            }
        }
        Kind::Affine => {
            let m = block.m();
            for (o, &q) in y.iter_mut().zip(&q) {
                *o = q as f32 * d + m;
            }
        }
    }
}

/// Decode one block into `out` (its first `out.len()` values).
#[inline]
pub(crate) fn decode<B: LegacyBlock, O: Elem>(block: &B, out: &mut [O]) {
    let mut y = [0f32; QK];
    decode_f32(block, &mut y);
    let n = out.len().min(QK);
    O::from_f32_slice(&y[..n], &mut out[..n]);
}

/// Blocks decoded per batch before an f16 / bf16 conversion.
const BATCH: usize = 8;

/// The table description (`qforge_simd::half_lut`) of the blocks with
/// [`LegacyBlock::TABLE_CODES`]: one group per block, the line `(c - offset)·d (+ m)` (a
/// table of it for 4-bit codes, the line itself for 5-bit ones), the
/// expression of `decode_f32` (`c - offset` is exact in f32, the quant it converts).
struct Groups<B>(std::marker::PhantomData<B>);

impl<B: LegacyBlock> TableGroups for Groups<B> {
    type Block = B;
    const BLOCK: usize = QK;
    /// f16 `d` and `m` times integer codes.
    const NEVER_SUBNORMAL: bool = true;

    #[inline(always)]
    fn groups(b: &B, mut f: impl GroupSink) {
        let Some(tc) = B::TABLE_CODES else { return };
        let (d, m, offset) = (b.d(), b.m(), tc.offset as f32);
        let codes = Codes32::SplitHalf((tc.qs)(b));
        // The line as a closure for the 4-bit table: built through `Line::at`, q4_0's bf16
        // rows ran at a third of the speed (not analysed further; the `Tail` is a value there).
        let value = |c: f32| match B::KIND {
            Kind::Symmetric => (c - offset) * d,
            Kind::Affine => (c - offset) * d + m,
        };
        match tc.qh {
            None => f.group(Tables::One(table(&CODES, value)), codes, Fifth::None),
            Some(qh) => {
                let tail = match B::KIND {
                    Kind::Symmetric => Tail::None,
                    Kind::Affine => Tail::Add(m),
                };
                f.group(Tables::Linear(Line { offset: tc.offset as u8, scale: d, tail }), codes, Fifth::Word(qh(b)))
            }
        }
    }
}

/// The [`qforge_simd::i8_groups`] description of the blocks with [`LegacyBlock::I8_VALUES`]:
/// one group per block, `q · d` (`decode_f32`'s product).
struct I8<B>(std::marker::PhantomData<B>);

impl<B: LegacyBlock> I8Groups for I8<B> {
    type Block = B;
    const BLOCK: usize = QK;

    #[inline(always)]
    fn groups(b: &B, mut f: impl FnMut([f32; 2], &[i8; 32])) {
        if let Some(values) = B::I8_VALUES {
            let d = b.d();
            f([d, d], values(b));
        }
    }
}

/// Decode a row of blocks: f32 in place; f16 / bf16 by table for the 4- and 5-bit formats, in
/// one pass for the 8-bit ones ([`I8`]), else (a format with neither) [`BATCH`] blocks at a
/// time through a stack buffer; a trailing partial block keeps its real elements.
#[inline(always)]
pub(crate) fn decode_row<B: LegacyBlock, O: Elem>(blocks: &[B], out: &mut [O]) {
    if let OutRow::F32(o) = O::out_row(out) {
        let mut chunks = o.chunks_exact_mut(QK);
        let mut used = 0;
        for (block, y) in blocks.iter().zip(&mut chunks) {
            decode_f32(block, y.try_into().expect("chunks_exact yields whole blocks"));
            used += 1;
        }
        let tail = chunks.into_remainder();
        if let (false, Some(block)) = (tail.is_empty(), blocks.get(used)) {
            decode(block, tail);
        }
        return;
    }
    if B::TABLE_CODES.is_some() && qforge_simd::half_lut::decode_row::<Groups<B>, O>(blocks, out) {
        return;
    }
    if B::I8_VALUES.is_some() {
        qforge_simd::i8_groups::decode_row::<I8<B>, O>(blocks, out);
        return;
    }
    let mut y = [0f32; QK * BATCH];
    for (group, dst) in blocks.chunks(BATCH).zip(out.chunks_mut(QK * BATCH)) {
        for (block, yb) in group.iter().zip(y.chunks_exact_mut(QK)) {
            decode_f32(block, yb.try_into().expect("chunks_exact yields whole blocks"));
        }
        O::from_f32_slice(&y[..dst.len()], dst);
    }
}

/// ggml's `sigma2 = Σx² / n` over a whole row, used to turn an imatrix into block weights.
#[inline]
pub(crate) fn row_sigma2(x: &[f32]) -> f32 {
    sigma2(x, x.len(), 1.0)
}

/// The importance weights ggml's `_impl` quantizers actually minimize with:
/// `imatrix[j] · sqrt(sigma2 + x[j]²)`. Missing weights count as 0.
#[inline(always)]
fn combined_weights(x: &[f32], imatrix: &[f32], sigma2: f32) -> [f32; QK] {
    let mut w = [0f32; QK];
    importance_weights(x, imatrix, sigma2, &mut w);
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
/// ggml picks `max` as the first element of largest magnitude (`+0.0` if all are zero).
/// Inlined so that the codes stay in registers instead of passing through a returned `Fit`.
#[inline(always)]
fn ref_offset(x: &[f32], nmax: i32) -> Fit {
    let (_, max) = signed_absmax(x);
    let d = max / -(nmax as f32);
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let bias = nmax as f32 + 0.5;
    // A whole block is read in place (no variable-length copy into a padded block).
    let mut v = match x.first_chunk::<QK>() {
        Some(full) => *full,
        None => padded::<QK>(x).0,
    };
    for v in &mut v {
        *v = *v * id + bias;
    }
    let mut q = c_trunc_block(&v);
    for q in &mut q {
        *q = i32::from(*q as i8).min(2 * nmax - 1) - nmax;
    }
    Fit { d, m: 0.0, q }
}

/// `quantize_row_q8_0_ref` / `q8_1_ref`: `d = amax / 127`, `q = roundf(x/d)`.
#[inline(always)]
fn ref_int8(x: &[f32]) -> Fit {
    let amax = abs_max(x);
    let d = amax / 127.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let mut v = padded::<QK>(x).0;
    for v in &mut v {
        *v *= id;
    }
    let mut q = c_round_block(&v);
    for q in &mut q {
        *q = i32::from(*q as i8);
    }
    Fit { d, m: 0.0, q }
}

/// `quantize_row_q4_1_ref` / `q5_1_ref`: `m = min`, `d = (max - min) / qmax`,
/// codes `trunc((x - min)/d + 0.5)` (at most `qmax` for every finite input).
#[inline(always)]
fn ref_affine(x: &[f32], qmax: i32) -> Fit {
    let (min, max) = min_max(x);
    let d = (max - min) / qmax as f32;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let mut v = padded::<QK>(x).0;
    for v in &mut v {
        *v = (*v - min) * id + 0.5;
    }
    let mut q = c_trunc_block(&v);
    for q in &mut q {
        *q = i32::from(*q as u8).min(qmax);
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

/// ggml's `make_qkx3_quants` parameters in `quantize_row_q4_1_impl` / `quantize_row_q5_1_impl`.
const WEIGHTED_AFFINE: AffineSearch = AffineSearch { rmin: -0.9, rdelta: 0.05, nstep: 36, use_mad: false };

/// Encode the real elements `x` (`1..=32` of them; more are ignored) of one block.
///
/// `weights` is `(imatrix, sigma2)`: the raw per-column importance of these elements and
/// ggml's row statistic `Σx²/n` of the row the block belongs to. Without weights (or for the
/// 8-bit formats) this is ggml's `quantize_row_*_ref`; with them, its `quantize_row_*_impl`.
/// Padded positions get the quant whose value is nearest 0 (exactly 0 for the symmetric
/// formats).
#[inline(always)]
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
            let d = make_qx_quants::<QK, i32>(x, half, &mut codes, SymWeights::Given(&w));
            Fit { d, m: 0.0, q: codes.map(|c| c - half) }
        }
        (Kind::Affine, _, Some((im, s2))) => {
            let w = combined_weights(x, im, s2);
            let mut q = [0; QK];
            // ggml returns the negated offset (`the_min`); negation is exact.
            let (d, the_min) = make_qkx_quants::<QK, i32>(x, &w, qmax, &mut q, WEIGHTED_AFFINE);
            Fit { d, m: -the_min, q }
        }
    };
    if n == 0 {
        fit = Fit { d: 0.0, m: 0.0, q: [0; QK] };
    }
    if n < QK {
        let pad = match B::KIND {
            Kind::Symmetric => 0,
            Kind::Affine => affine_zero_code(fit.d, fit.m, qmax),
        };
        fit.q[n..].fill(pad);
    }
    out.store(fit.d, fit.m, &fit.q);
}

/// Encode one row: like ggml's `quantize_<type>` for one row, `sigma2` is taken over the
/// whole row (its real elements), so rows of whole blocks match ggml byte for byte.
///
/// Compiled for AVX2 where the CPU has it ([`crate::simd::encode_row`]): the same operations
/// in the same order (Rust never fuses or reorders f32 arithmetic), so the same bytes.
pub(crate) fn encode_row<B: LegacyBlock>(x: &[f32], weights: Option<&[f32]>, blocks: &mut [B]) {
    #[cfg(target_arch = "x86_64")]
    if crate::simd::encode_row(x, weights, blocks) {
        return;
    }
    encode_row_portable(x, weights, blocks)
}

/// The body of [`encode_row`], inlined into each build of it.
#[inline(always)]
pub(crate) fn encode_row_portable<B: LegacyBlock>(x: &[f32], weights: Option<&[f32]>, blocks: &mut [B]) {
    let s2 = match weights {
        Some(_) if B::USES_WEIGHTS => row_sigma2(x),
        _ => 0.0,
    };
    for (i, (xs, block)) in x.chunks(QK).zip(blocks.iter_mut()).enumerate() {
        let w = weights.map(|w| (w.get(i * QK..).unwrap_or(&[]), s2));
        encode_block(xs, w, block);
    }
}

/// Encode one block on its own: `sigma2` is that of the block's real elements.
pub(crate) fn encode<B: LegacyBlock>(x: &[f32], weights: Option<&[f32]>, out: &mut B) {
    let s2 = if weights.is_some() && B::USES_WEIGHTS { row_sigma2(&x[..x.len().min(QK)]) } else { 0.0 };
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
        let s2 = row_sigma2(&x[..n]);
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

    #[test]
    fn block_trunc_and_round_match_c() {
        let special = [0.5f32, -0.5, 1.5, -1.5, 2.5, 0.49999997, -0.49999997, -0.7, 8.99, 126.5, -127.5];
        let more = [4194303.5f32, 4194304.0, -4194304.5, 8388607.5, 2147483520.0, 3e9, -3e9, f32::NAN];
        let mut s = 1u32;
        let mut next = |scale: f32| {
            s = s.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            if scale == 0.0 { f32::from_bits(s) } else { (s >> 8) as f32 / (1u32 << 24) as f32 * scale - scale / 2.0 }
        };
        for round in 0..20_000 {
            let mut v: [f32; QK] = std::array::from_fn(|_| next([40.0, 300.0, 0.0][round % 3]));
            v[..special.len()].copy_from_slice(&special);
            if round % 5 == 0 {
                v[QK - more.len()..].copy_from_slice(&more);
            }
            let (t, r) = (c_trunc_block(&v), c_round_block(&v));
            for (i, &x) in v.iter().enumerate() {
                assert_eq!(t[i], c_trunc(x), "trunc {x}");
                assert_eq!(r[i], c_trunc(x.round()), "round {x}");
            }
        }
    }

    proptest! {
        #[test]
        fn lane_reductions_match_ggml_loops(
            x in prop::collection::vec(prop_oneof![-3f32..3.0, Just(0.0), Just(-0.0)], 1..=32),
        ) {
            let (mut min, mut max) = (f32::MAX, -f32::MAX);
            let (mut amax, mut first) = (0f32, 0f32);
            for &v in &x {
                if v < min { min = v; }
                if v > max { max = v; }
                if amax < v.abs() { amax = v.abs(); first = v; }
            }
            let (lo, hi) = min_max(&x);
            prop_assert_eq!((lo.to_bits(), hi.to_bits()), (min.to_bits(), max.to_bits()));
            prop_assert_eq!(abs_max(&x).to_bits(), amax.to_bits());
            let f = ref_offset(&x, 8);
            prop_assert_eq!(f.d.to_bits(), (first / -8.0).to_bits());
        }
    }
}
