//! Tuning knobs for a database, set with builder methods.
//!
//! Owns: `Options` and its defaults.
//! Must never: accept a value that would make the engine misbehave silently —
//! `validate` turns nonsense into `InvalidArgument` before anything opens.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::events::EventListener;
use crate::fs::{OsFileSystem, SharedFs};
use crate::prefix::PrefixExtractor;
use crate::shared::{Cache, RateLimiter, WriteBufferManager};
use siftdb_filter::FilterPolicy;

pub use crate::compression::Compression;
pub use crate::write_options::WriteOptions;

/// Database options. Start from `Options::default()` and chain builder methods.
///
/// ```
/// use siftdb::{Compression, Db, FilterPolicy, Options, PrefixExtractor};
///
/// let opts = Options::default()
///     .filter_policy(FilterPolicy::level_aware(10.0)) // bits spent where they save most reads
///     .memtable_bytes(16 << 20)
///     .block_cache_bytes(128 << 20)
///     .compression(Compression::Lz4)
///     .prefix_extractor(PrefixExtractor::fixed(4)?) // prefix scans skip tables
///     .sync_writes(true); // fsync each write before it returns
/// # let dir = tempfile::tempdir().unwrap();
/// let db = Db::open_with(dir.path(), opts)?;
/// db.put(b"user0001", b"x")?;
/// # Ok::<(), siftdb::Error>(())
/// ```
#[derive(Clone)]
pub struct Options {
    pub(crate) filter_policy: FilterPolicy,
    pub(crate) memtable_bytes: usize,
    pub(crate) total_memtable_bytes: Option<usize>,
    pub(crate) sync_writes: bool,
    pub(crate) sync_interval: Option<Duration>,
    pub(crate) compaction_bytes_per_sec: Option<u64>,
    pub(crate) block_size: usize,
    pub(crate) blob_threshold: Option<usize>,
    pub(crate) blob_gc_age_cutoff: f64,
    pub(crate) blob_gc_garbage_ratio: Option<f64>,
    pub(crate) level0_compaction_trigger: usize,
    pub(crate) level0_quiet_trigger: usize,
    pub(crate) level0_stop_writes: usize,
    pub(crate) level1_bytes: u64,
    pub(crate) level_size_ratio: u64,
    pub(crate) table_target_bytes: u64,
    pub(crate) compression: Compression,
    pub(crate) compression_per_level: Option<Vec<Compression>>,
    pub(crate) bottommost_compression: Option<Compression>,
    pub(crate) bottommost_dictionary_bytes: usize,
    pub(crate) block_cache_bytes: usize,
    pub(crate) max_open_files: Option<usize>,
    pub(crate) mmap_reads: bool,
    pub(crate) multi_get_in_flight: usize,
    pub(crate) multi_get_batch: usize,
    pub(crate) io_uring: bool,
    pub(crate) direct_reads: bool,
    pub(crate) retry_interval: Duration,
    pub(crate) read_only: bool,
    pub(crate) create_if_missing: bool,
    pub(crate) error_if_exists: bool,
    pub(crate) paranoid_checks: bool,
    pub(crate) fs: SharedFs,
    pub(crate) prefix_extractor: Option<PrefixExtractor>,
    pub(crate) whole_key_filtering: bool,
    pub(crate) range_filter_bits_per_key: f64,
    /// The keyspace these options are a keyspace's options of (set by the
    /// keyspace, never by the application): recorded in its tables.
    pub(crate) keyspace: Option<TableKeyspace>,
    pub(crate) compaction_filter: Option<Arc<dyn CompactionFilter>>,
    pub(crate) merge_operator: Option<Arc<dyn MergeOperator>>,
    pub(crate) event_listeners: Vec<Arc<dyn EventListener>>,
    pub(crate) block_cache: Option<Cache>,
    pub(crate) write_buffer_manager: Option<WriteBufferManager>,
    pub(crate) rate_limiter: Option<RateLimiter>,
    pub(crate) histograms: bool,
}

/// What a [`CompactionFilter`] decides for a key's newest value.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CompactionDecision {
    /// The value stays as it is.
    Keep,
    /// The key is removed (as by a delete at the value's sequence number).
    Remove,
    /// The value is replaced by this one.
    Change(Vec<u8>),
}

/// A callback compaction asks about the newest value of each key it
/// rewrites (see [`Options::compaction_filter`]). Called from background
/// threads, so `Send + Sync`; it must be quick and must not call into the
/// database. It is asked only about values (a deleted key is not shown),
/// only when compaction rewrites them (a table moved down a level, or data
/// still in memtables, is not seen), and may be asked again about a value
/// it kept.
pub trait CompactionFilter: Send + Sync {
    /// The decision for `key`, whose newest value is `value`, in a
    /// compaction writing into `level`.
    fn filter(&self, level: usize, key: &[u8], value: &[u8]) -> CompactionDecision;
}

/// Combines a key's merge operands with its value before them, as
/// RocksDB's `MergeOperator` (its full merge): counters, appends to lists,
/// patches to records, written without reading the value first
/// ([`crate::Db::merge`], [`crate::WriteBatch::merge`]). Called when a read
/// meets a key whose newest version is a merge operand, and by compactions
/// (which store the result in place of the operands once they reach the
/// value they apply to, or the bottom of the tree), so `Send + Sync`; it
/// must be deterministic — the same value and operands always give the
/// same result — and quick, and must not call into the database.
pub trait MergeOperator: Send + Sync {
    /// The value of `key` after `operands` (oldest first) were applied to
    /// `existing` — `None` when the key had no value before them (never
    /// written, deleted, or deleted by a range delete). `None` refuses
    /// them: reads of that key alone fail with [`Error::MergeFailed`]
    /// until a put, delete or range delete of it replaces them; flushes
    /// and compactions keep refused operands as they are
    /// (`Stats::merges_refused`), and every other key reads and writes
    /// as usual.
    fn merge(&self, key: &[u8], existing: Option<&[u8]>, operands: &[&[u8]]) -> Option<Vec<u8>>;
}

/// The default block cache: 64 MiB. See [`Options::block_cache_bytes`].
pub const DEFAULT_BLOCK_CACHE_BYTES: usize = 64 << 20;
/// Data-block reads a `multi_get` keeps in flight by default (see
/// [`Options::multi_get_in_flight`]).
pub const DEFAULT_MULTI_GET_IN_FLIGHT: usize = 32;
/// Keys a `multi_get` walks the tables with at once by default (see
/// [`Options::multi_get_batch`]).
pub const DEFAULT_MULTI_GET_BATCH: usize = 256;
/// Table files kept open at most by default, when the process's open-file
/// limit allows it (see [`Options::max_open_files`]).
pub const DEFAULT_MAX_OPEN_FILES: usize = 1000;

impl Default for Options {
    fn default() -> Self {
        Options {
            filter_policy: FilterPolicy::default(),
            memtable_bytes: 64 << 20,
            total_memtable_bytes: None,
            sync_writes: false,
            sync_interval: None,
            compaction_bytes_per_sec: None,
            block_size: 4096,
            blob_threshold: None,
            blob_gc_age_cutoff: 0.25,
            blob_gc_garbage_ratio: Some(0.5),
            level0_compaction_trigger: 4,
            level0_quiet_trigger: 2,
            level0_stop_writes: 12,
            level1_bytes: 256 << 20,
            level_size_ratio: 10,
            table_target_bytes: 32 << 20,
            compression: Compression::default(),
            compression_per_level: None,
            bottommost_compression: None,
            bottommost_dictionary_bytes: 0,
            block_cache_bytes: DEFAULT_BLOCK_CACHE_BYTES,
            max_open_files: None,
            mmap_reads: false,
            multi_get_in_flight: DEFAULT_MULTI_GET_IN_FLIGHT,
            multi_get_batch: DEFAULT_MULTI_GET_BATCH,
            io_uring: true,
            direct_reads: false,
            retry_interval: Duration::from_secs(1),
            read_only: false,
            create_if_missing: true,
            error_if_exists: false,
            paranoid_checks: false,
            fs: OsFileSystem::shared(),
            prefix_extractor: None,
            whole_key_filtering: true,
            range_filter_bits_per_key: 0.0,
            keyspace: None,
            compaction_filter: None,
            merge_operator: None,
            event_listeners: Vec::new(),
            block_cache: None,
            write_buffer_manager: None,
            rate_limiter: None,
            histograms: true,
        }
    }
}

impl fmt::Debug for Options {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Options")
            .field("filter_policy", &self.filter_policy)
            .field("memtable_bytes", &self.memtable_bytes)
            .field("total_memtable_bytes", &self.total_memtable_bytes)
            .field("sync_writes", &self.sync_writes)
            .field("sync_interval", &self.sync_interval)
            .field("compaction_bytes_per_sec", &self.compaction_bytes_per_sec)
            .field("block_size", &self.block_size)
            .field("blob_threshold", &self.blob_threshold)
            .field("blob_gc_age_cutoff", &self.blob_gc_age_cutoff)
            .field("blob_gc_garbage_ratio", &self.blob_gc_garbage_ratio)
            .field("level0_compaction_trigger", &self.level0_compaction_trigger)
            .field("level0_quiet_trigger", &self.level0_quiet_trigger)
            .field("level0_stop_writes", &self.level0_stop_writes)
            .field("level1_bytes", &self.level1_bytes)
            .field("level_size_ratio", &self.level_size_ratio)
            .field("table_target_bytes", &self.table_target_bytes)
            .field("compression", &self.compression)
            .field("compression_per_level", &self.compression_per_level)
            .field("bottommost_compression", &self.bottommost_compression)
            .field(
                "bottommost_dictionary_bytes",
                &self.bottommost_dictionary_bytes,
            )
            .field("block_cache_bytes", &self.block_cache_bytes)
            .field("max_open_files", &self.max_open_files)
            .field("mmap_reads", &self.mmap_reads)
            .field("multi_get_in_flight", &self.multi_get_in_flight)
            .field("multi_get_batch", &self.multi_get_batch)
            .field("io_uring", &self.io_uring)
            .field("direct_reads", &self.direct_reads)
            .field("retry_interval", &self.retry_interval)
            .field("prefix_extractor", &self.prefix_extractor)
            .field("whole_key_filtering", &self.whole_key_filtering)
            .field("range_filter_bits_per_key", &self.range_filter_bits_per_key)
            .field("read_only", &self.read_only)
            .field("create_if_missing", &self.create_if_missing)
            .field("error_if_exists", &self.error_if_exists)
            .field("paranoid_checks", &self.paranoid_checks)
            .field("compaction_filter", &self.compaction_filter.is_some())
            .field("merge_operator", &self.merge_operator.is_some())
            .field("event_listeners", &self.event_listeners.len())
            .field("block_cache", &self.block_cache)
            .field("write_buffer_manager", &self.write_buffer_manager)
            .field("rate_limiter", &self.rate_limiter)
            .field("histograms", &self.histograms)
            .finish_non_exhaustive()
    }
}

impl Options {
    /// Bloom filter bits per key for every table; 0 disables filters. A
    /// shorthand for `filter_policy(FilterPolicy::bits_per_key(bits))`.
    pub fn bloom_bits_per_key(self, bits: f64) -> Self {
        self.filter_policy(FilterPolicy::bits_per_key(bits))
    }

    /// How tables get their filters: the bits per key of each level and the
    /// kind of filter ([`FilterPolicy`]). Tables already written keep the
    /// filter they were built with; compaction rewrites them under the
    /// policy in force. Default: level-aware 10 bits per key on average,
    /// static filters from level 1 (see [`FilterPolicy::default`] for the
    /// measurements behind it).
    pub fn filter_policy(mut self, policy: FilterPolicy) -> Self {
        self.filter_policy = policy;
        self
    }

    /// Memtable size at which it is flushed to a table. Default 64 MiB (as
    /// RocksDB's write buffer and fjall's memtable): fewer, larger flushes
    /// and less rewriting by compaction; a crash replays up to that much log.
    /// Each memtable also holds a key filter of a 128th of this (512 KiB by
    /// default, at most 64 MiB; `Stats::memtable_filter_bytes`), so that a
    /// get of a key it does not hold skips its search.
    pub fn memtable_bytes(mut self, bytes: usize) -> Self {
        self.memtable_bytes = bytes;
        self
    }

    /// A bound on every keyspace's memtables together, active and waiting
    /// to be flushed (RocksDB's `db_write_buffer_size`, fjall's
    /// `max_write_buffer_size`): when a write finds them holding this
    /// much, the largest active memtables are sealed for flushing (largest
    /// first, until the active ones left hold under half of it), and while
    /// those waiting to be flushed hold half of it or more, writes wait for
    /// a flush (a stall, counted in `Stats::write_stalls`). So they hold at
    /// most about this plus one write, however many keyspaces there are —
    /// each keyspace's [`Options::memtable_bytes`] alone bounds one
    /// memtable, not their sum. Counted: the memtables' entries
    /// (`Stats::memtable_bytes` and `Stats::immutable_memtable_bytes`); not
    /// their key filters (`Stats::memtable_filter_bytes`). Default: no
    /// bound. At least 4096; give it at least twice `memtable_bytes`, or
    /// every flush of a full memtable stalls writes.
    pub fn total_memtable_bytes(mut self, bytes: usize) -> Self {
        self.total_memtable_bytes = Some(bytes);
        self
    }

    /// A callback that sees the newest value of each key compaction
    /// rewrites and keeps it, removes the key or replaces the value: to
    /// expire records (see `examples/ttl.rs`) or rewrite them lazily.
    /// A [`crate::Snapshot`] (or iterator) taken before a compaction still
    /// sees what the filter removed or changed: it reads the tables it
    /// pinned, which the compaction does not change. Per keyspace with
    /// [`crate::KeyspaceOptions::compaction_filter`].
    pub fn compaction_filter(mut self, filter: Arc<dyn CompactionFilter>) -> Self {
        self.compaction_filter = Some(filter);
        self
    }

    /// The merge operator of every keyspace (per keyspace with
    /// [`crate::KeyspaceOptions::merge_operator`]): what [`crate::Db::merge`]
    /// operands are combined with. Give the same operator each time the
    /// database is opened: operands not yet merged stay in the tables until
    /// a read or a compaction applies them. Without one, merges are refused
    /// with `InvalidArgument`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// use std::sync::Arc;
    /// use siftdb::{Db, MergeOperator, Options};
    ///
    /// /// Adds little-endian u64 operands to the value.
    /// struct Counter;
    /// impl MergeOperator for Counter {
    ///     fn merge(&self, _key: &[u8], existing: Option<&[u8]>, operands: &[&[u8]]) -> Option<Vec<u8>> {
    ///         let read = |b: &[u8]| Some(u64::from_le_bytes(b.try_into().ok()?));
    ///         let mut total = existing.map_or(Some(0), read)?;
    ///         for operand in operands {
    ///             total += read(operand)?;
    ///         }
    ///         Some(total.to_le_bytes().to_vec())
    ///     }
    /// }
    ///
    /// let db = Db::open_with(dir.path(), Options::default().merge_operator(Arc::new(Counter)))?;
    /// db.merge("visits", 1u64.to_le_bytes())?;
    /// db.merge("visits", 2u64.to_le_bytes())?;
    /// assert_eq!(db.get("visits")?.as_deref(), Some(&3u64.to_le_bytes()[..]));
    /// # Ok::<(), siftdb::Error>(())
    /// ```
    pub fn merge_operator(mut self, operator: Arc<dyn MergeOperator>) -> Self {
        self.merge_operator = Some(operator);
        self
    }

    /// Adds a listener for what the background work does: flushes,
    /// compactions, failures and write stalls (RocksDB's `EventListener`).
    /// Called on a thread of its own, in the order the events happened
    /// (see [`EventListener`]); several listeners are called in the order
    /// they were added. Ignored by a read-only open, which does no
    /// background work.
    pub fn add_event_listener(mut self, listener: Arc<dyn EventListener>) -> Self {
        self.event_listeners.push(listener);
        self
    }

    /// Whether the database keeps its latency and size histograms
    /// ([`crate::Db::histograms`], [`crate::Stats::histograms`]). Default
    /// true: a get or a write is counted with two plain stores and one in
    /// [`crate::histogram::SAMPLE_EVERY`] is timed (about 1% of an
    /// in-memory get); false records nothing.
    pub fn histograms(mut self, enabled: bool) -> Self {
        self.histograms = enabled;
        self
    }

    /// When true, every write fsyncs the log before returning. Default false.
    pub fn sync_writes(mut self, sync: bool) -> Self {
        self.sync_writes = sync;
        self
    }

    /// Syncs the log every `interval` while it holds acknowledged writes
    /// not yet synced (fjall's `fsync_ms`): a power loss then loses at most
    /// about the last `interval` of writes that did not ask for a sync,
    /// without a sync per write. Runs on a thread of its own; a failed
    /// sync refuses writes until recovery, as a failed synced write does.
    /// Default: none (unsynced writes are synced by the next synced write,
    /// [`crate::Db::persist`], a rotation or the close).
    pub fn sync_interval(mut self, interval: Duration) -> Self {
        self.sync_interval = Some(interval);
        self
    }

    /// Paces compactions (automatic and asked for) to write at most about
    /// this many bytes of table per second (a rate limiter of this
    /// database's own, for compaction only: flushes are not held back by
    /// it, since writers wait on them; [`Options::rate_limiter`] paces
    /// flushes too, and is shared), so a large compaction leaves the disk
    /// to the reads and the log. The time compactions spent waiting is
    /// `Stats::compaction_paced_micros`. Too low a rate lets level 0 grow
    /// until writes stall on it. A close does not wait out the pace.
    /// Default: no pacing. At least 64 KiB per second.
    pub fn compaction_bytes_per_sec(mut self, bytes: u64) -> Self {
        self.compaction_bytes_per_sec = Some(bytes);
        self
    }

    /// Target size of a table's data blocks. Default 4 KiB.
    pub fn block_size(mut self, bytes: usize) -> Self {
        self.block_size = bytes;
        self
    }

    /// Number of level-0 tables that triggers a compaction while writes
    /// come in. Default 4.
    pub fn level0_compaction_trigger(mut self, tables: usize) -> Self {
        self.level0_compaction_trigger = tables;
        self
    }

    /// Number of level-0 tables that triggers a compaction of a *quiet*
    /// keyspace: one whose memtables hold nothing (every write flushed,
    /// none since). Default 2.
    ///
    /// Level 0 lets a busy keyspace's flushes pile up a few tables before
    /// one compaction merges them (less rewriting per byte written), but
    /// every level-0 table costs every read: a filter probe per get and a
    /// block per scan, as its keys span the whole key space. Once writes
    /// stop, nothing is saved by keeping them, so the flush that leaves the
    /// memtables empty (the one [`crate::Db::flush`] asks for, or a full
    /// memtable's with no write behind it; after a close, the next open) is
    /// followed by merging level 0 into level 1, which
    /// [`crate::Db::wait_for_background`] waits for. A value at or above
    /// [`Options::level0_compaction_trigger`] keeps a quiet keyspace's
    /// level 0 as a busy one's.
    ///
    /// ```
    /// use siftdb::{Db, Options};
    /// # let dir = tempfile::tempdir().unwrap();
    /// // A bulk load read right after: level 0 merged once the writes stop.
    /// let db = Db::open_with(dir.path(), Options::default().level0_quiet_trigger(2))?;
    /// db.put(b"k", b"v")?;
    /// db.flush()?; // the memtable empty: the keyspace is quiet
    /// db.wait_for_background()?; // any level-0 merge it started is done
    /// # Ok::<(), siftdb::Error>(())
    /// ```
    pub fn level0_quiet_trigger(mut self, tables: usize) -> Self {
        self.level0_quiet_trigger = tables;
        self
    }

    /// Number of level-0 tables at which writers wait for compaction. Default 12.
    pub fn level0_stop_writes(mut self, tables: usize) -> Self {
        self.level0_stop_writes = tables;
        self
    }

    /// Size budget of level 1; level n+1 gets `level_size_ratio` times level n.
    /// Default 256 MiB: what level 0 holds when it is compacted (4 tables of
    /// a 64 MiB memtable), as RocksDB's `max_bytes_for_level_base`. A level
    /// 1 smaller than one level-0 compaction's output is rewritten into
    /// level 2 right after every such compaction: at N = 10M, 64 MiB gave a
    /// write amplification of 6.5–6.6, 256 MiB 5.2.
    pub fn level1_bytes(mut self, bytes: u64) -> Self {
        self.level1_bytes = bytes;
        self
    }

    /// Growth factor between levels. Default 10.
    pub fn level_size_ratio(mut self, ratio: u64) -> Self {
        self.level_size_ratio = ratio;
        self
    }

    /// Size at which compaction starts a new output table. Default 32 MiB.
    pub fn table_target_bytes(mut self, bytes: u64) -> Self {
        self.table_target_bytes = bytes;
        self
    }

    /// Bytes of data blocks kept in memory, shared by every table of the
    /// database (a sharded cache, `quick_cache`, weighted by block size).
    /// Default 64 MiB (`DEFAULT_BLOCK_CACHE_BYTES`); 0 disables it: every
    /// data block a read needs comes from the file.
    ///
    /// Filters and indexes are not in this budget: they are held for each
    /// table's life (`Stats::filter_bytes`, `Stats::index_bytes`). A block
    /// missing from the cache is read from the file, where the operating
    /// system's page cache may still hold it — then the miss costs a system
    /// call, a 4 KiB copy and a checksum (about 1.5 µs), not a disk read.
    /// The page cache is the second level, sized by the kernel from what the
    /// machine (or container) has left; every block in this cache was read
    /// through it and is usually there too, so a larger block cache buys CPU
    /// on hits at the price of holding blocks twice when memory is tight (a
    /// container whose limit counts the page cache). The default is twice
    /// RocksDB's and fjall's 32 MiB: enough for the hot set of about 15,000
    /// blocks (a few hundred thousand keys read over and over), a few
    /// percent of a 1 GiB container.
    pub fn block_cache_bytes(mut self, bytes: usize) -> Self {
        self.block_cache_bytes = bytes;
        self
    }

    /// A block cache to use in place of one of its own (whose size
    /// [`Options::block_cache_bytes`] gives, and which this ignores): give
    /// the same [`Cache`] to many databases and their data blocks together
    /// stay within its capacity (`Stats::block_cache_bytes` then reports
    /// the whole shared cache). Keys carry an id per database, so blocks of
    /// two databases never mix.
    pub fn block_cache(mut self, cache: Cache) -> Self {
        self.block_cache = Some(cache);
        self
    }

    /// A memtable budget shared with other databases (RocksDB's
    /// `WriteBufferManager`): the memtables of every database given the
    /// same [`WriteBufferManager`] stay within about its budget — from 7/8
    /// of it on, the largest of them (in any database) is flushed, and at
    /// the budget writers wait for the flushes going. Works beside
    /// [`Options::total_memtable_bytes`], this database's own bound.
    /// Ignored by a read-only open.
    ///
    /// ```
    /// use siftdb::{Cache, Db, Options, WriteBufferManager};
    /// # let dir = tempfile::tempdir().unwrap();
    /// // 50 tenants, one process: 64 MiB of blocks and 64 MiB of memtables in all.
    /// let shared = Options::default()
    ///     .block_cache(Cache::new(64 << 20))
    ///     .write_buffer_manager(WriteBufferManager::new(64 << 20))
    ///     .memtable_bytes(8 << 20);
    /// let tenant = Db::open_with(dir.path().join("tenant-17"), shared.clone())?;
    /// tenant.put("k", "v")?;
    /// # Ok::<(), siftdb::Error>(())
    /// ```
    pub fn write_buffer_manager(mut self, manager: WriteBufferManager) -> Self {
        self.write_buffer_manager = Some(manager);
        self
    }

    /// A limit on the bytes per second that flushes and compactions write,
    /// shared with the other databases given the same [`RateLimiter`]
    /// (RocksDB's `rate_limiter`): flushes go first, compactions wait for
    /// every byte before theirs. With [`Options::compaction_bytes_per_sec`]
    /// too, compactions keep to both. A close does not wait out the pace.
    pub fn rate_limiter(mut self, limiter: RateLimiter) -> Self {
        self.rate_limiter = Some(limiter);
        self
    }

    /// Table files held open at once; the others are reopened when a read
    /// needs them (a file-handle cache). Filters and indexes stay in memory
    /// whether a table's file is open or not, so a closed file costs only an
    /// `open` on the next block read from it. Default: 1000
    /// (`DEFAULT_MAX_OPEN_FILES`) or half of the process's open-file limit
    /// (`RLIMIT_NOFILE`) when that is lower, so a database of thousands of
    /// tables works under `ulimit -n 256`. Must be at least 1. Readers that
    /// are between a reopen and their read may briefly hold a few more.
    /// A read-only database ([`Options::read_only`]) holds every table file
    /// open instead, whatever this says: a writer beside it may remove any
    /// of them, and a file reopened by name would be gone.
    pub fn max_open_files(mut self, files: usize) -> Self {
        self.max_open_files = Some(files);
        self
    }

    /// Reads tables through one memory map per file instead of positioned
    /// reads and the block cache. Default false.
    ///
    /// **Hazard:** a mapped table that shrinks (truncated by anyone) or
    /// whose page fails to read (a failing disk) kills the process with
    /// SIGBUS when a read touches it, instead of returning an error; and the
    /// operating system decides which pages stay in memory. Each data block's
    /// checksum is verified the first time it is read, then trusted while the
    /// table is open. Filters and indexes are copied to memory at open either
    /// way. Worth it only when every table fits in memory and the last few
    /// hundred nanoseconds per read matter; the maps are advised
    /// `MADV_RANDOM` (no read-ahead around each fault).
    pub fn mmap_reads(mut self, mmap: bool) -> Self {
        self.mmap_reads = mmap;
        self
    }

    /// Data-block reads one `multi_get` keeps in flight at once. Each key's
    /// data block that misses the block cache starts reading as soon as
    /// the key's filter and index probes find it, while the batch's later
    /// keys are probed — one read per distinct block, through io_uring
    /// where the kernel allows it (see [`Options::io_uring`]), else on a
    /// small pool of reader threads — so a batch waits about one device
    /// latency instead of one per block. 1 reads them one after another,
    /// as `get` does. Default 32 ([`DEFAULT_MULTI_GET_IN_FLIGHT`]); at most
    /// 64 are in flight on io_uring and 16 on the pool whatever is set.
    pub fn multi_get_in_flight(mut self, reads: usize) -> Self {
        self.multi_get_in_flight = reads;
        self
    }

    /// Keys one `multi_get` walks the tables with at once: a longer list
    /// is answered in batches of this many, in order (bounding the memory
    /// of one walk). Default 256 (`DEFAULT_MULTI_GET_BATCH`); at least 1.
    pub fn multi_get_batch(mut self, keys: usize) -> Self {
        self.multi_get_batch = keys;
        self
    }

    /// Lets `multi_get` read its overlapped blocks through an io_uring ring
    /// of the calling thread. Default true; where the kernel or a seccomp
    /// filter refuses the ring, or the file system has no file descriptors
    /// (a wrapping `FileSystem`), the reads go to the thread pool and
    /// [`crate::Stats::overlapped_reads_pool`] counts them. False always
    /// uses the pool.
    pub fn io_uring(mut self, enabled: bool) -> Self {
        self.io_uring = enabled;
        self
    }

    /// Reads data blocks past the operating system's page cache
    /// (`O_DIRECT`: `get`s, and `multi_get`'s overlapped reads), so the
    /// block cache is their only cache. Beyond memory this spares the
    /// kernel's page-cache work (inserting, then reclaiming, a page for
    /// every block read) and counts no page cache against a memory limit;
    /// a data set the page cache could hold is then read from the device
    /// every time it misses the block cache. Default false. Per system:
    /// `O_DIRECT` on Linux, `F_NOCACHE` on macOS, `FILE_FLAG_NO_BUFFERING`
    /// on Windows (4 KiB-aligned reads: a volume with larger sectors
    /// refuses them). A file system that refuses them (tmpfs), and every
    /// other system, is read through the page cache, and
    /// [`crate::Stats::direct_block_reads`] counts the reads that went
    /// past it. Filters, indexes, scans and compaction always read
    /// through the page cache.
    pub fn direct_reads(mut self, enabled: bool) -> Self {
        self.direct_reads = enabled;
        self
    }

    /// [`Options::max_open_files`] as set, or its default under the current
    /// open-file limit.
    pub fn effective_max_open_files(&self) -> usize {
        self.max_open_files.unwrap_or_else(|| {
            let limit = crate::fs::open_file_limit();
            let half = limit.map_or(usize::MAX, |l| usize::try_from(l / 2).unwrap_or(usize::MAX));
            DEFAULT_MAX_OPEN_FILES.min(half).max(16)
        })
    }

    /// How long after a retryable failure (no space, EIO, EINTR) of
    /// background work or of the log it is first retried by itself; the wait
    /// doubles after each failed retry, up to 64 times this. Default 1 s
    /// (as RocksDB's `bgerror_resume_retry_interval`).
    pub fn retry_interval(mut self, interval: Duration) -> Self {
        self.retry_interval = interval;
        self
    }

    /// Adds each key's prefix, as `extractor` names it, to the filter of
    /// every table built from now on, so that [`crate::Db::prefix`] and a
    /// range whose bounds share one prefix skip the tables whose filter
    /// rules that prefix out (`Stats::prefix_filter_checks`,
    /// `Stats::prefix_filter_skips`). Default: none.
    ///
    /// Each table records the extractor's name; a table built with another
    /// extractor or none is never skipped for a prefix (it is read as
    /// before), so changing the extractor is safe and takes effect as
    /// compaction rewrites tables. A prefix costs one more filter entry per
    /// distinct prefix of a table — a fraction of a key's bits when many
    /// keys share a prefix.
    pub fn prefix_extractor(mut self, extractor: PrefixExtractor) -> Self {
        self.prefix_extractor = Some(extractor);
        self
    }

    /// With a prefix extractor: whether tables' filters keep whole keys as
    /// well as prefixes. Default true. False makes filters smaller (one
    /// entry per distinct prefix, plus the keys that have no prefix) but a
    /// `get` then asks the filter about the key's prefix only, so absent
    /// keys under present prefixes read a data block. Ignored without an
    /// extractor (whole keys are then always kept).
    pub fn whole_key_filtering(mut self, whole_keys: bool) -> Self {
        self.whole_key_filtering = whole_keys;
        self
    }

    /// Bits per key of a range filter in every table built from now on; 0
    /// (the default) builds none. A range filter answers "may this table
    /// hold any key in `[a, b]`?", so a scan with both bounds skips the
    /// tables that hold nothing in it (`Stats::range_filter_checks`,
    /// `Stats::range_filter_skips`) instead of reading a data block of each.
    /// At `B` bits per key, a range of `ℓ` keys' width is falsely reported
    /// non-empty with probability at most `ℓ / 2^(B−2)` (see
    /// [`siftdb_filter::range`]); tables of dense keys are stored exactly,
    /// in fewer bits. Within [3, 48] when not 0. The filter is held in
    /// memory for each table's life (`Stats::range_filter_bytes`).
    pub fn range_filter_bits_per_key(mut self, bits: f64) -> Self {
        self.range_filter_bits_per_key = bits;
        self
    }

    /// Whether an open creates the database when the directory holds none
    /// (no `MANIFEST`). Default true. When false, such an open fails with
    /// [`crate::Error::NotADatabase`] and creates nothing — not the
    /// directory, not a file in it (RocksDB's `create_if_missing`).
    pub fn create_if_missing(mut self, create: bool) -> Self {
        self.create_if_missing = create;
        self
    }

    /// Whether an open of a directory that already holds a database fails
    /// (with [`crate::Error::AlreadyExists`], the database untouched).
    /// Default false (RocksDB's `error_if_exists`): for a caller that must
    /// start from an empty database.
    pub fn error_if_exists(mut self, refuse: bool) -> Self {
        self.error_if_exists = refuse;
        self
    }

    /// Opens the database for reading only (what [`crate::Db::open_read_only`]
    /// does). Default false.
    ///
    /// Such an open creates, changes and deletes nothing — no lock file, no
    /// manifest, no log, no table — so it needs no write permission and can
    /// run beside a process that has the database open for writing. It
    /// reads the manifest and every live table, and replays the logs into
    /// memory; reads then see the database as of the open (a consistent
    /// view: a manifest that changes meanwhile makes the open start again).
    /// Every table file is held open for the database's life, whatever
    /// [`Options::max_open_files`], so the view stays readable after a
    /// writer's compaction removes its tables; an open that runs out of
    /// file handles fails with an error saying how many it needs.
    /// Writes, `flush`, `compact` and `resume` are refused with
    /// [`crate::Error::ReadOnly`]. A directory without a database is an
    /// error, never created.
    pub fn read_only(mut self, read_only: bool) -> Self {
        self.read_only = read_only;
        self
    }

    /// Refuse to open a database with a damaged table, and check every
    /// table whole at open. Default false.
    ///
    /// By default a table that cannot be opened (a damaged footer, index or
    /// properties block, a file that is missing or of the wrong size) does
    /// not stop the open: the database opens, and each get or scan that
    /// needs that table returns [`crate::Error::Corruption`] naming it,
    /// while every other read is served (`RecoveryReport::damaged_tables`
    /// lists them; compaction leaves them alone). With `paranoid_checks`
    /// the open fails instead, and it also reads and verifies every block
    /// of every table (what `Table::verify` checks), so a damaged data
    /// block refuses the open too — at the price of reading the whole
    /// database once per open. A damaged manifest or log refuses the open
    /// either way (`siftdb repair` salvages what is readable).
    pub fn paranoid_checks(mut self, paranoid: bool) -> Self {
        self.paranoid_checks = paranoid;
        self
    }

    /// The file system the engine performs all I/O through (tests inject faults here).
    /// Part of the unstable `internals`: no stability promise.
    #[doc(hidden)]
    pub fn file_system(mut self, fs: SharedFs) -> Self {
        self.fs = fs;
        self
    }

    /// Checks every option; `InvalidArgument` names the first bad one.
    pub fn validate(&self) -> Result<()> {
        self.filter_policy.validate()?;
        if self.memtable_bytes < 4096 {
            return Err(Error::invalid("memtable_bytes must be at least 4096"));
        }
        if self
            .sync_interval
            .is_some_and(|interval| interval.is_zero())
        {
            return Err(Error::invalid("sync_interval must be above zero"));
        }
        if self.read_only && self.error_if_exists {
            return Err(Error::invalid(
                "error_if_exists with read_only: a read-only open needs a database",
            ));
        }
        if self
            .compaction_bytes_per_sec
            .is_some_and(|rate| rate < 64 << 10)
        {
            return Err(Error::invalid(
                "compaction_bytes_per_sec must be at least 65536",
            ));
        }
        if self
            .rate_limiter
            .as_ref()
            .is_some_and(|limiter| limiter.bytes_per_sec() < 64 << 10)
        {
            return Err(Error::invalid(
                "rate_limiter must allow at least 65536 bytes per second",
            ));
        }
        if self
            .write_buffer_manager
            .as_ref()
            .is_some_and(|manager| manager.budget() < 4096)
        {
            return Err(Error::invalid(
                "write_buffer_manager's budget must be at least 4096",
            ));
        }
        if self.total_memtable_bytes.is_some_and(|bytes| bytes < 4096) {
            return Err(Error::invalid("total_memtable_bytes must be at least 4096"));
        }
        self.compression.validate()?;
        if let Some(list) = &self.compression_per_level {
            if !(1..=16).contains(&list.len()) {
                return Err(Error::invalid(format!(
                    "compression_per_level needs 1 to 16 entries (one per level), got {}",
                    list.len()
                )));
            }
            for compression in list {
                compression.validate()?;
            }
        }
        if let Some(bottom) = self.bottommost_compression {
            bottom.validate()?;
        }
        let dictionary = self.bottommost_dictionary_bytes;
        if dictionary != 0 {
            let (min, max) = (
                Compression::MIN_DICTIONARY_BYTES,
                Compression::MAX_DICTIONARY_BYTES,
            );
            if !(min..=max).contains(&dictionary) {
                return Err(Error::invalid(format!(
                    "bottommost_zstd_dictionary_bytes must be 0 or within [{min}, {max}], got {dictionary}"
                )));
            }
            if !self
                .bottommost_compression
                .is_some_and(Compression::is_zstd)
            {
                return Err(Error::invalid(
                    "bottommost_zstd_dictionary_bytes needs a zstd bottommost_compression",
                ));
            }
        }
        if self.blob_threshold == Some(0) {
            return Err(Error::invalid("blob_threshold must be at least 1 byte"));
        }
        if !(0.0..=1.0).contains(&self.blob_gc_age_cutoff) {
            return Err(Error::invalid("blob_gc_age_cutoff must be within [0, 1]"));
        }
        if self
            .blob_gc_garbage_ratio
            .is_some_and(|ratio| !(ratio > 0.0 && ratio <= 1.0))
        {
            return Err(Error::invalid(
                "blob_gc_garbage_ratio must be within (0, 1], or None",
            ));
        }
        if !(256..=(1 << 24)).contains(&self.block_size) {
            return Err(Error::invalid("block_size must be within [256, 16 MiB]"));
        }
        if self.level0_compaction_trigger < 2 {
            return Err(Error::invalid(
                "level0_compaction_trigger must be at least 2",
            ));
        }
        if self.level0_quiet_trigger < 2 {
            return Err(Error::invalid("level0_quiet_trigger must be at least 2"));
        }
        if self.level0_stop_writes < self.level0_compaction_trigger {
            return Err(Error::invalid(
                "level0_stop_writes must be at least level0_compaction_trigger",
            ));
        }
        if self.level_size_ratio < 2 {
            return Err(Error::invalid("level_size_ratio must be at least 2"));
        }
        if self.multi_get_in_flight == 0 {
            return Err(Error::invalid("multi_get_in_flight must be at least 1"));
        }
        if self.multi_get_batch == 0 {
            return Err(Error::invalid("multi_get_batch must be at least 1"));
        }
        if self.max_open_files == Some(0) {
            return Err(Error::invalid("max_open_files must be at least 1"));
        }
        if self.retry_interval.is_zero() {
            return Err(Error::invalid("retry_interval must not be zero"));
        }
        let r = self.range_filter_bits_per_key;
        let (min, max) = (
            siftdb_filter::range::MIN_BITS_PER_KEY,
            siftdb_filter::range::MAX_BITS_PER_KEY,
        );
        if !(r == 0.0 || (r.is_finite() && (min..=max).contains(&r))) {
            return Err(Error::invalid(format!(
                "range_filter_bits_per_key must be 0 or within [{min}, {max}], got {r}"
            )));
        }
        if self.level1_bytes < 4096 || self.table_target_bytes < 4096 {
            return Err(Error::invalid(
                "level1_bytes and table_target_bytes must be at least 4096",
            ));
        }
        Ok(())
    }
}

/// The keyspace a table belongs to (properties field 4); a table without
/// it is the default keyspace's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableKeyspace {
    /// The keyspace's id (never 0: the default keyspace writes no field).
    pub id: u32,
    /// Its name when the table was written.
    pub name: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_nonsense_is_refused() {
        Options::default().validate().unwrap();
        Options::default()
            .bloom_bits_per_key(0.0)
            .validate()
            .unwrap();
        for bad in [f64::NAN, -1.0, f64::INFINITY, 0.1, 100.0] {
            assert!(Options::default()
                .bloom_bits_per_key(bad)
                .validate()
                .is_err());
        }
        assert!(Options::default().memtable_bytes(10).validate().is_err());
        assert!(Options::default()
            .total_memtable_bytes(4095)
            .validate()
            .is_err());
        assert!(Options::default().block_size(1).validate().is_err());
        assert!(Options::default().max_open_files(0).validate().is_err());
        Options::default().max_open_files(1).validate().unwrap();
        Options::default().block_cache_bytes(0).validate().unwrap();
        Options::default()
            .range_filter_bits_per_key(16.0)
            .validate()
            .unwrap();
        for bad in [f64::NAN, 1.0, 100.0, -3.0] {
            assert!(Options::default()
                .range_filter_bits_per_key(bad)
                .validate()
                .is_err());
        }
        assert!(Options::default().effective_max_open_files() >= 16);
        assert_eq!(
            Options::default()
                .max_open_files(7)
                .effective_max_open_files(),
            7
        );
    }
}
