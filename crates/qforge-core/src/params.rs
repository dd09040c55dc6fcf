//! Run-time parameters of parameterised formats (`--group-size`, the scale dtype of int4g).

use crate::dtype::DType;
use std::fmt;

/// Parameters chosen at run time for a format that takes them. The default (all `None`)
/// means "the format as registered".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Params {
    /// Elements per group for group-wise formats (int4g: a power of two >= 32).
    pub group_size: Option<usize>,
    /// Dtype of the per-group scales (int4g: f16 by default, bf16 or f32 selectable).
    pub scale_dtype: Option<DType>,
}

impl Params {
    /// `Params { group_size: Some(g), .. }`.
    pub fn group_size(g: usize) -> Self {
        Params { group_size: Some(g), ..Self::default() }
    }

    /// True when no parameter is set.
    pub fn is_default(&self) -> bool {
        *self == Self::default()
    }
}

impl fmt::Display for Params {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some(g) = self.group_size {
            parts.push(format!("group size {g}"));
        }
        if let Some(d) = self.scale_dtype {
            parts.push(format!("{d} scales"));
        }
        if parts.is_empty() { f.write_str("default parameters") } else { f.write_str(&parts.join(", ")) }
    }
}
