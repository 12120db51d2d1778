//! [`BlobTally`]: the blob pointers a compaction read, summed per blob
//! file (their values' bytes and count), shared by the table cursors of
//! its inputs.
//!
//! Owns: the sums.
//! Must never: read a blob file (a pointer is counted, never resolved,
//! here).

use std::collections::BTreeMap;

use parking_lot::Mutex;

use crate::blob::format::BlobPointer;

/// The bytes and count of the values some pointers into one blob file name.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct BlobBytes {
    /// Sum of the values' lengths.
    pub bytes: u64,
    /// Values.
    pub values: u64,
}

impl BlobBytes {
    /// Counts one value of `length` bytes.
    pub fn add(&mut self, length: u64) {
        self.bytes = self.bytes.saturating_add(length);
        self.values = self.values.saturating_add(1);
    }
}

/// Sums of pointers per blob file number; see the module doc.
#[derive(Debug, Default)]
pub struct BlobTally {
    sums: Mutex<BTreeMap<u64, BlobBytes>>,
}

impl BlobTally {
    /// Counts the value `pointer` names.
    pub fn add(&self, pointer: &BlobPointer) {
        self.sums
            .lock()
            .entry(pointer.file_number)
            .or_default()
            .add(u64::from(pointer.length));
    }

    /// The sums so far, the tally left empty.
    pub fn take(&self) -> BTreeMap<u64, BlobBytes> {
        std::mem::take(&mut *self.sums.lock())
    }
}
