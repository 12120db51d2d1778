//! Pacing compaction to `Options::compaction_bytes_per_sec`.
//!
//! Owns: [`Pacer`], a token bucket that a compaction asks for the bytes
//! of the entries it merges, sleeping while it runs ahead of the rate, and
//! the count of time it slept (`Stats::compaction_paced_micros`).
//! Must never: hold a lock while it sleeps, sleep on after the database
//! began to close (a close does not wait out a slow rate), or let a burst
//! beyond a tenth of a second's bytes through after an idle spell.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// The longest single sleep: how soon a close is noticed.
const SLICE: Duration = Duration::from_millis(20);

/// A token bucket of bytes.
pub(crate) struct Pacer {
    bytes_per_sec: f64,
    /// Bytes that may pass now (negative: owed, to be slept off), and when
    /// that was last brought up to date.
    bucket: Mutex<(f64, Instant)>,
    stopped: AtomicBool,
    paced_micros: AtomicU64,
}

impl Pacer {
    pub(crate) fn new(bytes_per_sec: u64) -> Pacer {
        Pacer {
            bytes_per_sec: bytes_per_sec as f64,
            bucket: Mutex::new((0.0, Instant::now())),
            stopped: AtomicBool::new(false),
            paced_micros: AtomicU64::new(0),
        }
    }

    /// Takes `bytes` from the bucket, first sleeping for as long as the
    /// rate needs to have made them (none after [`Pacer::stop`]).
    pub(crate) fn take(&self, bytes: u64) {
        let owed = {
            let mut bucket = self.bucket.lock();
            let now = Instant::now();
            let refill = now.duration_since(bucket.1).as_secs_f64() * self.bytes_per_sec;
            // An idle spell saves up at most a tenth of a second's bytes.
            let most = self.bytes_per_sec / 10.0;
            bucket.0 = (bucket.0 + refill).min(most) - bytes as f64;
            bucket.1 = now;
            bucket.0
        };
        if owed >= 0.0 || self.stopped.load(Ordering::Relaxed) {
            return;
        }
        let started = Instant::now();
        let due = started + Duration::from_secs_f64(-owed / self.bytes_per_sec);
        while !self.stopped.load(Ordering::Relaxed) {
            let now = Instant::now();
            if now >= due {
                break;
            }
            std::thread::sleep((due - now).min(SLICE));
        }
        let slept = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.paced_micros.fetch_add(slept, Ordering::Relaxed);
    }

    /// From now on [`Pacer::take`] never sleeps: the database is closing.
    pub(crate) fn stop(&self) {
        self.stopped.store(true, Ordering::Relaxed);
    }

    /// Microseconds compactions slept so far.
    pub(crate) fn paced_micros(&self) -> u64 {
        self.paced_micros.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What is taken beyond the bucket is slept off (the pacer's own
    /// count of its sleeps, never less than the debt less a tenth of a
    /// second's saved-up bytes); once stopped, nothing is slept.
    #[test]
    fn takes_beyond_the_rate_are_slept_off_until_stopped() {
        let pacer = Pacer::new(1 << 20);
        pacer.take(1 << 18); // a quarter of a second's bytes
        assert!(pacer.paced_micros() >= 150_000, "{}", pacer.paced_micros());
        pacer.stop();
        let before = pacer.paced_micros();
        pacer.take(1 << 30); // a thousand seconds' bytes
        assert_eq!(pacer.paced_micros(), before, "slept after the stop");
    }
}
