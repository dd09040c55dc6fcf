//! GGUF metadata values: every value type of the GGUF spec, arrays of scalars kept as their
//! little-endian bytes (borrowed from the file, so an array costs no allocation per element),
//! arrays of strings and nested arrays.
//!
//! This module is the value model; reading (`read`), writing (`write`) and the JSON view
//! of `qforge inspect` (`json`) are one module each.

mod json;
mod read;
mod write;

pub(crate) use write::write_str;

use crate::cursor::Cursor;
use std::borrow::Cow;

/// Deepest metadata array nesting accepted (gguf-py writes 2 levels; this bounds recursion).
pub const MAX_NESTING: usize = 16;

/// GGUF metadata value type ids (`enum gguf_type`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueType {
    /// `GGUF_TYPE_UINT8`: unsigned 8-bit integer.
    U8 = 0,
    /// `GGUF_TYPE_INT8`: signed 8-bit integer.
    I8 = 1,
    /// `GGUF_TYPE_UINT16`: unsigned 16-bit integer.
    U16 = 2,
    /// `GGUF_TYPE_INT16`: signed 16-bit integer.
    I16 = 3,
    /// `GGUF_TYPE_UINT32`: unsigned 32-bit integer.
    U32 = 4,
    /// `GGUF_TYPE_INT32`: signed 32-bit integer.
    I32 = 5,
    /// `GGUF_TYPE_FLOAT32`: IEEE 754 binary32.
    F32 = 6,
    /// `GGUF_TYPE_BOOL`: one byte, 0 = false.
    Bool = 7,
    /// `GGUF_TYPE_STRING`: u64 byte length, then UTF-8 bytes (no NUL).
    String = 8,
    /// `GGUF_TYPE_ARRAY`: u32 element type, u64 count, then the elements.
    Array = 9,
    /// `GGUF_TYPE_UINT64`: unsigned 64-bit integer.
    U64 = 10,
    /// `GGUF_TYPE_INT64`: signed 64-bit integer.
    I64 = 11,
    /// `GGUF_TYPE_FLOAT64`: IEEE 754 binary64.
    F64 = 12,
}

impl ValueType {
    /// The value type of a `gguf_type` id as stored in the file; `None` for ids past 12.
    pub fn from_id(id: u32) -> Option<Self> {
        use ValueType::*;
        Some(match id {
            0 => U8,
            1 => I8,
            2 => U16,
            3 => I16,
            4 => U32,
            5 => I32,
            6 => F32,
            7 => Bool,
            8 => String,
            9 => Array,
            10 => U64,
            11 => I64,
            12 => F64,
            _ => return None,
        })
    }

    /// The `gguf_type` id written in the file.
    pub fn id(self) -> u32 {
        self as u32
    }

    /// Size in bytes of a scalar of this type (`None` for strings and arrays).
    pub fn scalar_size(self) -> Option<usize> {
        use ValueType::*;
        match self {
            U8 | I8 | Bool => Some(1),
            U16 | I16 => Some(2),
            U32 | I32 | F32 => Some(4),
            U64 | I64 | F64 => Some(8),
            String | Array => None,
        }
    }

    /// Lower-case name (as gguf-py spells it, shortened): u8, i8, …, string, array.
    pub fn name(self) -> &'static str {
        use ValueType::*;
        match self {
            U8 => "u8",
            I8 => "i8",
            U16 => "u16",
            I16 => "i16",
            U32 => "u32",
            I32 => "i32",
            F32 => "f32",
            Bool => "bool",
            String => "string",
            Array => "array",
            U64 => "u64",
            I64 => "i64",
            F64 => "f64",
        }
    }
}

/// One metadata value.
#[derive(Clone, Debug, PartialEq)]
pub enum Value<'a> {
    /// A `u8` value.
    U8(u8),
    /// An `i8` value.
    I8(i8),
    /// A `u16` value.
    U16(u16),
    /// An `i16` value.
    I16(i16),
    /// A `u32` value (e.g. `general.alignment`, `general.file_type`).
    U32(u32),
    /// An `i32` value.
    I32(i32),
    /// An `f32` value.
    F32(f32),
    /// The stored byte (GGUF bools are one byte; anything but 0 is true).
    Bool(u8),
    /// A UTF-8 string, borrowed from the file when read.
    String(Cow<'a, str>),
    /// A `u64` value.
    U64(u64),
    /// An `i64` value.
    I64(i64),
    /// An `f64` value.
    F64(f64),
    /// An array (of scalars, strings or arrays).
    Array(Array<'a>),
}

/// A metadata array.
#[derive(Clone, Debug, PartialEq)]
pub enum Array<'a> {
    /// `len` scalars of type `ty`, as their little-endian bytes (`len × size` of them).
    Scalars {
        /// Element type (a scalar type: never `String` or `Array`).
        ty: ValueType,
        /// Number of elements.
        len: usize,
        /// The elements' little-endian bytes, `len × ty.scalar_size()` of them.
        bytes: Cow<'a, [u8]>,
    },
    /// An array of strings (e.g. `tokenizer.ggml.tokens`).
    Strings(Vec<Cow<'a, str>>),
    /// Arrays of arrays (each inner array has its own element type).
    Arrays(Vec<Array<'a>>),
}

impl<'a> Value<'a> {
    /// The GGUF type this value is stored as.
    pub fn value_type(&self) -> ValueType {
        match self {
            Value::U8(_) => ValueType::U8,
            Value::I8(_) => ValueType::I8,
            Value::U16(_) => ValueType::U16,
            Value::I16(_) => ValueType::I16,
            Value::U32(_) => ValueType::U32,
            Value::I32(_) => ValueType::I32,
            Value::F32(_) => ValueType::F32,
            Value::Bool(_) => ValueType::Bool,
            Value::String(_) => ValueType::String,
            Value::U64(_) => ValueType::U64,
            Value::I64(_) => ValueType::I64,
            Value::F64(_) => ValueType::F64,
            Value::Array(_) => ValueType::Array,
        }
    }

    /// The string, if this is a string value.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Value::String(s) => Some(s),
            _ => None,
        }
    }

    /// Any unsigned or non-negative signed integer value as u64.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            Value::U8(v) => Some(v.into()),
            Value::U16(v) => Some(v.into()),
            Value::U32(v) => Some(v.into()),
            Value::U64(v) => Some(v),
            Value::I8(v) => u64::try_from(v).ok(),
            Value::I16(v) => u64::try_from(v).ok(),
            Value::I32(v) => u64::try_from(v).ok(),
            Value::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// The same value with no borrow of the file (strings and array bytes copied).
    pub fn into_owned(self) -> Value<'static> {
        match self {
            Value::String(s) => Value::String(Cow::Owned(s.into_owned())),
            Value::Array(a) => Value::Array(a.into_owned()),
            Value::U8(v) => Value::U8(v),
            Value::I8(v) => Value::I8(v),
            Value::U16(v) => Value::U16(v),
            Value::I16(v) => Value::I16(v),
            Value::U32(v) => Value::U32(v),
            Value::I32(v) => Value::I32(v),
            Value::F32(v) => Value::F32(v),
            Value::Bool(v) => Value::Bool(v),
            Value::U64(v) => Value::U64(v),
            Value::I64(v) => Value::I64(v),
            Value::F64(v) => Value::F64(v),
        }
    }
}

impl<'a> Array<'a> {
    /// Number of elements (not bytes; nested arrays count as one each).
    pub fn len(&self) -> usize {
        match self {
            Array::Scalars { len, .. } => *len,
            Array::Strings(v) => v.len(),
            Array::Arrays(v) => v.len(),
        }
    }

    /// Whether the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The element type id written in the file.
    pub fn element_type(&self) -> ValueType {
        match self {
            Array::Scalars { ty, .. } => *ty,
            Array::Strings(_) => ValueType::String,
            Array::Arrays(_) => ValueType::Array,
        }
    }

    /// Element `i` as a value (`None` past the end).
    pub fn get(&self, i: usize) -> Option<Value<'_>> {
        match self {
            Array::Scalars { ty, bytes, .. } => {
                let size = ty.scalar_size()?;
                let start = i.checked_mul(size)?;
                let raw = bytes.get(start..start.checked_add(size)?)?;
                Value::read(&mut Cursor::new(raw), *ty, 0).ok()
            }
            Array::Strings(v) => v.get(i).map(|s| Value::String(Cow::Borrowed(s))),
            Array::Arrays(v) => v.get(i).map(|a| Value::Array(a.clone())),
        }
    }

    /// The same array with no borrow of the file (bytes and strings copied, recursively).
    pub fn into_owned(self) -> Array<'static> {
        match self {
            Array::Scalars { ty, len, bytes } => Array::Scalars { ty, len, bytes: Cow::Owned(bytes.into_owned()) },
            Array::Strings(v) => Array::Strings(v.into_iter().map(|s| Cow::Owned(s.into_owned())).collect()),
            Array::Arrays(v) => Array::Arrays(v.into_iter().map(Array::into_owned).collect()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Indexes whose byte range ends past `usize::MAX` are `None`, not an overflow panic.
    #[test]
    fn get_past_the_end_is_none_for_any_index() {
        let a = Array::Scalars { ty: ValueType::U32, len: 2, bytes: Cow::Borrowed(&[1, 0, 0, 0, 2, 0, 0, 0]) };
        assert!(matches!(a.get(1), Some(Value::U32(2))));
        for i in [2, usize::MAX / 4, usize::MAX / 4 + 1, usize::MAX] {
            assert!(a.get(i).is_none(), "index {i}");
        }
    }
}
