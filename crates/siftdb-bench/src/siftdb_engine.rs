//! siftdb itself as a benchmark [`Engine`].
//!
//! Owns: the adapter from the workload seam to [`Db`], and the names of the
//! counters siftdb reports per phase.
//! Must never: tune siftdb beyond what the run's flags say — any setting
//! that differs from the defaults is listed by `settings`.

use std::path::Path;

use crate::{
    changed_value, siftdb_storage_options, CompressionChoice, Counters, Engine, LockRetries,
    ScanBuffer, BLOCKS_READ_FROM_FILE, WRITE_STALL_MICROS,
};
use siftdb::{Db, DbIterator, FilterPolicy, Options, PrefixExtractor};

/// How siftdb is opened beyond its defaults (each shows in `settings`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SiftdbConfig {
    /// The filter policy (`Default`: the library's, level-aware 10 bits per
    /// key with static filters from level 1).
    pub filter_policy: FilterPolicy,
    /// Memtable size; `None` keeps the default.
    pub memtable_bytes: Option<usize>,
    /// Level-1 size (tables then target half of it), which scales the tree
    /// down so a small N reaches as many levels as a large one; `None` keeps
    /// the defaults (a 256 MiB level 1, 32 MiB tables).
    pub level1_bytes: Option<u64>,
    /// A fixed-length prefix extractor of this many bytes.
    pub prefix_len: Option<usize>,
    /// Range filter bits per key; `None` builds none.
    pub range_bits_per_key: Option<f64>,
    /// Block cache capacity; `None` keeps the default (siftdb-peers sets
    /// the peers' budget, so every engine caches blocks in the same memory).
    pub block_cache_bytes: Option<usize>,
    /// Read data blocks past the page cache (`Options::direct_reads`).
    pub direct_reads: bool,
    /// Record no latency or size histograms (`Options::histograms(false)`):
    /// the other side of their cost's A/B.
    pub histograms_off: bool,
    /// `--compression` (siftdb has LZ4 only, its default).
    pub compression: CompressionChoice,
    /// `--blob-threshold`: key-value separation from this many bytes
    /// (refused: siftdb has none yet).
    pub blob_threshold: Option<u64>,
}

/// A siftdb database under measurement.
pub struct SiftdbEngine {
    db: Db,
    settings: Vec<(String, String)>,
}

impl SiftdbEngine {
    /// Opens a fresh database in `dir` with default options, Bloom filters of
    /// `bits_per_key`, and `memtable_bytes` if given.
    pub fn open(
        dir: &Path,
        bits_per_key: f64,
        memtable_bytes: Option<usize>,
    ) -> Result<SiftdbEngine, String> {
        SiftdbEngine::open_with(
            dir,
            &SiftdbConfig {
                filter_policy: FilterPolicy::bits_per_key(bits_per_key),
                memtable_bytes,
                ..SiftdbConfig::default()
            },
        )
    }

    /// [`SiftdbEngine::open`] with any filter policy, and `level1_bytes` if
    /// given (see [`SiftdbConfig::level1_bytes`]).
    pub fn open_with_policy(
        dir: &Path,
        policy: FilterPolicy,
        memtable_bytes: Option<usize>,
        level1_bytes: Option<u64>,
    ) -> Result<SiftdbEngine, String> {
        SiftdbEngine::open_with(
            dir,
            &SiftdbConfig {
                filter_policy: policy,
                memtable_bytes,
                level1_bytes,
                ..SiftdbConfig::default()
            },
        )
    }

    /// Opens a fresh database in `dir` with default options changed as
    /// `config` says.
    pub fn open_with(dir: &Path, config: &SiftdbConfig) -> Result<SiftdbEngine, String> {
        let policy = config.filter_policy;
        let mut opts = Options::default().filter_policy(policy);
        let setting = if policy == FilterPolicy::bits_per_key(policy.average_bits_per_key()) {
            (
                "bloom_bits_per_key",
                policy.average_bits_per_key().to_string(),
            )
        } else {
            ("filter_policy", policy.to_string())
        };
        let mut settings = vec![(setting.0.to_string(), setting.1)];
        if let Some(bytes) = config.memtable_bytes {
            opts = opts.memtable_bytes(bytes);
            settings.push(("memtable_bytes".to_string(), bytes.to_string()));
        }
        if let Some(bytes) = config.level1_bytes {
            let table_bytes = (bytes / 2).max(1);
            opts = opts.level1_bytes(bytes).table_target_bytes(table_bytes);
            settings.push(("level1_bytes".to_string(), bytes.to_string()));
            settings.push(("table_target_bytes".to_string(), table_bytes.to_string()));
        }
        if let Some(len) = config.prefix_len {
            let extractor = PrefixExtractor::fixed(len).map_err(|e| e.to_string())?;
            settings.push(("prefix_extractor".to_string(), extractor.name().to_string()));
            opts = opts.prefix_extractor(extractor);
        }
        if let Some(bits) = config.range_bits_per_key {
            opts = opts.range_filter_bits_per_key(bits);
            settings.push(("range_filter_bits_per_key".to_string(), bits.to_string()));
        }
        if let Some(bytes) = config.block_cache_bytes {
            opts = opts.block_cache_bytes(bytes);
            settings.push(("block_cache_bytes".to_string(), bytes.to_string()));
        }
        if config.direct_reads {
            opts = opts.direct_reads(true);
            settings.push(("direct_reads".to_string(), "true".to_string()));
        }
        if config.histograms_off {
            opts = opts.histograms(false);
            settings.push(("histograms".to_string(), "false".to_string()));
        }
        let (opts, storage) =
            siftdb_storage_options(opts, config.compression, config.blob_threshold)?;
        settings.extend(storage);
        let db = Db::open_with(dir, opts).map_err(|e| e.to_string())?;
        Ok(SiftdbEngine { db, settings })
    }

    /// The database, for callers that want more than the workload needs.
    pub fn db(&self) -> &Db {
        &self.db
    }
}

/// The first `limit` entries of a scan into `out`.
fn fill(
    scan: impl Iterator<Item = <DbIterator as Iterator>::Item>,
    limit: usize,
    out: &mut ScanBuffer,
) -> Result<(), String> {
    for entry in scan.take(limit) {
        let (key, value) = entry.map_err(|e| e.to_string())?;
        out.push(&key, &value);
    }
    Ok(())
}

impl Engine for SiftdbEngine {
    fn name(&self) -> String {
        format!("siftdb {}", env!("CARGO_PKG_VERSION"))
    }

    fn settings(&self) -> Vec<(String, String)> {
        self.settings.clone()
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), String> {
        self.db.put(key, value).map_err(|e| e.to_string())
    }

    fn get(&self, key: &[u8], value: &mut Vec<u8>) -> Result<bool, String> {
        match self.db.get(key).map_err(|e| e.to_string())? {
            Some(found) => {
                value.extend_from_slice(&found);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn multi_get(&self, keys: &[Vec<u8>], values: &mut Vec<Option<Vec<u8>>>) -> Result<(), String> {
        let found = self.db.multi_get(keys).map_err(|e| e.to_string())?;
        values.extend(found.into_iter().map(|v| v.map(|v| v.to_vec())));
        Ok(())
    }

    fn scan(&self, start: &[u8], limit: usize, out: &mut ScanBuffer) -> Result<(), String> {
        fill(self.db.range(start..), limit, out)
    }

    fn scan_prefix(&self, prefix: &[u8], limit: usize, out: &mut ScanBuffer) -> Result<(), String> {
        fill(self.db.prefix(prefix), limit, out)
    }

    fn scan_rev(&self, end: &[u8], limit: usize, out: &mut ScanBuffer) -> Result<(), String> {
        fill(self.db.range(..=end).rev(), limit, out)
    }

    fn scan_range(
        &self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        out: &mut ScanBuffer,
    ) -> Result<(), String> {
        fill(self.db.range(start..end), limit, out)
    }

    fn delete_range(&self, start: &[u8], end: &[u8]) -> Result<(), String> {
        self.db.delete_range(start..end).map_err(|e| e.to_string())
    }

    fn read_modify_write(&self, a: &[u8], b: &[u8]) -> Result<u64, String> {
        let mut conflicts = 0;
        loop {
            let mut txn = self.db.transaction();
            for key in [a, b] {
                let old = txn.get(key).map_err(|e| e.to_string())?;
                txn.put(key, changed_value(old.as_deref()))
                    .map_err(|e| e.to_string())?;
            }
            match txn.commit() {
                Err(siftdb::Error::Conflict) => conflicts += 1,
                other => return other.map(|()| conflicts).map_err(|e| e.to_string()),
            }
        }
    }

    /// A locking transaction (`TransactionOptions::pessimistic`, its 1 s
    /// default lock timeout): `get_for_update` both keys, put both, commit.
    fn locking_read_modify_write(&self, a: &[u8], b: &[u8]) -> Result<LockRetries, String> {
        let mut retries = LockRetries::default();
        loop {
            let mut txn = self
                .db
                .transaction_with(siftdb::TransactionOptions::pessimistic());
            let attempt = [a, b].into_iter().try_for_each(|key| {
                let old = txn.get_for_update(key)?;
                txn.put(key, changed_value(old.as_deref()))
            });
            match attempt {
                Err(siftdb::Error::Deadlock { .. }) => retries.deadlocks += 1,
                Err(siftdb::Error::LockTimeout { .. }) => retries.timeouts += 1,
                Err(e) => return Err(e.to_string()),
                Ok(()) => return txn.commit().map(|()| retries).map_err(|e| e.to_string()),
            }
        }
    }

    fn flush_and_wait(&self) -> Result<(), String> {
        self.db.flush().map_err(|e| e.to_string())?;
        self.db.wait_for_background().map_err(|e| e.to_string())
    }

    fn counters(&self) -> Option<Counters> {
        let s = self.db.stats();
        // One line per `Stats` figure the reports show: a new counter is
        // one more line here.
        let figures = [
            ("filter_checks", s.filter_checks),
            ("filter_skips", s.filter_skips),
            ("filter_false_positives", s.filter_false_positives),
            ("data_block_reads", s.data_block_reads),
            // Data blocks the block cache did not hold, read from a table
            // file with a positioned read (the page cache may still have
            // served it without a disk access).
            (BLOCKS_READ_FROM_FILE, s.block_reads_from_file),
            ("block_cache_hits", s.block_cache_hits),
            ("block_cache_misses", s.block_cache_misses),
            ("block_cache_bytes", s.block_cache_bytes),
            // multi_get's overlapped block reads, by the path they took.
            ("overlapped_batches", s.overlapped_batches),
            ("overlapped_reads_uring", s.overlapped_reads_uring),
            ("overlapped_reads_pool", s.overlapped_reads_pool),
            ("direct_block_reads", s.direct_block_reads),
            ("filter_bytes", s.filter_bytes),
            ("range_filter_bytes", s.range_filter_bytes),
            ("scans", s.scans),
            // Tables whose key range met a scan's, and those the prefix
            // and range filters ruled out: per scan, the tables skipped.
            ("scan_tables", s.scan_tables),
            ("prefix_filter_checks", s.prefix_filter_checks),
            ("prefix_filter_skips", s.prefix_filter_skips),
            ("range_filter_checks", s.range_filter_checks),
            ("range_filter_skips", s.range_filter_skips),
            // Point lookups past the point filter that the range filter
            // ruled out before a file read.
            ("range_filter_point_skips", s.range_filter_point_skips),
            ("index_bytes", s.index_bytes),
            ("gets", s.gets),
            ("tables_consulted", s.tables_consulted),
            ("tables", s.table_count as u64),
            ("flushes", s.flushes),
            ("compactions", s.compactions),
            ("user_bytes_written", s.user_bytes_written),
            (
                "table_bytes_written",
                s.flush_bytes_written + s.compaction_bytes_written,
            ),
            (WRITE_STALL_MICROS, s.write_stall_micros),
            ("transaction_commits", s.transaction_commits),
            ("transaction_conflicts", s.transaction_conflicts),
            ("oracle_bytes", s.oracle_bytes),
        ];
        let mut c: Counters = figures
            .into_iter()
            .map(|(name, value)| (name.to_string(), value))
            .collect();
        for (level, count) in s.level_tables.iter().enumerate() {
            if *count > 0 {
                c.insert(format!("tables_L{level}"), *count as u64);
            }
        }
        // Per level: filter memory and the filters' answers to absent keys
        // (their measured false-positive rate is fp / (negatives + fp)).
        for (level, f) in s.level_filters.iter().enumerate() {
            if f.tables > 0 {
                c.insert(format!("filter_bytes_L{level}"), f.filter_memory);
                c.insert(format!("filter_negatives_L{level}"), f.negatives);
                c.insert(
                    format!("filter_false_positives_L{level}"),
                    f.false_positives,
                );
            }
        }
        for (family, builds) in [
            ("bloom", s.bloom_filter_builds),
            ("fuse", s.fuse_filter_builds),
        ] {
            c.insert(format!("{family}_filter_build_keys"), builds.keys);
            c.insert(format!("{family}_filter_build_ns"), builds.nanos);
        }
        Some(c)
    }
}
