//! The database's histograms — latencies of its operations and sizes of
//! its batches and tables — and each keyspace's read counts.
//!
//! Owns: [`DbLatency`] (one `Recorder` per histogram, and the snapshot a
//! reset subtracts), the public [`Histograms`] and [`HistogramStats`]
//! read from it, and [`KeyspaceReads`] (`Db::histograms` and
//! `Db::reset_histograms` are in `stats.rs`, with `Db::stats`). The read and write paths call in at one line each.
//! Must never: take a lock on a recording path (a reset takes one, and
//! only readers of the histograms wait on it), or time an operation twice.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;

use crate::counter::Sharded;
use crate::histogram::{Histogram, HistogramSummary, Recorder, SAMPLE_EVERY};

/// Declares the histograms once: the recorders, the public snapshot of
/// them all and its summary, with the names `named` gives.
macro_rules! histograms {
    ($($(#[doc = $doc:literal])* $field:ident: $name:literal,)*) => {
        /// One recorder per histogram (see [`Histograms`] for what each holds).
        pub(crate) struct DbLatency {
            $(pub $field: Recorder,)*
            /// What a reset subtracts: the counts as of the last
            /// [`Db::reset_histograms`](crate::Db::reset_histograms).
            baseline: Mutex<Histograms>,
        }

        impl DbLatency {
            /// Recorders that record when `enabled` (`Options::histograms`).
            pub(crate) fn new(enabled: bool) -> DbLatency {
                DbLatency {
                    $($field: Recorder::new(enabled),)*
                    baseline: Mutex::new(Histograms::default()),
                }
            }

            /// The counts since the open or the last reset.
            pub(crate) fn snapshot(&self) -> Histograms {
                let baseline = self.baseline.lock();
                Histograms {
                    $($field: self.$field.snapshot().since(&baseline.$field),)*
                    resets: baseline.resets,
                }
            }

            /// Makes the counts as of now the zero of later snapshots.
            pub(crate) fn reset(&self) {
                let mut baseline = self.baseline.lock();
                $(baseline.$field = self.$field.snapshot();)*
                baseline.resets += 1;
            }
        }

        /// The database's histograms since it was opened or
        /// [`Db::reset_histograms`](crate::Db::reset_histograms) was last called ([`Db::histograms`](crate::Db::histograms)).
        /// Latencies are in nanoseconds, from the call to its return (for
        /// a scan step, one `next` or `next_back`); every value is within
        /// [`RELATIVE_ERROR`](crate::histogram::RELATIVE_ERROR) of one
        /// recorded. Gets, writes and scan steps are timed one in
        /// [`SAMPLE_EVERY`](crate::histogram::SAMPLE_EVERY) per thread (all are
        /// counted: [`Histogram::ops`]); everything else every time.
        #[derive(Debug, Clone, Default, PartialEq, Eq)]
        #[non_exhaustive]
        pub struct Histograms {
            $($(#[doc = $doc])* pub $field: Histogram,)*
            /// Resets before this snapshot: two snapshots with the same
            /// number count from the same zero.
            resets: u64,
        }

        impl Histograms {
            /// Each histogram with its name (the field's; a latency's ends
            /// in `_nanos`).
            pub fn named(&self) -> Vec<(&'static str, &Histogram)> {
                vec![$(($name, &self.$field),)*]
            }

            /// [`Db::reset_histograms`](crate::Db::reset_histograms) calls before this snapshot (since
            /// the open): of two snapshots with the same number, the later
            /// one counts everything the earlier one did.
            pub fn resets(&self) -> u64 {
                self.resets
            }

            /// Each histogram's percentiles and counts.
            pub fn summary(&self) -> HistogramStats {
                HistogramStats {
                    $($field: self.$field.summary(),)*
                }
            }
        }

        /// [`Histograms`] in a few figures each ([`Stats::histograms`](crate::Stats::histograms)).
        #[derive(Debug, Clone, Default, PartialEq)]
        #[non_exhaustive]
        pub struct HistogramStats {
            $($(#[doc = $doc])* pub $field: HistogramSummary,)*
        }

        impl HistogramStats {
            /// Each summary with its histogram's name (see [`Histograms::named`]).
            pub fn named(&self) -> Vec<(&'static str, &HistogramSummary)> {
                vec![$(($name, &self.$field),)*]
            }
        }
    };
}

histograms! {
    /// Point lookups (`get` of a database, keyspace, snapshot or
    /// transaction), nanoseconds.
    get_nanos: "get_nanos",
    /// `multi_get` calls, nanoseconds.
    multi_get_nanos: "multi_get_nanos",
    /// Writes (`put`, `delete`, `write`, a transaction's commit), from the
    /// call until acknowledged (queueing behind other writers and the log
    /// sync included), nanoseconds.
    write_nanos: "write_nanos",
    /// Steps of scans (each `next` or `next_back` of a `DbIterator`),
    /// nanoseconds.
    scan_step_nanos: "scan_step_nanos",
    /// Transaction commits, refused ones included, nanoseconds.
    transaction_commit_nanos: "transaction_commit_nanos",
    /// Flushes of a memtable to a table, nanoseconds.
    flush_nanos: "flush_nanos",
    /// Compactions (a table moved down a level included), nanoseconds.
    compaction_nanos: "compaction_nanos",
    /// Bytes of keys and values per write batch.
    write_batch_bytes: "write_batch_bytes",
    /// Keys per `multi_get` call.
    multi_get_keys: "multi_get_keys",
    /// Bytes of the table each flush wrote.
    flush_bytes: "flush_bytes",
    /// Bytes of the tables each compaction wrote (0 for a move).
    compaction_bytes: "compaction_bytes",
}

impl DbLatency {
    /// Records a compaction begun at `started` that wrote `written` bytes
    /// (`None`: a table moved down a level, 0 bytes).
    pub(crate) fn record_compaction(&self, started: Instant, written: Option<u64>) {
        self.compaction_nanos.record_duration(started.elapsed());
        self.compaction_bytes.record(written.unwrap_or(0));
    }
}

/// A scan step being timed: the guard holds its own reference to the
/// histograms (taken for the one step in `SAMPLE_EVERY` timed), so the
/// scan stays free to change while it runs.
pub(crate) struct ScanStepTiming(Option<(Arc<DbLatency>, Instant)>);

impl ScanStepTiming {
    /// Counts a step of a scan of `latency`'s database, and times it when
    /// its turn comes.
    #[inline]
    pub(crate) fn start(latency: Option<&Arc<DbLatency>>) -> ScanStepTiming {
        ScanStepTiming(latency.and_then(|l| {
            l.scan_step_nanos
                .begin(SAMPLE_EVERY)
                .map(|started| (Arc::clone(l), started))
        }))
    }
}

impl Drop for ScanStepTiming {
    fn drop(&mut self) {
        if let Some((latency, started)) = self.0.take() {
            latency.scan_step_nanos.finish(started);
        }
    }
}

/// One thread shard's reads of one keyspace.
#[derive(Default)]
pub(crate) struct KeyspaceReadTally {
    pub gets: AtomicU64,
    pub multi_get_keys: AtomicU64,
    pub scans: AtomicU64,
}

/// A keyspace's reads, bumped per thread shard ([`KeyspaceReads::bump`]).
#[derive(Default)]
pub(crate) struct KeyspaceReads(Sharded<KeyspaceReadTally>);

impl KeyspaceReads {
    /// Adds `amount` to the count `field` picks.
    #[inline]
    pub(crate) fn add(&self, field: impl FnOnce(&KeyspaceReadTally) -> &AtomicU64, amount: u64) {
        self.0.local().add(field, amount);
    }

    /// The sum over the shards of the count `field` picks.
    pub(crate) fn total(&self, field: impl Fn(&KeyspaceReadTally) -> &AtomicU64) -> u64 {
        self.0
            .iter()
            .map(|t| field(t).load(Ordering::Relaxed))
            .sum()
    }
}
