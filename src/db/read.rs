//! Point lookups: memtable, immutable memtables, then tables.
//!
//! Owns: the order a `get` asks its sources in, and hashing the key once for
//! every table filter it meets; `multi_get`, which asks the same sources in
//! the same order for many keys, table by table, so each table's filter
//! answers all of its keys in one batched call.
//! Must never: take a lock, allocate per table in `get`, or read a table's
//! data before its filter was asked.

use std::sync::atomic::Ordering;

use bytes::Bytes;

use crate::db::version::LiveTable;
use crate::db::DbInner;
use crate::error::Result;
use crate::filter::hash_key;
use crate::key::SeqNo;
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

/// One key of a `multi_get` still without an answer.
struct Pending<'k> {
    slot: usize,
    key: &'k [u8],
    hash: u64,
}

/// The answers for `keys` at one snapshot, in order: for each key exactly
/// what [`get`] answers at that snapshot. Keys the memtables answer drop out
/// first; the rest visit the candidate tables in `get`'s order (level 0
/// newest first, then one table per deeper level), each table asking its
/// filter for all of its keys at once.
pub(crate) fn multi_get(inner: &DbInner, keys: &[&[u8]]) -> Result<Vec<Option<Bytes>>> {
    inner
        .counters
        .gets
        .fetch_add(keys.len() as u64, Ordering::Relaxed);
    let sv = inner.current.load();
    let snapshot = inner.snapshot();

    let mut answers: Vec<Option<Bytes>> = vec![None; keys.len()];
    let mut pending = Vec::new();
    let mut memtable_hits = 0u64;
    'keys: for (slot, &key) in keys.iter().enumerate() {
        for logged in std::iter::once(&sv.mem).chain(sv.imm.iter()) {
            if let Some(found) = logged.mem.get(key, snapshot) {
                memtable_hits += 1;
                if let (MemValue::Put(value), Some(answer)) = (found, answers.get_mut(slot)) {
                    *answer = Some(value);
                }
                continue 'keys;
            }
        }
        pending.push(Pending {
            slot,
            key,
            hash: hash_key(key),
        });
    }
    inner
        .counters
        .memtable_hits
        .fetch_add(memtable_hits, Ordering::Relaxed);

    let mut consulted = 0u64;
    let mut levels = sv.version.levels.iter();
    if let Some(level0) = levels.next() {
        for table in level0 {
            consulted += ask_table(table, &mut pending, snapshot, &mut answers, |key| {
                table.covers(key)
            })?;
        }
    }
    for level in levels {
        // Each key's one candidate in a sorted, disjoint level: the first
        // table whose largest key is ≥ the key (see `for_each_candidate`).
        let candidate = |key: &[u8]| level.partition_point(|t| t.largest_user_key() < key);
        let mut tables: Vec<usize> = pending.iter().map(|p| candidate(p.key)).collect();
        tables.sort_unstable();
        tables.dedup();
        for index in tables {
            let Some(table) = level.get(index) else {
                continue;
            };
            consulted += ask_table(table, &mut pending, snapshot, &mut answers, |key| {
                candidate(key) == index && table.covers(key)
            })?;
        }
    }
    inner
        .counters
        .tables_consulted
        .fetch_add(consulted, Ordering::Relaxed);
    Ok(answers)
}

/// Asks `table` for every pending key `mine` selects: the filter for all of
/// them in one batch, then the data for each "maybe". Keys the table answers
/// leave `pending`. Returns how many keys it was asked for.
fn ask_table(
    table: &LiveTable,
    pending: &mut Vec<Pending<'_>>,
    snapshot: SeqNo,
    answers: &mut [Option<Bytes>],
    mine: impl Fn(&[u8]) -> bool,
) -> Result<u64> {
    let asked: Vec<usize> = (0..pending.len())
        .filter(|&i| pending.get(i).is_some_and(|p| mine(p.key)))
        .collect();
    if asked.is_empty() {
        return Ok(0);
    }
    let hashes: Vec<u64> = asked
        .iter()
        .filter_map(|&i| pending.get(i).map(|p| p.hash))
        .collect();
    let maybes = table.table.filter_answers(&hashes);
    let mut answered = vec![false; pending.len()];
    for (&i, maybe) in asked.iter().zip(maybes) {
        let Some(p) = pending.get(i) else { continue };
        if !maybe {
            continue;
        }
        match table.table.get_past_filter(p.key, snapshot)? {
            None => {}
            Some(found) => {
                if let (TableValue::Put(value), Some(answer)) = (found, answers.get_mut(p.slot)) {
                    *answer = Some(value);
                }
                if let Some(done) = answered.get_mut(i) {
                    *done = true;
                }
            }
        }
    }
    let mut index = 0;
    pending.retain(|_| {
        let keep = !answered.get(index).copied().unwrap_or(false);
        index += 1;
        keep
    });
    Ok(asked.len() as u64)
}
