//! The GGUF reader: a hand-written, checked parser over a byte slice (a memory map), with
//! zero-copy tensor views.
//!
//! Layout (little-endian; v2 and v3 are identical on little-endian machines):
//! `"GGUF"`, u32 version, u64 tensor count, u64 metadata count, the metadata key/value pairs
//! (string key, u32 type, value), the tensor infos (string name, u32 n_dims, n_dims × u64 ne
//! (innermost first), u32 ggml type, u64 offset relative to the data section), padding to
//! `general.alignment` (default 32), the data section.

use crate::cursor::Cursor;
use crate::error::{IoError, Result};
use crate::ttype::TensorType;
use crate::value::{Value, ValueType};
use qforge_core::{QuantTensor, Shape};
use std::borrow::Cow;
use std::collections::HashSet;

/// `"GGUF"` as it appears in the file.
pub const GGUF_MAGIC: [u8; 4] = *b"GGUF";
/// Alignment of the data section and of every tensor when `general.alignment` is absent.
pub const DEFAULT_ALIGNMENT: usize = 32;
/// ggml's limit on tensor dimensions (`GGML_MAX_DIMS`).
pub const MAX_DIMS: usize = 4;

/// One tensor of a GGUF file.
#[derive(Clone, Debug)]
pub struct GgufTensor<'a> {
    /// Tensor name as stored (borrowed from the file).
    pub name: Cow<'a, str>,
    /// Dimensions as stored: `ne[0]` (the row length) first.
    pub ne: Vec<u64>,
    /// Element type: a plain dtype or the registered format of its GGML type id.
    pub ty: TensorType,
    /// Offset relative to the start of the data section.
    pub rel_offset: u64,
    /// Absolute byte offset in the file.
    pub offset: u64,
    /// Stored size in bytes.
    pub size: usize,
}

impl GgufTensor<'_> {
    /// Logical shape, outermost first (the reverse of `ne`), as qforge's [`Shape`] orders it.
    pub fn dims(&self) -> Vec<usize> {
        self.ne.iter().rev().map(|&d| d as usize).collect()
    }
}

/// A parsed GGUF file borrowing its bytes (usually a memory map).
#[derive(Debug)]
pub struct GgufFile<'a> {
    /// GGUF version from the header: 2 or 3.
    pub version: u32,
    /// Metadata in file order.
    pub metadata: Vec<(Cow<'a, str>, Value<'a>)>,
    /// Tensor infos in file order, each checked against the file (see [`GgufFile::parse`]).
    pub tensors: Vec<GgufTensor<'a>>,
    /// Alignment in bytes of the data section and of every tensor's offset:
    /// `general.alignment`, or [`DEFAULT_ALIGNMENT`] when absent.
    pub alignment: usize,
    /// Absolute offset of the data section.
    pub data_offset: usize,
    bytes: &'a [u8],
}

impl<'a> GgufFile<'a> {
    /// Parse and validate the header, metadata and tensor infos of `bytes`. Every length,
    /// count, dimension product and offset is checked against the file size (checked
    /// arithmetic) before anything is allocated; tensor data is not touched.
    ///
    /// # Errors
    ///
    /// Any malformed-input variant of [`IoError`]: [`IoError::BadMagic`],
    /// [`IoError::UnsupportedVersion`], [`IoError::Truncated`] (including lying counts),
    /// [`IoError::UnknownValueType`], [`IoError::InvalidUtf8`], [`IoError::TooDeep`],
    /// [`IoError::DuplicateKey`] / [`IoError::DuplicateTensor`], [`IoError::BadAlignment`],
    /// [`IoError::UnknownTensorType`] / [`IoError::UnsupportedTensorType`],
    /// [`IoError::BadTensor`] (more than [`MAX_DIMS`] dimensions, a zero dimension, a row
    /// that is not whole blocks, a misaligned offset), [`IoError::Overflow`] and
    /// [`IoError::OutOfBounds`].
    pub fn parse(bytes: &'a [u8]) -> Result<Self> {
        let mut c = Cursor::new(bytes);
        let magic = c.array::<4>("GGUF magic")?;
        if magic != GGUF_MAGIC {
            return Err(IoError::BadMagic { found: magic });
        }
        let version = c.u32("GGUF version")?;
        if !(version == 2 || version == 3) {
            return Err(IoError::UnsupportedVersion { version });
        }
        let n_tensors = c.u64("tensor count")?;
        let n_kv = c.u64("metadata count")?;
        // Each key/value pair takes at least 13 bytes (key length, type, one-byte value) and
        // each tensor info at least 32, so a count larger than that is a lying count.
        bound(n_kv, 13, &c, "metadata count")?;
        let mut metadata = Vec::with_capacity(n_kv as usize);
        let mut keys = HashSet::with_capacity(n_kv as usize);
        for _ in 0..n_kv {
            let key = c.string("metadata key")?;
            let at = c.pos() as u64;
            let id = c.u32("metadata value type")?;
            let ty = ValueType::from_id(id).ok_or(IoError::UnknownValueType { id, at })?;
            let value = Value::read(&mut c, ty, 0)?;
            if !keys.insert(key) {
                return Err(IoError::DuplicateKey { key: key.to_string() });
            }
            metadata.push((Cow::Borrowed(key), value));
        }
        let alignment = alignment_of(&metadata)?;
        bound(n_tensors, 32, &c, "tensor count")?;
        let mut infos = Vec::with_capacity(n_tensors as usize);
        let mut names = HashSet::with_capacity(n_tensors as usize);
        for _ in 0..n_tensors {
            let name = c.string("tensor name")?;
            let n_dims = c.u32("tensor dimension count")?;
            if n_dims as usize > MAX_DIMS {
                return Err(IoError::tensor(name, format!("{n_dims} dimensions (ggml allows at most {MAX_DIMS})")));
            }
            let mut ne = Vec::with_capacity(n_dims as usize);
            for _ in 0..n_dims {
                ne.push(c.u64("tensor dimension")?);
            }
            let id = c.u32("tensor type")?;
            let rel_offset = c.u64("tensor offset")?;
            if !names.insert(name) {
                return Err(IoError::DuplicateTensor { name: name.to_string() });
            }
            infos.push((name, ne, id, rel_offset));
        }
        let data_offset = c.align_to(alignment).ok_or_else(|| IoError::overflow("data section offset"))?;
        let mut tensors = Vec::with_capacity(infos.len());
        for (name, ne, id, rel_offset) in infos {
            tensors.push(check_tensor(bytes.len(), data_offset, alignment, name, ne, id, rel_offset)?);
        }
        Ok(GgufFile { version, metadata, tensors, alignment, data_offset, bytes })
    }

    /// A metadata value by key.
    pub fn get(&self, key: &str) -> Option<&Value<'a>> {
        self.metadata.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    /// A tensor info by name.
    pub fn tensor(&self, name: &str) -> Option<&GgufTensor<'a>> {
        self.tensors.iter().find(|t| t.name == name)
    }

    /// The stored bytes of a tensor, borrowed from the file (bounds were checked by `parse`).
    pub fn tensor_bytes(&self, t: &GgufTensor<'_>) -> &'a [u8] {
        let start = t.offset as usize;
        self.bytes.get(start..start + t.size).unwrap_or(&[])
    }

    /// A quantized tensor as a [`QuantTensor`] borrowing the file's bytes (no copy).
    /// Plain dtypes are not formats: they give `None`.
    ///
    /// # Errors
    ///
    /// [`IoError::Quant`] if qforge-core rejects the shape or byte length (cannot happen for
    /// a tensor of this file, whose size `parse` computed from the same format).
    pub fn quant_tensor(&self, t: &GgufTensor<'_>) -> Result<Option<QuantTensor<'a>>> {
        match t.ty {
            TensorType::Plain(_) => Ok(None),
            TensorType::Quant(f) => {
                let shape = Shape::new(t.dims())?;
                Ok(Some(QuantTensor::new(f, shape, self.tensor_bytes(t))?))
            }
        }
    }
}

fn bound(count: u64, min_size: u64, c: &Cursor<'_>, what: &'static str) -> Result<()> {
    let need = count.saturating_mul(min_size);
    if need > c.remaining() as u64 {
        return Err(IoError::Truncated { what, need, at: c.pos() as u64, len: (c.pos() + c.remaining()) as u64 });
    }
    Ok(())
}

/// `general.alignment`: a u32, non-zero power of two (as ggml requires); 32 when absent.
fn alignment_of(metadata: &[(Cow<'_, str>, Value<'_>)]) -> Result<usize> {
    match metadata.iter().find(|(k, _)| k == "general.alignment").map(|(_, v)| v) {
        None => Ok(DEFAULT_ALIGNMENT),
        Some(Value::U32(a)) if a.is_power_of_two() => Ok(*a as usize),
        Some(Value::U32(a)) => Err(IoError::BadAlignment { reason: format!("{a} is not a power of two") }),
        Some(v) => Err(IoError::BadAlignment { reason: format!("type {} (expected u32)", v.value_type().name()) }),
    }
}

fn check_tensor<'a>(
    file_len: usize,
    data_offset: usize,
    alignment: usize,
    name: &'a str,
    ne: Vec<u64>,
    id: u32,
    rel_offset: u64,
) -> Result<GgufTensor<'a>> {
    let ty = TensorType::from_ggml(id, name)?;
    if let Some(i) = ne.iter().position(|&d| d == 0) {
        return Err(IoError::tensor(name, format!("dimension {i} is zero")));
    }
    let numel = ne.iter().try_fold(1u64, |a, &d| a.checked_mul(d)).filter(|&n| n <= i64::MAX as u64);
    if numel.is_none() || usize::try_from(numel.unwrap_or(0)).is_err() {
        return Err(IoError::overflow(format!("tensor '{name}': element count of dimensions {ne:?}")));
    }
    let row = ne.first().copied().unwrap_or(1);
    if !row.is_multiple_of(ty.block_size() as u64) {
        return Err(IoError::tensor(
            name,
            format!("row length {row} is not a multiple of {}'s block size {}", ty.name(), ty.block_size()),
        ));
    }
    let dims: Vec<usize> = ne.iter().rev().map(|&d| d as usize).collect();
    let size = ty.bytes(&dims)?;
    if !rel_offset.is_multiple_of(alignment as u64) {
        return Err(IoError::tensor(
            name,
            format!("offset {rel_offset} is not a multiple of the alignment {alignment}"),
        ));
    }
    let offset = (data_offset as u64).checked_add(rel_offset);
    let end = offset.and_then(|o| o.checked_add(size as u64));
    match (offset, end) {
        (Some(offset), Some(end)) if end <= file_len as u64 => {
            Ok(GgufTensor { name: Cow::Borrowed(name), ne, ty, rel_offset, offset, size })
        }
        _ => Err(IoError::OutOfBounds {
            tensor: name.to_string(),
            offset: (data_offset as u64).saturating_add(rel_offset),
            size: size as u64,
            file_len: file_len as u64,
        }),
    }
}
