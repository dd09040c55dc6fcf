//! llama.cpp importance matrices: the GGUF imatrix files `llama-imatrix` writes today and
//! the legacy `.dat` format, both to one importance vector per weight tensor.
//!
//! GGUF: for weight `W`, tensor `W.in_sum2` (f32, `ne = [n_in, n_mat]`) holds the summed
//! squared activations per input column and matrix, and `W.counts` (f32, `[1, n_mat]`) the
//! number of activations summed; the importance is `in_sum2 / count`, or 1 where a matrix
//! saw no activations (what llama.cpp's quantize does). Legacy `.dat`: i32 entry count, then
//! per entry i32 name length, the name, i32 ncall, i32 nval, nval f32 sums (divided by
//! ncall when ncall > 0); an optional trailer (chunk count, dataset name) is ignored.

use crate::cursor::Cursor;
use crate::error::{IoError, Result};
use crate::gguf_read::GgufFile;
use crate::ttype::{Plain, TensorType};
use std::collections::BTreeMap;

/// Importance vectors by weight name (`n_mat × n_in` values, matrix by matrix).
pub type Imatrix = BTreeMap<String, Vec<f32>>;

fn bad(reason: impl Into<String>) -> IoError {
    IoError::Imatrix { reason: reason.into() }
}

/// Parse an imatrix file: GGUF when it starts with the GGUF magic, else the legacy format.
pub fn parse(bytes: &[u8]) -> Result<Imatrix> {
    parse_with_info(bytes).map(|(m, _)| m)
}

/// What an imatrix file says of itself (llama-quantize records it in the model it writes as
/// `quantize.imatrix.*`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImatrixInfo {
    /// Chunks of the dataset the statistics were collected on (0 when the file does not say).
    pub chunk_count: u32,
    /// Dataset names (the legacy format has at most one).
    pub datasets: Vec<String>,
}

/// [`parse`], with the file's chunk count and dataset names.
pub fn parse_with_info(bytes: &[u8]) -> Result<(Imatrix, ImatrixInfo)> {
    if bytes.starts_with(b"GGUF") {
        let g = GgufFile::parse(bytes)?;
        let chunk_count = g.get("imatrix.chunk_count").and_then(|v| v.as_u64()).and_then(|n| u32::try_from(n).ok());
        let datasets = match g.get("imatrix.datasets") {
            Some(crate::value::Value::Array(crate::value::Array::Strings(v))) => {
                v.iter().map(|s| s.to_string()).collect()
            }
            _ => Vec::new(),
        };
        Ok((parse_gguf(bytes)?, ImatrixInfo { chunk_count: chunk_count.unwrap_or(0), datasets }))
    } else {
        legacy(bytes)
    }
}

fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect()
}

/// Parse a GGUF imatrix file (as `llama-imatrix` writes today): each `W.in_sum2` divided by
/// its `W.counts`, matrix by matrix, or 1 for a matrix that saw no activations.
///
/// # Errors
///
/// [`IoError::Imatrix`] when an `in_sum2` has no `counts`, either is not f32, their sizes
/// disagree, or the file has no `in_sum2` tensor at all; any [`GgufFile::parse`] error.
pub fn parse_gguf(bytes: &[u8]) -> Result<Imatrix> {
    let g = GgufFile::parse(bytes)?;
    let mut out = Imatrix::new();
    for t in &g.tensors {
        let Some(base) = t.name.strip_suffix(".in_sum2") else { continue };
        let counts =
            g.tensor(&format!("{base}.counts")).ok_or_else(|| bad(format!("{base}: in_sum2 without counts")))?;
        if t.ty != TensorType::Plain(Plain::F32) || counts.ty != TensorType::Plain(Plain::F32) {
            return Err(bad(format!("{base}: in_sum2 / counts must be f32")));
        }
        let n_in = t.ne.first().copied().unwrap_or(1) as usize;
        let sums = f32s(g.tensor_bytes(t));
        let cnt = f32s(g.tensor_bytes(counts));
        if n_in == 0 || sums.len() != n_in * cnt.len() {
            return Err(bad(format!("{base}: {} sums for {} counts of {n_in} columns", sums.len(), cnt.len())));
        }
        let mut v = Vec::with_capacity(sums.len());
        for (row, &c) in sums.chunks_exact(n_in).zip(&cnt) {
            if c > 0.0 {
                v.extend(row.iter().map(|s| s / c));
            } else {
                v.extend(std::iter::repeat_n(1.0f32, n_in));
            }
        }
        out.insert(base.to_string(), v);
    }
    if out.is_empty() {
        return Err(bad("no <tensor>.in_sum2 entries"));
    }
    Ok(out)
}

/// Parse a legacy `.dat` imatrix file (see the module docs for its layout); the optional
/// trailer is ignored.
///
/// # Errors
///
/// [`IoError::Imatrix`] for a non-positive entry or value count, a negative name length or
/// a name that is not UTF-8; [`IoError::Truncated`] when an entry runs past the end.
pub fn parse_legacy(bytes: &[u8]) -> Result<Imatrix> {
    legacy(bytes).map(|(m, _)| m)
}

fn legacy(bytes: &[u8]) -> Result<(Imatrix, ImatrixInfo)> {
    let mut c = Cursor::new(bytes);
    let i32_ = |c: &mut Cursor<'_>, what| -> Result<i32> { Ok(i32::from_le_bytes(c.array(what)?)) };
    let n = i32_(&mut c, "imatrix entry count")?;
    if n < 1 {
        return Err(bad(format!("{n} entries")));
    }
    let mut out = Imatrix::new();
    for _ in 0..n {
        let len = i32_(&mut c, "imatrix name length")?;
        let name = c.take(u64::try_from(len).map_err(|_| bad("negative name length"))?, "imatrix name")?;
        let name = std::str::from_utf8(name).map_err(|_| bad("name is not UTF-8"))?.to_string();
        let ncall = i32_(&mut c, "imatrix call count")?;
        let nval = i32_(&mut c, "imatrix value count")?;
        if nval < 1 {
            return Err(bad(format!("{name}: {nval} values")));
        }
        let raw = c.take(4 * nval as u64, "imatrix values")?;
        let mut v = f32s(raw);
        if ncall > 0 {
            v.iter_mut().for_each(|x| *x /= ncall as f32);
        }
        out.insert(name, v);
    }
    // The optional trailer: chunk count, then the dataset name (as llama.cpp reads it).
    let mut info = ImatrixInfo::default();
    if let Ok(chunks) = i32_(&mut c, "imatrix chunk count") {
        info.chunk_count = u32::try_from(chunks).unwrap_or(0);
        if let Ok(len) = i32_(&mut c, "imatrix dataset name length")
            && let Ok(len) = u64::try_from(len)
            && len > 0
            && let Ok(name) = c.take(len, "imatrix dataset name")
        {
            info.datasets.push(String::from_utf8_lossy(name).into_owned());
        }
    }
    Ok((out, info))
}
