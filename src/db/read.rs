//! Point lookups: memtable, immutable memtables, then tables.
//!
//! Owns: the order a `get` asks its sources in, and building its
//! [`LookupKey`] once (user key, filter hash, encoded lookup key, snapshot)
//! for every table it meets; requesting every candidate table's filter
//! memory before the first is asked (their loads overlap); `multi_get`,
//! which asks the same sources in the same order for many keys (the
//! version's candidate search), table by table, so each table's filter
//! answers all of its keys in one batched call; each data block a key
//! needs starts reading as soon as its probe finds it uncached (the keys
//! after it are probed while it is in flight), the blocks of every level
//! in one wave, each key taking its newest answer.
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

use crate::db::inner::DbInner;
use crate::db::iter::DbIterator;
use crate::db::super_version::SuperVersion;
use crate::db::tree::Tree;
use crate::db::version::{sorted_candidate, LiveTable};
use crate::error::Result;
use crate::key::SeqNo;
use crate::memtable::MemValue;
use crate::table::block::Block;
use crate::table::overlapped::{ReadRequest, ReadSession, SessionReads};
use crate::table::reader::BlockOrRead;
use crate::table::{LookupKey, ReadSettings, Table, TableValue};
use std::collections::HashMap;
use std::ops::Bound;
use std::sync::Arc;
use std::time::Instant;

pub(crate) fn get(inner: &DbInner, tree: &Tree, key: &[u8]) -> Result<Option<Bytes>> {
    // Super-version before snapshot, as in `DbIterator::new` (see there):
    // the other order lets a compaction drop the version this read needs.
    let sv = tree.current.load();
    let snapshot = inner.snapshot();
    get_at(inner, tree, &sv, snapshot, key)
}

/// [`get`] in `tree`'s super-version `sv` at `snapshot` (taken after `sv`
/// was loaded, so `sv` holds every version the snapshot can see).
pub(crate) fn get_at(
    inner: &DbInner,
    tree: &Tree,
    sv: &Arc<SuperVersion>,
    snapshot: SeqNo,
    key: &[u8],
) -> Result<Option<Bytes>> {
    let _timing = inner.latency.get_nanos.time_sampled();
    tree.reads.add(|t| &t.gets, 1);
    let tally = inner.counters.reads.local();
    tally.bump(|t| &t.gets);

    // Hashed and encoded once, for every memtable and table the lookup meets.
    let lookup = LookupKey::new(key, snapshot);
    for logged in std::iter::once(&sv.mem).chain(sv.imm.iter()) {
        if let Some(found) = logged.mem.get_hashed(key, lookup.hash(), snapshot) {
            tally.bump(|t| &t.memtable_hits);
            return match found {
                MemValue::Put(value) => Ok(Some(value)),
                MemValue::Deleted => Ok(None),
                MemValue::Merge => merged_value(inner, tree, sv, snapshot, key),
            };
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
    let mut merge = false;
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
            Ok(Some(TableValue::Merge)) => {
                merge = true;
                false
            }
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
    if merge {
        return merged_value(inner, tree, sv, snapshot, key);
    }
    answer
}

/// The value of `key`, whose newest version at `snapshot` is a merge
/// operand: a scan of the key alone, which gathers the operands down to
/// the value they apply to and merges them (`DbIterator`). The slow path
/// of a get, taken only for such keys.
#[cold]
fn merged_value(
    inner: &DbInner,
    tree: &Tree,
    sv: &Arc<SuperVersion>,
    snapshot: SeqNo,
    key: &[u8],
) -> Result<Option<Bytes>> {
    let range = (Bound::Included(key.to_vec()), Bound::Included(key.to_vec()));
    let mut scan = DbIterator::at(inner, &tree.opts.load(), Arc::clone(sv), snapshot, range);
    scan.next()
        .transpose()
        .map(|found| found.map(|(_, value)| value))
}

/// Whether `key` may have a value now, from memory alone (RocksDB's
/// `KeyMayExist`): the memtables answer exactly (a put: true; a delete or
/// a range delete: false); then each table whose range holds the key, in
/// `get`'s order, is asked its point filter — "maybe" (or no usable
/// filter, or a table that could not be opened) answers true, "absent"
/// goes on to the next older table unless one of the table's range
/// tombstones covers the key (then it is deleted: false). No data block is
/// read, so a true answer may be a filter's false positive or a key whose
/// newest version is a delete; false is never wrong.
pub(crate) fn key_may_exist(inner: &DbInner, tree: &Tree, key: &[u8]) -> bool {
    let sv = tree.current.load();
    let snapshot = inner.snapshot();
    let lookup = LookupKey::new(key, snapshot);
    for logged in std::iter::once(&sv.mem).chain(sv.imm.iter()) {
        if let Some(found) = logged.mem.get_hashed(key, lookup.hash(), snapshot) {
            // A merge operand: a value exists (whatever the merge gives).
            return !matches!(found, MemValue::Deleted);
        }
    }
    let mut may = false;
    sv.version.for_each_candidate(key, |live| {
        let Ok(table) = live.readable() else {
            may = true;
            return false;
        };
        // A point version here may be newer than a range tombstone of the
        // same table: the filter first, as `Table::get_covered` does.
        if !table.filter_rules_out(&lookup) {
            may = true;
            return false;
        }
        table.range_tombstone_seq(&lookup).is_none()
    });
    may
}

/// Candidate tables a `get` keeps (on the stack) and prefetches the filters
/// of: every level below 0 plus a level 0 of up to 18 tables.
const PREFETCHED_CANDIDATES: usize = 24;

/// One key of a `multi_get` still without an answer.
struct Pending<'k> {
    slot: usize,
    lookup: LookupKey<'k>,
    /// No older table can change the answer: the newest version the key
    /// has below the ones still to read was found (or a range tombstone
    /// covers it). Older tables are not asked.
    closed: bool,
    /// Waiting for a read before asking older tables.
    waiting: bool,
    /// The first table (in `get`'s newest-first order of tables) still
    /// to ask for this key.
    resume: usize,
    /// Answered: the answer is in place.
    done: bool,
}

/// What one table says about one key of a `multi_get` (a table that holds
/// nothing for the key says nothing and leaves no entry).
enum Step<'t> {
    /// Known without a read: a cached block answered, or a range tombstone
    /// of the table covers the key where the filter rules its points out.
    Known(TableValue),
    /// Data block `block_no` of `table` is to be read first; a range
    /// tombstone of the table covering the key at `deleted_at` answers
    /// unless the block holds a newer point version.
    Read {
        table: &'t Table,
        block_no: usize,
        deleted_at: Option<SeqNo>,
    },
}

/// A [`Step`] of the key at `key` (its index in `pending`).
struct Candidate<'t> {
    key: usize,
    step: Step<'t>,
}

/// Buffers one `multi_get` reuses for every table it asks.
#[derive(Default)]
struct Scratch<'t> {
    asked: Vec<usize>,
    hashes: Vec<u64>,
    maybe: Vec<bool>,
    order: Vec<(usize, usize)>,
    /// Every table's steps of one wave, in the order the tables were asked
    /// (newest first), so each key's steps are in its newest-first order.
    candidates: Vec<Candidate<'t>>,
    /// The data blocks the wave's steps read, started as they are found.
    reads: WaveReads<'t>,
}

/// The distinct data blocks one wave of a `multi_get` reads, each started
/// as soon as the first key wanting it finds it is not cached (while the
/// keys after it are still being asked), and each checked, decoded and
/// cached as soon as its read completes — at every later step of the wave
/// that polls, and while the wave waits for the last ones.
#[derive(Default)]
struct WaveReads<'t> {
    /// The blocks, in the order they were first wanted.
    wanted: Vec<(&'t Table, usize)>,
    /// Where a (table id, block) is in `wanted`.
    position: HashMap<(u64, usize), usize>,
    /// Each wanted block, or its read's error; `None` while its read is in
    /// flight, or (one read at a time) until a key's answer reads it.
    blocks: Vec<Option<Result<Block>>>,
    /// For each ticket of `session`, the block its read brings in.
    ticketed: Vec<usize>,
    /// Made by the wave's first read (a wave the cache answers makes none).
    session: Option<ReadSession>,
    started: Option<Instant>,
}

/// The answers for `keys` at one snapshot, in order: for each key exactly
/// what [`get`] answers at that snapshot. Keys the memtables answer drop out
/// first; the rest visit the candidate tables in `get`'s order (level 0
/// newest first, then one table per deeper level), each table asking its
/// filter for all of its keys at once and answering at once what its
/// cached blocks and range tombstones tell; the data blocks every
/// table's filter let through — of all levels together — are read in one
/// wave, each started as its key's probe finds it ([`WaveReads::want`]),
/// and once all completed ([`read_wave`]) each key takes the newest answer among its
/// tables. A failed block read that a key's answer needs fails the call: no
/// answer is returned for any key, so none can be wrong.
pub(crate) fn multi_get(
    inner: &DbInner,
    tree: &Tree,
    keys: &[&[u8]],
) -> Result<Vec<Option<Bytes>>> {
    let sv = tree.current.load();
    let snapshot = inner.snapshot();
    multi_get_at(inner, tree, &sv, snapshot, keys)
}

/// [`multi_get`] in the super-version `sv` at `snapshot` (see [`get_at`]),
/// in batches of `Options::multi_get_batch` keys.
pub(crate) fn multi_get_at(
    inner: &DbInner,
    tree: &Tree,
    sv: &Arc<SuperVersion>,
    snapshot: SeqNo,
    keys: &[&[u8]],
) -> Result<Vec<Option<Bytes>>> {
    let _timing = inner.latency.multi_get_nanos.time();
    inner.latency.multi_get_keys.record(keys.len() as u64);
    tree.reads.add(|t| &t.multi_get_keys, keys.len() as u64);
    let batch = inner.tables.settings().multi_get_batch.max(1);
    if keys.len() <= batch {
        return multi_get_batch(inner, tree, sv, snapshot, keys);
    }
    let mut answers = Vec::with_capacity(keys.len());
    for chunk in keys.chunks(batch) {
        answers.extend(multi_get_batch(inner, tree, sv, snapshot, chunk)?);
    }
    Ok(answers)
}

/// One batch of [`multi_get_at`].
fn multi_get_batch(
    inner: &DbInner,
    tree: &Tree,
    sv: &Arc<SuperVersion>,
    snapshot: SeqNo,
    keys: &[&[u8]],
) -> Result<Vec<Option<Bytes>>> {
    let tally = inner.counters.reads.local();
    tally.add(|t| &t.gets, keys.len() as u64);

    let mut answers: Vec<Option<Bytes>> = vec![None; keys.len()];
    // Slots whose newest version is a merge operand: resolved last, each
    // by `merged_value`.
    let mut merges: Vec<usize> = Vec::new();
    let mut pending = Vec::with_capacity(keys.len());
    let mut memtable_hits = 0u64;
    'keys: for (slot, &key) in keys.iter().enumerate() {
        for logged in std::iter::once(&sv.mem).chain(sv.imm.iter()) {
            if let Some(found) = logged.mem.get(key, snapshot) {
                memtable_hits += 1;
                match (found, answers.get_mut(slot)) {
                    (MemValue::Put(value), Some(answer)) => *answer = Some(value),
                    (MemValue::Merge, _) => merges.push(slot),
                    _ => {}
                }
                continue 'keys;
            }
        }
        pending.push(Pending {
            slot,
            lookup: LookupKey::new(key, snapshot),
            closed: false,
            waiting: false,
            resume: 0,
            done: false,
        });
    }
    tally.add(|t| &t.memtable_hits, memtable_hits);

    let settings = inner.tables.settings();
    let mut scratch = Scratch::default();
    let mut consulted = 0u64;
    let (level0, deeper) = sv.version.split_level0();
    while !pending.is_empty() {
        // One wave: every table a key still needs, newest first.
        for (ordinal, table) in level0.iter().enumerate() {
            scratch.asked.clear();
            scratch.asked.extend(
                pending
                    .iter()
                    .enumerate()
                    .filter(|(_, p)| p.asks(ordinal) && table.covers(p.lookup.user_key()))
                    .map(|(i, _)| i),
            );
            consulted += ask_table(&settings, table, ordinal, &mut pending, &mut scratch)?;
        }
        for (depth, level) in deeper.iter().enumerate() {
            let ordinal = level0.len() + depth;
            // Keys grouped by their one candidate table in this level (the
            // search `get` makes), in key order within each table.
            let mut order = std::mem::take(&mut scratch.order);
            order.clear();
            order.extend(
                pending
                    .iter()
                    .enumerate()
                    .filter(|(_, p)| p.asks(ordinal))
                    .filter_map(|(i, p)| {
                        sorted_candidate(level, p.lookup.user_key()).map(|table| (table, i))
                    }),
            );
            order.sort_unstable();
            for group in order.chunk_by(|a, b| a.0 == b.0) {
                let Some(table) = group.first().and_then(|&(index, _)| level.get(index)) else {
                    continue;
                };
                scratch.asked.clear();
                scratch.asked.extend(group.iter().map(|&(_, i)| i));
                consulted += ask_table(&settings, table, ordinal, &mut pending, &mut scratch)?;
            }
            scratch.order = order;
        }
        read_wave(
            &mut scratch.reads,
            &mut scratch.candidates,
            &mut pending,
            &mut answers,
            &mut merges,
        )?;
        // Keys whose every table was asked are answered (or absent); those
        // that stopped at a read go on from the table after it.
        pending.retain_mut(|p| {
            if p.waiting && !p.done {
                p.waiting = false;
                p.closed = false;
                true
            } else {
                false
            }
        });
    }
    tally.add(|t| &t.tables_consulted, consulted);
    for slot in merges {
        if let (Some(&key), Some(answer)) = (keys.get(slot), answers.get_mut(slot)) {
            *answer = merged_value(inner, tree, sv, snapshot, key)?;
        }
    }
    Ok(answers)
}

impl Pending<'_> {
    /// True when the table at `ordinal` (newest first) is to be asked for
    /// this key in the current wave.
    fn asks(&self, ordinal: usize) -> bool {
        !self.closed && !self.waiting && ordinal >= self.resume
    }
}

/// Asks `table` (at `ordinal` in the newest-first order) for the pending
/// keys at `scratch.asked` (all within its range): the filter for all of
/// them in one batch, then the index for each "maybe". A key whose block
/// the block cache holds is answered from it now; one whose block is to be
/// read gets a [`Step::Read`] on `scratch.candidates`. A key the table
/// answers for sure (and only after every newer table's read) is closed:
/// no older table is asked for it. Returns how many keys it was asked for.
fn ask_table<'t>(
    settings: &ReadSettings,
    table: &'t LiveTable,
    ordinal: usize,
    pending: &mut [Pending<'_>],
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
        p.resume = ordinal + 1;
        // A range tombstone of the table answers whatever the filter said
        // (as in `Table::get_covered`); a point version newer than it wins.
        let deleted_at = readable.range_tombstone_seq(&p.lookup);
        let known = if !maybe {
            deleted_at.map(|_| TableValue::Deleted)
        } else {
            let block_no = readable.candidate_block(&p.lookup);
            let at_hand = match block_no {
                Some(block_no) => match readable.block_or_read(block_no)? {
                    BlockOrRead::Block(block) => {
                        readable.count_data_block_read();
                        Some((block, block_no))
                    }
                    // A file read the range filter spares (as in `get`).
                    BlockOrRead::Read(_) if readable.range_filter_rules_out(&p.lookup) => None,
                    BlockOrRead::Read(request) => {
                        readable.count_data_block_read();
                        scratch.reads.want(settings, readable, block_no, request);
                        scratch.candidates.push(Candidate {
                            key: i,
                            step: Step::Read {
                                table: readable,
                                block_no,
                                deleted_at,
                            },
                        });
                        // The key waits for its newest candidate block and
                        // asks older tables in a second wave only when that
                        // block does not hold it (a filter false positive),
                        // so it never reads more than `get` would. Reading
                        // the older tables' blocks in the same wave instead
                        // was measured (N = 20M in 1 GiB, batches of 32:
                        // docs/design.md, "The concurrent read path"): 0.45%
                        // more blocks against 1.0% of calls taking a second
                        // wave, the same throughput.
                        p.waiting = true;
                        continue;
                    }
                },
                None => None,
            };
            newest_of(readable.get_in_block(at_hand, &p.lookup)?, deleted_at)
        };
        if let Some(known) = known {
            scratch.candidates.push(Candidate {
                key: i,
                step: Step::Known(known),
            });
            p.closed = true;
        }
    }
    scratch.reads.poll();
    Ok(scratch.asked.len() as u64)
}

/// A table's answer from the point version its block holds (with its
/// sequence number) and the newest of its range tombstones covering the key.
fn newest_of(found: Option<(TableValue, SeqNo)>, deleted_at: Option<SeqNo>) -> Option<TableValue> {
    match (found, deleted_at) {
        (Some((value, seq)), Some(deleted_at)) if seq > deleted_at => Some(value),
        (_, Some(_)) => Some(TableValue::Deleted),
        (found, None) => found.map(|(value, _)| value),
    }
}

impl<'t> WaveReads<'t> {
    /// Block `block_no` of `table` is wanted by a key; `request` reads it
    /// (the block cache does not hold it). A block wanted already in this
    /// wave is read once: its read is in flight or done. Otherwise its read
    /// starts now, unless reads go one at a time (`multi_get_in_flight` 1:
    /// the key's answer then reads it as `get` does).
    fn want(
        &mut self,
        settings: &ReadSettings,
        table: &'t Table,
        block_no: usize,
        request: ReadRequest,
    ) {
        let key = (table.id(), block_no);
        if self.position.contains_key(&key) {
            return;
        }
        self.position.insert(key, self.wanted.len());
        self.wanted.push((table, block_no));
        self.blocks.push(None);
        if settings.multi_get_in_flight <= 1 {
            return;
        }
        let session = self.session.get_or_insert_with(|| {
            ReadSession::new(settings.multi_get_in_flight, settings.io_uring)
        });
        self.started.get_or_insert_with(Instant::now);
        let ticket = session.submit(request);
        debug_assert_eq!(ticket, self.ticketed.len());
        self.ticketed.push(self.wanted.len() - 1);
        self.poll();
    }

    /// Finishes every block whose read completed so far (checked, decoded,
    /// cached), without waiting for the others.
    fn poll(&mut self) {
        if let Some(session) = self.session.as_mut() {
            let (wanted, blocks, ticketed) = (&self.wanted, &mut self.blocks, &self.ticketed);
            session.poll(&mut |ticket, stored| {
                finish_read(wanted, blocks, ticketed, ticket, stored);
            });
        }
    }

    /// Waits for the wave's reads still in flight, finishing each block as
    /// it completes, and counts them.
    fn finish(&mut self) {
        let Some(session) = self.session.take() else {
            return;
        };
        let (wanted, blocks, ticketed) = (&self.wanted, &mut self.blocks, &self.ticketed);
        let reads: SessionReads = session.finish(&mut |ticket, stored| {
            finish_read(wanted, blocks, ticketed, ticket, stored);
        });
        if let Some(&(table, _)) = self.wanted.first() {
            table.note_overlapped_batch(reads.uring, reads.pool, reads.direct);
            if let Some(started) = self.started.take() {
                table.note_file_read(started.elapsed());
            }
        }
    }

    /// Empties the wave's reads for the next wave (no read is in flight:
    /// `finish` waited for them).
    fn clear(&mut self) {
        self.wanted.clear();
        self.position.clear();
        self.blocks.clear();
        self.ticketed.clear();
        self.session = None;
        self.started = None;
    }
}

/// Puts the block read `ticket` brought in (or its error) in its place.
fn finish_read(
    wanted: &[(&Table, usize)],
    blocks: &mut [Option<Result<Block>>],
    ticketed: &[usize],
    ticket: usize,
    stored: Result<Bytes>,
) {
    let Some(&at) = ticketed.get(ticket) else {
        return;
    };
    if let (Some(&(table, block_no)), Some(slot)) = (wanted.get(at), blocks.get_mut(at)) {
        *slot = Some(table.finish_block_read(block_no, stored));
    }
}

/// Waits for the wave's block reads (started while its keys were asked:
/// [`WaveReads::want`]), then answers each key with the first of its steps
/// (newest first) that holds an answer. A key whose steps hold none is
/// absent, unless it stopped at a read ([`Pending::waiting`]): it then
/// goes on to older tables. A failed read fails the call only when a key's
/// answer needs its block. Empties `candidates` and `reads`.
fn read_wave(
    reads: &mut WaveReads<'_>,
    candidates: &mut Vec<Candidate<'_>>,
    pending: &mut [Pending<'_>],
    answers: &mut [Option<Bytes>],
    merges: &mut Vec<usize>,
) -> Result<()> {
    reads.finish();
    let answered = answer_steps(reads, candidates, pending, answers, merges);
    reads.clear();
    candidates.clear();
    answered
}

/// [`read_wave`]'s answers, once every block read completed.
fn answer_steps(
    reads: &mut WaveReads<'_>,
    candidates: &mut [Candidate<'_>],
    pending: &mut [Pending<'_>],
    answers: &mut [Option<Bytes>],
    merges: &mut Vec<usize>,
) -> Result<()> {
    if candidates.is_empty() {
        return Ok(());
    }
    // Each key's steps together, newest first (the sort is stable).
    candidates.sort_by_key(|c| c.key);
    let mut first_use = vec![true; reads.wanted.len()];
    for steps in candidates.chunk_by(|a, b| a.key == b.key) {
        let Some(p) = steps.first().and_then(|c| pending.get_mut(c.key)) else {
            continue;
        };
        let mut answer = None;
        for candidate in steps {
            answer = match &candidate.step {
                Step::Known(value) => Some(value.clone()),
                Step::Read {
                    table,
                    block_no,
                    deleted_at,
                } => {
                    let at = reads
                        .position
                        .get(&(table.id(), *block_no))
                        .copied()
                        .unwrap_or(usize::MAX);
                    if let Some(slot @ None) = reads.blocks.get_mut(at) {
                        // Reads one at a time: this key's read, as `get`
                        // makes it; keys after it in the block find it read.
                        *slot = Some(table.data_block(*block_no));
                        if let Some(flag) = first_use.get_mut(at) {
                            *flag = false;
                        }
                    }
                    let block = match reads.blocks.get(at).and_then(Option::as_ref) {
                        Some(Ok(block)) => {
                            // Keys after the first of a block found it read:
                            // a cache hit, as the second of two gets would.
                            if !first_use.get_mut(at).is_some_and(std::mem::take) {
                                table.count_block_cache_hit();
                            }
                            block.clone()
                        }
                        // This key's answer needs the block that failed.
                        Some(Err(_)) => {
                            return match reads.blocks.get_mut(at).and_then(Option::take) {
                                Some(Err(e)) => Err(e),
                                _ => Ok(()),
                            }
                        }
                        // Not wanted (never so): read as `get` reads it.
                        None => table.data_block(*block_no)?,
                    };
                    newest_of(
                        table.get_in_block(Some((block, *block_no)), &p.lookup)?,
                        *deleted_at,
                    )
                }
            };
            if answer.is_some() {
                break;
            }
        }
        if let Some(found) = answer {
            match (found, answers.get_mut(p.slot)) {
                (TableValue::Put(value), Some(slot)) => *slot = Some(value),
                (TableValue::Merge, _) => merges.push(p.slot),
                _ => {}
            }
            p.done = true;
        }
    }
    Ok(())
}
