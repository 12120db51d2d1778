//! The writers' shared state: the queue of batches waiting for a group,
//! and what only the group leader touches (the log, the last sequence
//! number).
//!
//! Owns: [`WriterState`], [`WriteQueue`] and a queued batch ([`Pending`]),
//! as `DbInner` holds them under its locks. Must never: hold anything that
//! reaches the database's state (the write path, in `write.rs`, works on
//! them).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::batch::WriteBatch;
use crate::db::insert_slot::InsertSlot;
use crate::db::oracle::ConflictCheck;
use crate::error::{Error, Result};
use crate::key::SeqNo;
use crate::wal::WalWriter;

/// State only the group leader (and recovery) touches.
pub(crate) struct WriterState {
    pub wal: WalWriter,
    pub log_number: u64,
    pub last_seq: SeqNo,
    /// Set when the log failed (an append, a sync, or a rotation away from
    /// it): its tail is uncertain or it cannot be left, so every write is
    /// refused until recovery has started a new log.
    pub log_failure: Option<Error>,
    /// The number of the log recovery will start once every memtable is
    /// flushed (the sealed failed log's successor; the file does not exist yet).
    pub pending_log: Option<u64>,
    /// The database was closed: the log ended (with its close record), and
    /// no write may follow.
    pub closed: bool,
    /// The active log holds records appended since its last sync
    /// (`Options::sync_interval` syncs only then).
    pub unsynced: bool,
}

/// A batch in the queue, waiting for its group's outcome.
pub(crate) struct Pending {
    pub batch: WriteBatch,
    /// The batch must be on disk before it is acknowledged.
    pub sync: bool,
    /// A transaction's commit: written only if the oracle finds no conflict.
    pub check: Option<ConflictCheck>,
    /// The oracle refused the batch: it is not written, its writer gets
    /// `Error::Conflict`.
    pub rejected: AtomicBool,
    /// The batch's memtable inserts, when its group's leader hands them
    /// to this batch's writer.
    pub insert: InsertSlot,
    pub done: Mutex<Option<Result<()>>>,
}

impl Pending {
    /// The batch's outcome, given its group's.
    pub fn outcome(&self, group: &Result<()>) -> Result<()> {
        if self.rejected.load(Ordering::Acquire) {
            return Err(Error::Conflict);
        }
        match group {
            Ok(()) => Ok(()),
            Err(e) => Err(e.duplicate()),
        }
    }
}

#[derive(Default)]
pub(crate) struct WriteQueue {
    pub waiting: VecDeque<Arc<Pending>>,
    /// Whether writers met at the last group: it held more than one batch,
    /// or its leader had waited behind another group.
    pub writers_met: bool,
}
