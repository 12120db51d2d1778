//! Closing a database ([`Db::close`]) and the counts of the handles that
//! keep it open after its `Db` is gone.
//!
//! Owns: [`HandleCounts`] — how many `Keyspace`, `Snapshot`, `Transaction`
//! and `KeyspaceExport` handles of one database live — and what `close`
//! says about them.
//! Must never: release the directory lock while a handle can still read
//! the directory's files (the lock goes with `DbInner`, when the last
//! handle drops), or count on a read or write path (handles are made and
//! dropped by the application, not per operation).

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::db::Db;
use crate::error::{Error, Result};

/// A kind of handle that holds a database (its `DbInner`, and so its
/// directory lock).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HandleKind {
    Keyspace,
    Snapshot,
    Transaction,
    KeyspaceExport,
}

/// Live handles of one database, by kind.
#[derive(Debug, Default)]
pub(crate) struct HandleCounts {
    keyspaces: AtomicUsize,
    snapshots: AtomicUsize,
    transactions: AtomicUsize,
    exports: AtomicUsize,
}

impl HandleCounts {
    fn count(&self, kind: HandleKind) -> &AtomicUsize {
        match kind {
            HandleKind::Keyspace => &self.keyspaces,
            HandleKind::Snapshot => &self.snapshots,
            HandleKind::Transaction => &self.transactions,
            HandleKind::KeyspaceExport => &self.exports,
        }
    }

    /// A handle of `kind` was made.
    pub(crate) fn made(&self, kind: HandleKind) {
        self.count(kind).fetch_add(1, Ordering::Relaxed);
    }

    /// A handle of `kind` was dropped.
    pub(crate) fn dropped(&self, kind: HandleKind) {
        self.count(kind).fetch_sub(1, Ordering::Relaxed);
    }

    /// The live handles, as the application sees them ("1 Keyspace, 2
    /// Snapshots"): a transaction's own keyspace and snapshot are part of
    /// the transaction. `None` when there are none.
    pub(crate) fn describe(&self) -> Option<String> {
        let load = |kind| self.count(kind).load(Ordering::Relaxed);
        let transactions = load(HandleKind::Transaction);
        let live = [
            (
                load(HandleKind::Keyspace).saturating_sub(transactions),
                "Keyspace",
                "Keyspaces",
            ),
            (
                load(HandleKind::Snapshot).saturating_sub(transactions),
                "Snapshot",
                "Snapshots",
            ),
            (transactions, "Transaction", "Transactions"),
            (
                load(HandleKind::KeyspaceExport),
                "KeyspaceExport",
                "KeyspaceExports",
            ),
        ];
        let parts: Vec<String> = live
            .iter()
            .filter(|(n, _, _)| *n > 0)
            .map(|&(n, one, many)| format!("{n} {}", if n == 1 { one } else { many }))
            .collect();
        (!parts.is_empty()).then(|| parts.join(", "))
    }
}

impl Db {
    /// Closes the database: stops background work, syncs the log and marks
    /// it closed, and returns what went wrong — the final sync's error, a
    /// background thread's panic, or the failure background work was stuck
    /// on. Dropping a `Db` does the same but can only swallow the error.
    ///
    /// Acknowledged writes are in the log either way: a failed close loses
    /// nothing that a crash at the same moment would not (the next open
    /// replays the log).
    ///
    /// Handles of the database — a [`crate::Keyspace`] (an
    /// `AsyncKeyspace` holds one), a [`crate::Snapshot`], a
    /// [`crate::Transaction`], a `KeyspaceExport` — keep its directory
    /// locked, and their reads working, until the last of them drops; a
    /// reopen meanwhile fails with [`Error::Locked`]. `close` with such
    /// handles alive still closes (all of the above), then returns
    /// [`Error::HandlesLive`] naming them; once they drop, the lock is
    /// released and the database reopens. An iterator holds its tables,
    /// not the database: it does not keep the directory locked.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = siftdb::Db::open(dir.path())?;
    /// db.put(b"k", b"v")?;
    /// let snapshot = db.snapshot();
    /// assert!(matches!(db.close(), Err(siftdb::Error::HandlesLive { .. })));
    /// drop(snapshot); // the lock goes with the last handle
    /// let db = siftdb::Db::open(dir.path())?;
    /// assert!(db.recovery_report().closed_cleanly);
    /// db.close()?;
    /// # Ok::<(), siftdb::Error>(())
    /// ```
    pub fn close(mut self) -> Result<()> {
        self.shut_down()?;
        match self.inner.handles.describe() {
            Some(handles) => Err(Error::HandlesLive { handles }),
            None => Ok(()),
        }
    }
}
