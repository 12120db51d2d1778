//! Transactions for async callers (cargo feature `tokio`).
//!
//! Owns: [`AsyncTransaction`] (and `AsyncDb::transaction`, which makes
//! one), a [`Transaction`] whose reads and commit run on tokio's blocking
//! pool and whose writes (kept in memory until the commit) run in the
//! caller's task.
//! Must never: block an async worker thread on disk I/O or on a lock held
//! across it (the transaction's lock is a tokio lock: a task waits for it
//! without blocking its thread), or commit a transaction twice.

use std::ops::RangeBounds;
use std::sync::Arc;

use bytes::Bytes;
use tokio::sync::Mutex;

use crate::async_db::{blocking, AsyncDb, AsyncKeyspace};
use crate::async_iter::AsyncIter;
use crate::db::{Transaction, TransactionOptions};
use crate::error::{Error, Result};

/// A transaction (see [`Transaction`]: snapshot isolation, serializable
/// with [`crate::TransactionOptions::serializable`], or locking with
/// [`crate::TransactionOptions::pessimistic`]) for async callers, made
/// by [`crate::AsyncDb::transaction`]. Reads and the commit run on tokio's
/// blocking pool; puts and deletes only add to the transaction's own
/// writes (a locking transaction's wait for a write's row lock runs on the
/// blocking pool too). A read whose future is dropped still completes (its
/// key stays recorded for the commit's conflict check, or locked).
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> siftdb::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// let db = siftdb::AsyncDb::open_with(dir.path(), siftdb::Options::default()).await?;
/// db.put("stock", "3").await?;
/// loop {
///     let txn = db.transaction();
///     let stock: u32 = match txn.get_for_update("stock").await? {
///         Some(v) => std::str::from_utf8(&v).unwrap().parse().unwrap(),
///         None => 0,
///     };
///     txn.put("stock", (stock - 1).to_string()).await?;
///     txn.put("order:1", "one item").await?;
///     match txn.commit().await {
///         Err(siftdb::Error::Conflict) => continue, // another commit won: retry
///         other => break other?,
///     }
/// }
/// assert_eq!(db.get("stock").await?.as_deref(), Some(&b"2"[..]));
/// # Ok(())
/// # }
/// ```
///
/// `Send + Sync` (checked by `tests/api_traits.rs`): a task may move it
/// between threads across `.await`s.
pub struct AsyncTransaction {
    /// `None` once committed or rolled back.
    txn: Arc<Mutex<Option<Transaction>>>,
    /// A locking transaction (its writes wait for row locks, on the
    /// blocking pool).
    pessimistic: bool,
}

impl AsyncDb {
    /// Starts a transaction with snapshot isolation (see
    /// [`AsyncTransaction`] and [`crate::Db::transaction`]).
    pub fn transaction(&self) -> AsyncTransaction {
        AsyncTransaction::new(self.db.transaction())
    }

    /// Starts a transaction with `options` (e.g.
    /// [`TransactionOptions::serializable`]).
    pub fn transaction_with(&self, options: TransactionOptions) -> AsyncTransaction {
        AsyncTransaction::new(self.db.transaction_with(options))
    }
}

impl AsyncTransaction {
    fn new(txn: Transaction) -> AsyncTransaction {
        AsyncTransaction {
            pessimistic: txn.is_pessimistic(),
            txn: Arc::new(Mutex::new(Some(txn))),
        }
    }

    /// The value of `key` as this transaction sees it (see [`Transaction::get`]).
    pub async fn get(&self, key: impl Into<Bytes>) -> Result<Option<Bytes>> {
        let key = key.into();
        self.read(move |txn| txn.get(&key)).await
    }

    /// The value of `key` in `keyspace` as this transaction sees it.
    pub async fn get_in(
        &self,
        keyspace: &AsyncKeyspace,
        key: impl Into<Bytes>,
    ) -> Result<Option<Bytes>> {
        let (keyspace, key) = (keyspace.blocking_handle().clone(), key.into());
        self.read(move |txn| txn.get_in(&keyspace, &key)).await
    }

    /// [`AsyncTransaction::get`], and the key joins the keys checked at
    /// commit (see [`Transaction::get_for_update`]).
    pub async fn get_for_update(&self, key: impl Into<Bytes>) -> Result<Option<Bytes>> {
        let key = key.into();
        self.read(move |txn| txn.get_for_update(&key)).await
    }

    /// [`AsyncTransaction::get_for_update`] in `keyspace`.
    pub async fn get_for_update_in(
        &self,
        keyspace: &AsyncKeyspace,
        key: impl Into<Bytes>,
    ) -> Result<Option<Bytes>> {
        let (keyspace, key) = (keyspace.blocking_handle().clone(), key.into());
        self.read(move |txn| txn.get_for_update_in(&keyspace, &key))
            .await
    }

    /// The values of many keys, in the order asked.
    pub async fn multi_get(&self, keys: Vec<Bytes>) -> Result<Vec<Option<Bytes>>> {
        self.read(move |txn| txn.multi_get(&keys)).await
    }

    /// Entries whose keys fall in `range`, as this transaction sees them
    /// (see [`Transaction::range`]).
    pub async fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Result<AsyncIter> {
        let guard = self.txn.lock().await;
        Ok(AsyncIter::new(live(guard.as_ref())?.range(range)))
    }

    /// Entries of `keyspace` whose keys fall in `range`, as this
    /// transaction sees them.
    pub async fn range_in<K: AsRef<[u8]>, R: RangeBounds<K>>(
        &self,
        keyspace: &AsyncKeyspace,
        range: R,
    ) -> Result<AsyncIter> {
        let guard = self.txn.lock().await;
        let scan = live(guard.as_ref())?.range_in(keyspace.blocking_handle(), range);
        Ok(AsyncIter::new(scan))
    }

    /// Entries whose keys start with `prefix`, as this transaction sees them.
    pub async fn prefix(&self, prefix: impl AsRef<[u8]>) -> Result<AsyncIter> {
        let guard = self.txn.lock().await;
        Ok(AsyncIter::new(live(guard.as_ref())?.prefix(prefix)))
    }

    /// Stores `value` under `key` when the transaction commits.
    pub async fn put(&self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        self.lock_first(None, key.as_ref()).await?;
        self.write(|txn| txn.put(key, value)).await
    }

    /// Stores `value` under `key` in `keyspace` when the transaction commits.
    pub async fn put_in(
        &self,
        keyspace: &AsyncKeyspace,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> Result<()> {
        self.lock_first(Some(keyspace), key.as_ref()).await?;
        self.write(|txn| txn.put_in(keyspace.blocking_handle(), key, value))
            .await
    }

    /// Adds a merge operand for `key` (see [`Transaction::merge`]).
    pub async fn merge(&self, key: impl AsRef<[u8]>, operand: impl AsRef<[u8]>) -> Result<()> {
        self.lock_first(None, key.as_ref()).await?;
        self.write(|txn| txn.merge(key, operand)).await
    }

    /// Adds a merge operand for `key` in `keyspace`.
    pub async fn merge_in(
        &self,
        keyspace: &AsyncKeyspace,
        key: impl AsRef<[u8]>,
        operand: impl AsRef<[u8]>,
    ) -> Result<()> {
        self.lock_first(Some(keyspace), key.as_ref()).await?;
        self.write(|txn| txn.merge_in(keyspace.blocking_handle(), key, operand))
            .await
    }

    /// Removes `key` when the transaction commits.
    pub async fn delete(&self, key: impl AsRef<[u8]>) -> Result<()> {
        self.lock_first(None, key.as_ref()).await?;
        self.write(|txn| txn.delete(key)).await
    }

    /// Removes `key` from `keyspace` when the transaction commits.
    pub async fn delete_in(&self, keyspace: &AsyncKeyspace, key: impl AsRef<[u8]>) -> Result<()> {
        self.lock_first(Some(keyspace), key.as_ref()).await?;
        self.write(|txn| txn.delete_in(keyspace.blocking_handle(), key))
            .await
    }

    /// Deletes every key in `range` when the transaction commits (see
    /// [`Transaction::delete_range`]).
    pub async fn delete_range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> Result<()> {
        self.write(|txn| txn.delete_range(range)).await
    }

    /// Deletes every key of `keyspace` in `range` when the transaction commits.
    pub async fn delete_range_in<K: AsRef<[u8]>, R: RangeBounds<K>>(
        &self,
        keyspace: &AsyncKeyspace,
        range: R,
    ) -> Result<()> {
        self.write(|txn| txn.delete_range_in(keyspace.blocking_handle(), range))
            .await
    }

    /// See [`Transaction::set_savepoint`].
    pub async fn set_savepoint(&self) -> Result<()> {
        self.write(|txn| {
            txn.set_savepoint();
            Ok(())
        })
        .await
    }

    /// See [`Transaction::rollback_to_savepoint`].
    pub async fn rollback_to_savepoint(&self) -> Result<()> {
        self.write(Transaction::rollback_to_savepoint).await
    }

    /// Writes the transaction's writes as one atomic batch, or fails with
    /// [`Error::Conflict`] and writes nothing (see [`Transaction::commit`]).
    /// Runs on the blocking pool to the end, even if this future is
    /// dropped. `InvalidArgument` after a rollback.
    pub async fn commit(self) -> Result<()> {
        let txn = self.txn;
        blocking(move || {
            let taken = txn.blocking_lock().take();
            match taken {
                Some(txn) => txn.commit(),
                None => Err(Error::invalid("the transaction was rolled back")),
            }
        })
        .await
    }

    /// Discards the transaction (as dropping it does).
    pub async fn rollback(self) {
        drop(self.txn.lock().await.take());
    }

    /// Runs a read of the transaction on the blocking pool.
    async fn read<T: Send + 'static>(
        &self,
        read: impl FnOnce(&Transaction) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let txn = Arc::clone(&self.txn);
        blocking(move || read(live(txn.blocking_lock().as_ref())?)).await
    }

    /// A locking transaction's row lock on `key`, taken on the blocking
    /// pool (the wait may last the lock timeout) before the write that
    /// needs it runs in the caller's task; nothing for an optimistic one.
    async fn lock_first(&self, keyspace: Option<&AsyncKeyspace>, key: &[u8]) -> Result<()> {
        if !self.pessimistic {
            return Ok(());
        }
        let keyspace = keyspace.map(|k| k.blocking_handle().clone());
        let key = Bytes::copy_from_slice(key);
        self.read(move |txn| txn.lock_key_in(keyspace.as_ref(), &key))
            .await
    }

    /// Adds to the transaction's own writes (memory only: no I/O, so in
    /// the caller's task).
    async fn write(&self, write: impl FnOnce(&mut Transaction) -> Result<()>) -> Result<()> {
        let mut guard = self.txn.lock().await;
        let txn = guard
            .as_mut()
            .ok_or_else(|| Error::invalid("the transaction was rolled back"))?;
        write(txn)
    }
}

/// The transaction, unless it was rolled back.
fn live(txn: Option<&Transaction>) -> Result<&Transaction> {
    txn.ok_or_else(|| Error::invalid("the transaction was rolled back"))
}

impl std::fmt::Debug for AsyncTransaction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncTransaction").finish_non_exhaustive()
    }
}
