//! Row-interleaved block layouts for kernels that consume R weight rows at once (the layout
//! of ggml's `q4_0x4` / `q4_0x8` repacks, without their intra-block shuffles): within each
//! group of R rows, block column j of rows r..r+R is stored contiguously.

use qforge_core::{QuantError, QuantTensor};

/// The rows' blocks of `t` interleaved in groups of `r` rows. N is padded up to a multiple of
/// `r` with blocks that decode to zeros. Returns the bytes and the padded row count.
pub fn interleave_rows(t: &QuantTensor<'_>, r: usize) -> Result<(Vec<u8>, usize), QuantError> {
    if r == 0 {
        return Err(QuantError::InvalidShape { reason: "interleave factor must be at least 1".into() });
    }
    let d = t.format().desc();
    let (bb, rb) = (d.block_bytes, t.row_bytes());
    let nblocks = rb / bb;
    let n_to = crate::round_up(t.rows(), r)?;
    let zero = t.format().zero_block();
    let mut out = Vec::with_capacity(n_to.checked_mul(rb).ok_or(QuantError::Overflow { what: "interleaved size" })?);
    for g in (0..n_to).step_by(r) {
        for j in 0..nblocks {
            for row in g..g + r {
                match t.row(row) {
                    Some(bytes) => out.extend_from_slice(&bytes[j * bb..(j + 1) * bb]),
                    None => out.extend_from_slice(&zero),
                }
            }
        }
    }
    Ok((out, n_to))
}

/// Inverse of [`interleave_rows`]: the first `rows` rows of `row_bytes` bytes each, in plain
/// row-major order.
pub fn deinterleave_rows(
    data: &[u8],
    block_bytes: usize,
    row_bytes: usize,
    r: usize,
    rows: usize,
) -> Result<Vec<u8>, QuantError> {
    if r == 0 || block_bytes == 0 || !row_bytes.is_multiple_of(block_bytes) {
        return Err(QuantError::InvalidShape { reason: "invalid interleave geometry".into() });
    }
    let n_to = crate::round_up(rows, r)?;
    let want = n_to.checked_mul(row_bytes).ok_or(QuantError::Overflow { what: "interleaved size" })?;
    if data.len() != want {
        return Err(QuantError::ShapeMismatch { what: "interleaved bytes", expected: want, actual: data.len() });
    }
    let nblocks = row_bytes / block_bytes;
    let mut out = vec![0u8; rows * row_bytes];
    for (row, dst) in out.chunks_exact_mut(row_bytes).enumerate() {
        let (g, i) = (row / r * r, row % r);
        for j in 0..nblocks {
            let src = (g * nblocks + j * r + i) * block_bytes;
            dst[j * block_bytes..(j + 1) * block_bytes].copy_from_slice(&data[src..src + block_bytes]);
        }
    }
    Ok(out)
}
