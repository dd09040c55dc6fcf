//! f16 / bf16 rows of the 1- to 5-bit-coded formats straight from their codes, without an
//! f32 pass.
//!
//! Every value of such a format is `table[code]`, where a group of 32 elements (or each half
//! of it) has its own table: `(code - 8)·d` for q4_0, `kvalues[code]·d` for iq4_nl,
//! `d·sc·code - dmin·m` for a q4_k sub-block, 8 per 16 elements for q2_k / q3_k. Per group,
//! the table values are computed in f32 with the decoder's own expression (so the same f32
//! bits), rounded once to f16 / bf16, and the 32 codes looked up in the 16-bit table. Under
//! AVX2 that is two `vpshufb` (the low and the high bytes of the table) and two unpacks per
//! 32 values, where decoding to f32 and then converting makes a second pass of 0.25 (f16) to
//! 0.4 (bf16) cycles per value over the row; where the CPU has AVX-512 BF16 (the decoders'
//! second build, [`crate::bf16_builds!`]) one `vpermw` looks up all 32 codes in a register
//! holding the group's tables. 5-bit codes (q5_0, q5_1, q5_k) would need 32
//! entries per 32 values, as many roundings as values: their groups describe the line instead
//! ([`Tables::Linear`]), and each value is computed and rounded in registers.
//!
//! A format describes its groups ([`TableGroups`]); [`decode_row`] does the rest, with the
//! AVX2 kernel where [`crate::Avx2`] allows it and the portable loop (the reference) else.
//! The values equal `Elem::from_f32` of the format's f32 decode, bit for bit, on every level;
//! a NaN (a NaN scale's) stays NaN, its sign and payload as unspecified as Rust leaves them
//! between two compiled expressions (q4_1's `c·d + m` with both `d` and `m` NaN keeps one of
//! the two). Each level's own output is fixed (qforge-cpu's level test, on random bytes).

use crate::Tail;
use qforge_core::round::{f32_to_bf16_bits, f32_to_f16_bits};
use qforge_core::{Elem, OutRow, bf16, f16};

/// Where the 32 codes (4 bits at most; the fifth is [`Fifth`]) of one group sit, in element order.
#[derive(Clone, Copy, Debug)]
pub enum Codes32<'a> {
    /// ggml's split-half order: elements `0..16` are the low nibbles of the 16 bytes and
    /// `16..32` their high nibbles (q4_0, q4_1, iq4_nl, iq4_xs's sub-blocks, mxfp4).
    SplitHalf(&'a [u8; 16]),
    /// Two 16-element halves, each in split-half order over its 8 bytes (two nvfp4 sub-blocks).
    SplitHalves(&'a [u8; 16]),
    /// The low nibbles of 32 bytes (q4_k's even sub-blocks, the first halves of int4g groups).
    Low(&'a [u8; 32]),
    /// The high nibbles of 32 bytes.
    High(&'a [u8; 32]),
    /// Narrower codes (q2_k, q3_k): bits `shift .. shift + width` of each of 32 bytes, and
    /// with `high = Some((h, b))` bit `b` of byte `i` of `h` as bit `width` of element `i`'s
    /// code (`width + 1 ≤ 4`).
    Field {
        /// The bytes holding the low bits.
        q: &'a [u8; 32],
        /// The first bit of the field (`shift + width ≤ 8`).
        shift: u32,
        /// The field's bits (1 to 3).
        width: u32,
        /// The bytes holding one more bit per element, and its position.
        high: Option<(&'a [u8; 32], u32)>,
    },
    /// 1-bit codes packed LSB first: element `i`'s code is bit `i % 8` of byte `i / 8` (q1_0).
    Bits([u8; 4]),
    /// 2-bit codes packed LSB first: element `i`'s code is bits `2·(i % 4) ..` of byte `i / 4`
    /// (q2_0).
    Pairs([u8; 8]),
}

impl Codes32<'_> {
    /// The 32 codes as bytes `0..16`, in element order (the portable reference).
    #[inline(always)]
    pub fn unpack(self) -> [u8; 32] {
        match self {
            Codes32::SplitHalf(q) => std::array::from_fn(|i| if i < 16 { q[i] & 0x0F } else { q[i - 16] >> 4 }),
            Codes32::SplitHalves(q) => std::array::from_fn(|i| {
                let (half, j) = (i / 16, i % 16);
                let b = q[8 * half + j % 8];
                if j < 8 { b & 0x0F } else { b >> 4 }
            }),
            Codes32::Low(q) => q.map(|b| b & 0x0F),
            Codes32::High(q) => q.map(|b| b >> 4),
            Codes32::Field { q, shift, width, high } => std::array::from_fn(|i| {
                let low = (q[i] >> (shift & 7)) & ((1u8 << (width & 3)) - 1);
                let top = high.map_or(0, |(h, b)| (h[i] >> (b & 7)) & 1);
                (low | top << (width & 3)) & 0x0F
            }),
            Codes32::Bits(q) => std::array::from_fn(|i| q[i / 8] >> (i % 8) & 1),
            Codes32::Pairs(q) => std::array::from_fn(|i| q[i / 4] >> (2 * (i % 4)) & 3),
        }
    }
}

/// The fifth bits of 5-bit codes (read with [`Tables::Linear`] only).
#[derive(Clone, Copy, Debug)]
pub enum Fifth<'a> {
    /// 4-bit codes.
    None,
    /// Bit `i` of the little-endian word is element `i`'s fifth bit (q5_0, q5_1).
    Word([u8; 4]),
    /// Bit `b` of byte `i` is element `i`'s fifth bit (q5_k's `qh`).
    Bit(&'a [u8; 32], u32),
}

impl Fifth<'_> {
    /// Element `i`'s fifth bit, as 0 or 16.
    #[inline(always)]
    pub(crate) fn of(self, i: usize) -> u8 {
        let set = match self {
            Fifth::None => false,
            Fifth::Word(w) => w[i / 8] >> (i % 8) & 1 != 0,
            Fifth::Bit(q, b) => q[i] >> b & 1 != 0,
        };
        if set { 16 } else { 0 }
    }
}

/// The values the codes of one 32-element group stand for.
#[derive(Clone, Copy, Debug)]
pub enum Tables {
    /// One table for all 32 elements.
    One([f32; 16]),
    /// One table per 16-element half (elements `0..16`, then `16..32`).
    Halves([[f32; 16]; 2]),
    /// One table of 8 values per 16-element half, for codes of at most 3 bits (q2_k, q3_k;
    /// larger codes are a bug of the format's description): half the rounding work of
    /// [`Tables::Halves`].
    Halves8([[f32; 8]; 2]),
    /// Eight magnitudes' values per 16-element half, codes `8..16` their negations (`-x` of
    /// the f32, which flips a NaN's sign too: ggml's `· (sign ? -1.f : 1.f)` of the grid
    /// I-quants): on AVX2 one sign flip of the rounded 16-bit values instead of rounding
    /// sixteen entries.
    Signed8([[f32; 8]; 2]),
    /// No table: 5-bit codes (the low 4 bits from [`Codes32`], the fifth from [`Fifth`])
    /// whose value is `(c − offset)·scale`, then `tail` (q5_0's `(c − 16)·d`, q5_1's
    /// `c·d + m`, q5_k's `c·d1 − m1`), the f32 decode's own expression (`c − offset` is
    /// exact in f32). A table of 32 entries per 32 values rounds as many entries as the group
    /// has values and then looks them up; AVX2 computes and rounds each value in registers
    /// instead (`vpmovsxbd`, `vcvtdq2ps`, `vmulps`, the tail, the rounding: about 60
    /// instructions a group against 75 through the table; q5_0 to bf16 on the EPYC, best of
    /// 4 alternated runs, 3.5 → 4.0 Gel/s).
    Linear(Line),
}

/// The values `(c − offset)·scale`, then `tail`, of a [`Tables::Linear`] group, for its
/// codes `c`. (Not for building a 4-bit [`table`]: through `Line::at` there, q4_0's bf16
/// rows ran at a third of the speed, cause not analysed; those tables keep the format's
/// closure.)
#[derive(Clone, Copy, Debug)]
pub struct Line {
    /// Subtracted from each code before the multiply (at most 32: the AVX2 kernel subtracts
    /// it from the code bytes as `i8`).
    pub offset: u8,
    /// The factor.
    pub scale: f32,
    /// Applied to each product.
    pub tail: Tail,
}

impl Line {
    /// The value of code `c` (given as f32: `c − offset` is exact).
    #[inline(always)]
    pub fn at(&self, c: f32) -> f32 {
        self.tail.apply((c - f32::from(self.offset)) * self.scale)
    }
}

impl Tables {
    /// The value of element `i` of the group with the 4-bit code `c` and fifth bit `h` (0 or
    /// 16, read by [`Tables::Linear`] only).
    #[inline(always)]
    pub(crate) fn value(&self, i: usize, c: u8, h: u8) -> f32 {
        let c = usize::from(c & 0x0F);
        match self {
            Tables::One(t) => t[c],
            Tables::Halves(t) => t[i / 16][c],
            Tables::Halves8(t) => {
                // The AVX2 lookup reads another table's bytes for codes from 8 on.
                debug_assert!(c < 8, "a Halves8 table takes codes below 8");
                t[i / 16][c & 7]
            }
            Tables::Signed8(t) => {
                let m = t[i / 16][c & 7];
                if c < 8 { m } else { -m }
            }
            Tables::Linear(line) => line.at(f32::from(c as u8 | h & 16)),
        }
    }
}

/// The codes 0..16 as f32, for [`table`].
pub static CODES: [f32; 16] = codes_f32();
/// The codes 0..8 as f32, for [`table`] of [`Tables::Halves8`].
pub static CODES8: [f32; 8] = codes_f32();

/// `[0., 1., …, N - 1]`.
const fn codes_f32<const N: usize>() -> [f32; N] {
    let mut out = [0f32; N];
    let mut i = 0;
    while i < N {
        out[i] = i as f32;
        i += 1;
    }
    out
}

/// A format's 16 integer values per code as f32 (a `static` for [`table`]).
pub const fn f32_table(t: &[i8; 16]) -> [f32; 16] {
    let mut out = [0f32; 16];
    let mut i = 0;
    while i < 16 {
        out[i] = t[i] as f32;
        i += 1;
    }
    out
}

/// The `N` values `value(v[c])` of a table (`N` = 8 or 16), with `v` (the codes as f32,
/// [`CODES`], or a format's values per code) read at run time, as the f32 decode reads the
/// block's codes. With the constants in sight LLVM would fold some products (`d · -1.0` into
/// `-d`), which flips the sign of a NaN that a NaN scale makes: the values would no longer be
/// the f32 decode's bits.
#[inline(always)]
pub fn table<const N: usize>(v: &'static [f32; N], value: impl Fn(f32) -> f32) -> [f32; N] {
    const { assert!(N == 8 || N == 16) };
    // At most sixteen at a time by `array::map`, which LLVM turns into straight vector code; a
    // loop over the entries stayed a vector loop through the stack, and `map` of 32 entries
    // an out-of-line call.
    let v = crate::barrier::opaque_ref(v);
    let mut out = [0f32; N];
    if let (true, Some(o), Some(c)) = (N == 8, out.first_chunk_mut::<8>(), v.first_chunk::<8>()) {
        *o = c.map(&value);
    }
    if let (Some(o), Some(c)) = (out.first_chunk_mut::<16>(), v.first_chunk::<16>()) {
        *o = c.map(&value);
    }
    out
}

/// A block format whose every value is a code of at most 5 bits looked up in a table of its
/// 32-element group (or of each 16-element half): the description [`decode_row`] needs to
/// write f16 / bf16 without an f32 pass.
pub trait TableGroups {
    /// The block.
    type Block;
    /// Elements per block, a multiple of 32.
    const BLOCK: usize;

    /// Calls `f.group` for each 32-element group of `b` in element order (`BLOCK / 32` calls)
    /// with its tables and codes (and fifth bits, for 5-bit codes on [`Tables::Linear`]). Each
    /// table entry must be computed with exactly the f32 operations of the format's f32 decode
    /// of that code, so that the rounded values are the same bits: build the tables with
    /// [`table`]. Mark it `#[inline(always)]`: the AVX2 kernels' sinks are inlined into it,
    /// and only once it is inlined into their row loop do the intrinsics get the loop's
    /// features.
    fn groups(b: &Self::Block, f: impl GroupSink);

    /// Whether [`decode_row`] serves f32 rows too (the f32 table entries looked up with
    /// `vpermps`): for a format whose own f32 decode is slower than that (q1_0 / q2_0, whose
    /// codes are 1 or 2 bits packed LSB first; nvfp4, iq4_xs, tq2_0, measured).
    const F32: bool = false;

    /// Whether no table entry of any block, whatever its bytes, is an f32 subnormal. Then the
    /// AVX-512 BF16 build rounds the bf16 tables with `vcvtne2ps2bf16` (which reads a
    /// subnormal as zero) without checking them first: the check (`vfpclassps` on every
    /// table, with the formula beside it) cost a third of iq4_xs's bf16 rows on Zen 4.
    ///
    /// True where every entry is computed with f32 operations from f16 (or ue4m3) scales and
    /// mins and integers: each operand is a multiple of 2^-24, so (f32 rounding keeps a
    /// multiple of 2^-24 one: below `2^-1` the grid is finer, above it coarser and a multiple)
    /// every result is zero, at least 2^-24 in magnitude, or not finite — never below the
    /// smallest normal f32, 2^-126. Products of a few such values (multiples of 2^-48 or
    /// 2^-72) stay normal the same way. Not for scales that reach below 2^-100 (e8m0, bf16,
    /// f32). A wrong `true` is caught by a debug assertion on every table (the tests).
    const NEVER_SUBNORMAL: bool = false;
}

/// Whether no entry of `tables` is an f32 subnormal ([`TableGroups::NEVER_SUBNORMAL`]'s
/// promise, checked by the kernels' debug assertions; a line's values are checked where
/// they are computed).
pub(crate) fn entries_normal(tables: &Tables) -> bool {
    let normal = |t: &[f32]| t.iter().all(|v| !v.is_subnormal());
    match tables {
        Tables::One(t) => normal(t),
        Tables::Halves(t) => t.iter().all(|t| normal(t)),
        Tables::Halves8(t) | Tables::Signed8(t) => t.iter().all(|t| normal(t)),
        Tables::Linear(_) => true,
    }
}

/// Where [`TableGroups::groups`] sends each group: any `FnMut(Tables, Codes32, Fifth)` closure
/// (the portable loops), or the AVX2 kernels' sinks, whose `group` is `#[inline(always)]`. A
/// closure made inside a `#[target_feature]` function takes that function's features, and so
/// can be inlined only where the code it is called from has them too; once it grew past
/// LLVM's threshold (the bf16 rounding of two tables) it stayed an out-of-line call per group
/// with its layouts dispatched by jump table, which halved q4_k's bf16 speed.
pub trait GroupSink {
    /// One 32-element group: its tables, codes and fifth bits.
    fn group(&mut self, tables: Tables, codes: Codes32<'_>, fifth: Fifth<'_>);
}

impl<T: FnMut(Tables, Codes32<'_>, Fifth<'_>)> GroupSink for T {
    #[inline(always)]
    fn group(&mut self, tables: Tables, codes: Codes32<'_>, fifth: Fifth<'_>) {
        self(tables, codes, fifth)
    }
}

/// The 16-bit output types and their rounding of f32 (round to nearest even, NaN stays NaN).
pub(crate) trait Half: Elem + bytemuck::Pod {
    /// Whether this is f16 (else bf16).
    const F16: bool;
    /// The bits of `v` rounded to this type.
    fn bits(v: f32) -> u16;
}

impl Half for f16 {
    const F16: bool = true;
    #[inline(always)]
    fn bits(v: f32) -> u16 {
        f32_to_f16_bits(v)
    }
}

impl Half for bf16 {
    const F16: bool = false;
    #[inline(always)]
    fn bits(v: f32) -> u16 {
        f32_to_bf16_bits(v)
    }
}

/// Decodes a row of blocks (`out.len()` logical elements, at most `blocks.len() · BLOCK`; a
/// partial last block keeps its real elements) straight to f16 or bf16 by table lookup, and
/// returns `true`; for f32 output the same where the format asks for it ([`TableGroups::F32`]),
/// else `false` with nothing written: the format's own f32 decode serves it better. The values
/// are `O::from_f32` of the f32 decode, bit for bit (a NaN stays NaN: see the module docs).
#[inline]
pub fn decode_row<F: TableGroups, O: Elem>(blocks: &[F::Block], out: &mut [O]) -> bool {
    match O::out_row(out) {
        OutRow::F32(o) if F::F32 => {
            rows_of::<F, f32>(blocks, o, whole_blocks_f32::<F>);
            true
        }
        OutRow::F32(_) => false,
        OutRow::F16(o) => {
            rows::<F, f16>(blocks, bytemuck::cast_slice_mut(o));
            true
        }
        OutRow::Bf16(o) => {
            rows::<F, bf16>(blocks, bytemuck::cast_slice_mut(o));
            true
        }
    }
}

#[cfg(target_arch = "x86_64")]
pub use crate::half_lut_avx2::{group_from_codes, group_from_codes_with, scaled8};

/// [`decode_row`] into the bits of `H`.
#[inline]
fn rows<F: TableGroups, H: Half>(blocks: &[F::Block], out: &mut [u16]) {
    rows_of::<F, u16>(blocks, out, whole_blocks::<F, H>);
}

/// A row by `whole`, which decodes whole blocks in place ([`crate::block_rows_by`]).
#[inline]
fn rows_of<F: TableGroups, T: Copy + Default>(blocks: &[F::Block], out: &mut [T], whole: fn(&[F::Block], &mut [T])) {
    const { assert!(F::BLOCK > 0 && F::BLOCK.is_multiple_of(32)) };
    crate::block_rows_by(blocks, out, F::BLOCK, whole);
}

/// Whole blocks to f32 (`out.len() == blocks.len() · BLOCK`), with the AVX2 kernel where
/// allowed.
#[inline]
fn whole_blocks_f32<F: TableGroups>(blocks: &[F::Block], out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if let Some(t) = crate::Avx2::detect() {
        crate::half_lut_avx2::whole_blocks::<F, f32, f32>(t, blocks, out);
        return;
    }
    whole_blocks_portable::<F, f32>(blocks, out, |v| v);
}

/// Whole blocks (`out.len() == blocks.len() · BLOCK`), with the AVX2 kernel where allowed.
#[inline]
fn whole_blocks<F: TableGroups, H: Half>(blocks: &[F::Block], out: &mut [u16]) {
    #[cfg(target_arch = "x86_64")]
    if let Some(t) = crate::Avx2::detect() {
        crate::half_lut_avx2::whole_blocks::<F, u16, H>(t, blocks, out);
        return;
    }
    whole_blocks_portable::<F, u16>(blocks, out, H::bits);
}

/// The portable reference of [`whole_blocks`] and [`whole_blocks_f32`]: each group by
/// [`group_portable`], its values converted by `conv` (rounded to f16 / bf16 bits, or kept).
#[inline]
fn whole_blocks_portable<F: TableGroups, T>(blocks: &[F::Block], out: &mut [T], conv: fn(f32) -> T) {
    for (b, dst) in blocks.iter().zip(out.chunks_exact_mut(F::BLOCK)) {
        let mut groups = dst.chunks_exact_mut(32);
        F::groups(b, |tables: Tables, codes: Codes32<'_>, fifth: Fifth<'_>| {
            if let Some(g) = groups.next() {
                group_portable(&tables, codes, fifth, g, conv);
            }
        });
    }
}

/// One group value by value: each code's entry of `tables`, converted by `conv`, into `out`
/// (32 elements). The portable loop.
#[inline(always)]
pub(crate) fn group_portable<T>(
    tables: &Tables,
    codes: Codes32<'_>,
    fifth: Fifth<'_>,
    out: &mut [T],
    conv: fn(f32) -> T,
) {
    for (i, (o, c)) in out.iter_mut().zip(codes.unpack()).enumerate() {
        *o = conv(tables.value(i, c, fifth.of(i)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A made-up format: 256 elements; the first group on one table in split-half order, the
    /// second on two tables over the high nibbles of 32 bytes, then two 5-bit lines with their
    /// fifth bits in a word and in bit 5 of 32 bytes (the second with a tail), then 3-bit
    /// codes from bits 3..5 of 32 bytes and bit 6 of 32 others, on two tables; then 1-bit
    /// codes of a word and 2-bit codes
    /// packed LSB first in 8 bytes; then eight magnitudes per half and their negations, by
    /// the high nibbles of 32 bytes.
    struct Toy;
    struct ToyBlock {
        d: f32,
        qs: [u8; 16],
        qh: [u8; 32],
        qx: [u8; 32],
        w: [u8; 4],
    }

    fn toy_table(d: f32, k: f32) -> [f32; 16] {
        table(&CODES, |c| (c - k) * d)
    }

    impl TableGroups for Toy {
        type Block = ToyBlock;
        const BLOCK: usize = 256;
        const F32: bool = true;
        fn groups(b: &ToyBlock, mut f: impl GroupSink) {
            f.group(Tables::One(toy_table(b.d, 8.0)), Codes32::SplitHalf(&b.qs), Fifth::None);
            f.group(Tables::Halves([toy_table(b.d, 3.0), toy_table(-b.d, 1.5)]), Codes32::High(&b.qh), Fifth::None);
            let wide = Tables::Linear(Line { offset: 16, scale: b.d, tail: crate::Tail::None });
            f.group(wide, Codes32::SplitHalf(&b.qs), Fifth::Word(b.w));
            let line = Tables::Linear(Line { offset: 0, scale: b.d, tail: crate::Tail::Sub(0.25 * b.d) });
            f.group(line, Codes32::Low(&b.qh), Fifth::Bit(&b.qh, 5));
            let field = Codes32::Field { q: &b.qh, shift: 3, width: 2, high: Some((&b.qx, 6)) };
            let eight = |d: f32, k: f32| table(&CODES8, |c| (c - k) * d);
            f.group(Tables::Halves8([eight(b.d, 4.0), eight(2.0 * b.d, 1.0)]), field, Fifth::None);
            f.group(Tables::One(toy_table(b.d, 1.0)), Codes32::Bits(b.w), Fifth::None);
            let pairs: &[u8; 8] = b.qs.first_chunk().expect("8 bytes");
            f.group(Tables::One(toy_table(b.d, 2.0)), Codes32::Pairs(*pairs), Fifth::None);
            let mags = |d: f32| table(&CODES8, |c| (c + 0.5) * d);
            f.group(Tables::Signed8([mags(b.d), mags(3.0 * b.d)]), Codes32::High(&b.qx), Fifth::None);
        }
    }

    fn toy_f32(b: &ToyBlock) -> [f32; 256] {
        let nib = |i: usize| if i < 16 { b.qs[i] & 15 } else { b.qs[i - 16] >> 4 };
        std::array::from_fn(|i| match i {
            0..32 => (f32::from(nib(i)) - 8.0) * b.d,
            32..48 => (f32::from(b.qh[i - 32] >> 4) - 3.0) * b.d,
            48..64 => (f32::from(b.qh[i - 32] >> 4) - 1.5) * -b.d,
            64..96 => {
                let j = i - 64;
                let h = (u32::from_le_bytes(b.w) >> j & 1) as u8;
                (f32::from(nib(j) | h << 4) - 16.0) * b.d
            }
            96..128 => {
                let q = b.qh[i - 96];
                f32::from((q & 15) | (q >> 5 & 1) << 4) * b.d - 0.25 * b.d
            }
            128..160 => {
                let j = i - 128;
                let c = f32::from((b.qh[j] >> 3 & 3) | (b.qx[j] >> 6 & 1) << 2);
                if j < 16 { (c - 4.0) * b.d } else { (c - 1.0) * (2.0 * b.d) }
            }
            160..192 => (f32::from(b.w[(i - 160) / 8] >> ((i - 160) % 8) & 1) - 1.0) * b.d,
            192..224 => (f32::from(b.qs[(i - 192) / 4] >> (2 * ((i - 192) % 4)) & 3) - 2.0) * b.d,
            _ => {
                let (j, c) = (i - 224, b.qx[i - 224] >> 4);
                let m = (f32::from(c & 7) + 0.5) * if j < 16 { b.d } else { 3.0 * b.d };
                if c < 8 { m } else { -m }
            }
        })
    }

    fn blocks(n: usize, seed: u64) -> Vec<ToyBlock> {
        let mut rng = qforge_core::rand::Rng::new(seed);
        (0..n)
            .map(|i| {
                let d = match i % 5 {
                    0 => f32::NAN,
                    1 => 1e-9,
                    2 => 70000.0 / 8.0,
                    _ => (rng.unit_f32() - 0.5) * 0.02,
                };
                let qs = rng.bytes(16).try_into().expect("16 bytes");
                let qh = rng.bytes(32).try_into().expect("32 bytes");
                let qx = rng.bytes(32).try_into().expect("32 bytes");
                let w = rng.bytes(4).try_into().expect("4 bytes");
                ToyBlock { d, qs, qh, qx, w }
            })
            .collect()
    }

    #[test]
    fn codes_unpack_in_element_order() {
        let q: [u8; 32] = std::array::from_fn(|i| (i * 37 + 11) as u8);
        let h: &[u8; 16] = q.first_chunk().expect("16");
        let s = Codes32::SplitHalf(h).unpack();
        let t = Codes32::SplitHalves(h).unpack();
        for i in 0..16 {
            assert_eq!((s[i], s[i + 16]), (h[i] & 15, h[i] >> 4));
        }
        for (half, j) in [(0, 0), (0, 7), (1, 0), (1, 7)] {
            let b = h[8 * half + j];
            assert_eq!((t[16 * half + j], t[16 * half + j + 8]), (b & 15, b >> 4));
        }
        assert_eq!(Codes32::Low(&q).unpack(), q.map(|b| b & 15));
        assert_eq!(Codes32::High(&q).unpack(), q.map(|b| b >> 4));
        let field = Codes32::Field { q: &q, shift: 2, width: 2, high: Some((&q, 7)) };
        assert_eq!(field.unpack(), q.map(|b| (b >> 2 & 3) | (b >> 7) << 2));
        let bits = Codes32::Bits([0b1000_0001, 0, 0b0000_0010, 0x80]).unpack();
        let set: Vec<usize> = (0..32).filter(|&i| bits[i] == 1).collect();
        assert_eq!((set, bits.iter().all(|&c| c < 2)), (vec![0, 7, 17, 31], true));
        let pairs = Codes32::Pairs([0b11_10_01_00, 0, 0, 0, 0, 0, 0, 0b00_01_10_11]).unpack();
        assert_eq!((&pairs[..4], &pairs[28..]), (&[0, 1, 2, 3][..], &[3, 2, 1, 0][..]));
    }

    /// Every level, every dtype (the toy asks for f32 too), with partial last blocks:
    /// `from_f32` of the f32 values.
    #[test]
    fn rows_equal_the_rounded_f32_decode_at_every_level() {
        let b = blocks(9, 3);
        let want: Vec<f32> = b.iter().flat_map(toy_f32).collect();
        for level in qforge_core::cpu::testable_levels() {
            for len in [2304, 2303, 1900, 1300, 1290, 256, 1] {
                qforge_core::cpu::with_level(level, || {
                    let mut h = vec![f16::ZERO; len];
                    let mut g = vec![bf16::ZERO; len];
                    let mut f = vec![0f32; len];
                    assert!(decode_row::<Toy, f16>(&b, &mut h));
                    assert!(decode_row::<Toy, bf16>(&b, &mut g));
                    assert!(decode_row::<Toy, f32>(&b, &mut f));
                    for i in 0..len {
                        let (wh, wb) = (f16::from_f32(want[i]), bf16::from_f32(want[i]));
                        let ctx = format!("{} len {len} element {i}: {}", level.name(), want[i]);
                        assert_eq!(h[i].to_bits(), wh.to_bits(), "f16 {ctx}");
                        assert_eq!(g[i].to_bits(), wb.to_bits(), "bf16 {ctx}");
                        assert_eq!(f[i].to_bits(), want[i].to_bits(), "f32 {ctx}");
                    }
                });
            }
        }
    }
}
