//! What a repair reports: the manifest as found, each table's and log's
//! fate, what was lost and what is uncertain.
//!
//! Owns: [`RepairReport`], [`TableReport`], [`LogReport`], [`LostRange`],
//! [`BlobFileReport`], [`ManifestFinding`], [`TableAction`], [`LogAction`].
//! Must never: read or write a file; it only holds what the repair did.

use std::path::PathBuf;

use crate::wal::LostRecord;

/// The manifest as repair found it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ManifestFinding {
    /// Read and checked: its tables, levels and logs were the starting point.
    Intact,
    /// Damaged (the reason): every table and log in the directory was used.
    Damaged(String),
    /// Absent: every table and log in the directory was used.
    Missing,
}

/// What became of a table.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TableAction {
    /// Sound and shadowing nothing lost: kept as it is.
    Kept,
    /// Replaced by a new table holding what was kept (`None`: nothing was
    /// left to keep); the original moved to `lost/`.
    Rewritten {
        /// The new table's file name.
        into: Option<String>,
    },
    /// Merged, with every other source, into the new tables (a repair
    /// without an intact manifest); the original moved to `lost/`.
    Merged,
}

/// Data repair could not read: a block, the rest of a table, a whole table.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LostRange {
    /// The table file it was in.
    pub file: String,
    /// Its file offset, when known.
    pub offset: Option<u64>,
    /// The smallest user key it may have held (`None`: unknown, from the
    /// start of the key space).
    pub first_key: Option<Vec<u8>>,
    /// The largest user key it may have held (`None`: unknown, to the end).
    pub last_key: Option<Vec<u8>>,
    /// The largest sequence number it may have held (`None`: unknown).
    pub max_sequence: Option<u64>,
    /// What was wrong.
    pub reason: String,
}

impl LostRange {
    /// True when `user_key` lies within the range.
    pub fn covers(&self, user_key: &[u8]) -> bool {
        self.first_key.as_deref().is_none_or(|lo| lo <= user_key)
            && self.last_key.as_deref().is_none_or(|hi| user_key <= hi)
    }
}

/// What repair found in, and did with, one table.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TableReport {
    /// The file name.
    pub file: String,
    /// Its level in the intact manifest.
    pub level: Option<u32>,
    /// What became of it.
    pub action: TableAction,
    /// Entries carried into the repaired database.
    pub entries_kept: u64,
    /// Readable entries left out: older versions a lost range may have
    /// shadowed, or entries outside the range the manifest gives the table.
    pub entries_dropped: u64,
    /// What could not be read.
    pub lost: Vec<LostRange>,
    /// Why it could not be kept as it was (empty when sound).
    pub problems: Vec<String>,
}

/// What became of a log.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LogAction {
    /// Intact: left for the next open to replay.
    Kept,
    /// Damaged: its readable records went into a new table; the original
    /// moved to `lost/`.
    Replaced,
    /// Its records were replayed with every other source into the new
    /// tables (a repair without an intact manifest); moved to `lost/`.
    Merged,
    /// Every record is already in tables (a log a crash left behind, found
    /// without a manifest): moved to `lost/`, not replayed.
    Obsolete,
}

/// What repair found in, and did with, one log.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LogReport {
    /// The file name.
    pub file: String,
    /// What became of it.
    pub action: LogAction,
    /// Records (write batches) carried into the repaired database.
    pub records_kept: u64,
    /// Stretches given up (their writes are lost; which keys they held is
    /// not known).
    pub lost: Vec<LostRecord>,
    /// A torn end (offset, reason): what a crash leaves; not a loss of an
    /// acknowledged write unless the log had been closed cleanly.
    pub torn_tail: Option<(u64, String)>,
}

/// A blob file the repaired tables point into that is missing or damaged.
/// The pointers into it are kept: a read of a key whose value it held
/// fails with `Corruption` naming it (never an older value of the key, never
/// a wrong one), until the key is written again or deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct BlobFileReport {
    /// The blob file's name.
    pub file: String,
    /// The tables (as examined) that point into it.
    pub tables: Vec<String>,
    /// What is wrong with it ("missing", or the first damage found).
    pub problem: String,
}

/// What [`repair`](super::repair) found and did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RepairReport {
    /// The database directory.
    pub dir: PathBuf,
    /// Nothing was written, moved or locked.
    pub dry_run: bool,
    /// The manifest as found.
    pub manifest: ManifestFinding,
    /// Every table considered.
    pub tables: Vec<TableReport>,
    /// Every log considered.
    pub logs: Vec<LogReport>,
    /// Tables written (or, in a dry run, that would be).
    pub new_tables: Vec<String>,
    /// Originals moved into `lost/`: (from, to), relative to the directory.
    pub moved: Vec<(String, String)>,
    /// A new manifest was written (or would be).
    pub manifest_written: bool,
    /// What this repair cannot vouch for: losses whose keys are unknown, so
    /// that an older value of one of those keys may now be served where the
    /// lost write had replaced or deleted it.
    pub uncertain: Vec<String>,
    /// Blob files the tables point into that are missing or damaged: the
    /// values they held are lost (see [`BlobFileReport`]).
    pub blob_files: Vec<BlobFileReport>,
}

impl RepairReport {
    /// True when the repair changed (or, in a dry run, would change) anything.
    pub fn changed(&self) -> bool {
        self.manifest_written || !self.new_tables.is_empty() || !self.moved.is_empty()
    }

    /// True when any data could not be carried over.
    pub fn lost_anything(&self) -> bool {
        self.lost_ranges().next().is_some()
            || self.logs.iter().any(|l| !l.lost.is_empty())
            || self.tables.iter().any(|t| t.entries_dropped > 0)
            || !self.blob_files.is_empty()
    }

    /// Every lost stretch of table data.
    pub fn lost_ranges(&self) -> impl Iterator<Item = &LostRange> {
        self.tables.iter().flat_map(|t| t.lost.iter())
    }
}
