//! Mat-vec and mat-mul over any registered format: `Y = X · Wᵀ` with `W` an N×K quantized
//! tensor and `X` M×K f32 activations, in one of the four [`ActQuant`] modes.
//!
//! Any K works: activations are padded with zeros to the weight row's padded length (whole
//! blocks / groups) inside, so padded positions contribute exactly 0, and the result has
//! exactly the logical M×N shape.

use crate::act::{ActQuant, QuantAct};
use qforge_core::{MAX_DOT_ROWS, QuantError, QuantTensor};
use rayon::prelude::*;

/// Weight rows handled by one rayon task (and decoded together on the f32 path); the
/// fewest per task of the integer path ([`int_rows_per_task`]).
const ROWS_PER_TASK: usize = 16;

/// Rayon tasks per worker thread of the integer path.
const INT_TASKS_PER_THREAD: usize = 4;

/// Weight rows per task of the integer path: a few tasks per thread, not one per 16 rows.
/// Each task makes one `dot_weight_rows` call (mat-vec), or one `dot_tile` call per
/// activation tile (mat-mul), whose per-call work on the activation rows (the offset formats'
/// corrections, the -128 checks, int4g's group sums) ran once per 16 weight rows before: 6 %
/// of a q1_0 mat-vec on Zen 4 at the AVX2 level. Four tasks per thread keep the threads
/// balanced when one is slowed.
fn int_rows_per_task(n: usize) -> usize {
    let tasks = rayon::current_num_threads().max(1) * INT_TASKS_PER_THREAD;
    n.div_ceil(tasks).max(ROWS_PER_TASK)
}

/// Quantized activation bytes per tile of the integer path, at most: the tile stays in a
/// core's L2 (≥ 512 KiB on the x86 build machines) beside the task's weight rows while they
/// are dotted with it. 384 KiB holds 64 q8_k rows of K = 4096 (299 KiB) in one tile: with 256
/// KiB they were cut into 56 + 8, and each tile kernel decoded every weight block twice, once
/// for eight rows (Zen 4, M = 64 plain: q4_k / q5_k / q2_k +10 %, iq4_xs +13 %).
const ACT_TILE_BYTES: usize = 384 << 10;

/// `Y = X · Wᵀ` into a new M×N row-major vector. `x` is M×K row-major, K = `w.cols()`.
pub fn matmul(w: &QuantTensor<'_>, x: &[f32], m: usize, mode: ActQuant) -> Result<Vec<f32>, QuantError> {
    let len = m.checked_mul(w.rows()).ok_or(QuantError::Overflow { what: "mat-mul output size" })?;
    let mut out = vec![0f32; len];
    matmul_into(w, x, m, mode, &mut out)?;
    Ok(out)
}

/// Mat-vec: `y = W · x` (M = 1).
pub fn matvec(w: &QuantTensor<'_>, x: &[f32], mode: ActQuant) -> Result<Vec<f32>, QuantError> {
    matmul(w, x, 1, mode)
}

/// Quantize the M activation rows of `x` for `mode` against weight `w`, each padded to the
/// weight row's padded length.
pub fn quantize_acts(w: &QuantTensor<'_>, x: &[f32], m: usize, mode: ActQuant) -> Result<Vec<QuantAct>, QuantError> {
    quantize_rows(mode.kind(w.format()), w.cols(), padded_len(w), x, m)
}

/// The M rows of `x` (M×K) quantized as `kind`, each padded to `kp` elements: the checks and
/// the parallel loop of [`quantize_acts`], shared with [`crate::PackedMatrix`].
pub(crate) fn quantize_rows(
    kind: qforge_core::ActKind,
    k: usize,
    kp: usize,
    x: &[f32],
    m: usize,
) -> Result<Vec<QuantAct>, QuantError> {
    let want = m.checked_mul(k).ok_or(QuantError::Overflow { what: "activation size" })?;
    if m == 0 {
        return Err(QuantError::InvalidShape { reason: "mat-mul needs at least one activation row (M >= 1)".into() });
    }
    if x.len() != want {
        return Err(QuantError::ShapeMismatch { what: "activation elements (M x K)", expected: want, actual: x.len() });
    }
    qforge_pool::try_map_chunks(x, k, |r, xr| {
        QuantAct::new(kind, xr, kp).map_err(|e| match e {
            QuantError::NonFinite { index, value } => QuantError::NonFinite { index: r * k + index, value },
            e => e,
        })
    })
}

/// Elements in one padded weight row (whole blocks or groups; a grid layout's rows are not
/// padded).
pub fn padded_len(w: &QuantTensor<'_>) -> usize {
    w.padded_cols()
}

/// `Y = X · Wᵀ` into `out` (M×N row-major).
pub fn matmul_into(
    w: &QuantTensor<'_>,
    x: &[f32],
    m: usize,
    mode: ActQuant,
    out: &mut [f32],
) -> Result<(), QuantError> {
    let (n, k) = (w.rows(), w.cols());
    let want = m.checked_mul(n).ok_or(QuantError::Overflow { what: "mat-mul output size" })?;
    if out.len() != want {
        return Err(QuantError::ShapeMismatch {
            what: "mat-mul output elements (M x N)",
            expected: want,
            actual: out.len(),
        });
    }
    let acts = quantize_acts(w, x, m, mode)?;
    let fmt = w.format();
    let aux = w.aux();
    let rb = w.row_bytes();
    let rows = w.rows_data();

    // The integer path, if the format has a kernel for this kind of activation row.
    let integer = match (acts[0].as_row(), w.row(0)) {
        (Some(a), Some(r0)) => fmt.dot_row(r0, 0, aux, a).is_some(),
        _ => false,
    };
    // Results are produced weight-row major (N×M) so tasks own disjoint slices.
    let mut out_t = vec![0f32; want];
    if integer {
        let rows_acts: Vec<_> = acts.iter().filter_map(QuantAct::as_row).collect();
        // Activation tiles small enough to stay in L2 while every weight row of a task is
        // dotted with them; each weight row is unpacked once per tile (`dot_rows`).
        // As few tiles as the budget allows, of even size (no short last tile that pays a
        // decode for a few rows).
        // A tile kernel that keeps only a block of the rows close asks for more rows at once
        // (`Format::tile_rows`): its decoding is amortized over all of them.
        let act_bytes = acts[0].bytes().max(1);
        let tiles = m.div_ceil((ACT_TILE_BYTES / act_bytes).max(fmt.tile_rows()).max(1));
        let tile = m.div_ceil(tiles).next_multiple_of(MAX_DOT_ROWS).min(m);
        let refused = || QuantError::Unsupported {
            format: fmt.desc().name,
            reason: "dot kernel refused a row it accepted before".into(),
        };
        let per = int_rows_per_task(n);
        // On qforge-pool's hot threads: a mat-vec is too short to wait for sleeping rayon
        // workers (docs/matmul.md, Threads).
        qforge_pool::try_for_each_chunk(&mut out_t, m * per, |task, o| {
            let wr = &rows[task * per * rb..][..o.len() / m * rb];
            if let [a] = rows_acts[..] {
                // Mat-vec: the task's weight rows in one call (the per-row dispatch and
                // activation checks paid once per task).
                return fmt.dot_weight_rows(wr, rb, task * per, aux, a, o).ok_or_else(refused)?;
            }
            // Mat-mul: the task's weight rows against one activation tile per call (weight
            // row `i`'s results at `o[i · m + t0 ..]`).
            for (t0, tacts) in rows_acts.chunks(tile).enumerate().map(|(i, c)| (i * tile, c)) {
                fmt.dot_tile(wr, rb, task * per, aux, tacts, &mut o[t0..], m).ok_or_else(refused)??;
            }
            Ok(())
        })?;
    } else {
        // f32 activations: the row itself, or the values the quantized row stands for.
        let xs: Vec<Vec<f32>> = acts.iter().map(QuantAct::dequantize).collect();
        out_t
            .par_chunks_mut(m * ROWS_PER_TASK)
            .zip(rows.par_chunks(rb * ROWS_PER_TASK))
            .enumerate()
            .try_for_each_init(Vec::new, |wbuf: &mut Vec<f32>, (task, (o, wr))| {
                let nrows = wr.len() / rb;
                wbuf.resize(nrows * k, 0.0);
                for (i, (dst, src)) in wbuf.chunks_exact_mut(k).zip(wr.chunks_exact(rb)).enumerate() {
                    fmt.dequant_row_at(src, task * ROWS_PER_TASK + i, aux, qforge_core::OutRow::F32(dst))?;
                }
                for (mi, xr) in xs.iter().enumerate() {
                    let xr = &xr[..k];
                    for (i, wrow) in wbuf.chunks_exact(k).enumerate() {
                        o[i * m + mi] = dot_f32(wrow, xr);
                    }
                }
                Ok::<(), QuantError>(())
            })?;
    }
    transpose_into(&out_t, m, n, out);
    Ok(())
}

/// `out` (M×N) from results produced weight-row major (`out_t`: at least N rows of M; rows
/// past N, a packed layout's padding rows, are ignored). Bands of [`TRANSPOSE_BAND`] output
/// rows in parallel, each reading one run of `out_t` per column: element by element, the
/// strided writes missed the cache on every one (a serial 1.3 ms of a 64 × 4096 mat-mul's 15,
/// which held two threads to 1.6× of one).
pub(crate) fn transpose_into(out_t: &[f32], m: usize, n: usize, out: &mut [f32]) {
    qforge_pool::for_each_chunk(out, TRANSPOSE_BAND * n, |b, band| {
        let (i0, h) = (b * TRANSPOSE_BAND, band.len() / n.max(1));
        for (j, col) in out_t.chunks_exact(m.max(1)).take(n).enumerate() {
            for (r, v) in col[i0..i0 + h].iter().enumerate() {
                band[r * n + j] = *v;
            }
        }
    });
}

/// Output rows per band of [`transpose_into`]: one 64-byte line of each column read at once.
const TRANSPOSE_BAND: usize = 16;

/// f32 dot product with 16 independent lane accumulators (vectorizes). Element `i` always
/// goes to lane `i % 16` in a fixed order, so appending zeros (padding) never changes the
/// result, bit for bit.
pub fn dot_f32(a: &[f32], b: &[f32]) -> f32 {
    debug_assert_eq!(a.len(), b.len());
    let (ac, at) = a.as_chunks::<16>();
    let (bc, bt) = b.as_chunks::<16>();
    let mut acc = [0f32; 16];
    for (x, y) in ac.iter().zip(bc) {
        for l in 0..16 {
            acc[l] += x[l] * y[l];
        }
    }
    for (l, (x, y)) in at.iter().zip(bt).enumerate() {
        acc[l] += x * y;
    }
    let mut s = 0f32;
    for v in acc {
        s += v;
    }
    s
}

/// The f64 reference of `Y = A · Wᵀ` for already-quantized activations: every product of a
/// dequantized weight and the value its activation stands for ([`QuantAct::dequantize`]),
/// summed in f64. Returns the M×N values and, per output, the scale against which a kernel's
/// f32 rounding is judged: Σ|terms|, plus — for activations whose blocks store their sum in
/// a lower precision, used by some weight formats' kernels (ggml's q8_1 `s`, in f16, for
/// q4_1 / q5_1) — the rounding that sum carries against the dequantized activations,
/// max|w|·|Σa|·[`stored_sum_rel_error`](qforge_core::Format::stored_sum_rel_error) per
/// activation block, divided by the tolerance it is compared at (`rtol`). Slow; for tests and
/// the test matrix.
pub fn reference_f64(w: &QuantTensor<'_>, acts: &[QuantAct], rtol: f64) -> Result<(Vec<f64>, Vec<f64>), QuantError> {
    let (n, k) = (w.rows(), w.cols());
    let wd: Vec<f32> = crate::dequantize(w)?;
    let xs: Vec<Vec<f32>> = acts.iter().map(QuantAct::dequantize).collect();
    // (relative rounding, elements per block) of the activations' stored block sums, if any.
    let stored_sum = acts.iter().find_map(|a| match a {
        QuantAct::Blocks { format, .. } if format.stored_sum_rel_error() > 0.0 => {
            Some((format.stored_sum_rel_error(), format.desc().block_size))
        }
        _ => None,
    });
    let mut y = vec![0f64; acts.len() * n];
    let mut s = vec![0f64; acts.len() * n];
    for (mi, x) in xs.iter().enumerate() {
        for (j, wr) in wd.chunks_exact(k).enumerate() {
            let (mut acc, mut abs) = (0f64, 0f64);
            for (a, b) in wr.iter().zip(&x[..k]) {
                let t = *a as f64 * *b as f64;
                acc += t;
                abs += t.abs();
            }
            if let Some((rel, bs)) = stored_sum {
                let slack: f64 = wr
                    .chunks(bs)
                    .zip(x[..k].chunks(bs))
                    .map(|(wb, ab)| {
                        let wmax = wb.iter().fold(0f64, |m, v| m.max((*v as f64).abs()));
                        wmax * ab.iter().map(|v| *v as f64).sum::<f64>().abs() * rel
                    })
                    .sum();
                abs += slack / rtol;
            }
            y[mi * n + j] = acc;
            s[mi * n + j] = abs;
        }
    }
    Ok((y, s))
}
