//! The database: the public [`Db`] handle's opening and key-value calls,
//! and the names this folder gives the rest of the crate.
//!
//! Owns: `Db::open` and the calls on the default keyspace. Must never: let
//! a read wait for a flush or a compaction, acknowledge a write before it
//! reached the log, or delete a file a durable manifest still names.
//!
//! The parts: `handle.rs` (the `Db` struct) over `inner.rs` (`DbInner`,
//! the state every part shares), which holds states defined below it
//! (`write_queue.rs`, `background_state.rs`, `version_set.rs`,
//! `counters.rs`, `handle_counts.rs`, `recovery_report.rs`, `oracle.rs`,
//! `pacing.rs`, `tree.rs`: one keyspace's state); `open.rs` (creation and
//! recovery), `write.rs` (checks, group commit, memtable rotation),
//! `read.rs` (point lookups), `flush.rs` and `compaction.rs` (background
//! work in `background.rs`; what callers ask for and wait on in
//! `manual.rs`), `iter/` (merging scans), `version.rs` (the live tables),
//! `read_only.rs` (opening for reads only), `secondary/` (a reader
//! that follows another process's writes), `locking/` (row locks of
//! locking transactions), `checkpoint.rs` (consistent
//! copies of a live database), `close.rs` (closing), `ingest.rs` (bulk
//! load of sorted table files), `export.rs` (one keyspace's tables linked
//! out at a sequence number, and imported as a new keyspace), `stats.rs`
//! (`Stats`), `super_version.rs` (what a read of one keyspace loads),
//! `checks.rs` (argument checks), `keyspace.rs` (the public `Keyspace`
//! handle), `keyspace_ref.rs` (the key-value calls `Db` and `Keyspace`
//! share). Every arrow points down: each file imports each type from the
//! file that defines it, and no file of this folder imports this one.

mod background;
mod background_state;
mod blob_garbage;
mod blob_output;
mod checkpoint;
mod checks;
mod close;
mod compaction;
mod compaction_blobs;
mod compaction_scope;
mod compare_and_swap;
mod counters;
pub(crate) mod export;
mod flush;
mod handle;
mod handle_counts;
mod ingest;
mod ingest_blobs;
mod inner;
mod insert_slot;
mod iter;
mod keyspace;
mod keyspace_options;
mod keyspace_ref;
mod latency;
mod locking;
mod manual;
#[cfg(feature = "metrics")]
pub(crate) mod metrics_bridge;
mod open;
mod oracle;
mod pacing;
mod read;
mod read_only;
mod recovery_report;
pub(crate) mod secondary;
mod small_runs;
mod snapshot;
mod stats;
mod stats_names;
mod super_version;
mod transaction;
mod transaction_scan;
mod tree;
mod verify;
mod verify_blobs;
mod version;
mod version_set;
mod write;
mod write_insert;
mod write_queue;
mod write_set;

use std::ops::RangeBounds;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;

use crate::batch::WriteBatch;
use crate::error::Result;
use crate::memtable::MemtableRangeStats;
use crate::options::{Options, WriteOptions};
use compaction_scope::CompactionScope;
use keyspace_ref::KeyspaceRef;

/// Where `repair` has found it (defined with the log, below `db` and `inspect`).
pub(crate) use crate::wal::cut_short;
pub use checkpoint::CheckpointInfo;
pub(crate) use checkpoint::{discard_temp, remove_partial, temp_dir_of, CHECKPOINT_PARTIAL_FILE};
use checks::check_writable;
pub use compare_and_swap::CompareAndSwap;
pub(crate) use flush::table_record;
pub use handle::Db;
pub use ingest::{IngestOptions, TableWriter};
#[cfg(feature = "tokio")]
pub(crate) use iter::owned_range;
pub use iter::DbIterator;
pub(crate) use iter::{InternalIterator, MemSource, MergingIter};
pub use keyspace::Keyspace;
pub use keyspace_options::KeyspaceOptions;
pub use latency::{HistogramStats, Histograms};
pub(crate) use open::LOCK_FILE;
pub use recovery_report::{ManifestRecovery, RecoveryReport};
pub use snapshot::Snapshot;
pub use stats::{FilterBuildStats, KeyspaceStats, Stats};
pub use transaction::{Transaction, TransactionOptions};
pub use transaction_scan::TransactionIter;
pub use verify::VerifyStats;
pub(crate) use version::LEVELS;

use crate::events::TableMetadata;

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
                    let _ = close::stop_events(&inner, events);
                    return Err(e);
                }
            }
        };
        if !read_only {
            write::join_write_buffer(&inner);
        }
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

    /// The default keyspace, borrowed for one key-value call (written once,
    /// in `keyspace_ref.rs`, for `Keyspace` too).
    fn default_ref(&self) -> KeyspaceRef<'_> {
        KeyspaceRef {
            inner: &self.inner,
            tree: &self.inner.default,
        }
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
        self.default_ref().merge(key.as_ref(), operand.as_ref())
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
        self.default_ref()
            .put_with(key.as_ref(), value.as_ref(), options)
    }

    /// [`Db::delete`] with options of its own (see [`Db::put_with`]).
    pub fn delete_with(&self, key: impl AsRef<[u8]>, options: WriteOptions) -> Result<()> {
        self.default_ref().delete_with(key.as_ref(), options)
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
        self.default_ref().delete_range(range)
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
        write::write_batch(&self.inner, batch, options)
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
        self.default_ref().get(key.as_ref())
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
        self.default_ref().key_may_exist(key.as_ref())
    }

    /// The values of many keys as of one moment, in the order asked: for
    /// each key what [`Db::get`] would answer at that moment (`None` for a
    /// key never written or deleted). Each table's filter is asked for all
    /// of its keys in one batch, which overlaps their memory loads.
    pub fn multi_get<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<Option<Bytes>>> {
        self.default_ref().multi_get(keys)
    }

    /// Every entry, in ascending key order, as of now.
    pub fn iter(&self) -> DbIterator {
        self.default_ref().iter()
    }

    /// Entries whose keys fall in `range`, ascending, as of now.
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> DbIterator {
        self.default_ref().range(range)
    }

    /// About how many bytes of disk the keys of the default keyspace in
    /// `range` take in its tables (memtables not counted: see
    /// [`Db::approximate_memtable_stats`]): see [`Keyspace::approximate_size`].
    pub fn approximate_size<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Result<u64> {
        self.default_ref().approximate_size(range)
    }

    /// About how many entries of the default keyspace in `range` are in
    /// its memtables, not flushed yet, and their bytes: see
    /// [`Keyspace::approximate_memtable_stats`].
    pub fn approximate_memtable_stats<K: AsRef<[u8]>, R: RangeBounds<K>>(
        &self,
        range: R,
    ) -> Result<MemtableRangeStats> {
        self.default_ref().approximate_memtable_stats(range)
    }

    /// Entries whose keys start with `prefix`, ascending, as of now.
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> DbIterator {
        self.default_ref().prefix(prefix.as_ref())
    }

    /// The entry with the smallest key, as of now (`None` when empty).
    pub fn first_key_value(&self) -> Result<Option<(Bytes, Bytes)>> {
        self.default_ref().first_key_value()
    }

    /// The entry with the largest key, as of now (`None` when empty): one
    /// backward step, no forward scan.
    pub fn last_key_value(&self) -> Result<Option<(Bytes, Bytes)>> {
        self.default_ref().last_key_value()
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
        manual::flush(&self.inner)
    }

    /// Flushes, then compacts every table of each keyspace into one sorted
    /// run at the deepest level it uses; returns when done (one keyspace:
    /// [`Keyspace::compact`]). Refused with `Corruption` naming the table
    /// while a table could not be opened (see
    /// [`RecoveryReport::damaged_tables`]; `siftdb repair` salvages it).
    pub fn compact(&self) -> Result<()> {
        manual::compact(&self.inner, CompactionScope::All)
    }

    /// [`Db::compact`] for the default keyspace's keys in `range` only
    /// (RocksDB's `CompactRange` with bounds; [`Keyspace::compact_range`]
    /// for another keyspace): flushes, then merges the tables holding keys
    /// in `range`, with every table they overlap, into one sorted run at
    /// the deepest level among them; returns when done. Tables wholly
    /// outside the range stay as they are; a table reaching past an end of
    /// the range is merged whole. An empty range compacts nothing.
    pub fn compact_range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Result<()> {
        self.default_ref().compact_range(range)
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
    /// are refused with [`Error::ReadOnly`](crate::Error::ReadOnly) meanwhile) and a failed
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn db_is_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Db>();
    }
}
