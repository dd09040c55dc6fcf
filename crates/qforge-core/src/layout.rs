//! Tensor layouts as data: how a format stores a `rows × cols` tensor, which every layer above
//! the format crates (padding, sharding, CPU and CUDA kernels, tiling, file I/O, the CLI) reads
//! instead of recognising formats by name.
//!
//! Three shapes cover every format:
//! * [`Layout::Blocks`]: rows of self-contained blocks (every GGUF type): each row padded to
//!   whole blocks, scales inside the blocks, nothing stored outside the rows.
//! * [`Layout::Groups`]: rows of groups along K, each group one scale then its packed values
//!   (int4g): a block layout whose block is one scale group, with the group size and scale
//!   dtype spelled out (run-time parameters, `Params`).
//! * [`Layout::Grid`]: one value per element, row-major, no padding, then a *side section*:
//!   one scale per `tile_rows × tile_cols` tile, row-major (fp8's 128 × 128 `scale_inv`).

use crate::dtype::DType;
use crate::error::QuantError;
use half::{bf16, f16};

/// The encoding of a grid layout's values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ElemType {
    /// OCP 8-bit float e4m3fn (max 448, NaN but no infinities): safetensors `F8_E4M3`.
    F8E4M3,
    /// OCP 8-bit float e5m2 (IEEE-style infinities and NaNs): safetensors `F8_E5M2`.
    F8E5M2,
}

impl ElemType {
    /// Bytes of one stored value.
    pub const fn bytes(self) -> usize {
        match self {
            ElemType::F8E4M3 | ElemType::F8E5M2 => 1,
        }
    }

    /// The dtype name safetensors (and PyTorch) use for it.
    pub const fn name(self) -> &'static str {
        match self {
            ElemType::F8E4M3 => "F8_E4M3",
            ElemType::F8E5M2 => "F8_E5M2",
        }
    }
}

/// How a format lays out a `rows × cols` tensor (see the module docs). Obtain it with
/// [`Format::layout`](crate::Format::layout).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layout {
    /// Each row padded to whole blocks of `block_size` elements, `block_bytes` bytes each.
    Blocks {
        /// Logical elements per block.
        block_size: usize,
        /// Bytes per block.
        block_bytes: usize,
    },
    /// Each row padded to whole groups of `group_size` elements; a group is one scale of
    /// `scale_dtype` followed by the values at `value_bits` bits each: `group_bytes` bytes.
    Groups {
        /// Elements per group (one scale each).
        group_size: usize,
        /// Bytes per group, scale included.
        group_bytes: usize,
        /// Bits per stored value.
        value_bits: u32,
        /// Dtype of the per-group scale.
        scale_dtype: DType,
    },
    /// `rows × cols` values of `elem`, row-major, unpadded, then the side section: a grid of
    /// `ceil(rows / tile_rows) × ceil(cols / tile_cols)` scales of `scale_dtype`, row-major,
    /// little-endian; value = `decode(elem) × scale` of its tile.
    Grid {
        /// The values' encoding.
        elem: ElemType,
        /// Rows sharing one scale.
        tile_rows: usize,
        /// Columns sharing one scale.
        tile_cols: usize,
        /// Dtype of the grid's scales.
        scale_dtype: DType,
    },
}

impl Layout {
    /// `(elements, bytes)` of the unit a row is stored in: a block, a group, or one value.
    pub const fn row_unit(&self) -> (usize, usize) {
        match *self {
            Layout::Blocks { block_size, block_bytes } => (block_size, block_bytes),
            Layout::Groups { group_size, group_bytes, .. } => (group_size, group_bytes),
            Layout::Grid { elem, .. } => (1, elem.bytes()),
        }
    }

    /// `(rows, cols)` of the region that shares one scale: `(1, block size)` for blocks,
    /// `(1, group size)` for groups, the tile for a grid.
    pub const fn scale_tile(&self) -> (usize, usize) {
        match *self {
            Layout::Blocks { block_size, .. } => (1, block_size),
            Layout::Groups { group_size, .. } => (1, group_size),
            Layout::Grid { tile_rows, tile_cols, .. } => (tile_rows, tile_cols),
        }
    }

    /// Dtype of the scales a layout stores on their own (groups and grids); `None` for
    /// blocks, whose scales are part of the block encoding.
    pub const fn scale_dtype(&self) -> Option<DType> {
        match *self {
            Layout::Blocks { .. } => None,
            Layout::Groups { scale_dtype, .. } | Layout::Grid { scale_dtype, .. } => Some(scale_dtype),
        }
    }

    /// The grid's `(rows, cols)` for a `rows × cols` tensor; `None` without a grid.
    pub const fn grid_dims(&self, rows: usize, cols: usize) -> Option<(usize, usize)> {
        match *self {
            Layout::Grid { tile_rows, tile_cols, .. } => Some((rows.div_ceil(tile_rows), cols.div_ceil(tile_cols))),
            _ => None,
        }
    }

    /// Bytes of one stored row of `cols` elements (padded to whole units).
    ///
    /// # Errors
    /// [`QuantError::Overflow`] when the size does not fit in `usize`.
    pub fn row_bytes(&self, cols: usize) -> Result<usize, QuantError> {
        let (n, b) = self.row_unit();
        cols.div_ceil(n).checked_mul(b).ok_or(QuantError::Overflow { what: "row size in bytes" })
    }

    /// Bytes of the side section stored after the rows (the grid; 0 for other layouts).
    ///
    /// # Errors
    /// [`QuantError::Overflow`] when the size does not fit in `usize`.
    pub fn side_bytes(&self, rows: usize, cols: usize) -> Result<usize, QuantError> {
        match (self.grid_dims(rows, cols), self.scale_dtype()) {
            (Some((gr, gc)), Some(dt)) => gr
                .checked_mul(gc)
                .and_then(|n| n.checked_mul(dt.size()))
                .ok_or(QuantError::Overflow { what: "scale grid size" }),
            _ => Ok(0),
        }
    }

    /// Bytes of a whole `rows × cols` tensor: the rows, then the side section.
    ///
    /// # Errors
    /// [`QuantError::Overflow`] when the size does not fit in `usize`.
    pub fn tensor_bytes(&self, rows: usize, cols: usize) -> Result<usize, QuantError> {
        let of = || QuantError::Overflow { what: "tensor size in bytes" };
        let body = self.row_bytes(cols)?.checked_mul(rows).ok_or_else(of)?;
        body.checked_add(self.side_bytes(rows, cols)?).ok_or_else(of)
    }

    /// Where a tensor may be split (sharding, windows): `(row multiple, column multiple)`.
    pub const fn split_granularity(&self) -> (usize, usize) {
        match *self {
            Layout::Grid { tile_rows, tile_cols, .. } => (tile_rows, tile_cols),
            _ => (1, self.row_unit().0),
        }
    }

    /// Where the rows from `row0` on start in a `rows × cols` tensor: `(byte offset in the
    /// rows section, byte offset in the side section)`. The tail from there is itself the
    /// layout of the remaining rows (the grid rows of a grid layout included), which is how a
    /// kernel works on a range of rows.
    ///
    /// # Errors
    /// [`QuantError::InvalidShape`] when `row0` is past `rows` or not a multiple of the row
    /// split granularity ([`Layout::split_granularity`]); [`QuantError::Overflow`] for sizes
    /// past `usize`.
    pub fn row_offsets(&self, rows: usize, cols: usize, row0: usize) -> Result<(usize, usize), QuantError> {
        let g = self.split_granularity().0;
        if row0 > rows || !row0.is_multiple_of(g) {
            return Err(QuantError::InvalidShape {
                reason: format!("row {row0} of {rows}: row ranges of this layout start at multiples of {g}"),
            });
        }
        let of = || QuantError::Overflow { what: "row offset in bytes" };
        let body = self.row_bytes(cols)?.checked_mul(row0).ok_or_else(of)?;
        let side = match (self.grid_dims(rows, cols), self.scale_dtype()) {
            (Some((_, gc)), Some(dt)) => {
                (row0 / g).checked_mul(gc).and_then(|c| c.checked_mul(dt.size())).ok_or_else(of)?
            }
            _ => 0,
        };
        Ok((body, side))
    }

    /// The side section of the window `rows × cols` of a `n_rows × n_cols` tensor whose side
    /// section is `side`: the grid cells covering the window, row-major; cells outside the
    /// tensor (padding) hold scale 1. Empty for layouts without a side section.
    ///
    /// # Errors
    /// [`QuantError::ShapeMismatch`] when `side` is not the tensor's side section,
    /// [`QuantError::InvalidShape`] when the window does not start at a multiple of
    /// [`Layout::split_granularity`], [`QuantError::Overflow`] for sizes past `usize`.
    pub fn side_window(
        &self,
        side: &[u8],
        n_rows: usize,
        n_cols: usize,
        rows: std::ops::Range<usize>,
        cols: std::ops::Range<usize>,
    ) -> Result<Vec<u8>, QuantError> {
        let want = self.side_bytes(n_rows, n_cols)?;
        if side.len() != want {
            return Err(QuantError::ShapeMismatch { what: "side section bytes", expected: want, actual: side.len() });
        }
        let (Some((gr, gc)), Some(dt)) = (self.grid_dims(n_rows, n_cols), self.scale_dtype()) else {
            return Ok(Vec::new());
        };
        let (tr, tc) = self.scale_tile();
        if !rows.start.is_multiple_of(tr) || !cols.start.is_multiple_of(tc) {
            return Err(QuantError::InvalidShape {
                reason: format!("windows of this layout start at multiples of {tr} rows and {tc} columns"),
            });
        }
        let (r0, r1) = (rows.start / tr, rows.end.div_ceil(tr));
        let (c0, c1) = (cols.start / tc, cols.end.div_ceil(tc));
        let (es, one) = (dt.size(), one_bytes(dt));
        let mut out = Vec::with_capacity(r1.saturating_sub(r0) * c1.saturating_sub(c0) * es);
        for r in r0..r1 {
            for c in c0..c1 {
                if r < gr && c < gc {
                    let i = (r * gc + c) * es;
                    out.extend_from_slice(&side[i..i + es]);
                } else {
                    out.extend_from_slice(&one[..es]);
                }
            }
        }
        Ok(out)
    }
}

/// The little-endian bytes of 1.0 in `dt` (the neutral scale), padded to 4 bytes.
fn one_bytes(dt: DType) -> [u8; 4] {
    match dt {
        DType::F32 => 1f32.to_le_bytes(),
        DType::F16 => {
            let [a, b] = f16::ONE.to_le_bytes();
            [a, b, 0, 0]
        }
        DType::Bf16 => {
            let [a, b] = bf16::ONE.to_le_bytes();
            [a, b, 0, 0]
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GRID: Layout = Layout::Grid { elem: ElemType::F8E4M3, tile_rows: 4, tile_cols: 8, scale_dtype: DType::F32 };

    #[test]
    fn row_offsets_point_at_the_tail_layout() {
        let b = Layout::Blocks { block_size: 32, block_bytes: 18 };
        assert_eq!(b.row_offsets(10, 100, 3), Ok((3 * 4 * 18, 0)));
        assert_eq!(b.row_offsets(10, 100, 10), Ok((10 * 4 * 18, 0)));
        assert!(b.row_offsets(10, 100, 11).is_err());
        // 9 × 20 tensor, 4 × 8 tiles: grid 3 × 3 of f32; rows from 4 start at grid row 1.
        assert_eq!(GRID.row_offsets(9, 20, 4), Ok((4 * 20, 3 * 4)));
        assert_eq!(GRID.row_offsets(9, 20, 8), Ok((8 * 20, 2 * 3 * 4)));
        assert!(matches!(GRID.row_offsets(9, 20, 2), Err(QuantError::InvalidShape { .. })));
        // The tail is the layout of the remaining rows: the sizes add up.
        let (body, side) = GRID.row_offsets(9, 20, 4).unwrap_or_default();
        assert_eq!(GRID.row_bytes(20).map(|r| r * 5 + body), Ok(9 * 20));
        assert_eq!(GRID.side_bytes(5, 20).map(|t| t + side), GRID.side_bytes(9, 20));
    }

    #[test]
    fn sizes_follow_the_data() {
        let b = Layout::Blocks { block_size: 32, block_bytes: 18 };
        assert_eq!((b.row_bytes(33).unwrap(), b.side_bytes(7, 33).unwrap()), (36, 0));
        assert_eq!((b.split_granularity(), b.tensor_bytes(3, 64).unwrap()), ((1, 32), 108));
        let g = Layout::Groups { group_size: 64, group_bytes: 34, value_bits: 4, scale_dtype: DType::F16 };
        assert_eq!((g.row_bytes(65).unwrap(), g.scale_tile(), g.scale_dtype()), (68, (1, 64), Some(DType::F16)));
        // 9 x 17 values; grid ceil(9/4) x ceil(17/8) = 3 x 3 f32.
        assert_eq!((GRID.row_bytes(17).unwrap(), GRID.grid_dims(9, 17)), (17, Some((3, 3))));
        assert_eq!((GRID.side_bytes(9, 17).unwrap(), GRID.tensor_bytes(9, 17).unwrap()), (36, 9 * 17 + 36));
        assert_eq!(GRID.split_granularity(), (4, 8));
        assert!(GRID.tensor_bytes(usize::MAX, 2).is_err());
    }

    #[test]
    fn side_windows_pad_with_unit_scales() {
        // A 2 x 2 grid (5 x 9 values) with scales 10, 11, 12, 13.
        let side: Vec<u8> = [10f32, 11., 12., 13.].iter().flat_map(|v| v.to_le_bytes()).collect();
        let w = GRID.side_window(&side, 5, 9, 4..12, 0..24).unwrap();
        let got: Vec<f32> = w.chunks_exact(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
        assert_eq!(got, [12., 13., 1., 1., 1., 1.]);
        assert!(GRID.side_window(&side, 5, 9, 2..5, 0..9).is_err(), "a window inside a tile is refused");
        assert!(GRID.side_window(&side[4..], 5, 9, 0..5, 0..9).is_err(), "a short grid is refused");
        let b = Layout::Blocks { block_size: 32, block_bytes: 18 };
        assert_eq!(b.side_window(&[], 5, 9, 0..5, 0..9).unwrap(), Vec::<u8>::new());
    }
}
