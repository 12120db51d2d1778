//! Bulk load: [`TableWriter`] writes sorted keys to a table file, and
//! [`Db::ingest`] adds such files to a live database without rewriting
//! them when it can.
//!
//! Owns: [`TableWriter`], [`IngestOptions`], the checks an ingested file
//! passes, where it is placed, and the one manifest edit that adds them.
//! Must never: add part of an ingest (all files are named by one manifest
//! edit, or none is), change the database when a file is refused, let an
//! ingested key hide behind an older version of it, let a snapshot taken
//! before the ingest see its keys, let a transaction that read or wrote in
//! an ingested file's key range before the ingest commit after it, or keep
//! a file under a name its caller can still write.
//!
//! A `TableWriter` file holds each key once, at sequence number 0. Placed
//! where nothing of the keyspace overlaps it (no memtable entry or range
//! tombstone, no table at any level) it goes to the deepest level as it is
//! — copied, or moved — since sequence 0 is then older than nothing it
//! meets. When it overlaps tables, it must be newer than every write: it is
//! rewritten with the next sequence number (one above every write; the
//! writer lock is held meanwhile) and placed at the deepest level above
//! every level it overlaps. When it overlaps a memtable, the memtables are
//! flushed first (reads ask the memtable before any table). A table records
//! its keyspace (what `repair` goes by): a file whose record is not the
//! keyspace's — a `TableWriter::create` file (the default keyspace's) into
//! another keyspace — is rewritten too (at its sequence number); a file of
//! that keyspace's own `Keyspace::table_writer` is placed as it is.
//!
//! A file with separated values (its blob files beside it) is always
//! rewritten, its pointers renamed to the blob files copied in under new
//! numbers (`ingest_blobs.rs`).
//!
//! Either way the ingest takes the next sequence number and registers each
//! file's key range with the transaction oracle under it, as a commit that
//! wrote those ranges: a transaction with an older snapshot that checks a
//! key or range there conflicts, whether the entries went in at that number
//! or at 0. The sequence number, the manifest edit, the registration and
//! the new version are published under the oracle's lock, so no transaction
//! takes a snapshot between them.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::blob::blob_file_name;
use crate::db::blob_garbage::{with_edit, BlobEdit};
use crate::db::checks::{check_key, check_value};
use crate::db::flush::{open_live_table, table_options_for, PendingOutputs};
use crate::db::handle::Db;
use crate::db::ingest_blobs::{
    copy_blob_file, rewrite_with_blob_numbers, source_blob_files, WriterBlobs,
};
use crate::db::inner::DbInner;
use crate::db::keyspace::Keyspace;
use crate::db::oracle::KeyRange;
use crate::db::super_version::SuperVersion;
use crate::db::tree::Tree;
use crate::db::version::LiveTable;
use crate::db::version::LEVELS;
use crate::db::write;
use crate::error::{Error, Result};
use crate::filename::table_file_name;
use crate::fs::{FileSystem, OsFileSystem, SharedFs};
use crate::key::{internal_key, parse_internal_key, user_key_of, SeqNo, ValueKind};
use crate::manifest::{TableRecord, DEFAULT_KEYSPACE_ID};
use crate::options::Options;
use crate::table::{ScanMode, Table, TableBuilder};
use siftdb_filter::LevelTables;

/// Writes strictly ascending keys (puts and deletes) to a table file in
/// siftdb's format, with the filters the options ask for, for
/// [`Db::ingest`].
///
/// ```
/// use siftdb::{Db, IngestOptions, Options, TableWriter};
///
/// # let dir = tempfile::tempdir().unwrap();
/// let file = dir.path().join("load.sst");
/// let mut writer = TableWriter::create(&file, &Options::default())?;
/// for i in 0..1000u32 {
///     writer.put(format!("key{i:05}"), b"value")?;
/// }
/// writer.finish()?;
/// let db = Db::open(dir.path().join("db"))?;
/// db.ingest(&[&file], IngestOptions::new())?;
/// assert_eq!(db.get(b"key00042")?.as_deref(), Some(&b"value"[..]));
/// # Ok::<(), siftdb::Error>(())
/// ```
///
/// The file is written under a temporary name beside `path` and renamed to
/// `path` by [`TableWriter::finish`]: a file already there is replaced
/// whole at that moment, never truncated or written in place (a database
/// that ingested it keeps its own copy either way), and a writer dropped
/// unfinished, or whose `finish` fails, removes its temporary file.
///
/// `Send + Sync` (checked by `tests/api_traits.rs`): write a table on
/// another thread.
pub struct TableWriter {
    // Declared before `temp`: the file is closed before it is removed.
    builder: TableBuilder,
    last: Option<Vec<u8>>,
    key: Vec<u8>,
    /// The file being written, renamed to `target` by `finish`.
    temp: TempFile,
    target: PathBuf,
    /// The blob file beside it, for values at or above the threshold.
    blobs: WriterBlobs,
}

impl std::fmt::Debug for TableWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableWriter")
            .field("target", &self.target)
            .field("builder", &self.builder)
            .finish_non_exhaustive()
    }
}

/// A file removed when dropped, unless kept.
struct TempFile {
    fs: SharedFs,
    path: PathBuf,
    keep: bool,
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if !self.keep {
            let _ = self.fs.remove(&self.path);
        }
    }
}

/// Tells apart the temporary files of writers in one process.
static NEXT_TEMP: AtomicU64 = AtomicU64::new(0);

/// The directory holding `path` (`.` for a bare file name).
fn parent_dir(path: &Path) -> &Path {
    path.parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
}

impl TableWriter {
    /// Starts the table file that [`TableWriter::finish`] puts at `path`,
    /// built with `options`' block size, compression and filter policy (as
    /// for the deepest level). A file at `path` stays as it is until then.
    ///
    /// With [`Options::blob_threshold`], a put's value at or above it goes
    /// to a blob file (`NNNNNN.blob`, a number no file in the directory
    /// had) beside the table, which points into it; ingest the table by its
    /// path and the blob file comes with it (copied in, or with
    /// [`IngestOptions::move_files`] removed with the table afterwards).
    /// A writer dropped unfinished removes its blob file too.
    pub fn create(path: impl AsRef<Path>, options: &Options) -> Result<TableWriter> {
        let fs = OsFileSystem::shared();
        let target = path.as_ref().to_path_buf();
        let Some(name) = target.file_name() else {
            return Err(Error::invalid(format!(
                "TableWriter::create: {} names no file",
                target.display()
            )));
        };
        let mut temp_name = std::ffi::OsString::from(".");
        temp_name.push(name);
        temp_name.push(format!(
            ".{}-{}.tmp",
            std::process::id(),
            NEXT_TEMP.fetch_add(1, Ordering::Relaxed)
        ));
        let temp_path = parent_dir(&target).join(temp_name);
        // A tree of this one table at the deepest level: it gets the whole
        // budget of bits per key, as a compaction output there would.
        let mut tree = vec![LevelTables::default(); LEVELS];
        if let Some(last) = tree.last_mut() {
            *last = LevelTables {
                tables: 1,
                keys: 1 << 20,
            };
        }
        let table_options = table_options_for(options, &tree, LEVELS - 1);
        let builder = TableBuilder::create(fs.as_ref(), &temp_path, &table_options);
        let blobs = WriterBlobs::new(fs.clone(), parent_dir(&target), options.blob_threshold);
        let temp = TempFile {
            fs,
            path: temp_path,
            // A builder that failed may have left the file: removed too.
            keep: false,
        };
        Ok(TableWriter {
            builder: builder?,
            last: None,
            key: Vec::new(),
            temp,
            target,
            blobs,
        })
    }

    /// Adds `key` with `value`; `key` must sort after every key added before.
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        check_value(value.as_ref())?;
        self.add(key.as_ref(), ValueKind::Put, value.as_ref())
    }

    /// Adds a deletion of `key` (it hides older values of `key` when
    /// ingested over them); `key` must sort after every key added before.
    pub fn delete(&mut self, key: impl AsRef<[u8]>) -> Result<()> {
        self.add(key.as_ref(), ValueKind::Delete, b"")
    }

    fn add(&mut self, key: &[u8], kind: ValueKind, value: &[u8]) -> Result<()> {
        check_key(key)?;
        if self.last.as_deref().is_some_and(|last| last >= key) {
            return Err(Error::invalid(format!(
                "TableWriter keys must be strictly ascending: {:?} after {:?}",
                String::from_utf8_lossy(key),
                String::from_utf8_lossy(self.last.as_deref().unwrap_or_default())
            )));
        }
        let pointer = match kind {
            ValueKind::Put => self.blobs.separate(key, value)?,
            _ => None,
        };
        self.key.clear();
        match &pointer {
            Some(pointer) => {
                self.key
                    .extend_from_slice(&internal_key(key, SeqNo(0), ValueKind::Blob));
                self.builder.add(&self.key, &pointer.encode())?;
            }
            None => {
                self.key
                    .extend_from_slice(&internal_key(key, SeqNo(0), kind));
                self.builder.add(&self.key, value)?;
            }
        }
        match &mut self.last {
            Some(last) => {
                last.clear();
                last.extend_from_slice(key);
            }
            None => self.last = Some(key.to_vec()),
        }
        Ok(())
    }

    /// Entries added so far.
    pub fn entries(&self) -> u64 {
        self.builder.entries()
    }

    /// Finishes the file: synced, renamed to the path given to
    /// [`TableWriter::create`] (replacing any file there), and the rename
    /// synced in its directory; returns its size in bytes. A writer given no
    /// key is refused (`InvalidArgument`), and the path left as it was.
    pub fn finish(self) -> Result<u64> {
        let TableWriter {
            builder,
            mut temp,
            target,
            mut blobs,
            ..
        } = self;
        if builder.entries() == 0 {
            return Err(Error::invalid(format!(
                "TableWriter for {} was given no key; an empty table is not written",
                target.display()
            )));
        }
        // The blob file is synced before the table that points into it.
        blobs.finish()?;
        let size = builder.finish()?.file_size;
        temp.fs.rename(&temp.path, &target)?;
        temp.keep = true;
        blobs.keep();
        temp.fs.sync_dir(parent_dir(&target))?;
        Ok(size)
    }
}

/// How [`Db::ingest`] takes the files.
#[derive(Debug, Clone, Copy, Default)]
pub struct IngestOptions {
    move_files: bool,
}

impl IngestOptions {
    /// Copies the files (RocksDB's default): the originals stay the
    /// caller's, and whatever is done to them later (written over in
    /// place, rewritten by a [`TableWriter`] under the same name) leaves the
    /// database alone.
    pub fn new() -> IngestOptions {
        IngestOptions::default()
    }

    /// Moves the files into the database instead of copying them: each is
    /// hard-linked in (copied when linking fails, e.g. across file systems)
    /// and, once the ingest is installed, the caller's name is removed and
    /// its directory synced, so no name outside the database is left on the
    /// database's file. A refused or failed ingest leaves the files where
    /// they were. Should removing a name fail after the install, the ingest
    /// stands and the error is returned; that, or a crash between the
    /// install and the removal, leaves the caller's name on the database's
    /// file: remove it, never write to it.
    pub fn move_files(mut self, yes: bool) -> Self {
        self.move_files = yes;
        self
    }
}

/// A file checked for ingest.
struct Checked {
    path: PathBuf,
    table: Table,
    /// The blob files it points into (number, path beside it).
    blobs: Vec<(u64, PathBuf)>,
    smallest: Vec<u8>,
    largest: Vec<u8>,
}

impl Db {
    /// Adds table files written by [`TableWriter`] to the default keyspace,
    /// atomically: after it returns every key of every file is there, and
    /// after a crash either all are or none is. Every file is checked first
    /// (every block's checksum, the filter blocks' included, keys ascending,
    /// written by `TableWriter`, files not overlapping each other); a file
    /// that fails is refused with an error naming it (`Corruption` for a
    /// damaged block) and the database is unchanged. Snapshots and
    /// iterators taken before do not see the ingested keys; reads after see
    /// them over every older write.
    ///
    /// Files whose keys meet nothing in the keyspace are copied (or, with
    /// [`IngestOptions::move_files`], moved) in as they are; files that
    /// overlap its tables are rewritten once with a new sequence number
    /// (writes wait meanwhile), and overlapping memtables are flushed first.
    /// The database never shares a file its caller can still write.
    ///
    /// An ingest counts as a write of every key from each file's smallest
    /// to its largest for [`Transaction`](crate::Transaction)s: one whose
    /// snapshot is older and that read (with `get_for_update`, or any read
    /// when serializable) or wrote a key in those ranges fails to commit
    /// with [`Error::Conflict`]. The ingest takes one sequence number
    /// either way.
    pub fn ingest<P: AsRef<Path>>(&self, files: &[P], options: IngestOptions) -> Result<()> {
        ingest(&self.inner, &self.inner.default, files, options)
    }
}

impl Keyspace {
    /// [`Db::ingest`] into this keyspace. Files of this keyspace's
    /// [`Keyspace::table_writer`] that meet nothing in it are copied (or
    /// moved) in as they are; other files are rewritten once, so that the
    /// table records this keyspace.
    pub fn ingest<P: AsRef<Path>>(&self, files: &[P], options: IngestOptions) -> Result<()> {
        self.tree().check_live()?;
        ingest(self.inner(), self.tree(), files, options)
    }

    /// A [`TableWriter`] for this keyspace's [`Keyspace::ingest`]: the file
    /// is built with this keyspace's options (filter policy, block size,
    /// compression, prefix extractor) and records the keyspace, so an
    /// ingest that meets nothing places it without a rewrite.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = siftdb::Db::open(dir.path().join("db"))?;
    /// let events = db.keyspace("events")?;
    /// let file = dir.path().join("events.sst");
    /// let mut writer = events.table_writer(&file)?;
    /// for i in 0..100u32 {
    ///     writer.put(format!("e{i:04}"), "payload")?;
    /// }
    /// writer.finish()?;
    /// events.ingest(&[&file], siftdb::IngestOptions::new())?;
    /// assert_eq!(events.iter().count(), 100);
    /// # Ok::<(), siftdb::Error>(())
    /// ```
    pub fn table_writer(&self, path: impl AsRef<Path>) -> Result<TableWriter> {
        self.tree().check_live()?;
        TableWriter::create(path, &self.tree().opts.load())
    }
}

fn ingest<P: AsRef<Path>>(
    inner: &Arc<DbInner>,
    tree: &Arc<Tree>,
    files: &[P],
    options: IngestOptions,
) -> Result<()> {
    if files.is_empty() {
        return Ok(());
    }
    let fs = OsFileSystem::shared();
    let mut checked = files
        .iter()
        .map(|p| check_file(&fs, p.as_ref()))
        .collect::<Result<Vec<_>>>()?;
    checked.sort_by(|a, b| a.smallest.cmp(&b.smallest));
    for pair in checked.windows(2) {
        if let [a, b] = pair {
            if b.smallest <= a.largest {
                return Err(Error::invalid(format!(
                    "ingested files {} and {} overlap",
                    a.path.display(),
                    b.path.display()
                )));
            }
        }
    }
    // Memtables that overlap are flushed first (a few tries: writes go on).
    for _ in 0..4 {
        let sv = tree.current.load_full();
        if !checked.iter().any(|c| memtables_overlap(&sv, c)) {
            break;
        }
        write::rotate_if_nonempty(inner)?;
        crate::db::background::wait_for_flushes(inner)?;
    }
    let _pending = PendingOutputs::begin(inner);
    let mut writer = inner.writer.lock();
    write::check_writable(inner, &writer)?;
    // Held until the install: no flush or compaction publishes meanwhile,
    // so the levels chosen against `sv` are still free of overlaps then.
    let mut versions = inner.versions.lock();
    let sv = tree.current.load_full();
    if checked.iter().any(|c| memtables_overlap(&sv, c)) {
        return Err(Error::invalid(
            "the ingested keys overlap the memtable, and writes kept it so through 4 flushes",
        ));
    }
    let overlaps_tables = checked.iter().any(|c| {
        sv.version
            .levels
            .iter()
            .any(|level| level.iter().any(|t| t.overlaps(&c.smallest, &c.largest)))
    });
    // The ingest's sequence number, one above every write: what the oracle
    // records it under, and that of its entries when they overlap tables
    // (0 when they meet nothing).
    let ingest_seq = writer.last_seq.next();
    let seq = if overlaps_tables {
        ingest_seq
    } else {
        SeqNo(0)
    };
    // A file goes in as it is when it meets nothing and records this
    // keyspace; otherwise it is rewritten (see the module doc).
    // A file with blob files is rewritten: its pointers name them anew.
    let as_is = |file: &Checked| {
        seq == SeqNo(0) && records_keyspace(&file.table, tree) && file.blobs.is_empty()
    };
    let mut added: Vec<Arc<LiveTable>> = Vec::new();
    let mut added_blobs: Vec<PathBuf> = Vec::new();
    let mut blob_edit = BlobEdit::default();
    let placed = (|| {
        for file in &checked {
            let level = if overlaps_tables {
                level_above_overlaps(&sv, file)
            } else {
                LEVELS - 1
            };
            let number = versions.new_file_number();
            let to = inner.path_of(&table_file_name(number));
            // The first blob file takes the table's number, as a flush's does.
            let blob_numbers: BTreeMap<u64, u64> = file
                .blobs
                .iter()
                .enumerate()
                .map(|(i, (old, _))| {
                    (
                        *old,
                        if i == 0 {
                            number
                        } else {
                            versions.new_file_number()
                        },
                    )
                })
                .collect();
            // Removed again if anything fails once it is placed.
            let placed_one = (|| {
                // A file recording another keyspace is rewritten, so its table
                // records this one (what `repair` goes by when the manifest is
                // lost).
                if as_is(file) {
                    place_file(&inner.fs, &file.path, &to, options.move_files)?;
                } else if file.blobs.is_empty() {
                    rewrite_with_seq(inner, tree, &file.table, &to, seq)?;
                } else {
                    for (old, from) in &file.blobs {
                        let new = blob_numbers.get(old).copied().unwrap_or(number);
                        let blob_to = inner.path_of(&blob_file_name(new));
                        let copied = copy_blob_file(inner.fs.as_ref(), from, &blob_to, new)?;
                        added_blobs.push(blob_to);
                        blob_edit.added.push(copied);
                    }
                    let opts = tree.opts.load();
                    let levels = tree.current.load().version.level_tables();
                    let table_options = table_options_for(&opts, &levels, 0);
                    rewrite_with_blob_numbers(
                        inner.fs.as_ref(),
                        &file.table,
                        &to,
                        &table_options,
                        seq,
                        &blob_numbers,
                    )?;
                }
                let table = Table::open_with(&inner.fs, &to)?;
                if as_is(file) && table.file_size() != file.table.file_size() {
                    return Err(Error::corruption(
                        format!("ingested file {}", file.path.display()),
                        format!(
                            "it changed during the ingest ({} bytes when checked, {} when placed)",
                            file.table.file_size(),
                            table.file_size()
                        ),
                    ));
                }
                let props = table.properties();
                let record = TableRecord {
                    // Set to the keyspace's when the manifest is written.
                    keyspace: 0,
                    level: u32::try_from(level).unwrap_or(0),
                    file_number: number,
                    file_size: table.file_size(),
                    entries: props.entries,
                    smallest: props.smallest.to_vec(),
                    largest: props.largest.to_vec(),
                    min_seq: props.min_seq,
                    max_seq: props.max_seq,
                };
                drop(table);
                open_live_table(&inner.tables, &inner.dir, record)
            })();
            match placed_one {
                Ok(table) => added.push(table),
                Err(e) => {
                    let _ = inner.fs.remove(&to);
                    return Err(e);
                }
            }
        }
        inner.fs.sync_dir(&inner.dir)
    })();
    let remove_added = |added: &[Arc<LiveTable>]| {
        for table in added {
            let _ = inner
                .fs
                .remove(&inner.path_of(&table_file_name(table.file_number())));
        }
        for blob in &added_blobs {
            let _ = inner.fs.remove(blob);
        }
    };
    if let Err(e) = placed {
        remove_added(&added);
        return Err(e);
    }
    // From the new sequence number (which the manifest records) to the new
    // version, under the oracle's lock: a transaction's snapshot (taken
    // under it) is before the ingest or after it, never between.
    let mut oracle = inner.oracle.lock();
    let visible = inner.last_visible.load(Ordering::Acquire);
    writer.last_seq = ingest_seq;
    inner.last_visible.store(ingest_seq.0, Ordering::Release);
    let current = sv;
    let version = Arc::new(with_edit(
        current.version.apply(&[], added.clone()),
        &blob_edit,
    ));
    if let Err(e) = inner.persist(&mut versions, Some((tree, &version, current.oldest_log()))) {
        drop(oracle);
        drop(versions);
        remove_added(&added);
        return Err(e);
    }
    let ranges = checked
        .iter()
        .map(|c| KeyRange {
            keyspace: tree.id,
            start: Bound::Included(c.smallest.clone()),
            end: Bound::Included(c.largest.clone()),
        })
        .collect();
    oracle.register_ranges(ranges, ingest_seq.0, visible);
    tree.current.store(Arc::new(SuperVersion {
        mem: current.mem.clone(),
        imm: current.imm.clone(),
        version,
    }));
    drop(oracle);
    drop(versions);
    drop(writer);
    crate::db::background::notify(inner);
    if options.move_files {
        remove_sources(inner.fs.as_ref(), &checked)?;
    }
    Ok(())
}

/// After a move: removes the caller's names of the ingested files and
/// syncs their directories (a name that came back after a crash would
/// share a database file). Through the file system, whose removal keeps
/// each system's rules (on Windows the database now holds the file open
/// under its other name, and a directory cannot be opened to be synced).
fn remove_sources(fs: &dyn FileSystem, checked: &[Checked]) -> Result<()> {
    let mut dirs: Vec<&Path> = Vec::new();
    let names = checked.iter().flat_map(|file| {
        std::iter::once(&file.path).chain(file.blobs.iter().map(|(_, path)| path))
    });
    for path in names {
        fs.remove(path).map_err(|e| {
            let kind = match &e {
                Error::Io { source, .. } => source.kind(),
                _ => std::io::ErrorKind::Other,
            };
            Error::io(
                path,
                std::io::Error::new(
                    kind,
                    format!("the ingest took place, but its source could not be removed: {e}"),
                ),
            )
        })?;
        let dir = parent_dir(path);
        if !dirs.contains(&dir) {
            dirs.push(dir);
        }
    }
    for dir in dirs {
        fs.sync_dir(dir)?;
    }
    Ok(())
}

/// Whether `table` records `tree` as its keyspace: none for the default
/// keyspace, else its id and name.
fn records_keyspace(table: &Table, tree: &Tree) -> bool {
    match &table.properties().keyspace {
        None => tree.id == DEFAULT_KEYSPACE_ID,
        Some(recorded) => recorded.id == tree.id && recorded.name == tree.name,
    }
}

/// Opens `path` and checks it as an ingest needs: every block's checksum,
/// keys strictly ascending at sequence 0 (a `TableWriter` file), no range
/// tombstones.
fn check_file(fs: &SharedFs, path: &Path) -> Result<Checked> {
    let what = || format!("ingested file {}", path.display());
    let table = Table::open_with(fs, path)?;
    refuse_problems(&table, path)?;
    if table.range_tombstones().is_some() {
        return Err(Error::invalid(format!(
            "{} holds range tombstones (TableWriter files do not)",
            what()
        )));
    }
    let mut iter = table.iter_with(ScanMode::Sequential);
    iter.seek_to_first()?;
    let mut last: Option<Vec<u8>> = None;
    let mut smallest = None;
    while iter.valid() {
        let parsed = parse_internal_key(iter.key())?;
        if parsed.seq != SeqNo(0) {
            return Err(Error::invalid(format!(
                "{} holds sequence number {} (not a TableWriter file)",
                what(),
                parsed.seq.0
            )));
        }
        if parsed.kind == ValueKind::Merge {
            return Err(Error::invalid(format!(
                "{} holds a merge operand (not a TableWriter file)",
                what()
            )));
        }
        if last.as_deref().is_some_and(|l| l >= parsed.user_key) {
            return Err(Error::corruption(what(), "keys out of order"));
        }
        smallest.get_or_insert_with(|| parsed.user_key.to_vec());
        last = Some(parsed.user_key.to_vec());
        iter.next()?;
    }
    let (Some(smallest), Some(largest)) = (smallest, last) else {
        return Err(Error::invalid(format!("{} holds no key", what())));
    };
    Ok(Checked {
        path: path.to_path_buf(),
        blobs: source_blob_files(&table, path),
        table,
        smallest,
        largest,
    })
}

/// `Corruption` naming `path` when `table` fails any check of
/// [`Table::verify`] — a damaged filter too: in the database it would only
/// cost reads, but the file is not what its writer wrote.
fn refuse_problems(table: &Table, path: &Path) -> Result<()> {
    match table.verify().into_iter().next() {
        None => Ok(()),
        Some(problem) => Err(Error::corruption(
            format!("ingested file {}", path.display()),
            format!(
                "{} block at offset {}: {}",
                problem.block, problem.offset, problem.detail
            ),
        )),
    }
}

/// True when a memtable of `sv` holds a key in `file`'s range, or any
/// range tombstone.
fn memtables_overlap(sv: &SuperVersion, file: &Checked) -> bool {
    std::iter::once(&sv.mem).chain(&sv.imm).any(|m| {
        let from = internal_key(&file.smallest, SeqNo::MAX, ValueKind::SEEK);
        m.mem.has_range_tombstones()
            || m.mem
                .range_from(&from)
                .next()
                .is_some_and(|(key, _)| user_key_of(key) <= file.largest.as_slice())
    })
}

/// The deepest level above every level whose tables meet `file`'s range
/// (level 0 when level 0 does).
fn level_above_overlaps(sv: &SuperVersion, file: &Checked) -> usize {
    let first = sv
        .version
        .levels
        .iter()
        .position(|level| {
            level
                .iter()
                .any(|t| t.overlaps(&file.smallest, &file.largest))
        })
        .unwrap_or(LEVELS);
    first.saturating_sub(1)
}

/// Copies `from` to `to` (synced), or when `move_file` hard-links it,
/// copying when linking fails (e.g. across file systems). The caller's name
/// of a linked file is removed once the ingest is installed.
fn place_file(fs: &SharedFs, from: &Path, to: &Path, move_file: bool) -> Result<()> {
    let fs = fs.as_ref();
    if move_file && fs.hard_link(from, to).is_ok() {
        return Ok(());
    }
    crate::db::checkpoint::copy_file(fs, from, to, u64::MAX).map(drop)
}

/// Writes `table`'s entries to `to` with sequence number `seq` (built for
/// the keyspace's options).
fn rewrite_with_seq(
    inner: &DbInner,
    tree: &Tree,
    table: &Table,
    to: &Path,
    seq: SeqNo,
) -> Result<()> {
    let opts = tree.opts.load();
    let options = table_options_for(&opts, &tree.current.load().version.level_tables(), 0);
    let built = (|| {
        let mut builder = TableBuilder::create(inner.fs.as_ref(), to, &options)?;
        let mut iter = table.iter_with(ScanMode::Sequential);
        iter.seek_to_first()?;
        while iter.valid() {
            let parsed = parse_internal_key(iter.key())?;
            builder.add(
                &internal_key(parsed.user_key, seq, parsed.kind),
                &iter.value(),
            )?;
            iter.next()?;
        }
        builder.finish().map(|_| ())
    })();
    if built.is_err() {
        let _ = inner.fs.remove(to);
    }
    built
}
