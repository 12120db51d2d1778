//! Data and index blocks: sorted entries with shared-prefix key compression
//! and restart points, so a lookup inside a block is a binary search over the
//! restarts followed by a short scan.
//!
//! ```text
//! entry   := header ‖ key[shared..] ‖ value
//! header  := shared ‖ unshared ‖ value_len   (varint32 each, format 4;
//!                                              u32 LE each, formats 1–3)
//! block   := entry* ‖ restart offset u32 × R ‖ R u32          (R ≥ 1)
//! ```
//!
//! From format 5 a data block's entry writes the key's 8-byte tag (the
//! last eight bytes of the internal key, a little-endian u64) as a varint
//! after the rest of the user key, and the lengths count user-key bytes:
//!
//! ```text
//! entry   := header ‖ user_key[shared..] ‖ varint64(tag) ‖ value
//! ```
//!
//! From format 7 that varint holds the tag packed, the kind in its lowest
//! bit (`seq << 1 | kind` instead of `seq << 8 | kind`): one byte less for
//! every sequence number but 0.
//!
//! Which coding a block uses is the table's format version and the block's
//! kind ([`EntryCoding`]); a block does not record it.
//!
//! Owns: [`BlockBuilder`] and the decoding of untrusted block bytes
//! ([`Block`], [`BlockIter`]).
//! Must never: panic, read outside the block, or grow a key beyond the
//! block's length — every length is checked against the bytes that remain.
//! The bytes reaching here have passed their trailer checksum, but the
//! decoder does not rely on it. Errors are `Corruption` with `what` =
//! "block"; the table layer adds the file, block kind and offset
//! ([`crate::table::format::BlockLocation::relocate`]), so the hot path
//! carries no location.

use std::cmp::Ordering;
use std::ops::Range;

use bytes::Bytes;

use crate::codec::{put_varint, varint_len, ByteReader};
use crate::error::{Error, Result};
use crate::key::{compare_internal_keys, compare_split_internal_key, split_internal_key, TAG_LEN};
use crate::prefetch::prefetch_bytes;

/// What block errors name before the table layer locates them.
const WHAT: &str = "block";

/// Bytes of an entry's fixed header (shared, unshared, value length).
pub const ENTRY_HEADER_LEN: usize = 12;
/// Most bytes of an entry's varint header: three varint32s of up to 5 bytes.
pub const MAX_VARINT_HEADER_LEN: usize = 15;

/// How an entry's three header lengths are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryCoding {
    /// Three little-endian u32s (table formats 1 to 3).
    Fixed,
    /// Three LEB128 varint32s (table format 4; index blocks from then on):
    /// a key of 16–24 bytes with a 100-byte value needs 3 bytes of header
    /// instead of 12.
    Varint,
    /// Data blocks from table format 5: varint headers whose lengths count
    /// user-key bytes, and the tag as a varint64 after the user key, so a
    /// sequence number below 2^20 takes 4 bytes instead of 8. Only internal
    /// keys (at least the tag's 8 bytes) can be stored.
    VarintTag,
    /// Data and index blocks from table format 7: as [`EntryCoding::VarintTag`]
    /// with the tag stored packed, `varint64(seq << 1 | kind)`, a kind being
    /// 0 or 1: a sequence number below 2^27 takes 4 bytes or fewer, where
    /// `VarintTag` needs 5 from 2^20. Only keys of those two kinds (every
    /// entry's) can be stored.
    PackedTag,
}

/// Most a packed tag may hold: sequence numbers fit in 56 bits.
const MAX_PACKED_TAG: u64 = (1 << 57) - 1;

impl EntryCoding {
    /// Whether entries store the tag apart from the user key (format 5 on).
    fn tags_apart(self) -> bool {
        matches!(self, EntryCoding::VarintTag | EntryCoding::PackedTag)
    }

    /// The number stored for `tag` (`seq << 8 | kind`), `None` for a kind
    /// this coding cannot store.
    fn stored_tag(self, tag: u64) -> Option<u64> {
        match self {
            EntryCoding::PackedTag => {
                let kind = tag & 0xff;
                (kind <= 1).then_some(((tag >> 8) << 1) | kind)
            }
            EntryCoding::Fixed | EntryCoding::Varint | EntryCoding::VarintTag => Some(tag),
        }
    }

    /// The tag a stored number stands for, `None` for one no writer makes
    /// (a packed tag past 56 bits of sequence number).
    #[inline]
    fn tag_of_stored(self, stored: u64) -> Option<u64> {
        match self {
            EntryCoding::PackedTag => {
                (stored <= MAX_PACKED_TAG).then_some(((stored >> 1) << 8) | (stored & 1))
            }
            EntryCoding::Fixed | EntryCoding::Varint | EntryCoding::VarintTag => Some(stored),
        }
    }

    /// Most bytes a header can take.
    fn max_header_len(self) -> usize {
        match self {
            EntryCoding::Fixed => ENTRY_HEADER_LEN,
            EntryCoding::Varint | EntryCoding::VarintTag | EntryCoding::PackedTag => {
                MAX_VARINT_HEADER_LEN
            }
        }
    }

    /// Bytes of the header for these lengths.
    fn header_len(self, shared: usize, unshared: usize, value_len: usize) -> usize {
        match self {
            EntryCoding::Fixed => ENTRY_HEADER_LEN,
            EntryCoding::Varint | EntryCoding::VarintTag | EntryCoding::PackedTag => {
                varint_len(shared as u64)
                    + varint_len(unshared as u64)
                    + varint_len(value_len as u64)
            }
        }
    }
}

/// Decodes a varint32 from `bytes` at `*pos`, advancing `*pos`. `None` when
/// it runs past `bytes` or past 32 bits (a fifth byte above 0x0f, or a sixth).
#[inline]
fn get_varint(bytes: &[u8], pos: &mut usize) -> Option<u32> {
    get_varint_of::<32>(bytes, pos).and_then(|v| u32::try_from(v).ok())
}

/// Decodes a varint64 from `bytes` at `*pos`, advancing `*pos`. `None` when
/// it runs past `bytes` or past 64 bits (a tenth byte above 1).
///
/// A varint of at most eight bytes with eight bytes to read (every tag of
/// a sequence number below 2^48 inside a block: a value follows it) is
/// decoded from one 8-byte load without a branch per byte: the first byte
/// without its top bit ends it, and the 7-bit groups below it are packed
/// together by three shift-and-mask steps.
#[inline]
fn get_varint64(bytes: &[u8], pos: &mut usize) -> Option<u64> {
    if let Some(word) = pos
        .checked_add(8)
        .and_then(|end| bytes.get(*pos..end))
        .and_then(|b| <[u8; 8]>::try_from(b).ok())
    {
        let word = u64::from_le_bytes(word);
        let ends = !word & 0x8080_8080_8080_8080;
        if ends != 0 {
            // Bytes of the varint: up to and including the first whose top
            // bit is clear.
            let len = ends.trailing_zeros() / 8 + 1;
            let kept = word & (u64::MAX >> (64 - 8 * len)) & 0x7f7f_7f7f_7f7f_7f7f;
            let pairs = (kept & 0x007f_007f_007f_007f) | ((kept & 0x7f00_7f00_7f00_7f00) >> 1);
            let quads = (pairs & 0x0000_3fff_0000_3fff) | ((pairs & 0x3fff_0000_3fff_0000) >> 2);
            let value = (quads & 0x0000_0000_0fff_ffff) | ((quads & 0x0fff_ffff_0000_0000) >> 4);
            *pos += len as usize;
            return Some(value);
        }
    }
    get_varint_of::<64>(bytes, pos)
}

/// A LEB128 varint of at most `BITS` bits (32 or 64): its last possible
/// byte may carry only the bits left (`BITS mod 7`, or 7); a longer than
/// shortest encoding is accepted.
#[inline]
fn get_varint_of<const BITS: u32>(bytes: &[u8], pos: &mut usize) -> Option<u64> {
    let mut value = 0u64;
    for shift in (0..BITS).step_by(7) {
        let byte = *bytes.get(*pos)?;
        *pos += 1;
        if BITS - shift < 7 && u32::from(byte) >> (BITS - shift) != 0 {
            return None;
        }
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

/// Restart entries a seek requests together before its binary search (a
/// 4 KiB block of 100-byte values has 2 or 3): more would be lines the
/// search never reads.
const PREFETCHED_RESTARTS: usize = 8;

/// Builds one block from entries added in strictly increasing key order.
#[derive(Debug)]
pub struct BlockBuilder {
    buf: Vec<u8>,
    restarts: Vec<u32>,
    restart_interval: usize,
    since_restart: usize,
    last_key: Vec<u8>,
    coding: EntryCoding,
}

impl BlockBuilder {
    /// A builder that restarts prefix compression every `restart_interval`
    /// entries and writes entry headers in `coding`.
    pub fn new(restart_interval: usize, coding: EntryCoding) -> BlockBuilder {
        BlockBuilder {
            buf: Vec::new(),
            restarts: Vec::new(),
            restart_interval: restart_interval.max(1),
            since_restart: 0,
            last_key: Vec::new(),
            coding,
        }
    }

    /// True when no entry was added since the last `finish`.
    pub fn is_empty(&self) -> bool {
        self.restarts.is_empty()
    }

    /// Size of the block if it were finished now.
    pub fn estimated_size(&self) -> usize {
        self.buf.len() + 4 * self.restarts.len() + 4
    }

    /// Size an entry adds at most (no shared prefix, a restart offset
    /// included).
    pub fn entry_size(&self, key: &[u8], value: &[u8]) -> usize {
        let key_len = match split_internal_key(key) {
            Some((user_key, tag)) if self.coding.tags_apart() => {
                user_key.len() + self.coding.stored_tag(tag).map_or(TAG_LEN, varint_len)
            }
            _ => key.len(),
        };
        self.coding.header_len(0, key_len, value.len()) + key_len + value.len() + 4
    }

    /// Appends an entry; the caller guarantees key order. `InvalidArgument`
    /// when the block would outgrow its u32 offsets, or when a block that
    /// stores tags apart is given a key shorter than a tag (or, packing
    /// them, a kind other than put or delete).
    #[expect(
        clippy::cast_possible_truncation,
        reason = "the check below keeps the whole block, so every offset and length, within u32"
    )]
    pub fn add(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        let fits = self
            .estimated_size()
            .checked_add(self.entry_size(key, value))
            .is_some_and(|size| size <= u32::MAX as usize);
        if !fits {
            return Err(Error::invalid("a table block cannot exceed 4 GiB"));
        }
        // The bytes shared with the previous key and the tag written apart:
        // with tags apart only user keys share, and the tag follows them.
        let (stored_key, previous, tag) = if self.coding.tags_apart() {
            let Some((user_key, tag)) = split_internal_key(key) else {
                return Err(Error::invalid(format!(
                    "a {}-byte key has no {TAG_LEN}-byte tag",
                    key.len()
                )));
            };
            let Some(stored) = self.coding.stored_tag(tag) else {
                return Err(Error::invalid(format!(
                    "kind {} is not one a packed tag stores",
                    tag & 0xff
                )));
            };
            let previous = split_internal_key(&self.last_key).map_or(&[][..], |(user, _)| user);
            (user_key, previous, Some(stored))
        } else {
            (key, self.last_key.as_slice(), None)
        };
        let shared = if self.is_empty() || self.since_restart >= self.restart_interval {
            self.restarts.push(self.buf.len() as u32);
            self.since_restart = 0;
            0
        } else {
            common_prefix_len(previous, stored_key)
        };
        let unshared = stored_key.get(shared..).unwrap_or_default();
        let lengths = [shared as u32, unshared.len() as u32, value.len() as u32];
        match self.coding {
            EntryCoding::Fixed => {
                for length in lengths {
                    self.buf.extend_from_slice(&length.to_le_bytes());
                }
            }
            EntryCoding::Varint | EntryCoding::VarintTag | EntryCoding::PackedTag => {
                for length in lengths {
                    put_varint(&mut self.buf, u64::from(length));
                }
            }
        }
        self.buf.extend_from_slice(unshared);
        if let Some(tag) = tag {
            put_varint(&mut self.buf, tag);
        }
        self.buf.extend_from_slice(value);
        self.last_key.clear();
        self.last_key.extend_from_slice(key);
        self.since_restart += 1;
        Ok(())
    }

    /// The finished block; the builder is empty afterwards.
    #[expect(
        clippy::cast_possible_truncation,
        reason = "at most one restart per entry, and `add` keeps the block within u32"
    )]
    pub fn finish(&mut self) -> Vec<u8> {
        let mut out = std::mem::take(&mut self.buf);
        for restart in &self.restarts {
            out.extend_from_slice(&restart.to_le_bytes());
        }
        out.extend_from_slice(&(self.restarts.len() as u32).to_le_bytes());
        self.restarts.clear();
        self.since_restart = 0;
        self.last_key.clear();
        out
    }
}

fn common_prefix_len(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// A parsed block: its restart array checked, entries decoded on demand.
#[derive(Debug, Clone)]
pub struct Block {
    data: Bytes,
    entries_end: usize,
    restart_count: usize,
    coding: EntryCoding,
}

/// Where one entry's parts lie inside the block.
#[derive(Debug, Clone)]
struct EntryParts {
    /// Bytes of the previous key kept (of its user key with tags apart).
    shared: usize,
    key_delta: Range<usize>,
    /// The tag written apart (unpacked), to append after `key_delta`.
    tag: Option<u64>,
    value: Range<usize>,
}

/// Why an entry failed to decode (see [`Block::entry_at`]).
#[derive(Debug, Clone, Copy)]
enum EntryFault {
    Header,
    Shared { shared: usize, prev_key_len: usize },
    Lengths { unshared: usize, value_len: usize },
    Tag,
}

impl EntryParts {
    fn end(&self) -> usize {
        self.value.end
    }
}

impl Block {
    /// Checks the restart array (count ≥ 1, first at 0, strictly increasing,
    /// inside the entries) and returns the block, whose entry headers are in
    /// `coding` (the table's format decides it).
    pub fn parse(data: Bytes, coding: EntryCoding) -> Result<Block> {
        let corrupt = |detail: String| Error::corruption(WHAT, detail);
        let Some(count_at) = data.len().checked_sub(4) else {
            return Err(corrupt(format!(
                "{} bytes, too short for a restart count",
                data.len()
            )));
        };
        let mut reader = ByteReader::new(data.get(count_at..).unwrap_or_default(), "block");
        let restart_count = reader.u32()? as usize;
        let entries_end = restart_count
            .checked_mul(4)
            .and_then(|restarts_len| count_at.checked_sub(restarts_len))
            .ok_or_else(|| {
                corrupt(format!(
                    "{restart_count} restarts do not fit in {} bytes",
                    data.len()
                ))
            })?;
        if restart_count == 0 || entries_end == 0 {
            return Err(corrupt("a block needs at least one entry".to_string()));
        }
        let block = Block {
            data,
            entries_end,
            restart_count,
            coding,
        };
        let mut previous = None;
        for i in 0..restart_count {
            let offset = block.restart_offset(i)?;
            let ordered = match previous {
                None => offset == 0,
                Some(p) => offset > p,
            };
            if !ordered || offset >= entries_end {
                return Err(block.corrupt(format!(
                    "restart {i} at {offset} is out of order or outside the {entries_end} bytes of entries"
                )));
            }
            previous = Some(offset);
        }
        Ok(block)
    }

    /// Bytes of the block.
    pub fn len(&self) -> usize {
        self.data.len()
    }

    /// True for a block of no bytes (never: `parse` refuses one).
    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// A cursor over the entries (not positioned; seek first).
    pub fn iter(&self) -> BlockIter {
        self.clone().into_cursor()
    }

    /// [`Block::iter`] without the clone.
    pub fn into_cursor(self) -> BlockIter {
        self.into_cursor_with(Vec::new())
    }

    /// A cursor that rebuilds keys in `key_buffer` (cleared first), so a
    /// caller that keeps one buffer per thread decodes without allocating.
    pub fn into_cursor_with(self, mut key_buffer: Vec<u8>) -> BlockIter {
        key_buffer.clear();
        BlockIter {
            next_offset: self.entries_end,
            block: self,
            offset: 0,
            key: key_buffer,
            value: 0..0,
            valid: false,
        }
    }

    fn corrupt(&self, detail: impl std::fmt::Display) -> Error {
        Error::corruption(WHAT, detail)
    }

    #[inline]
    fn restart_offset(&self, i: usize) -> Result<usize> {
        let word: Option<[u8; 4]> = i
            .checked_mul(4)
            .and_then(|o| o.checked_add(self.entries_end))
            .and_then(|at| self.data.get(at..at.checked_add(4)?))
            .and_then(|bytes| bytes.try_into().ok());
        match word {
            Some(word) => Ok(u32::from_le_bytes(word) as usize),
            None => Err(self.restart_error(i)),
        }
    }

    #[cold]
    #[inline(never)]
    fn restart_error(&self, i: usize) -> Error {
        self.corrupt(format!(
            "restart {i} lies outside the {} restarts",
            self.restart_count
        ))
    }

    /// Decodes the entry at `offset`, whose predecessor's key had
    /// `prev_key_len` bytes (its tag included).
    ///
    /// The hot loop of every lookup: the header decoded with as few bounds
    /// checks as its coding allows, plain integer checks for the rest, and
    /// the error text built only on the cold path.
    #[inline]
    fn entry_at(&self, offset: usize, prev_key_len: usize) -> Result<EntryParts> {
        let header = match self.coding {
            EntryCoding::Varint | EntryCoding::VarintTag | EntryCoding::PackedTag => {
                self.varint_header(offset)
            }
            EntryCoding::Fixed => self.fixed_header(offset),
        };
        let Some((shared, unshared, value_len, key_start)) = header else {
            return Err(self.entry_error(offset, EntryFault::Header));
        };
        // With the tag apart only the previous user key can be shared.
        let shareable = if self.coding.tags_apart() {
            prev_key_len.saturating_sub(TAG_LEN)
        } else {
            prev_key_len
        };
        if shared > shareable {
            return Err(self.entry_error(
                offset,
                EntryFault::Shared {
                    shared,
                    prev_key_len: shareable,
                },
            ));
        }
        // Both lengths are below 2^32 and `key_start` within the block, so
        // neither sum can overflow a 64-bit usize; checked all the same.
        let key_end = key_start.checked_add(unshared);
        let (tag, value_start) = match key_end {
            Some(key_end) if self.coding.tags_apart() && key_end <= self.entries_end => {
                let mut pos = key_end;
                let tag = self
                    .data
                    .get(..self.entries_end)
                    .and_then(|entries| get_varint64(entries, &mut pos))
                    .and_then(|stored| self.coding.tag_of_stored(stored));
                let Some(tag) = tag else {
                    return Err(self.entry_error(offset, EntryFault::Tag));
                };
                (Some(tag), Some(pos))
            }
            _ if self.coding.tags_apart() => (None, None),
            _ => (None, key_end),
        };
        let value_end = value_start.and_then(|v| v.checked_add(value_len));
        match (key_end, value_start, value_end) {
            (Some(key_end), Some(value_start), Some(value_end))
                if value_end <= self.entries_end =>
            {
                Ok(EntryParts {
                    shared,
                    key_delta: key_start..key_end,
                    tag,
                    value: value_start..value_end,
                })
            }
            _ => Err(self.entry_error(
                offset,
                EntryFault::Lengths {
                    unshared,
                    value_len,
                },
            )),
        }
    }

    /// A fixed header at `offset`: (shared, unshared, value length, key
    /// start), or `None` when it runs past the entries.
    #[inline]
    fn fixed_header(&self, offset: usize) -> Option<(usize, usize, usize, usize)> {
        let key_start = offset.checked_add(ENTRY_HEADER_LEN)?;
        if key_start > self.entries_end {
            return None;
        }
        let bytes: [u8; ENTRY_HEADER_LEN] = self.data.get(offset..key_start)?.try_into().ok()?;
        let [s0, s1, s2, s3, u0, u1, u2, u3, v0, v1, v2, v3] = bytes;
        Some((
            u32::from_le_bytes([s0, s1, s2, s3]) as usize,
            u32::from_le_bytes([u0, u1, u2, u3]) as usize,
            u32::from_le_bytes([v0, v1, v2, v3]) as usize,
            key_start,
        ))
    }

    /// A varint header at `offset`, as [`Block::fixed_header`]. Three
    /// one-byte lengths (every entry of short keys and values under 128
    /// bytes) take one bounds check and one test.
    #[inline]
    fn varint_header(&self, offset: usize) -> Option<(usize, usize, usize, usize)> {
        let entries = self.data.get(..self.entries_end)?;
        if let Some(&[a, b, c]) = offset
            .checked_add(3)
            .and_then(|end| entries.get(offset..end))
        {
            if (a | b | c) & 0x80 == 0 {
                return Some((a.into(), b.into(), c.into(), offset + 3));
            }
        }
        let mut pos = offset;
        let shared = get_varint(entries, &mut pos)? as usize;
        let unshared = get_varint(entries, &mut pos)? as usize;
        let value_len = get_varint(entries, &mut pos)? as usize;
        Some((shared, unshared, value_len, pos))
    }

    /// The bytes of the header at `offset`, at most (for prefetching).
    fn header_span(&self, offset: usize) -> &[u8] {
        let end = offset
            .saturating_add(self.coding.max_header_len())
            .min(self.entries_end);
        self.bytes(offset..end)
    }

    /// The `Corruption` for an entry that failed to decode (kept out of
    /// line: only damaged blocks get here).
    #[cold]
    #[inline(never)]
    fn entry_error(&self, offset: usize, fault: EntryFault) -> Error {
        match fault {
            EntryFault::Header => {
                self.corrupt(format!("entry at {offset}: header runs past the entries"))
            }
            EntryFault::Shared {
                shared,
                prev_key_len,
            } => self.corrupt(format!(
                "entry at {offset}: shares {shared} bytes with a {prev_key_len}-byte key"
            )),
            EntryFault::Lengths {
                unshared,
                value_len,
            } => self.corrupt(format!(
                "entry at {offset}: {unshared} key bytes and {value_len} value bytes run past the entries at {}",
                self.entries_end
            )),
            EntryFault::Tag => self.corrupt(format!(
                "entry at {offset}: its tag runs past the entries or past 64 bits, or packs a sequence number past 56 bits"
            )),
        }
    }

    fn bytes(&self, range: Range<usize>) -> &[u8] {
        self.data.get(range).unwrap_or_default()
    }

    /// How the key stored at restart `i` (restart entries share nothing)
    /// orders against the internal key `target`, compared where it lies.
    fn compare_restart(&self, i: usize, target: &[u8]) -> Result<Ordering> {
        let offset = self.restart_offset(i)?;
        let parts = self.entry_at(offset, 0)?;
        let stored = self.bytes(parts.key_delta);
        Ok(match parts.tag {
            Some(tag) => compare_split_internal_key(stored, tag, target),
            None => compare_internal_keys(stored, target),
        })
    }

    /// Calls `visit(key, value)` for every entry, requiring that no entry
    /// shares a prefix (the index block's rule), so decoding cannot make
    /// keys longer than the block.
    pub fn for_each_unshared(
        &self,
        mut visit: impl FnMut(&[u8], &[u8]) -> Result<()>,
    ) -> Result<()> {
        let mut offset = 0;
        let mut joined = Vec::new();
        while offset < self.entries_end {
            let parts = self.entry_at(offset, 0)?;
            let stored = self.bytes(parts.key_delta.clone());
            let key = match parts.tag {
                Some(tag) => {
                    joined.clear();
                    joined.extend_from_slice(stored);
                    joined.extend_from_slice(&tag.to_le_bytes());
                    joined.as_slice()
                }
                None => stored,
            };
            visit(key, self.bytes(parts.value.clone()))?;
            offset = parts.end();
        }
        Ok(())
    }

    /// Checks what the decoder's binary search relies on but cannot see
    /// cheaply: keys strictly increasing in internal-key order, and every
    /// restart at an entry boundary. Returns the number of entries.
    pub fn check_structure(&self) -> Result<u64> {
        let mut restarts = (0..self.restart_count)
            .map(|i| self.restart_offset(i))
            .peekable();
        let mut iter = self.iter();
        let mut previous: Vec<u8> = Vec::new();
        let mut entries = 0u64;
        iter.seek_to_first()?;
        while iter.valid() {
            if let Some(Ok(restart)) = restarts.peek() {
                if *restart == iter.current_offset() {
                    // A restart entry must decode without a predecessor.
                    self.entry_at(*restart, 0)?;
                    restarts.next();
                }
            }
            if entries > 0 && compare_internal_keys(&previous, iter.key()) != Ordering::Less {
                return Err(self.corrupt(format!(
                    "entry at {} is not greater than the entry before it",
                    iter.current_offset()
                )));
            }
            previous.clear();
            previous.extend_from_slice(iter.key());
            entries += 1;
            iter.next()?;
        }
        match restarts.next() {
            None => Ok(entries),
            Some(Err(e)) => Err(e),
            Some(Ok(offset)) => {
                Err(self.corrupt(format!("restart at {offset} is not at an entry boundary")))
            }
        }
    }
}

/// A cursor over one block's entries in order.
#[derive(Debug, Clone)]
pub struct BlockIter {
    block: Block,
    offset: usize,
    next_offset: usize,
    key: Vec<u8>,
    value: Range<usize>,
    valid: bool,
}

impl BlockIter {
    /// Gives the key buffer back, for reuse by the next cursor.
    pub fn into_key_buffer(self) -> Vec<u8> {
        self.key
    }

    /// True when positioned on an entry.
    pub fn valid(&self) -> bool {
        self.valid
    }

    /// The current entry's key (an internal key).
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// The current entry's value, sharing the block's bytes.
    pub fn value(&self) -> Bytes {
        self.block.data.slice(self.value.clone())
    }

    /// The current entry's value as a slice.
    pub fn value_slice(&self) -> &[u8] {
        self.block.bytes(self.value.clone())
    }

    /// Offset of the current entry inside the block.
    fn current_offset(&self) -> usize {
        self.offset
    }

    /// Positions on the first entry.
    pub fn seek_to_first(&mut self) -> Result<()> {
        self.key.clear();
        self.decode_at(0)
    }

    /// Moves to the next entry; invalid after the last one.
    #[expect(
        clippy::should_implement_trait,
        reason = "a fallible cursor step, not an Iterator"
    )]
    pub fn next(&mut self) -> Result<()> {
        if self.next_offset >= self.block.entries_end {
            self.valid = false;
            return Ok(());
        }
        self.decode_at(self.next_offset)
    }

    /// Positions on the first entry whose key is ≥ `target` in internal-key
    /// order; invalid when every key is smaller.
    pub fn seek(&mut self, target: &[u8]) -> Result<()> {
        let result = self.seek_unchecked(target);
        if result.is_err() {
            self.valid = false;
        }
        result
    }

    fn seek_unchecked(&mut self, target: &[u8]) -> Result<()> {
        let restart_count = self.block.restart_count;
        // A block's memory is rarely in the CPU's cache when a get reaches
        // it, and each step below finds its next address in the bytes it
        // just loaded: the lines it will read are requested up front, so
        // their loads overlap instead of following one another.
        if restart_count <= PREFETCHED_RESTARTS {
            for i in 0..restart_count {
                let offset = self.block.restart_offset(i)?;
                prefetch_bytes(self.block.header_span(offset));
            }
        }
        // The first restart whose key is ≥ target; the answer lies after the
        // restart before it.
        let (mut low, mut high) = (0, restart_count);
        while low < high {
            let mid = low + (high - low) / 2;
            if self.block.compare_restart(mid, target)? == Ordering::Less {
                low = mid + 1;
            } else {
                high = mid;
            }
        }
        let start = self.block.restart_offset(low.saturating_sub(1))?;
        // The scan below reads from `start` up to the entry at restart `low`
        // (at most), whose key is ≥ target.
        let scan_end = match low < restart_count {
            true => {
                let next = self.block.restart_offset(low)?;
                next + self.block.header_span(next).len()
            }
            false => self.block.entries_end,
        };
        prefetch_bytes(self.block.bytes(start..scan_end));
        self.key.clear();
        self.decode_at(start)?;
        while self.valid && compare_internal_keys(&self.key, target) == Ordering::Less {
            self.next()?;
        }
        Ok(())
    }

    fn decode_at(&mut self, offset: usize) -> Result<()> {
        match self.block.entry_at(offset, self.key.len()) {
            Ok(parts) => {
                let delta = self.block.bytes(parts.key_delta.clone());
                self.key.truncate(parts.shared);
                match parts.tag {
                    Some(tag) => {
                        // One growth for the key's two pieces, not one each.
                        self.key.reserve(delta.len() + TAG_LEN);
                        self.key.extend_from_slice(delta);
                        self.key.extend_from_slice(&tag.to_le_bytes());
                    }
                    None => self.key.extend_from_slice(delta),
                }
                self.offset = offset;
                self.next_offset = parts.end();
                self.value = parts.value;
                self.valid = true;
                Ok(())
            }
            Err(e) => {
                self.valid = false;
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{internal_key, SeqNo, ValueKind};
    use crate::table::format::{BlockKind, BlockLocation};

    fn ikey(i: u32) -> Vec<u8> {
        internal_key(
            format!("key{i:05}").as_bytes(),
            SeqNo(i as u64),
            ValueKind::Put,
        )
    }

    const CODINGS: [EntryCoding; 4] = [
        EntryCoding::Fixed,
        EntryCoding::Varint,
        EntryCoding::VarintTag,
        EntryCoding::PackedTag,
    ];

    fn build_coded(n: u32, interval: usize, coding: EntryCoding) -> Block {
        let mut b = BlockBuilder::new(interval, coding);
        for i in 0..n {
            b.add(&ikey(i * 2), format!("v{i}").as_bytes()).unwrap();
        }
        Block::parse(Bytes::from(b.finish()), coding).unwrap()
    }

    fn build(n: u32, interval: usize) -> Block {
        build_coded(n, interval, EntryCoding::Varint)
    }

    #[test]
    fn iterates_and_seeks_every_key() {
        for (interval, coding) in [1, 2, 16].into_iter().flat_map(|i| CODINGS.map(|c| (i, c))) {
            let block = build_coded(100, interval, coding);
            assert_eq!(block.check_structure().unwrap(), 100);
            let mut it = block.iter();
            it.seek_to_first().unwrap();
            for i in 0..100 {
                assert!(it.valid());
                assert_eq!(it.key(), ikey(i * 2));
                assert_eq!(it.value_slice(), format!("v{i}").as_bytes());
                it.next().unwrap();
            }
            assert!(!it.valid());
            for t in 0..201 {
                it.seek(&ikey(t)).unwrap();
                if t >= 199 {
                    assert!(!it.valid(), "{t}");
                } else {
                    let want = t.div_ceil(2) * 2;
                    assert_eq!(it.key(), ikey(want), "target {t}");
                }
            }
        }
    }

    #[test]
    fn prefix_compression_shrinks_the_block() {
        let compressed = build(100, 16).data.len();
        let plain = build(100, 1).data.len();
        assert!(compressed < plain, "{compressed} vs {plain}");
    }

    #[test]
    fn varint_headers_shrink_the_block_by_nine_bytes_an_entry() {
        let fixed = build_coded(100, 16, EntryCoding::Fixed).data.len();
        let varint = build_coded(100, 16, EntryCoding::Varint).data.len();
        assert_eq!(fixed - varint, 100 * 9, "{fixed} vs {varint}");
    }

    #[test]
    fn tags_apart_shrink_the_block_by_the_bytes_their_varints_save() {
        // Sequence numbers 0..200 take one or two varint bytes of the eight.
        let varint = build_coded(100, 16, EntryCoding::Varint).data.len();
        let apart = build_coded(100, 16, EntryCoding::VarintTag).data.len();
        let saved: usize = (0..100u64)
            .map(|i| TAG_LEN - varint_len(((i * 2) << 8) | ValueKind::Put as u64))
            .sum();
        assert_eq!(varint - apart, saved, "{varint} vs {apart}");
    }

    #[test]
    fn packed_tags_take_a_byte_less_for_every_sequence_number_but_0() {
        let size = |coding, seq: u64| {
            let mut b = BlockBuilder::new(16, coding);
            b.add(&internal_key(b"key", SeqNo(seq), ValueKind::Put), b"v")
                .unwrap();
            b.finish().len()
        };
        // Sequence number 0 (the bottom of the tree) takes one byte either way.
        assert_eq!(
            size(EntryCoding::VarintTag, 0),
            size(EntryCoding::PackedTag, 0)
        );
        // Otherwise the packed varint is a byte shorter: one bit of kind
        // instead of eight is seven bits, one varint byte.
        for seq in [
            1,
            63,
            64,
            1 << 13,
            (1 << 20) - 1,
            1 << 20,
            20_000_000,
            (1 << 27) - 1,
            1 << 48,
            (1 << 56) - 1,
        ] {
            assert_eq!(
                size(EntryCoding::VarintTag, seq),
                size(EntryCoding::PackedTag, seq) + 1,
                "{seq}"
            );
        }
    }

    #[test]
    fn versions_of_one_user_key_share_it_and_keep_their_own_tags() {
        for coding in [EntryCoding::VarintTag, EntryCoding::PackedTag] {
            let mut b = BlockBuilder::new(16, coding);
            let keys: Vec<Vec<u8>> = [
                (&b"apple"[..], 9, ValueKind::Put),
                (b"apple", 3, ValueKind::Delete),
                (b"apply", 1 << 50, ValueKind::Put),
                (b"apply", 0, ValueKind::Delete),
                (b"apricot", (1 << 56) - 1, ValueKind::Put),
            ]
            .into_iter()
            .map(|(user, seq, kind)| internal_key(user, SeqNo(seq), kind))
            .collect();
            for key in &keys {
                b.add(key, b"v").unwrap();
            }
            let block = Block::parse(Bytes::from(b.finish()), coding).unwrap();
            assert_eq!(block.check_structure().unwrap(), 5);
            let mut it = block.iter();
            for key in &keys {
                it.seek(key).unwrap();
                assert_eq!(it.key(), key.as_slice(), "{coding:?}");
            }
            // A key without a whole tag cannot be stored apart from it.
            let mut short = BlockBuilder::new(16, coding);
            assert!(short.add(b"1234567", b"v").is_err());
            assert!(short.is_empty());
        }
        // A packed tag has one bit of kind: a kind byte of 2 is refused
        // (a tag apart as a whole varint stores it).
        let odd = [&b"key"[..], &((7u64 << 8) | 2).to_le_bytes()].concat();
        let mut packed = BlockBuilder::new(16, EntryCoding::PackedTag);
        assert!(packed.add(&odd, b"v").is_err());
        assert!(packed.is_empty());
        BlockBuilder::new(16, EntryCoding::VarintTag)
            .add(&odd, b"v")
            .unwrap();
    }

    #[test]
    fn a_packed_tag_past_56_bits_of_sequence_number_is_corruption() {
        // shared 0, unshared 1, value 0, key "k", then the tag's varint.
        let block_of = |tag: u64| {
            let mut data = vec![0, 1, 0, b'k'];
            put_varint(&mut data, tag);
            data.extend_from_slice(&0u32.to_le_bytes());
            data.extend_from_slice(&1u32.to_le_bytes());
            Block::parse(Bytes::from(data), EntryCoding::PackedTag).unwrap()
        };
        let mut it = block_of(MAX_PACKED_TAG).iter();
        it.seek_to_first().unwrap();
        assert_eq!(
            it.key(),
            internal_key(b"k", SeqNo((1 << 56) - 1), ValueKind::Put)
        );
        for tag in [MAX_PACKED_TAG + 1, u64::MAX] {
            let err = block_of(tag).iter().seek_to_first().unwrap_err();
            assert!(err.is_corruption(), "{err}");
            assert!(err.to_string().contains("56 bits"), "{err}");
        }
    }

    #[test]
    fn varint64_round_trips_and_refuses_overlong_input() {
        let widths = (0..64).flat_map(|bit| [1u64 << bit, (1u64 << bit) - 1, (1u64 << bit) + 1]);
        for value in widths.chain([0, 0x7f, 0x80, (1 << 63) - 1, u64::MAX]) {
            let mut out = Vec::new();
            put_varint(&mut out, value);
            let mut pos = 0;
            assert_eq!(get_varint64(&out, &mut pos), Some(value));
            assert_eq!(pos, out.len());
            // With bytes after it (the word-at-once path when it fits in
            // eight), and from an offset.
            let mut padded = vec![0xaa];
            padded.extend_from_slice(&out);
            padded.extend_from_slice(&[0xff; 9]);
            let mut pos = 1;
            assert_eq!(get_varint64(&padded, &mut pos), Some(value), "{value:#x}");
            assert_eq!(pos, 1 + out.len());
            for len in 0..out.len() {
                assert_eq!(get_varint64(&out[..len], &mut 0), None, "{value:#x}");
            }
        }
        // A tenth byte above 1 overflows 64 bits; an eleventh is never read.
        let mut over = vec![0xff; 9];
        over.push(2);
        assert_eq!(get_varint64(&over, &mut 0), None);
        let mut long = vec![0x80; 10];
        long.push(0);
        assert_eq!(get_varint64(&long, &mut 0), None);
    }

    #[test]
    fn varints_round_trip_at_every_width_and_refuse_overlong_input() {
        for value in [
            0u32,
            1,
            0x7f,
            0x80,
            0x3fff,
            0x4000,
            0x1f_ffff,
            0x20_0000,
            0x0fff_ffff,
            0x1000_0000,
            u32::MAX,
        ] {
            let mut out = Vec::new();
            put_varint(&mut out, u64::from(value));
            assert_eq!(out.len(), varint_len(u64::from(value)), "{value:#x}");
            let mut pos = 0;
            assert_eq!(get_varint(&out, &mut pos), Some(value));
            assert_eq!(pos, out.len());
            // Every truncation runs out of bytes.
            for len in 0..out.len() {
                assert_eq!(
                    get_varint(&out[..len], &mut 0),
                    None,
                    "{value:#x} cut at {len}"
                );
            }
        }
        // A fifth byte above 0x0f overflows 32 bits; a sixth byte is never read.
        assert_eq!(get_varint(&[0xff, 0xff, 0xff, 0xff, 0x10], &mut 0), None);
        assert_eq!(
            get_varint(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x00], &mut 0),
            None
        );
    }

    #[test]
    fn long_keys_and_values_take_multi_byte_headers() {
        let key = internal_key(&[b'k'; 300], SeqNo(1), ValueKind::Put);
        let value = vec![7u8; 70_000];
        let mut b = BlockBuilder::new(16, EntryCoding::Varint);
        b.add(&key, &value).unwrap();
        let block = Block::parse(Bytes::from(b.finish()), EntryCoding::Varint).unwrap();
        let mut it = block.iter();
        it.seek_to_first().unwrap();
        assert_eq!(it.key(), key.as_slice());
        assert_eq!(it.value_slice(), value.as_slice());
    }

    #[test]
    fn every_truncation_and_flip_is_an_error_or_well_formed() {
        /// `Err(Corruption)` from parse or the structure check, or else a
        /// block whose every entry can be read in strictly increasing key
        /// order and sought without error. Returns whether it was an error.
        fn error_or_well_formed(bytes: Vec<u8>, coding: EntryCoding) -> bool {
            let block = match Block::parse(Bytes::from(bytes), coding) {
                Err(e) => {
                    assert!(e.is_corruption(), "{e}");
                    return true;
                }
                Ok(block) => block,
            };
            let entries = match block.check_structure() {
                Err(e) => {
                    assert!(e.is_corruption(), "{e}");
                    return true;
                }
                Ok(entries) => entries,
            };
            let mut it = block.iter();
            it.seek_to_first().unwrap();
            let mut seen = 0u64;
            let mut last: Option<Vec<u8>> = None;
            while it.valid() {
                if let Some(last) = &last {
                    assert_eq!(
                        compare_internal_keys(last, it.key()),
                        Ordering::Less,
                        "a well-formed block yields keys in order"
                    );
                }
                last = Some(it.key().to_vec());
                seen += 1;
                it.next().unwrap();
            }
            assert_eq!(seen, entries, "the structure check counted every entry");
            block.iter().seek(&ikey(7)).unwrap();
            false
        }

        for coding in CODINGS {
            let block = build_coded(20, 4, coding);
            let bytes = block.data.to_vec();
            assert!(!error_or_well_formed(bytes.clone(), coding));
            // Cutting the end cuts the restart array: every truncation is caught.
            for len in 0..bytes.len() {
                assert!(
                    error_or_well_formed(bytes[..len].to_vec(), coding),
                    "cut at {len}"
                );
            }
            let mut caught = 0;
            for i in 0..bytes.len() {
                let mut bad = bytes.clone();
                bad[i] ^= 0xff;
                caught += usize::from(error_or_well_formed(bad, coding));
            }
            // Flips inside keys and values can leave a well-formed block (the
            // trailer checksum, not this decoder, catches those); flips in the
            // lengths and restarts cannot.
            assert!(
                caught > bytes.len() / 4,
                "{coding:?}: {caught} of {} flips caught",
                bytes.len()
            );
        }
    }

    #[test]
    fn errors_are_corruption_located_by_the_table_layer() {
        let err = Block::parse(Bytes::from_static(&[1, 0, 0, 0]), EntryCoding::Varint).unwrap_err();
        let location = BlockLocation::new("t.sst", BlockKind::Data, 0);
        let err = location.relocate(err).to_string();
        assert!(
            err.contains("table t.sst data block at offset 0: block:"),
            "{err}"
        );
    }

    #[test]
    fn restarts_off_entry_boundaries_are_caught() {
        for coding in CODINGS {
            let mut b = BlockBuilder::new(1, coding);
            b.add(&ikey(1), b"a").unwrap();
            b.add(&ikey(2), b"b").unwrap();
            let mut bytes = b.finish();
            let n = bytes.len();
            // Point the second restart one byte into the second entry.
            let second = u32::from_le_bytes(bytes[n - 8..n - 4].try_into().unwrap());
            bytes[n - 8..n - 4].copy_from_slice(&(second + 1).to_le_bytes());
            let block = Block::parse(Bytes::from(bytes), coding).unwrap();
            assert!(block.check_structure().is_err(), "{coding:?}");
        }
    }
}
