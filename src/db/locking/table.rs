//! The row lock table every locking transaction of a database shares.
//!
//! Owns: [`LockTable`] — which transaction holds each locked key, in
//! stripes (a mutex and a condition variable each, the key's hash picking
//! its stripe) so transactions locking different keys rarely meet — the
//! bounded wait for a held key, and the wait-for graph that refuses a wait
//! closing a deadlock.
//! Must never: give one key to two transactions at once, let a wait outlast
//! its timeout by more than a wake-up, let a deadlock wait its timeout out
//! (the wait that closes it is refused at once), or lose a wake-up (a
//! release notifies under the stripe's mutex the waiter sleeps on).
//!
//! Lock order: a stripe's mutex, then the wait graph's; never two stripes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use crate::db::locking::waits::WaitGraph;

/// Stripes of the table (RocksDB's `TransactionDB` has 16 by default).
const STRIPES: usize = 64;

/// Why a lock was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LockRefused {
    /// Another transaction held the key for the whole timeout.
    TimedOut,
    /// Waiting would close a cycle of waits.
    Deadlock,
}

struct Stripe {
    /// Locked key (keyspace id and key, see `lock_key`) -> its holder.
    held: Mutex<HashMap<Vec<u8>, u64>>,
    released: Condvar,
}

/// The row locks of one database.
pub(crate) struct LockTable {
    stripes: [Stripe; STRIPES],
    waits: Mutex<WaitGraph>,
    /// Edges in `waits` (read without its lock to skip it when empty).
    waiting: AtomicUsize,
    next_owner: AtomicU64,
}

impl Default for LockTable {
    fn default() -> LockTable {
        LockTable {
            stripes: std::array::from_fn(|_| Stripe {
                held: Mutex::new(HashMap::new()),
                released: Condvar::new(),
            }),
            waits: Mutex::new(WaitGraph::default()),
            waiting: AtomicUsize::new(0),
            next_owner: AtomicU64::new(1),
        }
    }
}

/// The table's name for `key` of keyspace `keyspace`.
pub(crate) fn lock_key(keyspace: u32, key: &[u8]) -> Vec<u8> {
    let mut locked = Vec::with_capacity(4 + key.len());
    locked.extend_from_slice(&keyspace.to_be_bytes());
    locked.extend_from_slice(key);
    locked
}

impl LockTable {
    /// A new owner id, for one transaction.
    pub fn new_owner(&self) -> u64 {
        self.next_owner.fetch_add(1, Ordering::Relaxed)
    }

    #[expect(
        clippy::indexing_slicing,
        reason = "the index is reduced modulo STRIPES, the array's length"
    )]
    fn stripe(&self, key: &[u8]) -> &Stripe {
        let hash = xxhash_rust::xxh3::xxh3_64(key);
        &self.stripes[usize::try_from(hash % STRIPES as u64).unwrap_or(0)]
    }

    /// Takes `key` (from [`lock_key`]) for `owner`, waiting up to `timeout`
    /// while another transaction holds it. `Ok(true)`: taken now;
    /// `Ok(false)`: `owner` held it already.
    pub fn lock(&self, owner: u64, key: &[u8], timeout: Duration) -> Result<bool, LockRefused> {
        let stripe = self.stripe(key);
        let mut held = stripe.held.lock();
        let mut deadline = None;
        // The holder this wait is recorded against in the graph.
        let mut waiting_for = None;
        let outcome = loop {
            let holder = match held.get(key) {
                None => {
                    held.insert(key.to_vec(), owner);
                    break Ok(true);
                }
                Some(&holder) if holder == owner => break Ok(false),
                Some(&holder) => holder,
            };
            if waiting_for != Some(holder) {
                // A wait starts (or the key changed hands while this one
                // slept): refuse it if it closes a cycle.
                let mut waits = self.waits.lock();
                let recorded = waits.start_wait(owner, holder);
                self.waiting.store(waits.len(), Ordering::Release);
                if !recorded {
                    // `start_wait` dropped this owner's edge.
                    return Err(LockRefused::Deadlock);
                }
                waiting_for = Some(holder);
            }
            let deadline = *deadline.get_or_insert_with(|| Instant::now() + timeout);
            if stripe.released.wait_until(&mut held, deadline).timed_out()
                && held.get(key).is_some_and(|&h| h != owner)
            {
                break Err(LockRefused::TimedOut);
            }
        };
        drop(held);
        if waiting_for.is_some() {
            let mut waits = self.waits.lock();
            waits.end_wait(owner);
            self.waiting.store(waits.len(), Ordering::Release);
        }
        outcome
    }

    /// Releases `keys` (each held by `owner`) and wakes their waiters.
    pub fn release(&self, owner: u64, keys: &[Vec<u8>]) {
        for key in keys {
            let stripe = self.stripe(key);
            let mut held = stripe.held.lock();
            if held.get(key.as_slice()) == Some(&owner) {
                held.remove(key.as_slice());
                stripe.released.notify_all();
            }
        }
        // A waiter records its edge under the stripe's mutex before it
        // sleeps, so an edge to `owner` recorded before the releases above
        // shows in `waiting` now; none can be recorded after them.
        if self.waiting.load(Ordering::Acquire) > 0 {
            let mut waits = self.waits.lock();
            waits.released(owner);
            self.waiting.store(waits.len(), Ordering::Release);
        }
    }

    /// Transactions waiting for a lock now.
    #[cfg(test)]
    pub fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Acquire)
    }

    /// Keys locked now.
    #[cfg(test)]
    pub fn locked_keys(&self) -> usize {
        self.stripes.iter().map(|s| s.held.lock().len()).sum()
    }
}
