//! Bulk load: [`TableWriter`] writes sorted keys to a table file, and
//! [`Db::ingest`] adds such files to a live database without rewriting
//! them when it can.
//!
//! Owns: [`TableWriter`], [`IngestOptions`], the checks an ingested file
//! passes, where it is placed, and the one manifest edit that adds them.
//! Must never: add part of an ingest (all files are named by one manifest
//! edit, or none is), change the database when a file is refused, let an
//! ingested key hide behind an older version of it, or let a snapshot taken
//! before the ingest see its keys.
//!
//! A `TableWriter` file holds each key once, at sequence number 0. Placed
//! where nothing of the keyspace overlaps it (no memtable entry or range
//! tombstone, no table at any level) it goes to the deepest level as it is
//! — linked, or moved — since sequence 0 is then older than nothing it
//! meets. When it overlaps tables, it must be newer than every write: it is
//! rewritten with the next sequence number (one above every write; the
//! writer lock is held meanwhile) and placed at the deepest level above
//! every level it overlaps. When it overlaps a memtable, the memtables are
//! flushed first (reads ask the memtable before any table). A table records
//! its keyspace (what `repair` goes by): a file whose record is not the
//! keyspace's — a `TableWriter::create` file (the default keyspace's) into
//! another keyspace — is rewritten too (at its sequence number); a file of
//! that keyspace's own `Keyspace::table_writer` is placed as it is.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::db::flush::{open_live_table, table_options_for, PendingOutputs};
use crate::db::version::LiveTable;
use crate::db::{check_key, check_value, write, Db, DbInner, Keyspace, SuperVersion, Tree, LEVELS};
use crate::error::{Error, Result};
use crate::filename::table_file_name;
use crate::filter::LevelTables;
use crate::fs::{OsFileSystem, SharedFs};
use crate::key::{internal_key, parse_internal_key, user_key_of, SeqNo, ValueKind};
use crate::manifest::{TableRecord, DEFAULT_KEYSPACE_ID};
use crate::options::Options;
use crate::table::{ScanMode, Severity, Table, TableBuilder};

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
pub struct TableWriter {
    builder: TableBuilder,
    last: Option<Vec<u8>>,
    key: Vec<u8>,
}

impl std::fmt::Debug for TableWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableWriter")
            .field("builder", &self.builder)
            .finish_non_exhaustive()
    }
}

impl TableWriter {
    /// Creates (truncating) the table file at `path`, built with `options`'
    /// block size, compression and filter policy (as for the deepest level).
    pub fn create(path: impl AsRef<Path>, options: &Options) -> Result<TableWriter> {
        let fs = OsFileSystem::shared();
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
        Ok(TableWriter {
            builder: TableBuilder::create(fs.as_ref(), path.as_ref(), &table_options)?,
            last: None,
            key: Vec::new(),
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
        self.key.clear();
        self.key
            .extend_from_slice(&internal_key(key, SeqNo(0), kind));
        self.builder.add(&self.key, value)?;
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

    /// Finishes the file (synced); returns its size in bytes. A writer
    /// given no key is refused (`InvalidArgument`).
    pub fn finish(self) -> Result<u64> {
        Ok(self.builder.finish()?.file_size)
    }
}

/// How [`Db::ingest`] takes the files.
#[derive(Debug, Clone, Copy, Default)]
pub struct IngestOptions {
    move_files: bool,
}

impl IngestOptions {
    /// Hard-links the files (copies them across file systems); the
    /// originals stay.
    pub fn new() -> IngestOptions {
        IngestOptions::default()
    }

    /// Moves the files into the database (renamed; copied and then removed
    /// across file systems) instead of linking them.
    pub fn move_files(mut self, yes: bool) -> Self {
        self.move_files = yes;
        self
    }
}

/// A file checked for ingest.
struct Checked {
    path: PathBuf,
    table: Table,
    smallest: Vec<u8>,
    largest: Vec<u8>,
}

impl Db {
    /// Adds table files written by [`TableWriter`] to the default keyspace,
    /// atomically: after it returns every key of every file is there, and
    /// after a crash either all are or none is. Every file is checked first
    /// (every block's checksum, keys ascending, written by `TableWriter`,
    /// files not overlapping each other); a refused ingest leaves the
    /// database unchanged. Snapshots and iterators taken before do not see
    /// the ingested keys; reads after see them over every older write.
    ///
    /// Files whose keys meet nothing in the keyspace are linked (or moved)
    /// in as they are; files that overlap its tables are rewritten once
    /// with a new sequence number (writes wait meanwhile), and overlapping
    /// memtables are flushed first.
    pub fn ingest<P: AsRef<Path>>(&self, files: &[P], options: IngestOptions) -> Result<()> {
        ingest(&self.inner, &self.inner.default, files, options)
    }
}

impl Keyspace {
    /// [`Db::ingest`] into this keyspace. Files of this keyspace's
    /// [`Keyspace::table_writer`] that meet nothing in it are linked (or
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
    // The sequence number of the ingested entries: 0 when they meet
    // nothing, else one above every write.
    let seq = if overlaps_tables {
        writer.last_seq.next()
    } else {
        SeqNo(0)
    };
    // A file goes in as it is when it meets nothing and records this
    // keyspace; otherwise it is rewritten (see the module doc).
    let as_is = |file: &Checked| seq == SeqNo(0) && records_keyspace(&file.table, tree);
    let mut added: Vec<Arc<LiveTable>> = Vec::new();
    let placed = (|| {
        for file in &checked {
            let level = if overlaps_tables {
                level_above_overlaps(&sv, file)
            } else {
                LEVELS - 1
            };
            let number = versions.new_file_number();
            let to = inner.path_of(&table_file_name(number));
            // A file recording another keyspace is rewritten, so its table
            // records this one (what `repair` goes by when the manifest is
            // lost).
            if as_is(file) {
                place_file(&inner.fs, &file.path, &to, options.move_files)?;
            } else {
                rewrite_with_seq(inner, tree, &file.table, &to, seq)?;
            }
            let table = Table::open_with(&inner.fs, &to)?;
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
            added.push(open_live_table(&inner.tables, &inner.dir, record)?);
        }
        inner.fs.sync_dir(&inner.dir)
    })();
    let remove_added = |added: &[Arc<LiveTable>]| {
        for table in added {
            let _ = inner
                .fs
                .remove(&inner.path_of(&table_file_name(table.file_number())));
        }
    };
    if let Err(e) = placed {
        remove_added(&added);
        return Err(e);
    }
    if seq != SeqNo(0) {
        writer.last_seq = seq;
        inner.last_visible.store(seq.0, Ordering::Release);
    }
    let current = sv;
    let version = Arc::new(current.version.apply(&[], added.clone()));
    if let Err(e) = inner.persist(&mut versions, Some((tree, &version, current.oldest_log()))) {
        drop(versions);
        remove_added(&added);
        return Err(e);
    }
    tree.current.store(Arc::new(SuperVersion {
        mem: current.mem.clone(),
        imm: current.imm.clone(),
        version,
    }));
    drop(versions);
    drop(writer);
    if options.move_files {
        // Files rewritten rather than moved: their sources go now.
        for file in &checked {
            if !as_is(file) {
                let _ = std::fs::remove_file(&file.path);
            }
        }
    }
    crate::db::background::notify(inner);
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
    if let Some(problem) = table
        .verify()
        .into_iter()
        .find(|p| p.severity == Severity::Error)
    {
        return Err(Error::corruption(
            what(),
            format!(
                "{} block at offset {}: {}",
                problem.block, problem.offset, problem.detail
            ),
        ));
    }
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
        table,
        smallest,
        largest,
    })
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

/// Links (or, when `move_file`, renames) `from` to `to`; copies across file
/// systems (removing `from` after a move).
fn place_file(fs: &SharedFs, from: &Path, to: &Path, move_file: bool) -> Result<()> {
    let fs = fs.as_ref();
    let done = if move_file {
        fs.rename(from, to)
    } else {
        fs.hard_link(from, to)
    };
    if done.is_ok() {
        return Ok(());
    }
    crate::db::checkpoint::copy_file(fs, from, to, u64::MAX)?;
    if move_file {
        fs.remove(from)?;
    }
    Ok(())
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
