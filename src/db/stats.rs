//! [`Stats`], the snapshot of the database's counters (`counters.rs`) and
//! of the keyspaces' shape that [`Db::stats`] assembles.
//!
//! Owns: the public statistics types and their assembly. Must never: take a lock a write or a flush holds for long while
//! assembling (counters are read relaxed; each keyspace's super-version is
//! loaded without a lock), or promise more than a moment's consistency
//! between figures.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::background;
use super::counters::FilterBuildCounters;
use super::latency::{HistogramStats, Histograms};
use super::super_version::SuperVersion;
use super::tree::Tree;
use super::version::LiveTable;
use super::version::LEVELS;
use crate::db::handle::Db;
use crate::table::{LevelFilterStats, Table};

impl FilterBuildCounters {
    /// One family's tallies, as the public figures.
    fn snapshot(counters: &[AtomicU64; 3]) -> FilterBuildStats {
        let [tables, keys, nanos] = counters.each_ref().map(|c| c.load(Ordering::Relaxed));
        FilterBuildStats {
            tables,
            keys,
            nanos,
        }
    }
}

/// Filters of one family built since open (by flushes and compactions, in
/// the background).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct FilterBuildStats {
    /// Filters built.
    pub tables: u64,
    /// Keys they were built over.
    pub keys: u64,
    /// Nanoseconds their construction took (hashing the keys excluded).
    pub nanos: u64,
}

impl FilterBuildStats {
    /// Construction time per key, in nanoseconds (0 when none was built).
    pub fn nanos_per_key(&self) -> f64 {
        if self.keys == 0 {
            0.0
        } else {
            self.nanos as f64 / self.keys as f64
        }
    }
}

/// A snapshot of the database's counters and shape.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct Stats {
    /// Table filters asked on point lookups.
    pub filter_checks: u64,
    /// Lookups a filter answered "absent": data reads avoided.
    pub filter_skips: u64,
    /// Filter said "maybe" and the table did not hold the key.
    pub filter_false_positives: u64,
    /// Tables whose filter block failed its checks and so is not used.
    pub filter_fallbacks: u64,
    /// Data blocks read by lookups (from the block cache or the file).
    pub data_block_reads: u64,
    /// Data blocks gets and scans found in the block cache.
    pub block_cache_hits: u64,
    /// Data blocks gets and scans did not find in the block cache.
    pub block_cache_misses: u64,
    /// Data blocks read from table files for gets and scans: what the filters
    /// and the block cache did not save (compaction's reads not counted).
    pub block_reads_from_file: u64,
    /// Bytes the block cache holds now (at most `Options::block_cache_bytes`;
    /// with `Options::block_cache`, the shared cache's, every database's).
    pub block_cache_bytes: u64,
    /// Bytes of memory the filters of open tables hold (tables a scan or a
    /// snapshot still reads after compaction replaced them included).
    pub filter_bytes: u64,
    /// Bytes of dropped filters' memory the process keeps to hand to the
    /// next filters of their size (a table build's filter of 1 MiB or
    /// more): at most two mappings of at most 8 MiB, for the whole
    /// process, not per database.
    pub spare_filter_bytes: u64,
    /// Bytes of memory the decoded indexes of open tables hold.
    pub index_bytes: u64,
    /// Filter memory of the live tables, per level.
    pub level_filter_bytes: Vec<u64>,
    /// Index memory of the live tables, per level.
    pub level_index_bytes: Vec<u64>,
    /// The filters of the live tables, per level: kinds, bits per key,
    /// expected rate, and the rate measured on this database's lookups
    /// since its tables were opened.
    pub level_filters: Vec<LevelFilterStats>,
    /// Blocked Bloom filters built since open.
    pub bloom_filter_builds: FilterBuildStats,
    /// Binary fuse filters built since open.
    pub fuse_filter_builds: FilterBuildStats,
    /// Table files held open now (at most `Options::max_open_files`, give
    /// or take readers between a reopen and their read).
    pub open_table_files: usize,
    /// Point lookups served.
    pub gets: u64,
    /// Tables whose key range held the key, summed over lookups.
    pub tables_consulted: u64,
    /// Live tables.
    pub table_count: usize,
    /// Live tables that could not be opened (reads of their key ranges
    /// fail with `Corruption`; see `RecoveryReport::damaged_tables`).
    pub damaged_tables: usize,
    /// Live tables per level.
    pub level_tables: Vec<usize>,
    /// Bytes of live tables per level.
    pub level_bytes: Vec<u64>,
    /// Immutable memtables waiting to be flushed.
    pub immutable_memtables: usize,
    /// Approximate bytes in the active memtables (one per keyspace).
    pub memtable_bytes: usize,
    /// Approximate bytes in the immutable memtables waiting to be flushed
    /// (with `memtable_bytes`: what `Options::total_memtable_bytes` bounds).
    pub immutable_memtable_bytes: usize,
    /// Bytes of the memtables' key filters, active and immutable (one bit
    /// per 16 bytes of `Options::memtable_bytes` each).
    pub memtable_filter_bytes: usize,
    /// Memtables flushed to tables since open.
    pub flushes: u64,
    /// Compactions run since open.
    pub compactions: u64,
    /// Writes (batches) acknowledged since open.
    pub writes: u64,
    /// Log writes, each carrying one or more batches (group commit).
    pub write_groups: u64,
    /// Syncs (fdatasync) of the write-ahead log since open: one per log
    /// write carrying a synced batch ([`WriteOptions::sync`](crate::options::WriteOptions::sync),
    /// [`Options::sync_writes`](crate::options::Options::sync_writes)), one per [`Db::persist`], and one as each
    /// log is left for a new one. What durability costs, in device flushes.
    pub log_syncs: u64,
    /// Times a writer waited for background work.
    pub write_stalls: u64,
    /// Time writers spent waiting for background work (too many immutable
    /// memtables, or a full level 0), in microseconds, summed over stalls
    /// (each rounded up to a whole microsecond).
    pub write_stall_micros: u64,
    /// Time compactions waited to keep to
    /// `Options::compaction_bytes_per_sec`, in microseconds.
    pub compaction_paced_micros: u64,
    /// Bytes of keys and values in acknowledged writes (what the
    /// application put: no log or table overhead).
    pub user_bytes_written: u64,
    /// Bytes of the tables flushes wrote.
    pub flush_bytes_written: u64,
    /// Bytes of the tables compactions read (their inputs; tables moved
    /// down a level without a rewrite not counted).
    pub compaction_bytes_read: u64,
    /// Bytes of the tables compactions wrote.
    pub compaction_bytes_written: u64,
    /// Failed units of background work (flushes, compactions, recoveries)
    /// and failed log writes, since open.
    pub background_errors: u64,
    /// Retries of failed background work (automatic or by `resume`).
    pub background_retries: u64,
    /// Keys whose merge operands a compaction had to merge but the merge
    /// operator refused (or the keyspace had none), once per compaction
    /// that met them: it wrote them out unmerged and went on. Reads of
    /// such a key fail with `Error::MergeFailed` (not counted here) until
    /// a put or delete of it replaces them.
    pub merges_refused: u64,
    /// The failure background work is stuck on now, if any: what failed,
    /// how often, when it is retried, and the error.
    pub background_error: Option<String>,
    /// Last sequence number visible to reads.
    pub last_sequence: u64,
    /// Scans started (`iter`, `range`, `prefix`, on the database or a snapshot).
    pub scans: u64,
    /// Tables whose key range met a scan's range, summed over scans: the
    /// tables a scan reads unless a filter rules them out.
    pub scan_tables: u64,
    /// Tables whose filter a scan asked about the one prefix every key of
    /// its range has (needs `Options::prefix_extractor`; tables built with
    /// it).
    pub prefix_filter_checks: u64,
    /// Of those, tables the prefix ruled out: not read by the scan.
    pub prefix_filter_skips: u64,
    /// Tables whose range filter a scan with both bounds asked (needs
    /// `Options::range_filter_bits_per_key`; tables built with it).
    pub range_filter_checks: u64,
    /// Of those, tables the range filter found empty in the range.
    pub range_filter_skips: u64,
    /// Bytes of memory the range filters of open tables hold.
    pub range_filter_bytes: u64,
    /// Point lookups the point filter let through, whose data block was in
    /// neither the block cache nor a mapping, that the table's range filter
    /// ruled out before the block was read from the file (tables built with
    /// `Options::range_filter_bits_per_key`): file reads saved.
    pub range_filter_point_skips: u64,
    /// Lookups a table answered from one of its range tombstones (the
    /// table is asked whatever its point filter says; see
    /// [`Db::delete_range`]).
    pub range_tombstone_hits: u64,
    /// Live tables that hold range tombstones.
    pub range_tombstone_tables: usize,
    /// Waves of `multi_get`'s walk that read data blocks from files
    /// (overlapped, each started as its key's probe found it missing from
    /// the block cache; none when `Options::multi_get_in_flight` is 1).
    pub overlapped_batches: u64,
    /// Data blocks those batches read through io_uring.
    pub overlapped_reads_uring: u64,
    /// Data blocks those batches read on the read pool's threads (io_uring
    /// refused by the kernel, off by `Options::io_uring`, or a file system
    /// without file descriptors).
    pub overlapped_reads_pool: u64,
    /// Data blocks read past the operating system's page cache
    /// (`O_DIRECT`, [`Options::direct_reads`](crate::options::Options::direct_reads)); a file system that refuses
    /// it reads through the page cache and is not counted here.
    pub direct_block_reads: u64,
    /// Compaction inputs dropped without reading a block, because a newer
    /// range tombstone covered their whole key range.
    pub compaction_tables_deleted: u64,
    /// Transactions committed since open (compare-and-swaps included).
    pub transaction_commits: u64,
    /// Transaction commits refused with `Error::Conflict` since open.
    pub transaction_conflicts: u64,
    /// Bytes of memory the transaction oracle holds now (recent commits'
    /// key hashes and keys above the oldest live transaction's snapshot).
    pub oracle_bytes: u64,
    /// Each keyspace's shape, the default first.
    pub keyspaces: Vec<KeyspaceStats>,
    /// Percentiles of the latency and size histograms since the open or
    /// the last [`Db::reset_histograms`] (every bucket: [`Db::histograms`]).
    pub histograms: HistogramStats,
}

/// The shape of one keyspace (see [`Stats::keyspaces`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct KeyspaceStats {
    /// The keyspace's name.
    pub name: String,
    /// Its live tables.
    pub table_count: usize,
    /// The blob files its live tables point into whose figures the
    /// manifest holds (see `Options::blob_gc_garbage_ratio`).
    pub blob_files: usize,
    /// Bytes of the values written to those blob files.
    pub blob_file_bytes: u64,
    /// Of those, bytes of values no live table points to any more.
    pub blob_garbage_bytes: u64,
    /// Its live tables per level.
    pub level_tables: Vec<usize>,
    /// Bytes of its live tables per level.
    pub level_bytes: Vec<u64>,
    /// Its immutable memtables waiting to be flushed.
    pub immutable_memtables: usize,
    /// Approximate bytes in its active memtable.
    pub memtable_bytes: usize,
    /// Approximate bytes in its immutable memtables.
    pub immutable_memtable_bytes: usize,
    /// Point lookups of its keys since open (through the database, a
    /// keyspace handle, a snapshot or a transaction).
    pub gets: u64,
    /// Keys asked of it by `multi_get` calls since open.
    pub multi_get_keys: u64,
    /// Scans of it started since open.
    pub scans: u64,
}

impl Stats {
    /// Bytes written to tables (by flushes and compactions) per byte of
    /// keys and values put, since open; `None` before anything was put.
    /// The log's bytes (about one more per byte put) are not included.
    pub fn write_amplification(&self) -> Option<f64> {
        (self.user_bytes_written > 0).then(|| {
            (self.flush_bytes_written + self.compaction_bytes_written) as f64
                / self.user_bytes_written as f64
        })
    }

    /// The memory the database holds that these statistics count, in one
    /// figure: the block cache, the open tables' point filters, range
    /// filters and indexes, the memtables (active and waiting to be
    /// flushed) and their key filters, and the filter mappings the process
    /// keeps for reuse. Not counted: the allocator's overhead, the open
    /// files' kernel state, the page cache, and per-call buffers of scans
    /// and batches.
    pub fn memory_bytes(&self) -> u64 {
        let tables = self.block_cache_bytes
            + self.filter_bytes
            + self.range_filter_bytes
            + self.index_bytes
            + self.spare_filter_bytes;
        let memtables =
            self.memtable_bytes + self.immutable_memtable_bytes + self.memtable_filter_bytes;
        tables.saturating_add(u64::try_from(memtables).unwrap_or(u64::MAX))
    }
}

impl Db {
    /// Counters and shape: the shape summed over every keyspace, and each
    /// keyspace's own in [`Stats::keyspaces`].
    pub fn stats(&self) -> Stats {
        let inner = &self.inner;
        let reads = inner.tables.counters().snapshot();
        let c = &inner.counters;
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let svs: Vec<(Arc<Tree>, Arc<SuperVersion>)> = inner
            .trees
            .load()
            .iter()
            .map(|t| (Arc::clone(t), t.current.load_full()))
            .collect();
        let live = || {
            svs.iter()
                .flat_map(|(_, sv)| sv.version.levels.iter().enumerate())
        };
        let per_level = |f: &dyn Fn(&LiveTable) -> u64| {
            let mut sums = vec![0u64; LEVELS];
            for (level, tables) in live() {
                if let Some(sum) = sums.get_mut(level) {
                    *sum += tables.iter().map(|t| f(t)).sum::<u64>();
                }
            }
            sums
        };
        let readable = |f: fn(&Table) -> u64| move |t: &LiveTable| t.table.as_ref().map_or(0, f);
        let mut level_filters = vec![LevelFilterStats::default(); LEVELS];
        for (level, tables) in live() {
            if let Some(stats) = level_filters.get_mut(level) {
                // A damaged table has no filter to count.
                for table in tables.iter().filter_map(|t| t.table.as_ref().ok()) {
                    let (negatives, false_positives) = table.filter_answers_since_open();
                    stats.add_table(table, negatives, false_positives);
                }
            }
        }
        let keyspaces: Vec<KeyspaceStats> = svs
            .iter()
            .map(|(tree, sv)| KeyspaceStats {
                name: tree.name.clone(),
                table_count: sv.version.table_count(),
                blob_files: sv.version.blob_files.len(),
                blob_file_bytes: sv.version.blob_files.values().map(|f| f.total_bytes).sum(),
                blob_garbage_bytes: sv
                    .version
                    .blob_files
                    .values()
                    .map(|f| f.garbage_bytes)
                    .sum(),
                level_tables: sv.version.levels.iter().map(Vec::len).collect(),
                level_bytes: (0..sv.version.levels.len())
                    .map(|l| sv.version.level_bytes(l))
                    .collect(),
                immutable_memtables: sv.imm.len(),
                memtable_bytes: sv.mem.mem.approximate_bytes(),
                immutable_memtable_bytes: sv.immutable_bytes(),
                gets: tree.reads.total(|t| &t.gets),
                multi_get_keys: tree.reads.total(|t| &t.multi_get_keys),
                scans: tree.reads.total(|t| &t.scans),
            })
            .collect();
        let level_count = |f: fn(&KeyspaceStats) -> &Vec<u64>| {
            let mut sums = vec![0u64; LEVELS];
            for ks in &keyspaces {
                for (sum, value) in sums.iter_mut().zip(f(ks)) {
                    *sum += value;
                }
            }
            sums
        };
        let level_tables = {
            let mut sums = vec![0usize; LEVELS];
            for ks in &keyspaces {
                for (sum, value) in sums.iter_mut().zip(&ks.level_tables) {
                    *sum += value;
                }
            }
            sums
        };
        Stats {
            filter_checks: reads.filter_checks,
            filter_skips: reads.filter_skips,
            filter_false_positives: reads.filter_false_positives,
            filter_fallbacks: reads.filter_fallbacks,
            data_block_reads: reads.data_block_reads,
            block_cache_hits: reads.block_cache_hits,
            block_cache_misses: reads.block_cache_misses,
            block_reads_from_file: reads.block_reads_from_file,
            block_cache_bytes: inner.tables.block_cache_bytes(),
            prefix_filter_checks: reads.prefix_filter_checks,
            prefix_filter_skips: reads.prefix_filter_skips,
            range_filter_checks: reads.range_filter_checks,
            range_filter_skips: reads.range_filter_skips,
            range_filter_bytes: inner.tables.range_filter_bytes(),
            range_filter_point_skips: reads.range_filter_point_skips,
            range_tombstone_hits: reads.range_tombstone_hits,
            overlapped_batches: reads.overlapped_batches,
            overlapped_reads_uring: reads.overlapped_reads_uring,
            overlapped_reads_pool: reads.overlapped_reads_pool,
            direct_block_reads: reads.direct_block_reads,
            range_tombstone_tables: svs
                .iter()
                .map(|(_, sv)| sv.version.range_tombstone_tables())
                .sum(),
            compaction_tables_deleted: load(&c.compaction_tables_deleted),
            scans: c.reads.iter().map(|t| load(&t.scans)).sum(),
            scan_tables: c.reads.iter().map(|t| load(&t.scan_tables)).sum(),
            filter_bytes: inner.tables.filter_bytes(),
            spare_filter_bytes: siftdb_filter::spare_mapping_bytes() as u64,
            index_bytes: inner.tables.index_bytes(),
            level_filter_bytes: per_level(&readable(Table::filter_memory)),
            level_index_bytes: per_level(&readable(Table::index_memory)),
            level_filters,
            bloom_filter_builds: FilterBuildCounters::snapshot(&c.filter_builds.bloom),
            fuse_filter_builds: FilterBuildCounters::snapshot(&c.filter_builds.fuse),
            open_table_files: inner.tables.open_files(),
            gets: c.reads.iter().map(|t| load(&t.gets)).sum(),
            tables_consulted: c.reads.iter().map(|t| load(&t.tables_consulted)).sum(),
            table_count: keyspaces.iter().map(|k| k.table_count).sum(),
            damaged_tables: live()
                .flat_map(|(_, tables)| tables.iter())
                .filter(|t| t.is_damaged())
                .count(),
            level_tables,
            level_bytes: level_count(|k| &k.level_bytes),
            immutable_memtables: keyspaces.iter().map(|k| k.immutable_memtables).sum(),
            memtable_bytes: keyspaces.iter().map(|k| k.memtable_bytes).sum(),
            immutable_memtable_bytes: keyspaces.iter().map(|k| k.immutable_memtable_bytes).sum(),
            memtable_filter_bytes: svs
                .iter()
                .flat_map(|(_, sv)| std::iter::once(&sv.mem).chain(&sv.imm))
                .map(|m| m.mem.key_filter_bytes())
                .sum(),
            flushes: load(&c.flushes),
            compactions: load(&c.compactions),
            writes: load(&c.writes),
            write_groups: load(&c.write_groups),
            log_syncs: load(&c.log_syncs),
            write_stalls: load(&c.write_stalls),
            write_stall_micros: load(&c.write_stall_micros),
            compaction_paced_micros: inner.pacer.as_ref().map_or(0, |p| p.paced_micros()),
            user_bytes_written: load(&c.user_bytes_written),
            flush_bytes_written: load(&c.flush_bytes_written),
            compaction_bytes_read: load(&c.compaction_bytes_read),
            compaction_bytes_written: load(&c.compaction_bytes_written),
            background_errors: load(&c.background_errors),
            background_retries: load(&c.background_retries),
            merges_refused: load(&c.merges_refused),
            background_error: background::current_failure(inner),
            last_sequence: inner.last_visible.load(Ordering::Acquire),
            transaction_commits: load(&c.transaction_commits),
            transaction_conflicts: load(&c.transaction_conflicts),
            oracle_bytes: inner.oracle.lock().memory_bytes(),
            keyspaces,
            histograms: self.histograms().summary(),
        }
    }
}

impl Db {
    /// The histograms of latencies and sizes since the open or the last
    /// [`Db::reset_histograms`] (all empty with
    /// [`Options::histograms`](crate::Options::histograms)`(false)`).
    /// [`Db::stats`] gives their percentiles; this gives every bucket.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = siftdb::Db::open(dir.path())?;
    /// for i in 0..1000 {
    ///     db.put(format!("key{i}"), "value")?;
    ///     db.get(format!("key{i}"))?;
    /// }
    /// let gets = db.histograms().get_nanos;
    /// assert_eq!(gets.ops(), 1000);
    /// println!("p99 of a get: {} ns", gets.value_at_quantile(0.99));
    /// db.reset_histograms();
    /// assert_eq!(db.histograms().get_nanos.ops(), 0);
    /// # Ok::<(), siftdb::Error>(())
    /// ```
    pub fn histograms(&self) -> Histograms {
        self.inner.latency.snapshot()
    }

    /// Starts the histograms afresh: later snapshots count only what was
    /// recorded after this call. Counters of [`Db::stats`] are not reset.
    pub fn reset_histograms(&self) {
        self.inner.latency.reset();
    }
}
