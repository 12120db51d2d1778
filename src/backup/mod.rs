//! Backups: numbered, incremental, verified copies of a database in a
//! directory of their own.
//!
//! Owns: [`BackupEngine`], the backup directory's layout and its
//! metadata files (their format is in `docs/format.md`, "Backup
//! metadata").
//! Must never: name a file in a backup's metadata before the file is
//! durable, remove a file a remaining backup names, or restore from a file
//! whose checksum does not match.
//!
//! Layout of a backup directory:
//!
//! ```text
//! shared/NNNNNN_CRC_SIZE.sst  tables, shared by every backup that holds them
//! private/ID/                 one backup's logs and manifest
//! meta/ID                     one backup's metadata: what it holds, checksums
//! tmp/                        a backup being made (removed when it fails, or at the next one)
//! ```
//!
//! A backup is a [`Db::checkpoint`] taken into `tmp/` with every table
//! copied, never hard-linked (a backup shares no storage with the database
//! it protects: damage to a live file cannot reach it), whose tables are
//! then moved into `shared/` (a table already there — same number, checksum
//! and size — is not stored again: backups share files with one another,
//! inside the backup directory) and whose other files into `private/ID/`.
//! The metadata is written last (beside, synced, renamed): a backup exists
//! once its `meta/ID` does, and a crash before leaves only files that the
//! next [`BackupEngine::purge_old`] removes; a `create` that fails (no
//! space, say) removes what it stored before it returns. A table's name carries its
//! checksum so a database restored from an older backup, whose file
//! numbers start again below those of later backups, cannot collide with
//! them.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::blob::parse_blob_file_name;
use crate::db::{discard_temp, remove_partial, temp_dir_of, Db, CHECKPOINT_PARTIAL_FILE};
use crate::error::{Error, Result};
use crate::filename::{parse_file_name, FileKind};
use crate::fs::{OsFileSystem, SharedFs};
use crate::inspect::verify_dir_with;

pub(crate) mod inspect;
pub(crate) mod meta;

use meta::{decode_meta, encode_meta};
pub use meta::{BackupFile, BackupInfo};

const SHARED_DIR: &str = "shared";
const PRIVATE_DIR: &str = "private";
const META_DIR: &str = "meta";
const TMP_DIR: &str = "tmp";

/// Numbered backups of a database in a directory: incremental by table,
/// each checked against its checksums when made and by [`verify`], and
/// restored into a new directory by [`restore`].
///
/// ```
/// use siftdb::backup::BackupEngine;
///
/// # let dir = tempfile::tempdir().unwrap();
/// let db = siftdb::Db::open(dir.path().join("db"))?;
/// let backups = BackupEngine::open(dir.path().join("backups"))?;
/// db.put(b"k", b"v1")?;
/// let first = backups.create(&db)?;
/// db.put(b"k", b"v2")?;
/// backups.create(&db)?;
/// backups.restore(first.id, dir.path().join("restored"))?;
/// let restored = siftdb::Db::open(dir.path().join("restored"))?;
/// assert_eq!(restored.get(b"k")?.as_deref(), Some(&b"v1"[..]));
/// # Ok::<(), siftdb::Error>(())
/// ```
///
/// [`verify`]: BackupEngine::verify
/// [`restore`]: BackupEngine::restore
///
/// `Send + Sync` (checked by `tests/api_traits.rs`): share it with `Arc`.
pub struct BackupEngine {
    dir: PathBuf,
    fs: SharedFs,
}

impl std::fmt::Debug for BackupEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackupEngine")
            .field("dir", &self.dir)
            .finish()
    }
}

impl BackupEngine {
    /// Opens (creating it when missing) the backup directory `dir`.
    /// One engine per directory at a time: two making backups into the
    /// same directory at once may number theirs alike.
    pub fn open(dir: impl AsRef<Path>) -> Result<BackupEngine> {
        let engine = BackupEngine {
            dir: dir.as_ref().to_path_buf(),
            fs: OsFileSystem::shared(),
        };
        for sub in [SHARED_DIR, PRIVATE_DIR, META_DIR] {
            engine.fs.create_dir_all(&engine.dir.join(sub))?;
        }
        Ok(engine)
    }

    /// Opens the backup directory `dir`, which must exist and hold backups'
    /// layout: `InvalidArgument` naming it otherwise, and nothing is
    /// created (for reading backups: a mistyped directory is an error, not
    /// a new empty one).
    pub fn open_existing(dir: impl AsRef<Path>) -> Result<BackupEngine> {
        let dir = dir.as_ref();
        let fs = OsFileSystem::shared();
        if !fs.is_dir(dir) {
            return Err(Error::invalid(format!(
                "no backup directory at {}",
                dir.display()
            )));
        }
        if let Some(sub) = [SHARED_DIR, PRIVATE_DIR, META_DIR]
            .into_iter()
            .find(|sub| !fs.is_dir(&dir.join(sub)))
        {
            return Err(Error::invalid(format!(
                "{} is not a backup directory (no {sub}/)",
                dir.display()
            )));
        }
        Ok(BackupEngine {
            dir: dir.to_path_buf(),
            fs,
        })
    }

    /// True when backup `id` exists (its metadata does; whether its files
    /// are whole is [`BackupEngine::verify`]'s question).
    pub fn exists(&self, id: u64) -> bool {
        self.fs.exists(&self.meta_path(id))
    }

    /// The backup directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Makes a new backup of `db` (as of one sequence number, while writes
    /// go on) and verifies it; returns what it holds. Every file is copied:
    /// the backup shares no storage with the database. A `create` that
    /// fails leaves no trace: no `tmp/`, no metadata, none of the files it
    /// stored.
    pub fn create(&self, db: &Db) -> Result<BackupInfo> {
        let id = self.list()?.last().map_or(1, |b| b.id + 1);
        let tmp = self.dir.join(TMP_DIR);
        // What an earlier backup's removals left lingering (Windows: a
        // log the database still had open, linked into `tmp/`).
        self.fs.sweep_removed(&self.dir);
        self.remove_tree(&tmp)?;
        let mut stored = Vec::new();
        let made = self.create_as(db, id, &mut stored);
        if made.is_err() {
            // Best effort (the failure is what is reported; removing needs
            // no space). The metadata first: the backup is gone once it is.
            let fs = self.fs.as_ref();
            if fs.exists(&self.meta_path(id)) {
                let _ = fs.remove(&self.meta_path(id));
            }
            let _ = self.remove_tree(&self.dir.join(PRIVATE_DIR).join(id.to_string()));
            for path in &stored {
                let _ = fs.remove(path);
            }
            let _ = self.remove_tree(&tmp);
        }
        made
    }

    /// [`BackupEngine::create`] as backup `id`; adds to `stored` each file
    /// it put into `shared/` (for the clean-up after a failure).
    fn create_as(&self, db: &Db, id: u64, stored: &mut Vec<PathBuf>) -> Result<BackupInfo> {
        let fs = self.fs.as_ref();
        let tmp = self.dir.join(TMP_DIR);
        fs.create_dir_all(&tmp)?;
        let checkpoint_dir = tmp.join("checkpoint");
        let checkpoint = db.checkpoint_copied(&checkpoint_dir)?;
        // Every block of every table, the logs and the manifest checked
        // before anything is stored.
        let report = verify_dir_with(&self.fs, &checkpoint_dir)?;
        if let Some(problem) = report.errors().next() {
            return Err(Error::corruption(
                "the database's files",
                format!("not backed up: {problem}"),
            ));
        }
        let private = format!("{PRIVATE_DIR}/{id}");
        self.remove_tree(&self.dir.join(&private))?;
        fs.create_dir_all(&self.dir.join(&private))?;
        let mut files = Vec::new();
        let mut new_bytes = 0;
        for name in fs.list(&checkpoint_dir)? {
            let from = checkpoint_dir.join(&name);
            let (size, crc32) = checksum(fs, &from)?;
            let stored_name = match parse_file_name(&name) {
                Some((FileKind::Table, number)) => {
                    format!("{SHARED_DIR}/{number:06}_{crc32:08x}_{size}.sst")
                }
                // Blob files are shared as tables are: a backup that
                // already holds one does not copy it again.
                _ => match parse_blob_file_name(&name) {
                    Some(number) => format!("{SHARED_DIR}/{number:06}_{crc32:08x}_{size}.blob"),
                    None => format!("{private}/{name}"),
                },
            };
            let to = self.dir.join(&stored_name);
            if fs.exists(&to) {
                // Already backed up: checked as any stored file is.
                check_file(fs, &to, &stored_name, size, crc32)?;
                fs.remove(&from)?;
            } else {
                fs.rename(&from, &to)?;
                if stored_name.starts_with(SHARED_DIR) {
                    stored.push(to);
                }
                new_bytes += size;
            }
            files.push(BackupFile {
                stored: stored_name,
                name,
                size,
                crc32,
            });
        }
        for sub in [SHARED_DIR, private.as_str()] {
            fs.sync_dir(&self.dir.join(sub))?;
        }
        let info = BackupInfo {
            id,
            sequence: checkpoint.sequence,
            created_unix_secs: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            files,
            new_bytes,
        };
        self.write_meta(&info)?;
        self.remove_tree(&tmp)?;
        // Verified as stored: what `restore` will read.
        self.verify(id)?;
        Ok(info)
    }

    /// Every backup, oldest first. A metadata file that fails its checksum
    /// is an error naming it.
    pub fn list(&self) -> Result<Vec<BackupInfo>> {
        let mut ids: Vec<u64> = self
            .fs
            .list(&self.dir.join(META_DIR))?
            .iter()
            .filter_map(|name| name.parse().ok())
            .collect();
        ids.sort_unstable();
        ids.into_iter().map(|id| self.read_meta(id)).collect()
    }

    /// Checks every file of backup `id` against its size and checksum:
    /// `Corruption` naming the first that differs, or is missing.
    pub fn verify(&self, id: u64) -> Result<BackupInfo> {
        let info = self.read_meta(id)?;
        for file in &info.files {
            check_file(
                self.fs.as_ref(),
                &self.dir.join(&file.stored),
                &file.stored,
                file.size,
                file.crc32,
            )?;
        }
        Ok(info)
    }

    /// Restores backup `id` into `dir` (which must not exist): every file
    /// is checked against its checksum first, and a backup that fails is
    /// refused before anything is written. `dir` appears whole or not at
    /// all: it is written as `DIR.checkpoint-tmp`, which a marker file
    /// keeps `Db::open` from opening until it is whole, and renamed.
    /// Files are copied, never linked: the restored database shares no
    /// file with the backup. A restore that fails (no space, say) removes
    /// `DIR.checkpoint-tmp` before it returns.
    pub fn restore(&self, id: u64, dir: impl AsRef<Path>) -> Result<BackupInfo> {
        let dir = dir.as_ref();
        let fs = self.fs.as_ref();
        if fs.exists(dir) {
            return Err(Error::invalid(format!(
                "restore directory {} already exists",
                dir.display()
            )));
        }
        let info = self.verify(id)?;
        let temp = temp_dir_of(dir)?;
        remove_partial(fs, &temp)?;
        fs.create_dir_all(&temp)?;
        let copied = (|| {
            let mut marker = fs.create(&temp.join(CHECKPOINT_PARTIAL_FILE))?;
            marker.sync()?;
            drop(marker);
            fs.sync_dir(&temp)?;
            for file in &info.files {
                let copied =
                    copy_checked(fs, &self.dir.join(&file.stored), &temp.join(&file.name))?;
                if copied != (file.size, file.crc32) {
                    return Err(Error::corruption(
                        format!("backup file {}", file.stored),
                        "changed while it was restored",
                    ));
                }
            }
            fs.sync_dir(&temp)?;
            fs.remove(&temp.join(CHECKPOINT_PARTIAL_FILE))?;
            fs.sync_dir(&temp)?;
            fs.rename(&temp, dir)
        })();
        if let Err(e) = copied {
            discard_temp(fs, &temp);
            return Err(e);
        }
        if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
            fs.sync_dir(parent)?;
        }
        Ok(info)
    }

    /// Removes all but the newest `keep` backups, and every stored file no
    /// remaining backup names (files a crashed `create` left included).
    /// Returns the ids removed.
    pub fn purge_old(&self, keep: usize) -> Result<Vec<u64>> {
        let fs = self.fs.as_ref();
        let backups = self.list()?;
        let cut = backups.len().saturating_sub(keep);
        let (gone, kept) = backups.split_at(cut);
        // The metadata first: a backup is gone once it is, and a crash
        // after that leaves files the next purge removes.
        for backup in gone {
            fs.remove(&self.dir.join(META_DIR).join(backup.id.to_string()))?;
        }
        fs.sync_dir(&self.dir.join(META_DIR))?;
        let needed: BTreeSet<&str> = kept
            .iter()
            .flat_map(|b| b.files.iter().map(|f| f.stored.as_str()))
            .collect();
        for name in fs.list(&self.dir.join(SHARED_DIR))? {
            if !needed.contains(format!("{SHARED_DIR}/{name}").as_str()) {
                fs.remove(&self.dir.join(SHARED_DIR).join(name))?;
            }
        }
        let kept_ids: BTreeSet<String> = kept.iter().map(|b| b.id.to_string()).collect();
        for name in fs.list(&self.dir.join(PRIVATE_DIR))? {
            if !kept_ids.contains(&name) {
                self.remove_tree(&self.dir.join(PRIVATE_DIR).join(name))?;
            }
        }
        for sub in [SHARED_DIR, PRIVATE_DIR] {
            fs.sync_dir(&self.dir.join(sub))?;
        }
        Ok(gone.iter().map(|b| b.id).collect())
    }

    /// Removes `dir` and what it holds (files, and directories one level
    /// down: a checkpoint in `tmp/`), if it exists.
    fn remove_tree(&self, dir: &Path) -> Result<()> {
        let fs = self.fs.as_ref();
        if !fs.exists(dir) {
            return Ok(());
        }
        for name in fs.list(dir)? {
            let path = dir.join(name);
            if fs.is_dir(&path) {
                self.remove_tree(&path)?;
            } else {
                fs.remove(&path)?;
            }
        }
        fs.remove_dir(dir)
    }

    fn meta_path(&self, id: u64) -> PathBuf {
        self.dir.join(META_DIR).join(id.to_string())
    }

    /// Writes backup `info`'s metadata beside its place, synced, and renames
    /// it there (the directory synced).
    fn write_meta(&self, info: &BackupInfo) -> Result<()> {
        let fs = self.fs.as_ref();
        let bytes = encode_meta(info);
        let temp = self.dir.join(META_DIR).join(format!("{}.tmp", info.id));
        let mut file = fs.create(&temp)?;
        file.append(&bytes)?;
        file.sync()?;
        drop(file);
        fs.rename(&temp, &self.meta_path(info.id))?;
        fs.sync_dir(&self.dir.join(META_DIR))
    }

    fn read_meta(&self, id: u64) -> Result<BackupInfo> {
        let path = self.meta_path(id);
        if !self.fs.exists(&path) {
            return Err(Error::invalid(format!(
                "no backup {id} in {}",
                self.dir.display()
            )));
        }
        let bytes = self.fs.read_all(&path)?;
        decode_meta(&bytes, id).map_err(|detail| match meta::meta_version(&bytes) {
            // Checksum-sound, of another format version: not damage.
            Some(found) if found != meta::META_VERSION => Error::UnsupportedVersion {
                path: path.clone(),
                kind: meta::FILE_KIND,
                found,
                supported: meta::META_VERSION,
            },
            _ => Error::corruption(format!("backup metadata {}", path.display()), detail),
        })
    }
}

/// The size and CRC-32 of the file at `path`.
fn checksum(fs: &dyn crate::fs::FileSystem, path: &Path) -> Result<(u64, u32)> {
    stream(fs, path, |_| Ok(()))
}

/// Reads the file at `path` in chunks, handing each to `each`; returns its
/// size and CRC-32.
fn stream(
    fs: &dyn crate::fs::FileSystem,
    path: &Path,
    mut each: impl FnMut(&[u8]) -> Result<()>,
) -> Result<(u64, u32)> {
    let mut hasher = crc32fast::Hasher::new();
    let size = crate::fs::read_chunks(fs, path, u64::MAX, |chunk| {
        hasher.update(chunk);
        each(chunk)
    })?;
    Ok((size, hasher.finalize()))
}

/// Copies `from` to a new file `to` (synced); returns the size and CRC-32
/// of what was copied.
fn copy_checked(fs: &dyn crate::fs::FileSystem, from: &Path, to: &Path) -> Result<(u64, u32)> {
    let mut out = fs.create(to)?;
    let sums = stream(fs, from, |chunk| out.append(chunk))?;
    out.sync()?;
    Ok(sums)
}

/// `Corruption` naming `stored` unless the file at `path` has `size` bytes
/// whose CRC-32 is `crc32`.
fn check_file(
    fs: &dyn crate::fs::FileSystem,
    path: &Path,
    stored: &str,
    size: u64,
    crc32: u32,
) -> Result<()> {
    let what = || format!("backup file {stored}");
    if !fs.exists(path) {
        return Err(Error::corruption(what(), "missing"));
    }
    let (got_size, got_crc) = checksum(fs, path)?;
    if got_size != size {
        return Err(Error::corruption(
            what(),
            format!("{got_size} bytes, the backup recorded {size}"),
        ));
    }
    if got_crc != crc32 {
        return Err(Error::corruption(
            what(),
            format!("checksum {got_crc:08x}, the backup recorded {crc32:08x}"),
        ));
    }
    Ok(())
}
