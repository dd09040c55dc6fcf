//! What is multiplied: shape, weight layout, activation and output dtypes.

use crate::error::TilingError;
use qforge_core::FormatDesc;
use std::fmt;
use std::str::FromStr;

/// Largest M, N or K accepted: 2^31.
pub const MAX_DIM: u64 = 1 << 31;

/// Element type of the activations (the M x K operand).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ActDType {
    F32,
    F16,
    Bf16,
    /// int8 with dynamic per-row scales (A8W4DQ style).
    Int8,
    /// fp8 (e4m3) with 1x128 block scales (DeepSeek-V3 style).
    Fp8,
}

impl ActDType {
    pub const ALL: [ActDType; 5] = [ActDType::F32, ActDType::F16, ActDType::Bf16, ActDType::Int8, ActDType::Fp8];
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
        ActDType::ALL.into_iter().find(|d| d.name() == l || (l == "fp8_e4m3" && *d == ActDType::Fp8)).ok_or_else(|| {
            TilingError::UnknownDType { what: "activation", name: s.to_string(), expected: "f32, f16, bf16, int8, fp8" }
        })
    }
}

/// Element type of the output (M x N).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OutDType {
    F32,
    F16,
    Bf16,
}

impl OutDType {
    pub const ALL: [OutDType; 3] = [OutDType::F32, OutDType::F16, OutDType::Bf16];
    pub fn name(self) -> &'static str {
        match self {
            OutDType::F32 => "f32",
            OutDType::F16 => "f16",
            OutDType::Bf16 => "bf16",
        }
    }
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

/// How the weights are stored, which is all the tiling needs to know about a format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LayoutKind {
    /// Plain f32 / f16 / bf16 elements.
    Dense,
    /// A block format from the registry (GGML types): blocks of `k_block` elements along K,
    /// decoded in the kernel.
    Block,
    /// fp8 elements with one f32 scale per 128 x 128 block (DeepSeek-V3 style).
    Fp8Block,
    /// Group-wise int4: 4-bit values plus one f16 scale per group of `k_block` along K.
    Int4Group,
}

/// The weight (N x K operand) layout: element granularity along K and N and storage cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WeightLayout {
    /// Format name as the CLI spells it.
    pub name: &'static str,
    pub kind: LayoutKind,
    /// Elements along K that share one block / group / scale (1 for dense).
    pub k_block: u64,
    /// Rows along N that share one scale (128 for fp8 blocks, else 1).
    pub n_block: u64,
    /// Bytes of one `k_block x n_block` block, scales included.
    pub block_bytes: u64,
}

impl WeightLayout {
    /// The layout of a registered format (block size along K, bytes per block).
    pub fn from_desc(d: &FormatDesc) -> Result<Self, TilingError> {
        if d.block_size == 0 || d.block_bytes == 0 {
            return Err(TilingError::InvalidLayout {
                name: d.name.to_string(),
                reason: format!("block size {} and bytes per block {} must be >= 1", d.block_size, d.block_bytes),
            });
        }
        Ok(WeightLayout {
            name: d.name,
            kind: LayoutKind::Block,
            k_block: d.block_size as u64,
            n_block: 1,
            block_bytes: d.block_bytes as u64,
        })
    }

    /// Dense f32 / f16 / bf16 weights.
    pub const fn dense(dtype: OutDType) -> Self {
        let (name, bytes) = match dtype {
            OutDType::F32 => ("f32", 4),
            OutDType::F16 => ("f16", 2),
            OutDType::Bf16 => ("bf16", 2),
        };
        WeightLayout { name, kind: LayoutKind::Dense, k_block: 1, n_block: 1, block_bytes: bytes }
    }

    /// fp8 weights (1 byte per element) with one f32 scale per 128 x 128 block.
    pub const fn fp8(e5m2: bool) -> Self {
        WeightLayout {
            name: if e5m2 { "fp8_e5m2" } else { "fp8_e4m3" },
            kind: LayoutKind::Fp8Block,
            k_block: 128,
            n_block: 128,
            block_bytes: 128 * 128 + 4,
        }
    }

    /// Group-wise int4 (two values per byte) with one f16 scale per group along K.
    pub fn int4g(group_size: u64) -> Result<Self, TilingError> {
        if group_size < 32 || !group_size.is_power_of_two() || group_size > MAX_DIM {
            return Err(TilingError::InvalidGroupSize { group_size });
        }
        Ok(WeightLayout {
            name: "int4g",
            kind: LayoutKind::Int4Group,
            k_block: group_size,
            n_block: 1,
            block_bytes: group_size / 2 + 2,
        })
    }

    /// Default int4g group size when none is given.
    pub const DEFAULT_INT4G_GROUP: u64 = 128;

    /// The project's layouts that exist before (or besides) their format crates:
    /// f32, f16, bf16, fp8_e4m3, fp8_e5m2, int4g. A registry format of the same name should
    /// take precedence; callers look the registry up first.
    pub fn builtin(name: &str, group_size: Option<u64>) -> Result<Self, TilingError> {
        let l = name.trim().to_ascii_lowercase();
        let layout = match l.as_str() {
            "f32" => Self::dense(OutDType::F32),
            "f16" => Self::dense(OutDType::F16),
            "bf16" => Self::dense(OutDType::Bf16),
            "fp8_e4m3" => Self::fp8(false),
            "fp8_e5m2" => Self::fp8(true),
            "int4g" => return Self::int4g(group_size.unwrap_or(Self::DEFAULT_INT4G_GROUP)),
            _ => return Err(TilingError::UnknownLayout { name: name.to_string() }),
        };
        match group_size {
            Some(g) => Err(TilingError::GroupSizeNotAccepted { layout: layout.name.to_string(), group_size: g }),
            None => Ok(layout),
        }
    }

    /// Names [`WeightLayout::builtin`] accepts.
    pub const BUILTIN_NAMES: [&'static str; 6] = ["f32", "f16", "bf16", "fp8_e4m3", "fp8_e5m2", "int4g"];

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
            LayoutKind::Int4Group => write!(f, "int4g/g{}", self.k_block),
            _ => f.write_str(self.name),
        }
    }
}

/// One GEMM: `C[M x N] = A[M x K] * W[N x K]^T`, W stored in `layout`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Problem {
    pub m: u64,
    pub n: u64,
    pub k: u64,
    pub layout: WeightLayout,
    pub act: ActDType,
    pub out: OutDType,
}

impl Problem {
    /// A checked problem: every dimension in 1..=2^31 and a well-formed layout.
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
        if l.kind == LayoutKind::Int4Group && !(l.k_block >= 32 && l.k_block.is_power_of_two()) {
            return Err(TilingError::InvalidGroupSize { group_size: l.k_block });
        }
        Ok(())
    }

    /// Multiply-add flops: 2 M N K.
    pub fn flops(&self) -> f64 {
        2.0 * self.m as f64 * self.n as f64 * self.k as f64
    }
}
