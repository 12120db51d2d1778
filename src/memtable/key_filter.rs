//! The memtable's key filter: which user keys a memtable may hold, so that
//! a get of a key it does not hold skips the skiplist search (a dozen or
//! more dependent loads through a memtable far larger than the CPU's
//! caches) for one cache line.
//!
//! Owns: a blocked Bloom filter over the hashes ([`siftdb_filter::hash_key`])
//! of the user keys inserted, in memory only, sized once from the
//! memtable's capacity (one bit per [`BYTES_PER_BIT`] bytes: 512 KiB for a
//! 64 MiB memtable, small enough to stay mostly in the CPU's caches) and
//! set with atomic ORs, so many writers insert at once.
//! Must never: answer "absent" for a key inserted before the question. An
//! insert sets its bits before it links the entry, and the writer publishes
//! the entry's sequence number (a release store) only after both: a reader
//! whose snapshot covers the entry (an acquire load) sees the bits too.

use std::sync::atomic::{AtomicU64, Ordering};

/// Memtable capacity bytes per filter bit: ~9 bits per key for the
/// benchmarks' entries (16-byte keys, 100-byte values: ~150 bytes of arena
/// each), so ~2% of absent keys are searched anyway. Tiny entries get fewer
/// bits and more searches, never a wrong answer. With 4 bytes per bit (a
/// 2 MiB filter, ~37 bits per key) the 2-thread mixed workload was no
/// faster: the filter's own cache misses ate what the extra bits saved.
pub(crate) const BYTES_PER_BIT: usize = 16;
/// 64-bit words per block: one cache line.
const BLOCK_WORDS: usize = 8;
/// Bits set per key, each in a word of the key's block chosen by the hash.
const PROBES: u32 = 4;
/// The largest filter (for memtables of 8 GiB and more): it is allocated
/// whole when the memtable starts, so an outsized `memtable_bytes` must
/// not turn into an outsized allocation before a single write.
const MAX_BYTES: usize = 64 << 20;

/// See the module docs.
pub(crate) struct KeyFilter {
    words: Box<[AtomicU64]>,
    blocks: u64,
}

impl std::fmt::Debug for KeyFilter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyFilter")
            .field("blocks", &self.blocks)
            .finish_non_exhaustive()
    }
}

impl KeyFilter {
    /// A filter for a memtable of `capacity` bytes: at least one block, at
    /// most [`MAX_BYTES`] (far below the 2^32 blocks that the block's
    /// multiply-shift allows).
    pub(crate) fn for_capacity(capacity: usize) -> KeyFilter {
        let bits_per_block = BLOCK_WORDS * 64;
        let most = MAX_BYTES / (BLOCK_WORDS * std::mem::size_of::<AtomicU64>());
        let blocks = (capacity / BYTES_PER_BIT / bits_per_block).clamp(1, most);
        let words = (0..blocks * BLOCK_WORDS)
            .map(|_| AtomicU64::new(0))
            .collect();
        KeyFilter {
            words,
            blocks: blocks as u64,
        }
    }

    /// Bytes of memory the filter holds.
    pub(crate) fn bytes(&self) -> usize {
        self.words.len() * std::mem::size_of::<AtomicU64>()
    }

    /// Records the key whose hash is `hash`.
    #[inline]
    pub(crate) fn insert(&self, hash: u64) {
        for (word, mask) in self.probes(hash) {
            // A load first: a key put again (or one whose bits another key
            // set) writes nothing, and the line stays shared between cores.
            if word.load(Ordering::Relaxed) & mask != mask {
                word.fetch_or(mask, Ordering::Relaxed);
            }
        }
    }

    /// False only when no key with hash `hash` was inserted.
    #[inline]
    pub(crate) fn may_contain(&self, hash: u64) -> bool {
        self.probes(hash)
            .all(|(word, mask)| word.load(Ordering::Relaxed) & mask == mask)
    }

    /// The words and bits of `hash`: its block from the top 32 bits
    /// (multiply-shift), then per probe 3 bits choosing a word and 6 a bit,
    /// taken from the low 32 bits spread by an odd multiplier.
    #[inline]
    fn probes(&self, hash: u64) -> impl Iterator<Item = (&AtomicU64, u64)> {
        // Below `blocks`: the product of two values below 2^32, shifted.
        let block = (((hash >> 32) * self.blocks) >> 32) as usize;
        let first = block * BLOCK_WORDS;
        let words = self
            .words
            .get(first..first + BLOCK_WORDS)
            .unwrap_or_default();
        let spread = (hash & 0xffff_ffff).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        (0..PROBES).filter_map(move |i| {
            let bits = spread >> (64 - 9 * (i + 1));
            let word = words.get(((bits >> 6) & 7) as usize)?;
            Some((word, 1u64 << (bits & 63)))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use siftdb_filter::hash_key;

    #[test]
    fn inserted_keys_are_never_reported_absent() {
        let filter = KeyFilter::for_capacity(64 << 10);
        for i in 0..20_000u32 {
            filter.insert(hash_key(&i.to_le_bytes()));
        }
        for i in 0..20_000u32 {
            assert!(filter.may_contain(hash_key(&i.to_le_bytes())), "{i}");
        }
    }

    #[test]
    fn absent_keys_are_mostly_reported_absent() {
        // 1 MiB of capacity: 65,536 bits; 7,000 keys is ~9.4 bits per key.
        let filter = KeyFilter::for_capacity(1 << 20);
        assert_eq!(filter.bytes(), (1 << 20) / BYTES_PER_BIT / 8);
        for i in 0..7_000u32 {
            filter.insert(hash_key(&i.to_le_bytes()));
        }
        let passed = (7_000..107_000u32)
            .filter(|i| filter.may_contain(hash_key(&i.to_le_bytes())))
            .count();
        // Four bits in one 512-bit block at ~9.4 bits per key: 1.6% here
        // (1,551 of 100,000), near a standard Bloom filter's 1.9%.
        println!("{passed} of 100,000 absent keys passed");
        assert!(passed < 4_000, "{passed} of 100,000 absent keys passed");
    }

    #[test]
    fn an_empty_filter_holds_nothing_and_sizes_are_bounded() {
        assert_eq!(KeyFilter::for_capacity(usize::MAX).bytes(), MAX_BYTES);
        let filter = KeyFilter::for_capacity(0);
        assert_eq!(filter.bytes(), 64);
        assert!(!filter.may_contain(hash_key(b"k")));
        filter.insert(hash_key(b"k"));
        assert!(filter.may_contain(hash_key(b"k")));
    }

    #[test]
    fn probes_spread_over_the_block() {
        // Every word and every bit position of a block is reachable.
        let filter = KeyFilter::for_capacity(0);
        let mut seen = [0u64; BLOCK_WORDS];
        for i in 0..4_000u32 {
            for (word, mask) in filter.probes(hash_key(&i.to_le_bytes())) {
                let at = filter
                    .words
                    .iter()
                    .position(|w| std::ptr::eq(w, word))
                    .unwrap();
                seen[at] |= mask;
            }
        }
        assert_eq!(seen, [u64::MAX; BLOCK_WORDS]);
    }
}
