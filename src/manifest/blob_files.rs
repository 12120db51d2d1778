//! The manifest's blob file records: what was written to each blob file a
//! live table points into, and how much of it is garbage.
//!
//! Owns: [`BlobFileRecord`], its 44 bytes (`docs/format.md`, "Manifest")
//! and its checks.
//! Must never: allocate for a count the remaining bytes cannot hold, or
//! accept garbage above a file's total.

use crate::codec::ByteReader;
use crate::error::{Error, Result};

/// Bytes of one blob file record.
pub const BLOB_FILE_RECORD_LEN: usize = 4 + 5 * 8;

/// One blob file, as the manifest records it: what was written to it and
/// how much of that no live table points to any more (its garbage, added
/// by each compaction that dropped or relocated values of it).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BlobFileRecord {
    /// The keyspace whose tables point into it.
    pub keyspace: u32,
    /// The number in its file name (`NNNNNN.blob`).
    pub file_number: u64,
    /// Sum of the lengths of the values written to it.
    pub total_bytes: u64,
    /// Values written to it.
    pub total_values: u64,
    /// Sum of the lengths of its values no live table points to.
    pub garbage_bytes: u64,
    /// Its values no live table points to.
    pub garbage_values: u64,
}

impl BlobFileRecord {
    /// The share of its bytes that are garbage, 0 ..= 1 (0 for an empty file).
    pub fn garbage_share(&self) -> f64 {
        if self.total_bytes == 0 {
            return 0.0;
        }
        self.garbage_bytes as f64 / self.total_bytes as f64
    }
}

/// The checks of one record, `previous` the number of the record before it
/// and `next_file_number` the manifest's.
pub(super) fn check_blob_file(
    next_file_number: u64,
    blob: &BlobFileRecord,
    previous: Option<u64>,
) -> std::result::Result<(), String> {
    if previous.is_some_and(|p| p >= blob.file_number) {
        return Err("file numbers are not strictly increasing".to_string());
    }
    if blob.file_number >= next_file_number {
        return Err(format!(
            "file number is not below the next file number {next_file_number}"
        ));
    }
    if blob.garbage_bytes > blob.total_bytes || blob.garbage_values > blob.total_values {
        return Err(format!(
            "garbage of {} bytes in {} values passes its total of {} bytes in {} values",
            blob.garbage_bytes, blob.garbage_values, blob.total_bytes, blob.total_values
        ));
    }
    Ok(())
}

/// Appends the blob file count and records.
pub(super) fn encode_into(out: &mut Vec<u8>, blob_files: &[BlobFileRecord]) {
    let count = u32::try_from(blob_files.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&count.to_le_bytes());
    for blob in blob_files {
        out.extend_from_slice(&blob.keyspace.to_le_bytes());
        for field in [
            blob.file_number,
            blob.total_bytes,
            blob.total_values,
            blob.garbage_bytes,
            blob.garbage_values,
        ] {
            out.extend_from_slice(&field.to_le_bytes());
        }
    }
}

/// Reads the blob file count and records (checked by
/// `ManifestState::check` afterwards).
pub(super) fn decode(reader: &mut ByteReader<'_>) -> Result<Vec<BlobFileRecord>> {
    let count = reader.u32()? as usize;
    if count > reader.remaining() / BLOB_FILE_RECORD_LEN {
        return Err(Error::corruption(
            "manifest",
            format!(
                "{count} blob files cannot fit in the {} bytes that remain",
                reader.remaining()
            ),
        ));
    }
    let mut blob_files = Vec::with_capacity(count);
    for _ in 0..count {
        blob_files.push(BlobFileRecord {
            keyspace: reader.u32()?,
            file_number: reader.u64()?,
            total_bytes: reader.u64()?,
            total_values: reader.u64()?,
            garbage_bytes: reader.u64()?,
            garbage_values: reader.u64()?,
        });
    }
    Ok(blob_files)
}
