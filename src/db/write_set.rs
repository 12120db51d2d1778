//! A transaction's own writes, before its commit.
//!
//! Owns: [`WriteSet`] — the transaction's puts, deletes, merge operands and
//! range deletes by keyspace, what its reads see of them, and the batch its
//! commit writes.
//! Must never: let a read of the transaction miss one of its own writes, or
//! let the batch apply them in another order than the transaction made them
//! (a put after a range delete over its key survives it).

use std::collections::BTreeMap;
use std::ops::Bound;

use bytes::Bytes;

use crate::batch::{RawBatch, WriteBatch};
use crate::db::iter::apply_merge;
use crate::db::oracle::KeyRange;
use crate::error::Result;
use crate::options::MergeOperator;

/// What the transaction says of one key: its own write, or nothing (the
/// snapshot's answer stands).
pub(crate) enum OwnRead {
    Write(PointWrite),
    Snapshot,
}

/// The transaction's last word on one key.
#[derive(Clone, Debug)]
pub(crate) enum PointWrite {
    Put(Bytes),
    Delete,
    /// Merge operands, oldest first, over `base`.
    Merge {
        base: MergeBase,
        operands: Vec<Bytes>,
    },
}

/// What a transaction's merge operands apply to.
#[derive(Clone, Debug)]
pub(crate) enum MergeBase {
    /// The key's value at the snapshot (the transaction wrote nothing of
    /// it before its first operand).
    Snapshot,
    /// The transaction's own put (`Some`) or delete or range delete
    /// (`None`) before its first operand.
    Own(Option<Bytes>),
}

impl PointWrite {
    /// The key's value after this write, given its value at the snapshot
    /// (asked only for operands over the snapshot).
    pub fn resolve(
        &self,
        operator: Option<&dyn MergeOperator>,
        key: &[u8],
        snapshot: impl FnOnce() -> Result<Option<Bytes>>,
    ) -> Result<Option<Bytes>> {
        match self {
            PointWrite::Put(value) => Ok(Some(value.clone())),
            PointWrite::Delete => Ok(None),
            PointWrite::Merge { base, operands } => {
                let base = match base {
                    MergeBase::Own(value) => value.clone(),
                    MergeBase::Snapshot => snapshot()?,
                };
                apply_merge(operator, key, base.as_deref(), operands).map(Some)
            }
        }
    }
}

/// A transaction's writes.
#[derive(Default, Clone)]
pub(crate) struct WriteSet {
    /// (keyspace, key) -> the transaction's write. A point write is always
    /// newer than every range delete (a range delete removes the points it
    /// covers from here).
    points: BTreeMap<(u32, Vec<u8>), PointWrite>,
    /// Range deletes, `[start, end)` per keyspace.
    ranges: Vec<KeyRange>,
    /// Bytes of keys and values held (for the size limit).
    bytes: usize,
}

impl WriteSet {
    pub fn is_empty(&self) -> bool {
        self.points.is_empty() && self.ranges.is_empty()
    }

    /// A put (`Some`) or a delete (`None`) of `key`.
    pub fn put(&mut self, keyspace: u32, key: &[u8], value: Option<Bytes>) {
        self.bytes += key.len() + value.as_ref().map_or(0, Bytes::len);
        let write = value.map_or(PointWrite::Delete, PointWrite::Put);
        self.points.insert((keyspace, key.to_vec()), write);
    }

    /// A merge operand for `key`, after the transaction's writes so far.
    pub fn merge(&mut self, keyspace: u32, key: &[u8], operand: Bytes) {
        self.bytes += key.len() + operand.len();
        let covered = self.covers(keyspace, key);
        let write = self
            .points
            .entry((keyspace, key.to_vec()))
            .or_insert_with(|| PointWrite::Merge {
                base: if covered {
                    MergeBase::Own(None)
                } else {
                    MergeBase::Snapshot
                },
                operands: Vec::new(),
            });
        match write {
            PointWrite::Merge { operands, .. } => operands.push(operand),
            PointWrite::Put(value) => {
                *write = PointWrite::Merge {
                    base: MergeBase::Own(Some(value.clone())),
                    operands: vec![operand],
                }
            }
            PointWrite::Delete => {
                *write = PointWrite::Merge {
                    base: MergeBase::Own(None),
                    operands: vec![operand],
                }
            }
        }
    }

    /// Deletes `[start, end)` of `keyspace`: the points already written in
    /// it go (the range deletes them), later ones stay.
    pub fn delete_range(&mut self, keyspace: u32, start: Vec<u8>, end: Option<Vec<u8>>) {
        let range = KeyRange::half_open(keyspace, start, end);
        self.points.retain(|(ks, key), _| !range.contains(*ks, key));
        self.bytes += range.bytes();
        self.ranges.push(range);
    }

    /// What the transaction itself says of `key`.
    pub fn read(&self, keyspace: u32, key: &[u8]) -> OwnRead {
        if let Some(write) = self.points.get(&(keyspace, key.to_vec())) {
            return OwnRead::Write(write.clone());
        }
        if self.covers(keyspace, key) {
            return OwnRead::Write(PointWrite::Delete);
        }
        OwnRead::Snapshot
    }

    /// Whether one of the transaction's range deletes covers `key`.
    pub fn covers(&self, keyspace: u32, key: &[u8]) -> bool {
        self.ranges.iter().any(|r| r.contains(keyspace, key))
    }

    /// The point writes of `keyspace` in `range`, ascending.
    pub fn points_in(&self, range: &KeyRange) -> Vec<(Bytes, PointWrite)> {
        let lower = match &range.start {
            Bound::Included(k) => Bound::Included((range.keyspace, k.clone())),
            Bound::Excluded(k) => Bound::Excluded((range.keyspace, k.clone())),
            Bound::Unbounded => Bound::Included((range.keyspace, Vec::new())),
        };
        self.points
            .range((lower, Bound::Unbounded))
            .take_while(|((ks, _), _)| *ks == range.keyspace)
            .filter(|((ks, key), _)| range.contains(*ks, key))
            .map(|((_, key), value)| (Bytes::copy_from_slice(key), value.clone()))
            .collect()
    }

    /// The range deletes of `keyspace`.
    pub fn ranges_of(&self, keyspace: u32) -> Vec<KeyRange> {
        self.ranges
            .iter()
            .filter(|r| r.keyspace == keyspace)
            .cloned()
            .collect()
    }

    /// Keys and ranges written: what snapshot isolation checks at commit.
    pub fn written(&self) -> (Vec<(u32, Vec<u8>)>, Vec<KeyRange>) {
        let keys = self.points.keys().cloned().collect();
        (keys, self.ranges.clone())
    }

    /// Bytes of keys and values held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// The commit's batch: range deletes first, then the points (which are
    /// newer than any of them), so each write keeps its effect.
    pub fn to_batch(&self) -> WriteBatch {
        let mut batch = WriteBatch::new();
        for range in &self.ranges {
            if let Bound::Included(start) = &range.start {
                let end = match &range.end {
                    Bound::Excluded(end) => Some(end.as_slice()),
                    _ => None,
                };
                batch.push_range_delete(range.keyspace, start, end);
            }
        }
        for ((keyspace, key), write) in &self.points {
            match write {
                PointWrite::Put(value) => batch.put_to(*keyspace, key, value),
                PointWrite::Delete => batch.delete_from(*keyspace, key),
                PointWrite::Merge { base, operands } => {
                    match base {
                        MergeBase::Own(Some(value)) => batch.put_to(*keyspace, key, value),
                        MergeBase::Own(None) => batch.delete_from(*keyspace, key),
                        MergeBase::Snapshot => {}
                    }
                    for operand in operands {
                        batch.merge_to(*keyspace, key, operand);
                    }
                }
            }
        }
        batch
    }
}
