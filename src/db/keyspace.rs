//! Keyspaces: named, separate sets of keys in one database.
//!
//! Owns: the public [`Keyspace`] handle (over a `Tree`, in `tree.rs`), and creating, listing and dropping keyspaces
//! (their settings: `keyspace_options.rs`).
//! Must never: let one keyspace's keys reach another's memtable or tables,
//! hand out a keyspace id twice (a dropped keyspace's records in an old log
//! would come back under the new one), or let a handle of a dropped
//! keyspace read or write anything.
//!
//! Every keyspace shares the database's one log and one sequence of
//! sequence numbers, so a [`WriteBatch`](crate::WriteBatch) across keyspaces is one log
//! record: whole or absent after a crash. Each has its own memtable, levels
//! and tables; a log goes only once every keyspace with records in it has
//! flushed them (see `write::rotate` and `docs/design.md`, "Keyspaces").

use std::ops::RangeBounds;
use std::sync::Arc;

use bytes::Bytes;

use crate::batch::KeyspaceId;
use crate::db::checks::check_writable;
use crate::db::compaction_scope::CompactionScope;
use crate::db::handle::Db;
use crate::db::handle_counts::HandleKind;
use crate::db::inner::DbInner;
use crate::db::iter::DbIterator;
use crate::db::keyspace_options::KeyspaceOptions;
use crate::db::keyspace_ref::KeyspaceRef;
use crate::db::tree::Tree;
use crate::db::{manual, write};
use crate::error::{Error, Result};
use crate::manifest::{valid_keyspace_name, DEFAULT_KEYSPACE_ID, DEFAULT_KEYSPACE_NAME};
use crate::memtable::MemtableRangeStats;
use crate::options::WriteOptions;

/// A named keyspace of a [`Db`]: its own keys, memtable and tables, in the
/// database's one log. `Clone + Send + Sync` (checked by
/// `tests/api_traits.rs`); cheap to clone.
///
/// Like a [`crate::Snapshot`], it keeps the database's directory (and its
/// lock) while it lives: drop it before opening the database again. Once
/// the `Db` is closed or dropped its writes are refused with
/// [`Error::Closed`]; its reads go on.
///
/// ```
/// use siftdb::{Db, WriteBatch};
///
/// # let dir = tempfile::tempdir().unwrap();
/// let db = Db::open(dir.path())?;
/// let users = db.keyspace("users")?;
/// let index = db.keyspace("users-by-email")?;
/// // One batch across keyspaces: whole or absent after a crash.
/// let mut batch = WriteBatch::new();
/// batch.put_in(&users, b"u1", b"ann@example.com");
/// batch.put_in(&index, b"ann@example.com", b"u1");
/// db.write(batch)?;
/// assert_eq!(index.get(b"ann@example.com")?.as_deref(), Some(&b"u1"[..]));
/// assert_eq!(db.get(b"u1")?, None); // the default keyspace is another one
/// assert_eq!(db.keyspaces(), ["default", "users", "users-by-email"]);
/// # Ok::<(), siftdb::Error>(())
/// ```
pub struct Keyspace {
    inner: Arc<DbInner>,
    tree: Arc<Tree>,
}

impl Clone for Keyspace {
    fn clone(&self) -> Keyspace {
        Keyspace::of(Arc::clone(&self.inner), Arc::clone(&self.tree))
    }
}

/// What a [`WriteBatch`](crate::WriteBatch)'s `_in` methods take: the keyspace's id.
impl From<&Keyspace> for KeyspaceId {
    fn from(keyspace: &Keyspace) -> KeyspaceId {
        KeyspaceId::new(keyspace.id())
    }
}

impl Drop for Keyspace {
    fn drop(&mut self) {
        self.inner.handles.dropped(HandleKind::Keyspace);
    }
}

impl Keyspace {
    /// The handle of `tree` in the database `inner` (every handle is made
    /// here: `Db::close` counts them).
    pub(crate) fn of(inner: Arc<DbInner>, tree: Arc<Tree>) -> Keyspace {
        inner.handles.made(HandleKind::Keyspace);
        Keyspace { inner, tree }
    }

    pub(crate) fn id(&self) -> u32 {
        self.tree.id
    }

    pub(crate) fn tree(&self) -> &Arc<Tree> {
        &self.tree
    }

    pub(crate) fn inner(&self) -> &Arc<DbInner> {
        &self.inner
    }

    /// This keyspace, borrowed for one key-value call (written once, in
    /// `keyspace_ref.rs`, for `Db` too).
    fn keyspace_ref(&self) -> KeyspaceRef<'_> {
        KeyspaceRef {
            inner: &self.inner,
            tree: &self.tree,
        }
    }

    /// The default keyspace of the database `inner`.
    pub(crate) fn default_of(inner: &Arc<DbInner>) -> Keyspace {
        Keyspace::of(Arc::clone(inner), Arc::clone(&inner.default))
    }

    /// The keyspace's name.
    pub fn name(&self) -> &str {
        &self.tree.name
    }

    /// Stores `value` under `key` in this keyspace.
    pub fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        self.put_with(key, value, WriteOptions::new())
    }

    /// Removes `key` from this keyspace (a no-op when absent).
    pub fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        self.delete_with(key, WriteOptions::new())
    }

    /// [`Db::merge`] in this keyspace (with this keyspace's merge operator).
    pub fn merge(&self, key: impl AsRef<[u8]>, operand: impl AsRef<[u8]>) -> Result<()> {
        self.keyspace_ref().merge(key.as_ref(), operand.as_ref())
    }

    /// [`Keyspace::put`] with options of its own: with
    /// [`WriteOptions::sync`]`(true)` the value is on disk before this
    /// returns (see [`Db::put_with`]).
    pub fn put_with(
        &self,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
        options: WriteOptions,
    ) -> Result<()> {
        self.keyspace_ref()
            .put_with(key.as_ref(), value.as_ref(), options)
    }

    /// [`Keyspace::delete`] with options of its own (see
    /// [`Keyspace::put_with`]).
    pub fn delete_with(&self, key: impl AsRef<[u8]>, options: WriteOptions) -> Result<()> {
        self.keyspace_ref().delete_with(key.as_ref(), options)
    }

    /// Deletes every key of this keyspace in `range` with one range
    /// tombstone (see [`Db::delete_range`]).
    pub fn delete_range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Result<()> {
        self.keyspace_ref().delete_range(range)
    }

    /// Flushes the database's memtables, then compacts every table of this
    /// keyspace (and of no other) into one sorted run at the deepest level
    /// it uses; returns when done. As [`Db::compact`] for one keyspace
    /// (RocksDB's `CompactRange` on one column family): range tombstones
    /// and the keys they cover, overwritten values and deletions are gone
    /// from its files afterwards. Refused with `Corruption` naming the
    /// table while one of its tables could not be opened.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = siftdb::Db::open(dir.path())?;
    /// let events = db.keyspace("events")?;
    /// for i in 0..100 {
    ///     events.put(format!("e{i:03}"), "payload")?;
    /// }
    /// events.delete_range("e000".."e090")?;
    /// events.compact()?;
    /// assert_eq!(events.iter().count(), 10);
    /// # Ok::<(), siftdb::Error>(())
    /// ```
    pub fn compact(&self) -> Result<()> {
        self.tree.check_live()?;
        manual::compact(&self.inner, CompactionScope::Keyspace(self.tree.id))
    }

    /// This keyspace's tables now (see [`Db::live_tables`]); none once it
    /// was dropped.
    pub fn live_tables(&self) -> Vec<crate::events::TableMetadata> {
        if self.tree.check_live().is_err() {
            return Vec::new();
        }
        self.tree.live_tables()
    }

    /// [`Db::verify_checksums`] for this keyspace's tables only.
    pub fn verify_checksums(&self) -> Result<crate::db::verify::VerifyStats> {
        self.tree.check_live()?;
        crate::db::verify::verify_trees([&self.tree])
    }

    /// [`Keyspace::compact`] for the keys in `range` only (RocksDB's
    /// `CompactRange` with bounds on one column family): flushes the
    /// database's memtables, then merges this keyspace's tables that hold
    /// keys in `range`, with every table they overlap, into one sorted run
    /// at the deepest level among them; returns when done. Tables wholly
    /// outside the range stay as they are; a table reaching past an end of
    /// the range is merged whole. Deletions, range tombstones and
    /// overwritten values of the range leave its files (nothing deeper
    /// overlaps the run). An empty range compacts nothing. Refused with
    /// `Corruption` while a table of the keyspace could not be opened.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = siftdb::Db::open(dir.path())?;
    /// let events = db.keyspace("events")?;
    /// for i in 0..100 {
    ///     events.put(format!("e{i:03}"), "payload")?;
    /// }
    /// events.delete_range("e000".."e050")?;
    /// events.compact_range("e000".."e050")?; // the deleted half's space back
    /// assert_eq!(events.range("e000".."e050").count(), 0);
    /// # Ok::<(), siftdb::Error>(())
    /// ```
    pub fn compact_range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Result<()> {
        self.keyspace_ref().compact_range(range)
    }

    /// The latest value of `key` in this keyspace, or `None`.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Bytes>> {
        self.keyspace_ref().get(key.as_ref())
    }

    /// [`Db::key_may_exist`] in this keyspace (false once it was dropped:
    /// it holds nothing).
    pub fn key_may_exist(&self, key: impl AsRef<[u8]>) -> bool {
        self.keyspace_ref().key_may_exist(key.as_ref())
    }

    /// The values of many keys of this keyspace as of one moment (see
    /// [`Db::multi_get`]).
    pub fn multi_get<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<Option<Bytes>>> {
        self.keyspace_ref().multi_get(keys)
    }

    /// Every entry of this keyspace, in ascending key order (reverse it
    /// with `.rev()`), as of now.
    pub fn iter(&self) -> DbIterator {
        self.keyspace_ref().iter()
    }

    /// Entries of this keyspace whose keys fall in `range`, as of now.
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> DbIterator {
        self.keyspace_ref().range(range)
    }

    /// About how many bytes of disk the keys of this keyspace in `range`
    /// take in its tables, for deciding where to split a shard or showing
    /// usage (RocksDB's `GetApproximateSizes`, fjall's `disk_space`). Each
    /// live table whose key range meets `range` counts whole when it lies
    /// inside, else the bytes between where its index places the range's
    /// ends: exact to about a data block at each end of each table, and
    /// without reading any data block (the indexes are in memory).
    ///
    /// It counts tables as they are on disk: compressed, with older
    /// versions, deletions and range-deleted keys until a compaction drops
    /// them, and with the index, filter and properties of a table counted
    /// with its last keys. Memtables are not counted (nor by RocksDB's
    /// default): [`Keyspace::approximate_memtable_stats`] sizes the range's
    /// share of them, or call [`Db::flush`] first; nor
    /// are tables a snapshot or scan still holds after a compaction
    /// replaced them. A table that could not be opened counts whole when
    /// its key range meets `range`. An empty or reversed range is 0; a
    /// dropped keyspace's handle is refused with `InvalidArgument`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = siftdb::Db::open(dir.path())?;
    /// let events = db.keyspace("events")?;
    /// for i in 0..2000 {
    ///     events.put(format!("e{i:04}"), [7u8; 100])?;
    /// }
    /// // The whole keyspace: `..` names no key type, so the call does.
    /// assert_eq!(events.approximate_size::<&str, _>(..)?, 0); // in the memtable
    /// db.flush()?;
    /// let all = events.approximate_size::<&str, _>(..)?;
    /// let first_half = events.approximate_size("e0000".."e1000")?;
    /// assert!(all > 0 && first_half < all);
    /// assert_eq!(events.approximate_size("f"..)?, 0); // no key there
    /// # Ok::<(), siftdb::Error>(())
    /// ```
    pub fn approximate_size<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Result<u64> {
        self.keyspace_ref().approximate_size(range)
    }

    /// About how many entries of this keyspace in `range` are in its
    /// memtables, not flushed yet, and the memory they take: the memtable
    /// side of [`Keyspace::approximate_size`] (RocksDB's
    /// `GetApproximateMemTableStats`). The active memtable and those
    /// waiting for a flush are summed; every version counts (puts and
    /// deletes; range deletes do not), and the bytes are each memtable's
    /// average bytes an entry (key, value, bookkeeping, as it counts its
    /// size against [`Options::memtable_bytes`](crate::options::Options::memtable_bytes)) times its count.
    ///
    /// The count is estimated without walking the range: from the
    /// skiplist's towers, at the highest level holding 400 or more of the
    /// range's entries, scaled by 4 a level (a node reaches each level
    /// above with probability 1/4). A memtable's count is exact when its
    /// part of the range holds fewer than 400 entries, else off by a
    /// relative standard error of at most 5% (within 25% all but about
    /// once in a million calls). On average it steps over a few thousand
    /// nodes at the most, whatever the memtable's or the range's size
    /// (`benches/memtable.rs`, `memtable_range_count`: about 8 µs on a
    /// 400,000-entry memtable, where walking a tenth of it takes 3.4 ms).
    /// Writes racing the call may or may not be counted. The call reads
    /// the memtables of one moment; a flush between it and a call of
    /// [`Keyspace::approximate_size`] may leave entries in both or
    /// neither. An empty or reversed range is zero; a dropped keyspace's
    /// handle is refused with `InvalidArgument`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = siftdb::Db::open(dir.path())?;
    /// let events = db.keyspace("events")?;
    /// for i in 0..2000 {
    ///     events.put(format!("e{i:04}"), [7u8; 100])?;
    /// }
    /// let all = events.approximate_memtable_stats::<&str, _>(..)?;
    /// assert!(all.entries.abs_diff(2000) <= 500 && all.bytes > 1000 * 100);
    /// let few = events.approximate_memtable_stats("e0100".."e0200")?;
    /// assert_eq!(few.entries, 100); // fewer than 400: counted exactly
    /// db.flush()?;
    /// assert_eq!(events.approximate_memtable_stats::<&str, _>(..)?.entries, 0);
    /// assert!(events.approximate_size::<&str, _>(..)? > 0);
    /// # Ok::<(), siftdb::Error>(())
    /// ```
    pub fn approximate_memtable_stats<K: AsRef<[u8]>, R: RangeBounds<K>>(
        &self,
        range: R,
    ) -> Result<MemtableRangeStats> {
        self.keyspace_ref().approximate_memtable_stats(range)
    }

    /// Entries of this keyspace whose keys start with `prefix`, as of now.
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> DbIterator {
        self.keyspace_ref().prefix(prefix.as_ref())
    }

    /// The entry with the smallest key, as of now (`None` when empty).
    pub fn first_key_value(&self) -> Result<Option<(Bytes, Bytes)>> {
        self.keyspace_ref().first_key_value()
    }

    /// The entry with the largest key, as of now (`None` when empty).
    pub fn last_key_value(&self) -> Result<Option<(Bytes, Bytes)>> {
        self.keyspace_ref().last_key_value()
    }
}

impl std::fmt::Debug for Keyspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keyspace")
            .field("name", &self.tree.name)
            .field("id", &self.tree.id)
            .finish()
    }
}

impl Db {
    /// Opens the keyspace `name` with the settings it has (those stored
    /// for it by [`Db::keyspace_with`], the database's for the rest),
    /// creating it (empty) with the database's settings if the database
    /// has none of that name. Names are 1 to 255
    /// bytes of `[A-Za-z0-9_.-]`; `default` is the keyspace the methods of
    /// `Db` itself act on.
    pub fn keyspace(&self, name: &str) -> Result<Keyspace> {
        self.open_keyspace(name, None)
    }

    /// [`Db::keyspace`] with settings of the keyspace's own, applied over
    /// its current ones (a field not given keeps its value) and, for the
    /// data settings, stored in the manifest before this returns: the
    /// keyspace keeps them when the database is opened again. The code
    /// among them (compaction filter, merge operator, a custom prefix
    /// extractor) lasts until the database is closed: give it at each
    /// open. See [`KeyspaceOptions`]. On a read-only database the settings
    /// apply until it is closed and nothing is stored.
    pub fn keyspace_with(&self, name: &str, options: KeyspaceOptions) -> Result<Keyspace> {
        options.apply(&self.inner.opts)?;
        let keyspace = self.open_keyspace(name, Some(&options))?;
        if let Some(extractor) = options.custom_prefix_extractor() {
            // The keyspace's tables opened before it was given (all of
            // them, at an open) find it when their filter is first asked.
            self.inner.tables.keyspace_extractors.remember(extractor);
        }
        Ok(keyspace)
    }

    fn open_keyspace(&self, name: &str, given: Option<&KeyspaceOptions>) -> Result<Keyspace> {
        if !valid_keyspace_name(name) {
            return Err(Error::invalid(format!(
                "keyspace name {name:?} is not 1-255 bytes of [A-Za-z0-9_.-]"
            )));
        }
        let inner = &self.inner;
        let tree = match inner.tree_named(name) {
            Some(tree) => {
                if let Some(given) = given {
                    write::update_keyspace_options(inner, &tree, given)?;
                }
                tree
            }
            None => {
                check_writable(&self.inner)?;
                write::create_keyspace(inner, name, given.cloned().unwrap_or_default())?
            }
        };
        Ok(Keyspace::of(Arc::clone(inner), tree))
    }

    /// The names of every keyspace, `default` first, then in the order
    /// they were created.
    pub fn keyspaces(&self) -> Vec<String> {
        self.inner
            .trees
            .load()
            .iter()
            .map(|t| t.name.clone())
            .collect()
    }

    /// Drops the keyspace `name` and everything in it: durable when this
    /// returns (a crash after it never brings the keys back); its files go
    /// once no scan or snapshot reads them. Handles of it are refused from
    /// then on; [`Db::keyspace`] with the same name makes a new, empty one.
    /// The `default` keyspace cannot be dropped; an unknown name is
    /// `InvalidArgument`.
    pub fn drop_keyspace(&self, name: &str) -> Result<()> {
        check_writable(&self.inner)?;
        if name == DEFAULT_KEYSPACE_NAME {
            return Err(Error::invalid("the default keyspace cannot be dropped"));
        }
        let Some(tree) = self.inner.tree_named(name) else {
            return Err(Error::invalid(format!("no keyspace is named {name:?}")));
        };
        debug_assert_ne!(tree.id, DEFAULT_KEYSPACE_ID);
        write::drop_keyspace(&self.inner, &tree)
    }

    /// The default keyspace as a [`Keyspace`] (what `Db`'s own methods act on).
    pub fn default_keyspace(&self) -> Keyspace {
        Keyspace::default_of(&self.inner)
    }
}
