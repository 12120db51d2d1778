//! Point lookups: memtable, immutable memtables, then tables.
//!
//! Owns: the order a `get` asks its sources in, and hashing the key once for
//! every table filter it meets.
//! Must never: take a lock, allocate per table, or read a table's data before
//! its filter was asked.

use std::sync::atomic::Ordering;

use bytes::Bytes;

use crate::db::DbInner;
use crate::error::Result;
use crate::filter::hash_key;
use crate::memtable::MemValue;
use crate::table::TableValue;

pub(crate) fn get(inner: &DbInner, key: &[u8]) -> Result<Option<Bytes>> {
    inner.counters.gets.fetch_add(1, Ordering::Relaxed);
    // Super-version before snapshot, as in `DbIterator::new` (see there):
    // the other order lets a compaction drop the version this read needs.
    let sv = inner.current.load();
    let snapshot = inner.snapshot();

    for logged in std::iter::once(&sv.mem).chain(sv.imm.iter()) {
        if let Some(found) = logged.mem.get(key, snapshot) {
            inner.counters.memtable_hits.fetch_add(1, Ordering::Relaxed);
            return Ok(match found {
                MemValue::Put(value) => Some(value),
                MemValue::Deleted => None,
            });
        }
    }

    let hash = hash_key(key);
    let mut answer = Ok(None);
    let mut consulted = 0u64;
    sv.version.for_each_candidate(key, |live| {
        consulted += 1;
        match live.table.get(key, hash, snapshot) {
            Ok(None) => true,
            Ok(Some(TableValue::Put(value))) => {
                answer = Ok(Some(value));
                false
            }
            Ok(Some(TableValue::Deleted)) => false,
            Err(e) => {
                answer = Err(e);
                false
            }
        }
    });
    inner
        .counters
        .tables_consulted
        .fetch_add(consulted, Ordering::Relaxed);
    answer
}
