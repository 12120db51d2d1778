//! Pacing flushes and compactions to their rate limits: this database's
//! own for compactions (`Options::compaction_bytes_per_sec`) and the one it
//! may share with other databases for both (`Options::rate_limiter`).
//!
//! Owns: [`Pacer`], what a flush or a compaction asks for the bytes it
//! writes, sleeping as long as the limiters say it runs ahead of their
//! rates, and the count of time it slept (`Stats::compaction_paced_micros`
//! for compactions).
//! Must never: hold a lock while it sleeps, sleep on after the database
//! began to close (a close does not wait out a slow rate), or let a burst
//! beyond a tenth of a second's bytes through after an idle spell (the
//! limiters' buckets save up no more).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::options::Options;
use crate::shared::{IoPriority, RateLimiter};

/// The longest single sleep: how soon a close is noticed.
const SLICE: Duration = Duration::from_millis(20);

/// One kind of background write's limits (see the module docs).
pub(crate) struct Pacer {
    /// This database's own limit (compactions only).
    own: Option<RateLimiter>,
    /// The limit shared with other databases.
    shared: Option<RateLimiter>,
    priority: IoPriority,
    stopped: AtomicBool,
    paced_micros: AtomicU64,
}

impl Pacer {
    /// A pacer of `bytes_per_sec` for compactions alone (no shared limit).
    #[cfg(test)]
    pub(crate) fn new(bytes_per_sec: u64) -> Pacer {
        Pacer::with(Some(RateLimiter::new(bytes_per_sec)), None, IoPriority::Low)
    }

    fn with(own: Option<RateLimiter>, shared: Option<RateLimiter>, priority: IoPriority) -> Pacer {
        Pacer {
            own,
            shared,
            priority,
            stopped: AtomicBool::new(false),
            paced_micros: AtomicU64::new(0),
        }
    }

    /// Compactions' pacer under `opts`, if they have any limit.
    pub(crate) fn for_compactions(opts: &Options) -> Option<Pacer> {
        let own = opts.compaction_bytes_per_sec.map(RateLimiter::new);
        let shared = opts.rate_limiter.clone();
        (own.is_some() || shared.is_some()).then(|| Pacer::with(own, shared, IoPriority::Low))
    }

    /// Flushes' pacer under `opts`: only the shared limit paces them.
    pub(crate) fn for_flushes(opts: &Options) -> Option<Pacer> {
        let shared = opts.rate_limiter.clone()?;
        Some(Pacer::with(None, Some(shared), IoPriority::High))
    }

    /// Takes `bytes` from the limiters, then sleeps for as long as the
    /// slower of them says (none after [`Pacer::stop`]).
    pub(crate) fn take(&self, bytes: u64) {
        let wait = [&self.own, &self.shared]
            .into_iter()
            .flatten()
            .map(|limiter| limiter.reserve(bytes, self.priority))
            .max()
            .unwrap_or(Duration::ZERO);
        if wait.is_zero() || self.stopped.load(Ordering::Relaxed) {
            return;
        }
        let started = Instant::now();
        let due = started + wait;
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

    /// Microseconds slept so far.
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

    /// Two databases' pacers sharing one limiter are held to its rate
    /// together: the second's compaction waits for the first's flush.
    #[test]
    fn pacers_of_two_databases_share_one_limiter() {
        let limiter = RateLimiter::new(1 << 20);
        let options = Options::default().rate_limiter(limiter.clone());
        let (flushes, compactions) = (
            Pacer::for_flushes(&options).unwrap(),
            Pacer::for_compactions(&Options::default().rate_limiter(limiter.clone())).unwrap(),
        );
        assert!(Pacer::for_flushes(&Options::default()).is_none());
        // The first database closing: its flush's bytes count, unslept.
        flushes.stop();
        flushes.take(1 << 18); // 1/4 s of bytes
        assert_eq!(flushes.paced_micros(), 0);
        compactions.take(1 << 16); // the second's compaction: 1/16 s more
                                   // 5/16 s owed in all, less what passed between the two takes.
        assert!(
            compactions.paced_micros() >= 200_000,
            "{}",
            compactions.paced_micros()
        );
        assert_eq!(limiter.bytes_through(), (1 << 18) + (1 << 16));
    }
}
