//! The typed errors of the CUDA path.

use qforge_core::QuantError;

/// Everything that can go wrong on the CUDA path. No GPU, no driver, bad sizes, out of
/// memory: each is a value, never a panic.
#[derive(Debug, thiserror::Error)]
pub enum CudaError {
    /// The driver library (`libcuda.so.1`) could not be loaded: no NVIDIA driver here.
    #[error("no CUDA driver found ({0}); this machine has no usable NVIDIA GPU")]
    NoDriver(String),
    /// The driver loaded but reports no device (or not the one asked for).
    #[error("no CUDA device {ordinal} (the driver reports {count})")]
    NoDevice {
        /// The device index asked for.
        ordinal: usize,
        /// How many devices the driver reports (0 on a machine without a usable GPU).
        count: usize,
    },
    /// This build has no CUDA support (qforge-cuda without the `cuda` feature).
    #[error("built without CUDA support (enable the `cuda` feature of qforge-cuda)")]
    NotBuilt,
    /// The format has no device code, so no kernels.
    #[error("format {0} has no CUDA kernels (no device code in its FormatDesc)")]
    MissingKernels(&'static str),
    /// A buffer or argument has the wrong size.
    #[error("{what}: expected {expected}, got {actual}")]
    Size {
        /// Which buffer or argument.
        what: &'static str,
        /// The size (or limit) it must have, in the unit `what` names.
        expected: usize,
        /// The size it has.
        actual: usize,
    },
    /// A device pointer/offset is not aligned as the kernel needs.
    #[error("{what}: device address {addr:#x} is not {align}-byte aligned")]
    Misaligned {
        /// Which buffer.
        what: &'static str,
        /// Its device address.
        addr: u64,
        /// The alignment the kernel needs, in bytes.
        align: usize,
    },
    /// A CUDA library loaded at run time (cuBLAS) is not on this machine's library path.
    #[error("{lib} is not installed or not on the library path: {hint}")]
    MissingLibrary {
        /// The library (`cuBLAS`).
        lib: &'static str,
        /// Where it usually comes from.
        hint: &'static str,
    },
    /// The device ran out of memory.
    #[error("out of device memory allocating {bytes} bytes")]
    OutOfMemory {
        /// The size of the allocation that failed.
        bytes: usize,
    },
    /// Invalid tensor / shape (from qforge-core).
    #[error(transparent)]
    Quant(#[from] QuantError),
    /// The fused GEMM's config: qforge-tiling found none (no instance for this device).
    #[error(transparent)]
    Tiling(#[from] qforge_tiling::TilingError),
    /// Any other driver error, with the operation that failed.
    #[error("CUDA driver error in {op}: {msg}")]
    Driver {
        /// The operation that failed (`launch gemm`, `load PTX module`, …).
        op: &'static str,
        /// The driver's (or cuBLAS's) error, as it reports it.
        msg: String,
    },
}
