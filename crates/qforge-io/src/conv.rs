//! Tensor conversions for `qforge convert`: decode any tensor to f32, dequantize straight
//! to f16 / bf16, encode into any target type (quantizing rows in parallel with
//! `qforge_cpu`), with llama.cpp's per-column importance weights.

use crate::error::{IoError, Result};
use crate::model::TensorView;
use crate::ttype::{Plain, TensorType};
use half::slice::HalfFloatSliceExt;
use half::{bf16, f16};
use qforge_core::{DType, Elem, QuantError, Shape};
use rayon::prelude::*;
use std::borrow::Cow;

/// The tensor's values as f32 (plain floats widened exactly, f64 rounded, quantized ones
/// dequantized bit-exactly with ggml's `to_float`), on all cores.
pub fn decode_f32(t: &TensorView<'_>) -> Result<Vec<f32>> {
    match t.ty {
        TensorType::Plain(p) => {
            let b = t.bytes();
            let mut out = vec![0f32; b.len() / p.size()];
            out.par_chunks_mut(CHUNK)
                .zip(b.par_chunks(CHUNK * p.size()))
                .try_for_each(|(o, b)| read_f32(b, p, o))
                .map_err(|e| IoError::tensor(&t.name, e))?;
            Ok(out)
        }
        TensorType::Quant(_) => {
            let q = t.quant_tensor()?.ok_or_else(|| IoError::tensor(&t.name, "not a quantized tensor"))?;
            Ok(qforge_cpu::dequantize::<f32>(&q)?)
        }
    }
}

/// Values per rayon task in the plain-float conversions (a task's f32 scratch is 128 KiB).
const CHUNK: usize = 1 << 15;

/// `out` = the little-endian `p` values in `b` as f32 (`out.len()` values), one task's work.
fn read_f32(b: &[u8], p: Plain, out: &mut [f32]) -> std::result::Result<(), String> {
    fn half<H: Copy + Default>(b: &[u8], read: fn([u8; 2]) -> H, out: &mut [f32])
    where
        [H]: HalfFloatSliceExt,
    {
        let h: Vec<H> = b.chunks_exact(2).map(|c| read([c[0], c[1]])).collect();
        // `half`'s batched widening (F16C where the CPU has it); exact.
        h.convert_to_f32_slice(out);
    }
    match p {
        Plain::F32 => b.chunks_exact(4).zip(out).for_each(|(c, o)| *o = f32::from_le_bytes([c[0], c[1], c[2], c[3]])),
        Plain::F16 => half(b, f16::from_le_bytes, out),
        Plain::Bf16 => half(b, bf16::from_le_bytes, out),
        Plain::F64 => b
            .chunks_exact(8)
            .zip(out)
            .for_each(|(c, o)| *o = f64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]) as f32),
        p => return Err(format!("{} is an integer type, not a float tensor", p.name())),
    }
    Ok(())
}

/// `out` = `x` as little-endian `dtype` values (f16 / bf16 rounded to nearest even, exactly
/// as `Elem::from_f32`), one task's work.
fn write_dtype(x: &[f32], dtype: DType, out: &mut [u8]) -> std::result::Result<(), QuantError> {
    fn narrow<O: Elem>(x: &[f32], out: &mut [u8], bits: fn(&O) -> [u8; 2]) -> std::result::Result<(), QuantError> {
        let mut v = vec![O::default(); x.len()];
        qforge_cpu::cast_f32(x, O::out_row(&mut v))?;
        out.chunks_exact_mut(2).zip(&v).for_each(|(o, v)| o.copy_from_slice(&bits(v)));
        Ok(())
    }
    match dtype {
        DType::F32 => out.chunks_exact_mut(4).zip(x).for_each(|(o, v)| o.copy_from_slice(&v.to_le_bytes())),
        DType::F16 => narrow::<f16>(x, out, |v| v.to_le_bytes())?,
        DType::Bf16 => narrow::<bf16>(x, out, |v| v.to_le_bytes())?,
    }
    Ok(())
}

/// The tensor as little-endian `dtype` values, on all cores. Quantized tensors are
/// dequantized directly to f16 / bf16 (each value the round-to-nearest-even of ggml's f32);
/// plain floats are converted chunk by chunk, never through a whole f32 copy; a tensor
/// already of that dtype is returned as it is (borrowed).
pub fn to_dtype<'a>(t: &TensorView<'a>, dtype: DType) -> Result<Cow<'a, [u8]>> {
    if t.ty == TensorType::Plain(Plain::from_dtype(dtype)) {
        return Ok(t.bytes());
    }
    let p = match t.ty {
        TensorType::Quant(_) => {
            let q = t.quant_tensor()?.ok_or_else(|| IoError::tensor(&t.name, "not a quantized tensor"))?;
            return Ok(Cow::Owned(qforge_cpu::dequantize_dyn(&q, dtype)?.le_bytes().into_owned()));
        }
        TensorType::Plain(p) => p,
    };
    let b = t.bytes();
    let osize = Plain::from_dtype(dtype).size();
    let mut out = vec![0u8; b.len() / p.size() * osize];
    out.par_chunks_mut(CHUNK * osize)
        .zip(b.par_chunks(CHUNK * p.size()))
        .try_for_each(|(o, b)| {
            let mut x = vec![0f32; o.len() / osize];
            read_f32(b, p, &mut x)?;
            write_dtype(&x, dtype, o).map_err(|e| e.to_string())
        })
        .map_err(|e| IoError::tensor(&t.name, e))?;
    Ok(Cow::Owned(out))
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
