//! The 256-bit VNNI dot products (`vpdpbusd`, `vpdpwssd` on `ymm` registers) in both of their
//! encodings, for the kernels of [`qforge_core::cpu::Level::AvxVnni`]: AVX-VNNI's VEX form
//! (Alder Lake and later Intel client parts, Zen 5; 16 vector registers) and AVX-512 VL's
//! EVEX form (every AVX-512 VNNI CPU; 32). The same instruction either way, bit for bit (the
//! Intel SDM defines both forms by one operation), so a kernel body is written once over a
//! const [`Form`] parameter and compiled twice, once with each form's `#[target_feature]`
//! set (`avx2,fma,f16c,avxvnni` for [`VEX`]; `avx2,fma,f16c,avx512f,avx512bw,avx512vl,
//! avx512vnni` for [`EVEX`]); [`VnniYmm`] says which of the two the CPU runs.
//!
//! How the forms are checked: every kernel's level tests force each level the CPU runs
//! ([`qforge_core::cpu::testable_levels`]), [`qforge_core::cpu::Level::AvxVnni`] included,
//! against the portable kernel bit for bit. That level runs the VEX build wherever the CPU
//! has AVX-VNNI (Alder Lake; Sapphire Rapids and later, which have both forms), else the
//! EVEX one (Ice Lake, Zen 4); [`qforge_core::cpu::Level::Avx512Vnni`] runs the EVEX one.
#![allow(unsafe_code)]

use std::arch::x86_64::*;

use crate::Avx2;
use qforge_core::cpu::VnniForm;

/// Which build of a kernel body: [`NONE`] (the AVX2 one, `vpmaddubsw` + `vpmaddwd`), [`VEX`]
/// or [`EVEX`] (the VNNI instructions in that encoding). A `u8` so that it can be a const
/// generic parameter.
pub type Form = u8;
/// The AVX2 build: no VNNI instruction.
pub const NONE: Form = 0;
/// AVX-VNNI's VEX encoding.
pub const VEX: Form = 1;
/// AVX-512 VL / VNNI's EVEX encoding.
pub const EVEX: Form = 2;

/// A token that exists only where the 256-bit VNNI kernels may run
/// ([`qforge_core::cpu::vnni_ymm`]: [`qforge_core::cpu::Level::AvxVnni`] or above), with the
/// encoding the CPU runs: a kernel holding one may call functions compiled with that form's
/// features (the module docs) where [`VnniYmm::form`] is it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VnniYmm {
    form: Form,
}

impl VnniYmm {
    /// The token, or `None` below [`qforge_core::cpu::Level::AvxVnni`].
    #[inline]
    pub fn detect() -> Option<VnniYmm> {
        qforge_core::cpu::vnni_ymm().map(VnniYmm::of)
    }

    /// [`VnniYmm::detect`] for a kernel whose VEX build measured faster on Intel's cores: the
    /// VEX form on an Intel CPU with both forms ([`qforge_core::cpu::vnni_ymm_vex_on_intel`]).
    #[inline]
    pub fn detect_vex_on_intel() -> Option<VnniYmm> {
        qforge_core::cpu::vnni_ymm_vex_on_intel().map(VnniYmm::of)
    }

    fn of(f: VnniForm) -> VnniYmm {
        VnniYmm {
            form: match f {
                VnniForm::Vex => VEX,
                VnniForm::Evex => EVEX,
            },
        }
    }

    /// [`VEX`] or [`EVEX`].
    #[inline]
    pub fn form(self) -> Form {
        self.form
    }

    /// The AVX2 token: both forms' levels include AVX2.
    #[inline]
    pub fn avx2(self) -> Avx2 {
        Avx2 { _private: () }
    }
}

/// `acc + Σ₄ u·s` per `i32` lane (`vpdpbusd`: four `u8 × i8` products of the lane's bytes,
/// summed exactly, added modulo 2³²) in form `F`.
///
/// # Safety
/// The CPU has form `F`'s features and the caller is compiled with them (it is inlined
/// there). `F` = [`NONE`] panics.
#[inline(always)]
pub unsafe fn dpbusd<const F: Form>(acc: __m256i, u: __m256i, s: __m256i) -> __m256i {
    // SAFETY: the caller's contract: the CPU has form `F`'s features.
    unsafe {
        match F {
            EVEX => _mm256_dpbusd_epi32(acc, u, s),
            VEX => _mm256_dpbusd_avx_epi32(acc, u, s),
            _ => no_form(),
        }
    }
}

/// `acc + vpmaddwd(a, b)` (`vpdpwssd`: two `i16 × i16` products per `i32` lane, added modulo
/// 2³²) in form `F`. Inline assembly, not the intrinsic: for the generic x86-64 tuning LLVM's
/// machine combiner splits the intrinsic back into `vpmaddwd` + `vpaddd` wherever that
/// shortens a dependency chain, which costs an instruction per use in kernels bound by
/// instruction throughput.
///
/// # Safety
/// As [`dpbusd`].
#[inline(always)]
pub unsafe fn dpwssd<const F: Form>(acc: __m256i, a: __m256i, b: __m256i) -> __m256i {
    // SAFETY: the caller's contract: the CPU has form `F`'s features.
    unsafe {
        match F {
            EVEX => dpwssd_evex(acc, a, b),
            VEX => dpwssd_vex(acc, a, b),
            _ => no_form(),
        }
    }
}

/// A VNNI instruction asked of [`NONE`]: a kernel body compiled for every form may name one
/// in a branch that its AVX2 build never takes (a `const` assertion would reject the body
/// itself), so this is a panic, never an instruction the CPU may lack.
#[cold]
fn no_form() -> ! {
    panic!("a VNNI instruction in the AVX2 build (form NONE)")
}

/// Defines `$name`: [`dpwssd`] in one form, compiled with `$features`, as the assembly
/// `$template` on registers of class `$class` (the VEX form's `{vex}` prefix: the assembler
/// would otherwise pick the EVEX encoding; its registers `ymm0`–`ymm15`, `ymm_reg`).
macro_rules! dpwssd_form {
    ($(#[$doc:meta])* $name:ident, $features:literal, $template:literal, $class:ident) => {
        $(#[$doc])*
        #[target_feature(enable = $features)]
        #[inline]
        fn $name(mut acc: __m256i, a: __m256i, b: __m256i) -> __m256i {
            // SAFETY: `vpdpwssd` on registers only (no memory, stack or flags); the function
            // enables the features of its form, all the instruction needs.
            unsafe {
                std::arch::asm!(
                    $template,
                    acc = inout($class) acc,
                    a = in($class) a,
                    b = in($class) b,
                    options(pure, nomem, nostack, preserves_flags),
                );
            }
            acc
        }
    };
}

dpwssd_form!(
    /// [`dpwssd`]'s EVEX form.
    dpwssd_evex,
    "avx2,avx512f,avx512bw,avx512vl,avx512vnni",
    "vpdpwssd {acc:y}, {a:y}, {b:y}",
    zmm_reg
);
dpwssd_form!(
    /// [`dpwssd`]'s VEX form.
    dpwssd_vex,
    "avx2,avxvnni",
    "{{vex}} vpdpwssd {acc}, {a}, {b}",
    ymm_reg
);
