//! Statistics counters that many threads bump without sharing a cache line
//! and, mostly, without a locked instruction.
//!
//! Owns: [`Sharded`], a set of counter structs each on cache lines of its
//! own, and the choice of the one the calling thread bumps. A thread claims
//! a shard of its own on its first bump (one of [`SHARDS`] − 1, released
//! when the thread ends) and adds to it with a plain load and store: it is
//! that shard's only writer, so no count can be lost, and it pays no
//! `lock`-prefixed instruction (on x86-64 each one also waits for every
//! earlier load, which would serialise the cache misses a get overlaps).
//! Threads beyond those shards share shard 0 and add atomically. Two
//! readers on two cores thus write lines only they touch. A reading of the
//! counters sums the shards.
//! Must never: import another module of the crate (it is a leaf), order
//! anything (the counters are statistics, not synchronisation), or lose a
//! count (only a shard's owner adds without a locked instruction).

use std::ops::Deref;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// Shards per counter set: more than the threads that usually read at
/// once, so that each of them owns one.
const SHARDS: usize = 16;

/// The shard of threads that own none, added to atomically.
const SHARED: usize = 0;

/// Which shards a live thread owns.
static OWNED: [AtomicBool; SHARDS] = [const { AtomicBool::new(false) }; SHARDS];

/// Where the next thread starts looking for a free shard.
static NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);

/// A thread's shard, and whether it is the shard's only writer.
struct Claim {
    slot: usize,
    owned: bool,
}

impl Claim {
    /// The first free shard from a round-robin start, or the shared one.
    fn take() -> Claim {
        let start = NEXT_SLOT.fetch_add(1, Ordering::Relaxed);
        for step in 0..SHARDS {
            let slot = start.wrapping_add(step) % SHARDS;
            // Acquire: the previous owner's last adds happen before ours.
            let free = slot != SHARED
                && OWNED.get(slot).is_some_and(|flag| {
                    flag.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                        .is_ok()
                });
            if free {
                return Claim { slot, owned: true };
            }
        }
        Claim {
            slot: SHARED,
            owned: false,
        }
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if self.owned {
            // Release: the next owner's loads see this thread's last adds.
            if let Some(flag) = OWNED.get(self.slot) {
                flag.store(false, Ordering::Release);
            }
        }
    }
}

thread_local! {
    /// This thread's shard, claimed on its first bump.
    static SLOT: Claim = Claim::take();
}

/// One shard, on cache lines of its own (128 bytes: the pair of lines the
/// adjacent-line prefetcher moves together).
#[derive(Default)]
#[repr(align(128))]
struct Padded<T>(T);

/// [`SHARDS`] copies of a counter struct `T` (of atomics); each thread
/// bumps its own copy ([`Sharded::local`]) and a reading sums them all
/// ([`Sharded::iter`]). A set costs 2 KiB, so sets kept per table cost
/// little beside the table's filter and index.
pub(crate) struct Sharded<T> {
    shards: Box<[Padded<T>; SHARDS]>,
}

impl<T: Default> Default for Sharded<T> {
    fn default() -> Self {
        Sharded {
            shards: Box::new(std::array::from_fn(|_| Padded::default())),
        }
    }
}

impl<T> Sharded<T> {
    /// The copy the calling thread bumps (the shared one, added to
    /// atomically, for a thread being torn down, whose claim is gone).
    #[inline]
    pub(crate) fn local(&self) -> Local<'_, T> {
        let (slot, owned) = SLOT
            .try_with(|claim| (claim.slot, claim.owned))
            .unwrap_or((SHARED, false));
        #[expect(
            clippy::indexing_slicing,
            reason = "slot % SHARDS < SHARDS, the array's length"
        )]
        let shard = &self.shards[slot % SHARDS].0;
        Local { shard, owned }
    }

    /// Every copy, to be summed.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        self.shards.iter().map(|shard| &shard.0)
    }
}

impl<T> std::fmt::Debug for Sharded<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sharded")
            .field("shards", &self.shards.len())
            .finish()
    }
}

/// The calling thread's copy of a counter set: read it through `Deref`,
/// add to it with [`Local::add`].
pub(crate) struct Local<'a, T> {
    shard: &'a T,
    /// True when this thread is the copy's only writer.
    owned: bool,
}

impl<T> Deref for Local<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        self.shard
    }
}

impl<T> Local<'_, T> {
    /// Adds `amount` to the counter `field` picks from this copy: a plain
    /// load and store when the thread owns the copy, an atomic add when it
    /// shares it.
    #[inline]
    pub(crate) fn add(&self, field: impl FnOnce(&T) -> &AtomicU64, amount: u64) {
        let counter = field(self.shard);
        if self.owned {
            counter.store(
                counter.load(Ordering::Relaxed).wrapping_add(amount),
                Ordering::Relaxed,
            );
        } else {
            counter.fetch_add(amount, Ordering::Relaxed);
        }
    }

    /// True when this thread is the copy's only writer (it may add with a
    /// plain load and store).
    #[inline]
    pub(crate) fn owned(&self) -> bool {
        self.owned
    }

    /// [`Local::add`] of 1.
    #[inline]
    pub(crate) fn bump(&self, field: impl FnOnce(&T) -> &AtomicU64) {
        self.add(field, 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_thread_adds_to_the_sum() {
        let counters: Sharded<AtomicU64> = Sharded::default();
        std::thread::scope(|s| {
            for _ in 0..40 {
                s.spawn(|| {
                    for _ in 0..1000 {
                        counters.local().bump(|c| c);
                    }
                });
            }
        });
        let sum: u64 = counters.iter().map(|c| c.load(Ordering::Relaxed)).sum();
        assert_eq!(sum, 40_000);
    }

    #[test]
    fn threads_that_come_and_go_lose_no_count() {
        // More threads over the run than shards, a few at a time: shards
        // pass from ended threads to new ones, and the sum stays exact.
        let counters: Sharded<AtomicU64> = Sharded::default();
        for _ in 0..8 {
            std::thread::scope(|s| {
                for _ in 0..6 {
                    s.spawn(|| {
                        for i in 0..1000 {
                            counters.local().add(|c| c, i % 3);
                        }
                    });
                }
            });
        }
        let sum: u64 = counters.iter().map(|c| c.load(Ordering::Relaxed)).sum();
        assert_eq!(sum, 8 * 6 * 999);
    }

    #[test]
    fn a_thread_keeps_its_shard_and_shards_do_not_share_lines() {
        let counters: Sharded<AtomicU64> = Sharded::default();
        let mine: *const AtomicU64 = &*counters.local();
        assert!(std::ptr::eq(mine, &*counters.local()));
        let other = std::thread::scope(|s| {
            s.spawn(|| &*counters.local() as *const AtomicU64 as usize)
                .join()
                .unwrap()
        });
        // Whichever shards the two threads drew, distinct ones are whole
        // cache-line pairs apart.
        let distance = (mine as usize).abs_diff(other);
        assert_eq!(distance % 128, 0);
        assert_eq!(std::mem::align_of::<Padded<AtomicU64>>(), 128);
    }
}
