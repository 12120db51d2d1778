//! Data and index blocks: sorted entries with shared-prefix key compression
//! and restart points, so a lookup inside a block is a binary search over the
//! restarts followed by a short scan.
//!
//! Every key is an internal key (user key ‖ 8-byte tag); an entry stores the
//! user key (prefix-compressed against the previous entry's) and, after it,
//! the tag packed as a varint, `seq << 2 | kind` (a kind being 0 to 3):
//!
//! ```text
//! entry   := header ‖ user_key[shared..] ‖ varint64(seq << 2 | kind) ‖ value
//! header  := shared ‖ unshared ‖ value_len   (varint32 each; the lengths
//!                                              count user-key bytes)
//! block   := entry* ‖ restart offset u32 × R ‖ R u32          (R ≥ 1)
//! ```
//!
//! Owns: [`BlockBuilder`] and the decoding of untrusted block bytes
//! ([`Block`]: its restart array, one entry at an offset, the structure
//! check); the cursor over the entries, [`crate::table::block_iter::BlockIter`],
//! is `block_iter.rs`'s.
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

/// What block errors name before the table layer locates them.
const WHAT: &str = "block";

/// Most bytes of an entry's header: three varint32s of up to 5 bytes.
pub const MAX_VARINT_HEADER_LEN: usize = 15;

/// Most a packed tag may hold: sequence numbers fit in 56 bits, the kind
/// in two.
const MAX_PACKED_TAG: u64 = (1 << 58) - 1;

/// The kind bits of a packed tag.
const PACKED_KIND_BITS: u32 = 2;

/// The number stored for `tag` (`seq << 8 | kind`): `seq << 2 | kind`;
/// `None` for a kind other than delete (0), put (1), merge (2) or blob
/// pointer (3).
fn stored_tag(tag: u64) -> Option<u64> {
    let kind = tag & 0xff;
    (kind <= 3).then_some(((tag >> 8) << PACKED_KIND_BITS) | kind)
}

/// The tag a stored number stands for, `None` for one no writer makes (a
/// packed tag past 56 bits of sequence number).
#[inline]
fn tag_of_stored(stored: u64) -> Option<u64> {
    let kind = stored & 3;
    (stored <= MAX_PACKED_TAG).then_some(((stored >> PACKED_KIND_BITS) << 8) | kind)
}

/// Bytes of the header for these lengths.
fn header_len(shared: usize, unshared: usize, value_len: usize) -> usize {
    varint_len(shared as u64) + varint_len(unshared as u64) + varint_len(value_len as u64)
}

/// Decodes a varint32 from `bytes` at `*pos`, advancing `*pos`: the
/// codec's varint of at most `u32::MAX` ([`get_varint_of`]).
#[inline]
fn get_varint(bytes: &[u8], pos: &mut usize) -> Option<u32> {
    get_varint_of(bytes, pos, u64::from(u32::MAX)).and_then(|v| u32::try_from(v).ok())
}

/// Decodes a varint64 from `bytes` at `*pos`, advancing `*pos`: the
/// codec's varint of at most `u64::MAX` ([`get_varint_of`]).
///
/// A varint of one to eight bytes in its shortest form with eight bytes to
/// read (every tag of a sequence number below 2^48 inside a block: a value
/// follows it) is decoded from one 8-byte load without a branch per byte:
/// the first byte without its top bit ends it, and the 7-bit groups below
/// it are packed together by three shift-and-mask steps. Any other input
/// (a longer varint, a last byte of zero, the end of the bytes) goes to the
/// codec, whose rule decides.
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
            // The shortest form: one byte, or a last byte that is not zero.
            if len == 1 || kept >> (8 * (len - 1)) != 0 {
                let pairs = (kept & 0x007f_007f_007f_007f) | ((kept & 0x7f00_7f00_7f00_7f00) >> 1);
                let quads =
                    (pairs & 0x0000_3fff_0000_3fff) | ((pairs & 0x3fff_0000_3fff_0000) >> 2);
                let value =
                    (quads & 0x0000_0000_0fff_ffff) | ((quads & 0x0fff_ffff_0000_0000) >> 4);
                *pos += len as usize;
                return Some(value);
            }
        }
    }
    get_varint_of(bytes, pos, u64::MAX)
}

/// A varint of at most `max` read by the codec ([`ByteReader::varint`]:
/// LEB128 in its shortest form, the one rule every varint of the crate is
/// read by), advancing `*pos` past it; `None` when it runs past `bytes`,
/// exceeds `max`, or is longer than its value needs.
#[inline]
fn get_varint_of(bytes: &[u8], pos: &mut usize, max: u64) -> Option<u64> {
    let mut reader = ByteReader::new(bytes.get(*pos..)?, WHAT);
    let value = reader.varint(max).ok()?;
    *pos = bytes.len() - reader.remaining();
    Some(value)
}

/// Restart entries a seek requests together before its binary search (a
/// 4 KiB block of 100-byte values has 2 or 3): more would be lines the
/// search never reads.
pub(super) const PREFETCHED_RESTARTS: usize = 8;

/// Builds one block from entries added in strictly increasing key order.
#[derive(Debug)]
pub struct BlockBuilder {
    buf: Vec<u8>,
    restarts: Vec<u32>,
    restart_interval: usize,
    since_restart: usize,
    last_key: Vec<u8>,
}

impl BlockBuilder {
    /// A builder that restarts prefix compression every `restart_interval`
    /// entries.
    pub fn new(restart_interval: usize) -> BlockBuilder {
        BlockBuilder {
            buf: Vec::new(),
            restarts: Vec::new(),
            restart_interval: restart_interval.max(1),
            since_restart: 0,
            last_key: Vec::new(),
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
            Some((user_key, tag)) => user_key.len() + stored_tag(tag).map_or(TAG_LEN, varint_len),
            None => key.len(),
        };
        header_len(0, key_len, value.len()) + key_len + value.len() + 4
    }

    /// Appends an entry; the caller guarantees key order. `InvalidArgument`
    /// when the block would outgrow its u32 offsets, or for a key shorter
    /// than a tag or of a kind other than put or delete.
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
        // Only user keys share bytes; the tag follows the user key.
        let Some((stored_key, tag)) = split_internal_key(key) else {
            return Err(Error::invalid(format!(
                "a {}-byte key has no {TAG_LEN}-byte tag",
                key.len()
            )));
        };
        let Some(tag) = stored_tag(tag) else {
            return Err(Error::invalid(format!(
                "kind {} is not one a packed tag stores",
                tag & 0xff
            )));
        };
        let previous = split_internal_key(&self.last_key).map_or(&[][..], |(user, _)| user);
        let shared = if self.is_empty() || self.since_restart >= self.restart_interval {
            self.restarts.push(self.buf.len() as u32);
            self.since_restart = 0;
            0
        } else {
            common_prefix_len(previous, stored_key)
        };
        let unshared = stored_key.get(shared..).unwrap_or_default();
        for length in [shared, unshared.len(), value.len()] {
            put_varint(&mut self.buf, length as u64);
        }
        self.buf.extend_from_slice(unshared);
        put_varint(&mut self.buf, tag);
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
    pub(super) data: Bytes,
    pub(super) entries_end: usize,
    pub(super) restart_count: usize,
}

/// Where one entry's parts lie inside the block.
#[derive(Debug, Clone)]
pub(super) struct EntryParts {
    /// Bytes of the previous user key kept.
    pub(super) shared: usize,
    pub(super) key_delta: Range<usize>,
    /// The tag (unpacked), to append after the user key.
    pub(super) tag: u64,
    pub(super) value: Range<usize>,
}

/// Why an entry failed to decode (see [`Block::entry_at`]).
#[derive(Debug, Clone, Copy)]
pub(super) enum EntryFault {
    Header,
    Shared { shared: usize, prev_key_len: usize },
    Lengths { unshared: usize, value_len: usize },
    Tag,
}

impl EntryParts {
    pub(super) fn end(&self) -> usize {
        self.value.end
    }
}

impl Block {
    /// Checks the restart array (count ≥ 1, first at 0, strictly increasing,
    /// inside the entries) and returns the block.
    pub fn parse(data: Bytes) -> Result<Block> {
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

    pub(super) fn corrupt(&self, detail: impl std::fmt::Display) -> Error {
        Error::corruption(WHAT, detail)
    }

    #[inline]
    pub(super) fn restart_offset(&self, i: usize) -> Result<usize> {
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
    /// checks as it allows, plain integer checks for the rest, and the error
    /// text built only on the cold path.
    #[inline]
    pub(super) fn entry_at(&self, offset: usize, prev_key_len: usize) -> Result<EntryParts> {
        let Some((shared, unshared, value_len, key_start)) = self.varint_header(offset) else {
            return Err(self.entry_error(offset, EntryFault::Header));
        };
        // The tag is apart: only the previous user key can be shared.
        let shareable = prev_key_len.saturating_sub(TAG_LEN);
        if shared > shareable {
            return Err(self.entry_error(
                offset,
                EntryFault::Shared {
                    shared,
                    prev_key_len: shareable,
                },
            ));
        }
        let lengths = EntryFault::Lengths {
            unshared,
            value_len,
        };
        // Both lengths are below 2^32 and `key_start` within the block, so
        // neither sum can overflow a 64-bit usize; checked all the same.
        let Some(key_end) = key_start
            .checked_add(unshared)
            .filter(|&end| end <= self.entries_end)
        else {
            return Err(self.entry_error(offset, lengths));
        };
        let mut value_start = key_end;
        let tag = self
            .data
            .get(..self.entries_end)
            .and_then(|entries| get_varint64(entries, &mut value_start))
            .and_then(tag_of_stored);
        let Some(tag) = tag else {
            return Err(self.entry_error(offset, EntryFault::Tag));
        };
        match value_start.checked_add(value_len) {
            Some(value_end) if value_end <= self.entries_end => Ok(EntryParts {
                shared,
                key_delta: key_start..key_end,
                tag,
                value: value_start..value_end,
            }),
            _ => Err(self.entry_error(offset, lengths)),
        }
    }

    /// The header at `offset`: (shared, unshared, value length, key start),
    /// or `None` when it runs past the entries. Three one-byte lengths (every entry of short keys and values under 128
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
    pub(super) fn header_span(&self, offset: usize) -> &[u8] {
        let end = offset
            .saturating_add(MAX_VARINT_HEADER_LEN)
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

    pub(super) fn bytes(&self, range: Range<usize>) -> &[u8] {
        self.data.get(range).unwrap_or_default()
    }

    /// How the key stored at restart `i` (restart entries share nothing)
    /// orders against the internal key `target`, compared where it lies.
    pub(super) fn compare_restart(&self, i: usize, target: &[u8]) -> Result<Ordering> {
        let offset = self.restart_offset(i)?;
        let parts = self.entry_at(offset, 0)?;
        let stored = self.bytes(parts.key_delta);
        Ok(compare_split_internal_key(stored, parts.tag, target))
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
            joined.clear();
            joined.extend_from_slice(self.bytes(parts.key_delta.clone()));
            joined.extend_from_slice(&parts.tag.to_le_bytes());
            visit(&joined, self.bytes(parts.value.clone()))?;
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

    fn build(n: u32, interval: usize) -> Block {
        let mut b = BlockBuilder::new(interval);
        for i in 0..n {
            b.add(&ikey(i * 2), format!("v{i}").as_bytes()).unwrap();
        }
        Block::parse(Bytes::from(b.finish())).unwrap()
    }

    #[test]
    fn steps_back_over_every_key_and_seeks_for_prev() {
        for interval in [1, 2, 3, 16] {
            let block = build(100, interval);
            let mut it = block.iter();
            it.seek_to_last().unwrap();
            for i in (0..100).rev() {
                assert!(it.valid(), "interval {interval}, entry {i}");
                assert_eq!(it.key(), ikey(i * 2));
                assert_eq!(it.value_slice(), format!("v{i}").as_bytes());
                it.prev().unwrap();
            }
            assert!(!it.valid());
            // A step of an invalid cursor stays invalid.
            it.prev().unwrap();
            assert!(!it.valid());
            for t in 0..202 {
                it.seek_for_prev(&ikey(t)).unwrap();
                if t > 198 {
                    assert_eq!(it.key(), ikey(198), "target {t}");
                } else {
                    let want = t / 2 * 2;
                    assert_eq!(it.key(), ikey(want), "target {t}");
                }
                // Forward and back again from there.
                it.next().unwrap();
                if it.valid() {
                    it.prev().unwrap();
                    assert_eq!(it.key(), ikey((t / 2 * 2).min(198)), "target {t}");
                }
            }
        }
    }

    #[test]
    fn iterates_and_seeks_every_key() {
        for interval in [1, 2, 16] {
            let block = build(100, interval);
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
    fn a_packed_tag_takes_the_bytes_of_its_varint() {
        let size = |seq: u64| {
            let mut b = BlockBuilder::new(16);
            b.add(&internal_key(b"key", SeqNo(seq), ValueKind::Put), b"v")
                .unwrap();
            b.finish().len()
        };
        // Two bits of kind: a sequence number below 2^5 takes one byte, one
        // below 2^26 four.
        for seq in [
            0,
            1,
            63,
            64,
            1 << 13,
            (1 << 20) - 1,
            1 << 20,
            20_000_000,
            (1 << 26) - 1,
            1 << 48,
            (1 << 56) - 1,
        ] {
            assert_eq!(size(seq) - size(0), varint_len((seq << 2) | 1) - 1, "{seq}");
        }
        assert_eq!(varint_len(((1 << 26) - 1) << 2 | 1), 4);
    }

    #[test]
    fn versions_of_one_user_key_share_it_and_keep_their_own_tags() {
        let mut b = BlockBuilder::new(16);
        let keys: Vec<Vec<u8>> = [
            (&b"apple"[..], 9, ValueKind::Put),
            (b"apple", 3, ValueKind::Delete),
            (b"apply", 1 << 50, ValueKind::Put),
            (b"apply", 7, ValueKind::Merge),
            (b"apply", 0, ValueKind::Delete),
            (b"apricot", (1 << 56) - 1, ValueKind::Merge),
        ]
        .into_iter()
        .map(|(user, seq, kind)| internal_key(user, SeqNo(seq), kind))
        .collect();
        for key in &keys {
            b.add(key, b"v").unwrap();
        }
        let block = Block::parse(Bytes::from(b.finish())).unwrap();
        assert_eq!(block.check_structure().unwrap(), 6);
        let mut it = block.iter();
        for key in &keys {
            it.seek(key).unwrap();
            assert_eq!(it.key(), key.as_slice());
        }
        // A key without a whole tag cannot be stored.
        let mut short = BlockBuilder::new(16);
        assert!(short.add(b"1234567", b"v").is_err());
        assert!(short.is_empty());
        // A packed tag has two bits of kind: a kind byte of 4 is refused.
        let odd = [&b"key"[..], &((7u64 << 8) | 4).to_le_bytes()].concat();
        let mut packed = BlockBuilder::new(16);
        assert!(packed.add(&odd, b"v").is_err());
        assert!(packed.is_empty());
    }

    #[test]
    fn a_packed_tag_past_56_bits_of_sequence_number_is_corruption() {
        // shared 0, unshared 1, value 0, key "k", then the tag's varint.
        let block_of = |tag: u64| {
            let mut data = vec![0, 1, 0, b'k'];
            put_varint(&mut data, tag);
            data.extend_from_slice(&0u32.to_le_bytes());
            data.extend_from_slice(&1u32.to_le_bytes());
            Block::parse(Bytes::from(data)).unwrap()
        };
        let mut it = block_of(MAX_PACKED_TAG - 1).iter();
        it.seek_to_first().unwrap();
        assert_eq!(
            it.key(),
            internal_key(b"k", SeqNo((1 << 56) - 1), ValueKind::Merge)
        );
        // Past 56 bits of sequence number (no writer makes one).
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
    fn varints_longer_than_their_value_needs_are_refused() {
        // Zero and 1 in two bytes, 5 in three: refused as the codec refuses
        // them, with bytes after them (the word-at-once path) and without.
        for over in [&[0x80, 0x00][..], &[0x81, 0x00], &[0x85, 0x80, 0x00]] {
            let mut padded = over.to_vec();
            padded.extend_from_slice(&[0; 8]);
            for bytes in [over, &padded[..]] {
                assert_eq!(get_varint(bytes, &mut 0), None, "{bytes:02x?}");
                assert_eq!(get_varint64(bytes, &mut 0), None, "{bytes:02x?}");
            }
        }
        // The shortest forms of the same values are read.
        assert_eq!(
            get_varint64(&[0x81, 0x01, 0, 0, 0, 0, 0, 0, 0], &mut 0),
            Some(0x81)
        );
        assert_eq!(get_varint(&[0x00], &mut 0), Some(0));
    }

    #[test]
    fn long_keys_and_values_take_multi_byte_headers() {
        let key = internal_key(&[b'k'; 300], SeqNo(1), ValueKind::Put);
        let value = vec![7u8; 70_000];
        let mut b = BlockBuilder::new(16);
        b.add(&key, &value).unwrap();
        let block = Block::parse(Bytes::from(b.finish())).unwrap();
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
        fn error_or_well_formed(bytes: Vec<u8>) -> bool {
            let block = match Block::parse(Bytes::from(bytes)) {
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

        let block = build(20, 4);
        let bytes = block.data.to_vec();
        assert!(!error_or_well_formed(bytes.clone()));
        // Cutting the end cuts the restart array: every truncation is caught.
        for len in 0..bytes.len() {
            assert!(error_or_well_formed(bytes[..len].to_vec()), "cut at {len}");
        }
        let mut caught = 0;
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0xff;
            caught += usize::from(error_or_well_formed(bad));
        }
        // Flips inside keys and values can leave a well-formed block (the
        // trailer checksum, not this decoder, catches those); flips in the
        // lengths and restarts cannot.
        assert!(
            caught > bytes.len() / 4,
            "{caught} of {} flips caught",
            bytes.len()
        );
    }

    #[test]
    fn errors_are_corruption_located_by_the_table_layer() {
        let err = Block::parse(Bytes::from_static(&[1, 0, 0, 0])).unwrap_err();
        let location = BlockLocation::new("t.sst", BlockKind::Data, 0);
        let err = location.relocate(err).to_string();
        assert!(
            err.contains("table t.sst data block at offset 0: block:"),
            "{err}"
        );
    }

    #[test]
    fn restarts_off_entry_boundaries_are_caught() {
        let mut b = BlockBuilder::new(1);
        b.add(&ikey(1), b"a").unwrap();
        b.add(&ikey(2), b"b").unwrap();
        let mut bytes = b.finish();
        let n = bytes.len();
        // Point the second restart one byte into the second entry.
        let second = u32::from_le_bytes(bytes[n - 8..n - 4].try_into().unwrap());
        bytes[n - 8..n - 4].copy_from_slice(&(second + 1).to_le_bytes());
        let block = Block::parse(Bytes::from(bytes)).unwrap();
        assert!(block.check_structure().is_err());
    }
}
