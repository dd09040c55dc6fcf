//! qforge-simd: the CPU dot kernels the format families share, so that each exists once.
//!
//! * [`q8`]: the dot of any weight block format with q8_0 / q8_1 activation blocks (ggml's
//!   `vec_dot_type` of the legacy formats, iq4_nl, mxfp4, nvfp4, q1_0 and q2_0). A format
//!   describes how its 32-element units unpack ([`q8::Q8Weight`]: codes, values, scales);
//!   the portable reference and the AVX2 kernel (chosen at run time) are written once over
//!   that description and give the same bits.
//! * [`rows`]: running a kernel over any number of activation rows, up to
//!   [`rows::MAX_ROWS`] per pass over the weight row, with a const-generic row count.
//! * [`planes`]: codes of 8 weight rows interleaved in bit planes, the code layout of the
//!   packed (row-interleaved) weight layouts, and their AVX2 extraction.
//! * [`half_lut`]: f16 / bf16 rows of the 1- to 5-bit-coded formats by table lookup, with no f32
//!   pass (portable reference, AVX2, and `vpermw` lookups where the CPU has AVX-512 BF16:
//!   `half_lut_avx512`).
//! * [`lut`]: 16-entry table lookups of packed nibbles, branch-free code LLVM vectorizes.
//! * `bytemask` (x86-64): AVX2 byte masks from packed bits (one bit per element spread over
//!   32 bytes), shared by the kernels here and the grid I-quants' signs in `qforge-iq`.
//! * [`i8_groups`]: f32 / f16 / bf16 rows of the formats whose values are signed bytes times
//!   a factor per 16 elements (q8_0, q8_k), in one pass (portable reference + AVX2).
//! * `store8` (x86-64): 8 f32 lanes stored as f32, f16 or bf16 in the decoder's own pass
//!   (the grid I-quants' dequant), 16 at a time in the decoders' AVX-512 builds
//!   (`scaled_avx512`; [`bf16_builds!`] makes the two builds of a row loop).
//! * `totals` (x86-64): exact totals of two blocks' `i32` lanes at once, for the kernels that
//!   sum one integer per block.
//! * [`barrier`]: optimization barriers for scalar code feeding the SIMD kernels.
//! * `vnni` (x86-64): the 256-bit VNNI dot products in their VEX (AVX-VNNI) and EVEX
//!   (AVX-512 VL) encodings, over which the AVX2 kernel bodies are compiled a second and third
//!   time for [`qforge_core::cpu::Level::AvxVnni`], and the token `vnni::VnniYmm`.
//! * [`Avx2`]: the proof that this CPU runs the AVX2 kernels (AVX2, FMA, F16C), which every
//!   family's `#[target_feature]` code takes before it is called; [`Vnni`] the same for the
//!   AVX-512 VNNI kernels ([`qforge_core::cpu::Level::Avx512Vnni`]).
//!
//! `unsafe` lives only in the x86-64 kernel modules (`q8/avx2.rs`, `planes_avx2.rs`,
//! `half_lut_avx2.rs`, `half_lut_avx512.rs`, `scaled_avx512.rs`, `store8.rs`, `totals.rs`,
//! `vnni.rs`, `i8_groups.rs`' AVX2 module), the empty `asm!` of [`barrier`], `bytemask`
//! (the AVX-512 form of its byte select) and [`lut::pick_i16_control`]'s load, each block with
//! its `SAFETY` comment.
#![deny(unsafe_code)]

pub mod barrier;

#[doc(hidden)]
pub use qforge_core as __core;

/// `impl NativeDot for $fmt` with activation format `$act` on the shared q8 kernel
/// ([`q8::vec_dot`], [`q8::vec_dot_rows`], [`q8::vec_dot_weight_rows`]): every entry forwarded,
/// so that no format on this kernel can leave one to the trait's slower default (q1_0 / q2_0
/// once ran their mat-vec row by row because `vec_dot_weight_rows` was not forwarded).
/// `$fmt`'s block must implement [`q8::Q8Weight`] and `$act`'s [`q8::Q8Act`].
#[macro_export]
macro_rules! q8_native_dot {
    ($($fmt:ty => $act:ty),* $(,)?) => {$(
        impl $crate::__core::NativeDot for $fmt {
            type Act = $act;

            fn vec_dot(
                w: &[<Self as $crate::__core::BlockFormat>::Block],
                a: &[<$act as $crate::__core::BlockFormat>::Block],
            ) -> f32 {
                $crate::q8::vec_dot(w, a)
            }

            fn vec_dot_rows(
                w: &[<Self as $crate::__core::BlockFormat>::Block],
                a: &[&[<$act as $crate::__core::BlockFormat>::Block]],
                out: &mut [f32],
            ) {
                $crate::q8::vec_dot_rows(w, a, out)
            }

            fn vec_dot_weight_rows(
                w: &[<Self as $crate::__core::BlockFormat>::Block],
                a: &[<$act as $crate::__core::BlockFormat>::Block],
                out: &mut [f32],
            ) {
                $crate::q8::vec_dot_weight_rows(w, a, out)
            }

            fn vec_dot_tile(
                w: &[<Self as $crate::__core::BlockFormat>::Block],
                n: usize,
                a: &[&[<$act as $crate::__core::BlockFormat>::Block]],
                out: &mut [f32],
                stride: usize,
            ) -> bool {
                $crate::q8::vec_dot_tile(w, n, a, out, stride)
            }

            const PACKING: Option<$crate::__core::Packing> =
                if $crate::q8::packed::packable::<<Self as $crate::__core::BlockFormat>::Block>() {
                    Some($crate::__core::Packing {
                        rows: $crate::planes::ROWS,
                        block_bytes: $crate::q8::packed::Layout::of::<<Self as $crate::__core::BlockFormat>::Block>().size,
                    })
                } else {
                    None
                };

            fn pack(w: &[<Self as $crate::__core::BlockFormat>::Block], rows: usize, n: usize) -> Vec<u8> {
                $crate::q8::packed::pack(w, rows, n)
            }

            fn packed_dot(
                p: &[u8],
                n: usize,
                a: &[<$act as $crate::__core::BlockFormat>::Block],
                out: &mut [f32],
            ) -> bool {
                if !$crate::q8::packed::packable::<<Self as $crate::__core::BlockFormat>::Block>() {
                    return false;
                }
                $crate::q8::packed::dot_groups::<<Self as $crate::__core::BlockFormat>::Block, _>(p, n, a, out);
                true
            }

            fn packed_dot_rows(
                p: &[u8],
                n: usize,
                a: &[&[<$act as $crate::__core::BlockFormat>::Block]],
                out: &mut [f32],
            ) -> bool {
                if !$crate::q8::packed::packable::<<Self as $crate::__core::BlockFormat>::Block>() {
                    return false;
                }
                $crate::q8::packed::dot_groups_rows::<<Self as $crate::__core::BlockFormat>::Block, _>(p, n, a, out);
                true
            }
        }
    )*};
}
/// Trait methods that each wrap one intrinsic, for a trait implemented once per register
/// width (`512` or `256`, the first token) with associated vector types `I` (integer) and `F`
/// (f32): one table, a column per width, `name(args) -> R = 512-bit intrinsic | 256-bit
/// intrinsic;`, where a type `I` / `F` stands for `Self::I` / `Self::F`. Each generated method
/// is `unsafe`, `#[inline(always)]`: its caller must have the register file's CPU features (the
/// trait's contract). The intrinsics are looked up where the macro is used. (The tile kernels
/// of `qforge-k` and `qforge-int4g` generate their element-wise operations with it.)
#[macro_export]
macro_rules! width_ops {
    (512; $($name:ident($($a:ident: $t:tt),*) -> $r:tt = $f:ident | $_g:ident;)*) => {
        $($crate::width_ops!(@fn $name($($a: $t),*) -> $r = $f);)*
    };
    (256; $($name:ident($($a:ident: $t:tt),*) -> $r:tt = $_f:ident | $g:ident;)*) => {
        $($crate::width_ops!(@fn $name($($a: $t),*) -> $r = $g);)*
    };
    (@fn $name:ident($($a:ident: $t:tt),*) -> $r:tt = $f:ident) => {
        #[inline(always)]
        unsafe fn $name($($a: $crate::width_ops!(@ty $t)),*) -> $crate::width_ops!(@ty $r) {
            // SAFETY: the trait's contract: the caller has the register file's features.
            unsafe { $f($($a),*) }
        }
    };
    (@ty I) => { Self::I };
    (@ty F) => { Self::F };
    (@ty $t:ty) => { $t };
}

#[cfg(target_arch = "x86_64")]
pub mod bytemask;
pub mod half_lut;
#[cfg(target_arch = "x86_64")]
mod half_lut_avx2;
#[cfg(target_arch = "x86_64")]
mod half_lut_avx512;
pub mod i8_groups;
pub mod lut;
pub mod planes;
#[cfg(target_arch = "x86_64")]
mod planes_avx2;
pub mod q8;
pub mod rows;
#[cfg(target_arch = "x86_64")]
mod scaled_avx512;
#[cfg(target_arch = "x86_64")]
pub mod store8;
#[cfg(target_arch = "x86_64")]
pub mod totals;
#[cfg(target_arch = "x86_64")]
pub mod transpose;
#[cfg(target_arch = "x86_64")]
pub mod vnni;

/// What a decoder does to `factor · code` before the value is final: nothing, `+ m` (q5_1's
/// offset) or `− m` (the K-quants' `d1 · q − m1`). Two operations, two roundings, in this
/// order: the portable and the AVX2 decoders evaluate the same expression, so the same bits
/// (`x − m` and `x + (−m)` differ in a NaN's sign, which the level tests would see).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Tail {
    /// `factor · code`.
    None,
    /// `factor · code + m`.
    Add(f32),
    /// `factor · code − m`.
    Sub(f32),
}

impl Tail {
    /// `x` with the tail applied.
    #[inline(always)]
    pub fn apply(self, x: f32) -> f32 {
        match self {
            Tail::None => x,
            Tail::Add(m) => x + m,
            Tail::Sub(m) => x - m,
        }
    }

    /// Whether `Tail::apply(factor · code)` can be NaN for no code: `factor` and `m` finite
    /// (a product may overflow to an infinity, but no finite `m` makes that NaN).
    #[inline(always)]
    pub fn finite_with(self, factor: f32) -> bool {
        factor.is_finite()
            && match self {
                Tail::None => true,
                Tail::Add(m) | Tail::Sub(m) => m.is_finite(),
            }
    }
}

/// A row of `blocks` decoded into `out` (`out.len()` logical elements, at most `blocks.len() ·
/// N`) by `whole`, which decodes whole blocks in place, block `i` into its `out[i]`; a partial
/// last block goes through a scratch block, of which the real elements are kept: the row
/// driver of the one-pass decoders (qforge-iq's grid formats, qforge-k's codes), over
/// [`block_rows_by`].
#[inline]
pub fn block_rows<B, O: Copy + Default, const N: usize>(
    blocks: &[B],
    out: &mut [O],
    mut whole: impl FnMut(&[B], &mut [[O; N]]),
) {
    block_rows_by(blocks, out, N, |b, o| whole(b, o.as_chunks_mut::<N>().0));
}

/// [`block_rows`] for a block length known as a value (`block > 0` elements; an associated
/// const cannot be a const generic argument): `whole` gets whole blocks' elements
/// (`blocks.len() · block`). The scratch block of a partial last block is on the stack up to
/// 256 elements (the K-quants'; a row with a partial last block is common: any odd column
/// count), allocated beyond (int4g's longer groups). `half_lut`'s row driver.
#[inline]
pub fn block_rows_by<B, O: Copy + Default>(
    blocks: &[B],
    out: &mut [O],
    block: usize,
    mut whole: impl FnMut(&[B], &mut [O]),
) {
    let block = block.max(1);
    let n = (out.len() / block).min(blocks.len());
    let (body, tail) = out.split_at_mut(n * block);
    whole(&blocks[..n], body);
    if let (false, Some(last)) = (tail.is_empty(), blocks.get(n)) {
        let (mut small, mut large) = ([O::default(); 256], Vec::new());
        let scratch = if block <= small.len() {
            &mut small[..block]
        } else {
            large.resize(block, O::default());
            &mut large[..]
        };
        whole(std::slice::from_ref(last), scratch);
        let k = tail.len().min(block);
        tail[..k].copy_from_slice(&scratch[..k]);
    }
}

/// A token that exists only on a CPU with AVX2, FMA and F16C ([`qforge_core::cpu::avx2`]):
/// a kernel holding one may call `#[target_feature(enable = "avx2,fma,f16c")]` functions.
#[derive(Clone, Copy, Debug)]
pub struct Avx2 {
    _private: (),
}

impl Avx2 {
    /// The token, or `None` where the CPU lacks AVX2, FMA or F16C (and off x86-64).
    #[inline]
    pub fn detect() -> Option<Avx2> {
        qforge_core::cpu::avx2().then_some(Avx2 { _private: () })
    }
}

/// A token that exists only where the AVX-512 VNNI kernels may run
/// ([`qforge_core::cpu::avx512vnni`]: AVX2, FMA, F16C and AVX-512 F / BW / VL / VNNI, and no
/// cap below that level): a kernel holding one may call functions with
/// `#[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]`.
#[derive(Clone, Copy, Debug)]
pub struct Vnni {
    _private: (),
}

impl Vnni {
    /// The token, or `None` where the VNNI kernels may not run.
    #[inline]
    pub fn detect() -> Option<Vnni> {
        qforge_core::cpu::avx512vnni().then_some(Vnni { _private: () })
    }

    /// The AVX2 token: the VNNI level includes AVX2.
    #[inline]
    pub fn avx2(self) -> Avx2 {
        Avx2 { _private: () }
    }
}
