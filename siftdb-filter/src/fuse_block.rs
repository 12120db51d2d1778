//! The binary fuse filter block: the checksummed byte encoding of a
//! [binary fuse filter](crate::fuse), and [`FuseView`], which
//! queries an encoded block in place (inside a memory-mapped table) without
//! copying it. [`FuseFilter`] is a view that owns its block: what
//! [`FuseFilter::build`] returns.
//!
//! Owns: the byte layout documented in `docs/format.md` ("Binary fuse filter
//! block").
//! Must never: trust a byte before the checksum and the geometry are
//! checked, panic, index out of bounds, or allocate from a length it read.
//!
//! ```text
//! offset  size        field
//! 0       4           magic "SFF1"
//! 4       1           format version (1)
//! 5       1           fingerprint bits w (8 or 16)
//! 6       1           hash id (1 = xxh3-64)
//! 7       1           arity (3)
//! 8       4           segment length L (u32 LE, a power of two, 1 ..= 2^18)
//! 12      4           segment count S (u32 LE, ≥ 1)
//! 16      8           seed (u64 LE)
//! 24      8           keys n (u64 LE, ≤ (S+2)·L)
//! 32      (S+2)·L·w/8 fingerprint slots, slot 0 first, each little-endian
//! end−4   4           crc32 (IEEE) of every byte before it
//! ```
//!
//! ```
//! use siftdb_filter::{hash_key, FingerprintBits, FuseFilter, FuseView};
//! let hashes: Vec<u64> = (0..1000u32).map(|i| hash_key(&i.to_le_bytes())).collect();
//! let filter = FuseFilter::build(&hashes, FingerprintBits::Eight)?;
//! let view = FuseView::parse(filter.as_bytes())?;
//! assert!(view.contains(&7u32.to_le_bytes()));
//! # Ok::<(), siftdb_filter::Error>(())
//! ```

use crate::batch::{self, Lookup};
use crate::bloom::allocate_filled;
use crate::codec::{crc32_of, split_checked, ByteReader};
use crate::error::{truncated, Error, Result};
use crate::fuse::{
    construct, Cell, Cell16, Cell8, FingerprintBits, Geometry, Probe, Slots, ARITY, MAX_ATTEMPTS,
    MAX_SEGMENT_LENGTH,
};
use crate::line::{hash_key, prefetch_line};

/// The four bytes every binary fuse filter block starts with.
pub const MAGIC: [u8; 4] = *b"SFF1";
/// The one format version this code reads and writes.
pub const FORMAT_VERSION: u8 = 1;
/// Key hashes are xxh3-64 of the key, seed 0 ([`crate::hash_key`]).
pub const HASH_XXH3_64: u8 = 1;
/// Bytes before the first slot.
pub const HEADER_LEN: usize = 32;
/// Bytes of the trailing checksum.
pub const CHECKSUM_LEN: usize = 4;

const WHAT: &str = "binary fuse filter block";

/// The checked header fields of a binary fuse filter block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FuseHeader {
    /// Fingerprint width.
    pub bits: FingerprintBits,
    /// Segment length and count.
    pub geometry: Geometry,
    /// The seed key hashes are remixed with.
    pub seed: u64,
    /// Distinct keys the filter was built from.
    pub keys: u64,
}

impl FuseHeader {
    /// Bytes of fingerprint slots.
    pub fn slot_bytes(&self) -> u64 {
        self.geometry.slots() * self.bits.bytes() as u64
    }

    /// Bits of fingerprint slots per key (the header and checksum left out;
    /// infinite for an empty filter).
    pub fn bits_per_key(&self) -> f64 {
        8.0 * self.slot_bytes() as f64 / self.keys as f64
    }
}

/// Size of a block with this geometry and width, or `None` when it does
/// not fit in memory.
pub fn encoded_len(geometry: Geometry, bits: FingerprintBits) -> Option<usize> {
    usize::try_from(geometry.slots())
        .ok()?
        .checked_mul(bits.bytes())?
        .checked_add(HEADER_LEN + CHECKSUM_LEN)
}

/// A binary fuse filter block queried in place. `B` is the storage: `&[u8]`,
/// `bytes::Bytes` sharing a memory map, or `Vec<u8>` ([`FuseFilter`]).
#[derive(Debug, Clone)]
pub struct FuseView<B: AsRef<[u8]>> {
    block: B,
    header: FuseHeader,
    /// The header's geometry in query form.
    slots: Slots,
}

/// A binary fuse filter that owns its encoded block.
pub type FuseFilter = FuseView<Vec<u8>>;

fn corrupt(detail: impl std::fmt::Display) -> Error {
    Error::corruption(WHAT, detail)
}

/// Checks a whole block: magic and version, then the checksum over every
/// byte before it, then each field and the length the fields imply.
fn parse_header(bytes: &[u8]) -> Result<FuseHeader> {
    if bytes.len() < HEADER_LEN + CHECKSUM_LEN {
        return Err(truncated(WHAT, HEADER_LEN + CHECKSUM_LEN - bytes.len()));
    }
    let mut r = ByteReader::new(bytes, WHAT);
    r.magic_and_version(&MAGIC, FORMAT_VERSION)?;
    let bits = r.u8()?;
    let hash = r.u8()?;
    let arity = r.u8()?;
    let segment_length = r.u32()?;
    let segment_count = r.u32()?;
    let seed = r.u64()?;
    let keys = r.u64()?;

    // The checksum before any field is believed: it covers every byte but
    // its own four, whatever length the fields claim.
    split_checked(bytes, WHAT)?;
    let Some(bits) = FingerprintBits::from_bits(bits) else {
        return Err(corrupt(format!("unknown fingerprint width {bits}")));
    };
    if hash != HASH_XXH3_64 {
        return Err(corrupt(format!("unknown hash id {hash}")));
    }
    if arity != ARITY {
        return Err(corrupt(format!("unsupported arity {arity}")));
    }
    if !segment_length.is_power_of_two() || segment_length > MAX_SEGMENT_LENGTH {
        return Err(corrupt(format!(
            "impossible segment length {segment_length}"
        )));
    }
    if segment_count == 0 {
        return Err(corrupt("zero segments"));
    }
    let geometry = Geometry {
        segment_length,
        segment_count,
    };
    let want = encoded_len(geometry, bits).ok_or_else(|| {
        corrupt(format!(
            "impossible geometry: {segment_count} segments of {segment_length} slots"
        ))
    })?;
    if bytes.len() != want {
        return Err(corrupt(format!(
            "length {} does not match {segment_count} + 2 segments of {segment_length} \
             {}-bit slots ({want} bytes)",
            bytes.len(),
            bits.bits()
        )));
    }
    if keys > geometry.slots() {
        return Err(corrupt(format!(
            "{keys} keys cannot fit {} slots",
            geometry.slots()
        )));
    }
    Ok(FuseHeader {
        bits,
        geometry,
        seed,
        keys,
    })
}

impl FuseFilter {
    /// A filter holding every hash of `hashes` (key hashes from
    /// [`crate::hash_key`]; duplicates are fine), with fingerprints
    /// of `bits`. `InvalidArgument` when construction fails for every seed
    /// tried (vanishingly rare; build a Bloom filter instead) or the filter
    /// would not fit in memory.
    pub fn build(hashes: &[u64], bits: FingerprintBits) -> Result<FuseFilter> {
        FuseFilter::build_seeded(hashes, bits, 0, MAX_ATTEMPTS)
    }

    /// [`FuseFilter::build`] trying `attempts` seeds from `first_seed` on.
    pub fn build_seeded(
        hashes: &[u64],
        bits: FingerprintBits,
        first_seed: u64,
        attempts: u32,
    ) -> Result<FuseFilter> {
        let geometry = Geometry::for_keys(hashes.len())?;
        let len = encoded_len(geometry, bits)
            .ok_or_else(|| Error::invalid("binary fuse filter too large"))?;
        let mut block = allocate_filled(len as u64, 0u8)?;
        let too_short = || Error::invalid("binary fuse filter block shorter than its header");
        let (header, rest) = block
            .split_first_chunk_mut::<HEADER_LEN>()
            .ok_or_else(too_short)?;
        let (cells, _) = rest
            .split_last_chunk_mut::<CHECKSUM_LEN>()
            .ok_or_else(too_short)?;
        let built = construct(hashes, geometry, bits, cells, first_seed, attempts)?;
        let header_fields = FuseHeader {
            bits,
            geometry,
            seed: built.seed,
            keys: built.keys,
        };
        *header = encode_header(&header_fields);
        let (body, crc) = block
            .split_last_chunk_mut::<CHECKSUM_LEN>()
            .ok_or_else(too_short)?;
        *crc = crc32_of(&[body]).to_le_bytes();
        Ok(FuseView {
            block,
            header: header_fields,
            slots: geometry.slot_map(),
        })
    }

    /// The encoded block, given up.
    pub fn into_bytes(self) -> Vec<u8> {
        self.block
    }
}

fn encode_header(h: &FuseHeader) -> [u8; HEADER_LEN] {
    let mut out = [0u8; HEADER_LEN];
    let fields = MAGIC
        .into_iter()
        .chain([FORMAT_VERSION, h.bits.bits(), HASH_XXH3_64, ARITY])
        .chain(h.geometry.segment_length.to_le_bytes())
        .chain(h.geometry.segment_count.to_le_bytes())
        .chain(h.seed.to_le_bytes())
        .chain(h.keys.to_le_bytes());
    for (slot, byte) in out.iter_mut().zip(fields) {
        *slot = byte;
    }
    out
}

impl<B: AsRef<[u8]>> FuseView<B> {
    /// Checks a whole block — magic, version, checksum, width, hash, arity,
    /// geometry, length, key count — and returns a view that queries it in
    /// place.
    pub fn parse(block: B) -> Result<FuseView<B>> {
        let header = parse_header(block.as_ref())?;
        Ok(FuseView {
            block,
            header,
            slots: header.geometry.slot_map(),
        })
    }

    /// The checked header.
    pub fn header(&self) -> FuseHeader {
        self.header
    }

    /// The encoded block.
    pub fn as_bytes(&self) -> &[u8] {
        self.block.as_ref()
    }

    /// The fingerprint slots.
    #[inline]
    fn cells(&self) -> &[u8] {
        let bytes = self.block.as_ref();
        let end = bytes.len().saturating_sub(CHECKSUM_LEN);
        bytes.get(HEADER_LEN..end).unwrap_or_default()
    }

    /// False when no key with this hash was in the set the filter was built
    /// from ([`crate::hash_key`] of the key).
    #[inline]
    pub fn contains_hash(&self, hash: u64) -> bool {
        let probe = Probe::new(hash, self.slots, self.header.seed);
        match self.header.bits {
            FingerprintBits::Eight => probe.holds::<Cell8>(self.cells()),
            FingerprintBits::Sixteen => probe.holds::<Cell16>(self.cells()),
        }
    }

    /// False when `key` was certainly not in the set.
    #[inline]
    pub fn contains(&self, key: &[u8]) -> bool {
        self.contains_hash(hash_key(key))
    }

    /// [`FuseView::contains_hash`] for each hash, in order, with the memory
    /// loads of the next few overlapped (see [`crate::batch`]).
    pub fn contains_hashes<'a>(
        &'a self,
        hashes: &'a [u64],
    ) -> impl ExactSizeIterator<Item = bool> + 'a {
        batch::by_hash(self, hashes)
    }

    /// [`FuseView::contains`] for each key, in order.
    pub fn contains_keys<'a, K: AsRef<[u8]>>(
        &'a self,
        keys: &'a [K],
    ) -> impl ExactSizeIterator<Item = bool> + 'a {
        batch::by_key(self, keys)
    }

    /// Bits of fingerprint slots per key (see [`FuseHeader::bits_per_key`]).
    pub fn bits_per_key(&self) -> f64 {
        self.header.bits_per_key()
    }

    /// The false-positive rate for an absent key: 2⁻ʷ.
    pub fn expected_fp_rate(&self) -> f64 {
        self.header.bits.fp_rate()
    }

    fn answer_all<C: Cell>(&self, probes: &[Probe], found: &mut [bool]) {
        let cells = self.cells();
        for (answer, probe) in found.iter_mut().zip(probes) {
            *answer = probe.holds::<C>(cells);
        }
    }
}

impl<B: AsRef<[u8]>> Lookup for FuseView<B> {
    type Probe = Probe;

    #[inline]
    fn hash_of(&self, key: &[u8]) -> u64 {
        hash_key(key)
    }

    #[inline]
    fn prepare(&self, hash: u64) -> Probe {
        let probe = Probe::new(hash, self.slots, self.header.seed);
        let cells = self.cells().as_ptr();
        let width = self.header.bits.bytes();
        for p in probe.slots {
            // Only prefetched, never read through.
            prefetch_line(cells.wrapping_add(p.wrapping_mul(width)));
        }
        probe
    }

    #[inline]
    fn answer_group(&self, probes: &[Probe], found: &mut [bool]) {
        match self.header.bits {
            FingerprintBits::Eight => self.answer_all::<Cell8>(probes, found),
            FingerprintBits::Sixteen => self.answer_all::<Cell16>(probes, found),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hashes(n: u32, salt: u32) -> Vec<u64> {
        (0..n)
            .map(|i| hash_key(&[i.to_le_bytes(), salt.to_le_bytes()].concat()))
            .collect()
    }

    fn small_block(bits: FingerprintBits) -> Vec<u8> {
        FuseFilter::build(&hashes(100, 0), bits)
            .unwrap()
            .into_bytes()
    }

    fn rechecksummed(mut bytes: Vec<u8>) -> Vec<u8> {
        let n = bytes.len() - CHECKSUM_LEN;
        let crc = crc32_of(&[&bytes[..n]]);
        bytes[n..].copy_from_slice(&crc.to_le_bytes());
        bytes
    }

    #[test]
    fn built_filters_hold_every_hash_and_parse_back() {
        for bits in [FingerprintBits::Eight, FingerprintBits::Sixteen] {
            for n in [0u32, 1, 2, 3, 10, 100, 1000, 20_000] {
                let keys = hashes(n, 1);
                let filter = FuseFilter::build(&keys, bits).unwrap();
                assert!(
                    keys.iter().all(|&h| filter.contains_hash(h)),
                    "{bits:?} {n}"
                );
                let view = FuseView::parse(filter.as_bytes()).unwrap();
                assert_eq!(view.header(), filter.header());
                assert_eq!(view.header().keys, u64::from(n));
                let others = hashes(2000, 2);
                for &h in keys.iter().chain(&others) {
                    assert_eq!(view.contains_hash(h), filter.contains_hash(h));
                }
                let batched: Vec<bool> = view.contains_hashes(&others).collect();
                let single: Vec<bool> = others.iter().map(|&h| view.contains_hash(h)).collect();
                assert_eq!(batched, single);
                assert!(view.contains_hashes(&keys).all(|x| x));
            }
        }
    }

    #[test]
    fn duplicates_are_held_once() {
        let mut keys = hashes(5000, 3);
        keys.extend_from_slice(&keys.clone()[..2500]);
        keys.push(keys[0]);
        let filter = FuseFilter::build(&keys, FingerprintBits::Eight).unwrap();
        assert_eq!(filter.header().keys, 5000);
        assert!(keys.iter().all(|&h| filter.contains_hash(h)));
        // All equal: one key.
        let same = vec![42u64; 1000];
        let filter = FuseFilter::build(&same, FingerprintBits::Sixteen).unwrap();
        assert_eq!(filter.header().keys, 1);
        assert!(filter.contains_hash(42));
    }

    #[test]
    fn a_failed_construction_is_an_error() {
        // One seed, and a set whose remix under that seed cannot peel: find
        // one by trying small random sets (tiny filters stall often).
        let mut failures = 0;
        for salt in 0..2000 {
            let keys = hashes(40, salt);
            match FuseFilter::build_seeded(&keys, FingerprintBits::Eight, 0, 1) {
                Ok(f) => assert!(keys.iter().all(|&h| f.contains_hash(h))),
                Err(e) => {
                    failures += 1;
                    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
                    assert!(e.to_string().contains("after 1 seeds"), "{e}");
                    // More seeds succeed.
                    let f = FuseFilter::build(&keys, FingerprintBits::Eight).unwrap();
                    assert_ne!(f.header().seed, 0);
                    assert!(keys.iter().all(|&h| f.contains_hash(h)));
                }
            }
        }
        assert!(failures > 0, "no single-seed failure found");
        assert!(FuseFilter::build_seeded(&hashes(10, 0), FingerprintBits::Eight, 0, 0).is_err());
    }

    #[test]
    fn encodings_are_pinned() {
        // crc32 of small blocks: any change to the header, the geometry rule,
        // the slot map, the remix, the fingerprint or the construction order
        // shows here (a changed order still builds a valid filter, but not
        // the same bytes).
        for (bits, head, crc) in [
            (
                FingerprintBits::Eight,
                b"SFF1\x01\x08\x01\x03",
                0x1e90_9e53u32,
            ),
            (
                FingerprintBits::Sixteen,
                b"SFF1\x01\x10\x01\x03",
                0x89fb_0321,
            ),
        ] {
            let block = small_block(bits);
            assert_eq!(&block[..8], head);
            let view = FuseView::parse(&block[..]).unwrap();
            let h = view.header();
            assert_eq!(block.len(), encoded_len(h.geometry, h.bits).unwrap());
            let tail = u32::from_le_bytes(block[block.len() - 4..].try_into().unwrap());
            assert_eq!(tail, crc, "{h:?}: {tail:#010x}");
        }
    }

    #[test]
    fn every_single_byte_change_is_detected() {
        for bits in [FingerprintBits::Eight, FingerprintBits::Sixteen] {
            let bytes = small_block(bits);
            for i in 0..bytes.len() {
                for delta in [1u8, 0x80, 0xff] {
                    let mut bad = bytes.clone();
                    bad[i] ^= delta;
                    let err = FuseView::parse(&bad[..]).unwrap_err();
                    assert!(err.is_corruption(), "byte {i}: {err}");
                }
            }
        }
    }

    #[test]
    fn every_truncation_and_extension_is_detected() {
        let bytes = small_block(FingerprintBits::Sixteen);
        for len in 0..bytes.len() {
            assert!(FuseView::parse(&bytes[..len]).unwrap_err().is_corruption());
        }
        let mut long = bytes.clone();
        long.extend_from_slice(&[0; 2]);
        let err = FuseView::parse(rechecksummed(long))
            .unwrap_err()
            .to_string();
        assert!(err.contains("length"), "{err}");
    }

    #[test]
    fn well_checksummed_nonsense_is_refused_with_a_reason() {
        let bytes = small_block(FingerprintBits::Eight);
        let set = |at: usize, value: &[u8]| {
            let mut out = bytes.clone();
            out[at..at + value.len()].copy_from_slice(value);
            rechecksummed(out)
        };
        let cases: [(usize, &[u8], &str); 11] = [
            (0, b"X", "magic"),
            (4, &[2], "version"),
            (5, &[12], "width"),
            (5, &[16], "length"),
            (6, &[2], "hash"),
            (7, &[4], "arity"),
            (8, &[3, 0, 0, 0], "segment length"),
            (8, &[0, 0, 8, 0], "segment length"),
            (12, &[0, 0, 0, 0], "zero segments"),
            (12, &[0xff, 0xff, 0xff, 0xff], "length"),
            (24, &[0xff; 8], "keys cannot fit"),
        ];
        for (at, value, reason) in cases {
            let err = FuseView::parse(set(at, value)).unwrap_err().to_string();
            assert!(err.contains(reason), "offset {at}: {err}");
        }
        // The seed is any value: a different seed parses (and answers differently).
        assert!(FuseView::parse(set(16, &[9])).is_ok());
    }
}
