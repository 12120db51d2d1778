//! The scalable Bloom filter (Almeida, Baquero, Preguiça, Hutchison 2007):
//! a set-membership filter for a number of items nobody knows in advance.
//!
//! Owns: [`ScalableBloomFilter`], the cascade of [`BloomFilter`] stages it
//! grows, and how one key hash becomes a different hash for every stage.
//! Must never: return `false` for an inserted key; let its compound
//! false-positive rate exceed the target while it can still allocate stages
//! (see "Bound" below); hash a key more than once per operation.
//!
//! Stage `i` has capacity `c₀·gⁱ` (growth `g` = 2 or 4) and is sized for the
//! false-positive rate `pᵢ = p₀·rⁱ` with `p₀ = 0.95·target·(1 − r)` (tightening
//! ratio `r` in (0, 1)). A key is inserted into the newest stage only when no
//! stage already reports it, and a new stage opens when the newest one holds
//! its capacity. A query asks every stage, so the compound rate is
//! `1 − Π(1 − pᵢ) ≤ Σ pᵢ < p₀ / (1 − r) = 0.95·target`, however many items
//! arrive (the 5% is kept for the variation of real filters around the theory).
//!
//! The key is hashed once (xxh3-64, seed 0, as [`crate::hash_key`]);
//! stage `i` probes with `remix(h ⊕ saltᵢ)`, a bijective 64-bit finaliser of
//! the hash mixed with a per-stage constant, so the stages' line choices and
//! probes are uncorrelated and a false positive in one stage says nothing
//! about the next.
//!
//! Bound: the rates `pᵢ` shrink geometrically; once `pᵢ` is finer than a
//! blocked filter can reach (128 bits per key; the rate after about thirty
//! doublings of capacity at `r = ½`) a stage is built at 128 bits per key
//! instead, and when a stage cannot be allocated at all
//! [`ScalableBloomFilter::insert`] keeps filling the newest stage beyond its
//! capacity (the rate then rises above the target, visible in
//! [`ScalableBloomFilter::estimated_fp_rate`]); [`ScalableBloomFilter::try_insert`]
//! reports that error instead.
//!
//! ```
//! use siftdb_filter::ScalableBloomFilter;
//! let mut f = ScalableBloomFilter::new(100, 0.01)?;
//! for j in 0..10_000 {
//!     f.insert(format!("url-{j}").as_bytes());
//! }
//! assert!(f.contains(b"url-42"));
//! assert!(f.stages() > 1);
//! assert!(f.estimated_fp_rate() <= 0.01);
//! # Ok::<(), siftdb_filter::Error>(())
//! ```

use crate::bloom::{bits_per_key_for_rate, hash_key, BloomFilter};
use crate::error::{Error, Result};
use crate::probe::remix;
use crate::theory::MAX_BITS_PER_KEY;

/// Capacity growth per stage unless chosen otherwise.
pub const DEFAULT_GROWTH: u32 = 2;
/// Tightening ratio of the stages' rates unless chosen otherwise.
pub const DEFAULT_TIGHTENING: f64 = 0.5;

/// One Bloom filter of the cascade and how full it is.
#[derive(Clone, Debug, PartialEq)]
struct Stage {
    filter: BloomFilter,
    capacity: u64,
    items: u64,
    salt: u64,
}

impl Stage {
    #[inline]
    fn hash(&self, key_hash: u64) -> u64 {
        remix(key_hash ^ self.salt)
    }

    #[inline]
    fn contains_hash(&self, key_hash: u64) -> bool {
        self.filter.contains_hash(self.hash(key_hash))
    }

    #[inline]
    fn insert_hash(&mut self, key_hash: u64) {
        let hash = self.hash(key_hash);
        self.filter.insert_hash(hash);
        self.items += 1;
    }

    fn is_full(&self) -> bool {
        self.items >= self.capacity
    }
}

/// The salt of stage `index`: distinct odd multiples of the golden ratio.
fn stage_salt(index: usize) -> u64 {
    (2 * index as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)
}

/// The share of the target every stage gives up. A stage's real rate is its
/// fill's, which varies around the theory from one filter to the next (by a
/// few percent for a first stage of ten thousand keys, and the first stage
/// carries half the compound rate); sizing each stage 5% under its share
/// keeps the compound rate under the target for such draws too, for about
/// 0.1 more bits per key.
const SIZING_MARGIN: f64 = 0.05;

/// A Bloom filter that grows: a cascade of [`BloomFilter`]s with rising
/// capacities and falling false-positive rates whose compound rate stays
/// below a target however many keys are inserted.
#[derive(Clone, Debug, PartialEq)]
pub struct ScalableBloomFilter {
    stages: Vec<Stage>,
    initial_capacity: u64,
    target_fp_rate: f64,
    growth: u32,
    tightening: f64,
    len: u64,
}

impl ScalableBloomFilter {
    /// A filter whose first stage holds `initial_capacity` keys and whose
    /// compound false-positive rate stays below `target_fp_rate`; growth ×2,
    /// tightening ratio ½.
    pub fn new(initial_capacity: usize, target_fp_rate: f64) -> Result<ScalableBloomFilter> {
        ScalableBloomFilter::with_growth(
            initial_capacity,
            target_fp_rate,
            DEFAULT_GROWTH,
            DEFAULT_TIGHTENING,
        )
    }

    /// Like [`ScalableBloomFilter::new`] with the capacity `growth` per stage
    /// (2 or 4) and the `tightening` ratio `r` of the stage rates, in (0, 1):
    /// a smaller `r` spends more bits on later stages and fewer on the first.
    pub fn with_growth(
        initial_capacity: usize,
        target_fp_rate: f64,
        growth: u32,
        tightening: f64,
    ) -> Result<ScalableBloomFilter> {
        if initial_capacity == 0 {
            return Err(Error::invalid("initial capacity must be at least 1"));
        }
        if !(target_fp_rate > 0.0 && target_fp_rate < 1.0) {
            return Err(Error::invalid(format!(
                "target false-positive rate must be within (0, 1), got {target_fp_rate}"
            )));
        }
        if growth != 2 && growth != 4 {
            return Err(Error::invalid(format!(
                "growth must be 2 or 4, got {growth}"
            )));
        }
        if !(tightening > 0.0 && tightening < 1.0) {
            return Err(Error::invalid(format!(
                "tightening ratio must be within (0, 1), got {tightening}"
            )));
        }
        let mut filter = ScalableBloomFilter {
            stages: Vec::new(),
            initial_capacity: initial_capacity as u64,
            target_fp_rate,
            growth,
            tightening,
            len: 0,
        };
        // The first stage must reach its rate exactly; later ones may clamp.
        bits_per_key_for_rate(filter.stage_fp_rate(0))?;
        filter.open_stage()?;
        Ok(filter)
    }

    /// The false-positive rate stage `index` is sized for: `p₀·rⁱ`, less
    /// [`SIZING_MARGIN`].
    fn stage_fp_rate(&self, index: usize) -> f64 {
        let first = self.target_fp_rate * (1.0 - self.tightening) * (1.0 - SIZING_MARGIN);
        first
            * self
                .tightening
                .powi(i32::try_from(index).unwrap_or(i32::MAX))
    }

    fn open_stage(&mut self) -> Result<()> {
        let index = self.stages.len();
        let exponent = u32::try_from(index).unwrap_or(u32::MAX);
        let capacity = (self.growth as u64)
            .checked_pow(exponent)
            .and_then(|g| g.checked_mul(self.initial_capacity))
            .ok_or_else(|| Error::invalid("scalable filter: stage capacity overflows"))?;
        let items = usize::try_from(capacity)
            .map_err(|_| Error::invalid("scalable filter: stage capacity overflows"))?;
        let bits_per_key =
            bits_per_key_for_rate(self.stage_fp_rate(index)).unwrap_or(MAX_BITS_PER_KEY);
        let filter = BloomFilter::with_bits_per_key(items, bits_per_key)?;
        self.stages.push(Stage {
            filter,
            capacity,
            items: 0,
            salt: stage_salt(index),
        });
        Ok(())
    }

    /// Adds a key; `true` when it was new (no stage reported it). When the
    /// next stage cannot be allocated the newest stage takes the key beyond
    /// its capacity, so the key is still never lost.
    #[inline]
    pub fn insert(&mut self, key: &[u8]) -> bool {
        self.insert_hash(hash_key(key))
    }

    /// [`ScalableBloomFilter::insert`] by the key's [`crate::hash_key`].
    pub fn insert_hash(&mut self, key_hash: u64) -> bool {
        if self.contains_hash(key_hash) {
            return false;
        }
        if self.stages.last().is_none_or(Stage::is_full) {
            // Out of memory or address space: overfill the newest stage.
            let _ = self.open_stage();
        }
        self.add_new(key_hash);
        true
    }

    /// Like [`ScalableBloomFilter::insert`], but returns the error (and adds
    /// nothing) when a new stage is needed and cannot be allocated.
    pub fn try_insert(&mut self, key: &[u8]) -> Result<bool> {
        let key_hash = hash_key(key);
        if self.contains_hash(key_hash) {
            return Ok(false);
        }
        if self.stages.last().is_none_or(Stage::is_full) {
            self.open_stage()?;
        }
        self.add_new(key_hash);
        Ok(true)
    }

    fn add_new(&mut self, key_hash: u64) {
        if let Some(stage) = self.stages.last_mut() {
            stage.insert_hash(key_hash);
            self.len += 1;
        }
    }

    /// False when `key` was certainly never inserted.
    #[inline]
    pub fn contains(&self, key: &[u8]) -> bool {
        self.contains_hash(hash_key(key))
    }

    /// [`ScalableBloomFilter::contains`] by the key's [`crate::hash_key`].
    pub fn contains_hash(&self, key_hash: u64) -> bool {
        self.stages
            .iter()
            .any(|stage| stage.contains_hash(key_hash))
    }

    /// Keys inserted as new. A new key that was a false positive of the
    /// filter is neither added nor counted, so this can fall slightly short of
    /// the true number of distinct keys offered.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True when no key was inserted.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Number of Bloom filter stages opened so far.
    pub fn stages(&self) -> usize {
        self.stages.len()
    }

    /// Keys the open stages are sized for, together.
    pub fn capacity(&self) -> u64 {
        self.stages.iter().map(|s| s.capacity).sum()
    }

    /// Bits of all stages together.
    pub fn bits(&self) -> u64 {
        self.stages.iter().map(|s| s.filter.bits()).sum()
    }

    /// Bytes of all stages' bits together.
    pub fn memory_bytes(&self) -> u64 {
        self.bits() / 8
    }

    /// The compound rate the filter is built to stay below.
    pub fn target_fp_rate(&self) -> f64 {
        self.target_fp_rate
    }

    /// Capacity growth per stage (2 or 4).
    pub fn growth(&self) -> u32 {
        self.growth
    }

    /// Ratio between successive stages' rates.
    pub fn tightening(&self) -> f64 {
        self.tightening
    }

    /// The false-positive rate now, for a random absent key, from the fill of
    /// every stage: `1 − Π(1 − current rate of stage i)`.
    pub fn estimated_fp_rate(&self) -> f64 {
        let all_miss: f64 = self
            .stages
            .iter()
            .map(|s| 1.0 - s.filter.current_fp_rate())
            .product();
        1.0 - all_miss
    }

    /// The stages, oldest first, for inspection.
    pub fn stage_filters(&self) -> impl Iterator<Item = &BloomFilter> {
        self.stages.iter().map(|s| &s.filter)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(j: u64) -> Vec<u8> {
        format!("k{j:015}").into_bytes()
    }

    #[test]
    fn bad_arguments_are_errors() {
        let bad = [
            ScalableBloomFilter::new(0, 0.01),
            ScalableBloomFilter::new(10, 0.0),
            ScalableBloomFilter::new(10, 1.0),
            ScalableBloomFilter::new(10, f64::NAN),
            ScalableBloomFilter::new(10, 1e-300),
            ScalableBloomFilter::with_growth(10, 0.01, 3, 0.5),
            ScalableBloomFilter::with_growth(10, 0.01, 1, 0.5),
            ScalableBloomFilter::with_growth(10, 0.01, 2, 0.0),
            ScalableBloomFilter::with_growth(10, 0.01, 2, 1.0),
            ScalableBloomFilter::with_growth(10, 0.01, 2, f64::NAN),
            ScalableBloomFilter::with_growth(usize::MAX, 0.01, 2, 0.5),
        ];
        for result in bad {
            assert!(
                matches!(result, Err(Error::InvalidArgument(_))),
                "{result:?}"
            );
        }
        assert!(ScalableBloomFilter::with_growth(10, 0.01, 4, 0.9).is_ok());
    }

    #[test]
    fn stages_grow_by_the_growth_factor_with_tightening_rates() {
        let mut f = ScalableBloomFilter::with_growth(100, 0.02, 4, 0.5).unwrap();
        let mut new = 0;
        for j in 0..3_000 {
            new += f.insert(&key(j)) as u64;
        }
        assert_eq!(f.len(), new);
        // A new key the filter already (falsely) reports is not added.
        assert!(new > 2_950, "{new}");
        // 100 + 400 + 1600 < 2950 ≤ 100 + 400 + 1600 + 6400.
        assert_eq!(f.stages(), 4);
        assert_eq!(f.capacity(), 8_500);
        let rates: Vec<f64> = (0..4).map(|i| f.stage_fp_rate(i)).collect();
        let shares = [0.01, 0.005, 0.0025, 0.00125];
        for (rate, share) in rates.iter().zip(shares) {
            assert!(
                (rate - share * (1.0 - SIZING_MARGIN)).abs() < 1e-15,
                "{rates:?}"
            );
        }
        let bits: Vec<u64> = f.stage_filters().map(|s| s.bits()).collect();
        assert!(bits.windows(2).all(|w| w[1] > 4 * w[0] - 1024), "{bits:?}");
        assert!((0..3_000).all(|j| f.contains(&key(j))));
    }

    #[test]
    fn repeated_keys_are_not_counted_and_open_no_stage() {
        let mut f = ScalableBloomFilter::new(10, 0.01).unwrap();
        assert!(f.is_empty());
        assert!(f.insert(b"a"));
        for _ in 0..100 {
            assert!(!f.insert(b"a"));
            assert!(!f.try_insert(b"a").unwrap());
        }
        assert_eq!((f.len(), f.stages()), (1, 1));
        assert!(f.try_insert(b"b").unwrap());
        assert_eq!(f.len(), 2);
    }

    #[test]
    fn stage_hashes_are_uncorrelated() {
        let h = hash_key(b"x");
        let a = remix(h ^ stage_salt(0));
        let b = remix(h ^ stage_salt(1));
        assert_ne!(a >> 32, b >> 32);
        assert_ne!(stage_salt(0), stage_salt(1));
    }

    /// Inserts the even keys `k0, k2, …` up to `n` present keys, then asks
    /// the `n` odd keys in between: the measured compound rate at `n`.
    #[test]
    fn compound_rate_stays_below_target_at_1x_10x_100x() {
        let (initial, target) = (10_000u64, 0.01);
        let mut f = ScalableBloomFilter::new(usize::try_from(initial).unwrap(), target).unwrap();
        let mut inserted = 0u64;
        for multiple in [1u64, 10, 100] {
            let n = initial * multiple;
            while inserted < n {
                f.insert(&key(2 * inserted));
                inserted += 1;
            }
            assert!(
                (0..n).all(|j| f.contains(&key(2 * j))),
                "false negative at {multiple}x"
            );
            let false_positives = (0..n).filter(|j| f.contains(&key(2 * j + 1))).count();
            let measured = false_positives as f64 / n as f64;
            let estimated = f.estimated_fp_rate();
            // What the stages' sizes promise for the items they hold (blocked theory).
            let sized_for: f64 = 1.0
                - f.stages
                    .iter()
                    .map(|s| 1.0 - s.filter.expected_fp_rate(usize::try_from(s.items).unwrap()))
                    .product::<f64>();
            println!(
                "{multiple}x: {n} keys, {} stages, {:.2} bits/key, measured FP {:.4}%, estimated {:.4}%, theory {:.4}%",
                f.stages(),
                f.bits() as f64 / n as f64,
                measured * 100.0,
                estimated * 100.0,
                sized_for * 100.0
            );
            // The bound is on the expected rate; by design Σpᵢ approaches the
            // target as stages fill (98.4% of it with six full stages at 100x),
            // so the measured rate may exceed it by sampling noise alone:
            // allow three standard deviations of n Bernoulli trials.
            let noise = 3.0 * (target * (1.0 - target) / n as f64).sqrt();
            assert!(
                measured <= target + noise,
                "{multiple}x: measured {measured}"
            );
            assert!(estimated <= target, "{multiple}x: estimated {estimated}");
            assert!(sized_for <= target, "{multiple}x: theory {sized_for}");
            // The fill-based estimate tracks what was measured: within 10%,
            // plus three standard deviations of n trials at the estimated rate.
            let sampling = 3.0 * (estimated * (1.0 - estimated) / n as f64).sqrt();
            assert!(
                (measured - estimated).abs() < 0.1 * estimated + sampling,
                "{multiple}x: measured {measured}, estimated {estimated}"
            );
        }
    }
}
