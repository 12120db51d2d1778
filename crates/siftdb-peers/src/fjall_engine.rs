//! fjall as a benchmark engine.
//!
//! Owns: the fjall configuration of the run — fjall's defaults, except that
//! every level's tables get a Bloom filter of the run's bits per key — and
//! the adapter from the workload seam to one fjall keyspace.
//! For a run with the txn phases the database is opened as an
//! `OptimisticTxDatabase` (serializable snapshot isolation; the plain
//! `Database` has no transactions), for every phase of that run;
//! `settings` says so.
//! With `--blob-threshold`, its key-value separation at that threshold
//! (fjall 3.1 has no zstd, so `--compression zstd-bottom` changes nothing
//! here, and `settings` says so).
//! Must never: tune fjall beyond the filter and that; anything set here that
//! differs from fjall's defaults must appear in `settings`.

use std::path::Path;

use fjall::config::{BloomConstructionPolicy, FilterPolicy, FilterPolicyEntry};
use fjall::{
    Database, Keyspace, KeyspaceCreateOptions, KvSeparationOptions, OptimisticTxDatabase, Readable,
};
use siftdb_bench::{changed_value, CompressionChoice, Counters, Engine, ScanBuffer};

use crate::quiesce::wait_until;

/// The one keyspace (fjall's column family) the benchmark writes.
const KEYSPACE: &str = "bench";

/// Polls in a row that must see fjall idle: fjall has no "compaction
/// pending" signal, so idle means no flush queued, no sealed memtable, no
/// compaction running and no compaction completed for this many polls.
const QUIET_POLLS: u32 = 10;

/// A fjall database under measurement.
pub struct FjallEngine {
    // Field order is drop order: the keyspace before its database.
    keyspace: Keyspace,
    db: Database,
    /// The transactional database `db` belongs to, when opened with
    /// transactions.
    tx: Option<OptimisticTxDatabase>,
    bits_per_key: f64,
    /// The storage choices' settings (compression, KV separation).
    storage: Vec<(String, String)>,
}

impl FjallEngine {
    /// Opens a fresh database in `dir` with default settings (journal on;
    /// each write reaches the OS, `PersistMode::Buffer`, no fsync) and one
    /// keyspace whose filter policy is `bits_per_key` on every level.
    /// With `transactions`, as an `OptimisticTxDatabase` (same settings):
    /// transactions go through it; everything else (plain writes, reads,
    /// scans, flushes, counters) through its underlying `Database` and
    /// `Keyspace` (fjall's `inner()` handles, which it documents as the way
    /// out of the transactional context), so every phase but the txn ones
    /// runs the very code of the plain engine.
    ///
    /// fjall 3.1 has LZ4 only: `compression` zstd-bottom leaves its default
    /// policy (none on levels 0 and 1, LZ4 below), and `settings` says so.
    /// With `blob_threshold`, its key-value separation
    /// (`KvSeparationOptions`, default settings but
    /// `separation_threshold`).
    pub fn open(
        dir: &Path,
        bits_per_key: f64,
        transactions: bool,
        compression: CompressionChoice,
        blob_threshold: Option<u64>,
    ) -> Result<FjallEngine, String> {
        #[expect(
            clippy::cast_possible_truncation,
            reason = "fjall takes bits per key as f32; 10.0 is exact"
        )]
        let bits = bits_per_key as f32;
        let separation = blob_threshold
            .map(|bytes| {
                u32::try_from(bytes)
                    .map(|bytes| KvSeparationOptions::default().separation_threshold(bytes))
                    .map_err(|_| format!("fjall's separation threshold is a u32; {bytes} is not"))
            })
            .transpose()?;
        let mut storage = Vec::new();
        if compression == CompressionChoice::ZstdBottom {
            storage.push((
                "compression".to_string(),
                "fjall 3.1 has no zstd: its default kept (none on L0 and L1, LZ4 below)"
                    .to_string(),
            ));
        }
        if let Some(bytes) = blob_threshold {
            storage.push((
                "kv_separation".to_string(),
                format!("KvSeparationOptions::default().separation_threshold({bytes})"),
            ));
        }
        let options = move || {
            KeyspaceCreateOptions::default()
                .filter_policy(FilterPolicy::all(FilterPolicyEntry::Bloom(
                    BloomConstructionPolicy::BitsPerKey(bits),
                )))
                .with_kv_separation(separation.clone())
        };
        let (db, keyspace, tx) = if transactions {
            let tx = OptimisticTxDatabase::builder(dir)
                .open()
                .map_err(|e| e.to_string())?;
            let keyspace = tx.keyspace(KEYSPACE, options).map_err(|e| e.to_string())?;
            (tx.inner().clone(), keyspace.inner().clone(), Some(tx))
        } else {
            let db = Database::builder(dir).open().map_err(|e| e.to_string())?;
            let keyspace = db.keyspace(KEYSPACE, options).map_err(|e| e.to_string())?;
            (db, keyspace, None)
        };
        Ok(FjallEngine {
            keyspace,
            db,
            tx,
            bits_per_key,
            storage,
        })
    }
}

/// The first `limit` entries of a fjall scan into `out`.
fn fill(scan: fjall::Iter, limit: usize, out: &mut ScanBuffer) -> Result<(), String> {
    for guard in scan.take(limit) {
        let (key, value) = guard.into_inner().map_err(|e| e.to_string())?;
        out.push(&key, &value);
    }
    Ok(())
}

impl Engine for FjallEngine {
    fn name(&self) -> String {
        format!("fjall {}", env!("PEERS_FJALL_VERSION"))
    }

    fn settings(&self) -> Vec<(String, String)> {
        let mut settings = vec![(
            "filter_policy".to_string(),
            format!(
                "Bloom {} bits/key on every level (default: false-positive rate 1e-4 on L0, 10 bits/key below)",
                self.bits_per_key
            ),
        )];
        settings.extend(self.storage.iter().cloned());
        if self.tx.is_some() {
            settings.push((
                "database".to_string(),
                "OptimisticTxDatabase (the run has txn phases; every phase runs on it); a transaction is write_tx, get, insert, commit, retried on Conflict".to_string(),
            ));
        }
        settings
    }

    /// An optimistic transaction (`write_tx`): `get` both keys (each read
    /// joins the conflict set), `insert` both changed, `commit`; a
    /// `Conflict` starts again.
    fn read_modify_write(&self, a: &[u8], b: &[u8]) -> Result<u64, String> {
        let Some(db) = &self.tx else {
            return Err("fjall was opened without transactions".to_string());
        };
        let mut conflicts = 0;
        loop {
            let mut tx = db.write_tx().map_err(|e| e.to_string())?;
            for key in [a, b] {
                let old = tx.get(&self.keyspace, key).map_err(|e| e.to_string())?;
                tx.insert(&self.keyspace, key, changed_value(old.as_deref()));
            }
            match tx.commit().map_err(|e| e.to_string())? {
                Ok(()) => return Ok(conflicts),
                Err(fjall::Conflict) => conflicts += 1,
            }
        }
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), String> {
        self.keyspace.insert(key, value).map_err(|e| e.to_string())
    }

    /// fjall 3 has no range delete (its open epic #13): every key in the
    /// range is read and deleted, in one batch — what an application does.
    fn delete_range(&self, start: &[u8], end: &[u8]) -> Result<(), String> {
        let mut batch = self.db.batch();
        for entry in self.keyspace.range(start..end) {
            let key = entry.key().map_err(|e| e.to_string())?;
            batch.remove(&self.keyspace, key);
        }
        batch.commit().map_err(|e| e.to_string())
    }

    fn get(&self, key: &[u8], value: &mut Vec<u8>) -> Result<bool, String> {
        match self.keyspace.get(key).map_err(|e| e.to_string())? {
            Some(found) => {
                value.extend_from_slice(&found);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn scan(&self, start: &[u8], limit: usize, out: &mut ScanBuffer) -> Result<(), String> {
        fill(self.keyspace.range(start..), limit, out)
    }

    fn scan_prefix(&self, prefix: &[u8], limit: usize, out: &mut ScanBuffer) -> Result<(), String> {
        fill(self.keyspace.prefix(prefix), limit, out)
    }

    /// fjall's iterators are double-ended: `.rev()`.
    fn scan_rev(&self, end: &[u8], limit: usize, out: &mut ScanBuffer) -> Result<(), String> {
        for guard in self.keyspace.range(..=end).rev().take(limit) {
            let (key, value) = guard.into_inner().map_err(|e| e.to_string())?;
            out.push(&key, &value);
        }
        Ok(())
    }

    fn scan_range(
        &self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        out: &mut ScanBuffer,
    ) -> Result<(), String> {
        fill(self.keyspace.range(start..end), limit, out)
    }

    /// `Keyspace::rotate_memtable_and_wait()` (seals the active memtable,
    /// waits until the flush queue is empty and no sealed memtable is
    /// left), then polls until fjall is idle: no queued flush
    /// (`Database::outstanding_flushes`), no sealed memtable, no running
    /// compaction (`Database::active_compactions`) and an unchanged
    /// `Database::compactions_completed`, on [`QUIET_POLLS`] polls in a row
    /// (20 ms). fjall schedules compactions only as messages sent after
    /// each flush, so once those have run and none is running, none is
    /// pending.
    fn flush_and_wait(&self) -> Result<(), String> {
        self.keyspace
            .rotate_memtable_and_wait()
            .map_err(|e| e.to_string())?;
        let mut completed = self.db.compactions_completed();
        wait_until("fjall", QUIET_POLLS, || {
            let now = self.db.compactions_completed();
            let settled = now == completed;
            completed = now;
            Ok(settled
                && self.db.outstanding_flushes() == 0
                && self.keyspace.sealed_memtable_count() == 0
                && self.db.active_compactions() == 0)
        })
    }

    fn counters(&self) -> Option<Counters> {
        let mut c = Counters::new();
        c.insert("tables".into(), self.keyspace.table_count() as u64);
        c.insert("tables_L0".into(), self.keyspace.l0_table_count() as u64);
        c.insert(
            "compaction_runs".into(),
            self.db.compactions_completed() as u64,
        );
        Some(c)
    }
}
