//! Statistics counters that many threads bump without sharing a cache line.
//!
//! Owns: [`Sharded`], a set of counter structs each on cache lines of its
//! own, and the choice of the one the calling thread bumps (a slot handed to
//! each thread on its first bump, round robin over the shards). Two readers
//! on two cores then each write lines only they touch, where one shared set
//! of atomics would move its line between the cores on every get. A reading
//! of the counters sums the shards.
//! Must never: import another module of the crate (it is a leaf), order
//! anything (the counters are statistics, not synchronisation), or lose a
//! count (two threads that share a shard still add atomically).

use std::sync::atomic::{AtomicUsize, Ordering};

/// Shards per counter set: a power of two, more than the threads that
/// usually read at once, so two busy threads rarely draw the same one.
const SHARDS: usize = 16;

/// The slot of the next thread to bump a counter.
static NEXT_SLOT: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// This thread's slot, drawn on its first bump.
    static SLOT: usize = NEXT_SLOT.fetch_add(1, Ordering::Relaxed);
}

/// One shard, on cache lines of its own (128 bytes: the pair of lines the
/// adjacent-line prefetcher moves together).
#[derive(Default)]
#[repr(align(128))]
struct Padded<T>(T);

/// `N` copies (a power of two; [`SHARDS`] unless said) of a counter struct
/// `T` (of atomics); each thread bumps its own copy ([`Sharded::local`])
/// and a reading sums them all ([`Sharded::iter`]). Counters kept per
/// table take fewer shards ([`TABLE_SHARDS`]): there may be thousands of
/// tables, and two readers rarely meet on one table's shard.
pub(crate) struct Sharded<T, const N: usize = SHARDS> {
    shards: Box<[Padded<T>; N]>,
}

/// Shards of a counter set kept per table: 4 × 128 bytes.
pub(crate) const TABLE_SHARDS: usize = 4;

impl<T: Default, const N: usize> Default for Sharded<T, N> {
    fn default() -> Self {
        Sharded {
            shards: Box::new(std::array::from_fn(|_| Padded::default())),
        }
    }
}

impl<T, const N: usize> Sharded<T, N> {
    /// Checked when a set is built: `N` is a non-zero power of two, so
    /// the masked slot in [`Sharded::local`] always exists.
    const SHARD_COUNT_IS_A_POWER_OF_TWO: () = assert!(N.is_power_of_two());

    /// The copy the calling thread bumps (the first one for a thread
    /// being torn down, whose slot is gone).
    #[inline]
    pub(crate) fn local(&self) -> &T {
        let () = Self::SHARD_COUNT_IS_A_POWER_OF_TWO;
        let slot = SLOT.try_with(|slot| *slot).unwrap_or(0);
        #[expect(
            clippy::indexing_slicing,
            reason = "slot & (N - 1) < N: N is a power of two (checked at compile time above)"
        )]
        &self.shards[slot & (N - 1)].0
    }

    /// Every copy, to be summed.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        self.shards.iter().map(|shard| &shard.0)
    }
}

impl<T, const N: usize> std::fmt::Debug for Sharded<T, N> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sharded")
            .field("shards", &self.shards.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU64;

    use super::*;

    #[test]
    fn every_thread_adds_to_the_sum() {
        let counters: Sharded<AtomicU64> = Sharded::default();
        std::thread::scope(|s| {
            for _ in 0..40 {
                s.spawn(|| {
                    for _ in 0..1000 {
                        counters.local().fetch_add(1, Ordering::Relaxed);
                    }
                });
            }
        });
        let sum: u64 = counters.iter().map(|c| c.load(Ordering::Relaxed)).sum();
        assert_eq!(sum, 40_000);
    }

    #[test]
    fn a_table_sized_set_also_loses_no_count() {
        let counters: Sharded<AtomicU64, TABLE_SHARDS> = Sharded::default();
        std::thread::scope(|s| {
            for _ in 0..10 {
                s.spawn(|| {
                    for _ in 0..1000 {
                        counters.local().fetch_add(1, Ordering::Relaxed);
                    }
                });
            }
        });
        assert_eq!(counters.iter().count(), TABLE_SHARDS);
        let sum: u64 = counters.iter().map(|c| c.load(Ordering::Relaxed)).sum();
        assert_eq!(sum, 10_000);
    }

    #[test]
    fn a_thread_keeps_its_shard_and_shards_do_not_share_lines() {
        let counters: Sharded<AtomicU64> = Sharded::default();
        let mine: *const AtomicU64 = counters.local();
        assert!(std::ptr::eq(mine, counters.local()));
        let other = std::thread::scope(|s| {
            s.spawn(|| counters.local() as *const AtomicU64 as usize)
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
