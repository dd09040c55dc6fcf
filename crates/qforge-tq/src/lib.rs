//! qforge tq formats (stub, being written).
use qforge_core::Format;

/// Every format of this family, for the registry.
pub static FORMATS: &[&dyn Format] = &[];
