//! The tensor's `scale_inv` grid: one f32 per `TILE_ROWS × BLOCK` tile of an N×K weight,
//! row-major, little-endian, stored after the N×K value bytes. [`BLOCK`] is the one definition
//! of the tile size; everything above this crate reads it from the formats' [`Layout`]
//! (`qforge_core::Layout::Grid`).

use qforge_core::{DType, ElemType, Layout, QuantError};

/// Rows and columns of a weight tile (DeepSeek-V3's 128 × 128 blocks); activations use
/// `1 × BLOCK` tiles.
pub const BLOCK: usize = 128;

/// The grid layout of `elem` values with `tile_rows × BLOCK` tiles and f32 scales.
pub const fn layout(elem: ElemType, tile_rows: usize) -> Layout {
    Layout::Grid { elem, tile_rows, tile_cols: BLOCK, scale_dtype: DType::F32 }
}

/// `(grid rows, grid columns)` of an `rows × cols` weight.
pub fn dims(rows: usize, cols: usize) -> (usize, usize) {
    (rows.div_ceil(BLOCK), cols.div_ceil(BLOCK))
}

/// Bytes of the grid of an `rows × cols` weight.
pub fn bytes(rows: usize, cols: usize) -> Result<usize, QuantError> {
    let (gr, gc) = dims(rows, cols);
    gr.checked_mul(gc).and_then(|n| n.checked_mul(4)).ok_or(QuantError::Overflow { what: "fp8 scale grid size" })
}

/// The scales of the grid row covering row `row` of a row of `cols` elements (tiles of
/// `tile_rows` rows): one f32 per [`BLOCK`] columns. Checks that `aux` is a whole number of
/// grid rows of that width and covers `row`.
pub fn row_scales(
    aux: &[u8],
    row: usize,
    cols: usize,
    tile_rows: usize,
) -> Result<impl Iterator<Item = f32> + '_, QuantError> {
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
    let r = row / tile_rows.max(1);
    if r >= gr {
        return Err(QuantError::ShapeMismatch {
            what: "fp8 scale grid rows (ceil(rows/tile rows)) for this row",
            expected: r + 1,
            actual: gr,
        });
    }
    let start = r * width;
    Ok(aux[start..start + width].chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])))
}

/// The block scale for a block whose largest magnitude is `amax`: `amax / max` in f32; 1 for
/// an all-zero block; the smallest positive f32 where `amax / max` underflows to 0 (only for
/// `amax` below ~6e-43), so that a scale is always finite and positive.
pub fn scale_for(amax: f32, max: f32) -> f32 {
    if amax == 0.0 { 1.0 } else { (amax / max).max(f32::from_bits(1)) }
}
