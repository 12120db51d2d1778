//! Creating and recovering a database directory.
//!
//! Owns: the directory lock, the first manifest, opening every live table,
//! replaying the logs the manifest does not cover, and [`VersionSet`] (the
//! manifest's counters, written atomically with each new version).
//! Must never: open a database with data silently missing — a missing table,
//! a corrupt manifest or a corrupt log record before the tail is an error
//! that names the file.

use std::path::Path;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;

use arc_swap::ArcSwap;
use parking_lot::{Condvar, Mutex};

use crate::batch::decode_record;
use crate::db::version::Version;
use crate::db::{
    background, flush, write, DbCounters, DbInner, LoggedMemtable, SuperVersion, LEVELS,
};
use crate::error::{Error, Result};
use crate::filename::{parse_file_name, wal_file_name, FileKind, MANIFEST_FILE};
use crate::fs::FileSystem;
use crate::key::SeqNo;
use crate::manifest::{read_manifest, write_manifest, ManifestState};
use crate::memtable::Memtable;
use crate::options::Options;
use crate::table::ReadCounters;
use crate::wal::{replay, WalWriter};

/// Name of the lock file.
pub(crate) const LOCK_FILE: &str = "LOCK";

/// The manifest's counters. Locked for every manifest write and every
/// publication of a new super-version.
pub(crate) struct VersionSet {
    pub next_file_number: u64,
    /// The oldest log whose records are not all in tables.
    pub log_number: u64,
}

impl VersionSet {
    pub fn new_file_number(&mut self) -> u64 {
        let n = self.next_file_number;
        self.next_file_number += 1;
        n
    }

    /// Makes `version` (with `log_number`, `last_sequence`) the durable state.
    pub fn persist(
        &mut self,
        fs: &dyn FileSystem,
        dir: &Path,
        version: &Version,
        last_sequence: SeqNo,
    ) -> Result<()> {
        let state = ManifestState {
            next_file_number: self.next_file_number,
            last_sequence,
            log_number: self.log_number,
            tables: version.records(),
        };
        write_manifest(fs, dir, &state)
    }
}

/// What recovery found, for callers who want to know.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Log records replayed into the memtable.
    pub records_replayed: u64,
    /// A torn record dropped at the end of the newest log: (file, offset, reason).
    pub torn_tail: Option<(String, u64, String)>,
}

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
/// interrupted before its first manifest leaves behind.
fn check_fresh(fs: &dyn FileSystem, dir: &Path) -> Result<()> {
    for name in fs.list(dir)? {
        if name == LOCK_FILE || name == "MANIFEST.tmp" {
            continue;
        }
        if parse_file_name(&name).is_some() {
            return Err(Error::corruption(
                format!("database {}", dir.display()),
                format!("{name} exists but MANIFEST is missing"),
            ));
        }
        return Err(Error::invalid(format!(
            "{} is not a siftdb database (it holds {name})",
            dir.display()
        )));
    }
    Ok(())
}

pub(crate) fn open(dir: &Path, opts: Options) -> Result<DbInner> {
    opts.validate()?;
    let fs = Arc::clone(&opts.fs);
    check_directory(fs.as_ref(), dir)?;
    // A directory that is not a database is refused before the lock file
    // is created in it (and checked again under the lock).
    if !fs.exists(&dir.join(MANIFEST_FILE)) {
        check_fresh(fs.as_ref(), dir)?;
    }
    let lock = fs.lock(&dir.join(LOCK_FILE))?;

    let state = match read_manifest(fs.as_ref(), dir)? {
        Some(state) => state,
        None => {
            check_fresh(fs.as_ref(), dir)?;
            let state = ManifestState {
                next_file_number: 2,
                last_sequence: SeqNo(0),
                log_number: 1,
                tables: Vec::new(),
            };
            write_manifest(fs.as_ref(), dir, &state)?;
            state
        }
    };

    let names = fs.list(dir)?;
    let highest_file = names
        .iter()
        .filter_map(|n| parse_file_name(n))
        .map(|(_, number)| number)
        .max()
        .unwrap_or(0);
    let mut versions = VersionSet {
        next_file_number: state.next_file_number.max(highest_file + 1),
        log_number: state.log_number,
    };

    let counters = Arc::new(ReadCounters::default());
    let mut version = Version::with_levels(LEVELS);
    let mut live = Vec::new();
    for record in &state.tables {
        live.push(flush::open_live_table(
            fs.as_ref(),
            dir,
            &counters,
            record.clone(),
        )?);
    }
    version = version.apply(&[], live);

    // Replay every log the manifest does not cover, oldest first.
    let mut logs: Vec<u64> = names
        .iter()
        .filter_map(|n| parse_file_name(n))
        .filter(|(kind, number)| *kind == FileKind::Wal && *number >= state.log_number)
        .map(|(_, number)| number)
        .collect();
    logs.sort_unstable();
    let recovered = Memtable::new();
    let mut last_seq = state.last_sequence;
    let mut report = RecoveryReport::default();
    for (i, &number) in logs.iter().enumerate() {
        let name = wal_file_name(number);
        let bytes = fs.read_all(&dir.join(&name))?;
        let log = replay(&bytes, &name)?;
        if log.log_number.is_some_and(|n| n != number) {
            return Err(Error::corruption(
                format!("log {name}"),
                format!("header names log {:?}", log.log_number),
            ));
        }
        if let Some(torn) = &log.torn_tail {
            if i + 1 != logs.len() {
                return Err(Error::corruption(
                    format!("log {name}"),
                    format!(
                        "torn record at offset {} in a log that is not the newest: {}",
                        torn.offset, torn.reason
                    ),
                ));
            }
            report.torn_tail = Some((name.clone(), torn.offset, torn.reason.clone()));
        }
        for record in &log.records {
            let batch = decode_record(record.payload).map_err(|e| match e {
                Error::Corruption { detail, .. } => {
                    Error::corruption(format!("log {name}"), detail)
                }
                other => other,
            })?;
            let mut seq = batch.first_seq;
            for op in &batch.ops {
                recovered.insert(op.key, seq, op.kind, op.value);
                last_seq = last_seq.max(seq);
                seq = seq.next();
            }
            report.records_replayed += 1;
        }
    }

    // Recovered writes become a level-0 table, so the old logs can go.
    if !recovered.is_empty() {
        let number = versions.new_file_number();
        if let Some(table) =
            flush::write_level0_table(fs.as_ref(), dir, &opts, &counters, number, &recovered)?
        {
            version = version.apply(&[], vec![table]);
        }
    }
    // The manifest moves past the replayed logs before the new log exists:
    // a log created first would, if this recovery were cut short, sit empty
    // behind a log with a torn tail, and the next recovery would have to
    // refuse that torn tail as damage in the middle of the logs.
    let log_number = versions.new_file_number();
    versions.log_number = log_number;
    versions.persist(fs.as_ref(), dir, &version, last_seq)?;
    let wal = WalWriter::create(
        fs.as_ref(),
        &dir.join(wal_file_name(log_number)),
        log_number,
    )?;
    fs.sync_dir(dir)?;

    // The manifest is durable: files it does not name are garbage.
    let live_tables: Vec<u64> = version.records().iter().map(|r| r.file_number).collect();
    for name in fs.list(dir)? {
        let obsolete = match parse_file_name(&name) {
            Some((FileKind::Wal, n)) => n < log_number,
            Some((FileKind::Table, n)) => !live_tables.contains(&n),
            None => name == "MANIFEST.tmp",
        };
        if obsolete {
            fs.remove(&dir.join(&name))?;
        }
    }

    Ok(DbInner {
        dir: dir.to_path_buf(),
        fs,
        current: ArcSwap::from_pointee(SuperVersion {
            mem: LoggedMemtable {
                mem: Arc::new(Memtable::new()),
                log_number,
            },
            imm: Vec::new(),
            version: Arc::new(version),
        }),
        last_visible: AtomicU64::new(last_seq.0),
        writer: Mutex::new(write::WriterState {
            wal,
            log_number,
            last_seq,
            poisoned: None,
        }),
        queue: Mutex::new(write::WriteQueue::default()),
        queue_cv: Condvar::new(),
        versions: Mutex::new(versions),
        bg: Mutex::new(background::BgState::default()),
        bg_cv: Condvar::new(),
        read_counters: counters,
        counters: DbCounters::default(),
        recovery: report,
        opts,
        _lock: lock,
    })
}
