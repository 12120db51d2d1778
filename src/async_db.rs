//! A tokio-friendly facade over [`Db`] (cargo feature `tokio`).
//!
//! Owns: [`AsyncDb`], a clone-able handle whose methods run the blocking
//! engine calls on tokio's blocking pool.
//! Must never: block an async worker thread on disk I/O or a lock.

use std::sync::Arc;

use bytes::Bytes;

use crate::batch::WriteBatch;
use crate::db::{Db, Stats};
use crate::error::{Error, Result};
use crate::options::{Options, WriteOptions};

/// An async handle; clones share one engine.
#[derive(Clone, Debug)]
pub struct AsyncDb {
    db: Arc<Db>,
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
        let (db, key, value) = (Arc::clone(&self.db), key.into(), value.into());
        blocking(move || db.put(key, value)).await
    }

    /// See [`Db::put_with`].
    pub async fn put_with(
        &self,
        key: impl Into<Bytes>,
        value: impl Into<Bytes>,
        options: WriteOptions,
    ) -> Result<()> {
        let (db, key, value) = (Arc::clone(&self.db), key.into(), value.into());
        blocking(move || db.put_with(key, value, options)).await
    }

    /// See [`Db::delete_with`].
    pub async fn delete_with(&self, key: impl Into<Bytes>, options: WriteOptions) -> Result<()> {
        let (db, key) = (Arc::clone(&self.db), key.into());
        blocking(move || db.delete_with(key, options)).await
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
        let (db, key) = (Arc::clone(&self.db), key.into());
        blocking(move || db.delete(key)).await
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

    /// See [`Db::resume`].
    pub async fn resume(&self) -> Result<()> {
        let db = Arc::clone(&self.db);
        blocking(move || db.resume()).await
    }

    /// See [`Db::stats`].
    pub fn stats(&self) -> Stats {
        self.db.stats()
    }
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Error::Panicked(format!("blocking task failed: {e}")))?
}
