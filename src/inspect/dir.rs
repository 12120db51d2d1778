//! [`DirSummary`]: a database directory as its manifest sees it — the
//! counters, the levels, every live table — beside what the directory holds.
//!
//! Owns: classifying the files of a directory against the manifest.
//! Must never: decide anything from a file name it did not parse with
//! [`parse_file_name`] (a stray `1.sst` is "other", not a table).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::blob::{blob_file_name, parse_blob_file_name};
use crate::error::{Error, Result};
use crate::filename::{parse_file_name, table_file_name, FileKind, MANIFEST_FILE};
use crate::filename::{MANIFEST_COPY_FILE, MANIFEST_TEMP_FILE};
use crate::fs::{FileSystem, OsFileSystem, SharedFs};
use crate::inspect::blob::blob_header_and_counts;
use crate::inspect::table::TableSummary;
use crate::inspect::versions::{log_version, manifest_version, table_version};
use crate::key::SeqNo;
use crate::manifest::{read_manifest, KeyspaceSettings, ManifestState, TableRecord};
use crate::table::{LevelFilterStats, ReadContext, ReadCounters, ReadSettings, Table};

/// The name of the lock file a running database holds.
const LOCK_FILE: &str = "LOCK";

/// The manifest's counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ManifestSummary {
    /// The next unused file number.
    pub next_file_number: u64,
    /// The largest sequence number any table may hold.
    pub last_sequence: SeqNo,
    /// The oldest log whose records may not all be in tables.
    pub log_number: u64,
}

/// Totals of one level, from the manifest's records (and, for the filter,
/// from the tables that opened).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct LevelSummary {
    /// The level.
    pub level: u32,
    /// Live tables.
    pub tables: usize,
    /// Bytes of their files.
    pub file_bytes: u64,
    /// Their entries (versions, tombstones included).
    pub entries: u64,
    /// Bytes of their filter blocks.
    pub filter_bytes: u64,
    /// Bytes of memory their filters take in an open database.
    pub filter_memory: u64,
    /// Bytes of memory their decoded indexes take in an open database.
    pub index_memory: u64,
    /// Their filters: kinds, bits per key, expected rate, and the rate
    /// measured by asking each filter `FP_PROBES` (20,000) random
    /// absent keys.
    pub filters: LevelFilterStats,
}

/// One keyspace and the totals of its tables.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct KeyspaceSummary {
    /// Its id.
    pub id: u32,
    /// Its name.
    pub name: String,
    /// The oldest log that may hold records of it not in its tables.
    pub log_number: u64,
    /// Its stored settings (`Db::keyspace_with`).
    pub settings: KeyspaceSettings,
    /// Its live tables.
    pub tables: usize,
    /// Bytes of their files.
    pub file_bytes: u64,
    /// Their entries.
    pub entries: u64,
}

/// One table the manifest names.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveTableSummary {
    /// What the manifest records.
    pub record: TableRecord,
    /// What the file holds, or why it could not be opened (missing, damaged).
    pub table: std::result::Result<TableSummary, String>,
}

/// What a file in the directory is to the database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileRole {
    /// The manifest.
    Manifest,
    /// A manifest a crash left half written; ignored, overwritten next time.
    ManifestTemp,
    /// The manifest's second copy, read by open only when the manifest is
    /// damaged or missing.
    ManifestCopy,
    /// The lock file.
    Lock,
    /// A table the manifest names, at this level.
    LiveTable {
        /// Its level.
        level: u32,
    },
    /// A table the manifest names at this level that is not in the directory.
    MissingTable {
        /// Its level.
        level: u32,
    },
    /// A table the manifest does not name: left by a crash or an unfinished
    /// flush or compaction (open removes it).
    UnlistedTable,
    /// A log at or after the manifest's log number: replayed by open.
    LiveLog,
    /// A log before the manifest's log number: fully in tables (open removes it).
    ObsoleteLog,
    /// A blob file a live table points into (its properties list it).
    LiveBlob,
    /// A blob file no live table points into: left by a crash, or one
    /// whose values all moved on (open removes it).
    UnreferencedBlob,
    /// A blob file a live table points into that is not in the directory:
    /// the values it held are lost.
    MissingBlob,
    /// Anything else.
    Other,
}

/// One file, with its role and size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirFile {
    /// The file name.
    pub name: String,
    /// What it is to the database.
    pub role: FileRole,
    /// Its size in bytes; `None` when missing or unreadable.
    pub size: Option<u64>,
    /// The format version it carries (manifests, tables, logs), this
    /// build's or another; `None` for other files and damaged ones.
    pub format_version: Option<u64>,
    /// A blob file's footer counts: its values and their bytes; `None` for
    /// other files and when its header or footer is damaged.
    pub blob_values: Option<(u64, u64)>,
}

/// A database directory as its manifest sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct DirSummary {
    /// The directory.
    pub dir: PathBuf,
    /// The manifest's counters.
    pub manifest: ManifestSummary,
    /// Every keyspace, with the totals of its tables.
    pub keyspaces: Vec<KeyspaceSummary>,
    /// Totals per level (every keyspace), from level 0 to the deepest
    /// level in use.
    pub levels: Vec<LevelSummary>,
    /// Every table the manifest names: by level, level 0 newest first,
    /// deeper levels in key order.
    pub tables: Vec<LiveTableSummary>,
    /// Every file in the directory, and every table the manifest names but
    /// the directory lacks, by name.
    pub files: Vec<DirFile>,
}

/// Summarises the database in `dir` on the real file system.
pub fn inspect_dir(dir: &Path) -> Result<DirSummary> {
    inspect_dir_with(&OsFileSystem::shared(), dir)
}

/// Attempts started over because a writer moved the manifest meanwhile,
/// before [`inspect_dir_with`] gives up.
const MAX_ATTEMPTS: u32 = 50;

/// Summarises the database in `dir` through `fs`.
///
/// `InvalidArgument` when `dir` is not a directory or has no manifest;
/// `Corruption` when the manifest does not decode (`siftdb verify` says
/// more). A table that does not open is reported in its
/// `LiveTableSummary`, not as an error.
///
/// Beside a live writer the summary is of one manifest: it is read again
/// after the tables were opened and the directory listed, and the whole
/// summary started over when it moved meanwhile (a compaction that removed
/// a table between the two would otherwise show it as missing). It gives
/// up, with `Io`, when the manifest moved during each of 50 attempts.
pub fn inspect_dir_with(shared_fs: &SharedFs, dir: &Path) -> Result<DirSummary> {
    let fs = shared_fs.as_ref();
    if !fs.is_dir(dir) {
        return Err(Error::invalid(format!(
            "{} is not a directory",
            dir.display()
        )));
    }
    for _ in 0..MAX_ATTEMPTS {
        let state = read_state(shared_fs, dir)?;
        let summary = summarise(shared_fs, dir, &state)?;
        if read_state(shared_fs, dir)? == state {
            return Ok(summary);
        }
    }
    Err(Error::io(
        dir,
        std::io::Error::other(format!(
            "the manifest changed during each of {MAX_ATTEMPTS} attempts to inspect the database"
        )),
    ))
}

fn read_state(shared_fs: &SharedFs, dir: &Path) -> Result<ManifestState> {
    read_manifest(shared_fs.as_ref(), dir)?.ok_or_else(|| {
        Error::invalid(format!(
            "{} has no {MANIFEST_FILE}: not a siftdb database (or its manifest is lost)",
            dir.display()
        ))
    })
}

/// The summary of `dir` as the manifest `state` describes it.
fn summarise(shared_fs: &SharedFs, dir: &Path, state: &ManifestState) -> Result<DirSummary> {
    let fs = shared_fs.as_ref();
    let mut records = state.tables.clone();
    records.sort_by(|a, b| {
        a.level.cmp(&b.level).then_with(|| {
            if a.level == 0 {
                (b.max_seq, b.file_number).cmp(&(a.max_seq, a.file_number))
            } else {
                a.smallest.cmp(&b.smallest)
            }
        })
    });
    let deepest = records.iter().map(|r| r.level).max().unwrap_or(0);
    let mut levels: Vec<LevelSummary> = (0..=deepest)
        .map(|level| LevelSummary {
            level,
            ..LevelSummary::default()
        })
        .collect();

    let names = fs.list(dir)?;
    // Read-only, no lock, no block cache: what the tables' metadata would
    // take in memory, from the files as they are.
    let tables = ReadContext::new(
        Arc::clone(shared_fs),
        ReadSettings::tool(),
        ReadCounters::new(),
    );
    let mut summaries = Vec::with_capacity(records.len());
    let mut live_blobs = std::collections::BTreeSet::new();
    for record in records {
        let name = table_file_name(record.file_number);
        let path = dir.join(&name);
        let opened = if names.contains(&name) {
            Table::open(&tables, &path).map_err(|e| e.to_string())
        } else {
            Err(format!("{name} is named by the manifest but missing"))
        };
        let table = opened.as_ref().map(TableSummary::of).map_err(Clone::clone);
        if let Ok(opened) = &opened {
            live_blobs.extend(opened.properties().blob_files.iter().copied());
        }
        if let Some(level) = levels.get_mut(record.level as usize) {
            if let (Ok(opened), Ok(summary)) = (&opened, &table) {
                let (probed, positives) = summary
                    .filter_figures()
                    .map_or((0, 0), |f| (f.probed, f.probe_positives));
                level
                    .filters
                    .add_table(opened, probed.saturating_sub(positives), positives);
            }
            level.tables += 1;
            level.file_bytes += record.file_size;
            level.entries += record.entries;
            level.filter_bytes += table.as_ref().map_or(0, |t| t.filter_bytes);
            level.filter_memory += table.as_ref().map_or(0, |t| t.filter_memory);
            level.index_memory += table.as_ref().map_or(0, |t| t.index_memory);
        }
        summaries.push(LiveTableSummary { record, table });
    }

    let mut files: Vec<DirFile> = names
        .iter()
        .map(|name| {
            let role = match parse_blob_file_name(name) {
                Some(number) if live_blobs.contains(&number) => FileRole::LiveBlob,
                Some(_) => FileRole::UnreferencedBlob,
                None => role_of(name, &state.tables, state.log_number),
            };
            let blob = matches!(role, FileRole::LiveBlob | FileRole::UnreferencedBlob)
                .then(|| blob_header_and_counts(fs, &dir.join(name)))
                .flatten();
            DirFile {
                name: name.clone(),
                role,
                size: fs.open_read(&dir.join(name)).ok().map(|f| f.len()),
                format_version: match blob {
                    Some((version, _, _)) => Some(version),
                    None => format_version_of(fs, &dir.join(name), role),
                },
                blob_values: blob.map(|(_, values, bytes)| (values, bytes)),
            }
        })
        .collect();
    for number in &live_blobs {
        let name = blob_file_name(*number);
        if !names.contains(&name) {
            files.push(DirFile {
                name,
                role: FileRole::MissingBlob,
                size: None,
                format_version: None,
                blob_values: None,
            });
        }
    }
    for record in &state.tables {
        let name = table_file_name(record.file_number);
        if !names.contains(&name) {
            files.push(DirFile {
                name,
                role: FileRole::MissingTable {
                    level: record.level,
                },
                size: None,
                format_version: None,
                blob_values: None,
            });
        }
    }
    files.sort_by(|a, b| a.name.cmp(&b.name));

    let keyspaces = state
        .keyspaces
        .iter()
        .map(|k| {
            let own = state.tables.iter().filter(|t| t.keyspace == k.id);
            KeyspaceSummary {
                id: k.id,
                name: k.name.clone(),
                log_number: k.log_number,
                settings: k.settings.clone(),
                tables: own.clone().count(),
                file_bytes: own.clone().map(|t| t.file_size).sum(),
                entries: own.map(|t| t.entries).sum(),
            }
        })
        .collect();
    Ok(DirSummary {
        dir: dir.to_path_buf(),
        keyspaces,
        manifest: ManifestSummary {
            next_file_number: state.next_file_number,
            last_sequence: state.last_sequence,
            log_number: state.log_number,
        },
        levels,
        tables: summaries,
        files,
    })
}

/// The format version the file at `path` of role `role` carries; `None`
/// for a file of no versioned kind, or a missing or damaged one.
fn format_version_of(fs: &dyn FileSystem, path: &Path, role: FileRole) -> Option<u64> {
    match role {
        FileRole::Manifest | FileRole::ManifestCopy | FileRole::ManifestTemp => {
            manifest_version(fs, path)
        }
        FileRole::LiveTable { .. } | FileRole::UnlistedTable => table_version(fs, path),
        FileRole::LiveLog | FileRole::ObsoleteLog => log_version(fs, path),
        FileRole::Lock
        | FileRole::MissingTable { .. }
        | FileRole::LiveBlob
        | FileRole::UnreferencedBlob
        | FileRole::MissingBlob
        | FileRole::Other => None,
    }
}

/// What `name` is, given the manifest's tables and log number.
pub(crate) fn role_of(name: &str, tables: &[TableRecord], log_number: u64) -> FileRole {
    match name {
        MANIFEST_FILE => return FileRole::Manifest,
        MANIFEST_TEMP_FILE => return FileRole::ManifestTemp,
        MANIFEST_COPY_FILE => return FileRole::ManifestCopy,
        LOCK_FILE => return FileRole::Lock,
        _ => {}
    }
    match parse_file_name(name) {
        Some((FileKind::Table, number)) => tables
            .iter()
            .find(|t| t.file_number == number)
            .map_or(FileRole::UnlistedTable, |t| FileRole::LiveTable {
                level: t.level,
            }),
        Some((FileKind::Wal, number)) if number >= log_number => FileRole::LiveLog,
        Some((FileKind::Wal, _)) => FileRole::ObsoleteLog,
        None => FileRole::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::Db;
    use crate::options::Options;

    fn small_db(dir: &Path) {
        let db = Db::open_with(
            dir,
            Options::default()
                .memtable_bytes(16 << 10)
                .level0_compaction_trigger(100)
                .level0_quiet_trigger(100)
                .level0_stop_writes(200),
        )
        .unwrap();
        for i in 0..3000u32 {
            db.put(format!("key{i:06}"), format!("value{i}")).unwrap();
        }
        db.flush().unwrap();
        db.wait_for_background().unwrap();
    }

    #[test]
    fn the_manifest_view_matches_the_directory() {
        let dir = tempfile::tempdir().unwrap();
        small_db(dir.path());
        let s = inspect_dir(dir.path()).unwrap();
        assert!(s.tables.len() > 1, "{}", s.tables.len());
        assert_eq!(s.levels[0].tables, s.tables.len());
        assert_eq!(s.manifest.last_sequence, SeqNo(3000));
        assert!(s.manifest.next_file_number > s.manifest.log_number);
        let entries: u64 = s.levels.iter().map(|l| l.entries).sum();
        assert_eq!(entries, 3000);
        for t in &s.tables {
            let summary = t.table.as_ref().unwrap();
            assert_eq!(summary.file_size, t.record.file_size);
            assert!(summary.filter_figures().is_some());
        }
        let roles: Vec<FileRole> = s.files.iter().map(|f| f.role).collect();
        assert!(roles.contains(&FileRole::Manifest));
        assert!(roles.contains(&FileRole::LiveLog));
        assert_eq!(
            roles
                .iter()
                .filter(|r| matches!(r, FileRole::LiveTable { level: 0 }))
                .count(),
            s.tables.len()
        );
        let manifest = s.files.iter().find(|f| f.name == "MANIFEST").unwrap();
        assert!(manifest.size.unwrap() > 36);

        // A missing table shows up in both views; a stray file is "other".
        let gone = table_file_name(s.tables[0].record.file_number);
        std::fs::remove_file(dir.path().join(&gone)).unwrap();
        std::fs::write(dir.path().join("notes.txt"), b"hi").unwrap();
        let s = inspect_dir(dir.path()).unwrap();
        assert!(s.tables[0].table.as_ref().unwrap_err().contains("missing"));
        let missing = s.files.iter().find(|f| f.name == gone).unwrap();
        assert_eq!(
            (missing.role, missing.size),
            (FileRole::MissingTable { level: 0 }, None)
        );
        let other = s.files.iter().find(|f| f.name == "notes.txt").unwrap();
        assert_eq!((other.role, other.size), (FileRole::Other, Some(2)));
    }

    #[test]
    fn roles_follow_the_manifest() {
        let record = TableRecord {
            keyspace: 0,
            level: 2,
            file_number: 7,
            file_size: 1,
            entries: 1,
            smallest: Vec::new(),
            largest: Vec::new(),
            min_seq: SeqNo(0),
            max_seq: SeqNo(0),
        };
        let tables = [record];
        let role = |name| role_of(name, &tables, 10);
        assert_eq!(role("000007.sst"), FileRole::LiveTable { level: 2 });
        assert_eq!(role("000008.sst"), FileRole::UnlistedTable);
        assert_eq!(role("000010.wal"), FileRole::LiveLog);
        assert_eq!(role("000009.wal"), FileRole::ObsoleteLog);
        assert_eq!(role("MANIFEST"), FileRole::Manifest);
        assert_eq!(role("MANIFEST.tmp"), FileRole::ManifestTemp);
        assert_eq!(role("MANIFEST.copy"), FileRole::ManifestCopy);
        assert_eq!(role("LOCK"), FileRole::Lock);
        assert_eq!(role("7.sst"), FileRole::Other);
    }

    #[test]
    fn not_a_database() {
        let dir = tempfile::tempdir().unwrap();
        let err = inspect_dir(dir.path()).unwrap_err().to_string();
        assert!(err.contains("no MANIFEST"), "{err}");
        let file = dir.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        assert!(inspect_dir(&file).is_err());
    }
}
