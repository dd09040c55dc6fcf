//! Grid-layout weights (`qforge_core::Layout::Grid`: values, then one scale per tile, as in
//! DeepSeek-V3's FP8 checkpoints) between safetensors and qforge.
//!
//! A safetensors checkpoint stores `X.weight` (the values, N × K, in the dtype of the layout's
//! [`ElemType`]) and its companion `X.weight_scale_inv` (the scale grid,
//! `ceil(N/tile rows) × ceil(K/tile cols)`: the value is `decoded value × scale_inv` of its
//! tile). qforge's grid formats hold both in one buffer: the N × K values, row-major,
//! then the grid, little-endian, row-major. [`merge`] and [`split`] move between the two;
//! N is the product of all but the last dimension, K the last. Everything here reads the
//! format's layout: a new grid format, whatever its tile or encoding, needs no edit.

use crate::error::{IoError, Result};
use qforge_core::{DType, ElemType, Format, Layout};
use safetensors::Dtype;

/// Suffix of the companion tensor holding the inverse scales.
pub const SCALE_SUFFIX: &str = "_scale_inv";

/// Name of the companion of weight `name`.
pub fn companion_name(name: &str) -> String {
    format!("{name}{SCALE_SUFFIX}")
}

/// Whether `f` stores a scale grid after its values (a side section safetensors keeps as a
/// companion tensor).
pub fn is_grid(f: &dyn Format) -> bool {
    matches!(f.layout(), Layout::Grid { .. })
}

/// `(N, K)` of a tensor shape (outermost first).
pub fn rows_cols(dims: &[usize]) -> Option<(usize, usize)> {
    let k = *dims.last()?;
    let n = dims[..dims.len() - 1].iter().try_fold(1usize, |a, &d| a.checked_mul(d))?;
    Some((n, k))
}

/// Shape `[ceil(N/tile rows), ceil(K/tile cols)]` of the scale grid of an N × K weight of
/// `f`; `None` when `f` has no grid.
pub fn grid_dims(f: &dyn Format, n: usize, k: usize) -> Option<[usize; 2]> {
    f.layout().grid_dims(n, k).map(|(r, c)| [r, c])
}

/// The safetensors dtype of an element encoding.
pub fn elem_dtype(e: ElemType) -> Dtype {
    match e {
        ElemType::F8E4M3 => Dtype::F8_E4M3,
        ElemType::F8E5M2 => Dtype::F8_E5M2,
    }
}

/// The safetensors dtype of a scale dtype.
pub fn scale_dtype(d: DType) -> Dtype {
    match d {
        DType::F32 => Dtype::F32,
        DType::F16 => Dtype::F16,
        DType::Bf16 => Dtype::BF16,
    }
}

/// `(values dtype, scale grid dtype)` safetensors stores a grid format's two tensors in;
/// `None` when `f` has no grid.
pub fn st_dtypes(f: &dyn Format) -> Option<(Dtype, Dtype)> {
    match f.layout() {
        Layout::Grid { elem, scale_dtype: s, .. } => Some((elem_dtype(elem), scale_dtype(s))),
        _ => None,
    }
}

/// The registered grid format whose values safetensors stores as `dtype` (the first one, in
/// registry order), if any.
pub fn format_of(dtype: Dtype) -> Option<&'static dyn Format> {
    qforge_formats::registry()
        .iter()
        .find(|f| matches!(f.layout(), Layout::Grid { elem, .. } if elem_dtype(elem) == dtype))
}

/// Bytes of the values and of the grid of an N × K weight of `f`.
fn sizes(f: &dyn Format, what: &str, n: usize, k: usize) -> Result<(usize, usize)> {
    let values = f.row_bytes(k).ok().and_then(|r| r.checked_mul(n));
    let grid = f.aux_bytes(n, k).ok();
    match (values, grid) {
        (Some(v), Some(g)) if v.checked_add(g).is_some() => Ok((v, g)),
        _ => Err(IoError::overflow(format!("{} tensor {what} of {n} x {k}", f.desc().name))),
    }
}

/// The qforge buffer of grid format `f` for `values` (N × K values) and `scale_inv` (the grid
/// as little-endian bytes). Lengths are checked.
pub fn merge(f: &dyn Format, name: &str, values: &[u8], scale_inv: &[u8], n: usize, k: usize) -> Result<Vec<u8>> {
    let (want_v, want_s) = sizes(f, name, n, k)?;
    if values.len() != want_v {
        return Err(IoError::tensor(
            name,
            format!("{} bytes of {} values for {n} x {k} ({want_v} needed)", values.len(), f.desc().name),
        ));
    }
    if scale_inv.len() != want_s {
        let [gr, gc] = grid_dims(f, n, k).unwrap_or([0, 0]);
        return Err(IoError::tensor(
            name,
            format!(
                "scale_inv has {} bytes; a {gr} x {gc} grid ({want_s} bytes) is needed for {n} x {k}",
                scale_inv.len()
            ),
        ));
    }
    let mut out = Vec::with_capacity(want_v + want_s);
    out.extend_from_slice(values);
    out.extend_from_slice(scale_inv);
    Ok(out)
}

/// The value bytes and the scale grid bytes of a qforge buffer of grid format `f`.
pub fn split<'d>(f: &dyn Format, data: &'d [u8], n: usize, k: usize) -> Result<(&'d [u8], &'d [u8])> {
    let (nv, ns) = sizes(f, "buffer", n, k)?;
    if nv + ns != data.len() {
        return Err(IoError::overflow(format!(
            "{} buffer of {} bytes is not {n} x {k} values + grid",
            f.desc().name,
            data.len()
        )));
    }
    Ok(data.split_at(nv))
}

/// A scale grid of ones (for a grid-format weight stored without a companion: the values are
/// taken as they are): the side section of an N × K window over an empty tensor, all of it
/// padding.
pub fn unit_grid(f: &dyn Format, n: usize, k: usize) -> Vec<u8> {
    f.layout().side_window(&[], 0, 0, 0..n, 0..k).unwrap_or_default()
}
