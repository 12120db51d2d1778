//! A tokio-friendly facade over [`Db`] (cargo feature `tokio`).
//!
//! Owns: [`AsyncDb`], a clone-able handle whose methods run the blocking
//! engine calls on tokio's blocking pool, and [`AsyncKeyspace`], the same
//! for one keyspace (their scans: [`AsyncIter`]).
//! Must never: block an async worker thread on disk I/O or a lock.

use std::sync::Arc;

use bytes::Bytes;

use crate::async_iter::AsyncIter;
use crate::batch::WriteBatch;
use crate::db::{CheckpointInfo, Db, Keyspace, Stats};
use crate::error::{Error, Result};
use crate::memtable::MemtableRangeStats;
use crate::options::{Options, WriteOptions};

/// An async handle; clones share one engine.
///
/// `Send + Sync` (checked by `tests/api_traits.rs`): clone it into tasks.
#[derive(Clone, Debug)]
pub struct AsyncDb {
    pub(crate) db: Arc<Db>,
}

impl AsyncDb {
    /// Wraps an open database.
    pub fn new(db: Db) -> AsyncDb {
        AsyncDb { db: Arc::new(db) }
    }

    /// Opens (creating if missing) the database at `path` with `opts`.
    pub async fn open_with(path: impl AsRef<std::path::Path>, opts: Options) -> Result<AsyncDb> {
        let path = path.as_ref().to_path_buf();
        let db = blocking(move || Db::open_with(path, opts)).await?;
        Ok(AsyncDb::new(db))
    }

    /// The shared synchronous handle.
    pub fn blocking_handle(&self) -> &Arc<Db> {
        &self.db
    }

    /// See [`Db::put`].
    pub async fn put(&self, key: impl Into<Bytes>, value: impl Into<Bytes>) -> Result<()> {
        self.put_with(key, value, WriteOptions::new()).await
    }

    /// See [`Db::put_with`].
    pub async fn put_with(
        &self,
        key: impl Into<Bytes>,
        value: impl Into<Bytes>,
        options: WriteOptions,
    ) -> Result<()> {
        self.default_keyspace().put_with(key, value, options).await
    }

    /// See [`Db::delete_with`].
    pub async fn delete_with(&self, key: impl Into<Bytes>, options: WriteOptions) -> Result<()> {
        self.default_keyspace().delete_with(key, options).await
    }

    /// The default keyspace's handle: the keys `put`, `get` and the like
    /// of this handle reach.
    fn default_keyspace(&self) -> AsyncKeyspace {
        AsyncKeyspace {
            keyspace: self.db.default_keyspace(),
        }
    }

    /// See [`Db::get`].
    pub async fn get(&self, key: impl Into<Bytes>) -> Result<Option<Bytes>> {
        let (db, key) = (Arc::clone(&self.db), key.into());
        blocking(move || db.get(key)).await
    }

    /// See [`Db::multi_get`].
    pub async fn multi_get(&self, keys: Vec<Bytes>) -> Result<Vec<Option<Bytes>>> {
        let db = Arc::clone(&self.db);
        blocking(move || db.multi_get(&keys)).await
    }

    /// See [`Db::delete`].
    pub async fn delete(&self, key: impl Into<Bytes>) -> Result<()> {
        self.delete_with(key, WriteOptions::new()).await
    }

    /// See [`Db::merge`].
    pub async fn merge(&self, key: impl Into<Bytes>, operand: impl Into<Bytes>) -> Result<()> {
        let (db, key, operand) = (Arc::clone(&self.db), key.into(), operand.into());
        blocking(move || db.merge(key, operand)).await
    }

    /// See [`Db::delete_range`]. The range is checked before anything runs
    /// on the blocking pool.
    pub async fn delete_range<K: AsRef<[u8]>, R: std::ops::RangeBounds<K>>(
        &self,
        range: R,
    ) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.delete_range(range);
        batch.check_limits()?;
        if batch.is_empty() {
            return Ok(());
        }
        self.write(batch).await
    }

    /// See [`Db::write`].
    pub async fn write(&self, batch: WriteBatch) -> Result<()> {
        let db = Arc::clone(&self.db);
        blocking(move || db.write(batch)).await
    }

    /// See [`Db::write_with`].
    pub async fn write_with(&self, batch: WriteBatch, options: WriteOptions) -> Result<()> {
        let db = Arc::clone(&self.db);
        blocking(move || db.write_with(batch, options)).await
    }

    /// See [`Db::persist`].
    pub async fn persist(&self) -> Result<()> {
        let db = Arc::clone(&self.db);
        blocking(move || db.persist()).await
    }

    /// See [`Db::flush`].
    pub async fn flush(&self) -> Result<()> {
        let db = Arc::clone(&self.db);
        blocking(move || db.flush()).await
    }

    /// See [`Db::compact`].
    pub async fn compact(&self) -> Result<()> {
        let db = Arc::clone(&self.db);
        blocking(move || db.compact()).await
    }

    /// See [`Db::live_tables`]: answered from memory, so not async.
    pub fn live_tables(&self) -> Vec<crate::events::TableMetadata> {
        self.db.live_tables()
    }

    /// See [`Db::key_may_exist`]: answered from memory, so not async.
    pub fn key_may_exist(&self, key: impl AsRef<[u8]>) -> bool {
        self.db.key_may_exist(key)
    }

    /// See [`Db::verify_checksums`].
    pub async fn verify_checksums(&self) -> Result<crate::db::VerifyStats> {
        let db = Arc::clone(&self.db);
        blocking(move || db.verify_checksums()).await
    }

    /// See [`Db::compact_range`].
    pub async fn compact_range<K: AsRef<[u8]>, R: std::ops::RangeBounds<K>>(
        &self,
        range: R,
    ) -> Result<()> {
        self.default_keyspace().compact_range(range).await
    }

    /// See [`Db::resume`].
    pub async fn resume(&self) -> Result<()> {
        let db = Arc::clone(&self.db);
        blocking(move || db.resume()).await
    }

    /// See [`Db::stats`].
    pub fn stats(&self) -> Stats {
        self.db.stats()
    }

    /// See [`Db::approximate_size`]. Not `async`, as [`AsyncDb::stats`]:
    /// it reads the tables' in-memory indexes, no file and no lock.
    pub fn approximate_size<K: AsRef<[u8]>, R: std::ops::RangeBounds<K>>(
        &self,
        range: R,
    ) -> Result<u64> {
        self.db.approximate_size(range)
    }

    /// See [`Db::approximate_memtable_stats`]. Not `async`, as
    /// [`AsyncDb::stats`]: it walks a few levels of the memtables' towers,
    /// no file and no lock.
    pub fn approximate_memtable_stats<K: AsRef<[u8]>, R: std::ops::RangeBounds<K>>(
        &self,
        range: R,
    ) -> Result<MemtableRangeStats> {
        self.db.approximate_memtable_stats(range)
    }

    /// Opens the keyspace `name`, creating it (empty) if the database has
    /// none of that name (see [`Db::keyspace`]).
    pub async fn keyspace(&self, name: &str) -> Result<AsyncKeyspace> {
        let (db, name) = (Arc::clone(&self.db), name.to_owned());
        let keyspace = blocking(move || db.keyspace(&name)).await?;
        Ok(AsyncKeyspace { keyspace })
    }

    /// Every entry of the default keyspace as of now, in key order from
    /// either end (see [`Db::iter`]), read on the blocking pool.
    pub fn iter(&self) -> AsyncIter {
        self.default_keyspace().iter()
    }

    /// The default keyspace's entries whose keys fall in `range`, as of
    /// now (see [`Db::range`]).
    pub fn range<K: AsRef<[u8]>, R: std::ops::RangeBounds<K>>(&self, range: R) -> AsyncIter {
        self.default_keyspace().range(range)
    }

    /// The default keyspace's entries whose keys start with `prefix`, as
    /// of now (see [`Db::prefix`]).
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> AsyncIter {
        self.default_keyspace().prefix(prefix)
    }

    /// See [`Db::checkpoint`].
    pub async fn checkpoint(&self, dir: impl AsRef<std::path::Path>) -> Result<CheckpointInfo> {
        let (db, dir) = (Arc::clone(&self.db), dir.as_ref().to_path_buf());
        blocking(move || db.checkpoint(dir)).await
    }
}

/// An async handle on one keyspace of an [`AsyncDb`] (see [`Keyspace`]);
/// clones share it. A batch across keyspaces is a [`WriteBatch`] built
/// with [`AsyncKeyspace::blocking_handle`]s and written by
/// [`AsyncDb::write`].
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> siftdb::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// use siftdb::{AsyncDb, Options, WriteBatch};
/// let db = AsyncDb::open_with(dir.path(), Options::default()).await?;
/// let users = db.keyspace("users").await?;
/// let emails = db.keyspace("emails").await?;
/// let mut batch = WriteBatch::new();
/// batch.put_in(users.blocking_handle(), "u1", "Ada");
/// batch.put_in(emails.blocking_handle(), "ada@example.com", "u1");
/// db.write(batch).await?; // both or neither
/// assert_eq!(users.get("u1").await?.as_deref(), Some(&b"Ada"[..]));
/// assert_eq!(emails.get("u1").await?, None);
/// # Ok(())
/// # }
/// ```
///
/// `Send + Sync` (checked by `tests/api_traits.rs`): clone it into tasks.
#[derive(Clone, Debug)]
pub struct AsyncKeyspace {
    keyspace: Keyspace,
}

impl AsyncKeyspace {
    /// The keyspace's name.
    pub fn name(&self) -> &str {
        self.keyspace.name()
    }

    /// The synchronous handle (for [`WriteBatch::put_in`] and the like).
    pub fn blocking_handle(&self) -> &Keyspace {
        &self.keyspace
    }

    /// See [`Keyspace::put`].
    pub async fn put(&self, key: impl Into<Bytes>, value: impl Into<Bytes>) -> Result<()> {
        self.put_with(key, value, WriteOptions::new()).await
    }

    /// See [`Keyspace::put_with`].
    pub async fn put_with(
        &self,
        key: impl Into<Bytes>,
        value: impl Into<Bytes>,
        options: WriteOptions,
    ) -> Result<()> {
        let (ks, key, value) = (self.keyspace.clone(), key.into(), value.into());
        blocking(move || ks.put_with(key, value, options)).await
    }

    /// See [`Keyspace::get`].
    pub async fn get(&self, key: impl Into<Bytes>) -> Result<Option<Bytes>> {
        let (ks, key) = (self.keyspace.clone(), key.into());
        blocking(move || ks.get(key)).await
    }

    /// See [`Keyspace::multi_get`].
    pub async fn multi_get(&self, keys: Vec<Bytes>) -> Result<Vec<Option<Bytes>>> {
        let ks = self.keyspace.clone();
        blocking(move || ks.multi_get(&keys)).await
    }

    /// See [`Keyspace::delete`].
    pub async fn delete(&self, key: impl Into<Bytes>) -> Result<()> {
        self.delete_with(key, WriteOptions::new()).await
    }

    /// See [`Keyspace::merge`].
    pub async fn merge(&self, key: impl Into<Bytes>, operand: impl Into<Bytes>) -> Result<()> {
        let (ks, key, operand) = (self.keyspace.clone(), key.into(), operand.into());
        blocking(move || ks.merge(key, operand)).await
    }

    /// See [`Keyspace::delete_with`].
    pub async fn delete_with(&self, key: impl Into<Bytes>, options: WriteOptions) -> Result<()> {
        let (ks, key) = (self.keyspace.clone(), key.into());
        blocking(move || ks.delete_with(key, options)).await
    }

    /// See [`Keyspace::delete_range`]. The range is checked before
    /// anything runs on the blocking pool.
    pub async fn delete_range<K: AsRef<[u8]>, R: std::ops::RangeBounds<K>>(
        &self,
        range: R,
    ) -> Result<()> {
        let Some((start, end)) = crate::range_tombstone::normalize_range(&range)? else {
            return Ok(());
        };
        let ks = self.keyspace.clone();
        blocking(move || match end {
            Some(end) => ks.delete_range(start..end),
            None => ks.delete_range(start..),
        })
        .await
    }

    /// See [`Keyspace::compact`].
    pub async fn compact(&self) -> Result<()> {
        let ks = self.keyspace.clone();
        blocking(move || ks.compact()).await
    }

    /// See [`Keyspace::live_tables`]: answered from memory, so not async.
    pub fn live_tables(&self) -> Vec<crate::events::TableMetadata> {
        self.keyspace.live_tables()
    }

    /// See [`Keyspace::key_may_exist`]: answered from memory, so not async.
    pub fn key_may_exist(&self, key: impl AsRef<[u8]>) -> bool {
        self.keyspace.key_may_exist(key)
    }

    /// See [`Keyspace::verify_checksums`].
    pub async fn verify_checksums(&self) -> Result<crate::db::VerifyStats> {
        let ks = self.keyspace.clone();
        blocking(move || ks.verify_checksums()).await
    }

    /// Every entry of this keyspace as of now (see [`Keyspace::iter`]),
    /// read on the blocking pool.
    pub fn iter(&self) -> AsyncIter {
        AsyncIter::new(self.keyspace.iter())
    }

    /// This keyspace's entries whose keys fall in `range`, as of now.
    pub fn range<K: AsRef<[u8]>, R: std::ops::RangeBounds<K>>(&self, range: R) -> AsyncIter {
        AsyncIter::new(self.keyspace.range(range))
    }

    /// This keyspace's entries whose keys start with `prefix`, as of now.
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> AsyncIter {
        AsyncIter::new(self.keyspace.prefix(prefix))
    }

    /// See [`Keyspace::compact_range`].
    pub async fn compact_range<K: AsRef<[u8]>, R: std::ops::RangeBounds<K>>(
        &self,
        range: R,
    ) -> Result<()> {
        let range = crate::db::owned_range(range);
        let ks = self.keyspace.clone();
        blocking(move || ks.compact_range(range)).await
    }

    /// See [`Keyspace::approximate_size`]. Not `async`, as
    /// [`AsyncDb::stats`]: it reads the tables' in-memory indexes, no file
    /// and no lock.
    pub fn approximate_size<K: AsRef<[u8]>, R: std::ops::RangeBounds<K>>(
        &self,
        range: R,
    ) -> Result<u64> {
        self.keyspace.approximate_size(range)
    }

    /// See [`Keyspace::approximate_memtable_stats`]. Not `async`, as
    /// [`AsyncDb::stats`]: it walks a few levels of the memtables' towers,
    /// no file and no lock.
    pub fn approximate_memtable_stats<K: AsRef<[u8]>, R: std::ops::RangeBounds<K>>(
        &self,
        range: R,
    ) -> Result<MemtableRangeStats> {
        self.keyspace.approximate_memtable_stats(range)
    }
}

pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Error::Panicked(format!("blocking task failed: {e}")))?
}
