//! The AVX2 kernel of [`crate::half_lut`]: per 32-element group, the 16-entry table rounded
//! with two `vcvtps2ph` (f16) or the rounding formula on 8 lanes (bf16), its low and high
//! bytes split into two `vpshufb` tables, the codes looked up in both and the bytes unpacked
//! into 16-bit values; a [`Tables::Linear`] group's 5-bit codes widened, multiplied and
//! rounded value by value ([`crate::store8::scaled_i8x32`]). Where the CPU has AVX-512 BF16
//! the row loop is built a second time for bf16 output, rounding with `vcvtne2ps2bf16`
//! instead of the formula (the `BF16` parameter of the helpers). The same bits as the
//! portable loop either way (`half_lut`'s tests and qforge-cpu's level tests hold them).
//!
//! Only the row loop is `#[target_feature]`. The helpers below are `#[inline(always)]` unsafe
//! functions instead (a `#[target_feature]` function cannot be forced inline, and the group
//! body stayed a call per group once it grew): inlined into the loop, they and the intrinsics
//! they call take its features.
#![allow(unsafe_code)]

use std::arch::x86_64::*;

use crate::half_lut::{Codes32, Fifth, GroupSink, Half, Line, TableGroups, Tables};
use crate::store8::{bf16_bits, bf16_bits_not_nan, bf16_pair_native, never_subnormal, scaled_i8x32_with};
use qforge_core::{DType, Elem, OutRow, bf16, f16};

/// [`crate::half_lut`]'s whole blocks (`out.len() == blocks.len() · F::BLOCK`) on the AVX2
/// kernel, as `T`: the bits of `H` (`T = u16`), or f32 (`T = H = f32`). Where the CPU has
/// AVX-512 BF16 ([`qforge_core::cpu::bf16_native`]) every output type takes the AVX-512
/// build: it rounds bf16 tables and [`Tables::Linear`] groups with `vcvtne2ps2bf16` (q4_k
/// 0.57–0.83× of its f32 rows on Zen 4 with the AVX2 formula) and looks tables up with
/// `vpermw` / `vpermps` ([`crate::half_lut_avx512`]).
#[inline]
pub(crate) fn whole_blocks<F: TableGroups, T, H: Elem>(token: crate::Avx2, blocks: &[F::Block], out: &mut [T])
where
    for<'a> Sink<'a, T, H, false>: GroupSink,
    for<'a> Sink<'a, T, H, true>: GroupSink,
{
    if qforge_core::cpu::bf16_native() {
        // SAFETY: `bf16_native` says the CPU has AVX-512 F / BW / VL / DQ / BF16, and the
        // `Avx2` token that it has AVX2, FMA and F16C: everything the function enables.
        unsafe { whole_blocks_bf16::<F, T, H>(token, blocks, out) }
    } else {
        // SAFETY: the `Avx2` token exists only where the CPU has AVX2, FMA and F16C,
        // everything the `#[target_feature]` function enables.
        unsafe { whole_blocks_avx2::<F, T, H>(token, blocks, out) }
    }
}

#[target_feature(enable = "avx2,fma,f16c")]
fn whole_blocks_avx2<F: TableGroups, T, H>(token: crate::Avx2, blocks: &[F::Block], out: &mut [T])
where
    for<'a> Sink<'a, T, H, false>: GroupSink,
{
    rows::<F, T, H, false>(token, blocks, out);
}

/// [`whole_blocks_avx2`] with AVX-512 BF16 (the caller checked it).
#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")]
fn whole_blocks_bf16<F: TableGroups, T, H>(token: crate::Avx2, blocks: &[F::Block], out: &mut [T])
where
    for<'a> Sink<'a, T, H, true>: GroupSink,
{
    rows::<F, T, H, true>(token, blocks, out);
}

/// The row loop of both builds, inlined into each (its sink's stores take the build's
/// features).
#[inline(always)]
fn rows<F: TableGroups, T, H, const BF16: bool>(token: crate::Avx2, blocks: &[F::Block], out: &mut [T])
where
    for<'a> Sink<'a, T, H, BF16>: GroupSink,
{
    for (b, dst) in blocks.iter().zip(out.chunks_exact_mut(F::BLOCK)) {
        let (groups, _) = dst.as_chunks_mut::<32>();
        let normal = F::NEVER_SUBNORMAL;
        F::groups(
            b,
            Sink::<T, H, BF16> { _token: token, groups: groups.iter_mut(), normal, half: std::marker::PhantomData },
        );
    }
}

/// The row loops' [`GroupSink`]: each group into the next 32 elements of `groups`, as `T`
/// (u16 bits of `H`, or f32). Made only with the token that proves AVX2 and F16C, and with
/// `BF16` only where the CPU has AVX-512 BF16 ([`whole_blocks`]): its stores use it.
/// A struct, not a closure: its `#[inline(always)]` method inlines into the format's
/// `groups` whatever the size of the lookup (see [`GroupSink`]).
pub(crate) struct Sink<'a, T, H, const BF16: bool> {
    _token: crate::Avx2,
    groups: std::slice::IterMut<'a, [T; 32]>,
    /// The format's [`TableGroups::NEVER_SUBNORMAL`]: a constant once the sink is inlined
    /// into the row loop, so a format that sets it has no subnormal check in its code.
    normal: bool,
    half: std::marker::PhantomData<H>,
}

impl<H: Half, const BF16: bool> GroupSink for Sink<'_, u16, H, BF16> {
    #[inline(always)]
    fn group(&mut self, tables: Tables, codes: Codes32<'_>, fifth: Fifth<'_>) {
        let Some(g) = self.groups.next() else { return };
        debug_assert!(
            !self.normal || crate::half_lut::entries_normal(&tables),
            "a subnormal table entry of a NEVER_SUBNORMAL format: {tables:?}"
        );
        // SAFETY: the sink's token proves AVX2 and F16C, and `BF16` (see the struct) the
        // AVX-512 BF16 of the stores; `normal` is the format's promise, checked above in
        // debug builds (only its speed rests on it: a wrong promise rounds a subnormal
        // entry to zero, nothing unsound).
        unsafe { group::<H, BF16>(&tables, codes, fifth, g, self.normal) }
    }
}

impl<const BF16: bool> GroupSink for Sink<'_, f32, f32, BF16> {
    #[inline(always)]
    fn group(&mut self, tables: Tables, codes: Codes32<'_>, fifth: Fifth<'_>) {
        let Some(g) = self.groups.next() else { return };
        // SAFETY: the sink's token proves AVX2 and F16C, and `BF16` the AVX-512 of the
        // lookup.
        unsafe { group_f32::<BF16>(&tables, codes, fifth, g) }
    }
}

/// One group to f32: per 8 codes, each 16-entry table's two halves looked up with `vpermps`
/// and blended by the code's bit 3 (the negated half of [`Tables::Signed8`] by a sign flip);
/// [`Tables::Linear`] computed as for f16 / bf16. With `BF16`, the AVX-512 lookup
/// ([`crate::half_lut_avx512::lookup_store_f32`]).
///
/// # Safety
/// The CPU must have AVX2 and F16C, and with `BF16` AVX-512 F / BW / VL / DQ / BF16.
#[inline(always)]
unsafe fn group_f32<const BF16: bool>(tables: &Tables, codes: Codes32<'_>, fifth: Fifth<'_>, out: &mut [f32; 32]) {
    // SAFETY: the caller guarantees AVX2 and F16C (and `BF16`'s features); every table load
    // reads 8 f32 of an array of at least 8, and every store writes 8 of `out`'s 32 (`k < 4`).
    unsafe {
        let c = code_bytes(codes);
        if let Tables::Linear(line) = *tables {
            return linear_store::<f32, BF16>(c, fifth, line, out);
        }
        if BF16 && crate::half_lut_avx512::lookup_store_f32(tables, c, out) {
            return;
        }
        let (c0, c1) = (_mm256_castsi256_si128(c), _mm256_extracti128_si256::<1>(c));
        let halves = [f32_half(tables, 0), f32_half(tables, 1)];
        for (k, bytes) in [c0, _mm_srli_si128::<8>(c0), c1, _mm_srli_si128::<8>(c1)].into_iter().enumerate() {
            let (lo, hi, signed) = halves[k / 2];
            let idx = _mm256_cvtepu8_epi32(bytes);
            // Bit 3 of each code to the lane's sign bit: `blendv` and the sign flip read it.
            let bit3 = _mm256_castsi256_ps(_mm256_slli_epi32::<28>(idx));
            let v = if signed {
                let m = _mm256_permutevar8x32_ps(lo, idx);
                _mm256_xor_ps(m, _mm256_and_ps(bit3, _mm256_set1_ps(-0.0)))
            } else {
                _mm256_blendv_ps(_mm256_permutevar8x32_ps(lo, idx), _mm256_permutevar8x32_ps(hi, idx), bit3)
            };
            _mm256_storeu_ps(out.as_mut_ptr().add(8 * k), v);
        }
    }
}

/// The f32 entries of codes `0..8` and `8..16` of half `h` (`0` or `1`) of a group's tables,
/// and whether codes `8..16` are the negations of `0..8` ([`Tables::Signed8`]); zeros for
/// [`Tables::Linear`]. A function, not a closure: a closure would not take the caller's
/// features, and its loads would stay calls.
///
/// # Safety
/// The CPU must have AVX.
#[inline(always)]
unsafe fn f32_half(tables: &Tables, h: usize) -> (__m256, __m256, bool) {
    let h = h & 1;
    // SAFETY: the caller guarantees AVX; every load reads 8 f32 of an array of 8 or 16.
    unsafe {
        match tables {
            Tables::One(t) => (_mm256_loadu_ps(t.as_ptr()), _mm256_loadu_ps(t.as_ptr().add(8)), false),
            Tables::Halves(t) => (_mm256_loadu_ps(t[h].as_ptr()), _mm256_loadu_ps(t[h].as_ptr().add(8)), false),
            Tables::Halves8(t) => (_mm256_loadu_ps(t[h].as_ptr()), _mm256_loadu_ps(t[h].as_ptr()), false),
            Tables::Signed8(t) => (_mm256_loadu_ps(t[h].as_ptr()), _mm256_loadu_ps(t[h].as_ptr()), true),
            Tables::Linear(_) => (_mm256_setzero_ps(), _mm256_setzero_ps(), false),
        }
    }
}

/// One group: the tables in `vpshufb` form, the codes as bytes, the lookup, the stores.
///
/// # Safety
/// The CPU must have AVX2 and F16C, and with `BF16` AVX-512 F / VL / DQ / BF16.
#[inline(always)]
unsafe fn group<H: Half, const BF16: bool>(
    tables: &Tables,
    codes: Codes32<'_>,
    fifth: Fifth<'_>,
    out: &mut [u16; 32],
    normal: bool,
) {
    // SAFETY: the caller guarantees AVX2 and F16C (and `BF16`'s features), all the helpers need.
    unsafe { lookup_store::<H, BF16>(tables, code_bytes(codes), fifth, out, normal) }
}

/// The values of the codes `c` (bytes `0..16`, elements `0..16` in lane 0; the fifth bits
/// from `fifth`) in `tables`, rounded to `H` (bf16 by `vcvtne2ps2bf16` where `BF16`: the
/// tables, or a [`Tables::Linear`] group's values), stored into `out`. `normal`: no table
/// entry is an f32 subnormal, so `vcvtne2ps2bf16` needs no check ([`words16`]; a subnormal
/// entry would come out as zero).
///
/// # Safety
/// The CPU must have AVX2 and F16C, and with `BF16` AVX-512 F / VL / DQ / BF16.
#[inline(always)]
pub(crate) unsafe fn lookup_store<H: Half, const BF16: bool>(
    tables: &Tables,
    c: __m256i,
    fifth: Fifth<'_>,
    out: &mut [u16; 32],
    normal: bool,
) {
    // SAFETY: the caller guarantees AVX2 and F16C, all the intrinsics and helpers need, and
    // with `BF16` the AVX-512 of `lookup_store16`.
    unsafe {
        if BF16 && crate::half_lut_avx512::lookup_store16::<H>(tables, c, out, normal) {
            return;
        }
        let (l, h) = match tables {
            Tables::One(t) => lookup(broadcast(split_bytes::<H, BF16>(t)), c),
            Tables::Halves([a, b]) => lookup(lanes(split_bytes::<H, BF16>(a), split_bytes::<H, BF16>(b)), c),
            Tables::Halves8([a, b]) => lookup(split_bytes8::<H, BF16>(a, b), c),
            Tables::Signed8([a, b]) => {
                // Codes 8..16 read the same low bytes and the high bytes with the sign bit
                // flipped: the rounded value of `-x` is the rounded `x` negated, NaN included.
                let x = lane_bytes::<H, BF16>(_mm256_loadu_ps(a.as_ptr()), _mm256_loadu_ps(b.as_ptr()));
                let flip = _mm256_set_epi64x(0x8080_8080_8080_8080u64 as i64, 0, 0x8080_8080_8080_8080u64 as i64, 0);
                lookup((_mm256_unpacklo_epi64(x, x), _mm256_xor_si256(_mm256_unpackhi_epi64(x, x), flip)), c)
            }
            Tables::Linear(line) => {
                return linear_store::<H, BF16>(c, fifth, *line, bytemuck::cast_mut::<[u16; 32], [H; 32]>(out));
            }
        };
        // Lane 0 holds elements 0..16 and lane 1 elements 16..32; each unpack interleaves half
        // a lane of low bytes with the matching high bytes.
        let (a, b) = (_mm256_unpacklo_epi8(l, h), _mm256_unpackhi_epi8(l, h));
        let (first, second) = out.split_at_mut(16);
        // `first` and `second` are 16 u16 (32 bytes) each: the unaligned stores stay inside.
        _mm256_storeu_si256(first.as_mut_ptr().cast(), _mm256_permute2x128_si256::<0x20>(a, b));
        _mm256_storeu_si256(second.as_mut_ptr().cast(), _mm256_permute2x128_si256::<0x31>(a, b));
    }
}

/// A [`Tables::Linear`] group: the 5-bit codes (`c` and the fifth bits) less `offset` as
/// signed bytes, widened, converted, times `scale`, the tail applied, rounded and stored as
/// `O` ([`scaled_i8x32`]), with the NaN case only where `scale` or the tail's `m` is not
/// finite (no other group can make a NaN); bf16 by `vcvtne2ps2bf16` where `BF16`.
///
/// # Safety
/// The CPU must have AVX2 and F16C, and with `BF16` AVX-512 F / VL / DQ / BF16.
#[inline(always)]
unsafe fn linear_store<O: Elem, const BF16: bool>(c: __m256i, fifth: Fifth<'_>, line: Line, out: &mut [O; 32]) {
    let Line { offset, scale, tail } = line;
    // SAFETY: the caller guarantees AVX2 and F16C, all the intrinsics and `scaled_i8x32` need.
    unsafe {
        debug_assert!(offset <= 32, "a line's offset is at most 32 (Tables::Linear)");
        let high = _mm256_and_si256(fifth_mask(fifth), _mm256_set1_epi8(16));
        // Codes below 32 less an offset of at most 32: `i8` without wrapping.
        let q = _mm256_sub_epi8(_mm256_or_si256(c, high), _mm256_set1_epi8(offset as i8));
        if BF16 && (O::DTYPE != DType::Bf16 || never_subnormal(scale) && tail.never_subnormal()) {
            // The 512-bit form, unchecked: no bf16 lane can be subnormal (an f16 scale and
            // min's lines always), as `NORMAL` asks. Called here once rather than through
            // `scaled_i8x32_with`'s builds below (with a third build for this case, q5_1's
            // f16 rows read 18 % slower on Zen 4: a larger group, no longer inlined).
            crate::scaled_avx512::scaled_i8x32::<O, true>(q, [scale; 2], [tail; 2], None, out);
        } else if !tail.finite_with(scale) {
            scaled_i8x32_with::<O, true, BF16, false>(q, [scale; 2], [tail; 2], None, out);
        } else {
            // Without `BF16` there is nothing to skip; with it, only a bf16 line whose lanes
            // may be subnormal comes here (checked per 16 lanes).
            scaled_i8x32_with::<O, false, BF16, false>(q, [scale; 2], [tail; 2], None, out);
        }
    }
}

/// One group's 32 values looked up from codes a decoder already holds in a register (bytes
/// `0..16`, elements `0..16` in the low lane), stored as `O`: the AVX2 step of
/// [`crate::half_lut::decode_row`] for formats whose codes are computed, not read (the grid
/// I-quants' magnitudes and signs, tq1_0's unpacked codes). Returns `false` with nothing
/// written for f32 output. [`Tables::Linear`](crate::half_lut::Tables::Linear) reads every
/// fifth bit as 0.
///
/// # Safety
/// The CPU must have AVX2 and F16C.
#[inline(always)]
pub unsafe fn group_from_codes<O: Elem>(tables: &Tables, codes: __m256i, out: &mut [O; 32]) -> bool {
    // SAFETY: the caller guarantees AVX2 and F16C, all the build without `BF16` needs.
    unsafe { group_from_codes_with::<O, false>(tables, codes, out, false) }
}

/// [`group_from_codes`], the bf16 tables rounded with `vcvtne2ps2bf16` where `BF16` (a
/// decoder's AVX-512 BF16 build, `crate::bf16_builds!`); with `normal` (the decoder's
/// constant: see [`crate::half_lut::TableGroups::NEVER_SUBNORMAL`]) without checking the
/// tables for subnormal entries (one would come out as zero).
///
/// # Safety
/// The CPU must have AVX2 and F16C, and with `BF16` AVX-512 F / VL / DQ / BF16; the caller's
/// `#[target_feature]` set must enable them, since this inlines into it.
#[inline(always)]
pub unsafe fn group_from_codes_with<O: Elem, const BF16: bool>(
    tables: &Tables,
    codes: __m256i,
    out: &mut [O; 32],
    normal: bool,
) -> bool {
    debug_assert!(!normal || crate::half_lut::entries_normal(tables), "a subnormal table entry: {tables:?}");
    // SAFETY: the caller guarantees AVX2 and F16C (and with `BF16` the rest the lookup
    // needs); each arm's `out` is the 32 elements of 16 bits that the lookup stores.
    unsafe {
        // No closures here: one would not take the caller's features, and every intrinsic
        // in it would become a call.
        match O::out_row(out) {
            OutRow::F32(_) => false,
            OutRow::F16(o) => {
                let Ok(o) = <&mut [f16; 32]>::try_from(o) else { return false };
                lookup_store::<f16, false>(tables, codes, Fifth::None, bytemuck::cast_mut(o), false);
                true
            }
            OutRow::Bf16(o) => {
                let Ok(o) = <&mut [bf16; 32]>::try_from(o) else { return false };
                lookup_store::<bf16, BF16>(tables, codes, Fifth::None, bytemuck::cast_mut(o), normal);
                true
            }
        }
    }
}

/// `f · v` of the 8 table values at `v`, read at run time as a decoder reads its codes (with
/// the constants in sight LLVM may fold a product, which can flip a NaN's sign: see
/// [`crate::half_lut::table`]): the entries of a [`Tables::Signed8`] or
/// [`Tables::Halves8`] from a decoder's own AVX2 code, where `table`'s closure, compiled with
/// the caller's features, would not inline into `array::map` and stay a call.
///
/// # Safety
/// Safe to call from a function compiled with these features (the decoders' AVX2 loops);
/// elsewhere the CPU must have AVX2, FMA and F16C.
#[target_feature(enable = "avx2,fma,f16c")]
#[inline]
pub fn scaled8(v: &'static [f32; 8], f: f32) -> [f32; 8] {
    let v = crate::barrier::opaque_ref(v);
    let mut out = [0f32; 8];
    // SAFETY: `v` and `out` are 8 f32 each, the 32 bytes each unaligned access reads or
    // writes.
    unsafe { _mm256_storeu_ps(out.as_mut_ptr(), _mm256_mul_ps(_mm256_set1_ps(f), _mm256_loadu_ps(v.as_ptr()))) };
    out
}

/// One table of [`split_bytes`] in both lanes: (its low bytes, its high bytes).
///
/// # Safety
/// The CPU must have AVX2.
#[inline(always)]
unsafe fn broadcast(x: __m256i) -> (__m256i, __m256i) {
    // SAFETY: the caller guarantees AVX2.
    unsafe { (_mm256_permute2x128_si256::<0x00>(x, x), _mm256_permute2x128_si256::<0x11>(x, x)) }
}

/// Two tables of [`split_bytes`], `a` in lane 0 and `b` in lane 1: (low bytes, high bytes).
///
/// # Safety
/// The CPU must have AVX2.
#[inline(always)]
unsafe fn lanes(a: __m256i, b: __m256i) -> (__m256i, __m256i) {
    // SAFETY: the caller guarantees AVX2.
    unsafe { (_mm256_permute2x128_si256::<0x20>(a, b), _mm256_permute2x128_si256::<0x31>(a, b)) }
}

/// The low and the high bytes of the table entries of the codes `c`.
///
/// # Safety
/// The CPU must have AVX2.
#[inline(always)]
unsafe fn lookup((lo, hi): (__m256i, __m256i), c: __m256i) -> (__m256i, __m256i) {
    // SAFETY: the caller guarantees AVX2.
    unsafe { (_mm256_shuffle_epi8(lo, c), _mm256_shuffle_epi8(hi, c)) }
}

/// 0xFF in the bytes of the elements whose fifth bit is set, in [`code_bytes`]'s order.
///
/// # Safety
/// The CPU must have AVX2.
#[inline(always)]
unsafe fn fifth_mask(fifth: Fifth<'_>) -> __m256i {
    // SAFETY: the caller guarantees AVX2; `q` is 32 bytes, so the unaligned load stays inside.
    unsafe {
        match fifth {
            Fifth::None => _mm256_setzero_si256(),
            Fifth::Word(w) => crate::bytemask::bytes_from_bits(w),
            Fifth::Bit(q, b) => {
                let bit = _mm256_set1_epi8((1u8 << (b & 7)) as i8);
                let v = _mm256_loadu_si256(q.as_ptr().cast());
                _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit)
            }
        }
    }
}

/// 16 table values rounded to `H`, as `[low bytes of entries 0..16 | their high bytes]`.
///
/// # Safety
/// The CPU must have AVX2 and F16C, and `t` must be 16 values.
#[inline(always)]
unsafe fn split_bytes<H: Half, const BF16: bool>(t: &[f32]) -> __m256i {
    debug_assert_eq!(t.len(), 16);
    // SAFETY: the caller guarantees AVX2, F16C and 16 values in `t`: the two unaligned 8-value
    // loads stay inside.
    unsafe {
        let x = lane_bytes::<H, BF16>(_mm256_loadu_ps(t.as_ptr()), _mm256_loadu_ps(t.as_ptr().add(8)));
        // The two lanes' low halves together, then their high halves.
        _mm256_permute4x64_epi64::<0b11_01_10_00>(x)
    }
}

/// Two 8-entry tables rounded to `H`, `a` in lane 0 and `b` in lane 1: (their low bytes,
/// their high bytes), each in the first 8 bytes of its lane (codes below 8 read only those).
///
/// # Safety
/// The CPU must have AVX2 and F16C.
#[inline(always)]
unsafe fn split_bytes8<H: Half, const BF16: bool>(a: &[f32; 8], b: &[f32; 8]) -> (__m256i, __m256i) {
    // SAFETY: the caller guarantees AVX2 and F16C; `a` and `b` are 8 f32 each, so the
    // unaligned loads stay inside.
    unsafe {
        let x = lane_bytes::<H, BF16>(_mm256_loadu_ps(a.as_ptr()), _mm256_loadu_ps(b.as_ptr()));
        (x, _mm256_unpackhi_epi64(x, x))
    }
}

/// `v0` and `v1` rounded to `H`, each in its lane as `[its 8 low bytes | its 8 high bytes]`
/// ([`words16`], its bytes split for `vpshufb`).
///
/// # Safety
/// As [`words16`].
#[inline(always)]
unsafe fn lane_bytes<H: Half, const BF16: bool>(v0: __m256, v1: __m256) -> __m256i {
    // SAFETY: the caller guarantees what `words16` needs, and AVX2.
    unsafe {
        let split = _mm256_setr_epi8(
            0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15, 0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15,
        );
        _mm256_shuffle_epi8(words16::<H, BF16>(v0, v1, false), split)
    }
}

/// `v0` and `v1` rounded to `H`, as 16 u16 in order (`v0`'s in lane 0); bf16 by
/// `vcvtne2ps2bf16` where `BF16` (the formula for a table with a subnormal entry, which that
/// instruction reads as zero; with `normal`, a constant saying no lane is subnormal, no check:
/// a subnormal lane would come out as zero).
///
/// # Safety
/// The CPU must have AVX2 and F16C, and with `BF16` AVX-512 F / VL / DQ / BF16.
#[inline(always)]
pub(crate) unsafe fn words16<H: Half, const BF16: bool>(v0: __m256, v1: __m256, normal: bool) -> __m256i {
    // SAFETY: the caller guarantees AVX2 and F16C, and with `BF16` the AVX-512 VL / DQ / BF16
    // of `vfpclassps` and `vcvtne2ps2bf16`.
    unsafe {
        if H::F16 {
            _mm256_set_m128i(
                _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(v1),
                _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(v0),
            )
        } else if BF16 {
            // The formula (NaN case included) only for the rare table with a subnormal entry,
            // inline: with a call anywhere in the group (the NaN case's, out of line) the
            // row loop keeps its vectors in memory across it (iq4_xs's bf16 rows 11.0 ->
            // 12.2 Gel/s without one, Zen 4). The check itself still costs: without it (a
            // timing experiment, wrong for subnormal tables) they read 18.
            match bf16_pair_native(v0, v1, normal) {
                Some(w) => w,
                None => bf16_pair(bf16_bits(v0), bf16_bits(v1)),
            }
        } else {
            // A table without NaN (a finite scale's) rounds without the NaN case: one compare
            // of both vectors instead of four instructions each.
            // The NaN case out of line: inlined, it doubles the table code that every group
            // of the row loop carries (with the per-group closure this loop had before its
            // sink, that size alone kept the group an out-of-line call).
            if _mm256_movemask_ps(_mm256_cmp_ps::<_CMP_UNORD_Q>(v0, v1)) != 0 {
                bf16_pair_cold(v0, v1)
            } else {
                bf16_pair(bf16_bits_not_nan(v0), bf16_bits_not_nan(v1))
            }
        }
    }
}

/// [`bf16_bits`] of `v0` and `v1`, narrowed by [`bf16_pair`]: the rare table that holds a
/// NaN (a NaN scale's), kept out of the AVX2 path's code.
///
/// # Safety
/// The CPU must have AVX2.
#[cold]
#[inline(never)]
#[target_feature(enable = "avx2")]
unsafe fn bf16_pair_cold(v0: __m256, v1: __m256) -> __m256i {
    // SAFETY: the caller guarantees AVX2, which this function enables.
    unsafe { bf16_pair(bf16_bits(v0), bf16_bits(v1)) }
}

/// The low 16 bits of the 32-bit lanes of `b0` then `b1` (high bits zero), in order, as 16
/// u16: `v0`'s in lane 0 and `v1`'s in lane 1.
///
/// # Safety
/// The CPU must have AVX2.
#[inline(always)]
unsafe fn bf16_pair(b0: __m256i, b1: __m256i) -> __m256i {
    // SAFETY: the caller guarantees AVX2.
    // `packus` interleaves the lanes: [0..4, 8..12 | 4..8, 12..16], put back in order.
    unsafe { _mm256_permute4x64_epi64::<0b11_01_10_00>(_mm256_packus_epi32(b0, b1)) }
}

/// The 32 codes as bytes, elements 0..16 in lane 0 and 16..32 in lane 1.
///
/// # Safety
/// The CPU must have AVX2.
#[inline(always)]
unsafe fn code_bytes(codes: Codes32<'_>) -> __m256i {
    // SAFETY: the caller guarantees AVX2; each load reads exactly the 16 or 32 bytes of its
    // array.
    unsafe {
        let m = _mm256_set1_epi8(0x0F);
        let m128 = _mm_set1_epi8(0x0F);
        match codes {
            Codes32::SplitHalf(q) | Codes32::SplitHalves(q) => {
                let x = _mm_loadu_si128(q.as_ptr().cast());
                let (lo, hi) = (_mm_and_si128(x, m128), _mm_and_si128(_mm_srli_epi16::<4>(x), m128));
                if matches!(codes, Codes32::SplitHalf(_)) {
                    _mm256_set_m128i(hi, lo)
                } else {
                    _mm256_set_m128i(_mm_unpackhi_epi64(lo, hi), _mm_unpacklo_epi64(lo, hi))
                }
            }
            Codes32::Low(q) => _mm256_and_si256(_mm256_loadu_si256(q.as_ptr().cast()), m),
            Codes32::High(q) => _mm256_and_si256(_mm256_srli_epi16::<4>(_mm256_loadu_si256(q.as_ptr().cast())), m),
            Codes32::Field { q, shift, width, high } => {
                // 16-bit shifts: the bits they move across bytes fall outside the masks.
                let count = |n: u32| _mm_cvtsi32_si128((n & 7) as i32);
                let v = _mm256_srl_epi16(_mm256_loadu_si256(q.as_ptr().cast()), count(shift));
                let low = _mm256_and_si256(v, _mm256_set1_epi8(((1u8 << (width & 3)) - 1) as i8));
                let Some((h, b)) = high else { return low };
                let h = _mm256_srl_epi16(_mm256_loadu_si256(h.as_ptr().cast()), count(b));
                let top = _mm256_and_si256(h, _mm256_set1_epi8(1));
                _mm256_or_si256(low, _mm256_sll_epi16(top, count(width)))
            }
            Codes32::Bits(q) => _mm256_and_si256(crate::bytemask::bytes_from_bits(q), _mm256_set1_epi8(1)),
            Codes32::Pairs(q) => {
                // Byte `i` of each lane's half takes source byte `i / 4` (elements 0..16 from
                // bytes 0..4, 16..32 from bytes 4..8), then the field at `2·(i % 4)`: the byte
                // shifted by 0, 2, 4 or 6 (16-bit shifts; the mask drops what crosses bytes),
                // chosen by the position's blend masks.
                let x = _mm256_shuffle_epi8(
                    _mm256_set1_epi64x(i64::from_le_bytes(q)),
                    _mm256_setr_epi8(
                        0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 6, 6, 6, 6, 7, 7, 7, 7,
                    ),
                );
                let v = _mm256_blendv_epi8(x, _mm256_srli_epi16::<2>(x), _mm256_set1_epi32(0x0000_FF00));
                let v = _mm256_blendv_epi8(v, _mm256_srli_epi16::<4>(x), _mm256_set1_epi32(0x00FF_0000));
                let v = _mm256_blendv_epi8(v, _mm256_srli_epi16::<6>(x), _mm256_set1_epi32(0xFF00_0000u32 as i32));
                _mm256_and_si256(v, _mm256_set1_epi8(3))
            }
        }
    }
}
