//! The state machine's `CURRENT` file: which state directory and which
//! snapshot file are live.
//!
//! Owns: the 28-byte pointer record (magic, version, generation, snapshot
//! number, CRC-32; see `docs/format.md`), its atomic replacement (write a
//! temporary file, fsync it, rename it over `CURRENT`, fsync the directory)
//! and its checked read.
//! Must never: leave a moment at which `CURRENT` is missing or half
//! written — a crash before the rename keeps the old pointer, after it the
//! new one; or accept a record whose checksum, magic or version is wrong.

use std::fs::{self, File};
use std::io::Write;
use std::path::Path;

use crate::codec::{Error, Result};

/// The pointer file's name in the state-machine directory.
pub const CURRENT: &str = "CURRENT";
const CURRENT_TMP: &str = "CURRENT.tmp";
const MAGIC: &[u8; 4] = b"SRSM";
const VERSION: u32 = 1;
/// Encoded length of a pointer.
pub const LEN: usize = 28;

/// Which state directory (`gen-<generation>`) and which snapshot file
/// (`snap-<snapshot>.snap`, none when 0) are live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pointer {
    /// The live state directory's number.
    pub generation: u64,
    /// The live snapshot file's number; 0 when there is none.
    pub snapshot: u64,
}

impl Pointer {
    /// The record's bytes.
    pub fn encode(&self) -> [u8; LEN] {
        let mut out = [0u8; LEN];
        let mut body = Vec::with_capacity(LEN);
        body.extend_from_slice(MAGIC);
        body.extend_from_slice(&VERSION.to_le_bytes());
        body.extend_from_slice(&self.generation.to_le_bytes());
        body.extend_from_slice(&self.snapshot.to_le_bytes());
        let crc = crc32fast::hash(&body);
        body.extend_from_slice(&crc.to_le_bytes());
        for (slot, byte) in out.iter_mut().zip(body) {
            *slot = byte;
        }
        out
    }

    /// The record in `bytes`, checked.
    pub fn decode(bytes: &[u8]) -> Result<Pointer> {
        let what = "state-machine CURRENT file";
        if bytes.len() != LEN {
            return Err(Error::corruption(
                what,
                format!("{} bytes, expected {LEN}", bytes.len()),
            ));
        }
        let (body, crc) = bytes
            .split_at_checked(LEN - 4)
            .ok_or_else(|| Error::corruption(what, "short"))?;
        let crc = u32::from_le_bytes(crc.try_into().map_err(|_| Error::corruption(what, "crc"))?);
        if crc32fast::hash(body) != crc {
            return Err(Error::corruption(what, "checksum mismatch"));
        }
        let field = |at: usize, len: usize| -> Result<&[u8]> {
            body.get(at..at + len)
                .ok_or_else(|| Error::corruption(what, "short"))
        };
        if field(0, 4)? != MAGIC {
            return Err(Error::corruption(what, "bad magic"));
        }
        let u32_at = |at| -> Result<u32> {
            Ok(u32::from_le_bytes(
                field(at, 4)?
                    .try_into()
                    .map_err(|_| Error::corruption(what, "short"))?,
            ))
        };
        let u64_at = |at| -> Result<u64> {
            Ok(u64::from_le_bytes(
                field(at, 8)?
                    .try_into()
                    .map_err(|_| Error::corruption(what, "short"))?,
            ))
        };
        let version = u32_at(4)?;
        if version != VERSION {
            return Err(Error::corruption(
                what,
                format!("version {version}, expected {VERSION}"),
            ));
        }
        Ok(Pointer {
            generation: u64_at(8)?,
            snapshot: u64_at(16)?,
        })
    }

    /// The pointer in `dir`, or `None` when `dir` has none yet.
    pub fn read(dir: &Path) -> Result<Option<Pointer>> {
        let path = dir.join(CURRENT);
        match fs::read(&path) {
            Ok(bytes) => Pointer::decode(&bytes).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io(&path, e)),
        }
    }

    /// Makes this the pointer of `dir`, durably and atomically.
    pub fn store(&self, dir: &Path) -> Result<()> {
        let tmp = dir.join(CURRENT_TMP);
        let mut file = File::create(&tmp).map_err(|e| Error::io(&tmp, e))?;
        file.write_all(&self.encode())
            .and_then(|()| file.sync_all())
            .map_err(|e| Error::io(&tmp, e))?;
        drop(file);
        let path = dir.join(CURRENT);
        fs::rename(&tmp, &path).map_err(|e| Error::io(&path, e))?;
        sync_dir(dir)
    }
}

/// Makes the names in `dir` (created, renamed, removed files) durable.
pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io(dir, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_every_flipped_bit_is_caught() {
        let p = Pointer {
            generation: 3,
            snapshot: 77,
        };
        let bytes = p.encode();
        assert_eq!(Pointer::decode(&bytes).unwrap(), p);
        for bit in 0..LEN * 8 {
            let mut b = bytes;
            b[bit / 8] ^= 1 << (bit % 8);
            assert!(Pointer::decode(&b).is_err(), "bit {bit}");
        }
        assert!(Pointer::decode(&bytes[..LEN - 1]).is_err());
    }

    #[test]
    fn store_replaces_atomically() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(Pointer::read(dir.path()).unwrap(), None);
        let a = Pointer {
            generation: 1,
            snapshot: 0,
        };
        a.store(dir.path()).unwrap();
        assert_eq!(Pointer::read(dir.path()).unwrap(), Some(a));
        // A crash after writing the temporary file but before the rename
        // leaves the old pointer.
        fs::write(dir.path().join(CURRENT_TMP), b"garbage").unwrap();
        assert_eq!(Pointer::read(dir.path()).unwrap(), Some(a));
        let b = Pointer {
            generation: 2,
            snapshot: 5,
        };
        b.store(dir.path()).unwrap();
        assert_eq!(Pointer::read(dir.path()).unwrap(), Some(b));
    }
}
