//! The measured false-positive rate of siftdb's filter, per bits per key.
//!
//! Owns: [`measure_fp`], which builds a filter exactly as a table does
//! (`BloomFilter::with_bits_per_key` over the table's keys), asks it about
//! keys that were never inserted, and sets the count beside the blocked-
//! and standard-Bloom theory (`siftdb::filter::theory`); [`queries_for`],
//! how many absent keys a point needs to be a measurement rather than noise.
//! Must never: sample keys differently from the benchmark — present keys
//! are `key(2i)`, absent keys `key(2i+1)`, as in `WORKLOADS.md`.

use siftdb::filter::{theory, BloomFilter};

use super::data::key;
use super::plot::FpPoint;

/// False positives a point aims to count: the relative standard error of
/// the measured rate is then about 1/√2000 ≈ 2%.
pub const TARGET_FALSE_POSITIVES: f64 = 2000.0;

/// Absent keys to ask at an expected rate `rate`: enough for
/// [`TARGET_FALSE_POSITIVES`], within `min..=max`.
pub fn queries_for(rate: f64, min: u64, max: u64) -> u64 {
    if rate.is_nan() || rate <= 0.0 {
        return max;
    }
    let wanted = (TARGET_FALSE_POSITIVES / rate).ceil();
    #[expect(
        clippy::cast_possible_truncation,
        reason = "float-to-int casts saturate, and the result is clamped anyway"
    )]
    let wanted = wanted as u64;
    wanted.max(min).min(max)
}

/// Builds siftdb's filter for the `n` keys `key(2i)` at `bits_per_key`,
/// asks it about `queries` absent keys `key(2i+1)`, and returns the count
/// with the theory for the filter's actual size and probe count.
pub fn measure_fp(n: u64, bits_per_key: f64, queries: u64) -> Result<FpPoint, String> {
    let items = usize::try_from(n).map_err(|_| format!("{n} keys do not fit this machine"))?;
    let mut filter = BloomFilter::with_bits_per_key(items, bits_per_key)
        .map_err(|e| format!("cannot build a filter at {bits_per_key} bits per key: {e}"))?;
    for i in 0..n {
        filter.insert(&key(2 * i));
    }
    // The filter must never say "absent" for an inserted key.
    if let Some(i) = (0..n).find(|&i| !filter.contains(&key(2 * i))) {
        return Err(format!(
            "the filter at {bits_per_key} bits per key lost key({})",
            2 * i
        ));
    }
    let false_positives = (0..queries)
        .filter(|&i| filter.contains(&key(2 * i + 1)))
        .count() as u64;
    let probes = filter.hashes();
    let bits = filter.bits() as f64;
    let actual_bits_per_key = bits / n as f64;
    Ok(FpPoint {
        bits_per_key,
        actual_bits_per_key,
        probes,
        queries,
        false_positives,
        blocked_theory: theory::blocked_fp_rate(actual_bits_per_key, probes),
        standard_theory: theory::standard_fp_rate(bits, n as f64, probes),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_counts_aim_at_two_thousand_false_positives() {
        assert_eq!(queries_for(0.01, 1000, 1_000_000_000), 200_000);
        assert_eq!(queries_for(0.5, 1_000_000, 50_000_000), 1_000_000);
        assert_eq!(queries_for(1e-9, 1_000_000, 50_000_000), 50_000_000);
        assert_eq!(queries_for(0.0, 1, 7), 7);
        assert_eq!(queries_for(f64::NAN, 1, 7), 7);
    }

    #[test]
    fn a_measured_point_sits_near_its_blocked_theory() {
        let p = measure_fp(20_000, 10.0, 400_000).unwrap();
        assert_eq!(p.queries, 400_000);
        assert!(p.actual_bits_per_key >= 10.0 && p.actual_bits_per_key < 10.5);
        assert!(p.probes >= 5 && p.probes <= 8, "{}", p.probes);
        // About 3,800 false positives expected: well within ±25%.
        let ratio = p.measured() / p.blocked_theory;
        assert!(ratio > 0.75 && ratio < 1.25, "{p:?}");
        assert!(p.blocked_theory > p.standard_theory, "{p:?}");
        let sparse = measure_fp(20_000, 4.0, 100_000).unwrap();
        assert!(sparse.measured() > p.measured() * 5.0);
    }

    #[test]
    fn impossible_settings_are_errors() {
        assert!(measure_fp(1000, 0.0, 10).is_err());
        assert!(measure_fp(1000, f64::NAN, 10).is_err());
    }
}
