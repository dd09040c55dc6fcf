//! qforge-cpu: CPU kernels over any registered format — dequantize a [`QuantTensor`] to
//! f32 / f16 / bf16, quantize f32 data into one, and mat-vec / mat-mul `Y = X · Wᵀ` with f32,
//! native (ggml `vec_dot_type`), per-token int8 or fp8 1×128 activations ([`ActQuant`]),
//! rows in parallel with rayon (mat-vec and mat-mul on `qforge-pool`'s hot threads, rayon's
//! thread count). [`PackedMatrix`] copies a weight once into its format's
//! row-interleaved layout, where it has one, for faster native mat-vec / mat-mul.
//!
//! The per-row work goes through [`qforge_core::Format`], i.e. the format crate's
//! `decode_row` / `encode_row`: that is where a format's SIMD fast path plugs in, without
//! any change here. f16 / bf16 output is the format's f32 row converted at the CPU's SIMD level
//! (`convert`), bit-identical to rounding each f32 value.
//!
//! # Example
//!
//! ```
//! use qforge_core::{Shape, f16};
//! use qforge_cpu::{ActQuant, dequantize, matmul, quantize};
//!
//! let f = qforge_formats::get("q4_k")?;
//! // Any row length: each row is padded to whole 256-element blocks.
//! let (n, k) = (4, 300);
//! let w: Vec<f32> = (0..n * k).map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0).collect();
//! let t = quantize(f, Shape::new([n, k])?, &w, None)?; // None: no importance matrix
//! assert_eq!(t.row_bytes(), 2 * 144);
//!
//! let w32: Vec<f32> = dequantize(&t)?;
//! let w16: Vec<f16> = dequantize(&t)?; // direct: the round-to-nearest-even of the f32 value
//! assert_eq!(w16[5], f16::from_f32(w32[5]));
//! assert!(w.iter().zip(&w32).all(|(a, b)| (a - b).abs() < 0.1)); // 4.5 bits per weight
//!
//! // Y = X · Wᵀ for M = 2 activation rows of length K.
//! let m = 2;
//! let x: Vec<f32> = (0..m * k).map(|i| (i % 17) as f32 / 17.0 - 0.5).collect();
//! let y = matmul(&t, &x, m, ActQuant::None)?; // f32 activations, dequantized weights
//! assert_eq!(y.len(), m * n);
//! let y00: f32 = x[..k].iter().zip(&w32[..k]).map(|(a, b)| a * b).sum();
//! assert!((y[0] - y00).abs() < 1e-3);
//! // ggml's way: activations quantized to q8_k, integer dot products.
//! let yq = matmul(&t, &x, m, ActQuant::Native)?;
//! let scale: f32 = x[..k].iter().zip(&w32[..k]).map(|(a, b)| (a * b).abs()).sum();
//! assert!((yq[0] - y[0]).abs() < 0.01 * scale);
//! # Ok::<(), qforge_core::QuantError>(())
//! ```
#![forbid(unsafe_code)]

mod act;
mod convert;
mod matmul;
mod packed;

pub use act::{ActQuant, QuantAct, act_format, int8_dyn_params};
pub use convert::cast_f32;
pub use matmul::{dot_f32, matmul, matmul_into, matvec, padded_len, quantize_acts, reference_f64};
pub use packed::PackedMatrix;
use qforge_core::{DType, Elem, Format, OutRow, QuantError, QuantTensor, Shape, bf16, f16};
use rayon::prelude::*;
use std::borrow::Cow;

/// Rows smaller than this many elements are grouped so each rayon task does real work.
const MIN_ELEMS_PER_TASK: usize = 16 * 1024;

fn rows_per_task(cols: usize) -> usize {
    (MIN_ELEMS_PER_TASK / cols.max(1)).max(1)
}

/// Dequantize `t` into `out` (`out.len()` == the tensor's logical element count).
pub fn dequantize_into<O: Elem>(t: &QuantTensor<'_>, out: &mut [O]) -> Result<(), QuantError> {
    let (cols, rows) = (t.cols(), t.rows());
    if out.len() != t.shape().numel() {
        return Err(QuantError::ShapeMismatch {
            what: "dequantize output elements",
            expected: t.shape().numel(),
            actual: out.len(),
        });
    }
    let fmt = t.format();
    let rb = t.row_bytes();
    let aux = t.aux();
    let per = rows_per_task(cols);
    debug_assert_eq!(t.rows_data().len(), rows * rb);
    // f16 / bf16: a format that writes them without an f32 pass does so straight into the
    // output; the others decode each row by their f32 fast path into a scratch row, which is
    // then converted (rows too long for a scratch row are decoded straight into the output).
    let via_f32 = O::DTYPE != DType::F32 && !fmt.direct_16bit() && cols <= MAX_SCRATCH_COLS;
    // One scratch row per rayon split, not per task (a 16 KiB allocation and its zeroing for
    // every four rows of 4096).
    let scratch = || if via_f32 { vec![0f32; cols] } else { Vec::new() };
    out.par_chunks_mut(cols * per).zip(t.rows_data().par_chunks(rb * per)).enumerate().try_for_each_init(
        scratch,
        |scratch, (task, (o, src))| {
            o.chunks_exact_mut(cols).zip(src.chunks_exact(rb)).enumerate().try_for_each(|(r, (o, s))| {
                let row = task * per + r;
                if via_f32 {
                    fmt.dequant_row_at(s, row, aux, OutRow::F32(scratch))?;
                    convert::from_f32(scratch, O::out_row(o));
                    Ok(())
                } else {
                    fmt.dequant_row_at(s, row, aux, O::out_row(o))
                }
            })
        },
    )
}

/// The longest row dequantized to f16 / bf16 through an f32 scratch row (1 MiB of f32).
const MAX_SCRATCH_COLS: usize = 1 << 18;

/// Dequantize `t` into a new vector.
pub fn dequantize<O: Elem>(t: &QuantTensor<'_>) -> Result<Vec<O>, QuantError> {
    let mut out = vec![O::default(); t.shape().numel()];
    dequantize_into(t, &mut out)?;
    Ok(out)
}

/// A dequantized tensor in the dtype that was asked for at run time.
#[derive(Clone, Debug, PartialEq)]
pub enum Dequantized {
    /// f32 values, row-major, logical shape.
    F32(Vec<f32>),
    /// f16 values (round-to-nearest-even of the f32 result), row-major, logical shape.
    F16(Vec<f16>),
    /// bf16 values (round-to-nearest-even of the f32 result), row-major, logical shape.
    Bf16(Vec<bf16>),
}

impl Dequantized {
    /// The element type held.
    pub fn dtype(&self) -> DType {
        match self {
            Dequantized::F32(_) => DType::F32,
            Dequantized::F16(_) => DType::F16,
            Dequantized::Bf16(_) => DType::Bf16,
        }
    }

    /// Number of elements (the tensor's logical element count).
    pub fn len(&self) -> usize {
        match self {
            Dequantized::F32(v) => v.len(),
            Dequantized::F16(v) => v.len(),
            Dequantized::Bf16(v) => v.len(),
        }
    }

    /// Whether there are no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The values as little-endian bytes (what the CLI writes to raw files): a view of the
    /// buffer itself on little-endian hosts, so a large tensor is never held twice.
    pub fn le_bytes(&self) -> Cow<'_, [u8]> {
        fn view<O: Elem + bytemuck::Pod>(v: &[O]) -> Cow<'_, [u8]> {
            if cfg!(target_endian = "little") {
                Cow::Borrowed(bytemuck::cast_slice(v))
            } else {
                let mut out = Vec::with_capacity(std::mem::size_of_val(v));
                v.iter().for_each(|e| e.write_le(&mut out));
                Cow::Owned(out)
            }
        }
        match self {
            Dequantized::F32(v) => view(v),
            Dequantized::F16(v) => view(v),
            Dequantized::Bf16(v) => view(v),
        }
    }
}

/// Dequantize `t` to the run-time `dtype`.
pub fn dequantize_dyn(t: &QuantTensor<'_>, dtype: DType) -> Result<Dequantized, QuantError> {
    Ok(match dtype {
        DType::F32 => Dequantized::F32(dequantize(t)?),
        DType::F16 => Dequantized::F16(dequantize(t)?),
        DType::Bf16 => Dequantized::Bf16(dequantize(t)?),
    })
}

/// Quantize row-major `x` of logical `shape` into `out` (`rows * format.row_bytes(cols)` bytes).
///
/// `imatrix`, if given, holds one importance weight per column (llama.cpp's imatrix layout).
/// A non-finite input is reported with its element index in `x`.
pub fn quantize_into(
    format: &'static dyn Format,
    shape: &Shape,
    x: &[f32],
    imatrix: Option<&[f32]>,
    out: &mut [u8],
) -> Result<(), QuantError> {
    let (rows, cols) = (shape.rows(), shape.cols());
    if x.len() != shape.numel() {
        return Err(QuantError::ShapeMismatch {
            what: "input elements for the shape",
            expected: shape.numel(),
            actual: x.len(),
        });
    }
    if let Some(w) = imatrix.filter(|w| w.len() != cols) {
        return Err(QuantError::InvalidImatrix {
            reason: format!("{} weights given for {cols} columns (one per column expected)", w.len()),
        });
    }
    let rb = format.row_bytes(cols)?;
    let want = QuantTensor::expected_bytes(format, shape)?;
    if out.len() != want {
        return Err(QuantError::ShapeMismatch { what: "quantized output bytes", expected: want, actual: out.len() });
    }
    let (out, aux) = out.split_at_mut(rb * rows);
    format.quantize_aux(x, rows, cols, aux)?;
    let aux = &*aux;
    let per = rows_per_task(cols);
    out.par_chunks_mut(rb * per).zip(x.par_chunks(cols * per)).enumerate().try_for_each(|(task, (o, src))| {
        o.chunks_exact_mut(rb).zip(src.chunks_exact(cols)).enumerate().try_for_each(|(r, (o, s))| {
            format.quantize_row_at(s, imatrix, task * per + r, aux, o).map_err(|e| match e {
                QuantError::NonFinite { index, value } => {
                    QuantError::NonFinite { index: (task * per + r) * cols + index, value }
                }
                e => e,
            })
        })
    })
}

/// Quantize row-major `x` of logical `shape` into a new owned [`QuantTensor`].
///
/// A group-wise int4 layer whose row length (288) is not a multiple of the group size (256):
/// the last group is padded, and the padding contributes exactly 0 to every product.
///
/// ```
/// use qforge_core::{Params, Shape};
/// use qforge_cpu::{ActQuant, matvec, quantize};
///
/// let f = qforge_formats::get_with("int4g", &Params::group_size(256))?;
/// let w: Vec<f32> = (0..3 * 288).map(|i| ((i % 29) as f32 - 14.0) / 14.0).collect();
/// let imatrix = vec![1.0; 288]; // optional: one importance weight per column
/// let t = quantize(f, Shape::new([3, 288])?, &w, Some(&imatrix))?;
/// let x = vec![0.25; 288];
/// let y = matvec(&t, &x, ActQuant::Native)?; // int8 per-token activations: A8W4DQ
/// assert_eq!(y.len(), 3);
/// # Ok::<(), qforge_core::QuantError>(())
/// ```
pub fn quantize(
    format: &'static dyn Format,
    shape: Shape,
    x: &[f32],
    imatrix: Option<&[f32]>,
) -> Result<QuantTensor<'static>, QuantError> {
    let n = QuantTensor::expected_bytes(format, &shape)?;
    let mut out = vec![0u8; n];
    quantize_into(format, &shape, x, imatrix, &mut out)?;
    QuantTensor::new(format, shape, out)
}
