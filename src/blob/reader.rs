//! [`BlobFile`]: one blob file as the tables that point into it share it —
//! read on demand, value by value, each checked against its pointer — and
//! [`BlobFiles`], the registry that hands every table of a database the
//! same handle for a file number.
//!
//! Owns: opening a blob file (lazily, on the first value read), reading
//! one value at a pointer, checking a whole file, and removing the file
//! when the last handle on it goes after the database marked it obsolete.
//! Must never: return a value whose bytes do not match the pointer's
//! checksum, allocate for a pointer before checking it against the file's
//! length, or remove a file not marked obsolete.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, Weak};

use bytes::Bytes;
use parking_lot::Mutex;

use crate::blob::format::{check_value, decode_file, BlobPointer, BlobRecord, BLOB_FORMAT_VERSION};
use crate::error::{Error, Result};
use crate::fs::{RandomAccessFile, SharedFs};

/// The name of blob file `number`, e.g. `000012.blob`.
pub fn blob_file_name(number: u64) -> String {
    format!("{number:06}.blob")
}

/// The number of a blob file's name (exactly what [`blob_file_name`]
/// returns); `None` for any other name.
pub fn parse_blob_file_name(name: &str) -> Option<u64> {
    let stem = name.strip_suffix(".blob")?;
    if stem.is_empty() || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let number: u64 = stem.parse().ok()?;
    (blob_file_name(number) == name).then_some(number)
}

/// One blob file; see the module doc.
pub struct BlobFile {
    number: u64,
    path: PathBuf,
    fs: SharedFs,
    file: OnceLock<Arc<dyn RandomAccessFile>>,
    remove_when_dropped: AtomicBool,
}

impl std::fmt::Debug for BlobFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlobFile")
            .field("path", &self.path)
            .finish()
    }
}

impl BlobFile {
    /// A handle on blob file `number` at `path` (nothing is opened yet).
    pub fn new(fs: SharedFs, path: PathBuf, number: u64) -> BlobFile {
        BlobFile {
            number,
            path,
            fs,
            file: OnceLock::new(),
            remove_when_dropped: AtomicBool::new(false),
        }
    }

    /// Its file number.
    pub fn number(&self) -> u64 {
        self.number
    }

    /// Its path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn file(&self) -> Result<&Arc<dyn RandomAccessFile>> {
        if let Some(file) = self.file.get() {
            return Ok(file);
        }
        // A blob file a live table points into that is gone is lost data,
        // as a missing table is: `Corruption` for the keys it held.
        let opened = self.fs.open_read(&self.path).map_err(|e| match e {
            Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound => {
                Error::corruption(
                    format!("blob file {}", self.path.display()),
                    "missing: a live table points into it; the values it held are lost",
                )
            }
            e => e,
        })?;
        Ok(self.file.get_or_init(|| opened))
    }

    /// The value `pointer` names, read and checked against its checksum.
    pub fn read_value(&self, pointer: &BlobPointer) -> Result<Bytes> {
        if pointer.file_number != self.number {
            return Err(Error::corruption(
                "blob pointer",
                format!(
                    "names blob file {}, resolved against {}",
                    pointer.file_number,
                    self.path.display()
                ),
            ));
        }
        let file = self.file()?;
        if pointer.end() > file.len() {
            return Err(Error::corruption(
                format!("blob value in {}", self.path.display()),
                format!(
                    "{} bytes at offset {} run past the file's {} bytes",
                    pointer.length,
                    pointer.offset,
                    file.len()
                ),
            ));
        }
        let value = file.read_vec_at(pointer.length as usize, pointer.offset)?;
        check_value(pointer, &value, &self.path.display().to_string())?;
        Ok(Bytes::from(value))
    }

    /// Reads the whole file and checks it (see [`verify_blob_file`]).
    pub fn verify(&self) -> Result<(u64, u64)> {
        verify_blob_file(&self.fs, &self.path)
    }

    /// Removes the file once the last handle on it is dropped: the
    /// database calls it when no live table points into the file any more.
    pub fn remove_file_when_unused(&self) {
        self.remove_when_dropped.store(true, Ordering::Relaxed);
    }

    /// Undoes [`BlobFile::remove_file_when_unused`]: a table installed
    /// since points into the file.
    pub fn keep_file(&self) {
        self.remove_when_dropped.store(false, Ordering::Relaxed);
    }
}

impl Drop for BlobFile {
    fn drop(&mut self) {
        if self.remove_when_dropped.load(Ordering::Relaxed) {
            // Best effort: a file left behind is removed by the next open.
            let _ = self.fs.remove(&self.path);
        }
    }
}

/// The blob files of one database, one handle per file number while any
/// table holds it.
#[derive(Default)]
pub struct BlobFiles {
    open: Mutex<HashMap<u64, Weak<BlobFile>>>,
}

impl std::fmt::Debug for BlobFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlobFiles").finish_non_exhaustive()
    }
}

impl BlobFiles {
    /// The handle on blob file `number` in `dir`, shared with every other
    /// holder of it.
    pub fn get(&self, fs: &SharedFs, dir: &Path, number: u64) -> Arc<BlobFile> {
        let mut open = self.open.lock();
        if let Some(file) = open.get(&number).and_then(Weak::upgrade) {
            return file;
        }
        open.retain(|_, weak| weak.strong_count() > 0);
        let file = Arc::new(BlobFile::new(
            fs.clone(),
            dir.join(blob_file_name(number)),
            number,
        ));
        open.insert(number, Arc::downgrade(&file));
        file
    }
}

/// Checks a whole blob file at `path`: header, every record's checksum,
/// footer and its counts; returns its records' count and value bytes.
pub fn verify_blob_file(fs: &SharedFs, path: &Path) -> Result<(u64, u64)> {
    let bytes = fs.read_all(path)?;
    let records = checked_records(&bytes, path)?;
    let value_bytes = records.iter().map(|r| r.value.len() as u64).sum();
    Ok((records.len() as u64, value_bytes))
}

/// [`decode_file`] with another version reported as
/// `Error::UnsupportedVersion` naming `path`.
pub fn checked_records<'a>(bytes: &'a [u8], path: &Path) -> Result<Vec<BlobRecord<'a>>> {
    match decode_file(bytes) {
        Ok(Ok(records)) => Ok(records),
        Ok(Err(found)) => Err(Error::UnsupportedVersion {
            path: path.to_path_buf(),
            kind: "blob file",
            found: u64::from(found),
            supported: u64::from(BLOB_FORMAT_VERSION),
        }),
        Err(Error::Corruption { what, detail }) => Err(Error::Corruption {
            what: format!("{what} in {}", path.display()),
            detail,
        }),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::blob::writer::BlobWriter;
    use crate::fs::OsFileSystem;

    #[test]
    fn names_round_trip() {
        assert_eq!(parse_blob_file_name(&blob_file_name(12)), Some(12));
        assert_eq!(parse_blob_file_name("12.blob"), None);
        assert_eq!(parse_blob_file_name("000012.sst"), None);
    }

    #[test]
    fn written_values_read_back_and_damage_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let fs = OsFileSystem::shared();
        let path = dir.path().join(blob_file_name(3));
        let mut writer = BlobWriter::create(&*fs, &path, 3).unwrap();
        let a = writer.add(b"a", &[1u8; 300]).unwrap();
        let b = writer.add(b"b", &[2u8; 5000]).unwrap();
        let info = writer.finish().unwrap();
        assert_eq!((info.records, info.value_bytes), (2, 5300));
        assert_eq!(verify_blob_file(&fs, &path).unwrap(), (2, 5300));
        let file = BlobFile::new(fs.clone(), path.clone(), 3);
        assert_eq!(&file.read_value(&a).unwrap()[..], &[1u8; 300][..]);
        assert_eq!(&file.read_value(&b).unwrap()[..], &[2u8; 5000][..]);
        let past = BlobPointer {
            offset: info.file_size,
            ..b
        };
        assert!(file.read_value(&past).is_err());
        let wrong = BlobPointer {
            checksum: b.checksum ^ 1,
            ..b
        };
        assert!(file.read_value(&wrong).is_err());
    }
}
