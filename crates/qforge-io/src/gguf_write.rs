//! The GGUF writer (version 3): the header, metadata and every tensor info are written
//! first (sizes are known from type and shape), then tensor data is streamed one tensor at a
//! time, each padded to `general.alignment`, so memory stays bounded by the largest tensor.

use crate::error::{IoError, Result};
use crate::gguf_read::{DEFAULT_ALIGNMENT, GGUF_MAGIC, MAX_DIMS};
use crate::ttype::TensorType;
use crate::value::{Value, write_str};
use std::borrow::Cow;
use std::io::Write;

/// ggml's `GGML_MAX_NAME`: a tensor name must be shorter than this (NUL included in ggml).
pub const MAX_NAME: usize = 64;

#[derive(Clone, Debug)]
struct Planned {
    name: String,
    ne: Vec<u64>,
    ty: TensorType,
    size: usize,
    rel_offset: u64,
}

/// A GGUF file being described: metadata and tensor infos, then [`GgufWriter::start`].
#[derive(Clone, Debug, Default)]
pub struct GgufWriter {
    metadata: Vec<(String, Value<'static>)>,
    tensors: Vec<Planned>,
    data_len: u64,
}

impl GgufWriter {
    /// An empty description: no metadata, no tensors, alignment [`DEFAULT_ALIGNMENT`].
    pub fn new() -> Self {
        Self::default()
    }

    /// Set a metadata key: replaces the value in place if the key exists, else appends.
    ///
    /// # Errors
    ///
    /// For `general.alignment`: [`IoError::BadAlignment`] unless the value is a `u32` power
    /// of two, and [`IoError::Unwritable`] once tensors have been added (their offsets
    /// already depend on the alignment).
    pub fn set(&mut self, key: &str, value: Value<'_>) -> Result<()> {
        if key == "general.alignment" && !matches!(value, Value::U32(a) if a.is_power_of_two()) {
            return Err(IoError::BadAlignment { reason: format!("{value:?} is not a u32 power of two") });
        }
        if !self.tensors.is_empty() && key == "general.alignment" {
            return Err(IoError::Unwritable {
                container: "GGUF",
                reason: "general.alignment must be set before tensors are added".into(),
            });
        }
        let value = value.into_owned();
        match self.metadata.iter_mut().find(|(k, _)| k == key) {
            Some((_, v)) => *v = value,
            None => self.metadata.push((key.to_string(), value)),
        }
        Ok(())
    }

    /// The alignment in bytes the data section and each tensor will be padded to: the
    /// `general.alignment` set so far, else [`DEFAULT_ALIGNMENT`].
    pub fn alignment(&self) -> usize {
        match self.metadata.iter().find(|(k, _)| k == "general.alignment") {
            Some((_, Value::U32(a))) => *a as usize,
            _ => DEFAULT_ALIGNMENT,
        }
    }

    /// Add a tensor of type `ty` and logical shape `dims` (outermost first). Checks what
    /// ggml will check on load: name length, at most 4 dimensions, a GGML type id, a row
    /// length that is a whole number of blocks, a unique name.
    pub fn add_tensor(&mut self, name: &str, ty: TensorType, dims: &[usize]) -> Result<()> {
        let bad =
            |reason: String| IoError::Unwritable { container: "GGUF", reason: format!("tensor '{name}': {reason}") };
        if name.len() >= MAX_NAME {
            return Err(bad(format!("name is {} bytes; ggml allows at most {}", name.len(), MAX_NAME - 1)));
        }
        if dims.is_empty() || dims.len() > MAX_DIMS {
            return Err(bad(format!("{} dimensions (GGUF tensors have 1 to {MAX_DIMS})", dims.len())));
        }
        if ty.ggml_type().is_none() {
            return Err(bad(format!("GGUF has no type for {} (write a .safetensors file)", ty.name())));
        }
        let cols = *dims.last().unwrap_or(&1);
        if !cols.is_multiple_of(ty.block_size()) {
            return Err(bad(format!(
                "row length {cols} is not a multiple of {}'s block size {}",
                ty.name(),
                ty.block_size()
            )));
        }
        if self.tensors.iter().any(|t| t.name == name) {
            return Err(IoError::DuplicateTensor { name: name.to_string() });
        }
        let size = ty.bytes(dims)?;
        let align = self.alignment() as u64;
        let rel_offset = self.data_len;
        self.data_len = rel_offset
            .checked_add(size as u64)
            .and_then(|e| e.checked_next_multiple_of(align))
            .ok_or_else(|| IoError::overflow("GGUF data section size"))?;
        self.tensors.push(Planned {
            name: name.to_string(),
            ne: dims.iter().rev().map(|&d| d as u64).collect(),
            ty,
            size,
            rel_offset,
        });
        Ok(())
    }

    /// The bytes before the data section: header, metadata, tensor infos, padding.
    pub fn header_bytes(&self) -> Vec<u8> {
        let mut out = Vec::new();
        out.extend_from_slice(&GGUF_MAGIC);
        out.extend_from_slice(&3u32.to_le_bytes());
        out.extend_from_slice(&(self.tensors.len() as u64).to_le_bytes());
        out.extend_from_slice(&(self.metadata.len() as u64).to_le_bytes());
        for (k, v) in &self.metadata {
            write_str(&mut out, k);
            out.extend_from_slice(&v.value_type().id().to_le_bytes());
            v.write(&mut out);
        }
        for t in &self.tensors {
            write_str(&mut out, &t.name);
            out.extend_from_slice(&(t.ne.len() as u32).to_le_bytes());
            t.ne.iter().for_each(|d| out.extend_from_slice(&d.to_le_bytes()));
            out.extend_from_slice(&t.ty.ggml_type().unwrap_or(u32::MAX).to_le_bytes());
            out.extend_from_slice(&t.rel_offset.to_le_bytes());
        }
        out.resize(out.len().next_multiple_of(self.alignment()), 0);
        out
    }

    /// Total size of the file that will be written.
    pub fn file_size(&self) -> u64 {
        self.header_bytes().len() as u64 + self.data_len
    }

    /// Write the header to `w` and return the stream that takes the tensor data in order.
    pub fn start<W: Write>(self, mut w: W) -> Result<GgufStream<W>> {
        w.write_all(&self.header_bytes()).map_err(write_err)?;
        Ok(GgufStream { w, plan: self, next: 0 })
    }
}

fn write_err(e: std::io::Error) -> IoError {
    IoError::Io { op: "write", path: "GGUF output".into(), source: e }
}

/// Tensor data being streamed into a GGUF file, in the order the tensors were added.
pub struct GgufStream<W: Write> {
    w: W,
    plan: GgufWriter,
    next: usize,
}

impl<W: Write> GgufStream<W> {
    /// Name, type and size of the tensor whose data is expected next (`None` when done).
    pub fn next_tensor(&self) -> Option<(&str, TensorType, usize)> {
        self.plan.tensors.get(self.next).map(|t| (t.name.as_str(), t.ty, t.size))
    }

    /// Write the next tensor's data (exactly its planned size) and its alignment padding.
    pub fn write_tensor(&mut self, data: &[u8]) -> Result<()> {
        let t = self
            .plan
            .tensors
            .get(self.next)
            .ok_or_else(|| IoError::Unwritable { container: "GGUF", reason: "more tensor data than tensors".into() })?;
        if data.len() != t.size {
            return Err(IoError::Unwritable {
                container: "GGUF",
                reason: format!("tensor '{}': {} bytes given, {} planned", t.name, data.len(), t.size),
            });
        }
        let pad = (t.size as u64).next_multiple_of(self.plan.alignment() as u64) - t.size as u64;
        self.w.write_all(data).map_err(write_err)?;
        self.w.write_all(&vec![0u8; pad as usize]).map_err(write_err)?;
        self.next += 1;
        Ok(())
    }

    /// Check that every tensor was written, flush, and hand back the writer.
    pub fn finish(mut self) -> Result<W> {
        if self.next != self.plan.tensors.len() {
            return Err(IoError::Unwritable {
                container: "GGUF",
                reason: format!("{} of {} tensors written", self.next, self.plan.tensors.len()),
            });
        }
        self.w.flush().map_err(write_err)?;
        Ok(self.w)
    }
}

/// Metadata of a parsed file as owned (key, value) pairs, for preserving it on convert.
pub fn owned_metadata<'a>(md: &[(Cow<'a, str>, Value<'a>)]) -> Vec<(String, Value<'static>)> {
    md.iter().map(|(k, v)| (k.to_string(), v.clone().into_owned())).collect()
}
