//! The filter block: a self-describing, checksummed byte encoding of a
//! [`BloomFilter`], and [`FilterView`], which queries an encoded block in
//! place (inside a memory-mapped table) without copying it.
//!
//! Owns: the byte layout documented in `docs/format.md` ("Filter block").
//! Must never: trust a byte before the checksum and the geometry are
//! checked, panic, index out of bounds, or allocate more than the input's length.
//!
//! ```text
//! offset  size        field
//! 0       4           magic "SFB1"
//! 4       1           format version (1)
//! 5       1           layout id (4, the one layout: where probes fall in a line, see `probe.rs`)
//! 6       1           hash id (1 = xxh3-64)
//! 7       1           probes k (1..=32)
//! 8       4           line count L (u32 LE, ≥ 1)
//! 12      4           reserved, zero
//! 16      8           hash seed (u64 LE)
//! 24      40          reserved, zero
//! 64      64·L        lines
//! 64+64L  4           crc32 (IEEE) of bytes 0 .. 64+64L
//! ```

use crate::batch::{self, LineLookup};
use crate::bloom::{allocate_lines, BloomFilter, Line, LINE_BYTES};
use crate::codec::{crc32_of, ByteReader};
use crate::error::{truncated, Error, Result};
use crate::kernel::LineTest;
use crate::line::filter_hash;
use crate::probe::Layout;
use crate::theory::MAX_PROBES;

/// The four bytes every filter block starts with.
pub const MAGIC: [u8; 4] = *b"SFB1";
/// The one format version this code reads and writes.
pub const FORMAT_VERSION: u8 = 1;
/// xxh3, 64-bit.
pub const HASH_XXH3_64: u8 = 1;
/// Bytes before the first line; a multiple of 64 so lines stay cache-aligned
/// when the block itself starts cache-aligned.
pub const HEADER_LEN: usize = 64;
/// Bytes of the trailing checksum.
pub const CHECKSUM_LEN: usize = 4;

const WHAT: &str = "filter block";

impl BloomFilter {
    /// The filter as a filter block (see the module docs for the layout).
    #[expect(
        clippy::cast_possible_truncation,
        reason = "probes ≤ MAX_PROBES (32) and lines ≤ u32::MAX are checked when a filter is made"
    )]
    pub fn encode(&self) -> Vec<u8> {
        let lines = self.raw_lines();
        let mut out = Vec::with_capacity(encoded_len(lines.len()));
        out.extend_from_slice(&MAGIC);
        out.push(FORMAT_VERSION);
        out.push(self.layout().id());
        out.push(HASH_XXH3_64);
        out.push(self.hashes() as u8);
        out.extend_from_slice(&(lines.len() as u32).to_le_bytes());
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&self.seed().to_le_bytes());
        out.resize(HEADER_LEN, 0);
        for line in lines {
            out.extend_from_slice(&line.0);
        }
        let crc = crc32_of(&[&out]);
        out.extend_from_slice(&crc.to_le_bytes());
        out
    }

    /// Decodes a filter block, checking everything first; see [`FilterView::parse`].
    pub fn decode(bytes: &[u8]) -> Result<BloomFilter> {
        let view = FilterView::parse(bytes)?;
        let mut lines = allocate_lines(view.header.lines)?;
        for (dst, src) in lines.as_mut_slice().iter_mut().zip(view.lines()) {
            dst.0 = *src;
        }
        Ok(BloomFilter::from_parts(
            lines,
            view.header.probes,
            view.header.seed,
            view.header.layout,
        ))
    }
}

/// Size of the encoding of a filter of `lines` lines.
pub fn encoded_len(lines: usize) -> usize {
    HEADER_LEN + lines * LINE_BYTES + CHECKSUM_LEN
}

/// The checked header fields of a filter block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FilterHeader {
    /// Probes per key.
    pub probes: u32,
    /// Number of 512-bit lines.
    pub lines: u64,
    /// The hash seed.
    pub seed: u64,
    /// Where probes fall inside a line.
    pub layout: Layout,
}

/// A filter block queried in place. `B` is the storage: `&[u8]`, or
/// `bytes::Bytes` sharing a memory map.
#[derive(Debug, Clone)]
pub struct FilterView<B: AsRef<[u8]>> {
    block: B,
    header: FilterHeader,
    /// The query kernel for the header's layout and probe count.
    test: LineTest,
}

impl<B: AsRef<[u8]>> LineLookup for FilterView<B> {
    #[inline]
    fn line_slice(&self) -> &[[u8; LINE_BYTES]] {
        self.lines()
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

fn corrupt(detail: impl std::fmt::Display) -> Error {
    Error::corruption(WHAT, detail)
}

fn parse_header(bytes: &[u8]) -> Result<FilterHeader> {
    let mut r = ByteReader::new(bytes, WHAT);
    r.magic_and_version(&MAGIC, FORMAT_VERSION)?;
    let layout = r.u8()?;
    let hash = r.u8()?;
    let probes = r.u8()? as u32;
    let lines = r.u32()? as u64;
    let reserved_a = r.u32()?;
    let seed = r.u64()?;
    let reserved_b = r.take(HEADER_LEN - 24)?;

    // Length first (it needs only the line count), then the checksum over
    // everything, then the meaning of the fields the checksum vouched for.
    let want = usize::try_from(lines)
        .ok()
        .and_then(|lines| lines.checked_mul(LINE_BYTES))
        .and_then(|payload| payload.checked_add(HEADER_LEN + CHECKSUM_LEN))
        .ok_or_else(|| corrupt(format!("impossible line count {lines}")))?;
    if bytes.len() != want {
        return Err(corrupt(format!(
            "length {} does not match {lines} lines ({want} bytes)",
            bytes.len()
        )));
    }
    let Some((body, crc)) = bytes.split_last_chunk::<CHECKSUM_LEN>() else {
        return Err(corrupt(format!("{} bytes, no checksum", bytes.len())));
    };
    let (stored, actual) = (u32::from_le_bytes(*crc), crc32_of(&[body]));
    if stored != actual {
        return Err(corrupt(format!(
            "checksum mismatch: stored {stored:#010x}, computed {actual:#010x}"
        )));
    }
    let Some(layout) = Layout::from_id(layout) else {
        return Err(corrupt(format!("unknown layout id {layout}")));
    };
    if hash != HASH_XXH3_64 {
        return Err(corrupt(format!("unknown hash id {hash}")));
    }
    if !(1..=MAX_PROBES).contains(&probes) {
        return Err(corrupt(format!("impossible probe count {probes}")));
    }
    if lines == 0 {
        return Err(corrupt("zero lines"));
    }
    if reserved_a != 0 || reserved_b.iter().any(|&b| b != 0) {
        return Err(corrupt("reserved header bytes are not zero"));
    }
    Ok(FilterHeader {
        probes,
        lines,
        seed,
        layout,
    })
}

impl<B: AsRef<[u8]>> FilterView<B> {
    /// Checks a whole filter block — magic, version, length, checksum,
    /// layout, hash, geometry — and returns a view that queries it in place.
    pub fn parse(block: B) -> Result<FilterView<B>> {
        let bytes = block.as_ref();
        if bytes.len() < HEADER_LEN + CHECKSUM_LEN {
            return Err(truncated(WHAT, HEADER_LEN + CHECKSUM_LEN - bytes.len()));
        }
        let header = parse_header(bytes)?;
        let test = LineTest::new(header.probes);
        Ok(FilterView {
            block,
            header,
            test,
        })
    }

    /// The checked header.
    pub fn header(&self) -> FilterHeader {
        self.header
    }

    /// The encoded block.
    pub fn as_bytes(&self) -> &[u8] {
        self.block.as_ref()
    }

    /// The filter's lines, each 64 bytes, in line order.
    pub fn lines(&self) -> &[[u8; LINE_BYTES]] {
        let payload = self.block.as_ref().get(HEADER_LEN..).unwrap_or_default();
        payload.as_chunks::<LINE_BYTES>().0
    }

    /// False when no key with this hash was inserted (use the filter's seed;
    /// table filters use seed 0, i.e. [`crate::hash_key`]).
    #[inline]
    pub fn contains_hash(&self, hash: u64) -> bool {
        // The line's index and address inside the kernel's one call (the
        // count of `lines()`, which parse checked against the header's).
        self.test.contains_hash(self.lines(), hash)
    }

    /// False when `key` was certainly never inserted.
    #[inline]
    pub fn contains(&self, key: &[u8]) -> bool {
        self.contains_hash(self.hash(key))
    }

    /// This filter's hash of `key`.
    #[inline]
    pub fn hash(&self, key: &[u8]) -> u64 {
        filter_hash(key, self.header.seed)
    }

    /// [`FilterView::contains_hash`] for each hash, in order, with the
    /// memory loads of the next few overlapped (see [`crate::batch`]).
    pub fn contains_hashes<'a>(
        &'a self,
        hashes: &'a [u64],
    ) -> impl ExactSizeIterator<Item = bool> + 'a {
        batch::by_hash(self, hashes)
    }

    /// [`FilterView::contains`] for each key, in order (see
    /// [`FilterView::contains_hashes`]).
    pub fn contains_keys<'a, K: AsRef<[u8]>>(
        &'a self,
        keys: &'a [K],
    ) -> impl ExactSizeIterator<Item = bool> + 'a {
        batch::by_key(self, keys)
    }

    /// Set bits in each line, for statistics.
    pub fn ones_per_line(&self) -> impl Iterator<Item = u32> + '_ {
        self.lines().iter().map(crate::line::line_ones)
    }

    /// Estimated number of distinct keys, from the fill.
    pub fn estimated_items(&self) -> f64 {
        crate::bloom::estimate_items(self.ones_per_line(), self.header.probes)
    }

    /// The expected false-positive rate for the current fill.
    pub fn current_fp_rate(&self) -> f64 {
        crate::bloom::fp_rate_of_fill(self.ones_per_line(), self.header.probes)
    }
}

/// Keeps the line type in the public surface for callers that build lines.
pub type FilterLine = Line;

#[cfg(test)]
mod tests {
    use super::*;

    fn small_block() -> (BloomFilter, Vec<u8>) {
        let mut f = BloomFilter::with_bits_per_key(100, 10.0)
            .unwrap()
            .with_seed(77);
        for j in 0..100u32 {
            f.insert(&j.to_le_bytes());
        }
        let bytes = f.encode();
        (f, bytes)
    }

    #[test]
    fn round_trip_is_byte_identical() {
        let (f, bytes) = small_block();
        assert_eq!(
            bytes.len(),
            encoded_len(usize::try_from(f.lines()).unwrap())
        );
        let back = BloomFilter::decode(&bytes).unwrap();
        assert_eq!(back, f);
        assert_eq!(back.encode(), bytes);
        let view = FilterView::parse(&bytes[..]).unwrap();
        for j in 0..1000u32 {
            assert_eq!(
                view.contains(&j.to_le_bytes()),
                f.contains(&j.to_le_bytes())
            );
        }
        assert!((view.estimated_items() - f.estimated_items()).abs() < 1e-9);
    }

    #[test]
    fn every_single_byte_change_is_detected() {
        let (_, bytes) = small_block();
        for i in 0..bytes.len() {
            for delta in [1u8, 0x80, 0xff] {
                let mut bad = bytes.clone();
                bad[i] ^= delta;
                let err = BloomFilter::decode(&bad).unwrap_err();
                assert!(err.is_corruption(), "byte {i}: {err}");
            }
        }
    }

    #[test]
    fn every_truncation_and_extension_is_detected() {
        let (_, bytes) = small_block();
        for len in 0..bytes.len() {
            assert!(BloomFilter::decode(&bytes[..len])
                .unwrap_err()
                .is_corruption());
        }
        let mut long = bytes.clone();
        long.push(0);
        let err = BloomFilter::decode(&long).unwrap_err().to_string();
        assert!(err.contains("length"), "{err}");
    }

    fn with_field(bytes: &[u8], offset: usize, value: u8) -> Vec<u8> {
        let mut out = bytes.to_vec();
        out[offset] = value;
        let n = out.len() - CHECKSUM_LEN;
        let crc = crc32_of(&[&out[..n]]);
        out[n..].copy_from_slice(&crc.to_le_bytes());
        out
    }

    #[test]
    fn well_checksummed_nonsense_is_refused_with_a_reason() {
        let (_, bytes) = small_block();
        let cases = [
            (0, b'X', "magic"),
            (4, 2, "version"),
            (5, 9, "layout"),
            (6, 9, "hash"),
            (7, 0, "probe"),
            (7, 33, "probe"),
            (13, 1, "reserved"),
            (40, 1, "reserved"),
        ];
        for (offset, value, reason) in cases {
            let err = BloomFilter::decode(&with_field(&bytes, offset, value))
                .unwrap_err()
                .to_string();
            assert!(err.contains(reason), "offset {offset}: {err}");
        }
    }

    #[test]
    fn a_huge_line_count_does_not_allocate() {
        let (_, bytes) = small_block();
        let mut bad = bytes.clone();
        bad[8..12].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(BloomFilter::decode(&bad).unwrap_err().is_corruption());
    }
}
