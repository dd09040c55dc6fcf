//! [`QuantTensor`]: quantized bytes with their format and logical shape, validated.

use crate::error::QuantError;
use crate::format::Format;
use std::borrow::Cow;

/// A logical tensor shape, outermost dimension first; the last dimension is the row (the
/// contiguous, block-quantized one). `[rows, cols]` for a matrix.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Shape(Vec<usize>);

impl Shape {
    /// A shape with at least one dimension, every dimension >= 1, and an element count that
    /// fits in `usize`.
    ///
    /// ```
    /// use qforge_core::Shape;
    ///
    /// let s = Shape::new([4096, 11008])?; // rows x row length (the last dimension)
    /// assert_eq!((s.rows(), s.cols(), s.numel()), (4096, 11008, 4096 * 11008));
    /// assert!(Shape::new([4096, 0]).is_err());
    /// assert!(Shape::new(vec![usize::MAX, 2]).is_err()); // the element count overflows
    /// # Ok::<(), qforge_core::QuantError>(())
    /// ```
    pub fn new(dims: impl Into<Vec<usize>>) -> Result<Self, QuantError> {
        let dims = dims.into();
        if dims.is_empty() {
            return Err(QuantError::shape("a tensor needs at least one dimension"));
        }
        if let Some(i) = dims.iter().position(|&d| d == 0) {
            return Err(QuantError::shape(format!("dimension {i} of {dims:?} is zero")));
        }
        dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).ok_or(QuantError::Overflow { what: "element count" })?;
        Ok(Shape(dims))
    }

    /// The dimensions, outermost first; the last is the quantized row length.
    pub fn dims(&self) -> &[usize] {
        &self.0
    }

    /// Row length (the last dimension).
    pub fn cols(&self) -> usize {
        *self.0.last().unwrap_or(&1)
    }

    /// Number of rows (product of all but the last dimension).
    pub fn rows(&self) -> usize {
        self.0[..self.0.len().saturating_sub(1)].iter().product()
    }

    /// Total logical elements.
    pub fn numel(&self) -> usize {
        self.0.iter().product()
    }
}

impl std::fmt::Display for Shape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self.0.iter().map(|d| d.to_string()).collect();
        f.write_str(&parts.join(","))
    }
}

/// A quantized tensor: `rows` rows of `row_bytes` bytes, each row holding `cols` logical
/// elements padded up to whole blocks, exactly as GGUF stores it, followed by the format's
/// tensor-level side section if it has one ([`Format::aux_bytes`]: a grid layout's scales).
#[derive(Clone)]
pub struct QuantTensor<'a> {
    format: &'static dyn Format,
    shape: Shape,
    row_bytes: usize,
    data: Cow<'a, [u8]>,
}

impl<'a> QuantTensor<'a> {
    /// Wrap `data` (borrowed or owned) after checking it is exactly the size the format and
    /// shape imply.
    pub fn new(format: &'static dyn Format, shape: Shape, data: impl Into<Cow<'a, [u8]>>) -> Result<Self, QuantError> {
        let data = data.into();
        let d = format.desc();
        let row_bytes = format.row_bytes(shape.cols())?;
        let want = Self::expected_bytes(format, &shape)?;
        if !data.len().is_multiple_of(d.block_bytes) {
            return Err(QuantError::NotWholeBlocks {
                what: "tensor data",
                format: d.name,
                len: data.len(),
                block_bytes: d.block_bytes,
            });
        }
        if data.len() != want {
            return Err(QuantError::ShapeMismatch {
                what: "tensor bytes for the given shape",
                expected: want,
                actual: data.len(),
            });
        }
        Ok(QuantTensor { format, shape, row_bytes, data })
    }

    /// Bytes a tensor of `shape` takes in `format`: rows × row bytes + side section.
    pub fn expected_bytes(format: &dyn Format, shape: &Shape) -> Result<usize, QuantError> {
        format.tensor_bytes(shape.rows(), shape.cols())
    }

    /// The format the bytes are stored in (a `with_params` variant where one applies).
    pub fn format(&self) -> &'static dyn Format {
        self.format
    }
    /// The logical shape (real elements, not padded).
    pub fn shape(&self) -> &Shape {
        &self.shape
    }
    /// Number of rows: the product of all dimensions but the last.
    pub fn rows(&self) -> usize {
        self.shape.rows()
    }
    /// Logical row length in elements (the last dimension).
    pub fn cols(&self) -> usize {
        self.shape.cols()
    }
    /// Row length padded up to whole blocks.
    pub fn padded_cols(&self) -> usize {
        let unit = self.format.layout().row_unit().0;
        self.cols().div_ceil(unit) * unit
    }
    /// Stored bytes of one row (padded to whole blocks / groups).
    pub fn row_bytes(&self) -> usize {
        self.row_bytes
    }
    /// All bytes: the rows, then the side section (what a raw file holds).
    pub fn data(&self) -> &[u8] {
        &self.data
    }
    /// The rows' bytes without the side section.
    pub fn rows_data(&self) -> &[u8] {
        &self.data[..self.row_bytes * self.rows()]
    }
    /// The format's tensor-level side section (empty for block formats).
    pub fn aux(&self) -> &[u8] {
        &self.data[self.row_bytes * self.rows()..]
    }
    /// The bytes of row `i`, or `None` past the end.
    pub fn row(&self, i: usize) -> Option<&[u8]> {
        if i >= self.rows() {
            return None;
        }
        let start = i * self.row_bytes;
        self.data.get(start..start + self.row_bytes)
    }
    /// Iterate over rows' bytes.
    pub fn rows_iter(&self) -> std::slice::ChunksExact<'_, u8> {
        self.rows_data().chunks_exact(self.row_bytes.max(1))
    }
    /// The same tensor owning its bytes (copies them if borrowed).
    pub fn into_owned(self) -> QuantTensor<'static> {
        QuantTensor {
            format: self.format,
            shape: self.shape,
            row_bytes: self.row_bytes,
            data: Cow::Owned(self.data.into_owned()),
        }
    }
    /// All bytes (rows, then side section), owned.
    pub fn into_bytes(self) -> Vec<u8> {
        self.data.into_owned()
    }
}

impl std::fmt::Debug for QuantTensor<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QuantTensor")
            .field("format", &self.format.desc().name)
            .field("shape", &self.shape)
            .field("row_bytes", &self.row_bytes)
            .field("bytes", &self.data.len())
            .finish()
    }
}
