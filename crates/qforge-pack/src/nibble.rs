//! Nibble and bit packing orders used by the formats, as pure functions.
//!
//! * [`NibbleOrder::SplitHalves`]: ggml's order (q4_0, q4_1, iq4_nl, mxfp4, int4g): in a group
//!   of `n` values, byte `j` holds value `j` in its low nibble and value `j + n/2` in its high
//!   nibble.
//! * [`NibbleOrder::Adjacent`]: byte `j` holds value `2j` low and `2j + 1` high (the order of
//!   torch `uint4` packing and of most GPTQ-style checkpoints).
//! * [`NibbleOrder::AdjacentHighFirst`]: byte `j` holds value `2j` high and `2j + 1` low.
//!
//! Bit planes (q5_0's `qh`, q3_k's `hmask`, tq's ternary digits aside) are packed LSB first
//! with [`pack_bits`] / [`unpack_bits`].

use qforge_core::QuantError;

/// The order in which 4-bit values share a byte.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NibbleOrder {
    /// ggml's order (q4_0, q4_1, iq4_nl, mxfp4, int4g): in a group of `n` values, byte `j` holds
    /// value `j` in its low nibble and value `j + n/2` in its high nibble.
    SplitHalves,
    /// Byte `j` holds value `2j` in its low nibble and `2j + 1` in its high nibble (torch
    /// `uint4`, most GPTQ-style checkpoints).
    Adjacent,
    /// Byte `j` holds value `2j` in its high nibble and `2j + 1` in its low nibble.
    AdjacentHighFirst,
}

fn check(values: usize, bytes: usize, group: usize) -> Result<(), QuantError> {
    if group == 0 || !group.is_multiple_of(2) || !values.is_multiple_of(group) {
        return Err(QuantError::InvalidShape {
            reason: format!("{values} nibbles are not whole groups of an even size {group}"),
        });
    }
    if bytes * 2 != values {
        return Err(QuantError::ShapeMismatch {
            what: "packed bytes for the nibble count",
            expected: values / 2,
            actual: bytes,
        });
    }
    Ok(())
}

/// Pack 4-bit `values` (each < 16; higher bits are dropped) into `out` in `order`, group by
/// group (`group` values per group; SplitHalves pairs within a group).
pub fn pack_nibbles(values: &[u8], order: NibbleOrder, group: usize, out: &mut [u8]) -> Result<(), QuantError> {
    check(values.len(), out.len(), group)?;
    for (v, o) in values.chunks_exact(group).zip(out.chunks_exact_mut(group / 2)) {
        let h = group / 2;
        for (j, b) in o.iter_mut().enumerate() {
            let (lo, hi) = match order {
                NibbleOrder::SplitHalves => (v[j], v[j + h]),
                NibbleOrder::Adjacent => (v[2 * j], v[2 * j + 1]),
                NibbleOrder::AdjacentHighFirst => (v[2 * j + 1], v[2 * j]),
            };
            *b = (lo & 0x0F) | (hi << 4);
        }
    }
    Ok(())
}

/// Inverse of [`pack_nibbles`].
pub fn unpack_nibbles(bytes: &[u8], order: NibbleOrder, group: usize, out: &mut [u8]) -> Result<(), QuantError> {
    check(out.len(), bytes.len(), group)?;
    for (b, v) in bytes.chunks_exact(group / 2).zip(out.chunks_exact_mut(group)) {
        let h = group / 2;
        for (j, &x) in b.iter().enumerate() {
            let (lo, hi) = (x & 0x0F, x >> 4);
            match order {
                NibbleOrder::SplitHalves => (v[j], v[j + h]) = (lo, hi),
                NibbleOrder::Adjacent => (v[2 * j], v[2 * j + 1]) = (lo, hi),
                NibbleOrder::AdjacentHighFirst => (v[2 * j + 1], v[2 * j]) = (lo, hi),
            }
        }
    }
    Ok(())
}

/// Convert packed nibbles from one order to another, in groups of `group` values.
pub fn repack_nibbles(bytes: &[u8], from: NibbleOrder, to: NibbleOrder, group: usize) -> Result<Vec<u8>, QuantError> {
    let mut v = vec![0u8; bytes.len() * 2];
    unpack_nibbles(bytes, from, group, &mut v)?;
    let mut out = vec![0u8; bytes.len()];
    pack_nibbles(&v, to, group, &mut out)?;
    Ok(out)
}

/// Pack the low `bits` bits (1..=8) of each value LSB first into `out`
/// (`out.len() == ceil(values.len() * bits / 8)`).
pub fn pack_bits(values: &[u8], bits: u32, out: &mut [u8]) -> Result<(), QuantError> {
    let need = bit_bytes(values.len(), bits)?;
    if out.len() != need {
        return Err(QuantError::ShapeMismatch {
            what: "packed bytes for the bit count",
            expected: need,
            actual: out.len(),
        });
    }
    out.fill(0);
    let mask = ((1u16 << bits) - 1) as u8;
    for (i, &v) in values.iter().enumerate() {
        let bit = i * bits as usize;
        let word = ((v & mask) as u16) << (bit % 8);
        out[bit / 8] |= word as u8;
        if let Some(next) = out.get_mut(bit / 8 + 1) {
            *next |= (word >> 8) as u8;
        }
    }
    Ok(())
}

/// Inverse of [`pack_bits`]: `out.len()` values of `bits` bits each.
pub fn unpack_bits(bytes: &[u8], bits: u32, out: &mut [u8]) -> Result<(), QuantError> {
    let need = bit_bytes(out.len(), bits)?;
    if bytes.len() != need {
        return Err(QuantError::ShapeMismatch {
            what: "packed bytes for the bit count",
            expected: need,
            actual: bytes.len(),
        });
    }
    let mask = (1u16 << bits) - 1;
    for (i, o) in out.iter_mut().enumerate() {
        let bit = i * bits as usize;
        let lo = bytes[bit / 8] as u16;
        let hi = bytes.get(bit / 8 + 1).copied().unwrap_or(0) as u16;
        *o = (((lo | (hi << 8)) >> (bit % 8)) & mask) as u8;
    }
    Ok(())
}

fn bit_bytes(values: usize, bits: u32) -> Result<usize, QuantError> {
    if !(1..=8).contains(&bits) {
        return Err(QuantError::InvalidShape { reason: format!("{bits} bits per value (expected 1..=8)") });
    }
    values.checked_mul(bits as usize).map(|b| b.div_ceil(8)).ok_or(QuantError::Overflow { what: "packed bit count" })
}
