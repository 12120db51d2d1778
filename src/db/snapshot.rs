//! Snapshots: a fixed point in the write history that reads can return to.
//!
//! Owns: [`Snapshot`], which pins one super-version (its memtables and
//! tables) and one sequence number, and the key-range helpers `Db` shares
//! with it.
//! Must never: show a write made after it was taken, or lose one made
//! before — its super-version was loaded before its sequence number was
//! read, so every version it can see lives in what it pins.

use std::ops::{Bound, RangeBounds};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;

use crate::db::checks::check_key;
use crate::db::handle_counts::HandleKind;
use crate::db::inner::DbInner;
use crate::db::iter::{owned_range, prefix_range, DbIterator};
use crate::db::keyspace::Keyspace;
use crate::db::read;
use crate::db::super_version::SuperVersion;
use crate::db::tree::Tree;
use crate::error::Result;
use crate::key::SeqNo;

/// A keyspace and the super-version a snapshot reads it at.
type TreeView = (Arc<Tree>, Arc<SuperVersion>);

/// A consistent view of the database as of [`crate::Db::snapshot`]: every
/// read through it sees exactly the writes acknowledged before it was taken,
/// however many writes, flushes and compactions follow.
///
/// It keeps the tables it reads from alive (their files stay until it is
/// dropped) and keeps the database's directory lock while it lives, so drop
/// snapshots before reopening the database.
///
/// `Send + Sync` (checked by `tests/api_traits.rs`): share it between
/// threads (with `Arc`) or move it to one.
pub struct Snapshot {
    inner: Arc<DbInner>,
    /// The default keyspace at the snapshot (also in `trees`).
    default: (Arc<Tree>, Arc<SuperVersion>),
    /// Every keyspace at the snapshot.
    trees: Vec<(Arc<Tree>, Arc<SuperVersion>)>,
    sequence: SeqNo,
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        self.inner.handles.dropped(HandleKind::Snapshot);
    }
}

impl Snapshot {
    pub(crate) fn new(inner: &Arc<DbInner>) -> Snapshot {
        loop {
            // A secondary publishing a view stores its sequence number
            // before its super-versions; a snapshot that overlapped that
            // (the generation odd or moved) could pair a new sequence
            // number with old tables, so it is taken again. A primary's
            // generation stays 0.
            let generation = inner.view_generation.load(Ordering::SeqCst);
            if generation % 2 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let (default, trees, sequence) = Self::take(inner);
            if inner.view_generation.load(Ordering::SeqCst) == generation {
                inner.handles.made(HandleKind::Snapshot);
                return Snapshot {
                    inner: Arc::clone(inner),
                    default,
                    trees,
                    sequence,
                };
            }
        }
    }

    /// The super-versions, then the sequence number (see DbIterator::new).
    fn take(inner: &Arc<DbInner>) -> (TreeView, Vec<TreeView>, SeqNo) {
        let trees: Vec<_> = inner
            .trees
            .load()
            .iter()
            .map(|t| (Arc::clone(t), t.current.load_full()))
            .collect();
        let default = trees
            .iter()
            .find(|(t, _)| Arc::ptr_eq(t, &inner.default))
            .cloned()
            .unwrap_or_else(|| {
                let tree = Arc::clone(&inner.default);
                let sv = tree.current.load_full();
                (tree, sv)
            });
        (default, trees, inner.snapshot())
    }
}

impl Snapshot {
    /// The sequence number of the last write this snapshot sees.
    pub fn sequence(&self) -> u64 {
        self.sequence.0
    }

    /// The default keyspace's super-version.
    fn default_sv(&self) -> &Arc<SuperVersion> {
        &self.default.1
    }

    /// `keyspace` as of the snapshot: `None` when it was created after it.
    fn sv_of(&self, keyspace: &Keyspace) -> Option<(&Tree, &Arc<SuperVersion>)> {
        self.trees
            .iter()
            .find(|(tree, _)| Arc::ptr_eq(tree, keyspace.tree()))
            .map(|(tree, sv)| (tree.as_ref(), sv))
    }

    /// The value of `key` as of the snapshot.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Bytes>> {
        let key = key.as_ref();
        check_key(key)?;
        read::get_at(
            &self.inner,
            &self.default.0,
            self.default_sv(),
            self.sequence,
            key,
        )
    }

    /// The value of `key` in `keyspace` as of the snapshot (`None` in a
    /// keyspace created after it).
    pub fn get_in(&self, keyspace: &Keyspace, key: impl AsRef<[u8]>) -> Result<Option<Bytes>> {
        let key = key.as_ref();
        check_key(key)?;
        match self.sv_of(keyspace) {
            Some((tree, sv)) => read::get_at(&self.inner, tree, sv, self.sequence, key),
            None => Ok(None),
        }
    }

    /// The values of many keys as of the snapshot (see [`crate::Db::multi_get`]).
    pub fn multi_get<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<Option<Bytes>>> {
        let keys: Vec<&[u8]> = keys.iter().map(AsRef::as_ref).collect();
        for key in &keys {
            check_key(key)?;
        }
        read::multi_get_at(
            &self.inner,
            &self.default.0,
            self.default_sv(),
            self.sequence,
            &keys,
        )
    }

    /// The values of many keys of `keyspace` as of the snapshot.
    pub fn multi_get_in<K: AsRef<[u8]>>(
        &self,
        keyspace: &Keyspace,
        keys: &[K],
    ) -> Result<Vec<Option<Bytes>>> {
        let keys: Vec<&[u8]> = keys.iter().map(AsRef::as_ref).collect();
        for key in &keys {
            check_key(key)?;
        }
        match self.sv_of(keyspace) {
            Some((tree, sv)) => read::multi_get_at(&self.inner, tree, sv, self.sequence, &keys),
            None => Ok(vec![None; keys.len()]),
        }
    }

    /// Every entry as of the snapshot, in ascending key order.
    pub fn iter(&self) -> DbIterator {
        self.scan(&self.default.0, self.default_sv(), unbounded())
    }

    /// Entries whose keys fall in `range`, as of the snapshot.
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> DbIterator {
        self.scan(&self.default.0, self.default_sv(), owned_range(range))
    }

    /// Entries whose keys start with `prefix`, as of the snapshot.
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> DbIterator {
        self.scan(
            &self.default.0,
            self.default_sv(),
            prefix_range(prefix.as_ref()),
        )
    }

    /// Every entry of `keyspace` as of the snapshot, in ascending key order.
    pub fn iter_in(&self, keyspace: &Keyspace) -> DbIterator {
        self.scan_in(keyspace, unbounded())
    }

    /// Entries of `keyspace` whose keys fall in `range`, as of the snapshot.
    pub fn range_in<K: AsRef<[u8]>, R: RangeBounds<K>>(
        &self,
        keyspace: &Keyspace,
        range: R,
    ) -> DbIterator {
        self.scan_in(keyspace, owned_range(range))
    }

    /// Entries of `keyspace` whose keys start with `prefix`, as of the snapshot.
    pub fn prefix_in(&self, keyspace: &Keyspace, prefix: impl AsRef<[u8]>) -> DbIterator {
        self.scan_in(keyspace, prefix_range(prefix.as_ref()))
    }

    /// The entry with the smallest key, as of the snapshot.
    pub fn first_key_value(&self) -> Result<Option<(Bytes, Bytes)>> {
        self.iter().next().transpose()
    }

    /// The entry with the largest key, as of the snapshot.
    pub fn last_key_value(&self) -> Result<Option<(Bytes, Bytes)>> {
        self.iter().next_back().transpose()
    }

    fn scan(
        &self,
        tree: &Tree,
        sv: &Arc<SuperVersion>,
        range: (Bound<Vec<u8>>, Bound<Vec<u8>>),
    ) -> DbIterator {
        tree.reads.add(|t| &t.scans, 1);
        DbIterator::at(
            &self.inner,
            &tree.opts.load(),
            Arc::clone(sv),
            self.sequence,
            range,
        )
    }

    fn scan_in(&self, keyspace: &Keyspace, range: (Bound<Vec<u8>>, Bound<Vec<u8>>)) -> DbIterator {
        match self.sv_of(keyspace) {
            Some((tree, sv)) => self.scan(tree, sv, range),
            // Created after the snapshot: empty at it.
            None => self.scan(keyspace.tree(), &Arc::new(SuperVersion::empty()), range),
        }
    }
}

fn unbounded() -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    (Bound::Unbounded, Bound::Unbounded)
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot")
            .field("sequence", &self.sequence.0)
            .finish_non_exhaustive()
    }
}
