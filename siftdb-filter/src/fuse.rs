//! The binary fuse filter (Graf & Lemire, "Binary Fuse Filters: Fast and
//! Smaller Than Xor Filters", ACM JEA 2022): a static filter for a set known
//! up front — the keys of a table written by compaction — at ≈ 9 bits per key
//! for a 2⁻⁸ false-positive rate, where a blocked Bloom filter needs ≈ 12.
//!
//! Owns: the geometry (segment length and count for a number of keys), where
//! a key hash's three slots lie, its fingerprint, and construction (peeling
//! and assignment) straight into an encoded block; the block itself and the
//! queries are [`crate::fuse_block`]'s.
//! Must never: build a filter that answers "absent" for a hash it was given —
//! construction either places every distinct hash or returns an error (the
//! caller then builds a Bloom filter); panic on any input; allocate without
//! checking the size first.
//!
//! # The structure
//!
//! An array of `(S + 2) · L` fingerprint slots of `w` = 8 or 16 bits, cut into
//! `S + 2` segments of `L` slots (`L` a power of two). A key hash `h` (xxh3-64
//! of the key, [`crate::hash_key`]) is first remixed with the
//! filter's seed, `g = xxh3_64_with_seed(h as 8 LE bytes, seed)`; `g` picks
//! one slot in each of three consecutive segments `s, s+1, s+2`
//! (`Slots::positions`). The key's fingerprint is the low `w` bits of `h`
//! itself, so it is independent of where the key's slots lie. The filter
//! holds a key when the XOR of its three slots equals its fingerprint; an
//! absent key matches with probability exactly 2⁻ʷ.
//!
//! # Construction
//!
//! Filling the slots so that every key's XOR comes out right is solving a
//! sparse linear system over GF(2); the binary fuse layout (three slots in
//! consecutive segments, rather than anywhere) makes it solvable by
//! *peeling* at only ≈ 12.5% more slots than keys for large sets:
//!
//! 1. For every slot, count the keys that touch it and XOR their hashes.
//! 2. A slot touched by exactly one key identifies that key (the XOR is its
//!    hash): record (key, slot), remove the key from its three slots, and
//!    continue with any slot that drops to one key. Slots are scanned left to
//!    right; a slot freed behind the scan is peeled at once, one freed ahead
//!    is left for the scan to find, so all the work happens within two
//!    segments of the scan and the arrays are walked once, in order. (Keys
//!    are counted into their slots in order of their first segment for the
//!    same reason.) Which keys peel does not depend on the order.
//! 3. If every key was recorded, assign in reverse order: a key's recorded
//!    slot gets the value that makes its XOR equal its fingerprint. Keys
//!    recorded later were removed earlier, so no later assignment touches a
//!    slot an earlier one relied on.
//!
//! When peeling stalls (a 2-core remains), the attempt is repeated with the
//! next seed; up to [`MAX_ATTEMPTS`] seeds are tried. Equal hashes can never
//! be peeled (they share all three slots), so the first failure also sorts
//! and de-duplicates the input.

use std::borrow::Cow;

use crate::bloom::allocate_filled;
use crate::error::{Error, Result};
use crate::line::prefetch_line;

/// Three slots per key (the only arity this module builds or reads).
pub const ARITY: u8 = 3;
/// The largest segment length used or accepted: 2¹⁸ slots.
pub const MAX_SEGMENT_LENGTH: u32 = 1 << 18;
/// Seeds tried before construction gives up.
pub const MAX_ATTEMPTS: u32 = 64;
/// The step between the seeds of successive attempts (an odd constant, so
/// `MAX_ATTEMPTS` attempts never repeat a seed).
const SEED_STEP: u64 = 0x9e37_79b9_7f4a_7c15;

/// Fingerprint width of a binary fuse filter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FingerprintBits {
    /// 8-bit fingerprints: ≈ 9.0 bits per key at 1M keys, FP 2⁻⁸ ≈ 0.39%.
    Eight,
    /// 16-bit fingerprints: ≈ 18.0 bits per key at 1M keys, FP 2⁻¹⁶ ≈ 0.0015%.
    Sixteen,
}

impl FingerprintBits {
    /// Bits per fingerprint (8 or 16), as stored in a block header.
    pub fn bits(self) -> u8 {
        match self {
            FingerprintBits::Eight => 8,
            FingerprintBits::Sixteen => 16,
        }
    }

    /// The width with this bit count, if there is one.
    pub fn from_bits(bits: u8) -> Option<FingerprintBits> {
        match bits {
            8 => Some(FingerprintBits::Eight),
            16 => Some(FingerprintBits::Sixteen),
            _ => None,
        }
    }

    /// Bytes per slot.
    pub fn bytes(self) -> usize {
        usize::from(self.bits() / 8)
    }

    /// The false-positive rate for an absent key, whatever the key count:
    /// 2⁻ʷ (the key's fingerprint is independent of its slots' contents).
    pub fn fp_rate(self) -> f64 {
        0.5f64.powi(i32::from(self.bits()))
    }

    /// The narrowest width whose rate is at most `fp_rate`, or `None` when
    /// even 16 bits cannot reach it.
    pub fn for_rate(fp_rate: f64) -> Option<FingerprintBits> {
        [FingerprintBits::Eight, FingerprintBits::Sixteen]
            .into_iter()
            .find(|bits| bits.fp_rate() <= fp_rate)
    }
}

/// The segment layout of a filter: `count + 2` segments of `length` slots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    /// Slots per segment `L`: a power of two, 1 ..= [`MAX_SEGMENT_LENGTH`].
    pub segment_length: u32,
    /// `S`, the number of segments a key's first slot can fall in (≥ 1); the
    /// array has `S + 2` segments.
    pub segment_count: u32,
}

impl Geometry {
    /// The geometry the builder uses for `keys` distinct keys (Graf & Lemire
    /// §4, arity 3): `L = 2^⌊ln n / ln 3.33 + 2.25⌋` capped at 2¹⁸, and
    /// `n · max(1.125, 0.875 + 0.25 · ln 10⁶ / ln n)` slots rounded up to whole
    /// segments — so larger sets need fewer slots per key, down to 1.125 (9
    /// bits per key for 8-bit fingerprints) from 10⁶ keys on.
    pub fn for_keys(keys: usize) -> Result<Geometry> {
        // Below two keys the formulas degenerate (ln 1 = 0); size as for two.
        let n = keys.max(2) as f64;
        let exponent = (n.ln() / 3.33f64.ln() + 2.25).floor();
        #[expect(
            clippy::cast_possible_truncation,
            reason = "an integral f64 clamped to [0, 18]"
        )]
        let shift = exponent.clamp(0.0, 18.0) as u32;
        let segment_length = 1u32 << shift;
        let factor = (0.875 + 0.25 * 1e6f64.ln() / n.ln()).max(1.125);
        let capacity = (n * factor).ceil();
        let segments = (capacity / f64::from(segment_length)).ceil();
        let too_large =
            || Error::invalid(format!("a binary fuse filter for {keys} keys is too large"));
        // At most u32::MAX slots: slot indices then fit every usize, and a
        // filter over four billion keys is beyond any table.
        if segments * f64::from(segment_length) > f64::from(u32::MAX) {
            return Err(too_large());
        }
        #[expect(
            clippy::cast_possible_truncation,
            reason = "an integral f64 in [1, u32::MAX], checked above"
        )]
        let segment_count = (segments as u32).saturating_sub(2).max(1);
        let geometry = Geometry {
            segment_length,
            segment_count,
        };
        geometry.slots_u32().ok_or_else(too_large)?;
        Ok(geometry)
    }

    /// Total slots `(S + 2) · L`.
    pub fn slots(self) -> u64 {
        (u64::from(self.segment_count) + 2) * u64::from(self.segment_length)
    }

    /// Total slots, when they fit in u32 (the builder's index type).
    fn slots_u32(self) -> Option<u32> {
        u32::try_from(self.slots()).ok()
    }

    /// The query-time form.
    pub(crate) fn slot_map(self) -> Slots {
        let length = u64::from(self.segment_length);
        Slots {
            span: u64::from(self.segment_count) * length,
            length,
            mask: length - 1,
            segments: u64::from(self.segment_count),
        }
    }
}

/// Where a remixed hash's three slots lie: the geometry in the form a query
/// uses it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Slots {
    /// `S · L`: the range of the first slot.
    span: u64,
    /// `L`.
    length: u64,
    /// `L − 1`.
    mask: u64,
    /// `S`.
    segments: u64,
}

impl Slots {
    /// The three slots of remixed hash `g`: the first, `p0`, is
    /// `⌊g · S·L / 2⁶⁴⌋` (segment `s = p0 / L`, multiply-shift, no
    /// division); the second and third are the slots at the same offset in
    /// segments `s + 1` and `s + 2`, that offset XORed with bits 0..18 and
    /// 18..36 of `g` respectively (masked to `L − 1`, so each stays inside
    /// its segment).
    #[inline]
    #[expect(
        clippy::cast_possible_truncation,
        reason = "p0 < S·L < 2⁶⁴; every position is below the slot count, \
                  which fits in usize (the slots are in memory)"
    )]
    pub(crate) fn positions(self, g: u64) -> [usize; 3] {
        let p0 = ((u128::from(g) * u128::from(self.span)) >> 64) as u64;
        let p1 = (p0 + self.length) ^ (g & self.mask);
        let p2 = (p0 + 2 * self.length) ^ ((g >> 18) & self.mask);
        [p0 as usize, p1 as usize, p2 as usize]
    }

    /// The segment of `g`'s first slot, `⌊p0 / L⌋ = ⌊g · S / 2⁶⁴⌋`.
    #[inline]
    #[expect(
        clippy::cast_possible_truncation,
        reason = "the result is below S, a u32"
    )]
    fn first_segment(self, g: u64) -> usize {
        ((u128::from(g) * u128::from(self.segments)) >> 64) as usize
    }
}

/// The filter's remix of a key hash: xxh3-64 of its 8 little-endian bytes
/// with the filter's seed. A new seed moves every key to new slots; the
/// fingerprint (from `hash` itself) stays.
#[inline]
pub(crate) fn remix(hash: u64, seed: u64) -> u64 {
    xxhash_rust::xxh3::xxh3_64_with_seed(&hash.to_le_bytes(), seed)
}

/// A fingerprint width as code: how a fingerprint comes from a hash and how
/// a slot is read from and written to the little-endian slot bytes.
pub(crate) trait Cell {
    /// The fingerprint.
    type Value: Copy + Eq + std::ops::BitXor<Output = Self::Value>;
    /// The fingerprint of key hash `hash`: its low bits.
    fn of_hash(hash: u64) -> Self::Value;
    /// Slot `index` of `cells`, if it exists.
    fn read(cells: &[u8], index: usize) -> Option<Self::Value>;
    /// Writes slot `index` (nothing when it does not exist).
    fn write(cells: &mut [u8], index: usize, value: Self::Value);
}

/// 8-bit fingerprints.
pub(crate) struct Cell8;
/// 16-bit fingerprints, little-endian.
pub(crate) struct Cell16;

impl Cell for Cell8 {
    type Value = u8;

    #[inline]
    fn of_hash(hash: u64) -> u8 {
        let [low, ..] = hash.to_le_bytes();
        low
    }

    #[inline]
    fn read(cells: &[u8], index: usize) -> Option<u8> {
        cells.get(index).copied()
    }

    #[inline]
    fn write(cells: &mut [u8], index: usize, value: u8) {
        if let Some(cell) = cells.get_mut(index) {
            *cell = value;
        }
    }
}

impl Cell for Cell16 {
    type Value = u16;

    #[inline]
    fn of_hash(hash: u64) -> u16 {
        let [a, b, ..] = hash.to_le_bytes();
        u16::from_le_bytes([a, b])
    }

    #[inline]
    fn read(cells: &[u8], index: usize) -> Option<u16> {
        cells
            .as_chunks::<2>()
            .0
            .get(index)
            .map(|cell| u16::from_le_bytes(*cell))
    }

    #[inline]
    fn write(cells: &mut [u8], index: usize, value: u16) {
        if let Some(cell) = cells.as_chunks_mut::<2>().0.get_mut(index) {
            *cell = value.to_le_bytes();
        }
    }
}

/// A query worked out up to its memory reads: the key hash and its slots.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Probe {
    pub(crate) hash: u64,
    pub(crate) slots: [usize; 3],
}

impl Probe {
    #[inline]
    pub(crate) fn new(hash: u64, slots: Slots, seed: u64) -> Probe {
        Probe {
            hash,
            slots: slots.positions(remix(hash, seed)),
        }
    }

    /// Whether the filter over `cells` (slots of `C`) holds the key. A slot
    /// out of range (impossible once a block's geometry is checked) answers
    /// "maybe".
    #[inline]
    pub(crate) fn holds<C: Cell>(self, cells: &[u8]) -> bool {
        let [a, b, c] = self.slots;
        match (C::read(cells, a), C::read(cells, b), C::read(cells, c)) {
            (Some(x), Some(y), Some(z)) => x ^ y ^ z == C::of_hash(self.hash),
            _ => true,
        }
    }
}

/// What a successful construction produced.
#[derive(Debug)]
pub(crate) struct Built {
    /// The seed whose remix peeled.
    pub(crate) seed: u64,
    /// Distinct keys placed.
    pub(crate) keys: u64,
}

/// Per-attempt working memory, reused across attempts.
///
/// A slot carries the XOR of the hashes of the keys touching it (8 bytes)
/// and their count (1 byte: 256 keys on one slot only happen with equal
/// hashes, which cannot peel anyway, so the attempt stops there). A peeled
/// key's slots are recomputed from its hash (one remix, arithmetic only)
/// rather than looked up, so a peeling step depends on no other memory than
/// the slots themselves; the remix is kept with the key from then on, so
/// each key is remixed twice in all (once to sort, once when peeled).
struct Peeling {
    /// Keys touching each slot.
    counts: Vec<u8>,
    /// XOR of the hashes of the keys touching each slot.
    xors: Vec<u64>,
    /// Slots that dropped to one key and wait to be peeled.
    pending: Vec<usize>,
    /// Every key's (remix, hash), ordered by the segment of its first slot.
    by_segment: Vec<(u64, u64)>,
    /// Every key's remix, in input order (sorting's scratch).
    remixes: Vec<u64>,
    /// Keys per first segment, then where each segment's keys start.
    segment_starts: Vec<usize>,
    /// (key hash, its remix, the slot it was peeled from), in peeling order.
    order: Vec<(u64, u64, usize)>,
}

impl Peeling {
    fn new(geometry: Geometry, slots: u32, keys: usize) -> Result<Peeling> {
        let mut order = Vec::new();
        order.try_reserve_exact(keys).map_err(|_| {
            Error::invalid(format!("cannot allocate the peeling order of {keys} keys"))
        })?;
        Ok(Peeling {
            counts: allocate_filled(u64::from(slots), 0u8)?,
            xors: allocate_filled(u64::from(slots), 0u64)?,
            pending: Vec::new(),
            by_segment: allocate_filled(keys as u64, (0u64, 0u64))?,
            remixes: allocate_filled(keys as u64, 0u64)?,
            segment_starts: allocate_filled(u64::from(geometry.segment_count) + 1, 0usize)?,
            order,
        })
    }

    /// Tries to peel `keys` under `seed`; true when every key was peeled
    /// (then `order` holds them all).
    fn peel(&mut self, keys: &[u64], slots: Slots, seed: u64) -> bool {
        self.counts.fill(0);
        self.xors.fill(0);
        self.order.clear();
        self.sort_by_segment(keys, slots, seed);
        // Keys come in order of first segment s and touch segments s..s+2
        // at random: each key also requests a random line of segment s+3,
        // so a segment's slot state is mostly in cache before its keys come.
        let ahead = usize::try_from(3 * slots.length).unwrap_or(0);
        for &(g, hash) in &self.by_segment {
            let positions = slots.positions(g);
            let [first, ..] = positions;
            prefetch_line(
                self.xors
                    .as_ptr()
                    .wrapping_add(first.wrapping_add(ahead))
                    .cast(),
            );
            for p in positions {
                if let (Some(count), Some(xor)) = (self.counts.get_mut(p), self.xors.get_mut(p)) {
                    let Some(more) = count.checked_add(1) else {
                        return false;
                    };
                    *count = more;
                    *xor ^= hash;
                }
            }
        }
        // Peeling at the scan touches slots up to two segments ahead, at
        // random within them, each for the first time since the counting
        // pass: request the slot state three segments ahead as the scan
        // advances, so it is in cache when that work arrives.
        for start in 0..self.counts.len() {
            let next = start.wrapping_add(ahead);
            prefetch_line(self.xors.as_ptr().wrapping_add(next).cast());
            prefetch_line(self.counts.as_ptr().wrapping_add(next));
            if self.counts.get(start) != Some(&1) {
                continue;
            }
            self.pending.push(start);
            while let Some(slot) = self.pending.pop() {
                self.peel_slot(slot, slots, seed, start);
            }
        }
        self.order.len() == keys.len()
    }

    /// Fills `by_segment` with every key, ordered by the segment of its
    /// first slot (a counting sort), so that counting the keys of each slot
    /// walks the slot arrays from left to right instead of at random.
    fn sort_by_segment(&mut self, keys: &[u64], slots: Slots, seed: u64) {
        self.segment_starts.fill(0);
        self.remixes.truncate(keys.len());
        for (g, &hash) in self.remixes.iter_mut().zip(keys) {
            *g = remix(hash, seed);
            if let Some(n) = self.segment_starts.get_mut(slots.first_segment(*g)) {
                *n += 1;
            }
        }
        let mut next = 0;
        for start in self.segment_starts.iter_mut() {
            let n = *start;
            *start = next;
            next += n;
        }
        self.by_segment.truncate(keys.len());
        for (&g, &hash) in self.remixes.iter().zip(keys) {
            if let Some(at) = self.segment_starts.get_mut(slots.first_segment(g)) {
                if let Some(entry) = self.by_segment.get_mut(*at) {
                    *entry = (g, hash);
                }
                *at += 1;
            }
        }
    }

    /// Peels `slot` if it still holds exactly one key. Of the slots this
    /// frees, only those at or before `frontier` (the scan's position) are
    /// queued: the scan reaches the others itself, so the work stays within
    /// two segments of the scan and the slot arrays are walked once, in order.
    #[inline]
    fn peel_slot(&mut self, slot: usize, slots: Slots, seed: u64, frontier: usize) {
        if self.counts.get(slot) != Some(&1) {
            return;
        }
        let Some(&hash) = self.xors.get(slot) else {
            return;
        };
        let g = remix(hash, seed);
        self.order.push((hash, g, slot));
        for p in slots.positions(g) {
            if let (Some(count), Some(xor)) = (self.counts.get_mut(p), self.xors.get_mut(p)) {
                *count = count.saturating_sub(1);
                *xor ^= hash;
                if *count == 1 && p <= frontier {
                    self.pending.push(p);
                }
            }
        }
    }

    /// Writes the fingerprints of the peeled keys into `cells`, all zero on entry.
    fn assign<C: Cell>(&self, cells: &mut [u8], slots: Slots) {
        for &(hash, g, slot) in self.order.iter().rev() {
            let mut value = C::of_hash(hash);
            // The key's own slot is still zero, so XORing all three is the
            // XOR of the other two.
            for p in slots.positions(g) {
                if let Some(other) = C::read(cells, p) {
                    value = value ^ other;
                }
            }
            C::write(cells, slot, value);
        }
    }
}

/// Fills `cells` (the zeroed slot bytes of `geometry` at `bits`) so that
/// every hash of `hashes` is held, trying seeds `first_seed`, `first_seed +
/// step`, … up to `attempts` of them. `InvalidArgument` when no seed peels
/// (the caller falls back to a Bloom filter) or memory is refused.
pub(crate) fn construct(
    hashes: &[u64],
    geometry: Geometry,
    bits: FingerprintBits,
    cells: &mut [u8],
    first_seed: u64,
    attempts: u32,
) -> Result<Built> {
    let slot_count = geometry
        .slots_u32()
        .ok_or_else(|| Error::invalid("binary fuse geometry too large"))?;
    if u64::try_from(hashes.len()).map_or(true, |n| n > u64::from(slot_count)) {
        return Err(Error::invalid(format!(
            "{} keys cannot fit {slot_count} binary fuse slots",
            hashes.len()
        )));
    }
    let slots = geometry.slot_map();
    let mut keys = Cow::Borrowed(hashes);
    let mut deduplicated = false;
    let mut peeling = Peeling::new(geometry, slot_count, hashes.len())?;
    let mut seed = first_seed;
    for _ in 0..attempts {
        if peeling.peel(&keys, slots, seed) {
            match bits {
                FingerprintBits::Eight => peeling.assign::<Cell8>(cells, slots),
                FingerprintBits::Sixteen => peeling.assign::<Cell16>(cells, slots),
            }
            return Ok(Built {
                seed,
                keys: keys.len() as u64,
            });
        }
        if !deduplicated {
            deduplicated = true;
            let mut distinct = Vec::new();
            distinct
                .try_reserve_exact(keys.len())
                .map_err(|_| Error::invalid("cannot allocate the binary fuse key list"))?;
            distinct.extend_from_slice(&keys);
            distinct.sort_unstable();
            distinct.dedup();
            if distinct.len() < keys.len() {
                // Equal hashes were the obstacle: retry the same seed.
                keys = Cow::Owned(distinct);
                continue;
            }
        }
        seed = seed.wrapping_add(SEED_STEP);
    }
    Err(Error::invalid(format!(
        "binary fuse construction failed for {} keys after {attempts} seeds",
        keys.len()
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geometry_follows_the_size_rule() {
        // bits per key of 8-bit fingerprints = 8 · slots / keys.
        for (keys, lo, hi) in [
            (10_000usize, 9.9, 10.6),
            (100_000, 9.3, 9.6),
            (1_000_000, 8.99, 9.05),
            (10_000_000, 8.99, 9.03),
        ] {
            let g = Geometry::for_keys(keys).unwrap();
            assert!(g.segment_length.is_power_of_two());
            let bpk = 8.0 * g.slots() as f64 / keys as f64;
            assert!(
                (lo..=hi).contains(&bpk),
                "{keys} keys: {bpk} bits/key, {g:?}"
            );
        }
        assert_eq!(Geometry::for_keys(1_000_000).unwrap().segment_length, 8192);
        assert_eq!(
            Geometry::for_keys(usize::MAX >> 8).unwrap_err().to_string(),
            format!(
                "invalid argument: a binary fuse filter for {} keys is too large",
                usize::MAX >> 8
            )
        );
        for keys in [0, 1, 2, 3] {
            let g = Geometry::for_keys(keys).unwrap();
            assert!(g.segment_count >= 1 && g.slots() >= 3 * u64::from(g.segment_length));
        }
        assert_eq!(
            Geometry::for_keys(1 << 31).unwrap().segment_length,
            MAX_SEGMENT_LENGTH
        );
    }

    #[test]
    fn positions_fall_in_three_consecutive_segments() {
        let g = Geometry {
            segment_length: 64,
            segment_count: 10,
        };
        let slots = g.slot_map();
        let mut state = 1u64;
        for _ in 0..10_000 {
            state = remix(state, 9);
            let [a, b, c] = slots.positions(state);
            assert!((c as u64) < g.slots());
            assert_eq!(b / 64, a / 64 + 1);
            assert_eq!(c / 64, a / 64 + 2);
        }
        assert_eq!(slots.positions(0), [0, 64, 128]);
        assert_eq!(slots.positions(u64::MAX)[0], 639);
    }

    #[test]
    fn cells_read_what_they_write() {
        let mut bytes = [0u8; 6];
        Cell16::write(&mut bytes, 1, 0xbeef);
        assert_eq!(bytes, [0, 0, 0xef, 0xbe, 0, 0]);
        assert_eq!(Cell16::read(&bytes, 1), Some(0xbeef));
        assert_eq!(Cell16::read(&bytes, 3), None);
        Cell8::write(&mut bytes, 5, 7);
        assert_eq!(Cell8::read(&bytes, 5), Some(7));
        assert_eq!(Cell8::read(&bytes, 6), None);
        assert_eq!(Cell8::of_hash(0x1234), 0x34);
        assert_eq!(Cell16::of_hash(0xab_1234), 0x1234);
    }

    #[test]
    fn widths_and_rates() {
        assert_eq!(
            FingerprintBits::for_rate(0.01),
            Some(FingerprintBits::Eight)
        );
        assert_eq!(
            FingerprintBits::for_rate(0.001),
            Some(FingerprintBits::Sixteen)
        );
        assert_eq!(FingerprintBits::for_rate(1e-6), None);
        assert_eq!(
            FingerprintBits::from_bits(16),
            Some(FingerprintBits::Sixteen)
        );
        assert_eq!(FingerprintBits::from_bits(12), None);
        assert_eq!(FingerprintBits::Sixteen.bytes(), 2);
    }
}
