//! [`TensorType`]: what a stored tensor's bytes are — a plain dtype (f32, f16, bf16, the
//! integer types, f64) or a registered qforge format (looked up in
//! `qforge_formats::registry()`), with the byte-size rules of each.

use crate::error::{IoError, Result};
use qforge_core::{DType, Format};

/// Plain (unblocked) element types that GGUF and safetensors both know.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Plain {
    /// IEEE 754 binary32 (GGML type 0, safetensors `F32`).
    F32,
    /// IEEE 754 binary16 (GGML type 1, safetensors `F16`).
    F16,
    /// bfloat16: the upper half of an f32 (GGML type 30, safetensors `BF16`).
    Bf16,
    /// Signed 8-bit integer (GGML type 24, safetensors `I8`).
    I8,
    /// Signed 16-bit integer (GGML type 25, safetensors `I16`).
    I16,
    /// Signed 32-bit integer (GGML type 26, safetensors `I32`).
    I32,
    /// Signed 64-bit integer (GGML type 27, safetensors `I64`).
    I64,
    /// IEEE 754 binary64 (GGML type 28, safetensors `F64`).
    F64,
}

impl Plain {
    /// Lower-case name, as the CLI spells it: `f32`, `f16`, `bf16`, `i8`, `i16`, `i32`, `i64`,
    /// `f64`.
    pub fn name(self) -> &'static str {
        match self {
            Plain::F32 => "f32",
            Plain::F16 => "f16",
            Plain::Bf16 => "bf16",
            Plain::I8 => "i8",
            Plain::I16 => "i16",
            Plain::I32 => "i32",
            Plain::I64 => "i64",
            Plain::F64 => "f64",
        }
    }
    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            Plain::I8 => 1,
            Plain::F16 | Plain::Bf16 | Plain::I16 => 2,
            Plain::F32 | Plain::I32 => 4,
            Plain::I64 | Plain::F64 => 8,
        }
    }
    /// The GGML type id (`enum ggml_type`).
    pub fn ggml_type(self) -> u32 {
        match self {
            Plain::F32 => 0,
            Plain::F16 => 1,
            Plain::I8 => 24,
            Plain::I16 => 25,
            Plain::I32 => 26,
            Plain::I64 => 27,
            Plain::F64 => 28,
            Plain::Bf16 => 30,
        }
    }
    /// The float dtype qforge dequantizes to, if this is one.
    pub fn dtype(self) -> Option<DType> {
        match self {
            Plain::F32 => Some(DType::F32),
            Plain::F16 => Some(DType::F16),
            Plain::Bf16 => Some(DType::Bf16),
            _ => None,
        }
    }
    /// The plain type that stores values of float dtype `d` (the inverse of [`Plain::dtype`]).
    pub fn from_dtype(d: DType) -> Self {
        match d {
            DType::F32 => Plain::F32,
            DType::F16 => Plain::F16,
            DType::Bf16 => Plain::Bf16,
        }
    }
}

/// The type of a stored tensor.
#[derive(Clone, Copy, Debug)]
pub enum TensorType {
    /// An unblocked dtype: one element after another, little-endian.
    Plain(Plain),
    /// A registered block format (GGUF quantized types, fp8 block-scaled, …).
    Quant(&'static dyn Format),
}

impl PartialEq for TensorType {
    fn eq(&self, other: &Self) -> bool {
        self.name() == other.name()
    }
}

/// Names of GGML type ids that ggml defines (or once defined) but qforge does not support,
/// so that such a tensor gets a clear "not supported" rather than "unknown" error.
fn ggml_known_unsupported(id: u32) -> Option<&'static str> {
    Some(match id {
        4 => "q4_2 (removed from ggml)",
        5 => "q4_3 (removed from ggml)",
        31 => "q4_0_4_4 (removed from ggml)",
        32 => "q4_0_4_8 (removed from ggml)",
        33 => "q4_0_8_8 (removed from ggml)",
        36 => "iq4_nl_4_4 (removed from ggml)",
        37 => "iq4_nl_4_8 (removed from ggml)",
        38 => "iq4_nl_8_8 (removed from ggml)",
        _ => return None,
    })
}

impl TensorType {
    /// The type of GGML type id `id` for tensor `tensor` (for the error message).
    ///
    /// # Errors
    ///
    /// [`IoError::UnsupportedTensorType`] for an id ggml defines (or once defined) that
    /// qforge has no format for, [`IoError::UnknownTensorType`] for any other unknown id.
    pub fn from_ggml(id: u32, tensor: &str) -> Result<Self> {
        let plain = match id {
            0 => Some(Plain::F32),
            1 => Some(Plain::F16),
            24 => Some(Plain::I8),
            25 => Some(Plain::I16),
            26 => Some(Plain::I32),
            27 => Some(Plain::I64),
            28 => Some(Plain::F64),
            30 => Some(Plain::Bf16),
            _ => None,
        };
        if let Some(p) = plain {
            return Ok(TensorType::Plain(p));
        }
        if let Some(f) = qforge_formats::registry().by_ggml_type(id) {
            return Ok(TensorType::Quant(f));
        }
        match ggml_known_unsupported(id) {
            Some(name) => Err(IoError::UnsupportedTensorType { tensor: tensor.to_string(), id, name }),
            None => Err(IoError::UnknownTensorType { tensor: tensor.to_string(), id }),
        }
    }

    /// A type by its name (case-insensitive, surrounding whitespace ignored): a plain dtype or
    /// a registered format.
    ///
    /// # Errors
    ///
    /// [`IoError::Quant`] (`QuantError::UnknownFormat`) when it is neither.
    pub fn by_name(name: &str) -> Result<Self> {
        let lower = name.trim().to_ascii_lowercase();
        for p in [Plain::F32, Plain::F16, Plain::Bf16, Plain::I8, Plain::I16, Plain::I32, Plain::I64, Plain::F64] {
            if p.name() == lower {
                return Ok(TensorType::Plain(p));
            }
        }
        Ok(TensorType::Quant(qforge_formats::get(name)?))
    }

    /// Lower-case name: the format name, or f32 / f16 / bf16 / i8 … for plain dtypes.
    pub fn name(&self) -> &'static str {
        match self {
            TensorType::Plain(p) => p.name(),
            TensorType::Quant(f) => f.desc().name,
        }
    }

    /// The GGML type id (`enum ggml_type`) GGUF stores for this type; `None` for a registered
    /// format that has no GGUF type (int4g, fp8_e4m3, fp8_e5m2).
    pub fn ggml_type(&self) -> Option<u32> {
        match self {
            TensorType::Plain(p) => Some(p.ggml_type()),
            TensorType::Quant(f) => f.desc().ggml_type,
        }
    }

    /// Elements per block (1 for plain dtypes).
    pub fn block_size(&self) -> usize {
        match self {
            TensorType::Plain(_) => 1,
            TensorType::Quant(f) => f.desc().block_size,
        }
    }

    /// Whether values of this type are floating point (quantized formats included): the
    /// tensors that convert dequantizes or quantizes; integer tensors are copied unchanged.
    pub fn is_float(&self) -> bool {
        match self {
            TensorType::Plain(p) => matches!(p, Plain::F32 | Plain::F16 | Plain::Bf16 | Plain::F64),
            TensorType::Quant(_) => true,
        }
    }

    /// Bytes of a tensor of this type with `dims` (outermost first; the last is the row).
    /// Quantized tensors are laid out as their format's layout says (qforge's raw layout):
    /// rows padded to whole blocks, then a grid layout's scale grid.
    ///
    /// # Errors
    ///
    /// [`IoError::Overflow`] when the size does not fit in `usize` (or the format rejects
    /// the shape).
    pub fn bytes(&self, dims: &[usize]) -> Result<usize> {
        let of = || IoError::overflow(format!("size of a {} tensor of shape {dims:?}", self.name()));
        let numel = dims.iter().try_fold(1usize, |a, &d| a.checked_mul(d)).ok_or_else(of)?;
        let cols = dims.last().copied().unwrap_or(1);
        let rows = numel.checked_div(cols).unwrap_or(0);
        match self {
            TensorType::Plain(p) => numel.checked_mul(p.size()).ok_or_else(of),
            TensorType::Quant(f) => f.tensor_bytes(rows, cols).map_err(|_| of()),
        }
    }

    /// llama.cpp's `general.file_type` (`enum llama_ftype`) for a file whose weights are
    /// mostly of this type ([`qforge_presets::MOSTLY`]); 1024 (`GUESSED`) where llama.cpp
    /// has none.
    pub fn llama_ftype(&self) -> u32 {
        qforge_presets::mostly(self.name()).unwrap_or(1024)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// GGML ids 41 / 42 are registered formats now (qforge-lowbit), with llama.cpp's
    /// `LLAMA_FTYPE_MOSTLY_Q1_0` = 40 and `_Q2_0` = 41 as the file type.
    #[test]
    fn q1_0_and_q2_0_are_gguf_types() {
        for (id, name, ftype, bytes) in [(41, "q1_0", 40, 18 * 3), (42, "q2_0", 41, 18 * 5)] {
            let t = TensorType::from_ggml(id, "w").unwrap();
            assert_eq!((t.name(), t.ggml_type(), t.llama_ftype()), (name, Some(id), ftype));
            assert_eq!(t.bytes(&[1, 300]).unwrap(), bytes, "{name}: rows padded to whole blocks");
        }
    }
}
