//! Point lookups: memtable, immutable memtables, then tables.
//!
//! Owns: the order a `get` asks its sources in, and building its
//! [`LookupKey`] once (user key, filter hash, encoded lookup key, snapshot)
//! for every table it meets; requesting every candidate table's filter
//! memory before the first is asked (their loads overlap); `multi_get`,
//! which asks the same sources in the same order for many keys (the
//! version's candidate search), table by table, so each table's filter
//! answers all of its keys in one batched call.
//! Must never: take a lock, allocate per table in `get`, or read a table's
//! data before its filter was asked.

use bytes::Bytes;

use crate::db::version::{sorted_candidate, LiveTable};
use crate::db::{DbInner, SuperVersion, Tree};
use crate::error::Result;
use crate::key::SeqNo;
use crate::memtable::MemValue;
use crate::table::{LookupKey, TableValue};

pub(crate) fn get(inner: &DbInner, tree: &Tree, key: &[u8]) -> Result<Option<Bytes>> {
    // Super-version before snapshot, as in `DbIterator::new` (see there):
    // the other order lets a compaction drop the version this read needs.
    let sv = tree.current.load();
    let snapshot = inner.snapshot();
    get_at(inner, &sv, snapshot, key)
}

/// [`get`] in the super-version `sv` at `snapshot` (taken after `sv` was
/// loaded, so `sv` holds every version the snapshot can see).
pub(crate) fn get_at(
    inner: &DbInner,
    sv: &SuperVersion,
    snapshot: SeqNo,
    key: &[u8],
) -> Result<Option<Bytes>> {
    let tally = inner.counters.reads.local();
    tally.bump(|t| &t.gets);

    // Hashed and encoded once, for every memtable and table the lookup meets.
    let lookup = LookupKey::new(key, snapshot);
    for logged in std::iter::once(&sv.mem).chain(sv.imm.iter()) {
        if let Some(found) = logged.mem.get_hashed(key, lookup.hash(), snapshot) {
            tally.bump(|t| &t.memtable_hits);
            return Ok(match found {
                MemValue::Put(value) => Some(value),
                MemValue::Deleted => None,
            });
        }
    }

    // The candidates are found first and their filter lines requested
    // together: an absent key must ask every one of them, and filters much
    // larger than the cache cost a memory load each, which then overlap
    // instead of following one another.
    let mut near: [Option<&LiveTable>; PREFETCHED_CANDIDATES] = [None; PREFETCHED_CANDIDATES];
    let mut candidates = 0usize;
    sv.version.for_each_candidate(key, |live| {
        if let Some(slot) = near.get_mut(candidates) {
            if let Ok(table) = live.readable() {
                table.prefetch_point_filter(&lookup);
            }
            *slot = Some(live);
        }
        candidates += 1;
        true
    });
    let mut answer = Ok(None);
    let mut consulted = 0u64;
    let mut ask = |live: &LiveTable| {
        consulted += 1;
        match live.readable().and_then(|t| t.get_covered(&lookup)) {
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
    };
    let mut open = near.iter().map_while(|c| *c).all(&mut ask);
    if open && candidates > PREFETCHED_CANDIDATES {
        // More candidates than were kept (a level 0 far over its stop
        // trigger): the rest are asked in the same order, unprefetched.
        let mut skip = PREFETCHED_CANDIDATES;
        sv.version.for_each_candidate(key, |live| {
            if skip > 0 {
                skip -= 1;
                return true;
            }
            open = ask(live);
            open
        });
    }
    tally.add(|t| &t.tables_consulted, consulted);
    answer
}

/// Candidate tables a `get` keeps (on the stack) and prefetches the filters
/// of: every level below 0 plus a level 0 of up to 18 tables.
const PREFETCHED_CANDIDATES: usize = 24;

/// One key of a `multi_get` still without an answer.
struct Pending<'k> {
    slot: usize,
    lookup: LookupKey<'k>,
    /// Answered by the table just asked; dropped before the next one.
    done: bool,
}

/// Buffers one `multi_get` reuses for every table it asks.
#[derive(Default)]
struct Scratch {
    asked: Vec<usize>,
    hashes: Vec<u64>,
    maybe: Vec<bool>,
    order: Vec<(usize, usize)>,
}

/// The answers for `keys` at one snapshot, in order: for each key exactly
/// what [`get`] answers at that snapshot. Keys the memtables answer drop out
/// first; the rest visit the candidate tables in `get`'s order (level 0
/// newest first, then one table per deeper level), each table asking its
/// filter for all of its keys at once.
pub(crate) fn multi_get(
    inner: &DbInner,
    tree: &Tree,
    keys: &[&[u8]],
) -> Result<Vec<Option<Bytes>>> {
    let sv = tree.current.load();
    let snapshot = inner.snapshot();
    multi_get_at(inner, &sv, snapshot, keys)
}

/// [`multi_get`] in the super-version `sv` at `snapshot` (see [`get_at`]).
pub(crate) fn multi_get_at(
    inner: &DbInner,
    sv: &SuperVersion,
    snapshot: SeqNo,
    keys: &[&[u8]],
) -> Result<Vec<Option<Bytes>>> {
    let tally = inner.counters.reads.local();
    tally.add(|t| &t.gets, keys.len() as u64);

    let mut answers: Vec<Option<Bytes>> = vec![None; keys.len()];
    let mut pending = Vec::with_capacity(keys.len());
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
            lookup: LookupKey::new(key, snapshot),
            done: false,
        });
    }
    tally.add(|t| &t.memtable_hits, memtable_hits);

    let mut scratch = Scratch::default();
    let mut consulted = 0u64;
    let (level0, deeper) = sv.version.split_level0();
    for table in level0 {
        scratch.asked.clear();
        scratch.asked.extend(
            pending
                .iter()
                .enumerate()
                .filter(|(_, p)| table.covers(p.lookup.user_key()))
                .map(|(i, _)| i),
        );
        consulted += ask_table(table, &mut pending, &mut answers, &mut scratch)?;
        pending.retain(|p| !p.done);
    }
    for level in deeper {
        // Keys grouped by their one candidate table in this level (the
        // search `get` makes), in key order within each table.
        let mut order = std::mem::take(&mut scratch.order);
        order.clear();
        order.extend(pending.iter().enumerate().filter_map(|(i, p)| {
            sorted_candidate(level, p.lookup.user_key()).map(|table| (table, i))
        }));
        order.sort_unstable();
        for group in order.chunk_by(|a, b| a.0 == b.0) {
            let Some(table) = group.first().and_then(|&(index, _)| level.get(index)) else {
                continue;
            };
            scratch.asked.clear();
            scratch.asked.extend(group.iter().map(|&(_, i)| i));
            consulted += ask_table(table, &mut pending, &mut answers, &mut scratch)?;
        }
        scratch.order = order;
        pending.retain(|p| !p.done);
    }
    tally.add(|t| &t.tables_consulted, consulted);
    Ok(answers)
}

/// Asks `table` for the pending keys at `scratch.asked` (all within its
/// range): the filter for all of them in one batch, then the index and data
/// for each "maybe". Marks the keys it answers `done`. Returns how many keys
/// it was asked for.
fn ask_table(
    table: &LiveTable,
    pending: &mut [Pending<'_>],
    answers: &mut [Option<Bytes>],
    scratch: &mut Scratch,
) -> Result<u64> {
    if scratch.asked.is_empty() {
        return Ok(0);
    }
    let readable = table.readable()?;
    // The hash the table's filter holds for each key (a prefix's, when the
    // table kept prefixes only); when it cannot answer for one, it is not asked.
    scratch.hashes.clear();
    let answerable = scratch.asked.iter().all(|&i| {
        let hash = pending
            .get(i)
            .and_then(|p| readable.point_filter_probe(&p.lookup));
        hash.map(|(_, h)| scratch.hashes.push(h)).is_some()
    });
    if answerable {
        readable.filter_answers(&scratch.hashes, &mut scratch.maybe);
    } else {
        scratch.maybe.clear();
        scratch.maybe.resize(scratch.asked.len(), true);
    }
    for (&i, &maybe) in scratch.asked.iter().zip(&scratch.maybe) {
        let Some(p) = pending.get_mut(i) else {
            continue;
        };
        // A range tombstone of the table answers whatever the filter said
        // (as in `Table::get_covered`); a point version newer than it wins.
        let deleted_at = readable.range_tombstone_seq(&p.lookup);
        if !maybe && deleted_at.is_none() {
            continue;
        }
        let found = if maybe {
            readable.get_past_filter_versioned(&p.lookup)?
        } else {
            None
        };
        let found = match (found, deleted_at) {
            (Some((value, seq)), Some(deleted_at)) if seq > deleted_at => Some(value),
            (_, Some(_)) => Some(TableValue::Deleted),
            (found, None) => found.map(|(value, _)| value),
        };
        if let Some(found) = found {
            if let (TableValue::Put(value), Some(answer)) = (found, answers.get_mut(p.slot)) {
                *answer = Some(value);
            }
            p.done = true;
        }
    }
    Ok(scratch.asked.len() as u64)
}
