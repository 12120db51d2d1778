//! A write group's memtable inserts, shared between its writers.
//!
//! Owns: [`InsertSlot`] (a queued batch's inserts as the group's leader
//! hands them out: offered, claimed by one thread, done) and
//! [`apply_batch`] (one batch's operations into the memtables of their
//! keyspaces, at consecutive sequence numbers).
//! Must never: let two threads insert one batch, let the leader make a
//! group visible before every batch of it is inserted, or touch the log,
//! the sequence numbers or the memtables' rotation (the leader, under the
//! writer lock, keeps those; a follower inserts only while that lock is
//! held for its group, so the memtables it inserts into stay the active
//! ones).
//!
//! After the group's log record is written, the leader offers every other
//! batch of the group to the writer that queued it, which is usually
//! spinning for the group's end, and inserts its own meanwhile: the
//! memtable inserts (a skiplist search through memory far larger than the
//! CPU's caches) of two writers run on two cores instead of one after the
//! other. A batch whose writer did not take it (asleep, or not looking
//! yet) the leader claims and inserts itself, so a group never waits for a
//! sleeping writer.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::batch::{RawBatch, WriteBatch};
use crate::db::inner::DbInner;
use crate::db::super_version::SuperVersion;
use crate::error::{Error, Result};
use crate::key::SeqNo;

/// The leader offers the batch's inserts; `first_seq` is set.
const OFFERED: u8 = 1;
/// A thread (the batch's writer or the leader) took them.
const CLAIMED: u8 = 2;
/// The batch is in the memtables (or its insert failed: `error`).
const DONE: u8 = 3;

/// Spins the leader waits for a writer inserting its own batch before it
/// yields its core between checks.
const SPINS_BEFORE_YIELD: u32 = 1 << 12;

/// One queued batch's memtable inserts, as handed out within its group.
#[derive(Default)]
pub(crate) struct InsertSlot {
    /// 0 (nothing offered: the default), then [`OFFERED`], [`CLAIMED`],
    /// [`DONE`].
    state: AtomicU8,
    /// The sequence number of the batch's first operation.
    first_seq: AtomicU64,
    /// Key and value bytes the batch wrote, once done.
    user_bytes: AtomicU64,
    /// The insert failed (a bug: see [`apply_batch`]).
    error: Mutex<Option<Error>>,
}

impl InsertSlot {
    /// The leader offers the batch's inserts at `first_seq`.
    pub fn offer(&self, first_seq: SeqNo) {
        self.first_seq.store(first_seq.0, Ordering::Relaxed);
        self.state.store(OFFERED, Ordering::Release);
    }

    /// Whether the leader offered the inserts and nobody took them yet.
    #[inline]
    pub fn is_offered(&self) -> bool {
        self.state.load(Ordering::Acquire) == OFFERED
    }

    /// Takes the offered inserts: true for exactly one caller.
    fn claim(&self) -> bool {
        self.state
            .compare_exchange(OFFERED, CLAIMED, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }

    /// Inserts `batch` if it was offered and this thread takes it.
    pub fn insert_if_offered(&self, inner: &DbInner, batch: &WriteBatch) {
        if !self.claim() {
            return;
        }
        let first_seq = SeqNo(self.first_seq.load(Ordering::Relaxed));
        let default_sv = inner.default.current.load();
        match apply_batch(inner, &default_sv, batch, first_seq) {
            Ok(bytes) => self.user_bytes.store(bytes, Ordering::Relaxed),
            Err(e) => *self.error.lock() = Some(e),
        }
        // Release: the leader that sees DONE sees the entries whole.
        self.state.store(DONE, Ordering::Release);
    }

    /// The leader's side, after its own batch: inserts the batch itself
    /// unless its writer took it, then waits until it is done. Returns the
    /// batch's user bytes, or the insert's error.
    pub fn finish(&self, inner: &DbInner, batch: &WriteBatch) -> Result<u64> {
        self.insert_if_offered(inner, batch);
        // Its writer is inserting it now: a skiplist insert or a few. On a
        // busy machine that writer may lose its core meanwhile: then this
        // one gives its own up rather than spin through the time slice.
        let mut spins = 0u32;
        while self.state.load(Ordering::Acquire) != DONE {
            spins += 1;
            if spins < SPINS_BEFORE_YIELD {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        match self.error.lock().take() {
            Some(e) => Err(e),
            None => Ok(self.user_bytes.load(Ordering::Relaxed)),
        }
    }
}

/// Applies every operation of `batch` to the active memtable of its
/// keyspace (`default_sv` for the default keyspace), the first at
/// `first_seq` and each next one at the next number. Returns the key and
/// value bytes written.
///
/// Cannot fail: sequence numbers are handed out once (under the writer
/// lock) and a batch's keys and values fit its u32 lengths. Should it fail
/// anyway (a bug), the memtable no longer matches the log: the caller does
/// not make the group visible and stops writes as after a log failure.
pub(crate) fn apply_batch(
    inner: &DbInner,
    default_sv: &SuperVersion,
    batch: &WriteBatch,
    first_seq: SeqNo,
) -> Result<u64> {
    // Nearly every operation is the default keyspace's, or the one before
    // it's: each other keyspace is loaded when it first follows another.
    let mut other: Option<(u32, Option<Arc<SuperVersion>>)> = None;
    let mut seq = first_seq;
    let mut user_bytes = 0u64;
    for op in batch.iter() {
        user_bytes += (op.key.len() + op.value.len()) as u64;
        let mem = if op.keyspace == inner.default.id {
            Some(&default_sv.mem.mem)
        } else {
            if other.as_ref().is_none_or(|(id, _)| *id != op.keyspace) {
                let sv = inner.tree_by_id(op.keyspace).map(|t| t.current.load_full());
                other = Some((op.keyspace, sv));
            }
            // A keyspace dropped after its batch was checked: the drop
            // came after the write, and took the write's records with it.
            other
                .as_ref()
                .and_then(|(_, sv)| sv.as_ref().map(|sv| &sv.mem.mem))
        };
        if let Some(mem) = mem {
            mem.apply(&op, seq)?;
        }
        seq = seq.next();
    }
    Ok(user_bytes)
}
