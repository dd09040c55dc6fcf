//! Block-aligned sharding for tensor parallelism, and its inverse.
//!
//! Along N (output features) a weight splits between any two rows (formats with a row-block
//! side section, such as fp8's 128×128 scale grid, at multiples of their block rows). Along K
//! it splits only at block / group boundaries; the last shard keeps the partial last block,
//! i.e. is padded exactly as the whole tensor was. Either way, dequantizing the shards and
//! concatenating along the same axis gives the whole tensor's dequantization, bit for bit.

use qforge_core::{QuantError, QuantTensor, Shape};

/// The axis to split a weight matrix along.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Axis {
    /// Rows (output features): column-parallel linear layers.
    N,
    /// The quantized row (input features): row-parallel linear layers.
    K,
}

fn check_matrix(t: &QuantTensor<'_>) -> Result<(), QuantError> {
    if t.shape().dims().len() != 2 {
        return Err(QuantError::InvalidShape { reason: format!("sharding needs a matrix, got shape {}", t.shape()) });
    }
    Ok(())
}

/// Split `t` into `d` shards along `axis`, as evenly as the axis' granularity allows (the
/// first shards get one unit more). Fails if there are fewer units than shards.
pub fn shard(t: &QuantTensor<'_>, axis: Axis, d: usize) -> Result<Vec<QuantTensor<'static>>, QuantError> {
    check_matrix(t)?;
    let (rg, cg) = t.format().split_granularity();
    let (len, gran) = match axis {
        Axis::N => (t.rows(), rg),
        Axis::K => (t.cols(), cg),
    };
    let units = len.div_ceil(gran.max(1));
    if d == 0 || d > units {
        return Err(QuantError::InvalidShape {
            reason: format!(
                "cannot split {len} {} into {d} shards at multiples of {gran}",
                if axis == Axis::N { "rows" } else { "columns" }
            ),
        });
    }
    let (base, extra) = (units / d, units % d);
    let mut bounds = Vec::with_capacity(d - 1);
    let mut at = 0;
    for i in 0..d - 1 {
        at += base + usize::from(i < extra);
        bounds.push(at * gran);
    }
    shard_at(t, axis, &bounds)
}

/// Split `t` along `axis` at the given interior boundaries (strictly increasing, inside the
/// axis, at multiples of the format's split granularity).
pub fn shard_at(t: &QuantTensor<'_>, axis: Axis, bounds: &[usize]) -> Result<Vec<QuantTensor<'static>>, QuantError> {
    check_matrix(t)?;
    let f = t.format();
    let d = f.desc();
    let (rg, cg) = f.split_granularity();
    let (n, k) = (t.rows(), t.cols());
    let (len, gran) = match axis {
        Axis::N => (n, rg),
        Axis::K => (k, cg),
    };
    let mut edges = Vec::with_capacity(bounds.len() + 2);
    edges.push(0);
    for &b in bounds {
        if b == 0 || b >= len || !b.is_multiple_of(gran.max(1)) || b <= *edges.last().unwrap_or(&0) {
            return Err(QuantError::InvalidShape {
                reason: format!(
                    "shard boundary {b} must be inside (0, {len}), increasing, and a multiple of {gran} for {}",
                    d.name
                ),
            });
        }
        edges.push(b);
    }
    edges.push(len);
    let rb = t.row_bytes();
    edges
        .windows(2)
        .map(|w| {
            let (a, b) = (w[0], w[1]);
            match axis {
                Axis::N => {
                    let mut data = t.rows_data()[a * rb..b * rb].to_vec();
                    data.extend(f.aux_window(t.aux(), n, k, a..b, 0..k)?);
                    QuantTensor::new(f, Shape::new([b - a, k])?, data)
                }
                Axis::K => {
                    let (ba, bb) = (f.row_bytes(a)?, f.row_bytes(b)?); // `a` is on a unit boundary
                    let mut data = Vec::with_capacity(n * (bb - ba));
                    for row in t.rows_iter() {
                        data.extend_from_slice(&row[ba..bb]);
                    }
                    data.extend(f.aux_window(t.aux(), n, k, 0..n, a..b)?);
                    QuantTensor::new(f, Shape::new([n, b - a])?, data)
                }
            }
        })
        .collect()
}

/// Join shards made by [`shard`] / [`shard_at`] back into one tensor (byte-identical to the
/// original). Shards must share the format, and along K every shard but the last must hold
/// whole blocks.
pub fn concat(shards: &[QuantTensor<'_>], axis: Axis) -> Result<QuantTensor<'static>, QuantError> {
    let first = shards.first().ok_or(QuantError::InvalidShape { reason: "no shards to join".into() })?;
    let f = first.format();
    let d = f.desc();
    for s in shards {
        check_matrix(s)?;
        if s.format().desc().name != d.name || s.format().params() != f.params() {
            return Err(QuantError::InvalidShape { reason: "shards of different formats cannot be joined".into() });
        }
    }
    match axis {
        Axis::N => {
            let k = first.cols();
            if let Some(s) = shards.iter().find(|s| s.cols() != k) {
                return Err(QuantError::ShapeMismatch { what: "shard columns", expected: k, actual: s.cols() });
            }
            let n: usize = shards.iter().map(QuantTensor::rows).sum();
            let mut data: Vec<u8> = shards.iter().flat_map(|s| s.rows_data().iter().copied()).collect();
            if f.aux_bytes(n, k)? > 0 {
                data.extend(join_aux(shards, axis)?);
            }
            QuantTensor::new(f, Shape::new([n, k])?, data)
        }
        Axis::K => {
            let n = first.rows();
            if let Some(s) = shards.iter().find(|s| s.rows() != n) {
                return Err(QuantError::ShapeMismatch { what: "shard rows", expected: n, actual: s.rows() });
            }
            let (_, cg) = f.split_granularity();
            if let Some(s) = shards[..shards.len() - 1].iter().find(|s| !s.cols().is_multiple_of(cg)) {
                return Err(QuantError::InvalidShape {
                    reason: format!("a shard of {} columns before the last is not whole blocks of {cg}", s.cols()),
                });
            }
            let k: usize = shards.iter().map(QuantTensor::cols).sum();
            let mut data = Vec::new();
            for r in 0..n {
                for s in shards {
                    data.extend_from_slice(s.row(r).unwrap_or_default());
                }
            }
            if f.aux_bytes(n, k)? > 0 {
                data.extend(join_aux(shards, axis)?);
            }
            QuantTensor::new(f, Shape::new([n, k])?, data)
        }
    }
}

/// Side sections of shards joined: sections are laid out as row-major grids (the layout's
/// `Layout::Grid`) whose rows follow the tensor's tile rows, so joining along N appends them and
/// joining along K interleaves their grid rows.
fn join_aux(shards: &[QuantTensor<'_>], axis: Axis) -> Result<Vec<u8>, QuantError> {
    match axis {
        Axis::N => Ok(shards.iter().flat_map(|s| s.aux().iter().copied()).collect()),
        Axis::K => {
            let (rg, _) = shards[0].format().split_granularity();
            let grid_rows = shards[0].rows().div_ceil(rg.max(1));
            let mut out = Vec::new();
            for gr in 0..grid_rows {
                for s in shards {
                    let per = s.aux().len() / grid_rows.max(1);
                    out.extend_from_slice(&s.aux()[gr * per..(gr + 1) * per]);
                }
            }
            Ok(out)
        }
    }
}
