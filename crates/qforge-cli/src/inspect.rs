//! `qforge inspect FILE [--json]`: metadata and tensor table of a GGUF or safetensors file,
//! read from the headers only (the file is memory-mapped; tensor data is never touched).

use crate::exit::{Classify, CliResult, bad_input};
use qforge_io::{Array, ModelFile, ModelSource, Value};
use std::io::Write;
use std::path::Path;

/// Arrays longer than this are summarised (type, length, first elements).
const MAX_ARRAY: usize = 64;

/// Open and parse a model file; the container comes from the extension, else from the
/// first bytes (GGUF magic, or else safetensors).
/// A model file, a Hugging Face directory or a sharded checkpoint's index, mapped.
pub fn open(path: &Path) -> CliResult<ModelSource> {
    ModelSource::open(path).input()
}

pub fn parse<'a>(src: &'a ModelSource, path: &Path) -> CliResult<ModelFile<'a>> {
    src.model().map_err(|e| match e {
        e @ (qforge_io::IoError::Checkpoint { .. } | qforge_io::IoError::InFile { .. }) => bad_input(e),
        e => bad_input(format!("{}: {e}", path.display())),
    })
}

pub fn inspect(path: &Path, json: bool) -> CliResult<()> {
    let src = open(path)?;
    let m = parse(&src, path)?;
    let mut out = std::io::stdout().lock();
    if json {
        let metadata: serde_json::Map<String, serde_json::Value> =
            m.metadata.iter().map(|(k, v)| (k.to_string(), v.to_json(MAX_ARRAY))).collect();
        let tensors: Vec<serde_json::Value> = m
            .tensors
            .iter()
            .map(|t| {
                serde_json::json!({
                    "name": t.name, "type": t.ty.name(), "shape": t.dims, "bytes": t.size(), "offset": t.offset,
                })
            })
            .collect();
        let doc = serde_json::json!({"metadata": metadata, "tensors": tensors});
        let s = serde_json::to_string_pretty(&doc).failed()?;
        return writeln!(out, "{s}").failed();
    }
    let version = m.version.map(|v| format!(" v{v}")).unwrap_or_default();
    writeln!(
        out,
        "{}: {}{version}{}, {} metadata keys, {} tensors, {} bytes",
        path.display(),
        src.container.name(),
        if src.files.len() > 1 { format!(" in {} files", src.files.len()) } else { String::new() },
        m.metadata.len(),
        m.tensors.len(),
        src.total_bytes()
    )
    .failed()?;
    if !m.metadata.is_empty() {
        writeln!(out, "\nmetadata:").failed()?;
    }
    for (k, v) in &m.metadata {
        writeln!(out, "  {k} = {}", show(v)).failed()?;
    }
    let w = m.tensors.iter().map(|t| t.name.len()).max().unwrap_or(4).max(4);
    writeln!(out, "\n  {:<w$}  {:<8}  {:<20}  {:>12}  {:>12}", "name", "type", "shape", "bytes", "offset").failed()?;
    let (mut bytes, mut elems) = (0u128, 0u128);
    for t in &m.tensors {
        let shape = t.dims.iter().map(|d| d.to_string()).collect::<Vec<_>>().join("x");
        let extra = t.companion.as_deref().map(|c| format!("  (+ {c})")).unwrap_or_default();
        writeln!(out, "  {:<w$}  {:<8}  {:<20}  {:>12}  {:>12}{extra}", t.name, t.ty.name(), shape, t.size(), t.offset)
            .failed()?;
        bytes += t.size() as u128;
        elems += t.numel() as u128;
    }
    let bpw = if elems == 0 { 0.0 } else { bytes as f64 * 8.0 / elems as f64 };
    writeln!(
        out,
        "\ntotal: {} tensors, {elems} weights, {bytes} bytes ({:.2} MiB), {bpw:.4} bits per weight",
        m.tensors.len(),
        bytes as f64 / (1024.0 * 1024.0)
    )
    .failed()
}

/// One-line rendering of a metadata value; long arrays summarised.
fn show(v: &Value<'_>) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        Value::Array(a) => show_array(a),
        v => v.to_json(MAX_ARRAY).to_string(),
    }
}

fn show_array(a: &Array<'_>) -> String {
    let n = a.len();
    let shown = if n > 16 { 8 } else { n };
    let items: Vec<String> = (0..shown).filter_map(|i| a.get(i)).map(|v| show(&v)).collect();
    let more = if shown < n { format!(", … ({n} {} elements)", a.element_type().name()) } else { String::new() };
    format!("[{}{more}]", items.join(", "))
}
