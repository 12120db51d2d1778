//! Where a node's time goes: cumulative wall time of the siftdb calls on
//! the raft paths and of the stages of the write path (a request in the
//! api, its wait for a proposal, the proposal until applied, a replication
//! round trip), for the throughput breakdown (`/api/metrics`,
//! `siftdb-raft bench`).
//!
//! Owns: [`Timings`], a set of relaxed atomic counters, and [`Timer`].
//! Must never: take a lock or allocate on the paths it measures.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

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
        }
    }
}
