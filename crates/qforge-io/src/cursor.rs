//! A bounds-checked little-endian reader over a byte slice: every read checks the remaining
//! length first, so a lying count or length fails with [`IoError::Truncated`] before anything
//! is allocated or read.

use crate::error::{IoError, Result};

pub(crate) struct Cursor<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Cursor { buf, pos: 0 }
    }

    pub fn pos(&self) -> usize {
        self.pos
    }

    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// The next `n` bytes, borrowed from the buffer.
    pub fn take(&mut self, n: u64, what: &'static str) -> Result<&'a [u8]> {
        let truncated = || IoError::Truncated { what, need: n, at: self.pos as u64, len: self.buf.len() as u64 };
        let n = usize::try_from(n).map_err(|_| truncated())?;
        if n > self.remaining() {
            return Err(truncated());
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    pub fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N]> {
        let s = self.take(N as u64, what)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }

    pub fn u32(&mut self, what: &'static str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    pub fn u64(&mut self, what: &'static str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// A GGUF string: u64 length, then that many UTF-8 bytes (borrowed).
    pub fn string(&mut self, what: &'static str) -> Result<&'a str> {
        let len = self.u64(what)?;
        let at = self.pos as u64;
        let bytes = self.take(len, what)?;
        std::str::from_utf8(bytes).map_err(|_| IoError::InvalidUtf8 { what, at })
    }

    /// Skip to the next multiple of `align` (a power of two).
    pub fn align_to(&self, align: usize) -> Option<usize> {
        self.pos.checked_next_multiple_of(align)
    }
}
