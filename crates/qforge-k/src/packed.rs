//! The row-interleaved ("packed") layout of the [`Q8KCodes`] formats, and its mat-vec kernel:
//! weight rows in SIMD lanes, the activation broadcast.
//!
//! ggml's own AVX2 kernels (and qforge's plain ones, `crate::dot`) put 32 elements of one
//! weight row in a register: every 32 weights cost a code unpack, a scale broadcast, two
//! multiplies and, per block, a horizontal reduction. Here each 32-bit lane belongs to one of
//! [`ROWS`] = 8 weight rows and holds four consecutive codes of it; the activation's four
//! matching `i8` are broadcast, so one `vpdpbusd` (AVX-512 VNNI; `vpmaddubsw` + `vpmaddwd`
//! on AVX2) does 32 weights of 8 rows, each row's scale is a lane of a vector instead of a
//! broadcast, and the 8 results come out of the lanes with no reduction. Packing a tensor is a
//! one-time copy (the layout keeps the codes at their bit width: q4_k 148 bytes per row and
//! block against 144).
//!
//! ## Layout
//!
//! The rows are taken in groups of 8 (the last group filled up with zero rows); a group is
//! its blocks one after another, and a packed block ([`Layout`]) holds, for its 8 rows:
//!
//! * `d`: 8 f16, and `dmin` (formats with mins);
//! * `sc`: the `i8` scale of each scale group (`SCALE_GROUP` elements: 16, or 32 where the
//!   format's scales come in equal pairs), `[group][row]` (not stored where every scale is 1,
//!   `UNIT_SCALES`); `mins` likewise (`u8`, formats with mins only);
//! * the codes `u < 2^CODE_BITS`, 32 elements (a unit) at a time in the bit planes of
//!   [`qforge_simd::planes`] (4-, 2- and 1-bit planes, one 32-bit lane per row).
//!
//! ## The dot (both kernels, the same bits)
//!
//! Per row and block, exactly in wrapping `i32`, and then in f32 as ggml's kernels do:
//!
//! ```text
//! T   = Σ_g sc[g] · (Σ_{i in g} u[i]·a.qs[i] − ZERO·bsum[g])     (bsum[g] = Σ of a.bsums over g)
//! M   = Σ_g min[g] · bsum[g]                                       (formats with mins)
//! acc = fma(T, d·a.d, acc);  accm = fma(M, dmin·a.d, accm);  result = acc − accm (or acc)
//! ```
//!
//! This is the same exact integer dot as the plain kernels, in their f32 order (one exact
//! total per block, [`crate::dot::Q8KCodes`]; the I-quants' the same): packing changes no
//! result's bits, and the portable and SIMD kernels here agree bit for bit.

use crate::QK_K;
use crate::dot::{GROUPS, Q8KCodes, codes};
use crate::q8k::BlockQ8K;
use qforge_core::BlockFormat;
use qforge_core::le::F16Le;
use qforge_simd::planes::Planes;

pub use qforge_simd::planes::ROWS;

/// What the packed layout reads of a format dotted with q8_k: every [`Q8KCodes`] format (the
/// blanket implementation), and formats whose values are not codes minus a zero but a small
/// table of them (the grid I-quants and iq4_xs of `qforge-iq`, re-coded when packed): the
/// value of code `c` is `u − ZERO` with `u = TABLE[c]` (or `u = c` without a table). Every
/// `u ≤ 127`, or (a table only) every value `u − ZERO` in `-127..=127`: the AVX2 kernels then
/// dot the signed values, the group kernel with the sign trick, the tile kernel (mat-mul) as
/// `i16` pairs.
pub trait PackedCodes: BlockFormat {
    /// Whether the format has mins (`dmin · min[g]` subtracted per group).
    const HAS_MINS: bool;
    /// The zero: value = `u − ZERO`.
    const ZERO: u8;
    /// Whether every group scale is 1 (no scales stored).
    const UNIT_SCALES: bool;
    /// Bits per stored code.
    const CODE_BITS: u32;
    /// Elements per scale group (16 or 32).
    const SCALE_GROUP: usize;
    /// `u` of each code (`Some`: codes `< 16`), or the code itself (`None`).
    const TABLE: Option<[u8; 16]> = None;
    /// A power of two that `d` is multiplied by (ggml's final `0.125f` of iq2, ...): exact.
    const D_MUL: f32 = 1.0;
    /// `d` and `dmin` (0 without mins).
    fn d_dmin(b: &Self::Block) -> [F16Le; 2];
    /// The `i8` scale and the `u8` min of each 16 elements (pairs equal where `SCALE_GROUP`
    /// is 32).
    fn scales(b: &Self::Block) -> ([i8; GROUPS], [u8; GROUPS]);
    /// The codes of the block's eight 32-element units.
    fn codes(b: &Self::Block) -> [[u8; 32]; 8];
}

impl<F: Q8KCodes> PackedCodes for F {
    const HAS_MINS: bool = <F as Q8KCodes>::HAS_MINS;
    const ZERO: u8 = <F as Q8KCodes>::ZERO;
    const UNIT_SCALES: bool = <F as Q8KCodes>::UNIT_SCALES;
    const CODE_BITS: u32 = <F as Q8KCodes>::CODE_BITS;
    const SCALE_GROUP: usize = <F as Q8KCodes>::SCALE_GROUP;

    #[inline(always)]
    fn d_dmin(b: &Self::Block) -> [F16Le; 2] {
        <F as Q8KCodes>::d_dmin(b)
    }

    #[inline(always)]
    fn scales(b: &Self::Block) -> ([i8; GROUPS], [u8; GROUPS]) {
        <F as Q8KCodes>::scales(b)
    }

    #[inline(always)]
    fn codes(b: &Self::Block) -> [[u8; 32]; 8] {
        codes::<F>(b)
    }
}

/// What the mat-mul tile kernel on plain blocks ([`plain_tile`]) reads of a block besides
/// [`PackedCodes`]' scales and `d`: every element's `u`, unpacked from the plain block.
pub trait TileCodes: PackedCodes {
    /// The `u` of every element of `b` in element order (`TABLE[c]` of its code: its value
    /// plus `ZERO`; without a table, the code), into `u`. `avx2` proves AVX2, FMA and F16C; an
    /// `#[inline(always)]` implementation is inlined into the kernel compiled with them.
    fn tile_codes(b: &Self::Block, u: &mut [u8; QK_K], avx2: qforge_simd::Avx2);
}

impl<F: Q8KCodes> TileCodes for F {
    #[inline(always)]
    fn tile_codes(b: &Self::Block, u: &mut [u8; QK_K], avx2: qforge_simd::Avx2) {
        #[cfg(target_arch = "x86_64")]
        crate::simd::store_codes::<F>(b, u, avx2);
        #[cfg(not(target_arch = "x86_64"))]
        {
            let _ = avx2;
            *u = bytemuck::cast(codes::<F>(b));
        }
    }
}

/// The activation rows [`plain_tile`] is best given per call
/// ([`qforge_core::NativeDot::TILE_ROWS`]): it decodes each block of a tile of weight rows
/// once per call and keeps one block of the activation rows close, so up to
/// [`qforge_core::MAX_PACKED_DOT_ROWS`] rows amortize the decoding (a 512-row mat-mul on
/// Zen 4: two decodes of each block instead of seven with 384 KiB activation tiles).
pub const PLAIN_TILE_ROWS: usize = qforge_core::MAX_PACKED_DOT_ROWS;

/// A mat-mul tile on plain blocks ([`qforge_core::NativeDot::vec_dot_tile`]):
/// `out[i·stride + j]` = the dot of weight row `i` (blocks `i·n .. (i+1)·n` of `w`) with `a[j]`. Each block
/// of a tile of weight rows (16 on AVX-512 VNNI, 8 on AVX2) is unpacked ([`TileCodes`]),
/// turned a row per lane and decoded once for every activation row: the packed layout's tile
/// kernel, without a packed copy. Its sums are that kernel's, in its f32 order, so a format
/// whose row kernels sum in that order too gets each pair's mat-vec bits. `false` (nothing
/// written) below eight activation rows or without AVX2: the caller then takes the row
/// kernels.
#[inline]
pub fn plain_tile<F: TileCodes>(w: &[F::Block], n: usize, a: &[&[BlockQ8K]], out: &mut [f32], stride: usize) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        crate::simd::plain_tile::<F>(w, n, a, out, stride)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (w, n, a, out, stride);
        false
    }
}

/// The largest `u` of `F`'s codes.
pub const fn umax<F: PackedCodes>() -> u32 {
    match F::TABLE {
        Some(t) => qforge_simd::lut::max16(&t) as u32,
        None => (1u32 << F::CODE_BITS) - 1,
    }
}

/// Whether every value `u − ZERO` of `F`'s table is an `i8` other than -128: what the AVX2
/// kernels' signed dots (the sign trick, `i16` pairs) need of a table with `u` above 127
/// (checked at compile time there).
pub const fn signed_values_fit<F: PackedCodes>() -> bool {
    match F::TABLE {
        Some(t) => {
            let mut i = 0;
            while i < 16 {
                let v = t[i] as i16 - F::ZERO as i16;
                if v < -127 || v > 127 {
                    return false;
                }
                i += 1;
            }
            true
        }
        None => false,
    }
}

/// `u` of code `c` of `F`.
#[inline(always)]
fn value<F: PackedCodes>(c: u8) -> u8 {
    match F::TABLE {
        Some(t) => t[usize::from(c & 15)],
        None => c,
    }
}

/// Where each part of a packed block lies (byte offsets), for format `F`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Scale groups per block.
    pub groups: usize,
    /// Elements per scale group.
    pub group: usize,
    /// `d`: 8 f16.
    pub d: usize,
    /// `dmin`: 8 f16 (formats with mins; else empty).
    pub dmin: usize,
    /// `sc`: `groups × 8` `i8` (empty where every scale is 1, `UNIT_SCALES`).
    pub sc: usize,
    /// `mins`: `groups × 8` `u8` (formats with mins; else empty).
    pub mins: usize,
    /// The first unit's codes; unit `u`'s are `u · planes.unit` bytes further.
    pub codes: usize,
    /// How a unit's codes are stored.
    pub planes: Planes,
    /// Bytes per packed block.
    pub size: usize,
}

impl Layout {
    /// The layout of `F`'s packed blocks.
    pub const fn of<F: PackedCodes>() -> Layout {
        let group = F::SCALE_GROUP;
        let groups = QK_K / group;
        // `dmin` only with mins, the scales only where they are not all 1.
        let (d, dmin) = (0, 2 * ROWS);
        let sc = dmin + if F::HAS_MINS { 2 * ROWS } else { 0 };
        let mins = sc + if F::UNIT_SCALES { 0 } else { groups * ROWS };
        let codes = mins + if F::HAS_MINS { groups * ROWS } else { 0 };
        let planes = Planes::of_bits(F::CODE_BITS);
        Layout { groups, group, d, dmin, sc, mins, codes, planes, size: codes + QK_K / 32 * planes.unit }
    }

    /// The bytes of unit `u` of a packed block.
    fn unit<'p>(&self, p: &'p [u8], u: usize) -> &'p [u8] {
        &p[self.codes + u * self.planes.unit..][..self.planes.unit]
    }
}

/// Packs `rows` rows of `n` blocks each (`w.len() == rows · n`) into the layout: `rows.div_ceil(8)`
/// groups of `n` packed blocks.
///
/// # Panics
/// If `w.len() != rows · n`.
pub fn pack<F: PackedCodes>(w: &[F::Block], rows: usize, n: usize) -> Vec<u8> {
    assert_eq!(w.len(), rows * n, "whole rows");
    let l = const { Layout::of::<F>() };
    let mut out = vec![0u8; rows.div_ceil(ROWS) * n * l.size];
    for (row, wr) in w.chunks_exact(n.max(1)).enumerate().take(rows) {
        let (g, r) = (row / ROWS, row % ROWS);
        for (b, blk) in wr.iter().enumerate() {
            let p = &mut out[(g * n + b) * l.size..][..l.size];
            let [d, dmin] = F::d_dmin(blk);
            p[l.d + 2 * r..][..2].copy_from_slice(&d.0);
            if F::HAS_MINS {
                p[l.dmin + 2 * r..][..2].copy_from_slice(&dmin.0);
            }
            let (sc, mins) = F::scales(blk);
            let per = l.group / 16;
            for k in 0..l.groups {
                if !F::UNIT_SCALES {
                    p[l.sc + k * ROWS + r] = sc[k * per] as u8;
                }
                if F::HAS_MINS {
                    p[l.mins + k * ROWS + r] = mins[k * per];
                }
            }
            for (u, chunk) in F::codes(blk).iter().enumerate() {
                let unit = &mut p[l.codes + u * l.planes.unit..][..l.planes.unit];
                l.planes.put_row(unit, r, chunk);
            }
        }
    }
    out
}

/// The codes of row `r` of a packed block, in element order (the inverse of [`pack`]'s
/// planes).
pub fn unpack_codes<F: PackedCodes>(p: &[u8], r: usize) -> [u8; QK_K] {
    let l = const { Layout::of::<F>() };
    std::array::from_fn(|e| l.planes.get(l.unit(p, e / 32), r, e % 32))
}

/// The sum of `a.bsums` over scale group `k` of `group` elements.
#[inline(always)]
pub(crate) fn group_bsum(a: &BlockQ8K, group: usize, k: usize) -> i32 {
    let per = group / 16;
    a.bsums[k * per..][..per].iter().map(|s| i32::from(s.get())).sum()
}

/// Whether [`zero_sum`] sums the quants themselves rather than reading `bsums`: a table with
/// `u` above 127.
pub(crate) const fn zero_from_quants<F: PackedCodes>() -> bool {
    umax::<F>() > 127
}

/// What the zero is multiplied by in group `k` of `a`: the sum of the group's quants. Taken
/// from `a.bsums` ([`group_bsum`]), except for a table with `u` above 127: the AVX2 kernel dots
/// its values signed, with no zero, so every kernel sums the quants themselves and none reads
/// `bsums` (the same bits whether or not they agree with the quants).
#[inline(always)]
pub(crate) fn zero_sum<F: PackedCodes>(a: &BlockQ8K, group: usize, k: usize) -> i32 {
    if zero_from_quants::<F>() {
        a.qs[k * group..][..group].iter().map(|&q| i32::from(q)).sum()
    } else {
        group_bsum(a, group, k)
    }
}

/// The sum of every scale group's [`zero_sum`] of block `a` (wrapping, as the kernels' lanes):
/// with unit scales (`UNIT_SCALES`), `ZERO ·` it is the block's whole zero term.
#[inline(always)]
pub(crate) fn block_zero_sum<F: PackedCodes>(a: &BlockQ8K) -> i32 {
    let l = const { Layout::of::<F>() };
    let mut sum = 0i32;
    for k in 0..l.groups {
        sum = sum.wrapping_add(zero_sum::<F>(a, l.group, k));
    }
    sum
}

/// One group of 8 rows (`n` packed blocks, `p.len() == n · Layout::of::<F>().size`) against
/// the activation row `a` (at least `n` blocks): the portable kernel (see the module docs).
pub fn dot_group_portable<F: PackedCodes>(p: &[u8], a: &[BlockQ8K]) -> [f32; ROWS] {
    let l = const { Layout::of::<F>() };
    let mut acc = [[0f32; ROWS]; 2];
    for (p, a) in p.chunks_exact(l.size).zip(a) {
        let ad = a.d.get();
        for r in 0..ROWS {
            let u = unpack_codes::<F>(p, r);
            let (mut t, mut m) = (0i32, 0i32);
            for k in 0..l.groups {
                let bsum = group_bsum(a, l.group, k);
                let g = k * l.group..(k + 1) * l.group;
                let mut s = 0i32;
                for (&c, &q) in u[g.clone()].iter().zip(&a.qs[g]) {
                    s = s.wrapping_add(i32::from(value::<F>(c)) * i32::from(q));
                }
                s = s.wrapping_sub(i32::from(F::ZERO).wrapping_mul(zero_sum::<F>(a, l.group, k)));
                let sc = if F::UNIT_SCALES { 1 } else { i32::from(p[l.sc + k * ROWS + r] as i8) };
                t = t.wrapping_add(sc.wrapping_mul(s));
                if F::HAS_MINS {
                    m = m.wrapping_add(i32::from(p[l.mins + k * ROWS + r]).wrapping_mul(bsum));
                }
            }
            let half = |at: usize| F16Le([p[at + 2 * r], p[at + 2 * r + 1]]).get();
            acc[0][r] = (t as f32).mul_add(half(l.d) * F::D_MUL * ad, acc[0][r]);
            if F::HAS_MINS {
                acc[1][r] = (m as f32).mul_add(half(l.dmin) * ad, acc[1][r]);
            }
        }
    }
    std::array::from_fn(|r| if F::HAS_MINS { acc[0][r] - acc[1][r] } else { acc[0][r] })
}

/// Every group of 8 rows of `p` (`out.len() / 8` groups of `n` packed blocks) against the
/// activation row `a` (at least `n` blocks), 8 results per group into `out`: the SIMD kernel
/// where the CPU has one, else [`dot_group_portable`], the same bits either way.
///
/// # Panics
/// If `out.len()` is not a multiple of 8, `p` is not `out.len() / 8` groups of `n` packed
/// blocks or `a` is shorter than `n`.
pub fn dot_groups<F: PackedCodes>(p: &[u8], n: usize, a: &[BlockQ8K], out: &mut [f32]) {
    dot_groups_rows::<F>(p, n, &[a], out);
}

/// [`dot_groups`] for several activation rows: `out` is `a.len()` equal parts, row `r`'s
/// results in part `r`, each the bits [`dot_groups`] gives for that row. The SIMD kernel
/// unpacks each packed unit once for up to four rows.
///
/// # Panics
/// If `out` is not `a.len()` equal parts of a multiple of 8, `p` is not `part / 8` groups of
/// `n` packed blocks or an activation row is shorter than `n`.
pub fn dot_groups_rows<F: PackedCodes>(p: &[u8], n: usize, a: &[&[BlockQ8K]], out: &mut [f32]) {
    let l = const { Layout::of::<F>() };
    let Some(len) = qforge_simd::planes::rows_parts(p.len(), n, l.size, a, n, out) else {
        return;
    };
    #[cfg(target_arch = "x86_64")]
    if crate::simd::packed_dot_groups::<F>(p, n, a, out) {
        return;
    }
    for (a, out) in a.iter().zip(out.chunks_exact_mut(len)) {
        for (p, out) in p.chunks_exact(n * l.size).zip(out.chunks_exact_mut(ROWS)) {
            out.copy_from_slice(&dot_group_portable::<F>(p, &a[..n]));
        }
    }
}
