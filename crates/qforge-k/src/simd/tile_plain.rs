//! The mat-mul tile kernel ([`super::tile`]) on plain blocks of the [`TileCodes`] formats (the
//! K-quants, tq, the grid I-quants and iq4_xs): a plain mat-mul decodes each block of a tile's
//! weight rows once for every activation row, as a packed matrix does, with no packed copy of
//! the weights.
//!
//! Per block and tile ([`Isa::ROWS`] weight rows: 16 on AVX-512 VNNI, 8 on AVX2), each row's
//! codes are unpacked by the format's row kernel's own code ([`TileCodes::tile_codes`]) into a
//! row-major scratch, its scales, mins, `d` and `dmin` likewise; then the codes are transposed
//! to a row per 32-bit lane ([`Isa::transpose_codes`]: `vpunpck{l,h}{dq,qdq}` and 128-bit
//! lane shuffles), the scales widened a row per lane, and [`super::tile::decode`] builds the
//! same [`super::tile::Tile`] the packed layout's blocks give. Every activation row then meets
//! it as in the packed kernel. Its sums are the packed kernel's, which are the plain row
//! kernels' (the order [`crate::dot::Q8KCodes`] defines), so every result is the bits of that
//! activation row's mat-vec.

use std::arch::x86_64::*;

use super::tile::File;
use super::tile::{Acts, BlockLanes, Isa, Source, TILE_MIN_ROWS, Tile, accumulate, decode, prepare};
use super::tile_isa::{Ymm, Zmm};
use crate::QK_K;
use crate::dot::GROUPS;
use crate::packed::{Layout, PackedCodes, TileCodes};
use crate::q8k::BlockQ8K;
use qforge_core::MAX_PACKED_DOT_ROWS;
use qforge_simd::Avx2;
use qforge_simd::vnni::{EVEX, NONE, VEX};

/// Activation rows per call where [`Ymm`] dots the values as `i16` pairs (iq4_xs at AVX2):
/// 80 rows widened are 640 KiB at K = 4096. (256, with the rest of the tile kernels' rows:
/// iq4_xs at M = 512 7–25 % slower than with 74.)
const WIDE_ROWS: usize = 80;

/// Weight rows per kernel call: their accumulators (a pair of vectors per 16-row tile and
/// activation row, 256 KiB at 256 rows on AVX-512) stay in L2 beside the activations. (A
/// task's 512 or 1024 rows at once, 1–2 MiB of them, held two threads to 1.5× of one at
/// M = 512.)
const WEIGHT_ROWS: usize = 128;

/// `out[i · stride + j]` = the dot of weight row `i` (blocks `i·n .. (i+1)·n` of `w`) with
/// `a[j]`, for `a.len() ≥` [`TILE_MIN_ROWS`] on a CPU with AVX2 (AVX-512 VNNI where it has
/// that); `false` (nothing written) otherwise. Every `a[j]` holds at least `n` blocks, `n > 0`,
/// `w.len()` is a multiple of `n` and `out` holds every result (checked by the caller).
pub(crate) fn plain_tile<F: TileCodes>(
    w: &[F::Block],
    n: usize,
    a: &[&[BlockQ8K]],
    out: &mut [f32],
    stride: usize,
) -> bool {
    if n == 0 || a.len() < TILE_MIN_ROWS || qforge_simd::Avx2::detect().is_none() {
        return false;
    }
    // Rows per tile call: all the caller gives, up to `MAX_PACKED_DOT_ROWS`, but where the AVX2
    // register file dots the values as `i16` pairs, as many as keep their widened copies
    // (8 KiB per row at K = 4096) about L2's size.
    let file = File::detect();
    let chunk = if file.widens::<F>() { WIDE_ROWS } else { MAX_PACKED_DOT_ROWS };
    for (c, a) in a.chunks(chunk).enumerate() {
        let Some(prep) = prepare::<F>(a, n, file) else {
            // Not reached (AVX2 was checked above); `false` would only make the caller redo
            // every row with the row kernels.
            return false;
        };
        let acts = prep.acts(a, n);
        let out = &mut out[c * chunk..];
        // The weight rows `WEIGHT_ROWS` at a time: the kernel keeps an accumulator pair per
        // tile and activation row in memory while it walks the blocks.
        for (wc, w) in w.chunks(WEIGHT_ROWS * n).enumerate() {
            let out = &mut out[wc * WEIGHT_ROWS * stride..];
            // SAFETY: `prepare` returned, so this CPU has AVX2, FMA and F16C, all
            // `plain_avx2` needs, and `prep.file` says which features it has besides: AVX-512
            // F / BW / VL / VNNI for `plain_vnni`, a VNNI form's for `plain_ymm_*`.
            unsafe {
                match prep.file {
                    File::Zmm => plain_vnni::<F>(w, acts, out, stride, prep.avx2),
                    File::Ymm(EVEX) => plain_ymm_evex::<F>(w, acts, out, stride, prep.avx2),
                    File::Ymm(VEX) => plain_ymm_vex::<F>(w, acts, out, stride, prep.avx2),
                    File::Ymm(_) => plain_avx2::<F>(w, acts, out, stride, prep.avx2),
                }
            }
        }
    }
    true
}

/// The kernel on AVX-512 VNNI.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn plain_vnni<F: TileCodes>(w: &[F::Block], acts: Acts<'_>, out: &mut [f32], stride: usize, avx2: Avx2) {
    // SAFETY: this function has the features `Zmm`'s functions need.
    unsafe { kernel::<Zmm, F>(w, acts, out, stride, avx2) }
}

/// The kernel on AVX2.
#[target_feature(enable = "avx2,fma,f16c")]
fn plain_avx2<F: TileCodes>(w: &[F::Block], acts: Acts<'_>, out: &mut [f32], stride: usize, avx2: Avx2) {
    // SAFETY: this function has the features `Ymm<NONE>`'s functions need.
    unsafe { kernel::<Ymm<NONE>, F>(w, acts, out, stride, avx2) }
}

/// The kernel on 256-bit VNNI, EVEX form.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn plain_ymm_evex<F: TileCodes>(w: &[F::Block], acts: Acts<'_>, out: &mut [f32], stride: usize, avx2: Avx2) {
    // SAFETY: this function has the features `Ymm<EVEX>`'s functions need.
    unsafe { kernel::<Ymm<EVEX>, F>(w, acts, out, stride, avx2) }
}

/// The kernel on 256-bit VNNI, VEX form (AVX-VNNI).
#[target_feature(enable = "avx2,fma,f16c,avxvnni")]
fn plain_ymm_vex<F: TileCodes>(w: &[F::Block], acts: Acts<'_>, out: &mut [f32], stride: usize, avx2: Avx2) {
    // SAFETY: this function has the features `Ymm<VEX>`'s functions need.
    unsafe { kernel::<Ymm<VEX>, F>(w, acts, out, stride, avx2) }
}

/// Every tile of `w`'s rows against every row of `acts`, the results to `out[i · stride + j]`.
///
/// # Safety
/// As [`Isa`]'s functions.
#[inline(always)]
unsafe fn kernel<V: Isa, F: TileCodes>(w: &[F::Block], acts: Acts<'_>, out: &mut [f32], stride: usize, avx2: Avx2) {
    let n = acts.blocks();
    let rows = w.len() / n;
    let m = acts.len();
    let mut src = PlainTiles::<V, F> { w, n, rows, s: Box::new(Scratch::ZERO), avx2, _v: std::marker::PhantomData };
    // SAFETY: the caller's guarantee.
    unsafe {
        let acc = accumulate::<V, F>(&mut src, acts);
        let mut lanes = [0f32; 16];
        for (tl, acc) in acc.chunks_exact(m.max(1)).enumerate() {
            let r0 = tl * V::ROWS;
            let width = (rows - r0).min(V::ROWS);
            for (j, acc) in acc.iter().enumerate() {
                let v = if F::HAS_MINS { V::subf(acc[0], acc[1]) } else { acc[0] };
                V::store(v, &mut lanes[..V::ROWS]);
                for (l, &x) in lanes[..width].iter().enumerate() {
                    out[(r0 + l) * stride + j] = x;
                }
            }
        }
    }
}

/// One block of a tile's rows, unpacked row by row: the codes in element order, the scales
/// and mins per scale group and row (`[group][row]`), `d` and `dmin` as f16 bits.
struct Scratch {
    codes: [[u8; QK_K]; 16],
    sc: [[u8; 16]; GROUPS],
    mins: [[u8; 16]; GROUPS],
    d: [u16; 16],
    dmin: [u16; 16],
}

impl Scratch {
    const ZERO: Scratch =
        Scratch { codes: [[0; QK_K]; 16], sc: [[0; 16]; GROUPS], mins: [[0; 16]; GROUPS], d: [0; 16], dmin: [0; 16] };
}

/// The plain weight rows of a call as tiles: `rows` rows of `n` blocks in `w`.
struct PlainTiles<'w, V, F: TileCodes> {
    w: &'w [F::Block],
    n: usize,
    rows: usize,
    s: Box<Scratch>,
    avx2: Avx2,
    _v: std::marker::PhantomData<fn() -> V>,
}

impl<V: Isa, F: TileCodes> Source<V> for PlainTiles<'_, V, F> {
    fn tiles(&self) -> usize {
        self.rows.div_ceil(V::ROWS)
    }

    #[inline(always)]
    unsafe fn decode(&mut self, tile: usize, i: usize, t: &mut Tile<V>) {
        let l = const { Layout::of::<F>() };
        let r0 = tile * V::ROWS;
        let width = (self.rows - r0).min(V::ROWS);
        // The next tile's blocks (the kernel goes block by block across the tiles), fetched
        // into L2 while this one's rows are dotted, one row per row unpacked here (not all at
        // once: the burst waited for miss buffers): its rows are a row of blocks apart, a
        // stride the hardware's prefetchers left to demand misses (27 % of q6_k's mat-mul at
        // the first load of a block's codes). Into L2, not L1: the passes in between read a
        // block of every activation row (64 rows: 18 KiB), which would evict them from L1.
        let (next_tile, next_i) = if tile + 1 < self.rows.div_ceil(V::ROWS) { (tile + 1, i) } else { (0, i + 1) };
        let next = if next_i < self.n { Some((next_tile * V::ROWS, next_i)) } else { None };
        let s = &mut *self.s;
        for r in 0..V::ROWS {
            if let Some((r1, next_i)) = next
                && r1 + r < self.rows
            {
                let b = bytemuck::bytes_of(&self.w[(r1 + r) * self.n + next_i]);
                for at in (0..b.len()).step_by(64).chain([b.len() - 1]) {
                    // SAFETY: a prefetch is a hint: it reads nothing the program sees and
                    // cannot fault; the address is inside the block (SSE, which x86-64 has).
                    unsafe { _mm_prefetch::<_MM_HINT_T1>(b[at..].as_ptr().cast()) };
                }
            }
            if r >= width {
                continue;
            }
            let b = &self.w[(r0 + r) * self.n + i];
            F::tile_codes(b, &mut s.codes[r], self.avx2);
            let (sc, mins) = <F as PackedCodes>::scales(b);
            for k in 0..l.groups {
                let g = k * l.group / 16;
                s.sc[k][r] = sc[g] as u8;
                s.mins[k][r] = mins[g];
            }
            let [d, dmin] = <F as PackedCodes>::d_dmin(b);
            s.d[r] = d.bits();
            s.dmin[r] = dmin.bits();
        }
        // Rows past the weight (the last tile): lanes never stored; zero scales keep them finite.
        for r in width..V::ROWS {
            s.d[r] = 0;
            s.dmin[r] = 0;
        }
        // SAFETY: the caller's guarantee.
        unsafe { decode::<V, F>(&mut Lanes { s }, t) };
    }
}

/// A [`Scratch`] as [`BlockLanes`].
struct Lanes<'s> {
    s: &'s Scratch,
}

impl<V: Isa, F: TileCodes> BlockLanes<V, F> for Lanes<'_> {
    #[inline(always)]
    unsafe fn codes(&mut self, c: &mut [V::I]) {
        // SAFETY: the caller's guarantee.
        unsafe {
            V::transpose_codes(&self.s.codes, c);
            V::from_u::<F>(c);
        }
    }
    #[inline(always)]
    unsafe fn scales(&self, k: usize) -> V::I {
        // SAFETY: the caller's guarantee.
        unsafe { V::lanes_bytes(&self.s.sc[k], true) }
    }
    #[inline(always)]
    unsafe fn mins(&self, k: usize) -> V::I {
        // SAFETY: the caller's guarantee.
        unsafe { V::lanes_bytes(&self.s.mins[k], false) }
    }
    #[inline(always)]
    unsafe fn d(&self, min: bool) -> V::F {
        // SAFETY: the caller's guarantee.
        unsafe { V::lanes_halves(if min { &self.s.dmin } else { &self.s.d }) }
    }
}
