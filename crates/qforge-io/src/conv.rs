//! Tensor conversions for `qforge convert`: decode any tensor to f32, dequantize straight
//! to f16 / bf16, encode into any target type (quantizing rows in parallel with
//! `qforge_cpu`), with llama.cpp's per-column importance weights.

use crate::error::{IoError, Result};
use crate::model::TensorView;
use crate::ttype::{Plain, TensorType};
use half::{bf16, f16};
use qforge_core::{DType, Shape};
use std::borrow::Cow;

/// The tensor's values as f32 (plain floats widened exactly, f64 rounded, quantized ones
/// dequantized bit-exactly with ggml's `to_float`).
pub fn decode_f32(t: &TensorView<'_>) -> Result<Vec<f32>> {
    let b = t.bytes();
    Ok(match t.ty {
        TensorType::Plain(Plain::F32) => {
            b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
        }
        TensorType::Plain(Plain::F16) => widen(&b, f16::from_le_bytes),
        TensorType::Plain(Plain::Bf16) => widen(&b, bf16::from_le_bytes),
        TensorType::Plain(Plain::F64) => {
            b.chunks_exact(8).map(|c| f64::from_le_bytes(c.try_into().unwrap_or([0; 8])) as f32).collect()
        }
        TensorType::Plain(p) => {
            return Err(IoError::tensor(&t.name, format!("{} is an integer type, not a float tensor", p.name())));
        }
        TensorType::Quant(_) => match t.quant_tensor()? {
            Some(q) => qforge_cpu::dequantize::<f32>(&q)?,
            None => unreachable_none(&t.name)?,
        },
    })
}

/// Little-endian 16-bit floats widened to f32 (exact), on all cores, with `half`'s batched
/// conversion (F16C where the CPU has it).
fn widen<H: Copy + Send>(b: &[u8], read: fn([u8; 2]) -> H) -> Vec<f32>
where
    [H]: half::slice::HalfFloatSliceExt,
{
    use half::slice::HalfFloatSliceExt;
    use rayon::prelude::*;
    /// Values per rayon task.
    const CHUNK: usize = 1 << 15;
    let mut out = vec![0f32; b.len() / 2];
    out.par_chunks_mut(CHUNK).zip(b.par_chunks(2 * CHUNK)).for_each(|(o, b)| {
        let h: Vec<H> = b.chunks_exact(2).map(|c| read([c[0], c[1]])).collect();
        h.convert_to_f32_slice(o);
    });
    out
}

fn unreachable_none<T>(name: &str) -> Result<T> {
    Err(IoError::tensor(name, "not a quantized tensor"))
}

fn le_bytes_f32(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// The tensor as little-endian `dtype` values. Quantized tensors are dequantized directly
/// to f16 / bf16 (each value the round-to-nearest-even of ggml's f32), never through a
/// stored f32 copy; a tensor already of that dtype is returned as it is (borrowed).
pub fn to_dtype<'a>(t: &TensorView<'a>, dtype: DType) -> Result<Cow<'a, [u8]>> {
    if t.ty == TensorType::Plain(Plain::from_dtype(dtype)) {
        return Ok(t.bytes());
    }
    if let TensorType::Quant(_) = t.ty {
        let q = t.quant_tensor()?.ok_or_else(|| IoError::tensor(&t.name, "not a quantized tensor"))?;
        return Ok(Cow::Owned(qforge_cpu::dequantize_dyn(&q, dtype)?.le_bytes().into_owned()));
    }
    let x = decode_f32(t)?;
    Ok(Cow::Owned(match dtype {
        DType::F32 => le_bytes_f32(&x),
        DType::F16 => cast::<f16>(&x)?.iter().flat_map(|v| v.to_le_bytes()).collect(),
        DType::Bf16 => cast::<bf16>(&x)?.iter().flat_map(|v| v.to_le_bytes()).collect(),
    }))
}

/// `x` rounded to `O` on all cores (F16C / AVX2 where the CPU has them).
fn cast<O: qforge_core::Elem>(x: &[f32]) -> Result<Vec<O>> {
    let mut out = vec![O::default(); x.len()];
    qforge_cpu::cast_f32(x, O::out_row(&mut out))?;
    Ok(out)
}

/// Encode `t` as `target`. Same type: the stored bytes. Plain float targets: [`to_dtype`].
/// A format: the values (decoded to f32) quantized row by row in parallel, with `imatrix`
/// as importance weights — one per column, or one per column per matrix of a 3-D (expert)
/// tensor, llama.cpp's layout.
pub fn encode<'a>(t: &TensorView<'a>, target: TensorType, imatrix: Option<&[f32]>) -> Result<Cow<'a, [u8]>> {
    if t.ty == target {
        return Ok(t.bytes());
    }
    match target {
        TensorType::Plain(p) => match p.dtype() {
            Some(d) => to_dtype(t, d),
            None => Err(IoError::tensor(&t.name, format!("cannot convert {} to {}", t.ty.name(), p.name()))),
        },
        TensorType::Quant(f) => {
            let x = decode_f32(t)?;
            let cols = *t.dims.last().unwrap_or(&1);
            let shape = Shape::new(t.dims.clone())?;
            match imatrix {
                Some(w) if w.len() != cols && t.dims.len() == 3 && w.len() == cols * t.dims[0] => {
                    // One importance vector per expert matrix: quantize matrix by matrix.
                    let per = t.numel() / t.dims[0];
                    let mut out = Vec::with_capacity(target.bytes(&t.dims)?);
                    for (e, xs) in x.chunks_exact(per).enumerate() {
                        let sub = Shape::new(t.dims[1..].to_vec())?;
                        let q = qforge_cpu::quantize(f, sub, xs, Some(&w[e * cols..(e + 1) * cols]))?;
                        out.extend_from_slice(q.data());
                    }
                    Ok(Cow::Owned(out))
                }
                Some(w) if w.len() != cols => Err(IoError::Imatrix {
                    reason: format!("{} weights for tensor '{}' with rows of {cols}", w.len(), t.name),
                }),
                w => Ok(Cow::Owned(qforge_cpu::quantize(f, shape, &x, w)?.into_bytes())),
            }
        }
    }
}
