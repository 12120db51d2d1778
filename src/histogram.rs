//! Log-linear histograms that many threads record into without a lock, and
//! the snapshots read from them.
//!
//! Owns: the bucket layout (HdrHistogram's: 64 linear sub-buckets per power
//! of two, so a bucket is at most 1/64 as wide as its lowest value and a
//! reported value — the middle of its bucket — is within [`RELATIVE_ERROR`]
//! of the true one), `Recorder` (one lazily allocated bucket array per
//! thread shard of `counter::Sharded`, bumped with a plain load and store
//! by the shard's only writer), the one-in-[`SAMPLE_EVERY`] choice of
//! timed operations, and the public [`Histogram`] and
//! [`HistogramSummary`] read from them.
//! Must never: take a lock or allocate on the recording path (a thread's
//! bucket array is allocated once, at its first record), read the clock
//! for an operation it does not time, or order anything (the counts are
//! statistics, not synchronisation).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use crate::counter::Sharded;

/// Sub-buckets per power of two, as a power of two.
const SUB_BITS: u32 = 6;
/// Sub-buckets per power of two: values below this are counted exactly.
const SUB: u64 = 1 << SUB_BITS;
/// Values of 2^`TOP_BIT` and above are counted in the last bucket (for
/// nanoseconds: about 18 minutes).
const TOP_BIT: u32 = 40;
/// Buckets of a histogram: the exact ones below [`SUB`], then [`SUB`] per
/// power of two up to 2^[`TOP_BIT`].
const BUCKETS: usize = (1 << SUB_BITS) * (1 + (TOP_BIT - SUB_BITS) as usize);

/// The largest relative error of a value a [`Histogram`] reports (a
/// percentile, the maximum, the minimum) against the recorded value it
/// stands for: 1/128, under 0.8%. Values of 2^40 and above (18 minutes in
/// nanoseconds) are reported as 2^40.
pub const RELATIVE_ERROR: f64 = 1.0 / 128.0;

/// Operations of the quick kinds (gets, writes, scan steps) of which one is
/// timed: two reads of the clock cost about as much as a filter probe, a
/// tenth of an in-memory get. Every operation is counted.
pub const SAMPLE_EVERY: u64 = 8;

/// The bucket a value falls in.
fn bucket_of(value: u64) -> usize {
    let value = value.min((1 << TOP_BIT) - 1);
    let index = if value < SUB {
        value
    } else {
        let shift = u64::from(63 - value.leading_zeros() - SUB_BITS);
        SUB * (1 + shift) + ((value >> shift) - SUB)
    };
    usize::try_from(index).unwrap_or(BUCKETS - 1)
}

/// The lowest value and the width of bucket `index`.
fn bucket_range(index: usize) -> (u64, u64) {
    let index = index as u64;
    if index < SUB {
        return (index, 1);
    }
    let shift = index / SUB - 1;
    let sub = index % SUB;
    ((SUB + sub) << shift, 1 << shift)
}

/// The value reported for bucket `index`: the middle of the values it
/// counts.
fn bucket_value(index: usize) -> u64 {
    let (low, width) = bucket_range(index);
    low + (width - 1) / 2
}

/// One thread shard's counts.
struct Buckets {
    /// Operations counted (timed or not).
    ops: AtomicU64,
    /// Sum of the values recorded.
    sum: AtomicU64,
    counts: Box<[AtomicU64]>,
}

impl Buckets {
    fn new() -> Box<Buckets> {
        Box::new(Buckets {
            ops: AtomicU64::new(0),
            sum: AtomicU64::new(0),
            counts: std::iter::repeat_with(|| AtomicU64::new(0))
                .take(BUCKETS)
                .collect(),
        })
    }
}

/// Adds `amount` to `counter`: a plain load and store by the shard's only
/// writer, an atomic add on a shared shard.
#[inline]
fn add(counter: &AtomicU64, amount: u64, owned: bool) -> u64 {
    if owned {
        let before = counter.load(Ordering::Relaxed);
        counter.store(before.wrapping_add(amount), Ordering::Relaxed);
        before
    } else {
        counter.fetch_add(amount, Ordering::Relaxed)
    }
}

/// A histogram many threads record into: each into the bucket array of
/// its shard, allocated at its first record (18 KiB), so the memory grows
/// with the threads that record, not with the shards there could be.
pub(crate) struct Recorder {
    enabled: bool,
    shards: Sharded<OnceLock<Box<Buckets>>>,
}

impl Recorder {
    /// A recorder; a disabled one counts and times nothing.
    pub(crate) fn new(enabled: bool) -> Recorder {
        Recorder {
            enabled,
            shards: Sharded::default(),
        }
    }

    /// Counts an operation and records `value` for it.
    #[inline]
    pub(crate) fn record(&self, value: u64) {
        if self.enabled {
            self.add(value, true);
        }
    }

    /// Counts an operation and records `duration`, in nanoseconds.
    pub(crate) fn record_duration(&self, duration: Duration) {
        self.record(u64::try_from(duration.as_nanos()).unwrap_or(u64::MAX));
    }

    /// Counts an operation, and times it (until the guard is dropped).
    #[inline]
    pub(crate) fn time(&self) -> Timing<'_> {
        self.start(1)
    }

    /// Counts an operation, and times one in [`SAMPLE_EVERY`] of those
    /// this thread counts.
    #[inline]
    pub(crate) fn time_sampled(&self) -> Timing<'_> {
        self.start(SAMPLE_EVERY)
    }

    #[inline]
    fn start(&self, every: u64) -> Timing<'_> {
        Timing {
            recorder: self,
            started: self.begin(every),
        }
    }

    /// Counts an operation; the time it starts at when it is one of the
    /// one in `every` this thread times (hand it to [`Recorder::finish`]).
    #[inline]
    pub(crate) fn begin(&self, every: u64) -> Option<Instant> {
        if !self.enabled {
            return None;
        }
        let local = self.shards.local();
        let buckets = local.get_or_init(Buckets::new);
        let before = add(&buckets.ops, 1, local.owned());
        before.is_multiple_of(every).then(Instant::now)
    }

    /// Records the time since `started` (from [`Recorder::begin`]).
    pub(crate) fn finish(&self, started: Instant) {
        let nanos = u64::try_from(started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.add(nanos, false);
    }

    /// Records `value`, and counts an operation when `count` is set.
    fn add(&self, value: u64, count: bool) {
        let local = self.shards.local();
        let owned = local.owned();
        let buckets = local.get_or_init(Buckets::new);
        if count {
            add(&buckets.ops, 1, owned);
        }
        add(&buckets.sum, value, owned);
        if let Some(counter) = buckets.counts.get(bucket_of(value)) {
            add(counter, 1, owned);
        }
    }

    /// The counts now, every shard's summed.
    pub(crate) fn snapshot(&self) -> Histogram {
        let mut histogram = Histogram::empty();
        for buckets in self.shards.iter().filter_map(OnceLock::get) {
            histogram.ops += buckets.ops.load(Ordering::Relaxed);
            histogram.sum = histogram
                .sum
                .wrapping_add(buckets.sum.load(Ordering::Relaxed));
            for (total, count) in histogram.counts.iter_mut().zip(buckets.counts.iter()) {
                *total += count.load(Ordering::Relaxed);
            }
        }
        histogram
    }
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("enabled", &self.enabled)
            .finish_non_exhaustive()
    }
}

/// A timed operation: its duration is recorded when this is dropped (when
/// the operation was chosen to be timed).
#[must_use = "the operation is timed until this is dropped"]
pub(crate) struct Timing<'a> {
    recorder: &'a Recorder,
    started: Option<Instant>,
}

impl Drop for Timing<'_> {
    #[inline]
    fn drop(&mut self) {
        if let Some(started) = self.started {
            self.recorder.finish(started);
        }
    }
}

/// The counts of one histogram at one moment (a snapshot): how many
/// operations were counted, and the distribution of the values recorded
/// for the timed ones (nanoseconds for latencies, bytes or keys for
/// sizes). Every value it reports is within [`RELATIVE_ERROR`] of a value
/// that was recorded.
#[derive(Clone, PartialEq, Eq)]
pub struct Histogram {
    ops: u64,
    sum: u64,
    counts: Vec<u64>,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram::empty()
    }
}

impl std::fmt::Debug for Histogram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Histogram")
            .field("summary", &self.summary())
            .finish()
    }
}

impl Histogram {
    fn empty() -> Histogram {
        Histogram {
            ops: 0,
            sum: 0,
            counts: vec![0; BUCKETS],
        }
    }

    /// Operations counted: every one, timed or not.
    pub fn ops(&self) -> u64 {
        self.ops
    }

    /// Values recorded: every operation for sizes and slow operations, one
    /// in [`SAMPLE_EVERY`] for the timings of quick ones.
    pub fn samples(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The sum of the values recorded (exact, not bucketed).
    pub fn sum(&self) -> u64 {
        self.sum
    }

    /// The mean of the values recorded (0 without any).
    pub fn mean(&self) -> f64 {
        match self.samples() {
            0 => 0.0,
            n => self.sum as f64 / n as f64,
        }
    }

    /// The value below or at which `quantile` (0.0 to 1.0) of the recorded
    /// values fall (nearest rank), within [`RELATIVE_ERROR`]; 0 without
    /// values.
    pub fn value_at_quantile(&self, quantile: f64) -> u64 {
        let samples = self.samples();
        if samples == 0 {
            return 0;
        }
        #[expect(
            clippy::cast_possible_truncation,
            reason = "a rank of at most `samples`, clamped below"
        )]
        let rank = (quantile.clamp(0.0, 1.0) * samples as f64).ceil() as u64;
        let rank = rank.clamp(1, samples);
        let mut seen = 0u64;
        for (index, count) in self.counts.iter().enumerate() {
            seen += count;
            if seen >= rank {
                return bucket_value(index);
            }
        }
        self.max()
    }

    /// The largest value recorded, within [`RELATIVE_ERROR`]; 0 without values.
    pub fn max(&self) -> u64 {
        self.counts
            .iter()
            .rposition(|&c| c > 0)
            .map_or(0, bucket_value)
    }

    /// The smallest value recorded, within [`RELATIVE_ERROR`]; 0 without values.
    pub fn min(&self) -> u64 {
        self.counts
            .iter()
            .position(|&c| c > 0)
            .map_or(0, bucket_value)
    }

    /// The buckets that hold values: (lowest value, highest value, count),
    /// ascending.
    pub fn buckets(&self) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
        self.counts
            .iter()
            .enumerate()
            .filter(|(_, &count)| count > 0)
            .map(|(index, &count)| {
                let (low, width) = bucket_range(index);
                (low, low + width - 1, count)
            })
    }

    /// What was counted since `earlier`, a snapshot of the same histogram
    /// taken before (counts only grow; a count below `earlier`'s gives 0).
    pub fn since(&self, earlier: &Histogram) -> Histogram {
        Histogram {
            ops: self.ops.saturating_sub(earlier.ops),
            sum: self.sum.wrapping_sub(earlier.sum),
            counts: self
                .counts
                .iter()
                .zip(earlier.counts.iter().chain(std::iter::repeat(&0)))
                .map(|(now, then)| now.saturating_sub(*then))
                .collect(),
        }
    }

    /// Adds `value` once (for histograms an application builds itself).
    pub fn record(&mut self, value: u64) {
        self.ops += 1;
        self.sum = self.sum.wrapping_add(value);
        if let Some(count) = self.counts.get_mut(bucket_of(value)) {
            *count += 1;
        }
    }

    /// The usual percentiles, the maximum and the counts.
    pub fn summary(&self) -> HistogramSummary {
        HistogramSummary {
            ops: self.ops,
            samples: self.samples(),
            p50: self.value_at_quantile(0.50),
            p90: self.value_at_quantile(0.90),
            p99: self.value_at_quantile(0.99),
            p999: self.value_at_quantile(0.999),
            max: self.max(),
            mean: self.mean(),
        }
    }
}

/// A [`Histogram`] in a few figures (see [`Stats::histograms`](crate::Stats::histograms)):
/// percentiles by nearest rank, each within [`RELATIVE_ERROR`].
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[non_exhaustive]
pub struct HistogramSummary {
    /// Operations counted.
    pub ops: u64,
    /// Values recorded (see [`Histogram::samples`]).
    pub samples: u64,
    /// The median.
    pub p50: u64,
    /// The 90th percentile.
    pub p90: u64,
    /// The 99th percentile.
    pub p99: u64,
    /// The 99.9th percentile.
    pub p999: u64,
    /// The largest value.
    pub max: u64,
    /// The mean (exact).
    pub mean: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_every_value_once_and_in_order() {
        let mut previous_end = 0u64;
        for index in 0..BUCKETS {
            let (low, width) = bucket_range(index);
            assert_eq!(low, previous_end, "bucket {index}");
            assert!(width as f64 <= (low.max(1) as f64) / 64.0 || width == 1);
            assert_eq!(bucket_of(low), index);
            assert_eq!(bucket_of(low + width - 1), index);
            previous_end = low + width;
        }
        assert_eq!(previous_end, 1 << TOP_BIT);
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
    }

    #[test]
    fn a_reported_value_is_within_the_stated_error() {
        let mut value = 1u64;
        while value < 1 << TOP_BIT {
            let reported = bucket_value(bucket_of(value));
            let error = (reported as f64 - value as f64).abs() / value as f64;
            assert!(error <= RELATIVE_ERROR, "{value} reported as {reported}");
            value = value * 17 / 16 + 1;
        }
    }

    #[test]
    fn threads_record_into_their_shards_and_the_snapshot_sums_them() {
        let recorder = Recorder::new(true);
        std::thread::scope(|s| {
            for t in 0..20u64 {
                let recorder = &recorder;
                s.spawn(move || {
                    for i in 0..1000 {
                        recorder.record(t * 1000 + i);
                    }
                });
            }
        });
        let h = recorder.snapshot();
        assert_eq!(h.ops(), 20_000);
        assert_eq!(h.samples(), 20_000);
        assert_eq!(h.sum(), (0..20_000u64).sum::<u64>());
        let p50 = h.value_at_quantile(0.5) as f64;
        assert!((p50 - 9_999.0).abs() <= 9_999.0 * RELATIVE_ERROR, "{p50}");
    }

    #[test]
    fn sampled_timing_counts_every_operation_and_times_some() {
        let recorder = Recorder::new(true);
        for _ in 0..80 {
            let _t = recorder.time_sampled();
        }
        let h = recorder.snapshot();
        assert_eq!(h.ops(), 80);
        assert_eq!(h.samples(), 80 / SAMPLE_EVERY);
        let off = Recorder::new(false);
        let _t = off.time();
        off.record(5);
        assert_eq!(off.snapshot(), Histogram::empty());
    }
}
