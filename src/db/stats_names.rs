//! [`Stats`] as named figures: every counter and every gauge with its
//! name, for printing and exporting (the CLI's `stats`, the `metrics`
//! feature) without a list of fields in each.
//!
//! Owns: the names (each the field's) and which figures are counters
//! (they only grow while the database is open) and which are gauges.
//! Must never: leave a scalar field of `Stats` out (a test counts them).

use super::stats::Stats;

impl Stats {
    /// Every counter (a figure that only grows while the database is
    /// open), with its field's name; a filter-build tally's three are
    /// `bloom_filter_builds_tables` and so on.
    pub fn counters(&self) -> Vec<(&'static str, u64)> {
        let (bloom, fuse) = (&self.bloom_filter_builds, &self.fuse_filter_builds);
        vec![
            ("gets", self.gets),
            ("tables_consulted", self.tables_consulted),
            ("filter_checks", self.filter_checks),
            ("filter_skips", self.filter_skips),
            ("filter_false_positives", self.filter_false_positives),
            ("filter_fallbacks", self.filter_fallbacks),
            ("data_block_reads", self.data_block_reads),
            ("block_cache_hits", self.block_cache_hits),
            ("block_cache_misses", self.block_cache_misses),
            ("block_reads_from_file", self.block_reads_from_file),
            ("direct_block_reads", self.direct_block_reads),
            ("scans", self.scans),
            ("scan_tables", self.scan_tables),
            ("prefix_filter_checks", self.prefix_filter_checks),
            ("prefix_filter_skips", self.prefix_filter_skips),
            ("range_filter_checks", self.range_filter_checks),
            ("range_filter_skips", self.range_filter_skips),
            ("range_filter_point_skips", self.range_filter_point_skips),
            ("range_tombstone_hits", self.range_tombstone_hits),
            ("overlapped_batches", self.overlapped_batches),
            ("overlapped_reads_uring", self.overlapped_reads_uring),
            ("overlapped_reads_pool", self.overlapped_reads_pool),
            ("writes", self.writes),
            ("write_groups", self.write_groups),
            ("log_syncs", self.log_syncs),
            ("write_stalls", self.write_stalls),
            ("write_stall_micros", self.write_stall_micros),
            ("user_bytes_written", self.user_bytes_written),
            ("flushes", self.flushes),
            ("flush_bytes_written", self.flush_bytes_written),
            ("compactions", self.compactions),
            ("compaction_bytes_read", self.compaction_bytes_read),
            ("compaction_bytes_written", self.compaction_bytes_written),
            ("compaction_paced_micros", self.compaction_paced_micros),
            ("compaction_tables_deleted", self.compaction_tables_deleted),
            ("merges_refused", self.merges_refused),
            ("background_errors", self.background_errors),
            ("background_retries", self.background_retries),
            ("transaction_commits", self.transaction_commits),
            ("transaction_conflicts", self.transaction_conflicts),
            ("bloom_filter_builds_tables", bloom.tables),
            ("bloom_filter_builds_keys", bloom.keys),
            ("bloom_filter_builds_nanos", bloom.nanos),
            ("fuse_filter_builds_tables", fuse.tables),
            ("fuse_filter_builds_keys", fuse.keys),
            ("fuse_filter_builds_nanos", fuse.nanos),
        ]
    }

    /// Every gauge (a figure of the database as it is now: memory, files,
    /// shape), with its field's name; `memory_bytes` is
    /// [`Stats::memory_bytes`]. Per-level and per-keyspace figures are in
    /// their own fields.
    pub fn gauges(&self) -> Vec<(&'static str, u64)> {
        let wide = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
        vec![
            ("last_sequence", self.last_sequence),
            ("table_count", wide(self.table_count)),
            ("damaged_tables", wide(self.damaged_tables)),
            ("range_tombstone_tables", wide(self.range_tombstone_tables)),
            ("open_table_files", wide(self.open_table_files)),
            ("immutable_memtables", wide(self.immutable_memtables)),
            ("memtable_bytes", wide(self.memtable_bytes)),
            (
                "immutable_memtable_bytes",
                wide(self.immutable_memtable_bytes),
            ),
            ("memtable_filter_bytes", wide(self.memtable_filter_bytes)),
            ("block_cache_bytes", self.block_cache_bytes),
            ("filter_bytes", self.filter_bytes),
            ("range_filter_bytes", self.range_filter_bytes),
            ("index_bytes", self.index_bytes),
            ("spare_filter_bytes", self.spare_filter_bytes),
            ("oracle_bytes", self.oracle_bytes),
            ("memory_bytes", self.memory_bytes()),
        ]
    }
}
