//! 16-entry table lookups of 4-bit codes: safe fixed-size code that LLVM vectorizes (a
//! compare and a blend per table entry), where an indexed load per element would not be.

/// `table[q & 15]` for every byte of `q`.
#[inline(always)]
pub fn lut16<const N: usize>(table: &[i8; 16], q: &[u8; N]) -> [i8; N] {
    let mut out = [table[0]; N];
    for (o, &c) in out.iter_mut().zip(q) {
        let c = c & 0x0F;
        let mut v = table[0];
        for (j, &t) in table.iter().enumerate().skip(1) {
            if c == j as u8 {
                v = t;
            }
        }
        *o = v;
    }
    out
}

/// `table[code]` for the `N = 2·H` codes packed in `H` bytes in ggml's split-half order:
/// the low nibbles (elements `0..H`), then the high nibbles (elements `H..N`).
#[inline(always)]
pub fn nibble_lut<const H: usize, const N: usize>(qs: &[u8; H], table: &[i8; 16]) -> [i8; N] {
    const { assert!(N == 2 * H) };
    let both: [u8; N] = std::array::from_fn(|i| if i < H { qs[i] & 0x0F } else { qs[i - H] >> 4 });
    lut16(table, &both)
}

/// `table[code] · d` in f32 for the `N = 2·H` codes of [`nibble_lut`] (one product per
/// element, `f32::from(table[code]) * d`): fixed-size code LLVM vectorizes, shared by the
/// decoders of the nibble-table formats (iq4_nl / iq4_xs, mxfp4 / nvfp4).
#[inline(always)]
pub fn nibble_values<const H: usize, const N: usize>(qs: &[u8; H], table: &[i8; 16], d: f32) -> [f32; N] {
    let codes: [i8; N] = nibble_lut(qs, table);
    let mut y = [0f32; N];
    for (y, k) in y.iter_mut().zip(codes) {
        *y = f32::from(k) * d;
    }
    y
}

/// The largest byte of a 16-entry table (the top unsigned value a packed kernel's table
/// lookup gives, which bounds its integer sums).
pub const fn max16(t: &[u8; 16]) -> u8 {
    let (mut m, mut i) = (0u8, 0);
    while i < 16 {
        m = if t[i] > m { t[i] } else { m };
        i += 1;
    }
    m
}

/// `vpshufb` control `c` (`c < 8`): the `i16` at index `c` of each 128-bit lane, repeated over
/// that lane (bytes `2c, 2c + 1`). The kernels broadcast a chunk's (or sub-block's) pair of
/// group scales with it ([`pick_i16`]).
static PICK_I16: [[u8; 32]; 8] = {
    let mut t = [[0u8; 32]; 8];
    let mut c = 0;
    while c < 8 {
        let mut b = 0;
        while b < 32 {
            t[c][b] = (2 * c + b % 2) as u8;
            b += 1;
        }
        c += 1;
    }
    t
};

/// The `vpshufb` controls that broadcast an i16 lane pair, one per lane `c` (bytes `2c, 2c + 1`),
/// behind `black_box`, so that the kernels load each control from memory: with a constant
/// control LLVM rewrites the `vpshufb` as `vpshuflw` / `vpshufhw` and `vpshufd`, two or three
/// shuffles where one does. (Through [`crate::barrier::opaque_ref`] instead, the K-quant
/// kernel's q2_k / q4_k mat-vec read 30 % slower on an Intel Xeon.)
#[inline(always)]
pub fn pick_i16() -> &'static [[u8; 32]; 8] {
    std::hint::black_box(&PICK_I16)
}

/// `vpshufb` control `c` (`c < 8`) of [`pick_i16`]'s table: loaded from `table` where the
/// kernel holds one (its `pick_i16()`), else the constant, which LLVM may rewrite as other
/// shuffles. The K-quant and I-quant kernels broadcast their group scales with it, each
/// format choosing the form that measured faster.
///
/// # Safety
/// The CPU must have AVX2. A caller that is itself `#[target_feature(enable = "avx2")]` (every
/// AVX2 kernel) calls it without `unsafe`: that caller's own contract covers it.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
#[allow(unsafe_code)]
pub fn pick_i16_control(table: Option<&[[u8; 32]; 8]>, c: usize) -> std::arch::x86_64::__m256i {
    use std::arch::x86_64::*;
    match table {
        // SAFETY: `t[c]` is 32 bytes, exactly what the unaligned 32-byte load reads.
        Some(t) => unsafe { _mm256_loadu_si256(t[c].as_ptr().cast()) },
        None => _mm256_set1_epi16(i16::from_le_bytes([2 * c as u8, 2 * c as u8 + 1])),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: [i8; 16] = [-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 127];

    #[test]
    fn lut16_is_a_table_lookup() {
        let q: [u8; 64] = std::array::from_fn(|i| (i * 37 + 11) as u8);
        for (g, c) in lut16(&T, &q).iter().zip(q) {
            assert_eq!(*g, T[usize::from(c & 15)]);
        }
    }

    #[test]
    fn nibble_values_scale_each_looked_up_code() {
        let q: [u8; 8] = std::array::from_fn(|i| (i * 29 + 3) as u8);
        let v: [f32; 16] = nibble_values(&q, &T, 0.375);
        for j in 0..8 {
            assert_eq!(v[j].to_bits(), (f32::from(T[usize::from(q[j] & 15)]) * 0.375).to_bits());
            assert_eq!(v[j + 8].to_bits(), (f32::from(T[usize::from(q[j] >> 4)]) * 0.375).to_bits());
        }
    }

    #[test]
    fn nibble_lut_is_low_nibbles_then_high() {
        let q: [u8; 16] = std::array::from_fn(|i| (i * 53 + 7) as u8);
        let v: [i8; 32] = nibble_lut(&q, &T);
        for j in 0..16 {
            assert_eq!((v[j], v[j + 16]), (T[usize::from(q[j] & 15)], T[usize::from(q[j] >> 4)]));
        }
    }
}
