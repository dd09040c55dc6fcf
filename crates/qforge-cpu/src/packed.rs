//! Packed weights: a quantized tensor copied once into its format's row-interleaved layout
//! ([`qforge_core::Packing`]), for the fastest CPU mat-vec and mat-mul with native
//! activations. The packed kernels put one weight row per SIMD lane and broadcast the
//! activation, so they skip the per-row unpacking and horizontal sums of the plain kernels
//! (q4_0 … q5_1, q2_k … q6_k, iq4_nl, tq1_0, tq2_0, q1_0, q2_0, mxfp4, nvfp4; figures in
//! `docs/matmul.md`).
//!
//! The results are the same exact integer dot products as [`crate::matmul`] with
//! [`ActQuant::Native`], summed in another f32 order: they agree to f32 rounding, not bit for
//! bit.

use crate::act::{ActQuant, QuantAct};
use qforge_core::{Format, MAX_PACKED_DOT_ROWS, Packing, QuantError, QuantTensor};
use rayon::prelude::*;

/// Rayon tasks per worker thread of a packed mat-vec.
const TASKS_PER_THREAD: usize = 4;

/// Packed weight bytes a task dots with every activation row before it moves on (mat-mul):
/// they stay in a core's L2 (≥ 512 KiB on current x86) while the activation rows stream.
const WEIGHT_TILE_BYTES: usize = 256 << 10;

/// A weight matrix in its format's packed layout: one weight row per SIMD lane, the activation
/// broadcast (`docs/matmul.md`, "Packed weights"); results equal the plain native mat-mul to f32
/// rounding.
///
/// ```
/// use qforge_core::Shape;
/// use qforge_cpu::{ActQuant, PackedMatrix, matvec, quantize};
///
/// let (n, k) = (20, 512);
/// let w: Vec<f32> = (0..n * k).map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0).collect();
/// let t = quantize(qforge_formats::get("q4_k")?, Shape::new([n, k])?, &w, None)?;
/// let packed = PackedMatrix::new(&t)?; // a one-time copy; `t` may be dropped now
/// let x: Vec<f32> = (0..k).map(|i| (i % 17) as f32 / 17.0 - 0.5).collect();
/// let y = packed.matvec(&x)?;
/// let plain = matvec(&t, &x, ActQuant::Native)?;
/// assert!(y.iter().zip(&plain).all(|(a, b)| (a - b).abs() <= 1e-4 * b.abs().max(1.0)));
/// # Ok::<(), qforge_core::QuantError>(())
/// ```
#[derive(Clone, Debug)]
pub struct PackedMatrix {
    format: &'static dyn Format,
    packing: Packing,
    rows: usize,
    cols: usize,
    padded_cols: usize,
    row_bytes: usize,
    data: Vec<u8>,
}

impl PackedMatrix {
    /// Packs `w` (rows in parallel).
    ///
    /// # Errors
    /// [`QuantError::Unsupported`] when `w`'s format has no packed layout (its
    /// [`Format::packing`] is `None`), and the format's errors for malformed rows.
    pub fn new(w: &QuantTensor<'_>) -> Result<PackedMatrix, QuantError> {
        let format = w.format();
        let packing = format.packing().ok_or_else(|| QuantError::Unsupported {
            format: format.desc().name,
            reason: "no packed layout (the formats dotted with q8_0 / q8_1 activations have one, and those dotted \
                     with q8_k but q8_k itself)"
                .into(),
        })?;
        let (rows, rb) = (w.rows(), w.row_bytes());
        let n = rb / format.desc().block_bytes.max(1);
        let group_bytes = n * packing.block_bytes;
        let chunk_groups =
            rows.div_ceil(packing.rows).div_ceil(rayon::current_num_threads().max(1) * TASKS_PER_THREAD).max(1);
        let chunk_rows = chunk_groups * packing.rows;
        let mut data = vec![0u8; rows.div_ceil(packing.rows) * group_bytes];
        data.par_chunks_mut((chunk_groups * group_bytes).max(1))
            .zip(w.rows_data().par_chunks((chunk_rows * rb).max(1)))
            .try_for_each(|(dst, src)| {
                let refused = || QuantError::Unsupported {
                    format: format.desc().name,
                    reason: "the packed layout refused rows it had accepted".into(),
                };
                let p = format.pack_rows(src, rb, src.len() / rb.max(1)).ok_or_else(refused)??;
                if p.len() != dst.len() {
                    return Err(refused());
                }
                dst.copy_from_slice(&p);
                Ok(())
            })?;
        Ok(PackedMatrix { format, packing, rows, cols: w.cols(), padded_cols: w.padded_cols(), row_bytes: rb, data })
    }

    /// The weight's format.
    pub fn format(&self) -> &'static dyn Format {
        self.format
    }

    /// Weight rows N.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Weight columns K (the logical row length).
    pub fn cols(&self) -> usize {
        self.cols
    }

    /// The packed bytes.
    pub fn data(&self) -> &[u8] {
        &self.data
    }

    /// `y = W · x` (M = 1), activations quantized to the format's native type.
    ///
    /// # Errors
    /// As [`PackedMatrix::matmul`].
    pub fn matvec(&self, x: &[f32]) -> Result<Vec<f32>, QuantError> {
        self.matmul(x, 1)
    }

    /// `Y = X · Wᵀ` (M×N row-major) for `m` activation rows `x` (M×K row-major), each
    /// quantized to the format's native activation type ([`ActQuant::Native`]) first.
    ///
    /// # Errors
    /// [`QuantError::InvalidShape`] for `m == 0`, [`QuantError::ShapeMismatch`] when `x` is
    /// not M×K, [`QuantError::NonFinite`] for a NaN / infinite activation.
    pub fn matmul(&self, x: &[f32], m: usize) -> Result<Vec<f32>, QuantError> {
        let n = self.rows;
        let kind = ActQuant::Native.kind(self.format);
        let acts = crate::matmul::quantize_rows(kind, self.cols, self.padded_cols, x, m)?;
        let len = m.checked_mul(n).ok_or(QuantError::Overflow { what: "mat-mul output size" })?;
        let rows_acts: Vec<_> = acts.iter().filter_map(QuantAct::as_row).collect();
        let (pr, gb) = (self.packing.rows, self.group_bytes());
        let groups = n.div_ceil(pr);
        let per = groups.div_ceil(rayon::current_num_threads().max(1) * TASKS_PER_THREAD).max(1);
        let tile = (WEIGHT_TILE_BYTES / gb.max(1)).clamp(1, per);
        let refused = || QuantError::Unsupported {
            format: self.format.desc().name,
            reason: "the packed kernel refused its activation rows".into(),
        };
        // Results weight-row major (groups · 8 × M), so tasks own disjoint slices.
        let mut out_t = vec![0f32; groups * pr * m];
        out_t.par_chunks_mut(per * pr * m).zip(self.data.par_chunks((per * gb).max(1))).try_for_each_init(
            Vec::new,
            |col: &mut Vec<f32>, (o, p)| {
                // A few groups at a time against every activation row, so that they stay in
                // L2 while the activation rows stream past.
                // Up to `MAX_PACKED_DOT_ROWS` activation rows per call: the kernels that can
                // decode each packed block once for many of them.
                for (o, p) in o.chunks_mut(tile * pr * m).zip(p.chunks(tile * gb)) {
                    let len = p.len() / gb.max(1) * pr;
                    for (c, acts) in rows_acts.chunks(MAX_PACKED_DOT_ROWS).enumerate() {
                        col.resize(len * acts.len(), 0.0);
                        self.format.packed_dot_rows(p, self.row_bytes, acts, col).ok_or_else(refused)??;
                        for (k, part) in col.chunks_exact(len.max(1)).enumerate() {
                            let mi = c * MAX_PACKED_DOT_ROWS + k;
                            for (r, v) in part.iter().enumerate() {
                                o[r * m + mi] = *v;
                            }
                        }
                    }
                }
                Ok::<(), QuantError>(())
            },
        )?;
        let mut out = vec![0f32; len];
        crate::matmul::transpose_into(&out_t, m, n, &mut out);
        Ok(out)
    }

    /// Bytes of one group's rows (all block columns).
    fn group_bytes(&self) -> usize {
        self.row_bytes / self.format.desc().block_bytes.max(1) * self.packing.block_bytes
    }
}
