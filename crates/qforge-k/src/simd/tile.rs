//! The mat-mul kernel of the packed layout ([`crate::packed`]) for many activation rows: each
//! packed block decoded once into a tile, then dotted with every activation row.
//!
//! The group kernel ([`super::packed`]) unpacks a unit's codes for at most four activation
//! rows. For a mat-mul this kernel instead decodes a block of a tile's weight rows once, for
//! all of them, into L1:
//!
//! * `codes`: the block's 64 quads, one vector each (a row per 32-bit lane), after the format's
//!   table (`u`; on AVX2, a table with `u` above 127 as its signed values `u − ZERO`, with no
//!   zero term, widened to two vectors of `i16` pairs per quad: see below);
//! * `sc`: each scale group's scales as `i32` lanes; `zsc`: `ZERO · sc` as the `i16` pairs of the
//!   16-element halves `(2j, 2j + 1)`; `mins` the same pairs of the mins; `d`, `dmin` in `f32`.
//!
//! Per activation row and block, in the lanes' exact wrapping `i32` (the reference's integers,
//! regrouped: the same value modulo 2³²):
//!
//! ```text
//! T = Σ_g sc[g] · Σ_{i in g} u[i]·a.qs[i]  −  Σ_j madd(zsc pair j, zero-sum pair j)
//! M = Σ_j madd(min pair j, bsums pair j)
//! ```
//!
//! (with every scale 1, `UNIT_SCALES`, summed per 32-element unit, and the zero term one
//! subtraction of `ZERO ·` [`packed::block_zero_sum`] per block), where a zero-sum pair holds
//! two 16-element halves' `bsums` (or, for a table with `u` above 127, the sums of their
//! quants: [`packed::zero_sum`]). Every pair product fits: `|ZERO·sc| ≤ 255·128 < 2¹⁵` and
//! the `bsums` are `i16`, so each `vpmaddwd` is exact. Then, as the reference: `acc = fma(T,
//! d·a.d, acc)`, `accm = fma(M, dmin·a.d, accm)`, result `acc − accm`: the portable kernel's
//! bits.
//!
//! One body, two register files ([`Isa`], in `tile_isa`): AVX-512 VNNI tiles two groups (16
//! rows in 512-bit lanes: `d` and `dmin` of an absent second group are zero and its lanes never
//! stored) and dots eight activation rows per pass with `vpdpbusd`; AVX2 tiles one group and
//! dots four rows per pass with `vpmaddubsw` + `vpmaddwd` (eight with signed values, below).
//! At the `avxvnni` level (AVX-VNNI, or AVX-512 VNNI capped there) the 256-bit file takes
//! `vpdpbusd` / `vpdpwssd` in that VNNI form (`Ymm<VEX>`, `Ymm<EVEX>`): every table unsigned,
//! as on AVX-512, four rows per pass in the VEX form and eight in the EVEX one.
//!
//! ## Signed values on AVX2 (iq4_xs)
//!
//! `vpmaddubsw` takes unsigned weights of at most 127 (else its `i16` pair sums overflow), so
//! the group kernel dots a table spanning more than 127 with the sign trick: `vpabsb`,
//! `vpsignb`, `vpmaddubsw` and `vpmaddwd` per four values of 8 rows and an activation row. On
//! Zen 3 all four issue on the same two pipes (measured: 8 `vpmaddubsw` take 4 cycles, with 6
//! `vpsignb` beside them 6, with 6 `vpaddd` still 4), so that is 2 cycles per 32 products. Here
//! each block is decoded once for many activation rows, so the tile holds the signed values as
//! `i16` instead: per quad, one vector of the 8 rows' values `(v0, v2)` and one of `(v1, v3)`
//! (an arithmetic shift of each `i16` of the bytes, and of it shifted up by 8), and each
//! activation row is widened once per call to `i16` in the order `a0, a2, a1, a3` per quad
//! ([`widen`]). Then `vpmaddwd` of a vector and a broadcast pair is 16 exact products summed
//! in pairs, two per 32 products on those pipes instead of four: the same `i32` per lane.
//! Without the trick's registers a pass takes eight rows, each weight vector loaded once for
//! all of them. iq4_xs's mat-mul (M = 64, 4096², one thread, Zen 3): 45 → 50 Gel/s, best
//! runs of 8 alternated (`docs/matmul-history-3.md`, "iq4_xs mat-mul on AVX2").

use std::arch::x86_64::*;

use super::tile_isa::{Ymm, Zmm};
use crate::QK_K;
use crate::packed::{self, Layout, PackedCodes, ROWS};
use crate::q8k::BlockQ8K;
use qforge_simd::vnni::{EVEX, Form, NONE, VEX, VnniYmm};

/// Activation rows from which [`super::packed::packed_dot_groups`] takes this kernel: below,
/// decoding each block once costs more than the group kernel's unpacking per four rows.
pub(crate) const TILE_MIN_ROWS: usize = 8;

/// Quads (four elements) per block.
pub(super) const QUADS: usize = QK_K / 4;

/// 16-element halves per block, and their pairs.
const HALVES: usize = QK_K / 16;
const PAIRS: usize = HALVES / 2;

/// One register file's vectors and the operations the kernel's body takes from it.
///
/// # Safety
/// Every function may be called only from a function compiled with the register file's
/// features ([`tile_vnni`], [`tile_avx2`]), into which it is inlined.
pub(super) trait Isa: Sized {
    /// Weight rows per tile: the 32-bit lanes of [`Isa::I`] (one or two groups).
    const ROWS: usize;
    /// Whether a table with `u` above 127 is dotted signed (as `i16` pairs), with no zero term.
    const SIGNED: bool;
    /// Integer and f32 vectors.
    type I: Copy;
    type F: Copy;
    unsafe fn zero() -> Self::I;
    unsafe fn zerof() -> Self::F;
    unsafe fn add(a: Self::I, b: Self::I) -> Self::I;
    unsafe fn sub(a: Self::I, b: Self::I) -> Self::I;
    unsafe fn mullo(a: Self::I, b: Self::I) -> Self::I;
    /// `vpmaddwd`.
    unsafe fn madd(a: Self::I, b: Self::I) -> Self::I;
    /// `acc + madd(a, b)` (wrapping): `vpdpwssd` where the register file has VNNI.
    #[inline(always)]
    unsafe fn madd_add(acc: Self::I, a: Self::I, b: Self::I) -> Self::I {
        // SAFETY: the caller's guarantee (the register file's features).
        unsafe { Self::add(acc, Self::madd(a, b)) }
    }
    unsafe fn set1(x: i32) -> Self::I;
    unsafe fn set1f(x: f32) -> Self::F;
    unsafe fn cvt(a: Self::I) -> Self::F;
    unsafe fn mulf(a: Self::F, b: Self::F) -> Self::F;
    unsafe fn fmadd(a: Self::F, b: Self::F, c: Self::F) -> Self::F;
    unsafe fn subf(a: Self::F, b: Self::F) -> Self::F;
    /// `vpunpck{l,h}dq`, `vpunpck{l,h}qdq`.
    unsafe fn unpacklo32(a: Self::I, b: Self::I) -> Self::I;
    unsafe fn unpackhi32(a: Self::I, b: Self::I) -> Self::I;
    unsafe fn unpacklo64(a: Self::I, b: Self::I) -> Self::I;
    unsafe fn unpackhi64(a: Self::I, b: Self::I) -> Self::I;
    /// The low 16 bits of each lane of `lo` and, above them, those of `hi`.
    unsafe fn pair(lo: Self::I, hi: Self::I) -> Self::I;
    /// Each `i16` times `z` (wrapping).
    unsafe fn mullo16(a: Self::I, z: i16) -> Self::I;
    /// The 8 rows' bytes at `at` of block `b` (and of `b1`, or zeros, in the lanes above),
    /// sign- or zero-extended.
    unsafe fn bytes(b: &[u8], b1: Option<&[u8]>, at: usize, signed: bool) -> Self::I;
    /// The 8 rows' f16 at `at` of `b` (and of `b1`, or zeros), widened.
    unsafe fn halves(b: &[u8], b1: Option<&[u8]>, at: usize) -> Self::F;
    /// The first `out.len()` lanes of `v`.
    unsafe fn store(v: Self::F, out: &mut [f32]);
    /// Unit `u`'s 8 quads of codes of `b` (and of `b1`, or zeros), looked up in `F`'s table,
    /// [`quad_vecs`] vectors per quad.
    unsafe fn codes<F: PackedCodes>(b: &[u8], b1: Option<&[u8]>, u: usize, c: &mut [Self::I]);
    /// Quad `q` of the first [`Isa::ROWS`] rows of `rows` (each a block's 256 codes in element
    /// order) into `c[q]`, a row per lane: a transposition of 32-bit words.
    unsafe fn transpose_codes(rows: &[[u8; QK_K]; 16], c: &mut [Self::I]);
    /// [`Isa::transpose_codes`]' `u` (one vector per quad) as the tile holds `F`'s codes: as
    /// they are, or, where `V` dots `F`'s values signed, the values `u − ZERO` as `i16` pairs
    /// ([`quad_vecs`] 2, the form [`Isa::codes`] gives).
    unsafe fn from_u<F: PackedCodes>(c: &mut [Self::I]);
    /// Lane `r` = byte `r` of `v`, sign- or zero-extended.
    unsafe fn lanes_bytes(v: &[u8; 16], signed: bool) -> Self::I;
    /// Lane `r` = the f16 `v[r]`, widened.
    unsafe fn lanes_halves(v: &[u16; 16]) -> Self::F;
    /// Each row's `Σ u·a` over the quads `c` (4 or 8, [`quad_vecs`] vectors each), the first
    /// at quad `q0` of the block.
    unsafe fn group<F: PackedCodes, const R: usize>(c: &[Self::I], rows: &[RowQ<'_>; R], q0: usize) -> [Self::I; R];
    /// One pass of [`rows`] from row `r0` (as many rows as the register file takes, or those
    /// left); returns how many.
    unsafe fn pass<F: PackedCodes>(
        t: &Tile<Self>,
        acts: Acts<'_>,
        i: usize,
        r0: usize,
        acc: &mut [[Self::F; 2]],
    ) -> usize;
}

/// The activation rows of a call (each at least `n` blocks), their [`RowSums`] (`n` per row,
/// row-major) and, where `V` dots `F`'s values as `i16` pairs ([`quad_vecs`] 2), their quants
/// [`widen`]ed (block-major; else empty).
#[derive(Clone, Copy)]
pub(super) struct Acts<'a> {
    a: &'a [&'a [BlockQ8K]],
    sums: &'a [RowSums],
    wide: &'a [[i16; QK_K]],
    n: usize,
}

/// One activation row's block as a group reads it: its quants and, where the values are dotted
/// as `i16` pairs, the same widened ([`widen`]; else zeros).
#[derive(Clone, Copy)]
pub(super) struct RowQ<'a> {
    pub(super) qs: &'a [i8; QK_K],
    pub(super) wide: &'a [i16; QK_K],
}

/// What a tile call computes once from its activation rows, before any weight tile: each
/// row's [`RowSums`] and, where the AVX2 register file dots `F`'s values as `i16` pairs, the
/// rows [`widen`]ed; and which register file runs (the packed and the plain tile entries both
/// start here).
pub(super) struct Prepared {
    sums: Vec<RowSums>,
    wide: Vec<[i16; QK_K]>,
    /// The register file that runs.
    pub(super) file: File,
    /// The proof of AVX2, FMA and F16C.
    pub(super) avx2: qforge_simd::Avx2,
}

/// [`Prepared`] for the rows `a` (each at least `n` blocks), or `None` without AVX2 (the
/// caller then takes the group / row kernels; it also decides below how many rows, see
/// [`TILE_MIN_ROWS`], the tile does not pay), run on `file` ([`File::detect`]'s, which the
/// caller asks once).
pub(super) fn prepare<F: PackedCodes>(a: &[&[BlockQ8K]], n: usize, file: File) -> Option<Prepared> {
    let avx2 = qforge_simd::Avx2::detect()?;
    // SAFETY: `Avx2::detect` has just checked that this CPU has AVX2, FMA and F16C, all
    // `row_sums` and `widen` need.
    unsafe {
        let sums = row_sums::<F>(a, n);
        let wide = if file.widens::<F>() { widen(a, n) } else { Vec::new() };
        Some(Prepared { sums, wide, file, avx2 })
    }
}

/// The register file a tile call runs on: [`Zmm`] (AVX-512 VNNI), else [`Ymm`] in the 256-bit
/// VNNI form the CPU runs ([`VnniYmm`]), else in the AVX2 build (`NONE`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum File {
    Zmm,
    Ymm(Form),
}

impl File {
    /// The highest this thread may run (given AVX2).
    pub(super) fn detect() -> File {
        if qforge_simd::Vnni::detect().is_some() {
            return File::Zmm;
        }
        File::Ymm(VnniYmm::detect().map_or(NONE, VnniYmm::form))
    }

    /// Whether it dots `F`'s values as `i16` pairs, from the rows [`widen`]ed.
    pub(super) fn widens<F: PackedCodes>(self) -> bool {
        self == File::Ymm(NONE) && signed::<Ymm<NONE>, F>()
    }
}

impl Prepared {
    /// The rows `a` (those [`prepare`] was given) with what was prepared from them.
    pub(super) fn acts<'a>(&'a self, a: &'a [&'a [BlockQ8K]], n: usize) -> Acts<'a> {
        Acts { a, sums: &self.sums, wide: &self.wide, n }
    }
}

impl<'a> Acts<'a> {
    /// Blocks per row (of the call).
    pub(super) fn blocks(&self) -> usize {
        self.n
    }

    /// How many rows.
    pub(super) fn len(&self) -> usize {
        self.a.len()
    }
}

/// Whether `V` dots `F`'s values signed (see [`Isa::SIGNED`]).
pub(super) const fn signed<V: Isa, F: PackedCodes>() -> bool {
    let s = V::SIGNED && packed::zero_from_quants::<F>();
    assert!(!s || packed::signed_values_fit::<F>(), "a table whose signed values are not i8");
    s
}

/// Vectors per quad in a [`Tile`]'s codes: 2 where `V` dots `F`'s values as `i16` pairs
/// (signed), else 1.
pub(super) const fn quad_vecs<V: Isa, F: PackedCodes>() -> usize {
    if signed::<V, F>() { 2 } else { 1 }
}

/// One block of a tile's weight rows, decoded (see the module docs).
pub(super) struct Tile<V: Isa> {
    codes: [V::I; 2 * QUADS],
    sc: [V::I; HALVES],
    zsc: [V::I; PAIRS],
    mins: [V::I; PAIRS],
    d: V::F,
    dmin: V::F,
}

/// Per activation row and block: the zero-sum pairs and the `bsums` pairs (`i16` halves of an
/// `i32`), for [`Tile::zsc`] and [`Tile::mins`].
#[derive(Clone, Copy)]
pub(super) struct RowSums {
    zero: [i32; PAIRS],
    bsums: [i32; PAIRS],
    /// `ZERO ·` [`packed::block_zero_sum`] (wrapping): the whole zero term of a format with
    /// unit scales, subtracted once per block (0 for the others, which do not read it).
    zero_total: i32,
}

/// Two `i16` as the halves of one `i32` lane (low first).
fn pair(lo: i32, hi: i32) -> i32 {
    i32::from(lo as u16) | i32::from(hi as u16) << 16
}

/// [`crate::packed::dot_groups_rows`] with this kernel, for `a.len() ≥` [`TILE_MIN_ROWS`] on a
/// CPU with AVX2 (AVX-512 VNNI where it has that); `false` (nothing written) otherwise.
/// Arguments as [`super::packed::packed_dot_groups`]'s.
pub(crate) fn tile_dot_groups<F: PackedCodes>(p: &[u8], n: usize, a: &[&[BlockQ8K]], out: &mut [f32]) -> bool {
    if a.len() < TILE_MIN_ROWS {
        return false;
    }
    let Some(prep) = prepare::<F>(a, n, File::detect()) else {
        return false;
    };
    let acts = prep.acts(a, n);
    // SAFETY: `prepare` returned, so this CPU has AVX2, FMA and F16C, all `tile_avx2` needs,
    // and `prep.file` (`File::detect`) says which features it has besides: AVX-512 F / BW /
    // VL / VNNI for `tile_vnni`, a VNNI form's for `tile_ymm_evex` / `tile_ymm_vex`.
    unsafe {
        match prep.file {
            File::Zmm => tile_vnni::<F>(p, acts, out),
            File::Ymm(EVEX) => tile_ymm_evex::<F>(p, acts, out),
            File::Ymm(VEX) => tile_ymm_vex::<F>(p, acts, out),
            File::Ymm(_) => tile_avx2::<F>(p, acts, out),
        }
    }
    true
}

/// Every row's first `n` blocks' quants as `i16`, each quad `q0 q1 q2 q3` in the order `q0
/// q2 q1 q3` (the pairs of the tile's two `i16` vectors per quad), block-major: a block's rows
/// 512 bytes apart. (Row-major, with 16 blocks a row, the rows a pass reads were 8 KiB apart,
/// all in the same L1 sets.)
#[target_feature(enable = "avx2,fma,f16c")]
fn widen(a: &[&[BlockQ8K]], n: usize) -> Vec<[i16; QK_K]> {
    // Per 16 bytes: each quad's bytes 0, 2, 1, 3.
    let order = _mm_setr_epi8(0, 2, 1, 3, 4, 6, 5, 7, 8, 10, 9, 11, 12, 14, 13, 15);
    let mut wide = vec![[0i16; QK_K]; a.len() * n];
    for (w, b) in wide.iter_mut().zip((0..n).flat_map(|i| a.iter().map(move |a| &a[i]))) {
        for (w, q) in w.as_chunks_mut::<16>().0.iter_mut().zip(b.qs.as_chunks::<16>().0) {
            // SAFETY: the load reads exactly the 16 bytes of `q`, the store writes exactly the
            // 32 bytes of `w`.
            unsafe {
                let v = _mm_shuffle_epi8(_mm_loadu_si128(q.as_ptr().cast()), order);
                _mm256_storeu_si256(w.as_mut_ptr().cast(), _mm256_cvtepi8_epi16(v));
            }
        }
    }
    wide
}

/// Every row's [`RowSums`] of its first `n` blocks, row-major.
#[target_feature(enable = "avx2,fma,f16c")]
fn row_sums<F: PackedCodes>(a: &[&[BlockQ8K]], n: usize) -> Vec<RowSums> {
    let mut sums = Vec::with_capacity(a.len() * n);
    for a in a {
        for b in &a[..n] {
            let bs = |h: usize| i32::from(b.bsums[h].get());
            let bsums = std::array::from_fn(|j| pair(bs(2 * j), bs(2 * j + 1)));
            let mut zero = bsums;
            if packed::zero_from_quants::<F>() {
                // Each 16 quants' sum: `vpsadbw` of the quants offset to unsigned (`q ^ 0x80 =
                // q + 128`) sums each 8, less 8 · 128.
                let flip = _mm256_set1_epi8(i8::MIN);
                for (j, z) in zero.iter_mut().enumerate() {
                    let q = b.qs[32 * j..].first_chunk::<32>().expect("two halves of the block");
                    // SAFETY: the load reads exactly the 32 bytes of `q`.
                    let v = _mm256_xor_si256(unsafe { _mm256_loadu_si256(q.as_ptr().cast()) }, flip);
                    let mut e = [0i64; 4];
                    // SAFETY: `e` is exactly 32 bytes: the store writes only it.
                    unsafe { _mm256_storeu_si256(e.as_mut_ptr().cast(), _mm256_sad_epu8(v, _mm256_setzero_si256())) };
                    let half = |k: usize| (e[2 * k] + e[2 * k + 1]) as i32 - 16 * 128;
                    *z = pair(half(0), half(1));
                }
            }
            // Only the unit-scale formats read it.
            let zero_total = if F::UNIT_SCALES && F::ZERO != 0 {
                packed::block_zero_sum::<F>(b).wrapping_mul(i32::from(F::ZERO))
            } else {
                0
            };
            sums.push(RowSums { zero, bsums, zero_total });
        }
    }
    sums
}

/// The kernel on AVX-512 VNNI.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn tile_vnni<F: PackedCodes>(p: &[u8], acts: Acts<'_>, out: &mut [f32]) {
    // SAFETY: this function has the features `Zmm`'s functions need.
    unsafe { kernel::<Zmm, F>(p, acts, out) }
}

/// The kernel on AVX2.
#[target_feature(enable = "avx2,fma,f16c")]
fn tile_avx2<F: PackedCodes>(p: &[u8], acts: Acts<'_>, out: &mut [f32]) {
    // SAFETY: this function has the features `Ymm<NONE>`'s functions need.
    unsafe { kernel::<Ymm<NONE>, F>(p, acts, out) }
}

/// The kernel on 256-bit VNNI, EVEX form.
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
fn tile_ymm_evex<F: PackedCodes>(p: &[u8], acts: Acts<'_>, out: &mut [f32]) {
    // SAFETY: this function has the features `Ymm<EVEX>`'s functions need.
    unsafe { kernel::<Ymm<EVEX>, F>(p, acts, out) }
}

/// The kernel on 256-bit VNNI, VEX form (AVX-VNNI).
#[target_feature(enable = "avx2,fma,f16c,avxvnni")]
fn tile_ymm_vex<F: PackedCodes>(p: &[u8], acts: Acts<'_>, out: &mut [f32]) {
    // SAFETY: this function has the features `Ymm<VEX>`'s functions need.
    unsafe { kernel::<Ymm<VEX>, F>(p, acts, out) }
}

/// Where a call's weight tiles come from ([`Isa::ROWS`] weight rows each): the packed layout
/// ([`PackedTiles`]) or plain blocks (`super::tile_plain`).
pub(super) trait Source<V: Isa> {
    /// How many tiles.
    fn tiles(&self) -> usize;
    /// Decodes block `i` of tile `tile` into `t`.
    ///
    /// # Safety
    /// As [`Isa`]'s functions.
    unsafe fn decode(&mut self, tile: usize, i: usize, t: &mut Tile<V>);
}

/// One block of a tile's weight rows as [`decode`] reads it, a lane per weight row.
pub(super) trait BlockLanes<V: Isa, F: PackedCodes> {
    /// The block's codes after `F`'s table, [`quad_vecs`] vectors per quad (see [`Tile`]).
    ///
    /// # Safety
    /// As [`Isa`]'s functions.
    unsafe fn codes(&mut self, c: &mut [V::I]);
    /// The `i8` scales of scale group `k`, sign-extended.
    ///
    /// # Safety
    /// As [`Isa`]'s functions.
    unsafe fn scales(&self, k: usize) -> V::I;
    /// The `u8` mins of scale group `k`, zero-extended.
    ///
    /// # Safety
    /// As [`Isa`]'s functions.
    unsafe fn mins(&self, k: usize) -> V::I;
    /// `d` (`min`: `dmin`), widened from f16.
    ///
    /// # Safety
    /// As [`Isa`]'s functions.
    unsafe fn d(&self, min: bool) -> V::F;
}

/// Packed block `b` of a tile's first group and `b1` of its second (if any).
struct PackedBlock<'p> {
    b: &'p [u8],
    b1: Option<&'p [u8]>,
}

impl<V: Isa, F: PackedCodes> BlockLanes<V, F> for PackedBlock<'_> {
    #[inline(always)]
    unsafe fn codes(&mut self, c: &mut [V::I]) {
        let w = const { quad_vecs::<V, F>() };
        for (u, c) in c[..QUADS * w].chunks_exact_mut(8 * w).enumerate() {
            // SAFETY: the caller's guarantee.
            unsafe { V::codes::<F>(self.b, self.b1, u, c) };
        }
    }
    #[inline(always)]
    unsafe fn scales(&self, k: usize) -> V::I {
        let l = const { Layout::of::<F>() };
        // SAFETY: the caller's guarantee.
        unsafe { V::bytes(self.b, self.b1, l.sc + k * ROWS, true) }
    }
    #[inline(always)]
    unsafe fn mins(&self, k: usize) -> V::I {
        let l = const { Layout::of::<F>() };
        // SAFETY: the caller's guarantee.
        unsafe { V::bytes(self.b, self.b1, l.mins + k * ROWS, false) }
    }
    #[inline(always)]
    unsafe fn d(&self, min: bool) -> V::F {
        let l = const { Layout::of::<F>() };
        // SAFETY: the caller's guarantee.
        unsafe { V::halves(self.b, self.b1, if min { l.dmin } else { l.d }) }
    }
}

/// Every tile of `src` against every row of `acts`, block by block: per tile and row, `acc`
/// and `accm` (`[tile · rows + row]`).
///
/// # Safety
/// As [`Isa`]'s functions.
#[inline(always)]
pub(super) unsafe fn accumulate<V: Isa, F: PackedCodes>(src: &mut impl Source<V>, acts: Acts<'_>) -> Vec<[V::F; 2]> {
    let (rows, tiles) = (acts.len(), src.tiles());
    // SAFETY: the caller's guarantee.
    unsafe {
        let mut tile = Tile::<V> {
            codes: [V::zero(); 2 * QUADS],
            sc: [V::zero(); HALVES],
            zsc: [V::zero(); PAIRS],
            mins: [V::zero(); PAIRS],
            d: V::zerof(),
            dmin: V::zerof(),
        };
        // Block by block, every tile of the call against every row: one block's activations
        // (64 rows: 18 KiB of `q8_K`, 32 KiB widened; 256 rows: 73 / 128 KiB) stay in L1 / L2
        // while the tiles pass, where a tile at a time streamed all of them (64 rows: 300 KiB,
        // 812 KiB widened: past Zen 3's 512 KiB L2) once per tile. The same f32 steps per row
        // and tile, in the same order.
        let mut acc = vec![[V::zerof(); 2]; tiles * rows];
        for i in 0..acts.n {
            for (tl, acc) in acc.chunks_exact_mut(rows.max(1)).enumerate() {
                src.decode(tl, i, &mut tile);
                let mut r = 0;
                while r < rows {
                    r += V::pass::<F>(&tile, acts, i, r, acc);
                }
            }
        }
        acc
    }
}

/// Every tile of `p` (`V::ROWS / 8` groups), block by block, decoded and dotted with every row.
///
/// # Safety
/// As [`Isa`]'s functions.
#[inline(always)]
unsafe fn kernel<V: Isa, F: PackedCodes>(p: &[u8], acts: Acts<'_>, out: &mut [f32]) {
    let l = const { Layout::of::<F>() };
    let rows = acts.len();
    let len = out.len() / rows;
    let groups = len / ROWS;
    let per_tile = V::ROWS / ROWS;
    let mut src = PackedTiles::<V, F> { p, gb: acts.n * l.size, groups, _v: std::marker::PhantomData };
    // SAFETY: the caller's guarantee.
    unsafe {
        let acc = accumulate::<V, F>(&mut src, acts);
        for (acc, g) in acc.chunks_exact(rows.max(1)).zip((0..groups).step_by(per_tile)) {
            let width = (groups - g).min(per_tile) * ROWS;
            for (r, out) in out.chunks_exact_mut(len).enumerate() {
                let v = if F::HAS_MINS { V::subf(acc[r][0], acc[r][1]) } else { acc[r][0] };
                V::store(v, &mut out[g * ROWS..][..width]);
            }
        }
    }
}

/// The packed groups of a call as [`Source`]: `groups` groups of `gb` bytes (`n` packed
/// blocks), `V::ROWS / 8` groups a tile.
struct PackedTiles<'p, V, F> {
    p: &'p [u8],
    gb: usize,
    groups: usize,
    _v: std::marker::PhantomData<fn() -> (V, F)>,
}

impl<V: Isa, F: PackedCodes> Source<V> for PackedTiles<'_, V, F> {
    fn tiles(&self) -> usize {
        self.groups.div_ceil(V::ROWS / ROWS)
    }
    #[inline(always)]
    unsafe fn decode(&mut self, tile: usize, i: usize, t: &mut Tile<V>) {
        let size = const { Layout::of::<F>().size };
        let g = tile * (V::ROWS / ROWS);
        let b = &self.p[g * self.gb + i * size..][..size];
        let b1 = if V::ROWS > ROWS && g + 1 < self.groups {
            Some(&self.p[(g + 1) * self.gb + i * size..][..size])
        } else {
            None
        };
        // SAFETY: the caller's guarantee.
        unsafe { decode::<V, F>(&mut PackedBlock { b, b1 }, t) };
    }
}

/// Decodes one block of a tile's weight rows (`b`, a lane per row) into `t`.
///
/// # Safety
/// As [`Isa`]'s functions.
#[inline(always)]
pub(super) unsafe fn decode<V: Isa, F: PackedCodes>(b: &mut impl BlockLanes<V, F>, t: &mut Tile<V>) {
    let l = const { Layout::of::<F>() };
    let half_group = |h: usize| h * 16 / l.group;
    // SAFETY: the caller's guarantee.
    unsafe {
        b.codes(&mut t.codes);
        if !F::UNIT_SCALES {
            for k in 0..l.groups {
                t.sc[k] = b.scales(k);
            }
        }
        if F::ZERO != 0 && !signed::<V, F>() && !F::UNIT_SCALES {
            let z = i16::from(F::ZERO);
            for j in 0..PAIRS {
                // From the scales just widened (their low 16 bits: the `i8` sign-extended).
                t.zsc[j] = V::mullo16(V::pair(t.sc[half_group(2 * j)], t.sc[half_group(2 * j + 1)]), z);
            }
        }
        if F::HAS_MINS {
            for j in 0..PAIRS {
                t.mins[j] = V::pair(b.mins(half_group(2 * j)), b.mins(half_group(2 * j + 1)));
            }
        }
        t.d = b.d(false);
        if F::D_MUL != 1.0 {
            // Exact: a power of two.
            t.d = V::mulf(t.d, V::set1f(F::D_MUL));
        }
        if F::HAS_MINS {
            t.dmin = b.d(true);
        }
    }
}

/// Rows `r0 .. r0 + R` of `a` against the decoded block `i` in `t`, into their `acc` and
/// `accm` (`acc[row]`).
///
/// # Safety
/// As [`Isa`]'s functions.
#[inline(always)]
pub(super) unsafe fn rows<V: Isa, F: PackedCodes, const R: usize>(
    t: &Tile<V>,
    acts: Acts<'_>,
    i: usize,
    r0: usize,
    acc: &mut [[V::F; 2]],
) {
    let Acts { a, sums, wide, n } = acts;
    let l = const { Layout::of::<F>() };
    let w = const { quad_vecs::<V, F>() };
    // Quads per scale group, and groups; with every scale 1, per 32-element unit (fewer,
    // longer dots: fewer widenings).
    let (per, groups) = if F::UNIT_SCALES { (8, QUADS / 8) } else { (l.group / 4, l.groups) };
    static NOT_WIDENED: [i16; QK_K] = [0; QK_K];
    let qs: [RowQ<'_>; R] = std::array::from_fn(|r| RowQ {
        qs: &a[r0 + r][i].qs,
        wide: if w == 2 { &wide[i * a.len() + r0 + r] } else { &NOT_WIDENED },
    });
    // SAFETY: the caller's guarantee.
    unsafe {
        let mut tot = [V::zero(); R];
        for k in 0..groups {
            let s = V::group::<F, R>(&t.codes[k * per * w..][..per * w], &qs, k * per);
            for (tot, s) in tot.iter_mut().zip(s) {
                *tot = V::add(*tot, if F::UNIT_SCALES { s } else { V::mullo(s, t.sc[k]) });
            }
        }
        for (r, mut tot) in tot.into_iter().enumerate() {
            let row = r0 + r;
            let rs = &sums[row * n + i];
            if F::ZERO != 0 && !signed::<V, F>() && F::UNIT_SCALES {
                tot = V::sub(tot, V::set1(rs.zero_total));
            } else if F::ZERO != 0 && !signed::<V, F>() {
                for j in 0..PAIRS {
                    tot = V::sub(tot, V::madd(t.zsc[j], V::set1(rs.zero[j])));
                }
            }
            let ad = V::set1f(a[row][i].d.get());
            acc[row][0] = V::fmadd(V::cvt(tot), V::mulf(t.d, ad), acc[row][0]);
            if F::HAS_MINS {
                let mut m = V::zero();
                for j in 0..PAIRS {
                    m = V::madd_add(m, t.mins[j], V::set1(rs.bsums[j]));
                }
                acc[row][1] = V::fmadd(V::cvt(m), V::mulf(t.dmin, ad), acc[row][1]);
            }
        }
    }
}

/// [`Isa::pass`] for a register file taking up to the last of `$r` rows per pass, or at most
/// `$most` (an expression of `Self` and the format `F`) where given.
macro_rules! passes {
    ($($r:literal)+; $last:literal $(, $most:expr)?) => {
        #[inline(always)]
        unsafe fn pass<F: PackedCodes>(t: &Tile<Self>, acts: Acts<'_>, i: usize, r0: usize, acc: &mut [[Self::F; 2]]) -> usize {
            let most: usize = $last $(.min($most))?;
            let taken = (acts.len() - r0).min(most);
            // SAFETY: the caller's guarantee.
            unsafe {
                match taken {
                    $($r => rows::<Self, F, $r>(t, acts, i, r0, acc),)+
                    _ => rows::<Self, F, $last>(t, acts, i, r0, acc),
                }
            }
            taken
        }
    };
}
pub(super) use passes;
