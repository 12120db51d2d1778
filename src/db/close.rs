//! Closing a database ([`Db::close`]): what it says about the handles
//! that keep it open after its `Db` is gone (counted in
//! `handle_counts.rs`).
//!
//! Must never: release the directory lock while a handle can still read
//! the directory's files (the lock goes with `DbInner`, when the last
//! handle drops).

use crate::db::Db;
use crate::error::{Error, Result};

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
