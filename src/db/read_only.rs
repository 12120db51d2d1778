//! Opening a database for reading only (`Options::read_only`,
//! `Db::open_read_only`).
//!
//! Owns: the read-only open — the manifest read, every live table opened
//! and held open, the logs replayed into an in-memory memtable — and its
//! consistency beside a live writer. A flush of the writer removes the logs
//! it moved into a table, a compaction removes the tables it replaced; so
//! the open first reads the manifest and opens the logs it needs (holding
//! them, so a later removal takes nothing away), reads the manifest again
//! and starts over when it moved meanwhile; then opens the tables (held
//! open too), and starts over only when one the manifest named is gone and
//! the manifest no longer names it. Every table's file is held open for
//! the database's life whatever `max_open_files` (which bounds the
//! open-file cache of a writer's tables): a file reopened by name could be
//! gone.
//! Must never: create, change or delete anything (no lock file, no
//! manifest, no log, no table, no removal of obsolete files), or need
//! write permission on the directory.

use std::path::Path;

use bytes::Bytes;

use crate::db::checks::read_only_refusal;
use crate::db::inner::DbInner;
use crate::db::open::{
    self, check_recovered, logs_from, manifest_exists, recover_trees, refuse_cut_short, PartTree,
    Parts,
};
use crate::db::recovery_report::{ManifestRecovery, RecoveryReport};
use crate::db::version_set::VersionSet;
use crate::error::{Error, Result};
use crate::filename::{table_file_name, wal_file_name, MANIFEST_FILE};
use crate::fs::DirLock;
use crate::identify::check_is_database;
use crate::manifest::ManifestState;
use crate::options::Options;
use crate::table::{ReadContext, ReadCounters, Table};
use crate::wal::WalWriter;

/// Attempts started over because the writer moved the database meanwhile,
/// before the open gives up.
const MAX_ATTEMPTS: u32 = 50;

/// A read-only database takes no lock: it needs none (it changes nothing,
/// and holds every table it reads open) and must work beside a writer.
struct NoLock;

impl DirLock for NoLock {}

/// The state, from `MANIFEST` or, when it is damaged or missing, its copy
/// (see `manifest_recovery`).
fn read_state(opts: &Options, dir: &Path) -> Result<(ManifestState, Option<ManifestRecovery>)> {
    open::read_state(opts.fs.as_ref(), dir)?.ok_or_else(|| no_database(dir))
}

/// An open that ran out of file handles (`EMFILE`, `ENFILE`) said as such:
/// a read-only database holds every table file open.
pub(crate) fn out_of_file_handles(e: Error, tables: usize, opts: &Options) -> Error {
    let Error::Io { path, source } = &e else {
        return e;
    };
    if !is_out_of_file_handles(source) {
        return e;
    }
    let limit = open_file_limit();
    Error::Io {
        path: path.clone(),
        source: std::io::Error::new(
            source.kind(),
            format!(
                "{source}: a read-only open holds every table file open, {tables} here \
                 (max_open_files, {}, does not limit it); the process's open-file limit is \
                 {limit} (ulimit -n)",
                opts.effective_max_open_files()
            ),
        ),
    }
}

/// `EMFILE` or `ENFILE`: the process's or the system's file table is full.
#[cfg(unix)]
fn is_out_of_file_handles(source: &std::io::Error) -> bool {
    let errno = rustix::io::Errno::from_io_error(source);
    errno == Some(rustix::io::Errno::MFILE) || errno == Some(rustix::io::Errno::NFILE)
}

/// `ERROR_TOO_MANY_OPEN_FILES`.
#[cfg(windows)]
fn is_out_of_file_handles(source: &std::io::Error) -> bool {
    source.raw_os_error() == Some(4)
}

#[cfg(not(any(unix, windows)))]
fn is_out_of_file_handles(_source: &std::io::Error) -> bool {
    false
}

/// The process's open-file limit, as `ulimit -n` gives it.
#[cfg(unix)]
fn open_file_limit() -> String {
    let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
    limit.map_or_else(|| "unlimited".to_owned(), |l| l.to_string())
}

/// Windows has no per-process limit to report.
#[cfg(not(unix))]
fn open_file_limit() -> String {
    "the system's".to_owned()
}

fn no_database(dir: &Path) -> Error {
    Error::NotADatabase {
        path: dir.to_path_buf(),
        reason: format!("it has no {MANIFEST_FILE}; a read-only open creates nothing"),
    }
}

pub(crate) fn open(dir: &Path, opts: Options) -> Result<DbInner> {
    opts.validate()?;
    let fs = opts.fs.as_ref();
    if !fs.is_dir(dir) || !manifest_exists(fs, dir) {
        if fs.is_dir(dir) {
            // Another engine's files are named as such.
            check_is_database(&opts.fs, dir, &fs.list(dir)?)?;
        }
        return Err(no_database(dir));
    }
    for _ in 0..MAX_ATTEMPTS {
        if let Some(parts) = attempt(dir, &opts)? {
            return Ok(parts.into_inner(dir, opts));
        }
    }
    Err(Error::io(
        dir,
        std::io::Error::other(format!(
            "the manifest changed during each of {MAX_ATTEMPTS} attempts to open the database \
             read-only"
        )),
    ))
}

/// One attempt; `None` when the writer moved the database under it.
fn attempt(dir: &Path, opts: &Options) -> Result<Option<Parts>> {
    let fs = opts.fs.as_ref();
    let (state, recovery) = read_state(opts, dir)?;
    // The logs first, held open: a flush that removes one after this has
    // put its records into a table this manifest does not name.
    let mut logs = Vec::new();
    for number in logs_from(&fs.list(dir)?, state.log_number) {
        match fs.open_read(&dir.join(wal_file_name(number))) {
            Ok(file) => logs.push((number, file)),
            // Removed since the listing: the manifest has moved.
            Err(_) if read_state(opts, dir)?.0 != state => return Ok(None),
            Err(e) => return Err(e),
        }
    }
    if read_state(opts, dir)?.0 != state {
        return Ok(None);
    }

    let tables = ReadContext::for_options(opts, ReadCounters::new());
    let mut report = RecoveryReport::default();
    // Every table held open, whatever `max_open_files`: a writer's
    // compaction may remove any of them, and a file reopened by name
    // would then be gone. The table never reopens its file by name.
    let open_table = Table::open_held;
    let numbers: Vec<u64> = logs.iter().map(|(number, _)| *number).collect();
    let names: Vec<String> = numbers.iter().map(|&n| wal_file_name(n)).collect();
    let read = |number: u64| -> Result<Bytes> {
        let file = logs
            .iter()
            .find(|(n, _)| *n == number)
            .map(|(_, file)| file)
            .ok_or_else(|| Error::invalid(format!("log {number} was not opened")))?;
        let len = usize::try_from(file.len())
            .map_err(|_| Error::invalid(format!("log {number} does not fit in memory")))?;
        let mut bytes = vec![0u8; len];
        file.read_exact_at(&mut bytes, 0)?;
        Ok(Bytes::from(bytes))
    };
    let (trees, last_seq) = recover_trees(
        &tables,
        dir,
        opts,
        &state,
        &names,
        read,
        &mut report,
        open_table,
    )
    .map_err(|e| out_of_file_handles(e, state.tables.len(), opts))?;
    if !report.damaged_tables.is_empty() {
        // A table a compaction removed looks missing: only the current
        // manifest tells it from damage.
        let (now, _) = read_state(opts, dir)?;
        let gone = report.damaged_tables.iter().any(|(name, _)| {
            !now.tables
                .iter()
                .any(|t| table_file_name(t.file_number) == *name)
        });
        if gone {
            return Ok(None);
        }
    }
    check_recovered(recovery, &mut report, dir)?;
    refuse_cut_short(opts, &report, dir)?;
    let log_number = state.log_number;
    let trees = trees
        .into_iter()
        .map(|t| PartTree {
            record: t.record,
            version: t.version,
            mem: t.recovered,
        })
        .collect();
    Ok(Some(Parts {
        trees,
        wal: WalWriter::refusing(&dir.join(wal_file_name(log_number)), log_number),
        last_seq,
        versions: VersionSet::new(state.next_file_number, log_number, state.next_keyspace_id),
        tables,
        report,
        lock: Box::new(NoLock),
        log_failure: Some(read_only_refusal()),
    }))
}
