//! [`SplitMix64`], the one random generator of siftdb's tests, crash test,
//! fuzz logic and benchmark workloads (`WORKLOADS.md`, "Data", defines it).
//!
//! Owns: the generator and the draws built on it (below, index, chance, bytes).
//! Must never: change an output — the benchmark's keys, values and orders,
//! and every seeded test, are defined by its exact stream.

/// splitmix64's increment (the golden ratio in 64-bit fixed point).
pub const GOLDEN_GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// The `splitmix64` generator (Steele, Lea, Flood 2014), as specified in
/// `WORKLOADS.md`: state += gamma; then two xor-shift-multiply rounds and a
/// final xor-shift, all wrapping.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// A generator whose first output is the finaliser of `seed + gamma`.
    pub fn new(seed: u64) -> Self {
        SplitMix64 { state: seed }
    }

    /// The next 64-bit output.
    #[inline]
    #[expect(
        clippy::should_implement_trait,
        reason = "infinite and infallible, not an Iterator"
    )]
    pub fn next(&mut self) -> u64 {
        self.state = self.state.wrapping_add(GOLDEN_GAMMA);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform draw from [0, 1): the top 53 bits of the next output over 2^53.
    #[inline]
    pub fn next_unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A draw from `0..n` (multiply-shift; 0 when `n` is 0).
    #[inline]
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
    }

    /// A draw from `0..n` as an index (0 when `n` is 0).
    #[inline]
    #[expect(
        clippy::cast_possible_truncation,
        reason = "the draw is below n, a usize"
    )]
    pub fn index(&mut self, n: usize) -> usize {
        self.below(n as u64) as usize
    }

    /// True with probability `percent`/100.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// One byte: the low byte of the next output.
    #[expect(
        clippy::cast_possible_truncation,
        reason = "the low byte, by definition"
    )]
    pub fn byte(&mut self) -> u8 {
        self.next() as u8
    }

    /// `len` bytes.
    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.byte()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix64_matches_the_reference_outputs_for_seed_zero() {
        let mut rng = SplitMix64::new(0);
        assert_eq!(rng.next(), 0xe220a8397b1dcdaf);
        assert_eq!(rng.next(), 0x6e789e6aa1b965f4);
        assert_eq!(rng.next(), 0x06c45d188009454f);
    }

    #[test]
    fn unit_draws_lie_in_the_half_open_unit_interval() {
        let mut rng = SplitMix64::new(5);
        for _ in 0..10_000 {
            let u = rng.next_unit();
            assert!((0.0..1.0).contains(&u), "{u}");
        }
        // The top 53 bits of 0xe220a8397b1dcdaf, over 2^53.
        let u = SplitMix64::new(0).next_unit();
        assert_eq!(u, (0xe220a8397b1dcdafu64 >> 11) as f64 / 9007199254740992.0);
    }
}
