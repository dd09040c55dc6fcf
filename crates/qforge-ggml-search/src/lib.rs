//! qforge-ggml-search (stub, being written).
