//! An in-memory engine: a `BTreeMap` behind a read-write lock.
//!
//! Owns: [`MemoryEngine`], the reference the runner is tested against (and
//! `siftdb bench --engine memory`): what every answer should be, with no
//! disk and no filter.
//! Must never: be mistaken for a measurement of siftdb — its figures only
//! show what the harness itself costs.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::RwLock;

use super::engine::{changed_value, Counters, Engine, LockRetries, ScanBuffer};

/// A sorted map in memory, shared between threads through a `RwLock`.
#[derive(Debug, Default)]
pub struct MemoryEngine {
    map: RwLock<BTreeMap<Vec<u8>, Vec<u8>>>,
    gets: AtomicU64,
    puts: AtomicU64,
    scans: AtomicU64,
    flushes: AtomicU64,
}

impl MemoryEngine {
    /// An empty engine.
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of keys stored.
    pub fn len(&self) -> usize {
        self.map.read().len()
    }

    /// True when no key is stored.
    pub fn is_empty(&self) -> bool {
        self.map.read().is_empty()
    }
}

impl Engine for MemoryEngine {
    fn name(&self) -> String {
        "memory".to_string()
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), String> {
        self.puts.fetch_add(1, Ordering::Relaxed);
        self.map.write().insert(key.to_vec(), value.to_vec());
        Ok(())
    }

    /// Under the map's write lock: never a conflict.
    fn read_modify_write(&self, a: &[u8], b: &[u8]) -> Result<u64, String> {
        let mut map = self.map.write();
        self.gets.fetch_add(2, Ordering::Relaxed);
        self.puts.fetch_add(2, Ordering::Relaxed);
        for key in [a, b] {
            let new = changed_value(map.get(key).map(Vec::as_slice));
            map.insert(key.to_vec(), new);
        }
        Ok(0)
    }

    /// The same under the map's write lock: never a wait.
    fn locking_read_modify_write(&self, a: &[u8], b: &[u8]) -> Result<LockRetries, String> {
        self.read_modify_write(a, b).map(|_| LockRetries::default())
    }

    fn delete_range(&self, start: &[u8], end: &[u8]) -> Result<(), String> {
        self.map
            .write()
            .retain(|key, _| key.as_slice() < start || key.as_slice() >= end);
        Ok(())
    }

    fn get(&self, key: &[u8], value: &mut Vec<u8>) -> Result<bool, String> {
        self.gets.fetch_add(1, Ordering::Relaxed);
        match self.map.read().get(key) {
            Some(found) => {
                value.extend_from_slice(found);
                Ok(true)
            }
            None => Ok(false),
        }
    }

    fn scan(&self, start: &[u8], limit: usize, out: &mut ScanBuffer) -> Result<(), String> {
        self.scans.fetch_add(1, Ordering::Relaxed);
        let map = self.map.read();
        for (k, v) in map
            .range::<[u8], _>((Bound::Included(start), Bound::Unbounded))
            .take(limit)
        {
            out.push(k, v);
        }
        Ok(())
    }

    fn scan_rev(&self, end: &[u8], limit: usize, out: &mut ScanBuffer) -> Result<(), String> {
        self.scans.fetch_add(1, Ordering::Relaxed);
        let map = self.map.read();
        for (k, v) in map
            .range::<[u8], _>((Bound::Unbounded, Bound::Included(end)))
            .rev()
            .take(limit)
        {
            out.push(k, v);
        }
        Ok(())
    }

    fn scan_prefix(&self, prefix: &[u8], limit: usize, out: &mut ScanBuffer) -> Result<(), String> {
        self.scans.fetch_add(1, Ordering::Relaxed);
        let map = self.map.read();
        for (k, v) in map
            .range::<[u8], _>((Bound::Included(prefix), Bound::Unbounded))
            .take_while(|(k, _)| k.starts_with(prefix))
            .take(limit)
        {
            out.push(k, v);
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
        self.scans.fetch_add(1, Ordering::Relaxed);
        if start >= end {
            return Ok(());
        }
        let map = self.map.read();
        for (k, v) in map
            .range::<[u8], _>((Bound::Included(start), Bound::Excluded(end)))
            .take(limit)
        {
            out.push(k, v);
        }
        Ok(())
    }

    fn flush_and_wait(&self) -> Result<(), String> {
        self.flushes.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn counters(&self) -> Option<Counters> {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        Some(Counters::from([
            ("gets".to_string(), load(&self.gets)),
            ("puts".to_string(), load(&self.puts)),
            ("scans".to_string(), load(&self.scans)),
            ("flushes".to_string(), load(&self.flushes)),
            ("keys".to_string(), self.len() as u64),
        ]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_engine_gets_what_was_put_and_scans_in_order() {
        let engine = MemoryEngine::new();
        assert!(engine.is_empty());
        engine.put(b"b", b"2").unwrap();
        engine.put(b"a", b"1").unwrap();
        engine.put(b"c", b"3").unwrap();
        engine.put(b"b", b"22").unwrap();
        let mut value = Vec::new();
        assert!(engine.get(b"b", &mut value).unwrap());
        assert_eq!(value, b"22");
        value.clear();
        assert!(!engine.get(b"bb", &mut value).unwrap());
        assert!(value.is_empty());
        let mut out = ScanBuffer::new();
        engine.scan(b"aa", 10, &mut out).unwrap();
        let keys: Vec<&[u8]> = out.iter().map(|(k, _)| k).collect();
        assert_eq!(keys, [&b"b"[..], &b"c"[..]]);
        out.clear();
        engine.scan(b"", 1, &mut out).unwrap();
        assert_eq!(out.len(), 1);
        engine.put(b"ca", b"4").unwrap();
        engine.put(b"d", b"5").unwrap();
        out.clear();
        engine.scan_prefix(b"c", 10, &mut out).unwrap();
        let keys: Vec<&[u8]> = out.iter().map(|(k, _)| k).collect();
        assert_eq!(keys, [&b"c"[..], &b"ca"[..]]);
        out.clear();
        engine.scan_range(b"b", b"ca", 10, &mut out).unwrap();
        let keys: Vec<&[u8]> = out.iter().map(|(k, _)| k).collect();
        assert_eq!(keys, [&b"b"[..], &b"c"[..]]);
        out.clear();
        engine.scan_range(b"d", b"c", 10, &mut out).unwrap();
        assert!(out.is_empty());
        let counters = engine.counters().unwrap();
        assert_eq!(counters["puts"], 6);
        assert_eq!(counters["gets"], 2);
        assert_eq!(counters["scans"], 5);
        assert_eq!(counters["keys"], 5);
    }
}
