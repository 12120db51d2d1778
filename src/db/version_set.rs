//! The manifest's counters and the writing of the database's durable
//! state.
//!
//! Owns: [`VersionSet`] — file numbers, keyspace ids, the live logs, the
//! outputs of running work — and what the next manifest records of each
//! keyspace ([`TreeState`]). Locked (in `DbInner`) for every manifest write
//! and every publication of a new super-version.
//! Must never: make a log obsolete before a durable manifest covers its
//! records, or hand out a file number twice.

use std::path::Path;

use crate::db::version::Version;
use crate::error::Result;
use crate::fs::FileSystem;
use crate::key::SeqNo;
use crate::manifest::{
    write_manifest, BlobFileRecord, KeyspaceRecord, KeyspaceSettings, ManifestState,
};

/// The manifest's counters. Locked for every manifest write and every
/// publication of a new super-version.
pub(crate) struct VersionSet {
    pub next_file_number: u64,
    /// The oldest log whose records are not all in tables (of every keyspace).
    pub log_number: u64,
    /// Larger than every keyspace id ever given.
    pub next_keyspace_id: u32,
    /// The logs created and not yet removed, oldest first.
    pub logs: Vec<u64>,
    /// Per running flush or compaction, the first file number its outputs
    /// may have: a table numbered at or above the smallest may be one not
    /// installed yet, never an orphan.
    pending_outputs: Vec<u64>,
}

impl VersionSet {
    /// The file numbers of a database opened at `next_file_number`, whose
    /// oldest needed log is `log_number`; no work running.
    pub fn new(next_file_number: u64, log_number: u64, next_keyspace_id: u32) -> VersionSet {
        VersionSet {
            next_file_number,
            log_number,
            next_keyspace_id,
            logs: Vec::new(),
            pending_outputs: Vec::new(),
        }
    }

    /// The logs no keyspace needs any more (older than `log_number`),
    /// forgotten here: the caller removes their files.
    pub fn take_obsolete_logs(&mut self) -> Vec<u64> {
        let keep = self.logs.partition_point(|&n| n < self.log_number);
        self.logs.drain(..keep).collect()
    }

    pub fn new_file_number(&mut self) -> u64 {
        let n = self.next_file_number;
        self.next_file_number += 1;
        n
    }

    /// Marks the start of work whose outputs are numbered from now on;
    /// returns the mark for [`VersionSet::end_outputs`].
    pub fn begin_outputs(&mut self) -> u64 {
        self.pending_outputs.push(self.next_file_number);
        self.next_file_number
    }

    /// The work that began at `mark` installed or removed its outputs.
    pub fn end_outputs(&mut self, mark: u64) {
        if let Some(at) = self.pending_outputs.iter().position(|&m| m == mark) {
            self.pending_outputs.swap_remove(at);
        }
    }

    /// Tables numbered below this are not outputs of running work.
    pub fn first_pending_output(&self) -> u64 {
        self.pending_outputs
            .iter()
            .copied()
            .min()
            .unwrap_or(u64::MAX)
    }

    /// Makes `trees` (with `last_sequence`) the durable state; the oldest
    /// needed log becomes the oldest any of them needs only once it is.
    pub fn persist(
        &mut self,
        fs: &dyn FileSystem,
        dir: &Path,
        trees: &[TreeState<'_>],
        last_sequence: SeqNo,
    ) -> Result<()> {
        let log_number = trees
            .iter()
            .map(|t| t.log_number)
            .min()
            .unwrap_or(self.log_number);
        let state = ManifestState {
            next_file_number: self.next_file_number,
            last_sequence,
            log_number,
            closed_log: None,
            next_keyspace_id: self.next_keyspace_id,
            keyspaces: trees
                .iter()
                .map(|t| KeyspaceRecord {
                    id: t.id,
                    name: t.name.to_string(),
                    log_number: t.log_number,
                    settings: t.settings.clone(),
                })
                .collect(),
            tables: trees
                .iter()
                .flat_map(|t| {
                    let mut records = t.version.records();
                    for record in &mut records {
                        record.keyspace = t.id;
                    }
                    records
                })
                .collect(),
            blob_files: blob_file_records(trees),
        };
        write_manifest(fs, dir, &state)?;
        self.log_number = log_number;
        Ok(())
    }
}

/// The blob file figures of every keyspace, by file number.
fn blob_file_records(trees: &[TreeState<'_>]) -> Vec<BlobFileRecord> {
    let mut records: Vec<BlobFileRecord> = trees
        .iter()
        .flat_map(|t| {
            t.version.blob_files.values().map(|record| BlobFileRecord {
                keyspace: t.id,
                ..*record
            })
        })
        .collect();
    records.sort_by_key(|r| r.file_number);
    records.dedup_by_key(|r| r.file_number);
    records
}

/// One keyspace as the next manifest records it.
pub(crate) struct TreeState<'a> {
    pub id: u32,
    pub name: &'a str,
    pub version: &'a Version,
    /// The oldest log that may hold records of it not in its tables.
    pub log_number: u64,
    /// Its stored settings.
    pub settings: KeyspaceSettings,
}
