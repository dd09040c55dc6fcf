//! Shared by the GEMM tests.
#[allow(dead_code)]
pub mod a8_ref;
#[allow(dead_code)]
pub mod fp8_ref;
#[allow(dead_code)] // not every test binary uses every helper
pub mod gemm_ref;
#[allow(dead_code)]
pub mod q8_ref;
