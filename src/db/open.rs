//! Creating and recovering a database directory.
//!
//! Owns: the directory lock, the first manifest, opening every live table,
//! replaying the logs the manifest does not cover, and the first
//! [`VersionSet`] (the manifest's counters, in `version_set.rs`).
//! Must never: open a database with data silently missing — a missing table,
//! a corrupt manifest or a corrupt log record before the tail is an error
//! that names the file.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;

use arc_swap::ArcSwap;
use bytes::Bytes;
use parking_lot::{Condvar, Mutex};

use crate::batch::decode_record;
use crate::blob::parse_blob_file_name;
use crate::db::background_state::BgState;
use crate::db::blob_garbage::{with_edit, BlobEdit};
use crate::db::compaction_blobs::live_blob_files;
use crate::db::counters::DbCounters;
use crate::db::flush;
use crate::db::inner::DbInner;
use crate::db::keyspace_options::KeyspaceOptions;
use crate::db::pacing::Pacer;
use crate::db::recovery_report::RecoveryReport;
use crate::db::tree::Tree;
use crate::db::version::LEVELS;
use crate::db::version::{LiveTable, Version};
use crate::db::version_set::{TreeState, VersionSet};
use crate::db::write_queue::{WriteQueue, WriterState};
use crate::error::{Error, Result};
use crate::filename::{
    parse_file_name, table_file_name, wal_file_name, FileKind, MANIFEST_TEMP_FILE,
};
use crate::fs::{DirLock, FileSystem, SharedFs};
use crate::identify::check_is_database;
use crate::key::SeqNo;
use crate::manifest::{
    read_manifest, read_manifest_copy, write_manifest, ClosedLog, KeyspaceRecord, KeyspaceSettings,
    ManifestState, TableRecord, DEFAULT_KEYSPACE_ID, DEFAULT_KEYSPACE_NAME,
};
use crate::memtable::Memtable;
use crate::options::Options;
use crate::table::{ReadContext, ReadCounters, Severity, Table};
use crate::wal::{closed_log_missing, cut_short, mend, replay, WalWriter};

mod manifest_recovery;
pub(crate) use manifest_recovery::{check_recovered, manifest_exists, read_state};

/// Name of the lock file.
pub(crate) const LOCK_FILE: &str = "LOCK";

fn check_directory(fs: &dyn FileSystem, dir: &Path) -> Result<()> {
    if fs.exists(dir) && !fs.is_dir(dir) {
        return Err(Error::invalid(format!(
            "{} exists and is not a directory",
            dir.display()
        )));
    }
    fs.create_dir_all(dir)
}

/// A directory without a manifest must hold nothing but what a creation
/// interrupted before its first manifest leaves behind. One holding a
/// siftdb table or log has lost its manifest (`Corruption`: repair
/// rebuilds it); any other is not a database (`NotADatabase`).
fn check_fresh(fs: &SharedFs, dir: &Path) -> Result<()> {
    let mut names = fs.list(dir)?;
    names.retain(|name| name != LOCK_FILE && name != MANIFEST_TEMP_FILE);
    if names.is_empty() {
        return Ok(());
    }
    check_is_database(fs, dir, &names)?;
    Err(repair_hint(
        Error::corruption(
            format!("database {}", dir.display()),
            "it holds siftdb tables or logs but MANIFEST is missing",
        ),
        dir,
    ))
}

/// The open of a directory holding no database, with
/// `Options::create_if_missing` off.
fn not_created(dir: &Path) -> Error {
    Error::NotADatabase {
        path: dir.to_path_buf(),
        reason: "it has no MANIFEST, and Options::create_if_missing is off".into(),
    }
}

/// A damaged manifest or log refuses the open; the message says what can
/// salvage the rest.
pub(crate) fn repair_hint(error: Error, dir: &Path) -> Error {
    match error {
        Error::Corruption { what, detail } => Error::Corruption {
            what,
            detail: format!(
                "{detail}; `siftdb repair {}` salvages what is readable",
                dir.display()
            ),
        },
        other => other,
    }
}

/// After a failed open: removes the recovered tables the manifest on disk
/// does not name (one whose rename took effect though a later sync failed
/// names them), and the new log.
fn remove_unnamed(fs: &dyn FileSystem, dir: &Path, tables: &[u64], log: Option<&Path>) {
    if !tables.is_empty() {
        // The copy is written first: it may name them when `MANIFEST` does not.
        let states: Vec<ManifestState> = [read_manifest(fs, dir), read_manifest_copy(fs, dir)]
            .into_iter()
            .filter_map(|read| read.ok().flatten())
            .collect();
        if !states.is_empty() {
            for &number in tables {
                if !states
                    .iter()
                    .any(|s| s.tables.iter().any(|t| t.file_number == number))
                {
                    let _ = fs.remove(&dir.join(table_file_name(number)));
                }
            }
        }
    }
    if let Some(log) = log.filter(|log| fs.exists(log)) {
        let _ = fs.remove(log);
    }
}

/// Opens every table the manifest names, through `open_table` (the file
/// cache's [`Table::open`], or one that holds each file open). A table that
/// cannot be opened for corruption (a damaged footer, index or properties
/// block; a missing or resized file) joins the version as damaged and is
/// reported, unless `Options::paranoid_checks` — which also verifies every
/// block of every table and refuses the open at the first damaged one.
pub(crate) fn open_tables(
    tables: &Arc<ReadContext>,
    dir: &Path,
    opts: &Options,
    records: &[&TableRecord],
    report: &mut RecoveryReport,
    open_table: fn(&Arc<ReadContext>, &Path) -> Result<Table>,
) -> Result<Version> {
    let mut live = Vec::with_capacity(records.len());
    for &record in records {
        let name = table_file_name(record.file_number);
        match flush::open_live_table_with(tables, dir, record.clone(), open_table) {
            Ok(table) => {
                if opts.paranoid_checks {
                    check_whole_table(&table, &name).map_err(|e| repair_hint(e, dir))?;
                }
                live.push(table);
            }
            Err(e) if e.is_corruption() && !opts.paranoid_checks => {
                report.damaged_tables.push((name, e.to_string()));
                live.push(Arc::new(LiveTable::damaged(record.clone(), &e)));
            }
            Err(e) => return Err(repair_hint(e, dir)),
        }
    }
    Ok(Version::with_levels(LEVELS).apply(&[], live))
}

/// `Options::paranoid_checks`: every block of the table read and checked
/// (`Table::verify`); the first error-severity problem is `Corruption`.
fn check_whole_table(live: &LiveTable, name: &str) -> Result<()> {
    let table = live.readable()?;
    match table
        .verify()
        .into_iter()
        .find(|p| p.severity == Severity::Error)
    {
        Some(problem) => Err(Error::corruption(
            format!("table {name}"),
            format!(
                "{} block at offset {}: {} (paranoid checks)",
                problem.block, problem.offset, problem.detail
            ),
        )),
        None => Ok(()),
    }
}

/// The logs among `names` numbered `log_number` or above (the ones a
/// manifest with that log number does not cover), oldest first.
pub(crate) fn logs_from(names: &[String], log_number: u64) -> Vec<u64> {
    let mut logs: Vec<u64> = names
        .iter()
        .filter_map(|n| parse_file_name(n))
        .filter(|(kind, number)| *kind == FileKind::Wal && *number >= log_number)
        .map(|(_, number)| number)
        .collect();
    logs.sort_unstable();
    logs
}

/// Replays `logs` (see [`logs_from`]), their bytes from `read`, into the
/// memtables `route` gives for (keyspace id, log number) — `None` skips the
/// operation: its keyspace was dropped, or its tables already hold that
/// log's records; returns the last sequence number seen (at least
/// `last_sequence`). A damaged record (anywhere but a crash's torn tail of
/// the newest log) is `Corruption` naming the log and `siftdb repair`; a
/// log damaged only in one byte of its header or close record is mended
/// (`wal::mend`) and reported (`logs_mended`). The
/// log the manifest records as closed cleanly (`closed`) must be as the
/// close left it: if not, the loss is reported (`log_cut_short`; see
/// [`refuse_cut_short`]).
pub(crate) fn replay_logs<'a>(
    dir: &Path,
    logs: &[u64],
    read: impl Fn(u64) -> Result<Bytes>,
    last_sequence: SeqNo,
    closed: Option<ClosedLog>,
    route: &dyn Fn(u32, u64) -> Option<&'a Memtable>,
    report: &mut RecoveryReport,
) -> Result<SeqNo> {
    if let Some(closed) = closed.filter(|c| !logs.contains(&c.number)) {
        report.log_cut_short = Some(closed_log_missing(closed));
    }
    let mut last_seq = last_sequence;
    for (i, &number) in logs.iter().enumerate() {
        let name = wal_file_name(number);
        let bytes = read(number)?;
        let mended;
        let log = match replay(&bytes, &name) {
            Ok(log) => log,
            Err(e) => match e.is_corruption().then(|| mend(&bytes, number)).flatten() {
                // Only a header or close record was damaged: no write lost.
                Some((whole, what)) => {
                    report.logs_mended.push((name.clone(), what));
                    mended = whole;
                    replay(&mended, &name)
                        .map_err(|e| repair_hint(e.at_path(&dir.join(&name)), dir))?
                }
                None => return Err(repair_hint(e.at_path(&dir.join(&name)), dir)),
            },
        };
        if let Some(closed) = closed.filter(|c| c.number == number) {
            if let Some((offset, what)) = cut_short(closed, &bytes, &log) {
                report.log_cut_short = Some((name.clone(), offset, what));
            }
        }
        if log.log_number.is_some_and(|n| n != number) {
            return Err(repair_hint(
                Error::corruption(
                    format!("log {name}"),
                    format!("header names log {:?}", log.log_number),
                ),
                dir,
            ));
        }
        if let Some(torn) = &log.torn_tail {
            if i + 1 != logs.len() {
                return Err(repair_hint(
                    Error::corruption(
                        format!("log {name}"),
                        format!(
                            "torn record at offset {} in a log that is not the newest: {}",
                            torn.offset, torn.reason
                        ),
                    ),
                    dir,
                ));
            }
            report.torn_tail = Some((name.clone(), torn.offset, torn.reason.clone()));
        }
        report.closed_cleanly = log.closed_cleanly;
        for record in &log.records {
            let batch = decode_record(record.payload).map_err(|e| match e {
                Error::Corruption { detail, .. } => {
                    repair_hint(Error::corruption(format!("log {name}"), detail), dir)
                }
                other => other,
            })?;
            let mut seq = batch.first_seq;
            for op in &batch.ops {
                // Sequence numbers never repeat in intact logs.
                if let Some(recovered) = route(op.keyspace, number) {
                    recovered
                        .apply(op, seq)
                        .map_err(|e| Error::corruption(format!("log {name}"), e.detail()))?;
                }
                last_seq = last_seq.max(seq);
                seq = seq.next();
            }
            report.records_replayed += 1;
        }
    }
    Ok(last_seq)
}

/// With `Options::paranoid_checks`, a log cut short after a clean close
/// (see [`RecoveryReport::log_cut_short`]) refuses the open as `Corruption`.
pub(crate) fn refuse_cut_short(opts: &Options, report: &RecoveryReport, dir: &Path) -> Result<()> {
    match &report.log_cut_short {
        Some((name, _, what)) if opts.paranoid_checks => Err(repair_hint(
            Error::corruption(format!("log {name}"), format!("{what} (paranoid checks)")),
            dir,
        )),
        _ => Ok(()),
    }
}

/// The keyspaces of `state`: every one it records, the default first (a
/// state without one — never written by this code — gets it).
pub(crate) fn keyspaces_of(state: &ManifestState) -> Vec<KeyspaceRecord> {
    let mut keyspaces = state.keyspaces.clone();
    keyspaces.sort_by_key(|k| k.id != DEFAULT_KEYSPACE_ID);
    if keyspaces
        .first()
        .is_none_or(|k| k.id != DEFAULT_KEYSPACE_ID)
    {
        keyspaces.insert(
            0,
            KeyspaceRecord {
                id: DEFAULT_KEYSPACE_ID,
                name: DEFAULT_KEYSPACE_NAME.to_string(),
                log_number: state.log_number,
                settings: KeyspaceSettings::default(),
            },
        );
    }
    keyspaces
}

/// The options a keyspace's tables are built with: `base` with its stored
/// settings applied, its tables recording the keyspace.
pub(crate) fn tree_options(base: &Options, record: &KeyspaceRecord) -> Options {
    Tree::own_options(record.id, &record.name, record.settings.apply_to(base))
}

/// One keyspace as an open recovers it.
pub(crate) struct RecoveredTree {
    pub record: KeyspaceRecord,
    pub version: Version,
    /// The records the logs hold for it that its tables do not.
    pub recovered: Memtable,
}

/// Opens the tables of every keyspace of `state` and replays the logs
/// among `names` into one memtable per keyspace; returns them with the
/// last sequence number seen.
#[expect(
    clippy::too_many_arguments,
    reason = "what both opens (read-write and read-only) pass differently"
)]
pub(crate) fn recover_trees(
    tables: &Arc<ReadContext>,
    dir: &Path,
    opts: &Options,
    state: &ManifestState,
    names: &[String],
    read: impl Fn(u64) -> Result<Bytes>,
    report: &mut RecoveryReport,
    open_table: fn(&Arc<ReadContext>, &Path) -> Result<Table>,
) -> Result<(Vec<RecoveredTree>, SeqNo)> {
    let mut trees = Vec::new();
    for record in keyspaces_of(state) {
        let records: Vec<&TableRecord> = state
            .tables
            .iter()
            .filter(|t| t.keyspace == record.id)
            .collect();
        let mut version = open_tables(tables, dir, opts, &records, report, open_table)?;
        version.blob_files = Arc::new(
            state
                .blob_files
                .iter()
                .filter(|b| b.keyspace == record.id)
                .map(|b| (b.file_number, *b))
                .collect(),
        );
        trees.push(RecoveredTree {
            record,
            version,
            recovered: Memtable::new(),
        });
    }
    let route = |keyspace: u32, log: u64| {
        trees
            .iter()
            .find(|t| t.record.id == keyspace)
            .filter(|t| log >= t.record.log_number)
            .map(|t| &t.recovered)
    };
    let last_seq = replay_logs(
        dir,
        &logs_from(names, state.log_number),
        read,
        state.last_sequence,
        state.closed_log,
        &route,
        report,
    )?;
    Ok((trees, last_seq))
}

pub(crate) fn open(dir: &Path, opts: Options) -> Result<DbInner> {
    opts.validate()?;
    let fs = Arc::clone(&opts.fs);
    if !opts.create_if_missing && !manifest_exists(fs.as_ref(), dir) {
        return Err(not_created(dir));
    }
    check_directory(fs.as_ref(), dir)?;
    // A directory that is not a database is refused before the lock file
    // is created in it (and checked again under the lock).
    if !manifest_exists(fs.as_ref(), dir) {
        check_fresh(&fs, dir)?;
    }
    let lock = fs.lock(&dir.join(LOCK_FILE))?;

    let (state, recovery) = match read_state(fs.as_ref(), dir)? {
        Some(_) if opts.error_if_exists => return Err(Error::AlreadyExists(dir.to_path_buf())),
        Some(read) => read,
        None if !opts.create_if_missing => return Err(not_created(dir)),
        None => {
            check_fresh(&fs, dir)?;
            let state = ManifestState {
                next_file_number: 2,
                last_sequence: SeqNo(0),
                log_number: 1,
                closed_log: None,
                next_keyspace_id: DEFAULT_KEYSPACE_ID + 1,
                keyspaces: vec![KeyspaceRecord {
                    id: DEFAULT_KEYSPACE_ID,
                    name: DEFAULT_KEYSPACE_NAME.to_string(),
                    log_number: 1,
                    settings: KeyspaceSettings::default(),
                }],
                tables: Vec::new(),
                blob_files: Vec::new(),
            };
            write_manifest(fs.as_ref(), dir, &state)?;
            (state, None)
        }
    };

    let names = fs.list(dir)?;
    let highest_file = names
        .iter()
        .filter_map(|n| parse_file_name(n))
        .map(|(_, number)| number)
        .max()
        .unwrap_or(0);
    let mut versions = VersionSet::new(
        state.next_file_number.max(highest_file + 1),
        state.log_number,
        state.next_keyspace_id,
    );

    let tables = ReadContext::for_options(&opts, ReadCounters::new());
    let mut report = RecoveryReport::default();
    let (mut trees, last_seq) = recover_trees(
        &tables,
        dir,
        &opts,
        &state,
        &names,
        |number| fs.read_all(&dir.join(wal_file_name(number))),
        &mut report,
        Table::open,
    )?;
    check_recovered(recovery, &mut report, dir)?;
    refuse_cut_short(&opts, &report, dir)?;

    // Recovered writes become a level-0 table per keyspace, so the old logs
    // can go. (`write_level0_table` removes its file again if it fails.)
    let mut recovered_tables = Vec::new();
    for tree in &mut trees {
        if tree.recovered.is_empty() {
            continue;
        }
        let number = versions.new_file_number();
        let own = tree_options(&opts, &tree.record);
        let built = flush::write_level0_table(
            &tables,
            dir,
            &own,
            &tree.version,
            number,
            &tree.recovered,
            None,
        );
        match built {
            Ok(Some((table, info))) => {
                let edit = BlobEdit::adding(info.blob);
                tree.version = with_edit(tree.version.apply(&[], vec![table]), &edit);
                recovered_tables.push(number);
            }
            Ok(None) => {}
            Err(e) => {
                remove_unnamed(fs.as_ref(), dir, &recovered_tables, None);
                return Err(e);
            }
        }
    }
    // The manifest moves past the replayed logs before the new log exists:
    // a log created first would, if this recovery were cut short, sit empty
    // behind a log with a torn tail, and the next recovery would have to
    // refuse that torn tail as damage in the middle of the logs.
    let log_number = versions.new_file_number();
    let log_path = dir.join(wal_file_name(log_number));
    let parts: Vec<TreeState<'_>> = trees
        .iter()
        .map(|t| TreeState {
            id: t.record.id,
            name: &t.record.name,
            version: &t.version,
            log_number,
            settings: t.record.settings.clone(),
        })
        .collect();
    let started = versions
        .persist(fs.as_ref(), dir, &parts, last_seq)
        .and_then(|()| WalWriter::create(fs.as_ref(), &log_path, log_number))
        .and_then(|wal| fs.sync_dir(dir).map(|()| wal));
    let wal = match started {
        Ok(wal) => wal,
        Err(e) => {
            // A failed open leaves nothing new behind, so retries do not
            // pile up tables (or hold the space that ran out).
            remove_unnamed(fs.as_ref(), dir, &recovered_tables, Some(&log_path));
            return Err(e);
        }
    };
    versions.logs.push(log_number);

    // The manifest is durable: files it does not name are garbage (what
    // cannot be removed now goes at a later open).
    let live_tables: Vec<u64> = trees
        .iter()
        .flat_map(|t| t.version.records())
        .map(|r| r.file_number)
        .collect();
    // Blob files no live table points into (an output cut short, a file
    // left obsolete by a crash): only when every table opened.
    let live_blobs = live_blob_files(trees.iter().map(|t| &t.version));
    for name in fs.list(dir).unwrap_or_default() {
        let obsolete = match parse_file_name(&name) {
            Some((FileKind::Wal, n)) => n < log_number,
            Some((FileKind::Table, n)) => !live_tables.contains(&n),
            None => match (parse_blob_file_name(&name), &live_blobs) {
                (Some(n), Some(live)) => !live.contains(&n),
                _ => name == MANIFEST_TEMP_FILE,
            },
        };
        if obsolete {
            let _ = fs.remove(&dir.join(&name));
        }
    }
    // Files removed while open on a system that keeps their names until
    // they close (Windows), left under names of their own.
    fs.sweep_removed(dir);

    let trees = trees
        .into_iter()
        .map(|t| PartTree {
            mem: Memtable::with_key_filter(tree_options(&opts, &t.record).memtable_bytes),
            record: t.record,
            version: t.version,
        })
        .collect();
    Ok(Parts {
        trees,
        wal,
        last_seq,
        versions,
        tables,
        report,
        lock,
        log_failure: None,
    }
    .into_inner(dir, opts))
}

/// One keyspace as an open hands it over.
pub(crate) struct PartTree {
    pub record: KeyspaceRecord,
    pub version: Version,
    /// The active memtable: empty after a read-write open (the logs went
    /// into a table), the replayed logs after a read-only one.
    pub mem: Memtable,
}

/// What an open (read-write or read-only) hands over to the database.
pub(crate) struct Parts {
    /// Every keyspace, the default first.
    pub trees: Vec<PartTree>,
    pub wal: WalWriter,
    pub last_seq: SeqNo,
    pub versions: VersionSet,
    pub tables: Arc<ReadContext>,
    pub report: RecoveryReport,
    pub lock: Box<dyn DirLock>,
    /// Set when no write may reach the log (a read-only database).
    pub log_failure: Option<Error>,
}

impl Parts {
    pub fn into_inner(self, dir: &Path, opts: Options) -> DbInner {
        let log_number = self.wal.log_number();
        let mut trees: Vec<Arc<Tree>> = self
            .trees
            .into_iter()
            .map(|t| {
                let own = t.record.settings.apply_to(&opts);
                Arc::new(Tree::with_memtable(
                    t.record.id,
                    t.record.name,
                    own,
                    KeyspaceOptions::from_settings(t.record.settings),
                    t.version,
                    t.mem,
                    log_number,
                ))
            })
            .collect();
        // `keyspaces_of` puts the default keyspace first.
        let default = match trees.first() {
            Some(first) if first.id == DEFAULT_KEYSPACE_ID => Arc::clone(first),
            _ => {
                let default = Arc::new(Tree::new(
                    DEFAULT_KEYSPACE_ID,
                    DEFAULT_KEYSPACE_NAME.to_string(),
                    opts.clone(),
                    KeyspaceOptions::new(),
                    Version::with_levels(LEVELS),
                    log_number,
                ));
                trees.insert(0, Arc::clone(&default));
                default
            }
        };
        DbInner {
            dir: dir.to_path_buf(),
            fs: Arc::clone(&opts.fs),
            default,
            trees: ArcSwap::from_pointee(trees),
            last_visible: AtomicU64::new(self.last_seq.0),
            view_generation: AtomicU64::new(0),
            writer: Mutex::new(WriterState {
                wal: self.wal,
                log_number,
                last_seq: self.last_seq,
                log_failure: self.log_failure,
                pending_log: None,
                closed: false,
                unsynced: false,
            }),
            queue: Mutex::new(WriteQueue::default()),
            queue_cv: Condvar::new(),
            write_groups_finished: AtomicU64::new(0),
            writes_queued: AtomicU64::new(0),
            oracle: Mutex::new(crate::db::oracle::Oracle::default()),
            locks: Arc::default(),
            versions: Mutex::new(self.versions),
            bg: Mutex::new(BgState::default()),
            bg_cv: Condvar::new(),
            tables: self.tables,
            writes_stopped: AtomicBool::new(false),
            counters: DbCounters::default(),
            latency: Arc::new(crate::db::latency::DbLatency::new(opts.histograms)),
            events: crate::events::EventQueue::default(),
            recovery: self.report,
            pacer: Pacer::for_compactions(&opts),
            flush_pacer: Pacer::for_flushes(&opts),
            write_buffer: opts
                .write_buffer_manager
                .as_ref()
                .filter(|_| !opts.read_only)
                .map(crate::shared::WriteBufferManager::slot),
            opts,
            handles: crate::db::handle_counts::HandleCounts::default(),
            _lock: self.lock,
        }
    }
}
