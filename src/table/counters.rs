//! Read-path counters, shared by every table of a database.
//!
//! Owns: [`ReadCounters`] (live atomics, one `ReadTally` per thread
//! shard) and [`ReadStats`] (a plain copy, the shards summed).
//! Must never: cost more than a relaxed atomic add on the read path, write
//! a cache line other threads' reads write (each thread bumps its own
//! shard), or order anything — they are statistics, not synchronisation.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::counter::{Local, Sharded};

/// Live counters of the table read path: relaxed atomics, sharded so that
/// readers on different cores do not write one cache line.
#[derive(Debug, Default)]
pub struct ReadCounters {
    shards: Sharded<ReadTally>,
}

/// One thread shard's counters of the table read path.
#[derive(Debug, Default)]
pub(crate) struct ReadTally {
    /// See [`ReadStats::filter_checks`].
    pub filter_checks: AtomicU64,
    /// See [`ReadStats::filter_skips`].
    pub filter_skips: AtomicU64,
    /// See [`ReadStats::filter_false_positives`].
    pub filter_false_positives: AtomicU64,
    /// See [`ReadStats::data_block_reads`].
    pub data_block_reads: AtomicU64,
    /// See [`ReadStats::filter_fallbacks`].
    pub filter_fallbacks: AtomicU64,
    /// See [`ReadStats::block_cache_hits`].
    pub block_cache_hits: AtomicU64,
    /// See [`ReadStats::block_cache_misses`].
    pub block_cache_misses: AtomicU64,
    /// See [`ReadStats::block_reads_from_file`].
    pub block_reads_from_file: AtomicU64,
    /// See [`ReadStats::prefix_filter_checks`].
    pub prefix_filter_checks: AtomicU64,
    /// See [`ReadStats::prefix_filter_skips`].
    pub prefix_filter_skips: AtomicU64,
    /// See [`ReadStats::range_filter_checks`].
    pub range_filter_checks: AtomicU64,
    /// See [`ReadStats::range_filter_skips`].
    pub range_filter_skips: AtomicU64,
    /// See [`ReadStats::range_filter_point_skips`].
    pub range_filter_point_skips: AtomicU64,
    /// See [`ReadStats::range_tombstone_hits`].
    pub range_tombstone_hits: AtomicU64,
    /// See [`ReadStats::overlapped_batches`].
    pub overlapped_batches: AtomicU64,
    /// See [`ReadStats::overlapped_reads_uring`].
    pub overlapped_reads_uring: AtomicU64,
    /// See [`ReadStats::overlapped_reads_pool`].
    pub overlapped_reads_pool: AtomicU64,
    /// See [`ReadStats::direct_block_reads`].
    pub direct_block_reads: AtomicU64,
}

/// A plain copy of [`ReadCounters`] at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadStats {
    /// Gets that asked a table's filter.
    pub filter_checks: u64,
    /// Gets the filter answered "absent": data-block reads avoided.
    pub filter_skips: u64,
    /// Gets the filter let through that found no version visible at their
    /// snapshot (at `SeqNo::MAX`, exactly the filter's false positives).
    pub filter_false_positives: u64,
    /// Data blocks read by gets (iterators are not counted).
    pub data_block_reads: u64,
    /// Tables opened whose filter block was corrupt or of an unknown layout,
    /// so every key "may match" in them.
    pub filter_fallbacks: u64,
    /// Data blocks gets and scans found in the block cache.
    pub block_cache_hits: u64,
    /// Data blocks gets and scans looked for in the block cache and did not
    /// find (each is then read from its file).
    pub block_cache_misses: u64,
    /// Data blocks read from table files for gets and scans (what the
    /// filters did not save). Compaction's and verify's whole-table reads
    /// are not counted.
    pub block_reads_from_file: u64,
    /// Scans that asked a table's filter about the one prefix every key of
    /// their range has (tables built with the database's extractor).
    pub prefix_filter_checks: u64,
    /// Of those, the tables the filter ruled out: not read by the scan.
    pub prefix_filter_skips: u64,
    /// Scans with both bounds that asked a table's range filter.
    pub range_filter_checks: u64,
    /// Of those, the tables the range filter found empty in the range.
    pub range_filter_skips: u64,
    /// Gets the point filter let through whose data block was not at hand
    /// (to be read from the file) and that the table's range filter ruled
    /// out: a file read saved per skip.
    pub range_filter_point_skips: u64,
    /// Gets a table answered from one of its range tombstones, whatever
    /// its point filter said (the filter then only spared the data block).
    pub range_tombstone_hits: u64,
    /// Batches of data-block reads a `multi_get` issued together (two or
    /// more blocks missing from the block cache in one step).
    pub overlapped_batches: u64,
    /// Data blocks those batches read through io_uring.
    pub overlapped_reads_uring: u64,
    /// Data blocks those batches read on the read pool (io_uring refused,
    /// turned off by `Options::io_uring`, or a file without a descriptor).
    pub overlapped_reads_pool: u64,
    /// Data blocks read past the page cache (`Options::direct_reads`).
    pub direct_block_reads: u64,
}

impl ReadCounters {
    /// Fresh zeroed counters, ready to share.
    pub fn new() -> Arc<ReadCounters> {
        Arc::new(ReadCounters::default())
    }

    /// The current values (every shard's, summed).
    pub fn snapshot(&self) -> ReadStats {
        let mut sum = ReadStats::default();
        for t in self.shards.iter() {
            let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
            sum.filter_checks += get(&t.filter_checks);
            sum.filter_skips += get(&t.filter_skips);
            sum.filter_false_positives += get(&t.filter_false_positives);
            sum.data_block_reads += get(&t.data_block_reads);
            sum.filter_fallbacks += get(&t.filter_fallbacks);
            sum.block_cache_hits += get(&t.block_cache_hits);
            sum.block_cache_misses += get(&t.block_cache_misses);
            sum.block_reads_from_file += get(&t.block_reads_from_file);
            sum.prefix_filter_checks += get(&t.prefix_filter_checks);
            sum.prefix_filter_skips += get(&t.prefix_filter_skips);
            sum.range_filter_checks += get(&t.range_filter_checks);
            sum.range_filter_skips += get(&t.range_filter_skips);
            sum.range_filter_point_skips += get(&t.range_filter_point_skips);
            sum.range_tombstone_hits += get(&t.range_tombstone_hits);
            sum.overlapped_batches += get(&t.overlapped_batches);
            sum.overlapped_reads_uring += get(&t.overlapped_reads_uring);
            sum.overlapped_reads_pool += get(&t.overlapped_reads_pool);
            sum.direct_block_reads += get(&t.direct_block_reads);
        }
        sum
    }

    /// The calling thread's shard, to bump ([`Local::bump`], [`Local::add`]).
    #[inline]
    pub(crate) fn local(&self) -> Local<'_, ReadTally> {
        self.shards.local()
    }
}

impl ReadStats {
    /// What happened between `earlier` and `self`.
    pub fn since(&self, earlier: &ReadStats) -> ReadStats {
        ReadStats {
            filter_checks: self.filter_checks.saturating_sub(earlier.filter_checks),
            filter_skips: self.filter_skips.saturating_sub(earlier.filter_skips),
            filter_false_positives: self
                .filter_false_positives
                .saturating_sub(earlier.filter_false_positives),
            data_block_reads: self
                .data_block_reads
                .saturating_sub(earlier.data_block_reads),
            filter_fallbacks: self
                .filter_fallbacks
                .saturating_sub(earlier.filter_fallbacks),
            block_cache_hits: self
                .block_cache_hits
                .saturating_sub(earlier.block_cache_hits),
            block_cache_misses: self
                .block_cache_misses
                .saturating_sub(earlier.block_cache_misses),
            block_reads_from_file: self
                .block_reads_from_file
                .saturating_sub(earlier.block_reads_from_file),
            prefix_filter_checks: self
                .prefix_filter_checks
                .saturating_sub(earlier.prefix_filter_checks),
            prefix_filter_skips: self
                .prefix_filter_skips
                .saturating_sub(earlier.prefix_filter_skips),
            range_filter_checks: self
                .range_filter_checks
                .saturating_sub(earlier.range_filter_checks),
            range_filter_skips: self
                .range_filter_skips
                .saturating_sub(earlier.range_filter_skips),
            range_filter_point_skips: self
                .range_filter_point_skips
                .saturating_sub(earlier.range_filter_point_skips),
            range_tombstone_hits: self
                .range_tombstone_hits
                .saturating_sub(earlier.range_tombstone_hits),
            overlapped_batches: self
                .overlapped_batches
                .saturating_sub(earlier.overlapped_batches),
            overlapped_reads_uring: self
                .overlapped_reads_uring
                .saturating_sub(earlier.overlapped_reads_uring),
            overlapped_reads_pool: self
                .overlapped_reads_pool
                .saturating_sub(earlier.overlapped_reads_pool),
            direct_block_reads: self
                .direct_block_reads
                .saturating_sub(earlier.direct_block_reads),
        }
    }
}
