//! [`ModelFile`]: one view of a GGUF or safetensors file — metadata and logical tensors
//! (a grid-layout weight, such as fp8, and its `_scale_inv` companion folded into one) — for inspect and convert.

use crate::error::{IoError, Result};
use crate::gguf_read::GgufFile;
use crate::grid;
use crate::st::{SafetensorsFile, StTensor};
use crate::ttype::{Plain, TensorType};
use crate::value::Value;
use qforge_core::{Format, QuantTensor, Shape};
use safetensors::Dtype;
use std::borrow::Cow;
use std::collections::HashSet;
use std::path::Path;

/// The two containers qforge reads and writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Container {
    /// GGUF v2 / v3 (llama.cpp's container): metadata, tensor infos, aligned tensor data.
    Gguf,
    /// safetensors: a JSON header of dtype / shape / byte range per tensor, then the data.
    Safetensors,
}

impl Container {
    /// By file extension (`.gguf`, `.safetensors`), case-insensitively.
    pub fn from_path(p: &Path) -> Option<Self> {
        match p.extension()?.to_str()?.to_ascii_lowercase().as_str() {
            "gguf" => Some(Container::Gguf),
            "safetensors" => Some(Container::Safetensors),
            _ => None,
        }
    }
    /// Display name: `"GGUF"` or `"safetensors"`.
    pub fn name(self) -> &'static str {
        match self {
            Container::Gguf => "GGUF",
            Container::Safetensors => "safetensors",
        }
    }
}

/// Where a tensor's bytes are.
#[derive(Clone, Debug)]
pub enum TensorData<'a> {
    /// In qforge's layout, borrowed from the file.
    Borrowed(&'a [u8]),
    /// A grid-layout weight (fp8): its values in the file, and its scale_inv grid as LE bytes
    /// of the layout's scale dtype.
    Grid {
        /// The `rows × cols` fp8 values, as stored.
        values: &'a [u8],
        /// The scale grid, row-major: the companion's bytes (borrowed when already in the
        /// layout's scale dtype, else widened exactly to it), or all-ones when the file has
        /// no companion.
        scale_inv: Cow<'a, [u8]>,
    },
}

/// A logical tensor of a model file.
#[derive(Clone, Debug)]
pub struct TensorView<'a> {
    /// Tensor name as stored in the file.
    pub name: String,
    /// Element type: a plain dtype or a registered format (for safetensors fp8, the grid format
    /// its dtype maps to).
    pub ty: TensorType,
    /// Shape, outermost first (the last dimension is the row).
    pub dims: Vec<usize>,
    /// Where its bytes are (see [`TensorData`]).
    pub data: TensorData<'a>,
    /// Absolute byte offset of the (first) stored tensor in the file.
    pub offset: u64,
    /// For a grid-layout weight: the name of the companion folded into it.
    pub companion: Option<String>,
}

impl<'a> TensorView<'a> {
    /// Number of logical elements: the product of `dims`.
    pub fn numel(&self) -> usize {
        self.dims.iter().product()
    }

    /// Bytes in qforge's layout (grid layouts: values + grid).
    pub fn size(&self) -> usize {
        match &self.data {
            TensorData::Borrowed(b) => b.len(),
            TensorData::Grid { values, scale_inv } => values.len() + scale_inv.len(),
        }
    }

    /// The bytes in qforge's layout: borrowed, except a grid-layout weight (values and grid are two
    /// places in the file, so they are joined into one buffer).
    pub fn bytes(&self) -> Cow<'a, [u8]> {
        match &self.data {
            TensorData::Borrowed(b) => Cow::Borrowed(b),
            TensorData::Grid { values, scale_inv } => Cow::Owned([*values, &scale_inv[..]].concat()),
        }
    }

    /// The tensor as a [`QuantTensor`] (`None` for plain dtypes), borrowing the file where
    /// the layout allows.
    pub fn quant_tensor(&self) -> Result<Option<QuantTensor<'a>>> {
        match self.ty {
            TensorType::Plain(_) => Ok(None),
            TensorType::Quant(f) => Ok(Some(QuantTensor::new(f, Shape::new(self.dims.clone())?, self.bytes())?)),
        }
    }
}

#[cfg(feature = "cuda")]
use qforge_core::QuantError;

#[cfg(feature = "cuda")]
impl TensorView<'_> {
    /// Upload a quantized tensor to the GPU straight from the file's memory map: the borrowed
    /// bytes are handed to the driver's host-to-device copy (which stages pageable memory
    /// through its own pinned buffer) on `stream`; qforge makes no copy of its own, except
    /// for an fp8 weight, whose values and scale grid are joined first (they are two places
    /// in the file). Plain-dtype tensors are refused (`Ok(None)`).
    pub fn upload(
        &self,
        gpu: &qforge_cuda::Cuda,
        stream: &std::sync::Arc<cudarc::driver::CudaStream>,
    ) -> std::result::Result<Option<qforge_cuda::DeviceQuantTensor>, qforge_cuda::CudaError> {
        let t = match self.quant_tensor() {
            Ok(Some(t)) => t,
            Ok(None) => return Ok(None),
            Err(e) => return Err(qforge_cuda::CudaError::Quant(QuantError::InvalidShape { reason: e.to_string() })),
        };
        gpu.upload(&t, stream).map(Some)
    }
}

/// A parsed model file of either container.
#[derive(Debug)]
pub struct ModelFile<'a> {
    /// Which container the file is.
    pub container: Container,
    /// GGUF version (None for safetensors).
    pub version: Option<u32>,
    /// GGUF metadata, or safetensors `__metadata__` as string values.
    pub metadata: Vec<(Cow<'a, str>, Value<'a>)>,
    /// Logical tensors, in storage order (shard, then byte offset); a grid weight's companion
    /// is folded into it rather than listed.
    pub tensors: Vec<TensorView<'a>>,
}

impl<'a> ModelFile<'a> {
    /// Parse `bytes` as `container`.
    ///
    /// # Errors
    ///
    /// Whatever [`GgufFile::parse`] or [`SafetensorsFile::parse`] reports, and the errors of
    /// [`ModelFile::from_safetensors_shards`].
    pub fn parse(bytes: &'a [u8], container: Container) -> Result<Self> {
        match container {
            Container::Gguf => Self::from_gguf(GgufFile::parse(bytes)?),
            Container::Safetensors => Self::from_safetensors(SafetensorsFile::parse(bytes)?),
        }
    }

    /// The model view of a parsed GGUF file: one [`TensorView`] per tensor, borrowing its bytes.
    /// Never fails today; returns `Result` for symmetry with [`ModelFile::from_safetensors`].
    pub fn from_gguf(g: GgufFile<'a>) -> Result<Self> {
        let tensors = g
            .tensors
            .iter()
            .map(|t| TensorView {
                name: t.name.to_string(),
                ty: t.ty,
                dims: t.dims(),
                data: TensorData::Borrowed(g.tensor_bytes(t)),
                offset: t.offset,
                companion: None,
            })
            .collect();
        Ok(ModelFile { container: Container::Gguf, version: Some(g.version), metadata: g.metadata, tensors })
    }

    /// The model view of one safetensors file ([`ModelFile::from_safetensors_shards`] with one
    /// shard).
    ///
    /// # Errors
    ///
    /// As [`ModelFile::from_safetensors_shards`].
    pub fn from_safetensors(s: SafetensorsFile<'a>) -> Result<Self> {
        Self::from_safetensors_shards(vec![s])
    }

    /// The shards of one checkpoint as one model: tensors of every shard (in shard order,
    /// then file order; a name in two shards is an error), an fp8 weight folded with its
    /// `_scale_inv` companion wherever the companion is stored, `__metadata__` of the first
    /// shard.
    ///
    /// # Errors
    ///
    /// [`IoError::DuplicateTensor`] for a name in two shards; [`IoError::BadTensor`] for a
    /// safetensors dtype qforge does not handle, or a companion whose shape or dtype does not
    /// fit its weight.
    pub fn from_safetensors_shards(shards: Vec<SafetensorsFile<'a>>) -> Result<Self> {
        let mut seen: HashSet<&str> = HashSet::new();
        for t in shards.iter().flat_map(|s| &s.tensors) {
            if !seen.insert(&t.name) {
                return Err(IoError::DuplicateTensor { name: t.name.clone() });
            }
        }
        let all: Vec<(usize, &StTensor<'a>)> =
            shards.iter().enumerate().flat_map(|(i, s)| s.tensors.iter().map(move |t| (i, t))).collect();
        let find = |name: &str| all.iter().find(|(_, t)| t.name == name).map(|(_, t)| *t);
        let mut folded: HashSet<String> = HashSet::new();
        let mut tensors = Vec::with_capacity(all.len());
        let mut shard_of = Vec::with_capacity(all.len());
        for &(shard, t) in &all {
            if let Some(fmt) = grid::format_of(t.dtype) {
                let ty = TensorType::Quant(fmt);
                let (n, k) = grid::rows_cols(&t.shape).unwrap_or((1, 1));
                let cname = grid::companion_name(&t.name);
                let (scale_inv, companion) = match find(&cname) {
                    Some(c) => (scale_grid(fmt, c, &t.name, n, k)?, Some(cname)),
                    None => (Cow::Owned(grid::unit_grid(fmt, n, k)), None),
                };
                if let Some(c) = &companion {
                    folded.insert(c.clone());
                }
                tensors.push(TensorView {
                    name: t.name.clone(),
                    ty,
                    dims: if t.shape.is_empty() { vec![1] } else { t.shape.clone() },
                    data: TensorData::Grid { values: t.data, scale_inv },
                    offset: t.offset,
                    companion,
                });
                shard_of.push(shard);
            }
        }
        for &(shard, t) in &all {
            if folded.contains(&t.name) || grid::format_of(t.dtype).is_some() {
                continue;
            }
            tensors.push(TensorView {
                name: t.name.clone(),
                ty: TensorType::Plain(plain_of(t)?),
                dims: if t.shape.is_empty() { vec![1] } else { t.shape.clone() },
                data: TensorData::Borrowed(t.data),
                offset: t.offset,
                companion: None,
            });
            shard_of.push(shard);
        }
        let mut order: Vec<usize> = (0..tensors.len()).collect();
        order.sort_by_key(|&i| (shard_of[i], tensors[i].offset));
        let mut slots: Vec<Option<TensorView<'a>>> = tensors.into_iter().map(Some).collect();
        let tensors = order.into_iter().filter_map(|i| slots[i].take()).collect();
        let metadata = shards
            .into_iter()
            .next()
            .map(|s| s.metadata)
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (Cow::Owned(k), Value::String(Cow::Owned(v))))
            .collect();
        Ok(ModelFile { container: Container::Safetensors, version: None, metadata, tensors })
    }

    /// A logical tensor by name (a folded companion's name finds nothing).
    pub fn tensor(&self, name: &str) -> Option<&TensorView<'a>> {
        self.tensors.iter().find(|t| t.name == name)
    }
}

/// The plain type of a safetensors dtype, or a typed error for dtypes qforge does not handle.
pub(crate) fn plain_of(t: &StTensor<'_>) -> Result<Plain> {
    Ok(match t.dtype {
        Dtype::F32 => Plain::F32,
        Dtype::F16 => Plain::F16,
        Dtype::BF16 => Plain::Bf16,
        Dtype::I8 => Plain::I8,
        Dtype::I16 => Plain::I16,
        Dtype::I32 => Plain::I32,
        Dtype::I64 => Plain::I64,
        Dtype::F64 => Plain::F64,
        d => return Err(IoError::tensor(&t.name, format!("safetensors dtype {d} is not supported by qforge"))),
    })
}

/// The safetensors dtype of a plain type.
pub fn st_dtype(p: Plain) -> Dtype {
    match p {
        Plain::F32 => Dtype::F32,
        Plain::F16 => Dtype::F16,
        Plain::Bf16 => Dtype::BF16,
        Plain::I8 => Dtype::I8,
        Plain::I16 => Dtype::I16,
        Plain::I32 => Dtype::I32,
        Plain::I64 => Dtype::I64,
        Plain::F64 => Dtype::F64,
    }
}

/// The companion grid as LE bytes of the format's scale dtype, checked against the weight's
/// shape (f16 / bf16 grids are widened exactly to f32 scales).
fn scale_grid<'a>(f: &dyn Format, c: &StTensor<'a>, weight: &str, n: usize, k: usize) -> Result<Cow<'a, [u8]>> {
    let want = grid::grid_dims(f, n, k).unwrap_or([0, 0]);
    let shape_ok = c.shape == want || (c.shape.iter().product::<usize>() == want[0] * want[1] && c.shape.len() <= 2);
    if !shape_ok {
        return Err(IoError::tensor(
            weight,
            format!("companion {} has shape {:?}; a {n} x {k} weight needs {:?}", c.name, c.shape, want),
        ));
    }
    let target = grid::st_dtypes(f).map_or(Dtype::F32, |(_, s)| s);
    let widen = |to_f32: fn([u8; 2]) -> f32| -> Cow<'a, [u8]> {
        Cow::Owned(c.data.chunks_exact(2).flat_map(|b| to_f32([b[0], b[1]]).to_le_bytes()).collect())
    };
    Ok(match (c.dtype, target) {
        (d, t) if d == t => Cow::Borrowed(c.data),
        (Dtype::BF16, Dtype::F32) => widen(|b| half::bf16::from_le_bytes(b).to_f32()),
        (Dtype::F16, Dtype::F32) => widen(|b| half::f16::from_le_bytes(b).to_f32()),
        (d, t) => return Err(IoError::tensor(weight, format!("companion {} has dtype {d}; {t} expected", c.name))),
    })
}
