//! Shared by the GEMM tests.
pub mod gemm_ref;
