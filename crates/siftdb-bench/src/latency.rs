//! Sampled per-operation latency.
//!
//! Owns: which operations are timed (one in [`SAMPLE_EVERY`], by operation
//! number, so threads and engines time the same operations) and the
//! nearest-rank percentiles of the samples.
//! Must never: read the clock for an operation it does not sample — two
//! clock reads cost as much as a filter probe.

use std::time::Instant;

/// One operation in this many is timed: those whose number is a multiple.
pub const SAMPLE_EVERY: u64 = 8;

/// Collects the durations of the sampled operations of one worker.
#[derive(Debug, Default)]
pub struct Sampler {
    nanos: Vec<u64>,
}

impl Sampler {
    /// A sampler with room for the samples of `ops` operations.
    pub fn for_ops(ops: u64) -> Self {
        Sampler {
            nanos: Vec::with_capacity(usize::try_from(ops / SAMPLE_EVERY + 1).unwrap_or_default()),
        }
    }

    /// Runs `f`; times it when `op` is a sampled operation number.
    #[inline]
    pub fn time<T>(&mut self, op: u64, f: impl FnOnce() -> T) -> T {
        if !op.is_multiple_of(SAMPLE_EVERY) {
            return f();
        }
        let start = Instant::now();
        let out = f();
        self.nanos
            .push(u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX));
        out
    }

    /// Adds another worker's samples.
    pub fn merge(&mut self, other: Sampler) {
        self.nanos.extend(other.nanos);
    }

    /// The percentiles of everything sampled; `None` without samples.
    pub fn summary(mut self) -> Option<Latency> {
        self.nanos.sort_unstable();
        Some(Latency {
            samples: self.nanos.len() as u64,
            p50_ns: nearest_rank(&self.nanos, 50)?,
            p99_ns: nearest_rank(&self.nanos, 99)?,
        })
    }
}

/// Latency percentiles of one phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Latency {
    /// Number of timed operations.
    pub samples: u64,
    /// Median, in nanoseconds.
    pub p50_ns: u64,
    /// 99th percentile, in nanoseconds.
    pub p99_ns: u64,
}

impl Latency {
    /// Median in microseconds.
    pub fn p50_us(&self) -> f64 {
        self.p50_ns as f64 / 1000.0
    }

    /// 99th percentile in microseconds.
    pub fn p99_us(&self) -> f64 {
        self.p99_ns as f64 / 1000.0
    }
}

/// The nearest-rank `percent`-th percentile of ascending `sorted`: the
/// smallest sample with at least `percent`% of the samples at or below it,
/// i.e. the one at rank `ceil(percent/100 · n)`.
pub fn nearest_rank(sorted: &[u64], percent: u64) -> Option<u64> {
    let n = sorted.len() as u64;
    let rank = (percent * n).div_ceil(100).max(1);
    sorted.get(usize::try_from(rank - 1).ok()?).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_follows_the_definition() {
        assert_eq!(nearest_rank(&[], 50), None);
        assert_eq!(nearest_rank(&[7], 50), Some(7));
        assert_eq!(nearest_rank(&[7], 99), Some(7));
        let hundred: Vec<u64> = (1..=100).collect();
        assert_eq!(nearest_rank(&hundred, 50), Some(50));
        assert_eq!(nearest_rank(&hundred, 99), Some(99));
        assert_eq!(nearest_rank(&[1, 2, 3, 4], 50), Some(2));
        assert_eq!(nearest_rank(&[1, 2, 3, 4, 5], 50), Some(3));
        assert_eq!(nearest_rank(&[1, 2, 3, 4, 5], 99), Some(5));
        let thousand: Vec<u64> = (1..=1000).collect();
        assert_eq!(nearest_rank(&thousand, 99), Some(990));
    }

    #[test]
    fn only_every_eighth_operation_is_timed() {
        let mut sampler = Sampler::for_ops(100);
        let mut ran = 0;
        for op in 0..100 {
            sampler.time(op, || ran += 1);
        }
        assert_eq!(ran, 100);
        let mut other = Sampler::for_ops(8);
        other.time(8, || ());
        sampler.merge(other);
        // Operations 0, 8, ..., 96 and the other worker's 8.
        assert_eq!(sampler.summary().unwrap().samples, 14);
        assert_eq!(Sampler::for_ops(0).summary(), None);
    }
}
