//! What a test needs from the machine or its environment, in one place, so that no test
//! returns early and reports `ok` for a check it did not make.
//!
//! - [`avx2`]: the AVX2 kernels' tests. On a CPU without AVX2, FMA and F16C they fail (an
//!   untested kernel is not a pass) unless `QFORGE_ALLOW_NO_AVX2=1` asks to skip them; a
//!   skipped test then says `SKIPPED` on stderr (shown with `--nocapture`).
//! - [`simd_levels`]: every SIMD level the machine runs, from AVX2 up, for the tests that
//!   force each kernel path in turn (`qforge_core::cpu::with_level`).
//! - [`env_dir`]: data that is not committed (ggml cross-checks over large generated inputs).
//!   Such tests are `#[ignore = "…"]` and fail, never pass, when run without their data.

use std::path::PathBuf;

/// The variable that lets the AVX2 tests skip on a CPU without AVX2.
pub const ALLOW_NO_AVX2: &str = "QFORGE_ALLOW_NO_AVX2";

/// Whether a test of the AVX2 kernels should run: `true` on a CPU that has them. Without
/// them it panics, unless [`ALLOW_NO_AVX2`] is set: then it reports the skip on stderr and
/// returns `false` (the caller returns).
pub fn avx2() -> bool {
    if qforge_core::cpu::cpu_level() >= qforge_core::cpu::Level::Avx2 {
        return true;
    }
    if std::env::var_os(ALLOW_NO_AVX2).is_some() {
        eprintln!("SKIPPED: this CPU lacks AVX2/FMA/F16C ({ALLOW_NO_AVX2} is set)");
        return false;
    }
    panic!("this CPU lacks AVX2/FMA/F16C: the AVX2 kernel is untested here ({ALLOW_NO_AVX2}=1 skips)");
}

/// The directory named by the environment variable `var`, for a test that needs data which
/// is not committed. Panics (the test fails) when `var` is unset or empty, or is not a
/// directory: such a test is `#[ignore]`d and runs only when asked for with `--ignored`.
pub fn env_dir(var: &str) -> PathBuf {
    match std::env::var_os(var) {
        Some(d) if !d.is_empty() => {
            let d = PathBuf::from(d);
            assert!(d.is_dir(), "{var}={} is not a directory", d.display());
            d
        }
        _ => panic!("this test needs {var}=DIR (its generated data; see the test's module docs)"),
    }
}

/// The value of the environment variable `var` parsed as a number, or `default` when unset.
/// Panics on a value that does not parse (a typo must not silently select the default).
pub fn env_usize(var: &str, default: usize) -> usize {
    match std::env::var(var) {
        Ok(v) => v.parse().unwrap_or_else(|e| panic!("{var}={v}: {e}")),
        Err(_) => default,
    }
}

/// The SIMD kernel levels this machine runs from AVX2 up (AVX2; 256-bit VNNI where the CPU
/// has AVX-VNNI or AVX-512 VNNI, in the form it runs; AVX-512 VNNI where it has that), each
/// to be forced in turn with `qforge_core::cpu::with_level` and compared with the portable
/// reference; as [`avx2`], it panics on a CPU without AVX2 unless [`ALLOW_NO_AVX2`] is set
/// (then it is empty). The levels tested are named on stderr, the VNNI form with
/// `avxvnni`'s.
pub fn simd_levels() -> Vec<qforge_core::cpu::Level> {
    if !avx2() {
        return Vec::new();
    }
    let levels: Vec<_> =
        qforge_core::cpu::testable_levels().into_iter().filter(|&l| l >= qforge_core::cpu::Level::Avx2).collect();
    let name = |l: qforge_core::cpu::Level| match qforge_core::cpu::with_level(l, qforge_core::cpu::vnni_ymm) {
        Some(form) if l == qforge_core::cpu::Level::AvxVnni => format!("{} ({form:?} form)", l.name()),
        _ => l.name().to_string(),
    };
    eprintln!("SIMD levels forced: {}", levels.iter().map(|&l| name(l)).collect::<Vec<_>>().join(", "));
    levels
}
