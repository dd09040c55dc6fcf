//! Read-only memory maps of model files.

use crate::error::{IoError, Result};
use memmap2::Mmap;
use std::fs::File;
use std::path::Path;

/// A whole file mapped read-only. An empty file is represented without a map (mapping zero
/// bytes fails on some platforms).
pub struct MappedFile {
    map: Option<Mmap>,
}

impl MappedFile {
    /// Map `path` read-only.
    pub fn open(path: &Path) -> Result<Self> {
        let file = File::open(path).map_err(|e| IoError::io("open", path, e))?;
        let meta = file.metadata().map_err(|e| IoError::io("read", path, e))?;
        if !meta.is_file() {
            return Err(IoError::io("open", path, std::io::Error::other("not a regular file")));
        }
        if meta.len() == 0 {
            return Ok(MappedFile { map: None });
        }
        // SAFETY: the map is read-only and private to this process. Its contents can change
        // only if another process modifies the file while it is mapped, which qforge never
        // does to its inputs (outputs go to a new temporary file that is renamed into place,
        // and an output equal to the input is refused). Every byte read from the map is
        // treated as untrusted and bounds-checked, so even a concurrent change cannot cause
        // undefined behaviour beyond reading different bytes; truncation by another process
        // (SIGBUS) is the documented limit of memory-mapped I/O.
        let map = unsafe { Mmap::map(&file) }.map_err(|e| IoError::io("map", path, e))?;
        Ok(MappedFile { map: Some(map) })
    }

    /// The file's contents (empty for an empty file).
    pub fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }

    /// Tells the kernel that the whole pages inside `part` (a slice of [`MappedFile::bytes`];
    /// anything else is ignored) are not needed for now: they leave this process's resident
    /// memory, and a later read of them faults them in from the file again, with the same
    /// contents. `qforge convert` calls it after each tensor, so its peak memory follows the
    /// largest tensor rather than the whole model. A hint: errors are ignored, and it does
    /// nothing off Unix.
    pub fn release(&self, part: &[u8]) {
        #[cfg(unix)]
        if let Some(map) = &self.map {
            let base = map.as_ptr() as usize;
            let (start, end) = (part.as_ptr() as usize, part.as_ptr() as usize + part.len());
            if start < base || end > base + map.len() {
                return;
            }
            const PAGE: usize = 4096;
            let first = (start - base).next_multiple_of(PAGE);
            let last = (end - base) / PAGE * PAGE;
            if last > first {
                // SAFETY: `first..last` lies inside the map (checked above). The map is a
                // read-only shared file mapping that this process never writes, so
                // MADV_DONTNEED only drops resident pages: the next access reads the same
                // bytes from the file again (the same assumption as the map itself: no other
                // process modifies the file meanwhile). Slices into the map stay valid.
                let _ = unsafe { map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, first, last - first) };
            }
        }
        #[cfg(not(unix))]
        let _ = part;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Released pages read back the file's bytes; slices that are not part of the map, empty
    /// ones and partial pages are ignored.
    #[test]
    fn released_pages_read_back_the_same_bytes() {
        let path = std::env::temp_dir().join(format!("qforge-release-{}.bin", std::process::id()));
        let data: Vec<u8> = (0..5 * 4096 + 123).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&path, &data).unwrap();
        let m = MappedFile::open(&path).unwrap();
        let bytes = m.bytes();
        assert_eq!(bytes, &data[..]);
        m.release(&bytes[100..3 * 4096 + 5]);
        m.release(&bytes[..0]);
        m.release(&data[..]);
        m.release(bytes);
        assert_eq!(m.bytes(), &data[..]);
        drop(m);
        std::fs::remove_file(&path).unwrap();
    }
}
