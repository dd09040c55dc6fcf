//! The JSON view of metadata values that `qforge inspect --json` prints.

use super::{Array, Value};

impl Value<'_> {
    /// JSON for `qforge inspect`: scalars as numbers / booleans / strings; an array longer
    /// than `max_len` is summarised as `{"type": "array", "element_type", "len", "head"}`
    /// with its first 8 elements.
    pub fn to_json(&self, max_len: usize) -> serde_json::Value {
        use serde_json::json;
        match self {
            Value::U8(v) => json!(v),
            Value::I8(v) => json!(v),
            Value::U16(v) => json!(v),
            Value::I16(v) => json!(v),
            Value::U32(v) => json!(v),
            Value::I32(v) => json!(v),
            Value::F32(v) => json!(v),
            Value::Bool(v) => json!(*v != 0),
            Value::String(s) => json!(s),
            Value::U64(v) => json!(v),
            Value::I64(v) => json!(v),
            Value::F64(v) => json!(v),
            Value::Array(a) => a.to_json(max_len),
        }
    }
}

impl Array<'_> {
    fn to_json(&self, max_len: usize) -> serde_json::Value {
        let n = self.len();
        let shown = n.min(if n > max_len { 8 } else { n });
        let head: Vec<serde_json::Value> = (0..shown).filter_map(|i| self.get(i).map(|v| v.to_json(max_len))).collect();
        if n > max_len {
            serde_json::json!({"type": "array", "element_type": self.element_type().name(), "len": n, "head": head})
        } else {
            serde_json::Value::Array(head)
        }
    }
}
