//! safetensors in and out, with the `safetensors` crate: its parser validates the header
//! (length against the file, JSON, dtypes, shapes with checked arithmetic, offsets that tile
//! the data exactly); its `Metadata` type builds the header this writer emits. Data is
//! streamed in the caller's order, one tensor at a time.

use crate::error::{IoError, Result};
use safetensors::tensor::{Metadata, TensorInfo};
use safetensors::{Dtype, SafeTensors};
use std::collections::HashMap;
use std::io::Write;

/// One stored tensor of a safetensors file (bytes borrowed from the file).
#[derive(Clone, Debug)]
pub struct StTensor<'a> {
    /// Tensor name (a key of the header).
    pub name: String,
    /// Element type as the header declares it.
    pub dtype: Dtype,
    /// Shape, outermost first (empty for a scalar).
    pub shape: Vec<usize>,
    /// The tensor's bytes, borrowed from the file (exactly `numel × dtype size` bytes).
    pub data: &'a [u8],
    /// Absolute byte offset in the file.
    pub offset: u64,
}

/// A parsed safetensors file borrowing its bytes.
#[derive(Debug)]
pub struct SafetensorsFile<'a> {
    /// `__metadata__`, sorted by key.
    pub metadata: Vec<(String, String)>,
    /// Tensors in file (offset) order.
    pub tensors: Vec<StTensor<'a>>,
}

impl<'a> SafetensorsFile<'a> {
    /// Parse and validate a safetensors file held in `bytes` (usually a memory map); tensor
    /// data is borrowed, not copied.
    ///
    /// # Errors
    ///
    /// [`IoError::Safetensors`] for anything the `safetensors` parser rejects (header length,
    /// JSON, dtypes, shapes, offsets that do not tile the data), [`IoError::OutOfBounds`] for a
    /// tensor whose range lies outside `bytes`, [`IoError::Overflow`] for a header length past
    /// `usize`.
    pub fn parse(bytes: &'a [u8]) -> Result<Self> {
        let (n, meta) = SafeTensors::read_metadata(bytes).map_err(st_err)?;
        let data_start = 8usize.checked_add(n).ok_or_else(|| IoError::overflow("safetensors header length"))?;
        let mut tensors = Vec::new();
        for name in meta.offset_keys() {
            let info =
                meta.info(&name).ok_or_else(|| IoError::Safetensors { reason: format!("tensor '{name}' vanished") })?;
            let (s, e) = info.data_offsets;
            let range = data_start.checked_add(s).zip(data_start.checked_add(e));
            let data = range.and_then(|(a, b)| bytes.get(a..b)).ok_or_else(|| IoError::OutOfBounds {
                tensor: name.clone(),
                offset: (data_start as u64).saturating_add(s as u64),
                size: e.saturating_sub(s) as u64,
                file_len: bytes.len() as u64,
            })?;
            tensors.push(StTensor {
                offset: (data_start + s) as u64,
                name,
                dtype: info.dtype,
                shape: info.shape.clone(),
                data,
            });
        }
        let mut metadata: Vec<(String, String)> = meta.metadata().clone().unwrap_or_default().into_iter().collect();
        metadata.sort();
        Ok(SafetensorsFile { metadata, tensors })
    }

    /// A stored tensor by name.
    pub fn tensor(&self, name: &str) -> Option<&StTensor<'a>> {
        self.tensors.iter().find(|t| t.name == name)
    }
}

fn st_err(e: safetensors::SafeTensorError) -> IoError {
    IoError::Safetensors { reason: e.to_string() }
}

/// A tensor to be written: name, dtype, shape (outermost first).
#[derive(Clone, Debug)]
pub struct StWriteTensor {
    /// Tensor name; must be unique in the file.
    pub name: String,
    /// Element type to declare in the header.
    pub dtype: Dtype,
    /// Shape, outermost first (empty for a scalar).
    pub shape: Vec<usize>,
}

/// Bytes of a tensor of `dtype` and `shape`, or an overflow / sub-byte-dtype error.
pub fn st_bytes(dtype: Dtype, shape: &[usize]) -> Result<usize> {
    let numel = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    let bits = numel
        .and_then(|n| n.checked_mul(dtype.bitsize()))
        .ok_or_else(|| IoError::overflow("safetensors tensor size"))?;
    if !bits.is_multiple_of(8) {
        return Err(IoError::Unwritable {
            container: "safetensors",
            reason: format!("{dtype} tensor is not whole bytes"),
        });
    }
    Ok(bits / 8)
}

/// A safetensors file being streamed: header first, then each tensor's data in order.
pub struct StStream<W: Write> {
    w: W,
    sizes: Vec<(String, usize)>,
    next: usize,
}

/// Write the header for `tensors` (in this order) with `metadata` as `__metadata__`, and
/// return the stream that takes their data.
pub fn write_safetensors<W: Write>(
    mut w: W,
    metadata: &[(String, String)],
    tensors: &[StWriteTensor],
) -> Result<StStream<W>> {
    let mut infos = Vec::with_capacity(tensors.len());
    let mut sizes = Vec::with_capacity(tensors.len());
    let mut offset = 0usize;
    for t in tensors {
        let n = st_bytes(t.dtype, &t.shape)?;
        let end = offset.checked_add(n).ok_or_else(|| IoError::overflow("safetensors data size"))?;
        infos
            .push((t.name.clone(), TensorInfo { dtype: t.dtype, shape: t.shape.clone(), data_offsets: (offset, end) }));
        sizes.push((t.name.clone(), n));
        offset = end;
    }
    if let Some(d) = tensors.iter().enumerate().find(|(i, t)| tensors[..*i].iter().any(|u| u.name == t.name)) {
        return Err(IoError::DuplicateTensor { name: d.1.name.clone() });
    }
    let md: Option<HashMap<String, String>> =
        if metadata.is_empty() { None } else { Some(metadata.iter().cloned().collect()) };
    let meta = Metadata::new(md, infos).map_err(st_err)?;
    let mut header = serde_json::to_vec(&meta).map_err(|e| IoError::Safetensors { reason: e.to_string() })?;
    header.resize(header.len().next_multiple_of(8), b' ');
    let werr = |e| IoError::Io { op: "write", path: "safetensors output".into(), source: e };
    w.write_all(&(header.len() as u64).to_le_bytes()).map_err(werr)?;
    w.write_all(&header).map_err(werr)?;
    Ok(StStream { w, sizes, next: 0 })
}

impl<W: Write> StStream<W> {
    /// Write the next tensor's data (exactly its size).
    pub fn write_tensor(&mut self, data: &[u8]) -> Result<()> {
        let (name, size) = self.sizes.get(self.next).ok_or_else(|| IoError::Unwritable {
            container: "safetensors",
            reason: "more tensor data than tensors".into(),
        })?;
        if data.len() != *size {
            return Err(IoError::Unwritable {
                container: "safetensors",
                reason: format!("tensor '{name}': {} bytes given, {size} expected", data.len()),
            });
        }
        self.w.write_all(data).map_err(|e| IoError::Io {
            op: "write",
            path: "safetensors output".into(),
            source: e,
        })?;
        self.next += 1;
        Ok(())
    }

    /// Check that every declared tensor was written, flush, and hand back the writer.
    ///
    /// # Errors
    ///
    /// [`IoError::Unwritable`] when fewer tensors were written than declared;
    /// [`IoError::Io`] when the flush fails.
    pub fn finish(mut self) -> Result<W> {
        if self.next != self.sizes.len() {
            return Err(IoError::Unwritable {
                container: "safetensors",
                reason: format!("{} of {} tensors written", self.next, self.sizes.len()),
            });
        }
        self.w.flush().map_err(|e| IoError::Io { op: "write", path: "safetensors output".into(), source: e })?;
        Ok(self.w)
    }
}
