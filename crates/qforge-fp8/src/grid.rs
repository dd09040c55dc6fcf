//! The tensor's `scale_inv` grid: one f32 per 128×128 block of an N×K weight, row-major,
//! little-endian, stored after the N×K value bytes.

use qforge_core::QuantError;

/// Rows and columns of a weight block.
pub const BLOCK: usize = 128;

/// `(grid rows, grid columns)` of an `rows × cols` tensor.
pub fn dims(rows: usize, cols: usize) -> (usize, usize) {
    (rows.div_ceil(BLOCK), cols.div_ceil(BLOCK))
}

/// Bytes of the grid of an `rows × cols` tensor.
pub fn bytes(rows: usize, cols: usize) -> Result<usize, QuantError> {
    let (gr, gc) = dims(rows, cols);
    gr.checked_mul(gc).and_then(|n| n.checked_mul(4)).ok_or(QuantError::Overflow { what: "fp8 scale grid size" })
}

/// The scales of the grid row covering weight row `row` of a row of `cols` elements: one f32
/// per 128 columns. Checks that `aux` is a whole number of grid rows of that width and covers
/// `row`.
pub fn row_scales(aux: &[u8], row: usize, cols: usize) -> Result<impl Iterator<Item = f32> + '_, QuantError> {
    let gc = cols.div_ceil(BLOCK);
    let width = gc * 4;
    if width == 0 || !aux.len().is_multiple_of(width) {
        return Err(QuantError::ShapeMismatch {
            what: "fp8 scale grid bytes (a multiple of 4 x ceil(cols/128))",
            expected: width,
            actual: aux.len(),
        });
    }
    let gr = aux.len() / width;
    if row / BLOCK >= gr {
        return Err(QuantError::ShapeMismatch {
            what: "fp8 scale grid rows (ceil(rows/128)) for this row",
            expected: row / BLOCK + 1,
            actual: gr,
        });
    }
    let start = row / BLOCK * width;
    Ok(aux[start..start + width].chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])))
}

/// The block scale for a block whose largest magnitude is `amax`: `amax / max` in f32; 1 for
/// an all-zero block; the smallest positive f32 where `amax / max` underflows to 0 (only for
/// `amax` below ~6e-43), so that a scale is always finite and positive.
pub fn scale_for(amax: f32, max: f32) -> f32 {
    if amax == 0.0 { 1.0 } else { (amax / max).max(f32::from_bits(1)) }
}
