//! Batched queries: many keys asked of one filter with their memory loads
//! overlapped.
//!
//! Owns: `Queries`, the software pipeline behind `contains_hashes` and
//! `contains_keys` of [`crate::BloomFilter`],
//! [`crate::FilterView`] and [`crate::FuseView`] (and so
//! of [`crate::AnyFilterView`]).
//! Must never: answer differently from one `contains_hash` per item — the
//! pipeline only reorders when lines are *requested*, never what is tested.
//!
//! A filter much larger than the cache costs one memory load per query (a
//! binary fuse filter three), and a loop of single queries cannot start the
//! next load until the current query's instructions have drained through
//! the CPU's window. Here items go in groups of [`GROUP`]: while one group is
//! tested, the next group is already hashed, its addresses computed and its
//! lines requested, so a group's worth of loads is always in flight.

use crate::kernel::LineTest;
use crate::line::{line_index, prefetch_line, LINE_BYTES};

/// Items per group: hashed and fetched one group ahead of testing.
pub const GROUP: usize = 16;

/// A filter as the pipeline sees it: its hash, a first step that works out
/// where a hash's answer lies and requests that memory, and a second that
/// answers a group from the first step's results.
pub(crate) trait Lookup {
    /// What the first step hands the second (the hash itself, or the
    /// addresses computed from it, so nothing is computed twice).
    type Probe: Copy + Default;
    /// This filter's hash of `key`.
    fn hash_of(&self, key: &[u8]) -> u64;
    /// The first step for `hash`: requests the cache lines its answer will
    /// read (a hint only).
    fn prepare(&self, hash: u64) -> Self::Probe;
    /// `found[i]` = the single-query answer for the hash `probes[i]` was
    /// prepared from.
    fn answer_group(&self, probes: &[Self::Probe], found: &mut [bool]);
}

/// A blocked Bloom filter as the pipeline sees it: its lines, its hash, its kernel.
pub(crate) trait LineLookup {
    /// Every line of the filter.
    fn line_slice(&self) -> &[[u8; LINE_BYTES]];
    /// This filter's hash of `key`.
    fn hash_of(&self, key: &[u8]) -> u64;
    /// The filter's query kernel.
    fn line_test(&self) -> &LineTest;

    /// The address of the line `hash` maps to (only prefetched, never read
    /// through this pointer).
    #[inline]
    fn line_address(&self, hash: u64) -> *const u8 {
        let lines = self.line_slice();
        let index = line_index(hash, lines.len() as u64);
        lines.as_ptr().wrapping_add(index).cast()
    }
}

impl<F: LineLookup> Lookup for F {
    type Probe = u64;

    #[inline]
    fn hash_of(&self, key: &[u8]) -> u64 {
        LineLookup::hash_of(self, key)
    }

    #[inline]
    fn prepare(&self, hash: u64) -> u64 {
        prefetch_line(self.line_address(hash));
        hash
    }

    #[inline]
    fn answer_group(&self, hashes: &[u64], found: &mut [bool]) {
        self.line_test()
            .test_group(self.line_slice(), hashes, found);
    }
}

/// Iterator over the answers for `items`, in order; see the module docs.
pub(crate) struct Queries<'a, F: Lookup, T, H> {
    filter: &'a F,
    /// Items not yet hashed.
    rest: std::slice::Iter<'a, T>,
    hash_item: H,
    /// Probes of the group being answered, then of the group fetched ahead.
    current: [F::Probe; GROUP],
    ahead: [F::Probe; GROUP],
    ahead_len: usize,
    /// Answers of the current group and how many were handed out.
    answers: [bool; GROUP],
    answers_len: usize,
    handed_out: usize,
    left: usize,
}

impl<'a, F: Lookup, T, H: Fn(&F, &T) -> u64> Queries<'a, F, T, H> {
    fn new(filter: &'a F, items: &'a [T], hash_item: H) -> Self {
        let mut queries = Queries {
            filter,
            rest: items.iter(),
            hash_item,
            current: [F::Probe::default(); GROUP],
            ahead: [F::Probe::default(); GROUP],
            ahead_len: 0,
            answers: [false; GROUP],
            answers_len: 0,
            handed_out: 0,
            left: items.len(),
        };
        queries.fetch_ahead();
        queries
    }

    /// Hashes and prepares the next group into `ahead` (requesting its lines).
    fn fetch_ahead(&mut self) {
        let mut len = 0;
        for (slot, item) in self.ahead.iter_mut().zip(self.rest.by_ref()) {
            *slot = self.filter.prepare((self.hash_item)(self.filter, item));
            len += 1;
        }
        self.ahead_len = len;
    }

    /// Makes the fetched group current, fetches the one after it, and
    /// answers the current group.
    fn next_group(&mut self) {
        std::mem::swap(&mut self.current, &mut self.ahead);
        let len = self.ahead_len;
        self.fetch_ahead();
        let (probes, answers) = (self.current.get(..len), self.answers.get_mut(..len));
        if let (Some(probes), Some(answers)) = (probes, answers) {
            self.filter.answer_group(probes, answers);
        }
        self.answers_len = len;
        self.handed_out = 0;
    }
}

/// Queries by precomputed hash.
pub(crate) fn by_hash<'a, F: Lookup>(
    filter: &'a F,
    hashes: &'a [u64],
) -> impl ExactSizeIterator<Item = bool> + 'a {
    Queries::new(filter, hashes, |_: &F, &hash: &u64| hash)
}

/// Queries by key, hashed with the filter's own hash.
pub(crate) fn by_key<'a, F: Lookup, K: AsRef<[u8]>>(
    filter: &'a F,
    keys: &'a [K],
) -> impl ExactSizeIterator<Item = bool> + 'a {
    Queries::new(filter, keys, |filter: &F, key: &K| {
        filter.hash_of(key.as_ref())
    })
}

impl<F: Lookup, T, H: Fn(&F, &T) -> u64> Iterator for Queries<'_, F, T, H> {
    type Item = bool;

    #[inline]
    fn next(&mut self) -> Option<bool> {
        if self.handed_out == self.answers_len {
            if self.ahead_len == 0 {
                return None;
            }
            self.next_group();
        }
        let answer = self.answers.get(self.handed_out).copied()?;
        self.handed_out += 1;
        self.left -= 1;
        Some(answer)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl<F: Lookup, T, H: Fn(&F, &T) -> u64> ExactSizeIterator for Queries<'_, F, T, H> {}

#[cfg(test)]
mod tests {
    use crate::{hash_key, BloomFilter, FilterView};

    #[test]
    fn batched_answers_equal_single_answers() {
        let mut f = BloomFilter::with_bits_per_key(2_000, 4.0).unwrap();
        for j in 0..2_000u32 {
            f.insert(&j.to_le_bytes());
        }
        let block = f.encode();
        let view = FilterView::parse(&block[..]).unwrap();
        for len in [0, 1, 15, 16, 17, 31, 32, 33, 100, 4_000] {
            let keys: Vec<[u8; 4]> = (0..u32::try_from(len).unwrap())
                .map(|j| (j * 3).to_le_bytes())
                .collect();
            let hashes: Vec<u64> = keys.iter().map(|k| hash_key(k)).collect();
            let single: Vec<bool> = keys.iter().map(|k| f.contains(k)).collect();
            assert!(single.iter().any(|&x| x) || len == 0);
            assert_eq!(f.contains_keys(&keys).collect::<Vec<_>>(), single);
            assert_eq!(f.contains_hashes(&hashes).collect::<Vec<_>>(), single);
            assert_eq!(view.contains_keys(&keys).collect::<Vec<_>>(), single);
            assert_eq!(view.contains_hashes(&hashes).collect::<Vec<_>>(), single);
            assert_eq!(f.contains_keys(&keys).len(), len);
        }
        // Seeded filters hash batched keys with their own seed.
        let mut seeded = BloomFilter::with_bits_per_key(100, 10.0)
            .unwrap()
            .with_seed(7);
        seeded.insert(b"x");
        assert_eq!(seeded.contains_keys(&[b"x"]).collect::<Vec<_>>(), [true]);
    }
}
