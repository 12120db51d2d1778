//! A filter block of any kind this build reads: [`AnyFilterView`] parses a
//! block by its magic — blocked Bloom (`SFB1`) or binary fuse (`SFF1`) — and
//! answers queries, size and rate questions the same way for both, so a
//! table can hold either.
//!
//! Owns: the choice of parser by magic, [`FilterKind`], and
//! [`FilterParseError`], which tells a block of a kind this build does not
//! know (written by a newer version: the caller fails open, reads the data,
//! and reports it) from a damaged block of a known kind.
//! Must never: answer for a block its own parser refused, or call an unknown
//! kind corrupt (or a damaged known kind unknown).
//!
//! ```
//! use siftdb_filter::{hash_key, AnyFilterView, FilterKind, FingerprintBits, FuseFilter};
//! let hashes: Vec<u64> = (0..100u32).map(|i| hash_key(&i.to_le_bytes())).collect();
//! let block = FuseFilter::build(&hashes, FingerprintBits::Eight)?.into_bytes();
//! let view = AnyFilterView::parse(&block[..])?;
//! assert_eq!(view.kind(), FilterKind::BinaryFuse8);
//! assert!(view.contains_hashes(&hashes).all(|found| found));
//! # Ok::<(), siftdb_filter::Error>(())
//! ```

use crate::batch::Lookup;
use crate::error::Error;
use crate::fuse::FingerprintBits;
use crate::theory::{blocked_fp_rate, LINE_BITS};
use crate::{block, fuse_block, FilterView, FuseView};

/// The kinds of filter block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FilterKind {
    /// A cache-line-blocked Bloom filter (`SFB1`).
    BlockedBloom,
    /// A binary fuse filter with 8-bit fingerprints (`SFF1`).
    BinaryFuse8,
    /// A binary fuse filter with 16-bit fingerprints (`SFF1`).
    BinaryFuse16,
}

impl FilterKind {
    /// A short name for reports: `bloom`, `fuse8`, `fuse16`.
    pub fn name(self) -> &'static str {
        match self {
            FilterKind::BlockedBloom => "bloom",
            FilterKind::BinaryFuse8 => "fuse8",
            FilterKind::BinaryFuse16 => "fuse16",
        }
    }

    /// Whether a block starting with these bytes names a kind this build
    /// reads (only the magic is looked at).
    pub fn is_known_magic(block: &[u8]) -> bool {
        block.starts_with(&block::MAGIC) || block.starts_with(&fuse_block::MAGIC)
    }
}

impl From<FingerprintBits> for FilterKind {
    /// The binary fuse kind of this fingerprint width.
    fn from(bits: FingerprintBits) -> FilterKind {
        match bits {
            FingerprintBits::Eight => FilterKind::BinaryFuse8,
            FingerprintBits::Sixteen => FilterKind::BinaryFuse16,
        }
    }
}

impl std::fmt::Display for FilterKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a filter block was not accepted.
#[derive(Debug, thiserror::Error)]
pub enum FilterParseError {
    /// The block's first four bytes name no kind this build reads (a block
    /// written by a newer version, or damage the table's own checksum did
    /// not catch). The caller fails open: every key may be present.
    #[error("unknown filter kind: magic {magic:02x?}")]
    UnknownKind {
        /// The block's first four bytes (zero-padded when shorter).
        magic: [u8; 4],
    },
    /// A kind this build reads, whose bytes do not check out
    /// (`Error::Corruption` from its parser).
    #[error(transparent)]
    Corrupt(Error),
}

impl From<FilterParseError> for Error {
    fn from(e: FilterParseError) -> Error {
        match e {
            FilterParseError::UnknownKind { .. } => Error::corruption("filter block", e),
            FilterParseError::Corrupt(inner) => inner,
        }
    }
}

/// A verified filter block of either kind, queried in place.
#[derive(Debug, Clone)]
pub enum AnyFilterView<B: AsRef<[u8]>> {
    /// A blocked Bloom filter block.
    Bloom(FilterView<B>),
    /// A binary fuse filter block.
    Fuse(FuseView<B>),
}

impl<B: AsRef<[u8]>> AnyFilterView<B> {
    /// Parses `block` with the parser its magic names (each checks the whole
    /// block, checksum included).
    pub fn parse(block: B) -> Result<AnyFilterView<B>, FilterParseError> {
        let bytes = block.as_ref();
        if bytes.starts_with(&block::MAGIC) {
            FilterView::parse(block)
                .map(AnyFilterView::Bloom)
                .map_err(FilterParseError::Corrupt)
        } else if bytes.starts_with(&fuse_block::MAGIC) {
            FuseView::parse(block)
                .map(AnyFilterView::Fuse)
                .map_err(FilterParseError::Corrupt)
        } else {
            let mut magic = [0u8; 4];
            for (slot, byte) in magic.iter_mut().zip(bytes) {
                *slot = *byte;
            }
            Err(FilterParseError::UnknownKind { magic })
        }
    }

    /// Which kind of filter this is.
    pub fn kind(&self) -> FilterKind {
        match self {
            AnyFilterView::Bloom(_) => FilterKind::BlockedBloom,
            AnyFilterView::Fuse(f) => f.header().bits.into(),
        }
    }

    /// False when no key with this hash ([`crate::hash_key`]) was
    /// added. A Bloom block with a non-zero seed expects hashes of its own
    /// seed; tables use seed 0.
    #[inline]
    pub fn contains_hash(&self, hash: u64) -> bool {
        match self {
            AnyFilterView::Bloom(f) => f.contains_hash(hash),
            AnyFilterView::Fuse(f) => f.contains_hash(hash),
        }
    }

    /// Requests the memory [`AnyFilterView::contains_hash`] will read for
    /// `hash` (a hint only: it reads nothing and changes no answer), so a
    /// lookup that must ask several filters has all their loads in flight
    /// at once instead of one after another.
    #[inline]
    pub fn prefetch_hash(&self, hash: u64) {
        match self {
            AnyFilterView::Bloom(f) => {
                Lookup::prepare(f, hash);
            }
            AnyFilterView::Fuse(f) => {
                Lookup::prepare(f, hash);
            }
        }
    }

    /// False when `key` was certainly never added.
    #[inline]
    pub fn contains(&self, key: &[u8]) -> bool {
        match self {
            AnyFilterView::Bloom(f) => f.contains(key),
            AnyFilterView::Fuse(f) => f.contains(key),
        }
    }

    /// [`AnyFilterView::contains_hash`] for each hash, in order, loads
    /// overlapped as each kind's own batched query does.
    pub fn contains_hashes<'a>(
        &'a self,
        hashes: &'a [u64],
    ) -> impl ExactSizeIterator<Item = bool> + 'a {
        match self {
            AnyFilterView::Bloom(f) => Answers::Bloom(f.contains_hashes(hashes)),
            AnyFilterView::Fuse(f) => Answers::Fuse(f.contains_hashes(hashes)),
        }
    }

    /// Bytes of the whole encoded block (header and checksum included): the
    /// memory the filter costs when held.
    pub fn block_bytes(&self) -> usize {
        self.as_bytes().len()
    }

    /// The encoded block.
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            AnyFilterView::Bloom(f) => f.as_bytes(),
            AnyFilterView::Fuse(f) => f.as_bytes(),
        }
    }

    /// Bits of the filter proper (Bloom lines or fuse fingerprint slots;
    /// the header and checksum left out).
    pub fn payload_bits(&self) -> u64 {
        match self {
            AnyFilterView::Bloom(f) => f.header().lines * u64::from(LINE_BITS),
            AnyFilterView::Fuse(f) => f.header().slot_bytes() * 8,
        }
    }

    /// The distinct keys the filter was built from, when the block records
    /// it (fuse blocks do; Bloom blocks do not — a table's properties do).
    pub fn recorded_keys(&self) -> Option<u64> {
        match self {
            AnyFilterView::Bloom(_) => None,
            AnyFilterView::Fuse(f) => Some(f.header().keys),
        }
    }

    /// [`AnyFilterView::payload_bits`] per key, for a filter over `keys`
    /// distinct keys.
    pub fn bits_per_key(&self, keys: u64) -> f64 {
        self.payload_bits() as f64 / keys as f64
    }

    /// The expected false-positive rate for an absent key, the filter
    /// holding `keys` distinct keys: the blocked-Bloom theory at its bits per
    /// key and probe count, or 2⁻ʷ for a fuse filter (whatever `keys`).
    pub fn expected_fp_rate(&self, keys: u64) -> f64 {
        match self {
            AnyFilterView::Bloom(_) if keys == 0 => 0.0,
            AnyFilterView::Bloom(f) => blocked_fp_rate(self.bits_per_key(keys), f.header().probes),
            AnyFilterView::Fuse(f) => f.expected_fp_rate(),
        }
    }
}

/// The answers of either kind's batched query (each kind's own pipeline).
enum Answers<A, F> {
    Bloom(A),
    Fuse(F),
}

impl<A: Iterator<Item = bool>, F: Iterator<Item = bool>> Iterator for Answers<A, F> {
    type Item = bool;

    #[inline]
    fn next(&mut self) -> Option<bool> {
        match self {
            Answers::Bloom(a) => a.next(),
            Answers::Fuse(f) => f.next(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            Answers::Bloom(a) => a.size_hint(),
            Answers::Fuse(f) => f.size_hint(),
        }
    }
}

impl<A: ExactSizeIterator<Item = bool>, F: ExactSizeIterator<Item = bool>> ExactSizeIterator
    for Answers<A, F>
{
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{hash_key, BloomFilter, FuseFilter};

    fn hashes(n: u32) -> Vec<u64> {
        (0..n).map(|i| hash_key(&i.to_le_bytes())).collect()
    }

    #[test]
    fn both_kinds_parse_and_answer_as_their_own_view() {
        let keys = hashes(3000);
        let mut bloom = BloomFilter::with_bits_per_key(keys.len(), 12.0).unwrap();
        keys.iter().for_each(|&h| bloom.insert_hash(h));
        let blocks = [
            (bloom.encode(), FilterKind::BlockedBloom),
            (
                FuseFilter::build(&keys, FingerprintBits::Eight)
                    .unwrap()
                    .into_bytes(),
                FilterKind::BinaryFuse8,
            ),
            (
                FuseFilter::build(&keys, FingerprintBits::Sixteen)
                    .unwrap()
                    .into_bytes(),
                FilterKind::BinaryFuse16,
            ),
        ];
        let others: Vec<u64> = (0..5000u32)
            .map(|i| hash_key(&((i + 1) << 20).to_le_bytes()))
            .collect();
        for (block, kind) in blocks {
            let view = AnyFilterView::parse(&block[..]).unwrap();
            assert_eq!(view.kind(), kind);
            assert!(FilterKind::is_known_magic(&block));
            assert_eq!(view.block_bytes(), block.len());
            assert!(view.contains_hashes(&keys).all(|x| x));
            let single: Vec<bool> = others.iter().map(|&h| view.contains_hash(h)).collect();
            assert!(view.contains_hashes(&others).eq(single.iter().copied()));
            let fp = single.iter().filter(|&&x| x).count() as f64 / others.len() as f64;
            let expected = view.expected_fp_rate(keys.len() as u64);
            assert!(fp < 3.0 * expected + 0.002, "{kind}: {fp} vs {expected}");
            let bpk = view.bits_per_key(keys.len() as u64);
            match kind {
                FilterKind::BlockedBloom => {
                    assert!((12.0..12.2).contains(&bpk), "{bpk}");
                    assert_eq!(view.recorded_keys(), None);
                    assert!((expected - 0.0041).abs() < 0.0003, "{expected}");
                }
                FilterKind::BinaryFuse8 => {
                    assert!((9.0..11.0).contains(&bpk), "{bpk}");
                    assert_eq!(view.recorded_keys(), Some(3000));
                    assert_eq!(expected, 1.0 / 256.0);
                }
                FilterKind::BinaryFuse16 => assert_eq!(expected, 1.0 / 65536.0),
            }
            assert!(view.contains(&7u32.to_le_bytes()));
        }
    }

    #[test]
    fn unknown_kinds_are_told_from_damaged_known_kinds() {
        let block = FuseFilter::build(&hashes(50), FingerprintBits::Eight)
            .unwrap()
            .into_bytes();
        let mut other = block.clone();
        other[0] = b'Z';
        match AnyFilterView::parse(&other[..]) {
            Err(FilterParseError::UnknownKind { magic }) => assert_eq!(&magic, b"ZFF1"),
            x => panic!("{x:?}"),
        }
        assert!(!FilterKind::is_known_magic(&other));
        let mut damaged = block.clone();
        damaged[40] ^= 1;
        let err = AnyFilterView::parse(&damaged[..]).unwrap_err();
        assert!(matches!(err, FilterParseError::Corrupt(ref e) if e.is_corruption()));
        assert!(Error::from(err).is_corruption());
        match AnyFilterView::parse(&b"SF"[..]) {
            Err(FilterParseError::UnknownKind { magic }) => assert_eq!(magic, *b"SF\0\0"),
            x => panic!("{x:?}"),
        }
        assert!(matches!(
            AnyFilterView::parse(&b"SFB1"[..]),
            Err(FilterParseError::Corrupt(_))
        ));
        let unknown = Error::from(AnyFilterView::parse(&[0u8; 80][..]).unwrap_err());
        assert!(
            unknown.to_string().contains("unknown filter kind"),
            "{unknown}"
        );
    }
}
