//! What is multiplied: shape, weight layout, activation and output dtypes.

use crate::error::TilingError;
use qforge_core::{ActKind, Format, Layout, Params};
use std::fmt;
use std::str::FromStr;
use std::sync::OnceLock;

/// Largest M, N or K accepted: 2^31.
pub const MAX_DIM: u64 = 1 << 31;

/// Element type of the activations (the M x K operand).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ActDType {
    /// f32 activations (fed to tf32 tensor cores, or CUDA cores).
    F32,
    /// f16 activations.
    F16,
    /// bf16 activations.
    Bf16,
    /// int8 with dynamic per-row scales (A8W4DQ style).
    Int8,
    /// 8-bit float (e4m3) with one scale per group along K (DeepSeek-V3 style; the group is
    /// the activation format's tile, [`act_scale_group`]).
    Fp8,
}

impl ActDType {
    /// Every activation dtype (what `from_str` accepts).
    pub const ALL: [ActDType; 5] = [ActDType::F32, ActDType::F16, ActDType::Bf16, ActDType::Int8, ActDType::Fp8];
    /// Lower-case name as the CLI spells it: `f32`, `f16`, `bf16`, `int8`, `fp8`.
    pub fn name(self) -> &'static str {
        match self {
            ActDType::F32 => "f32",
            ActDType::F16 => "f16",
            ActDType::Bf16 => "bf16",
            ActDType::Int8 => "int8",
            ActDType::Fp8 => "fp8",
        }
    }
    /// Bytes of one stored element.
    pub fn bytes(self) -> u64 {
        match self {
            ActDType::F32 => 4,
            ActDType::F16 | ActDType::Bf16 => 2,
            ActDType::Int8 | ActDType::Fp8 => 1,
        }
    }
}

impl FromStr for ActDType {
    type Err = TilingError;
    fn from_str(s: &str) -> Result<Self, TilingError> {
        let l = s.trim().to_ascii_lowercase();
        ActDType::ALL.into_iter().find(|d| d.name() == l).ok_or_else(|| TilingError::UnknownDType {
            what: "activation",
            name: s.to_string(),
            expected: "f32, f16, bf16, int8, fp8",
        })
    }
}

/// Element type of the output (M x N).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OutDType {
    /// f32 output.
    F32,
    /// f16 output (f32 accumulate, rounded at the end).
    F16,
    /// bf16 output (f32 accumulate, rounded at the end).
    Bf16,
}

impl OutDType {
    /// Every output dtype.
    pub const ALL: [OutDType; 3] = [OutDType::F32, OutDType::F16, OutDType::Bf16];
    /// Lower-case name: `f32`, `f16`, `bf16`.
    pub fn name(self) -> &'static str {
        match self {
            OutDType::F32 => "f32",
            OutDType::F16 => "f16",
            OutDType::Bf16 => "bf16",
        }
    }
    /// Bytes of one output element.
    pub fn bytes(self) -> u64 {
        match self {
            OutDType::F32 => 4,
            OutDType::F16 | OutDType::Bf16 => 2,
        }
    }
}

impl FromStr for OutDType {
    type Err = TilingError;
    fn from_str(s: &str) -> Result<Self, TilingError> {
        let l = s.trim().to_ascii_lowercase();
        OutDType::ALL.into_iter().find(|d| d.name() == l).ok_or_else(|| TilingError::UnknownDType {
            what: "output",
            name: s.to_string(),
            expected: "f32, f16, bf16",
        })
    }
}

/// How the weights are stored, which is all the tiling needs to know about a format: the
/// kind of [`qforge_core::Layout`] the format declares, or plain elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LayoutKind {
    /// Plain f32 / f16 / bf16 elements.
    Dense,
    /// Row blocks (`Layout::Blocks`, the GGML types): blocks of `k_block` elements along K,
    /// decoded in the kernel.
    Block,
    /// Scale groups along K (`Layout::Groups`, int4g): packed integers plus one scale per
    /// group of `k_block` elements.
    Group,
    /// Values plus a scale grid (`Layout::Grid`, fp8): one scale per `n_block × k_block`
    /// tile; 8-bit float values can feed fp8 tensor cores directly.
    Grid,
}

/// The weight (N x K operand) layout: element granularity along K and N and storage cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WeightLayout {
    /// Format name as the CLI spells it.
    pub name: &'static str,
    /// How the weights are stored (dense, blocks, groups or grid).
    pub kind: LayoutKind,
    /// Elements along K that share one block / group / scale (1 for dense).
    pub k_block: u64,
    /// Rows along N that share one scale (a grid's tile rows, else 1).
    pub n_block: u64,
    /// Bytes of one `k_block x n_block` block, scales included.
    pub block_bytes: u64,
    /// The activation dtype the format's native dot takes (f16 where it has none).
    pub native_act: ActDType,
}

/// The activation dtype of an activation kind (f16 for f32 and block activations: the
/// tensor-core kernels convert those).
fn act_dtype(kind: ActKind) -> ActDType {
    match kind {
        ActKind::Int8Dyn => ActDType::Int8,
        ActKind::Fp8x128 => ActDType::Fp8,
        ActKind::Blocks(_) | ActKind::F32 => ActDType::F16,
    }
}

/// Elements along K per activation scale for `act`, from the registry (the format that
/// quantizes such activations, [`Format::act_format`]); 0 for activations without group
/// scales.
pub fn act_scale_group(act: ActDType) -> u64 {
    static FP8: OnceLock<u64> = OnceLock::new();
    match act {
        ActDType::Fp8 => *FP8.get_or_init(|| {
            qforge_formats::registry()
                .iter()
                .find_map(|f| f.act_format(ActKind::Fp8x128))
                .map_or(0, |a| a.layout().scale_tile().1 as u64)
        }),
        _ => 0,
    }
}

impl WeightLayout {
    /// The layout of format `name` stored as `layout` (a registry format's
    /// [`Format::layout`]), natively paired with `act` activations.
    ///
    /// # Errors
    ///
    /// [`TilingError::InvalidLayout`] when the layout's tile along K or N, or its bytes per
    /// block, is 0 (or a grid's tile size overflows).
    pub fn from_layout(name: &'static str, layout: &Layout, act: ActKind) -> Result<Self, TilingError> {
        let (kind, (n_block, k_block), unit_bytes) = match *layout {
            Layout::Blocks { block_bytes, .. } => (LayoutKind::Block, layout.scale_tile(), block_bytes),
            Layout::Groups { group_bytes, .. } => (LayoutKind::Group, layout.scale_tile(), group_bytes),
            Layout::Grid { .. } => {
                let (tr, tc) = layout.scale_tile();
                let bytes = layout
                    .tensor_bytes(tr, tc)
                    .map_err(|e| TilingError::InvalidLayout { name: name.to_string(), reason: e.to_string() })?;
                (LayoutKind::Grid, (tr, tc), bytes)
            }
        };
        if k_block == 0 || n_block == 0 || unit_bytes == 0 {
            return Err(TilingError::InvalidLayout {
                name: name.to_string(),
                reason: format!("tile {n_block} x {k_block} and bytes per block {unit_bytes} must be >= 1"),
            });
        }
        Ok(WeightLayout {
            name,
            kind,
            k_block: k_block as u64,
            n_block: n_block as u64,
            block_bytes: unit_bytes as u64,
            native_act: act_dtype(act),
        })
    }

    /// The layout of a registered format (or a variant of one): everything from the format.
    pub fn from_format(f: &dyn Format) -> Result<Self, TilingError> {
        Self::from_layout(f.desc().name, &f.layout(), f.native_act())
    }

    /// Dense f32 / f16 / bf16 weights.
    pub const fn dense(dtype: OutDType) -> Self {
        let (name, bytes) = match dtype {
            OutDType::F32 => ("f32", 4),
            OutDType::F16 => ("f16", 2),
            OutDType::Bf16 => ("bf16", 2),
        };
        let native_act = ActDType::F16;
        WeightLayout { name, kind: LayoutKind::Dense, k_block: 1, n_block: 1, block_bytes: bytes, native_act }
    }

    /// Names of the dense layouts [`WeightLayout::lookup`] knows besides the registry.
    pub const DENSE_NAMES: [&'static str; 3] = ["f32", "f16", "bf16"];

    /// The layout of `name`: a dense dtype, or a registry format with its run-time group size
    /// applied (`Format::with_params`): the limits are the format's own.
    ///
    /// # Errors
    ///
    /// [`TilingError::UnknownLayout`] for a name that is neither; a group size for a dense
    /// dtype or a format without run-time parameters is [`TilingError::GroupSizeNotAccepted`],
    /// one the format refuses is [`TilingError::InvalidGroupSize`].
    pub fn lookup(name: &str, group_size: Option<u64>) -> Result<Self, TilingError> {
        let l = name.trim().to_ascii_lowercase();
        let dense = OutDType::ALL.into_iter().find(|d| d.name() == l);
        let f = match (dense, qforge_formats::get(&l)) {
            (Some(d), _) => {
                return match group_size {
                    Some(g) => Err(TilingError::GroupSizeNotAccepted { layout: l, group_size: g }),
                    None => Ok(Self::dense(d)),
                };
            }
            (None, Ok(f)) => f,
            (None, Err(_)) => return Err(TilingError::UnknownLayout { name: name.to_string() }),
        };
        let f = match group_size {
            None => f,
            Some(g) if f.params().group_size.is_none() => {
                return Err(TilingError::GroupSizeNotAccepted { layout: f.desc().name.to_string(), group_size: g });
            }
            Some(g) => {
                let p = Params::group_size(usize::try_from(g).unwrap_or(usize::MAX));
                f.with_params(&p).map_err(|e| TilingError::InvalidGroupSize { group_size: g, reason: e.to_string() })?
            }
        };
        Self::from_format(f)
    }

    /// Storage bits per weight, scales included.
    pub fn bits_per_weight(&self) -> f64 {
        (self.block_bytes * 8) as f64 / (self.k_block * self.n_block) as f64
    }

    /// True when weights must be decoded (not plain elements) before the multiply.
    pub fn is_quantized(&self) -> bool {
        self.kind != LayoutKind::Dense
    }

    /// Bytes of the stored elements of a `rows x cols` slab (fractional blocks counted pro rata).
    pub(crate) fn slab_bytes(&self, rows: f64, cols: f64) -> f64 {
        rows * cols * self.bits_per_weight() / 8.0
    }
}

impl fmt::Display for WeightLayout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            LayoutKind::Group => write!(f, "{}/g{}", self.name, self.k_block),
            _ => f.write_str(self.name),
        }
    }
}

/// One GEMM: `C[M x N] = A[M x K] * W[N x K]^T`, W stored in `layout`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Problem {
    /// Rows of the activations and the output (tokens).
    pub m: u64,
    /// Output features: rows of the weight matrix.
    pub n: u64,
    /// Input features: the reduction dimension (the weight row length).
    pub k: u64,
    /// How the weights are stored.
    pub layout: WeightLayout,
    /// Activation dtype.
    pub act: ActDType,
    /// Output dtype.
    pub out: OutDType,
}

impl Problem {
    /// A checked problem: every dimension in 1..=2^31 and a well-formed layout.
    ///
    /// # Errors
    ///
    /// As [`Problem::check`].
    pub fn new(
        m: u64,
        n: u64,
        k: u64,
        layout: WeightLayout,
        act: ActDType,
        out: OutDType,
    ) -> Result<Self, TilingError> {
        let p = Problem { m, n, k, layout, act, out };
        p.check()?;
        Ok(p)
    }

    /// Shorthand with f16 activations and f16 output.
    pub fn f16(m: u64, n: u64, k: u64, layout: WeightLayout) -> Result<Self, TilingError> {
        Self::new(m, n, k, layout, ActDType::F16, OutDType::F16)
    }

    /// Re-check the invariants (fields are public, so selection checks again).
    ///
    /// # Errors
    ///
    /// [`TilingError::ZeroDimension`] / [`TilingError::DimensionTooLarge`] for M, N or K
    /// outside 1..=[`MAX_DIM`]; [`TilingError::InvalidLayout`] for a layout with a zero or
    /// implausibly large block.
    pub fn check(&self) -> Result<(), TilingError> {
        for (dim, v) in [("M", self.m), ("N", self.n), ("K", self.k)] {
            if v == 0 {
                return Err(TilingError::ZeroDimension { dim });
            }
            if v > MAX_DIM {
                return Err(TilingError::DimensionTooLarge { dim, value: v });
            }
        }
        let l = &self.layout;
        if l.k_block == 0 || l.n_block == 0 || l.block_bytes == 0 {
            return Err(TilingError::InvalidLayout {
                name: l.name.to_string(),
                reason: "block size along K and N and bytes per block must be >= 1".into(),
            });
        }
        if l.k_block > MAX_DIM || l.n_block > MAX_DIM || l.block_bytes > (1 << 40) {
            return Err(TilingError::InvalidLayout {
                name: l.name.to_string(),
                reason: "block is implausibly large".into(),
            });
        }
        Ok(())
    }

    /// Multiply-add flops: 2 M N K.
    pub fn flops(&self) -> f64 {
        2.0 * self.m as f64 * self.n as f64 * self.k as f64
    }
}
