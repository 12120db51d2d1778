//! The database: the public [`Db`] handle and the state its parts share.
//!
//! Owns: `Db` and `DbInner` — the current super-version (memtable,
//! immutable memtables, table version) that readers load without a lock.
//! Must never: let a read wait for a flush or a compaction, acknowledge a
//! write before it reached the log, or delete a file a durable manifest
//! still names.
//!
//! The parts: `open.rs` (creation and recovery), `write.rs` (group commit,
//! memtable rotation), `read.rs` (point lookups), `flush.rs` and
//! `compaction.rs` (background work in `background.rs`), `iter/` (merging
//! scans), `version.rs` (the live tables), `read_only.rs` (opening for
//! reads only), `checkpoint.rs` (consistent copies of a live database),
//! `close.rs` (closing, and the handles that outlive the `Db`),
//! `ingest.rs` (bulk load of sorted table files), `export.rs` (one
//! keyspace's tables linked out at a sequence number, and imported as a new
//! keyspace), `stats.rs` (counters and `Stats`), `super_version.rs` (what
//! a read of one keyspace loads), `checks.rs` (argument checks),
//! `keyspace.rs` (the public `Keyspace` handle) over `tree.rs` (one
//! keyspace's state). Siblings import each type from the file that
//! defines it; they reach this file only for `Db` and `DbInner`.

mod background;
mod checkpoint;
mod checks;
mod close;
mod compaction;
mod compare_and_swap;
pub(crate) mod export;
mod flush;
mod ingest;
mod iter;
mod keyspace;
mod keyspace_options;
mod latency;
#[cfg(feature = "metrics")]
pub(crate) mod metrics_bridge;
mod open;
mod oracle;
mod pacing;
mod read;
mod read_only;
mod small_runs;
mod snapshot;
mod stats;
mod stats_names;
mod super_version;
mod transaction;
mod transaction_scan;
mod tree;
mod verify;
mod version;
mod write;
mod write_set;

use std::ops::RangeBounds;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;
use bytes::Bytes;
use parking_lot::{Condvar, Mutex};

use crate::batch::{OpKind, RawBatch, WriteBatch};
use crate::error::{Error, Result};
use crate::fs::{DirLock, SharedFs};
use crate::key::SeqNo;
use crate::memtable::MemtableRangeStats;
use crate::options::{Options, WriteOptions};
use crate::table::ReadContext;
use compaction::CompactionScope;

/// Where `repair` has found it (defined with the log, below `db` and `inspect`).
pub(crate) use crate::wal::cut_short;
pub use checkpoint::CheckpointInfo;
pub(crate) use checkpoint::{discard_temp, remove_partial, temp_dir_of, CHECKPOINT_PARTIAL_FILE};
use checks::{check_key, check_merge_operator, check_value, check_writable};
pub use compare_and_swap::CompareAndSwap;
pub(crate) use flush::table_record;
pub use ingest::{IngestOptions, TableWriter};
#[cfg(feature = "tokio")]
pub(crate) use iter::owned_range;
pub use iter::DbIterator;
pub(crate) use iter::{InternalIterator, MemSource, MergingIter};
pub use keyspace::Keyspace;
pub use keyspace_options::KeyspaceOptions;
pub use latency::{HistogramStats, Histograms};
pub(crate) use open::LOCK_FILE;
pub use open::{ManifestRecovery, RecoveryReport};
pub use snapshot::Snapshot;
pub use stats::{FilterBuildStats, KeyspaceStats, Stats};
use super_version::SuperVersion;
pub use transaction::{Transaction, TransactionOptions};
pub use transaction_scan::TransactionIter;
pub use verify::VerifyStats;
pub(crate) use version::LEVELS;

use crate::events::TableMetadata;
use stats::DbCounters;
use tree::Tree;
use version::Version;

pub(crate) struct DbInner {
    pub dir: PathBuf,
    pub opts: Options,
    pub fs: SharedFs,
    /// The keyspace named `default` (also first in `trees`), kept apart so
    /// the methods of `Db` reach it without a lookup.
    pub default: Arc<Tree>,
    /// Every keyspace, `default` first, then in creation order. Replaced
    /// whole (under the writer and version locks) when one is created or
    /// dropped.
    pub trees: ArcSwap<Vec<Arc<Tree>>>,
    /// Highest sequence number whose write is complete and visible.
    pub last_visible: AtomicU64,
    pub writer: Mutex<write::WriterState>,
    pub queue: Mutex<write::WriteQueue>,
    pub queue_cv: Condvar,
    /// Write groups finished so far: what a waiting writer watches while it
    /// spins before it sleeps on `queue_cv` (see `write::write`).
    pub write_groups_finished: AtomicU64,
    /// Batches queued so far: what a leader watches while it waits for a
    /// batch to join its group (see `write::write`).
    pub writes_queued: AtomicU64,
    /// Live transactions' snapshots and recent commits' keys, for the
    /// conflict check at commit. Taken under the writer lock, never the
    /// other way round.
    pub oracle: Mutex<oracle::Oracle>,
    /// Serialises manifest writes and super-version publication.
    pub versions: Mutex<open::VersionSet>,
    pub bg: Mutex<background::BgState>,
    pub bg_cv: Condvar,
    /// The block cache, open-file cache and read counters every table shares.
    pub tables: Arc<ReadContext>,
    /// Set (for good) when corruption stopped all writes; the cause is in `bg`.
    pub writes_stopped: AtomicBool,
    /// Paces compactions' writes (`Options::compaction_bytes_per_sec`).
    pub pacer: Option<pacing::Pacer>,
    pub counters: DbCounters,
    /// Latency and size histograms (`Db::histograms`); scans hold them too.
    pub latency: Arc<latency::DbLatency>,
    /// Where background work's events go (`Options::add_event_listener`).
    pub events: crate::events::EventQueue,
    pub recovery: RecoveryReport,
    /// Live handles by kind (what `close` names).
    pub handles: close::HandleCounts,
    /// The directory lock: released when the last of the `Db` and its
    /// handles goes (a snapshot still reads the directory's tables).
    pub _lock: Box<dyn DirLock>,
}

impl DbInner {
    pub fn snapshot(&self) -> SeqNo {
        SeqNo(self.last_visible.load(Ordering::Acquire))
    }

    pub fn path_of(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// The live keyspace named `name`.
    pub fn tree_named(&self, name: &str) -> Option<Arc<Tree>> {
        self.trees.load().iter().find(|t| t.name == name).cloned()
    }

    /// The live keyspace with id `id`.
    pub fn tree_by_id(&self, id: u32) -> Option<Arc<Tree>> {
        if id == self.default.id {
            return Some(Arc::clone(&self.default));
        }
        self.trees.load().iter().find(|t| t.id == id).cloned()
    }

    /// Makes the keyspaces as published durable, but `change`'s tree with
    /// its new version and oldest needed log. The caller holds the version
    /// lock (so no other publication happens meanwhile).
    pub fn persist(
        &self,
        versions: &mut open::VersionSet,
        change: Option<(&Tree, &Version, u64)>,
    ) -> Result<()> {
        let trees = self.trees.load();
        let published: Vec<Arc<SuperVersion>> =
            trees.iter().map(|t| t.current.load_full()).collect();
        let parts: Vec<open::TreeState<'_>> = trees
            .iter()
            .zip(&published)
            .map(|(tree, sv)| match change {
                Some((changed, version, log_number)) if changed.id == tree.id => open::TreeState {
                    id: tree.id,
                    name: &tree.name,
                    version,
                    log_number,
                    settings: tree.given.lock().settings().clone(),
                },
                _ => open::TreeState {
                    id: tree.id,
                    name: &tree.name,
                    version: &sv.version,
                    log_number: sv.oldest_log(),
                    settings: tree.given.lock().settings().clone(),
                },
            })
            .collect();
        let last = SeqNo(self.last_visible.load(Ordering::Acquire));
        versions.persist(self.fs.as_ref(), &self.dir, &parts, last)
    }
}

/// An open siftdb database. `Send + Sync`: share it with `Arc`. Dropping it
/// stops background work, makes the log durable and releases the directory
/// lock before `drop` returns — unless a [`Snapshot`] of it is still alive,
/// which holds the directory until it goes. [`Db::close`] does the same and
/// reports what went wrong.
///
/// ```
/// use std::sync::Arc;
/// use siftdb::{Db, Options};
///
/// # let dir = tempfile::tempdir().unwrap();
/// let db = Arc::new(Db::open_with(dir.path(), Options::default())?);
/// let writers: Vec<_> = (0..4)
///     .map(|t| {
///         let db = Arc::clone(&db);
///         std::thread::spawn(move || db.put(format!("user/{t}"), b"active"))
///     })
///     .collect();
/// for w in writers {
///     w.join().unwrap()?;
/// }
/// let snapshot = db.snapshot();
/// db.delete(b"user/0")?;
/// assert_eq!(db.get(b"user/0")?, None);
/// // The snapshot still sees the database as it was.
/// assert!(snapshot.get(b"user/0")?.is_some());
/// let users: Vec<_> = db.prefix(b"user/").collect::<Result<_, _>>()?;
/// assert_eq!(users.len(), 3);
/// # Ok::<(), siftdb::Error>(())
/// ```
pub struct Db {
    inner: Arc<DbInner>,
    background: Vec<std::thread::JoinHandle<()>>,
    /// The thread that calls the event listeners, if any was added.
    events: Option<std::thread::JoinHandle<()>>,
    /// `close` (or a drop) has run.
    shut_down: bool,
}

impl Db {
    /// Opens (creating if missing) the database at `path` with default options.
    pub fn open(path: impl AsRef<Path>) -> Result<Db> {
        Db::open_with(path, Options::default())
    }

    /// Opens (creating if missing) the database at `path`; with
    /// [`Options::read_only`], opens an existing one for reading only.
    pub fn open_with(path: impl AsRef<Path>, opts: Options) -> Result<Db> {
        let read_only = opts.read_only;
        let inner = Arc::new(if read_only {
            read_only::open(path.as_ref(), opts)?
        } else {
            open::open(path.as_ref(), opts)?
        });
        // Before the background threads, so their first events are delivered.
        let events = if read_only {
            None
        } else {
            inner.events.start(&inner.opts.event_listeners)?
        };
        // A read-only open starts no background work at all.
        let background = if read_only {
            Vec::new()
        } else {
            match background::spawn(&inner) {
                Ok(threads) => threads,
                Err(e) => {
                    // No listener has run: no panic to report.
                    let _ = stop_events(&inner, events);
                    return Err(e);
                }
            }
        };
        let mut db = Db {
            inner,
            background,
            events,
            shut_down: false,
        };
        if let (false, Some(interval)) = (read_only, db.inner.opts.sync_interval) {
            // On failure the database is closed again as it is dropped.
            let inner = Arc::clone(&db.inner);
            let syncer = std::thread::Builder::new()
                .name("siftdb-sync".into())
                .spawn(move || write::sync_periodically(&inner, interval))?;
            db.background.push(syncer);
        }
        if !read_only {
            // A level 0 at the stop trigger (left by short-lived writers,
            // each of whose opens adds a table) is compacted before the
            // open returns.
            background::wait_for_level0_at_open(&db.inner);
        }
        Ok(db)
    }

    /// Opens the database at `path` for reading only, with default options
    /// (see [`Options::read_only`]): creates, changes and deletes nothing,
    /// needs no write permission, and works beside a process that has the
    /// database open for writing; reads see it as of the open.
    pub fn open_read_only(path: impl AsRef<Path>) -> Result<Db> {
        Db::open_with(path, Options::default().read_only(true))
    }

    /// `ReadOnly` when the database was opened read-only.
    fn check_writable(&self) -> Result<()> {
        check_writable(&self.inner)
    }

    /// Stores `value` under `key`.
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        self.put_with(key, value, WriteOptions::new())
    }

    /// Removes `key` (a no-op when absent).
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        self.delete_with(key, WriteOptions::new())
    }

    /// Merges `operand` into `key`'s value with the merge operator
    /// ([`Options::merge_operator`]; `InvalidArgument` without one): no read
    /// of the value now — a read, or a compaction, applies the operands
    /// later. A one-operation batch: see [`WriteBatch::merge`].
    pub fn merge(&self, key: impl AsRef<[u8]>, operand: impl AsRef<[u8]>) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.merge(key, operand);
        self.write(batch)
    }

    /// [`Db::put`] with options of its own (see [`Db::write_with`]): with
    /// [`WriteOptions::sync`]`(true)` the value is on disk before this
    /// returns, whatever [`Options::sync_writes`] says.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// use siftdb::{Db, WriteOptions};
    /// let db = Db::open(dir.path())?;
    /// db.put_with("order:17", "paid", WriteOptions::new().sync(true))?;
    /// assert_eq!(db.stats().log_syncs, 1);
    /// db.put("cart:17", "3 items")?; // not synced by default
    /// assert_eq!(db.stats().log_syncs, 1);
    /// # Ok::<(), siftdb::Error>(())
    /// ```
    pub fn put_with(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        options: WriteOptions,
    ) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.put(key, value);
        self.write_with(batch, options)
    }

    /// [`Db::delete`] with options of its own (see [`Db::put_with`]).
    pub fn delete_with(&self, key: impl AsRef<[u8]>, options: WriteOptions) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.delete(key);
        self.write_with(batch, options)
    }

    /// Deletes every key in `range` (any [`RangeBounds`]: `a..b`, `a..=b`,
    /// `a..`, `..b`, `..`, or a pair of [`std::ops::Bound`]s) with one range
    /// tombstone: one log record and one sequence number, whatever the
    /// number of keys. Gets, `multi_get`, scans in both directions and
    /// snapshots taken after it see none of the keys; a snapshot taken
    /// before it still sees them, and keys written after it are not
    /// deleted. Compaction later drops the keys it covers.
    ///
    /// A range holding no key (`a..a`) is a no-op; a reversed range (`b..a`)
    /// or a bound longer than [`crate::MAX_KEY_LEN`] is `InvalidArgument`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = siftdb::Db::open(dir.path())?;
    /// for i in 0..10 {
    ///     db.put(format!("user:{i}"), "x")?;
    /// }
    /// let before = db.snapshot();
    /// db.delete_range("user:3".."user:7")?;
    /// assert_eq!(db.get("user:5")?, None);
    /// assert_eq!(db.iter().count(), 6);
    /// assert!(db.get("user:7")?.is_some());
    /// assert!(before.get("user:5")?.is_some()); // the snapshot still sees it
    /// assert!(db.delete_range("b".."a").is_err()); // reversed
    /// db.delete_range("a".."a")?; // empty: nothing to do
    /// # Ok::<(), siftdb::Error>(())
    /// ```
    pub fn delete_range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Result<()> {
        match crate::range_tombstone::normalize_range(&range)? {
            None => Ok(()),
            Some((start, end)) => {
                let mut batch = WriteBatch::new();
                batch.push_range_delete(0, &start, end.as_deref());
                self.write(batch)
            }
        }
    }

    /// Applies every operation of `batch`, in order, atomically (across
    /// keyspaces too: see [`WriteBatch::put_in`]).
    pub fn write(&self, batch: WriteBatch) -> Result<()> {
        self.write_with(batch, WriteOptions::new())
    }

    /// [`Db::write`] with options of its own: with
    /// [`WriteOptions::sync`]`(true)` the batch is on disk before this
    /// returns, whatever [`Options::sync_writes`] says.
    pub fn write_with(&self, batch: WriteBatch, options: WriteOptions) -> Result<()> {
        Db::write_batch(&self.inner, batch, options)
    }

    /// What [`Db::write_with`] does, for `Db` and its keyspaces.
    pub(crate) fn write_batch(
        inner: &DbInner,
        batch: WriteBatch,
        options: WriteOptions,
    ) -> Result<()> {
        Db::write_checked(inner, batch, options, None)
    }

    /// [`Db::write_batch`] of a transaction's commit, written only if the
    /// oracle finds no conflict with `check`.
    fn write_checked(
        inner: &DbInner,
        batch: WriteBatch,
        options: WriteOptions,
        check: Option<oracle::ConflictCheck>,
    ) -> Result<()> {
        check_writable(inner)?;
        let mut known = inner.default.id;
        batch.check_ranges()?;
        for op in batch.iter() {
            check_key(op.key)?;
            check_value(op.value)?;
            if op.keyspace != known {
                // A batch's keyspaces are few: each is looked up when it
                // first follows another.
                let tree = inner.tree_by_id(op.keyspace).ok_or_else(|| {
                    Error::invalid(format!(
                        "the batch writes to keyspace id {}, which this database does not \
                         have (dropped, or a keyspace of another database)",
                        op.keyspace
                    ))
                })?;
                tree.check_live()?;
                known = op.keyspace;
            }
            if op.kind == OpKind::Merge {
                check_merge_operator(inner, op.keyspace)?;
            }
        }
        let sync = options.sync_or(inner.opts.sync_writes);
        if batch.is_empty() {
            // Nothing to log; a sync asked for still covers the writes before.
            return if sync { write::persist(inner) } else { Ok(()) };
        }
        write::write(inner, batch, sync, check)
    }

    /// Makes every write acknowledged so far durable: the log is synced
    /// (fsync), no memtable is flushed. With writes that are not synced
    /// one by one, this is the point after which a machine crash loses
    /// none of them.
    pub fn persist(&self) -> Result<()> {
        self.check_writable()?;
        write::persist(&self.inner)
    }

    /// The latest value of `key`, or `None`.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Bytes>> {
        let key = key.as_ref();
        check_key(key)?;
        read::get(&self.inner, &self.inner.default, key)
    }

    /// False when `key` certainly has no value now; true when it may have
    /// one — answered from memory alone, never reading a data block
    /// (RocksDB's `KeyMayExist`): the memtables answer exactly, then each
    /// table that could hold the key is asked its filter. A true answer
    /// may be a filter's false positive (about 1% of absent keys at the
    /// default 10 bits per key) or a key deleted in a table; a false
    /// answer is never wrong. For deduplication and existence checks that
    /// mostly meet new keys: [`Db::get`] only for the few true answers.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = siftdb::Db::open(dir.path())?;
    /// db.put("seen:a", "")?;
    /// db.flush()?;
    /// assert!(db.key_may_exist("seen:a"));
    /// let new_ones = (0..1000).filter(|i| !db.key_may_exist(format!("seen:{i}"))).count();
    /// assert!(new_ones > 950); // ruled out by the filter, no read
    /// # Ok::<(), siftdb::Error>(())
    /// ```
    pub fn key_may_exist(&self, key: impl AsRef<[u8]>) -> bool {
        read::key_may_exist(&self.inner, &self.inner.default, key.as_ref())
    }

    /// The values of many keys as of one moment, in the order asked: for
    /// each key what [`Db::get`] would answer at that moment (`None` for a
    /// key never written or deleted). Each table's filter is asked for all
    /// of its keys in one batch, which overlaps their memory loads.
    pub fn multi_get<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<Option<Bytes>>> {
        let keys: Vec<&[u8]> = keys.iter().map(AsRef::as_ref).collect();
        for key in &keys {
            check_key(key)?;
        }
        read::multi_get(&self.inner, &self.inner.default, &keys)
    }

    /// Every entry, in ascending key order, as of now.
    pub fn iter(&self) -> DbIterator {
        iter::DbIterator::new(
            &self.inner,
            &self.inner.default,
            (std::ops::Bound::Unbounded, std::ops::Bound::Unbounded),
        )
    }

    /// Entries whose keys fall in `range`, ascending, as of now.
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> DbIterator {
        iter::DbIterator::new(&self.inner, &self.inner.default, iter::owned_range(range))
    }

    /// About how many bytes of disk the keys of the default keyspace in
    /// `range` take in its tables (memtables not counted: see
    /// [`Db::approximate_memtable_stats`]): see [`Keyspace::approximate_size`].
    pub fn approximate_size<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Result<u64> {
        self.default_keyspace().approximate_size(range)
    }

    /// About how many entries of the default keyspace in `range` are in
    /// its memtables, not flushed yet, and their bytes: see
    /// [`Keyspace::approximate_memtable_stats`].
    pub fn approximate_memtable_stats<K: AsRef<[u8]>, R: RangeBounds<K>>(
        &self,
        range: R,
    ) -> Result<MemtableRangeStats> {
        self.default_keyspace().approximate_memtable_stats(range)
    }

    /// Entries whose keys start with `prefix`, ascending, as of now.
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> DbIterator {
        iter::DbIterator::new(
            &self.inner,
            &self.inner.default,
            iter::prefix_range(prefix.as_ref()),
        )
    }

    /// The entry with the smallest key, as of now (`None` when empty).
    pub fn first_key_value(&self) -> Result<Option<(Bytes, Bytes)>> {
        self.iter().next().transpose()
    }

    /// The entry with the largest key, as of now (`None` when empty): one
    /// backward step, no forward scan.
    pub fn last_key_value(&self) -> Result<Option<(Bytes, Bytes)>> {
        self.iter().next_back().transpose()
    }

    /// A consistent read view as of now, for any number of reads (see
    /// [`Snapshot`]); later writes, flushes and compactions do not change
    /// what it shows.
    pub fn snapshot(&self) -> Snapshot {
        Snapshot::new(&self.inner)
    }

    /// Turns the memtables of every keyspace into tables now; returns when
    /// they are durable.
    pub fn flush(&self) -> Result<()> {
        Db::flush_inner(&self.inner)
    }

    /// What [`Db::flush`] does, for `Db` and its keyspaces.
    pub(crate) fn flush_inner(inner: &DbInner) -> Result<()> {
        check_writable(inner)?;
        write::rotate_if_nonempty(inner)?;
        background::wait_for_flushes(inner)
    }

    /// Flushes, then compacts every table of each keyspace into one sorted
    /// run at the deepest level it uses; returns when done (one keyspace:
    /// [`Keyspace::compact`]). Refused with `Corruption` naming the table
    /// while a table could not be opened (see
    /// [`RecoveryReport::damaged_tables`]; `siftdb repair` salvages it).
    pub fn compact(&self) -> Result<()> {
        Db::compact_inner(&self.inner, CompactionScope::All)
    }

    /// [`Db::compact`] for the default keyspace's keys in `range` only
    /// (RocksDB's `CompactRange` with bounds; [`Keyspace::compact_range`]
    /// for another keyspace): flushes, then merges the tables holding keys
    /// in `range`, with every table they overlap, into one sorted run at
    /// the deepest level among them; returns when done. Tables wholly
    /// outside the range stay as they are; a table reaching past an end of
    /// the range is merged whole. An empty range compacts nothing.
    pub fn compact_range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Result<()> {
        let scope = CompactionScope::Range(self.inner.default.id, iter::owned_range(range));
        Db::compact_inner(&self.inner, scope)
    }

    /// What the compact calls do: flush, refuse while a table `scope` takes
    /// from could not be opened, then the full compaction of `scope`,
    /// waited for.
    pub(crate) fn compact_inner(inner: &DbInner, scope: CompactionScope) -> Result<()> {
        Db::flush_inner(inner)?;
        for tree in inner.trees.load().iter() {
            if scope.takes_from(tree.id) {
                tree.check_undamaged()?;
            }
        }
        background::request_full_compaction(inner, scope)
    }

    /// Waits until no flush or automatic compaction is pending; the error
    /// of failed background work (which is retried by itself when the error
    /// is retryable, see [`Db::resume`]).
    pub fn wait_for_background(&self) -> Result<()> {
        if self.inner.opts.read_only {
            return Ok(());
        }
        background::wait_for_idle(&self.inner)
    }

    /// Every table of every keyspace now (RocksDB's
    /// `GetLiveFilesMetaData`): keyspaces in the order they were made, each
    /// level by level, level 0 newest first, deeper levels in key order.
    /// From memory, no file read. For tools that watch how data is laid
    /// out, or copy tables elsewhere (a file listed here stays until a
    /// compaction replaces it: use [`Db::checkpoint`] for a copy that
    /// holds).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = siftdb::Db::open(dir.path())?;
    /// db.put("a", "1")?;
    /// db.put("z", "2")?;
    /// db.flush()?;
    /// let tables = db.live_tables();
    /// assert_eq!(tables.len(), 1);
    /// assert_eq!((tables[0].level, tables[0].entries), (0, 2));
    /// assert_eq!((&tables[0].smallest_key[..], &tables[0].largest_key[..]), (&b"a"[..], &b"z"[..]));
    /// # Ok::<(), siftdb::Error>(())
    /// ```
    pub fn live_tables(&self) -> Vec<TableMetadata> {
        self.inner
            .trees
            .load()
            .iter()
            .flat_map(|tree| tree.live_tables())
            .collect()
    }

    /// Reads every live table of every keyspace from its file again and
    /// checks it whole — every block's checksum and structure, key order,
    /// the index, the properties, and that the filters hold every key — as
    /// RocksDB's `VerifyChecksum`: a scrub of a live database, while reads
    /// and writes go on. The block cache is neither used nor filled. Data
    /// still in memtables is not checked (it is in the log, whose records
    /// were checked when it was replayed).
    ///
    /// `Ok` with what was checked, and the problems that leave reads right
    /// (a damaged filter) as warnings; `Corruption` naming the first table
    /// with an error (`siftdb repair` salvages what is readable).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = siftdb::Db::open(dir.path())?;
    /// db.put("k", "v")?;
    /// db.flush()?;
    /// let checked = db.verify_checksums()?;
    /// assert_eq!((checked.tables, checked.warnings.len()), (1, 0));
    /// # Ok::<(), siftdb::Error>(())
    /// ```
    pub fn verify_checksums(&self) -> Result<VerifyStats> {
        verify::verify_trees(self.inner.trees.load().iter())
    }

    /// Retries failed background work now — a failed flush or log (writes
    /// are refused with [`Error::ReadOnly`] meanwhile) and a failed
    /// compaction — and returns when the retry is done: `Ok` when nothing is
    /// failing any more, the new error otherwise. Retryable I/O errors (no
    /// space, EIO, EINTR) are also retried by themselves, with backoff from
    /// [`Options::retry_interval`]; other I/O errors and caught panics wait
    /// for this call. Corruption is not retried: `ReadOnly` until reopened.
    pub fn resume(&self) -> Result<()> {
        self.check_writable()?;
        background::resume(&self.inner)
    }

    /// What `open` found while recovering (records replayed, a torn log tail).
    pub fn recovery_report(&self) -> &RecoveryReport {
        &self.inner.recovery
    }

    /// The directory this database lives in.
    pub fn path(&self) -> &Path {
        &self.inner.dir
    }
}

impl Db {
    /// Stops background work and closes the log; idempotent (the second
    /// call finds no threads and a closed log).
    fn shut_down(&mut self) -> Result<()> {
        if self.shut_down {
            return Ok(());
        }
        self.shut_down = true;
        background::shutdown(&self.inner);
        let mut panicked = None;
        for handle in self.background.drain(..) {
            if let Err(payload) = handle.join() {
                panicked.get_or_insert_with(|| background::panic_message(payload.as_ref()));
            }
        }
        // The background threads have sent their last events.
        if let Err(message) = stop_events(&self.inner, self.events.take()) {
            panicked.get_or_insert(message);
        }
        // Make what reached the OS durable too, so a clean close loses nothing
        // even to a machine crash right after it, and mark the log closed.
        let closed = if self.inner.opts.read_only {
            Ok(())
        } else {
            write::close_log(&self.inner)
        };
        let standing = background::standing_failure(&self.inner);
        closed?;
        if let Some(message) = panicked {
            return Err(Error::Panicked(message));
        }
        standing
    }
}

/// Stops the event thread once it delivered what was sent: `Err` with the
/// message of a listener's panic. Not joined from the event thread itself
/// (a listener that closes the database it watches).
fn stop_events(
    inner: &DbInner,
    thread: Option<std::thread::JoinHandle<()>>,
) -> std::result::Result<(), String> {
    let Some(thread) = thread else {
        return Ok(());
    };
    inner.events.stop();
    if thread.thread().id() == std::thread::current().id() {
        return Ok(());
    }
    thread.join().map_err(|payload| {
        format!(
            "an event listener panicked: {}",
            background::panic_text(payload.as_ref())
        )
    })
}

impl Drop for Db {
    fn drop(&mut self) {
        // `close` reports this error; a plain drop has nowhere to put it.
        let _ = self.shut_down();
    }
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db").field("dir", &self.inner.dir).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn db_is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Db>();
    }
}
