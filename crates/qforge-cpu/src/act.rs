//! Activation quantization for mat-vec / mat-mul: the four `--act-quant` modes.

use qforge_core::{ActKind, ActRow, Format, OutRow, QuantError};
use std::str::FromStr;

/// How mat-vec / mat-mul treats the activations (`--act-quant`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ActQuant {
    /// f32 activations against the dequantized weights, f32 accumulation.
    None,
    /// The format's own activation quantization and integer dot: ggml's `vec_dot_type`
    /// (q8_0 / q8_1 / q8_k) for GGUF formats, int8-dyn for int4g, fp8-1x128 for fp8.
    Native,
    /// Per-token asymmetric int8 (torchao semantics); with int4g this is A8W4DQ.
    Int8Dyn,
    /// e4m3 with one scale per 1×128 group of each row (DeepSeek-V3 / DeepGEMM).
    Fp8x128,
}

impl ActQuant {
    /// Every mode, in the order the CLI lists them.
    pub const ALL: [ActQuant; 4] = [ActQuant::None, ActQuant::Native, ActQuant::Int8Dyn, ActQuant::Fp8x128];

    /// The CLI spelling.
    pub fn name(self) -> &'static str {
        match self {
            ActQuant::None => "none",
            ActQuant::Native => "native",
            ActQuant::Int8Dyn => "int8-dyn",
            ActQuant::Fp8x128 => "fp8-1x128",
        }
    }

    /// The activation kind this mode uses with `format`.
    pub fn kind(self, format: &dyn Format) -> ActKind {
        match self {
            ActQuant::None => ActKind::F32,
            ActQuant::Native => format.native_act(),
            ActQuant::Int8Dyn => ActKind::Int8Dyn,
            ActQuant::Fp8x128 => ActKind::Fp8x128,
        }
    }
}

impl std::fmt::Display for ActQuant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for ActQuant {
    type Err = QuantError;
    fn from_str(s: &str) -> Result<Self, QuantError> {
        ActQuant::ALL.into_iter().find(|a| a.name().eq_ignore_ascii_case(s.trim())).ok_or_else(|| {
            QuantError::Unsupported {
                format: "act-quant",
                reason: format!("unknown mode '{s}' (expected none, native, int8-dyn or fp8-1x128)"),
            }
        })
    }
}

/// One activation row quantized for a dot product, `padded` elements long (the weight row's
/// padded length; positions past the logical length are the quantization of 0).
#[derive(Clone, Debug)]
pub enum QuantAct {
    /// Unquantized: the f32 values, zero-padded.
    F32(Vec<f32>),
    /// Blocks of an activation block format (ggml's `vec_dot_type`: q8_0, q8_1, q8_k).
    Blocks {
        /// The activation format (e.g. q8_0).
        format: &'static dyn Format,
        /// The row's blocks, `format.row_bytes(padded)` bytes.
        bytes: Vec<u8>,
    },
    /// Per-token asymmetric int8: `x ≈ scale · (q − zero_point)`.
    Int8 {
        /// One code per element.
        q: Vec<i8>,
        /// The row's scale.
        scale: f32,
        /// The row's zero point (the code of 0.0, in -128..=127).
        zero_point: i32,
    },
    /// Values and one f32 scale per tile of a one-row-tile grid format (the format a weight
    /// format's [`Format::act_format`] names: e4m3 with 1×128 tiles for `fp8-1x128`).
    Tiled {
        /// The grid format that quantized the row (its [`Format::layout`] gives the tile).
        format: &'static dyn Format,
        /// The values, one byte per element (e4m3 codes for `fp8-1x128`).
        q: Vec<u8>,
        /// One scale per tile of the row, in order.
        scales: Vec<f32>,
    },
}

/// The format that quantizes activation rows of `kind` when `kind` is not a plain block
/// format: the first registered format that provides one ([`Format::act_format`]).
pub fn act_format(kind: ActKind) -> Result<&'static dyn Format, QuantError> {
    qforge_formats::registry().iter().find_map(|f| f.act_format(kind)).ok_or_else(|| QuantError::Unsupported {
        format: "act-quant",
        reason: format!("no registered format quantizes {kind:?} activations"),
    })
}

impl QuantAct {
    /// Quantize `x` (logical length) as `kind` into a row of `padded` elements.
    pub fn new(kind: ActKind, x: &[f32], padded: usize) -> Result<Self, QuantError> {
        if padded < x.len() {
            return Err(QuantError::ShapeMismatch {
                what: "padded activation length",
                expected: x.len(),
                actual: padded,
            });
        }
        if let Some(i) = x.iter().position(|v| !v.is_finite()) {
            return Err(QuantError::NonFinite { index: i, value: x[i] });
        }
        let mut xp = Vec::with_capacity(padded);
        xp.extend_from_slice(x);
        xp.resize(padded, 0.0);
        Ok(match kind {
            ActKind::F32 => QuantAct::F32(xp),
            ActKind::Blocks(name) => {
                let format = qforge_formats::get(name)?;
                let mut bytes = vec![0u8; format.row_bytes(padded)?];
                format.quantize_row(&xp, None, &mut bytes)?;
                QuantAct::Blocks { format, bytes }
            }
            ActKind::Int8Dyn => {
                let (scale, zero_point) = int8_dyn_params(x);
                let inv = 1.0 / scale;
                let q = xp
                    .iter()
                    .map(|&v| {
                        qforge_core::round::round_ties_even(v * inv + zero_point as f32).clamp(-128.0, 127.0) as i8
                    })
                    .collect();
                QuantAct::Int8 { q, scale, zero_point }
            }
            kind @ ActKind::Fp8x128 => {
                let format = act_format(kind)?;
                let mut aux = vec![0u8; format.aux_bytes(1, padded)?];
                format.quantize_aux(&xp, 1, padded, &mut aux)?;
                let mut q = vec![0u8; format.row_bytes(padded)?];
                format.quantize_row_at(&xp, None, 0, &aux, &mut q)?;
                let scales = aux.chunks_exact(4).map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect();
                QuantAct::Tiled { format, q, scales }
            }
        })
    }

    /// The row as the dot kernels take it (`None` for f32).
    pub fn as_row(&self) -> Option<ActRow<'_>> {
        match self {
            QuantAct::F32(_) => None,
            QuantAct::Blocks { bytes, .. } => Some(ActRow::Blocks(bytes)),
            QuantAct::Int8 { q, scale, zero_point } => Some(ActRow::Int8 { q, scale: *scale, zero_point: *zero_point }),
            QuantAct::Tiled { q, scales, .. } => Some(ActRow::Fp8 { q, scales }),
        }
    }

    /// Bytes the row occupies (what a kernel streams through per dot).
    pub fn bytes(&self) -> usize {
        match self {
            QuantAct::F32(v) => 4 * v.len(),
            QuantAct::Blocks { bytes, .. } => bytes.len(),
            QuantAct::Int8 { q, .. } => q.len(),
            QuantAct::Tiled { q, scales, .. } => q.len() + 4 * scales.len(),
        }
    }

    /// The values the quantized row stands for (what an f32 kernel multiplies with).
    pub fn dequantize(&self) -> Vec<f32> {
        match self {
            QuantAct::F32(v) => v.clone(),
            QuantAct::Blocks { format, bytes } => {
                let (unit, unit_bytes) = format.layout().row_unit();
                let n = bytes.len() / unit_bytes * unit;
                let mut y = vec![0f32; n];
                // The bytes were produced by this very format, so the lengths agree.
                if format.dequant_row(bytes, OutRow::F32(&mut y)).is_err() {
                    y.fill(f32::NAN);
                }
                y
            }
            QuantAct::Int8 { q, scale, zero_point } => {
                q.iter().map(|&v| (v as i32 - zero_point) as f32 * scale).collect()
            }
            QuantAct::Tiled { format, q, scales } => {
                let mut y = vec![0f32; q.len()];
                let aux: Vec<u8> = scales.iter().flat_map(|s| s.to_le_bytes()).collect();
                // The row was produced by this very format, so the lengths agree.
                if format.dequant_row_at(q, 0, &aux, OutRow::F32(&mut y)).is_err() {
                    y.fill(f32::NAN);
                }
                y
            }
        }
    }
}

/// torchao's `choose_qparams_per_token_asymmetric` (XNNPACK's rule): the range includes 0,
/// scale = range / 255 clamped to f32 epsilon, zero point from whichever end loses less,
/// clamped to [-128, 127] and rounded half to even.
pub fn int8_dyn_params(x: &[f32]) -> (f32, i32) {
    let (mn, mx) = x.iter().fold((0f32, 0f32), |(a, b), &v| (a.min(v), b.max(v)));
    let scale = ((mx - mn) / 255.0).max(f32::EPSILON);
    let (dmin, dmax) = (mn / scale, mx / scale);
    let zp = if (-128.0 + dmin) + (127.0 + dmax) > 0.0 { -128.0 - dmin } else { 127.0 - dmax };
    (scale, zp.clamp(-128.0, 127.0).round_ties_even() as i32)
}
