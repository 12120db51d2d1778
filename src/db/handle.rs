//! The public [`Db`] handle: what it holds.
//!
//! Owns: the `Db` struct — the shared state, the background threads it
//! started, and whether it was shut down. Its methods live with their
//! concerns: opening and the key-value calls in `mod.rs`, closing in
//! `close.rs`, keyspaces in `keyspace.rs`, statistics in `stats.rs`, and
//! so on; each imports this file.
//! Must never: name a file that works on the database (every file that
//! adds a method to `Db` imports this one).

use std::sync::Arc;

use crate::db::inner::DbInner;

/// An open siftdb database. `Send + Sync` (checked by
/// `tests/api_traits.rs`): share it with `Arc`. Dropping it
/// stops background work, makes the log durable and releases the directory
/// lock before `drop` returns — unless a [`Snapshot`](crate::Snapshot) of it is still alive,
/// which holds the directory until it goes. [`Db::close`] does the same and
/// reports what went wrong.
///
/// ```
/// use std::sync::Arc;
/// use siftdb::{Db, Options};
///
/// # let dir = tempfile::tempdir().unwrap();
/// let db = Arc::new(Db::open_with(dir.path(), Options::default())?);
/// let writers: Vec<_> = (0..4)
///     .map(|t| {
///         let db = Arc::clone(&db);
///         std::thread::spawn(move || db.put(format!("user/{t}"), b"active"))
///     })
///     .collect();
/// for w in writers {
///     w.join().unwrap()?;
/// }
/// let snapshot = db.snapshot();
/// db.delete(b"user/0")?;
/// assert_eq!(db.get(b"user/0")?, None);
/// // The snapshot still sees the database as it was.
/// assert!(snapshot.get(b"user/0")?.is_some());
/// let users: Vec<_> = db.prefix(b"user/").collect::<Result<_, _>>()?;
/// assert_eq!(users.len(), 3);
/// # Ok::<(), siftdb::Error>(())
/// ```
pub struct Db {
    pub(super) inner: Arc<DbInner>,
    pub(super) background: Vec<std::thread::JoinHandle<()>>,
    /// The thread that calls the event listeners, if any was added.
    pub(super) events: Option<std::thread::JoinHandle<()>>,
    /// `close` (or a drop) has run.
    pub(super) shut_down: bool,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db").field("dir", &self.inner.dir).finish()
    }
}
