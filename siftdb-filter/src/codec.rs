//! Panic-free reading of the filters' encoded headers, and their checksum.
//!
//! Owns: the cursor the filter decoders read their headers through
//! (little-endian fixed-width fields, the magic and format-version check)
//! and the CRC-32 helpers every encoded filter is verified with.
//! Must never: panic, index out of bounds, or hand out a slice longer than
//! the input — a short input is a named `Corruption` ("filter block: 3 bytes short").

use crate::error::{truncated, Error, Result};

/// A forward-only cursor over untrusted bytes.
#[derive(Debug, Clone)]
pub(crate) struct ByteReader<'a> {
    rest: &'a [u8],
    what: &'static str,
}

impl<'a> ByteReader<'a> {
    /// A cursor over `bytes`; `what` names the structure in errors.
    pub(crate) fn new(bytes: &'a [u8], what: &'static str) -> Self {
        ByteReader { rest: bytes, what }
    }

    /// Consumes exactly `n` bytes.
    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if n > self.rest.len() {
            return Err(truncated(self.what, n - self.rest.len()));
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }

    /// Consumes a fixed-size array.
    pub(crate) fn array<const N: usize>(&mut self) -> Result<[u8; N]> {
        let Some((head, tail)) = self.rest.split_first_chunk::<N>() else {
            return Err(truncated(self.what, N - self.rest.len()));
        };
        self.rest = tail;
        Ok(*head)
    }

    /// Consumes one byte.
    pub(crate) fn u8(&mut self) -> Result<u8> {
        let [byte] = self.array::<1>()?;
        Ok(byte)
    }

    /// Consumes a little-endian u32.
    pub(crate) fn u32(&mut self) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    /// Consumes a little-endian u64.
    pub(crate) fn u64(&mut self) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// Consumes a 4-byte magic and a format-version byte; `Corruption`
    /// unless they are `magic` and `version`.
    pub(crate) fn magic_and_version(&mut self, magic: &[u8; 4], version: u8) -> Result<()> {
        let found: [u8; 4] = self.array()?;
        if &found != magic {
            return Err(Error::corruption(
                self.what,
                format!("bad magic {found:02x?}"),
            ));
        }
        let found = self.u8()?;
        if found != version {
            return Err(Error::corruption(
                self.what,
                format!("unknown format version {found}"),
            ));
        }
        Ok(())
    }
}

/// CRC-32 (IEEE) of several pieces, as if concatenated.
pub(crate) fn crc32_of(pieces: &[&[u8]]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    for piece in pieces {
        hasher.update(piece);
    }
    hasher.finalize()
}

/// Splits `bytes` into (body, stored crc32 of the last 4 bytes) and checks
/// the crc against the body. The crc covers every byte before it.
pub(crate) fn split_checked<'a>(bytes: &'a [u8], what: &'static str) -> Result<&'a [u8]> {
    let Some((body, crc_bytes)) = bytes.split_last_chunk::<4>() else {
        return Err(truncated(what, 4 - bytes.len()));
    };
    let stored = u32::from_le_bytes(*crc_bytes);
    let actual = crc32_of(&[body]);
    if stored != actual {
        return Err(Error::corruption(
            what,
            format!("checksum mismatch: stored {stored:#010x}, computed {actual:#010x}"),
        ));
    }
    Ok(body)
}
