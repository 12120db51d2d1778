//! [`ReadContext`]: what the tables of one database share when they read —
//! the file system, the read counters, the block cache and the open-file
//! cache.
//!
//! The block cache ([`crate::Cache`]: `quick_cache`, sharded, weighted by
//! bytes; the database's own, or one that many databases share) holds
//! parsed data blocks keyed by (this context's owner id in the cache, table
//! id, block number); a value returned by a get is a `Bytes` slice of the
//! cached block, so a hit copies nothing. The
//! open-file cache holds at most `max_open_files` table files open; a table
//! whose file was closed reopens it on its next block read. Filters and
//! indexes are not here: each table holds its own in memory for its life.
//!
//! Owns: both caches, table ids, the totals of table metadata memory, and
//! the running average of block read times that tells whether reads reach
//! the device.
//! Must never: hand out a block under another table's id (ids are unique
//! per context and never reused; a context's owner id is unique per
//! cache), or let a cache grow past its capacity.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::blob::BlobFiles;
use crate::error::Result;
use crate::fs::{RandomAccessFile, SharedFs};
use crate::options::{
    Options, DEFAULT_BLOCK_CACHE_BYTES, DEFAULT_MAX_OPEN_FILES, DEFAULT_MULTI_GET_BATCH,
    DEFAULT_MULTI_GET_IN_FLIGHT,
};
use crate::prefix::{KnownExtractors, PrefixExtractor};
use crate::shared::{Cache, CachedBlock};
use crate::table::block::Block;
use crate::table::counters::ReadCounters;

/// How one database reads its tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadSettings {
    /// Capacity of the block cache in bytes; 0: no cache.
    pub block_cache_bytes: usize,
    /// Table files held open at once (≥ 1).
    pub max_open_files: usize,
    /// Read tables through memory maps (see `Options::mmap_reads`).
    pub mmap_reads: bool,
    /// Data-block reads a `multi_get` keeps in flight at once; 1 reads
    /// them one after another (see `Options::multi_get_in_flight`).
    pub multi_get_in_flight: usize,
    /// Keys a `multi_get` walks the tables with at once (see
    /// `Options::multi_get_batch`).
    pub multi_get_batch: usize,
    /// Let `multi_get` read through io_uring (see `Options::io_uring`).
    pub io_uring: bool,
    /// Read data blocks with `O_DIRECT` (see `Options::direct_reads`).
    pub direct_reads: bool,
}

impl Default for ReadSettings {
    fn default() -> Self {
        ReadSettings {
            block_cache_bytes: DEFAULT_BLOCK_CACHE_BYTES,
            max_open_files: DEFAULT_MAX_OPEN_FILES,
            mmap_reads: false,
            multi_get_in_flight: DEFAULT_MULTI_GET_IN_FLIGHT,
            multi_get_batch: DEFAULT_MULTI_GET_BATCH,
            io_uring: true,
            direct_reads: false,
        }
    }
}

impl ReadSettings {
    /// For tools that open tables read-only beside (or without) a database
    /// (`siftdb inspect`, `siftdb verify`): no block cache (they read each
    /// block at most once), few open files.
    pub fn tool() -> ReadSettings {
        ReadSettings {
            block_cache_bytes: 0,
            max_open_files: 64,
            mmap_reads: false,
            ..ReadSettings::default()
        }
    }
}

impl From<&Options> for ReadSettings {
    fn from(options: &Options) -> Self {
        ReadSettings {
            block_cache_bytes: options.block_cache_bytes,
            max_open_files: options.effective_max_open_files(),
            mmap_reads: options.mmap_reads,
            multi_get_in_flight: options.multi_get_in_flight,
            multi_get_batch: options.multi_get_batch,
            io_uring: options.io_uring,
            direct_reads: options.direct_reads,
        }
    }
}

/// What every table of one database shares when it reads. See the module docs.
pub struct ReadContext {
    pub(crate) fs: SharedFs,
    pub(crate) counters: Arc<ReadCounters>,
    pub(crate) settings: ReadSettings,
    /// The database's prefix extractor: tables built with one of the same
    /// name use it to ask their filter about a key's prefix.
    pub(crate) prefix_extractor: Option<PrefixExtractor>,
    /// The keyspaces' custom extractors: a table built with one of them
    /// asks its filter about prefixes once it is given.
    pub(crate) keyspace_extractors: Arc<KnownExtractors>,
    /// The block cache (`None` when its capacity is 0) and this context's
    /// owner id in it.
    blocks: Option<(Cache, u64)>,
    files: quick_cache::sync::Cache<u64, Arc<dyn RandomAccessFile>>,
    /// The blob files the open tables point into, one handle per file.
    pub(crate) blob_files: BlobFiles,
    next_table_id: AtomicU64,
    /// Bytes of filters and decoded indexes held by open tables.
    filter_bytes: AtomicU64,
    index_bytes: AtomicU64,
    range_filter_bytes: AtomicU64,
    /// A running average of how long a data block read from a file took,
    /// in nanoseconds (each read weighs 1/8): whether reads reach the
    /// device or the page cache (see [`ReadContext::file_reads_are_slow`]).
    file_read_nanos: AtomicU64,
}

/// A block read from a file slower than this on average (the device, not
/// the operating system's page cache, which answers in 1–3 µs) makes a
/// scan hint its reads ahead: the hint's system call then costs far less
/// than the reads it overlaps.
const SLOW_FILE_READ_NANOS: u64 = 10_000;

/// The most one timed read counts for in the running average (3× the
/// threshold: two outliers in a row among 2 µs page-cache reads leave the
/// average below it, a run of device reads passes it in three samples).
const SAMPLE_CAP_NANOS: u64 = 3 * SLOW_FILE_READ_NANOS;

impl std::fmt::Debug for ReadContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReadContext")
            .field("settings", &self.settings)
            .field("block_cache_bytes", &self.block_cache_bytes())
            .finish_non_exhaustive()
    }
}

impl ReadContext {
    /// A context reading through `fs` with `settings`, updating `counters`.
    pub fn new(
        fs: SharedFs,
        settings: ReadSettings,
        counters: Arc<ReadCounters>,
    ) -> Arc<ReadContext> {
        ReadContext::with_prefix_extractor(fs, settings, counters, None)
    }

    /// [`ReadContext::new`] for tables read with `prefix_extractor` (a table
    /// built with an extractor of the same name asks its filter about key
    /// prefixes where it holds no whole keys).
    pub fn with_prefix_extractor(
        fs: SharedFs,
        settings: ReadSettings,
        counters: Arc<ReadCounters>,
        prefix_extractor: Option<PrefixExtractor>,
    ) -> Arc<ReadContext> {
        let cache =
            (settings.block_cache_bytes > 0).then(|| Cache::new(settings.block_cache_bytes));
        ReadContext::with_cache(fs, settings, counters, prefix_extractor, cache)
    }

    /// [`ReadContext::with_prefix_extractor`] reading through `cache`
    /// (`None`: no block cache), which other contexts may share.
    pub(crate) fn with_cache(
        fs: SharedFs,
        settings: ReadSettings,
        counters: Arc<ReadCounters>,
        prefix_extractor: Option<PrefixExtractor>,
        cache: Option<Cache>,
    ) -> Arc<ReadContext> {
        let blocks = cache.filter(|cache| cache.capacity() > 0).map(|cache| {
            let owner = cache.new_owner();
            (cache, owner)
        });
        Arc::new(ReadContext {
            fs,
            counters,
            settings,
            prefix_extractor,
            keyspace_extractors: Arc::default(),
            blocks,
            files: quick_cache::sync::Cache::new(settings.max_open_files.max(1)),
            blob_files: BlobFiles::default(),
            next_table_id: AtomicU64::new(1),
            filter_bytes: AtomicU64::new(0),
            index_bytes: AtomicU64::new(0),
            range_filter_bytes: AtomicU64::new(0),
            file_read_nanos: AtomicU64::new(0),
        })
    }

    /// A context for one database's options.
    /// Its block cache is `Options::block_cache` when given (shared with
    /// other databases), else one of `Options::block_cache_bytes`.
    pub fn for_options(options: &Options, counters: Arc<ReadCounters>) -> Arc<ReadContext> {
        let settings = ReadSettings::from(options);
        let cache = match &options.block_cache {
            Some(shared) => Some(shared.clone()),
            None => {
                (settings.block_cache_bytes > 0).then(|| Cache::new(settings.block_cache_bytes))
            }
        };
        ReadContext::with_cache(
            Arc::clone(&options.fs),
            settings,
            counters,
            options.prefix_extractor.clone(),
            cache,
        )
    }

    /// A context on the real file system with default settings and fresh
    /// counters (for tools and tests that open tables on their own).
    pub fn standalone() -> Arc<ReadContext> {
        ReadContext::new(
            crate::fs::OsFileSystem::shared(),
            ReadSettings::default(),
            ReadCounters::new(),
        )
    }

    /// The counters every table of this context updates.
    pub fn counters(&self) -> &Arc<ReadCounters> {
        &self.counters
    }

    /// The settings.
    pub fn settings(&self) -> ReadSettings {
        self.settings
    }

    /// Bytes the block cache holds now (its entries' weights; of every
    /// database that shares it).
    pub fn block_cache_bytes(&self) -> u64 {
        self.blocks
            .as_ref()
            .map_or(0, |(cache, _)| cache.usage() as u64)
    }

    /// Blocks the block cache holds now.
    pub fn block_cache_len(&self) -> usize {
        self.blocks.as_ref().map_or(0, |(cache, _)| cache.len())
    }

    /// Table files held open by the open-file cache now.
    pub fn open_files(&self) -> usize {
        self.files.len()
    }

    /// Bytes of filters held by the open tables of this context.
    pub fn filter_bytes(&self) -> u64 {
        self.filter_bytes.load(Ordering::Relaxed)
    }

    /// Bytes of decoded indexes held by the open tables of this context.
    pub fn index_bytes(&self) -> u64 {
        self.index_bytes.load(Ordering::Relaxed)
    }

    /// Bytes of range filters held by the open tables of this context.
    pub fn range_filter_bytes(&self) -> u64 {
        self.range_filter_bytes.load(Ordering::Relaxed)
    }

    /// Counts a table's range filter memory in (`held`) or out.
    pub(crate) fn count_range_filter(&self, bytes: u64, held: bool) {
        if held {
            self.range_filter_bytes.fetch_add(bytes, Ordering::Relaxed);
        } else {
            self.range_filter_bytes.fetch_sub(bytes, Ordering::Relaxed);
        }
    }

    /// Counts a table's filter and index memory in (`held`) or out.
    pub(crate) fn count_metadata(&self, filter: u64, index: u64, held: bool) {
        for (total, bytes) in [(&self.filter_bytes, filter), (&self.index_bytes, index)] {
            if held {
                total.fetch_add(bytes, Ordering::Relaxed);
            } else {
                total.fetch_sub(bytes, Ordering::Relaxed);
            }
        }
    }

    /// Counts one data block read from a file that took `elapsed`.
    pub(crate) fn note_file_read(&self, elapsed: Duration) {
        // A sample counts for at most a few times the threshold: on a busy
        // machine one read that lost its core for a millisecond would
        // otherwise lift the average above the threshold for a hundred
        // reads from the page cache, and every scan of that spell would pay
        // a hint's system call per table (5% of an in-memory seekrandom
        // under load). Reads from the device stay far above it.
        let sample = u64::try_from(elapsed.as_nanos())
            .unwrap_or(u64::MAX)
            .min(SAMPLE_CAP_NANOS);
        let average = self.file_read_nanos.load(Ordering::Relaxed);
        // A plain load and store: readers racing here may drop one
        // another's sample, which an average can afford.
        let next = average - average / 8 + sample / 8;
        self.file_read_nanos.store(next, Ordering::Relaxed);
    }

    /// True when recent data block reads from files took long enough that
    /// they went to the device ([`SLOW_FILE_READ_NANOS`]).
    #[inline]
    pub(crate) fn file_reads_are_slow(&self) -> bool {
        self.file_read_nanos.load(Ordering::Relaxed) >= SLOW_FILE_READ_NANOS
    }

    /// True when the block cache holds data block `block_no` of table
    /// `table` (it does not count as a use).
    pub(crate) fn holds_block(&self, table: u64, block_no: usize) -> bool {
        self.blocks
            .as_ref()
            .is_some_and(|(cache, owner)| cache.contains(&(*owner, table, block_no)))
    }

    pub(crate) fn new_table_id(&self) -> u64 {
        self.next_table_id.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) fn cached_block(&self, table: u64, block_no: usize) -> Option<Block> {
        let (cache, owner) = self.blocks.as_ref()?;
        let cached = cache.get(&(*owner, table, block_no))?;
        Some(Block {
            data: cached.data,
            entries_end: cached.entries_end,
            restart_count: cached.restart_count,
        })
    }

    pub(crate) fn cache_block(&self, table: u64, block_no: usize, block: &Block) {
        if let Some((cache, owner)) = &self.blocks {
            let cached = CachedBlock {
                data: block.data.clone(),
                entries_end: block.entries_end,
                restart_count: block.restart_count,
            };
            cache.insert((*owner, table, block_no), cached);
        }
    }

    pub(crate) fn forget_block(&self, table: u64, block_no: usize) {
        if let Some((cache, owner)) = &self.blocks {
            cache.remove(&(*owner, table, block_no));
        }
    }

    /// The open file of table `id` at `path`: from the open-file cache, or
    /// opened now (and cached, closing the least recently used when full).
    pub(crate) fn file(&self, id: u64, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        if let Some(file) = self.files.get(&id) {
            return Ok(file);
        }
        let file = self.fs.open_read(path)?;
        self.files.insert(id, Arc::clone(&file));
        Ok(file)
    }

    /// Closes table `id`'s file (its table is going away).
    pub(crate) fn forget_file(&self, id: u64) {
        self.files.remove(&id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stray_slow_read_does_not_turn_scan_hints_on_but_a_run_does() {
        let context = ReadContext::standalone();
        let fast = Duration::from_micros(2);
        for _ in 0..64 {
            context.note_file_read(fast);
        }
        // A read that lost its core for a second, twice in a row.
        context.note_file_read(Duration::from_secs(1));
        context.note_file_read(Duration::from_secs(1));
        assert!(!context.file_reads_are_slow());
        for _ in 0..8 {
            context.note_file_read(fast);
        }
        // Reads from a device (70 µs each) turn them on within a few samples.
        for _ in 0..3 {
            context.note_file_read(Duration::from_micros(70));
        }
        assert!(context.file_reads_are_slow());
    }
}
