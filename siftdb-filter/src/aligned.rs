//! [`AlignedBytes`]: an owned byte buffer whose first byte is 64-byte
//! aligned, for a filter block read from a file and queried in place.
//!
//! A filter block's 64-byte header is followed by its 64-byte lines, so in
//! such a buffer every line sits in exactly one cache line: a probe is one
//! cache miss, never two (a plain `Vec<u8>` is only 16-byte aligned).
//!
//! Owns: the buffer and its two views as bytes.
//! Must never: expose bytes past the length it was given, or uninitialised
//! memory (it starts zeroed).

use crate::line::{Line, LINE_BYTES};

/// An owned, zero-initialised, 64-byte-aligned byte buffer of a fixed length.
#[derive(Clone, PartialEq, Eq)]
pub struct AlignedBytes {
    lines: Vec<Line>,
    len: usize,
}

impl std::fmt::Debug for AlignedBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AlignedBytes")
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

impl AlignedBytes {
    /// `len` zero bytes.
    pub fn zeroed(len: usize) -> AlignedBytes {
        AlignedBytes {
            lines: vec![Line::EMPTY; len.div_ceil(LINE_BYTES)],
            len,
        }
    }

    /// The bytes, to fill (from a file).
    #[expect(
        unsafe_code,
        reason = "views the aligned lines as bytes without a copy; see the SAFETY comment"
    )]
    pub fn as_mut_bytes(&mut self) -> &mut [u8] {
        let all_len = self.lines.len() * LINE_BYTES;
        // SAFETY: `Line` is `repr(C, align(64))` around one `[u8; 64]`: its
        // size is 64 with no padding, so `lines` is `all_len` initialised
        // bytes, any bit pattern is a valid `Line`, and u8 needs no
        // alignment; the slice keeps the unique borrow of `self.lines`.
        let all =
            unsafe { std::slice::from_raw_parts_mut(self.lines.as_mut_ptr().cast(), all_len) };
        all.get_mut(..self.len).unwrap_or_default()
    }

    /// Shortens the buffer to `len` bytes (no-op when longer).
    pub fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }

    /// Bytes of memory the buffer holds.
    pub fn heap_bytes(&self) -> usize {
        self.lines.capacity() * LINE_BYTES
    }
}

impl AsRef<[u8]> for AlignedBytes {
    #[expect(
        unsafe_code,
        reason = "views the aligned lines as bytes without a copy; see the SAFETY comment"
    )]
    fn as_ref(&self) -> &[u8] {
        let all_len = self.lines.len() * LINE_BYTES;
        // SAFETY: as in `as_mut_bytes`; the slice keeps the shared borrow.
        let all = unsafe { std::slice::from_raw_parts(self.lines.as_ptr().cast(), all_len) };
        all.get(..self.len).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_zeroed_and_exactly_as_long_as_asked() {
        for len in [0, 1, 63, 64, 65, 4096 + 68] {
            let mut buf = AlignedBytes::zeroed(len);
            assert_eq!(buf.as_ref().len(), len);
            assert!(buf.as_ref().iter().all(|&b| b == 0));
            assert_eq!(buf.as_ref().as_ptr() as usize % 64, 0);
            buf.as_mut_bytes().fill(7);
            assert!(buf.as_ref().iter().all(|&b| b == 7));
            buf.truncate(len / 2);
            assert_eq!(buf.as_ref().len(), len / 2);
            buf.truncate(len);
            assert_eq!(buf.as_ref().len(), len / 2);
        }
    }
}
