//! FP8 block-scaled weights (DeepSeek-V3 style) between safetensors and qforge.
//!
//! A safetensors checkpoint stores `X.weight` (F8_E4M3 or F8_E5M2, N × K) and its companion
//! `X.weight_scale_inv` (f32, `ceil(N/128) × ceil(K/128)`: every 128 × 128 block of values
//! shares one scale, the value is `fp8 × scale_inv`). qforge's fp8 formats (`fp8_e4m3`,
//! `fp8_e5m2`) hold both in one buffer: the N × K value bytes, row-major, one byte per
//! element, then the scale_inv grid as little-endian f32, row-major. [`merge`] and [`split`]
//! move between the two; N is the product of all but the last dimension, K the last.

use crate::error::{IoError, Result};
use crate::ttype::FP8_BLOCK;

/// Suffix of the companion tensor holding the inverse scales.
pub const SCALE_SUFFIX: &str = "_scale_inv";

/// Name of the companion of weight `name`.
pub fn companion_name(name: &str) -> String {
    format!("{name}{SCALE_SUFFIX}")
}

/// `(N, K)` of a tensor shape (outermost first).
pub fn rows_cols(dims: &[usize]) -> Option<(usize, usize)> {
    let k = *dims.last()?;
    let n = dims[..dims.len() - 1].iter().try_fold(1usize, |a, &d| a.checked_mul(d))?;
    Some((n, k))
}

/// Shape `[ceil(N/128), ceil(K/128)]` of the scale grid of an N × K weight.
pub fn grid_dims(n: usize, k: usize) -> [usize; 2] {
    [n.div_ceil(FP8_BLOCK), k.div_ceil(FP8_BLOCK)]
}

/// The qforge fp8 buffer for `values` (N × K bytes) and `scale_inv` (the f32 grid as
/// little-endian bytes). Lengths are checked.
pub fn merge(name: &str, values: &[u8], scale_inv: &[u8], n: usize, k: usize) -> Result<Vec<u8>> {
    let [gr, gc] = grid_dims(n, k);
    let want_v = n.checked_mul(k).ok_or_else(|| IoError::overflow(format!("fp8 tensor '{name}'")))?;
    let want_s =
        gr.checked_mul(gc).and_then(|g| g.checked_mul(4)).ok_or_else(|| IoError::overflow("fp8 scale grid"))?;
    if values.len() != want_v {
        return Err(IoError::tensor(name, format!("{} fp8 bytes for {n} x {k} values", values.len())));
    }
    if scale_inv.len() != want_s {
        return Err(IoError::tensor(
            name,
            format!(
                "scale_inv has {} bytes; a {gr} x {gc} f32 grid ({want_s} bytes) is needed for {n} x {k}",
                scale_inv.len()
            ),
        ));
    }
    let mut out = Vec::with_capacity(want_v + want_s);
    out.extend_from_slice(values);
    out.extend_from_slice(scale_inv);
    Ok(out)
}

/// The value bytes and the scale grid bytes of a qforge fp8 buffer.
pub fn split(data: &[u8], n: usize, k: usize) -> Result<(&[u8], &[u8])> {
    let nv = n.checked_mul(k).ok_or_else(|| IoError::overflow("fp8 tensor"))?;
    let [gr, gc] = grid_dims(n, k);
    let ns = gr * gc * 4;
    if nv.checked_add(ns) != Some(data.len()) {
        return Err(IoError::overflow(format!("fp8 buffer of {} bytes is not {n} x {k} values + grid", data.len())));
    }
    Ok(data.split_at(nv))
}

/// A scale grid of ones (for an fp8 weight stored without a companion: the values are
/// taken as they are).
pub fn unit_grid(n: usize, k: usize) -> Vec<u8> {
    let [gr, gc] = grid_dims(n, k);
    1.0f32.to_le_bytes().repeat(gr * gc)
}

/// The qforge format name of a safetensors fp8 dtype.
pub fn format_name(dtype: safetensors::Dtype) -> Option<&'static str> {
    match dtype {
        safetensors::Dtype::F8_E4M3 => Some("fp8_e4m3"),
        safetensors::Dtype::F8_E5M2 => Some("fp8_e5m2"),
        _ => None,
    }
}
