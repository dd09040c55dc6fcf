//! AVX2 kernel of the sub-block I-quants' dots with q8_k (iq2_xxs, iq2_xs, iq2_s, iq3_xxs,
//! iq3_s, iq4_xs, iq1_s, iq1_m: [`SubBlocks`]), chosen at run time where the CPU has AVX2, FMA and F16C
//! ([`qforge_core::cpu::avx2`]); everything else runs the portable reference,
//! [`crate::dot::sub_block_vec_dot_portable`].
//!
//! Per 32-value sub-block, as ggml's `ggml_vec_dot_iq*_q8_K`: the values become one register
//! (grid formats: the grid entries loaded straight into the register, 8-byte entries with
//! `vmovq` / `vmovhpd`, 4-byte ones with `vmovd` / `vpinsrd`, never a gather; the signs as ±1
//! bytes, looked up the same way or spread from sign bits with
//! [`qforge_simd::bytemask::bytes_from_bits`]; iq4_xs: nibbles through `kvalues_iq4nl` with
//! one `vpshufb`; iq1_s / iq1_m: the ternary grid entries made `8·g ± 1` with `vpsignb` of 8
//! and `vpaddb` of their ±1 shifts, [`SubBlock::Shifted`]; in the mat-vec `8·g ± 1 + 9`,
//! unsigned, times the activations as they are, and `9·Σa` per 16 taken back per block,
//! [`ACTS_SUMS`]). For any activations (`EXACT`) the signs go on the grid values
//! (`vpsignb`) and `maddubs(|a|, v·sgn(a))` gives 16 exact pair sums for every `i8` activation,
//! -128 included (`|v| ≤ 127`, a pair is at most 2·128·127). The mat-vec kernel
//! ([`vec_dot_weight_rows`]) checks its activation row once: without a -128 (what q8_k
//! quantization gives: it scales to ±127), the grid formats run ggml's instructions
//! (`ACT_SIGNED`), the unsigned grid entries times the activations signed with the weights'
//! signs, `maddubs(g, sign(a, s))`: one `vpsignb` per row instead of `vpabsb`, `vpsignb` and the
//! signing of the weights, the same exact pair sums. Then `vpmaddwd` with the two
//! 16-value groups' integer scales adds them into 8 `i32` lanes, exact: the lanes of
//! [`crate::dot::sub_block_lanes`]. Two blocks' lanes are reduced together to their exact
//! totals ([`qforge_simd::totals::pair`]) and each block's `fma` goes into the row's one f32
//! sum in order: the reference's operations in its order, so the same bits (the tests check
//! it).
//!
//! Several activation rows ([`vec_dot_rows`]) share each sub-block's values: up to
//! [`MAX_ROWS`] rows per pass over the weight row.
//!
//! The one kernel serves mat-vec (one row) and mat-mul (it replaced, for one row, `qforge-k`'s
//! kernel on signed grid words assembled in scalar registers: iq2_xxs 5.7 → 11.2 Gel/s,
//! iq3_s 3.8 → 7.7 on the Zen 1 bench machine; see docs/matmul.md).
//!
//! The only `unsafe` of the crate: unaligned loads of fixed-size arrays and of table entries
//! through references, and the calls into the `#[target_feature]` function with an [`Avx2`]
//! token.
#![allow(unsafe_code)]

use std::arch::x86_64::*;

use crate::common::QK_K;
use crate::tables::KVALUES_IQ4NL;
use crate::unpack::{GridSigns, GridWords, ScaleFields, SubBlock, SubBlocks};
use qforge_k::BlockQ8K;
use qforge_simd::bytemask::bytes_from_bits;
use qforge_simd::rows::{RowKernel, by_rows};
use qforge_simd::vnni::{EVEX, Form, NONE, VEX, VnniYmm, dpwssd};
use qforge_simd::{Avx2, totals};

/// The dot of a weight row with a q8_k row with AVX2, or `None` where the CPU lacks it.
#[inline]
pub(crate) fn vec_dot<F: SubBlocks>(w: &[F::Block], a: &[BlockQ8K]) -> Option<f32> {
    let avx2 = Avx2::detect()?;
    let n = w.len().min(a.len());
    let k = Kernel::<F> { w: &w[..n], avx2, vnni: vnni_form::<F>() };
    Some(RowKernel::<&[BlockQ8K]>::rows::<1>(&k, [&a])[0])
}

/// `out[i]` = the dot of weight row `i` (`w` holds `out.len()` rows one after another, each
/// `w.len() / out.len()` blocks, checked by the caller) with the q8_k row `a`, with AVX2: the
/// mat-vec kernel. The activation row is checked once for a -128; where it holds none, every
/// weight row runs the activation-signed kernel ([`ACT_SIGNED`], ggml's instructions, the same
/// exact lanes). `false` (nothing written) where the CPU lacks AVX2.
pub(crate) fn vec_dot_weight_rows<F: SubBlocks>(w: &[F::Block], a: &[BlockQ8K], out: &mut [f32]) -> bool {
    let Some(avx2) = Avx2::detect() else {
        return false;
    };
    let n = w.len() / out.len().max(1);
    // A short activation row truncates every weight row.
    let m = n.min(a.len());
    let a = &a[..m];
    let vnni = vnni_form::<F>();
    if F::OFFSET_ACTS {
        // `−OFFSET · Σa` of every 16 quants, once for every weight row ([`ACTS_SUMS`]): any
        // activations, -128 included.
        let sums: Vec<[i16; 16]> = a.iter().map(offset_sums).collect();
        for (j, o) in out.iter_mut().enumerate() {
            let w = &w[j * n..j * n + m];
            // SAFETY: `avx2` proves AVX2, FMA and F16C, all `rows_avx2` needs, and `vnni`
            // (where `Some`) the features of that VNNI form; `sums` holds `offset_sums` of
            // every block of `a`, and `F::OFFSET_ACTS` says every sub-block is `Shifted`.
            *o = unsafe { rows_at::<F, 1, EXACT, ACTS_SUMS>(vnni, w, [a], [Extra::sums(&sums)], avx2) }[0];
        }
        return true;
    }
    let signed_acts = !a.iter().any(|b| has_min(&b.qs));
    // Where the format asks for it (`SubBlocks::ABS_ACTS`), `|a|` of every quant, once for
    // every weight row: the signed values' products (`vpmaddubsw(|a|, sign(v, a))`,
    // `Values::Signed`) then load it instead of a `vpabsb` per sub-block and weight row.
    let abs: Vec<[u8; QK_K]> =
        if F::ABS_ACTS { a.iter().map(|b| b.qs.map(i8::unsigned_abs)).collect() } else { Vec::new() };
    let x = [Extra::abs(&abs)];
    for (j, o) in out.iter_mut().enumerate() {
        let w = &w[j * n..j * n + m];
        // SAFETY: `avx2` proves AVX2, FMA and F16C, all `rows_avx2` needs, and `vnni` (where
        // `Some`) the features of that VNNI form, which `rows_vnni` / `rows_avxvnni` need
        // besides; `ACT_SIGNED` runs only where no activation of `a` is -128 (just checked);
        // with `ACTS_ABS`, `abs` holds `|q|` of every block of `a`.
        *o = unsafe {
            match (signed_acts, F::ABS_ACTS) {
                (true, true) => rows_at::<F, 1, ACT_SIGNED, ACTS_ABS>(vnni, w, [a], x, avx2),
                (true, false) => rows_at::<F, 1, ACT_SIGNED, ACTS_NONE>(vnni, w, [a], x, avx2),
                (false, true) => rows_at::<F, 1, EXACT, ACTS_ABS>(vnni, w, [a], x, avx2),
                (false, false) => rows_at::<F, 1, EXACT, ACTS_NONE>(vnni, w, [a], x, avx2),
            }
        }[0];
    }
    true
}

/// Whether one of the quants is -128 (a branch-free OR, which LLVM vectorizes).
#[inline]
fn has_min(q: &[i8; QK_K]) -> bool {
    q.iter().fold(false, |m, &x| m | (x == i8::MIN))
}

/// `out[i]` = the dot of `w` with `a[i]` (`out.len() == a.len()`, checked by the caller) with
/// AVX2; `false` (nothing written) where the CPU lacks it.
pub(crate) fn vec_dot_rows<F: SubBlocks>(w: &[F::Block], a: &[&[BlockQ8K]], out: &mut [f32]) -> bool {
    let Some(avx2) = Avx2::detect() else {
        return false;
    };
    let n = w.len();
    if a.iter().any(|a| a.len() < n) {
        // A short activation row truncates the weight row for that row alone: row by row.
        for (o, a) in out.iter_mut().zip(a) {
            *o = vec_dot::<F>(w, a).unwrap_or_default();
        }
        return true;
    }
    by_rows(&Kernel::<F> { w, avx2, vnni: vnni_form::<F>() }, a, out);
    true
}

/// The VNNI form `F`'s 256-bit VNNI kernel runs in here (`VnniYmm::detect`'s, or
/// `VnniYmm::detect_vex_on_intel`'s where `F` sets [`SubBlocks::VEX_ON_INTEL`]), or `None`.
#[inline]
fn vnni_form<F: SubBlocks>() -> Option<Form> {
    if F::VEX_ON_INTEL { VnniYmm::detect_vex_on_intel() } else { VnniYmm::detect() }.map(VnniYmm::form)
}

/// The row kernel of the VNNI form `vnni` (`rows_vnni`, `rows_avxvnni`), or `rows_avx2`.
///
/// # Safety
/// `vnni` is [`vnni_form`]'s (the CPU has that form's features); with `P` = [`ACT_SIGNED`]
/// no activation quant of `a` is -128; `x[r]` holds what `X` says of `a[r]` ([`Extra`]), block
/// by block; with [`ACTS_SUMS`], every sub-block of `F` is [`SubBlock::Shifted`].
#[inline(always)]
unsafe fn rows_at<F: SubBlocks, const R: usize, const P: bool, const X: u8>(
    vnni: Option<Form>,
    w: &[F::Block],
    a: [&[BlockQ8K]; R],
    x: [Extra<'_>; R],
    avx2: Avx2,
) -> [f32; R] {
    // SAFETY: `avx2` proves AVX2, FMA and F16C; the rest is the caller's contract.
    unsafe {
        match vnni {
            Some(EVEX) => rows_vnni::<F, R, P, X>(w, a, x, avx2),
            Some(_) => rows_avxvnni::<F, R, P, X>(w, a, x, avx2),
            None => rows_avx2::<F, R, P, X>(w, a, x, avx2),
        }
    }
}

/// What the mat-vec computes of its activation row once, for every weight row: nothing
/// ([`ACTS_NONE`]), `|q|` of every quant ([`ACTS_ABS`], `SubBlocks::ABS_ACTS`) or `−OFFSET`
/// times the sum of every 16 quants ([`ACTS_SUMS`], `SubBlocks::OFFSET_ACTS`).
#[derive(Clone, Copy, Default)]
struct Extra<'a> {
    abs: &'a [[u8; QK_K]],
    sums: &'a [[i16; 16]],
}

impl<'a> Extra<'a> {
    fn abs(abs: &'a [[u8; QK_K]]) -> Self {
        Extra { abs, ..Extra::default() }
    }
    fn sums(sums: &'a [[i16; 16]]) -> Self {
        Extra { sums, ..Extra::default() }
    }
}

/// The kernel computes `|a|` of each sub-block's activations itself (`vpabsb`).
const ACTS_NONE: u8 = 0;
/// The kernel loads `|a|` from [`Extra::abs`].
const ACTS_ABS: u8 = 1;
/// The kernel multiplies iq1's shifted values plus [`OFFSET`] (unsigned, `0..=18`) by the
/// activations as they are, `vpmaddubsw(v + 9, a)` (a pair is at most 2·18·128: exact for
/// any `i8`, -128 included), and takes `9 · Σ scale · Σa` back per block from
/// [`Extra::sums`] with one more `vpmaddwd` / `vpdpwssd`: per sub-block and row one
/// instruction where the signed values take three (`vpabsb`, `vpsignb`, `vpmaddubsw`). The
/// lanes differ from the reference's, their total (the block's exact integer sum) does not.
const ACTS_SUMS: u8 = 2;

/// The largest `|8·g ± 1|` of iq1's values: `v + OFFSET` is never negative.
const OFFSET: i8 = 9;

/// `−OFFSET · Σ q` of each 16 quants of `a`, in the order of the kernel's scales register
/// (the even groups, then the odd ones): `|Σ q| ≤ 16 · 128`, times 9 fits an `i16`.
fn offset_sums(a: &BlockQ8K) -> [i16; 16] {
    let sum = |g: usize| a.qs[16 * g..16 * g + 16].iter().map(|&q| i16::from(q)).sum::<i16>();
    std::array::from_fn(|k| -i16::from(OFFSET) * sum(if k < 8 { 2 * k } else { 2 * (k - 8) + 1 }))
}

/// The weight row, the proof of AVX2 and the VNNI form whose kernel may run ([`vnni_form`]);
/// rows of exactly `w.len()` blocks.
struct Kernel<'w, F: SubBlocks> {
    w: &'w [F::Block],
    avx2: Avx2,
    vnni: Option<Form>,
}

impl<'a, F: SubBlocks> RowKernel<&'a [BlockQ8K]> for Kernel<'_, F> {
    #[inline]
    fn rows<const R: usize>(&self, a: [&&'a [BlockQ8K]; R]) -> [f32; R] {
        let n = self.w.len();
        let rows = a.map(|a| &a[..n]);
        // SAFETY: `self.vnni` is `vnni_form`'s; `EXACT` and `ACTS_NONE` hold for any rows.
        unsafe { rows_at::<F, R, EXACT, ACTS_NONE>(self.vnni, self.w, rows, [Extra::default(); R], self.avx2) }
    }
}

/// [`rows_avx2`] for any activations: the weight values signed, `maddubs(|a|, v·sgn(a))`.
const EXACT: bool = false;
/// [`rows_avx2`] where no activation is -128: a grid's unsigned entries times the activations
/// signed with the weights' signs, `maddubs(g, sign(a, s))` (as ggml; `sign(-128, -1)` would
/// wrap, hence the check).
const ACT_SIGNED: bool = true;

/// A sub-block's 32 values as the kernel multiplies them.
#[derive(Clone, Copy)]
enum Values {
    /// The signed values.
    Signed(__m256i),
    /// The unsigned grid entries (`1..128`) and the sign bytes (±1) to apply to the
    /// activations ([`ACT_SIGNED`] only).
    GridSigns(__m256i, __m256i),
    /// iq1's values plus [`OFFSET`] ([`ACTS_SUMS`] only).
    Offset(__m256i),
}

/// Defines a row kernel `$name` (the body below) compiled with `$features`, its scaled pair
/// sums added into the lanes by `vpmaddwd` + `vpaddd` ([`acc_avx2`]) or, in VNNI form `$form`,
/// one `vpdpwssd`: one body for the AVX2 and the VNNI kernels.
macro_rules! rows_kernel {
    ($(#[$doc:meta])* $name:ident, $features:literal, $form:expr) => {
        $(#[$doc])*
        #[target_feature(enable = $features)]
        fn $name<F: SubBlocks, const R: usize, const P: bool, const X: u8>(
            w: &[F::Block],
            a: [&[BlockQ8K]; R],
            x: [Extra<'_>; R],
            avx2: Avx2,
        ) -> [f32; R] {
    // Within each 128-bit lane: the even `i16`s to the low 8 bytes, the odd ones to the high 8.
    #[rustfmt::skip]
    let split = _mm256_setr_epi8(
        0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15,
        0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15,
    );
    // Per row the f32 sum, in lane 0 (lanes 1–3: scratch, never read); an even block's lanes
    // and scale held until the next block, and the pair's totals taken together. (Blocks in
    // pairs as an inner loop of two kept the lanes in memory: 5–15 % slower mat-vec.)
    let mut facc = [_mm_setzero_ps(); R];
    let mut held = [_mm256_setzero_si256(); R];
    let mut held_x = [0f32; R];
    // The next block's `SubBlocks::Pre` (grid indices), computed one block ahead: read right
    // after the vector store that writes them, the indices wait for the store (no forwarding
    // from a 512-bit store to 16-bit loads on Zen 4), which cost more than computing them saved.
    // Two slots, block `i` reading slot `i % 2` while the next block's go to the other: a
    // copy of the next block's into the current one would be a vector store just before the
    // narrow loads, the same wait. (iq1_s / iq1_m / iq2_s build theirs with
    // `std::array::from_fn`, which LLVM leaves out of line here: a call per block. Built by a
    // plain loop, inline, it measured 3–10 % slower on an Emerald Rapids Xeon and 4–6 %
    // slower on a Zen 4 (2026-12-02, docs/matmul.md), so it stays.)
    // Each sub-block's `vpshufb` control for its pair of group scales, read from memory where
    // the format asks for it (`SubBlocks::SCALE_PICK_TABLE`).
    let picks = F::SCALE_PICK_TABLE.then(qforge_simd::lut::pick_i16);
    let mut pres = [w.first().map(F::prepare).unwrap_or_default(); 2];
    for (i, b) in w.iter().enumerate() {
        if let Some(nb) = w.get(i + 1) {
            pres[(i + 1) & 1] = F::prepare(nb);
        }
        let pre = &pres[i & 1];
        // The 16 group scales as one register, once per block: the even groups' (the first
        // 16 values of each sub-block) in the low lane, the odd groups' in the high lane, so
        // that one `vpshufb` per sub-block picks its pair (ggml's `scales16` of iq2_s). LLVM
        // builds the array in registers; forced through memory (`black_box`) it measured
        // 10-20 % slower here, as did a scalar load and broadcast per sub-block.
        let scales = if F::SCALE_FIELDS.is_some() {
            // SAFETY: this function has AVX2 enabled.
            unsafe { field_scales::<F>(b) }
        } else {
            let scales = F::scales(b);
            // SAFETY: `scales` is 16 `i16`, exactly the 32 bytes the unaligned load reads.
            let scales = unsafe { _mm256_loadu_si256(scales.as_ptr().cast()) };
            _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_shuffle_epi8(scales, split))
        };
        let mut acc = [_mm256_setzero_si256(); R];
        // Sub-block `$ib` (a constant) against every row, its lanes then put through a fence
        // (`fence_ymm`: the next sub-block's table loads wait for it). The eight are spelled
        // out: left a loop, LLVM unrolled it in some builds and not in others (its estimate
        // moved with unrelated code: iq2_xxs's AVX2 mat-vec 12.7 Gel/s as a loop, 15.8
        // unrolled). Unrolled without the fences, LLVM hoisted the table loads of several
        // sub-blocks together and ran short of registers (iq1_s 17.1 -> 14.2, iq3_s 10.2 ->
        // 9.4 at VNNI). With both, against the loop (mat-vec 4096², Zen 4, AVX2 / VNNI):
        // iq2_xxs 12.7 -> 16.3 / 13.9 -> 17.0, iq2_xs +7 / +5 %, iq2_s +5 / +8 %, iq3_s +8 /
        // +7 %, iq1_s +6 / +2 %, iq1_m +11 / +4 %, iq3_xxs ±1 %, iq4_xs −1 / −2 %.
        macro_rules! sub_block {
            ($ib:expr) => {{
            let ib: usize = $ib;
            let v = match F::sub_block(b, pre, ib) {
                SubBlock::Grid(g, signs) if P == ACT_SIGNED => {
                    // SAFETY: this function has AVX2 enabled.
                    let (g, s) = unsafe { grid_signs(g, signs) };
                    Values::GridSigns(g, s)
                }
                // SAFETY: as above.
                SubBlock::Shifted(g, shifts) if X == ACTS_SUMS => Values::Offset(unsafe { offset_values(g, shifts) }),
                sb => {
                    // `ACTS_SUMS` takes `9 · Σa` back from every sub-block: a format that sets
                    // `OFFSET_ACTS` gives only `Shifted` ones.
                    debug_assert!(X != ACTS_SUMS, "{}: OFFSET_ACTS with a sub-block that is not Shifted", F::DESC.name);
                    // SAFETY: as above.
                    Values::Signed(unsafe { signed_values(sb) })
                }
            };
            // Values 0..16 (low lane) take the scale of group 2·ib, 16..32 that of 2·ib + 1:
            // bytes `2ib, 2ib + 1` of each lane, repeated.
            let s = _mm256_shuffle_epi8(scales, qforge_simd::lut::pick_i16_control(picks, ib));
            for r in 0..R {
                let q: &[i8; 32] = a[r][i].qs[32 * ib..32 * ib + 32].try_into().expect("32 bytes");
                // SAFETY: `q` is 32 bytes, exactly what the unaligned 32-byte load reads.
                let av = unsafe { _mm256_loadu_si256(q.as_ptr().cast()) };
                // Exact: `|v| ≤ 127` and `|a| ≤ 128` (or `g ≤ 127`, `|a| ≤ 127`), so a pair
                // is at most 2·128·127 and never saturates.
                let p = match v {
                    Values::Signed(v) => {
                        let ua = if X == ACTS_ABS {
                            let u: &[u8; 32] = x[r].abs[i][32 * ib..32 * ib + 32].try_into().expect("32 bytes");
                            // SAFETY: `u` is 32 bytes, exactly what the unaligned load reads.
                            unsafe { _mm256_loadu_si256(u.as_ptr().cast()) }
                        } else {
                            _mm256_abs_epi8(av)
                        };
                        _mm256_maddubs_epi16(ua, _mm256_sign_epi8(v, av))
                    }
                    Values::GridSigns(g, s) => _mm256_maddubs_epi16(g, _mm256_sign_epi8(av, s)),
                    Values::Offset(u) => _mm256_maddubs_epi16(u, av),
                };
                acc[r] = if $form == NONE {
                    acc_avx2(acc[r], p, s)
                } else {
                    // SAFETY: this function has form `$form`'s features.
                    unsafe { dpwssd::<{ $form }>(acc[r], p, s) }
                };
            }
            for a in acc.iter_mut() {
                *a = qforge_simd::barrier::fence_ymm(*a);
            }
            }};
        }
        sub_block!(0);
        sub_block!(1);
        sub_block!(2);
        sub_block!(3);
        sub_block!(4);
        sub_block!(5);
        sub_block!(6);
        sub_block!(7);
        if X == ACTS_SUMS {
            // `−9 · Σ scale · Σa` of the block, added into the lanes (`Extra::sums` is in the
            // order of `scales`).
            for r in 0..R {
                // SAFETY: `x[r].sums[i]` is 16 `i16`, exactly the 32 bytes the load reads.
                let c = unsafe { _mm256_loadu_si256(x[r].sums[i].as_ptr().cast()) };
                acc[r] = if $form == NONE {
                    acc_avx2(acc[r], c, scales)
                } else {
                    // SAFETY: this function has form `$form`'s features.
                    unsafe { dpwssd::<{ $form }>(acc[r], c, scales) }
                };
            }
        }
        // `D_MUL · d`, as the reference: f16 widening is exact either way.
        let d = F::D_MUL * _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(F::d_bits(b)))));
        for r in 0..R {
            let da = d * a[r][i].d.get();
            if i % 2 == 0 && i + 1 < w.len() {
                held[r] = acc[r];
                held_x[r] = da;
                continue;
            }
            // `[T0, T1, T0, T1]` of the held block and this one (or of this one alone, the
            // row's last block at an even index: `[T, 0, ..]`), each block's `fma` in order.
            let (t, x) = if i % 2 == 1 {
                (totals::pair(held[r], acc[r], avx2), _mm_setr_ps(held_x[r], da, 0.0, 0.0))
            } else {
                (totals::pair(acc[r], _mm256_setzero_si256(), avx2), _mm_setr_ps(da, 0.0, 0.0, 0.0))
            };
            facc[r] = _mm_fmadd_ps(t, x, facc[r]);
            if i % 2 == 1 {
                facc[r] = _mm_fmadd_ps(_mm_movehdup_ps(t), _mm_movehdup_ps(x), facc[r]);
            }
        }
    }
    facc.map(|v| _mm_cvtss_f32(v))
}
    };
}

rows_kernel!(
    /// `R` dots of the weight row `w` with the q8_k rows `a[r]` (each exactly `w.len()` blocks).
    /// With `P` = [`ACT_SIGNED`], no activation quant of `a` may be -128 (the caller checks: the
    /// result would be wrong there). `x[r]` holds what `X` says of `a[r]` ([`Extra`]; with
    /// [`ACTS_NONE`] each sub-block takes its `vpabsb`); with [`ACTS_SUMS`] every sub-block of
    /// `F` must be [`SubBlock::Shifted`].
    rows_avx2,
    "avx2,fma,f16c",
    NONE
);
rows_kernel!(
    /// [`rows_avx2`] with `vpdpwssd` for the scaled pair sums (`qforge_simd::vnni::dpwssd`,
    /// EVEX form): the same exact products and sums, no saturation.
    rows_vnni,
    "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni",
    EVEX
);
rows_kernel!(
    /// [`rows_vnni`] in AVX-VNNI's VEX form.
    rows_avxvnni,
    "avx2,fma,f16c,avxvnni",
    VEX
);

/// The kernel's scales register (the even groups' scales in the low lane, the odd groups' in
/// the high one) straight from the block's [`ScaleFields`]: the 16-byte window in both lanes,
/// each lane's word picked by `vpshufb`, its field moved to the top bits by `vpmullw` (a left
/// shift by `16 − bits − shift`) and down by one `vpsrlw`, then `2s + 1`.
///
/// # Safety
/// The CPU must have AVX2 (the caller is compiled with it); `F::SCALE_FIELDS` is `Some`.
#[inline(always)]
unsafe fn field_scales<F: SubBlocks>(b: &F::Block) -> __m256i {
    let f = FieldConsts::<F>::FIELDS;
    let (mask, mult) = (FieldConsts::<F>::MASK, FieldConsts::<F>::MULT);
    let win: &[u8; 16] = bytemuck::bytes_of(b)[f.at..f.at + 16].try_into().expect("a window inside the block");
    // SAFETY: the caller guarantees AVX2; `win`, `mask` and `mult` are 16, 32 and 32 bytes,
    // exactly what the unaligned loads read.
    unsafe {
        let v = _mm256_broadcastsi128_si256(_mm_loadu_si128(win.as_ptr().cast()));
        let w = _mm256_shuffle_epi8(v, _mm256_loadu_si256(mask.as_ptr().cast()));
        let x = _mm256_mullo_epi16(w, _mm256_loadu_si256(mult.as_ptr().cast()));
        let x = _mm256_srl_epi16(x, _mm_cvtsi32_si128(16 - i32::from(f.bits)));
        _mm256_add_epi16(_mm256_add_epi16(x, x), _mm256_set1_epi16(1))
    }
}

/// [`field_scales`]' constants for `F`, in the kernel's lane order: lane `p` holds group
/// `2p` (`p < 8`) or `2(p − 8) + 1`.
struct FieldConsts<F>(std::marker::PhantomData<F>);

impl<F: SubBlocks> FieldConsts<F> {
    /// `F`'s fields; for a format without them (whose kernel never calls [`field_scales`],
    /// but whose constants are still evaluated where it is instantiated) any valid value.
    const FIELDS: ScaleFields = match F::SCALE_FIELDS {
        Some(f) => f,
        None => ScaleFields { at: 0, word: [0; QK_K / 16], shift: [0; QK_K / 16], bits: 1 },
    };
    const fn group(p: usize) -> usize {
        if p < 8 { 2 * p } else { 2 * (p - 8) + 1 }
    }
    /// Bytes `2p`, `2p + 1`: those of lane `p`'s word in the window.
    const MASK: [i8; 32] = {
        let mut m = [0i8; 32];
        let mut p = 0;
        while p < 16 {
            let w = Self::FIELDS.word[Self::group(p)] as i8;
            m[2 * p] = 2 * w;
            m[2 * p + 1] = 2 * w + 1;
            p += 1;
        }
        m
    };
    /// `2^(16 − bits − shift)` of lane `p`'s group (`2^15` as the `i16` of its bits).
    const MULT: [i16; 16] = {
        let mut m = [0i16; 16];
        let mut p = 0;
        while p < 16 {
            let f = Self::FIELDS;
            m[p] = (1u32 << (16 - f.bits as u32 - f.shift[Self::group(p)] as u32)) as u16 as i16;
            p += 1;
        }
        m
    };
}

/// `acc + Σ₂ p·s` per `i32` lane (`vpmaddwd`, `vpaddd`): the pair sums `p` times the group
/// scales `s`, wrapping like the reference's `i32` lanes (exact for real blocks).
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
fn acc_avx2(acc: __m256i, p: __m256i, s: __m256i) -> __m256i {
    _mm256_add_epi32(acc, _mm256_madd_epi16(p, s))
}

/// [`qforge_k::packed::TileCodes::tile_codes`] of a sub-block format: each sub-block's signed
/// values ([`signed_values`], the row kernel's) plus `zero`, stored in element order.
#[inline(always)]
pub(crate) fn tile_codes<F: SubBlocks>(b: &F::Block, u: &mut [u8; QK_K], zero: u8, _avx2: Avx2) {
    let pre = F::prepare(b);
    // SAFETY: `Avx2` exists only where the CPU has AVX2, FMA and F16C, all `signed_values`
    // needs; each store writes 32 bytes inside `u`.
    unsafe {
        let z = _mm256_set1_epi8(zero as i8);
        for ib in 0..QK_K / 32 {
            let v = signed_values(F::sub_block(b, &pre, ib));
            _mm256_storeu_si256(u[32 * ib..].as_mut_ptr().cast(), _mm256_add_epi8(v, z));
        }
    }
}

/// A sub-block's grid entries, loaded straight into a register.
///
/// # Safety
/// The CPU must have AVX2 (the caller is compiled with it); `#[inline(always)]` for the
/// reason [`signed_values`] gives.
#[inline(always)]
unsafe fn grid_entries(g: GridWords) -> __m256i {
    // SAFETY: the caller guarantees AVX2; the table words are read through references.
    unsafe {
        match g {
            GridWords::W64(w) => load_u64x4(w),
            GridWords::W32(w) => load_u32x8(w),
        }
    }
}

/// A sub-block's grid entries and its sign bytes (±1), each loaded straight into a register.
///
/// # Safety
/// The CPU must have AVX2 (the caller is compiled with it); `#[inline(always)]` for the
/// reason [`signed_values`] gives.
#[inline(always)]
unsafe fn grid_signs(g: GridWords, signs: GridSigns) -> (__m256i, __m256i) {
    // SAFETY: the caller guarantees AVX2; the table words are read through references and
    // `WORDS_PM1` entries are 32 bytes, exactly what the unaligned 32-byte load reads.
    unsafe {
        let g = grid_entries(g);
        let s = match signs {
            GridSigns::Pm1(s) => load_u64x4(s),
            GridSigns::Bits(bits) => _mm256_or_si256(bytes_from_bits(bits), _mm256_set1_epi8(1)),
            GridSigns::Words(m) => {
                let s: &[i8; 32] = &WORDS_PM1[usize::from(m & 15)];
                _mm256_loadu_si256(s.as_ptr().cast())
            }
        };
        (g, s)
    }
}

/// A sub-block's 32 values as signed bytes, values 0..16 in the low lane: the grid entries
/// with their signs (`vpsignb`); iq1's `8·g ± 1` (8, 0 or -8 by the ternary entry, plus the
/// ±1 shift); iq4_xs's nibbles through `kvalues_iq4nl` (one `vpshufb`).
///
/// # Safety
/// The CPU must have AVX2 (the caller is compiled with it). Not a `#[target_feature]`
/// function so that it can be `#[inline(always)]`: with the eight sub-blocks of a block
/// spelled out, LLVM left a `#[target_feature] #[inline]` one out of line in some kernels
/// (iq1_s's AVX2 mat-vec 15.3 -> 2.2 Gel/s, its vectors passed through memory).
#[inline(always)]
pub(crate) unsafe fn signed_values(sb: SubBlock<'_>) -> __m256i {
    // SAFETY: the caller guarantees AVX2; `KVALUES_IQ4NL` and `q` are 16 bytes each, exactly
    // what each unaligned 16-byte load reads.
    unsafe {
        match sb {
            SubBlock::Grid(g, signs) => {
                let (g, s) = grid_signs(g, signs);
                _mm256_sign_epi8(g, s)
            }
            SubBlock::Shifted(g, shifts) => {
                let (g, s) = grid_signs(g, shifts);
                _mm256_add_epi8(_mm256_sign_epi8(_mm256_set1_epi8(8), g), s)
            }
            SubBlock::Nibbles(q) => {
                let (table, lo) = (_mm_loadu_si128(KVALUES_IQ4NL.as_ptr().cast()), _mm_loadu_si128(q.as_ptr().cast()));
                let idx = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16::<4>(lo), lo), _mm256_set1_epi8(0x0F));
                _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(table), idx)
            }
        }
    }
}

/// [`GridSigns::Words`] `m` as bytes: -1 in 8-byte word `l` where bit `l` of `m` is set, else
/// +1 (one 32-byte load per sub-block).
static WORDS_PM1: [[i8; 32]; 16] = words_table(-1, 1);
/// [`WORDS_PM1`] plus [`OFFSET`]: iq1's shifts with the offset of [`ACTS_SUMS`] in them.
static WORDS_OFFSET: [[i8; 32]; 16] = words_table(OFFSET - 1, OFFSET + 1);

/// Byte `j` of entry `m` is `neg` where bit `j / 8` of `m` is set, else `pos`.
const fn words_table(neg: i8, pos: i8) -> [[i8; 32]; 16] {
    let mut t = [[pos; 32]; 16];
    let mut m = 0;
    while m < 16 {
        let mut j = 0;
        while j < 32 {
            if m >> (j / 8) & 1 != 0 {
                t[m][j] = neg;
            }
            j += 1;
        }
        m += 1;
    }
    t
}

/// iq1's values plus [`OFFSET`], `8·g + (OFFSET ± 1)`: unsigned bytes `0..=18`.
///
/// # Safety
/// The CPU must have AVX2 (the caller is compiled with it); `#[inline(always)]` for the
/// reason [`signed_values`] gives.
#[inline(always)]
unsafe fn offset_values(g: GridWords, shifts: GridSigns) -> __m256i {
    // SAFETY: the caller guarantees AVX2; `WORDS_OFFSET` entries are 32 bytes, exactly what
    // the unaligned 32-byte load reads.
    unsafe {
        let (g, s) = match shifts {
            GridSigns::Words(m) => {
                let s: &[i8; 32] = &WORDS_OFFSET[usize::from(m & 15)];
                (grid_entries(g), _mm256_loadu_si256(s.as_ptr().cast()))
            }
            other => {
                let (g, s) = grid_signs(g, other);
                (g, _mm256_add_epi8(s, _mm256_set1_epi8(OFFSET)))
            }
        };
        _mm256_add_epi8(_mm256_sign_epi8(_mm256_set1_epi8(8), g), s)
    }
}

/// Four table words as one register, word `l` in lane `l`: one 8-byte load each, straight
/// into the vector register (`vmovq`, `vmovhpd`), no gather.
///
/// # Safety
/// The CPU must have AVX2 (the caller is compiled with it); `#[inline(always)]` for the
/// reason [`signed_values`] gives.
#[inline(always)]
unsafe fn load_u64x4(w: [&u64; 4]) -> __m256i {
    // SAFETY: the caller guarantees AVX2; each 8-byte load reads exactly the `u64` behind its
    // reference. (No closure: it would not be inlined with the caller's features.)
    unsafe {
        let lo = _mm_loadl_epi64((w[0] as *const u64).cast());
        let lo = _mm_castpd_si128(_mm_loadh_pd(_mm_castsi128_pd(lo), (w[1] as *const u64).cast()));
        let hi = _mm_loadl_epi64((w[2] as *const u64).cast());
        let hi = _mm_castpd_si128(_mm_loadh_pd(_mm_castsi128_pd(hi), (w[3] as *const u64).cast()));
        _mm256_set_m128i(hi, lo)
    }
}

/// Eight 32-bit table words as one register, word `k` in lane `k` (`vmovd`, `vpinsrd`).
///
/// # Safety
/// The CPU must have AVX2 (the caller is compiled with it); `#[inline(always)]` for the
/// reason [`signed_values`] gives.
#[inline(always)]
unsafe fn load_u32x8(w: [&u32; 8]) -> __m256i {
    // SAFETY: the caller guarantees AVX2 (SSE4.1's `pinsrd` with it).
    unsafe {
        let lo = _mm_cvtsi32_si128(*w[0] as i32);
        let lo = _mm_insert_epi32::<1>(lo, *w[1] as i32);
        let lo = _mm_insert_epi32::<2>(lo, *w[2] as i32);
        let lo = _mm_insert_epi32::<3>(lo, *w[3] as i32);
        let hi = _mm_cvtsi32_si128(*w[4] as i32);
        let hi = _mm_insert_epi32::<1>(hi, *w[5] as i32);
        let hi = _mm_insert_epi32::<2>(hi, *w[6] as i32);
        let hi = _mm_insert_epi32::<3>(hi, *w[7] as i32);
        _mm256_set_m128i(hi, lo)
    }
}

mod decode;
pub(crate) use decode::decode_row;

#[cfg(test)]
mod tests;
