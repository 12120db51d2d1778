//! [`DbIterator`]: a scan over user keys at one snapshot, in either
//! direction, built on a merge of every source it needs.
//!
//! Owns: the choice of the tables a scan reads (key range, then the
//! tables' prefix and range filters), gathering the range tombstones the
//! snapshot sees (once per scan, from every memtable and every table whose
//! key range meets the scan's, before any filter rules a table out), and
//! hiding older versions, tombstones, the versions those range tombstones
//! delete, and writes newer than the snapshot; the forward and backward
//! sides meeting without repeating or skipping an entry.
//! Must never: show part of a batch (it reads at one sequence number), or
//! see a table vanish under it (it holds the super-version it started with).

use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::Arc;

use bytes::Bytes;

use super::merging::MergingIter;
use super::operands::{apply_merge, deleted_by, gather_operands, newest_version};
use super::sources::{FailedSource, InternalIterator, MemSource, Positions, TableSource};
use crate::db::inner::DbInner;
use crate::db::latency::{DbLatency, ScanStepTiming};
use crate::db::super_version::SuperVersion;
use crate::db::tree::Tree;
use crate::db::version::{LiveTable, Version};
use crate::error::{Error, Result};
use crate::key::{
    before_start_of, internal_key, lookup_key, parse_internal_key, past_end_of, SeqNo, ValueKind,
};
use crate::memtable::Memtable;
use crate::options::{MergeOperator, Options};
use crate::range_tombstone::FragmentedTombstones;
use crate::table::scan_filters::{PrefixProbe, ScanFilters};
use crate::table::ScanMode;

/// A scan over user keys at one snapshot, in ascending key order, or
/// descending with `.rev()` / [`DoubleEndedIterator::next_back`]; `next`
/// and `next_back` mixed on one scan meet without repeating or skipping an
/// entry. Items are `Result<(key, value)>`; after an error the scan ends
/// (in that direction).
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// let db = siftdb::Db::open(dir.path())?;
/// for k in ["a", "b", "c", "d"] {
///     db.put(k, k)?;
/// }
/// let newest_two: Vec<_> = db.range("a".."d").rev().take(2).collect::<Result<_, _>>()?;
/// assert_eq!(newest_two[0].0.as_ref(), b"c");
/// let mut both_ends = db.iter();
/// assert_eq!(both_ends.next().transpose()?.unwrap().0.as_ref(), b"a");
/// assert_eq!(both_ends.next_back().transpose()?.unwrap().0.as_ref(), b"d");
/// assert_eq!(both_ends.count(), 2); // "b" and "c": the ends met
/// # Ok::<(), siftdb::Error>(())
/// ```
///
/// `Send` but deliberately not `Sync` (checked by `tests/api_traits.rs`):
/// move a scan to another thread; every read of it takes `&mut self`, so a
/// shared reference could do nothing with it.
pub struct DbIterator {
    merged: MergingIter,
    /// How the scan's tables read data blocks (`fill_cache`).
    mode: ScanMode,
    snapshot: SeqNo,
    start: Bound<Vec<u8>>,
    end: Bound<Vec<u8>>,
    started: bool,
    /// The merge still sits on the entry the last `next` returned: the
    /// step past it is taken by the following `next`, so a scan that stops
    /// after its last entry (a `take(n)`) never pays for a step — and the
    /// block load at the end of a block — that nothing reads.
    step_pending: bool,
    finished: bool,
    /// The last user key the forward side took (returned, or found deleted):
    /// the backward side stops at it.
    last_user_key: Option<Vec<u8>>,
    /// The sources the scan reads, kept to build the backward merge when
    /// `next_back` is first called.
    specs: Vec<SourceSpec>,
    /// The key the forward side was last sought to (`seek`): the backward
    /// side stops before it, as before a key the forward side took.
    front_floor: Option<Vec<u8>>,
    /// The key the backward side was last sought to (`seek_for_prev`): the
    /// forward side stops past it.
    back_ceiling: Option<Vec<u8>>,
    /// The backward side, once `next_back` was called.
    back: Option<MergingIter>,
    back_finished: bool,
    /// The last user key the backward side took: the forward side stops
    /// at it (shared with the key it returned, not copied again).
    back_user_key: Option<Bytes>,
    /// The range tombstones the snapshot sees, one sequence number per
    /// fragment; `None` when there are none (the common case costs a test).
    range_tombstones: Option<FragmentedTombstones>,
    /// What a key whose newest version is a merge operand is resolved
    /// with (`None`: such a key fails the scan with `MergeFailed`).
    merge_operator: Option<Arc<dyn MergeOperator>>,
    /// The backward side's versions of the key it is on, oldest first
    /// (kept for the buffer).
    back_versions: Vec<(ValueKind, SeqNo, Bytes)>,
    pinned: Arc<SuperVersion>,
    /// The database's histograms, which time its steps (`None`: a scan
    /// of no database's).
    latency: Option<Arc<DbLatency>>,
}

/// One source of a scan, before it is opened: what a merge in either
/// direction is built from.
enum SourceSpec {
    /// A scan that cannot start (its keyspace was dropped): every read of
    /// it, in either direction, is this error.
    Failed(Error),
    Mem(Arc<Memtable>),
    Table(Arc<LiveTable>),
    Level {
        level: usize,
        picked: Positions,
    },
}

impl SourceSpec {
    fn open(&self, version: &Arc<Version>, mode: ScanMode) -> Box<dyn InternalIterator> {
        match self {
            SourceSpec::Failed(error) => Box::new(FailedSource(error.duplicate())),
            SourceSpec::Mem(mem) => Box::new(MemSource::new(Arc::clone(mem))),
            SourceSpec::Table(table) => Box::new(TableSource::new(Arc::clone(table), mode)),
            SourceSpec::Level { level, picked } => Box::new(TableSource::level(
                Arc::clone(version),
                *level,
                picked.clone(),
                mode,
            )),
        }
    }
}

fn merge_of(specs: &[SourceSpec], version: &Arc<Version>, mode: ScanMode) -> MergingIter {
    MergingIter::new(specs.iter().map(|s| s.open(version, mode)).collect())
}

impl DbIterator {
    pub(crate) fn new(
        inner: &DbInner,
        tree: &Tree,
        range: (Bound<Vec<u8>>, Bound<Vec<u8>>),
    ) -> DbIterator {
        // The super-version first, then the snapshot: every table in `sv`
        // then holds only writes at or below the snapshot, so no compaction
        // can have dropped a version the snapshot needs in favour of a newer
        // one (taken the other way round, a flush and a compaction in
        // between make a key vanish from the scan).
        let sv = tree.current.load_full();
        let snapshot = inner.snapshot();
        tree.reads.add(|t| &t.scans, 1);
        DbIterator::at(inner, &tree.opts.load(), sv, snapshot, range)
    }

    /// A scan of `range` in the super-version `sv` at `snapshot` (taken
    /// after `sv` was loaded; see `new`). A table whose key range meets the
    /// scan's is read unless its filters rule the range out: its point
    /// filter the one prefix all keys of the range have (with the
    /// database's extractor), or its range filter the range.
    pub(crate) fn at(
        inner: &DbInner,
        opts: &Options,
        sv: Arc<SuperVersion>,
        snapshot: SeqNo,
        (start, end): (Bound<Vec<u8>>, Bound<Vec<u8>>),
    ) -> DbIterator {
        let (lo, hi) = (bound_key(&start), bound_key(&end));
        let (start_ref, end_ref) = (borrowed(&start), borrowed(&end));
        let probe = opts
            .prefix_extractor
            .as_ref()
            .and_then(|e| PrefixProbe::for_bounds(e, start_ref, end_ref));
        let hi_excluded = matches!(end, Bound::Excluded(_));
        let mut overlapping = 0u64;
        let mut specs: Vec<SourceSpec> =
            Vec::with_capacity(1 + sv.imm.len() + sv.version.levels.len() + 4);
        for logged in std::iter::once(&sv.mem).chain(sv.imm.iter()) {
            // A memtable empty now was empty at the snapshot (taken before
            // this: a write's entry is in before its sequence number is
            // visible), so it is no source (a reopened database's, or one
            // just switched in).
            if !logged.mem.is_empty() {
                specs.push(SourceSpec::Mem(Arc::clone(&logged.mem)));
            }
        }
        // Only the tables the range needs (a damaged one outside it must
        // not fail the scan), less those whose filters rule the range out
        // (a damaged table has none: it is read, and fails the scan).
        let in_range = |t: &LiveTable| {
            lo.is_none_or(|lo| t.largest_user_key() >= lo)
                && hi.is_none_or(|hi| match t.smallest_user_key().cmp(hi) {
                    Ordering::Less => true,
                    Ordering::Equal => !hi_excluded,
                    Ordering::Greater => false,
                })
        };
        let may_match = |t: &LiveTable| {
            t.table
                .as_ref()
                .ok()
                .is_none_or(|t| t.scan_may_match(probe.as_ref(), start_ref, end_ref))
        };
        for (level, tables) in sv.version.levels.iter().enumerate() {
            if level == 0 {
                for table in tables.iter().filter(|t| in_range(t)) {
                    overlapping += 1;
                    if may_match(table) {
                        specs.push(SourceSpec::Table(Arc::clone(table)));
                    }
                }
                continue;
            }
            // A deeper level is sorted and disjoint: the tables in range
            // are the run from the first whose largest key reaches `lo` to
            // the last whose smallest key is within `hi`, found by binary
            // search (a level can hold thousands of tables).
            let first = lo.map_or(0, |lo| {
                tables.partition_point(|t| t.largest_user_key() < lo)
            });
            let past = first
                + tables
                    .get(first..)
                    .map_or(0, |rest| rest.partition_point(|t| in_range(t)));
            overlapping += (past - first) as u64;
            let picked = if ScanFilters::can_rule_out(probe.as_ref(), start_ref, end_ref) {
                let listed = (first..past)
                    .filter(|&at| tables.get(at).is_some_and(|t| may_match(t)))
                    .collect();
                Positions::Listed(listed)
            } else {
                Positions::Run(first..past)
            };
            if picked.len() > 0 {
                specs.push(SourceSpec::Level { level, picked });
            }
        }
        let range_tombstones = gather_range_tombstones(&sv, snapshot, &in_range, (lo, hi));
        let tally = inner.counters.reads.local();
        tally.bump(|t| &t.scans);
        tally.add(|t| &t.scan_tables, overlapping);
        let mut scan = DbIterator::over(specs, sv, snapshot, (start, end), range_tombstones);
        scan.merge_operator.clone_from(&opts.merge_operator);
        scan.latency = Some(Arc::clone(&inner.latency));
        scan
    }

    /// A scan whose every read, in either direction, is `error` (once).
    pub(crate) fn failed(error: Error) -> DbIterator {
        let specs = vec![SourceSpec::Failed(error)];
        let sv = Arc::new(SuperVersion::empty());
        let unbounded = (Bound::Unbounded, Bound::Unbounded);
        DbIterator::over(specs, sv, SeqNo(0), unbounded, None)
    }

    /// A scan of `specs` (in `sv`) at `snapshot`, not started.
    fn over(
        specs: Vec<SourceSpec>,
        sv: Arc<SuperVersion>,
        snapshot: SeqNo,
        (start, end): (Bound<Vec<u8>>, Bound<Vec<u8>>),
        range_tombstones: Option<FragmentedTombstones>,
    ) -> DbIterator {
        DbIterator {
            merged: merge_of(&specs, &sv.version, ScanMode::Cached),
            mode: ScanMode::Cached,
            snapshot,
            start,
            end,
            started: false,
            step_pending: false,
            finished: false,
            last_user_key: None,
            specs,
            front_floor: None,
            back_ceiling: None,
            back: None,
            back_finished: false,
            back_user_key: None,
            range_tombstones,
            merge_operator: None,
            back_versions: Vec::new(),
            pinned: sv,
            latency: None,
        }
    }

    /// With `false`, the scan reads its tables' data blocks straight from
    /// the files, in spans of consecutive blocks (one read each, every
    /// block verified), neither taking them from the block cache nor
    /// putting them in it: for a scan over much data, read once, that
    /// should not push the blocks gets use out of the cache (RocksDB's
    /// `ReadOptions::fill_cache = false`, with readahead). Memtables are
    /// read as always, and the entries are the same either way. Give it
    /// before the first step: a side of the scan already started keeps
    /// reading as it began.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = siftdb::Db::open(dir.path())?;
    /// db.put("k", "v")?;
    /// db.flush()?;
    /// let entries: Vec<_> = db.iter().fill_cache(false).collect::<Result<_, _>>()?;
    /// assert_eq!(entries.len(), 1);
    /// # Ok::<(), siftdb::Error>(())
    /// ```
    pub fn fill_cache(mut self, fill: bool) -> DbIterator {
        self.mode = if fill {
            ScanMode::Cached
        } else {
            ScanMode::Sequential
        };
        if !self.started {
            self.merged = merge_of(&self.specs, &self.pinned.version, self.mode);
        }
        self
    }

    /// Moves the forward side (what [`Iterator::next`] returns) to the first
    /// key at or after `key` — to the scan's start when `key` is before it —
    /// as RocksDB's `Iterator::Seek`: the next `next` returns that key, or
    /// `None` past the scan's end (and after a `None`, `None` until the
    /// next seek). The scan keeps its snapshot and its range; seeking back
    /// returns keys again. The backward side is not moved; it stops before
    /// `key` (and before any key `next` takes), and `next` stops at the
    /// first key `next_back` took, so no key is returned by both.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = siftdb::Db::open(dir.path())?;
    /// for k in ["a1", "a2", "b1", "c1", "c2"] {
    ///     db.put(k, "")?;
    /// }
    /// // One key per letter: skip the rest of each.
    /// let mut scan = db.iter();
    /// let mut firsts = Vec::new();
    /// while let Some(entry) = scan.next() {
    ///     let key = entry?.0;
    ///     firsts.push(key.clone());
    ///     scan.seek([key[0] + 1]);
    /// }
    /// assert_eq!(firsts, ["a1", "b1", "c1"]);
    /// # Ok::<(), siftdb::Error>(())
    /// ```
    pub fn seek(&mut self, key: impl AsRef<[u8]>) {
        let key = key.as_ref();
        let target = match &self.start {
            Bound::Included(start) | Bound::Excluded(start)
                if before_start_of(&self.start, key) =>
            {
                lookup_key(start, SeqNo::MAX)
            }
            _ => lookup_key(key, SeqNo::MAX),
        };
        self.merged.seek(&target);
        self.started = true;
        self.step_pending = false;
        self.finished = false;
        // Entries are taken again from here on, whatever was taken before;
        // the backward side stops before the key sought.
        self.last_user_key = None;
        self.front_floor = Some(key.to_vec());
    }

    /// Moves the backward side (what [`DoubleEndedIterator::next_back`]
    /// returns) to the last key at or before `key` — to the scan's end when
    /// `key` is past it — as RocksDB's `Iterator::SeekForPrev`; otherwise as
    /// [`DbIterator::seek`].
    pub fn seek_for_prev(&mut self, key: impl AsRef<[u8]>) {
        let key = key.as_ref();
        let mut back = self
            .back
            .take()
            .unwrap_or_else(|| merge_of(&self.specs, &self.pinned.version, self.mode));
        if past_end_of(&self.end, key) {
            seek_back_to_end(&mut back, &self.end);
        } else {
            // The last internal key of `key` has the smallest tag.
            back.seek_for_prev(&internal_key(key, SeqNo(0), ValueKind::Delete));
        }
        self.back = Some(back);
        self.back_finished = false;
        self.back_user_key = None;
        self.back_ceiling = Some(key.to_vec());
    }

    /// The value of `key`, whose newest visible version (where the forward
    /// merge is) is a merge operand: the operands down to the version they
    /// apply to — a put, a delete, one a range tombstone deletes, or none
    /// left — merged by the merge operator. Leaves the merge past them.
    fn merge_forward(&mut self, key: &[u8]) -> Result<Bytes> {
        let visible = self.range_tombstones.as_ref();
        let gathered = gather_operands(&mut self.merged, key, self.snapshot, |seq| {
            deleted_by(visible, key, seq)
        })?;
        let operands: Vec<Bytes> = gathered
            .operands
            .into_iter()
            .rev()
            .map(|(_, o)| o)
            .collect();
        apply_merge(
            self.merge_operator.as_deref(),
            key,
            gathered.existing.as_deref(),
            &operands,
        )
    }

    /// True when a range tombstone the snapshot sees deletes the version of
    /// `user_key` at `seq`.
    #[inline]
    fn deleted_by_range(&self, user_key: &[u8], seq: SeqNo) -> bool {
        deleted_by(self.range_tombstones.as_ref(), user_key, seq)
    }

    fn past_end(&self, user_key: &[u8]) -> bool {
        past_end_of(&self.end, user_key)
    }

    /// The backward side has taken `user_key` or a key before it, or was
    /// sought to a key before it.
    fn met_back(&self, user_key: &[u8]) -> bool {
        self.back_user_key
            .as_deref()
            .is_some_and(|back| user_key >= back)
            || self
                .back_ceiling
                .as_deref()
                .is_some_and(|ceiling| user_key > ceiling)
    }

    fn before_start(&self, user_key: &[u8]) -> bool {
        before_start_of(&self.start, user_key)
    }
}

/// Puts a backward merge on the last entry within `end`.
fn seek_back_to_end(back: &mut MergingIter, end: &Bound<Vec<u8>>) {
    match end {
        // The last internal key of `end` has the smallest tag.
        Bound::Included(end) => back.seek_for_prev(&internal_key(end, SeqNo(0), ValueKind::Delete)),
        // Every version of `end` itself is past the range.
        Bound::Excluded(end) => back.seek_for_prev(&lookup_key(end, SeqNo::MAX)),
        Bound::Unbounded => back.seek_to_last(),
    }
}

/// The range tombstones a scan at `snapshot` must honour: those of every
/// memtable and of every table `in_range` says meets the scan's range —
/// filters or not, since a table a filter rules out for its own keys may
/// still delete older keys of other tables — seen at the snapshot.
fn gather_range_tombstones(
    sv: &SuperVersion,
    snapshot: SeqNo,
    in_range: &dyn Fn(&LiveTable) -> bool,
    (lo, hi): (Option<&[u8]>, Option<&[u8]>),
) -> Option<FragmentedTombstones> {
    let mut lists: Vec<Arc<FragmentedTombstones>> = Vec::new();
    for logged in std::iter::once(&sv.mem).chain(sv.imm.iter()) {
        lists.extend(logged.mem.range_tombstones());
    }
    if sv.version.range_tombstone_tables() > 0 {
        let tables = sv.version.levels.iter().flatten();
        lists.extend(
            tables
                .filter(|t| in_range(t))
                .filter_map(|t| t.table.as_ref().ok()?.range_tombstones().cloned()),
        );
    }
    // Only the fragments that meet the scan's keys (a binary search in
    // each list), so a scan of a short range pays for the few tombstones
    // over it, not for every tombstone of the tree.
    let mut near: Vec<FragmentedTombstones> = lists.iter().map(|l| l.overlapping(lo, hi)).collect();
    near.retain(|l| !l.is_empty());
    let visible = match near.as_slice() {
        [] => return None,
        [one] => one.visible_at(snapshot),
        _ => FragmentedTombstones::merged(&near).visible_at(snapshot),
    };
    (!visible.is_empty()).then_some(visible)
}

fn borrowed(bound: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match bound {
        Bound::Included(k) => Bound::Included(k),
        Bound::Excluded(k) => Bound::Excluded(k),
        Bound::Unbounded => Bound::Unbounded,
    }
}

fn bound_key(bound: &Bound<Vec<u8>>) -> Option<&[u8]> {
    match bound {
        Bound::Included(k) | Bound::Excluded(k) => Some(k),
        Bound::Unbounded => None,
    }
}

impl Iterator for DbIterator {
    type Item = Result<(Bytes, Bytes)>;

    fn next(&mut self) -> Option<Self::Item> {
        let _timing = ScanStepTiming::start(self.latency.as_ref());
        if self.finished {
            return None;
        }
        if !self.started {
            self.started = true;
            match bound_key(&self.start) {
                Some(start) => {
                    let target = lookup_key(start, SeqNo::MAX);
                    self.merged.seek(&target);
                }
                None => self.merged.seek_to_first(),
            }
        }
        if self.step_pending {
            self.step_pending = false;
            self.merged.next();
        }
        loop {
            if let Err(e) = self.merged.status() {
                self.finished = true;
                return Some(Err(e));
            }
            if !self.merged.valid() {
                self.finished = true;
                return None;
            }
            let parsed = match parse_internal_key(self.merged.key()) {
                Ok(p) => p,
                Err(e) => {
                    self.finished = true;
                    return Some(Err(e));
                }
            };
            if self.past_end(parsed.user_key) || self.met_back(parsed.user_key) {
                self.finished = true;
                return None;
            }
            let newer_than_snapshot = parsed.seq > self.snapshot;
            let older_version = self
                .last_user_key
                .as_deref()
                .is_some_and(|last| last == parsed.user_key);
            if newer_than_snapshot || older_version || self.before_start(parsed.user_key) {
                self.merged.next();
                continue;
            }
            // The buffer of the previous key is reused: no allocation per entry.
            let last = self.last_user_key.get_or_insert_with(Vec::new);
            last.clear();
            last.extend_from_slice(parsed.user_key);
            if parsed.kind == ValueKind::Delete
                || self.deleted_by_range(parsed.user_key, parsed.seq)
            {
                self.merged.next();
                continue;
            }
            let key = Bytes::copy_from_slice(parsed.user_key);
            if parsed.kind == ValueKind::Merge {
                // The merge moves past the operands (and the value under
                // them): nothing is pending.
                let merged = self.merge_forward(&key);
                if merged.is_err() {
                    self.finished = true;
                }
                return Some(merged.map(|value| (key, value)));
            }
            let item = (key, self.merged.value());
            self.step_pending = true;
            return Some(Ok(item));
        }
    }
}

impl DoubleEndedIterator for DbIterator {
    fn next_back(&mut self) -> Option<Self::Item> {
        let _timing = ScanStepTiming::start(self.latency.as_ref());
        if self.back_finished {
            return None;
        }
        if self.back.is_none() {
            let mut back = merge_of(&self.specs, &self.pinned.version, self.mode);
            seek_back_to_end(&mut back, &self.end);
            self.back = Some(back);
        }
        let back = self.back.as_mut()?;
        loop {
            if let Err(e) = back.status() {
                self.back_finished = true;
                return Some(Err(e));
            }
            if !back.valid() {
                self.back_finished = true;
                return None;
            }
            let (user_key, past_end) = match parse_internal_key(back.key()) {
                Ok(p) => (p.user_key.to_vec(), past_end_of(&self.end, p.user_key)),
                Err(e) => {
                    self.back_finished = true;
                    return Some(Err(e));
                }
            };
            if past_end {
                back.prev();
                continue;
            }
            if before_start_of(&self.start, &user_key)
                || self
                    .last_user_key
                    .as_deref()
                    .is_some_and(|front| user_key.as_slice() <= front)
                || self
                    .front_floor
                    .as_deref()
                    .is_some_and(|floor| user_key.as_slice() < floor)
            {
                self.back_finished = true;
                return None;
            }
            // Backwards, a key's versions come oldest first: the newest one
            // the snapshot sees is the last at or below it before the key
            // changes (the ones under it are kept for a merge).
            let mut versions = std::mem::take(&mut self.back_versions);
            versions.clear();
            loop {
                match parse_internal_key(back.key()) {
                    Ok(p) if p.user_key == user_key.as_slice() => {
                        if p.seq <= self.snapshot {
                            versions.push((p.kind, p.seq, back.value()));
                        }
                    }
                    Ok(_) => break,
                    Err(e) => {
                        self.back_finished = true;
                        return Some(Err(e));
                    }
                }
                back.prev();
                if let Err(e) = back.status() {
                    self.back_finished = true;
                    return Some(Err(e));
                }
                if !back.valid() {
                    break;
                }
            }
            let key = Bytes::from(user_key);
            self.back_user_key = Some(key.clone());
            let found = newest_version(
                self.range_tombstones.as_ref(),
                self.merge_operator.as_deref(),
                &key,
                &versions,
            );
            self.back_versions = versions;
            match found {
                Ok(Some(value)) => return Some(Ok((key, value))),
                Ok(None) => {}
                Err(e) => {
                    self.back_finished = true;
                    return Some(Err(e));
                }
            }
        }
    }
}

impl std::iter::FusedIterator for DbIterator {}
