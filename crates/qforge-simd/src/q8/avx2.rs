//! AVX2 kernel of [`super::vec_dot`] / [`super::vec_dot_rows`], run where [`Avx2::detect`]
//! finds AVX2, FMA and F16C; everything else runs [`super::vec_dot_portable`].
//!
//! Per 32-element unit, as ggml's AVX2 kernels do:
//!
//! * the codes become one register of 32 bytes: nibbles split with a shift and an AND (the
//!   5th bit spread from `qh`), nvfp4's 8-byte halves interleaved back into element order,
//!   1-bit codes selecting one of two bytes, 2-bit codes with one variable shift per 32-bit
//!   lane and a byte shuffle into element order. Bits become bytes with
//!   [`select_bytes`]: ggml's `bytes_from_bits_32` on AVX2, a mask register (`kmovd` +
//!   `vpblendmb`) in the VNNI kernel;
//! * codes become values with a subtraction ([`Values::Offset`]) or one `vpshufb` of the
//!   table ([`Values::Table`]);
//! * against the activations: unsigned codes multiply them directly with `vpmaddubsw`;
//!   signed values use the sign trick `maddubs(|a|, w·sgn(a))`, exact for every `i8`
//!   activation, -128 included (`|a|` is read unsigned, `|w| ≤ 127`, a pair is at most
//!   2·128·127); `vpmaddwd` with ones then gives the 8 lanes of [`super::isum_lanes`].
//!   8-bit weights ([`Values::Signed8`]) use the sign trick too, with the side that holds no
//!   -128 as the one whose signs are applied (`maddubs(|a|, w·sgn a)` is wrong only where
//!   `w = -128`, `maddubs(|w|, a·sgn w)` only where `a = -128`): the side shared by the call's
//!   rows is checked once per call ([`SignTrick`]); where both hold a -128 the unit is widened
//!   to `i16` and `vpmaddwd`-ed, the pair sums added into the same lanes (`vphaddd`), exact;
//! * mat-vec ([`vec_dot_weight_rows`]) of formats whose values are `u − z` with small unsigned
//!   `u` ([`offset_form`]: q4_0, q5_0, q1_0, q2_0, mxfp4, nvfp4) skips the sign trick:
//!   `vpmaddubsw(u, a) − vpmaddubsw(z, a)`, the second term once per activation row
//!   ([`OFFSET`]), the same exact pair sums, with the activation scales widened there too
//!   (`PreBatch`);
//! * the lanes go to f32 (exact) and are fused-multiply-added with the unit's scale into its
//!   accumulator. Eight units' f16 scales are widened at once (`vcvtph2ps`): widened one by
//!   one, the f16 load picks up a false dependency on an accumulator register.
//!
//! Where the CPU has 256-bit VNNI ([`VnniYmm`]: AVX-VNNI or AVX-512 VNNI), the same body is
//! compiled again (`rows_vnni` in the EVEX form, `rows_avxvnni` in the VEX one) with the unit
//! products of `isum_dp`: `vpdpbusd` sums four `u8 × i8` products into
//! each `i32` lane exactly, one instruction for `vpmaddubsw` + `vpmaddwd`, and for the
//! unsigned form it starts from the negated correction lanes, so `u·a − z·a` is one
//! instruction too. Same lanes, same bits; the tests force every level.
//!
//! The lanes and every f32 operation are the portable kernel's, in the same order, so both
//! give the same bits. Several rows ([`vec_dot_rows`]) share each unit's unpacking, up to
//! [`crate::rows::MAX_ROWS`] per pass, their accumulators in registers.
#![allow(unsafe_code)]

use std::arch::x86_64::*;

use super::{ACCS, BATCH, Codes, LANES, Q8Act, Q8Weight, QK8, Scale, Values, finish, supported};
use crate::bytemask::select_bytes;
use crate::rows::{RowKernel, by_rows};
use crate::vnni::{EVEX, Form, NONE, VEX, VnniYmm, dpbusd};
use crate::{Avx2, Vnni};

/// [`super::vec_dot`] with AVX2, or `None` where the CPU lacks it.
#[inline]
pub(super) fn vec_dot<W: Q8Weight, A: Q8Act>(w: &[W], a: &[A]) -> Option<f32> {
    let avx2 = Avx2::detect()?;
    let n = w.len().min(a.len() / W::UNITS);
    let (w, a) = (&w[..n], &a[..n * W::UNITS]);
    let sign = if no_min_acts::<W, A>(a) { SignTrick::Acts } else { SignTrick::for_weights(w) };
    Some(Kernel { w, m: n * W::UNITS, sign, _avx2: avx2, vnni: VnniYmm::detect() }.rows([&a])[0])
}

/// [`super::vec_dot_weight_rows`] with AVX2 (`w.len() == out.len() · n`, checked by the
/// caller): the rows one after another, the activation row checked once for all of them;
/// `false` (nothing written) where the CPU lacks it.
pub(super) fn vec_dot_weight_rows<W: Q8Weight, A: Q8Act>(w: &[W], n: usize, a: &[A], out: &mut [f32]) -> bool {
    let Some(avx2) = Avx2::detect() else {
        return false;
    };
    let n = n.max(1);
    let m = (a.len() / W::UNITS).min(n);
    let a = &a[..m * W::UNITS];
    let vnni = VnniYmm::detect();
    if let Some(z) = const { offset_form::<W>() } {
        // SAFETY: the `Avx2` token proves AVX2 and F16C (all `offset_corrections` needs).
        let pre = unsafe { offset_corrections(a, z, vnni.is_some()) };
        for (o, w) in out.iter_mut().zip(w.chunks_exact(n)) {
            // SAFETY: the `Avx2` token proves AVX2, FMA and F16C, and `vnni` (where `Some`)
            // the features of its VNNI form; `W` has an unsigned form (`offset_form`) and
            // `pre` is `a`'s corrections for its `z` in the form the chosen kernel takes, one
            // batch per batch of `a` (the tail batch's zero padding included), as `OFFSET`
            // requires.
            *o = unsafe { rows_at::<W, A, 1, OFFSET>(vnni, &w[..m], [a], [&pre]) }[0];
        }
        return true;
    }
    let sign = if no_min_acts::<W, A>(a) { SignTrick::Acts } else { SignTrick::Widen };
    for (o, w) in out.iter_mut().zip(w.chunks_exact(n)) {
        // A short activation row truncates every weight row.
        *o = Kernel { w: &w[..m], m: m * W::UNITS, sign, _avx2: avx2, vnni }.rows([&a])[0];
    }
    true
}

/// The unsigned form of `W`'s values, where it has one: `v = u − z` for every value, with
/// `z` and every `u` in `0..=127`, so `vpmaddubsw(u, a)` is exact for every `i8` activation
/// (a pair is at most 2·127·128 in magnitude) and `vpmaddubsw(u, a) − vpmaddubsw(z, a)` is
/// the exact pair sum of `v·a` (`|v| ≤ 127`: it fits `i16`, so the wrapping subtraction is
/// exact). `Some(z)` for offset codes (q4_0, q5_0: codes of at most 5 bits) and for tables
/// whose entries span at most 127 (q1_0, q2_0, mxfp4, nvfp4; not iq4_nl's).
pub(super) const fn offset_form<W: Q8Weight>() -> Option<u8> {
    match W::VALUES {
        Values::Offset(k) if k >= 0 && k <= 96 => Some(k as u8),
        Values::Table(t) => {
            let (mut lo, mut hi, mut i) = (0i16, 0i16, 0);
            while i < 16 {
                let v = t[i] as i16;
                if v < lo {
                    lo = v;
                }
                if v > hi {
                    hi = v;
                }
                i += 1;
            }
            if hi - lo <= 127 { Some((-lo) as u8) } else { None }
        }
        _ => None,
    }
}

/// The table `W`'s codes look up in the kernel: its [`Values::Table`] as it is, or (for the
/// [`OFFSET`] products `P`) shifted by the unsigned form's `z` ([`offset_form`]).
const fn kernel_table<W: Q8Weight, const P: u8>() -> [i8; 16] {
    let mut t = match W::VALUES {
        Values::Table(t) => t,
        _ => [0; 16],
    };
    if P == OFFSET {
        let z = match offset_form::<W>() {
            Some(z) => z as i8,
            None => 0,
        };
        let mut i = 0;
        while i < 16 {
            t[i] += z;
            i += 1;
        }
    }
    t
}

/// What a mat-vec call computes once per batch of activation units and shares with every
/// weight row ([`OFFSET`] only): the units' offset corrections and f32 scales.
#[derive(Clone, Copy)]
struct PreBatch {
    /// `vpmaddubsw(z, a)` of each unit: the part of its pair sums that the [`OFFSET`]
    /// products subtract. For the VNNI kernel, the negated `i32` lanes of the same products
    /// instead (`−Σ₄ z·a`, exact: `|·| ≤ 4·96·128`), which its `vpdpbusd` starts from.
    corr: [__m256i; BATCH],
    /// The units' scales `d_a`, widened from f16 (exact).
    d: __m256,
}

/// [`PreBatch`] of every batch of [`BATCH`] activation units of `a`, the last one filled up
/// with zero units (what the tail's zero units give: corrections 0, scales +0): computed
/// once per activation row and shared by all weight rows of a mat-vec call.
///
/// # Safety
/// The CPU must have AVX2 and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
unsafe fn offset_corrections<A: Q8Act>(a: &[A], z: u8, vnni: bool) -> Vec<PreBatch> {
    let zv = _mm256_set1_epi8(z as i8);
    let zero = PreBatch { corr: [_mm256_setzero_si256(); BATCH], d: _mm256_setzero_ps() };
    let mut pre = vec![zero; a.len().div_ceil(BATCH)];
    for (p, a) in pre.iter_mut().zip(a.chunks(BATCH)) {
        let mut bits = [0u16; BATCH];
        for ((c, b), a) in p.corr.iter_mut().zip(&mut bits).zip(a) {
            // SAFETY: `qs()` is `&[i8; 32]`: the unaligned 32-byte load reads exactly the array.
            let av = unsafe { _mm256_loadu_si256(a.qs().as_ptr().cast()) };
            *c = _mm256_maddubs_epi16(zv, av);
            if vnni {
                let lanes = _mm256_madd_epi16(*c, _mm256_set1_epi16(1));
                *c = _mm256_sub_epi32(_mm256_setzero_si256(), lanes);
            }
            *b = a.d_bits();
        }
        p.d = widen(bits);
    }
    pre
}

/// How the kernel multiplies 8-bit weights ([`Values::Signed8`]) with the activations; all
/// three give the same exact lanes. (Other formats' values are never -128 and always take
/// `|a|`.)
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SignTrick {
    /// Neither side is known to be free of -128: both widened to `i16`.
    Widen,
    /// No weight is -128: `maddubs(|a|, w·sgn a)`.
    Weights,
    /// No activation is -128: `maddubs(|w|, a·sgn w)`.
    Acts,
}

impl SignTrick {
    /// [`SignTrick::Weights`] where the weight row holds no -128 (or is not 8-bit), else
    /// [`SignTrick::Widen`].
    fn for_weights<W: Q8Weight>(w: &[W]) -> SignTrick {
        let free = W::VALUES != Values::Signed8
            || w.iter().all(|b| {
                (0..W::UNITS).all(|u| match b.codes(u) {
                    Codes::Bytes(q) => !has_min(q),
                    _ => true,
                })
            });
        if free { SignTrick::Weights } else { SignTrick::Widen }
    }
}

/// Whether no activation quant of `a` is -128, for 8-bit weights `W` (`false` for others:
/// they never look).
fn no_min_acts<W: Q8Weight, A: Q8Act>(a: &[A]) -> bool {
    W::VALUES == Values::Signed8 && a.iter().all(|b| !has_min(b.qs()))
}

/// Whether one of the 32 quants is -128 (a branch-free OR over the block, which LLVM
/// vectorizes: `contains` calls `memchr` per block, which cost half the mat-vec).
#[inline]
pub(super) fn has_min(q: &[i8; QK8]) -> bool {
    q.iter().fold(false, |m, &x| m | (x == i8::MIN))
}

/// [`super::vec_dot_rows`] with AVX2 (`out.len() == a.len()`, checked by the caller);
/// `false` (nothing written) where the CPU lacks it.
pub(super) fn vec_dot_rows<W: Q8Weight, A: Q8Act>(w: &[W], a: &[&[A]], out: &mut [f32]) -> bool {
    let Some(avx2) = Avx2::detect() else {
        return false;
    };
    let n = w.len();
    if a.iter().any(|a| a.len() / W::UNITS < n) {
        // A short activation row truncates the weight row for that row alone: row by row.
        for (o, a) in out.iter_mut().zip(a) {
            *o = vec_dot(w, a).unwrap_or_default();
        }
        return true;
    }
    let k = Kernel { w, m: n * W::UNITS, sign: SignTrick::for_weights(w), _avx2: avx2, vnni: VnniYmm::detect() };
    by_rows(&k, a, out);
    true
}

/// [`super::vec_dot_tile`] with AVX2; `false` (nothing written) where the CPU lacks it or an
/// activation row is shorter than a weight row.
pub(super) fn vec_dot_tile<W: Q8Weight, A: Q8Act>(
    w: &[W],
    n: usize,
    a: &[&[A]],
    out: &mut [f32],
    stride: usize,
) -> bool {
    let Some(avx2) = Avx2::detect() else {
        return false;
    };
    let m = n * W::UNITS;
    if n == 0 || a.iter().any(|a| a.len() < m) {
        return false;
    }
    let (vnni, vnni512) = (VnniYmm::detect(), Vnni::detect());
    // AVX-512 VNNI, a non-affine format and enough activation rows: 16 weight rows a row per
    // lane, each unit decoded once for all of them.
    if let Some(v) = vnni512
        && a.len() >= super::tile_vnni::MIN_ROWS
        && super::tile_vnni::tile(w, n, a, out, stride, v)
    {
        return true;
    }
    // Below AVX-512 VNNI (or an affine format there, which its tile refuses: then the row
    // kernels): each weight row decoded once for all activation rows, unless one of them
    // holds a -128.
    if vnni512.is_none() && a.len() >= super::tile_avx2::MIN_ROWS && super::tile_avx2::tile(w, n, a, out, stride, avx2)
    {
        return true;
    }
    // 8-bit weights: no activation of the tile is -128, so every weight row may take the
    // activations' signs (checked once here, not once per weight row and eight rows).
    if let Some(z) = const { offset_form::<W>() } {
        // As mat-vec: each activation row's offset corrections once, for every weight row.
        // SAFETY: the `Avx2` token proves AVX2 and F16C (all `offset_corrections` needs).
        let pre: Vec<Vec<PreBatch>> =
            a.iter().map(|a| unsafe { offset_corrections(&a[..m], z, vnni.is_some()) }).collect();
        let rows: Vec<(&[A], &[PreBatch])> = a.iter().zip(&pre).map(|(a, p)| (&a[..m], &p[..])).collect();
        for (i, w) in w.chunks_exact(n).enumerate() {
            by_rows(&OffsetKernel { w, _avx2: avx2, vnni }, &rows, &mut out[i * stride..][..a.len()]);
        }
        return true;
    }
    let acts_free = a.iter().all(|a| no_min_acts::<W, A>(&a[..m]));
    for (i, w) in w.chunks_exact(n).enumerate() {
        let sign = if acts_free { SignTrick::Acts } else { SignTrick::for_weights(w) };
        by_rows(&Kernel { w, m, sign, _avx2: avx2, vnni }, a, &mut out[i * stride..][..a.len()]);
    }
    true
}

/// The weight row, the activation blocks it pairs with (`m`), how 8-bit weights are
/// multiplied (`sign`: true of every row the kernel is given), the proof of AVX2 and, where
/// the VNNI kernel may run, the proof of that.
struct Kernel<'w, W> {
    w: &'w [W],
    m: usize,
    sign: SignTrick,
    _avx2: Avx2,
    vnni: Option<VnniYmm>,
}

impl<'a, W: Q8Weight, A: Q8Act> RowKernel<&'a [A]> for Kernel<'_, W> {
    #[inline]
    fn rows<const R: usize>(&self, a: [&&'a [A]; R]) -> [f32; R] {
        let a = a.map(|a| &a[..self.m]);
        // SAFETY: `self` holds an `Avx2` token, which exists only where the CPU has AVX2, FMA
        // and F16C, all `rows_avx2` needs, and a `VnniYmm` token where it has the features of
        // that VNNI form besides; `self.sign` holds for `w` and every row of `a` (its
        // constructors check).
        unsafe {
            match (W::VALUES, self.sign) {
                // `WIDEN` has no VNNI form: the AVX2 kernel, its scales read as `rows_at` decides.
                (Values::Signed8, SignTrick::Widen) => rows_at::<W, A, R, WIDEN>(None, self.w, a, [&[]; R]),
                (Values::Signed8, SignTrick::Acts) => rows_at::<W, A, R, ABS_W>(self.vnni, self.w, a, [&[]; R]),
                _ => rows_at::<W, A, R, ABS_A>(self.vnni, self.w, a, [&[]; R]),
            }
        }
    }
}

/// A weight row of a format with an unsigned form ([`offset_form`]) against rows that come
/// with their [`offset_corrections`] ([`OFFSET`]), the proof of AVX2 and, where the VNNI kernel
/// may run, of that.
struct OffsetKernel<'w, W> {
    w: &'w [W],
    _avx2: Avx2,
    vnni: Option<VnniYmm>,
}

impl<'a, W: Q8Weight, A: Q8Act> RowKernel<(&'a [A], &'a [PreBatch])> for OffsetKernel<'_, W> {
    #[inline]
    fn rows<const R: usize>(&self, a: [&(&'a [A], &'a [PreBatch]); R]) -> [f32; R] {
        let (mut rows, mut pre): ([&[A]; R], [&[PreBatch]; R]) = ([&[]; R], [&[]; R]);
        for ((r, p), a) in rows.iter_mut().zip(pre.iter_mut()).zip(a) {
            (*r, *p) = *a;
        }
        // SAFETY: `self` holds an `Avx2` token (AVX2, FMA and F16C, all `rows_avx2` needs) and
        // a `VnniYmm` token where it has the features of that VNNI form besides; `W` has an
        // unsigned form and each row's corrections are its own, for that form's `z`, in the
        // form the chosen kernel takes (`vec_dot_tile` computes them so), as `OFFSET` requires.
        unsafe { rows_at::<W, A, R, OFFSET>(self.vnni, self.w, rows, pre) }
    }
}

/// The row kernel of the VNNI form `vnni` (`rows_vnni`, `rows_avxvnni`), or `rows_avx2`
/// without one.
///
/// # Safety
/// The CPU has AVX2, FMA and F16C, and the features of `vnni`'s form where it is `Some` (the
/// token says so); `P`'s conditions hold for `w`, `a` and `pre`, as `rows_avx2` requires.
#[inline(always)]
unsafe fn rows_at<W: Q8Weight, A: Q8Act, const R: usize, const P: u8>(
    vnni: Option<VnniYmm>,
    w: &[W],
    a: [&[A]; R],
    pre: [&[PreBatch]; R],
) -> [f32; R] {
    // SAFETY: the caller's contract.
    unsafe {
        if R > 1 || scales_from_memory() {
            rows_in::<W, A, R, P, true>(vnni, w, a, pre)
        } else {
            rows_in::<W, A, R, P, false>(vnni, w, a, pre)
        }
    }
}

/// [`rows_at`] with the kernels' `MEM` chosen.
///
/// # Safety
/// As [`rows_at`].
#[inline(always)]
unsafe fn rows_in<W: Q8Weight, A: Q8Act, const R: usize, const P: u8, const MEM: bool>(
    vnni: Option<VnniYmm>,
    w: &[W],
    a: [&[A]; R],
    pre: [&[PreBatch]; R],
) -> [f32; R] {
    // SAFETY: the caller's contract.
    unsafe {
        match vnni.map(VnniYmm::form) {
            Some(EVEX) => rows_vnni::<W, A, R, P, MEM>(w, a, pre),
            Some(_) => rows_avxvnni::<W, A, R, P, MEM>(w, a, pre),
            None => rows_avx2::<W, A, R, P, MEM>(w, a, pre),
        }
    }
}

/// Whether a one-row kernel (mat-vec) broadcasts its units' scales from memory, as the
/// several-row kernels always do (the kernels' `MEM`), rather than picking each lane out of
/// a register: on Intel's cores, where those picks (`vmovshdup`, `vshufps`, `vpermpd`,
/// `vextractf128`: two per unit) share the one 256-bit shuffle port with the codes'
/// `vpshufb`. Mat-vec 4096², median of 5 alternated on an Intel Xeon (family 6 model 167),
/// memory against registers at AVX2: q4_1 +6 %, q5_1 +6 %, q4_0 +4 %, iq4_nl +3 %, q1_0 +3 %;
/// at AVX-512 VNNI q5_1 +8 %, iq4_nl +7 %, q4_0 −3 %. On AMD Zen 4 (two shuffle ports) the
/// registers had measured 3–13 % faster, so AMD keeps them.
fn scales_from_memory() -> bool {
    qforge_core::cpu::intel()
}

/// [`isum`]'s products, by [`SignTrick`]: `maddubs(|a|, w·sgn a)` (every format but the
/// 8-bit one, where no weight is -128).
const ABS_A: u8 = 0;
/// `maddubs(|w|, a·sgn w)` (8-bit weights, no activation is -128).
const ABS_W: u8 = 1;
/// Both sides widened to `i16` (8-bit weights).
const WIDEN: u8 = 2;
/// `vpmaddubsw(u, a) − pre` with the unsigned form `u` of the weights ([`offset_form`]) and
/// `pre = vpmaddubsw(z, a)` precomputed per activation unit ([`offset_corrections`]): no
/// sign work per weight row (mat-vec).
const OFFSET: u8 = 3;

/// Defines a row kernel `$name` (the body below) compiled with `$features` and its unit
/// products from [`isum`], or from [`isum_dp`] in VNNI form `$form`: one body for the AVX2 and
/// the VNNI kernels.
macro_rules! rows_kernel {
    ($(#[$doc:meta])* $name:ident, $features:literal, $form:expr, $mask:literal) => {
        $(#[$doc])*
        #[target_feature(enable = $features)]
        fn $name<W: Q8Weight, A: Q8Act, const R: usize, const P: u8, const MEM: bool>(
    w: &[W],
    a: [&[A]; R],
    pre: [&[PreBatch]; R],
) -> [f32; R] {
    const { assert!(supported::<W>() && BATCH == 8 && ACCS == 2 && LANES == 8 && R >= 1) };
    // (`OFFSET` is instantiated for every `W` but only called where `offset_form` is `Some`.)
    debug_assert!(P != OFFSET || offset_form::<W>().is_some());
    let per = BATCH / W::UNITS;
    let table = value_table::<W, P>();
    let zero_pre = [_mm256_setzero_si256(); BATCH];
    let mut acc = [[_mm256_setzero_ps(); ACCS]; R];
    // Affine formats: `[·, m·s]` pairs of units 0..4 and 4..8 of every batch, summed.
    let mut summs = [[_mm256_setzero_ps(); 2]; R];
    // One batch: `per` blocks `w` (the first at a multiple of `per` in the row) against the
    // BATCH activation units `a[r]`; unit `j` of the batch is unit `j` mod BATCH of the row,
    // so its accumulator is `j % 2` and its affine slot `j`. (A macro, not a function:
    // `#[inline(always)]` is not allowed with `#[target_feature]`, and the accumulators must
    // stay in registers.)
    macro_rules! batch {
        ($w:expr, $a:expr, $k:expr) => {{
            let (w, a): (&[W], [&[A; BATCH]; R]) = ($w, $a);
            // The batch's offset corrections (row `r`'s batch `$k`), used by `OFFSET` only.
            let mut pk = [&zero_pre; R];
            if P == OFFSET {
                for (p, pre) in pk.iter_mut().zip(&pre) {
                    *p = &pre[$k].corr;
                }
            }
            // Per row and unit: `d_a·d_w` (f16 weight scales), else `d_a` alone.
            let mut d = [[0f32; BATCH]; R];
            if W::AFFINE {
                // `d, m` (weights) and `d, s` (q8_1) are adjacent f16 pairs: one product
                // gives `[d_w·d_a, m_w·s_a]` per unit.
                let wp = weight_pairs(w);
                let wv = [widen_pairs(wp[0]), widen_pairs(wp[1])];
                for r in 0..R {
                    let ap = act_pairs(a[r]);
                    let mut dm = [[0f32; BATCH]; 2];
                    for h in 0..2 {
                        let v = _mm256_mul_ps(wv[h], widen_pairs(ap[h]));
                        // SAFETY: `dm[h]` is 8 f32, exactly 32 bytes: the store writes only it.
                        unsafe { _mm256_storeu_ps(dm[h].as_mut_ptr(), v) };
                        // Odd lanes: slots 4h..4h+4 of the m·s sums (even lanes are not read).
                        summs[r][h] = _mm256_add_ps(summs[r][h], v);
                    }
                    let [e, o] = dm;
                    d[r] = [e[0], e[2], e[4], e[6], o[0], o[2], o[4], o[6]];
                }
            } else {
                let wd = match W::SCALE {
                    Scale::F16 => Some(weight_scales(w)),
                    _ => None,
                };
                for ((d, a), pre) in d.iter_mut().zip(a).zip(&pre) {
                    let ad = if P == OFFSET { pre[$k].d } else { widen(act_d_bits(a)) };
                    let v = match wd {
                        Some(wd) => _mm256_mul_ps(wd, ad),
                        None => ad,
                    };
                    // SAFETY: `d` is 8 f32, exactly 32 bytes: the unaligned store writes only it.
                    unsafe { _mm256_storeu_ps(d.as_mut_ptr(), v) };
                }
            }
            // With `MEM`, each unit's scale broadcast from memory (`vbroadcastss`, one load):
            // LLVM otherwise forwards the stores above and picks each lane out of the
            // registers with two or three shuffles per row and unit (`MEM` is the callers'
            // choice: always with several rows, mat-mul +5–12 % on Zen 4; with one row,
            // mat-vec, where `scales_from_memory` says).
            let d = if MEM { std::hint::black_box(&d) } else { &d };
            // Units in pairs, `h` = 0 / 1 the accumulator: constant indices keep the
            // accumulators in registers whether or not LLVM unrolls the pairs.
            for p in 0..BATCH / 2 {
                for h in 0..ACCS {
                    let j = ACCS * p + h;
                    let (b, u) = (&w[j / W::UNITS], j % W::UNITS);
                    // SAFETY: `$mask` is true only in `rows_vnni`, whose features include
                    // AVX-512 F / BW / VL.
                    let wv = unsafe { unpack::<W, P, $mask>(b.codes(u), table) };
                    let sb = match W::SCALE {
                        Scale::F16 => [0.0; 2],
                        Scale::Byte(t) | Scale::ByteHalves(t) => b.scale_bytes(u).map(|s| t[usize::from(s)]),
                    };
                    for r in 0..R {
                        let (q, pre) = (a[r][j].qs(), pk[r][j]);
                        let lanes = _mm256_cvtepi32_ps(if $form == NONE {
                            isum::<W, P>(wv, q, pre)
                        } else {
                            // SAFETY: this function has form `$form`'s features.
                            unsafe { isum_dp::<W, P, { $form }>(wv, q, pre) }
                        });
                        let s = match W::SCALE {
                            Scale::F16 => _mm256_set1_ps(d[r][j]),
                            Scale::Byte(_) => _mm256_set1_ps(d[r][j] * sb[0]),
                            Scale::ByteHalves(_) => _mm256_mul_ps(
                                _mm256_set1_ps(d[r][j]),
                                _mm256_set_m128(_mm_set1_ps(sb[1]), _mm_set1_ps(sb[0])),
                            ),
                        };
                        acc[r][h] = _mm256_fmadd_ps(s, lanes, acc[r][h]);
                    }
                }
            }
        }};
    }
    // Row views as whole batches, and the current batch of each row. (Loops, not
    // `array::from_fn`: its closures are not inlined into this function.)
    let mut ac: [&[[A; BATCH]]; R] = [&[]; R];
    for (c, a) in ac.iter_mut().zip(&a) {
        *c = a.as_chunks::<BATCH>().0;
    }
    let zero = [A::zeroed(); BATCH];
    let mut ab: [&[A; BATCH]; R] = [&zero; R];
    let full = w.len() / per;
    for k in 0..full {
        for (b, c) in ab.iter_mut().zip(&ac) {
            *b = &c[k];
        }
        batch!(&w[k * per..(k + 1) * per], ab, k);
    }
    let tail = &w[full * per..];
    if !tail.is_empty() {
        // The tail, filled up with zero blocks: they add +0 to every lane and slot, which
        // leaves each as it was (none is ever -0), so this is the tail alone, bit for bit.
        let mut wt = [W::zeroed(); BATCH];
        wt[..tail.len()].copy_from_slice(tail);
        let mut at = [zero; R];
        for ((at, a), b) in at.iter_mut().zip(&a).zip(ab.iter_mut()) {
            let tail = &a[full * BATCH..];
            at[..tail.len()].copy_from_slice(tail);
            *b = at;
        }
        batch!(&wt[..per], ab, full);
    }
    let mut sums = [0f32; R];
    for ((s, acc), summs) in sums.iter_mut().zip(acc).zip(summs) {
        let mut out = [[0f32; LANES]; ACCS];
        for (o, v) in out.iter_mut().zip(acc) {
            // SAFETY: `o` is 8 f32, exactly 32 bytes: the unaligned store writes only it.
            unsafe { _mm256_storeu_ps(o.as_mut_ptr(), v) };
        }
        let mut ms = [0f32; BATCH];
        if W::AFFINE {
            let mut p = [[0f32; BATCH]; 2];
            for (p, v) in p.iter_mut().zip(summs) {
                // SAFETY: as above, `p` is exactly 8 f32.
                unsafe { _mm256_storeu_ps(p.as_mut_ptr(), v) };
            }
            let [e, o] = p;
            ms = [e[1], e[3], e[5], e[7], o[1], o[3], o[5], o[7]];
        }
        *s = finish(out, ms);
    }
    sums
}
    };
}

rows_kernel!(
    /// `R` dots of the weight row `w` with the activation rows `a[r]` (each of exactly
    /// `w.len() · UNITS` blocks), every one as [`super::vec_dot_portable`] computes it; `P` is
    /// how [`isum`] multiplies (whatever it says of `w` and `a` must hold). `pre[r]`: for
    /// [`OFFSET`], row `r`'s [`offset_corrections`] (one entry per batch of its units, the tail
    /// batch included); unused (may be empty) otherwise.
    rows_avx2,
    "avx2,fma,f16c",
    NONE,
    false
);
rows_kernel!(
    /// [`rows_avx2`] with the unit products of [`isum_dp`] (`vpdpbusd`, EVEX form): the same
    /// lanes.
    rows_vnni,
    "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni",
    EVEX,
    true
);
rows_kernel!(
    /// [`rows_vnni`] in AVX-VNNI's VEX form, without mask registers.
    rows_avxvnni,
    "avx2,fma,f16c,avxvnni",
    VEX,
    false
);

/// The f16 weight scales of a batch's 8 units widened to f32, exactly (`vcvtph2ps`; block
/// `j / UNITS`'s for unit `j`). Each 64-bit word holds four lanes, built in general
/// registers: a block's scale repeated over its units' lanes by one multiply (`d ·
/// 0x0001_0001_…`; with one unit per block a shift per lane). Spelled out lane by lane, q1_0
/// (four units a block) took 20 general-register instructions per batch where this takes 4.
/// (Words rather than a vector of eight `u16`: see [`widen`].)
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn weight_scales<W: Q8Weight>(w: &[W]) -> __m256 {
    // Lanes `4h .. 4h + 4`: block `b`'s scale over the lanes of its units in that half.
    let word = |h: usize| {
        let (mut v, mut lane) = (0u64, 0);
        while lane < 4 {
            let b = (4 * h + lane) / W::UNITS;
            let end = ((b + 1) * W::UNITS - 4 * h).min(4);
            let rep = (lane..end).fold(0u64, |r, l| r | 1 << (16 * l));
            v |= u64::from(w[b].d_bits()) * rep;
            lane = end;
        }
        crate::barrier::opaque(v) as i64
    };
    _mm256_cvtph_ps(_mm_set_epi64x(word(1), word(0)))
}

/// The f16 scale bits of 8 activation blocks.
#[inline(always)]
fn act_d_bits<A: Q8Act>(a: &[A; BATCH]) -> [u16; BATCH] {
    [
        a[0].d_bits(),
        a[1].d_bits(),
        a[2].d_bits(),
        a[3].d_bits(),
        a[4].d_bits(),
        a[5].d_bits(),
        a[6].d_bits(),
        a[7].d_bits(),
    ]
}

/// Two f16 values as one word, the first in the low half.
#[inline(always)]
fn pair(lo: u16, hi: u16) -> u32 {
    u32::from(lo) | (u32::from(hi) << 16)
}

/// `(d, m)` of 8 weight blocks (one unit each), as two runs of four pairs.
#[inline(always)]
fn weight_pairs<W: Q8Weight>(w: &[W]) -> [[u32; 4]; 2] {
    let p = |i: usize| pair(w[i].d_bits(), w[i].m_bits());
    [[p(0), p(1), p(2), p(3)], [p(4), p(5), p(6), p(7)]]
}

/// `(d, s)` of 8 activation blocks, as two runs of four pairs.
#[inline(always)]
fn act_pairs<A: Q8Act>(a: &[A; BATCH]) -> [[u32; 4]; 2] {
    let p = |i: usize| pair(a[i].d_bits(), a[i].s_bits());
    [[p(0), p(1), p(2), p(3)], [p(4), p(5), p(6), p(7)]]
}

/// Four pairs of f16 values (raw bits, the first of each in the low half) widened to f32.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn widen_pairs(p: [u32; 4]) -> __m256 {
    // As [`widen`]: two 64-bit words through general registers.
    let w = |lo: u32, hi: u32| crate::barrier::opaque(u64::from(lo) | u64::from(hi) << 32) as i64;
    _mm256_cvtph_ps(_mm_set_epi64x(w(p[2], p[3]), w(p[0], p[1])))
}

/// Eight f16 values (raw bits) widened to f32, exactly (`vcvtph2ps`).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(super) fn widen(h: [u16; BATCH]) -> __m256 {
    // Four values per 64-bit word in general registers, then `vmovq` + `vpinsrq`: built as a
    // vector of eight `u16`, LLVM inserts each into an undefined register (`vpinsrw`), which
    // picks up a false dependency on whatever that register last held, in the VNNI kernel
    // the previous batch's scales: a chain through every batch.
    let w = |q: &[u16]| {
        let v = u64::from(q[0]) | u64::from(q[1]) << 16 | u64::from(q[2]) << 32 | u64::from(q[3]) << 48;
        crate::barrier::opaque(v) as i64
    };
    _mm256_cvtph_ps(_mm_set_epi64x(w(&h[4..]), w(&h[..4])))
}

/// [`unpack`]'s `table` for the products `P`: [`kernel_table`] in both 128-bit lanes (zeros
/// for a format without a table).
#[target_feature(enable = "avx2")]
#[inline]
pub(super) fn value_table<W: Q8Weight, const P: u8>() -> __m256i {
    let tv = const { kernel_table::<W, P>() };
    match W::VALUES {
        // SAFETY: `tv` is 16 bytes, exactly what the unaligned 16-byte load reads.
        Values::Table(_) => _mm256_broadcastsi128_si256(unsafe { _mm_loadu_si128(tv.as_ptr().cast()) }),
        _ => _mm256_setzero_si256(),
    }
}

/// Unit `u` of `w`: its 32 values in one register, in element order, as the row kernels
/// unpack them (`table` from [`value_table`] with [`SIGNED`]): the q8 tile's decode.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
#[inline]
pub(super) fn unit_vector<W: Q8Weight>(w: &W, u: usize, table: __m256i) -> __m256i {
    // SAFETY: this function has AVX-512 F / BW / VL, all `unpack`'s mask registers need.
    unsafe { unpack::<W, SIGNED, true>(w.codes(u), table) }.0
}

/// [`unit_vector`] without AVX-512: the AVX2 tile's decode.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub(super) fn unit_vector_avx2<W: Q8Weight>(w: &W, u: usize, table: __m256i) -> __m256i {
    // SAFETY: without `MASK`, `unpack` needs only this function's features.
    unsafe { unpack::<W, SIGNED, false>(w.codes(u), table) }.0
}

/// The products `P` whose [`unpack`] gives the values themselves (signed, table looked up).
pub(super) const SIGNED: u8 = ABS_A;

/// A unit's 32 weight values in one register, in element order.
#[derive(Clone, Copy)]
struct Unpacked(__m256i);

/// A unit's 32 values in element order; for the [`OFFSET`] products `P` their unsigned form
/// ([`offset_form`]: offset codes as they are, `table` the shifted one). With `MASK`, bits
/// become bytes through AVX-512 mask registers ([`select_bytes`]).
///
/// # Safety
/// With `MASK`, the CPU must have AVX-512 F / BW / VL (the caller's features include them).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
unsafe fn unpack<W: Q8Weight, const P: u8, const MASK: bool>(codes: Codes<'_>, table: __m256i) -> Unpacked {
    let zero = _mm256_setzero_si256();
    // SAFETY: AVX2 by this function's features; AVX-512 F / BW / VL with `MASK` by its contract.
    let select = |bits: &[u8; 4], z, o| unsafe { select_bytes::<MASK>(*bits, z, o) };
    let nib = _mm256_set1_epi8(0x0F);
    let c = match codes {
        // SAFETY: `q` is `&[i8; 32]`: the unaligned 32-byte load reads exactly the array.
        Codes::Bytes(q) => unsafe { _mm256_loadu_si256(q.as_ptr().cast()) },
        Codes::Nibbles { qs, qh } => {
            let q = load16(qs);
            // Elements 0..16 from the low nibbles, 16..32 from the high ones.
            let low = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16::<4>(q), q), nib);
            match qh {
                None => low,
                Some(h) => _mm256_or_si256(low, select(&h, zero, _mm256_set1_epi8(0x10))),
            }
        }
        Codes::Nibbles16(q) => {
            let lo = load16(q);
            let hi = _mm_srli_epi16::<4>(lo);
            // Low nibbles of bytes 0..8 are elements 0..8, high ones 8..16; bytes 8..16 the
            // same for elements 16..32.
            _mm256_and_si256(_mm256_set_m128i(_mm_unpackhi_epi64(lo, hi), _mm_unpacklo_epi64(lo, hi)), nib)
        }
        Codes::Bits1(b) => {
            if let Values::Table(_) = W::VALUES {
                // Two values, selected by the bit: no table lookup.
                let t = const { kernel_table::<W, P>() };
                return Unpacked(select(b, _mm256_set1_epi8(t[0]), _mm256_set1_epi8(t[1])));
            }
            select(b, zero, _mm256_set1_epi8(1))
        }
        Codes::Bits2(b) => {
            // 32-bit lane p of each half: the half's 4 bytes shifted by 2p, so its byte k
            // holds (in its low two bits) the code of element 4k + p of the half.
            let x = u64::from_le_bytes(*b);
            let (lo, hi) = (x as u32 as i32, (x >> 32) as u32 as i32);
            let v = _mm256_srlv_epi32(
                _mm256_setr_epi32(lo, lo, lo, lo, hi, hi, hi, hi),
                _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6),
            );
            let v = _mm256_and_si256(v, _mm256_set1_epi8(3));
            // Element i = 4k + p of each half from byte 4p + k.
            #[rustfmt::skip]
            let order = _mm256_setr_epi8(
                0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15,
                0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15,
            );
            _mm256_shuffle_epi8(v, order)
        }
    };
    let v = match W::VALUES {
        Values::Signed8 | Values::Unsigned => c,
        Values::Offset(_) if P == OFFSET => c,
        Values::Offset(k) => _mm256_sub_epi8(c, _mm256_set1_epi8(k)),
        Values::Table(_) => _mm256_shuffle_epi8(table, c),
    };
    Unpacked(v)
}

/// The 8 exact `i32` lanes of an unpacked unit against 32 activation quants: lane `l` sums
/// elements `4l .. 4l+4`. `P` ([`ABS_A`], [`ABS_W`], [`WIDEN`], [`OFFSET`]) says how; `pre`
/// is the unit's offset correction ([`OFFSET`] only).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn isum<W: Q8Weight, const P: u8>(w: Unpacked, aq: &[i8; QK8], pre: __m256i) -> __m256i {
    // SAFETY: `aq` is `&[i8; 32]`: the unaligned 32-byte load reads exactly the array.
    let av = unsafe { _mm256_loadu_si256(aq.as_ptr().cast()) };
    let w = w.0;
    let prod = if W::VALUES == Values::Unsigned {
        _mm256_maddubs_epi16(w, av)
    } else if P == OFFSET {
        _mm256_sub_epi16(_mm256_maddubs_epi16(w, av), pre)
    } else if P == ABS_W {
        _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(av, w))
    } else if P == WIDEN {
        // `i16` pair sums of elements 0..16 and 16..32, then adjacent pairs added: vphaddd
        // works per 128-bit lane, so the 64-bit quarters come out as 0, 2, 1, 3.
        let wide = |v: __m256i| {
            (_mm256_cvtepi8_epi16(_mm256_castsi256_si128(v)), _mm256_cvtepi8_epi16(_mm256_extracti128_si256::<1>(v)))
        };
        let ((w0, w1), (a0, a1)) = (wide(w), wide(av));
        let h = _mm256_hadd_epi32(_mm256_madd_epi16(w0, a0), _mm256_madd_epi16(w1, a1));
        return _mm256_permute4x64_epi64::<0b11_01_10_00>(h);
    } else {
        _mm256_maddubs_epi16(_mm256_abs_epi8(av), _mm256_sign_epi8(w, av))
    };
    _mm256_madd_epi16(prod, _mm256_set1_epi16(1))
}

/// [`isum`] with `vpdpbusd` in form `F` (unsigned × signed bytes, four products summed into
/// each `i32` lane, exact: no intermediate `i16` as in `vpmaddubsw`), one instruction where
/// [`isum`] takes two or three: the same exact lanes. For [`OFFSET`], `pre` is the unit's
/// negated `i32` correction lanes, which the product starts from.
///
/// # Safety
/// The CPU has AVX2 and form `F`'s features, and the caller is compiled with them.
#[inline(always)]
unsafe fn isum_dp<W: Q8Weight, const P: u8, const F: Form>(w: Unpacked, aq: &[i8; QK8], pre: __m256i) -> __m256i {
    // SAFETY: the caller's contract (AVX2 and the form's features); `aq` is `&[i8; 32]`: the
    // unaligned 32-byte load reads exactly the array.
    unsafe {
        let av = _mm256_loadu_si256(aq.as_ptr().cast());
        let (w, zero) = (w.0, _mm256_setzero_si256());
        if W::VALUES == Values::Unsigned {
            dpbusd::<F>(zero, w, av)
        } else if P == OFFSET {
            dpbusd::<F>(pre, w, av)
        } else if P == ABS_W {
            dpbusd::<F>(zero, _mm256_abs_epi8(w), _mm256_sign_epi8(av, w))
        } else if P == WIDEN {
            isum::<W, P>(Unpacked(w), aq, pre)
        } else {
            dpbusd::<F>(zero, _mm256_abs_epi8(av), _mm256_sign_epi8(w, av))
        }
    }
}

/// 16 bytes (of `i8` or `u8`).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn load16<T: bytemuck::Pod>(v: &[T]) -> __m128i {
    let b: &[u8] = bytemuck::cast_slice(v);
    let b: &[u8; 16] = b.try_into().expect("16 bytes");
    // SAFETY: `b` is exactly 16 bytes: the unaligned 16-byte load reads only it.
    unsafe { _mm_loadu_si128(b.as_ptr().cast()) }
}
