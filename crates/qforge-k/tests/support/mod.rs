//! Test support shared with the other families' test suites (they include the files by path).
pub mod codes_kernel;
pub mod dot_props;
pub mod packed_kernel;
