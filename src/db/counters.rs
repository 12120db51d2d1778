//! The counters the database keeps itself, bumped on the read, write and
//! background paths (the tables keep theirs in `ReadCounters`).
//!
//! Owns: [`DbCounters`], the per-thread tallies of gets and scans, and the
//! filter-build tallies. Must never: take a lock (every counter is an
//! atomic, read relaxed by `Db::stats`, in `stats.rs`).

use std::sync::atomic::{AtomicU64, Ordering};

use crate::counter::Sharded;
use crate::table::TableInfo;
use siftdb_filter::FilterKind;

/// Counters kept by the database itself (the tables keep theirs in `ReadCounters`).
#[derive(Default)]
pub(crate) struct DbCounters {
    /// Bumped by every get and scan: one shard per thread, so readers on
    /// different cores write no common cache line.
    pub reads: Sharded<QueryTally>,
    pub flushes: AtomicU64,
    /// Compaction inputs not read because a newer range tombstone deleted
    /// all of them.
    pub compaction_tables_deleted: AtomicU64,
    pub compactions: AtomicU64,
    pub write_groups: AtomicU64,
    pub writes: AtomicU64,
    /// Syncs of the write-ahead log (see `Stats::log_syncs`).
    pub log_syncs: AtomicU64,
    pub write_stalls: AtomicU64,
    pub write_stall_micros: AtomicU64,
    /// Transactions committed, and refused with `Error::Conflict`.
    pub transaction_commits: AtomicU64,
    pub transaction_conflicts: AtomicU64,
    /// Keys and values of acknowledged writes, in bytes.
    pub user_bytes_written: AtomicU64,
    pub flush_bytes_written: AtomicU64,
    pub compaction_bytes_read: AtomicU64,
    pub compaction_bytes_written: AtomicU64,
    pub background_errors: AtomicU64,
    pub background_retries: AtomicU64,
    pub merges_refused: AtomicU64,
    pub filter_builds: FilterBuildCounters,
}

/// Filters built by flushes and compactions: tables, keys and nanoseconds,
/// per family of kinds (Bloom; binary fuse).
#[derive(Default)]
pub(crate) struct FilterBuildCounters {
    pub bloom: [AtomicU64; 3],
    pub fuse: [AtomicU64; 3],
}

impl FilterBuildCounters {
    /// Counts the filter of a table just built.
    pub fn record(&self, info: &TableInfo) {
        let counters = match info.filter_kind {
            None => return,
            Some(FilterKind::BlockedBloom) => &self.bloom,
            Some(FilterKind::BinaryFuse8 | FilterKind::BinaryFuse16) => &self.fuse,
        };
        let nanos = u64::try_from(info.filter_build_time.as_nanos()).unwrap_or(u64::MAX);
        for (counter, amount) in counters.iter().zip([1, info.filter_keys, nanos]) {
            counter.fetch_add(amount, Ordering::Relaxed);
        }
    }
}

/// One thread shard's counters of gets and scans.
#[derive(Default)]
pub(crate) struct QueryTally {
    pub gets: AtomicU64,
    pub tables_consulted: AtomicU64,
    pub memtable_hits: AtomicU64,
    pub scans: AtomicU64,
    pub scan_tables: AtomicU64,
}
