//! qforge-pack: shape plumbing for quantized tensors, so that every layer above accepts
//! every shape.
//!
//! * [`pad`]: pad K up to whole blocks / groups (or any kernel multiple) and N up to whatever
//!   a kernel needs, and unpad results. Padding never changes how the real elements are
//!   quantized (the formats compute scales from real elements only) and padded positions
//!   decode to exact zeros, so they contribute exactly 0 to any product.
//! * [`nibble`]: the nibble and bit packing orders the formats use, and conversions between
//!   them, as pure functions.
//! * [`interleave`]: re-packing a tensor's blocks row-interleaved for kernels that read R rows
//!   at once, and back.
//! * [`mod@shard`]: block-aligned sharding for tensor parallelism — along N at any row boundary,
//!   along K only at block / group boundaries — such that the shards' dequantizations
//!   concatenated equal the whole tensor's.
#![forbid(unsafe_code)]

pub mod interleave;
pub mod nibble;
pub mod pad;
pub mod shard;

pub use pad::{pad_matrix, pad_tensor, round_up, unpad_matrix};
pub use shard::{Axis, concat, shard, shard_at};
