//! Row locks for locking (pessimistic) transactions.
//!
//! Owns: [`RowLocks`] — the locks one transaction holds, taken from the
//! database's [`LockTable`] and released when it ends (commit, rollback or
//! drop) — and the errors a refused lock turns into.
//! Must never: release a lock before its transaction's commit is written
//! (or abandoned), keep one after, or leave a refused wait recorded.
//!
//! `table.rs` holds the shared table, `waits.rs` the wait-for graph it
//! checks for deadlocks.

mod table;
mod waits;

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;

use crate::error::{Error, Result};
pub(crate) use table::LockTable;
use table::{lock_key, LockRefused};

/// The row locks one transaction holds.
pub(crate) struct RowLocks {
    table: Arc<LockTable>,
    owner: u64,
    timeout: Duration,
    /// Keys taken (in the table's naming), to release at the end.
    held: Mutex<Vec<Vec<u8>>>,
}

impl RowLocks {
    pub fn new(table: &Arc<LockTable>, timeout: Duration) -> RowLocks {
        RowLocks {
            owner: table.new_owner(),
            table: Arc::clone(table),
            timeout,
            held: Mutex::new(Vec::new()),
        }
    }

    /// Locks `key` of `keyspace` for this transaction (at once when it
    /// holds it already), waiting up to the timeout for another holder.
    pub fn lock(&self, keyspace: u32, key: &[u8]) -> Result<()> {
        let locked = lock_key(keyspace, key);
        match self.table.lock(self.owner, &locked, self.timeout) {
            Ok(true) => {
                self.held.lock().push(locked);
                Ok(())
            }
            Ok(false) => Ok(()),
            Err(LockRefused::TimedOut) => Err(Error::LockTimeout {
                key: key.to_vec(),
                timeout: self.timeout,
            }),
            Err(LockRefused::Deadlock) => Err(Error::Deadlock { key: key.to_vec() }),
        }
    }

    /// Keys this transaction holds.
    pub fn count(&self) -> usize {
        self.held.lock().len()
    }
}

impl Drop for RowLocks {
    fn drop(&mut self) {
        let held = std::mem::take(&mut *self.held.lock());
        self.table.release(self.owner, &held);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[test]
    fn a_held_key_waits_then_times_out_and_is_free_after_release() {
        let table = Arc::new(LockTable::default());
        let first = RowLocks::new(&table, Duration::from_millis(20));
        let second = RowLocks::new(&table, Duration::from_millis(20));
        first.lock(0, b"k").unwrap();
        first.lock(0, b"k").unwrap();
        assert_eq!(first.count(), 1);
        // Another keyspace's key of the same bytes is another lock.
        second.lock(1, b"k").unwrap();
        assert!(matches!(
            second.lock(0, b"k"),
            Err(Error::LockTimeout { ref key, .. }) if key == b"k"
        ));
        drop(first);
        second.lock(0, b"k").unwrap();
        assert_eq!(table.locked_keys(), 2);
        drop(second);
        assert_eq!(table.locked_keys(), 0);
    }

    #[test]
    fn the_wait_closing_a_cycle_is_refused_and_the_other_proceeds() {
        let table = Arc::new(LockTable::default());
        let a = RowLocks::new(&table, Duration::from_secs(30));
        let b = RowLocks::new(&table, Duration::from_secs(30));
        a.lock(0, b"x").unwrap();
        b.lock(0, b"y").unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::scope(|s| {
            s.spawn(|| tx.send(a.lock(0, b"y").map(|()| a.count())).unwrap());
            // Wait until a is recorded as waiting for b.
            while table.waiting() == 0 {
                std::thread::yield_now();
            }
            assert!(matches!(b.lock(0, b"x"), Err(Error::Deadlock { .. })));
            drop(b);
            assert_eq!(rx.recv().unwrap().unwrap(), 2);
        });
    }
}
