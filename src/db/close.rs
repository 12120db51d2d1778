//! Closing a database: [`Db::close`] and the drop of a `Db` — background
//! work stopped, the event thread joined, the log synced and marked
//! closed — and what `close` says about the handles that keep the
//! database open after its `Db` is gone (counted in `handle_counts.rs`).
//!
//! Must never: release the directory lock while a handle can still read
//! the directory's files (the lock goes with `DbInner`, when the last
//! handle drops), or lose a failure of the close: `close` returns it.

use crate::db::handle::Db;
use crate::db::inner::DbInner;
use crate::db::{background, write};
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

impl Db {
    /// Stops background work and closes the log; idempotent (the second
    /// call finds no threads and a closed log).
    fn shut_down(&mut self) -> Result<()> {
        if self.shut_down {
            return Ok(());
        }
        self.shut_down = true;
        background::shutdown(&self.inner);
        let mut panicked = None;
        for handle in self.background.drain(..) {
            if let Err(payload) = handle.join() {
                panicked.get_or_insert_with(|| background::panic_message(payload.as_ref()));
            }
        }
        // The background threads have sent their last events.
        if let Err(message) = stop_events(&self.inner, self.events.take()) {
            panicked.get_or_insert(message);
        }
        // Make what reached the OS durable too, so a clean close loses nothing
        // even to a machine crash right after it, and mark the log closed.
        let closed = if self.inner.opts.read_only {
            Ok(())
        } else {
            write::close_log(&self.inner)
        };
        let standing = background::standing_failure(&self.inner);
        closed?;
        if let Some(message) = panicked {
            return Err(Error::Panicked(message));
        }
        standing
    }
}

/// Stops the event thread once it delivered what was sent: `Err` with the
/// message of a listener's panic. Not joined from the event thread itself
/// (a listener that closes the database it watches).
pub(crate) fn stop_events(
    inner: &DbInner,
    thread: Option<std::thread::JoinHandle<()>>,
) -> std::result::Result<(), String> {
    let Some(thread) = thread else {
        return Ok(());
    };
    inner.events.stop();
    if thread.thread().id() == std::thread::current().id() {
        return Ok(());
    }
    thread.join().map_err(|payload| {
        format!(
            "an event listener panicked: {}",
            background::panic_text(payload.as_ref())
        )
    })
}

impl Drop for Db {
    fn drop(&mut self) {
        // `close` reports this error; a plain drop has nowhere to put it.
        let _ = self.shut_down();
    }
}
