//! [`BlobWriter`]: writes one blob file, record by record, and syncs it.
//!
//! Owns: the order of a blob file's bytes on their way out (header, the
//! records in the order they are added, footer) and the sync before
//! `finish` returns.
//! Must never: hand out a pointer to bytes it has not written, or report a
//! file finished before it is synced (the manifest names a blob file only
//! after `finish`).

use std::path::{Path, PathBuf};

use crate::blob::format::{
    encode_footer, encode_header, encode_record, BlobCounts, BlobPointer, BLOB_HEADER_LEN,
    RECORD_HEAD_LEN,
};
use crate::codec::crc32_of;
use crate::error::{Error, Result};
use crate::fs::{FileSystem, WritableFile};

/// Bytes gathered before they are appended to the file.
const FLUSH_BYTES: usize = 1 << 20;

/// What a finished blob file holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlobFileInfo {
    /// Its file number.
    pub number: u64,
    /// Its size in bytes.
    pub file_size: u64,
    /// Records in it.
    pub records: u64,
    /// Sum of its values' lengths.
    pub value_bytes: u64,
}

/// Writes blob file `number` at a path; see the module doc.
pub struct BlobWriter {
    file: Box<dyn WritableFile>,
    path: PathBuf,
    number: u64,
    header: [u8; BLOB_HEADER_LEN],
    buffer: Vec<u8>,
    written: u64,
    counts: BlobCounts,
}

impl std::fmt::Debug for BlobWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlobWriter")
            .field("path", &self.path)
            .field("counts", &self.counts)
            .finish()
    }
}

impl BlobWriter {
    /// Creates the file at `path` (blob file `number`) and writes its header.
    pub fn create(fs: &dyn FileSystem, path: &Path, number: u64) -> Result<BlobWriter> {
        let file = fs.create(path)?;
        let header = encode_header(number);
        Ok(BlobWriter {
            file,
            path: path.to_path_buf(),
            number,
            header,
            buffer: header.to_vec(),
            written: 0,
            counts: BlobCounts::default(),
        })
    }

    /// Appends the record `key` → `value`; returns the pointer to the value.
    pub fn add(&mut self, key: &[u8], value: &[u8]) -> Result<BlobPointer> {
        let length = u32::try_from(value.len()).map_err(|_| {
            Error::InvalidArgument(format!(
                "value of {} bytes too large for a blob file",
                value.len()
            ))
        })?;
        let record_at = self.written + self.buffer.len() as u64;
        encode_record(&mut self.buffer, key, value);
        self.counts.records += 1;
        self.counts.value_bytes += value.len() as u64;
        if self.buffer.len() >= FLUSH_BYTES {
            self.file.append(&self.buffer)?;
            self.written += self.buffer.len() as u64;
            self.buffer.clear();
        }
        Ok(BlobPointer {
            file_number: self.number,
            offset: record_at + (RECORD_HEAD_LEN + key.len()) as u64,
            length,
            checksum: crc32_of(&[value]),
        })
    }

    /// Records added so far.
    pub fn records(&self) -> u64 {
        self.counts.records
    }

    /// Bytes of the file so far (without its footer).
    pub fn bytes(&self) -> u64 {
        self.written + self.buffer.len() as u64
    }

    /// Writes the footer, syncs the file and describes it.
    pub fn finish(mut self) -> Result<BlobFileInfo> {
        self.buffer
            .extend_from_slice(&encode_footer(&self.header, self.counts));
        self.file.append(&self.buffer)?;
        self.written += self.buffer.len() as u64;
        self.file.sync()?;
        Ok(BlobFileInfo {
            number: self.number,
            file_size: self.written,
            records: self.counts.records,
            value_bytes: self.counts.value_bytes,
        })
    }

    /// The path being written.
    pub fn path(&self) -> &Path {
        &self.path
    }
}
