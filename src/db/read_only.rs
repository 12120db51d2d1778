//! Opening a database for reading only (`Options::read_only`,
//! `Db::open_read_only`).
//!
//! Owns: the read-only open — the manifest read, every live table opened
//! and held open, the logs replayed into an in-memory memtable — and its
//! consistency beside a live writer: the manifest is read again at the end,
//! and the open starts over when it changed meanwhile (a flush or a
//! compaction may have removed a log or a table the first reading named).
//! Must never: create, change or delete anything (no lock file, no
//! manifest, no log, no table, no removal of obsolete files), or need
//! write permission on the directory.

use std::path::Path;
use std::sync::Arc;

use crate::db::open::{open_tables, repair_hint, replay_logs, Parts, RecoveryReport, VersionSet};
use crate::db::DbInner;
use crate::error::{Error, Result};
use crate::filename::{wal_file_name, MANIFEST_FILE};
use crate::fs::DirLock;
use crate::manifest::{read_manifest, ManifestState};
use crate::memtable::Memtable;
use crate::options::Options;
use crate::table::{ReadContext, ReadCounters, Table};
use crate::wal::WalWriter;

/// Opens started over because the manifest changed meanwhile, before the
/// open gives up (a writer flushing or compacting all the time).
const MAX_ATTEMPTS: u32 = 50;

/// A read-only database takes no lock: it needs none (it changes nothing,
/// and holds every table it reads open) and must work beside a writer.
struct NoLock;

impl DirLock for NoLock {}

/// Why writes to a read-only database are refused.
pub(crate) fn refusal() -> Error {
    Error::ReadOnly {
        cause: Box::new(Error::invalid(
            "the database was opened read-only (Options::read_only): writes, flush, compact \
             and resume are refused",
        )),
    }
}

fn read_state(opts: &Options, dir: &Path) -> Result<ManifestState> {
    read_manifest(opts.fs.as_ref(), dir)
        .map_err(|e| repair_hint(e, dir))?
        .ok_or_else(|| no_database(dir))
}

fn no_database(dir: &Path) -> Error {
    Error::invalid(format!(
        "{} is not a siftdb database (it has no {MANIFEST_FILE}); a read-only open creates \
         nothing",
        dir.display()
    ))
}

pub(crate) fn open(dir: &Path, opts: Options) -> Result<DbInner> {
    opts.validate()?;
    let fs = Arc::clone(&opts.fs);
    if !fs.is_dir(dir) || !fs.exists(&dir.join(MANIFEST_FILE)) {
        return Err(no_database(dir));
    }
    let mut state = read_state(&opts, dir)?;
    for _ in 0..MAX_ATTEMPTS {
        let attempt = open_as_of(dir, &opts, &state);
        // Consistent only if the manifest did not move while the tables and
        // logs were read: a flush may have removed a log after its records
        // went into a table this attempt does not know.
        let now = read_state(&opts, dir)?;
        if now == state {
            return attempt.map(|parts| parts.into_inner(dir, opts));
        }
        state = now;
    }
    Err(Error::io(
        dir,
        std::io::Error::other(format!(
            "the manifest changed during each of {MAX_ATTEMPTS} attempts to open the database \
             read-only"
        )),
    ))
}

/// One attempt: the tables and logs `state` names, read as they are now.
fn open_as_of(dir: &Path, opts: &Options, state: &ManifestState) -> Result<Parts> {
    let fs = opts.fs.as_ref();
    let tables = ReadContext::for_options(opts, ReadCounters::new());
    let mut report = RecoveryReport::default();
    // Held open, so a writer's compaction cannot take a table away from
    // under a read — unless that would pass the open-file budget; then
    // through the open-file cache (a table removed since may then fail
    // to reopen, with an error naming it).
    let open_table = if state.tables.len() <= opts.effective_max_open_files() {
        Table::open_held
    } else {
        Table::open
    };
    let version = open_tables(&tables, dir, opts, state, &mut report, open_table)?;
    let names = fs.list(dir)?;
    let mem = Memtable::new();
    let last_seq = replay_logs(fs, dir, &names, state, &mem, &mut report)?;
    let log_number = state.log_number;
    Ok(Parts {
        version,
        mem,
        wal: WalWriter::refusing(&dir.join(wal_file_name(log_number)), log_number),
        last_seq,
        versions: VersionSet {
            next_file_number: state.next_file_number,
            log_number,
        },
        tables,
        report,
        lock: Box::new(NoLock),
        log_failure: Some(refusal()),
    })
}
