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
        if len == 0 {
            return Ok(Vec::new());
        }
        // Each task's results activation-row major over its own weight rows (`blk[mi ·
        // rows + r]`), which is how the kernel returns them: a chunk's results are copied in
        // as runs, and each output row is then the tasks' runs side by side. (Scattered into
        // a weight-row-major N × M buffer and transposed afterwards, as before, one write per
        // cache line took 1.3 ms of a 9.6 ms q4_k mat-mul at M = 64 on Zen 4.)
        let blocks = qforge_pool::try_map_chunks(&self.data, per * gb, |_, p| {
            let mut col = Vec::new();
            let rows = p.len() / gb.max(1) * pr;
            let mut blk = vec![0f32; rows * m];
            // A few groups at a time against every activation row, so that they stay in
            // L2 while the activation rows stream past. Up to `MAX_PACKED_DOT_ROWS`
            // activation rows per call: the kernels that can decode each packed block
            // once for many of them.
            let mut r0 = 0;
            for p in p.chunks(tile * gb) {
                let len = p.len() / gb.max(1) * pr;
                for (c, acts) in rows_acts.chunks(MAX_PACKED_DOT_ROWS).enumerate() {
                    col.resize(len * acts.len(), 0.0);
                    self.format.packed_dot_rows(p, self.row_bytes, acts, &mut col).ok_or_else(refused)??;
                    for (k, part) in col.chunks_exact(len.max(1)).enumerate() {
                        let mi = c * MAX_PACKED_DOT_ROWS + k;
                        blk[mi * rows + r0..][..len].copy_from_slice(part);
                    }
                }
                r0 += len;
            }
            Ok::<_, QuantError>(blk)
        })?;
        let mut out = vec![0f32; len];
        qforge_pool::for_each_chunk(&mut out, n, |mi, orow| {
            let mut at = 0;
            for blk in &blocks {
                let rows = blk.len() / m;
                // The last group's padding rows (past N) are dropped.
                let take = rows.min(n - at);
                orow[at..at + take].copy_from_slice(&blk[mi * rows..][..take]);
                at += take;
            }
        });
        Ok(out)
    }

    /// Bytes of one group's rows (all block columns).
    fn group_bytes(&self) -> usize {
        self.row_bytes / self.format.desc().block_bytes.max(1) * self.packing.block_bytes
    }
}
