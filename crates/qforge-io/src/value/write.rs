//! Writing GGUF metadata values: the encoding without the value's type id.

use super::{Array, Value};

impl Value<'_> {
    /// Append the GGUF encoding of the value (without its type id).
    pub(crate) fn write(&self, out: &mut Vec<u8>) {
        match self {
            Value::U8(v) => out.push(*v),
            Value::I8(v) => out.push(*v as u8),
            Value::Bool(v) => out.push(*v),
            Value::U16(v) => out.extend_from_slice(&v.to_le_bytes()),
            Value::I16(v) => out.extend_from_slice(&v.to_le_bytes()),
            Value::U32(v) => out.extend_from_slice(&v.to_le_bytes()),
            Value::I32(v) => out.extend_from_slice(&v.to_le_bytes()),
            Value::F32(v) => out.extend_from_slice(&v.to_le_bytes()),
            Value::U64(v) => out.extend_from_slice(&v.to_le_bytes()),
            Value::I64(v) => out.extend_from_slice(&v.to_le_bytes()),
            Value::F64(v) => out.extend_from_slice(&v.to_le_bytes()),
            Value::String(s) => write_str(out, s),
            Value::Array(a) => a.write(out),
        }
    }
}

impl Array<'_> {
    fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.element_type().id().to_le_bytes());
        out.extend_from_slice(&(self.len() as u64).to_le_bytes());
        match self {
            Array::Scalars { bytes, .. } => out.extend_from_slice(bytes),
            Array::Strings(v) => v.iter().for_each(|s| write_str(out, s)),
            Array::Arrays(v) => v.iter().for_each(|a| a.write(out)),
        }
    }
}

/// Append a GGUF string: u64 byte length, then the UTF-8 bytes.
pub(crate) fn write_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}
