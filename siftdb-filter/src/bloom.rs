//! The cache-line-blocked Bloom filter: line choice and the owned filter.
//!
//! Owns: [`BloomFilter`], the mutable in-memory filter, its sizing and its
//! fill-based estimates. How a hash picks a line is [`crate::line`]'s;
//! where the probes fall inside the line is [`crate::probe`]'s.
//! Must never: return `false` for a key that was inserted; allocate a size it
//! did not check first.
//!
//! The filter is an array of 64-byte lines. A key's hash `h` (xxh3, 64 bits)
//! picks line `((h >> 32) · lines) >> 32` — multiply-shift, no division; the
//! probes use the rest of the hash as the filter's [`Layout`] says.

use crate::batch::{self, LineLookup};
use crate::error::{Error, Result};
use crate::kernel::LineTest;
use crate::line::{filter_hash, line_ones};
pub use crate::line::{hash_key, hash_key_seeded, line_index, Line, LINE_BYTES};
use crate::memory::LineMemory;
use crate::probe::Layout;
use crate::theory::{self, LINE_BITS, MAX_BITS_PER_KEY, MAX_PROBES, MIN_BITS_PER_KEY};
use crate::wide_hash::{hash_keys, GROUP as KEYS_PER_GROUP};

/// Estimated keys held by lines with the given set-bit counts: each line is a
/// small Bloom filter of 512 bits, so n ≈ Σ −(512/k)·ln(1 − X/512)
/// (Swamidass & Baldi 2007), summed per line so uneven lines are counted right.
pub(crate) fn estimate_items(ones_per_line: impl Iterator<Item = u32>, k: u32) -> f64 {
    let m = LINE_BITS as f64;
    ones_per_line
        .map(|x| {
            // A full line says "at least this many"; cap it at half a bit short of full.
            let fill = (x as f64).min(m - 0.5) / m;
            -(m / k as f64) * (1.0 - fill).ln()
        })
        .sum()
}

/// Expected false-positive rate of lines with the given set-bit counts for a
/// random absent key: the mean over lines of (X/512)^k.
pub(crate) fn fp_rate_of_fill(ones_per_line: impl Iterator<Item = u32>, k: u32) -> f64 {
    let (mut sum, mut lines) = (0.0, 0u64);
    for x in ones_per_line {
        sum += (x as f64 / LINE_BITS as f64).powi(k as i32);
        lines += 1;
    }
    if lines == 0 {
        1.0
    } else {
        sum / lines as f64
    }
}

/// Lines needed for `items` keys at `bits_per_key`: ⌈items·bits/512⌉, at least one.
pub(crate) fn lines_for(items: usize, bits_per_key: f64) -> Result<u64> {
    let lines = (items as f64 * bits_per_key / LINE_BITS as f64)
        .ceil()
        .max(1.0);
    if lines > u32::MAX as f64 || lines * LINE_BYTES as f64 > isize::MAX as f64 {
        return Err(Error::invalid(format!(
            "a filter for {items} items at {bits_per_key} bits per key is too large"
        )));
    }
    #[expect(
        clippy::cast_possible_truncation,
        reason = "an integral f64 in [1, u32::MAX], checked above"
    )]
    Ok(lines as u64)
}

/// Allocates `lines` empty lines (a large filter's in huge pages, see
/// [`crate::memory`]), or `InvalidArgument` when memory is refused.
pub(crate) fn allocate_lines(lines: u64) -> Result<LineMemory> {
    LineMemory::zeroed(lines)
}

/// Allocates `count` copies of `empty` (one per line of some filter), or
/// `InvalidArgument` when memory is refused.
pub(crate) fn allocate_filled<T: Copy>(count: u64, empty: T) -> Result<Vec<T>> {
    let bytes = count.saturating_mul(std::mem::size_of::<T>() as u64);
    let count = usize::try_from(count).map_err(|_| Error::invalid("filter too large"))?;
    let mut out = Vec::new();
    out.try_reserve_exact(count)
        .map_err(|_| Error::invalid(format!("cannot allocate {bytes} bytes for a filter")))?;
    out.resize(count, empty);
    Ok(out)
}

/// The bits per key a filter needs for `fp_rate`, or `InvalidArgument` when
/// the rate is outside (0, 1) or finer than any blocked filter reaches.
pub(crate) fn bits_per_key_for_rate(fp_rate: f64) -> Result<f64> {
    if !(fp_rate > 0.0 && fp_rate < 1.0) {
        return Err(Error::invalid(format!(
            "false-positive rate must be within (0, 1), got {fp_rate}"
        )));
    }
    theory::bits_per_key_for_rate(fp_rate).ok_or_else(|| {
        Error::invalid(format!(
            "a blocked Bloom filter cannot reach a false-positive rate of {fp_rate}"
        ))
    })
}

pub(crate) fn check_bits_per_key(bits_per_key: f64) -> Result<()> {
    if bits_per_key.is_finite() && (MIN_BITS_PER_KEY..=MAX_BITS_PER_KEY).contains(&bits_per_key) {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "bits per key must be within [{MIN_BITS_PER_KEY}, {MAX_BITS_PER_KEY}], got {bits_per_key}"
        )))
    }
}

pub use crate::line::INSERT_AHEAD;

/// A cache-line-blocked Bloom filter: every key touches one 64-byte line.
#[derive(Clone)]
pub struct BloomFilter {
    lines: LineMemory,
    probes: u32,
    seed: u64,
    layout: Layout,
    /// The query kernel for `layout` and `probes` (derived from them).
    test: LineTest,
}

impl PartialEq for BloomFilter {
    fn eq(&self, other: &BloomFilter) -> bool {
        (self.probes, self.seed, self.layout) == (other.probes, other.seed, other.layout)
            && self.lines == other.lines
    }
}

impl Eq for BloomFilter {}

impl std::fmt::Debug for BloomFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BloomFilter")
            .field("lines", &self.lines.as_slice().len())
            .field("probes", &self.probes)
            .field("seed", &self.seed)
            .field("layout", &self.layout)
            .finish()
    }
}

impl BloomFilter {
    /// A filter for `expected_items` keys with a false-positive rate of at
    /// most `fp_rate` (by the blocked-layout theory) once they are inserted.
    pub fn with_rate(expected_items: usize, fp_rate: f64) -> Result<BloomFilter> {
        let bits = bits_per_key_for_rate(fp_rate)?;
        BloomFilter::with_bits_per_key(expected_items, bits)
    }

    /// A filter of `bits_per_key × expected_items` bits (rounded up to whole
    /// lines), with the probe count that minimises the blocked rate.
    pub fn with_bits_per_key(expected_items: usize, bits_per_key: f64) -> Result<BloomFilter> {
        check_bits_per_key(bits_per_key)?;
        let lines = lines_for(expected_items, bits_per_key)?;
        let (probes, _) = theory::best_probes(bits_per_key);
        Ok(BloomFilter::from_parts(
            allocate_lines(lines)?,
            probes,
            0,
            Layout::DEFAULT,
        ))
    }

    /// A filter with an explicit geometry; `InvalidArgument` when impossible.
    pub fn with_geometry(lines: u64, probes: u32, seed: u64) -> Result<BloomFilter> {
        if lines == 0 || lines > u32::MAX as u64 || !(1..=MAX_PROBES).contains(&probes) {
            return Err(Error::invalid(format!(
                "impossible geometry: {lines} lines, {probes} probes"
            )));
        }
        Ok(BloomFilter::from_parts(
            allocate_lines(lines)?,
            probes,
            seed,
            Layout::DEFAULT,
        ))
    }

    /// The same filter hashing keys with `seed` (only valid while empty).
    pub fn with_seed(mut self, seed: u64) -> BloomFilter {
        self.seed = seed;
        self
    }

    /// The same filter placing probes by `layout` (only valid while empty;
    /// new filters use [`Layout::DEFAULT`]).
    pub fn with_layout(mut self, layout: Layout) -> BloomFilter {
        self.layout = layout;
        self
    }

    pub(crate) fn from_parts(
        lines: impl Into<LineMemory>,
        probes: u32,
        seed: u64,
        layout: Layout,
    ) -> BloomFilter {
        BloomFilter {
            lines: lines.into(),
            probes,
            seed,
            layout,
            test: LineTest::new(probes),
        }
    }

    /// The hash this filter uses for `key`.
    #[inline]
    pub fn hash(&self, key: &[u8]) -> u64 {
        filter_hash(key, self.seed)
    }

    /// Adds a key.
    #[inline]
    pub fn insert(&mut self, key: &[u8]) {
        self.insert_hash(self.hash(key));
    }

    /// Adds a key by its hash (see [`BloomFilter::hash`]).
    #[inline]
    pub fn insert_hash(&mut self, hash: u64) {
        // The line's index and address inside the kernel's one call.
        self.test.insert_in(&mut self.lines, hash);
    }

    /// Adds every hash of `hashes` (the same bits as one
    /// [`BloomFilter::insert_hash`] per hash), faster when there are many:
    /// the line of the hash [`INSERT_AHEAD`] places on is requested while
    /// this one is set, so the memory loads of a filter larger than the
    /// cache overlap. This is how a table's filter is built from the hashes
    /// gathered while its keys were added.
    pub fn insert_hashes(&mut self, hashes: &[u64]) {
        self.test.add_group(self.lines.as_mut_slice(), hashes);
    }

    /// Adds every key of `keys` (the same bits as one [`BloomFilter::insert`]
    /// per key), hashing them 256 at a time into a buffer on the stack
    /// (keys of 9 to 16 bytes eight at a time where the CPU has AVX-512)
    /// and inserting each group with [`BloomFilter::insert_hashes`]: the
    /// one-pass build from keys, with the batched insert's look-ahead and no
    /// vector of every hash.
    pub fn insert_keys<K: AsRef<[u8]>>(&mut self, keys: impl IntoIterator<Item = K>) {
        let mut keys = keys.into_iter();
        let mut hashes = [0u64; KEYS_PER_GROUP];
        loop {
            let filled = hash_keys(&mut keys, self.seed, &mut hashes);
            self.insert_hashes(hashes.get(..filled).unwrap_or_default());
            if filled < KEYS_PER_GROUP {
                return;
            }
        }
    }

    /// False when `key` was certainly never inserted.
    #[inline]
    pub fn contains(&self, key: &[u8]) -> bool {
        self.contains_hash(self.hash(key))
    }

    /// False when no key with this hash was ever inserted.
    #[inline]
    pub fn contains_hash(&self, hash: u64) -> bool {
        // The line's index and address inside the kernel's one call.
        self.test.contains_in(&self.lines, hash)
    }

    /// [`BloomFilter::contains_hash`] for each hash, in order. Faster than
    /// one call per hash when the filter is larger than the cache: the lines
    /// of the next hashes are requested while this one is tested, so their
    /// memory loads overlap (see [`crate::batch`]).
    pub fn contains_hashes<'a>(
        &'a self,
        hashes: &'a [u64],
    ) -> impl ExactSizeIterator<Item = bool> + 'a {
        batch::by_hash(self, hashes)
    }

    /// [`BloomFilter::contains`] for each key, in order, hashing and fetching
    /// a few keys ahead (see [`BloomFilter::contains_hashes`]).
    pub fn contains_keys<'a, K: AsRef<[u8]>>(
        &'a self,
        keys: &'a [K],
    ) -> impl ExactSizeIterator<Item = bool> + 'a {
        batch::by_key(self, keys)
    }

    /// Memory used by the bits, in bits.
    pub fn bits(&self) -> u64 {
        self.lines.as_slice().len() as u64 * LINE_BITS as u64
    }

    /// Number of 512-bit lines.
    pub fn lines(&self) -> u64 {
        self.lines.as_slice().len() as u64
    }

    /// Probes per key.
    pub fn hashes(&self) -> u32 {
        self.probes
    }

    /// The hash seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// How probes are placed inside a line.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// Number of set bits.
    pub fn ones(&self) -> u64 {
        self.lines
            .as_slice()
            .iter()
            .map(|l| line_ones(&l.0) as u64)
            .sum()
    }

    /// Estimated number of distinct keys inserted, from the fill of each line.
    pub fn estimated_items(&self) -> f64 {
        estimate_items(
            self.lines.as_slice().iter().map(|l| line_ones(&l.0)),
            self.probes,
        )
    }

    /// The false-positive rate this filter has now, for a random absent key.
    pub fn current_fp_rate(&self) -> f64 {
        fp_rate_of_fill(
            self.lines.as_slice().iter().map(|l| line_ones(&l.0)),
            self.probes,
        )
    }

    /// The theoretical rate for this filter's size and probe count once
    /// holding `items` keys (blocked layout).
    pub fn expected_fp_rate(&self, items: usize) -> f64 {
        if items == 0 {
            return 0.0;
        }
        theory::blocked_fp_rate(self.bits() as f64 / items as f64, self.probes)
    }

    fn check_same_geometry(&self, other: &BloomFilter) -> Result<()> {
        if self.lines.as_slice().len() != other.lines.as_slice().len()
            || self.probes != other.probes
            || self.seed != other.seed
            || self.layout != other.layout
        {
            return Err(Error::invalid(format!(
                "filters differ in geometry: {} lines/{} probes/seed {}/{:?} vs {} lines/{} probes/seed {}/{:?}",
                self.lines.as_slice().len(),
                self.probes,
                self.seed,
                self.layout,
                other.lines.as_slice().len(),
                other.probes,
                other.seed,
                other.layout
            )));
        }
        Ok(())
    }

    /// Adds every key of `other` (bitwise OR); the result is exactly the
    /// filter of the union. `InvalidArgument` when geometry or seed differ.
    pub fn union_with(&mut self, other: &BloomFilter) -> Result<()> {
        self.check_same_geometry(other)?;
        for (mine, theirs) in self
            .lines
            .as_mut_slice()
            .iter_mut()
            .zip(other.lines.as_slice())
        {
            for (a, b) in mine.0.iter_mut().zip(&theirs.0) {
                *a |= b;
            }
        }
        Ok(())
    }

    /// Estimated size of the intersection of the two key sets,
    /// |A| + |B| − |A ∪ B| (bitwise AND would over-approximate it).
    pub fn estimated_intersection(&self, other: &BloomFilter) -> Result<f64> {
        let mut union = self.clone();
        union.union_with(other)?;
        let estimate = self.estimated_items() + other.estimated_items() - union.estimated_items();
        Ok(estimate.max(0.0))
    }

    /// The lines, for encoding.
    pub(crate) fn raw_lines(&self) -> &[Line] {
        self.lines.as_slice()
    }

    /// The lines as plain byte arrays, as a filter block holds them.
    fn line_arrays(&self) -> &[[u8; LINE_BYTES]] {
        self.lines.as_arrays()
    }
}

impl LineLookup for BloomFilter {
    #[inline]
    fn line_slice(&self) -> &[[u8; LINE_BYTES]] {
        self.line_arrays()
    }

    #[inline]
    fn hash_of(&self, key: &[u8]) -> u64 {
        self.hash(key)
    }

    #[inline]
    fn line_test(&self) -> &LineTest {
        &self.test
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_hashes_sets_the_bits_of_one_insert_hash_per_hash() {
        let mut state = 7u64;
        let hashes: Vec<u64> = (0..3000)
            .map(|_| {
                state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
                remix_for_test(state)
            })
            .collect();
        for layout in [Layout::Sectored] {
            for probes in 1..=MAX_PROBES {
                for lines in [1, 3, 64, 1000] {
                    let empty = BloomFilter::with_geometry(lines, probes, 0)
                        .unwrap()
                        .with_layout(layout);
                    let mut one_by_one = empty.clone();
                    for &h in &hashes {
                        one_by_one.insert_hash(h);
                    }
                    // Shorter than, equal to and longer than the look-ahead.
                    for len in [0, 5, INSERT_AHEAD, INSERT_AHEAD + 1, hashes.len()] {
                        let mut reference = empty.clone();
                        for &h in &hashes[..len] {
                            reference.insert_hash(h);
                        }
                        let mut batched = empty.clone();
                        batched.insert_hashes(&hashes[..len]);
                        assert!(
                            batched == reference,
                            "{layout:?} k={probes} lines={lines} len={len}"
                        );
                    }
                    let mut halves = empty.clone();
                    let (a, b) = hashes.split_at(1234);
                    halves.insert_hashes(a);
                    halves.insert_hashes(b);
                    assert!(halves == one_by_one);
                }
            }
        }
    }

    #[test]
    fn insert_keys_sets_the_bits_of_one_insert_per_key() {
        let keys: Vec<Vec<u8>> = (0..3 * KEYS_PER_GROUP as u64 + 7).map(key).collect();
        for layout in [Layout::Sectored] {
            for probes in [1, 6, 7, 13] {
                let empty = BloomFilter::with_geometry(100, probes, 9)
                    .unwrap()
                    .with_layout(layout);
                // Empty, short, one group exactly, one past it, several.
                for len in [0, 3, KEYS_PER_GROUP, KEYS_PER_GROUP + 1, keys.len()] {
                    let mut reference = empty.clone();
                    for k in &keys[..len] {
                        reference.insert(k);
                    }
                    let mut grouped = empty.clone();
                    grouped.insert_keys(&keys[..len]);
                    assert!(grouped == reference, "{layout:?} k={probes} len={len}");
                    if len > 0 {
                        assert!(grouped != empty);
                    }
                }
            }
        }
    }

    fn remix_for_test(mut z: u64) -> u64 {
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn key(j: u64) -> Vec<u8> {
        format!("k{j:015}").into_bytes()
    }

    #[test]
    fn inserted_keys_are_always_found() {
        // Under Miri a hundred keys: the kernels' unchecked indexing.
        let n: u64 = if cfg!(miri) { 100 } else { 10_000 };
        let mut f = BloomFilter::with_bits_per_key(usize::try_from(n).unwrap(), 10.0).unwrap();
        for j in 0..n {
            f.insert(&key(j));
        }
        assert!((0..n).all(|j| f.contains(&key(j))));
    }

    #[test]
    fn encodings_are_pinned() {
        // crc32 of small filter blocks of each layout: any change to a bit
        // position, to the header or to the line choice shows here.
        for (layout, pins) in [(
            Layout::Sectored,
            [
                (1, 0x2ef7_be95),
                (4, 0x9708_4e74),
                (7, 0x52c2_3f22),
                (8, 0x8b97_3db0),
                (13, 0x6517_9e4e),
                (32, 0x43a4_2ad5),
            ],
        )] {
            for (k, crc) in pins {
                let mut f = BloomFilter::with_geometry(3, k, 0)
                    .unwrap()
                    .with_layout(layout);
                for j in 0..40 {
                    f.insert(&key(j));
                }
                let bytes = f.encode();
                let tail: [u8; 4] = bytes[bytes.len() - 4..].try_into().unwrap();
                assert_eq!(u32::from_le_bytes(tail), crc, "{layout:?} k {k}");
            }
        }
    }

    #[test]
    fn line_index_covers_the_range_without_division() {
        assert_eq!(line_index(0, 10), 0);
        assert_eq!(line_index(u64::MAX, 10), 9);
        assert_eq!(line_index(u64::MAX, 1), 0);
    }

    #[test]
    fn bad_arguments_are_errors() {
        for bpk in [0.0, -1.0, f64::NAN, f64::INFINITY, 0.4, 129.0] {
            assert!(matches!(
                BloomFilter::with_bits_per_key(10, bpk),
                Err(Error::InvalidArgument(_))
            ));
        }
        for p in [0.0, 1.0, -0.5, f64::NAN, 2.0, 1e-300] {
            assert!(matches!(
                BloomFilter::with_rate(10, p),
                Err(Error::InvalidArgument(_))
            ));
        }
        assert!(matches!(
            BloomFilter::with_bits_per_key(usize::MAX, 100.0),
            Err(Error::InvalidArgument(_))
        ));
        assert!(BloomFilter::with_geometry(0, 3, 0).is_err());
        assert!(BloomFilter::with_geometry(1, 0, 0).is_err());
        assert!(BloomFilter::with_geometry(1, 33, 0).is_err());
    }

    #[test]
    fn fractional_bits_per_key_are_honoured() {
        let n = 100_000;
        let a = BloomFilter::with_bits_per_key(n, 9.0).unwrap().bits();
        let b = BloomFilter::with_bits_per_key(n, 9.5).unwrap().bits();
        let c = BloomFilter::with_bits_per_key(n, 10.0).unwrap().bits();
        assert!(a < b && b < c, "{a} {b} {c}");
        assert!(b as f64 <= 9.5 * n as f64 + 512.0);
    }

    #[test]
    fn union_is_exact_and_checks_geometry() {
        let mut a = BloomFilter::with_bits_per_key(1000, 10.0).unwrap();
        let mut b = a.clone();
        let mut both = a.clone();
        for j in 0..1000 {
            if j % 2 == 0 {
                a.insert(&key(j))
            } else {
                b.insert(&key(j))
            }
            both.insert(&key(j));
        }
        let mut u = a.clone();
        u.union_with(&b).unwrap();
        assert_eq!(u, both);
        let other = BloomFilter::with_bits_per_key(2000, 10.0).unwrap();
        assert!(u.union_with(&other).is_err());
        let seeded = BloomFilter::with_bits_per_key(1000, 10.0)
            .unwrap()
            .with_seed(9);
        assert!(u.union_with(&seeded).is_err());
    }

    #[test]
    fn intersection_estimate_is_close() {
        let mut a = BloomFilter::with_bits_per_key(20_000, 10.0).unwrap();
        let mut b = a.clone();
        for j in 0..10_000 {
            a.insert(&key(j));
        }
        for j in 5_000..15_000 {
            b.insert(&key(j));
        }
        let est = a.estimated_intersection(&b).unwrap();
        assert!((est - 5000.0).abs() < 500.0, "{est}");
    }

    /// Seed 0 is the plain hash at every length xxh3 treats differently, so
    /// the filter's hash needs no branch on its seed.
    #[test]
    fn seed_zero_is_the_plain_hash() {
        let bytes: Vec<u8> = (0..300u32)
            .map(|i| (i * 37 + 11).to_le_bytes()[0])
            .collect();
        for len in 0..=bytes.len() {
            assert_eq!(
                hash_key_seeded(&bytes[..len], 0),
                hash_key(&bytes[..len]),
                "{len}"
            );
        }
    }

    #[test]
    fn seeded_filters_hash_differently() {
        let f = BloomFilter::with_bits_per_key(10, 10.0)
            .unwrap()
            .with_seed(1);
        assert_ne!(f.hash(b"k"), hash_key(b"k"));
        assert_eq!(
            BloomFilter::with_bits_per_key(10, 10.0).unwrap().hash(b"k"),
            hash_key(b"k")
        );
    }
}
