//! A write group's memtable inserts, shared between its writers.
//!
//! Owns: [`apply_batch`] and [`apply_at`] (one batch's operations into the
//! memtables of their keyspaces, at consecutive sequence numbers); the
//! hand-over itself is `insert_slot.rs`'s.
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

use std::sync::Arc;

use crate::batch::{RawBatch, WriteBatch};
use crate::db::inner::DbInner;
use crate::db::super_version::SuperVersion;
use crate::error::Result;
use crate::key::SeqNo;

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

/// [`apply_batch`] with the default keyspace's memtable loaded here: for a
/// batch's own writer, inserting while its group's leader holds the writer
/// lock (so that memtable is the one the leader inserts into).
pub(crate) fn apply_at(inner: &DbInner, batch: &WriteBatch, first_seq: SeqNo) -> Result<u64> {
    apply_batch(inner, &inner.default.current.load(), batch, first_seq)
}
