//! [`WriteBufferManager`]: one budget for the memtables of many databases.
//!
//! Every database given the manager holds a [`WriteBufferSlot`]: it reports
//! into it what its memtables hold (after each write group and each flush,
//! in steps of [`REPORT_STEP`]), and asks it before each write whether the
//! process is over its budget ([`WriteBufferSlot::admit`], called with no
//! lock of the database held). Near and over the budget, two things
//! happen, as in RocksDB's `WriteBufferManager`:
//! - **the largest memtable is flushed**: when the active memtables hold
//!   7/8 of the budget, or everything held reaches the budget while the
//!   active ones hold half of it, the memtable holding the most entries,
//!   over every database, is sealed (its database starts a new log and its
//!   flush lane writes it out), then the next largest, until neither holds.
//!   Its memory is free once its flush is done;
//! - **writers stall** while everything held is at the budget or over and
//!   a flush is going that will free some of it. A stalled writer waits
//!   with no lock held, woken by each flush that frees memory (and at
//!   least every [`STALL_SLICE`] to look again), and then writes: a write
//!   is delayed, never refused or lost for the budget.
//!
//! Why flush first and stall second: a flush is what frees memory, and
//! choosing the largest memtable frees the most per flush (and leaves the
//! fewest tables for compaction to merge); stalling alone would wait for
//! flushes that nothing started. Starting at 7/8 of the budget leaves the
//! flush an eighth of it to finish in before anyone waits; the stall is
//! still needed when writers outrun the disk, or the budget would be a
//! wish.
//!
//! It cannot deadlock: the thread that seals another database's memtable
//! holds no lock of its own database (only the manager's `sealing` lock,
//! which every other thread only tries, never waits for), and takes that
//! database's writer lock, whose holder may wait only for its own
//! database's flushes; flushes never wait for the manager. Memtables of a
//! database whose flushes are failing, or that was closed, are not waited
//! for (their memory stays until its recovery or its drop; its own writes
//! are refused meanwhile).
//!
//! Owns: the budget, the reported total, the members (weakly: a database
//! dropped leaves by its slot's drop) and the stall's wake-ups.
//! Must never: call into a database under the members lock (a database
//! dropped by the call would take that lock to leave), wait for a
//! database's lock while any lock other than `sealing` is held, or refuse a
//! write.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

/// A database reports a change of its memtables' bytes once it is at least
/// this large (or a decrease to nothing): so a write group does not touch
/// the shared total each time, at an error of this much per database.
pub(crate) const REPORT_STEP: usize = 64 << 10;

/// The longest a stalled writer sleeps before it looks again.
pub(crate) const STALL_SLICE: Duration = Duration::from_millis(10);

/// What a database's memtables hold now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct MemtableMemory {
    /// Bytes of the active memtables (arena blocks, key filters).
    pub active: usize,
    /// Bytes of the largest active memtable holding anything: what
    /// sealing it frees.
    pub largest_active: usize,
    /// Bytes of the memtables waiting for a flush.
    pub waiting: usize,
}

impl MemtableMemory {
    /// Everything it holds.
    pub fn total(&self) -> usize {
        self.active.saturating_add(self.waiting)
    }
}

/// What the manager needs of a database (implemented by the database
/// layer, which sits above this module).
pub(crate) trait BufferedMemory: Send + Sync {
    /// What its memtables hold now.
    fn memtable_memory(&self) -> MemtableMemory;
    /// Seals its largest active memtable for a flush, taking its writer
    /// lock (the caller holds none of this database's locks); false when it
    /// sealed none (closed, failing, or too many memtables already wait).
    fn seal_largest(&self) -> bool;
    /// Whether its flushes are going (none failing): only then is waiting
    /// for them sure to end.
    fn flushes_going(&self) -> bool;
}

struct Member {
    id: u64,
    database: Weak<dyn BufferedMemory>,
}

struct Budget {
    bytes: usize,
    /// The sum of what the members last reported.
    reported: AtomicUsize,
    members: Mutex<Vec<Member>>,
    next_id: AtomicU64,
    /// Held by the one thread that seals memtables now; others only try it.
    sealing: Mutex<()>,
    /// Stalled writers wait here; a report of freed memory wakes them.
    freed_lock: Mutex<()>,
    freed: Condvar,
    seals: AtomicU64,
    stalls: AtomicU64,
    stall_micros: AtomicU64,
}

/// A budget for the memtables of many databases (RocksDB's
/// `WriteBufferManager`): give the same manager to each database's
/// [`crate::Options::write_buffer_manager`], and their memtables together,
/// active and waiting to be flushed, hold about its budget at most: from
/// 7/8 of it on, the largest memtable of any of them is flushed, and at
/// the budget, writers of every database wait for the flushes going
/// (delayed, never refused, never lost; see `src/shared/write_buffer.rs`
/// for why flushes first and stalls second, and why it cannot deadlock).
/// Counted: the memory each memtable holds (its arena's blocks, used or
/// not, and its key filter), so the budget bounds memory, not just data.
/// Cloning it clones the handle.
///
/// ```
/// use siftdb::{Db, Options, WriteBufferManager};
/// # let dir = tempfile::tempdir().unwrap();
/// let memtables = WriteBufferManager::new(64 << 20); // for every tenant
/// let options = Options::default().write_buffer_manager(memtables.clone());
/// let tenants = (0..4)
///     .map(|t| Db::open_with(dir.path().join(format!("tenant{t}")), options.clone()))
///     .collect::<Result<Vec<_>, _>>()?;
/// tenants[0].put("k", "v")?;
/// assert!(memtables.usage() <= memtables.budget() + (64 << 10) * tenants.len());
/// # Ok::<(), siftdb::Error>(())
/// ```
#[derive(Clone)]
pub struct WriteBufferManager {
    budget: Arc<Budget>,
}

impl std::fmt::Debug for WriteBufferManager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteBufferManager")
            .field("budget", &self.budget())
            .field("usage", &self.usage())
            .finish_non_exhaustive()
    }
}

impl WriteBufferManager {
    /// A budget of `bytes` (at least 4096: `Options::validate` refuses
    /// less). Give it at least twice the memtable size of the databases
    /// that share it, or every flush of a full memtable stalls writes.
    pub fn new(bytes: usize) -> WriteBufferManager {
        WriteBufferManager {
            budget: Arc::new(Budget {
                bytes,
                reported: AtomicUsize::new(0),
                members: Mutex::new(Vec::new()),
                next_id: AtomicU64::new(1),
                sealing: Mutex::new(()),
                freed_lock: Mutex::new(()),
                freed: Condvar::new(),
                seals: AtomicU64::new(0),
                stalls: AtomicU64::new(0),
                stall_micros: AtomicU64::new(0),
            }),
        }
    }

    /// The budget in bytes.
    pub fn budget(&self) -> usize {
        self.budget.bytes
    }

    /// Bytes the memtables of every database given this manager hold, as
    /// they last reported it (each at most 64 KiB behind).
    pub fn usage(&self) -> usize {
        self.budget.reported.load(Ordering::Relaxed)
    }

    /// Databases that share it now.
    pub fn databases(&self) -> usize {
        self.budget.members.lock().len()
    }

    /// Memtables sealed for a flush because the budget was reached.
    pub fn flushes_triggered(&self) -> u64 {
        self.budget.seals.load(Ordering::Relaxed)
    }

    /// Writes that waited for flushes to bring the memtables under the
    /// budget, and the time they waited together.
    pub fn stalls(&self) -> (u64, Duration) {
        (
            self.budget.stalls.load(Ordering::Relaxed),
            Duration::from_micros(self.budget.stall_micros.load(Ordering::Relaxed)),
        )
    }

    /// True when `other` is a handle of this same manager.
    pub fn same_as(&self, other: &WriteBufferManager) -> bool {
        Arc::ptr_eq(&self.budget, &other.budget)
    }

    /// A slot for a database about to open (not yet a member: see
    /// [`WriteBufferSlot::attach`]).
    pub(crate) fn slot(&self) -> WriteBufferSlot {
        WriteBufferSlot {
            budget: Arc::clone(&self.budget),
            id: self.budget.next_id.fetch_add(1, Ordering::Relaxed),
            reported: AtomicUsize::new(0),
        }
    }
}

impl Budget {
    /// The members still alive, strongly held (the members lock released
    /// before any of them is called).
    fn live(&self) -> Vec<Arc<dyn BufferedMemory>> {
        let members = self.members.lock();
        members
            .iter()
            .filter_map(|m| m.database.upgrade())
            .collect()
    }

    /// Whether memtables must be sealed: the active ones hold 7/8 of the
    /// budget, or everything held reaches it while they hold half of it.
    fn must_seal(&self, active: usize, total: usize) -> bool {
        active > self.bytes - self.bytes / 8 || (total >= self.bytes && active >= self.bytes / 2)
    }

    /// Seals the largest active memtables while [`Budget::must_seal`]
    /// says so; one thread at a time (the others go on).
    fn seal_largest(&self) {
        let Some(_sealing) = self.sealing.try_lock() else {
            return;
        };
        let databases = self.live();
        let mut memory: Vec<(MemtableMemory, &Arc<dyn BufferedMemory>)> =
            databases.iter().map(|d| (d.memtable_memory(), d)).collect();
        let mut active = memory
            .iter()
            .fold(0usize, |s, m| s.saturating_add(m.0.active));
        let waiting = memory
            .iter()
            .fold(0usize, |s, m| s.saturating_add(m.0.waiting));
        memory.sort_unstable_by_key(|m| std::cmp::Reverse(m.0.largest_active));
        for (held, database) in memory {
            if !self.must_seal(active, active.saturating_add(waiting)) || held.largest_active == 0 {
                break;
            }
            if database.seal_largest() {
                self.seals.fetch_add(1, Ordering::Relaxed);
                // Sealed, its bytes wait for the flush: the total stays.
                active = active.saturating_sub(held.largest_active);
            }
        }
    }

    /// Whether a writer must wait: everything held is at the budget or
    /// over, and a flush is going that will free some of it.
    fn behind(&self) -> bool {
        let databases = self.live();
        let mut total = 0usize;
        let mut waiting = Vec::new();
        for database in &databases {
            let memory = database.memtable_memory();
            total = total.saturating_add(memory.total());
            if memory.waiting > 0 {
                waiting.push(database);
            }
        }
        // Only then the databases' background state (a lock each).
        total >= self.bytes && waiting.iter().any(|database| database.flushes_going())
    }

    fn wake_stalled(&self) {
        let _guard = self.freed_lock.lock();
        self.freed.notify_all();
    }
}

/// A database's membership of a [`WriteBufferManager`]: what it reported,
/// and its place among the members (left when the slot is dropped, with
/// the database's state).
pub(crate) struct WriteBufferSlot {
    budget: Arc<Budget>,
    id: u64,
    reported: AtomicUsize,
}

impl WriteBufferSlot {
    /// Makes `database` (the owner of this slot) a member: the manager may
    /// seal its memtables from now on.
    pub(crate) fn attach(&self, database: Weak<dyn BufferedMemory>) {
        self.budget.members.lock().push(Member {
            id: self.id,
            database,
        });
    }

    /// The database's memtables hold `bytes` now.
    pub(crate) fn report(&self, bytes: usize) {
        let last = self.reported.load(Ordering::Relaxed);
        if bytes.abs_diff(last) < REPORT_STEP && !(bytes == 0 && last > 0) {
            return;
        }
        let last = self.reported.swap(bytes, Ordering::Relaxed);
        // A signed change by wrapping arithmetic: the total is the sum of
        // the slots' values, each change added exactly once.
        self.budget
            .reported
            .fetch_add(bytes.wrapping_sub(last), Ordering::Relaxed);
        if bytes < last {
            self.budget.wake_stalled();
        }
    }

    /// Before a write: over the budget, seals the largest memtables (of any
    /// member) and waits while the flushes are behind. The caller holds no
    /// lock of its database.
    pub(crate) fn admit(&self) {
        let budget = &self.budget;
        if budget.reported.load(Ordering::Relaxed) <= budget.bytes - budget.bytes / 8 {
            return;
        }
        budget.seal_largest();
        if !budget.behind() {
            return;
        }
        budget.stalls.fetch_add(1, Ordering::Relaxed);
        let started = Instant::now();
        loop {
            {
                let mut guard = budget.freed_lock.lock();
                budget.freed.wait_for(&mut guard, STALL_SLICE);
            }
            // A flush done may leave the active memtables to seal next.
            budget.seal_largest();
            if !budget.behind() {
                break;
            }
        }
        let micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        budget.stall_micros.fetch_add(micros, Ordering::Relaxed);
    }
}

impl Drop for WriteBufferSlot {
    fn drop(&mut self) {
        self.budget.members.lock().retain(|m| m.id != self.id);
        let last = self.reported.swap(0, Ordering::Relaxed);
        self.budget.reported.fetch_sub(last, Ordering::Relaxed);
        self.budget.wake_stalled();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in database: one active memtable and the bytes waiting.
    struct Fake {
        memory: Mutex<MemtableMemory>,
        slot: WriteBufferSlot,
    }

    impl BufferedMemory for Fake {
        fn memtable_memory(&self) -> MemtableMemory {
            *self.memory.lock()
        }
        fn seal_largest(&self) -> bool {
            let mut memory = self.memory.lock();
            if memory.active == 0 {
                return false;
            }
            memory.waiting += memory.active;
            memory.active = 0;
            memory.largest_active = 0;
            true
        }
        fn flushes_going(&self) -> bool {
            true
        }
    }

    fn member(manager: &WriteBufferManager, active: usize) -> Arc<Fake> {
        let fake = Arc::new(Fake {
            memory: Mutex::new(MemtableMemory {
                active,
                largest_active: active,
                waiting: 0,
            }),
            slot: manager.slot(),
        });
        let weak: Weak<dyn BufferedMemory> = Arc::downgrade(&fake) as Weak<dyn BufferedMemory>;
        fake.slot.attach(weak);
        fake.slot.report(active);
        fake
    }

    /// Near the budget the largest memtable over every member is sealed
    /// (only as many as bring the active ones under 7/8 of it); a dropped
    /// member leaves the total.
    #[test]
    fn the_budget_seals_the_largest_memtable_of_any_member() {
        let manager = WriteBufferManager::new(1 << 20);
        let small = member(&manager, 200 << 10);
        let large = member(&manager, 400 << 10);
        let third = member(&manager, 100 << 10);
        assert_eq!(manager.databases(), 3);
        // Under 7/8 of the budget: nothing happens.
        small.slot.admit();
        assert_eq!(manager.flushes_triggered(), 0);
        // Over it: the largest (another member's) is sealed, which is enough.
        let fourth = member(&manager, 250 << 10);
        fourth.slot.admit();
        assert_eq!(manager.flushes_triggered(), 1);
        assert_eq!(large.memtable_memory().active, 0);
        assert_eq!(large.memtable_memory().waiting, 400 << 10);
        assert_eq!(small.memtable_memory().active, 200 << 10);
        assert_eq!(fourth.memtable_memory().active, 250 << 10);
        // Its flush done, the total falls as the member reports it.
        *large.memory.lock() = MemtableMemory::default();
        large.slot.report(0);
        assert_eq!(manager.usage(), 550 << 10);
        drop(third);
        assert_eq!(manager.databases(), 3);
        assert_eq!(manager.usage(), 450 << 10);
        assert_eq!(manager.stalls().0, 0);
    }

    /// At the budget, with a flush going, a writer waits; the flush
    /// reported done lets it go.
    #[test]
    fn a_writer_waits_at_the_budget_until_a_flush_frees_memory() {
        let manager = WriteBufferManager::new(1 << 20);
        let behind = member(&manager, 0);
        *behind.memory.lock() = MemtableMemory {
            active: 0,
            largest_active: 0,
            waiting: 600 << 10,
        };
        behind.slot.report(600 << 10);
        let writer = member(&manager, 500 << 10);
        let stalled = {
            let writer = Arc::clone(&writer);
            std::thread::spawn(move || writer.slot.admit())
        };
        // Nothing to seal (the active memtables hold under half of it):
        // the writer waits for the flush.
        while manager.stalls().0 == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert!(!stalled.is_finished());
        assert_eq!(manager.flushes_triggered(), 0);
        *behind.memory.lock() = MemtableMemory::default();
        behind.slot.report(0);
        stalled.join().unwrap();
        assert_eq!(manager.stalls().0, 1);
    }
}
