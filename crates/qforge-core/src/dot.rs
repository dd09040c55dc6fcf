//! Dot products of quantized weight rows with quantized activation rows: the contract that
//! lets `qforge-cpu` run mat-vec / mat-mul with integer arithmetic for every format.
//!
//! * [`ActKind`] says how a format wants its activations quantized for its own ("native")
//!   dot: ggml's `vec_dot_type` (q8_0 / q8_1 / q8_k) for the GGUF formats, per-token int8 for
//!   int4g (A8W4DQ), e4m3 with 1×128 scales for the fp8 formats.
//! * [`ActRow`] is one activation row quantized that way.
//! * A format crate supplies the kernel by implementing [`NativeDot`] (ggml-style: weight
//!   blocks against activation blocks) and registering with [`GgmlDot`], or by implementing
//!   [`DotKernel`] itself for anything else.

use crate::block::BlockFormat;
use crate::error::QuantError;

/// How activations are quantized for a format's native dot product.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActKind {
    /// Blocks of the named registered format (ggml's `vec_dot_type`: q8_0, q8_1 or q8_k).
    Blocks(&'static str),
    /// Per-token asymmetric int8 (torchao `choose_qparams_per_token_asymmetric`).
    Int8Dyn,
    /// e4m3 with one f32 scale per 1×128 group (DeepSeek-V3 / DeepGEMM activations).
    Fp8x128,
    /// No integer kernel: the dot runs in f32 on dequantized weights.
    F32,
}

/// One activation row, quantized for a dot product. Its length (in elements) is the weight
/// row's padded length (whole blocks); padded positions hold the quantization of 0.
#[derive(Clone, Copy, Debug)]
pub enum ActRow<'a> {
    /// Raw blocks of the [`ActKind::Blocks`] format.
    Blocks(&'a [u8]),
    /// `x ≈ scale · (q − zero_point)`.
    Int8 {
        /// The int8 codes, one per element.
        q: &'a [i8],
        /// The row's f32 scale.
        scale: f32,
        /// The row's zero point (asymmetric per-token quantization).
        zero_point: i32,
    },
    /// `x[k] ≈ scales[k / 128] · e4m3(q[k])`.
    Fp8 {
        /// The e4m3 codes (raw bytes), one per element.
        q: &'a [u8],
        /// One f32 scale per 128 elements.
        scales: &'a [f32],
    },
}

impl ActRow<'_> {
    /// A short name for error messages.
    pub fn kind_name(&self) -> &'static str {
        match self {
            ActRow::Blocks(_) => "quantized blocks",
            ActRow::Int8 { .. } => "int8 per-token",
            ActRow::Fp8 { .. } => "fp8 1x128",
        }
    }
}

/// A format's packed (row-interleaved) weight layout for the CPU mat-vec / mat-mul kernels: the
/// weight rows in groups of `rows` (the last group filled up with zero rows), each group its
/// `n` block columns of `block_bytes` each, one after another. A one-time copy of a tensor
/// whose kernels put one weight row per SIMD lane (see `qforge_k::packed`); its results equal
/// the plain kernel's exact integer dot to f32 rounding (a different summation order, so not
/// bit for bit).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packing {
    /// Weight rows per group.
    pub rows: usize,
    /// Bytes of one group's block column (its `rows` rows' blocks, packed).
    pub block_bytes: usize,
}

/// A ggml-style integer dot product: one row of weight blocks against the activation row
/// quantized to [`NativeDot::Act`] (ggml's `vec_dot_type`). The result must equal ggml's CPU
/// `vec_dot` up to f32 rounding order.
pub trait NativeDot: BlockFormat {
    /// The activation format (q8_0, q8_1 or q8_k); its name must be `DESC.dot_type`.
    type Act: BlockFormat;

    /// `Σ w·a` over the row. `a.len() * Act::BLOCK == w.len() * Self::BLOCK` (checked by the
    /// caller).
    fn vec_dot(w: &[Self::Block], a: &[<Self::Act as BlockFormat>::Block]) -> f32;

    /// `out[i] = vec_dot(w, a[i])` for up to [`MAX_DOT_ROWS`] activation rows at once: the
    /// mat-mul kernel. Each result must be bit-identical to [`NativeDot::vec_dot`] on that
    /// row. The default calls `vec_dot` per row; a kernel overrides it to unpack each weight
    /// block once for all the rows.
    ///
    /// # Panics
    /// May panic if `out.len() != a.len()` or `a.len() > MAX_DOT_ROWS` (callers in this
    /// crate never do that; every `a[i]` has been length-checked).
    fn vec_dot_rows(w: &[Self::Block], a: &[&[<Self::Act as BlockFormat>::Block]], out: &mut [f32]) {
        assert_eq!(a.len(), out.len(), "one output per activation row");
        for (o, a) in out.iter_mut().zip(a) {
            *o = Self::vec_dot(w, a);
        }
    }

    /// `out[i] = vec_dot(w_i, a)` for `out.len()` consecutive weight rows `w_i` (`w` holds
    /// them one after another, each `w.len() / out.len()` blocks and paired with all of `a`):
    /// the mat-vec kernel. Each result must be bit-identical to [`NativeDot::vec_dot`] on
    /// that row. The default calls `vec_dot` per row; a kernel may override it to check the
    /// activation row once, or to share its loads between weight rows.
    ///
    /// # Panics
    /// May panic if `w.len()` is not a multiple of `out.len()` (callers in this crate never
    /// do that; `a` has been length-checked against one row).
    fn vec_dot_weight_rows(w: &[Self::Block], a: &[<Self::Act as BlockFormat>::Block], out: &mut [f32]) {
        if out.is_empty() {
            return;
        }
        assert!(w.len().is_multiple_of(out.len()), "whole weight rows");
        let n = w.len() / out.len();
        for (o, w) in out.iter_mut().zip(w.chunks_exact(n.max(1))) {
            *o = Self::vec_dot(w, a);
        }
    }

    /// A mat-mul tile: `out[i · stride + j]` = `vec_dot` of weight row `i` (blocks `i·n ..
    /// (i+1)·n` of `w`) with `a[j]`, for every weight row of `w` and every activation row of
    /// `a` (any number; each at least `n` blocks, `n > 0`, `stride ≥ a.len()` and `out` holding
    /// every result, checked by the caller). Each result must be bit-identical to
    /// [`NativeDot::vec_dot`] on that pair. Returns `false` (nothing written) where the kernel
    /// has no tile kernel for this call (the default): the caller then runs
    /// [`NativeDot::vec_dot_rows`] per weight row.
    fn vec_dot_tile(
        w: &[Self::Block],
        n: usize,
        a: &[&[<Self::Act as BlockFormat>::Block]],
        out: &mut [f32],
        stride: usize,
    ) -> bool {
        let _ = (w, n, a, out, stride);
        false
    }

    /// The most activation rows a [`NativeDot::vec_dot_tile`] call is best given at once: a
    /// tile kernel that decodes each weight block once per call and keeps only one block of
    /// the activation rows close (the `qforge-k` tile kernel) amortizes its decoding over
    /// all of them. `0` (the default): no such kernel, and the caller sizes its activation
    /// tiles to stay in L2 while every weight row passes over them.
    const TILE_ROWS: usize = 0;

    /// The format's packed layout, if it has one (the default: none).
    const PACKING: Option<Packing> = None;

    /// `rows` weight rows of `n` blocks each (`w.len() == rows · n`, checked by the caller) in
    /// the [`NativeDot::PACKING`] layout; called only where that is `Some` (the default
    /// returns nothing).
    fn pack(w: &[Self::Block], rows: usize, n: usize) -> Vec<u8> {
        let _ = (w, rows, n);
        Vec::new()
    }

    /// The dot of every row of the packed groups `p` (`out.len() / rows` groups of `n` packed
    /// block columns, checked by the caller) with `a` (`n` blocks' worth): `out[g · rows + r]`
    /// for row `r` of group `g`. `false` (nothing written) where the format has no packed
    /// layout (the default).
    fn packed_dot(p: &[u8], n: usize, a: &[<Self::Act as BlockFormat>::Block], out: &mut [f32]) -> bool {
        let _ = (p, n, a, out);
        false
    }

    /// [`NativeDot::packed_dot`] for `a.len()` activation rows (at most [`MAX_PACKED_DOT_ROWS`]):
    /// row `r`'s results into `out[r · len .. (r + 1) · len]`, `len = out.len() / a.len()`
    /// (checked by the caller). Each result must be bit-identical to `packed_dot`'s. The
    /// default calls `packed_dot` per row; a kernel may override it to unpack each packed
    /// block once for all the rows (the mat-mul kernel).
    fn packed_dot_rows(p: &[u8], n: usize, a: &[&[<Self::Act as BlockFormat>::Block]], out: &mut [f32]) -> bool {
        let len = out.len() / a.len().max(1);
        a.iter().zip(out.chunks_exact_mut(len.max(1))).all(|(a, o)| Self::packed_dot(p, n, a, o))
    }
}

/// The most activation rows one [`NativeDot::vec_dot_rows`] / [`DotKernel::dot_rows`] call
/// receives (callers split longer lists).
pub const MAX_DOT_ROWS: usize = 8;

/// The most activation rows one [`NativeDot::packed_dot_rows`] call receives (callers split
/// longer lists): enough for a kernel that decodes each packed block once for all of them to
/// spend most of its time multiplying. (From 64 to 256: a 512-row mat-mul decodes each block
/// twice instead of eight times; q5_k on Zen 4, one thread, 124 → 131 Gel/s.)
pub const MAX_PACKED_DOT_ROWS: usize = 256;

/// The dot kernel a registered format carries (the second parameter of
/// [`Registered`](crate::Registered)). [`NoDot`] (the default) has none, [`GgmlDot`] uses the
/// format's [`NativeDot`]; a format crate may implement its own for other activation kinds.
pub trait DotKernel<F: BlockFormat>: 'static {
    /// How activations are quantized for this kernel.
    const ACT: ActKind;

    /// The dot of one weight row (whole blocks) with `act`, or `None` if this kernel does not
    /// take that kind of activation row. Lengths are validated here.
    fn dot(w: &[F::Block], act: ActRow<'_>) -> Option<Result<f32, QuantError>>;

    /// `out[i]` = the dot of the weight row with `acts[i]`, for any number of activation
    /// rows (mat-mul), each result bit-identical to [`DotKernel::dot`] on that row; `None`
    /// if this kernel does not take that kind of activation row. The default calls `dot`
    /// per row.
    ///
    /// # Errors
    /// The first error [`DotKernel::dot`] would give for any of the rows, or
    /// [`QuantError::ShapeMismatch`] when `out.len() != acts.len()`.
    fn dot_rows(w: &[F::Block], acts: &[ActRow<'_>], out: &mut [f32]) -> Option<Result<(), QuantError>> {
        if let Some(e) = rows_mismatch(acts.len(), out.len()) {
            return Some(Err(e));
        }
        each_row(out.iter_mut().zip(acts), |(o, a)| Some(Self::dot(w, *a)?.map(|v| *o = v)))
    }

    /// `out[i]` = the dot of weight row `i` (blocks `i·n .. (i+1)·n` of `w`) with `a`, for
    /// `out.len()` rows (mat-vec), each result bit-identical to [`DotKernel::dot`] on that
    /// row; `None` if this kernel does not take that kind of activation row. The default
    /// calls `dot` per row. Callers pass `w.len() == out.len() · n`.
    ///
    /// # Errors
    /// The first error [`DotKernel::dot`] would give for any of the rows.
    fn dot_weight_rows(w: &[F::Block], n: usize, a: ActRow<'_>, out: &mut [f32]) -> Option<Result<(), QuantError>> {
        each_row(out.iter_mut().zip(w.chunks_exact(n.max(1))), |(o, w)| Some(Self::dot(w, a)?.map(|v| *o = v)))
    }
    /// A mat-mul tile: weight row `i` (blocks `i·n .. (i+1)·n` of `w`, `w.len()` a multiple
    /// of `n`) against every row of `acts`, into `out[i · stride + j]` (the caller checked
    /// that `out` holds them and `stride ≥ acts.len()`), each result bit-identical to
    /// [`DotKernel::dot_rows`]; `None` if this kernel does not take that kind of activation
    /// row. The default calls `dot_rows` per weight row.
    ///
    /// # Errors
    /// The first error [`DotKernel::dot`] would give for any of the rows.
    fn dot_tile(
        w: &[F::Block],
        n: usize,
        acts: &[ActRow<'_>],
        out: &mut [f32],
        stride: usize,
    ) -> Option<Result<(), QuantError>> {
        tile_by_rows::<F, Self>(w, n, acts, out, stride)
    }

    /// The most activation rows a [`DotKernel::dot_tile`] call is best given
    /// ([`NativeDot::TILE_ROWS`]); `0` (the default): as many as stay in L2.
    const TILE_ROWS: usize = 0;

    /// The kernel's packed weight layout ([`Packing`]), if it has one (the default: none).
    const PACKING: Option<Packing> = None;

    /// `rows` weight rows of `n` blocks each (`w.len() == rows · n`, checked by the caller) in
    /// the [`DotKernel::PACKING`] layout; `None` without one.
    fn pack(w: &[F::Block], rows: usize, n: usize) -> Option<Vec<u8>> {
        let _ = (w, rows, n);
        None
    }

    /// The dot of every row of the packed groups `p` (`out.len() / rows` groups of `n` block
    /// columns, checked by the caller) with `act`: `out[g · rows + r]` for row `r` of group
    /// `g`. `None` without a packed layout or for another kind of activation row; an error for
    /// an activation row of the wrong length.
    fn packed_dot(p: &[u8], n: usize, act: ActRow<'_>, out: &mut [f32]) -> Option<Result<(), QuantError>> {
        let _ = (p, n, act, out);
        None
    }

    /// [`DotKernel::packed_dot`] for every row of `acts`: row `r`'s results into `out[r · len
    /// .. (r + 1) · len]`, `len = out.len() / acts.len()` (checked by the caller). The default
    /// calls `packed_dot` per row.
    fn packed_dot_rows(p: &[u8], n: usize, acts: &[ActRow<'_>], out: &mut [f32]) -> Option<Result<(), QuantError>> {
        let len = out.len() / acts.len().max(1);
        each_row(acts.iter().zip(out.chunks_exact_mut(len.max(1))), |(act, o)| Self::packed_dot(p, n, *act, o))
    }
}

/// [`DotKernel::dot_tile`]'s default: [`DotKernel::dot_rows`] of `K` per weight row.
fn tile_by_rows<F: BlockFormat, K: DotKernel<F> + ?Sized>(
    w: &[F::Block],
    n: usize,
    acts: &[ActRow<'_>],
    out: &mut [f32],
    stride: usize,
) -> Option<Result<(), QuantError>> {
    each_row(w.chunks_exact(n.max(1)).enumerate(), |(i, w)| K::dot_rows(w, acts, &mut out[i * stride..][..acts.len()]))
}

/// The shape of every per-row default: `f` on each item in turn, stopping at the first `None`
/// (the kernel does not take these rows) or error, which is the result; else `Some(Ok(()))`.
pub(crate) fn each_row<T>(
    items: impl IntoIterator<Item = T>,
    mut f: impl FnMut(T) -> Option<Result<(), QuantError>>,
) -> Option<Result<(), QuantError>> {
    for x in items {
        if let Err(e) = f(x)? {
            return Some(Err(e));
        }
    }
    Some(Ok(()))
}

fn rows_mismatch(acts: usize, out: usize) -> Option<QuantError> {
    (acts != out).then_some(QuantError::ShapeMismatch {
        what: "dot outputs for the activation rows",
        expected: acts,
        actual: out,
    })
}

/// No integer kernel: mat-vec runs in f32 on dequantized weights.
pub struct NoDot;

impl<F: BlockFormat> DotKernel<F> for NoDot {
    const ACT: ActKind = ActKind::F32;
    fn dot(_: &[F::Block], _: ActRow<'_>) -> Option<Result<f32, QuantError>> {
        None
    }
}

/// ggml's integer dot against [`NativeDot::Act`] blocks.
pub struct GgmlDot;

impl<F: NativeDot> DotKernel<F> for GgmlDot {
    const ACT: ActKind = match F::DESC.dot_type {
        Some(name) if str_eq(name, F::Act::DESC.name) => ActKind::Blocks(name),
        Some(_) => panic!("DESC.dot_type must name NativeDot::Act"),
        None => panic!("a NativeDot format needs DESC.dot_type"),
    };

    fn dot(w: &[F::Block], act: ActRow<'_>) -> Option<Result<f32, QuantError>> {
        Some(act_blocks::<F>(w.len(), act)?.map(|a| F::vec_dot(w, a)))
    }

    fn dot_rows(w: &[F::Block], acts: &[ActRow<'_>], out: &mut [f32]) -> Option<Result<(), QuantError>> {
        if let Some(e) = rows_mismatch(acts.len(), out.len()) {
            return Some(Err(e));
        }
        for (acts, out) in acts.chunks(MAX_DOT_ROWS).zip(out.chunks_mut(MAX_DOT_ROWS)) {
            let mut rows: [&[<F::Act as BlockFormat>::Block]; MAX_DOT_ROWS] = [&[]; MAX_DOT_ROWS];
            if let Err(e) =
                each_row(rows.iter_mut().zip(acts), |(r, a)| Some(act_blocks::<F>(w.len(), *a)?.map(|a| *r = a)))?
            {
                return Some(Err(e));
            }
            F::vec_dot_rows(w, &rows[..acts.len()], out);
        }
        Some(Ok(()))
    }

    fn dot_weight_rows(w: &[F::Block], n: usize, a: ActRow<'_>, out: &mut [f32]) -> Option<Result<(), QuantError>> {
        if out.is_empty() {
            return Some(Ok(()));
        }
        match act_blocks::<F>(n, a)? {
            Ok(blocks) => F::vec_dot_weight_rows(&w[..out.len() * n], blocks, out),
            Err(e) => return Some(Err(e)),
        }
        Some(Ok(()))
    }

    fn dot_tile(
        w: &[F::Block],
        n: usize,
        acts: &[ActRow<'_>],
        out: &mut [f32],
        stride: usize,
    ) -> Option<Result<(), QuantError>> {
        if n > 0 && !acts.is_empty() {
            let mut rows = Vec::with_capacity(acts.len());
            if let Err(e) = each_row(acts, |a| Some(act_blocks::<F>(n, *a)?.map(|a| rows.push(a))))? {
                return Some(Err(e));
            }
            if F::vec_dot_tile(&w[..w.len() / n * n], n, &rows, out, stride) {
                return Some(Ok(()));
            }
        }
        tile_by_rows::<F, Self>(w, n, acts, out, stride)
    }

    const TILE_ROWS: usize = F::TILE_ROWS;

    const PACKING: Option<Packing> = F::PACKING;

    fn pack(w: &[F::Block], rows: usize, n: usize) -> Option<Vec<u8>> {
        F::PACKING.map(|_| F::pack(w, rows, n))
    }

    fn packed_dot(p: &[u8], n: usize, act: ActRow<'_>, out: &mut [f32]) -> Option<Result<(), QuantError>> {
        F::PACKING?;
        match act_blocks::<F>(n, act)? {
            Ok(a) => F::packed_dot(p, n, a, out).then_some(Ok(())),
            Err(e) => Some(Err(e)),
        }
    }

    fn packed_dot_rows(p: &[u8], n: usize, acts: &[ActRow<'_>], out: &mut [f32]) -> Option<Result<(), QuantError>> {
        F::PACKING?;
        let len = out.len() / acts.len().max(1);
        let mut rows: Vec<&[<F::Act as BlockFormat>::Block]> = Vec::with_capacity(acts.len().min(MAX_PACKED_DOT_ROWS));
        for (acts, out) in acts.chunks(MAX_PACKED_DOT_ROWS).zip(out.chunks_mut((MAX_PACKED_DOT_ROWS * len).max(1))) {
            rows.clear();
            if let Err(e) = each_row(acts, |a| Some(act_blocks::<F>(n, *a)?.map(|a| rows.push(a))))? {
                return Some(Err(e));
            }
            if !F::packed_dot_rows(p, n, &rows, out) {
                return None;
            }
        }
        Some(Ok(()))
    }
}

/// The activation blocks of `act` for a row of `nblocks` weight blocks of `F`: `None` for
/// another kind of activation row, an error for a wrong length.
fn act_blocks<F: NativeDot>(
    nblocks: usize,
    act: ActRow<'_>,
) -> Option<Result<&[<F::Act as BlockFormat>::Block], QuantError>> {
    let ActRow::Blocks(bytes) = act else { return None };
    let ad = &F::Act::DESC;
    let elems = nblocks * F::DESC.block_size;
    let want = elems.div_ceil(ad.block_size) * ad.block_bytes;
    if bytes.len() != want || !elems.is_multiple_of(ad.block_size) {
        return Some(Err(QuantError::ShapeMismatch {
            what: "activation row bytes for the weight row",
            expected: want,
            actual: bytes.len(),
        }));
    }
    Some(bytemuck::try_cast_slice::<u8, <F::Act as BlockFormat>::Block>(bytes).map_err(|_| {
        QuantError::NotWholeBlocks {
            what: "activation row",
            format: ad.name,
            len: bytes.len(),
            block_bytes: ad.block_bytes,
        }
    }))
}

const fn str_eq(a: &str, b: &str) -> bool {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    if a.len() != b.len() {
        return false;
    }
    let mut i = 0;
    while i < a.len() {
        if a[i] != b[i] {
            return false;
        }
        i += 1;
    }
    true
}
