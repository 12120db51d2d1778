//! Checkpoints: an openable copy of a live database at one sequence number.
//!
//! Owns: [`Db::checkpoint`], [`CheckpointInfo`], and the layout of a
//! checkpoint being written (`DIR.checkpoint-tmp` with its
//! `CHECKPOINT-PARTIAL` marker).
//! Must never: stop writes for longer than it takes to pin the files (the
//! copies are made outside every lock), let a table or log it still has to
//! copy be removed meanwhile, or leave anything at `DIR` that opens with
//! less than the whole state.
//!
//! How: under the writer lock (no write group in flight, so the log ends
//! exactly at the last visible write) and the version lock (no flush or
//! compaction publishes), it takes the sequence number `S`, every
//! keyspace's super-version, the active log's length, and links (or, across
//! file systems, copies) every log some keyspace still needs into the
//! checkpoint's directory under a temporary name. Then, locks released:
//! the tables of those versions are hard-linked (copied across file
//! systems, and always for a backup: [`TableFiles`]); they cannot go meanwhile, because the held super-versions pin
//! them (a table's file is removed only when its last handle drops). The
//! logs are copied to their own names — the active one only up to the
//! length taken, so its replay stops at `S` (no flush is forced: the
//! memtables reach the checkpoint as log records). A manifest naming
//! exactly those tables and logs, with `S` as its last sequence, is written
//! last.
//!
//! Crash safety: everything is written into `DIR.checkpoint-tmp`, which
//! holds the `CHECKPOINT-PARTIAL` marker from its first moment until every
//! file, the manifest and the directory are synced; then the marker goes
//! and the directory is renamed to `DIR` (and its parent synced). Killed
//! before the rename, `DIR` does not exist and the temporary directory is
//! refused by `Db::open` (the marker is not a database file: `NotADatabase`,
//! or `Corruption` once tables are in it and the manifest is not). A
//! later checkpoint to the same `DIR` removes a temporary directory that
//! still holds the marker. A checkpoint that fails (no space, say) removes
//! its temporary directory before it returns the error.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::blob::blob_file_name;
use crate::db::handle::Db;
use crate::db::inner::DbInner;
use crate::db::snapshot::Snapshot;
use crate::db::super_version::SuperVersion;
use crate::db::version_set::{TreeState, VersionSet};
use crate::error::{Error, Result};
use crate::filename::{table_file_name, wal_file_name};
use crate::fs::FileSystem;
use crate::manifest::KeyspaceSettings;

/// The file that marks a checkpoint directory as not finished.
pub const CHECKPOINT_PARTIAL_FILE: &str = "CHECKPOINT-PARTIAL";
/// Appended to the checkpoint's directory name while it is written.
pub const CHECKPOINT_TEMP_SUFFIX: &str = ".checkpoint-tmp";

/// What [`Db::checkpoint`] wrote.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct CheckpointInfo {
    /// The checkpoint holds exactly the writes up to this sequence number.
    pub sequence: u64,
    /// The directory it was written to.
    pub dir: PathBuf,
    /// Tables it names.
    pub tables: usize,
    /// Of those, tables hard-linked rather than copied.
    pub tables_linked: usize,
    /// Logs copied (their records are the memtables' content at `sequence`).
    pub logs: usize,
    /// Bytes copied (copied tables and logs; hard links cost none).
    pub bytes_copied: u64,
}

/// How a checkpoint stores the live database's tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TableFiles {
    /// Hard-linked where the file system allows (copied across file
    /// systems): the checkpoint shares their storage with the database.
    Linked,
    /// Copied, always: what a backup needs, which must survive any damage
    /// to the live database's files.
    Copied,
}

/// What was taken under the locks.
struct Pinned {
    sequence: crate::key::SeqNo,
    next_file_number: u64,
    next_keyspace_id: u32,
    /// Per keyspace: id, name, super-version (holding its tables), stored
    /// settings.
    trees: Vec<(u32, String, Arc<SuperVersion>, KeyspaceSettings)>,
    /// The logs to copy: number, bytes to copy, where the pinned copy is.
    logs: Vec<(u64, u64, PathBuf)>,
}

impl Db {
    /// Writes an openable copy of the database into `dir` (which must not
    /// exist; its parent is created if missing) as of one sequence number,
    /// while writes, flushes and compactions go on: every keyspace, its
    /// tables hard-linked when `dir` is on the same file system (copied
    /// otherwise) and its memtables as the log records that hold them, cut
    /// at that sequence number. Writes wait only while the files are
    /// pinned, not while they are copied.
    ///
    /// A linked table shares its storage with the live database's: the
    /// same file under two names, so damage to one is damage to the other
    /// (neither is ever written again). A checkpoint is a cheap consistent
    /// copy, not a backup: [`crate::backup::BackupEngine`] copies every
    /// file.
    ///
    /// `dir` appears whole or not at all: the checkpoint is written into
    /// `DIR.checkpoint-tmp` (refused by `Db::open` until finished) and
    /// renamed at the end. A checkpoint that fails removes that temporary
    /// directory before it returns; a crash leaves at most the temporary
    /// directory, which the next checkpoint to `dir` removes.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = siftdb::Db::open(dir.path().join("db"))?;
    /// db.put(b"k", b"v1")?;
    /// let info = db.checkpoint(dir.path().join("copy"))?;
    /// db.put(b"k", b"v2")?;
    /// let copy = siftdb::Db::open(&info.dir)?;
    /// assert_eq!(copy.get(b"k")?.as_deref(), Some(&b"v1"[..]));
    /// # Ok::<(), siftdb::Error>(())
    /// ```
    pub fn checkpoint(&self, dir: impl AsRef<Path>) -> Result<CheckpointInfo> {
        checkpoint(&self.inner, dir.as_ref(), TableFiles::Linked).map(|(info, _)| info)
    }

    /// [`Db::checkpoint`] with every table copied, never linked (a backup's).
    pub(crate) fn checkpoint_copied(&self, dir: &Path) -> Result<CheckpointInfo> {
        checkpoint(&self.inner, dir, TableFiles::Copied).map(|(info, _)| info)
    }

    /// [`Db::checkpoint`], and a [`Snapshot`] of exactly the state the
    /// checkpoint holds (its sequence number is the checkpoint's): to
    /// compare the copy with, or to go on reading that state here.
    pub fn checkpoint_with_snapshot(
        &self,
        dir: impl AsRef<Path>,
    ) -> Result<(CheckpointInfo, Snapshot)> {
        checkpoint(&self.inner, dir.as_ref(), TableFiles::Linked)
    }
}

/// The temporary directory a checkpoint to `dir` is written in.
pub(crate) fn temp_dir_of(dir: &Path) -> Result<PathBuf> {
    let name = dir
        .file_name()
        .ok_or_else(|| Error::invalid(format!("{} names no directory", dir.display())))?;
    let mut temp = name.to_os_string();
    temp.push(CHECKPOINT_TEMP_SUFFIX);
    Ok(dir.with_file_name(temp))
}

pub(crate) fn checkpoint(
    inner: &Arc<DbInner>,
    dir: &Path,
    tables: TableFiles,
) -> Result<(CheckpointInfo, Snapshot)> {
    let fs = inner.fs.as_ref();
    if inner.opts.read_only {
        return Err(Error::invalid(
            "a database opened read-only cannot take a checkpoint (open it for writing)",
        ));
    }
    if fs.exists(dir) {
        return Err(Error::invalid(format!(
            "checkpoint directory {} already exists",
            dir.display()
        )));
    }
    let temp = temp_dir_of(dir)?;
    remove_partial(fs, &temp)?;
    fs.create_dir_all(&temp)?;
    let written = (|| {
        let mut marker = fs.create(&temp.join(CHECKPOINT_PARTIAL_FILE))?;
        marker.sync()?;
        drop(marker);
        fs.sync_dir(&temp)?;
        let (pinned, snapshot) = pin(inner, &temp)?;
        let info = copy_pinned(inner, &temp, &pinned, tables)?;
        fs.remove(&temp.join(CHECKPOINT_PARTIAL_FILE))?;
        fs.sync_dir(&temp)?;
        fs.rename(&temp, dir)?;
        Ok((info, snapshot))
    })();
    let (mut info, snapshot) = match written {
        Ok(info) => info,
        Err(e) => {
            discard_temp(fs, &temp);
            return Err(e);
        }
    };
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs.sync_dir(parent)?;
    }
    info.dir = dir.to_path_buf();
    Ok((info, snapshot))
}

/// Removes the temporary directory `temp` that this checkpoint or restore
/// created, with the files in it, after a failure — best effort: the
/// failure is what the caller reports, and removing files needs no space.
/// The marker goes last, so a removal cut short leaves a directory the next
/// checkpoint or restore to the same place still recognises and removes.
pub(crate) fn discard_temp(fs: &dyn FileSystem, temp: &Path) {
    if !fs.exists(temp) {
        return;
    }
    if let Ok(names) = fs.list(temp) {
        for name in names.iter().filter(|n| *n != CHECKPOINT_PARTIAL_FILE) {
            let _ = fs.remove(&temp.join(name));
        }
        if names.iter().any(|n| n == CHECKPOINT_PARTIAL_FILE) {
            let _ = fs.remove(&temp.join(CHECKPOINT_PARTIAL_FILE));
        }
    }
    let _ = fs.remove_dir(temp);
}

/// Removes the unfinished checkpoint at `temp` (one holding the marker);
/// refuses to touch a directory there without it.
pub(crate) fn remove_partial(fs: &dyn FileSystem, temp: &Path) -> Result<()> {
    if !fs.exists(temp) {
        return Ok(());
    }
    let names = fs.list(temp)?;
    if !names.iter().any(|n| n == CHECKPOINT_PARTIAL_FILE) {
        return Err(Error::invalid(format!(
            "{} exists and is not an unfinished checkpoint (no {CHECKPOINT_PARTIAL_FILE}): \
             move it away first",
            temp.display()
        )));
    }
    for name in names.iter().filter(|n| *n != CHECKPOINT_PARTIAL_FILE) {
        fs.remove(&temp.join(name))?;
    }
    // The marker goes last: a removal cut short is still recognised.
    fs.remove(&temp.join(CHECKPOINT_PARTIAL_FILE))?;
    fs.remove_dir(temp)
}

/// Takes the sequence number, the super-versions and the logs under the
/// writer and version locks; pins each log by a link (or a copy) in `temp`.
/// Also a snapshot taken under the same locks: at the same sequence number.
fn pin(inner: &Arc<DbInner>, temp: &Path) -> Result<(Pinned, Snapshot)> {
    let fs = inner.fs.as_ref();
    let writer = inner.writer.lock();
    if writer.closed {
        return Err(Error::Closed);
    }
    if let Some(cause) = &writer.log_failure {
        return Err(Error::read_only(cause));
    }
    let versions = inner.versions.lock();
    let trees: Vec<(u32, String, Arc<SuperVersion>, KeyspaceSettings)> = inner
        .trees
        .load()
        .iter()
        .map(|t| {
            let settings = t.given.lock().settings().clone();
            (t.id, t.name.clone(), t.current.load_full(), settings)
        })
        .collect();
    let oldest = trees
        .iter()
        .map(|(_, _, sv, _)| sv.oldest_log())
        .min()
        .unwrap_or(writer.log_number);
    let mut logs = Vec::new();
    for &number in versions.logs.iter().filter(|&&n| n >= oldest) {
        let from = inner.path_of(&wal_file_name(number));
        let len = if number == writer.log_number {
            writer.wal.bytes_written()
        } else {
            u64::MAX
        };
        let pin = temp.join(format!("pin-{}", wal_file_name(number)));
        if fs.hard_link(&from, &pin).is_err() {
            // Another file system: copied now, under the locks (a log is at
            // most a few memtables long).
            copy_file(fs, &from, &pin, len)?;
        }
        logs.push((number, len, pin));
    }
    let snapshot = Snapshot::new(inner);
    debug_assert_eq!(snapshot.sequence(), writer.last_seq.0);
    let pinned = Pinned {
        sequence: writer.last_seq,
        next_file_number: versions.next_file_number,
        next_keyspace_id: versions.next_keyspace_id,
        trees,
        logs,
    };
    Ok((pinned, snapshot))
}

/// Links or copies the pinned tables and logs into `temp` and writes the
/// manifest naming them.
fn copy_pinned(
    inner: &DbInner,
    temp: &Path,
    pinned: &Pinned,
    tables: TableFiles,
) -> Result<CheckpointInfo> {
    let fs = inner.fs.as_ref();
    let mut info = CheckpointInfo {
        sequence: pinned.sequence.0,
        logs: pinned.logs.len(),
        ..CheckpointInfo::default()
    };
    let mut blobs = std::collections::BTreeSet::new();
    for (_, _, sv, _) in &pinned.trees {
        for table in sv.version.levels.iter().flatten() {
            let name = table_file_name(table.file_number());
            let (from, to) = (inner.path_of(&name), temp.join(&name));
            info.tables += 1;
            if tables == TableFiles::Linked && fs.hard_link(&from, &to).is_ok() {
                info.tables_linked += 1;
            } else {
                info.bytes_copied += copy_file(fs, &from, &to, u64::MAX)?;
            }
            // The blob files it points into, each once (immutable, as
            // tables are: linked or copied the same way).
            let numbers = table
                .table
                .as_ref()
                .map_or(&[][..], |t| t.blob_file_numbers());
            for &number in numbers.iter().filter(|&&n| blobs.insert(n)) {
                let name = blob_file_name(number);
                let (from, to) = (inner.path_of(&name), temp.join(&name));
                if tables != TableFiles::Linked || fs.hard_link(&from, &to).is_err() {
                    info.bytes_copied += copy_file(fs, &from, &to, u64::MAX)?;
                }
            }
        }
    }
    for (number, len, pin) in &pinned.logs {
        info.bytes_copied += copy_file(fs, pin, &temp.join(wal_file_name(*number)), *len)?;
        fs.remove(pin)?;
    }
    fs.sync_dir(temp)?;
    let parts: Vec<TreeState<'_>> = pinned
        .trees
        .iter()
        .map(|(id, name, sv, settings)| TreeState {
            id: *id,
            name,
            version: &sv.version,
            log_number: sv.oldest_log(),
            settings: settings.clone(),
        })
        .collect();
    // A version set of the checkpoint's own: the live one is not changed.
    let mut versions = VersionSet::new(pinned.next_file_number, 0, pinned.next_keyspace_id);
    versions.persist(fs, temp, &parts, pinned.sequence)?;
    Ok(info)
}

/// Copies the first `len` bytes of `from` (all of it when shorter) into a
/// new file `to`, synced; returns the bytes copied.
pub(crate) fn copy_file(fs: &dyn FileSystem, from: &Path, to: &Path, len: u64) -> Result<u64> {
    let mut out = fs.create(to)?;
    let total = crate::fs::read_chunks(fs, from, len, |chunk| out.append(chunk))?;
    out.sync()?;
    Ok(total)
}
