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

    pub fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }
}
