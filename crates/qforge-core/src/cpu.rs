//! Which SIMD kernels this CPU can run, detected once at run time: the one dispatch rule every
//! family's kernels follow, so a plain `cargo build --release` picks the fastest path on the
//! machine it runs on and the scalar code stays the reference everywhere else.
//!
//! The kernel levels are ordered ([`Level`]): a kernel of a level runs where [`level`] is at
//! least that level. Two caps lower what the kernels see, so that every path a machine has can
//! be run and compared on that machine:
//! * `QFORGE_CPU=scalar|avx2|avxvnni|avx512vnni` (read once, at the first query): a whole process,
//!   e.g. a benchmark of the AVX2 kernels on an AVX-512 machine, or a test run of the portable
//!   code. An unknown value is ignored (the detected level stands) and reported by [`levels`].
//! * [`with_level`]: the calling thread only (in place of `QFORGE_CPU`), for tests that force
//!   each path in turn.

use std::cell::Cell;
use std::sync::OnceLock;

/// A kernel level, in increasing order of what the CPU must have.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// The portable code only.
    Scalar,
    /// AVX2 with FMA and F16C (every AVX2 CPU in practice has both).
    Avx2,
    /// [`Level::Avx2`] plus `vpdpbusd` / `vpdpwssd` on 256-bit registers, in either encoding
    /// ([`vnni_ymm`]): AVX-VNNI's VEX form (Alder Lake and later Intel client parts, Sierra
    /// Forest, AMD Zen 5) or, on a CPU of [`Level::Avx512Vnni`], AVX-512 VL's EVEX form. The
    /// kernels of this level are the AVX2 ones with the VNNI dot products; those that need
    /// 512-bit registers or mask registers stay at [`Level::Avx512Vnni`].
    AvxVnni,
    /// [`Level::Avx2`] plus AVX-512 F, BW, VL and VNNI (`vpdpbusd`, `vpdpwssd`): Ice Lake,
    /// Sapphire Rapids and later Intel server / client parts, AMD Zen 4 and later. Besides
    /// [`Level::AvxVnni`]'s kernels (in their EVEX form), the kernels of this level use
    /// 512-bit and mask registers (the mat-mul tiles, fp8, the f16 / bf16 conversions).
    Avx512Vnni,
}

impl Level {
    /// Every level, lowest first.
    pub const ALL: [Level; 4] = [Level::Scalar, Level::Avx2, Level::AvxVnni, Level::Avx512Vnni];

    /// The level's name, as `QFORGE_CPU` spells it.
    pub const fn name(self) -> &'static str {
        match self {
            Level::Scalar => "scalar",
            Level::Avx2 => "avx2",
            Level::AvxVnni => "avxvnni",
            Level::Avx512Vnni => "avx512vnni",
        }
    }

    /// The level named `s` (as [`Level::name`] spells it).
    pub fn from_name(s: &str) -> Option<Level> {
        Level::ALL.into_iter().find(|l| l.name() == s.trim())
    }
}

/// What the CPU has and the process cap (`QFORGE_CPU`), detected once.
#[derive(Clone, Copy, Debug)]
struct Detected {
    /// The highest level the CPU runs.
    cpu: Level,
    /// The CPU has AVX-512 DQ and BF16 besides [`Level::Avx512Vnni`] (`vcvtneps2bf16`,
    /// `vfpclassps`: Sapphire Rapids, Zen 4; not Ice Lake).
    bf16: bool,
    /// The CPU has AVX-VNNI's VEX form (`avxvnni`), whatever its level.
    avxvnni: bool,
    /// The level after the process cap.
    process: Level,
    /// `QFORGE_CPU` was set to something that names no level.
    bad_env: bool,
}

fn detected() -> Detected {
    static D: OnceLock<Detected> = OnceLock::new();
    *D.get_or_init(|| {
        let cpu = detect();
        let env = std::env::var("QFORGE_CPU").ok().filter(|s| !s.trim().is_empty());
        let cap = env.as_deref().map(Level::from_name);
        let process = match cap {
            Some(Some(c)) => cpu.min(c),
            _ => cpu,
        };
        Detected { cpu, process, bf16: detect_bf16(cpu), avxvnni: detect_avxvnni(), bad_env: matches!(cap, Some(None)) }
    })
}

thread_local! {
    /// The calling thread's cap ([`with_level`]); `None`: no cap.
    static THREAD_CAP: Cell<Option<Level>> = const { Cell::new(None) };
}

/// The highest kernel level this thread may run: what the CPU has, lowered by this thread's
/// [`with_level`] cap where one is set, else by `QFORGE_CPU`. Cheap (a cached value and a
/// thread-local read): kernels ask per call.
#[inline]
pub fn level() -> Level {
    let d = detected();
    match THREAD_CAP.with(Cell::get) {
        Some(c) => d.cpu.min(c),
        None => d.process,
    }
}

/// The highest level the CPU itself runs (no cap applied).
pub fn cpu_level() -> Level {
    detected().cpu
}

/// Runs `f` with this thread's kernels capped at `cap` instead of `QFORGE_CPU` (the CPU's own
/// level still bounds it: capping above it changes nothing), so a test runs exactly the path it
/// names; the previous cap is restored afterwards, also when `f` panics. Other threads (rayon's workers included) are not affected: tests that force a path
/// call the kernels on their own thread.
pub fn with_level<R>(cap: Level, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<Level>);
    impl Drop for Restore {
        fn drop(&mut self) {
            THREAD_CAP.with(|c| c.set(self.0));
        }
    }
    let _restore = Restore(THREAD_CAP.with(|c| c.replace(Some(cap))));
    f()
}

/// Every level the CPU runs (what tests force in turn with [`with_level`]), lowest first.
pub fn testable_levels() -> Vec<Level> {
    Level::ALL.into_iter().filter(|&l| l <= cpu_level()).collect()
}

/// The AVX2 kernels may run: [`level`] is at least [`Level::Avx2`]. Always `false` off x86-64.
#[inline]
pub fn avx2() -> bool {
    level() >= Level::Avx2
}

/// The AVX-512 VNNI kernels may run: [`level`] is at least [`Level::Avx512Vnni`].
#[inline]
pub fn avx512vnni() -> bool {
    level() >= Level::Avx512Vnni
}

/// The encoding of the 256-bit VNNI instructions (`vpdpbusd`, `vpdpwssd` on `ymm` registers)
/// that the kernels of [`Level::AvxVnni`] use.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VnniForm {
    /// AVX-VNNI's VEX form: 16 vector registers, as the AVX2 kernels.
    Vex,
    /// AVX-512 VL's EVEX form (the CPU has [`Level::Avx512Vnni`]): 32 vector registers.
    Evex,
}

/// The 256-bit VNNI kernels may run ([`level`] is at least [`Level::AvxVnni`]), in this
/// encoding: VEX where the level is capped at [`Level::AvxVnni`] and the CPU has AVX-VNNI (so
/// a CPU with both forms, Sapphire Rapids and later, runs and tests the VEX build an Alder
/// Lake runs), else EVEX where the CPU has AVX-512 VNNI (32 registers), else VEX. `None`
/// below that level.
#[inline]
pub fn vnni_ymm() -> Option<VnniForm> {
    let (l, d) = (level(), detected());
    (l >= Level::AvxVnni).then(|| form_for(l, d.cpu, d.avxvnni))
}

/// [`vnni_ymm`]'s rule for level `l` (at least [`Level::AvxVnni`]) on a CPU of level `cpu`
/// that has (`avxvnni`) AVX-VNNI's VEX form or not.
fn form_for(l: Level, cpu: Level, avxvnni: bool) -> VnniForm {
    if cpu == Level::Avx512Vnni && !(l == Level::AvxVnni && avxvnni) { VnniForm::Evex } else { VnniForm::Vex }
}

/// [`vnni_ymm`] for a kernel that measured faster in its VEX build than in its EVEX one on
/// Intel's cores: VEX where the CPU is Intel's and has AVX-VNNI besides AVX-512 VNNI
/// (Sapphire Rapids and later), else [`vnni_ymm`]'s form. AMD's Zen 5 has both forms too and
/// keeps EVEX: measured on Intel only (docs/matmul.md, "VEX for the grid I-quants").
#[inline]
pub fn vnni_ymm_vex_on_intel() -> Option<VnniForm> {
    let d = detected();
    vnni_ymm().map(|f| vex_on_intel(f, d.avxvnni, intel()))
}

/// [`vnni_ymm_vex_on_intel`]'s rule: the form `f` that [`vnni_ymm`] gives, on a CPU that has
/// (`avxvnni`) AVX-VNNI or not and is (`intel`) Intel's or not.
fn vex_on_intel(f: VnniForm, avxvnni: bool, intel: bool) -> VnniForm {
    if avxvnni && intel { VnniForm::Vex } else { f }
}

/// Whether the CPU is Intel's (`GenuineIntel` in CPUID leaf 0), read once: for the few
/// kernel choices that measured one way on Intel's cores and the other on AMD's (Intel's
/// cores run 256-bit shuffles on one port, Zen's on two), each named where it is made.
pub fn intel() -> bool {
    static INTEL: OnceLock<bool> = OnceLock::new();
    *INTEL.get_or_init(|| {
        #[cfg(target_arch = "x86_64")]
        {
            // CPUID leaf 0 exists on every x86-64 CPU: EBX, EDX, ECX spell the vendor.
            let r = std::arch::x86_64::__cpuid(0);
            [r.ebx, r.edx, r.ecx] == [0x756e_6547, 0x4965_6e69, 0x6c65_746e]
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            false
        }
    })
}

/// Runs `f` compiled for the highest [`level`] this thread may run: `f` is inlined into a
/// function with that level's target features, so plain Rust inside it (a format's row
/// decoder, say) is vectorized for AVX2 or AVX-512 where the CPU has them, with no
/// `std::arch` code of its own. The results are the same on every level: Rust never contracts
/// `a * b + c` into a fused multiply-add and every f32 operation is IEEE on each, so only
/// speed differs. The features reach only code that is inlined into the trampoline: mark the
/// closure `#[inline(always)]` and the functions it calls `#[inline(always)]` down to the
/// loop (`#[inline]` was not enough for the row decoders: LLVM kept them out of line and
/// they ran as SSE2); code that stays out of line runs as compiled, correct but no faster.
#[inline(always)]
#[allow(unsafe_code)]
pub fn dispatch<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    match level() {
        // SAFETY: `level()` is at most what `detect` found on this CPU, which checked every
        // feature the called function enables.
        Level::Avx512Vnni => return unsafe { x86::run_avx512(f) },
        // SAFETY: as above, AVX2, FMA and F16C were detected (plain Rust gains nothing from the
        // VNNI dot products: `AvxVnni` runs it as AVX2).
        Level::Avx2 | Level::AvxVnni => return unsafe { x86::run_avx2(f) },
        Level::Scalar => {}
    }
    f()
}

/// `dst[i] = f16::from_f32(src[i])` (round to nearest even, NaN stays NaN with its top payload
/// bits), `dst.len() == src.len()`: `vcvtps2ph` sixteen at a time where [`avx512vnni`] allows
/// it, F16C's eight at a time where [`avx2`] does, else the branch-free
/// [`crate::round::f32_to_f16_bits`]. The same bits either way
/// (qforge-cpu's conversion tests hold both against `half`). A decoder that builds a batch of
/// blocks in f32 and stores it through [`crate::Elem::from_f32_slice`] reaches this.
#[inline]
#[allow(unsafe_code)]
pub fn f32_to_f16_slice(src: &[f32], dst: &mut [crate::f16]) {
    assert_eq!(src.len(), dst.len(), "one output per input");
    #[cfg(target_arch = "x86_64")]
    if avx512vnni() {
        // SAFETY: `avx512vnni()` says the CPU has AVX2, FMA, F16C and AVX-512 F / BW / VL /
        // VNNI (`detect`), a superset of what the `#[target_feature]` function enables.
        unsafe { x86::to_f16_avx512(src, dst) };
        return;
    }
    #[cfg(target_arch = "x86_64")]
    if avx2() {
        // SAFETY: `avx2()` says the CPU has AVX2, FMA and F16C (`detect`), all the
        // `#[target_feature]` function enables.
        unsafe { x86::to_f16_f16c(src, dst) };
        return;
    }
    for (d, s) in dst.iter_mut().zip(src) {
        *d = crate::f16::from_bits(crate::round::f32_to_f16_bits(*s));
    }
}

/// bf16 conversion is one instruction on this thread ([`avx512vnni`] and a CPU with AVX-512
/// DQ and BF16: `vcvtneps2bf16`, `vfpclassps`), where the AVX2 rounding formula takes five per
/// 8 values: [`f32_to_bf16_slice`] and the decoders' AVX-512 BF16 builds run there.
#[inline]
pub fn bf16_native() -> bool {
    avx512vnni() && detected().bf16
}

/// `dst[i] = bf16::from_f32(src[i])` (round to nearest even, NaN stays NaN with its top
/// payload bits and the quiet bit set), `dst.len() == src.len()`: `vcvtneps2bf16` sixteen at a
/// time where [`avx512vnni`] allows it and the CPU has AVX-512 BF16, else the branch-free
/// [`crate::round::f32_to_bf16_bits`] compiled for the level ([`dispatch`]). The same bits
/// either way (qforge-cpu's conversion tests hold every level against `half`).
#[inline]
#[allow(unsafe_code)]
pub fn f32_to_bf16_slice(src: &[f32], dst: &mut [crate::bf16]) {
    assert_eq!(src.len(), dst.len(), "one output per input");
    #[cfg(target_arch = "x86_64")]
    if bf16_native() {
        // SAFETY: `bf16_native()` says the CPU has AVX2, FMA, F16C and AVX-512 F / BW / VL /
        // VNNI (`avx512vnni()`), and AVX-512 DQ and BF16 (`detected().bf16`, `detect_bf16`):
        // every feature the `#[target_feature]` function enables.
        unsafe { x86::to_bf16_avx512(src, dst) };
        return;
    }
    dispatch(
        #[inline(always)]
        || bf16_formula(src, dst),
    );
}

/// [`crate::round::f32_to_bf16_bits`] of each value: a loop LLVM vectorizes.
#[inline(always)]
fn bf16_formula(src: &[f32], dst: &mut [crate::bf16]) {
    for (d, s) in dst.iter_mut().zip(src) {
        *d = crate::bf16::from_bits(crate::round::f32_to_bf16_bits(*s));
    }
}

/// The target-feature trampolines of [`dispatch`].
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
mod x86 {
    /// `f()`, compiled with AVX2, FMA and F16C.
    ///
    /// # Safety
    /// The CPU must have AVX2, FMA and F16C.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn run_avx2<R>(f: impl FnOnce() -> R) -> R {
        f()
    }

    /// `f()`, compiled with AVX2, FMA, F16C and AVX-512 F / BW / VL / VNNI.
    ///
    /// # Safety
    /// The CPU must have every one of those features ([`super::Level::Avx512Vnni`]).
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512vnni")]
    pub(super) unsafe fn run_avx512<R>(f: impl FnOnce() -> R) -> R {
        f()
    }

    /// `v`, unchanged, kept in a register: LLVM would otherwise fold the store that follows a
    /// `vcvtps2ph` into it (`vcvtps2ph` to memory), which Zen 4 runs far slower than the
    /// register form and a separate store.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn in_register(mut v: std::arch::x86_64::__m256i) -> std::arch::x86_64::__m256i {
        // SAFETY: an empty template: no instruction runs, no memory or flag is touched; the
        // operand only has to live in a vector register (AVX is enabled on this function).
        unsafe { std::arch::asm!("/* {0} */", inout(ymm_reg) v, options(pure, nomem, nostack, preserves_flags)) };
        v
    }

    /// [`in_register`] for a 128-bit value.
    #[target_feature(enable = "avx2")]
    #[inline]
    fn in_register_128(mut v: std::arch::x86_64::__m128i) -> std::arch::x86_64::__m128i {
        // SAFETY: as in `in_register`: an empty template, the operand in a vector register.
        unsafe { std::arch::asm!("/* {0} */", inout(xmm_reg) v, options(pure, nomem, nostack, preserves_flags)) };
        v
    }

    /// [`super::f32_to_f16_slice`] with `vcvtps2ph` (round to nearest even), eight values at
    /// a time; the tail through the branch-free formula.
    ///
    /// # Safety
    /// The CPU must have AVX2, FMA and F16C; `src.len() == dst.len()`.
    #[target_feature(enable = "avx2,fma,f16c")]
    pub(super) unsafe fn to_f16_f16c(src: &[f32], dst: &mut [crate::f16]) {
        use std::arch::x86_64::{_MM_FROUND_TO_NEAREST_INT, _mm_storeu_si128, _mm256_cvtps_ph, _mm256_loadu_ps};
        let (sc, st) = src.as_chunks::<8>();
        let (dc, dt) = dst.as_chunks_mut::<8>();
        for (s, d) in sc.iter().zip(dc) {
            // SAFETY: `s` is exactly 8 f32 (32 bytes) and `d` exactly 8 f16 (16 bytes): the
            // unaligned load and store stay inside them.
            unsafe {
                let h = in_register_128(_mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm256_loadu_ps(s.as_ptr())));
                _mm_storeu_si128(d.as_mut_ptr().cast(), h);
            }
        }
        for (d, s) in dt.iter_mut().zip(st) {
            *d = crate::f16::from_bits(crate::round::f32_to_f16_bits(*s));
        }
    }

    /// [`to_f16_f16c`] sixteen values at a time (`vcvtps2ph` of a 512-bit register: the same
    /// rounding, twice the values per instruction); the rest through [`to_f16_f16c`].
    ///
    /// # Safety
    /// The CPU must have AVX2, FMA, F16C and AVX-512 F; `src.len() == dst.len()`.
    #[target_feature(enable = "avx2,fma,f16c,avx512f")]
    pub(super) unsafe fn to_f16_avx512(src: &[f32], dst: &mut [crate::f16]) {
        use std::arch::x86_64::{_MM_FROUND_TO_NEAREST_INT, _mm256_storeu_si256, _mm512_cvtps_ph, _mm512_loadu_ps};
        let (sc, st) = src.as_chunks::<16>();
        let (dc, dt) = dst.as_chunks_mut::<16>();
        for (s, d) in sc.iter().zip(dc) {
            // SAFETY: `s` is exactly 16 f32 (64 bytes) and `d` exactly 16 f16 (32 bytes): the
            // unaligned load and store stay inside them.
            unsafe {
                let h = in_register(_mm512_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm512_loadu_ps(s.as_ptr())));
                _mm256_storeu_si256(d.as_mut_ptr().cast(), h);
            }
        }
        // SAFETY: the caller's contract includes `to_f16_f16c`'s; the tails have equal lengths.
        unsafe { to_f16_f16c(st, dt) };
    }

    /// [`super::f32_to_bf16_slice`] with `vcvtneps2bf16`, sixteen values at a time. The
    /// instruction rounds as the formula does (to nearest even; NaN: the top half with the
    /// quiet bit set) but flushes subnormal inputs to zero: a chunk holding one (`vfpclassps`)
    /// goes through the formula instead, as does the tail.
    ///
    /// # Safety
    /// The CPU must have AVX2, FMA, F16C and AVX-512 F / BW / VL / DQ / BF16.
    #[target_feature(enable = "avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")]
    pub(super) unsafe fn to_bf16_avx512(src: &[f32], dst: &mut [crate::bf16]) {
        use std::arch::x86_64::{
            __m256bh, __m256i, _mm256_storeu_si256, _mm512_cvtneps_pbh, _mm512_fpclass_ps_mask, _mm512_loadu_ps,
        };
        /// `vfpclassps` category: subnormal.
        const SUBNORMAL: i32 = 0x20;
        let (sc, st) = src.as_chunks::<16>();
        let (dc, dt) = dst.as_chunks_mut::<16>();
        for (s, d) in sc.iter().zip(dc) {
            // SAFETY: `s` is exactly 16 f32 (64 bytes), the unaligned load reads only it.
            let x = unsafe { _mm512_loadu_ps(s.as_ptr()) };
            if _mm512_fpclass_ps_mask::<SUBNORMAL>(x) != 0 {
                super::bf16_formula(s, d);
                continue;
            }
            let h = _mm512_cvtneps_pbh(x);
            // SAFETY: `d` is exactly 16 bf16 (32 bytes), the unaligned store writes only it;
            // `__m256bh` and `__m256i` are both 32 bytes of plain bits.
            unsafe { _mm256_storeu_si256(d.as_mut_ptr().cast(), std::mem::transmute::<__m256bh, __m256i>(h)) };
        }
        super::bf16_formula(st, dt);
    }
}

#[cfg(target_arch = "x86_64")]
fn detect() -> Level {
    let avx2 = is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") && is_x86_feature_detected!("f16c");
    let vnni = avx2
        && is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512bw")
        && is_x86_feature_detected!("avx512vl")
        && is_x86_feature_detected!("avx512vnni");
    let avxvnni = avx2 && is_x86_feature_detected!("avxvnni");
    match (avx2, avxvnni, vnni) {
        (_, _, true) => Level::Avx512Vnni,
        (_, true, false) => Level::AvxVnni,
        (true, false, false) => Level::Avx2,
        _ => Level::Scalar,
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn detect() -> Level {
    Level::Scalar
}

/// Whether the CPU has AVX-VNNI (the VEX form of `vpdpbusd` / `vpdpwssd`) with AVX2.
fn detect_avxvnni() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") && is_x86_feature_detected!("avxvnni")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Whether the CPU has AVX-512 DQ and BF16 on top of `cpu` = [`Level::Avx512Vnni`].
fn detect_bf16(cpu: Level) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        cpu == Level::Avx512Vnni && is_x86_feature_detected!("avx512dq") && is_x86_feature_detected!("avx512bf16")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = cpu;
        false
    }
}

/// For reports and benchmarks: the level the kernels run at (`avx512vnni`, `avxvnni` with its
/// [`VnniForm`], `avx2`, `scalar`),
/// followed by `(cpu: L)` where `QFORGE_CPU` lowered it and `(QFORGE_CPU ignored)` where it
/// named no level.
pub fn levels() -> String {
    let d = detected();
    let mut s = d.process.name().to_string();
    if d.process == Level::AvxVnni {
        s += match form_for(d.process, d.cpu, d.avxvnni) {
            VnniForm::Evex => " (EVEX form)",
            VnniForm::Vex => " (VEX form)",
        };
    }
    if d.process != d.cpu {
        s += &format!(" (cpu: {}, capped by QFORGE_CPU)", d.cpu.name());
    }
    if d.bad_env {
        s += " (QFORGE_CPU names no level: ignored)";
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_slices_convert_as_half_at_every_level() {
        // Random bit patterns (NaNs with payloads, infinities, subnormals) plus the halfway
        // and overflow cases, in a length with a tail past the 8-wide chunks.
        let mut rng = crate::rand::Rng::new(11);
        let mut src: Vec<f32> = (0..4099).map(|_| f32::from_bits(rng.next_u64() as u32)).collect();
        src.extend([65504.0, 65519.0, 65520.0, -65520.0, 1.0 + f32::powi(2.0, -11), f32::from_bits(0x7F80_0001)]);
        src.extend((0..64u32).map(|i| f32::from_bits(0x3380_0000 + (i << 11)))); // around the subnormals
        for level in testable_levels() {
            let mut dst = vec![crate::f16::ZERO; src.len()];
            with_level(level, || f32_to_f16_slice(&src, &mut dst));
            for (s, d) in src.iter().zip(&dst) {
                assert_eq!(d.to_bits(), crate::f16::from_f32(*s).to_bits(), "{level:?}: f16 of {:#010x}", s.to_bits());
            }
        }
    }

    #[test]
    fn levels_are_ordered_and_named() {
        for l in Level::ALL {
            assert_eq!(Level::from_name(l.name()), Some(l));
        }
        assert!(Level::Scalar < Level::Avx2 && Level::Avx2 < Level::AvxVnni && Level::AvxVnni < Level::Avx512Vnni);
        assert_eq!(Level::from_name("avx512"), None);
    }

    #[test]
    fn the_thread_cap_lowers_and_restores() {
        let before = level();
        with_level(Level::Scalar, || {
            assert_eq!(level(), Level::Scalar);
            assert!(!avx2() && !avx512vnni());
            // Nested: the inner cap, then the outer again.
            with_level(Level::Avx2, || assert_eq!(level(), before.min(Level::Avx2)));
            assert_eq!(level(), Level::Scalar);
        });
        assert_eq!(level(), before);
        // A cap above the CPU gives the CPU's level.
        with_level(Level::Avx512Vnni, || assert_eq!(level(), cpu_level()));
        // Restored after a panic too.
        let r = std::panic::catch_unwind(|| with_level(Level::Scalar, || panic!("inside")));
        assert!(r.is_err());
        assert_eq!(level(), before);
    }

    #[test]
    fn vnni_implies_avx2() {
        assert!(!avx512vnni() || avx2());
        assert!(vnni_ymm().is_none() || avx2());
        // Every level the CPU runs gives the 256-bit VNNI form from `AvxVnni` up: VEX where
        // the CPU has AVX-VNNI and the level is capped there, else EVEX exactly where the CPU
        // has AVX-512 VNNI.
        let d = detected();
        for l in testable_levels() {
            let form = with_level(l, vnni_ymm);
            assert_eq!(form.is_some(), l >= Level::AvxVnni, "{l:?}");
            if let Some(form) = form {
                let vex = (l == Level::AvxVnni && d.avxvnni) || cpu_level() != Level::Avx512Vnni;
                assert_eq!(form == VnniForm::Vex, vex, "{l:?}");
            }
        }
        // The rule on every kind of CPU, whatever this one is.
        use {Level::*, VnniForm::*};
        assert_eq!(form_for(AvxVnni, Avx512Vnni, true), Vex); // Sapphire Rapids capped at avxvnni
        assert_eq!(form_for(Avx512Vnni, Avx512Vnni, true), Evex);
        assert_eq!(form_for(AvxVnni, Avx512Vnni, false), Evex); // Ice Lake, Zen 4
        assert_eq!(form_for(AvxVnni, AvxVnni, true), Vex); // Alder Lake
        // The Intel preference: only where the VEX form exists, only on Intel.
        assert_eq!(vex_on_intel(Evex, true, true), Vex); // Sapphire Rapids
        assert_eq!(vex_on_intel(Evex, true, false), Evex); // Zen 5
        assert_eq!(vex_on_intel(Evex, false, true), Evex); // Ice Lake
        assert_eq!(vex_on_intel(Vex, true, false), Vex);
        let preferred = vnni_ymm_vex_on_intel();
        assert_eq!(preferred.is_some(), vnni_ymm().is_some());
        assert!(preferred != Some(Vex) || d.avxvnni || vnni_ymm() == Some(Vex));
        assert!(testable_levels().contains(&Level::Scalar));
        assert!(testable_levels().contains(&cpu_level()));
    }
}
