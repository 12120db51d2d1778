//! The blob file a flush or compaction writes beside one output table:
//! puts whose value is at or above the keyspace's blob threshold go to it,
//! and the table gets a pointer under `ValueKind::Blob` instead.
//!
//! The blob file takes its table's number (`000012.sst` and
//! `000012.blob`): table numbers are unique, so blob numbers are too, and
//! no number is allocated apart.
//!
//! Owns: deciding which entry is separated, writing its value, and the
//! entry the table gets in its place.
//! Must never: separate anything but a put (merge operands and tombstones
//! stay inline), or let a table be finished before the blob file its
//! pointers name is synced (`finish` comes first, see `flush::write_table`).

use std::path::Path;

use crate::blob::{blob_file_name, BlobFileInfo, BlobWriter, BLOB_POINTER_LEN};
use crate::error::Result;
use crate::fs::FileSystem;
use crate::key::{split_internal_key, ValueKind};

/// Separates the large values of one output table; see the module doc.
pub(crate) struct BlobOutput {
    threshold: Option<usize>,
    number: u64,
    writer: Option<BlobWriter>,
    /// The entry's key with its kind set to blob (reused).
    key: Vec<u8>,
    pointer: [u8; BLOB_POINTER_LEN],
}

impl BlobOutput {
    /// Values of at least `threshold` bytes (`None`: none) go to blob file
    /// `number` in the table's directory.
    pub fn new(threshold: Option<usize>, number: u64) -> BlobOutput {
        BlobOutput {
            threshold,
            number,
            writer: None,
            key: Vec::new(),
            pointer: [0; BLOB_POINTER_LEN],
        }
    }

    /// The entry the table gets for `(key, value)`: itself, or, for a put
    /// at or above the threshold, the key with kind blob and the pointer to
    /// the value just appended to the blob file.
    pub fn entry<'a>(
        &'a mut self,
        fs: &dyn FileSystem,
        dir: &Path,
        key: &'a [u8],
        value: &'a [u8],
    ) -> Result<(&'a [u8], &'a [u8])> {
        let Some(threshold) = self.threshold.filter(|&t| value.len() >= t) else {
            return Ok((key, value));
        };
        let Some((user_key, tag)) = split_internal_key(key) else {
            return Ok((key, value));
        };
        if tag & 0xff != ValueKind::Put as u64 {
            return Ok((key, value));
        }
        debug_assert!(value.len() >= threshold);
        let writer = match &mut self.writer {
            Some(writer) => writer,
            None => self.writer.insert(BlobWriter::create(
                fs,
                &dir.join(blob_file_name(self.number)),
                self.number,
            )?),
        };
        self.pointer = writer.add(user_key, value)?.encode();
        self.key.clear();
        self.key.extend_from_slice(user_key);
        let blob_tag = (tag & !0xff) | ValueKind::Blob as u64;
        self.key.extend_from_slice(&blob_tag.to_le_bytes());
        Ok((&self.key, &self.pointer))
    }

    /// Finishes and syncs the blob file, if a value went to it.
    pub fn finish(&mut self) -> Result<Option<BlobFileInfo>> {
        self.writer.take().map(BlobWriter::finish).transpose()
    }
}
