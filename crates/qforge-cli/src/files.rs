//! Raw tensor files: size checks before reading, atomic writes.

use crate::exit::{Classify, CliResult, bad_input};
use anyhow::Context;
use std::io::Write;
use std::path::Path;

/// Read a whole file after checking its size is exactly `expected` bytes (so a wrong shape
/// or a truncated file is reported before any large allocation).
pub fn read_exact_size(path: &Path, expected: usize, what: &str) -> CliResult<Vec<u8>> {
    read_checked(path, expected, what, None)
}

/// Like [`read_exact_size`] for a quantized file of `(format name, bytes per block)`: a size
/// that is not a whole number of blocks is reported as such.
pub fn read_blocks(path: &Path, expected: usize, what: &str, block: (&str, usize)) -> CliResult<Vec<u8>> {
    read_checked(path, expected, what, Some(block))
}

fn read_checked(path: &Path, expected: usize, what: &str, block: Option<(&str, usize)>) -> CliResult<Vec<u8>> {
    let meta = std::fs::metadata(path).with_context(|| format!("cannot open {what} {}", path.display())).input()?;
    if !meta.is_file() {
        return Err(bad_input(format!("{what} {} is not a regular file", path.display())));
    }
    if let Some((name, bb)) = block.filter(|(_, bb)| !meta.len().is_multiple_of(*bb as u64)) {
        return Err(bad_input(format!(
            "{what} {} has {} bytes, not a whole number of {name} blocks ({bb} bytes each)",
            path.display(),
            meta.len()
        )));
    }
    if meta.len() != expected as u64 {
        return Err(bad_input(format!(
            "{what} {} has {} bytes, but the shape and format need exactly {expected}",
            path.display(),
            meta.len()
        )));
    }
    let data = std::fs::read(path).with_context(|| format!("cannot read {what} {}", path.display())).input()?;
    if data.len() != expected {
        return Err(bad_input(format!("{what} {} changed size while being read", path.display())));
    }
    Ok(data)
}

/// Little-endian f32 values of a raw `.f32` file holding exactly `count` values.
pub fn read_f32(path: &Path, count: usize, what: &str) -> CliResult<Vec<f32>> {
    let bytes = count.checked_mul(4).ok_or_else(|| bad_input(format!("{what}: element count overflows")))?;
    let data = read_exact_size(path, bytes, what)?;
    Ok(data.chunks_exact(4).map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect())
}

/// Refuse to write the output over one of the inputs.
pub fn check_distinct(output: &Path, inputs: &[&Path]) -> CliResult<()> {
    let out = std::fs::canonicalize(output).ok();
    for i in inputs {
        if out.is_some() && std::fs::canonicalize(i).ok() == out {
            return Err(bad_input(format!("output {} is also an input; refusing to overwrite it", output.display())));
        }
    }
    Ok(())
}

/// Write `data` to `path` atomically: a temporary file beside it, then a rename, so a failed
/// run never leaves a truncated output behind.
pub fn write_atomic(path: &Path, data: &[u8]) -> CliResult<()> {
    let dir = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = path.file_name().ok_or_else(|| bad_input(format!("output {} is not a file path", path.display())))?;
    let tmp = dir.join(format!(".{}.qforge-tmp-{}", name.to_string_lossy(), std::process::id()));
    let result = (|| -> anyhow::Result<()> {
        let mut f = std::fs::File::create(&tmp).with_context(|| format!("cannot create {}", tmp.display()))?;
        f.write_all(data).with_context(|| format!("cannot write {}", tmp.display()))?;
        f.sync_all().ok();
        std::fs::rename(&tmp, path).with_context(|| format!("cannot move output into place at {}", path.display()))?;
        Ok(())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.failed()
}
