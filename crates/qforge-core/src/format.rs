//! The object-safe, row-level view of a format: [`Format`], and [`Registered`], which gives
//! one to every [`BlockFormat`].

use crate::block::{BlockFormat, FormatDesc};
use crate::clayout::{CField, CLayout};
use crate::dot::{ActKind, ActRow, DotKernel, NoDot, Packing};
use crate::dtype::OutRow;
use crate::error::QuantError;
use crate::layout::Layout;
use crate::params::Params;
use half::{bf16, f16};
use std::marker::PhantomData;

/// The object-safe, row-level view of a format. Obtain one for a [`BlockFormat`] with
/// [`Registered`]; the validation of lengths, finiteness and weights lives here, once.
///
/// # Layout
/// [`Format::layout`] says how a tensor is stored ([`Layout`]); the size methods
/// ([`row_bytes`](Format::row_bytes), [`aux_bytes`](Format::aux_bytes),
/// [`tensor_bytes`](Format::tensor_bytes), [`split_granularity`](Format::split_granularity),
/// [`aux_window`](Format::aux_window)) default to what the layout implies, and callers use
/// them (or the layout) instead of knowing formats by name.
///
/// # Rows and tensors
/// A `rows × cols` tensor is `rows` rows of [`row_bytes(cols)`](Format::row_bytes) bytes,
/// then the side section of [`aux_bytes(rows, cols)`](Format::aux_bytes) bytes (a grid
/// layout's scales; none for blocks and groups). The `*_at` methods work on row `row` of such
/// a tensor given its side section; [`dequant_row`](Format::dequant_row) and
/// [`quantize_row`](Format::quantize_row) work on one row standing alone, i.e. on the bytes of
/// a `1 × cols` tensor ([`tensor_bytes(1, cols)`](Format::tensor_bytes)), which for
/// row-contained layouts is exactly one row.
///
/// # Panics
/// No method panics on any input: every length, value and parameter is checked and a bad one
/// is a [`QuantError`]. (Implementations outside qforge must keep that promise.)
pub trait Format: Send + Sync + 'static {
    /// The format's static facts (name, GGML type id, block size and bytes, CUDA code).
    ///
    /// # Errors
    /// None.
    ///
    /// # Panics
    /// Never (see [the trait docs](Format#panics)).
    fn desc(&self) -> &'static FormatDesc;

    /// Whether ggml's own quantizer for this format uses importance weights
    /// ([`BlockFormat::GGML_USES_IMPORTANCE`]). `true` for formats ggml does not define.
    ///
    /// # Errors
    /// None.
    ///
    /// # Panics
    /// Never (see [the trait docs](Format#panics)).
    fn ggml_uses_importance(&self) -> bool {
        true
    }

    /// Whether the format's CUDA device code provides the int8 GEMM's sub-block codes
    /// ([`BlockFormat::CUDA_CODES32`]). `false` unless a format says so.
    ///
    /// # Errors
    /// None.
    ///
    /// # Panics
    /// Never (see [the trait docs](Format#panics)).
    fn cuda_codes32(&self) -> bool {
        false
    }

    /// Whether f16 / bf16 output of [`dequant_row_at`](Format::dequant_row_at) is written
    /// without an f32 pass ([`BlockFormat::DIRECT_16BIT`]), so that it is faster than decoding
    /// to f32 and converting; the values are the same either way. `false` unless a format says
    /// so.
    ///
    /// # Errors
    /// None.
    ///
    /// # Panics
    /// Never (see [the trait docs](Format#panics)).
    fn direct_16bit(&self) -> bool {
        false
    }

    /// How a tensor of this format is stored. The default is row blocks of the descriptor's
    /// `block_size` elements in `block_bytes` bytes; group-wise and grid formats override it.
    ///
    /// # Errors
    /// None.
    ///
    /// # Panics
    /// Never (see [the trait docs](Format#panics)).
    fn layout(&self) -> Layout {
        let d = self.desc();
        Layout::Blocks { block_size: d.block_size, block_bytes: d.block_bytes }
    }

    /// Bytes of one quantized row holding `cols` logical elements (padded to whole units).
    ///
    /// # Errors
    /// [`QuantError::Overflow`] when the size does not fit in `usize`.
    ///
    /// # Panics
    /// Never (see [the trait docs](Format#panics)).
    fn row_bytes(&self, cols: usize) -> Result<usize, QuantError> {
        self.layout().row_bytes(cols)
    }

    /// Bytes of a whole `rows × cols` tensor: the rows, then the side section.
    ///
    /// # Errors
    /// [`QuantError::Overflow`] when the size does not fit in `usize`.
    ///
    /// # Panics
    /// Never (see [the trait docs](Format#panics)).
    fn tensor_bytes(&self, rows: usize, cols: usize) -> Result<usize, QuantError> {
        let body =
            self.row_bytes(cols)?.checked_mul(rows).ok_or(QuantError::Overflow { what: "tensor size in bytes" })?;
        body.checked_add(self.aux_bytes(rows, cols)?).ok_or(QuantError::Overflow { what: "tensor size in bytes" })
    }

    /// Dequantize one row standing alone — the bytes of a `1 × out.len()` tensor,
    /// `row.len() == tensor_bytes(1, out.len())` (for a grid layout: the values, then the
    /// row's grid row) — into f32, f16 or bf16. Equal to
    /// [`dequant_row_at`](Format::dequant_row_at) of row 0 with the side section split off.
    ///
    /// # Errors
    /// [`QuantError::NotWholeBlocks`] / [`QuantError::ShapeMismatch`] when `row` has the wrong
    /// length for `out`.
    ///
    /// # Panics
    /// Never (see [the trait docs](Format#panics)).
    fn dequant_row(&self, row: &[u8], out: OutRow<'_>) -> Result<(), QuantError>;

    /// Quantize one row of finite values standing alone, with optional per-element importance
    /// weights, into the bytes of a `1 × x.len()` tensor (`out.len() == tensor_bytes(1,
    /// x.len())`; for a grid layout: the values, then the row's grid row).
    ///
    /// # Errors
    /// [`QuantError::ShapeMismatch`] when `out` has the wrong length,
    /// [`QuantError::NonFinite`] for a non-finite value, [`QuantError::InvalidImatrix`] for
    /// weights of the wrong length or a negative / non-finite weight.
    ///
    /// # Panics
    /// Never (see [the trait docs](Format#panics)).
    fn quantize_row(&self, x: &[f32], weights: Option<&[f32]>, out: &mut [u8]) -> Result<(), QuantError>;

    /// The parameters this instance was made with (default for unparameterised formats).
    ///
    /// # Errors
    /// None.
    ///
    /// # Panics
    /// Never (see [the trait docs](Format#panics)).
    fn params(&self) -> Params {
        Params::default()
    }

    /// The variant of this format with run-time parameters `p` applied: `Ok(None)` means
    /// "this very format". Unparameterised formats accept only the default parameters. Use
    /// [`with_params`](Format#method.with_params) rather than calling this directly.
    ///
    /// # Errors
    /// [`QuantError::Unsupported`] for parameters the format does not take or values it does
    /// not support (the message lists the valid ones).
    ///
    /// # Panics
    /// Never (see [the trait docs](Format#panics)).
    fn variant(&self, p: &Params) -> Result<Option<&'static dyn Format>, QuantError> {
        if p.is_default() {
            Ok(None)
        } else {
            Err(QuantError::Unsupported {
                format: self.desc().name,
                reason: format!(
                    "takes no parameters ({p} given; --group-size is for group-wise formats such as int4g)"
                ),
            })
        }
    }

    // ---- Tensor-level side data (a grid layout's scales) ---------------------------------

    /// Bytes of the side section stored after the rows of a `rows × cols` tensor (a grid
    /// layout's scale grid); row-contained layouts have none. The default follows
    /// [`Format::layout`].
    ///
    /// # Errors
    /// [`QuantError::Overflow`] when the size does not fit in `usize`.
    ///
    /// # Panics
    /// Never (see [the trait docs](Format#panics)).
    fn aux_bytes(&self, rows: usize, cols: usize) -> Result<usize, QuantError> {
        self.layout().side_bytes(rows, cols)
    }

    /// Compute the side section from the whole row-major input, before any row is quantized
    /// (a no-op for formats without one).
    ///
    /// # Errors
    /// [`QuantError::ShapeMismatch`] when `x` is not `rows × cols` values or `aux` not
    /// [`aux_bytes(rows, cols)`](Format::aux_bytes) bytes; [`QuantError::NonFinite`] for a
    /// non-finite value; [`QuantError::Overflow`] for sizes past `usize`.
    ///
    /// # Panics
    /// Never (see [the trait docs](Format#panics)).
    fn quantize_aux(&self, x: &[f32], rows: usize, cols: usize, aux: &mut [u8]) -> Result<(), QuantError> {
        let _ = (x, rows, cols, aux);
        Ok(())
    }

    /// Quantize row number `row` of a tensor whose side section is `aux` into `out`
    /// ([`row_bytes(x.len())`](Format::row_bytes) bytes).
    ///
    /// # Errors
    /// As [`Format::quantize_row`]; for a grid layout also [`QuantError::ShapeMismatch`] when
    /// `aux` does not cover `row`, and [`QuantError::Unsupported`] for a scale in `aux` that
    /// is not finite and positive.
    ///
    /// # Panics
    /// Never (see [the trait docs](Format#panics)).
    fn quantize_row_at(
        &self,
        x: &[f32],
        weights: Option<&[f32]>,
        row: usize,
        aux: &[u8],
        out: &mut [u8],
    ) -> Result<(), QuantError> {
        let _ = (row, aux);
        self.quantize_row(x, weights, out)
    }

    /// Dequantize row number `row` (`bytes`: [`row_bytes(out.len())`](Format::row_bytes)
    /// bytes) of a tensor whose side section is `aux`.
    ///
    /// # Errors
    /// As [`Format::dequant_row`]; for a grid layout also [`QuantError::ShapeMismatch`] when
    /// `aux` is not whole grid rows for this row length or does not cover `row`.
    ///
    /// # Panics
    /// Never (see [the trait docs](Format#panics)).
    fn dequant_row_at(&self, bytes: &[u8], row: usize, aux: &[u8], out: OutRow<'_>) -> Result<(), QuantError> {
        let _ = (row, aux);
        self.dequant_row(bytes, out)
    }

    /// The side section of the window `rows` × `cols` of a `n_rows × n_cols` tensor whose
    /// side section is `aux` (used by padding and sharding). The window starts at multiples
    /// of [`split_granularity`](Format::split_granularity) and may extend past the tensor
    /// (padding): cells outside it get the neutral scale 1. The default follows
    /// [`Format::layout`] ([`Layout::side_window`]).
    ///
    /// # Errors
    /// [`QuantError::ShapeMismatch`] when `aux` is not the tensor's side section,
    /// [`QuantError::InvalidShape`] for a window not starting at a split multiple.
    ///
    /// # Panics
    /// Never (see [the trait docs](Format#panics)).
    fn aux_window(
        &self,
        aux: &[u8],
        n_rows: usize,
        n_cols: usize,
        rows: std::ops::Range<usize>,
        cols: std::ops::Range<usize>,
    ) -> Result<Vec<u8>, QuantError> {
        self.layout().side_window(aux, n_rows, n_cols, rows, cols)
    }

    /// Where a tensor of this format may be split: (row multiple, column multiple). Row
    /// layouts split between any rows and at block / group boundaries, grids at tiles.
    ///
    /// # Errors
    /// None.
    ///
    /// # Panics
    /// Never (see [the trait docs](Format#panics)).
    fn split_granularity(&self) -> (usize, usize) {
        self.layout().split_granularity()
    }

    /// Bytes of one row unit (block, group or value) that decodes to zeros (padding).
    ///
    /// # Errors
    /// None: a format whose quantizer refuses a zero row gets all-zero bytes.
    ///
    /// # Panics
    /// Never (see [the trait docs](Format#panics)).
    fn zero_block(&self) -> Vec<u8> {
        let (n, b) = self.layout().row_unit();
        let mut out = vec![0u8; b];
        if self.row_bytes(n).ok() != Some(b) || self.quantize_row_at(&vec![0f32; n], None, 0, &[], &mut out).is_err() {
            out.fill(0);
        }
        out
    }

    // ---- Dot products (mat-vec / mat-mul) ------------------------------------------------

    /// How activations are quantized for this format's native integer dot product.
    ///
    /// # Errors
    /// None.
    ///
    /// # Panics
    /// Never (see [the trait docs](Format#panics)).
    fn native_act(&self) -> ActKind {
        ActKind::F32
    }

    /// [`BlockFormat::STORED_SUM_REL_ERROR`] of an activation format: the rounding its stored
    /// block sums carry, which an f64 reference of a dot with these activations allows for
    /// (per block of this format). 0 for formats that store no sum.
    ///
    /// # Errors
    /// None.
    ///
    /// # Panics
    /// Never (see [the trait docs](Format#panics)).
    fn stored_sum_rel_error(&self) -> f64 {
        0.0
    }

    /// The fields of a block format's block as C sees them ([`CLayout`], declared with
    /// [`c_block!`](crate::c_block)): the CUDA build generates the device struct from them.
    /// Empty for formats that are not row blocks of one fixed struct (group and grid layouts,
    /// whose device code reads [`Format::layout`]).
    ///
    /// # Errors
    /// None.
    ///
    /// # Panics
    /// Never (see [the trait docs](Format#panics)).
    fn c_block(&self) -> &'static [CField] {
        &[]
    }

    /// The format that quantizes activation rows of `kind` (a one-row-tile grid format for
    /// [`ActKind::Fp8x128`]), if this format provides it: the registry is searched with this
    /// for activation kinds that are not plain block formats, so that no caller needs to know
    /// which crate implements them. An activation row of `padded` elements is then
    /// `quantize_aux(x, 1, padded)` + `quantize_row_at(x, None, 0, …)` of that format.
    ///
    /// # Errors
    /// None.
    ///
    /// # Panics
    /// Never (see [the trait docs](Format#panics)).
    fn act_format(&self, kind: ActKind) -> Option<&'static dyn Format> {
        let _ = kind;
        None
    }

    /// Dot of weight row number `row` (`bytes`, side section `aux`) with a quantized
    /// activation row whose length is the row's padded element count, when the format has an
    /// exact kernel for that activation kind; `None` otherwise (callers then fall back to f32
    /// on dequantized weights).
    ///
    /// # Errors
    /// [`QuantError::NotWholeBlocks`] / [`QuantError::ShapeMismatch`] when the weight row, the
    /// activation row or (grid layouts) `aux` have lengths that do not match.
    ///
    /// # Panics
    /// Never (see [the trait docs](Format#panics)).
    fn dot_row(&self, bytes: &[u8], row: usize, aux: &[u8], act: ActRow<'_>) -> Option<Result<f32, QuantError>> {
        let _ = (bytes, row, aux, act);
        None
    }

    /// [`Format::dot_row`] of one weight row with several activation rows (mat-mul):
    /// `out[i]` is bit-identical to `dot_row(bytes, row, aux, acts[i])`, computed with each
    /// weight block unpacked once where the format's kernel supports it. `None` when the
    /// format has no kernel for that activation kind.
    ///
    /// # Errors
    /// As [`Format::dot_row`] for any of the rows, and [`QuantError::ShapeMismatch`] when
    /// `out.len() != acts.len()`.
    ///
    /// # Panics
    /// Never (see [the trait docs](Format#panics)).
    fn dot_rows(
        &self,
        bytes: &[u8],
        row: usize,
        aux: &[u8],
        acts: &[ActRow<'_>],
        out: &mut [f32],
    ) -> Option<Result<(), QuantError>> {
        if acts.len() != out.len() {
            return Some(Err(QuantError::ShapeMismatch {
                what: "dot outputs for the activation rows",
                expected: acts.len(),
                actual: out.len(),
            }));
        }
        crate::dot::each_row(out.iter_mut().zip(acts), |(o, a)| {
            Some(self.dot_row(bytes, row, aux, *a)?.map(|v| *o = v))
        })
    }

    /// [`Format::dot_row`] of several consecutive weight rows with one activation row
    /// (mat-vec): `bytes` holds `out.len()` rows of `row_bytes` each, the first being row
    /// number `row0`, and `out[i]` is bit-identical to `dot_row(row i's bytes, row0 + i, aux,
    /// act)`, in one call: the dispatch and the activation row's checks are paid once, and a
    /// kernel may share work between the rows. `None` when the format has no kernel for that
    /// activation kind.
    ///
    /// # Errors
    /// As [`Format::dot_row`] for any of the rows, and [`QuantError::ShapeMismatch`] when
    /// `bytes.len() != out.len() · row_bytes`.
    ///
    /// # Panics
    /// Never (see [the trait docs](Format#panics)).
    fn dot_weight_rows(
        &self,
        bytes: &[u8],
        row_bytes: usize,
        row0: usize,
        aux: &[u8],
        act: ActRow<'_>,
        out: &mut [f32],
    ) -> Option<Result<(), QuantError>> {
        if let Some(e) = weight_rows_mismatch(bytes.len(), row_bytes, out.len()) {
            return Some(Err(e));
        }
        crate::dot::each_row(out.iter_mut().zip(bytes.chunks_exact(row_bytes.max(1))).enumerate(), |(i, (o, w))| {
            Some(self.dot_row(w, row0 + i, aux, act)?.map(|v| *o = v))
        })
    }

    /// A tile of a mat-mul: several consecutive weight rows (`bytes`, rows of `row_bytes`,
    /// the first being row number `row0`) against several activation rows. Weight row `i`'s
    /// dot with `acts[j]` goes to `out[i · stride + j]`, bit-identical to `dot_rows(row i's
    /// bytes, row0 + i, aux, acts)[j]`: a kernel may decode each weight block once for all
    /// the activation rows and several weight rows side by side. The default calls
    /// [`Format::dot_rows`] per weight row. `None` when the format has no kernel for that
    /// activation kind.
    ///
    /// # Errors
    /// As [`Format::dot_rows`] for any of the rows, and [`QuantError::ShapeMismatch`] when
    /// `bytes` is not whole rows, `stride < acts.len()` or `out` is too short for the last
    /// weight row's outputs.
    ///
    /// # Panics
    /// Never (see [the trait docs](Format#panics)).
    #[allow(clippy::too_many_arguments)]
    fn dot_tile(
        &self,
        bytes: &[u8],
        row_bytes: usize,
        row0: usize,
        aux: &[u8],
        acts: &[ActRow<'_>],
        out: &mut [f32],
        stride: usize,
    ) -> Option<Result<(), QuantError>> {
        let rows = bytes.len().checked_div(row_bytes).unwrap_or(0);
        if let Some(e) = tile_mismatch(bytes.len(), row_bytes, acts.len(), out.len(), stride) {
            return Some(Err(e));
        }
        crate::dot::each_row(bytes.chunks_exact(row_bytes.max(1)).take(rows).enumerate(), |(i, w)| {
            self.dot_rows(w, row0 + i, aux, acts, &mut out[i * stride..][..acts.len()])
        })
    }

    /// The most activation rows a [`Format::dot_tile`] call is best given at once (its
    /// kernel's [`DotKernel::TILE_ROWS`](crate::DotKernel::TILE_ROWS)); `0` (the default):
    /// no preference, tiles sized to stay in L2.
    fn tile_rows(&self) -> usize {
        0
    }

    /// The format's packed (row-interleaved) weight layout for the CPU kernels, if it has one
    /// (see [`Packing`]; the default: none).
    fn packing(&self) -> Option<Packing> {
        None
    }

    /// `rows` weight rows of `row_bytes` each (`bytes`, whole blocks) in the [`Format::packing`]
    /// layout: `rows.div_ceil(packing.rows)` groups of `row_bytes / block_bytes` block columns.
    /// `None` where the format has none.
    ///
    /// # Errors
    /// [`QuantError::ShapeMismatch`] / [`QuantError::NotWholeBlocks`] when `bytes` is not
    /// `rows` rows of `row_bytes` whole blocks.
    ///
    /// # Panics
    /// Never (see [the trait docs](Format#panics)).
    fn pack_rows(&self, bytes: &[u8], row_bytes: usize, rows: usize) -> Option<Result<Vec<u8>, QuantError>> {
        let _ = (bytes, row_bytes, rows);
        None
    }

    /// The dot of every row of the packed groups `packed` (from [`Format::pack_rows`] with
    /// `row_bytes`) with `act`: `out[g · packing.rows + r]` for row `r` of group `g`. `None`
    /// where the format has no packed layout or no kernel for that activation kind.
    ///
    /// # Errors
    /// [`QuantError::ShapeMismatch`] when `packed` is not whole groups for `out`, or the
    /// activation row's length does not match the rows'.
    ///
    /// # Panics
    /// Never (see [the trait docs](Format#panics)).
    fn packed_dot(
        &self,
        packed: &[u8],
        row_bytes: usize,
        act: ActRow<'_>,
        out: &mut [f32],
    ) -> Option<Result<(), QuantError>> {
        let _ = (packed, row_bytes, act, out);
        None
    }

    /// [`Format::packed_dot`] for every row of `acts` (the mat-mul): row `r`'s results into
    /// `out[r · len .. (r + 1) · len]`, `len = out.len() / acts.len()`, each bit-identical to
    /// `packed_dot`'s. Kernels that have one unpack each packed block once for several rows.
    ///
    /// # Errors
    /// As [`Format::packed_dot`]; [`QuantError::ShapeMismatch`] also when `out` is not
    /// `acts.len()` equal parts.
    ///
    /// # Panics
    /// Never (see [the trait docs](Format#panics)).
    fn packed_dot_rows(
        &self,
        packed: &[u8],
        row_bytes: usize,
        acts: &[ActRow<'_>],
        out: &mut [f32],
    ) -> Option<Result<(), QuantError>> {
        if let Some(e) = act_rows_mismatch(acts.len(), out.len()) {
            return Some(Err(e));
        }
        let len = out.len() / acts.len().max(1);
        crate::dot::each_row(acts.iter().zip(out.chunks_exact_mut(len.max(1))), |(act, o)| {
            self.packed_dot(packed, row_bytes, *act, o)
        })
    }
}

/// The error of a [`Format::packed_dot_rows`] call whose outputs are not one equal part per
/// activation row.
fn act_rows_mismatch(acts: usize, out: usize) -> Option<QuantError> {
    let bad = if acts == 0 { out != 0 } else { !out.is_multiple_of(acts) };
    bad.then_some(QuantError::ShapeMismatch {
        what: "packed dot outputs for the activation rows",
        expected: out.next_multiple_of(acts.max(1)),
        actual: out,
    })
}

/// The error of a [`Format::dot_tile`] call whose arguments do not fit together: `bytes` not
/// whole rows of `row_bytes`, a `stride` below the activation rows, or an `out` too short for
/// the last weight row's outputs (`acts` activation rows, `out` output elements); `None`
/// when they fit. For a format that implements [`Format::dot_tile`] itself.
pub fn tile_mismatch(bytes: usize, row_bytes: usize, acts: usize, out: usize, stride: usize) -> Option<QuantError> {
    if (row_bytes == 0 && bytes > 0) || !bytes.is_multiple_of(row_bytes.max(1)) {
        return Some(QuantError::ShapeMismatch {
            what: "weight row bytes of a mat-mul tile (whole rows)",
            expected: bytes.next_multiple_of(row_bytes.max(1)),
            actual: bytes,
        });
    }
    if stride < acts {
        return Some(QuantError::ShapeMismatch { what: "mat-mul tile output stride", expected: acts, actual: stride });
    }
    let rows = bytes.checked_div(row_bytes).unwrap_or(0);
    let want = rows.checked_sub(1).map_or(Some(0), |r| r.checked_mul(stride).and_then(|v| v.checked_add(acts)));
    match want {
        Some(w) if out >= w => None,
        w => Some(QuantError::ShapeMismatch {
            what: "mat-mul tile outputs",
            expected: w.unwrap_or(usize::MAX),
            actual: out,
        }),
    }
}

/// The error of a [`Format::dot_weight_rows`] call whose bytes are not `rows` rows of
/// `row_bytes`.
fn weight_rows_mismatch(bytes: usize, row_bytes: usize, rows: usize) -> Option<QuantError> {
    let want = row_bytes.checked_mul(rows);
    (want != Some(bytes) || (row_bytes == 0 && rows > 0)).then(|| QuantError::ShapeMismatch {
        what: "weight row bytes for the dot outputs",
        expected: want.unwrap_or(usize::MAX),
        actual: bytes,
    })
}

impl dyn Format {
    /// This format with run-time parameters applied (`Params::default()` gives `self`).
    ///
    /// # Errors
    /// As [`Format::variant`].
    ///
    /// # Panics
    /// Never.
    pub fn with_params(&'static self, p: &Params) -> Result<&'static dyn Format, QuantError> {
        Ok(self.variant(p)?.unwrap_or(self))
    }
}

impl std::fmt::Debug for dyn Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.desc().name)
    }
}

/// The input checks every quantizer applies to one row: `x` finite (`NonFinite` with the index
/// of the first offender) and, if given, one finite non-negative importance weight per
/// element. `Registered` formats get it for free; a format implementing [`Format`] directly
/// calls it.
pub fn check_row_input(x: &[f32], weights: Option<&[f32]>) -> Result<(), QuantError> {
    // A branch-free pass that vectorizes; the index is searched for only on failure.
    if !x.iter().fold(true, |ok, v| ok & v.is_finite()) {
        let index = x.iter().position(|v| !v.is_finite()).unwrap_or(0);
        return Err(QuantError::NonFinite { index, value: x[index] });
    }
    if let Some(w) = weights {
        if w.len() != x.len() {
            return Err(QuantError::InvalidImatrix {
                reason: format!("{} weights for a row of {} elements", w.len(), x.len()),
            });
        }
        if let Some(i) = w.iter().position(|v| !(v.is_finite() && *v >= 0.0)) {
            return Err(QuantError::InvalidImatrix {
                reason: format!("weight {} at column {i} is not a finite non-negative number", w[i]),
            });
        }
    }
    Ok(())
}

/// Adapter that makes a [`BlockFormat`] a registrable `&'static dyn Format`:
/// `pub static FORMATS: &[&dyn Format] = &[&Registered::<Q4_0, GgmlDot>::NEW];`
///
/// The second parameter is the format's dot kernel ([`DotKernel`]): [`NoDot`] (the default)
/// or [`GgmlDot`](crate::GgmlDot) for a format implementing [`NativeDot`](crate::NativeDot).
pub struct Registered<F, D = NoDot>(PhantomData<fn() -> (F, D)>);

impl<F: BlockFormat, D: DotKernel<F>> Registered<F, D> {
    /// The error of a packed dot whose `packed` bytes are not whole groups of `row_bytes` rows
    /// for `outs` results (or whose rows are not whole blocks).
    fn packed_sizes_mismatch(packed: usize, row_bytes: usize, outs: usize) -> Option<QuantError> {
        let p = D::PACKING?;
        let n = row_bytes / F::DESC.block_bytes;
        let want = (outs / p.rows).checked_mul(n * p.block_bytes);
        (!outs.is_multiple_of(p.rows) || want != Some(packed) || !row_bytes.is_multiple_of(F::DESC.block_bytes)).then(
            || QuantError::ShapeMismatch {
                what: "packed weight bytes for the dot outputs",
                expected: want.unwrap_or(usize::MAX),
                actual: packed,
            },
        )
    }

    /// The adapter. Evaluating it checks at compile time that the block layout matches the
    /// descriptor (size, alignment 1, non-zero block size).
    pub const NEW: Self = {
        assert!(std::mem::size_of::<F::Block>() == F::DESC.block_bytes, "block struct size != DESC.block_bytes");
        assert!(std::mem::align_of::<F::Block>() == 1, "block struct must have alignment 1 (use qforge_core::le)");
        assert!(F::DESC.block_size > 0 && F::DESC.block_bytes > 0);
        let (fields, mut i, mut bytes) = (<F::Block as CLayout>::FIELDS, 0, 0);
        while i < fields.len() {
            bytes += fields[i].count;
            i += 1;
        }
        assert!(bytes == F::DESC.block_bytes, "the block's C fields do not add up to DESC.block_bytes");
        Registered(PhantomData)
    };
}

impl<F: BlockFormat, D: DotKernel<F>> Registered<F, D> {
    fn blocks<'a>(&self, row: &'a [u8], cols: usize) -> Result<&'a [F::Block], QuantError> {
        let d = &F::DESC;
        if !row.len().is_multiple_of(d.block_bytes) {
            return Err(QuantError::NotWholeBlocks {
                what: "quantized row",
                format: d.name,
                len: row.len(),
                block_bytes: d.block_bytes,
            });
        }
        let want = d.row_bytes(cols)?;
        if row.len() != want {
            return Err(QuantError::ShapeMismatch { what: "quantized row bytes", expected: want, actual: row.len() });
        }
        // Blocks are align(1) and Pod, so the cast cannot fail on alignment or size.
        bytemuck::try_cast_slice(row).map_err(|_| QuantError::NotWholeBlocks {
            what: "quantized row",
            format: d.name,
            len: row.len(),
            block_bytes: d.block_bytes,
        })
    }
}

impl<F: BlockFormat, D: DotKernel<F>> Format for Registered<F, D> {
    fn desc(&self) -> &'static FormatDesc {
        &F::DESC
    }

    fn ggml_uses_importance(&self) -> bool {
        F::GGML_USES_IMPORTANCE
    }

    fn cuda_codes32(&self) -> bool {
        F::CUDA_CODES32
    }

    fn direct_16bit(&self) -> bool {
        F::DIRECT_16BIT
    }

    fn dequant_row(&self, row: &[u8], out: OutRow<'_>) -> Result<(), QuantError> {
        let blocks = self.blocks(row, out.len())?;
        // Compiled for the CPU's SIMD level: the decoders are plain Rust, vectorized there.
        match out {
            OutRow::F32(o) => crate::cpu::dispatch(
                #[inline(always)]
                || F::decode_row::<f32>(blocks, o),
            ),
            OutRow::F16(o) => crate::cpu::dispatch(
                #[inline(always)]
                || F::decode_row::<f16>(blocks, o),
            ),
            OutRow::Bf16(o) => crate::cpu::dispatch(
                #[inline(always)]
                || F::decode_row::<bf16>(blocks, o),
            ),
        }
        Ok(())
    }

    fn quantize_row(&self, x: &[f32], weights: Option<&[f32]>, out: &mut [u8]) -> Result<(), QuantError> {
        let d = &F::DESC;
        let want = d.row_bytes(x.len())?;
        if out.len() != want {
            return Err(QuantError::ShapeMismatch { what: "quantized row bytes", expected: want, actual: out.len() });
        }
        check_row_input(x, weights)?;
        let blocks: &mut [F::Block] = bytemuck::try_cast_slice_mut(out).map_err(|_| QuantError::NotWholeBlocks {
            what: "quantized output",
            format: d.name,
            len: want,
            block_bytes: d.block_bytes,
        })?;
        F::encode_row(x, weights, blocks);
        Ok(())
    }

    fn native_act(&self) -> ActKind {
        D::ACT
    }

    fn stored_sum_rel_error(&self) -> f64 {
        F::STORED_SUM_REL_ERROR
    }

    fn c_block(&self) -> &'static [CField] {
        <F::Block as CLayout>::FIELDS
    }

    fn dot_row(&self, bytes: &[u8], _row: usize, _aux: &[u8], act: ActRow<'_>) -> Option<Result<f32, QuantError>> {
        match Self::dot_blocks(bytes)? {
            Ok(blocks) => D::dot(blocks, act),
            Err(e) => Some(Err(e)),
        }
    }

    fn dot_rows(
        &self,
        bytes: &[u8],
        _row: usize,
        _aux: &[u8],
        acts: &[ActRow<'_>],
        out: &mut [f32],
    ) -> Option<Result<(), QuantError>> {
        match Self::dot_blocks(bytes)? {
            Ok(blocks) => D::dot_rows(blocks, acts, out),
            Err(e) => Some(Err(e)),
        }
    }

    fn dot_weight_rows(
        &self,
        bytes: &[u8],
        row_bytes: usize,
        _row0: usize,
        _aux: &[u8],
        act: ActRow<'_>,
        out: &mut [f32],
    ) -> Option<Result<(), QuantError>> {
        if let Some(e) = weight_rows_mismatch(bytes.len(), row_bytes, out.len()) {
            return Some(Err(e));
        }
        if out.is_empty() {
            return Some(Ok(()));
        }
        match Self::rows_blocks(bytes, row_bytes)? {
            Ok(blocks) => D::dot_weight_rows(blocks, row_bytes / F::DESC.block_bytes, act, out),
            Err(e) => Some(Err(e)),
        }
    }

    fn dot_tile(
        &self,
        bytes: &[u8],
        row_bytes: usize,
        _row0: usize,
        _aux: &[u8],
        acts: &[ActRow<'_>],
        out: &mut [f32],
        stride: usize,
    ) -> Option<Result<(), QuantError>> {
        if let Some(e) = tile_mismatch(bytes.len(), row_bytes, acts.len(), out.len(), stride) {
            return Some(Err(e));
        }
        if bytes.is_empty() {
            return Some(Ok(()));
        }
        match Self::rows_blocks(bytes, row_bytes)? {
            Ok(blocks) => D::dot_tile(blocks, row_bytes / F::DESC.block_bytes, acts, out, stride),
            Err(e) => Some(Err(e)),
        }
    }

    fn tile_rows(&self) -> usize {
        D::TILE_ROWS
    }

    fn packing(&self) -> Option<Packing> {
        D::PACKING
    }

    fn pack_rows(&self, bytes: &[u8], row_bytes: usize, rows: usize) -> Option<Result<Vec<u8>, QuantError>> {
        D::PACKING?;
        if let Some(e) = weight_rows_mismatch(bytes.len(), row_bytes, rows) {
            return Some(Err(e));
        }
        match Self::dot_blocks(bytes)? {
            Ok(blocks) => D::pack(blocks, rows, row_bytes / F::DESC.block_bytes).map(Ok),
            Err(e) => Some(Err(e)),
        }
    }

    fn packed_dot(
        &self,
        packed: &[u8],
        row_bytes: usize,
        act: ActRow<'_>,
        out: &mut [f32],
    ) -> Option<Result<(), QuantError>> {
        D::PACKING?;
        if let Some(e) = Self::packed_sizes_mismatch(packed.len(), row_bytes, out.len()) {
            return Some(Err(e));
        }
        D::packed_dot(packed, row_bytes / F::DESC.block_bytes, act, out)
    }

    fn packed_dot_rows(
        &self,
        packed: &[u8],
        row_bytes: usize,
        acts: &[ActRow<'_>],
        out: &mut [f32],
    ) -> Option<Result<(), QuantError>> {
        D::PACKING?;
        if let Some(e) = act_rows_mismatch(acts.len(), out.len()) {
            return Some(Err(e));
        }
        if acts.is_empty() {
            return Some(Ok(()));
        }
        // Each row's part of `out` against the packed bytes, as `packed_dot` checks them.
        if let Some(e) = Self::packed_sizes_mismatch(packed.len(), row_bytes, out.len() / acts.len().max(1)) {
            return Some(Err(e));
        }
        D::packed_dot_rows(packed, row_bytes / F::DESC.block_bytes, acts, out)
    }
}

impl<F: BlockFormat, D: DotKernel<F>> Registered<F, D> {
    /// A weight row as blocks for the dot kernels: an error if it is not whole blocks, `None`
    /// if the bytes cannot be viewed as blocks (never, with alignment-1 blocks).
    /// Whole rows of `row_bytes` (`bytes` non-empty, a multiple of it: checked by the caller)
    /// as one run of blocks, after checking that a row is whole blocks.
    fn rows_blocks(bytes: &[u8], row_bytes: usize) -> Option<Result<&[F::Block], QuantError>> {
        if let Err(e) = Self::dot_blocks(&bytes[..row_bytes])? {
            return Some(Err(e));
        }
        Self::dot_blocks(bytes)
    }

    fn dot_blocks(bytes: &[u8]) -> Option<Result<&[F::Block], QuantError>> {
        let d = &F::DESC;
        if !bytes.len().is_multiple_of(d.block_bytes) {
            return Some(Err(QuantError::NotWholeBlocks {
                what: "quantized row",
                format: d.name,
                len: bytes.len(),
                block_bytes: d.block_bytes,
            }));
        }
        bytemuck::try_cast_slice(bytes).ok().map(Ok)
    }
}
