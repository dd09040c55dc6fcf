//! qforge-formats: the default [`Registry`] holding every format family qforge ships.
//!
//! Adding a family is one line in [`FAMILIES`] (and a dependency); adding a format to a family
//! is one line in that family's `FORMATS`. Everything else — the CPU kernels, the CLI, the
//! test matrix — enumerates this registry.
//!
//! ```
//! use qforge_formats::{Params, get, get_with, registry};
//!
//! // Every format qforge ships, in display order (`qforge formats` prints this).
//! for f in registry().iter() {
//!     let d = f.desc();
//!     println!("{:<10} {:>6.3} bits/weight  {}", d.name, d.bits_per_weight(), d.summary);
//! }
//!
//! // By name (case-insensitive) or by GGML type id, as a GGUF file stores it.
//! let q4k = get("Q4_K")?;
//! assert_eq!((q4k.desc().block_size, q4k.desc().block_bytes), (256, 144));
//! assert_eq!(registry().by_ggml_type(12).map(|f| f.desc().name), Some("q4_k"));
//! assert!(get("q4_9").is_err());
//!
//! // Formats with run-time parameters: int4g with 128-element groups.
//! let int4g = get_with("int4g", &Params::group_size(128))?;
//! assert_eq!(int4g.params().group_size, Some(128));
//! # Ok::<(), qforge_formats::QuantError>(())
//! ```

pub use qforge_core::{Format, Params, QuantError, Registry};
use std::sync::OnceLock;

/// Every family's format list, in display order.
pub static FAMILIES: &[&[&dyn Format]] = &[
    qforge_legacy::FORMATS,
    qforge_k::FORMATS,
    qforge_iq::FORMATS,
    qforge_tq::FORMATS,
    qforge_lowbit::FORMATS,
    qforge_fp4::FORMATS,
    qforge_int4g::FORMATS,
    qforge_fp8::FORMATS,
];

/// The registry of every format qforge ships.
pub fn registry() -> &'static Registry {
    static REG: OnceLock<Registry> = OnceLock::new();
    REG.get_or_init(|| {
        let mut r = Registry::new();
        for fam in FAMILIES {
            // The families are fixed at compile time and checked by the test below, so a
            // conflict here is a programming error caught by `cargo test`.
            if let Err(e) = r.register_all(fam) {
                panic!("qforge format registry is inconsistent: {e}");
            }
        }
        r
    })
}

/// Look a format up by name, case-insensitively.
pub fn get(name: &str) -> Result<&'static dyn Format, QuantError> {
    registry().get(name)
}

/// Look a format up by name and apply run-time parameters (`--group-size`, scale dtype).
pub fn get_with(name: &str, params: &Params) -> Result<&'static dyn Format, QuantError> {
    registry().get_with(name, params)
}

#[cfg(test)]
mod tests {
    #[test]
    fn registry_builds_with_unique_names_and_ids() {
        let r = super::registry();
        assert!(r.iter().all(|f| super::get(&f.desc().name.to_ascii_uppercase()).is_ok()));
    }
}
