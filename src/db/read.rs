//! Point lookups: memtable, immutable memtables, then tables.
//!
//! Owns: the order a `get` asks its sources in, and building its
//! [`LookupKey`] once (user key, filter hash, encoded lookup key, snapshot)
//! for every table it meets; requesting every candidate table's filter
//! memory before the first is asked (their loads overlap); `multi_get`,
//! which asks the same sources in the same order for many keys (the
//! version's candidate search), table by table, so each table's filter
//! answers all of its keys in one batched call.
//! Each source answers for its own range tombstones (`Memtable::get`,
//! `Table::get_covered`; `multi_get` asks a table's after its batched
//! filter pass), so the first source with an answer wins, as for point
//! tombstones.
//! Must never: take a lock (but the first read of a memtable after a range
//! delete went into it, which fragments its tombstones once under the
//! memtable's own lock), allocate per table in `get`, or read a table's
//! data before its filter was asked — except to learn that one of its range
//! tombstones covers the key, which needs no data block.

use bytes::Bytes;

use crate::db::version::{sorted_candidate, LiveTable};
use crate::db::{DbInner, SuperVersion, Tree};
use crate::error::Result;
use crate::key::SeqNo;
use crate::memtable::MemValue;
use crate::table::block::Block;
use crate::table::overlapped::{read_overlapped, ReadRequest};
use crate::table::reader::BlockOrRead;
use crate::table::{LookupKey, ReadSettings, Table, TableValue};
use std::time::Instant;

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

/// A data block a key of a `multi_get` needs (its filter said "maybe"),
/// deferred until every table of the step asked its filter, so the reads
/// of the whole step go out together.
struct BlockNeed<'t> {
    table: &'t Table,
    /// The block the index names, or `None` when it rules the key out.
    block_no: Option<usize>,
    /// The key's index in `pending`.
    key: usize,
    /// The newest range tombstone of the table covering the key.
    deleted_at: Option<SeqNo>,
}

/// Buffers one `multi_get` reuses for every table it asks.
#[derive(Default)]
struct Scratch<'t> {
    asked: Vec<usize>,
    hashes: Vec<u64>,
    maybe: Vec<bool>,
    order: Vec<(usize, usize)>,
    needs: Vec<BlockNeed<'t>>,
}

/// The answers for `keys` at one snapshot, in order: for each key exactly
/// what [`get`] answers at that snapshot. Keys the memtables answer drop out
/// first; the rest visit the candidate tables in `get`'s order (level 0
/// newest first, then one table per deeper level), each table asking its
/// filter for all of its keys at once; then the data blocks of every key a
/// step (one level-0 table, or one deeper level) let through are read
/// together ([`read_needed_blocks`]). A failed block read fails the call:
/// no answer is returned for any key, so none can be wrong.
pub(crate) fn multi_get(
    inner: &DbInner,
    tree: &Tree,
    keys: &[&[u8]],
) -> Result<Vec<Option<Bytes>>> {
    let sv = tree.current.load();
    let snapshot = inner.snapshot();
    multi_get_at(inner, &sv, snapshot, keys)
}

/// [`multi_get`] in the super-version `sv` at `snapshot` (see [`get_at`]),
/// in batches of `Options::multi_get_batch` keys.
pub(crate) fn multi_get_at(
    inner: &DbInner,
    sv: &SuperVersion,
    snapshot: SeqNo,
    keys: &[&[u8]],
) -> Result<Vec<Option<Bytes>>> {
    let batch = inner.tables.settings().multi_get_batch.max(1);
    if keys.len() <= batch {
        return multi_get_batch(inner, sv, snapshot, keys);
    }
    let mut answers = Vec::with_capacity(keys.len());
    for chunk in keys.chunks(batch) {
        answers.extend(multi_get_batch(inner, sv, snapshot, chunk)?);
    }
    Ok(answers)
}

/// One batch of [`multi_get_at`].
fn multi_get_batch(
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

    let settings = inner.tables.settings();
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
        read_needed_blocks(&settings, &mut scratch.needs, &mut pending, &mut answers)?;
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
        read_needed_blocks(&settings, &mut scratch.needs, &mut pending, &mut answers)?;
        pending.retain(|p| !p.done);
    }
    tally.add(|t| &t.tables_consulted, consulted);
    Ok(answers)
}

/// Asks `table` for the pending keys at `scratch.asked` (all within its
/// range): the filter for all of them in one batch, then the index for
/// each "maybe", whose data block goes on `scratch.needs`. Marks `done`
/// the keys a range tombstone of the table answers without a block.
/// Returns how many keys it was asked for.
fn ask_table<'t>(
    table: &'t LiveTable,
    pending: &mut [Pending<'_>],
    answers: &mut [Option<Bytes>],
    scratch: &mut Scratch<'t>,
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
        if maybe {
            scratch.needs.push(BlockNeed {
                table: readable,
                block_no: readable.candidate_block(&p.lookup),
                key: i,
                deleted_at,
            });
        } else if deleted_at.is_some() {
            settle(p, answers, Some(TableValue::Deleted));
        }
    }
    Ok(scratch.asked.len() as u64)
}

/// Records a table's answer for a pending key (`None`: the table holds
/// nothing for it, and the key goes on to the next one).
fn settle(p: &mut Pending<'_>, answers: &mut [Option<Bytes>], found: Option<TableValue>) {
    if let Some(found) = found {
        if let (TableValue::Put(value), Some(answer)) = (found, answers.get_mut(p.slot)) {
            *answer = Some(value);
        }
        p.done = true;
    }
}

/// Answers every key of `needs` from its data block: each distinct block
/// the block cache lacks is read once, all of them together
/// (`overlapped::read_overlapped`: io_uring or the read pool, at most
/// `multi_get_in_flight` at once) when there are two or more; a single
/// missing block is read as `get` reads it. Empties `needs`.
fn read_needed_blocks(
    settings: &ReadSettings,
    needs: &mut Vec<BlockNeed<'_>>,
    pending: &mut [Pending<'_>],
    answers: &mut [Option<Bytes>],
) -> Result<()> {
    if needs.is_empty() {
        return Ok(());
    }
    // Keys sharing a block side by side: one read serves them all.
    needs.sort_unstable_by_key(|n| (n.table.id(), n.block_no));
    let same_block = |a: &BlockNeed<'_>, b: &BlockNeed<'_>| {
        a.table.id() == b.table.id() && a.block_no == b.block_no
    };
    let mut blocks: Vec<Option<Block>> = Vec::new();
    // The groups whose block is to be read, and their reads.
    let mut read_groups: Vec<(&Table, usize, usize)> = Vec::new();
    let mut requests: Vec<ReadRequest> = Vec::new();
    for group in needs.chunk_by(same_block) {
        let Some((table, block_no)) = group.first().and_then(|n| Some((n.table, n.block_no?)))
        else {
            blocks.push(None);
            continue;
        };
        if settings.multi_get_in_flight <= 1 {
            // One read at a time, each as `get` makes it.
            blocks.push(Some(table.data_block(block_no)?));
            continue;
        }
        match table.block_or_read(block_no)? {
            BlockOrRead::Block(block) => blocks.push(Some(block)),
            BlockOrRead::Read(request) => {
                read_groups.push((table, block_no, blocks.len()));
                requests.push(request);
                blocks.push(None);
            }
        }
    }
    if let Some(&(table, _, _)) = read_groups.first() {
        let started = Instant::now();
        let results = if let [request] = requests.as_slice() {
            vec![request.read_here()]
        } else {
            let (results, path) =
                read_overlapped(&requests, settings.multi_get_in_flight, settings.io_uring);
            table.note_overlapped_batch(path, requests.len() as u64);
            results
        };
        table.note_file_read(started.elapsed());
        for (&(table, block_no, group), stored) in read_groups.iter().zip(results) {
            let block = table.finish_block_read(block_no, stored)?;
            if let Some(slot) = blocks.get_mut(group) {
                *slot = Some(block);
            }
        }
    }
    for (group, block) in needs.chunk_by(same_block).zip(blocks) {
        for (n, need) in group.iter().enumerate() {
            // Keys after the first of a block found it read: a cache hit,
            // as the second of two gets of one block would.
            if n > 0 && need.block_no.is_some() {
                need.table.count_block_cache_hit();
            }
            let at_hand = block.clone().zip(need.block_no);
            let Some(p) = pending.get_mut(need.key) else {
                continue;
            };
            let found = need.table.get_in_block(at_hand, &p.lookup)?;
            let found = match (found, need.deleted_at) {
                (Some((value, seq)), Some(deleted_at)) if seq > deleted_at => Some(value),
                (_, Some(_)) => Some(TableValue::Deleted),
                (found, None) => found.map(|(value, _)| value),
            };
            settle(p, answers, found);
        }
    }
    needs.clear();
    Ok(())
}
