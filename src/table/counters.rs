//! Read-path counters, shared by every table of a database.
//!
//! Owns: [`ReadCounters`] (live atomics) and [`ReadStats`] (a plain copy).
//! Must never: cost more than a relaxed atomic add on the read path, or
//! order anything — they are statistics, not synchronisation.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Live counters of the table read path (relaxed atomics).
#[derive(Debug, Default)]
pub struct ReadCounters {
    /// Gets that asked a table's filter.
    pub filter_checks: AtomicU64,
    /// Gets the filter answered "absent": data-block reads avoided.
    pub filter_skips: AtomicU64,
    /// Gets the filter let through that found no version visible at their
    /// snapshot (at `SeqNo::MAX`, exactly the filter's false positives).
    pub filter_false_positives: AtomicU64,
    /// Data blocks read by gets (iterators are not counted).
    pub data_block_reads: AtomicU64,
    /// Tables opened whose filter block was corrupt or of an unknown layout,
    /// so every key "may match" in them.
    pub filter_fallbacks: AtomicU64,
    /// Data blocks gets and scans found in the block cache.
    pub block_cache_hits: AtomicU64,
    /// Data blocks gets and scans looked for in the block cache and did not
    /// find (each is then read from its file).
    pub block_cache_misses: AtomicU64,
    /// Data blocks read from table files for gets and scans (what the
    /// filters did not save). Compaction's and verify's whole-table reads
    /// are not counted.
    pub block_reads_from_file: AtomicU64,
    /// Scans that asked a table's filter about the one prefix every key of
    /// their range has (tables built with the database's extractor).
    pub prefix_filter_checks: AtomicU64,
    /// Of those, the tables the filter ruled out: not read by the scan.
    pub prefix_filter_skips: AtomicU64,
    /// Scans with both bounds that asked a table's range filter.
    pub range_filter_checks: AtomicU64,
    /// Of those, the tables the range filter found empty in the range.
    pub range_filter_skips: AtomicU64,
}

/// A plain copy of [`ReadCounters`] at one moment.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadStats {
    /// See [`ReadCounters::filter_checks`].
    pub filter_checks: u64,
    /// See [`ReadCounters::filter_skips`].
    pub filter_skips: u64,
    /// See [`ReadCounters::filter_false_positives`].
    pub filter_false_positives: u64,
    /// See [`ReadCounters::data_block_reads`].
    pub data_block_reads: u64,
    /// See [`ReadCounters::filter_fallbacks`].
    pub filter_fallbacks: u64,
    /// See [`ReadCounters::block_cache_hits`].
    pub block_cache_hits: u64,
    /// See [`ReadCounters::block_cache_misses`].
    pub block_cache_misses: u64,
    /// See [`ReadCounters::block_reads_from_file`].
    pub block_reads_from_file: u64,
    /// See [`ReadCounters::prefix_filter_checks`].
    pub prefix_filter_checks: u64,
    /// See [`ReadCounters::prefix_filter_skips`].
    pub prefix_filter_skips: u64,
    /// See [`ReadCounters::range_filter_checks`].
    pub range_filter_checks: u64,
    /// See [`ReadCounters::range_filter_skips`].
    pub range_filter_skips: u64,
}

impl ReadCounters {
    /// Fresh zeroed counters, ready to share.
    pub fn new() -> Arc<ReadCounters> {
        Arc::new(ReadCounters::default())
    }

    /// The current values.
    pub fn snapshot(&self) -> ReadStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        ReadStats {
            filter_checks: get(&self.filter_checks),
            filter_skips: get(&self.filter_skips),
            filter_false_positives: get(&self.filter_false_positives),
            data_block_reads: get(&self.data_block_reads),
            filter_fallbacks: get(&self.filter_fallbacks),
            block_cache_hits: get(&self.block_cache_hits),
            block_cache_misses: get(&self.block_cache_misses),
            block_reads_from_file: get(&self.block_reads_from_file),
            prefix_filter_checks: get(&self.prefix_filter_checks),
            prefix_filter_skips: get(&self.prefix_filter_skips),
            range_filter_checks: get(&self.range_filter_checks),
            range_filter_skips: get(&self.range_filter_skips),
        }
    }

    #[inline]
    pub(crate) fn bump(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    #[inline]
    pub(crate) fn add(counter: &AtomicU64, amount: u64) {
        if amount > 0 {
            counter.fetch_add(amount, Ordering::Relaxed);
        }
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
        }
    }
}
