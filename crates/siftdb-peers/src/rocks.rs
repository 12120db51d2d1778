//! RocksDB (through the `rocksdb` crate) as a benchmark engine.
//!
//! Owns: the RocksDB options of the run — the library's defaults (LZ4 on
//! every level: RocksDB 11's default when LZ4 is compiled in, as the
//! `lz4` feature does) plus a full Bloom filter of the run's bits per key
//! and, when the run gives one, a fixed-length prefix extractor — and the
//! adapter from the workload seam to `rocksdb::DB`, including which scans
//! use prefix mode.
//! For a run with the txn phases the database is opened as an
//! `OptimisticTransactionDB` (the plain `DB` cannot run transactions), and
//! for one with txn-locking as a `TransactionDB` (row locks, deadlock
//! detection on), for every phase of that run; `settings` says so.
//! With `--compression zstd-bottom`, `bottommost_compression` is zstd;
//! with `--blob-threshold`, blob files hold the values from that size.
//! Must never: tune RocksDB beyond the filter, the extractor and those
//! storage choices; anything
//! set here that differs from RocksDB's defaults must appear in `settings`.
//! With an extractor, a scan that may cross prefixes must seek in total
//! order (prefix mode leaves other prefixes' keys undefined).

use std::path::Path;

use rocksdb::{
    BlockBasedOptions, ColumnFamilyDescriptor, DBAccess, DBCompressionType,
    DBRawIteratorWithThreadMode, ErrorKind, MultiThreaded, OptimisticTransactionDB, Options,
    ReadOptions, SliceTransform, TransactionDB, TransactionDBOptions, TransactionOptions,
    WriteOptions, DB, DEFAULT_COLUMN_FAMILY_NAME,
};
use siftdb_bench::{
    changed_value, CompressionChoice, Counters, Engine, LockRetries, ScanBuffer, WRITE_STALL_MICROS,
};

use crate::quiesce::wait_until;

/// LSM levels RocksDB reports file counts for (its default `num_levels`).
const LEVELS: usize = 7;

/// The database handle: the plain `DB`, the `OptimisticTransactionDB` a
/// run with the txn phases needs, or the `TransactionDB` of a run with
/// txn-locking. They share the read, write, flush and property methods
/// ([`on_db!`] calls them alike), but no trait the crate exports.
enum Handle {
    Plain(DB),
    Optimistic(OptimisticTransactionDB),
    /// Multi-threaded: its property methods are defined for that mode only.
    Pessimistic(TransactionDB<MultiThreaded>),
}

/// How long a RocksDB locking transaction waits for a lock: its default
/// (`TransactionDBOptions::set_txn_lock_timeout`), siftdb's too.
const LOCK_TIMEOUT_MS: i64 = 1000;

/// Evaluates `$body` with `$db` bound to whichever database `$handle`
/// holds: the two types share the methods but no trait the crate exports.
macro_rules! on_db {
    ($handle:expr, $db:ident => $body:expr) => {
        match $handle {
            Handle::Plain($db) => $body,
            Handle::Optimistic($db) => $body,
            Handle::Pessimistic($db) => $body,
        }
    };
}

/// A RocksDB database under measurement.
pub struct RocksEngine {
    db: Handle,
    version: String,
    bits_per_key: f64,
    prefix_len: Option<usize>,
    /// The storage choices' settings (compression, blob files).
    storage: Vec<(String, String)>,
}

impl RocksEngine {
    /// Opens a fresh database in `dir`: `Options::default()` (WAL on; the
    /// default `WriteOptions` do not fsync per write) with
    /// `create_if_missing` and a full (not block-based) Bloom filter of
    /// `bits_per_key` in the default block-based table format, and with a
    /// fixed prefix extractor of `prefix_len` bytes when given (its prefixes
    /// join the full filter; whole keys stay in it, RocksDB's default).
    /// With `transactions`, as an `OptimisticTransactionDB` (same options)
    /// so that [`Engine::read_modify_write`] can run; with `locking`, as a
    /// `TransactionDB` (same options, its default 16 lock stripes and 1 s
    /// lock timeout) for [`Engine::locking_read_modify_write`].
    ///
    /// The run's storage choices: with [`CompressionChoice::ZstdBottom`],
    /// `bottommost_compression` zstd (upper levels keep LZ4); with
    /// `blob_threshold`, integrated BlobDB (`enable_blob_files`,
    /// `min_blob_size` the threshold, its other settings — blob garbage
    /// collection off — at their defaults).
    pub fn open(
        dir: &Path,
        bits_per_key: f64,
        prefix_len: Option<usize>,
        (transactions, locking): (bool, bool),
        compression: CompressionChoice,
        blob_threshold: Option<u64>,
    ) -> Result<RocksEngine, String> {
        let mut table = BlockBasedOptions::default();
        table.set_bloom_filter(bits_per_key, false);
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.set_block_based_table_factory(&table);
        if let Some(len) = prefix_len {
            opts.set_prefix_extractor(SliceTransform::create_fixed_prefix(len));
        }
        let mut storage = Vec::new();
        if compression == CompressionChoice::ZstdBottom {
            opts.set_bottommost_compression_type(DBCompressionType::Zstd);
            storage.push((
                "bottommost_compression".to_string(),
                "zstd (Options::set_bottommost_compression_type(Zstd); the levels above keep LZ4)"
                    .to_string(),
            ));
        }
        if let Some(bytes) = blob_threshold {
            opts.set_enable_blob_files(true);
            opts.set_min_blob_size(bytes);
            storage.push((
                "blob_files".to_string(),
                format!(
                    "enable_blob_files = true, min_blob_size = {bytes} (blob GC off, its default)"
                ),
            ));
        }
        // The default column family opened by name, with these options (as
        // `DB::open` does), so that `cf_handle` serves it: batched MultiGet
        // asks with it, and so does `delete_range_cf` (an optimistic
        // transaction database's write batch has no range delete).
        let db = if locking {
            let default = ColumnFamilyDescriptor::new(DEFAULT_COLUMN_FAMILY_NAME, opts.clone());
            let mut txn_db = TransactionDBOptions::default();
            txn_db.set_txn_lock_timeout(LOCK_TIMEOUT_MS);
            Handle::Pessimistic(
                TransactionDB::open_cf_descriptors(&opts, &txn_db, dir, [default])
                    .map_err(|e| e.to_string())?,
            )
        } else if transactions {
            let default = ColumnFamilyDescriptor::new(DEFAULT_COLUMN_FAMILY_NAME, opts.clone());
            Handle::Optimistic(
                OptimisticTransactionDB::open_cf_descriptors(&opts, dir, [default])
                    .map_err(|e| e.to_string())?,
            )
        } else {
            Handle::Plain(
                DB::open_cf_with_opts(&opts, dir, [(DEFAULT_COLUMN_FAMILY_NAME, opts.clone())])
                    .map_err(|e| e.to_string())?,
            )
        };
        let version = library_version(dir).unwrap_or_else(|| "unknown".to_string());
        // RocksDB takes a bottommost zstd it was built without and writes
        // something else: refuse, so no figure claims zstd it does not have.
        if compression == CompressionChoice::ZstdBottom && !zstd_linked(dir) {
            return Err(
                "--compression zstd-bottom: this RocksDB was built without zstd (its LOG says \
                 kZSTD supported: 0); build siftdb-peers with rust-rocksdb's zstd feature"
                    .to_string(),
            );
        }
        Ok(RocksEngine {
            db,
            version,
            bits_per_key,
            prefix_len,
            storage,
        })
    }

    /// Read options for a scan from `start`: prefix mode (the prefix Bloom
    /// filters asked, the scan kept within `start`'s prefix) when the scan
    /// stays within that prefix, total order otherwise.
    fn read_options(&self, start: &[u8], within_prefix: bool) -> ReadOptions {
        let mut read = ReadOptions::default();
        match self.prefix_len {
            Some(len) if within_prefix && start.len() >= len => {
                read.set_prefix_same_as_start(true);
            }
            Some(_) => read.set_total_order_seek(true),
            None => {}
        }
        read
    }

    fn collect<D: DBAccess>(
        mut it: DBRawIteratorWithThreadMode<'_, D>,
        limit: usize,
        out: &mut ScanBuffer,
        wanted: impl Fn(&[u8]) -> bool,
    ) -> Result<(), String> {
        while out.len() < limit {
            match (it.key(), it.value()) {
                (Some(key), Some(value)) if wanted(key) => out.push(key, value),
                _ => break,
            }
            it.next();
        }
        it.status().map_err(|e| e.to_string())
    }

    fn int_property(&self, name: &str) -> Result<u64, String> {
        on_db!(&self.db, db => db.property_int_value(name))
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("RocksDB does not know the property {name}"))
    }
}

/// The RocksDB version the process actually linked, as the library writes
/// it at the top of its info log (`RocksDB version: 11.8.1`): the smoke
/// test checks it is the bundled source's [`crate::ROCKSDB_VERSION`].
fn library_version(dir: &Path) -> Option<String> {
    let log = std::fs::read_to_string(dir.join("LOG")).ok()?;
    log.lines()
        .find_map(|line| line.split_once("RocksDB version: "))
        .map(|(_, version)| version.trim().to_string())
}

/// True when the opened library says in its info log that zstd is
/// compiled in (`kZSTD supported: 1`).
fn zstd_linked(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("LOG")).is_ok_and(|log| {
        log.lines()
            .any(|line| line.trim_end().ends_with("kZSTD supported: 1"))
    })
}

impl Engine for RocksEngine {
    fn name(&self) -> String {
        format!("rocksdb {}", self.version)
    }

    fn settings(&self) -> Vec<(String, String)> {
        let mut settings = vec![(
            "bloom_filter".to_string(),
            format!(
                "{} bits/key, full filter (BlockBasedOptions::set_bloom_filter({}, false))",
                self.bits_per_key, self.bits_per_key
            ),
        )];
        if matches!(self.db, Handle::Optimistic(_)) {
            settings.push((
                "database".to_string(),
                "OptimisticTransactionDB (the run has txn phases; every phase runs on it); a transaction reads with get_for_update and commits, retried on Busy or TryAgain".to_string(),
            ));
        }
        if matches!(self.db, Handle::Pessimistic(_)) {
            settings.push((
                "database".to_string(),
                format!("TransactionDB (the run has txn-locking; every phase runs on it); a transaction (deadlock_detect on, lock timeout {LOCK_TIMEOUT_MS} ms) locks with get_for_update (exclusive) and commits, retried on a deadlock (Busy) or a lock timeout (TimedOut)"),
            ));
        }
        settings.extend(self.storage.iter().cloned());
        if let Some(len) = self.prefix_len {
            settings.push((
                "prefix_extractor".to_string(),
                format!(
                    "SliceTransform::create_fixed_prefix({len}); prefix scans and ranges within one prefix seek in prefix mode (prefix_same_as_start), other scans in total order"
                ),
            ));
        }
        settings
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), String> {
        on_db!(&self.db, db => db.put(key, value)).map_err(|e| e.to_string())
    }

    /// `DeleteRange`: one range tombstone.
    fn delete_range(&self, start: &[u8], end: &[u8]) -> Result<(), String> {
        match &self.db {
            Handle::Plain(db) => {
                let mut batch = rocksdb::WriteBatch::default();
                batch.delete_range(start, end);
                db.write(batch)
            }
            Handle::Optimistic(db) => match db.cf_handle(DEFAULT_COLUMN_FAMILY_NAME) {
                Some(cf) => db.delete_range_cf(cf, start, end),
                None => return Err("rocksdb has no default column family handle".to_string()),
            },
            Handle::Pessimistic(_) => {
                return Err("rocksdb's TransactionDB has no range delete".to_string())
            }
        }
        .map_err(|e| e.to_string())
    }

    /// An optimistic transaction: `get_pinned_for_update` on both keys
    /// (each joins the conflict set when read), `put` both changed,
    /// `commit`; `Busy` (a key was written after this transaction read it)
    /// and `TryAgain` (too little memtable history to tell) start again.
    fn read_modify_write(&self, a: &[u8], b: &[u8]) -> Result<u64, String> {
        let Handle::Optimistic(db) = &self.db else {
            return Err("rocksdb was opened without transactions".to_string());
        };
        let mut conflicts = 0;
        loop {
            let txn = db.transaction();
            for key in [a, b] {
                let old = txn
                    .get_pinned_for_update(key, true)
                    .map_err(|e| e.to_string())?;
                txn.put(key, changed_value(old.as_deref()))
                    .map_err(|e| e.to_string())?;
            }
            match txn.commit() {
                Ok(()) => return Ok(conflicts),
                Err(e) if matches!(e.kind(), ErrorKind::Busy | ErrorKind::TryAgain) => {
                    conflicts += 1;
                }
                Err(e) => return Err(e.to_string()),
            }
        }
    }

    /// A locking transaction (deadlock detection on, the 1 s lock
    /// timeout): `get_pinned_for_update` (exclusive) on both keys, which
    /// locks them, `put` both changed, `commit`; a deadlock (`Busy`) or a
    /// lock timeout (`TimedOut`) rolls back and starts again.
    fn locking_read_modify_write(&self, a: &[u8], b: &[u8]) -> Result<LockRetries, String> {
        let Handle::Pessimistic(db) = &self.db else {
            return Err("rocksdb was opened without locking transactions".to_string());
        };
        let mut options = TransactionOptions::default();
        options.set_deadlock_detect(true);
        options.set_lock_timeout(LOCK_TIMEOUT_MS);
        let write = WriteOptions::default();
        let mut retries = LockRetries::default();
        loop {
            let txn = db.transaction_opt(&write, &options);
            let attempt = [a, b].into_iter().try_for_each(|key| {
                let old = txn.get_pinned_for_update(key, true)?;
                txn.put(key, changed_value(old.as_deref()))
            });
            match attempt {
                Ok(()) => return txn.commit().map(|()| retries).map_err(|e| e.to_string()),
                Err(e) if e.kind() == ErrorKind::Busy => retries.deadlocks += 1,
                Err(e) if e.kind() == ErrorKind::TimedOut => retries.timeouts += 1,
                Err(e) => return Err(e.to_string()),
            }
            // Dropping `txn` rolls it back and releases its locks.
        }
    }

    fn get(&self, key: &[u8], value: &mut Vec<u8>) -> Result<bool, String> {
        on_db!(&self.db, db => match db.get_pinned(key).map_err(|e| e.to_string())? {
            Some(found) => {
                value.extend_from_slice(&found);
                Ok(true)
            }
            None => Ok(false),
        })
    }

    /// RocksDB's batched MultiGet (`batched_multi_get_cf_opt`) with
    /// `async_io` on: its blocks read in parallel where the build allows
    /// (a `TransactionDB` has none: a get per key).
    fn multi_get(&self, keys: &[Vec<u8>], values: &mut Vec<Option<Vec<u8>>>) -> Result<(), String> {
        let mut options = rocksdb::ReadOptions::default();
        options.set_async_io(true);
        macro_rules! batched {
            ($db:expr) => {{
                let cf = $db
                    .cf_handle(DEFAULT_COLUMN_FAMILY_NAME)
                    .ok_or_else(|| "no default column family".to_string())?;
                for found in $db.batched_multi_get_cf_opt(cf, keys, false, &options) {
                    values.push(found.map_err(|e| e.to_string())?.map(|v| v.to_vec()));
                }
                Ok(())
            }};
        }
        match &self.db {
            Handle::Plain(db) => batched!(db),
            Handle::Optimistic(db) => batched!(db),
            Handle::Pessimistic(_) => {
                for key in keys {
                    let mut value = Vec::new();
                    let found = self.get(key, &mut value)?;
                    values.push(found.then_some(value));
                }
                Ok(())
            }
        }
    }

    fn scan(&self, start: &[u8], limit: usize, out: &mut ScanBuffer) -> Result<(), String> {
        let read = self.read_options(start, false);
        on_db!(&self.db, db => {
            let mut it = db.raw_iterator_opt(read);
            it.seek(start);
            RocksEngine::collect(it, limit, out, |_| true)
        })
    }

    /// `SeekForPrev`, then `Prev`: RocksDB's reverse iteration.
    fn scan_rev(&self, end: &[u8], limit: usize, out: &mut ScanBuffer) -> Result<(), String> {
        let read = self.read_options(end, false);
        on_db!(&self.db, db => {
            let mut it = db.raw_iterator_opt(read);
            it.seek_for_prev(end);
            while out.len() < limit {
                match (it.key(), it.value()) {
                    (Some(key), Some(value)) => out.push(key, value),
                    _ => break,
                }
                it.prev();
            }
            it.status().map_err(|e| e.to_string())
        })
    }

    fn scan_prefix(&self, prefix: &[u8], limit: usize, out: &mut ScanBuffer) -> Result<(), String> {
        let within = self.prefix_len.is_some_and(|len| len == prefix.len());
        let mut read = self.read_options(prefix, within);
        if !within {
            if let Some(end) = siftdb::internals::prefix::successor(prefix) {
                read.set_iterate_upper_bound(end);
            }
        }
        on_db!(&self.db, db => {
            let mut it = db.raw_iterator_opt(read);
            it.seek(prefix);
            RocksEngine::collect(it, limit, out, |key| key.starts_with(prefix))
        })
    }

    fn scan_range(
        &self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        out: &mut ScanBuffer,
    ) -> Result<(), String> {
        let within = self
            .prefix_len
            .is_some_and(|len| start.len() >= len && end.get(..len) == start.get(..len));
        let mut read = self.read_options(start, within);
        read.set_iterate_upper_bound(end.to_vec());
        on_db!(&self.db, db => {
            let mut it = db.raw_iterator_opt(read);
            it.seek(start);
            RocksEngine::collect(it, limit, out, |key| key < end)
        })
    }

    /// `DB::flush()` (waits for the memtable flush to finish), then polls
    /// until RocksDB reports no pending or running flush or compaction
    /// (`rocksdb.mem-table-flush-pending`, `rocksdb.num-running-flushes`,
    /// `rocksdb.compaction-pending`, `rocksdb.num-running-compactions` all
    /// 0) on two polls in a row: the same quiescence test as for the other
    /// engines (`quiesce::wait_until`).
    fn flush_and_wait(&self) -> Result<(), String> {
        on_db!(&self.db, db => db.flush()).map_err(|e| e.to_string())?;
        wait_until("rocksdb", 2, || {
            let busy = self.int_property("rocksdb.mem-table-flush-pending")?
                + self.int_property("rocksdb.num-running-flushes")?
                + self.int_property("rocksdb.compaction-pending")?
                + self.int_property("rocksdb.num-running-compactions")?;
            Ok(busy == 0)
        })
    }

    fn counters(&self) -> Option<Counters> {
        let mut c = Counters::new();
        let mut tables = 0;
        for level in 0..LEVELS {
            // A string property: GetIntProperty does not serve it.
            let name = format!("rocksdb.num-files-at-level{level}");
            let files: u64 = on_db!(&self.db, db => db.property_value(&name))
                .ok()??
                .trim()
                .parse()
                .ok()?;
            tables += files;
            if files > 0 {
                c.insert(format!("tables_L{level}"), files);
            }
        }
        c.insert("tables".into(), tables);
        // RocksDB's own account of the time writes were stopped or slowed
        // down, from its statistics text (no `Statistics` object needed).
        if let Some(micros) = on_db!(&self.db, db => db.property_value("rocksdb.stats"))
            .ok()
            .flatten()
            .as_deref()
            .and_then(cumulative_stall_micros)
        {
            c.insert(WRITE_STALL_MICROS.into(), micros);
        }
        Some(c)
    }
}

/// The `Cumulative stall: HH:MM:SS.sss H:M:S, …` line of `rocksdb.stats`
/// (the database-wide line, written before any column family's), in
/// microseconds.
#[expect(
    clippy::cast_possible_truncation,
    reason = "a finite, non-negative number of microseconds, far below 2^64"
)]
fn cumulative_stall_micros(stats: &str) -> Option<u64> {
    let rest = stats
        .lines()
        .find_map(|line| line.trim().strip_prefix("Cumulative stall:"))?;
    let clock = rest.split_whitespace().next()?;
    let mut parts = clock.split(':');
    let (h, m, sec) = (parts.next()?, parts.next()?, parts.next()?);
    let seconds = h.parse::<f64>().ok()? * 3600.0
        + m.parse::<f64>().ok()? * 60.0
        + sec.parse::<f64>().ok()?;
    (seconds.is_finite() && seconds >= 0.0).then(|| (seconds * 1e6).round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_cumulative_stall() {
        let stats = "** DB Stats **\nUptime(secs): 3.1 total, 3.1 interval\nCumulative writes: 1000K writes\nCumulative stall: 00:01:02.500 H:M:S, 12.0 percent\nInterval stall: 00:00:0.000 H:M:S, 0.0 percent\n";
        assert_eq!(cumulative_stall_micros(stats), Some(62_500_000));
        assert_eq!(cumulative_stall_micros("Cumulative writes: 0\n"), None);
        assert_eq!(
            cumulative_stall_micros("Cumulative stall: soon H:M:S\n"),
            None
        );
    }
}
