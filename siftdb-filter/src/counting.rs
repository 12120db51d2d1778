//! The counting Bloom filter: a blocked Bloom filter whose bits are 4-bit
//! counters, so keys can be removed.
//!
//! Owns: [`CountingBloomFilter`] and the layout of its counter lines.
//! Must never: return `false` for a key inserted more often than removed;
//! decrement a saturated counter; change anything when asked to remove a key
//! it does not (probably) hold. It reuses the blocked layout of
//! [`crate::bloom`] and [`crate::probe`] (line choice, the
//! default probe layout, hash) and must never grow a layout of its own, so
//! [`CountingBloomFilter::to_bloom`] is exact.
//!
//! Layout: one line of 512 counters (256 bytes) per key, chosen by
//! [`line_index`]; the key's probes are the set bits of [`probe_mask`]
//! (so a probe that repeats inside one key counts once). Counter `c` of a line
//! lives in byte `c / 2`, low nibble for even `c`, high nibble for odd `c`.
//!
//! Counters saturate at 15. A saturated counter is never decremented again:
//! it may then over-count (the key stays "probably present" forever, a false
//! positive) but it can never under-count, which would be a false negative.
//! Overflow is rare: with 4-bit counters and the optimal probe count, Fan et
//! al. (2000) bound the chance that *any* of `m` counters ever reaches 16 by
//! `1.37e−15 × m` (a standard, unblocked filter). Blocking makes the load of a
//! line vary (Poisson in the number of keys), which
//! [`counter_overflow_probability`] accounts for: at 10 counters per key
//! (k = 7) it is about `7.5e−17` per counter, below Fan's `1.37e−15`, so a
//! filter of a billion counters overflows anywhere with probability < 1e−7.
//!
//! Removing a key that was never inserted but which the filter reports as
//! present (a false positive) decrements counters that belong to other keys
//! and can make *them* disappear: only remove keys you inserted.
//!
//! ```
//! use siftdb_filter::CountingBloomFilter;
//! let mut f = CountingBloomFilter::with_rate(1000, 0.01)?;
//! f.insert(b"apple");
//! f.insert(b"pear");
//! assert!(f.remove(b"apple"));
//! assert!(f.contains(b"pear"));
//! let shipped = f.to_bloom(); // same geometry, 1 bit per counter
//! assert!(shipped.contains(b"pear"));
//! # Ok::<(), siftdb_filter::Error>(())
//! ```

use crate::bloom::{
    allocate_filled, bits_per_key_for_rate, check_bits_per_key, hash_key_seeded, line_index,
    lines_for, BloomFilter, Line, LINE_BYTES,
};
use crate::error::{Error, Result};
use crate::probe::{probe_mask, Layout};
use crate::theory::{self, LINE_BITS, MAX_PROBES};

/// Bytes in one line of 512 four-bit counters.
pub const COUNTER_LINE_BYTES: usize = LINE_BITS as usize / 2;
/// Where a key's counters sit in its line: the Bloom filter's default, so
/// [`CountingBloomFilter::to_bloom`] is a filter like any other.
const LAYOUT: Layout = Layout::DEFAULT;
/// The value at which a counter saturates and stops counting.
pub const COUNTER_MAX: u8 = 15;

/// 512 four-bit counters, aligned to a cache line.
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(C, align(64))]
struct CounterLine([u8; COUNTER_LINE_BYTES]);

impl CounterLine {
    const EMPTY: CounterLine = CounterLine([0; COUNTER_LINE_BYTES]);

    #[inline]
    fn get(&self, counter: u32) -> u8 {
        let byte = self.0.get((counter / 2) as usize).copied().unwrap_or(0);
        (byte >> ((counter & 1) * 4)) & 0x0f
    }

    #[inline]
    fn set(&mut self, counter: u32, value: u8) {
        let shift = (counter & 1) * 4;
        if let Some(byte) = self.0.get_mut((counter / 2) as usize) {
            *byte = (*byte & !(0x0f << shift)) | ((value & 0x0f) << shift);
        }
    }

    /// The line as Bloom bits: bit `c` set exactly when counter `c` is non-zero.
    fn to_bits(self) -> Line {
        let mut bits = Line::EMPTY;
        for counter in 0..LINE_BITS {
            if self.get(counter) > 0 {
                if let Some(byte) = bits.0.get_mut((counter / 8) as usize) {
                    *byte |= 1 << (counter % 8);
                }
            }
        }
        bits
    }
}

/// Calls `visit` with the index of every set bit of a 512-bit probe mask.
#[inline]
fn for_each_probed_counter(mask: &[u64; 8], mut visit: impl FnMut(u32)) {
    for (word_index, word) in mask.iter().enumerate() {
        let mut rest = *word;
        while rest != 0 {
            #[expect(clippy::cast_possible_truncation, reason = "a mask has eight words")]
            visit(word_index as u32 * 64 + rest.trailing_zeros());
            rest &= rest - 1;
        }
    }
}

/// The probability that one counter of a blocked counting filter reaches 16
/// (overflows a 4-bit counter) with `counters_per_key` counters per key and
/// `k` probes: a line holds `j ~ Poisson(512 / counters_per_key)` keys and
/// each raises a given counter with probability `q = 1 − (1 − 1/512)^k`, so
/// `P = Σ_j P(j; λ) · P(Binomial(j, q) ≥ 16)`. Multiply by the number of
/// counters for a union bound over the whole filter.
pub fn counter_overflow_probability(counters_per_key: f64, k: u32) -> f64 {
    counter_tail_probability(counters_per_key, k, COUNTER_MAX as u64 + 1)
}

/// P(a counter's true count ≥ `overflow_at`), as described above.
fn counter_tail_probability(counters_per_key: f64, k: u32, overflow_at: u64) -> f64 {
    let lambda = LINE_BITS as f64 / counters_per_key;
    let q = 1.0 - (1.0 - 1.0 / LINE_BITS as f64).powi(k as i32);
    #[expect(
        clippy::cast_possible_truncation,
        reason = "float-to-int casts saturate; the bound is a few hundred"
    )]
    let hi = (lambda + 12.0 * lambda.sqrt() + 64.0).ceil() as u64;
    let mut total = 0.0;
    for j in overflow_at..=hi {
        let ln_poisson = j as f64 * lambda.ln() - lambda - ln_factorial(j);
        // P(Binomial(j, q) ≥ 16), summed over its upper tail.
        let tail: f64 = (overflow_at..=j)
            .map(|i| (ln_choose(j, i) + i as f64 * q.ln() + (j - i) as f64 * (-q).ln_1p()).exp())
            .sum();
        total += ln_poisson.exp() * tail;
    }
    total
}

fn ln_factorial(n: u64) -> f64 {
    (2..=n).map(|i| (i as f64).ln()).sum()
}

fn ln_choose(n: u64, r: u64) -> f64 {
    ln_factorial(n) - ln_factorial(r) - ln_factorial(n - r)
}

/// A blocked Bloom filter of 4-bit saturating counters: it can remove keys.
///
/// Sized like [`BloomFilter`]: `bits_per_key` counts *counters* per key, so a
/// counting filter has the false-positive rate of a `BloomFilter` of the same
/// bits per key and takes four times its memory.
#[derive(Clone, PartialEq, Eq)]
pub struct CountingBloomFilter {
    lines: Vec<CounterLine>,
    probes: u32,
    seed: u64,
}

impl std::fmt::Debug for CountingBloomFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CountingBloomFilter")
            .field("lines", &self.lines.len())
            .field("probes", &self.probes)
            .field("seed", &self.seed)
            .finish()
    }
}

impl CountingBloomFilter {
    /// A filter for `expected_items` keys with a false-positive rate of at
    /// most `fp_rate` (by the blocked-layout theory) once they are inserted.
    pub fn with_rate(expected_items: usize, fp_rate: f64) -> Result<CountingBloomFilter> {
        let counters_per_key = bits_per_key_for_rate(fp_rate)?;
        CountingBloomFilter::with_bits_per_key(expected_items, counters_per_key)
    }

    /// A filter of `counters_per_key × expected_items` counters (rounded up
    /// to whole lines of 512), with the probe count that minimises the blocked
    /// rate: the geometry of `BloomFilter::with_bits_per_key` with the same
    /// arguments, at 4 bits of memory per counter.
    pub fn with_bits_per_key(
        expected_items: usize,
        counters_per_key: f64,
    ) -> Result<CountingBloomFilter> {
        check_bits_per_key(counters_per_key)?;
        let lines = lines_for(expected_items, counters_per_key)?;
        let (probes, _) = theory::best_probes(counters_per_key);
        CountingBloomFilter::with_geometry(lines, probes, 0)
    }

    /// A filter with an explicit geometry; `InvalidArgument` when impossible.
    pub fn with_geometry(lines: u64, probes: u32, seed: u64) -> Result<CountingBloomFilter> {
        if lines == 0 || lines > u32::MAX as u64 || !(1..=MAX_PROBES).contains(&probes) {
            return Err(Error::invalid(format!(
                "impossible geometry: {lines} lines, {probes} probes"
            )));
        }
        Ok(CountingBloomFilter {
            lines: allocate_filled(lines, CounterLine::EMPTY)?,
            probes,
            seed,
        })
    }

    /// The same filter hashing keys with `seed` (only valid while empty).
    pub fn with_seed(mut self, seed: u64) -> CountingBloomFilter {
        self.seed = seed;
        self
    }

    /// The hash this filter uses for `key` (the one a [`BloomFilter`] with
    /// the same seed uses).
    #[inline]
    pub fn hash(&self, key: &[u8]) -> u64 {
        hash_key_seeded(key, self.seed)
    }

    /// Adds one occurrence of a key.
    #[inline]
    pub fn insert(&mut self, key: &[u8]) {
        self.insert_hash(self.hash(key));
    }

    /// Adds one occurrence of a key by its hash (see [`CountingBloomFilter::hash`]).
    pub fn insert_hash(&mut self, hash: u64) {
        let index = line_index(hash, self.lines.len() as u64);
        let mask = probe_mask(LAYOUT, hash, self.probes);
        if let Some(line) = self.lines.get_mut(index) {
            for_each_probed_counter(&mask, |counter| {
                let value = line.get(counter);
                if value < COUNTER_MAX {
                    line.set(counter, value + 1);
                }
            });
        }
    }

    /// Removes one occurrence of a key. Returns `false`, changing nothing,
    /// when the key is certainly absent. Only remove keys that were inserted:
    /// removing a false positive can hide other keys.
    #[inline]
    pub fn remove(&mut self, key: &[u8]) -> bool {
        self.remove_hash(self.hash(key))
    }

    /// Removes one occurrence of a key by its hash; see [`CountingBloomFilter::remove`].
    pub fn remove_hash(&mut self, hash: u64) -> bool {
        if !self.contains_hash(hash) {
            return false;
        }
        let index = line_index(hash, self.lines.len() as u64);
        let mask = probe_mask(LAYOUT, hash, self.probes);
        if let Some(line) = self.lines.get_mut(index) {
            for_each_probed_counter(&mask, |counter| {
                let value = line.get(counter);
                // A saturated counter no longer knows its count: keep it.
                if value > 0 && value < COUNTER_MAX {
                    line.set(counter, value - 1);
                }
            });
        }
        true
    }

    /// False when `key` is certainly not held (never inserted, or removed as
    /// often as inserted and no counter of it saturated or shared).
    #[inline]
    pub fn contains(&self, key: &[u8]) -> bool {
        self.contains_hash(self.hash(key))
    }

    /// [`CountingBloomFilter::contains`] by hash.
    pub fn contains_hash(&self, hash: u64) -> bool {
        let index = line_index(hash, self.lines.len() as u64);
        let Some(line) = self.lines.get(index) else {
            return true;
        };
        let mask = probe_mask(LAYOUT, hash, self.probes);
        let mut all_set = true;
        for_each_probed_counter(&mask, |counter| all_set &= line.get(counter) > 0);
        all_set
    }

    /// The Bloom filter of the keys held now: same lines, probes and seed,
    /// a bit set exactly where a counter is non-zero. A quarter of the memory,
    /// encodable, and answering exactly as this filter does.
    pub fn to_bloom(&self) -> BloomFilter {
        let lines: Vec<Line> = self.lines.iter().map(|line| line.to_bits()).collect();
        BloomFilter::from_parts(lines, self.probes, self.seed, LAYOUT)
    }

    /// Number of counters (the "bits" of the equivalent Bloom filter).
    pub fn counters(&self) -> u64 {
        self.lines.len() as u64 * LINE_BITS as u64
    }

    /// Bytes held by the counters (four bits each).
    pub fn memory_bytes(&self) -> u64 {
        self.lines.len() as u64 * COUNTER_LINE_BYTES as u64
    }

    /// Number of 512-counter lines.
    pub fn lines(&self) -> u64 {
        self.lines.len() as u64
    }

    /// Probes per key.
    pub fn hashes(&self) -> u32 {
        self.probes
    }

    /// The hash seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Counters stuck at [`COUNTER_MAX`]; each is a permanent small false-positive risk.
    pub fn saturated_counters(&self) -> u64 {
        self.lines
            .iter()
            .map(|line| {
                (0..LINE_BITS)
                    .filter(|&c| line.get(c) == COUNTER_MAX)
                    .count() as u64
            })
            .sum()
    }

    /// Estimated number of distinct keys held, from the non-zero counters.
    pub fn estimated_items(&self) -> f64 {
        self.to_bloom().estimated_items()
    }

    /// Every counter, line by line (for tests).
    #[cfg(test)]
    fn counter_values(&self) -> Vec<u8> {
        self.lines
            .iter()
            .flat_map(|line| (0..LINE_BITS).map(|c| line.get(c)))
            .collect()
    }
}

// The counter line must be exactly four cache lines, like the bit line is one.
const _: () = assert!(std::mem::size_of::<CounterLine>() == 4 * LINE_BYTES);

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    fn key(j: u64) -> Vec<u8> {
        format!("k{j:015}").into_bytes()
    }

    #[test]
    fn nibbles_are_independent() {
        let mut line = CounterLine::EMPTY;
        line.set(0, 15);
        line.set(1, 3);
        line.set(511, 9);
        assert_eq!((line.get(0), line.get(1), line.get(2)), (15, 3, 0));
        assert_eq!(line.0[0], 0x3f);
        assert_eq!(line.get(511), 9);
        line.set(0, 0);
        assert_eq!((line.get(0), line.get(1)), (0, 3));
    }

    #[test]
    fn geometry_matches_the_bloom_filter_at_four_times_the_memory() {
        let c = CountingBloomFilter::with_bits_per_key(100_000, 10.0).unwrap();
        let b = BloomFilter::with_bits_per_key(100_000, 10.0).unwrap();
        assert_eq!(
            (c.lines(), c.hashes(), c.counters()),
            (b.lines(), b.hashes(), b.bits())
        );
        assert_eq!(c.memory_bytes() * 8, 4 * b.bits());
        let c = CountingBloomFilter::with_rate(5_000, 0.001).unwrap();
        let b = BloomFilter::with_rate(5_000, 0.001).unwrap();
        assert_eq!((c.lines(), c.hashes()), (b.lines(), b.hashes()));
    }

    #[test]
    fn bad_arguments_are_errors() {
        for bpk in [0.0, -1.0, f64::NAN, 129.0] {
            assert!(matches!(
                CountingBloomFilter::with_bits_per_key(10, bpk),
                Err(Error::InvalidArgument(_))
            ));
        }
        for p in [0.0, 1.0, f64::NAN, 1e-300] {
            assert!(matches!(
                CountingBloomFilter::with_rate(10, p),
                Err(Error::InvalidArgument(_))
            ));
        }
        assert!(CountingBloomFilter::with_geometry(0, 3, 0).is_err());
        assert!(CountingBloomFilter::with_geometry(1, 33, 0).is_err());
    }

    #[test]
    fn to_bloom_is_the_bloom_filter_of_the_same_keys() {
        let mut c = CountingBloomFilter::with_bits_per_key(2_000, 10.0)
            .unwrap()
            .with_seed(7);
        let mut b = BloomFilter::with_bits_per_key(2_000, 10.0)
            .unwrap()
            .with_seed(7);
        for j in 0..4_000 {
            c.insert(&key(j));
        }
        for j in 2_000..4_000 {
            assert!(c.remove(&key(j)));
        }
        for j in 0..2_000 {
            b.insert(&key(j));
        }
        assert_eq!(c.saturated_counters(), 0);
        assert_eq!(c.to_bloom(), b);
        let est = c.estimated_items();
        assert!((est - 2_000.0).abs() < 150.0, "{est}");
    }

    #[test]
    fn removing_an_absent_key_changes_nothing() {
        let mut f = CountingBloomFilter::with_bits_per_key(1_000, 10.0).unwrap();
        for j in 0..1_000 {
            f.insert(&key(j));
        }
        let before = f.clone();
        let mut refused = 0;
        for j in 1_000..3_000 {
            if !f.contains(&key(j)) {
                assert!(!f.remove(&key(j)));
                refused += 1;
            }
        }
        assert!(refused > 1_900);
        assert_eq!(f, before);
    }

    #[test]
    fn a_saturated_counter_is_never_decremented() {
        let mut f = CountingBloomFilter::with_geometry(1, 7, 0).unwrap();
        for _ in 0..20 {
            f.insert(b"hot");
        }
        let saturated = f.saturated_counters();
        assert!((1..=7).contains(&saturated), "{saturated}");
        for _ in 0..20 {
            assert!(f.remove(b"hot"));
        }
        // Over-counting is the price of saturation: the key stays present.
        assert!(f.contains(b"hot"));
        assert_eq!(f.saturated_counters(), saturated);
        let values = f.counter_values();
        assert!(values.iter().all(|&v| v == 0 || v == COUNTER_MAX));
    }

    #[test]
    fn false_positive_rate_matches_the_bloom_filter_at_ten_bits_per_key() {
        let n = 100_000;
        let mut c =
            CountingBloomFilter::with_bits_per_key(usize::try_from(n).unwrap(), 10.0).unwrap();
        let mut b = BloomFilter::with_bits_per_key(usize::try_from(n).unwrap(), 10.0).unwrap();
        for j in 0..n {
            c.insert(&key(2 * j));
            b.insert(&key(2 * j));
        }
        let fp_c = (0..n).filter(|j| c.contains(&key(2 * j + 1))).count();
        let fp_b = (0..n).filter(|j| b.contains(&key(2 * j + 1))).count();
        // Same geometry and hashes: the answers are the same, key by key.
        assert_eq!(fp_c, fp_b);
        let rate = fp_c as f64 / n as f64;
        let theory = theory::blocked_fp_rate(10.0, c.hashes());
        println!(
            "10 counters/key, k={}: counting {fp_c}/{n}, bloom {fp_b}/{n}, theory {:.4}%",
            c.hashes(),
            theory * 100.0
        );
        assert!((rate / theory - 1.0).abs() < 0.15, "{rate} vs {theory}");
    }

    #[test]
    fn overflow_probability_is_below_fans_bound() {
        for bpk in [8.0, 10.0, 16.0] {
            let (k, _) = theory::best_probes(bpk);
            let p = counter_overflow_probability(bpk, k);
            assert!(p > 0.0 && p < 1.37e-15, "{bpk} bits/key, k={k}: {p}");
        }
        // At 2 counters per key the filter is overloaded and overflows are common.
        let p = counter_overflow_probability(2.0, 6);
        assert!(p > 1e-9, "{p}");
    }

    #[test]
    fn the_counter_distribution_matches_the_tail_formula() {
        // One counter per key, 8 probes: counts average ~8 and saturation is
        // common, so the measured share of counters at 15 (true count ≥ 15)
        // checks the formula the overflow bound is computed with.
        let lines = 64;
        let mut f = CountingBloomFilter::with_geometry(lines, 8, 0).unwrap();
        let keys = lines * LINE_BITS as u64;
        for j in 0..keys {
            f.insert(&key(j));
        }
        let measured = f.saturated_counters() as f64 / f.counters() as f64;
        let predicted = counter_tail_probability(1.0, 8, COUNTER_MAX as u64);
        println!("share of counters at 15: measured {measured:.5}, predicted {predicted:.5}");
        assert!(predicted > 0.005, "{predicted}");
        assert!(
            (measured / predicted - 1.0).abs() < 0.2,
            "{measured} vs {predicted}"
        );
    }

    #[derive(Debug, Clone)]
    enum Op {
        Insert(u8),
        Remove(u8),
    }

    fn op(universe: u8) -> impl Strategy<Value = Op> {
        prop_oneof![
            3 => (0..universe).prop_map(Op::Insert),
            2 => (0..universe).prop_map(Op::Remove),
        ]
    }

    /// Runs `ops` against a filter and a model multiset; after every step, no
    /// held key is missing and no saturated counter has moved.
    fn check_against_model(mut filter: CountingBloomFilter, ops: &[Op]) {
        let mut model: HashMap<u8, u32> = HashMap::new();
        for op in ops {
            let before = filter.counter_values();
            match *op {
                Op::Insert(k) => {
                    filter.insert(&key(k as u64));
                    *model.entry(k).or_default() += 1;
                }
                Op::Remove(k) => {
                    let held = model.get(&k).copied().unwrap_or(0);
                    if held > 0 {
                        assert!(filter.remove(&key(k as u64)));
                        model.insert(k, held - 1);
                    } else if !filter.contains(&key(k as u64)) {
                        let unchanged = filter.clone();
                        assert!(!filter.remove(&key(k as u64)));
                        assert_eq!(filter, unchanged);
                    }
                    // A false positive is never removed: that is the caller's contract.
                }
            }
            let after = filter.counter_values();
            for (b, a) in before.iter().zip(&after) {
                assert!(
                    *b != COUNTER_MAX || *a == COUNTER_MAX,
                    "a saturated counter moved"
                );
            }
            for (&k, &count) in &model {
                assert!(
                    count == 0 || filter.contains(&key(k as u64)),
                    "false negative for {k}"
                );
            }
        }
        if filter.saturated_counters() == 0 {
            // Without saturation the counters are exact: the shipped filter is
            // the Bloom filter of the keys still held.
            let mut expected =
                BloomFilter::with_geometry(filter.lines(), filter.hashes(), 0).unwrap();
            for (&k, &count) in &model {
                if count > 0 {
                    expected.insert(&key(k as u64));
                }
            }
            assert_eq!(filter.to_bloom(), expected);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        #[test]
        fn interleavings_never_lose_a_held_key(ops in prop::collection::vec(op(64), 1..400)) {
            // Two lines for up to ~240 keys held: crowded, so counters are shared.
            check_against_model(CountingBloomFilter::with_geometry(2, 7, 0).unwrap(), &ops);
        }

        #[test]
        fn interleavings_with_saturation_never_lose_a_held_key(
            ops in prop::collection::vec(op(6), 1..300)
        ) {
            // Six keys, many repeats: counters reach 15 and stick.
            check_against_model(CountingBloomFilter::with_geometry(1, 12, 0).unwrap(), &ops);
        }
    }
}
