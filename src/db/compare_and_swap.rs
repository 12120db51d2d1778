//! Compare-and-swap of one key, on `Db` and `Keyspace`.
//!
//! Owns: [`CompareAndSwap`] and the `compare_and_swap` methods.
//! Must never: write unless the key held the expected value at the moment
//! of the write (it is a transaction that checks the key; a conflict is
//! retried here, never returned).

use std::sync::Arc;

use bytes::Bytes;

use crate::db::handle::Db;
use crate::db::inner::DbInner;
use crate::db::keyspace::Keyspace;
use crate::db::transaction::{Transaction, TransactionOptions};
use crate::error::{Error, Result};

/// What [`Db::compare_and_swap`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CompareAndSwap {
    /// The key held the expected value and now holds the new one.
    Swapped,
    /// The key held another value (`None`: absent); nothing was written.
    Mismatch {
        /// The value the key held.
        current: Option<Bytes>,
    },
}

impl CompareAndSwap {
    /// Whether the swap happened.
    pub fn swapped(&self) -> bool {
        matches!(self, CompareAndSwap::Swapped)
    }
}

fn compare_and_swap(
    inner: &Arc<DbInner>,
    keyspace: &Keyspace,
    key: &[u8],
    expected: Option<&[u8]>,
    new: Option<&[u8]>,
) -> Result<CompareAndSwap> {
    loop {
        let mut txn = Transaction::begin(inner, TransactionOptions::new());
        let current = txn.get_for_update_in(keyspace, key)?;
        if current.as_deref() != expected {
            return Ok(CompareAndSwap::Mismatch { current });
        }
        match new {
            Some(value) => txn.put_in(keyspace, key, value)?,
            None => txn.delete_in(keyspace, key)?,
        }
        match txn.commit() {
            Err(Error::Conflict) => continue,
            other => return other.map(|()| CompareAndSwap::Swapped),
        }
    }
}

impl Db {
    /// Sets `key` to `new` (`None`: deletes it) if it holds `expected`
    /// (`None`: absent), atomically; otherwise writes nothing and returns
    /// the value it holds.
    ///
    /// ```
    /// use siftdb::CompareAndSwap;
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = siftdb::Db::open(dir.path())?;
    /// assert!(db.compare_and_swap("lock", None, Some(b"me"))?.swapped());
    /// let taken = db.compare_and_swap("lock", None, Some(b"you"))?;
    /// assert_eq!(taken, CompareAndSwap::Mismatch { current: Some("me".into()) });
    /// # Ok::<(), siftdb::Error>(())
    /// ```
    pub fn compare_and_swap(
        &self,
        key: impl AsRef<[u8]>,
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> Result<CompareAndSwap> {
        let default = Keyspace::default_of(&self.inner);
        compare_and_swap(&self.inner, &default, key.as_ref(), expected, new)
    }
}

impl Keyspace {
    /// [`Db::compare_and_swap`] in this keyspace.
    pub fn compare_and_swap(
        &self,
        key: impl AsRef<[u8]>,
        expected: Option<&[u8]>,
        new: Option<&[u8]>,
    ) -> Result<CompareAndSwap> {
        self.tree().check_live()?;
        compare_and_swap(self.inner(), self, key.as_ref(), expected, new)
    }
}
