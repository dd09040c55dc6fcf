//! Optimization barriers for hand-tuned scalar code inside SIMD kernels.

/// `x`, opaque to the optimizer: an empty `asm!` takes and returns it in a register (no
/// instruction), so LLVM cannot fuse the scalar loads that produced it into a gather (which
/// is microcoded and far slower than the loads it replaces) or otherwise look through it.
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
#[inline(always)]
pub fn opaque(x: u64) -> u64 {
    let mut x = x;
    // SAFETY: the assembly is empty: it only names the register holding `x`, reads and writes
    // no memory, no stack and no flags.
    unsafe { std::arch::asm!("/* {0} */", inout(reg) x, options(pure, nomem, nostack, preserves_flags)) };
    x
}

/// `x`, computed before every memory access after this point and after every one before it
/// (an empty `asm!` that may read and write memory, naming the register that holds `x`): a
/// kernel puts one block's result through it so that LLVM finishes that block before it
/// starts the next one's loads, rather than interleaving the two and spilling registers
/// (the AVX2 build has 16). No instruction.
///
/// # Safety
/// The CPU must have AVX (a `#[target_feature]` function: callers compiled with AVX call it
/// as a safe function).
#[cfg(target_arch = "x86_64")]
#[allow(unsafe_code)]
#[target_feature(enable = "avx")]
#[inline]
pub fn fence_ymm(x: std::arch::x86_64::__m256i) -> std::arch::x86_64::__m256i {
    let mut x = x;
    // SAFETY: the assembly is empty: it only names the register holding `x` and touches no
    // memory, stack or flags (not claiming `nomem` is what orders it against the loads).
    unsafe { std::arch::asm!("/* {0} */", inout(ymm_reg) x, options(nostack, preserves_flags)) };
    x
}

/// `r`, a reference the optimizer cannot see through: the values behind it are read at run
/// time, as if they were data (the address passes through [`opaque`]; elsewhere through
/// `black_box`).
#[allow(unsafe_code)]
#[inline(always)]
pub fn opaque_ref<T>(r: &'static T) -> &'static T {
    #[cfg(target_arch = "x86_64")]
    {
        let p = opaque(std::ptr::from_ref(r) as usize as u64) as usize as *const T;
        // SAFETY: `opaque` returns its input unchanged, so `p` is the address of `r`: a valid,
        // aligned `&'static T`.
        unsafe { &*p }
    }
    #[cfg(not(target_arch = "x86_64"))]
    std::hint::black_box(r)
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    #[test]
    fn opaque_is_the_identity() {
        for x in [0u64, 1, u64::MAX, 0x0123_4567_89ab_cdef] {
            assert_eq!(super::opaque(x), x);
        }
    }

    #[test]
    fn opaque_ref_is_the_same_reference() {
        static T: [f32; 3] = [1.0, -2.0, 3.5];
        assert!(std::ptr::eq(super::opaque_ref(&T), &T));
    }
}
