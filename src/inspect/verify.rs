//! [`verify_dir`]: reads every block of every live file of a database
//! directory and checks every checksum, without opening the database.
//!
//! What is checked: the manifest decodes (checksum, layout, its own rules);
//! every table it names exists, opens (footer, index, properties, filter),
//! has the size and the key and sequence ranges the manifest records, and
//! passes [`Table::verify`] (every data block's checksum and structure, key
//! order, properties against the data, the filter against every key);
//! the tables of each level below 0 do not overlap; every live log replays
//! with [`replay_batches`] (record checksums, batch layout, sequence order)
//! and carries the number of its file name in its header. Every blob file a
//! live table points into exists and passes every check of its bytes
//! (header, each record, footer), and every blob pointer of such a table
//! resolves to a value that matches its checksum; a missing or damaged one
//! is a typed [`Finding`]. When the manifest
//! is missing or does not decode, every table and log in the directory is
//! checked on its own.
//!
//! Owns: [`VerifyReport`], [`Problem`], [`Finding`] and the rules above.
//! Must never: write anything or take the directory lock, or stop at the
//! first problem — every file is checked and every problem reported.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::blob::{blob_file_name, parse_blob_file_name};
use crate::error::{Error, Result};
use crate::filename::{parse_file_name, table_file_name, wal_file_name, FileKind, MANIFEST_FILE};
use crate::fs::{FileSystem, OsFileSystem, SharedFs};
use crate::identify::check_is_database;
use crate::inspect::blob::{inspect_blob_file_with, BlobPlace};
use crate::inspect::dir::{role_of, FileRole, ManifestSummary};
use crate::key::user_key_of;
use crate::manifest::ClosedLog;
use crate::manifest::{self, ManifestState, TableRecord};
use crate::table::{BlockKind, ReadContext, ReadCounters, ReadSettings, ScanMode, Severity, Table};
use crate::wal::{closed_log_missing, cut_short, replay, replay_batches};

/// What a [`Problem`] is, where a caller may act on its kind.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Finding {
    /// A problem with no kind of its own: `detail` says what it is.
    General,
    /// A blob file a live table points into is not in the directory: the
    /// values it held are lost (reads of their keys fail).
    MissingBlobFile {
        /// The blob file's number.
        blob_file: u64,
        /// The first table found pointing into it.
        table: u64,
    },
    /// A blob file a live table points into is damaged, unreadable or of
    /// another format version.
    DamagedBlobFile {
        /// The blob file's number.
        blob_file: u64,
        /// Where its bytes are damaged, when they are.
        place: Option<BlobPlace>,
    },
    /// A table's blob pointer lands outside its blob file or on bytes that
    /// do not match its checksum.
    BadBlobPointer {
        /// The table's number.
        table: u64,
    },
}

/// One problem found by [`verify_dir`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// Its kind.
    pub finding: Finding,
    /// The file it is in (a name in the directory).
    pub file: String,
    /// The table block it is in, when it is in one.
    pub block: Option<BlockKind>,
    /// The file offset (of the block, or of the log record), when known
    /// apart from `detail` (which names offsets too where it can).
    pub offset: Option<u64>,
    /// `Warning`: reads stay correct (a damaged filter, a torn log tail
    /// recovery drops). `Error`: some data is unreadable or wrong.
    pub severity: Severity,
    /// What is wrong.
    pub detail: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let severity = match self.severity {
            Severity::Warning => "warning",
            Severity::Error => "error",
        };
        write!(f, "{severity}: {}", self.file)?;
        match (self.block, self.offset) {
            (Some(block), Some(offset)) => write!(f, ": {block} block at offset {offset}")?,
            (Some(block), None) => write!(f, ": {block} block")?,
            (None, Some(offset)) => write!(f, ": offset {offset}")?,
            (None, None) => {}
        }
        write!(f, ": {}", self.detail)
    }
}

/// What [`verify_dir`] checked and found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyReport {
    /// The directory.
    pub dir: PathBuf,
    /// The manifest's counters; `None` when it is missing or did not decode.
    pub manifest: Option<ManifestSummary>,
    /// Tables opened and verified.
    pub tables_checked: usize,
    /// Data blocks read and checked in them.
    pub data_blocks_checked: u64,
    /// Logs replayed.
    pub logs_checked: usize,
    /// Log records (write batches) read and checked in them.
    pub log_records_checked: u64,
    /// Every problem, in the order found.
    pub problems: Vec<Problem>,
    /// Things worth knowing that are not problems: files a crash or an
    /// unfinished flush left behind, which the next open removes.
    pub notes: Vec<String>,
}

impl VerifyReport {
    /// The problems that make some data unreadable or wrong.
    pub fn errors(&self) -> impl Iterator<Item = &Problem> {
        self.problems
            .iter()
            .filter(|p| p.severity == Severity::Error)
    }

    /// The problems reads survive.
    pub fn warnings(&self) -> impl Iterator<Item = &Problem> {
        self.problems
            .iter()
            .filter(|p| p.severity == Severity::Warning)
    }

    /// True when there is no error (warnings allowed).
    pub fn is_clean(&self) -> bool {
        self.errors().next().is_none()
    }

    fn problem(
        &mut self,
        file: &str,
        severity: Severity,
        at: Option<(Option<BlockKind>, u64)>,
        detail: impl fmt::Display,
    ) {
        self.problems.push(Problem {
            finding: Finding::General,
            file: file.to_string(),
            block: at.and_then(|(block, _)| block),
            offset: at.map(|(_, offset)| offset),
            severity,
            detail: detail.to_string(),
        });
    }

    fn error(&mut self, file: &str, detail: impl fmt::Display) {
        self.problem(file, Severity::Error, None, detail);
    }

    /// An error of kind `finding`.
    fn found(
        &mut self,
        file: &str,
        finding: Finding,
        offset: Option<u64>,
        detail: impl fmt::Display,
    ) {
        self.problems.push(Problem {
            finding,
            file: file.to_string(),
            block: None,
            offset,
            severity: Severity::Error,
            detail: detail.to_string(),
        });
    }
}

/// Verifies the database in `dir` on the real file system.
pub fn verify_dir(dir: &Path) -> Result<VerifyReport> {
    verify_dir_with(&OsFileSystem::shared(), dir)
}

/// Verifies the database in `dir` through `fs`, reading only.
///
/// `Err` only when there is nothing to verify: `dir` is not a directory,
/// cannot be listed, or is not a siftdb database (`NotADatabase`: neither
/// a manifest nor any file that opens as a siftdb table or log).
/// Everything found wrong in the files is a [`Problem`] in the report.
pub fn verify_dir_with(shared_fs: &SharedFs, dir: &Path) -> Result<VerifyReport> {
    let fs = shared_fs.as_ref();
    if !fs.is_dir(dir) {
        return Err(Error::invalid(format!(
            "{} is not a directory",
            dir.display()
        )));
    }
    let mut names = fs.list(dir)?;
    names.sort();
    let numbered: Vec<(FileKind, u64)> = names.iter().filter_map(|n| parse_file_name(n)).collect();
    let has_manifest = names.iter().any(|n| n == MANIFEST_FILE);
    check_is_database(shared_fs, dir, &names)?;
    let mut report = VerifyReport {
        dir: dir.to_path_buf(),
        manifest: None,
        tables_checked: 0,
        data_blocks_checked: 0,
        logs_checked: 0,
        log_records_checked: 0,
        problems: Vec::new(),
        notes: Vec::new(),
    };

    let state = if has_manifest {
        read_state(fs, dir, &mut report)
    } else {
        report.error(
            MANIFEST_FILE,
            "missing, yet the directory holds tables or logs: which of them are live is unknown",
        );
        None
    };
    report.manifest = state.as_ref().map(|s| ManifestSummary {
        next_file_number: s.next_file_number,
        last_sequence: s.last_sequence,
        log_number: s.log_number,
    });

    let tables = ReadContext::new(
        Arc::clone(shared_fs),
        ReadSettings::tool(),
        ReadCounters::new(),
    );
    let mut blobs = BlobChecks::default();
    match &state {
        Some(state) => {
            let mut records: Vec<&TableRecord> = state.tables.iter().collect();
            records.sort_by_key(|r| r.file_number);
            for record in records {
                let name = table_file_name(record.file_number);
                if names.contains(&name) {
                    check_table(&tables, dir, &name, Some(record), &mut report, &mut blobs);
                } else {
                    report.error(&name, "named by the manifest but missing");
                }
            }
            check_levels(state, &mut report);
        }
        None => {
            for (_, number) in numbered.iter().filter(|(k, _)| *k == FileKind::Table) {
                let name = table_file_name(*number);
                check_table(&tables, dir, &name, None, &mut report, &mut blobs);
            }
        }
    }

    let mut logs: Vec<u64> = numbered
        .iter()
        .filter(|(kind, number)| {
            *kind == FileKind::Wal && state.as_ref().is_none_or(|s| *number >= s.log_number)
        })
        .map(|(_, number)| *number)
        .collect();
    logs.sort_unstable();
    if let Some(state) = &state {
        if logs.first() != Some(&state.log_number) {
            report.problem(
                &wal_file_name(state.log_number),
                Severity::Warning,
                None,
                "the manifest's log is not in the directory: writes not yet in tables \
                 would be lost (expected only when creating the database was interrupted)",
            );
        }
    }
    let closed = state.as_ref().and_then(|s| s.closed_log);
    if let Some(closed) = closed.filter(|c| !logs.contains(&c.number)) {
        let (name, _, what) = closed_log_missing(closed);
        report.error(&name, what);
    }
    for (i, &number) in logs.iter().enumerate() {
        let closed = closed.filter(|c| c.number == number);
        check_log(fs, dir, number, i + 1 == logs.len(), closed, &mut report);
    }

    if let Some(state) = &state {
        for name in &names {
            if let Some(number) = parse_blob_file_name(name) {
                if !blobs.sound.contains_key(&number) {
                    report.notes.push(format!(
                        "{name}: a blob file no live table points into (open removes it)"
                    ));
                }
                continue;
            }
            let note = match role_of(name, &state.tables, state.log_number) {
                FileRole::UnlistedTable => "a table the manifest does not name (left by a crash or a flush in progress; open removes it)",
                FileRole::ObsoleteLog => "a log already in tables (open removes it)",
                FileRole::ManifestTemp => "a manifest a crash left half written (ignored)",
                FileRole::Other => "not a database file (ignored)",
                _ => continue,
            };
            report.notes.push(format!("{name}: {note}"));
        }
    }
    Ok(report)
}

fn read_state(fs: &dyn FileSystem, dir: &Path, report: &mut VerifyReport) -> Option<ManifestState> {
    let decoded = fs
        .read_all(&dir.join(MANIFEST_FILE))
        .and_then(|bytes| manifest::decode(&bytes, MANIFEST_FILE));
    match decoded {
        Ok(state) => Some(state),
        Err(e) => {
            report.error(
                MANIFEST_FILE,
                format!("{e}; checking every table and log in the directory instead"),
            );
            None
        }
    }
}

fn check_table(
    tables: &Arc<ReadContext>,
    dir: &Path,
    name: &str,
    record: Option<&TableRecord>,
    report: &mut VerifyReport,
    blobs: &mut BlobChecks,
) {
    let table = match Table::open(tables, &dir.join(name)) {
        Ok(table) => table,
        Err(e) => return report.error(name, e),
    };
    report.tables_checked += 1;
    report.data_blocks_checked += table.data_block_handles().len() as u64;
    if let Some(record) = record {
        if table.file_size() != record.file_size {
            report.error(
                name,
                format!(
                    "{} bytes, the manifest records {}",
                    table.file_size(),
                    record.file_size
                ),
            );
        }
        let p = table.properties();
        let agrees = match table.range_tombstones() {
            None => {
                p.entries == record.entries
                    && p.min_seq == record.min_seq
                    && p.max_seq == record.max_seq
                    && p.smallest.as_ref() == record.smallest.as_slice()
                    && p.largest.as_ref() == record.largest.as_slice()
            }
            // The record's bounds and sequence range also cover the range
            // tombstones (the largest key may stop at the last point key
            // where a compaction cut the tombstones there).
            Some(tombstones) => {
                let (low, high) = tombstones.seq_range().unwrap_or((p.min_seq, p.max_seq));
                let first = tombstones
                    .smallest_key()
                    .unwrap_or_default()
                    .min(user_key_of(&p.smallest));
                p.entries == record.entries
                    && p.min_seq.min(low) == record.min_seq
                    && p.max_seq.max(high) == record.max_seq
                    && user_key_of(&record.smallest) == first
                    && user_key_of(&record.largest) >= user_key_of(&p.largest)
            }
        };
        if !agrees {
            report.problem(
                name,
                Severity::Error,
                Some((
                    Some(BlockKind::Properties),
                    table.footer().properties.offset,
                )),
                format!(
                    "the table holds {} entries, sequences {}..={}, and other key bounds than \
                     the manifest records ({} entries, sequences {}..={})",
                    p.entries,
                    p.min_seq.0,
                    p.max_seq.0,
                    record.entries,
                    record.min_seq.0,
                    record.max_seq.0
                ),
            );
        }
    }
    for problem in table.verify() {
        report.problem(
            name,
            problem.severity,
            Some((Some(problem.block), problem.offset)),
            problem.detail,
        );
    }
    check_blob_pointers(tables, dir, &table, name, report, blobs);
}

/// The blob files checked so far: whether each is sound.
#[derive(Default)]
struct BlobChecks {
    sound: BTreeMap<u64, bool>,
}

/// Checks the blob files `table` points into (each once per run), then,
/// when they are all sound, resolves every blob pointer of the table.
fn check_blob_pointers(
    tables: &Arc<ReadContext>,
    dir: &Path,
    table: &Table,
    name: &str,
    report: &mut VerifyReport,
    blobs: &mut BlobChecks,
) {
    let numbers = &table.properties().blob_files;
    let table_number = parse_file_name(name).map_or(0, |(_, number)| number);
    let mut all_sound = true;
    for &number in numbers {
        let sound = match blobs.sound.get(&number) {
            Some(&sound) => sound,
            None => {
                let sound = check_blob_file(tables, dir, number, table_number, report);
                blobs.sound.insert(number, sound);
                sound
            }
        };
        all_sound &= sound;
    }
    if numbers.is_empty() || !all_sound {
        return;
    }
    let mut it = table.iter_with(ScanMode::Sequential);
    let mut step = it.seek_to_first();
    while step.is_ok() && it.valid() {
        step = it.next();
    }
    if let Err(e) = step {
        report.found(
            name,
            Finding::BadBlobPointer {
                table: table_number,
            },
            None,
            e,
        );
    }
}

/// Checks blob file `number`, which table `table` points into; true when
/// it is there and sound.
fn check_blob_file(
    tables: &Arc<ReadContext>,
    dir: &Path,
    number: u64,
    table: u64,
    report: &mut VerifyReport,
) -> bool {
    let name = blob_file_name(number);
    let path = dir.join(&name);
    if !tables.fs.exists(&path) {
        report.found(
            &name,
            Finding::MissingBlobFile {
                blob_file: number,
                table,
            },
            None,
            format!(
                "{} points into it, but it is not in the directory: the values it held are lost",
                table_file_name(table)
            ),
        );
        return false;
    }
    match inspect_blob_file_with(&tables.fs, &path) {
        Ok(summary) if summary.is_sound() => true,
        Ok(summary) => {
            for damage in summary.damage {
                let offset = match damage.place {
                    BlobPlace::Record { offset, .. } => Some(offset),
                    BlobPlace::Header => Some(0),
                    BlobPlace::Footer => None,
                };
                report.found(
                    &name,
                    Finding::DamagedBlobFile {
                        blob_file: number,
                        place: Some(damage.place),
                    },
                    offset,
                    damage,
                );
            }
            false
        }
        Err(e) => {
            report.found(
                &name,
                Finding::DamagedBlobFile {
                    blob_file: number,
                    place: None,
                },
                None,
                e,
            );
            false
        }
    }
}

/// Below level 0 a lookup asks one table per level of its keyspace: their
/// key ranges must not meet.
fn check_levels(state: &ManifestState, report: &mut VerifyReport) {
    let deepest = state.tables.iter().map(|t| t.level).max().unwrap_or(0);
    for (keyspace, level) in state
        .keyspaces
        .iter()
        .flat_map(|k| (1..=deepest).map(move |level| (k.id, level)))
    {
        let mut tables: Vec<&TableRecord> = state
            .tables
            .iter()
            .filter(|t| t.level == level && t.keyspace == keyspace)
            .collect();
        tables.sort_by(|a, b| user_key_of(&a.smallest).cmp(user_key_of(&b.smallest)));
        for pair in tables.windows(2) {
            if let [a, b] = pair {
                if user_key_of(&a.largest) >= user_key_of(&b.smallest) {
                    report.error(
                        MANIFEST_FILE,
                        format!(
                            "level {level}: the key ranges of {} and {} overlap",
                            table_file_name(a.file_number),
                            table_file_name(b.file_number)
                        ),
                    );
                }
            }
        }
    }
}

fn check_log(
    fs: &dyn FileSystem,
    dir: &Path,
    number: u64,
    newest: bool,
    closed: Option<ClosedLog>,
    report: &mut VerifyReport,
) {
    let name = wal_file_name(number);
    let bytes = match fs.read_all(&dir.join(&name)) {
        Ok(bytes) => bytes,
        Err(e) => return report.error(&name, e),
    };
    let log = match replay(&bytes, &name) {
        Ok(log) => log,
        Err(e) => return report.error(&name, e),
    };
    // The manifest recorded the clean close of this log: a missing tail
    // (its close record gone with it) is a loss, not a crash's torn tail.
    if let Some((offset, what)) = closed.and_then(|c| cut_short(c, &bytes, &log)) {
        report.problem(&name, Severity::Error, Some((None, offset)), what);
    }
    let cut = closed.is_some_and(|c| cut_short(c, &bytes, &log).is_some());
    let log = match replay_batches(&bytes, &name) {
        Ok(log) => log,
        Err(e) => return report.error(&name, e.at_path(&dir.join(&name))),
    };
    report.logs_checked += 1;
    report.log_records_checked += log.batches.len() as u64;
    if let Some(in_header) = log.log_number.filter(|&n| n != number) {
        report.error(
            &name,
            format!("the header says log {in_header}, the file name says {number}"),
        );
    }
    if let Some(torn) = log.torn_tail.as_ref().filter(|_| !cut) {
        if newest {
            report.problem(
                &name,
                Severity::Warning,
                Some((None, torn.offset)),
                format!(
                    "torn tail ({}): a crash or an append in progress; open drops it",
                    torn.reason
                ),
            );
        } else {
            report.problem(
                &name,
                Severity::Error,
                Some((None, torn.offset)),
                format!(
                    "torn record ({}) in a log that is not the newest: open refuses it",
                    torn.reason
                ),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn problems_read_as_one_line() {
        let p = Problem {
            finding: Finding::General,
            file: "000012.sst".into(),
            block: Some(BlockKind::Data),
            offset: Some(4096),
            severity: Severity::Error,
            detail: "checksum mismatch".into(),
        };
        assert_eq!(
            p.to_string(),
            "error: 000012.sst: data block at offset 4096: checksum mismatch"
        );
        let p = Problem {
            finding: Finding::General,
            file: "000013.wal".into(),
            block: None,
            offset: Some(20),
            severity: Severity::Warning,
            detail: "torn".into(),
        };
        assert_eq!(p.to_string(), "warning: 000013.wal: offset 20: torn");
    }

    #[test]
    fn an_empty_or_foreign_directory_is_not_a_database() {
        let dir = tempfile::tempdir().unwrap();
        assert!(verify_dir(dir.path()).is_err());
        std::fs::write(dir.path().join("notes.txt"), b"x").unwrap();
        let err = verify_dir(dir.path()).unwrap_err().to_string();
        assert!(err.contains("not a siftdb database"), "{err}");
        assert!(verify_dir(&dir.path().join("notes.txt")).is_err());
    }
}
