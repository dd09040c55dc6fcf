//! The registry of formats every layer enumerates.

use crate::error::QuantError;
use crate::format::Format;

/// An ordered set of formats with unique (case-insensitive) names and GGML type ids.
///
/// Each family crate exports `pub static FORMATS: &[&dyn Format]`; the `qforge-formats` crate
/// builds the default registry from one line per family.
#[derive(Default)]
pub struct Registry {
    formats: Vec<&'static dyn Format>,
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Add a format. Fails if its name or GGML type id is already taken.
    pub fn register(&mut self, f: &'static dyn Format) -> Result<(), String> {
        let d = f.desc();
        if d.name.is_empty() || d.name.bytes().any(|b| b.is_ascii_uppercase() || b.is_ascii_whitespace()) {
            return Err(format!("format name '{}' must be non-empty lower case", d.name));
        }
        for g in &self.formats {
            let e = g.desc();
            if e.name == d.name {
                return Err(format!("format '{}' registered twice", d.name));
            }
            if d.ggml_type.is_some() && e.ggml_type == d.ggml_type {
                return Err(format!("formats '{}' and '{}' share GGML type id {:?}", e.name, d.name, d.ggml_type));
            }
        }
        self.formats.push(f);
        Ok(())
    }

    /// Add every format of a family.
    pub fn register_all(&mut self, family: &[&'static dyn Format]) -> Result<(), String> {
        family.iter().try_for_each(|f| self.register(*f))
    }

    /// Look a format up by name, case-insensitively.
    pub fn get(&self, name: &str) -> Result<&'static dyn Format, QuantError> {
        let lower = name.trim().to_ascii_lowercase();
        self.formats
            .iter()
            .copied()
            .find(|f| f.desc().name == lower)
            .ok_or_else(|| QuantError::UnknownFormat { name: name.to_string() })
    }

    /// Look a format up by name and apply run-time parameters (`--group-size`).
    pub fn get_with(&self, name: &str, params: &crate::Params) -> Result<&'static dyn Format, QuantError> {
        self.get(name)?.with_params(params)
    }

    /// Look a format up by its GGML type id.
    pub fn by_ggml_type(&self, id: u32) -> Option<&'static dyn Format> {
        self.formats.iter().copied().find(|f| f.desc().ggml_type == Some(id))
    }

    /// The formats in registration order.
    pub fn iter(&self) -> impl Iterator<Item = &'static dyn Format> + '_ {
        self.formats.iter().copied()
    }

    /// Number of registered formats.
    pub fn len(&self) -> usize {
        self.formats.len()
    }

    /// Whether no format is registered.
    pub fn is_empty(&self) -> bool {
        self.formats.is_empty()
    }
}
