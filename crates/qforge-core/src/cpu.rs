//! Which SIMD kernels this CPU can run, detected once at run time: the one dispatch rule every
//! family's kernels follow, so a plain `cargo build --release` picks the fastest path on the
//! machine it runs on and the scalar code stays the reference everywhere else.

use std::sync::OnceLock;

/// The x86-64 kernel level: AVX2 with FMA and F16C (every AVX2 CPU in practice has both).
/// Always `false` on other architectures.
pub fn avx2() -> bool {
    static AVX2: OnceLock<bool> = OnceLock::new();
    *AVX2.get_or_init(detect_avx2)
}

/// AVX-512 F/BW/VL on top of [`avx2`] (Skylake-SP and later, Zen 4).
pub fn avx512bw() -> bool {
    static AVX512: OnceLock<bool> = OnceLock::new();
    *AVX512.get_or_init(detect_avx512bw)
}

#[cfg(target_arch = "x86_64")]
fn detect_avx2() -> bool {
    is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") && is_x86_feature_detected!("f16c")
}

#[cfg(target_arch = "x86_64")]
fn detect_avx512bw() -> bool {
    avx2()
        && is_x86_feature_detected!("avx512f")
        && is_x86_feature_detected!("avx512bw")
        && is_x86_feature_detected!("avx512vl")
}

#[cfg(not(target_arch = "x86_64"))]
fn detect_avx2() -> bool {
    false
}

#[cfg(not(target_arch = "x86_64"))]
fn detect_avx512bw() -> bool {
    false
}

/// The SIMD levels this CPU has, by name (`avx2`, `avx512bw`), for reports and benchmarks.
pub fn levels() -> Vec<&'static str> {
    [("avx2", avx2()), ("avx512bw", avx512bw())].into_iter().filter_map(|(n, on)| on.then_some(n)).collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn avx512_implies_avx2() {
        assert!(!super::avx512bw() || super::avx2());
        assert_eq!(super::levels().contains(&"avx2"), super::avx2());
    }
}
