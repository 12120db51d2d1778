//! Optimistic transactions: reads at a snapshot, writes buffered, one
//! checked batch at commit.
//!
//! Owns: [`Transaction`], [`TransactionOptions`], and the public
//! `Db::transaction` / `Db::transaction_with`.
//! Must never: write part of a transaction, commit one whose checked keys
//! (see `oracle.rs`) were written after its snapshot, or outlive its
//! registration in the oracle (the horizon would pass its snapshot).
//!
//! Snapshot isolation checks the keys (and ranges) the transaction wrote
//! and the keys read with `get_for_update`: first committer wins. A
//! serializable transaction also checks every key and range it read; its
//! commit is then equivalent to running it at its commit point (backward
//! validation), so the committed transactions are serializable in commit
//! order. A transaction that wrote nothing commits without a check: it
//! read one consistent snapshot.
//!
//! A locking transaction (`TransactionOptions::pessimistic`) takes a row
//! lock (see `locking/`) on each key it writes or reads for update, and
//! reads such a key as of the moment it holds the lock; it keeps its locks
//! to its end. Among locking transactions that is strict two-phase
//! locking: their commits never conflict, and with every read for update
//! they are serializable. Writers that take no locks (plain writes,
//! optimistic transactions) are caught by the commit's check of each key
//! read for update from the sequence number it was read at.

use std::ops::{Bound, RangeBounds};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use parking_lot::Mutex;

use crate::db::checks::{check_key, check_merge_operator, check_value, check_writable};
use crate::db::handle::Db;
use crate::db::handle_counts::HandleKind;
use crate::db::inner::DbInner;
use crate::db::iter::{owned_range, prefix_range};
use crate::db::keyspace::Keyspace;
use crate::db::locking::RowLocks;
use crate::db::oracle::{ConflictCheck, KeyRange};
use crate::db::read;
use crate::db::snapshot::Snapshot;
use crate::db::transaction_scan::TransactionIter;
use crate::db::write;
use crate::db::write_set::{OwnRead, WriteSet};
use crate::error::{Error, Result};
use crate::options::WriteOptions;

/// How a [`Transaction`] is isolated and how its commit is written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TransactionOptions {
    serializable: bool,
    /// Row locks (pessimistic), waiting at most this long for one.
    locking: Option<Duration>,
    write: WriteOptions,
}

impl TransactionOptions {
    /// How long a locking transaction waits for a row lock unless told
    /// (RocksDB's `TransactionDB` default too).
    pub const DEFAULT_LOCK_TIMEOUT: Duration = Duration::from_secs(1);

    /// Snapshot isolation (the default): the commit fails with
    /// [`Error::Conflict`] when a key it wrote, or read with
    /// [`Transaction::get_for_update`], was written after its snapshot.
    pub fn new() -> TransactionOptions {
        TransactionOptions::default()
    }

    /// Serializable snapshot isolation: the commit also fails when any key
    /// or range the transaction read was written after its snapshot.
    pub fn serializable() -> TransactionOptions {
        TransactionOptions {
            serializable: true,
            ..TransactionOptions::default()
        }
    }

    /// A locking (pessimistic) transaction: instead of finding out at
    /// commit that another transaction wrote the same keys, it waits for
    /// them. [`Transaction::get_for_update`] and every write (put, merge,
    /// delete) first take the key's row lock — exclusive, per key and
    /// keyspace — waiting while another transaction holds it, up to
    /// [`TransactionOptions::lock_timeout`] (then
    /// [`Error::LockTimeout`]); a wait that would close a cycle of
    /// waiting transactions fails at once with [`Error::Deadlock`] (the
    /// others go on). The locks are held until the transaction commits,
    /// rolls back or is dropped; after either error, drop it and run it
    /// again.
    ///
    /// Point reads (`get`, `get_for_update`, `multi_get`) read the key's
    /// latest committed value (after taking the lock, for
    /// `get_for_update`), and see the transaction's own writes; scans read
    /// the transaction's snapshot and lock nothing. When every read is a
    /// `get_for_update`, the committed locking transactions are
    /// serializable, and their commits never fail with
    /// [`Error::Conflict`] among themselves. Writers that take no lock
    /// (plain writes, optimistic transactions) do not wait for one: if one
    /// of them writes a key this transaction read for update, after that
    /// read, the commit fails with [`Error::Conflict`] rather than lose
    /// that write. `delete_range` is refused (`InvalidArgument`): locks
    /// are per key.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// use siftdb::{Error, TransactionOptions};
    /// let db = siftdb::Db::open(dir.path())?;
    /// db.put("stock", "3")?;
    /// let mut txn = db.transaction_with(TransactionOptions::pessimistic());
    /// // Others locking "stock" now wait until this transaction ends.
    /// let stock = txn.get_for_update("stock")?;
    /// assert_eq!(stock.as_deref(), Some(&b"3"[..]));
    /// txn.put("stock", "2")?;
    /// txn.commit()?;
    /// # Ok::<(), siftdb::Error>(())
    /// ```
    pub fn pessimistic() -> TransactionOptions {
        TransactionOptions {
            locking: Some(TransactionOptions::DEFAULT_LOCK_TIMEOUT),
            ..TransactionOptions::default()
        }
    }

    /// How long a locking transaction waits for one row lock before
    /// [`Error::LockTimeout`] (1 s by default; zero: not at all). Makes the
    /// transaction a locking one (see [`TransactionOptions::pessimistic`]).
    pub fn lock_timeout(mut self, timeout: Duration) -> TransactionOptions {
        self.locking = Some(timeout);
        self.serializable = false;
        self
    }

    /// Whether the transaction takes row locks.
    pub fn is_pessimistic(&self) -> bool {
        self.locking.is_some()
    }

    /// How the commit's batch is written (see [`WriteOptions::sync`]).
    pub fn write_options(mut self, write: WriteOptions) -> TransactionOptions {
        self.write = write;
        self
    }
}

/// Keys and ranges read, to check at commit.
#[derive(Default)]
struct ReadSet {
    keys: Vec<(u32, Vec<u8>)>,
    ranges: Vec<KeyRange>,
    /// A locking transaction's keys read for update, each with the
    /// sequence number it was read at.
    locked: Vec<(u32, Vec<u8>, u64)>,
}

/// The transaction's snapshot, registered in the oracle until dropped.
struct LiveSnapshot {
    inner: Arc<DbInner>,
    sequence: u64,
}

impl Drop for LiveSnapshot {
    fn drop(&mut self) {
        self.inner.oracle.lock().end(self.sequence);
        self.inner.handles.dropped(HandleKind::Transaction);
    }
}

/// An optimistic transaction (see [`Db::transaction`]): it reads the
/// database as of its start and sees its own writes; [`Transaction::commit`]
/// writes them as one atomic batch, or fails with [`Error::Conflict`] and
/// writes nothing. Dropping it (or [`Transaction::rollback`]) discards it.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// let db = siftdb::Db::open(dir.path())?;
/// db.put("alice", "100")?;
/// db.put("bob", "0")?;
/// loop {
///     let mut txn = db.transaction();
///     let alice: u64 = txn.get_for_update("alice")?.map_or(0, |v| parse(&v));
///     let bob: u64 = txn.get_for_update("bob")?.map_or(0, |v| parse(&v));
///     txn.put("alice", (alice - 30).to_string())?;
///     txn.put("bob", (bob + 30).to_string())?;
///     match txn.commit() {
///         Err(siftdb::Error::Conflict) => continue, // someone else won: retry
///         other => break other?,
///     }
/// }
/// assert_eq!(db.get("bob")?.as_deref(), Some(&b"30"[..]));
/// # fn parse(v: &[u8]) -> u64 { std::str::from_utf8(v).unwrap().parse().unwrap() }
/// # Ok::<(), siftdb::Error>(())
/// ```
///
/// `Send + Sync` (checked by `tests/api_traits.rs`): it can move to
/// another thread, and its reads (`get`, `get_for_update`) take `&self`.
pub struct Transaction {
    inner: Arc<DbInner>,
    default: Keyspace,
    snapshot: Snapshot,
    options: TransactionOptions,
    writes: WriteSet,
    /// The writes as they were at each savepoint still set, oldest first.
    savepoints: Vec<WriteSet>,
    /// `get_for_update` keys, and with serializable every read.
    reads: Mutex<ReadSet>,
    /// A locking transaction's row locks: released when it drops, after
    /// its commit was written.
    locks: Option<RowLocks>,
    /// Declared last: dropped after the snapshot it registered.
    _live: LiveSnapshot,
}

impl Db {
    /// Starts a transaction with snapshot isolation (see [`Transaction`]).
    pub fn transaction(&self) -> Transaction {
        self.transaction_with(TransactionOptions::new())
    }

    /// Starts a transaction with `options` (e.g.
    /// [`TransactionOptions::serializable`]).
    pub fn transaction_with(&self, options: TransactionOptions) -> Transaction {
        Transaction::begin(&self.inner, options)
    }
}

impl Transaction {
    pub(crate) fn begin(inner: &Arc<DbInner>, options: TransactionOptions) -> Transaction {
        // The snapshot is taken under the oracle's lock: a batch registered
        // before is in it, or above it and kept (see `oracle.rs`).
        let mut oracle = inner.oracle.lock();
        let snapshot = Snapshot::new(inner);
        oracle.begin(snapshot.sequence());
        drop(oracle);
        inner.handles.made(HandleKind::Transaction);
        Transaction {
            _live: LiveSnapshot {
                inner: Arc::clone(inner),
                sequence: snapshot.sequence(),
            },
            inner: Arc::clone(inner),
            default: Keyspace::default_of(inner),
            snapshot,
            options,
            writes: WriteSet::default(),
            savepoints: Vec::new(),
            reads: Mutex::new(ReadSet::default()),
            locks: options
                .locking
                .map(|timeout| RowLocks::new(&inner.locks, timeout)),
        }
    }

    /// The sequence number of the snapshot it reads.
    pub fn snapshot_sequence(&self) -> u64 {
        self.snapshot.sequence()
    }

    fn record_key(&self, keyspace: u32, key: &[u8], for_update: bool) {
        if for_update || self.options.serializable {
            self.reads.lock().keys.push((keyspace, key.to_vec()));
        }
    }

    /// The value of `key` as this transaction sees it.
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<Bytes>> {
        self.read(&self.default, key.as_ref(), false)
    }

    /// The value of `key` in `keyspace` as this transaction sees it.
    pub fn get_in(&self, keyspace: &Keyspace, key: impl AsRef<[u8]>) -> Result<Option<Bytes>> {
        self.read(keyspace, key.as_ref(), false)
    }

    /// [`Transaction::get`], and the key joins the keys checked at commit
    /// under snapshot isolation too: the commit fails if another commit
    /// wrote it after this transaction's snapshot.
    pub fn get_for_update(&self, key: impl AsRef<[u8]>) -> Result<Option<Bytes>> {
        self.read(&self.default, key.as_ref(), true)
    }

    /// [`Transaction::get_for_update`] in `keyspace`.
    pub fn get_for_update_in(
        &self,
        keyspace: &Keyspace,
        key: impl AsRef<[u8]>,
    ) -> Result<Option<Bytes>> {
        self.read(keyspace, key.as_ref(), true)
    }

    /// The values of many keys, in the order asked.
    pub fn multi_get<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<Option<Bytes>>> {
        keys.iter().map(|k| self.get(k)).collect()
    }

    /// The values of many keys of `keyspace`, in the order asked.
    pub fn multi_get_in<K: AsRef<[u8]>>(
        &self,
        keyspace: &Keyspace,
        keys: &[K],
    ) -> Result<Vec<Option<Bytes>>> {
        keys.iter().map(|k| self.get_in(keyspace, k)).collect()
    }

    fn read(&self, keyspace: &Keyspace, key: &[u8], for_update: bool) -> Result<Option<Bytes>> {
        check_key(key)?;
        if let Some(locks) = &self.locks {
            return self.read_latest(locks, keyspace, key, for_update);
        }
        self.record_key(keyspace.id(), key, for_update);
        match self.writes.read(keyspace.id(), key) {
            OwnRead::Write(write) => {
                let operator = keyspace.tree().opts.load().merge_operator.clone();
                write.resolve(operator.as_deref(), key, || {
                    self.snapshot.get_in(keyspace, key)
                })
            }
            OwnRead::Snapshot => self.snapshot.get_in(keyspace, key),
        }
    }

    /// A locking transaction's point read: the key's latest committed value
    /// (under its lock, `for_update`), with its own writes over it.
    fn read_latest(
        &self,
        locks: &RowLocks,
        keyspace: &Keyspace,
        key: &[u8],
        for_update: bool,
    ) -> Result<Option<Bytes>> {
        keyspace.tree().check_live()?;
        if for_update {
            locks.lock(keyspace.id(), key)?;
        }
        // Super-version before sequence number, as in `read::get`.
        let tree = keyspace.tree();
        let sv = tree.current.load();
        let sequence = self.inner.snapshot();
        let latest = || read::get_at(&self.inner, tree, &sv, sequence, key);
        if for_update {
            let read_at = (keyspace.id(), key.to_vec(), sequence.0);
            self.reads.lock().locked.push(read_at);
        }
        match self.writes.read(keyspace.id(), key) {
            OwnRead::Write(write) => {
                let operator = keyspace.tree().opts.load().merge_operator.clone();
                write.resolve(operator.as_deref(), key, latest)
            }
            OwnRead::Snapshot => latest(),
        }
    }

    /// A locking transaction's lock on `key` before writing it.
    fn lock_for_write(&self, keyspace: &Keyspace, key: &[u8]) -> Result<()> {
        match &self.locks {
            Some(locks) => locks.lock(keyspace.id(), key),
            None => Ok(()),
        }
    }

    /// Whether the transaction takes row locks.
    #[cfg(feature = "tokio")]
    pub(crate) fn is_pessimistic(&self) -> bool {
        self.locks.is_some()
    }

    /// Takes the row lock a write of `key` in `keyspace` (the default
    /// keyspace for `None`) would take: for callers that must not wait
    /// where they write (`AsyncTransaction`).
    #[cfg(feature = "tokio")]
    pub(crate) fn lock_key_in(&self, keyspace: Option<&Keyspace>, key: &[u8]) -> Result<()> {
        check_key(key)?;
        self.lock_for_write(keyspace.unwrap_or(&self.default), key)
    }

    /// Entries whose keys fall in `range`, as this transaction sees them.
    pub fn range<K: AsRef<[u8]>, R: RangeBounds<K>>(&self, range: R) -> TransactionIter {
        self.scan(&self.default, owned_range(range))
    }

    /// Entries whose keys start with `prefix`.
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> TransactionIter {
        self.scan(&self.default, prefix_range(prefix.as_ref()))
    }

    /// Every entry, ascending.
    pub fn iter(&self) -> TransactionIter {
        self.scan(&self.default, (Bound::Unbounded, Bound::Unbounded))
    }

    /// Entries of `keyspace` whose keys fall in `range`.
    pub fn range_in<K: AsRef<[u8]>, R: RangeBounds<K>>(
        &self,
        keyspace: &Keyspace,
        range: R,
    ) -> TransactionIter {
        self.scan(keyspace, owned_range(range))
    }

    /// Entries of `keyspace` whose keys start with `prefix`.
    pub fn prefix_in(&self, keyspace: &Keyspace, prefix: impl AsRef<[u8]>) -> TransactionIter {
        self.scan(keyspace, prefix_range(prefix.as_ref()))
    }

    /// Every entry of `keyspace`, ascending.
    pub fn iter_in(&self, keyspace: &Keyspace) -> TransactionIter {
        self.scan(keyspace, (Bound::Unbounded, Bound::Unbounded))
    }

    fn scan(
        &self,
        keyspace: &Keyspace,
        bounds: (Bound<Vec<u8>>, Bound<Vec<u8>>),
    ) -> TransactionIter {
        let range = KeyRange {
            keyspace: keyspace.id(),
            start: bounds.0.clone(),
            end: bounds.1.clone(),
        };
        let own = self.writes.points_in(&range);
        let deleted = self.writes.ranges_of(keyspace.id());
        if self.options.serializable {
            self.reads.lock().ranges.push(range);
        }
        let snapshot = self.snapshot.range_in(keyspace, bounds);
        let operator = keyspace.tree().opts.load().merge_operator.clone();
        TransactionIter::new(snapshot, own, deleted, keyspace.id(), operator)
    }

    /// Stores `value` under `key` when the transaction commits.
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        let default = self.default.clone();
        self.put_in(&default, key, value)
    }

    /// Stores `value` under `key` in `keyspace` when the transaction commits.
    pub fn put_in(
        &mut self,
        keyspace: &Keyspace,
        key: impl AsRef<[u8]>,
        value: impl AsRef<[u8]>,
    ) -> Result<()> {
        let (key, value) = (key.as_ref(), value.as_ref());
        check_key(key)?;
        check_value(value)?;
        keyspace.tree().check_live()?;
        self.lock_for_write(keyspace, key)?;
        self.writes
            .put(keyspace.id(), key, Some(Bytes::copy_from_slice(value)));
        Ok(())
    }

    /// Adds a merge operand for `key` (see [`Db::merge`]): written with
    /// the commit, and seen by this transaction's own reads (the operands
    /// applied, by the keyspace's merge operator, over its own earlier
    /// write of the key or else the snapshot's value). The key counts as
    /// written for the commit's conflict check. `InvalidArgument` when the
    /// keyspace has no merge operator.
    pub fn merge(&mut self, key: impl AsRef<[u8]>, operand: impl AsRef<[u8]>) -> Result<()> {
        let default = self.default.clone();
        self.merge_in(&default, key, operand)
    }

    /// [`Transaction::merge`] in `keyspace`.
    pub fn merge_in(
        &mut self,
        keyspace: &Keyspace,
        key: impl AsRef<[u8]>,
        operand: impl AsRef<[u8]>,
    ) -> Result<()> {
        let (key, operand) = (key.as_ref(), operand.as_ref());
        check_key(key)?;
        check_value(operand)?;
        keyspace.tree().check_live()?;
        check_merge_operator(&self.inner, keyspace.id())?;
        self.lock_for_write(keyspace, key)?;
        self.writes
            .merge(keyspace.id(), key, Bytes::copy_from_slice(operand));
        Ok(())
    }

    /// Removes `key` when the transaction commits.
    pub fn delete(&mut self, key: impl AsRef<[u8]>) -> Result<()> {
        let default = self.default.clone();
        self.delete_in(&default, key)
    }

    /// Removes `key` from `keyspace` when the transaction commits.
    pub fn delete_in(&mut self, keyspace: &Keyspace, key: impl AsRef<[u8]>) -> Result<()> {
        let key = key.as_ref();
        check_key(key)?;
        keyspace.tree().check_live()?;
        self.lock_for_write(keyspace, key)?;
        self.writes.put(keyspace.id(), key, None);
        Ok(())
    }

    /// Deletes every key in `range` when the transaction commits (see
    /// [`Db::delete_range`]); its own earlier writes in the range are
    /// deleted too, its later ones stay.
    pub fn delete_range<K: AsRef<[u8]>, R: RangeBounds<K>>(&mut self, range: R) -> Result<()> {
        let default = self.default.clone();
        self.delete_range_in(&default, range)
    }

    /// Deletes every key of `keyspace` in `range` when the transaction
    /// commits (see [`Db::delete_range`]); its own earlier writes in the
    /// range are deleted too, its later ones stay. `InvalidArgument` in a
    /// locking transaction (its locks are per key).
    pub fn delete_range_in<K: AsRef<[u8]>, R: RangeBounds<K>>(
        &mut self,
        keyspace: &Keyspace,
        range: R,
    ) -> Result<()> {
        keyspace.tree().check_live()?;
        if self.locks.is_some() {
            return Err(Error::invalid(
                "delete_range in a locking transaction: its locks are per key",
            ));
        }
        if let Some((start, end)) = crate::range_tombstone::normalize_range(&range)? {
            self.writes.delete_range(keyspace.id(), start, end);
        }
        Ok(())
    }

    /// Marks the writes made so far, so that
    /// [`Transaction::rollback_to_savepoint`] can undo the ones after
    /// (RocksDB's `SetSavePoint`). Savepoints nest.
    pub fn set_savepoint(&mut self) {
        self.savepoints.push(self.writes.clone());
    }

    /// Undoes every write (put, delete, range delete, in any keyspace) made
    /// since the newest savepoint still set, and removes that savepoint.
    /// Reads made since stay recorded for the commit's conflict check (a
    /// check on more keys than needed can only refuse a commit that would
    /// have been safe, never let an unsafe one through). `InvalidArgument`
    /// when no savepoint is set.
    pub fn rollback_to_savepoint(&mut self) -> Result<()> {
        self.writes = self
            .savepoints
            .pop()
            .ok_or_else(|| Error::invalid("rollback_to_savepoint: no savepoint is set"))?;
        Ok(())
    }

    /// Removes the newest savepoint, keeping the writes made since.
    /// `InvalidArgument` when no savepoint is set.
    pub fn pop_savepoint(&mut self) -> Result<()> {
        self.savepoints
            .pop()
            .map(drop)
            .ok_or_else(|| Error::invalid("pop_savepoint: no savepoint is set"))
    }

    /// Writes the transaction's writes as one atomic batch, or fails with
    /// [`Error::Conflict`] (nothing written) when a checked key or range
    /// was written after its snapshot. Other errors (a dropped keyspace, a
    /// batch over the size limit, a failed log) write nothing either.
    pub fn commit(self) -> Result<()> {
        if self.writes.is_empty() {
            return Ok(());
        }
        let _timing = self.inner.latency.transaction_commit_nanos.time();
        check_writable(&self.inner)?;
        if self.writes.bytes() > crate::batch::MAX_BATCH_PAYLOAD {
            return Err(Error::invalid(format!(
                "the transaction wrote {} bytes, over the {}-byte batch limit",
                self.writes.bytes(),
                crate::batch::MAX_BATCH_PAYLOAD
            )));
        }
        let batch = self.writes.to_batch();
        batch.check_limits()?;
        let reads = std::mem::take(&mut *self.reads.lock());
        let check = if self.locks.is_some() {
            // Its locks keep other locking transactions off its keys; only
            // the keys it read for update are checked, each from its read.
            ConflictCheck {
                snapshot: self.snapshot.sequence(),
                keys_read_at: reads.locked,
                ..ConflictCheck::default()
            }
        } else {
            let (mut keys, mut ranges) = self.writes.written();
            keys.extend(reads.keys);
            ranges.extend(reads.ranges);
            ConflictCheck {
                snapshot: self.snapshot.sequence(),
                keys,
                ranges,
                keys_read_at: Vec::new(),
            }
        };
        write::write_checked(&self.inner, batch, self.options.write, Some(check))
    }

    /// Discards the transaction (as dropping it does).
    pub fn rollback(self) {}
}

impl std::fmt::Debug for Transaction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transaction")
            .field("snapshot", &self.snapshot.sequence())
            .field("serializable", &self.options.serializable)
            .field("locks", &self.locks.as_ref().map(RowLocks::count))
            .finish_non_exhaustive()
    }
}
