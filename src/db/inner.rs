//! The state every part of an open database shares: [`DbInner`].
//!
//! Owns: `DbInner` — the directory, the options, the keyspaces (each
//! keyspace's current super-version: memtable, immutable memtables, table
//! version, which readers load without a lock), the last visible sequence
//! number, and the locks and state of the writers, the manifest and the
//! background threads — and the lookups over it every part uses.
//! Must never: name a part that works on the state (the write path,
//! flushes, compactions, reads, opening): they all import this file, and
//! each state it holds is defined below it, in a file of its own.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;
use parking_lot::{Condvar, Mutex};

use crate::db::background_state::BgState;
use crate::db::counters::DbCounters;
use crate::db::handle_counts::HandleCounts;
use crate::db::latency::DbLatency;
use crate::db::locking::LockTable;
use crate::db::oracle::Oracle;
use crate::db::pacing::Pacer;
use crate::db::recovery_report::RecoveryReport;
use crate::db::super_version::SuperVersion;
use crate::db::tree::{memtable_memory, Tree};
use crate::db::version::Version;
use crate::db::version_set::{TreeState, VersionSet};
use crate::db::write_queue::{WriteQueue, WriterState};
use crate::error::Result;
use crate::events::EventQueue;
use crate::fs::{DirLock, SharedFs};
use crate::key::SeqNo;
use crate::options::Options;
use crate::shared::WriteBufferSlot;
use crate::table::ReadContext;

/// The state of one open database, shared (in an `Arc`) by the `Db`, its
/// handles and the background threads.
pub(crate) struct DbInner {
    pub dir: PathBuf,
    pub opts: Options,
    pub fs: SharedFs,
    /// The keyspace named `default` (also first in `trees`), kept apart so
    /// the methods of `Db` reach it without a lookup.
    pub default: Arc<Tree>,
    /// Every keyspace, `default` first, then in creation order. Replaced
    /// whole (under the writer and version locks) when one is created or
    /// dropped.
    pub trees: ArcSwap<Vec<Arc<Tree>>>,
    /// Highest sequence number whose write is complete and visible.
    pub last_visible: AtomicU64,
    /// Odd while a secondary publishes a new view (its sequence number,
    /// then its super-versions); a snapshot taken across it takes again.
    /// Always 0 on a primary.
    pub view_generation: AtomicU64,
    pub writer: Mutex<WriterState>,
    pub queue: Mutex<WriteQueue>,
    pub queue_cv: Condvar,
    /// Write groups finished so far: what a waiting writer watches while it
    /// spins before it sleeps on `queue_cv` (see the group commit, in `write.rs`).
    pub write_groups_finished: AtomicU64,
    /// Batches queued so far: what a leader watches while it waits for a
    /// batch to join its group (see the group commit, in `write.rs`).
    pub writes_queued: AtomicU64,
    /// Live transactions' snapshots and recent commits' keys, for the
    /// conflict check at commit. Taken under the writer lock, never the
    /// other way round.
    pub oracle: Mutex<Oracle>,
    /// Row locks of locking transactions (`TransactionOptions::pessimistic`).
    pub locks: Arc<LockTable>,
    /// Serialises manifest writes and super-version publication.
    pub versions: Mutex<VersionSet>,
    pub bg: Mutex<BgState>,
    pub bg_cv: Condvar,
    /// The block cache, open-file cache and read counters every table shares.
    pub tables: Arc<ReadContext>,
    /// Set (for good) when corruption stopped all writes; the cause is in `bg`.
    pub writes_stopped: AtomicBool,
    /// Paces compactions' writes (`Options::compaction_bytes_per_sec`,
    /// `Options::rate_limiter`).
    pub pacer: Option<Pacer>,
    /// Paces flushes' writes (`Options::rate_limiter`).
    pub flush_pacer: Option<Pacer>,
    /// This database's place under `Options::write_buffer_manager`.
    pub write_buffer: Option<WriteBufferSlot>,
    pub counters: DbCounters,
    /// Latency and size histograms (`Db::histograms`); scans hold them too.
    pub latency: Arc<DbLatency>,
    /// Where background work's events go (`Options::add_event_listener`).
    pub events: EventQueue,
    pub recovery: RecoveryReport,
    /// Live handles by kind (what `close` names).
    pub handles: HandleCounts,
    /// The directory lock: released when the last of the `Db` and its
    /// handles goes (a snapshot still reads the directory's tables).
    pub _lock: Box<dyn DirLock>,
}

impl DbInner {
    pub fn snapshot(&self) -> SeqNo {
        SeqNo(self.last_visible.load(Ordering::Acquire))
    }

    pub fn path_of(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Before a write, with no lock of this database held: under a shared
    /// memtable budget (`Options::write_buffer_manager`) near its end,
    /// seals the largest memtable of any database and waits while the
    /// flushes are behind.
    pub fn admit_write(&self) {
        if let Some(slot) = &self.write_buffer {
            slot.admit();
        }
    }

    /// After a write group or a flush: tells a shared memtable budget what
    /// this database's memtables hold now.
    pub fn report_memtables(&self) {
        if let Some(slot) = &self.write_buffer {
            slot.report(memtable_memory(&self.trees.load()).total());
        }
    }

    /// The live keyspace named `name`.
    pub fn tree_named(&self, name: &str) -> Option<Arc<Tree>> {
        self.trees.load().iter().find(|t| t.name == name).cloned()
    }

    /// The live keyspace with id `id`.
    pub fn tree_by_id(&self, id: u32) -> Option<Arc<Tree>> {
        if id == self.default.id {
            return Some(Arc::clone(&self.default));
        }
        self.trees.load().iter().find(|t| t.id == id).cloned()
    }

    /// Makes the keyspaces as published durable, but `change`'s tree with
    /// its new version and oldest needed log. The caller holds the version
    /// lock (so no other publication happens meanwhile).
    pub fn persist(
        &self,
        versions: &mut VersionSet,
        change: Option<(&Tree, &Version, u64)>,
    ) -> Result<()> {
        let trees = self.trees.load();
        let published: Vec<Arc<SuperVersion>> =
            trees.iter().map(|t| t.current.load_full()).collect();
        let parts: Vec<TreeState<'_>> = trees
            .iter()
            .zip(&published)
            .map(|(tree, sv)| match change {
                Some((changed, version, log_number)) if changed.id == tree.id => TreeState {
                    id: tree.id,
                    name: &tree.name,
                    version,
                    log_number,
                    settings: tree.given.lock().settings().clone(),
                },
                _ => TreeState {
                    id: tree.id,
                    name: &tree.name,
                    version: &sv.version,
                    log_number: sv.oldest_log(),
                    settings: tree.given.lock().settings().clone(),
                },
            })
            .collect();
        let last = SeqNo(self.last_visible.load(Ordering::Acquire));
        versions.persist(self.fs.as_ref(), &self.dir, &parts, last)
    }
}
