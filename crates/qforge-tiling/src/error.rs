//! The typed error of qforge-tiling: every way a request can be wrong, each saying why.

/// Why a tiling request was refused. Selection itself never fails on valid input: these are
/// all statements about the input (problem, layout, device) or about a hand-made [`crate::Config`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TilingError {
    /// A GEMM dimension is 0.
    #[error("dimension {dim} is 0; M, N and K must each be at least 1")]
    ZeroDimension {
        /// Which dimension: `"M"`, `"N"` or `"K"`.
        dim: &'static str,
    },
    /// A GEMM dimension is larger than 2^31.
    #[error("dimension {dim} = {value} is larger than the supported maximum 2^31 = 2147483648")]
    DimensionTooLarge {
        /// Which dimension: `"M"`, `"N"` or `"K"`.
        dim: &'static str,
        /// The value given.
        value: u64,
    },
    /// The device name is not in the built-in table.
    #[error("unknown device '{name}'; built-in devices: {known}")]
    UnknownDevice {
        /// The name as given.
        name: String,
        /// The built-in names, comma-separated ([`crate::BUILTIN_DEVICES`]).
        known: String,
    },
    /// The device description is inconsistent or cannot run even the minimal `simple` kernel.
    #[error("device '{name}' cannot run the minimal GEMM kernel: {reason}")]
    DeviceTooSmall {
        /// The device's name.
        name: String,
        /// Which limit it fails ([`crate::Device::check`]).
        reason: String,
    },
    /// A weight layout name qforge-tiling does not know (and no registry format matched).
    #[error("unknown weight layout '{name}': not f32, f16, bf16 or a registered format (see `qforge formats`)")]
    UnknownLayout {
        /// The name as given.
        name: String,
    },
    /// A weight layout description that cannot describe real weights (zero block size, ...).
    #[error("invalid weight layout '{name}': {reason}")]
    InvalidLayout {
        /// The layout's (format's) name.
        name: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A group size the group-wise format does not accept (the format's own reason).
    #[error("invalid group size {group_size}: {reason}")]
    InvalidGroupSize {
        /// The group size given, in elements along K.
        group_size: u64,
        /// The format's reason for refusing it.
        reason: String,
    },
    /// A group size given for a layout with a fixed block size.
    #[error("layout {layout} has a fixed block size; only group-wise formats take a group size (got {group_size})")]
    GroupSizeNotAccepted {
        /// The layout's name (a dense dtype or a block format).
        layout: String,
        /// The group size given.
        group_size: u64,
    },
    /// An activation or output dtype name that is not known.
    #[error("unknown {what} dtype '{name}'; expected one of {expected}")]
    UnknownDType {
        /// Which operand: `"activation"` or `"output"`.
        what: &'static str,
        /// The name as given.
        name: String,
        /// The accepted names, comma-separated.
        expected: &'static str,
    },
    /// [`crate::select_fused`]: no instance of the fused GEMM runs this problem on the device.
    #[error("device '{device}' has no fused GEMM kernel for this problem: {reason}")]
    NoFusedKernel {
        /// The device's name.
        device: String,
        /// Why.
        reason: String,
    },
    /// A config that does not satisfy [`crate::Config::validate`] for this problem and device.
    #[error("invalid config: {reason}")]
    InvalidConfig {
        /// The first rule the config breaks.
        reason: String,
    },
}
