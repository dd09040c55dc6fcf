//! qforge-tiling (stub, being written).
