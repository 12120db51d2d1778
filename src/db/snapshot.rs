//! Snapshots: a fixed point in the write history that reads can return to.
//!
//! Owns: [`Snapshot`], which pins one super-version (its memtables and
//! tables) and one sequence number, and the key-range helpers `Db` shares
//! with it.
//! Must never: show a write made after it was taken, or lose one made
//! before — its super-version was loaded before its sequence number was
//! read, so every version it can see lives in what it pins.

use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

use bytes::Bytes;

use crate::db::iter::DbIterator;
use crate::db::{check_key, read, DbInner, SuperVersion};
use crate::error::Result;
use crate::key::SeqNo;

/// A consistent view of the database as of [`crate::Db::snapshot`]: every
/// read through it sees exactly the writes acknowledged before it was taken,
/// however many writes, flushes and compactions follow.
///
/// It keeps the tables it reads from alive (their files stay until it is
/// dropped) and keeps the database's directory lock while it lives, so drop
/// snapshots before reopening the database.
pub struct Snapshot {
    inner: Arc<DbInner>,
    sv: Arc<SuperVersion>,
    sequence: SeqNo,
}

impl Snapshot {
    pub(crate) fn new(inner: &Arc<DbInner>) -> Snapshot {
        // Super-version first, then the sequence number (see DbIterator::new).
        let sv = inner.current.load_full();
        let sequence = inner.snapshot();
        Snapshot {
            inner: Arc::clone(inner),
            sv,
            sequence,
        }
    }

    /// The sequence number of the last write this snapshot sees.
    pub fn sequence(&self) -> u64 {
        self.sequence.0
    }

    /// The value of `key` as of the snapshot.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Bytes>> {
        let key = key.as_ref();
        check_key(key)?;
        read::get_at(&self.inner, &self.sv, self.sequence, key)
    }

    /// The values of many keys as of the snapshot (see [`crate::Db::multi_get`]).
    pub fn multi_get<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<Option<Bytes>>> {
        let keys: Vec<&[u8]> = keys.iter().map(AsRef::as_ref).collect();
        for key in &keys {
            check_key(key)?;
        }
        read::multi_get_at(&self.inner, &self.sv, self.sequence, &keys)
    }

    /// Every entry as of the snapshot, in ascending key order.
    pub fn iter(&self) -> DbIterator {
        self.scan((Bound::Unbounded, Bound::Unbounded))
    }

    /// Entries whose keys fall in `range`, as of the snapshot.
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> DbIterator {
        self.scan(owned_range(range))
    }

    /// Entries whose keys start with `prefix`, as of the snapshot.
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> DbIterator {
        self.scan(prefix_range(prefix.as_ref()))
    }

    /// The entry with the smallest key, as of the snapshot.
    pub fn first_key_value(&self) -> Result<Option<(Bytes, Bytes)>> {
        self.iter().next().transpose()
    }

    /// The entry with the largest key, as of the snapshot.
    pub fn last_key_value(&self) -> Result<Option<(Bytes, Bytes)>> {
        self.iter().next_back().transpose()
    }

    fn scan(&self, range: (Bound<Vec<u8>>, Bound<Vec<u8>>)) -> DbIterator {
        DbIterator::at(&self.inner, Arc::clone(&self.sv), self.sequence, range)
    }
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot")
            .field("sequence", &self.sequence.0)
            .finish_non_exhaustive()
    }
}

/// `range` with owned bounds.
pub(crate) fn owned_range<K: AsRef<[u8]>, R: RangeBounds<K>>(
    range: R,
) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let own = |b: Bound<&K>| match b {
        Bound::Included(k) => Bound::Included(k.as_ref().to_vec()),
        Bound::Excluded(k) => Bound::Excluded(k.as_ref().to_vec()),
        Bound::Unbounded => Bound::Unbounded,
    };
    (own(range.start_bound()), own(range.end_bound()))
}

/// The keys starting with `prefix`, as bounds.
pub(crate) fn prefix_range(prefix: &[u8]) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let end = match crate::prefix::successor(prefix) {
        Some(end) => Bound::Excluded(end),
        None => Bound::Unbounded,
    };
    (Bound::Included(prefix.to_vec()), end)
}
