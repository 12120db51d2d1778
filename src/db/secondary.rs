//! Secondary instances (`Db::open_secondary`): a process that reads a
//! database another process has open for writing, and follows it.
//!
//! Owns: [`Secondary`] — the open (no lock on the primary's directory; a
//! lock of its own in its own directory) and `try_catch_up`, which
//! `catch_up.rs` carries out (it defines [`CatchUp`]). Must never: create,
//! change or delete anything in the primary's directory, accept a write
//! (`Error::ReadOnly`), or start background work.

use std::ops::Deref;
use std::path::Path;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::db::checks::read_only_refusal as refusal;
use crate::db::handle::Db;
use crate::db::open::{Parts, LOCK_FILE};
use crate::db::recovery_report::RecoveryReport;
use crate::db::version_set::VersionSet;
use crate::error::{Error, Result};
use crate::filename::wal_file_name;
use crate::key::SeqNo;
use crate::options::Options;
use crate::table::{ReadContext, ReadCounters};
use crate::wal::WalWriter;

mod catch_up;

pub use catch_up::CatchUp;
use catch_up::{primary_state, Follower};

/// A database opened as a secondary instance of another process's (the
/// primary's): reads see the primary's writes as of the last
/// [`Secondary::try_catch_up`] (or the open), and writes are refused with
/// [`Error::ReadOnly`]. It dereferences to [`Db`] for every read (`get`,
/// `multi_get`, scans, snapshots, keyspaces, stats); share it with `Arc`
/// between readers and the thread that catches up.
///
/// What it reads: the tables the primary's manifest names (held open, so a
/// table the primary's compaction removes stays readable while the view
/// uses it) and the whole records of the primary's live logs (a record
/// the primary is still appending is left for the next catch-up). A view
/// is always a prefix of the primary's history: every write up to its
/// sequence number, none after it, and never part of a batch.
///
/// `Send + Sync` (checked by `tests/api_traits.rs`): share it with `Arc`.
pub struct Secondary {
    db: Db,
    follower: Mutex<Follower>,
}

impl Db {
    /// Opens the database at `primary`, which another process may have
    /// open for writing, as a secondary instance (RocksDB's
    /// `OpenAsSecondary`): reads see it as of the open, then as of each
    /// [`Secondary::try_catch_up`]. Takes no lock on `primary` and writes
    /// nothing there (it needs no write permission on it); `own` is the
    /// secondary's own directory (created when missing), which holds its
    /// lock: one secondary per directory, any number per primary. `opts`
    /// are the reading options (block cache, `max_open_files` — every
    /// table of the view is held open whatever it says —, merge operator,
    /// prefix extractor); [`Options::read_only`] is implied.
    ///
    /// `NotADatabase` when `primary` has no manifest; `InvalidArgument`
    /// when `own` is `primary`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let (primary_dir, own_dir) = (dir.path().join("db"), dir.path().join("follower"));
    /// use siftdb::{Db, Options};
    /// let primary = Db::open(&primary_dir)?; // in another process, usually
    /// primary.put("k", "1")?;
    /// let follower = Db::open_secondary(&primary_dir, &own_dir, Options::default())?;
    /// primary.put("k", "2")?;
    /// assert_eq!(follower.get("k")?.as_deref(), Some(&b"1"[..])); // as of the open
    /// let caught_up = follower.try_catch_up()?;
    /// assert_eq!(follower.get("k")?.as_deref(), Some(&b"2"[..]));
    /// assert_eq!(caught_up.sequence, 2);
    /// assert!(follower.put("k", "3").is_err()); // Error::ReadOnly
    /// # Ok::<(), siftdb::Error>(())
    /// ```
    pub fn open_secondary(
        primary: impl AsRef<Path>,
        own: impl AsRef<Path>,
        opts: Options,
    ) -> Result<Secondary> {
        Secondary::open(primary.as_ref(), own.as_ref(), opts)
    }
}

impl Secondary {
    fn open(primary: &Path, own: &Path, opts: Options) -> Result<Secondary> {
        let opts = opts.read_only(true);
        opts.validate()?;
        let fs = Arc::clone(&opts.fs);
        if !fs.is_dir(primary) {
            return Err(Error::NotADatabase {
                path: primary.to_path_buf(),
                reason: "it is not a directory".into(),
            });
        }
        // Checked before anything is created.
        primary_state(&fs, primary)?;
        fs.create_dir_all(own)?;
        let same = match (std::fs::canonicalize(primary), std::fs::canonicalize(own)) {
            (Ok(a), Ok(b)) => a == b,
            _ => primary == own,
        };
        if same {
            return Err(Error::invalid(format!(
                "a secondary instance needs a directory of its own, not the primary's {}",
                primary.display()
            )));
        }
        let lock = fs.lock(&own.join(LOCK_FILE))?;
        let parts = Parts {
            trees: Vec::new(),
            wal: WalWriter::refusing(&primary.join(wal_file_name(0)), 0),
            last_seq: SeqNo(0),
            versions: VersionSet::new(0, 0, 0),
            tables: ReadContext::for_options(&opts, ReadCounters::new()),
            report: RecoveryReport::default(),
            lock,
            log_failure: Some(refusal()),
        };
        let db = Db {
            inner: Arc::new(parts.into_inner(primary, opts)),
            background: Vec::new(),
            events: None,
            shut_down: false,
        };
        let mut follower = Follower::new(primary);
        follower.catch_up(&db.inner)?;
        Ok(Secondary {
            db,
            follower: Mutex::new(follower),
        })
    }

    /// Reads what the primary wrote since the last catch-up — its newer
    /// manifest (tables flushed, compacted, removed; keyspaces created or
    /// dropped) and the new records of its logs — and makes it the view
    /// (RocksDB's `TryCatchUpWithPrimary`). Readers are never blocked;
    /// a read that began before it returns sees the view it began with or
    /// a newer one, and every read after it sees at least what this call
    /// reports. Calls are serialised; any thread may make them.
    ///
    /// What the primary has not written to its log file yet (a write in
    /// progress, a batch torn by a crash) is left for the next call: the
    /// view ends before it. A primary that rewrites its manifest meanwhile
    /// makes this start over (a bounded number of times). On an error the
    /// view stays as it was.
    pub fn try_catch_up(&self) -> Result<CatchUp> {
        self.follower.lock().catch_up(&self.db.inner)
    }

    /// The sequence number of the last write the secondary sees now.
    pub fn sequence(&self) -> u64 {
        self.db.inner.snapshot().0
    }

    /// The secondary as a [`Db`] (what `Deref` gives).
    pub fn db(&self) -> &Db {
        &self.db
    }

    /// Closes the secondary: see [`Db::close`].
    pub fn close(self) -> Result<()> {
        let Secondary { db, follower } = self;
        drop(follower);
        db.close()
    }
}

impl Deref for Secondary {
    type Target = Db;

    fn deref(&self) -> &Db {
        &self.db
    }
}

impl std::fmt::Debug for Secondary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Secondary")
            .field("primary", &self.db.inner.dir)
            .field("sequence", &self.sequence())
            .finish()
    }
}
