//! The mat-mul tile of [`super::vec_dot_tile`] on AVX2 (no AVX-512 VNNI) for the non-affine
//! formats, where no activation quant of the call is -128 (as every quantizer makes them).
//!
//! The row kernels ([`super::avx2`]) dot one weight row with up to four activation rows per
//! pass, and every pass decodes the row's units again and gathers each batch's f16 scales of
//! both sides through general registers: about a third of the work at M = 64. Here each
//! weight row's units are decoded once for every activation row of the call: per unit its 32
//! values `w` and their magnitudes `|w|` (64 bytes, the row's 8 KiB at K = 4096 stay in L1)
//! and its scale as f32, eight widened at once, while the next row is prefetched; each
//! activation row's scales are widened and its quants copied to aligned vectors once per
//! call. Every pass of four activation rows then takes, per unit and row,
//!
//! ```text
//! x   = vpmaddwd(vpmaddubsw(|w|, vpsignb(a, w)), 1)     (= isum_lanes(), exact: no a is -128)
//! acc[j % 2] = fma(s_w·d_a, cvt(x), acc[j % 2])         (8 lanes, the row kernels' order)
//! ```
//!
//! and each row's two accumulators are summed by [`super::finish`]: the same lanes and f32
//! operations as [`super::vec_dot_portable`], so every result is the bits of that pair's
//! mat-vec. Where the CPU has 256-bit VNNI ([`VnniYmm`]: AVX-VNNI, or AVX-512 VNNI capped to
//! that level) the product is one `vpdpbusd(0, |w|, vpsignb(a, w))`, the same exact lanes: the
//! body is compiled once per form (`tile_kernel!`).
#![allow(unsafe_code)]

use std::arch::x86_64::*;

use super::avx2::{SIGNED, has_min, unit_vector_avx2, value_table, widen};
use super::{ACCS, BATCH, LANES, Q8Act, Q8Weight, Scale, finish, half_scales};
use crate::Avx2;
use crate::vnni::{EVEX, NONE, VEX, VnniYmm, dpbusd};

/// Activation rows from which the tile pays for decoding each weight row up front (Zen 4 at
/// the AVX2 level, one thread, against the row kernels: M = 8 −8 … +8 % by format, M = 12
/// +1 … +24 %, M = 16 +6 … +29 %).
pub(super) const MIN_ROWS: usize = 12;
/// Activation rows per pass: their accumulators (two each), the unit's two weight vectors and
/// the temporaries fill the 16 vector registers.
const PASS: usize = 4;

/// `out[i · stride + j]` = the dot of weight row `i` (`n` blocks, one after another in `w`)
/// with `a[j]` (each at least `n · UNITS` blocks), for a non-affine `W`; `n > 0`, `out` holds
/// every result (checked by the caller). `_avx2` proves the features. `false` (nothing
/// written) for an affine `W` and where an activation quant is -128 (the sign trick on the
/// activations would be wrong there; the row kernels handle it).
pub(super) fn tile<W: Q8Weight, A: Q8Act>(
    w: &[W],
    n: usize,
    a: &[&[A]],
    out: &mut [f32],
    stride: usize,
    _avx2: Avx2,
) -> bool {
    let units = n * W::UNITS;
    if W::AFFINE || a.iter().any(|a| a[..units].iter().any(|b| has_min(b.qs()))) {
        return false;
    }
    // SAFETY: an `Avx2` token exists only where the CPU has AVX2, FMA and F16C, all
    // `tile_avx2` needs, and `VnniYmm::detect` finds the VNNI form whose features the CPU has
    // besides. (No activation quant is -128: checked above.)
    unsafe {
        match VnniYmm::detect().map(VnniYmm::form) {
            Some(EVEX) => tile_evex::<W, A>(w, n, a, out, stride),
            Some(_) => tile_vex::<W, A>(w, n, a, out, stride),
            None => tile_avx2::<W, A>(w, n, a, out, stride),
        }
    };
    true
}

/// Defines the tile `$tile` and its pass `$pass` (the bodies below) compiled with `$features`,
/// the unit products in VNNI form `$form` ([`NONE`]: `vpmaddubsw` + `vpmaddwd`).
macro_rules! tile_kernel {
    ($(#[$doc:meta])* $tile:ident, $pass:ident, $features:literal, $form:expr) => {

$(#[$doc])*
#[target_feature(enable = $features)]
fn $tile<W: Q8Weight, A: Q8Act>(w: &[W], n: usize, a: &[&[A]], out: &mut [f32], stride: usize) {
    let units = n * W::UNITS;
    // Scale arrays run to a whole batch (zeros past the row): a batch's scales are one load.
    let padded = units.next_multiple_of(BATCH);
    let halves = matches!(W::SCALE, Scale::ByteHalves(_));
    // Per activation row and unit (zeros past the row): `d_a`, widened once (exact), and the
    // quants, copied to aligned vectors (the blocks' 34-byte stride split every other load
    // across two cache lines).
    let mut ad = vec![0f32; a.len() * padded];
    let mut aq = vec![_mm256_setzero_si256(); a.len() * padded];
    for ((d, q), a) in ad.chunks_exact_mut(padded).zip(aq.chunks_exact_mut(padded)).zip(a) {
        let a = &a[..units];
        widen_scales(d, |u| a[u].d_bits(), units);
        for (q, b) in q.iter_mut().zip(a) {
            // SAFETY: `qs()` is exactly 32 bytes, what the unaligned load reads.
            *q = unsafe { _mm256_loadu_si256(b.qs().as_ptr().cast()) };
        }
    }
    let table = value_table::<W, SIGNED>();
    // Per unit of the current weight row (zeros past it): `w`, `|w|`, the scale of its first
    // half and (nvfp4's two halves) both halves' as lanes 0..4 / 4..8.
    let mut wq = vec![_mm256_setzero_si256(); padded];
    let mut wa = vec![_mm256_setzero_si256(); padded];
    let mut ws = vec![0f32; padded];
    let mut wh = vec![_mm256_setzero_ps(); if halves { padded } else { 0 }];
    for (i, wr) in w.chunks_exact(n).enumerate() {
        // The next row, fetched into the cache block by block while this one is decoded: it
        // is needed only after every pass over this one, which leaves the hardware
        // prefetchers idle (without it the first load of each block missed: 14 % of q4_0's
        // M = 16 mat-mul).
        let next = w.get((i + 1) * n..(i + 2) * n).unwrap_or(&[]);
        for (u, (q, qa)) in wq.iter_mut().zip(&mut wa).take(units).enumerate() {
            let (b, k) = (&wr[u / W::UNITS], u % W::UNITS);
            if k == 0
                && let Some(nb) = next.get(u / W::UNITS)
            {
                // (A hint: it reads nothing the program sees and cannot fault.)
                _mm_prefetch::<_MM_HINT_T0>((nb as *const W).cast());
            }
            *q = unit_vector_avx2(b, k, table);
            *qa = _mm256_abs_epi8(*q);
        }
        match W::SCALE {
            Scale::F16 => widen_scales(&mut ws, |u| wr[u / W::UNITS].d_bits(), units),
            _ => {
                for u in 0..units {
                    let h = half_scales(&wr[u / W::UNITS], u % W::UNITS);
                    ws[u] = h[0];
                    if halves {
                        wh[u] = _mm256_set_m128(_mm_set1_ps(h[1]), _mm_set1_ps(h[0]));
                    }
                }
            }
        }
        let out = &mut out[i * stride..][..a.len()];
        for (c, o) in out.chunks_mut(PASS).enumerate() {
            let at = c * PASS * padded;
            let unit = Unit { wq: &wq, wa: &wa, ws: &ws, wh: &wh, ad: &ad[at..], aq: &aq[at..], padded };
            match o.len() {
                4 => $pass::<W, 4>(&unit, o),
                3 => $pass::<W, 3>(&unit, o),
                2 => $pass::<W, 2>(&unit, o),
                _ => $pass::<W, 1>(&unit, o),
            }
        }
    }
}

/// `out[r]` = the decoded weight row's dot with activation row `r` of the pass, for its
/// `R = out.len()` rows, provided no quant of `t.aq` is -128.
#[target_feature(enable = $features)]
fn $pass<W: Q8Weight, const R: usize>(t: &Unit<'_>, out: &mut [f32]) {
    const { assert!(BATCH == 8 && ACCS == 2 && LANES == 8 && R >= 1 && R <= PASS) };
    let halves = matches!(W::SCALE, Scale::ByteHalves(_));
    let mut acc = [[_mm256_setzero_ps(); ACCS]; R];
    let mut ad: [&[f32]; R] = [&[]; R];
    let mut aq: [&[__m256i]; R] = [&[]; R];
    for r in 0..R {
        ad[r] = &t.ad[r * t.padded..][..t.padded];
        aq[r] = &t.aq[r * t.padded..][..t.padded];
    }
    let mut d = [[0f32; BATCH]; R];
    // Units past the row (zero weights against zero activations, zero scales) add +0 to each
    // lane, which leaves it as it is: the row kernels' padding.
    for k in (0..t.padded).step_by(BATCH) {
        if !halves {
            // SAFETY: `ws` and each `ad[r]` hold `padded` scales, a multiple of 8 past `k`;
            // the store writes exactly `d[r]`'s 8 f32.
            unsafe {
                let wsv = _mm256_loadu_ps(t.ws[k..].as_ptr());
                for r in 0..R {
                    _mm256_storeu_ps(d[r].as_mut_ptr(), _mm256_mul_ps(wsv, _mm256_loadu_ps(ad[r][k..].as_ptr())));
                }
            }
        }
        // Each unit's scale broadcast from memory (one load), as the row kernels do with
        // several rows.
        let d = std::hint::black_box(&d);
        // Unit `k + $b` into accumulator `$b % 2`, spelled out for all eight: in a loop LLVM
        // kept the accumulators in memory (or rotated them through moves). (A macro: a
        // closure would not inherit the target features.)
        macro_rules! unit {
            ($b:literal) => {{
                let j = k + $b;
                let wa = t.wa[j];
                for r in 0..R {
                    let sa = _mm256_sign_epi8(aq[r][j], t.wq[j]);
                    let x = if $form == NONE {
                        _mm256_madd_epi16(_mm256_maddubs_epi16(wa, sa), _mm256_set1_epi16(1))
                    } else {
                        // SAFETY: this function has form `$form`'s features.
                        unsafe { dpbusd::<{ $form }>(_mm256_setzero_si256(), wa, sa) }
                    };
                    let s = if halves {
                        _mm256_mul_ps(_mm256_set1_ps(ad[r][j]), t.wh[j])
                    } else {
                        _mm256_set1_ps(d[r][$b])
                    };
                    acc[r][$b % 2] = _mm256_fmadd_ps(s, _mm256_cvtepi32_ps(x), acc[r][$b % 2]);
                }
            }};
        }
        unit!(0);
        unit!(1);
        unit!(2);
        unit!(3);
        unit!(4);
        unit!(5);
        unit!(6);
        unit!(7);
    }
    for (o, acc) in out.iter_mut().zip(acc) {
        let mut lanes = [[0f32; LANES]; ACCS];
        for (l, v) in lanes.iter_mut().zip(acc) {
            // SAFETY: `l` is 8 f32, exactly 32 bytes: the unaligned store writes only it.
            unsafe { _mm256_storeu_ps(l.as_mut_ptr(), v) };
        }
        *o = finish(lanes, [0.0; BATCH]);
    }
}
    };
}

tile_kernel!(
    /// [`tile`]'s work on AVX2; every result is wrong where one of `a`'s first `n · UNITS`
    /// blocks holds a -128 quant (the caller checks).
    tile_avx2,
    pass_avx2,
    "avx2,fma,f16c",
    NONE
);
tile_kernel!(
    /// [`tile_avx2`] with `vpdpbusd`, EVEX form.
    tile_evex,
    pass_evex,
    "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni",
    EVEX
);
tile_kernel!(
    /// [`tile_avx2`] with `vpdpbusd`, VEX form (AVX-VNNI).
    tile_vex,
    pass_vex,
    "avx2,fma,f16c,avxvnni",
    VEX
);

/// `d[u]` = the f16 scale `bits(u)` widened (exact), for `u` below `units`, eight at a time
/// (`vcvtph2ps`; one by one, each took a call through `half`'s run-time F16C check). `d`
/// holds `units` rounded up to a whole batch; the rest stay as they are (zero).
#[target_feature(enable = "avx2,fma,f16c")]
fn widen_scales(d: &mut [f32], bits: impl Fn(usize) -> u16, units: usize) {
    for (k, d) in d.as_chunks_mut::<BATCH>().0.iter_mut().enumerate() {
        let mut h = [0u16; BATCH];
        for (i, h) in h.iter_mut().enumerate() {
            let u = k * BATCH + i;
            if u < units {
                *h = bits(u);
            }
        }
        // SAFETY: `d` is exactly 8 f32, what the unaligned store writes.
        unsafe { _mm256_storeu_ps(d.as_mut_ptr(), widen(h)) };
    }
}

/// A decoded weight row (`wq`: `w`, `wa`: `|w|`, zero units past the row up to `padded`)
/// and the activation rows of a pass (row `r`'s unit `j` at `ad[r · padded + j]`, its
/// quants at `aq[r · padded + j]`, zero units past the row).
struct Unit<'t> {
    wq: &'t [__m256i],
    wa: &'t [__m256i],
    ws: &'t [f32],
    wh: &'t [__m256],
    ad: &'t [f32],
    aq: &'t [__m256i],
    padded: usize,
}
