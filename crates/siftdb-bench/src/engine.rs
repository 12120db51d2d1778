//! The seam between the benchmark and the store it measures.
//!
//! Owns: the [`Engine`] trait every measured store implements (siftdb in
//! the CLI, RocksDB and fjall in the peers crate, [`super::MemoryEngine`]
//! in tests) and [`ScanBuffer`], the reusable buffer scans fill.
//! Must never: grow a method one engine cannot honour the same way as the
//! others — the workload must stay identical across engines.

use std::collections::BTreeMap;

/// The counter name under which an engine reports, if it can, the data
/// blocks it read from its files (not from a cache of its own). Reports
/// divide its change over a phase by the phase's gets: the disk
/// reads a filter and a cache save show up there.
pub const BLOCKS_READ_FROM_FILE: &str = "blocks_read_from_file";

/// The counter name under which an engine reports, if it can, the
/// microseconds its writers spent stalled (waiting for flushes or
/// compactions to catch up); reports show its change as seconds stalled.
pub const WRITE_STALL_MICROS: &str = "write_stall_micros";

/// A named snapshot of an engine's own counters (e.g. siftdb's filter
/// probes). Monotonic counters and gauges alike: the runner reports the
/// signed change over a phase and the value at its end.
pub type Counters = BTreeMap<String, u64>;

/// A key-value store under measurement.
///
/// Every method takes `&self` and the trait requires `Sync`, so read phases
/// can share one engine between threads. Errors are one-line messages: the
/// runner counts them as failed operations, it does not interpret them.
pub trait Engine: Sync {
    /// The engine's name as reports show it, e.g. `siftdb` or `rocksdb 9.10`.
    fn name(&self) -> String;

    /// Settings that differ from the engine's defaults, printed with results
    /// (`WORKLOADS.md`: anything tuned must be visible).
    fn settings(&self) -> Vec<(String, String)> {
        Vec::new()
    }

    /// Stores `value` under `key` (WAL on, no fsync per write).
    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), String>;

    /// Looks `key` up. When found, appends the value to `value` (which the
    /// runner passes in empty and reuses, so no operation allocates) and
    /// returns `true`; returns `false` when the key is absent.
    fn get(&self, key: &[u8], value: &mut Vec<u8>) -> Result<bool, String>;

    /// Looks every key of `keys` up at one moment, answering in key order
    /// into `values` (passed in empty): `Some(value)` or `None`. Engines
    /// with a batched lookup override it; the default asks `get` per key.
    fn multi_get(&self, keys: &[Vec<u8>], values: &mut Vec<Option<Vec<u8>>>) -> Result<(), String> {
        for key in keys {
            let mut value = Vec::new();
            let found = self.get(key, &mut value)?;
            values.push(found.then_some(value));
        }
        Ok(())
    }

    /// Pushes onto `out` (passed in empty) the first `limit` entries whose
    /// key is `>= start`, in ascending key order, or all of them if fewer.
    fn scan(&self, start: &[u8], limit: usize, out: &mut ScanBuffer) -> Result<(), String>;

    /// Pushes onto `out` (passed in empty) the first `limit` entries whose
    /// key is `<= end`, in descending key order, or all of them if fewer
    /// (seekrandom-rev). Engines without reverse scans say so.
    fn scan_rev(&self, end: &[u8], limit: usize, out: &mut ScanBuffer) -> Result<(), String> {
        let _ = (end, limit, out);
        Err(format!("{} has no reverse scan", self.name()))
    }

    /// Pushes onto `out` (passed in empty) the first `limit` entries whose
    /// key starts with `prefix`, in ascending key order, or all of them if
    /// fewer. An engine with a prefix extractor of `prefix`'s length uses
    /// it here (seekprefix).
    fn scan_prefix(&self, prefix: &[u8], limit: usize, out: &mut ScanBuffer) -> Result<(), String>;

    /// Pushes onto `out` (passed in empty) the first `limit` entries whose
    /// key `k` has `start <= k < end`, in ascending key order (seekempty,
    /// where there are none).
    fn scan_range(
        &self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        out: &mut ScanBuffer,
    ) -> Result<(), String>;

    /// Makes everything written so far durable in tables and returns once no
    /// flush or compaction is pending or running.
    fn flush_and_wait(&self) -> Result<(), String>;

    /// Deletes every key in `[start, end)` (the deleterange phase). An
    /// engine without range deletes refuses, and the phase fails.
    fn delete_range(&self, start: &[u8], end: &[u8]) -> Result<(), String> {
        let _ = (start, end);
        Err(format!("{} does not implement range deletes", self.name()))
    }

    /// In one optimistic transaction, reads `a` and `b`, writes both back
    /// changed (a missing one gets a value), and commits; on a conflict
    /// starts again. Returns the conflicts met before the commit (the txn
    /// phases). An engine without optimistic transactions refuses.
    fn read_modify_write(&self, a: &[u8], b: &[u8]) -> Result<u64, String> {
        let _ = (a, b);
        Err(format!("{} does not implement transactions", self.name()))
    }

    /// In one locking (pessimistic) transaction, reads `a` and `b` for
    /// update (each read takes the key's row lock), writes both back
    /// changed, and commits; when a lock wait ends in a deadlock or a lock
    /// timeout, rolls back and starts again. Returns the deadlocks and
    /// timeouts met before the commit (the txn-locking phase). An engine
    /// without locking transactions refuses.
    fn locking_read_modify_write(&self, a: &[u8], b: &[u8]) -> Result<LockRetries, String> {
        let _ = (a, b);
        Err(format!(
            "{} does not implement locking transactions",
            self.name()
        ))
    }

    /// The engine's own counters, if it keeps any. Called only outside
    /// timed sections, before and after each phase; reports show each
    /// counter's change, that change per operation (so a running total of
    /// tables consulted reads as tables consulted per get), and its end value.
    /// siftdb's: filter probes, reads the filter skipped, filter false
    /// positives, data blocks read, those of them read from table files
    /// ([`BLOCKS_READ_FROM_FILE`]: block cache misses of gets and scans),
    /// block cache hits, misses and bytes, filter and index memory, tables
    /// consulted, tables per level, bytes put and written to tables, time
    /// stalled ([`WRITE_STALL_MICROS`]).
    fn counters(&self) -> Option<Counters> {
        None
    }
}

/// What a locking transaction of the txn-locking phase met before it
/// committed: each one rolled it back and ran it again.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LockRetries {
    /// Lock waits refused as deadlocks.
    pub deadlocks: u64,
    /// Lock waits that ran out their timeout.
    pub timeouts: u64,
}

/// The value a txn phase writes back for `old` (`None`: the key was
/// absent): its first byte changed, so every engine writes the same bytes.
pub fn changed_value(old: Option<&[u8]>) -> Vec<u8> {
    match old {
        Some(old) => {
            let mut new = old.to_vec();
            if let Some(first) = new.first_mut() {
                *first = first.wrapping_add(1);
            }
            new
        }
        None => b"txn".to_vec(),
    }
}

/// The entries one scan returned, packed into one byte buffer so a reused
/// `ScanBuffer` makes scans allocation-free once it has grown.
#[derive(Clone, Debug, Default)]
pub struct ScanBuffer {
    bytes: Vec<u8>,
    /// Per entry: where its key ends and where its value ends in `bytes`.
    ends: Vec<(usize, usize)>,
}

impl ScanBuffer {
    /// An empty buffer.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends one entry.
    pub fn push(&mut self, key: &[u8], value: &[u8]) {
        self.bytes.extend_from_slice(key);
        let key_end = self.bytes.len();
        self.bytes.extend_from_slice(value);
        self.ends.push((key_end, self.bytes.len()));
    }

    /// Forgets every entry, keeping the memory.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.ends.clear();
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// True when there is no entry.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The entries, in the order they were pushed, as `(key, value)`.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> + '_ {
        let mut start = 0;
        self.ends.iter().map(move |&(key_end, value_end)| {
            let key = self.bytes.get(start..key_end).unwrap_or_default();
            let value = self.bytes.get(key_end..value_end).unwrap_or_default();
            start = value_end;
            (key, value)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scan_buffer_keeps_entries_in_order_and_reuses_memory() {
        let mut buf = ScanBuffer::new();
        assert!(buf.is_empty());
        buf.push(b"a", b"1");
        buf.push(b"bb", b"");
        buf.push(b"", b"333");
        let entries: Vec<(&[u8], &[u8])> = buf.iter().collect();
        assert_eq!(
            entries,
            [
                (&b"a"[..], &b"1"[..]),
                (&b"bb"[..], &b""[..]),
                (&b""[..], &b"333"[..])
            ]
        );
        assert_eq!(buf.len(), 3);
        let capacity = buf.bytes.capacity();
        buf.clear();
        assert!(buf.is_empty() && buf.iter().next().is_none());
        buf.push(b"k", b"v");
        assert_eq!(buf.bytes.capacity(), capacity);
        assert_eq!(buf.iter().collect::<Vec<_>>(), [(&b"k"[..], &b"v"[..])]);
    }
}
