//! The blob files of a repair: which ones the tables it examined point
//! into, and whether each is there and sound.
//!
//! A repair keeps every blob pointer it reads (a salvaged or merged entry
//! of kind blob is written as it was, and the new table lists the blob
//! files it points into), so the blob files stay live and the next open
//! keeps them. It never rewrites, moves or deletes a blob file. When one
//! is missing or damaged the pointers into it are kept as well: a read of
//! such a key fails with `Corruption` naming the blob file — it never
//! returns an older version of the key (which dropping the entry could
//! let through) or a wrong value. The repair reports each such file with
//! the tables that point into it ([`BlobFileReport`]).
//!
//! Owns: collecting the blob files examined tables name, and checking
//! them for the report.
//! Must never: write, move or remove a file.

use bytes::Bytes;

use crate::blob::{blob_file_name, verify_blob_file, BlobPointer};
use crate::key::{parse_internal_key, ValueKind};

use super::report::BlobFileReport;
use super::Repair;

impl Repair<'_> {
    /// Table `table` points into the blob files `numbers`.
    pub(super) fn add_blob_refs(&mut self, table: &str, numbers: &[u64]) {
        for &number in numbers {
            let tables = self.blob_refs.entry(number).or_default();
            if !tables.iter().any(|t| t == table) {
                tables.push(table.to_string());
            }
        }
    }

    /// Table `table` holds `entries` (salvaged from a damaged table): the
    /// blob files their pointers name, for a table whose properties, which
    /// list them, may be lost.
    pub(super) fn add_blob_pointers(&mut self, table: &str, entries: &[(Bytes, Bytes)]) {
        let numbers: Vec<u64> = entries
            .iter()
            .filter(|(key, _)| {
                parse_internal_key(key).is_ok_and(|parsed| parsed.kind == ValueKind::Blob)
            })
            .filter_map(|(_, value)| BlobPointer::decode(value).ok())
            .map(|pointer| pointer.file_number)
            .collect();
        self.add_blob_refs(table, &numbers);
    }

    /// Checks every blob file an examined table points into, reporting
    /// each that is missing or damaged.
    pub(super) fn check_blob_files(&mut self) {
        let refs = std::mem::take(&mut self.blob_refs);
        for (number, tables) in refs {
            let file = blob_file_name(number);
            let path = self.path(&file);
            let problem = if !self.fs.exists(&path) {
                Some("missing".to_string())
            } else {
                verify_blob_file(&self.context.fs, &path)
                    .err()
                    .map(|e| e.to_string())
            };
            if let Some(problem) = problem {
                self.report.blob_files.push(BlobFileReport {
                    file,
                    tables,
                    problem,
                });
            }
        }
    }
}
