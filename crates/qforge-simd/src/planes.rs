//! Codes of 8 weight rows stored row-interleaved in bit planes: the code layout of every
//! packed (row-interleaved) weight layout (`qforge_k::packed`, [`crate::q8::packed`]).
//!
//! Codes come in *units* of 32 elements per row. Element `e` of a unit is quad `m = e / 4`,
//! byte `j = e % 4` of its row's 32-bit lane, so one 32-byte slice holds a quad of all 8 rows.
//! A code of up to 6 bits is split over at most two planes, each storing the unit's 8 quads
//! in 32-byte slices: a 4-bit plane in 4 slices (slice `m / 2`, the low nibble for even `m`,
//! the high one for odd), a 2-bit plane in 2 (slice `m / 4`, bits `2(m % 4)..`), a 1-bit plane
//! in 1 (bit `m`); 8-bit codes are whole bytes, quad `m` in slice `m`. A unit's slices of all its planes lie together, so rows are read as one
//! stream (plane after plane, separate streams fell out of L2's prefetch: q6_k at 0.4×).
//!
//! | bits | planes (bit of the code they hold) | bytes per unit (8 rows) |
//! |---|---|---|
//! | 1 | 1-bit (0) | 32 |
//! | 2 | 2-bit (0) | 64 |
//! | 3 | 2-bit (0), 1-bit (2) | 96 |
//! | 4 | 4-bit (0) | 128 |
//! | 5 | 4-bit (0), 1-bit (4) | 160 |
//! | 6 | 4-bit (0), 2-bit (4) | 192 |
//! | 8 | 8-bit (0) | 256 |

/// Rows per group: the 32-bit lanes of a 256-bit register.
pub const ROWS: usize = 8;

/// The checks every multi-row packed dot makes (see `qforge_k::packed::dot_groups_rows`):
/// `out` is `acts.len()` equal parts of whole groups of [`ROWS`] results, `packed` is one part's
/// groups of `n` packed blocks of `block` bytes each, and every activation row holds at least
/// `per_row` blocks. Returns each row's part length, `None` where there is nothing to compute
/// (no rows, no blocks or no outputs: the outputs, if any, are zeroed).
///
/// # Panics
/// If any of those does not hold.
pub fn rows_parts<A>(
    packed: usize,
    n: usize,
    block: usize,
    acts: &[&[A]],
    per_row: usize,
    out: &mut [f32],
) -> Option<usize> {
    if acts.is_empty() {
        assert!(out.is_empty(), "no outputs without activation rows");
        return None;
    }
    assert!(out.len().is_multiple_of(acts.len()), "one equal part of the outputs per activation row");
    let len = out.len() / acts.len();
    assert!(len.is_multiple_of(ROWS), "8 outputs per group");
    assert_eq!(packed, len / ROWS * n * block, "whole groups of n packed blocks");
    assert!(acts.iter().all(|a| a.len() >= per_row), "activation rows as long as the weight rows");
    if n == 0 || len == 0 {
        out.fill(0.0);
        return None;
    }
    Some(len)
}

/// Where a unit's planes lie (byte offsets within the unit) and the code bit each fills.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Planes {
    /// The 8-bit plane (8 slices: whole bytes), if any; then the only one.
    pub byte: Option<usize>,
    /// The 4-bit plane (4 slices), if any.
    pub nib: Option<usize>,
    /// The 2-bit plane (2 slices), if any, and the code bit its values go to.
    pub crumb: Option<(usize, u32)>,
    /// The 1-bit plane (1 slice), if any, and the code bit its values go to.
    pub bit: Option<(usize, u32)>,
    /// Bytes per unit.
    pub unit: usize,
}

impl Planes {
    /// No planes, no bytes (the layout of a format without one).
    pub const NONE: Planes = Planes { byte: None, nib: None, crumb: None, bit: None, unit: 0 };

    /// The planes of `bits`-bit codes (1 to 6, or 8).
    ///
    /// # Panics
    /// At compile time (every caller evaluates it in a constant) for `bits` outside 1..=6 and 8.
    pub const fn of_bits(bits: u32) -> Planes {
        assert!((bits >= 1 && bits <= 6) || bits == 8, "codes of 1 to 6 or 8 bits");
        let none = Planes::NONE;
        match bits {
            1 => Planes { bit: Some((0, 0)), unit: 32, ..none },
            2 => Planes { crumb: Some((0, 0)), unit: 64, ..none },
            3 => Planes { crumb: Some((0, 0)), bit: Some((64, 2)), unit: 96, ..none },
            4 => Planes { nib: Some(0), unit: 128, ..none },
            5 => Planes { nib: Some(0), bit: Some((128, 4)), unit: 160, ..none },
            8 => Planes { byte: Some(0), unit: 256, ..none },
            _ => Planes { nib: Some(0), crumb: Some((128, 4)), unit: 192, ..none },
        }
    }

    /// Byte offset within the unit and shift of element `e` (`< 32`) of row `r` in the plane
    /// of `width`-bit values at offset `at`.
    const fn pos(at: usize, width: u32, r: usize, e: usize) -> (usize, u32) {
        let (m, j) = (e / 4, e % 4);
        let per = 8 / width as usize; // quads per byte
        (at + (m / per) * 32 + 4 * r + j, width * (m % per) as u32)
    }

    /// Stores code `u` of element `e` (`< 32`) of row `r` into the unit's bytes `unit` (which
    /// start zeroed).
    pub fn put(&self, unit: &mut [u8], r: usize, e: usize, u: u8) {
        if let Some(at) = self.byte {
            unit[Self::pos(at, 8, r, e).0] = u;
        }
        if let Some(at) = self.nib {
            let (o, s) = Self::pos(at, 4, r, e);
            unit[o] |= (u & 0xF) << s;
        }
        if let Some((at, to)) = self.crumb {
            let (o, s) = Self::pos(at, 2, r, e);
            unit[o] |= (u >> to & 3) << s;
        }
        if let Some((at, to)) = self.bit {
            let (o, s) = Self::pos(at, 1, r, e);
            unit[o] |= (u >> to & 1) << s;
        }
    }

    /// Stores the 32 codes of row `r` (element order) into the unit's bytes `unit`: the bytes
    /// [`Planes::put`] gives element by element, written as whole 32-bit words (a row's four
    /// bytes of a slice are its own), so that packing runs at memory speed rather than per
    /// bit. The row's words are overwritten, so `unit` need not start zeroed.
    pub fn put_row(&self, unit: &mut [u8], r: usize, codes: &[u8; 32]) {
        let quads: [u32; 8] = std::array::from_fn(|m| {
            u32::from_le_bytes([codes[4 * m], codes[4 * m + 1], codes[4 * m + 2], codes[4 * m + 3]])
        });
        let mut word = |at: usize, slice: usize, v: u32| {
            let o = at + slice * 32 + 4 * r;
            unit[o..o + 4].copy_from_slice(&v.to_le_bytes());
        };
        if let Some(at) = self.byte {
            for (m, &q) in quads.iter().enumerate() {
                word(at, m, q);
            }
        }
        if let Some(at) = self.nib {
            for s in 0..4 {
                word(at, s, quads[2 * s] & 0x0F0F_0F0F | (quads[2 * s + 1] & 0x0F0F_0F0F) << 4);
            }
        }
        // A code's bits `to..` of each byte, masked to the plane's width before the bits of the
        // next byte that the shift brought down can land in it.
        if let Some((at, to)) = self.crumb {
            for s in 0..2 {
                let v = (0..4).fold(0, |v, t| v | (quads[4 * s + t] >> to & 0x0303_0303) << (2 * t));
                word(at, s, v);
            }
        }
        if let Some((at, to)) = self.bit {
            let v = (0..8).fold(0, |v, t| v | (quads[t] >> to & 0x0101_0101) << t);
            word(at, 0, v);
        }
    }

    /// The code of element `e` (`< 32`) of row `r` in the unit's bytes `unit`.
    pub fn get(&self, unit: &[u8], r: usize, e: usize) -> u8 {
        let mut u = 0;
        if let Some(at) = self.byte {
            u = unit[Self::pos(at, 8, r, e).0];
        }
        if let Some(at) = self.nib {
            let (o, s) = Self::pos(at, 4, r, e);
            u |= unit[o] >> s & 0xF;
        }
        if let Some((at, to)) = self.crumb {
            let (o, s) = Self::pos(at, 2, r, e);
            u |= (unit[o] >> s & 3) << to;
        }
        if let Some((at, to)) = self.bit {
            let (o, s) = Self::pos(at, 1, r, e);
            u |= (unit[o] >> s & 1) << to;
        }
        u
    }
}

#[cfg(target_arch = "x86_64")]
pub use crate::planes_avx2::{dot_avx2, dot_avxvnni, dot_signed_avx2, dot_vnni, quad, quads};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_of_every_width_comes_back() {
        for bits in [1, 2, 3, 4, 5, 6, 8] {
            let p = Planes::of_bits(bits);
            let mut unit = vec![0u8; p.unit];
            let code = |r: usize, e: usize| ((r * 37 + e * 11 + bits as usize) % (1 << bits)) as u8;
            for r in 0..ROWS {
                for e in 0..32 {
                    p.put(&mut unit, r, e, code(r, e));
                }
            }
            for r in 0..ROWS {
                for e in 0..32 {
                    assert_eq!(p.get(&unit, r, e), code(r, e), "{bits} bits, row {r}, element {e}");
                }
            }
            // Every byte of the unit is used.
            assert!(unit.iter().any(|&b| b != 0));
        }
    }

    #[test]
    fn a_row_at_once_stores_the_bytes_of_put() {
        // Codes with bits above the width too (every plane ignores those), over a unit that
        // starts dirty (put_row overwrites its words).
        let mut seed = 0x9E37_79B9u32;
        let mut next = || {
            seed ^= seed << 13;
            seed ^= seed >> 17;
            seed ^= seed << 5;
            seed as u8
        };
        for bits in [1, 2, 3, 4, 5, 6, 8] {
            let p = Planes::of_bits(bits);
            for _ in 0..20 {
                let codes: [[u8; 32]; ROWS] = std::array::from_fn(|_| std::array::from_fn(|_| next()));
                let mut by_element = vec![0u8; p.unit];
                for (r, c) in codes.iter().enumerate() {
                    for (e, &u) in c.iter().enumerate() {
                        p.put(&mut by_element, r, e, u);
                    }
                }
                let mut by_row = vec![0xA5u8; p.unit];
                for (r, c) in codes.iter().enumerate() {
                    p.put_row(&mut by_row, r, c);
                }
                assert_eq!(by_row, by_element, "{bits} bits");
            }
        }
    }
}
