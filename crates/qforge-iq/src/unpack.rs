//! What the 256-value I-quants give the dot kernels: each block's integer values (grid value ×
//! sign, table value, ...; they all fit an `i8`) and the integer scale of each 16 values
//! ([`KDot`], [`SubBlocks`]), with the word-wide sign and barrier helpers the format modules
//! build them with. The format modules implement these traits; `dot.rs` turns them into
//! `NativeDot` kernels and `simd.rs` into the AVX2 one, so dependencies point one way:
//! formats → this module ← dot / simd.

use crate::common::QK_K;
use crate::tables::{KSIGNS_IQ2XS, KVALUES_IQ4NL};
use qforge_core::BlockFormat;
use qforge_core::le::F16Le;
use qforge_simd::lut::nibble_lut;

/// The bytes of `v` (little-endian) as `i8`.
#[inline(always)]
fn bytes_i8(v: u64) -> [i8; 8] {
    bytemuck::cast(v.to_le_bytes())
}

/// The 8 values of grid word `grid`, negated where bit `j` of `signs` is set (ggml's
/// `signs & kmask_iq2xs[j] ? -1 : 1`), as one 64-bit word operation: `(g ^ m) + (m & 1)` per
/// byte with `m` = 0xFF where negated. Exact for grid bytes in `1..128` (no carry between
/// bytes), which every iq2 / iq3 grid is (checked in the tests).
#[cfg(test)]
pub(crate) fn signed8(grid: u64, signs: u8) -> [i8; 8] {
    bytes_i8(signed_word(grid, SIGN_MASK[usize::from(signs)]))
}

/// [`signed8`] with the byte mask `m` already looked up, as the word of the 8 `i8` values.
#[inline(always)]
pub(crate) fn signed_word(grid: u64, m: u64) -> u64 {
    (grid ^ m).wrapping_add(m & 0x0101_0101_0101_0101)
}

/// `8·g ± 1` for the 8 ternary values `g` (bytes -1, 0, 1) of `grid`, -1 where the byte mask
/// `m` is 0xFF, +1 where it is 0, as one 64-bit word operation: `8·g` per byte is
/// `(g << 3) & 0xF8`, and the ±1 (0x01 or 0xFF) is added per byte without carries between
/// bytes (the top bits summed apart).
#[inline(always)]
pub(crate) fn shifted_word(grid: u64, m: u64) -> u64 {
    const H: u64 = 0x8080_8080_8080_8080;
    let x = (grid << 3) & 0xF8F8_F8F8_F8F8_F8F8;
    let y = m | 0x0101_0101_0101_0101;
    ((x & !H) + (y & !H)) ^ ((x ^ y) & H)
}

/// Byte `l` of `b` in 16-bit lane `l` of the word.
#[inline(always)]
pub(crate) fn spread_bytes(b: [u8; 4]) -> u64 {
    let x = u64::from(u32::from_le_bytes(b));
    let x = (x | x << 16) & 0x0000_FFFF_0000_FFFF;
    (x | x << 8) & 0x00FF_00FF_00FF_00FF
}

/// Each grid word an `ints` loop loads passes through this barrier. Without it LLVM's SLP
/// vectorizer turns the 4–8 independent table loads of a sub-block into AVX2 / AVX-512
/// gathers, which are microcoded and were measured ~10x slower than the scalar loads they
/// replace on the Ice Lake build VM (worse still under the "Downfall" / GDS microcode
/// mitigation; docs/matmul.md, "Speed"). ggml's kernels load grid words with scalar loads
/// too. On x86-64 the value passes through an opaque (empty) register barrier, so LLVM cannot
/// merge the loads of a sub-block into a gather, yet keeps everything else in registers (a
/// compiler fence forces locals to the stack, which cost the AVX2 kernel a third of its
/// speed). Other targets use the fence (no instruction).
#[inline(always)]
pub(crate) fn no_gather_word(x: u64) -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        qforge_simd::barrier::opaque(x)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        std::sync::atomic::compiler_fence(std::sync::atomic::Ordering::SeqCst);
        x
    }
}

/// `SIGN_MASK[b]` has byte `j` = 0xFF where bit `j` of `b` is set, else 0.
pub(crate) static SIGN_MASK: [u64; 256] = {
    let mut t = [0u64; 256];
    let mut b = 0;
    while b < 256 {
        let mut j = 0;
        while j < 8 {
            if b >> j & 1 != 0 {
                t[b] |= 0xFF << (8 * j);
            }
            j += 1;
        }
        b += 1;
    }
    t
};

/// `KSIGNS_PM1[i]`: iq2_xxs / iq2_xs / iq3_xxs's 7-bit sign code `i` straight to the signs
/// as bytes, 0xFF (-1) where `KSIGNS_IQ2XS[i]` negates the value, else 0x01 (+1): ggml's
/// `keven_signs_q2xs`, what `vpsignb` takes (one lookup instead of two).
pub(crate) static KSIGNS_PM1: [u64; 128] = {
    let mut t = [0u64; 128];
    let mut i = 0;
    while i < 128 {
        t[i] = SIGN_MASK[KSIGNS_IQ2XS[i] as usize] | 0x0101_0101_0101_0101;
        i += 1;
    }
    t
};

/// `KSIGNS_IQ2XS[s & 127]`, computed: the 7 sign bits of the code and, as the eighth, their
/// parity (ggml's sign codes negate an even number of values). Straight-line code, which
/// LLVM vectorizes over a block's codes.
#[inline(always)]
pub(crate) fn ksigns_byte(s: u32) -> u8 {
    let s = s & 127;
    let p = s ^ (s >> 4);
    let p = p ^ (p >> 2);
    let p = p ^ (p >> 1);
    (s | (p & 1) << 7) as u8
}

/// The byte mask (0xFF where negated, else 0) of a word of ±1 sign bytes: each byte's top bit
/// spread over the byte.
#[inline(always)]
fn mask_of_pm1(s: u64) -> u64 {
    ((s >> 7) & 0x0101_0101_0101_0101) * 0xFF
}

/// A 256-value I-quant as integers: its values and the integer scale of each 16-value group,
/// so that the block's exact integer sum is `Σ_g scale[g]·Σ_{i in g} v[i]·q8[i]`, and the
/// f32 factor `d` it is multiplied by (with `d_y`): what the reference dot
/// (`dot::sub_block_vec_dot_portable`) reads.
pub(crate) trait KDot: BlockFormat {
    /// The block's f32 factor: its scale times ggml's final constant (`0.125f * sumf` for
    /// iq2, `0.25f` for iq3_xxs, ...; powers of two, so folding them in is exact).
    fn d(b: &Self::Block) -> f32;

    /// Writes the block's integer values in element order, as 32 groups of 8, and returns
    /// the integer scale of each 16-value group (`|value · scale| < 2^15`).
    fn ints(b: &Self::Block, w: &mut [[i8; 8]; QK_K / 8]) -> [i16; QK_K / 16];
}

/// The 32 integer values of one sub-block, as a format stores them most cheaply.
pub(crate) enum SubBlock<'a> {
    /// The grid formats: the grid entries of the 32 values (unsigned, every byte in `1..128`)
    /// and which of them are negated. Entries are references into the grid tables, so that
    /// the AVX2 kernel loads them straight into vector registers.
    Grid(GridWords, GridSigns),
    /// iq1_s / iq1_m: the ternary grid entries (bytes -1, 0, 1) and which of the values take
    /// the shift -1 rather than +1 (always whole 8-value words, [`GridSigns::Words`]): the
    /// values `8·g ± 1`, ggml's `g ± 1/8` times 8 (`D_MUL = 1/8` takes it back, exactly).
    Shifted(GridWords, GridSigns),
    /// 16 bytes of 4-bit indices into `kvalues_iq4nl`, low nibbles values 0..16, high
    /// nibbles 16..32 (iq4_xs).
    Nibbles(&'a [u8; 16]),
}

/// A sub-block's grid entries, values in element order.
#[derive(Clone, Copy)]
pub(crate) enum GridWords {
    /// Four entries of 8 values (the iq2 grids): values `8l .. 8l + 8` in entry `l`.
    W64([&'static u64; 4]),
    /// Eight entries of 4 values (the iq3 grids): values `4k .. 4k + 4` in entry `k`.
    W32([&'static u32; 8]),
}

impl GridWords {
    /// The 8 values `8l .. 8l + 8` as one little-endian word.
    #[inline(always)]
    pub(crate) fn word(self, l: usize) -> u64 {
        match self {
            GridWords::W64(w) => no_gather_word(*w[l & 3]),
            GridWords::W32(w) => {
                no_gather_word(u64::from(*w[(2 * l) & 7])) | no_gather_word(u64::from(*w[(2 * l + 1) & 7])) << 32
            }
        }
    }
}

/// Which of a sub-block's 32 grid values are negated.
#[derive(Clone, Copy)]
pub(crate) enum GridSigns {
    /// Sign bytes: byte `j` of word `l` is 0xFF (-1) where value `8l + j` is negated, else
    /// 0x01 (+1) (iq2_xxs, iq2_xs, iq3_xxs: their 7-bit sign codes looked up in
    /// [`KSIGNS_PM1`]).
    Pm1([&'static u64; 4]),
    /// One bit per value, LSB first: bit `j` of byte `l` negates value `8l + j` (iq2_s,
    /// iq3_s).
    Bits([u8; 4]),
    /// One bit per 8-value word: bit `l` negates all of values `8l .. 8l + 8` (iq1_s / iq1_m's
    /// shifts).
    Words(u8),
}

impl GridSigns {
    /// The byte mask of word `l`.
    #[inline(always)]
    pub(crate) fn mask(self, l: usize) -> u64 {
        match self {
            GridSigns::Pm1(s) => mask_of_pm1(*s[l & 3]),
            GridSigns::Bits(b) => SIGN_MASK[usize::from(b[l & 3])],
            GridSigns::Words(m) => 0u64.wrapping_sub(u64::from(m >> (l & 3) & 1)),
        }
    }

    /// iq2_xxs / iq2_xs / iq3_xxs: the sign bytes of four 7-bit sign codes (`code(l)` the
    /// code of values `8l .. 8l + 8`).
    #[inline(always)]
    pub(crate) fn ksigns(code: impl Fn(usize) -> usize) -> GridSigns {
        let t: &'static [u64; 128] = &KSIGNS_PM1;
        GridSigns::Pm1(std::array::from_fn(|l| &t[code(l) & 127]))
    }
}

/// A 256-value I-quant described by its 8 sub-blocks of 32 values (every value in
/// `-127..=127`) and the integer scale of each 16 values: the formats with an AVX2 kernel
/// (`simd.rs`). Their [`KDot`] (what the portable reference reads) derives from it.
pub(crate) trait SubBlocks: BlockFormat {
    /// ggml's final constant (`0.125` for iq2, `0.25` for iq3_xxs, else 1): a power of two.
    const D_MUL: f32 = 1.0;
    /// The raw bits of the block's f16 scale: [`KDot::d`] is `D_MUL · d` (the AVX2 kernel
    /// widens it with `vcvtph2ps`, without the run-time CPU check of a portable f16).
    fn d_bits(b: &Self::Block) -> u16;
    /// What a format computes for a whole block before its sub-blocks are read (`()` where
    /// that did not pay): the 32 grid indices of iq1_s / iq1_m / iq2_s, spread over a byte
    /// and a few high bits, iq2_xs's indices and sign bytes; all 32 at
    /// once in straight-line code that LLVM vectorizes, instead of shifts, masks and table
    /// loads per value in the sub-block loop. The AVX2 kernel computes it one block ahead,
    /// into the other of two slots (docs/formats/iq.md).
    type Pre: Copy + Default;
    /// The block's [`SubBlocks::Pre`].
    #[inline(always)]
    fn prepare(_b: &Self::Block) -> Self::Pre {
        Self::Pre::default()
    }
    /// The values of sub-block `ib` (`0..8`); `pre` is the block's [`SubBlocks::prepare`].
    fn sub_block<'a>(b: &'a Self::Block, pre: &Self::Pre, ib: usize) -> SubBlock<'a>;
    /// The integer scale of each 16-value group (`|value · scale| < 2^15`). Read from
    /// [`SubBlocks::SCALE_FIELDS`] where a format sets them; a format that does not must
    /// implement it (else a compile-time error where it is used).
    #[inline(always)]
    fn scales(b: &Self::Block) -> [i16; QK_K / 16] {
        const { Self::SCALE_FIELDS.expect("a SubBlocks format without SCALE_FIELDS implements `scales`") }
            .scales(bytemuck::bytes_of(b))
    }
    /// Where the odd scales `2s + 1` lie in the block, each one bit field of a little-endian
    /// `u16` ([`ScaleFields`]): [`SubBlocks::scales`] reads them, and the AVX2 kernel builds its
    /// scales register from them with five vector instructions instead of sixteen scalar
    /// extractions and insertions (`None`: the format's own `scales`). Zen 4, mat-vec 4096²,
    /// AVX2 / VNNI: iq2_xs +6 / +4 to 14 %, iq2_s +8 / +5 %, iq3_s +1 / +2 %; iq1_s / iq1_m,
    /// whose scales are cheaper to extract, −1 / −5 % and +4 / −1 % (noise), so they leave it
    /// `None`.
    const SCALE_FIELDS: Option<ScaleFields> = None;
    /// Whether the AVX2 mat-vec takes `|a|` of the activation row precomputed once for every
    /// weight row, instead of one `vpabsb` per sub-block and row, for the products of signed
    /// values (`vpmaddubsw(|a|, sign(v, a))`). Zen 4, mat-vec 4096², AVX2 / VNNI: iq4_xs
    /// +4.5 / +4.6 %; iq1_s −3 / −0 %, iq1_m −10 / −4 %, iq2_xs ±1 % (the extra operand left
    /// them fewer registers), so only iq4_xs sets it.
    const ABS_ACTS: bool = false;
    /// Whether the AVX2 mat-vec takes `Σa` of every 16 activations precomputed once for every
    /// weight row and multiplies the values plus 9 (unsigned) by the activations as they are
    /// (`simd.rs`'s `ACTS_SUMS`): for formats whose every sub-block is
    /// [`SubBlock::Shifted`] (iq1_s, iq1_m), whose values lie in `-9..=9`.
    const OFFSET_ACTS: bool = false;
    /// A code-generation choice of the AVX2 / VNNI row kernel, the same result either way:
    /// pick each sub-block's pair of group scales with a `vpshufb` whose control is read from
    /// a table, instead of a constant control (which LLVM rewrites as `vpshuflw` / `vpshufhw`
    /// and `vpshufd`, two or three shuffles). Set where it measured faster: iq4_xs on an Intel
    /// Xeon, mat-vec 4096², one thread, 18.2 → 21.2 Gel/s at `QFORGE_CPU=avx2` and 23.1 →
    /// 23.9 at its VNNI level; iq1_s and iq2_s were 4–5 % slower with it, the others even.
    const SCALE_PICK_TABLE: bool = false;
    /// Whether the row kernel runs its VEX build (AVX-VNNI) rather than its EVEX one on an
    /// Intel CPU that has both forms (Sapphire Rapids and later). Set by the formats whose
    /// sub-blocks are 8-byte grid entries (iq1_s, iq1_m, iq2_xxs, iq2_xs, iq2_s): on an Intel
    /// Xeon (family 6 model 167), mat-vec 4096², one thread, EVEX → VEX: iq1_s 11.0 → 13.4
    /// Gel/s, iq2_xxs 11.1 → 12.9, iq2_xs 12.3 → 13.4, iq2_s 10.7 → 13.8, iq1_m 10.4 → 11.0;
    /// iq3_xxs and iq3_s even, iq4_xs 20.6 → 18.3, so they stay EVEX (docs/matmul.md).
    const VEX_ON_INTEL: bool = false;
}

/// A format's 16 group scales as bit fields of its block: group `k`'s scale is
/// `2 · ((w >> shift[k]) & (2^bits − 1)) + 1`, where `w` is the little-endian `u16` at byte
/// `at + 2 · word[k]` of the block. The 16 bytes from `at` lie in the block, and
/// `shift[k] + bits ≤ 16` ([`ScaleFields::strided`] checks both).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ScaleFields {
    /// The byte offset in the block of the 16-byte window that holds every scale word.
    pub at: usize,
    /// Per group, the index of its `u16` in the window (`0..8`).
    pub word: [u8; QK_K / 16],
    /// Per group, the field's lowest bit in its word.
    pub shift: [u8; QK_K / 16],
    /// The fields' width.
    pub bits: u8,
}

impl ScaleFields {
    /// The fields of a block of `block_bytes` bytes whose `u16` scale words start at byte
    /// `words_at`: field `j` (of groups `g·j .. g·j + g`, `g = groups_per_field`) is bits
    /// `base + stride · (j % per_word)` .. of word `j / per_word`, `bits` wide. The window is
    /// the 16 bytes from `words_at`, or the block's last 16 where those would run past its
    /// end. Out of the block or of a word: a compile-time error where the constant is built.
    pub const fn strided(
        block_bytes: usize,
        words_at: usize,
        groups_per_field: usize,
        per_word: usize,
        (base, stride, bits): (u8, u8, u8),
    ) -> Self {
        let at = if words_at + 16 <= block_bytes { words_at } else { block_bytes - 16 };
        assert!((words_at - at).is_multiple_of(2) && bits >= 1);
        let (mut word, mut shift) = ([0; QK_K / 16], [0; QK_K / 16]);
        let mut k = 0;
        while k < QK_K / 16 {
            let j = k / groups_per_field;
            word[k] = ((words_at - at) / 2 + j / per_word) as u8;
            shift[k] = base + stride * (j % per_word) as u8;
            assert!(word[k] < 8 && shift[k] as u32 + bits as u32 <= 16);
            k += 1;
        }
        ScaleFields { at, word, shift, bits }
    }

    /// The 16 odd scales of `block` (its bytes), in group order.
    #[inline(always)]
    pub fn scales(&self, block: &[u8]) -> [i16; QK_K / 16] {
        let w: &[u8; 16] = block[self.at..self.at + 16].try_into().expect("a window inside the block");
        std::array::from_fn(|k| {
            let i = 2 * usize::from(self.word[k] & 7);
            let v = u32::from(u16::from_le_bytes([w[i], w[i + 1]])) >> self.shift[k];
            2 * (v & ((1 << self.bits) - 1)) as i16 + 1
        })
    }
}

impl<F: SubBlocks> KDot for F {
    #[inline(always)]
    fn d(b: &Self::Block) -> f32 {
        F::D_MUL * F16Le(F::d_bits(b).to_le_bytes()).get()
    }

    #[inline(always)]
    fn ints(b: &Self::Block, w: &mut [[i8; 8]; QK_K / 8]) -> [i16; QK_K / 16] {
        let (w4, _) = w.as_chunks_mut::<4>();
        let pre = F::prepare(b);
        for (ib, w4) in w4.iter_mut().enumerate() {
            *w4 = match F::sub_block(b, &pre, ib) {
                SubBlock::Grid(g, s) => std::array::from_fn(|l| bytes_i8(signed_word(g.word(l), s.mask(l)))),
                SubBlock::Shifted(g, s) => std::array::from_fn(|l| bytes_i8(shifted_word(g.word(l), s.mask(l)))),
                SubBlock::Nibbles(q) => bytemuck::cast(nibble_lut::<16, 32>(q, &KVALUES_IQ4NL)),
            };
        }
        F::scales(b)
    }
}

/// `BlockFormat::decode_row` of the grid I-quants: the AVX2 kernel (`simd/decode.rs`: every
/// output type in one pass, f16 / bf16 without an f32 row) where the CPU has it, else the
/// format's `decode` block by block.
#[inline(always)]
pub(crate) fn decode_row<F: crate::packed::GridValues, O: qforge_core::Elem>(blocks: &[F::Block], out: &mut [O]) {
    #[cfg(target_arch = "x86_64")]
    if crate::simd::decode_row::<F, O>(blocks, out) {
        return;
    }
    qforge_core::decode_blocks_default::<F, O>(blocks, out)
}

/// Each scale of the 8 sub-blocks of 32 values, repeated over its two 16-value groups.
#[inline(always)]
pub(crate) fn per32(ls: impl Fn(usize) -> i16) -> [i16; QK_K / 16] {
    std::array::from_fn(|k| ls(k / 2))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tables::{IQ2S_GRID, IQ2XS_GRID, IQ2XXS_GRID, IQ3S_GRID, IQ3XXS_GRID};

    /// [`signed8`]'s word trick needs every grid byte in `1..128`.
    #[test]
    fn grid_bytes_are_small_and_nonzero() {
        let ok = |b: u8| (1..128).contains(&b);
        for g in IQ2XXS_GRID.iter().chain(&IQ2XS_GRID).chain(&IQ2S_GRID) {
            assert!(g.to_le_bytes().into_iter().all(ok), "{g:#x}");
        }
        for g in IQ3XXS_GRID.iter().chain(&IQ3S_GRID) {
            assert!(g.to_le_bytes().into_iter().all(ok), "{g:#x}");
        }
    }

    #[test]
    fn signed8_matches_per_byte_signs() {
        for grid in [0x2b19_0808_192b_2b08u64, 0x0101_0101_0101_0101, 0x7f7f_7f7f_7f7f_7f7f] {
            for s in 0..=255u8 {
                let want: [i8; 8] =
                    std::array::from_fn(|j| grid.to_le_bytes()[j] as i8 * if s >> j & 1 != 0 { -1 } else { 1 });
                assert_eq!(signed8(grid, s), want);
            }
        }
        for i in 0..128 {
            let signs = KSIGNS_IQ2XS[i];
            let want: [i8; 8] = std::array::from_fn(|j| if signs >> j & 1 != 0 { -1 } else { 1 });
            assert_eq!(bytes_i8(KSIGNS_PM1[i]), want, "code {i}");
            assert_eq!(mask_of_pm1(KSIGNS_PM1[i]), SIGN_MASK[usize::from(signs)], "code {i}");
            assert_eq!(ksigns_byte(i as u32 | 0xFFFF_FF80), signs, "code {i}");
        }
    }
}
