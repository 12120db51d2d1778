//! The range filter block: a self-describing, checksummed byte encoding of a
//! range filter, and [`RangeFilterView`], which answers queries in place over
//! those bytes (inside a memory-mapped table) without copying them.
//!
//! Owns: the byte layout documented in `docs/format.md` ("Range filter
//! block"), its checks, and the query path.
//! Must never: trust a byte before the checksum and every field are checked,
//! panic, index out of bounds, allocate, or answer "no" for a range that
//! holds a key of the set it was built from.
//!
//! ```text
//! offset   size       field
//! 0        4          magic "SRF1"
//! 4        1          format version (1)
//! 5        1          mode: 0 empty, 1 exact, 2 hashed
//! 6        1          hash id: 1 = xxh3-64 in hashed mode, else 0
//! 7        1          sample log s (6..=12; 0 when empty)
//! 8        8          keys n: distinct keys the filter was built from
//! 16       8          values m: distinct stored values (1..=n)
//! 24       8          universe u: stored values are below it
//! 32       8          smallest key's mapped value
//! 40       8          largest key's mapped value
//! 48       8          hash seed (hashed mode, else 0)
//! 56       4          prefix length p (u32)
//! 60       1          key-map width W (0..=64)
//! 61       1          key-map flags: bit 0 = no key's tail is longer than W
//! 62       1          low bits l = ⌊log2(u/m)⌋ (≤ 56)
//! 63       1          reserved, zero
//! 64       p          the keys' common prefix
//! 64+p     3·W        positions: lowest byte, highest byte, flags
//! …        0..7       zero padding to a multiple of 8
//! …        8·⌈U/64⌉   upper bits, U = m + ((u−1) >> l) + 1, u64 words LE
//! …        4·⌈Z/2^s⌉  select samples (u32 LE), Z = ((u−1) >> l) + 1
//! …        ⌈m·l/8⌉+7  low bits, packed LSB-first, zero padding (0 if l = 0)
//! end−4    4          crc32 (IEEE) of every byte before it
//! ```
#![deny(clippy::unwrap_used, clippy::indexing_slicing, clippy::panic)]

use std::ops::{Bound, Range};

use crate::bloom::hash_key_seeded;
use crate::codec::{crc32_of, ByteReader};
use crate::error::{truncated, Error, Result};
use crate::range::elias_fano::{EliasFano, Shape};
use crate::range::keymap::{KeyMap, Position, MAX_POSITIONS};

/// The four bytes every range filter block starts with.
pub const MAGIC: [u8; 4] = *b"SRF1";
/// The one format version this code reads and writes.
pub const FORMAT_VERSION: u8 = 1;
/// Bytes before the prefix.
pub const HEADER_LEN: usize = 64;
/// Bytes of the trailing checksum.
pub const CHECKSUM_LEN: usize = 4;
/// Hash id of xxh3-64 (the block hash of hashed mode).
pub const HASH_XXH3_64: u8 = 1;
/// Key-map flag: no key's tail is longer than the map's width.
const KEYS_FIT: u8 = 1;

const WHAT: &str = "range filter block";

/// How the stored values relate to the keys' mapped values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RangeMode {
    /// Built from no key: every range is empty.
    Empty,
    /// The mapped values themselves, minus the smallest: chosen when the
    /// keys' mapped span fits the reduced universe. No false positive beyond
    /// the key map's own resolution.
    Exact,
    /// Grafite: values hashed into a reduced universe by a locality-preserving
    /// hash; range false-positive rate ≤ ℓ·m/u for ℓ mapped values.
    Hashed,
}

impl RangeMode {
    fn id(self) -> u8 {
        match self {
            RangeMode::Empty => 0,
            RangeMode::Exact => 1,
            RangeMode::Hashed => 2,
        }
    }

    fn from_id(id: u8) -> Option<RangeMode> {
        match id {
            0 => Some(RangeMode::Empty),
            1 => Some(RangeMode::Exact),
            2 => Some(RangeMode::Hashed),
            _ => None,
        }
    }
}

/// The checked header fields of a range filter block.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RangeFilterHeader {
    /// Empty, exact or hashed.
    pub mode: RangeMode,
    /// Distinct keys the filter was built from.
    pub keys: u64,
    /// Distinct values stored.
    pub values: u64,
    /// The universe the values lie below.
    pub universe: u64,
    /// The smallest key's mapped value.
    pub min_value: u64,
    /// The largest key's mapped value.
    pub max_value: u64,
    /// Seed of the block hash (hashed mode).
    pub seed: u64,
    /// Length of the keys' common prefix.
    pub prefix_len: u32,
    /// Tail positions the key map reads.
    pub width: u8,
    /// Low bits per stored value.
    pub low_bits: u8,
    /// log2 of the zeros between two select samples.
    pub sample_log: u8,
}

/// Everything the builder decided, ready to be laid out.
pub(crate) struct Parts<'a> {
    pub header: RangeFilterHeader,
    pub keys_fit: bool,
    pub prefix: &'a [u8],
    pub positions: &'a [Position],
    /// Strictly increasing, below `header.universe`.
    pub values: &'a [u64],
}

/// Lays out a block (see the module docs).
pub(crate) fn encode(parts: &Parts<'_>, shape: Option<&Shape>) -> Vec<u8> {
    let h = &parts.header;
    let mut out = Vec::new();
    out.extend_from_slice(&MAGIC);
    out.push(FORMAT_VERSION);
    out.push(h.mode.id());
    out.push(if h.mode == RangeMode::Hashed {
        HASH_XXH3_64
    } else {
        0
    });
    out.push(h.sample_log);
    for field in [
        h.keys,
        h.values,
        h.universe,
        h.min_value,
        h.max_value,
        h.seed,
    ] {
        out.extend_from_slice(&field.to_le_bytes());
    }
    out.extend_from_slice(&h.prefix_len.to_le_bytes());
    out.push(h.width);
    out.push(if parts.keys_fit { KEYS_FIT } else { 0 });
    out.push(h.low_bits);
    out.push(0);
    out.extend_from_slice(parts.prefix);
    for p in parts.positions {
        out.extend_from_slice(&[p.lo, p.hi, p.flags]);
    }
    if let Some(shape) = shape {
        out.resize(out.len().next_multiple_of(8), 0);
        crate::range::elias_fano::encode(parts.values, shape, &mut out);
    }
    let crc = crc32_of(&[&out]);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

/// The block hash of hashed mode: `(q(v >> λ) + (v mod 2^λ)) mod u`, with
/// `q` = xxh3-64 of the block number's 8 little-endian bytes (seeded),
/// reduced to `[0, u)` by a multiply-shift. Values of one block of `2^λ`
/// keep their distances (that is what makes short ranges cheap); blocks land
/// at independent random places.
#[inline]
pub(crate) fn block_hash(value: u64, seed: u64, universe: u64, block_log: u32) -> u64 {
    let block = value >> block_log;
    let q = (u128::from(hash_key_seeded(&block.to_le_bytes(), seed)) * u128::from(universe)) >> 64;
    // q < u ≤ 2^62 and the offset < 2^λ ≤ u/2: the sum fits and needs at
    // most one subtraction.
    let sum = q as u64 + (value & ((1u64 << block_log) - 1));
    if sum >= universe {
        sum - universe
    } else {
        sum
    }
}

/// log2 of the block length of hashed mode: the largest power of two at most
/// half the universe (so a range within one block never wraps onto itself).
pub(crate) fn block_log_of(universe: u64) -> u32 {
    universe.max(2).ilog2() - 1
}

/// A range filter block queried in place. `B` is the storage: `&[u8]`,
/// `Vec<u8>`, or `bytes::Bytes` sharing a memory map.
#[derive(Debug, Clone)]
pub struct RangeFilterView<B: AsRef<[u8]>> {
    block: B,
    header: RangeFilterHeader,
    /// `None` in empty mode.
    shape: Option<Shape>,
    map: Option<KeyMap>,
    prefix: Range<usize>,
    upper: Range<usize>,
    samples: Range<usize>,
    low: Range<usize>,
    block_log: u32,
}

fn corrupt(detail: impl std::fmt::Display) -> Error {
    Error::corruption(WHAT, detail)
}

/// `start .. start + len` with overflow checked.
fn span(start: usize, len: u64) -> Result<Range<usize>> {
    usize::try_from(len)
        .ok()
        .and_then(|len| start.checked_add(len))
        .map(|end| start..end)
        .ok_or_else(|| corrupt(format!("section of {len} bytes cannot exist")))
}

impl<B: AsRef<[u8]>> RangeFilterView<B> {
    /// Checks a whole block — magic, version, checksum, every header field,
    /// the key map, the section lengths, and the Elias-Fano structure — and
    /// returns a view that queries it in place. Takes time linear in the
    /// block's length; allocates nothing.
    pub fn parse(block: B) -> Result<RangeFilterView<B>> {
        let bytes = block.as_ref();
        if bytes.len() < HEADER_LEN + CHECKSUM_LEN {
            return Err(truncated(WHAT, HEADER_LEN + CHECKSUM_LEN - bytes.len()));
        }
        let mut r = ByteReader::new(bytes, WHAT);
        r.magic_and_version(&MAGIC, FORMAT_VERSION)?;
        // Everything after this is vouched for by the checksum.
        let body = crate::codec::split_checked(bytes, WHAT)?;
        let mode = r.u8()?;
        let hash = r.u8()?;
        let sample_log = r.u8()?;
        let keys = r.u64()?;
        let values = r.u64()?;
        let universe = r.u64()?;
        let min_value = r.u64()?;
        let max_value = r.u64()?;
        let seed = r.u64()?;
        let prefix_len = r.u32()?;
        let width = r.u8()?;
        let map_flags = r.u8()?;
        let low_bits = r.u8()?;
        let reserved = r.u8()?;

        let mode =
            RangeMode::from_id(mode).ok_or_else(|| corrupt(format!("unknown mode {mode}")))?;
        let want_hash = if mode == RangeMode::Hashed {
            HASH_XXH3_64
        } else {
            0
        };
        if hash != want_hash {
            return Err(corrupt(format!("hash id {hash} in {mode:?} mode")));
        }
        if reserved != 0 {
            return Err(corrupt("reserved header byte is not zero"));
        }
        if map_flags & !KEYS_FIT != 0 {
            return Err(corrupt(format!("unknown key-map flags {map_flags:#04x}")));
        }
        let header = RangeFilterHeader {
            mode,
            keys,
            values,
            universe,
            min_value,
            max_value,
            seed,
            prefix_len,
            width,
            low_bits,
            sample_log,
        };
        if mode == RangeMode::Empty {
            let canonical = RangeFilterHeader {
                mode,
                ..RangeFilterHeader::empty()
            };
            if header != canonical || map_flags != 0 || body.len() != HEADER_LEN {
                return Err(corrupt("an empty filter must have zero fields and no body"));
            }
            return Ok(RangeFilterView {
                block,
                header,
                shape: None,
                map: None,
                prefix: HEADER_LEN..HEADER_LEN,
                upper: HEADER_LEN..HEADER_LEN,
                samples: HEADER_LEN..HEADER_LEN,
                low: HEADER_LEN..HEADER_LEN,
                block_log: 0,
            });
        }

        if values == 0 || values > keys {
            return Err(corrupt(format!("{values} values from {keys} keys")));
        }
        if min_value > max_value {
            return Err(corrupt(format!(
                "smallest mapped value {min_value} above largest {max_value}"
            )));
        }
        match mode {
            RangeMode::Exact => {
                if seed != 0 {
                    return Err(corrupt("exact mode with a hash seed"));
                }
                if Some(universe) != (max_value - min_value).checked_add(1) {
                    return Err(corrupt(format!(
                        "exact universe {universe} is not the mapped span {min_value}..={max_value}"
                    )));
                }
            }
            _ => {
                if universe < 2 {
                    return Err(corrupt(format!("hashed universe {universe} below 2")));
                }
            }
        }
        let shape = Shape::new(values, universe, u32::from(sample_log)).map_err(corrupt)?;
        if u32::from(low_bits) != shape.low_bits {
            return Err(corrupt(format!(
                "low bits {low_bits}, geometry needs {}",
                shape.low_bits
            )));
        }

        let prefix = span(HEADER_LEN, u64::from(prefix_len))?;
        let width = usize::from(width);
        if width > MAX_POSITIONS {
            return Err(corrupt(format!(
                "key-map width {width} above {MAX_POSITIONS}"
            )));
        }
        let positions_at = span(prefix.end, 3 * width as u64)?;
        let upper = span(positions_at.end.next_multiple_of(8), shape.upper_len as u64)?;
        let samples = span(upper.end, shape.samples_len as u64)?;
        let low = span(samples.end, shape.low_len as u64)?;
        if body.len() != low.end {
            return Err(corrupt(format!(
                "length {} does not match the geometry ({} bytes)",
                bytes.len(),
                low.end.saturating_add(CHECKSUM_LEN)
            )));
        }
        let mut positions = [Position::default(); MAX_POSITIONS];
        let stored = body.get(positions_at.clone()).unwrap_or_default();
        for (p, raw) in positions.iter_mut().zip(stored.chunks_exact(3)) {
            if let [lo, hi, flags] = *raw {
                *p = Position { lo, hi, flags };
            }
        }
        let map = KeyMap::new(
            positions.get(..width).unwrap_or_default(),
            map_flags & KEYS_FIT != 0,
            WHAT,
        )?;
        let padding = body.get(positions_at.end..upper.start).unwrap_or_default();
        if padding.iter().any(|&b| b != 0) {
            return Err(corrupt("padding before the upper bits is not zero"));
        }
        let ef = EliasFano {
            shape,
            upper: body.get(upper.clone()).unwrap_or_default(),
            samples: body.get(samples.clone()).unwrap_or_default(),
            low: body.get(low.clone()).unwrap_or_default(),
        };
        ef.check().map_err(corrupt)?;
        Ok(RangeFilterView {
            block,
            header,
            shape: Some(shape),
            map: Some(map),
            prefix,
            upper,
            samples,
            low,
            block_log: block_log_of(universe),
        })
    }

    /// The checked header.
    pub fn header(&self) -> RangeFilterHeader {
        self.header
    }

    /// The encoded block.
    pub fn as_bytes(&self) -> &[u8] {
        self.block.as_ref()
    }

    /// The storage, given back.
    pub fn into_inner(self) -> B {
        self.block
    }

    /// Bits of the block per key it was built from (0 for an empty filter).
    pub fn bits_per_key(&self) -> f64 {
        if self.header.keys == 0 {
            return 0.0;
        }
        self.as_bytes().len() as f64 * 8.0 / self.header.keys as f64
    }

    /// The keys' common prefix.
    pub fn prefix(&self) -> &[u8] {
        self.as_bytes().get(self.prefix.clone()).unwrap_or_default()
    }

    /// False when `key` is certainly not in the set.
    #[inline]
    pub fn may_contain(&self, key: &[u8]) -> bool {
        self.may_contain_bounds(Bound::Included(key), Bound::Included(key))
    }

    /// False when no key `k` of the set has `a ≤ k ≤ b` (always false when
    /// `a > b`).
    #[inline]
    pub fn may_contain_range(&self, a: &[u8], b: &[u8]) -> bool {
        self.may_contain_bounds(Bound::Included(a), Bound::Included(b))
    }

    /// False when no key `k` of the set has `a ≤ k < b` — the interval of
    /// `range(a..b)` (always false when `a ≥ b`).
    #[inline]
    pub fn may_contain_half_open(&self, a: &[u8], b: &[u8]) -> bool {
        self.may_contain_bounds(Bound::Included(a), Bound::Excluded(b))
    }

    /// False when no key of the set lies within the bounds.
    #[inline]
    pub fn may_contain_bounds(&self, start: Bound<&[u8]>, end: Bound<&[u8]>) -> bool {
        match self.mapped_range(start, end) {
            None => false,
            Some((lo, hi)) => self.may_contain_mapped(lo, hi),
        }
    }

    /// The interval of mapped values every key within the bounds maps into,
    /// clamped to the keys' mapped span; `None` when no key can lie within
    /// them. `hi − lo + 1` is the `ℓ` of the false-positive bound.
    pub fn mapped_range(&self, start: Bound<&[u8]>, end: Bound<&[u8]>) -> Option<(u64, u64)> {
        let map = self.map.as_ref()?;
        if bounds_are_empty(start, end) {
            return None;
        }
        let prefix = self.prefix();
        let (min, max) = (self.header.min_value, self.header.max_value);
        let lo = match start {
            Bound::Unbounded => min,
            Bound::Included(a) => map.map(prefix, a).lower(false)?,
            Bound::Excluded(a) => map.map(prefix, a).lower(true)?,
        };
        let hi = match end {
            Bound::Unbounded => max,
            Bound::Included(b) => map.map(prefix, b).upper(false)?,
            Bound::Excluded(b) => map.map(prefix, b).upper(true)?,
        };
        let (lo, hi) = (lo.max(min), hi.min(max));
        (lo <= hi).then_some((lo, hi))
    }

    /// False when no key's mapped value lies in `[lo, hi]`.
    pub fn may_contain_mapped(&self, lo: u64, hi: u64) -> bool {
        let Some(ef) = self.elias_fano() else {
            // Empty mode stores nothing; otherwise unreachable after parse.
            return self.header.mode != RangeMode::Empty;
        };
        let (min, max) = (self.header.min_value, self.header.max_value);
        let (lo, hi) = (lo.max(min), hi.min(max));
        if lo > hi {
            return false;
        }
        match self.header.mode {
            RangeMode::Empty => false,
            RangeMode::Exact => ef.any_in(lo - min, hi - min),
            RangeMode::Hashed => self.hashed_may_contain(&ef, lo, hi),
        }
    }

    fn hashed_may_contain(&self, ef: &EliasFano<'_>, lo: u64, hi: u64) -> bool {
        let (u, seed, log) = (self.header.universe, self.header.seed, self.block_log);
        let block_len = 1u64 << log;
        let extra = hi - lo;
        if extra >= block_len {
            // Longer than a block: the bound ℓ·m/u exceeds 1/2 anyway.
            return true;
        }
        // A range inside one block keeps its length after hashing; one that
        // crosses into the next block becomes two pieces.
        let wrapped = |start: u64, extra: u64| {
            let end = start + extra;
            if end < u {
                ef.any_in(start, end)
            } else {
                ef.any_in(start, u - 1) || ef.any_in(0, end - u)
            }
        };
        let offset_mask = block_len - 1;
        let start = block_hash(lo, seed, u, log);
        if lo >> log == hi >> log {
            return wrapped(start, extra);
        }
        wrapped(start, offset_mask - (lo & offset_mask))
            || wrapped(
                block_hash(hi & !offset_mask, seed, u, log),
                hi & offset_mask,
            )
    }

    /// The proven false-positive bound for a query whose mapped interval
    /// holds `len` values: `min(1, len·m/u)` in hashed mode (Grafite's
    /// `ℓ/2^(B−2)`), 0 in exact and empty mode (where a false positive can
    /// only come from keys the map does not tell apart).
    pub fn fp_bound(&self, len: u64) -> f64 {
        match self.header.mode {
            RangeMode::Hashed => {
                (len as f64 * self.header.values as f64 / self.header.universe as f64).min(1.0)
            }
            _ => 0.0,
        }
    }

    fn elias_fano(&self) -> Option<EliasFano<'_>> {
        let bytes = self.as_bytes();
        Some(EliasFano {
            shape: self.shape?,
            upper: bytes.get(self.upper.clone())?,
            samples: bytes.get(self.samples.clone())?,
            low: bytes.get(self.low.clone())?,
        })
    }
}

/// True when no string at all lies within the bounds (start above end, or
/// equal with either excluded).
fn bounds_are_empty(start: Bound<&[u8]>, end: Bound<&[u8]>) -> bool {
    match (start, end) {
        (Bound::Included(a), Bound::Included(b)) => a > b,
        (Bound::Included(a) | Bound::Excluded(a), Bound::Included(b) | Bound::Excluded(b)) => {
            a >= b
        }
        _ => false,
    }
}

impl RangeFilterHeader {
    /// The header of a filter built from no key.
    pub(crate) fn empty() -> RangeFilterHeader {
        RangeFilterHeader {
            mode: RangeMode::Empty,
            keys: 0,
            values: 0,
            universe: 0,
            min_value: 0,
            max_value: 0,
            seed: 0,
            prefix_len: 0,
            width: 0,
            low_bits: 0,
            sample_log: 0,
        }
    }
}
