//! Small integer kernels shared by the dot products of every format that pairs with q8_0
//! (this crate's, and iq4_nl / mxfp4 / nvfp4 in the iq and fp4 crates, which depend on this
//! one for the q8_0 block anyway): 16-entry table lookups of packed nibbles and exact
//! 16-lane integer dot sums. Safe, fixed-size code that LLVM vectorizes.

/// `table[q & 15]` for every byte of `q`, as a select per table entry: branch-free and
/// vectorized (compare + blend), where an indexed load per element would not be.
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

/// `w[i]·a[i]` summed in 16 exact `i32` lanes (lane `l`: elements `l`, `l + 16`, ...).
#[inline(always)]
pub fn idot_lanes<const N: usize>(w: &[i8; N], a: &[i8; N]) -> [i32; 16] {
    let p: [i16; N] = std::array::from_fn(|i| i16::from(w[i]) * i16::from(a[i]));
    let (pc, _) = p.as_chunks::<16>();
    let mut acc = [0i32; 16];
    for c in pc {
        for l in 0..16 {
            acc[l] += i32::from(c[l]);
        }
    }
    acc
}
