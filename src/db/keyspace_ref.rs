//! The key-value calls of one keyspace, written once: what `Db` does on
//! its default keyspace and `Keyspace` on its own both come here.
//!
//! Owns: [`KeyspaceRef`] — one keyspace of an open database, borrowed —
//! and its calls: the argument checks, the refusal of a dropped keyspace,
//! then the read, the scan, the write or the compaction.
//! Must never: let a call on a dropped keyspace read or write anything, or
//! count as a handle (it is borrowed from one for the call alone).

use std::ops::{Bound, RangeBounds};
use std::sync::Arc;

use bytes::Bytes;

use crate::batch::{KeyspaceId, RawBatch, WriteBatch};
use crate::db::checks::check_key;
use crate::db::compaction_scope::CompactionScope;
use crate::db::inner::DbInner;
use crate::db::iter::{owned_range, prefix_range, DbIterator};
use crate::db::tree::Tree;
use crate::db::version::RangeTargets;
use crate::db::{manual, read, write};
use crate::error::Result;
use crate::memtable::MemtableRangeStats;
use crate::options::WriteOptions;
use crate::range_tombstone::normalize_range;

/// One keyspace of an open database, borrowed from a `Db` (its default
/// keyspace) or a `Keyspace` for one call.
#[derive(Clone, Copy)]
pub(crate) struct KeyspaceRef<'a> {
    pub inner: &'a Arc<DbInner>,
    pub tree: &'a Arc<Tree>,
}

impl KeyspaceRef<'_> {
    fn id(&self) -> KeyspaceId {
        KeyspaceId::new(self.tree.id)
    }

    /// Writes `batch` (of this keyspace's operations) unless the keyspace
    /// was dropped.
    fn write(&self, batch: WriteBatch, options: WriteOptions) -> Result<()> {
        self.tree.check_live()?;
        write::write_batch(self.inner, batch, options)
    }

    pub fn put_with(&self, key: &[u8], value: &[u8], options: WriteOptions) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.put_in(self.id(), key, value);
        self.write(batch, options)
    }

    pub fn delete_with(&self, key: &[u8], options: WriteOptions) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.delete_in(self.id(), key);
        self.write(batch, options)
    }

    pub fn merge(&self, key: &[u8], operand: &[u8]) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.merge_in(self.id(), key, operand);
        self.write(batch, WriteOptions::new())
    }

    /// One range tombstone over `range`: nothing written for an empty
    /// range, `InvalidArgument` for a reversed one or a bound too long.
    pub fn delete_range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Result<()> {
        self.tree.check_live()?;
        match normalize_range(&range)? {
            None => Ok(()),
            Some((start, end)) => {
                let mut batch = WriteBatch::new();
                batch.push_range_delete(self.tree.id, &start, end.as_deref());
                self.write(batch, WriteOptions::new())
            }
        }
    }

    pub fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        check_key(key)?;
        self.tree.check_live()?;
        read::get(self.inner, self.tree, key)
    }

    /// False once the keyspace was dropped (it holds nothing).
    pub fn key_may_exist(&self, key: &[u8]) -> bool {
        self.tree.check_live().is_ok() && read::key_may_exist(self.inner, self.tree, key)
    }

    pub fn multi_get<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<Option<Bytes>>> {
        let keys: Vec<&[u8]> = keys.iter().map(AsRef::as_ref).collect();
        for key in &keys {
            check_key(key)?;
        }
        self.tree.check_live()?;
        read::multi_get(self.inner, self.tree, &keys)
    }

    /// The entries in `range` as of now; an iterator that fails at once
    /// when the keyspace was dropped.
    pub fn scan(&self, range: (Bound<Vec<u8>>, Bound<Vec<u8>>)) -> DbIterator {
        match self.tree.check_live() {
            Ok(()) => DbIterator::new(self.inner, self.tree, range),
            Err(e) => DbIterator::failed(e),
        }
    }

    pub fn iter(&self) -> DbIterator {
        self.scan((Bound::Unbounded, Bound::Unbounded))
    }

    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> DbIterator {
        self.scan(owned_range(range))
    }

    pub fn prefix(&self, prefix: &[u8]) -> DbIterator {
        self.scan(prefix_range(prefix))
    }

    pub fn first_key_value(&self) -> Result<Option<(Bytes, Bytes)>> {
        self.iter().next().transpose()
    }

    pub fn last_key_value(&self) -> Result<Option<(Bytes, Bytes)>> {
        self.iter().next_back().transpose()
    }

    pub fn compact_range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Result<()> {
        self.tree.check_live()?;
        let scope = CompactionScope::Range(self.tree.id, owned_range(range));
        manual::compact(self.inner, scope)
    }

    pub fn approximate_size<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Result<u64> {
        self.tree.check_live()?;
        let sv = self.tree.current.load();
        Ok(sv.version.approximate_bytes(&owned_range(range)))
    }

    pub fn approximate_memtable_stats<K: AsRef<[u8]>, R: RangeBounds<K>>(
        &self,
        range: R,
    ) -> Result<MemtableRangeStats> {
        self.tree.check_live()?;
        let sv = self.tree.current.load();
        let targets = RangeTargets::of(&owned_range(range));
        let (start, end) = (targets.start.as_deref(), targets.end.as_deref());
        Ok(std::iter::once(&sv.mem)
            .chain(&sv.imm)
            .map(|m| m.mem.approximate_range_stats(start, end))
            .fold(MemtableRangeStats::default(), MemtableRangeStats::plus))
    }
}
