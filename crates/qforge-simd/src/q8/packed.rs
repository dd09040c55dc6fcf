//! The packed (row-interleaved) layout of the formats dotted with q8_0 / q8_1 whose values
//! have an unsigned form (`v = u − z`, `0 ≤ u ≤ 255`): q4_0, q4_1, q5_0, q5_1, iq4_nl, mxfp4,
//! nvfp4, q1_0, q2_0, and q8_0 / q8_1 (`u = v + 128`: 8-bit codes) (each sets
//! [`Q8Weight::PACK_BITS`]). See `qforge_k::packed` for the idea:
//! 8 weight rows in the 32-bit lanes of a register, the activation broadcast, one `vpdpbusd`
//! per four codes of 8 rows, no horizontal sums.
//!
//! ## Layout
//!
//! Rows in groups of [`ROWS`] = 8 (the last filled up with zero rows), each group its block
//! columns one after another; a packed block holds the 8 rows' scales (f16 `d` per block;
//! scale bytes per unit, or per half unit, `[unit][half][row]`), their f16 `m` (affine
//! formats), then the block's units (32 elements each) of codes in the bit planes of
//! [`crate::planes`]. Every format keeps its bytes per row and block (q4_0 18).
//!
//! ## The dot (both kernels, the same bits)
//!
//! Per row and unit (per half unit where the scales are per half), exactly in `i32`, then in
//! f32 (ggml's order of operations per block):
//!
//! ```text
//! S   = Σ u[i]·a.qs[i] − z·Σ a.qs[i]                   (u: the code's unsigned value)
//! acc = fma(S, s·a.d, acc);  accm = fma(m, a.s, accm)   (s: the unit's weight scale)
//! result = acc + accm (affine formats) or acc
//! ```
//!
//! The same exact integers as the plain kernel ([`super::vec_dot`]) in another f32 order:
//! the two agree to f32 rounding. On AVX2 (no VNNI), where `vpmaddubsw` needs `u ≤ 127`, a
//! table spanning more than 127 (iq4_nl) is dotted with its signed values and the sign trick
//! instead, the same integers; so are 8-bit codes, with the trick's sign taken from the
//! weight (which may be -128) rather than the activation, so for activation rows without a
//! -128 (every row qforge quantizes; a row holding one is dotted by the portable kernel).

use super::{Q8Act, Q8Weight, Scale, Values, f16, unit_codes};
use crate::planes::{Planes, ROWS};

/// The unsigned form of `W`'s values: `u = table[code]` (for [`Values::Table`]; else `u` is
/// the packed code, [`packed_code`]) and `v = u − z`, every `u ≤ 255`; `None` where the values
/// have none (tables spanning more than 255).
pub const fn unsigned_form<W: Q8Weight>() -> Option<([u8; 16], u8)> {
    let identity = {
        let mut t = [0u8; 16];
        let mut i = 0;
        while i < 16 {
            t[i] = i as u8;
            i += 1;
        }
        t
    };
    match W::VALUES {
        Values::Offset(k) if k >= 0 && k <= 96 => Some((identity, k as u8)),
        Values::Unsigned => Some((identity, 0)),
        Values::Signed8 => Some((identity, 128)),
        Values::Table(t) => {
            let (mut lo, mut i) = (0i16, 0);
            while i < 16 {
                lo = if (t[i] as i16) < lo { t[i] as i16 } else { lo };
                i += 1;
            }
            let mut u = [0u8; 16];
            let mut i = 0;
            while i < 16 {
                u[i] = (t[i] as i16 - lo) as u8;
                i += 1;
            }
            Some((u, (-lo) as u8))
        }
        _ => None,
    }
}

/// The largest unsigned value of `W`'s packed codes.
pub const fn umax<W: Q8Weight>() -> u32 {
    match (W::VALUES, unsigned_form::<W>()) {
        (Values::Table(_), Some((t, _))) => crate::lut::max16(&t) as u32,
        _ => (1u32 << W::PACK_BITS) - 1,
    }
}

/// Whether `W` has a packed layout: [`Q8Weight::PACK_BITS`] set (8 for, and only for, 8-bit
/// signed codes), an unsigned form (for table formats, codes of at most 4 bits), and a kernel
/// the shared q8 kernel supports.
pub const fn packable<W: Q8Weight>() -> bool {
    let bits = W::PACK_BITS;
    let table = matches!(W::VALUES, Values::Table(_));
    let signed8 = matches!(W::VALUES, Values::Signed8);
    let bits_ok = if signed8 { bits == 8 } else { matches!(bits, 1 | 2 | 4 | 5) };
    bits_ok && unsigned_form::<W>().is_some() && (!table || bits <= 4) && super::supported::<W>()
}

/// The code the packed layout stores for code `c` of `W`: `c`, or for 8-bit signed codes the
/// unsigned `v + 128` (the sign bit flipped).
#[inline(always)]
pub const fn packed_code<W: Q8Weight>(c: u8) -> u8 {
    if matches!(W::VALUES, Values::Signed8) { c ^ 0x80 } else { c }
}

/// Scale slots per unit: 2 for scales per half unit, else 1.
const fn halves<W: Q8Weight>() -> usize {
    if matches!(W::SCALE, Scale::ByteHalves(_)) { 2 } else { 1 }
}

/// Where each part of a packed block lies (byte offsets), for format `W`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// The scales: 8 f16 `d` ([`Scale::F16`]), or the scale bytes `[unit][half][row]`.
    pub d: usize,
    /// `m`: 8 f16 (affine formats; else empty).
    pub m: usize,
    /// The first unit's codes; unit `u`'s are `u · planes.unit` bytes further.
    pub codes: usize,
    /// How a unit's codes are stored.
    pub planes: Planes,
    /// Bytes per packed block.
    pub size: usize,
}

impl Layout {
    /// The layout of `W`'s packed blocks (all zero where `W` is not [`packable`]: no call
    /// reaches a kernel with it, see [`dot_groups`]).
    pub const fn of<W: Q8Weight>() -> Layout {
        if !packable::<W>() {
            return Layout { d: 0, m: 0, codes: 0, planes: Planes::NONE, size: 0 };
        }
        let m = match W::SCALE {
            Scale::F16 => 2 * ROWS,
            _ => W::UNITS * halves::<W>() * ROWS,
        };
        let codes = m + if W::AFFINE { 2 * ROWS } else { 0 };
        let planes = Planes::of_bits(W::PACK_BITS);
        Layout { d: 0, m, codes, planes, size: codes + W::UNITS * planes.unit }
    }
}

/// Row `r`'s weight scale for unit `u`, half `h` of a packed block (the same for both halves
/// unless the scales are per half unit).
#[inline(always)]
fn row_scale<W: Q8Weight>(p: &[u8], l: &Layout, u: usize, h: usize, r: usize) -> f32 {
    match W::SCALE {
        Scale::F16 => half(p, l.d, r),
        Scale::Byte(t) => t[usize::from(p[l.d + u * ROWS + r])],
        Scale::ByteHalves(t) => t[usize::from(p[l.d + (2 * u + h) * ROWS + r])],
    }
}

/// Packs `rows` rows of `n` blocks each (`w.len() == rows · n`): `rows.div_ceil(8)` groups of
/// `n` packed blocks.
///
/// # Panics
/// If `W` is not [`packable`] or `w.len() != rows · n`.
pub fn pack<W: Q8Weight>(w: &[W], rows: usize, n: usize) -> Vec<u8> {
    assert!(packable::<W>(), "a format without a packed layout");
    assert_eq!(w.len(), rows * n, "whole rows");
    let l = const { Layout::of::<W>() };
    let mut out = vec![0u8; rows.div_ceil(ROWS) * n * l.size];
    for (row, wr) in w.chunks_exact(n.max(1)).enumerate().take(rows) {
        let (g, r) = (row / ROWS, row % ROWS);
        for (b, blk) in wr.iter().enumerate() {
            let p = &mut out[(g * n + b) * l.size..][..l.size];
            match W::SCALE {
                Scale::F16 => p[l.d + 2 * r..][..2].copy_from_slice(&blk.d_bits().to_le_bytes()),
                _ => {
                    for u in 0..W::UNITS {
                        for (h, b) in blk.scale_bytes(u).into_iter().take(halves::<W>()).enumerate() {
                            p[l.d + (halves::<W>() * u + h) * ROWS + r] = b;
                        }
                    }
                }
            }
            if W::AFFINE {
                p[l.m + 2 * r..][..2].copy_from_slice(&blk.m_bits().to_le_bytes());
            }
            for u in 0..W::UNITS {
                let unit = &mut p[l.codes + u * l.planes.unit..][..l.planes.unit];
                l.planes.put_row(unit, r, &unit_codes(blk, u).map(packed_code::<W>));
            }
        }
    }
    out
}

/// The f16 bits of row `r`'s value at `at` of a packed block.
#[inline(always)]
fn half(p: &[u8], at: usize, r: usize) -> f32 {
    f16(u16::from_le_bytes([p[at + 2 * r], p[at + 2 * r + 1]]))
}

/// One group of 8 rows (`n` packed blocks, `p.len() == n · Layout::of::<W>().size`) against
/// the activation row `a` (at least `n · UNITS` blocks): the portable kernel (see the module
/// docs).
pub fn dot_group_portable<W: Q8Weight, A: Q8Act>(p: &[u8], a: &[A]) -> [f32; ROWS] {
    let l = const { Layout::of::<W>() };
    let (table, z) = const {
        match unsigned_form::<W>() {
            Some(f) => f,
            None => ([0; 16], 0),
        }
    };
    let hn = halves::<W>();
    let mut acc = [[0f32; ROWS]; 2];
    for (p, a) in p.chunks_exact(l.size).zip(a.chunks_exact(W::UNITS)) {
        for (u, a) in a.iter().enumerate() {
            let unit = &p[l.codes + u * l.planes.unit..][..l.planes.unit];
            let ad = f16(a.d_bits());
            for (r, (acc0, acc1)) in {
                let [a0, a1] = &mut acc;
                a0.iter_mut().zip(a1.iter_mut())
            }
            .enumerate()
            {
                for h in 0..hn {
                    let (mut s, mut asum) = (0i32, 0i32);
                    let span = 32 / hn;
                    for (e, &q) in a.qs().iter().enumerate().skip(h * span).take(span) {
                        let c = l.planes.get(unit, r, e);
                        let v = if matches!(W::VALUES, Values::Table(_)) { table[usize::from(c)] } else { c };
                        s += i32::from(v) * i32::from(q);
                        asum += i32::from(q);
                    }
                    s -= i32::from(z) * asum;
                    *acc0 = (s as f32).mul_add(row_scale::<W>(p, &l, u, h, r) * ad, *acc0);
                }
                if W::AFFINE {
                    *acc1 = half(p, l.m, r).mul_add(f16(a.s_bits()), *acc1);
                }
            }
        }
    }
    std::array::from_fn(|r| if W::AFFINE { acc[0][r] + acc[1][r] } else { acc[0][r] })
}

/// Every group of 8 rows of `p` (`out.len() / 8` groups of `n` packed blocks) against the
/// activation row `a` (at least `n · UNITS` blocks), 8 results per group into `out`: the SIMD
/// kernel where the CPU has one, else [`dot_group_portable`], the same bits either way.
///
/// # Panics
/// If `W` is not [`packable`], `out.len()` is not a multiple of 8, `p` is not `out.len() / 8`
/// groups of `n` packed blocks or `a` is shorter than `n · UNITS` blocks.
pub fn dot_groups<W: Q8Weight, A: Q8Act>(p: &[u8], n: usize, a: &[A], out: &mut [f32]) {
    dot_groups_rows::<W, A>(p, n, &[a], out);
}

/// [`dot_groups`] for several activation rows: `out` is `a.len()` equal parts, row `r`'s
/// results in part `r`, each the bits [`dot_groups`] gives for that row. The SIMD kernel
/// unpacks each packed unit once for up to four rows.
///
/// # Panics
/// If `W` is not [`packable`], `out` is not `a.len()` equal parts of a multiple of 8, `p` is
/// not `part / 8` groups of `n` packed blocks or an activation row is shorter than `n · UNITS`
/// blocks.
pub fn dot_groups_rows<W: Q8Weight, A: Q8Act>(p: &[u8], n: usize, a: &[&[A]], out: &mut [f32]) {
    assert!(packable::<W>(), "a format without a packed layout");
    let l = const { Layout::of::<W>() };
    let Some(len) = crate::planes::rows_parts(p.len(), n, l.size, a, n * W::UNITS, out) else {
        return;
    };
    let mut rows = [&a[0][..0]; crate::__core::MAX_DOT_ROWS];
    for (a, out) in a.chunks(rows.len()).zip(out.chunks_mut(rows.len() * len)) {
        for (r, a) in rows.iter_mut().zip(a) {
            *r = &a[..n * W::UNITS];
        }
        let rows = &rows[..a.len()];
        #[cfg(target_arch = "x86_64")]
        if super::packed_avx2::dot_groups::<W, A>(p, n, rows, out) {
            continue;
        }
        for (a, out) in rows.iter().zip(out.chunks_exact_mut(len)) {
            for (p, out) in p.chunks_exact(n * l.size).zip(out.chunks_exact_mut(ROWS)) {
                out.copy_from_slice(&dot_group_portable::<W, A>(p, a));
            }
        }
    }
}
