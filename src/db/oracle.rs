//! The transaction oracle: what was written after a transaction's snapshot.
//!
//! Owns: the snapshots of live transactions, the sequence number of the last
//! commit of each key hash, the key lists of recent commits (for range
//! checks) and the key ranges of recent ingests, and the commit-time
//! conflict check.
//! Must never: miss a write committed after a live transaction's snapshot to
//! a key or range that transaction must check (a false conflict, from a hash
//! collision, is allowed; a missed one is a lost update), or grow without
//! bound: entries at or below the horizon — the oldest live transaction's
//! snapshot, or the last visible sequence number when none is live — are
//! pruned.
//!
//! Every batch, a transaction's or a plain write's, is registered by the
//! write group's leader under the writer lock before its sequence numbers
//! become visible; the check runs at the same point, so checking a commit and
//! giving it its sequence numbers is atomic with respect to every other
//! write. A transaction registers its snapshot under the oracle's lock, so a
//! batch registered before is either in its snapshot or above it (and kept).
//!
//! Cost: a point key costs one hash lookup at commit; a checked range costs a
//! pass over the keys of the commits since the transaction's snapshot (kept
//! in `recent` until the horizon passes them); a committed range delete is
//! checked against every key and range of later-starting commits the same way.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::ops::Bound;

use crate::batch::{OpKind, RawBatch, WriteBatch};
use crate::key::{before_start_of, past_end_of, starts_before_end};

/// A key range of one keyspace, bounds owned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct KeyRange {
    pub keyspace: u32,
    pub start: Bound<Vec<u8>>,
    pub end: Bound<Vec<u8>>,
}

impl KeyRange {
    /// The half-open range `[start, end)` (no upper bound for `None`).
    pub fn half_open(keyspace: u32, start: Vec<u8>, end: Option<Vec<u8>>) -> KeyRange {
        KeyRange {
            keyspace,
            start: Bound::Included(start),
            end: end.map_or(Bound::Unbounded, Bound::Excluded),
        }
    }

    /// Whether `key` of `keyspace` falls in the range.
    pub fn contains(&self, keyspace: u32, key: &[u8]) -> bool {
        keyspace == self.keyspace
            && !before_start_of(&self.start, key)
            && !past_end_of(&self.end, key)
    }

    /// Bytes of its bounds.
    pub fn bytes(&self) -> usize {
        let len = |b: &Bound<Vec<u8>>| match b {
            Bound::Included(k) | Bound::Excluded(k) => k.len(),
            Bound::Unbounded => 0,
        };
        len(&self.start) + len(&self.end)
    }

    /// Whether the two ranges share a key.
    pub fn overlaps(&self, other: &KeyRange) -> bool {
        self.keyspace == other.keyspace
            && starts_before_end(&self.start, &other.end)
            && starts_before_end(&other.start, &self.end)
    }
}

/// What a committing transaction asks the oracle: was any of these keys or
/// ranges written by a commit after `snapshot`?
#[derive(Debug, Default)]
pub(crate) struct ConflictCheck {
    pub snapshot: u64,
    pub keys: Vec<(u32, Vec<u8>)>,
    pub ranges: Vec<KeyRange>,
    /// Keys checked from a sequence number of their own (at or above
    /// `snapshot`): a locking transaction's keys, each read as of its lock.
    pub keys_read_at: Vec<(u32, Vec<u8>, u64)>,
}

/// The keys and ranges one commit above the horizon wrote.
struct RecentCommit {
    seq: u64,
    keys: Vec<(u32, Vec<u8>)>,
    ranges: Vec<KeyRange>,
}

/// The oracle's state (behind `DbInner::oracle`'s lock).
#[derive(Default)]
pub(crate) struct Oracle {
    /// Snapshot sequence number of live transactions -> how many.
    live: BTreeMap<u64, usize>,
    /// Key hash -> the last sequence number of the last commit writing it.
    last_commit: HashMap<u64, u64>,
    /// Size of `last_commit` after its last pruning: it is pruned again
    /// when it has doubled, so pruning costs O(1) per key written.
    pruned_len: usize,
    /// Commits above the horizon, oldest first.
    recent: VecDeque<RecentCommit>,
    /// Bytes of keys held in `recent`.
    recent_bytes: usize,
}

/// Entries `last_commit` may hold before its first pruning.
const PRUNE_FLOOR: usize = 4096;

fn key_hash(keyspace: u32, key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64_with_seed(key, u64::from(keyspace))
}

impl Oracle {
    /// A transaction with snapshot `seq` starts.
    pub fn begin(&mut self, seq: u64) {
        *self.live.entry(seq).or_insert(0) += 1;
    }

    /// A transaction with snapshot `seq` ended (committed or not).
    pub fn end(&mut self, seq: u64) {
        if let Some(count) = self.live.get_mut(&seq) {
            *count -= 1;
            if *count == 0 {
                self.live.remove(&seq);
            }
        }
    }

    /// Whether no commit after `check.snapshot` wrote what it names.
    pub fn validate(&self, check: &ConflictCheck) -> bool {
        let after = |seq: u64| seq > check.snapshot;
        for (keyspace, key) in &check.keys {
            if self
                .last_commit
                .get(&key_hash(*keyspace, key))
                .is_some_and(|&seq| after(seq))
            {
                return false;
            }
        }
        for (keyspace, key, read_at) in &check.keys_read_at {
            if self
                .last_commit
                .get(&key_hash(*keyspace, key))
                .is_some_and(|&seq| seq > *read_at)
            {
                return false;
            }
        }
        if check.keys.is_empty() && check.ranges.is_empty() {
            return true;
        }
        // Commits after the snapshot, for range checks (theirs and ours).
        let first = self.recent.partition_point(|c| !after(c.seq));
        for commit in self.recent.range(first..) {
            if commit
                .keys
                .iter()
                .any(|(keyspace, key)| check.ranges.iter().any(|r| r.contains(*keyspace, key)))
            {
                return false;
            }
            for range in &commit.ranges {
                if check.keys.iter().any(|(ks, key)| range.contains(*ks, key))
                    || check.ranges.iter().any(|r| r.overlaps(range))
                {
                    return false;
                }
            }
        }
        true
    }

    /// Records `batch`, committed with sequence numbers up to `last_seq`;
    /// `visible` is the last sequence number readers can see now (the
    /// horizon when no transaction is live).
    pub fn register(&mut self, batch: &WriteBatch, last_seq: u64, visible: u64) {
        let mut commit = RecentCommit {
            seq: last_seq,
            keys: Vec::new(),
            ranges: Vec::new(),
        };
        for op in batch.iter() {
            if op.kind == OpKind::DeleteRange {
                let end = op.range_end().map(<[u8]>::to_vec);
                commit
                    .ranges
                    .push(KeyRange::half_open(op.keyspace, op.key.to_vec(), end));
                self.recent_bytes += op.key.len() + op.value.len();
            } else {
                self.last_commit
                    .insert(key_hash(op.keyspace, op.key), last_seq);
                commit.keys.push((op.keyspace, op.key.to_vec()));
                self.recent_bytes += op.key.len();
            }
        }
        self.recent.push_back(commit);
        self.prune(visible);
    }

    /// Records a write of every key in `ranges` (an ingest's files, whose
    /// key ranges stand for their keys) made visible at `seq`; `visible` as
    /// for [`Oracle::register`]. A read between two of a file's keys then
    /// conflicts too: a false conflict, which is allowed.
    pub fn register_ranges(&mut self, ranges: Vec<KeyRange>, seq: u64, visible: u64) {
        self.recent_bytes += ranges.iter().map(KeyRange::bytes).sum::<usize>();
        self.recent.push_back(RecentCommit {
            seq,
            keys: Vec::new(),
            ranges,
        });
        self.prune(visible);
    }

    /// Drops what no live or future transaction can conflict with.
    fn prune(&mut self, visible: u64) {
        // A transaction starting later gets a snapshot of at least `visible`.
        let horizon = self
            .live
            .keys()
            .next()
            .map_or(visible, |&oldest| oldest.min(visible));
        while self.recent.front().is_some_and(|c| c.seq <= horizon) {
            if let Some(commit) = self.recent.pop_front() {
                let bytes: usize = commit.keys.iter().map(|(_, k)| k.len()).sum::<usize>()
                    + commit.ranges.iter().map(KeyRange::bytes).sum::<usize>();
                self.recent_bytes = self.recent_bytes.saturating_sub(bytes);
            }
        }
        if self.last_commit.len() > PRUNE_FLOOR.max(2 * self.pruned_len) {
            self.last_commit.retain(|_, seq| *seq > horizon);
            self.pruned_len = self.last_commit.len();
        }
    }

    /// Approximate bytes of memory the oracle holds.
    pub fn memory_bytes(&self) -> u64 {
        // A hash map entry: key, value and a control byte.
        let map = self.last_commit.capacity() * (8 + 8 + 1);
        let recent = self.recent.len() * std::mem::size_of::<RecentCommit>() + self.recent_bytes;
        (map + recent + self.live.len() * 32) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch_of(keys: &[&[u8]]) -> WriteBatch {
        let mut batch = WriteBatch::new();
        for key in keys {
            batch.put(key, b"v");
        }
        batch
    }

    fn check(snapshot: u64, keys: &[&[u8]], ranges: Vec<KeyRange>) -> ConflictCheck {
        ConflictCheck {
            snapshot,
            keys: keys.iter().map(|k| (0, k.to_vec())).collect(),
            ranges,
            keys_read_at: Vec::new(),
        }
    }

    #[test]
    fn a_key_written_after_the_snapshot_conflicts() {
        let mut oracle = Oracle::default();
        oracle.begin(10);
        oracle.register(&batch_of(&[b"a"]), 11, 10);
        assert!(!oracle.validate(&check(10, &[b"a"], vec![])));
        assert!(oracle.validate(&check(10, &[b"b"], vec![])));
        assert!(oracle.validate(&check(11, &[b"a"], vec![])));
    }

    #[test]
    fn ranges_conflict_with_keys_and_range_deletes() {
        let mut oracle = Oracle::default();
        oracle.begin(10);
        oracle.register(&batch_of(&[b"m"]), 11, 10);
        let range = |s: &[u8], e: &[u8]| KeyRange::half_open(0, s.to_vec(), Some(e.to_vec()));
        assert!(!oracle.validate(&check(10, &[], vec![range(b"a", b"z")])));
        assert!(oracle.validate(&check(10, &[], vec![range(b"n", b"z")])));
        let mut deletion = WriteBatch::new();
        deletion.delete_range(&b"p"[..]..&b"r"[..]);
        oracle.register(&deletion, 12, 11);
        assert!(!oracle.validate(&check(11, &[b"q"], vec![])));
        assert!(!oracle.validate(&check(11, &[], vec![range(b"o", b"q")])));
        assert!(oracle.validate(&check(11, &[b"r"], vec![range(b"r", b"z")])));
    }

    #[test]
    fn an_ingested_range_conflicts_with_keys_and_ranges_in_it() {
        let mut oracle = Oracle::default();
        oracle.begin(10);
        let file = KeyRange {
            keyspace: 0,
            start: Bound::Included(b"c".to_vec()),
            end: Bound::Included(b"e".to_vec()),
        };
        oracle.register_ranges(vec![file], 11, 10);
        let range = |s: &[u8], e: &[u8]| KeyRange::half_open(0, s.to_vec(), Some(e.to_vec()));
        assert!(!oracle.validate(&check(10, &[b"c"], vec![])));
        assert!(!oracle.validate(&check(10, &[b"e"], vec![])));
        assert!(oracle.validate(&check(10, &[b"f"], vec![])));
        assert!(!oracle.validate(&check(10, &[], vec![range(b"a", b"d")])));
        assert!(oracle.validate(&check(10, &[], vec![range(b"a", b"c")])));
        assert!(oracle.validate(&check(11, &[b"d"], vec![])));
        // Another keyspace's key.
        let other = ConflictCheck {
            snapshot: 10,
            keys: vec![(1, b"d".to_vec())],
            ranges: vec![],
            keys_read_at: vec![],
        };
        assert!(oracle.validate(&other));
    }

    #[test]
    fn memory_is_pruned_at_the_horizon() {
        let mut oracle = Oracle::default();
        for i in 0..100_000u64 {
            oracle.register(&batch_of(&[&i.to_be_bytes()]), i + 1, i + 1);
        }
        assert!(oracle.last_commit.len() <= 2 * PRUNE_FLOOR + 1);
        assert!(oracle.recent.is_empty());
        // A live transaction holds what came after its snapshot.
        oracle.begin(100_000);
        for i in 100_000..100_100u64 {
            oracle.register(&batch_of(&[&i.to_be_bytes()]), i + 1, i + 1);
        }
        assert_eq!(oracle.recent.len(), 100);
        oracle.end(100_000);
        oracle.register(&batch_of(&[b"x"]), 100_101, 100_101);
        assert!(oracle.recent.is_empty());
    }
}
