//! Reading GGUF metadata values at a cursor, every count checked against the bytes left
//! before anything is allocated.

use super::{Array, MAX_NESTING, Value, ValueType};
use crate::cursor::Cursor;
use crate::error::{IoError, Result};
use std::borrow::Cow;

impl<'a> Value<'a> {
    /// Read a value of type `ty` (already read) at the cursor.
    pub(crate) fn read(c: &mut Cursor<'a>, ty: ValueType, depth: usize) -> Result<Self> {
        const W: &str = "metadata value";
        Ok(match ty {
            ValueType::U8 => Value::U8(c.array::<1>(W)?[0]),
            ValueType::I8 => Value::I8(c.array::<1>(W)?[0] as i8),
            ValueType::Bool => Value::Bool(c.array::<1>(W)?[0]),
            ValueType::U16 => Value::U16(u16::from_le_bytes(c.array(W)?)),
            ValueType::I16 => Value::I16(i16::from_le_bytes(c.array(W)?)),
            ValueType::U32 => Value::U32(u32::from_le_bytes(c.array(W)?)),
            ValueType::I32 => Value::I32(i32::from_le_bytes(c.array(W)?)),
            ValueType::F32 => Value::F32(f32::from_le_bytes(c.array(W)?)),
            ValueType::U64 => Value::U64(u64::from_le_bytes(c.array(W)?)),
            ValueType::I64 => Value::I64(i64::from_le_bytes(c.array(W)?)),
            ValueType::F64 => Value::F64(f64::from_le_bytes(c.array(W)?)),
            ValueType::String => Value::String(Cow::Borrowed(c.string("metadata string")?)),
            ValueType::Array => Value::Array(Array::read(c, depth + 1)?),
        })
    }
}

impl<'a> Array<'a> {
    /// Read an array (element type, u64 count, elements) at the cursor. The count is checked
    /// against the bytes left before anything is allocated: each element takes at least one
    /// byte (a scalar), eight (a string's length) or twelve (a nested array's header).
    fn read(c: &mut Cursor<'a>, depth: usize) -> Result<Self> {
        if depth > MAX_NESTING {
            return Err(IoError::TooDeep { max: MAX_NESTING, at: c.pos() as u64 });
        }
        let at = c.pos() as u64;
        let id = c.u32("array element type")?;
        let ty = ValueType::from_id(id).ok_or(IoError::UnknownValueType { id, at })?;
        let count = c.u64("array length")?;
        let min_size = ty.scalar_size().unwrap_or(if ty == ValueType::String { 8 } else { 12 }) as u64;
        let need =
            count.checked_mul(min_size).ok_or_else(|| IoError::overflow(format!("array of {count} elements")))?;
        if need > c.remaining() as u64 {
            return Err(IoError::Truncated { what: "array elements", need, at: c.pos() as u64, len: 0 }
                .with_len(c.pos() + c.remaining()));
        }
        // `count` is now at most the number of bytes left, so the allocations below are
        // bounded by the file size.
        let len = count as usize;
        Ok(match ty {
            ValueType::String => {
                let mut v = Vec::with_capacity(len);
                for _ in 0..len {
                    v.push(Cow::Borrowed(c.string("metadata string")?));
                }
                Array::Strings(v)
            }
            ValueType::Array => {
                let mut v = Vec::with_capacity(len);
                for _ in 0..len {
                    v.push(Array::read(c, depth + 1)?);
                }
                Array::Arrays(v)
            }
            _ => Array::Scalars { ty, len, bytes: Cow::Borrowed(c.take(need, "array elements")?) },
        })
    }
}

impl IoError {
    fn with_len(self, len: usize) -> Self {
        match self {
            IoError::Truncated { what, need, at, .. } => IoError::Truncated { what, need, at, len: len as u64 },
            e => e,
        }
    }
}
