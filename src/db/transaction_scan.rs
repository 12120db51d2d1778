//! Scans inside a transaction: the snapshot's entries merged with the
//! transaction's own writes.
//!
//! Owns: [`TransactionIter`], in both directions.
//! Must never: show a snapshot entry the transaction overwrote, deleted or
//! range-deleted, hide one of its puts, apply its merge operands to
//! anything but the value they follow, or yield an entry twice when the two
//! ends meet.

use std::cmp::Ordering;
use std::sync::Arc;

use bytes::Bytes;

use crate::db::iter::DbIterator;
use crate::db::oracle::KeyRange;
use crate::db::write_set::PointWrite;
use crate::error::Result;
use crate::options::MergeOperator;

/// The entries of a transaction's scan, ascending (`.rev()` for
/// descending): what its snapshot holds in the range, with the
/// transaction's own puts, deletes and range deletes applied.
///
/// `Send` but deliberately not `Sync`, like [`crate::DbIterator`] (checked
/// by `tests/api_traits.rs`).
pub struct TransactionIter {
    snapshot: DbIterator,
    /// A snapshot entry taken from the front (or back) not yet yielded.
    front: Option<(Bytes, Bytes)>,
    back: Option<(Bytes, Bytes)>,
    /// The transaction's point writes in the range; `own[lo..hi]` are left.
    own: Vec<(Bytes, PointWrite)>,
    lo: usize,
    hi: usize,
    /// The transaction's range deletes of the keyspace.
    deleted: Vec<KeyRange>,
    keyspace: u32,
    /// The keyspace's merge operator, for the transaction's operands.
    operator: Option<Arc<dyn MergeOperator>>,
    failed: bool,
}

/// Which side yields next.
enum Next {
    Snapshot,
    Own,
    /// Same key: the transaction's write replaces the snapshot's entry.
    Both,
}

impl TransactionIter {
    pub(crate) fn new(
        snapshot: DbIterator,
        own: Vec<(Bytes, PointWrite)>,
        deleted: Vec<KeyRange>,
        keyspace: u32,
        operator: Option<Arc<dyn MergeOperator>>,
    ) -> TransactionIter {
        let hi = own.len();
        TransactionIter {
            snapshot,
            front: None,
            back: None,
            own,
            lo: 0,
            hi,
            deleted,
            keyspace,
            operator,
            failed: false,
        }
    }

    /// [`DbIterator::fill_cache`] for the snapshot's side of the scan (the
    /// transaction's own writes are in memory): with `false`, its tables'
    /// data blocks are read straight from the files and left out of the
    /// block cache. Give it before the first step.
    pub fn fill_cache(mut self, fill: bool) -> TransactionIter {
        self.snapshot = self.snapshot.fill_cache(fill);
        self
    }

    fn deleted_by_txn(&self, key: &[u8]) -> bool {
        self.deleted.iter().any(|r| r.contains(self.keyspace, key))
    }

    /// One step from the front (`forward`) or the back: `Some(None)` when
    /// the step yielded nothing (a delete), `None` at the end.
    fn step(&mut self, forward: bool) -> Option<Result<Option<(Bytes, Bytes)>>> {
        // Refill this end's snapshot candidate; once the snapshot scan is
        // used up from this end, the other end's candidate is the last one.
        let slot_empty = if forward {
            self.front.is_none()
        } else {
            self.back.is_none()
        };
        if slot_empty {
            let pulled = if forward {
                self.snapshot.next()
            } else {
                self.snapshot.next_back()
            };
            let entry = match pulled {
                Some(Err(e)) => return Some(Err(e)),
                Some(Ok(entry)) => Some(entry),
                None if forward => self.back.take(),
                None => self.front.take(),
            };
            if forward {
                self.front = entry;
            } else {
                self.back = entry;
            }
        }
        let snap = if forward { &self.front } else { &self.back };
        let own = if self.lo < self.hi {
            self.own.get(if forward { self.lo } else { self.hi - 1 })
        } else {
            None
        };
        let next = match (snap, own) {
            (None, None) => return None,
            (Some(_), None) => Next::Snapshot,
            (None, Some(_)) => Next::Own,
            (Some((s, _)), Some((o, _))) => match (s.cmp(o), forward) {
                (Ordering::Equal, _) => Next::Both,
                (Ordering::Less, true) | (Ordering::Greater, false) => Next::Snapshot,
                _ => Next::Own,
            },
        };
        if matches!(next, Next::Snapshot) {
            let taken = if forward {
                self.front.take()
            } else {
                self.back.take()
            };
            return Some(Ok(taken.filter(|(key, _)| !self.deleted_by_txn(key))));
        }
        // The snapshot's value of the key the transaction wrote: what its
        // merge operands apply to (none when the snapshot lacks the key).
        let mut snapshot_value = None;
        if matches!(next, Next::Both) {
            let taken = if forward {
                self.front.take()
            } else {
                self.back.take()
            };
            snapshot_value = taken.map(|(_, value)| value);
        }
        let index = if forward {
            self.lo += 1;
            self.lo - 1
        } else {
            self.hi -= 1;
            self.hi
        };
        let (key, write) = self.own.get(index)?;
        let value = write.resolve(self.operator.as_deref(), key, || Ok(snapshot_value));
        Some(value.map(|value| value.map(|v| (key.clone(), v))))
    }

    fn advance(&mut self, forward: bool) -> Option<Result<(Bytes, Bytes)>> {
        if self.failed {
            return None;
        }
        loop {
            match self.step(forward)? {
                Ok(Some(entry)) => return Some(Ok(entry)),
                Ok(None) => continue,
                Err(e) => {
                    self.failed = true;
                    return Some(Err(e));
                }
            }
        }
    }
}

impl Iterator for TransactionIter {
    type Item = Result<(Bytes, Bytes)>;

    fn next(&mut self) -> Option<Self::Item> {
        self.advance(true)
    }
}

impl DoubleEndedIterator for TransactionIter {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.advance(false)
    }
}

impl std::fmt::Debug for TransactionIter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TransactionIter")
            .field("own_left", &(self.hi - self.lo))
            .finish_non_exhaustive()
    }
}
