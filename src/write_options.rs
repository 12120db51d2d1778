//! The options of one write.
//!
//! Owns: `WriteOptions`, what a caller may choose per write (today: whether
//! its log record is synced).
//! Must never: change a database-wide setting; it only overrides one for
//! the write it is passed with.

/// Options of one write ([`crate::Db::write_with`]).
///
/// ```
/// use siftdb::{Db, WriteBatch, WriteOptions};
///
/// # let dir = tempfile::tempdir().unwrap();
/// let db = Db::open(dir.path())?; // writes are not synced by default
/// db.put(b"cache/page", b"...")?; // fast: in the OS's hands on return
/// let mut order = WriteBatch::new();
/// order.put(b"order/17", b"paid");
/// db.write_with(order, WriteOptions::new().sync(true))?; // on disk on return
/// db.persist()?; // everything written so far on disk, without a flush
/// # Ok::<(), siftdb::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteOptions {
    sync: Option<bool>,
}

impl WriteOptions {
    /// The database's defaults ([`crate::Options::sync_writes`]).
    pub fn new() -> WriteOptions {
        WriteOptions::default()
    }

    /// With `true`, the write's log record is on disk (fsync) before the
    /// write returns, and so is everything logged before it; with `false`,
    /// it is in the operating system's hands (it survives a crash of the
    /// process, not of the machine), whatever [`crate::Options::sync_writes`] says.
    /// Writes that share a log record with a synced one are synced too.
    pub fn sync(mut self, sync: bool) -> WriteOptions {
        self.sync = Some(sync);
        self
    }

    /// Whether the write is synced, given the database's default.
    pub(crate) fn sync_or(self, default: bool) -> bool {
        self.sync.unwrap_or(default)
    }
}
