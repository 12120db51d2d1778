//! YCSB's Zipfian generator, for the mixed phase's key choice.
//!
//! Owns: [`Zipfian`], the algorithm of YCSB's `ZipfianGenerator` (Gray et
//! al., "Quickly generating billion-record synthetic databases", 1994) over
//! items `0..n`: item 0 is the hottest, nothing is scrambled.
//! Must never: draw its own randomness — the uniform input is handed in,
//! so the workload decides the stream (splitmix64 seeded with 99) and every
//! engine sees the same draws.

use super::data::SplitMix64;

/// YCSB's default Zipfian constant, the one `WORKLOADS.md` uses.
pub const YCSB_ZIPFIAN_CONSTANT: f64 = 0.99;

/// The seed of the uniform stream behind the mixed phase's draws.
pub const MIXED_SEED: u64 = 99;

/// A Zipfian distribution over `0..n` with constant `theta`, sampled the way
/// YCSB's `ZipfianGenerator.nextLong` samples it.
#[derive(Clone, Debug)]
pub struct Zipfian {
    items: u64,
    theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
    /// `1 + 0.5^theta`: below `this / zetan` the draw is item 1.
    second_item_bound: f64,
}

/// `zeta(n, theta) = Σ_{i=1..n} 1/i^theta`, summed from `i = 1` upwards like
/// YCSB's `zetastatic`, so the floating-point result is the same.
pub fn zeta(n: u64, theta: f64) -> f64 {
    let mut sum = 0.0;
    for i in 0..n {
        sum += 1.0 / ((i + 1) as f64).powf(theta);
    }
    sum
}

impl Zipfian {
    /// The distribution over `0..items` (`items ≥ 1`; 0 is treated as 1) with
    /// constant `theta` in (0, 1). Sums `items` terms: about 20 ms per million.
    pub fn new(items: u64, theta: f64) -> Self {
        let items = items.max(1);
        let zetan = zeta(items, theta);
        let zeta2theta = zeta(2, theta);
        let alpha = 1.0 / (1.0 - theta);
        let eta = (1.0 - (2.0 / items as f64).powf(1.0 - theta)) / (1.0 - zeta2theta / zetan);
        Zipfian {
            items,
            theta,
            alpha,
            zetan,
            eta,
            second_item_bound: 1.0 + 0.5f64.powf(theta),
        }
    }

    /// The distribution over `0..items` with `zetan` given rather than
    /// summed: YCSB's `ScrambledZipfianGenerator` draws over 10^10 items
    /// with `zeta(10^10, 0.99)` precomputed, which no one sums per run.
    pub fn with_zetan(items: u64, theta: f64, zetan: f64) -> Self {
        let items = items.max(1);
        let zeta2theta = zeta(2, theta);
        Zipfian {
            items,
            theta,
            alpha: 1.0 / (1.0 - theta),
            zetan,
            eta: (1.0 - (2.0 / items as f64).powf(1.0 - theta)) / (1.0 - zeta2theta / zetan),
            second_item_bound: 1.0 + 0.5f64.powf(theta),
        }
    }

    /// Grows the distribution to `items` items (fewer leave it as it is),
    /// adding the new terms to `zetan` as YCSB's `ZipfianGenerator` does
    /// when the item count rises between draws (the latest distribution of
    /// workload D, whose inserts extend the key space).
    pub fn grow_to(&mut self, items: u64) {
        if items <= self.items {
            return;
        }
        for i in self.items..items {
            self.zetan += 1.0 / ((i + 1) as f64).powf(self.theta);
        }
        self.items = items;
        let zeta2theta = zeta(2, self.theta);
        self.eta =
            (1.0 - (2.0 / items as f64).powf(1.0 - self.theta)) / (1.0 - zeta2theta / self.zetan);
    }

    /// Number of items.
    pub fn items(&self) -> u64 {
        self.items
    }

    /// The Zipfian constant.
    pub fn theta(&self) -> f64 {
        self.theta
    }

    /// `zeta(items, theta)`.
    pub fn zetan(&self) -> f64 {
        self.zetan
    }

    /// YCSB's `eta`.
    pub fn eta(&self) -> f64 {
        self.eta
    }

    /// The item for uniform input `u` in [0, 1) — YCSB's `nextLong` with `u`
    /// in place of its `nextDouble()`. The result is clamped to `items - 1`,
    /// which YCSB's formula can only exceed through rounding as `u → 1`.
    #[inline]
    pub fn sample(&self, u: f64) -> u64 {
        let uz = u * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < self.second_item_bound {
            return 1.min(self.items - 1);
        }
        let scaled = self.items as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha);
        // `as` saturates (and maps NaN to 0), so the cast itself cannot wrap.
        #[expect(
            clippy::cast_possible_truncation,
            reason = "float-to-int casts saturate"
        )]
        let item = scaled as u64;
        item.min(self.items - 1)
    }

    /// `count` draws whose uniform inputs are successive
    /// [`SplitMix64::next_unit`] outputs of a generator seeded with `seed`.
    pub fn draws(&self, count: u64, seed: u64) -> Vec<u64> {
        let mut rng = SplitMix64::new(seed);
        (0..count).map(|_| self.sample(rng.next_unit())).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constants_match_an_independent_implementation() {
        let z = Zipfian::new(1000, YCSB_ZIPFIAN_CONSTANT);
        assert_eq!(z.zetan(), 7.728953217284729);
        assert_eq!(z.eta(), 0.07480608670689805);
        assert_eq!(zeta(2, 0.99), 1.0 + 1.0 / 2f64.powf(0.99));
    }

    #[test]
    fn draws_match_an_independent_implementation() {
        let z = Zipfian::new(1000, YCSB_ZIPFIAN_CONSTANT);
        assert_eq!(
            z.draws(20, MIXED_SEED),
            [3, 0, 288, 0, 1, 2, 82, 127, 26, 33, 29, 148, 3, 14, 0, 154, 2, 7, 5, 1]
        );
    }

    #[test]
    fn draws_for_a_million_items_match_an_independent_implementation() {
        let z = Zipfian::new(1_000_000, YCSB_ZIPFIAN_CONSTANT);
        assert_eq!(z.zetan(), 15.391849746037371);
        assert_eq!(
            z.draws(20, MIXED_SEED),
            [
                24, 0, 102506, 2, 6, 16, 10161, 22714, 1197, 1840, 1452, 30228, 22, 382, 2, 32341,
                18, 111, 65, 5
            ]
        );
    }

    #[test]
    fn item_zero_is_hottest_and_frequency_falls_like_a_power_law() {
        let items = 1000;
        let z = Zipfian::new(items, YCSB_ZIPFIAN_CONSTANT);
        let mut counts = vec![0u64; usize::try_from(items).unwrap()];
        for item in z.draws(200_000, MIXED_SEED) {
            counts[usize::try_from(item).unwrap()] += 1;
        }
        let hottest = counts.iter().enumerate().max_by_key(|(_, &c)| c).unwrap().0;
        assert_eq!(hottest, 0);
        // Item 0 gets 1/zeta(n) of the draws exactly (YCSB's first special case).
        let share0 = counts[0] as f64 / 200_000.0;
        assert!((share0 - 1.0 / z.zetan()).abs() < 0.01, "{share0}");
        // Rank r (item r-1) relative to rank 1: about r^-0.99. YCSB's closed
        // form is an approximation, so allow 25%.
        for rank in [2u64, 5, 10, 30] {
            let observed = counts[usize::try_from(rank - 1).unwrap()] as f64 / counts[0] as f64;
            let expected = (rank as f64).powf(-YCSB_ZIPFIAN_CONSTANT);
            assert!(
                (observed / expected - 1.0).abs() < 0.25,
                "rank {rank}: {observed} vs {expected}"
            );
        }
        // Buckets of ranks: the mass of ranks 101..1000 against the theory.
        let tail: u64 = counts[100..].iter().sum();
        let tail_theory = (zeta(1000, 0.99) - zeta(100, 0.99)) / zeta(1000, 0.99);
        let tail_share = tail as f64 / 200_000.0;
        assert!(
            (tail_share / tail_theory - 1.0).abs() < 0.1,
            "{tail_share} vs {tail_theory}"
        );
    }

    #[test]
    fn growing_matches_a_fresh_distribution() {
        let mut grown = Zipfian::new(1000, YCSB_ZIPFIAN_CONSTANT);
        grown.grow_to(1500);
        grown.grow_to(1200);
        let fresh = Zipfian::new(1500, YCSB_ZIPFIAN_CONSTANT);
        assert_eq!(grown.items(), 1500);
        assert!((grown.zetan() - fresh.zetan()).abs() < 1e-9);
        assert!((grown.eta() - fresh.eta()).abs() < 1e-12);
        let given = Zipfian::with_zetan(1500, YCSB_ZIPFIAN_CONSTANT, fresh.zetan());
        assert_eq!(given.draws(100, 5), fresh.draws(100, 5));
    }

    #[test]
    fn tiny_domains_stay_in_range() {
        for items in [0, 1, 2, 3] {
            let z = Zipfian::new(items, YCSB_ZIPFIAN_CONSTANT);
            for item in z.draws(1000, 1) {
                assert!(item < items.max(1), "{item} of {items}");
            }
        }
        let z = Zipfian::new(10, YCSB_ZIPFIAN_CONSTANT);
        assert!(z.sample(0.999_999_999_999_999_9) < 10);
        assert_eq!(z.sample(0.0), 0);
    }
}
