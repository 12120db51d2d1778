//! [`RateLimiter`]: a bound on the bytes per second that the background
//! writes (flushes and compactions) of one database or many write.
//!
//! A token bucket: every byte written is taken from it, and a taker that
//! runs ahead of the rate is told how long to sleep. Flushes go first
//! ([`IoPriority::High`]): a flush waits only for its own bytes, never for
//! the debt compactions ran up before it, since writers may be waiting for
//! its memtable; a compaction ([`IoPriority::Low`]) waits until every byte
//! taken before it (a flush's too) is paid for. So over any long spell the
//! bytes written stay within the rate plus a tenth of a second's saved-up
//! bytes, and a flush is slowed by the rate, not by the compactions queued.
//!
//! Owns: the bucket, its rate, and the totals of bytes taken and time told
//! to wait. Must never: sleep itself or hold its lock while a caller
//! sleeps (each database sleeps on its own, so that its close is not held
//! up by the rate), or save up more than a tenth of a second's bytes over
//! an idle spell.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// Who asks for bytes: see the module docs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum IoPriority {
    /// A flush: waits for its own bytes only.
    High,
    /// A compaction: waits for every byte taken before its own.
    Low,
}

struct LimiterInner {
    bytes_per_sec: u64,
    /// Bytes that may pass now (negative: owed), and when that was last
    /// brought up to date.
    bucket: Mutex<(f64, Instant)>,
    bytes: AtomicU64,
    waited_micros: AtomicU64,
}

/// A limit on the bytes per second that flushes and compactions write, for
/// one database or shared by many (RocksDB's `RateLimiter`): give the same
/// `RateLimiter` to each database's [`crate::Options::rate_limiter`], and
/// their background writes together stay within about its rate, so a burst
/// of flushes or a large compaction in one database leaves the disk to the
/// reads and logs of all. Flushes go before compactions (a flush waits for
/// its own bytes only; compactions wait for everything taken before them).
/// Too low a rate lets memtables and level 0 fill until writes stall. A
/// closing database stops waiting for it. Cloning it clones the handle.
///
/// ```
/// use siftdb::{Db, Options, RateLimiter};
/// # let dir = tempfile::tempdir().unwrap();
/// let disk = RateLimiter::new(100 << 20); // 100 MiB/s for every database
/// let db = Db::open_with(dir.path(), Options::default().rate_limiter(disk.clone()))?;
/// # drop(db);
/// println!("{} bytes written, {:?} spent waiting", disk.bytes_through(), disk.waited());
/// # Ok::<(), siftdb::Error>(())
/// ```
#[derive(Clone)]
pub struct RateLimiter {
    inner: Arc<LimiterInner>,
}

impl std::fmt::Debug for RateLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RateLimiter")
            .field("bytes_per_sec", &self.bytes_per_sec())
            .field("bytes_through", &self.bytes_through())
            .finish_non_exhaustive()
    }
}

impl RateLimiter {
    /// A limiter of `bytes_per_sec` (at least 64 KiB per second:
    /// `Options::validate` refuses a lower one).
    pub fn new(bytes_per_sec: u64) -> RateLimiter {
        RateLimiter {
            inner: Arc::new(LimiterInner {
                bytes_per_sec: bytes_per_sec.max(1),
                bucket: Mutex::new((0.0, Instant::now())),
                bytes: AtomicU64::new(0),
                waited_micros: AtomicU64::new(0),
            }),
        }
    }

    /// The rate.
    pub fn bytes_per_sec(&self) -> u64 {
        self.inner.bytes_per_sec
    }

    /// Bytes taken so far by every database that uses it.
    pub fn bytes_through(&self) -> u64 {
        self.inner.bytes.load(Ordering::Relaxed)
    }

    /// Time the flushes and compactions that use it were told to wait, in
    /// total (a database that began to close waits less).
    pub fn waited(&self) -> Duration {
        Duration::from_micros(self.inner.waited_micros.load(Ordering::Relaxed))
    }

    /// Takes `bytes` and returns how long the caller must wait before it
    /// writes more (see the module docs for `priority`).
    pub(crate) fn reserve(&self, bytes: u64, priority: IoPriority) -> Duration {
        let rate = self.inner.bytes_per_sec as f64;
        let wait = {
            let mut bucket = self.inner.bucket.lock();
            let now = Instant::now();
            let refill = now.duration_since(bucket.1).as_secs_f64() * rate;
            // An idle spell saves up at most a tenth of a second's bytes.
            let before = (bucket.0 + refill).min(rate / 10.0);
            bucket.0 = before - bytes as f64;
            bucket.1 = now;
            match priority {
                IoPriority::Low => -bucket.0,
                IoPriority::High => bytes as f64 - before.max(0.0),
            }
        };
        self.inner.bytes.fetch_add(bytes, Ordering::Relaxed);
        if wait <= 0.0 {
            return Duration::ZERO;
        }
        let wait = Duration::from_secs_f64(wait / rate);
        let micros = u64::try_from(wait.as_micros()).unwrap_or(u64::MAX);
        self.inner
            .waited_micros
            .fetch_add(micros, Ordering::Relaxed);
        wait
    }

    /// True when `other` is a handle of this same limiter.
    pub fn same_as(&self, other: &RateLimiter) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Takers that wait as told move at about the rate together, and a
    /// flush does not wait for the compactions' debt. The waits are those
    /// asked, not timed; time that passes between the asks pays for bytes,
    /// so each bound allows for it.
    #[test]
    fn takers_are_held_to_the_rate_and_flushes_skip_the_queue() {
        let created = Instant::now();
        let limiter = RateLimiter::new(1 << 20);
        let shared = limiter.clone();
        // Four compactions of 256 KiB each: a second's bytes.
        let mut waits = Vec::new();
        for _ in 0..4 {
            waits.push(shared.reserve(1 << 18, IoPriority::Low));
        }
        let last = waits.last().copied().unwrap_or_default();
        assert!(
            last + created.elapsed() >= Duration::from_secs(1),
            "{waits:?}"
        );
        assert!(last <= Duration::from_secs(1), "{waits:?}");
        // The debt queues them: each waits longer than the one before.
        assert!(waits.windows(2).all(|w| w[0] < w[1]), "{waits:?}");
        // A flush of 64 KiB waits for its own bytes only (1/16 s), not for
        // the second of compactions before it ...
        let flush = limiter.reserve(1 << 16, IoPriority::High);
        assert!(flush <= Duration::from_micros(62_500), "{flush:?}");
        // ... but the compaction after it waits for the flush's bytes too.
        let next = limiter.reserve(1, IoPriority::Low);
        assert!(
            next + created.elapsed() >= last + Duration::from_micros(62_500),
            "{next:?} after {last:?}"
        );
        assert_eq!(limiter.bytes_through(), 4 * (1 << 18) + (1 << 16) + 1);
        assert!(limiter.waited() >= last);
    }
}
