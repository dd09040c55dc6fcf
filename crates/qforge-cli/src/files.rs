//! Raw tensor files: size checks before reading, atomic writes.

use crate::exit::{Classify, CliResult, bad_input};
use anyhow::Context;
use std::io::{Read, Write};
use std::path::Path;

/// Read a quantized file after checking its size is exactly `expected` bytes, so a wrong
/// shape or a truncated file is reported before any large allocation; a size that is not a
/// whole number of `(format name, bytes per block)` blocks is reported as such.
pub fn read_blocks(path: &Path, expected: usize, what: &str, block: (&str, usize)) -> CliResult<Vec<u8>> {
    let mut data = vec![0u8; check_size(path, expected, what, Some(block))?];
    read_into(path, &mut data, what)?;
    Ok(data)
}

/// Check that `path` is a regular file of exactly `expected` bytes (and, for a quantized
/// file, a whole number of blocks) before anything is allocated for it.
fn check_size(path: &Path, expected: usize, what: &str, block: Option<(&str, usize)>) -> CliResult<usize> {
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
    Ok(expected)
}

/// Fill `buf` from the start of `path`; a file that shrank since it was checked is bad input.
fn read_into(path: &Path, buf: &mut [u8], what: &str) -> CliResult<()> {
    let mut f = std::fs::File::open(path).with_context(|| format!("cannot open {what} {}", path.display())).input()?;
    f.read_exact(buf).with_context(|| format!("cannot read {what} {} (did it change size?)", path.display())).input()
}

/// Little-endian f32 values of a raw `.f32` file holding exactly `count` values, read
/// straight into the f32 buffer (no second copy of a large input).
pub fn read_f32(path: &Path, count: usize, what: &str) -> CliResult<Vec<f32>> {
    let bytes = count.checked_mul(4).ok_or_else(|| bad_input(format!("{what}: element count overflows")))?;
    check_size(path, bytes, what, None)?;
    let mut v = vec![0f32; count];
    read_into(path, bytemuck::cast_slice_mut(&mut v), what)?;
    if cfg!(target_endian = "big") {
        v.iter_mut().for_each(|x| *x = f32::from_bits(u32::from_le(x.to_bits())));
    }
    Ok(v)
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
