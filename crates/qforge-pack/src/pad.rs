//! Padding and unpadding of plain matrices and of quantized tensors.

use qforge_core::{QuantError, QuantTensor, Shape};

/// `n` rounded up to a multiple of `m` (`m >= 1`), with overflow reported.
pub fn round_up(n: usize, m: usize) -> Result<usize, QuantError> {
    if m == 0 {
        return Err(QuantError::InvalidShape { reason: "padding multiple must be at least 1".into() });
    }
    n.div_ceil(m).checked_mul(m).ok_or(QuantError::Overflow { what: "padded size" })
}

fn check_len(what: &'static str, len: usize, rows: usize, cols: usize) -> Result<(), QuantError> {
    let want = rows.checked_mul(cols).ok_or(QuantError::Overflow { what: "matrix size" })?;
    if len != want {
        return Err(QuantError::ShapeMismatch { what, expected: want, actual: len });
    }
    Ok(())
}

/// A `rows × cols` row-major matrix padded to `rows_to × cols_to` with `fill`.
pub fn pad_matrix<T: Copy>(
    x: &[T],
    rows: usize,
    cols: usize,
    rows_to: usize,
    cols_to: usize,
    fill: T,
) -> Result<Vec<T>, QuantError> {
    check_len("matrix elements", x.len(), rows, cols)?;
    if rows_to < rows || cols_to < cols {
        return Err(QuantError::InvalidShape {
            reason: format!("cannot pad {rows}x{cols} down to {rows_to}x{cols_to}"),
        });
    }
    let n = rows_to.checked_mul(cols_to).ok_or(QuantError::Overflow { what: "padded matrix size" })?;
    let mut out = Vec::with_capacity(n);
    for r in x.chunks_exact(cols.max(1)).take(rows) {
        out.extend_from_slice(r);
        out.resize(out.len() + (cols_to - cols), fill);
    }
    out.resize(n, fill);
    Ok(out)
}

/// The top-left `rows × cols` of a `rows_p × cols_p` row-major matrix.
pub fn unpad_matrix<T: Copy>(
    y: &[T],
    rows_p: usize,
    cols_p: usize,
    rows: usize,
    cols: usize,
) -> Result<Vec<T>, QuantError> {
    check_len("padded matrix elements", y.len(), rows_p, cols_p)?;
    if rows > rows_p || cols > cols_p {
        return Err(QuantError::InvalidShape {
            reason: format!("cannot unpad {rows_p}x{cols_p} to a larger {rows}x{cols}"),
        });
    }
    let mut out = Vec::with_capacity(rows * cols);
    for r in y.chunks_exact(cols_p.max(1)).take(rows) {
        out.extend_from_slice(&r[..cols]);
    }
    Ok(out)
}

/// `t` (N × K) padded to N' = round_up(N, `n_multiple`) rows and K' = round_up(K, lcm(block,
/// `k_multiple`)) columns, for kernels that need whole tiles. The existing blocks are kept
/// byte for byte (so the real elements are quantized exactly as before); new blocks and rows
/// decode to exact zeros. The padded tensor's logical shape is N' × K'; its positions past K
/// in the last original block hold that block's encoding of padding (the code nearest 0),
/// which multiplies zero-padded activations to exactly 0.
pub fn pad_tensor(
    t: &QuantTensor<'_>,
    n_multiple: usize,
    k_multiple: usize,
) -> Result<QuantTensor<'static>, QuantError> {
    let f = t.format();
    let d = f.desc();
    let (n, k) = (t.rows(), t.cols());
    if t.shape().dims().len() != 2 {
        return Err(QuantError::InvalidShape { reason: format!("pad_tensor needs a matrix, got shape {}", t.shape()) });
    }
    let (_, col_gran) = f.split_granularity();
    let kmul = lcm(lcm(d.block_size, k_multiple.max(1))?, col_gran)?;
    let n_to = round_up(n, n_multiple)?;
    let k_to = round_up(k, kmul)?;
    let rb = t.row_bytes();
    let rb_to = f.row_bytes(k_to)?;
    let zero = f.zero_block();
    let shape = Shape::new([n_to, k_to])?;
    let total = QuantTensor::expected_bytes(f, &shape)?;
    let mut data = Vec::with_capacity(total);
    let zero_row: Vec<u8> = zero.iter().copied().cycle().take(rb_to).collect();
    for r in 0..n_to {
        match t.row(r) {
            Some(row) => {
                data.extend_from_slice(row);
                data.extend(zero.iter().copied().cycle().take(rb_to - rb));
            }
            None => data.extend_from_slice(&zero_row),
        }
    }
    data.extend(f.aux_window(t.aux(), n, k, 0..n_to, 0..k_to)?);
    QuantTensor::new(f, shape, data)
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

fn lcm(a: usize, b: usize) -> Result<usize, QuantError> {
    (a / gcd(a, b).max(1)).checked_mul(b).ok_or(QuantError::Overflow { what: "padding multiple" })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pad_and_unpad_matrix() {
        let x = [1, 2, 3, 4, 5, 6];
        let p = pad_matrix(&x, 2, 3, 3, 4, 0).unwrap();
        assert_eq!(p, vec![1, 2, 3, 0, 4, 5, 6, 0, 0, 0, 0, 0]);
        assert_eq!(unpad_matrix(&p, 3, 4, 2, 3).unwrap(), x.to_vec());
        assert!(pad_matrix(&x, 2, 3, 1, 4, 0).is_err());
        assert!(pad_matrix(&x, 3, 3, 3, 4, 0).is_err());
        assert!(round_up(5, 0).is_err());
        assert_eq!(round_up(257, 256).unwrap(), 512);
        assert!(round_up(usize::MAX, 2).is_err());
    }
}
