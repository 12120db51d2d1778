//! A queued batch's memtable inserts as its write group's leader hands
//! them out: offered (with the batch's first sequence number), claimed by
//! exactly one thread, done.
//!
//! Owns: [`InsertSlot`], its states and the leader's wait for a batch its
//! writer is inserting.
//! Must never: let two threads run one batch's inserts, or report a batch
//! done before its inserts returned (the leader makes the group visible
//! after). What an insert is belongs to the write path (`write_insert.rs`).

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

use parking_lot::Mutex;

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
    /// The insert failed (a bug: see `write_insert::apply_batch`).
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

    /// Runs `insert` (the batch's inserts from the given first sequence
    /// number, returning its user bytes) if the inserts were offered and
    /// this thread takes them.
    pub fn insert_if_offered(&self, insert: impl FnOnce(SeqNo) -> Result<u64>) {
        if !self.claim() {
            return;
        }
        let first_seq = SeqNo(self.first_seq.load(Ordering::Relaxed));
        match insert(first_seq) {
            Ok(bytes) => self.user_bytes.store(bytes, Ordering::Relaxed),
            Err(e) => *self.error.lock() = Some(e),
        }
        // Release: the leader that sees DONE sees the entries whole.
        self.state.store(DONE, Ordering::Release);
    }

    /// The leader's side, after its own batch: runs `insert` itself unless
    /// the batch's writer took the inserts, then waits until it is done. Returns the
    /// batch's user bytes, or the insert's error.
    pub fn finish(&self, insert: impl FnOnce(SeqNo) -> Result<u64>) -> Result<u64> {
        self.insert_if_offered(insert);
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
