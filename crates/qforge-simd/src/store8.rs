//! AVX2 (x86-64): f32 lanes stored as a dequantizer's output element type — f32 as they are,
//! f16 with `vcvtps2ph`, bf16 with the round-to-nearest-even formula on the lanes
//! (`qforge_core::round::f32_to_bf16_bits`, NaN kept NaN) — so that a decoder that computes
//! its values in f32 registers writes every output type in the same pass, with no f32 row to
//! convert afterwards: [`store16`] (16 lanes), and [`scaled_i8x32`] (32 signed bytes times
//! per-16 factors, the one-pass decoders' common step). The same bits as `O::from_f32` of each
//! lane (the tests below and every caller's level tests hold it).
#![allow(unsafe_code)]

use std::arch::x86_64::*;

use crate::Tail;
use qforge_core::{Elem, OutRow};

/// Stores the 16 lanes of `v0` then `v1` into `dst` as `O`, each `O::from_f32` of its lane:
/// f32 as they are; f16 with `vcvtps2ph`; bf16 rounded to nearest even on the lanes, a NaN
/// kept NaN where `NAN` (the caller that knows no lane is NaN passes `false`, which skips 4
/// of the rounding's 9 instructions; a NaN lane would then come out as some other value,
/// wrong but never undefined). f16 and bf16 go out as one 32-byte store.
///
/// # Safety
/// The CPU must have AVX2 and F16C.
#[inline(always)]
pub unsafe fn store16<O: Elem, const NAN: bool>(v0: __m256, v1: __m256, dst: &mut [O; 16]) {
    // SAFETY: the caller guarantees AVX2 and F16C, all `store16_with` needs without `BF16`.
    unsafe { store16_with::<O, NAN, false>(v0, v1, dst) }
}

/// [`store16`], bf16 with `vcvtne2ps2bf16` where `BF16` (the same bits: a vector holding a
/// subnormal lane, which that instruction reads as zero, takes the formula instead).
///
/// # Safety
/// The CPU must have AVX2 and F16C, and with `BF16` AVX-512 F / VL / DQ / BF16 too
/// ([`qforge_core::cpu::bf16_native`]); the caller's `#[target_feature]` set must enable them,
/// since this inlines into it.
#[inline(always)]
pub unsafe fn store16_with<O: Elem, const NAN: bool, const BF16: bool>(v0: __m256, v1: __m256, dst: &mut [O; 16]) {
    // SAFETY: the caller guarantees what `store16_lanes` needs.
    unsafe { store16_lanes::<O, NAN, BF16, false>(v0, v1, dst) }
}

/// [`store16_with`]; `NORMAL`: the caller knows that no lane is subnormal, so bf16 with
/// `BF16` has no check for one and no formula to fall back to ([`scaled_i8x32_with`]).
///
/// # Safety
/// As [`store16_with`]; with `NORMAL`, no lane of `v0` / `v1` may be subnormal (else it may
/// come out as zero: wrong, never undefined).
#[inline(always)]
pub unsafe fn store16_lanes<O: Elem, const NAN: bool, const BF16: bool, const NORMAL: bool>(
    v0: __m256,
    v1: __m256,
    dst: &mut [O; 16],
) {
    // The match is on the type, so it folds away once inlined.
    match O::out_row(dst) {
        OutRow::F32(o) => {
            if let Ok(o) = <&mut [f32; 16]>::try_from(o) {
                // SAFETY: `o` is 16 f32, the 64 bytes the two unaligned stores write; the
                // caller guarantees AVX.
                unsafe {
                    _mm256_storeu_ps(o.as_mut_ptr(), v0);
                    _mm256_storeu_ps(o.as_mut_ptr().add(8), v1);
                }
            }
        }
        OutRow::F16(o) => {
            if let Ok(o) = <&mut [qforge_core::f16; 16]>::try_from(o) {
                // SAFETY: `o` is 16 f16, the 32 bytes the unaligned store writes; the caller
                // guarantees AVX2 and F16C.
                unsafe {
                    let (h0, h1) = (
                        _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(v0),
                        _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(v1),
                    );
                    _mm256_storeu_si256(o.as_mut_ptr().cast(), _mm256_set_m128i(h1, h0));
                }
            }
        }
        OutRow::Bf16(o) => {
            if let Ok(o) = <&mut [qforge_core::bf16; 16]>::try_from(o) {
                // SAFETY: `o` is 16 bf16, the 32 bytes the unaligned store writes; the caller
                // guarantees AVX2, and with `BF16` the AVX-512 VL / DQ / BF16 of
                // `vfpclassps` and `vcvtne2ps2bf16`.
                unsafe {
                    if let Some(h) = if BF16 { bf16_pair_native(v0, v1, NORMAL) } else { None } {
                        _mm256_storeu_si256(o.as_mut_ptr().cast(), h);
                        return;
                    }
                    let (b0, b1) = if NAN {
                        (bf16_bits(v0), bf16_bits(v1))
                    } else {
                        (bf16_bits_not_nan(v0), bf16_bits_not_nan(v1))
                    };
                    // `packus` interleaves the lanes: [v0 0..4, v1 0..4 | v0 4..8, v1 4..8].
                    let packed = _mm256_packus_epi32(b0, b1);
                    _mm256_storeu_si256(o.as_mut_ptr().cast(), _mm256_permute4x64_epi64::<0b11_01_10_00>(packed));
                }
            }
        }
    }
}

/// The 32 signed bytes of `v` (values 0..16 in the low lane) as f32, the first 16 times
/// `factors[0]` and the others times `factors[1]` (`factor · v`, one rounding), less
/// `offsets[h]` where given (`factor · v − offset`, the K-quants' mins: two roundings, as
/// ggml's `d1 · q − m1`), the sign bit flipped where the byte of `negate` is negative (ggml's
/// `· (sign ? -1.f : 1.f)` of the grid I-quants, which flips a NaN's sign too), stored into
/// `dst` as `O` by [`store16`] (`NAN` false: the caller knows no value is NaN).
///
/// # Safety
/// The CPU must have AVX2 and F16C.
#[inline(always)]
pub unsafe fn scaled_i8x32<O: Elem, const NAN: bool>(
    v: __m256i,
    factors: [f32; 2],
    tails: [Tail; 2],
    negate: Option<__m256i>,
    dst: &mut [O; 32],
) {
    // SAFETY: the caller guarantees AVX2 and F16C, all `scaled_i8x32_with` needs without `BF16`
    // and `NORMAL`.
    unsafe { scaled_i8x32_with::<O, NAN, false, false>(v, factors, tails, negate, dst) }
}

/// [`scaled_i8x32`] stored by [`store16_with`]`::<O, NAN, BF16>`; with `NORMAL` the caller
/// knows every factor and tail value passes [`never_subnormal`] (so that no lane is
/// subnormal), and bf16 with `BF16` takes `vcvtne2ps2bf16` without a check per 16 lanes (on
/// the Xeon of docs/matmul.md the checked loop made q6_k's bf16 dequant 0.58× of the
/// unchecked one). A decoder decides `NORMAL` once per block or group (the K-quants: `d`,
/// `dmin` from f16 times integer scales and mins) and runs one build or the other.
///
/// # Safety
/// As [`store16_with`]; with `NORMAL`, every `factors[h]` and tail value must pass
/// [`never_subnormal`] (else a subnormal lane may come out as zero: wrong, never undefined).
#[inline(always)]
pub unsafe fn scaled_i8x32_with<O: Elem, const NAN: bool, const BF16: bool, const NORMAL: bool>(
    v: __m256i,
    factors: [f32; 2],
    tails: [Tail; 2],
    negate: Option<__m256i>,
    dst: &mut [O; 32],
) {
    debug_assert!(
        !NORMAL || factors.iter().all(|f| never_subnormal(*f)) && tails.iter().all(|t| t.never_subnormal()),
        "scaled_i8x32_with::<NORMAL>: a factor or tail may make a subnormal lane"
    );
    // SAFETY: the caller guarantees AVX2 and F16C, all the intrinsics here need, and with
    // `BF16` the AVX-512 features of `scaled_avx512` (and `NORMAL`'s promise, as it asks).
    unsafe {
        if BF16 && crate::scaled_avx512::scaled_i8x32::<O, NORMAL>(v, factors, tails, negate, dst) {
            return;
        }
        let (sixteens, _) = dst.as_chunks_mut::<16>();
        for (h, o) in sixteens.iter_mut().enumerate() {
            let f = _mm256_set1_ps(factors[h]);
            let (mut x0, mut x1) = (scaled_quarter(v, f, negate, 2 * h), scaled_quarter(v, f, negate, 2 * h + 1));
            match tails[h] {
                Tail::None => {}
                Tail::Add(m) => {
                    let m = _mm256_set1_ps(m);
                    (x0, x1) = (_mm256_add_ps(x0, m), _mm256_add_ps(x1, m));
                }
                Tail::Sub(m) => {
                    let m = _mm256_set1_ps(m);
                    (x0, x1) = (_mm256_sub_ps(x0, m), _mm256_sub_ps(x1, m));
                }
            }
            store16_lanes::<O, NAN, BF16, NORMAL>(x0, x1, o);
        }
    }
}

/// Whether every `x · c` (`c` a nonzero integer), and every difference or sum of two such
/// values, is zero or a normal f32: `x` is zero, or at least 2^-100 in magnitude (infinite
/// included; NaN is not). Then `|x · c| ≥ 2^-100` (rounding is monotonic and 2^-100 is a
/// float), and two values that are each 0 or at least 2^-100 are multiples of 2^-123 (the
/// spacing of floats there), so is their exact difference, which is therefore zero or at
/// least 2^-123, above the largest subnormal (below 2^-126); its rounding too.
#[inline(always)]
pub fn never_subnormal(x: f32) -> bool {
    x == 0.0 || x.abs() >= f32::from_bits(0x0d80_0000)
}

impl Tail {
    /// [`never_subnormal`] of the added or subtracted term (true without one).
    #[inline(always)]
    pub(crate) fn never_subnormal(self) -> bool {
        match self {
            Tail::None => true,
            Tail::Add(m) | Tail::Sub(m) => never_subnormal(m),
        }
    }
}

/// Bytes `8k .. 8k + 8` of `v` as f32 times `f`, negated where those of `negate` are.
///
/// # Safety
/// The CPU must have AVX2.
#[inline(always)]
unsafe fn scaled_quarter(v: __m256i, f: __m256, negate: Option<__m256i>, k: usize) -> __m256 {
    // SAFETY: the caller guarantees AVX2.
    unsafe {
        let x = _mm256_mul_ps(f, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(quarter(v, k))));
        match negate {
            // The bytes widened to 32 bits keep their sign bit.
            Some(n) => {
                let sign = _mm256_and_si256(_mm256_cvtepi8_epi32(quarter(n, k)), _mm256_set1_epi32(i32::MIN));
                _mm256_xor_ps(x, _mm256_castsi256_ps(sign))
            }
            None => x,
        }
    }
}

/// Bytes `8k .. 8k + 8` of `x` in the low 8 bytes (`k < 4`). (A function, not a closure: a
/// closure does not take its caller's target features and would stay an out-of-line call.)
///
/// # Safety
/// The CPU must have AVX2.
#[inline(always)]
unsafe fn quarter(x: __m256i, k: usize) -> __m128i {
    // SAFETY: the caller guarantees AVX2.
    unsafe {
        let half = if k < 2 { _mm256_castsi256_si128(x) } else { _mm256_extracti128_si256::<1>(x) };
        if k.is_multiple_of(2) { half } else { _mm_unpackhi_epi64(half, half) }
    }
}

/// Defines a decoder's two builds of its row loop `body` (an `unsafe fn` with the generic
/// parameters `generics` then `const BF16: bool`, and the arguments `args`) and the function
/// that picks one: `avx2`, compiled for AVX2, FMA and F16C, runs it with `BF16 = false`;
/// `bf16`, compiled for AVX-512 F / BW / VL / DQ / BF16 besides, with `BF16 = true`; `pick`
/// (taking the [`crate::Avx2`] proof first; a visibility may precede its name) runs `bf16`
/// where [`qforge_core::cpu::bf16_native`] says so and the optional `wide` (a `bool`
/// expression over `generics`) holds, else `avx2`. `wide` keeps the AVX2 build for the
/// output types where the other measured slower (fp8's f32 / f16 rows, whose plain-Rust
/// parts LLVM then widens to 512 bits: 0.69x on Zen 4). With `BF16`, [`scaled_i8x32_with`]
/// and `half_lut`'s lookups work on 512-bit registers (f32 and f16 rows gain from that too:
/// one `vpermw` per 32 codes, one `vcvtps2ph` per 16 values) and bf16 rounds with
/// `vcvtne2ps2bf16`.
///
/// ```text
/// qforge_simd::bf16_builds! {
///     pick: blocks_with, avx2: blocks_avx2, bf16: blocks_bf16, body: blocks,
///     generics: [F: GridValues, O: Elem], args: (blocks: &[F::Block], out: &mut [O]),
/// }
/// ```
#[macro_export]
macro_rules! bf16_builds {
    (
        pick: $pv:vis $pick:ident, avx2: $avx2:ident, bf16: $bf16:ident, body: $body:ident, $(wide: $w:expr,)?
        generics: [$($g:ident: $b:path),* $(,)?], args: ($($a:ident: $t:ty),* $(,)?) $(,)?
    ) => {
        /// The row loop's AVX-512 BF16 build where the CPU has those features
        /// (`qforge_core::cpu::bf16_native`), else its AVX2 build.
        #[inline]
        $pv fn $pick<$($g: $b),*>(_: $crate::Avx2, $($a: $t),*) {
            // SAFETY: the `Avx2` proof exists only where the CPU has AVX2, FMA and F16C,
            // everything the AVX2 build enables; `bf16_native` says true only where it has
            // AVX-512 F / BW / VL / DQ / BF16 besides, the rest of what the bf16 build enables.
            unsafe {
                if $crate::__core::cpu::bf16_native() $(&& $w)? {
                    self::$bf16::<$($g),*>($($a),*)
                } else {
                    self::$avx2::<$($g),*>($($a),*)
                }
            }
        }

        /// The row loop compiled for AVX2, FMA and F16C (bf16 by the AVX2 formula).
        #[target_feature(enable = "avx2,fma,f16c")]
        fn $avx2<$($g: $b),*>($($a: $t),*) {
            // SAFETY: this function's features are all the row loop needs without `BF16`.
            unsafe { self::$body::<$($g,)* false>($($a),*) }
        }

        /// The row loop on 512-bit registers, bf16 rounded by `vcvtne2ps2bf16`: only where
        /// the CPU has AVX-512 F / BW / VL / DQ / BF16 (`qforge_core::cpu::bf16_native`).
        #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")]
        fn $bf16<$($g: $b),*>($($a: $t),*) {
            // SAFETY: this function's features are all the row loop needs with `BF16`.
            unsafe { self::$body::<$($g,)* true>($($a),*) }
        }
    };
}

/// `qforge_core::round::f32_to_bf16_bits` of the 16 lanes of `v0` then `v1` as 16 `u16`
/// (`v0`'s in the low 128-bit lane) by one `vcvtne2ps2bf16`, or `None` where a lane is
/// subnormal (the instruction reads it as zero; the caller takes the formula). NaN lanes come
/// out as the formula's (its top bits, quiet bit set). `normal`: the caller knows no lane is
/// subnormal, and the check is skipped.
///
/// # Safety
/// The CPU must have AVX-512 F / VL / DQ / BF16, and the caller's `#[target_feature]` set
/// must enable them. With `normal`, no lane may be subnormal (else it comes out as zero:
/// wrong, never undefined).
#[inline(always)]
pub(crate) unsafe fn bf16_pair_native(v0: __m256, v1: __m256, normal: bool) -> Option<__m256i> {
    /// `vfpclassps` category: subnormal.
    const SUBNORMAL: i32 = 0x20;
    // SAFETY: the caller guarantees AVX-512 VL / DQ / BF16, all the three intrinsics need;
    // `__m256bh` and `__m256i` are both 32 bytes of plain bits.
    unsafe {
        if !normal && _mm256_fpclass_ps_mask::<SUBNORMAL>(v0) | _mm256_fpclass_ps_mask::<SUBNORMAL>(v1) != 0 {
            return None;
        }
        // The second operand fills the low half.
        Some(std::mem::transmute::<__m256bh, __m256i>(_mm256_cvtne2ps_pbh(v1, v0)))
    }
}

/// `qforge_core::round::f32_to_bf16_bits` of 8 lanes that are not NaN (round to nearest
/// even: add `0x7fff` and the lowest kept bit, keep the top 16 bits; infinities stay
/// infinite, values that round past the largest finite become infinite), in the low 16 bits
/// of each 32-bit lane.
///
/// # Safety
/// The CPU must have AVX2.
#[inline(always)]
pub(crate) unsafe fn bf16_bits_not_nan(v: __m256) -> __m256i {
    // SAFETY: the caller guarantees AVX2.
    unsafe {
        let x = _mm256_castps_si256(v);
        let odd = _mm256_and_si256(_mm256_srli_epi32::<16>(x), _mm256_set1_epi32(1));
        _mm256_srli_epi32::<16>(_mm256_add_epi32(x, _mm256_add_epi32(_mm256_set1_epi32(0x7fff), odd)))
    }
}

/// `qforge_core::round::f32_to_bf16_bits` of 8 lanes, in the low 16 bits of each 32-bit lane
/// (the high 16 bits zero, so `vpackusdw` narrows them unchanged): [`bf16_bits_not_nan`], a
/// NaN lane replaced by its top 16 bits with the quiet bit set.
///
/// # Safety
/// The CPU must have AVX2.
#[inline(always)]
pub(crate) unsafe fn bf16_bits(v: __m256) -> __m256i {
    // SAFETY: the caller guarantees AVX2.
    unsafe {
        let x = _mm256_castps_si256(v);
        let rounded = bf16_bits_not_nan(v);
        let nan = _mm256_or_si256(_mm256_srli_epi32::<16>(x), _mm256_set1_epi32(0x0040));
        let magnitude = _mm256_and_si256(x, _mm256_set1_epi32(0x7fff_ffff));
        let is_nan = _mm256_cmpgt_epi32(magnitude, _mm256_set1_epi32(0x7f80_0000));
        _mm256_blendv_epi8(rounded, nan, is_nan)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use qforge_core::{bf16, f16};

    /// Every lane of many vectors (specials, ties, subnormals, random bits) against
    /// `Elem::from_f32`, bit for bit.
    #[test]
    fn stores_round_like_from_f32() {
        // The CPU's own features, not `cpu::avx2()`: a `QFORGE_CPU` cap must not turn this
        // test into one that checks nothing.
        assert!(
            is_x86_feature_detected!("avx2") && is_x86_feature_detected!("f16c"),
            "the x86-64 tests need a CPU with AVX2 and F16C"
        );
        let mut rng = qforge_core::rand::Rng::new(7);
        let mut values = vec![
            0.0f32,
            -0.0,
            1.0,
            -1.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::NAN,
            -f32::NAN,
            f32::from_bits(0x7f80_0001),
            f32::from_bits(0xff80_0001),
            f32::from_bits(0x7fff_ffff),
            f32::MAX,
            f32::MIN_POSITIVE,
            f32::from_bits(1),
            65504.0,
            65520.0,
            1.0 + f32::EPSILON,
            f32::from_bits(0x3f80_8000),
            f32::from_bits(0x3f81_8000),
            f32::from_bits(0x3380_0000),
        ];
        values.extend((0..8000).map(|_| f32::from_bits(rng.next_u64() as u32)));
        values.resize(values.len().next_multiple_of(8), 0.5);
        let mut native = 0;
        for x in values.as_chunks::<8>().0 {
            // SAFETY: AVX2 and F16C checked above; `x` is 8 f32, the 32 bytes loaded.
            let w = unsafe {
                let v = _mm256_loadu_ps(x.as_ptr());
                [v, _mm256_permute_ps::<0b00_01_10_11>(v)]
            };
            let (mut a, mut b, mut c) = ([0f32; 16], [f16::ZERO; 16], [bf16::ZERO; 16]);
            let (mut b2, mut c2) = ([f16::ZERO; 16], [bf16::ZERO; 16]);
            // SAFETY: as above.
            unsafe {
                store16::<f32, true>(w[0], w[1], &mut a);
                store16::<f16, true>(w[0], w[1], &mut b);
                store16::<bf16, true>(w[0], w[1], &mut c);
                store16::<f16, false>(w[0], w[1], &mut b2);
                store16::<bf16, false>(w[0], w[1], &mut c2);
            }
            if qforge_core::cpu::bf16_native() {
                let (mut c3, mut c4) = ([bf16::ZERO; 16], [bf16::ZERO; 16]);
                // SAFETY: `bf16_native` says the CPU has AVX-512 F / VL / DQ / BF16 besides.
                unsafe { native_bf16(w, &mut c3, &mut c4) };
                for i in 0..16 {
                    assert_eq!(c3[i].to_bits(), c[i].to_bits(), "native bf16 of {:#x}", want_bits(x, i));
                    if !f32::from_bits(want_bits(x, i)).is_nan() {
                        assert_eq!(c4[i].to_bits(), c[i].to_bits(), "native bf16 (not NaN) of {:#x}", want_bits(x, i));
                    }
                }
                native += 1;
            }
            // Lanes 0..8 are `x`, 8..16 `x` in reverse order within each 128-bit half.
            let want: Vec<f32> = x.iter().copied().chain([3, 2, 1, 0, 7, 6, 5, 4].map(|i| x[i])).collect();
            for (i, &x) in want.iter().enumerate() {
                assert_eq!(a[i].to_bits(), x.to_bits());
                assert_eq!(b[i].to_bits(), <f16 as Elem>::from_f32(x).to_bits(), "f16 of {:#x}", x.to_bits());
                assert_eq!(c[i].to_bits(), <bf16 as Elem>::from_f32(x).to_bits(), "bf16 of {:#x}", x.to_bits());
                assert_eq!(b2[i].to_bits(), b[i].to_bits());
                if !x.is_nan() {
                    assert_eq!(c2[i].to_bits(), c[i].to_bits(), "bf16 (not NaN) of {:#x}", x.to_bits());
                }
            }
        }
        // The native build ran wherever this CPU has it (every chunk), else nowhere.
        assert_eq!(native > 0, qforge_core::cpu::bf16_native());
    }

    /// Lane `i` of the two vectors the test stores (`x`, then `x` reversed in each half).
    fn want_bits(x: &[f32; 8], i: usize) -> u32 {
        x[if i < 8 { i } else { [3, 2, 1, 0, 7, 6, 5, 4][i - 8] }].to_bits()
    }

    /// `store16_with::<bf16, NAN, true>` of `w`, with and without the NaN case.
    ///
    /// # Safety
    /// The CPU must have AVX2, F16C and AVX-512 F / VL / DQ / BF16.
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")]
    unsafe fn native_bf16(w: [__m256; 2], nan: &mut [bf16; 16], not_nan: &mut [bf16; 16]) {
        // SAFETY: this function's features are all `store16_with` needs with `BF16`.
        unsafe {
            store16_with::<bf16, true, true>(w[0], w[1], nan);
            store16_with::<bf16, false, true>(w[0], w[1], not_nan);
        }
    }
    /// `scaled_i8x32_with` for every kind of factor and tail — zero, subnormal products
    /// (which must take the checked path), the `never_subnormal` bound and just below it,
    /// normal, huge, infinite, NaN — against `Tail::apply(factor · c)` rounded by
    /// `Elem::from_f32`, bit for bit, with the AVX2 formula and (where the CPU has AVX-512
    /// BF16) `vcvtne2ps2bf16`.
    #[test]
    fn scaled_bytes_round_like_from_f32_at_every_scale() {
        assert!(is_x86_feature_detected!("avx2") && is_x86_feature_detected!("f16c"), "needs AVX2 and F16C");
        let mut rng = qforge_core::rand::Rng::new(11);
        let bound = f32::from_bits(0x0d80_0000);
        let mut scales = vec![0.0, -0.0, 1e-45, 1e-40, 2e-38, bound, -bound, bound / 2.0, 1e-30, 0.37, -3.5, 6e37];
        scales.extend([f32::INFINITY, f32::NAN, f32::MIN_POSITIVE, f32::MIN_POSITIVE * 64.0]);
        scales.extend((0..40).map(|_| f32::from_bits(rng.next_u64() as u32)));
        let mut native = 0;
        for (i, &f0) in scales.iter().enumerate() {
            let f1 = scales[(i * 7 + 3) % scales.len()];
            let t = scales[(i * 5 + 1) % scales.len()];
            for tails in [[Tail::None, Tail::Sub(t)], [Tail::Add(t), Tail::None], [Tail::Sub(f0), Tail::Add(-f1)]] {
                let codes: [i8; 32] =
                    std::array::from_fn(|j| if j < 4 { [-128, 127, 1, -1][j] } else { rng.next_u64() as i8 });
                let want: Vec<u16> = (0..32)
                    .map(|j| {
                        let h = j / 16;
                        let x = tails[h].apply([f0, f1][h] * f32::from(codes[j]));
                        <bf16 as Elem>::from_f32(x).to_bits()
                    })
                    .collect();
                let (mut a, mut b) = ([bf16::ZERO; 32], [bf16::ZERO; 32]);
                // SAFETY: AVX2 and F16C checked above; the load reads the 32 bytes of `codes`.
                let v = unsafe { _mm256_loadu_si256(codes.as_ptr().cast()) };
                // SAFETY: as above.
                unsafe { scaled_i8x32_with::<bf16, true, false, false>(v, [f0, f1], tails, None, &mut a) };
                let got: Vec<u16> = a.iter().map(|x| x.to_bits()).collect();
                assert_eq!(got, want, "formula, factors {f0:e} {f1:e}, tails {tails:?}");
                if qforge_core::cpu::bf16_native() {
                    let normal =
                        [f0, f1].iter().all(|f| never_subnormal(*f)) && tails.iter().all(|t| t.never_subnormal());
                    // SAFETY: `bf16_native` says the CPU has AVX-512 F / VL / DQ / BF16 besides;
                    // `normal` is what `native_scaled` asks of it.
                    unsafe { native_scaled(v, [f0, f1], tails, normal, &mut b) };
                    let got: Vec<u16> = b.iter().map(|x| x.to_bits()).collect();
                    assert_eq!(got, want, "vcvtne2ps2bf16, factors {f0:e} {f1:e}, tails {tails:?}");
                    native += 1;
                }
            }
        }
        assert_eq!(native > 0, qforge_core::cpu::bf16_native());
    }

    /// The bound `never_subnormal` relies on, on random operands: `x · c − t` (and `+ t`) is
    /// zero or normal whenever `x` and `t` pass it.
    #[test]
    fn products_of_never_subnormal_factors_are_never_subnormal() {
        let mut rng = qforge_core::rand::Rng::new(5);
        let mut checked = 0;
        while checked < 200_000 {
            // Exponents near the bound, where it matters.
            let near = |r: u64| f32::from_bits((r as u32 & 0x807f_ffff) | ((90 + (r >> 40) % 30) as u32) << 23);
            let (x, t) = (near(rng.next_u64()), near(rng.next_u64()));
            if !(never_subnormal(x) && never_subnormal(t)) {
                continue;
            }
            let c = f32::from(rng.next_u64() as i8);
            for v in [x * c - t, x * c + t, x * c] {
                assert!(!v.is_subnormal(), "{x:e} * {c} -/+ {t:e} = {v:e}");
            }
            checked += 1;
        }
        assert!(!never_subnormal(f32::from_bits(0x0d7f_ffff)) && never_subnormal(f32::from_bits(0x0d80_0000)));
    }

    /// `scaled_i8x32_with::<bf16, true, true, NORMAL>`, `NORMAL` = `normal`.
    ///
    /// # Safety
    /// The CPU must have AVX2, F16C and AVX-512 F / VL / DQ / BF16.
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")]
    unsafe fn native_scaled(v: __m256i, factors: [f32; 2], tails: [Tail; 2], normal: bool, out: &mut [bf16; 32]) {
        // SAFETY: this function's features are all `scaled_i8x32_with` needs with `BF16`, and
        // `normal` says the factors pass `never_subnormal`.
        unsafe {
            if normal {
                scaled_i8x32_with::<bf16, true, true, true>(v, factors, tails, None, out)
            } else {
                scaled_i8x32_with::<bf16, true, true, false>(v, factors, tails, None, out)
            }
        }
    }
}
