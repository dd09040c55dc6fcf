//! Every test that needs a CUDA GPU, in one test binary: each binary embeds all PTX modules
//! (about 6.6 MB deflated), so the GPU kit (`cargo xtask gpu-kit`) carries them once per
//! binary, and one binary keeps the kit well under the GPU machine's transfer limit. Put a
//! new GPU test here as a module, not in a new `tests/*.rs` file.
//!
//! The tests that need a GPU are `#[ignore = "needs a CUDA GPU"]`: `cargo test` lists them
//! as ignored on a machine without one, and the kit runs them with `--include-ignored`,
//! where they fail, never pass, if no GPU answers.
#![cfg(feature = "cuda")]

#[path = "../support/mod.rs"]
mod support;

mod gemm;
mod runtime;
