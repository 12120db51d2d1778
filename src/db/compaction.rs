//! Leveled compaction.
//!
//! Owns: choosing what to compact (level 0 by table count, deeper levels by
//! size against `level1_bytes · ratio^(n−1)`, and in such a level the table
//! whose overlap below is least for its size; with nothing over budget, a
//! run of small adjacent tables within a level, see `small_runs`), merging
//! the inputs into new tables (each with its own filter, chosen by the
//! filter policy for the tree as it will be after the compaction), and
//! installing the result.
//! At the bottom (nothing deeper overlaps the inputs) a key's surviving
//! version is the only one left in the tree, so it is written with sequence
//! number 0, as RocksDB does: its tag then takes one byte of a format-7
//! table instead of three or four. Every reader that can see the new table
//! took its snapshot after the write (snapshots pin the tables they read),
//! and any newer version, anywhere, still sorts before it.
//! Range tombstones: the inputs' tombstones, merged, delete every entry
//! they cover that is older than them (an input table they cover whole, key
//! range and sequence numbers, is not read at all); above the bottom they
//! go into the outputs, each output taking the part from the previous
//! output's last key to its own (`TombstoneCuts`), at the bottom they are
//! dropped with the entries they deleted.
//! Must never: drop the newest version of a key, drop a tombstone (point
//! or range) while an older version may live deeper, zero a sequence
//! number where an older version of the key may remain, or delete an input
//! before a durable manifest stopped naming it.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;

use crate::blob::blob_file_name;
use crate::blob::tally::BlobTally;
use crate::db::blob_garbage::{garbage_pick, with_edit, BlobEdit};
use crate::db::compaction_blobs::{
    collected_files, mark_unreferenced, moves_pointers, tally_unread, WrittenPointers,
};
use crate::db::compaction_scope::{CompactionScope, OwnedRange};
use crate::db::flush::{
    build_table, open_live_table, table_options_for, EntrySource, OutputLimits, PendingOutputs,
    TombstoneCuts,
};
use crate::db::inner::DbInner;
use crate::db::iter::{
    apply_merge, deleted_by, gather_operands, InternalIterator, MergingIter, TableSource,
};
use crate::db::small_runs::small_run;
use crate::db::super_version::SuperVersion;
use crate::db::tree::Tree;
use crate::db::version::LEVELS;
use crate::db::version::{LiveTable, Version};
use crate::error::Result;
use crate::events::{CompactionEvent, CompactionReason, Event};
use crate::filename::table_file_name;
use crate::key::{
    before_start_of, encode_internal_key, parse_internal_key, past_end_of, starts_before_end,
    user_key_of, SeqNo, ValueKind,
};
use crate::options::{CompactionDecision, CompactionFilter, MergeOperator, Options};
use crate::range_tombstone::FragmentedTombstones;
use crate::table::ScanMode;
use siftdb_filter::LevelTables;

/// What one compaction reads and where it writes.
pub(crate) struct Pick {
    pub inputs: Vec<Arc<LiveTable>>,
    pub output_level: usize,
}

fn level_budget(opts: &Options, level: usize) -> u64 {
    let mut budget = opts.level1_bytes;
    for _ in 1..level {
        budget = budget.saturating_mul(opts.level_size_ratio);
    }
    budget
}

fn key_range(tables: &[Arc<LiveTable>]) -> Option<(Vec<u8>, Vec<u8>)> {
    let lo = tables.iter().map(|t| t.smallest_user_key()).min()?;
    let hi = tables.iter().map(|t| t.largest_user_key()).max()?;
    Some((lo.to_vec(), hi.to_vec()))
}

/// The level most over its budget, with its score (above 1), if any. A
/// `quiet` keyspace (nothing in its memtables) compacts level 0 from
/// [`Options::level0_quiet_trigger`] tables on (see there).
fn most_urgent(version: &Version, opts: &Options, quiet: bool) -> Option<(f64, usize)> {
    let level0 = version.levels.first()?;
    let mut best: Option<(f64, usize)> = None;
    let trigger = if quiet {
        opts.level0_quiet_trigger
            .min(opts.level0_compaction_trigger)
    } else {
        opts.level0_compaction_trigger
    };
    if level0.len() >= trigger {
        best = Some((level0.len() as f64 / trigger as f64, 0));
    }
    for level in 1..LEVELS.min(version.levels.len()).saturating_sub(1) {
        let score = version.level_bytes(level) as f64 / level_budget(opts, level) as f64;
        if score > 1.0 && best.is_none_or(|(s, _)| score > s) {
            best = Some((score, level));
        }
    }
    best
}

/// The compaction of `level`, the level [`most_urgent`] chose.
///
/// Tables that could not be opened (damaged, see `LiveTable::readable`) are
/// left where they are: a compaction is picked without them, never through
/// them, and never moves newer data below one (at level 0 only the tables
/// older than every damaged one go down; at deeper levels a table is
/// chosen whose inputs are all readable). Only when level 0 is full enough
/// to stop writes and no compaction can avoid a damaged table is one picked
/// with it, so that it fails as `Corruption` and writers are refused with
/// an error that names the table, rather than stalled for good.
fn pick(version: &Version, opts: &Options, pointers: &[Vec<u8>], level: usize) -> Option<Pick> {
    let level0 = version.levels.first()?;
    let with_overlaps = |mut inputs: Vec<Arc<LiveTable>>| {
        let (lo, hi) = key_range(&inputs)?;
        inputs.extend(version.overlapping(level + 1, &lo, &hi));
        Some(inputs)
    };
    let readable = |inputs: &Vec<Arc<LiveTable>>| inputs.iter().all(|t| !t.is_damaged());
    let inputs = if level == 0 {
        // Only tables older than every damaged one may move below it: a
        // newer one moved down would put newer data under older data.
        let older = level0
            .iter()
            .rposition(|t| t.is_damaged())
            .map_or(0, |newest_damaged| newest_damaged + 1);
        let healthy = level0.get(older..).unwrap_or_default().to_vec();
        match with_overlaps(healthy).filter(readable) {
            Some(inputs) => Some(inputs),
            None if level0.len() >= opts.level0_stop_writes => with_overlaps(level0.to_vec()),
            None => None,
        }
    } else {
        // The table that costs the least rewriting per byte it moves down:
        // the least bytes of level+1 overlapping it per byte of its own
        // (RocksDB's kMinOverlappingRatio). Candidates are visited
        // round-robin from the level's compaction pointer and only a
        // strictly smaller ratio replaces the one found, so equal ratios
        // still take turns through the key space.
        let tables = version.levels.get(level)?;
        let after = pointers.get(level).map(Vec::as_slice).unwrap_or_default();
        let start = tables
            .iter()
            .position(|t| t.largest_user_key() > after)
            .unwrap_or(0);
        let mut best: Option<(f64, Vec<Arc<LiveTable>>)> = None;
        for chosen in tables.iter().skip(start).chain(tables.iter().take(start)) {
            let Some(inputs) = with_overlaps(vec![Arc::clone(chosen)]).filter(readable) else {
                continue;
            };
            let below: u64 = inputs.iter().skip(1).map(|t| t.record.file_size).sum();
            let ratio = below as f64 / chosen.record.file_size.max(1) as f64;
            if best.as_ref().is_none_or(|(least, _)| ratio < *least) {
                best = Some((ratio, inputs));
            }
        }
        best.map(|(_, inputs)| inputs)
    }?;
    Some(Pick {
        inputs,
        output_level: level + 1,
    })
}

/// The keyspace whose tree most needs a compaction, with what to compact.
pub(crate) fn pick_any(inner: &DbInner) -> Option<(Arc<Tree>, Arc<SuperVersion>, Pick)> {
    let mut best: Option<(f64, Arc<Tree>, Arc<SuperVersion>, Pick)> = None;
    for tree in inner.trees.load().iter() {
        let sv = tree.current.load_full();
        let opts = tree.opts.load();
        let Some((score, level)) = most_urgent(&sv.version, &opts, sv.is_quiet()) else {
            continue;
        };
        if best.as_ref().is_some_and(|(s, ..)| *s >= score) {
            continue;
        }
        let picked = pick(&sv.version, &opts, &tree.compact_pointer.lock(), level);
        if let Some(picked) = picked {
            best = Some((score, Arc::clone(tree), sv, picked));
        }
    }
    if best.is_some() {
        return best.map(|(_, tree, sv, picked)| (tree, sv, picked));
    }
    // Nothing over its budget: a blob file past its garbage ratio (a
    // table pointing into it rewritten within its level, or level 0
    // compacted), then the least urgent work, a run of small adjacent
    // tables merged within its level.
    let garbage = inner.trees.load().iter().find_map(|tree| {
        let sv = tree.current.load_full();
        let (output_level, inputs) = garbage_pick(&sv.version, &tree.opts.load())?;
        let picked = Pick {
            inputs,
            output_level,
        };
        Some((Arc::clone(tree), sv, picked))
    });
    if garbage.is_some() {
        return garbage;
    }
    inner.trees.load().iter().find_map(|tree| {
        let sv = tree.current.load_full();
        let (level, inputs) = small_run(&sv.version, &tree.opts.load())?;
        let picked = Pick {
            inputs,
            output_level: level,
        };
        Some((Arc::clone(tree), sv, picked))
    })
}

/// True when `pick` compacts tables within their own level (a run of
/// small tables), not down into the next.
fn within_level(pick: &Pick) -> bool {
    pick.inputs
        .iter()
        .all(|t| t.record.level as usize == pick.output_level)
}

/// Runs the most urgent compaction of any keyspace, if any.
pub(crate) fn compact_once(inner: &DbInner) -> Result<()> {
    let Some((tree, sv, pick)) = pick_any(inner) else {
        return Ok(());
    };
    // A merge within a level moves nothing down: the pointer stays.
    if let Some((_, hi)) = key_range(&pick.inputs).filter(|_| !within_level(&pick)) {
        let mut pointers = tree.compact_pointer.lock();
        let level = pick.output_level - 1;
        if pointers.len() <= level {
            pointers.resize(level + 1, Vec::new());
        }
        if let Some(slot) = pointers.get_mut(level) {
            *slot = hi;
        }
    }
    run(inner, &tree, &sv.version, pick, CompactionReason::Automatic)
}

/// Runs the full compactions `scopes` ask for: a keyspace a scope names
/// whole becomes one sorted run at the deepest level it uses; otherwise
/// each range asked of it is compacted as [`range_pick`] chooses, one
/// after the other, each from the tree the last one left.
pub(crate) fn compact_scopes(inner: &DbInner, scopes: &[CompactionScope]) -> Result<()> {
    for tree in inner.trees.load().iter() {
        let whole = scopes.iter().any(|scope| match scope {
            CompactionScope::All => true,
            CompactionScope::Keyspace(id) => *id == tree.id,
            CompactionScope::Range(..) => false,
        });
        if whole {
            let sv = tree.current.load_full();
            if let Some(pick) = whole_pick(&sv.version) {
                run(inner, tree, &sv.version, pick, CompactionReason::Requested)?;
            }
            continue;
        }
        for scope in scopes {
            let CompactionScope::Range(id, range) = scope else {
                continue;
            };
            if *id != tree.id {
                continue;
            }
            let sv = tree.current.load_full();
            if let Some(pick) = range_pick(&sv.version, range) {
                run(inner, tree, &sv.version, pick, CompactionReason::Requested)?;
            }
        }
    }
    Ok(())
}

/// Every table of a tree, into the deepest level it uses (level 1 at
/// least); `None` when it has no table.
fn whole_pick(version: &Version) -> Option<Pick> {
    let inputs: Vec<_> = version.levels.iter().flatten().cloned().collect();
    let deepest = version.levels.iter().rposition(|l| !l.is_empty())?;
    Some(Pick {
        inputs,
        output_level: deepest.max(1),
    })
}

/// The compaction of the tables of `version` holding keys in `range`: those
/// whose bounds meet the range, then every table overlapping what they
/// cover, until no table outside overlaps the inputs' key range — so the
/// outputs, one sorted run, go to the deepest level among the inputs
/// (level 1 at least) without overlapping a table left in any level, and
/// no older version of an input's key stays below them. `None` when no
/// table meets the range (an empty range meets none).
fn range_pick(version: &Version, range: &OwnedRange) -> Option<Pick> {
    if !starts_before_end(&range.0, &range.1) {
        return None;
    }
    let tables = || version.levels.iter().flatten();
    let mut inputs: Vec<Arc<LiveTable>> = tables().filter(|t| meets(t, range)).cloned().collect();
    loop {
        let (lo, hi) = key_range(&inputs)?;
        let more: Vec<_> = tables()
            .filter(|t| {
                t.overlaps(&lo, &hi) && !inputs.iter().any(|i| i.file_number() == t.file_number())
            })
            .cloned()
            .collect();
        if more.is_empty() {
            break;
        }
        inputs.extend(more);
    }
    let deepest = inputs.iter().map(|t| t.record.level as usize).max()?;
    Some(Pick {
        inputs,
        output_level: deepest.max(1),
    })
}

/// The inputs of `pick` in its output level, read as one run, table after
/// table: in key order (the level keeps them sorted and disjoint), whatever
/// order the pick found them in — `range_pick`'s overlap step can add one
/// before another it found first.
fn output_level_run(pick: &Pick) -> Vec<Arc<LiveTable>> {
    let mut run: Vec<_> = pick
        .inputs
        .iter()
        .filter(|t| t.record.level as usize == pick.output_level)
        .cloned()
        .collect();
    run.sort_by(|a, b| a.smallest_user_key().cmp(b.smallest_user_key()));
    run
}

/// Whether a table's key range (its bounds) reaches into `range`.
fn meets(table: &LiveTable, (start, end): &OwnedRange) -> bool {
    !past_end_of(end, table.smallest_user_key())
        && !before_start_of(start, table.largest_user_key())
}

/// True when no table below `output_level` (outside the inputs) overlaps
/// `[lo, hi]`, so tombstones there shadow nothing and can go.
fn is_bottom(version: &Version, pick: &Pick, lo: &[u8], hi: &[u8]) -> bool {
    version
        .levels
        .iter()
        .enumerate()
        .skip(pick.output_level + 1)
        .all(|(_, tables)| {
            tables.iter().all(|t| {
                !t.overlaps(lo, hi)
                    || pick
                        .inputs
                        .iter()
                        .any(|i| i.file_number() == t.file_number())
            })
        })
}

/// Yields the newest version of each user key; at the bottom, drops
/// tombstones and zeroes sequence numbers. A key whose newest version is a
/// merge operand yields the merge operator's result as a put when the
/// operands reach the version they apply to (a put, a delete, a deleted
/// version) or the bottom; otherwise every operand, newest first, for a
/// later compaction (or read) to merge. Operands the operator refuses are
/// yielded unmerged, newest first, over the version they apply to: the
/// compaction goes on, and only reads of that key fail.
struct NewestOnly {
    merged: MergingIter,
    /// At the bottom: tombstones are dropped and every surviving entry is
    /// written with sequence number 0.
    bottom: bool,
    started: bool,
    /// The merge already stands past the last key yielded, or on an older
    /// version of it (`last` holds the key): the next call skips from
    /// there without stepping first.
    moved: bool,
    /// The user key last yielded (reused: no allocation per entry).
    last: Vec<u8>,
    /// The value last yielded, kept so it can be lent.
    value: Bytes,
    /// The key last yielded at the bottom, its sequence number zeroed.
    zeroed: Vec<u8>,
    /// The inputs' range tombstones, merged: an entry older than one
    /// covering it is dropped.
    range_tombstones: Option<FragmentedTombstones>,
    /// The application's filter, asked about each surviving value.
    filter: Option<Arc<dyn CompactionFilter>>,
    /// The keyspace's merge operator (operands it refuses, or that have
    /// none, are written out unmerged).
    merge_operator: Option<Arc<dyn MergeOperator>>,
    /// Keys whose operands had to be written out unmerged.
    refused_merges: u64,
    /// Operands of one key still to yield (internal key, operand), when
    /// they could not be merged here.
    operands: VecDeque<(Vec<u8>, Bytes)>,
    /// The internal key last yielded from `operands` or a merge.
    out_key: Vec<u8>,
    /// The level the outputs go to (told to the filter).
    output_level: usize,
    /// The tombstone a filter's removal writes above the bottom (reused).
    removed: Vec<u8>,
}

impl NewestOnly {
    /// True when a range tombstone of the inputs deletes `user_key`'s
    /// version at `seq`.
    fn deleted(&self, user_key: &[u8], seq: SeqNo) -> bool {
        deleted_by(self.range_tombstones.as_ref(), user_key, seq)
    }

    /// The key whose newest version, at `seq`, is the merge operand where
    /// the merge stands: gathers its operands down to the version they
    /// apply to. Merged into a put (at `seq`) when that version was found
    /// or this is the bottom; queued one by one otherwise. Leaves the merge
    /// past what it read (`moved`).
    fn take_merge(&mut self, user_key: Vec<u8>, seq: SeqNo) -> Result<()> {
        let list = self.range_tombstones.as_ref();
        let gathered = gather_operands(&mut self.merged, &user_key, SeqNo::MAX, |at| {
            deleted_by(list, &user_key, at)
        })?;
        self.moved = true;
        self.last = user_key;
        if gathered.reached || self.bottom {
            let values: Vec<Bytes> = gathered
                .operands
                .iter()
                .rev()
                .map(|(_, v)| v.clone())
                .collect();
            let merged = apply_merge(
                self.merge_operator.as_deref(),
                &self.last,
                gathered.existing.as_deref(),
                &values,
            );
            if let Ok(merged) = merged {
                self.out_key.clear();
                encode_internal_key(&mut self.out_key, &self.last, seq, ValueKind::Put);
                self.operands.push_back((self.out_key.clone(), merged));
                return Ok(());
            }
            // Refused (or no operator): the operands stay as they are, over
            // the version they apply to, for reads to fail on alone until a
            // put or a delete of the key replaces them.
            self.refused_merges += 1;
            self.operands.extend(gathered.operands);
            if gathered.reached {
                self.keep_merge_base()?;
            }
        } else {
            self.operands.extend(gathered.operands);
        }
        Ok(())
    }

    /// Queues the version refused operands apply to, where the merge
    /// stands after gathering them: a put, or a delete above the bottom (at
    /// the bottom nothing is under it to hide). A version a range
    /// tombstone deletes is not kept: the tombstone says it.
    fn keep_merge_base(&mut self) -> Result<()> {
        if !self.merged.valid() {
            return Ok(());
        }
        let parsed = parse_internal_key(self.merged.key())?;
        if parsed.user_key != self.last.as_slice() || self.deleted(parsed.user_key, parsed.seq) {
            return Ok(());
        }
        let keep = match parsed.kind {
            ValueKind::Put | ValueKind::Blob => true,
            ValueKind::Delete => !self.bottom,
            ValueKind::Merge => false,
        };
        if keep {
            let entry = (self.merged.key().to_vec(), self.merged.value());
            self.operands.push_back(entry);
        }
        Ok(())
    }
}

impl EntrySource for NewestOnly {
    fn next_entry(&mut self) -> Option<Result<(&[u8], &[u8])>> {
        loop {
            if let Some((key, value)) = self.operands.pop_front() {
                self.out_key = key;
                self.value = value;
                let seq = match parse_internal_key(&self.out_key) {
                    Ok(parsed) if parsed.kind == ValueKind::Put => parsed.seq,
                    _ => return Some(Ok((&self.out_key, &self.value))),
                };
                match self.decide_put(seq) {
                    PutDecision::Drop => continue,
                    PutDecision::Tombstone => return Some(Ok((&self.removed, &[]))),
                    PutDecision::Keep if self.bottom => {
                        return Some(Ok(self.zeroed_key(ValueKind::Put)))
                    }
                    PutDecision::Keep => return Some(Ok((&self.out_key, &self.value))),
                }
            }
            if self.started {
                if !std::mem::take(&mut self.moved) {
                    // Skip older versions of the key just yielded.
                    self.last.clear();
                    self.last.extend_from_slice(user_key_of(self.merged.key()));
                    self.merged.next();
                }
                while self.merged.valid() && user_key_of(self.merged.key()) == self.last.as_slice()
                {
                    self.merged.next();
                }
            } else {
                self.merged.seek_to_first();
                self.started = true;
            }
            if let Err(e) = self.merged.status() {
                return Some(Err(e));
            }
            if !self.merged.valid() {
                return None;
            }
            let key = self.merged.key();
            let (kind, seq) = match parse_internal_key(key) {
                Ok(parsed) => (parsed.kind, parsed.seq),
                Err(e) => return Some(Err(e)),
            };
            if kind == ValueKind::Delete && self.bottom {
                continue;
            }
            if self.deleted(user_key_of(key), seq) {
                // Its older versions are older than the tombstone too.
                continue;
            }
            if kind == ValueKind::Merge {
                let user_key = user_key_of(key).to_vec();
                if let Err(e) = self.take_merge(user_key, seq) {
                    return Some(Err(e));
                }
                continue;
            }
            self.value = self.merged.value();
            self.out_key.clear();
            self.out_key.extend_from_slice(key);
            if kind == ValueKind::Put {
                match self.decide_put(seq) {
                    PutDecision::Drop => continue,
                    PutDecision::Tombstone => return Some(Ok((&self.removed, &[]))),
                    PutDecision::Keep => {}
                }
            }
            if self.bottom {
                return Some(Ok(self.zeroed_key(kind)));
            }
            return Some(Ok((&self.out_key, &self.value)));
        }
    }

    fn at_key_boundary(&self) -> bool {
        self.operands.is_empty()
    }
}

/// What the compaction filter made of a put.
enum PutDecision {
    /// Yield it (its value possibly changed).
    Keep,
    /// Yield the tombstone in `removed` instead.
    Tombstone,
    /// Drop it (at the bottom).
    Drop,
}

impl NewestOnly {
    /// The compaction filter's decision on the put in `out_key` / `value`
    /// (at `seq`); without a filter, keep it.
    fn decide_put(&mut self, seq: SeqNo) -> PutDecision {
        let Some(filter) = &self.filter else {
            return PutDecision::Keep;
        };
        let user_key = user_key_of(&self.out_key);
        match filter.filter(self.output_level, user_key, &self.value) {
            CompactionDecision::Keep => PutDecision::Keep,
            CompactionDecision::Change(value) => {
                self.value = Bytes::from(value);
                PutDecision::Keep
            }
            CompactionDecision::Remove if self.bottom => PutDecision::Drop,
            CompactionDecision::Remove => {
                // Older versions may live deeper: a tombstone at the
                // value's sequence number hides them.
                self.removed.clear();
                encode_internal_key(&mut self.removed, user_key, seq, ValueKind::Delete);
                PutDecision::Tombstone
            }
        }
    }

    /// The entry in `out_key` / `value` with sequence number 0 and `kind`:
    /// at the bottom the only version of its key left in the tree (the
    /// older ones were skipped and nothing deeper overlaps).
    fn zeroed_key(&mut self, kind: ValueKind) -> (&[u8], &[u8]) {
        self.zeroed.clear();
        encode_internal_key(&mut self.zeroed, user_key_of(&self.out_key), SeqNo(0), kind);
        (&self.zeroed, &self.value)
    }
}

/// The tree as it will be once `pick` is installed: its inputs gone, their
/// entries in `table_target_bytes`-sized tables of the output level (an
/// estimate: duplicates and dropped tombstones are not known yet).
fn tree_after(version: &Version, pick: &Pick, opts: &Options) -> Vec<LevelTables> {
    let mut tree = version.level_tables();
    if tree.len() <= pick.output_level {
        tree.resize(pick.output_level + 1, LevelTables::default());
    }
    let (mut entries, mut bytes) = (0u64, 0u64);
    for input in &pick.inputs {
        if let Some(level) = tree.get_mut(input.record.level as usize) {
            level.tables = level.tables.saturating_sub(1);
            level.keys = level.keys.saturating_sub(input.record.entries);
        }
        entries += input.record.entries;
        bytes += input.record.file_size;
    }
    if let Some(output) = tree.get_mut(pick.output_level) {
        output.tables += bytes.div_ceil(opts.table_target_bytes.max(1)).max(1);
        output.keys += entries;
    }
    tree
}

/// A level index as the manifest records it; levels are below `LEVELS` (7).
fn level_number(level: usize) -> u32 {
    u32::try_from(level).unwrap_or(u32::MAX)
}

fn run(
    inner: &DbInner,
    tree: &Tree,
    version: &Version,
    pick: Pick,
    reason: CompactionReason,
) -> Result<()> {
    let started = Instant::now();
    let opts = tree.opts.load();
    // What the event shows, once the outputs are installed.
    let done = |outputs: &[Arc<LiveTable>], moved: bool| {
        let written = outputs.iter().map(|t| t.record.file_size).sum();
        inner
            .latency
            .record_compaction(started, (!moved).then_some(written));
        inner.events.emit(|| {
            Event::Compaction(CompactionEvent {
                keyspace: tree.name.clone(),
                reason,
                output_level: level_number(pick.output_level),
                inputs: pick.inputs.iter().map(|t| t.metadata(&tree.name)).collect(),
                outputs: outputs.iter().map(|t| t.metadata(&tree.name)).collect(),
                moved,
                duration: started.elapsed(),
            })
        });
    };
    let Some((lo, hi)) = key_range(&pick.inputs) else {
        return Ok(());
    };
    let _pending = PendingOutputs::begin(inner);

    // A lone table with nothing to merge against moves down as it is: the
    // same open table (its filter and index already in memory) under a new
    // record. Not with a compaction filter: it must see the values; nor
    // into a level whose compression differs (RocksDB's rule too).
    if let [only] = pick.inputs.as_slice() {
        let from = only.record.level as usize;
        if from + 1 == pick.output_level
            && opts.compaction_filter.is_none()
            && opts.same_level_compression(from, pick.output_level)
        {
            let mut record = only.record.clone();
            record.level = level_number(pick.output_level);
            let moved = Arc::new(LiveTable::new(record, only.table.clone()));
            let (removed, edit) = ([only.file_number()], BlobEdit::default());
            install(inner, tree, &removed, vec![Arc::clone(&moved)], &[], &edit)?;
            done(&[moved], true);
            return Ok(());
        }
    }

    // Every input's range tombstones, merged (their tables are open, the
    // tombstones in memory): they delete what they cover of the others.
    let tombstone_lists: Vec<_> = pick
        .inputs
        .iter()
        .filter_map(|t| t.table.as_ref().ok()?.range_tombstones().cloned())
        .collect();
    let range_tombstones = (!tombstone_lists.is_empty())
        .then(|| FragmentedTombstones::merged(tombstone_lists.iter().map(|l| &**l)));
    // An input whose whole key range a newer tombstone covers holds nothing
    // that survives: it is not read at all.
    let wholly_deleted = |t: &LiveTable| {
        range_tombstones.as_ref().is_some_and(|list| {
            list.covers_range(
                t.smallest_user_key(),
                t.largest_user_key(),
                t.record.max_seq,
            )
        })
    };
    let mut skipped = Vec::new();
    // Inputs are read once, whole: in spans, past the block cache. The
    // merge compares the current key of every source at each step, so the
    // inputs from the output level (sorted and disjoint) are one source,
    // read table after table, and last: older than every input above.
    let mut unread = |t: &Arc<LiveTable>| {
        let deleted = wholly_deleted(t);
        if deleted {
            skipped.push(Arc::clone(t));
        }
        !deleted
    };
    let above: Vec<_> = pick
        .inputs
        .iter()
        .filter(|t| t.record.level as usize != pick.output_level)
        .filter(|t| unread(t))
        .cloned()
        .collect();
    let below: Vec<_> = output_level_run(&pick)
        .into_iter()
        .filter(|t| unread(t))
        .collect();
    inner
        .counters
        .compaction_tables_deleted
        .fetch_add(skipped.len() as u64, Ordering::Relaxed);
    // The blob pointers read, less those written back: the garbage made.
    let tally = Arc::new(BlobTally::default());
    tally_unread(&skipped, &tally)?;
    let collected = collected_files(version, &opts);
    let raw = |source: TableSource| match moves_pointers(&opts) {
        true => source
            .keeping_blob_pointers(Arc::clone(&collected))
            .tallying_blobs(Arc::clone(&tally)),
        false => source.tallying_blobs(Arc::clone(&tally)),
    };
    let mut sources: Vec<Box<dyn InternalIterator>> = above
        .into_iter()
        .map(|t| {
            Box::new(raw(TableSource::new(t, ScanMode::Sequential))) as Box<dyn InternalIterator>
        })
        .collect();
    if !below.is_empty() {
        sources.push(Box::new(raw(TableSource::run(below, ScanMode::Sequential))));
    }
    let bottom = is_bottom(version, &pick, &lo, &hi);
    // Above the bottom the tombstones go on down with the outputs, for
    // what they cover deeper; at the bottom nothing is left for them.
    let mut cuts = range_tombstones
        .clone()
        .filter(|_| !bottom)
        .map(|list| TombstoneCuts::new(list, Some(hi.clone())));
    let mut entries = NewestOnly {
        merged: MergingIter::new(sources),
        bottom,
        zeroed: Vec::new(),
        started: false,
        moved: false,
        last: Vec::new(),
        value: Bytes::new(),
        range_tombstones,
        filter: opts.compaction_filter.clone(),
        merge_operator: opts.merge_operator.clone(),
        refused_merges: 0,
        operands: VecDeque::new(),
        out_key: Vec::new(),
        output_level: pick.output_level,
        removed: Vec::new(),
    };

    let options = table_options_for(&opts, &tree_after(version, &pick, &opts), pick.output_level);
    let mut outputs: Vec<Arc<LiveTable>> = Vec::new();
    let mut edit = BlobEdit::default();
    let mut counted = WrittenPointers {
        source: &mut entries,
        written: Default::default(),
    };
    let built = (|| {
        // Until the stream runs dry (`build_table` then writes nothing; the
        // file number it was given stays unused).
        loop {
            let number = inner.versions.lock().new_file_number();
            // `build_table` removes its own partial file on failure.
            let Some((mut record, info)) = build_table(
                inner.fs.as_ref(),
                &inner.dir,
                &options,
                number,
                &mut counted,
                OutputLimits {
                    stop_after_bytes: Some(opts.table_target_bytes),
                    pacer: inner.pacer.as_ref(),
                    blob_threshold: opts.blob_threshold,
                },
                cuts.as_mut(),
            )?
            else {
                break;
            };
            inner.counters.filter_builds.record(&info);
            edit.added.extend(info.blob);
            record.level = level_number(pick.output_level);
            match open_live_table(&inner.tables, &inner.dir, record) {
                Ok(table) => outputs.push(table),
                Err(e) => {
                    remove_files(inner, std::iter::once(number));
                    return Err(e);
                }
            }
        }
        Ok(())
    })();
    if let Err(e) = built {
        // No manifest names them yet.
        remove_files(inner, outputs.iter().map(|t| t.file_number()));
        return Err(e);
    }
    let removed: Vec<u64> = pick.inputs.iter().map(|t| t.file_number()).collect();
    let read: u64 = pick.inputs.iter().map(|t| t.record.file_size).sum();
    let written: u64 = outputs.iter().map(|t| t.record.file_size).sum();
    edit.written = counted.written;
    edit.read = tally.take();
    install(inner, tree, &removed, outputs.clone(), &pick.inputs, &edit)?;
    done(&outputs, false);
    let c = &inner.counters;
    c.compaction_bytes_read.fetch_add(read, Ordering::Relaxed);
    c.compaction_bytes_written
        .fetch_add(written, Ordering::Relaxed);
    c.merges_refused
        .fetch_add(entries.refused_merges, Ordering::Relaxed);
    Ok(())
}

fn remove_files(inner: &DbInner, numbers: impl Iterator<Item = u64>) {
    for number in numbers {
        let _ = inner.fs.remove(&inner.path_of(&table_file_name(number)));
        let blob = inner.path_of(&blob_file_name(number));
        if inner.fs.exists(&blob) {
            let _ = inner.fs.remove(&blob);
        }
    }
}

/// Makes the new version durable, publishes it, then has the `obsolete`
/// tables' files removed once no reader holds them.
fn install(
    inner: &DbInner,
    tree: &Tree,
    removed: &[u64],
    added: Vec<Arc<LiveTable>>,
    obsolete: &[Arc<LiveTable>],
    edit: &BlobEdit,
) -> Result<()> {
    let mut versions = inner.versions.lock();
    let current = tree.current.load_full();
    let version = Arc::new(with_edit(current.version.apply(removed, added), edit));
    inner.persist(&mut versions, Some((tree, &version, current.oldest_log())))?;
    tree.current.store(Arc::new(SuperVersion {
        mem: current.mem.clone(),
        imm: current.imm.clone(),
        version,
    }));
    drop(versions);
    // Scans and snapshots may still read these tables (their file handles
    // may have been closed by the open-file cache and need reopening): each
    // file goes when the last handle on its table does.
    for table in obsolete.iter().filter_map(|t| t.table.as_ref().ok()) {
        table.remove_file_when_unused();
    }
    mark_unreferenced(&tree.current.load().version, obsolete);
    inner.counters.compactions.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::version::Damage;
    use crate::key::internal_key;
    use crate::manifest::TableRecord;
    use std::ops::Bound;

    /// A version whose level 0 holds `tables` tables over the same keys
    /// (unopened: the trigger looks at the count alone).
    fn level0_of(tables: u64) -> Version {
        let mut version = Version::with_levels(LEVELS);
        let key = |user_key: &[u8], seq| {
            let mut out = Vec::new();
            encode_internal_key(&mut out, user_key, SeqNo(seq), ValueKind::Put);
            out
        };
        let table = |file_number| {
            let record = TableRecord {
                keyspace: 0,
                level: 0,
                file_number,
                file_size: 1 << 20,
                entries: 1,
                smallest: key(b"a", file_number),
                largest: key(b"z", file_number),
                min_seq: SeqNo(file_number),
                max_seq: SeqNo(file_number),
            };
            let damage = Damage {
                detail: "not opened".to_string(),
            };
            Arc::new(LiveTable::new(record, Err(damage)))
        };
        if let Some(level0) = version.levels.first_mut() {
            level0.extend((1..=tables).map(table));
        }
        version
    }

    /// An unopened table of `level` over user keys `[lo, hi]`.
    fn table_over(level: u32, file_number: u64, lo: &[u8], hi: &[u8]) -> Arc<LiveTable> {
        let key = |user_key: &[u8]| internal_key(user_key, SeqNo(file_number), ValueKind::Put);
        let record = TableRecord {
            keyspace: 0,
            level,
            file_number,
            file_size: 1 << 20,
            entries: 1,
            smallest: key(lo),
            largest: key(hi),
            min_seq: SeqNo(file_number),
            max_seq: SeqNo(file_number),
        };
        let damage = Damage {
            detail: "not opened".to_string(),
        };
        Arc::new(LiveTable::new(record, Err(damage)))
    }

    /// The inputs of the output level are read as one run, table after
    /// table: `range_pick` must give them in key order even when the
    /// overlap step adds a table before one the range met (here the range
    /// meets k30-k40 of level 2, level 1's k10-k35 overlaps it, and that
    /// brings level 2's k05-k20 in: a run in the order found wrote k30..
    /// before k05.. and the table builder refused the output).
    #[test]
    fn a_range_picks_the_output_levels_tables_in_key_order() {
        let mut version = Version::with_levels(LEVELS);
        version.levels[1].push(table_over(1, 3, b"k10", b"k35"));
        version.levels[2].push(table_over(2, 1, b"k05", b"k20"));
        version.levels[2].push(table_over(2, 2, b"k30", b"k40"));
        let range = (
            Bound::Included(b"k38".to_vec()),
            Bound::Included(b"k39".to_vec()),
        );
        let pick = range_pick(&version, &range).unwrap();
        assert_eq!(pick.output_level, 2);
        let run: Vec<u64> = output_level_run(&pick)
            .iter()
            .map(|t| t.file_number())
            .collect();
        assert_eq!(run, [1, 2]);
        assert_eq!(pick.inputs.len(), 3);
    }

    #[test]
    fn level0_waits_for_the_busy_trigger_unless_the_keyspace_is_quiet() {
        let opts = Options::default()
            .level0_compaction_trigger(4)
            .level0_quiet_trigger(2);
        let urgent = |tables, quiet| most_urgent(&level0_of(tables), &opts, quiet);
        assert_eq!(urgent(1, true), None);
        assert_eq!(urgent(2, false), None);
        assert_eq!(urgent(3, false), None);
        assert_eq!(urgent(2, true), Some((1.0, 0)));
        assert_eq!(urgent(4, false), Some((1.0, 0)));
        assert_eq!(urgent(4, true), Some((2.0, 0)));
        // A quiet trigger at or above the busy one changes nothing.
        let off = opts.clone().level0_quiet_trigger(4);
        assert_eq!(most_urgent(&level0_of(3), &off, true), None);
        assert_eq!(most_urgent(&level0_of(4), &off, true), Some((1.0, 0)));
    }
}
