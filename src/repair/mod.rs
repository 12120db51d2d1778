//! Repair: a working database rebuilt from what is readable of a damaged
//! one ([`repair`], `siftdb repair DIR`).
//!
//! What it does, in order (`docs/design.md`, "Failures", says what it
//! guarantees and what it cannot):
//!
//! 1. Reads the manifest. When it is intact, its tables and levels are the
//!    starting point; when it is damaged or missing, every table and log
//!    file in the directory is.
//! 2. Checks every table whole (`Table::verify`). A sound table is kept as
//!    it is. A damaged one is salvaged block by block
//!    ([`crate::table::TableSalvager`]): every block that reads whole is
//!    kept, and each lost block is recorded with the key range and the
//!    sequence numbers it may have held.
//! 3. Drops every entry that a lost block may have shadowed — an older
//!    version (sequence number below the damaged table's largest) of a key
//!    within a lost block's range — so that a tombstone or a newer value
//!    lost with the block can never let an older value come back.
//! 4. Replays the logs: an intact log is left for `open` to replay; the
//!    readable records of a damaged one (`wal::salvage`) go into a new
//!    level-0 table.
//! 5. Writes the new tables, then a new manifest (with an intact manifest:
//!    the same levels, each rewritten table in its original's place; without
//!    one: everything merged into one sorted run at the bottom level).
//! 6. Moves the original of everything it replaced into `lost/` in the
//!    database directory, never deleting it.
//! 7. Checks the blob files the tables point into (`blobs`): it keeps
//!    every blob pointer and never touches a blob file, and reports one
//!    that is missing or damaged (reads of its keys then fail with
//!    `Corruption`, never an older or wrong value).
//!
//! A database with nothing damaged is left untouched, so a second repair
//! changes nothing.
//!
//! Owns: [`repair`], [`RepairOptions`], [`RepairReport`] (with its parts,
//! in `report`), the run's order, and the move of originals into `lost/`.
//! Its parts:
//! `examine` (a table's check and what a loss shadows), `blobs` (the blob
//! files the tables point into), `with_manifest`,
//! `without_manifest`, `merge` (one sorted run of everything readable, and
//! the new tables), `logs` (what logs hold that tables do not).
//! Must never: invent an entry or bring one back (it keeps only entries
//! read from checksummed blocks and records, and drops whatever a lost part
//! may have shadowed), delete an original (replaced files are moved to
//! `lost/`), or run beside a writer (it takes the directory lock).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::db::LOCK_FILE;
use crate::error::{Error, Result};
use crate::filename::{parse_file_name, table_file_name, wal_file_name, FileKind, MANIFEST_FILE};
use crate::fs::FileSystem;
use crate::inspect::check_is_database;
use crate::key::user_key_of;
use crate::manifest::{
    read_manifest, write_manifest, ManifestState, DEFAULT_KEYSPACE_ID, DEFAULT_KEYSPACE_NAME,
};
use crate::options::Options;
use crate::table::format::FOOTER_LEN;
use crate::table::{Footer, ReadContext, ReadCounters, ReadSettings};
use crate::wal::replay;

mod blobs;
mod examine;
mod logs;
mod merge;
mod report;
mod with_manifest;
mod without_manifest;

pub use report::{
    BlobFileReport, LogAction, LogReport, LostRange, ManifestFinding, RepairReport, TableAction,
    TableReport,
};

/// The folder (inside the database directory) originals are moved to.
pub const LOST_DIR: &str = "lost";

/// How [`repair`] runs.
#[derive(Debug, Clone, Default)]
pub struct RepairOptions {
    options: Options,
    dry_run: bool,
}

impl RepairOptions {
    /// Default options: the real file system, tables written as
    /// `Options::default()` writes them.
    pub fn new() -> RepairOptions {
        RepairOptions::default()
    }

    /// The database options new tables are written with (block size,
    /// compression, filter bits, table size) and the file system used.
    pub fn options(mut self, options: Options) -> Self {
        self.options = options;
        self
    }

    /// Only find out and report what a repair would do: read everything,
    /// write, move and lock nothing. Default false.
    pub fn dry_run(mut self, dry_run: bool) -> Self {
        self.dry_run = dry_run;
        self
    }
}

struct Repair<'a> {
    fs: &'a dyn FileSystem,
    dir: &'a Path,
    opts: &'a Options,
    dry_run: bool,
    context: Arc<ReadContext>,
    next_number: u64,
    report: RepairReport,
    /// Files to move into `lost/` once the repair is durable.
    replaced: Vec<String>,
    /// The blob files the examined tables point into: for each, the
    /// tables (`blobs`).
    blob_refs: std::collections::BTreeMap<u64, Vec<String>>,
}

/// Rebuilds a working database in `path` from what is readable; see the
/// module docs. Returns what was found, kept and lost. `Error::Locked` when
/// the database is open; `Error::NotADatabase` (nothing touched) when
/// `path` holds neither a siftdb manifest nor any file that opens as a
/// siftdb table or log.
pub fn repair(path: impl AsRef<Path>, options: RepairOptions) -> Result<RepairReport> {
    let dir = path.as_ref();
    let opts = &options.options;
    opts.validate()?;
    let fs = opts.fs.as_ref();
    if !fs.is_dir(dir) {
        return Err(Error::invalid(format!(
            "{} is not a directory",
            dir.display()
        )));
    }
    // Another engine's directory (whose `NNNNNN.sst` names look like
    // siftdb's) is refused before anything — the lock file included — is
    // created, moved or written in it.
    check_is_database(&opts.fs, dir, &fs.list(dir)?)?;
    let _lock = if options.dry_run {
        None
    } else {
        Some(fs.lock(&dir.join(LOCK_FILE))?)
    };
    let names = fs.list(dir)?;
    let numbered: Vec<(FileKind, u64)> = names.iter().filter_map(|n| parse_file_name(n)).collect();
    refuse_other_versions(fs, dir, &numbered)?;
    let (state, finding) = match read_manifest(fs, dir) {
        Ok(Some(state)) => (Some(state), ManifestFinding::Intact),
        Ok(None) => (None, ManifestFinding::Missing),
        Err(e) if e.is_corruption() => (None, ManifestFinding::Damaged(e.to_string())),
        Err(e) => return Err(e),
    };
    if state.is_none() && numbered.is_empty() {
        return Err(Error::invalid(format!(
            "{} holds no siftdb database (no {MANIFEST_FILE}, no table, no log)",
            dir.display()
        )));
    }
    let lost_numbers = fs
        .list(&dir.join(LOST_DIR))
        .unwrap_or_default()
        .iter()
        .filter_map(|n| parse_file_name(n.split(".~").next().unwrap_or(n)))
        .map(|(_, n)| n)
        .max()
        .unwrap_or(0);
    let highest = numbered.iter().map(|&(_, n)| n).max().unwrap_or(0);
    let next_number = state
        .as_ref()
        .map_or(0, |s| s.next_file_number)
        .max(highest.max(lost_numbers) + 1);
    let mut repair = Repair {
        fs,
        dir,
        opts,
        dry_run: options.dry_run,
        // The database's extractor, so that a damaged table whose filter
        // kept prefixes only can still rule keys out (without it, that
        // filter answers "may contain" for every key).
        context: ReadContext::with_prefix_extractor(
            Arc::clone(&opts.fs),
            ReadSettings::tool(),
            ReadCounters::new(),
            opts.prefix_extractor.clone(),
        ),
        next_number,
        report: RepairReport {
            dir: dir.to_path_buf(),
            dry_run: options.dry_run,
            manifest: finding,
            tables: Vec::new(),
            logs: Vec::new(),
            new_tables: Vec::new(),
            moved: Vec::new(),
            manifest_written: false,
            uncertain: Vec::new(),
            blob_files: Vec::new(),
        },
        replaced: Vec::new(),
        blob_refs: std::collections::BTreeMap::new(),
    };
    match state {
        Some(state) => repair.with_manifest(&state, &numbered)?,
        None => repair.without_manifest(&numbered)?,
    }
    repair.check_blob_files();
    Ok(repair.report)
}

/// `Error::UnsupportedVersion` for the first table or log in `dir` whose
/// (checksum-sound) footer or header names a format version this build does
/// not read, before anything is changed: a salvage would read none of its
/// entries or records and report them all lost.
fn refuse_other_versions(
    fs: &dyn FileSystem,
    dir: &Path,
    numbered: &[(FileKind, u64)],
) -> Result<()> {
    for &(kind, number) in numbered {
        let refused = match kind {
            FileKind::Table => {
                let name = table_file_name(number);
                let file = fs.open_read(&dir.join(&name))?;
                let len = file.len();
                let tail_len = len.min(FOOTER_LEN as u64);
                let mut tail = vec![0u8; usize::try_from(tail_len).unwrap_or(FOOTER_LEN)];
                file.read_exact_at(&mut tail, len - tail_len)?;
                Footer::decode(&tail, len, &name).err().map(|e| (e, name))
            }
            FileKind::Wal => {
                let name = wal_file_name(number);
                let bytes = fs.read_all(&dir.join(&name))?;
                replay(&bytes, &name).err().map(|e| (e, name))
            }
        };
        if let Some((e @ Error::UnsupportedVersion { .. }, name)) = refused {
            return Err(e.at_path(&dir.join(name)));
        }
    }
    Ok(())
}

/// The name repair gives a keyspace whose name nothing records (only its
/// records in a log survived).
fn recovered_keyspace_name(id: u32) -> String {
    if id == DEFAULT_KEYSPACE_ID {
        DEFAULT_KEYSPACE_NAME.to_string()
    } else {
        format!("recovered-{id}")
    }
}

/// The user key of an internal key.
fn user(internal_key: &[u8]) -> Vec<u8> {
    user_key_of(internal_key).to_vec()
}

impl Repair<'_> {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn new_number(&mut self) -> u64 {
        let n = self.next_number;
        self.next_number += 1;
        n
    }

    /// Records that `name` is replaced: its original goes to `lost/`.
    fn replace(&mut self, name: &str) {
        self.replaced.push(name.to_string());
    }

    fn write_manifest(&mut self, state: &ManifestState) -> Result<()> {
        self.report.manifest_written = true;
        if self.dry_run {
            return state
                .check()
                .map_err(|reason| Error::invalid(format!("the repaired manifest: {reason}")));
        }
        write_manifest(self.fs, self.dir, state)
    }

    /// A name in `lost/` no earlier repair used for `name`.
    fn lost_name(&self, name: &str, taken: &[String]) -> String {
        let existing = self.fs.list(&self.dir.join(LOST_DIR)).unwrap_or_default();
        let free = |candidate: &String| !existing.contains(candidate) && !taken.contains(candidate);
        std::iter::once(name.to_string())
            .chain((1..).map(|i| format!("{name}.~{i}")))
            .find(free)
            .unwrap_or_else(|| name.to_string())
    }

    /// Copies every replaced original into `lost/` (synced); returns
    /// (name, name in `lost/`).
    fn copy_replaced_to_lost(&mut self) -> Result<Vec<(String, String)>> {
        let lost = self.dir.join(LOST_DIR);
        if !self.dry_run && !self.replaced.is_empty() {
            self.fs.create_dir_all(&lost)?;
        }
        let mut copies = Vec::new();
        let mut taken = Vec::new();
        for name in std::mem::take(&mut self.replaced) {
            let target = self.lost_name(&name, &taken);
            if !self.dry_run {
                let bytes = self.fs.read_all(&self.path(&name))?;
                let mut file = self.fs.create(&lost.join(&target))?;
                file.append(&bytes)?;
                file.sync()?;
            }
            taken.push(target.clone());
            self.report
                .moved
                .push((name.clone(), format!("{LOST_DIR}/{target}")));
            copies.push((name, target));
        }
        if !self.dry_run && !copies.is_empty() {
            self.fs.sync_dir(&lost)?;
        }
        Ok(copies)
    }

    /// Renames every replaced original into `lost/`.
    fn move_replaced_to_lost(&mut self) -> Result<()> {
        let lost = self.dir.join(LOST_DIR);
        if !self.dry_run && !self.replaced.is_empty() {
            self.fs.create_dir_all(&lost)?;
        }
        let mut taken = Vec::new();
        for name in std::mem::take(&mut self.replaced) {
            let target = self.lost_name(&name, &taken);
            if !self.dry_run {
                self.fs.rename(&self.path(&name), &lost.join(&target))?;
            }
            taken.push(target.clone());
            self.report
                .moved
                .push((name, format!("{LOST_DIR}/{target}")));
        }
        if !self.dry_run && !taken.is_empty() {
            self.fs.sync_dir(&lost)?;
            self.fs.sync_dir(self.dir)?;
        }
        Ok(())
    }
}
