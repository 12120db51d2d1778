//! Where a node's time goes: cumulative wall time of the siftdb calls on
//! the raft paths and of the stages of the write path (a request in the
//! api, its wait for a proposal, the proposal until applied, a replication
//! round trip), for the throughput breakdown (`/api/metrics`,
//! `siftdb-raft bench`).
//!
//! The stages of one entry's way through openraft happen in different
//! tasks (the api, raft's core, the log writer thread, a replication task,
//! the state-machine worker); [`Stamps`] keeps, per log index, when each
//! step happened, and the step that comes later adds the time since the
//! one before it to its counter (see [`Timings::since`]).
//!
//! Owns: [`Timings`], a set of relaxed atomic counters, [`Timer`] and
//! [`Stamps`].
//! Must never: take a lock or allocate on the paths it measures.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// One measured kind of call: how many, and their summed wall time.
#[derive(Debug, Default)]
pub struct Counter {
    calls: AtomicU64,
    nanos: AtomicU64,
}

impl Counter {
    /// Starts timing one call; the time is added when the timer drops.
    pub fn start(&self) -> Timer<'_> {
        Timer {
            counter: self,
            start: Instant::now(),
        }
    }

    /// Adds one call that took `elapsed` (measured elsewhere).
    pub fn add(&self, elapsed: std::time::Duration) {
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        self.calls.fetch_add(1, Ordering::Relaxed);
        self.nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// (calls, total nanoseconds).
    pub fn get(&self) -> (u64, u64) {
        (
            self.calls.load(Ordering::Relaxed),
            self.nanos.load(Ordering::Relaxed),
        )
    }
}

/// Adds its lifetime to a [`Counter`] when dropped.
pub struct Timer<'a> {
    counter: &'a Counter,
    start: Instant,
}

impl Drop for Timer<'_> {
    fn drop(&mut self) {
        self.counter.add(self.start.elapsed());
    }
}

/// The storage calls and write-path stages of one node.
#[derive(Debug, Default)]
pub struct Timings {
    /// Synced log appends (one siftdb batch each).
    pub log_append: Counter,
    /// Other synced log writes: vote, truncate, purge.
    pub log_other: Counter,
    /// Unsynced committed-index writes.
    pub committed: Counter,
    /// Log reads (replication to followers).
    pub log_read: Counter,
    /// State-machine batches (apply).
    pub apply: Counter,
    /// Snapshot builds (dump + fsync + the synced pointer).
    pub snapshot_build: Counter,
    /// Snapshot installs (load + the synced switch).
    pub snapshot_install: Counter,
    /// Write requests in the api, from the decoded request to the reply
    /// (the node's share of a client's write latency).
    pub write_request: Counter,
    /// A command's wait in the proposer's queue until a proposal takes it.
    pub write_queued: Counter,
    /// Proposals (one raft entry each), from `client_write` until applied
    /// on this node: append, replication to a majority, commit, apply.
    pub proposal: Counter,
    /// Append-entries round trips to a follower (send until answered; the
    /// follower's append and fsync included), on the leader.
    pub replicate: Counter,
    /// Per entry, on the leader: `client_write` called until the log store
    /// is handed the entry (the call's trip into raft's core).
    pub raft_in: Counter,
    /// Per append, on any node: handed to the log store until its fsync is
    /// done (the writer's queue and the synced write).
    pub flush: Counter,
    /// Per entry, on the leader: its fsync done until the first
    /// append-entries message carrying it is sent (the callback back to
    /// raft's core, the replication task's wake-up and log read).
    pub to_send: Counter,
    /// Per entry, on the leader: the first append-entries message carrying
    /// it sent until the first follower's answer.
    pub first_answer: Counter,
    /// Per entry, on the leader: the first follower's answer until the
    /// state machine is handed it (commit noticed, the state-machine task).
    pub to_apply: Counter,
    /// Per entry, on the leader: applied until `client_write` returns.
    pub answer: Counter,
    /// Per append-entries message with entries, on a follower: its handler
    /// entered until the log store is handed the entries.
    pub follower_in: Counter,
    /// Per append-entries message with entries, on a follower: its fsync
    /// done until the handler answers.
    pub follower_out: Counter,
    /// Early sends a follower accepted, on the leader: sent until answered
    /// (the follower's append and fsync, alongside the leader's fsync).
    pub early_send: Counter,
    /// Early sends a follower did not accept (behind, a newer term, not
    /// reached), on the leader: sent until answered or failed.
    pub early_missed: Counter,
    /// When each step of an entry happened.
    pub stamps: Stamps,
}

/// The steps of an entry that [`Stamps`] records.
#[derive(Clone, Copy, Debug)]
pub enum Step {
    /// Handed to the log store.
    Appended = 0,
    /// On disk.
    Flushed = 1,
    /// First sent to a follower.
    Sent = 2,
    /// First answered by a follower.
    Answered = 3,
    /// Applied.
    Applied = 4,
}

const STEPS: usize = 5;
/// Entries remembered per step (a ring by log index).
const SLOTS: usize = 4096;

/// Per step, when the last `SLOTS` entries reached it: nanoseconds since
/// the node started, tagged with the log index (a slot is reused by the
/// index `SLOTS` later).
#[derive(Debug)]
pub struct Stamps {
    epoch: Instant,
    /// `(index + 1, nanos)` per slot, per step.
    slots: Vec<(AtomicU64, AtomicU64)>,
}

impl Default for Stamps {
    fn default() -> Stamps {
        Stamps {
            epoch: Instant::now(),
            slots: (0..STEPS * SLOTS)
                .map(|_| (AtomicU64::new(0), AtomicU64::new(0)))
                .collect(),
        }
    }
}

impl Stamps {
    fn slot(&self, step: Step, index: u64) -> Option<&(AtomicU64, AtomicU64)> {
        let i = (step as usize) * SLOTS + usize::try_from(index % SLOTS as u64).ok()?;
        self.slots.get(i)
    }

    fn nanos(&self, at: Instant) -> u64 {
        u64::try_from(at.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX)
    }

    /// Records that entry `index` reached `step` at `at`; when `first`, only
    /// if it had not reached it yet (the first message sent, the first
    /// answer). Returns whether it was recorded.
    pub fn mark(&self, step: Step, index: u64, at: Instant, first: bool) -> bool {
        let Some((tag, nanos)) = self.slot(step, index) else {
            return false;
        };
        let want = index.wrapping_add(1);
        if first && tag.load(Ordering::Acquire) == want {
            return false;
        }
        // A reader between the two stores sees a wrong time for a moment:
        // a measurement, not a decision.
        tag.store(0, Ordering::Release);
        nanos.store(self.nanos(at), Ordering::Relaxed);
        tag.store(want, Ordering::Release);
        true
    }

    /// When entry `index` reached `step`, if remembered.
    pub fn get(&self, step: Step, index: u64) -> Option<Instant> {
        let (tag, nanos) = self.slot(step, index)?;
        let want = index.wrapping_add(1);
        if tag.load(Ordering::Acquire) != want {
            return None;
        }
        let at = nanos.load(Ordering::Relaxed);
        (tag.load(Ordering::Acquire) == want)
            .then(|| self.epoch.checked_add(Duration::from_nanos(at)))
            .flatten()
    }
}

/// A plain copy of [`Timings`]: (calls, nanoseconds) per kind.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimingsReport {
    /// See [`Timings::log_append`].
    pub log_append: (u64, u64),
    /// See [`Timings::log_other`].
    pub log_other: (u64, u64),
    /// See [`Timings::committed`].
    pub committed: (u64, u64),
    /// See [`Timings::log_read`].
    pub log_read: (u64, u64),
    /// See [`Timings::apply`].
    pub apply: (u64, u64),
    /// See [`Timings::snapshot_build`].
    pub snapshot_build: (u64, u64),
    /// See [`Timings::snapshot_install`].
    pub snapshot_install: (u64, u64),
    /// See [`Timings::write_request`].
    pub write_request: (u64, u64),
    /// See [`Timings::write_queued`].
    pub write_queued: (u64, u64),
    /// See [`Timings::proposal`].
    pub proposal: (u64, u64),
    /// See [`Timings::replicate`].
    pub replicate: (u64, u64),
    /// See [`Timings::raft_in`].
    #[serde(default)]
    pub raft_in: (u64, u64),
    /// See [`Timings::flush`].
    #[serde(default)]
    pub flush: (u64, u64),
    /// See [`Timings::to_send`].
    #[serde(default)]
    pub to_send: (u64, u64),
    /// See [`Timings::first_answer`].
    #[serde(default)]
    pub first_answer: (u64, u64),
    /// See [`Timings::to_apply`].
    #[serde(default)]
    pub to_apply: (u64, u64),
    /// See [`Timings::answer`].
    #[serde(default)]
    pub answer: (u64, u64),
    /// See [`Timings::follower_in`].
    #[serde(default)]
    pub follower_in: (u64, u64),
    /// See [`Timings::follower_out`].
    #[serde(default)]
    pub follower_out: (u64, u64),
    /// See [`Timings::early_send`].
    #[serde(default)]
    pub early_send: (u64, u64),
    /// See [`Timings::early_missed`].
    #[serde(default)]
    pub early_missed: (u64, u64),
}

impl Timings {
    /// The counters now.
    pub fn report(&self) -> TimingsReport {
        TimingsReport {
            log_append: self.log_append.get(),
            log_other: self.log_other.get(),
            committed: self.committed.get(),
            log_read: self.log_read.get(),
            apply: self.apply.get(),
            snapshot_build: self.snapshot_build.get(),
            snapshot_install: self.snapshot_install.get(),
            write_request: self.write_request.get(),
            write_queued: self.write_queued.get(),
            proposal: self.proposal.get(),
            replicate: self.replicate.get(),
            raft_in: self.raft_in.get(),
            flush: self.flush.get(),
            to_send: self.to_send.get(),
            first_answer: self.first_answer.get(),
            to_apply: self.to_apply.get(),
            answer: self.answer.get(),
            follower_in: self.follower_in.get(),
            follower_out: self.follower_out.get(),
            early_send: self.early_send.get(),
            early_missed: self.early_missed.get(),
        }
    }

    /// Adds `to - from` to the counter `which` picks when entry `index`
    /// reached `step` at `from`, no later than `to`.
    pub fn since(&self, which: fn(&Timings) -> &Counter, step: Step, index: u64, to: Instant) {
        if let Some(from) = self.stamps.get(step, index).filter(|&f| f <= to) {
            which(self).add(to.duration_since(from));
        }
    }

    /// Marks entry `index` as having reached `step` now (see
    /// [`Stamps::mark`]) and, when it was marked, adds the time since it
    /// reached `before` to the counter `which` picks.
    pub fn step(
        &self,
        step: Step,
        index: u64,
        first: bool,
        before: Step,
        which: fn(&Timings) -> &Counter,
    ) {
        let now = Instant::now();
        if self.stamps.mark(step, index, now, first) {
            self.since(which, before, index, now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_remember_the_last_ring_of_indexes() {
        let t = Timings::default();
        let at = Instant::now();
        assert!(t.stamps.mark(Step::Sent, 7, at, true));
        assert!(!t
            .stamps
            .mark(Step::Sent, 7, at + Duration::from_millis(1), true));
        assert_eq!(
            t.stamps.get(Step::Sent, 7),
            Some(at).map(|a| t.stamps.epoch + a.duration_since(t.stamps.epoch))
        );
        assert_eq!(t.stamps.get(Step::Sent, 7 + SLOTS as u64), None);
        assert_eq!(t.stamps.get(Step::Flushed, 7), None);
        t.since(|t| &t.to_send, Step::Sent, 7, at + Duration::from_millis(2));
        assert_eq!(t.to_send.get().0, 1);
        // A step recorded after `to` adds nothing.
        t.since(|t| &t.to_send, Step::Sent, 7, at - Duration::from_millis(1));
        assert_eq!(t.to_send.get().0, 1);
    }
}
