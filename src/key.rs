//! Internal keys: a user key tagged with a sequence number and a kind.
//!
//! Owns: the encoding and the order of internal keys, shared by the
//! memtable, the tables and the iterators, and where a user key lies
//! against a range's bounds.
//! Must never: order two versions of one user key oldest-first — the newest
//! version of a key always sorts first, so a seek finds it first.

use std::cmp::Ordering;
use std::ops::Bound;

use crate::error::{Error, Result};

/// Largest user key accepted by the database, in bytes.
pub const MAX_KEY_LEN: usize = 64 * 1024;
/// Largest value accepted by the database, in bytes.
pub const MAX_VALUE_LEN: usize = 64 * 1024 * 1024;

/// A sequence number: every write gets the next one. 56 bits are usable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct SeqNo(pub u64);

impl SeqNo {
    /// The largest representable sequence number (2^56 − 1).
    pub const MAX: SeqNo = SeqNo((1 << 56) - 1);

    /// The next sequence number.
    pub fn next(self) -> SeqNo {
        SeqNo(self.0 + 1)
    }
}

/// What an internal key records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum ValueKind {
    /// A tombstone: the key was deleted at this sequence number.
    Delete = 0,
    /// A value was written at this sequence number.
    Put = 1,
    /// A merge operand was written at this sequence number: the key's value
    /// is the keyspace's merge operator applied to the older value and the
    /// operands since (see `Options::merge_operator`).
    Merge = 2,
    /// A value was written at this sequence number and kept in a blob
    /// file: the entry's value is a 24-byte blob pointer (see
    /// `docs/format.md`, "Blob file"). Only tables hold it, never the
    /// memtable or the log; readers see a put of the value it points to.
    Blob = 3,
}

impl ValueKind {
    /// The kind with the largest byte: among versions at one sequence
    /// number its tag is the largest, so an internal key of it sorts before
    /// every version at that sequence number (what a lookup seeks with).
    pub const SEEK: ValueKind = ValueKind::Blob;

    /// True for a put, whether its value is inline or in a blob file.
    pub fn is_put(self) -> bool {
        matches!(self, ValueKind::Put | ValueKind::Blob)
    }

    /// Decodes a kind byte.
    pub fn from_u8(byte: u8) -> Option<ValueKind> {
        match byte {
            0 => Some(ValueKind::Delete),
            1 => Some(ValueKind::Put),
            2 => Some(ValueKind::Merge),
            3 => Some(ValueKind::Blob),
            _ => None,
        }
    }
}

/// Length of the tag that follows the user key in an encoded internal key.
pub const TAG_LEN: usize = 8;

/// Packs sequence and kind into the 8-byte tag: `seq << 8 | kind`, little-endian.
pub fn tag(seq: SeqNo, kind: ValueKind) -> u64 {
    (seq.0 << 8) | kind as u64
}

/// Appends `user_key ‖ tag` to `out`.
pub fn encode_internal_key(out: &mut Vec<u8>, user_key: &[u8], seq: SeqNo, kind: ValueKind) {
    out.extend_from_slice(user_key);
    out.extend_from_slice(&tag(seq, kind).to_le_bytes());
}

/// An encoded internal key as an owned vector.
pub fn internal_key(user_key: &[u8], seq: SeqNo, kind: ValueKind) -> Vec<u8> {
    let mut out = Vec::with_capacity(user_key.len() + TAG_LEN);
    encode_internal_key(&mut out, user_key, seq, kind);
    out
}

/// A decoded view of an internal key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParsedKey<'a> {
    /// The key the application wrote.
    pub user_key: &'a [u8],
    /// When it was written.
    pub seq: SeqNo,
    /// Put or delete.
    pub kind: ValueKind,
}

/// Splits an encoded internal key; `Corruption` when too short or the kind is unknown.
pub fn parse_internal_key(encoded: &[u8]) -> Result<ParsedKey<'_>> {
    let Some((user_key, tag_bytes)) = encoded.split_last_chunk::<TAG_LEN>() else {
        return Err(Error::corruption(
            "internal key",
            format!("{} bytes, shorter than its 8-byte tag", encoded.len()),
        ));
    };
    let tag = u64::from_le_bytes(*tag_bytes);
    let kind = ValueKind::from_u8((tag & 0xff) as u8)
        .ok_or_else(|| Error::corruption("internal key", format!("unknown kind {}", tag & 0xff)))?;
    Ok(ParsedKey {
        user_key,
        seq: SeqNo(tag >> 8),
        kind,
    })
}

/// Bytes of a key's head (see [`key_head`]).
pub(crate) const KEY_HEAD_BYTES: usize = 16;

/// The first [`KEY_HEAD_BYTES`] bytes of `key` as a big-endian number, zero
/// padded: when two keys' heads differ, the keys compare as their heads do
/// (a shorter key's padding sorts like the end of the key it is), so a
/// sorted search compares numbers and reads the keys only on a tie.
#[inline]
pub(crate) fn key_head(key: &[u8]) -> u128 {
    let mut bytes = [0u8; KEY_HEAD_BYTES];
    for (to, from) in bytes.iter_mut().zip(key) {
        *to = *from;
    }
    u128::from_be_bytes(bytes)
}

/// The user-key part of an encoded internal key (the whole input if too short).
pub fn user_key_of(encoded: &[u8]) -> &[u8] {
    let split = encoded.len().saturating_sub(TAG_LEN);
    encoded.split_at(split).0
}

fn tag_of(encoded: &[u8]) -> u64 {
    let split = encoded.len().saturating_sub(TAG_LEN);
    let tail = encoded.split_at(split).1;
    let mut raw = [0u8; TAG_LEN];
    if let Some(dst) = raw.get_mut(..tail.len()) {
        dst.copy_from_slice(tail);
    }
    u64::from_le_bytes(raw)
}

/// An encoded internal key split into its user key and its tag (the last
/// [`TAG_LEN`] bytes, little-endian), or `None` when it is shorter than a
/// tag.
pub fn split_internal_key(encoded: &[u8]) -> Option<(&[u8], u64)> {
    let (user_key, tag) = encoded.split_at_checked(encoded.len().checked_sub(TAG_LEN)?)?;
    Some((user_key, u64::from_le_bytes(tag.try_into().ok()?)))
}

/// Internal-key order: user key ascending, then tag (sequence, kind) descending.
pub fn compare_internal_keys(a: &[u8], b: &[u8]) -> Ordering {
    // Not through `compare_split_internal_key`: `a`'s tag is read only when
    // the user keys tie, on the path every merge and seek takes.
    user_key_of(a)
        .cmp(user_key_of(b))
        .then_with(|| tag_of(b).cmp(&tag_of(a)))
}

/// [`compare_internal_keys`] for a key held as its two parts, a user key
/// and a tag (as a data block of table format 5 stores it), against an
/// encoded internal key.
pub fn compare_split_internal_key(user_key: &[u8], tag: u64, b: &[u8]) -> Ordering {
    user_key
        .cmp(user_key_of(b))
        .then_with(|| tag_of(b).cmp(&tag))
}

/// The internal key that sorts before every version of `user_key` visible at `snapshot`.
pub fn lookup_key(user_key: &[u8], snapshot: SeqNo) -> Vec<u8> {
    internal_key(user_key, snapshot, ValueKind::SEEK)
}

/// Whether some key is at or after `start` and before `end` (a
/// conservative answer for bounds between adjacent keys: true).
pub(crate) fn starts_before_end(start: &Bound<Vec<u8>>, end: &Bound<Vec<u8>>) -> bool {
    match (start, end) {
        (Bound::Unbounded, _) | (_, Bound::Unbounded) => true,
        (Bound::Included(s), Bound::Included(e)) => s <= e,
        (Bound::Included(s) | Bound::Excluded(s), Bound::Excluded(e))
        | (Bound::Excluded(s), Bound::Included(e)) => s < e,
    }
}

/// True when `user_key` lies after the range ending at `end`.
pub(crate) fn past_end_of(end: &Bound<Vec<u8>>, user_key: &[u8]) -> bool {
    match end {
        Bound::Included(end) => user_key > end.as_slice(),
        Bound::Excluded(end) => user_key >= end.as_slice(),
        Bound::Unbounded => false,
    }
}

/// True when `user_key` lies before the range starting at `start`.
pub(crate) fn before_start_of(start: &Bound<Vec<u8>>, user_key: &[u8]) -> bool {
    match start {
        Bound::Included(start) => user_key < start.as_slice(),
        Bound::Excluded(start) => user_key <= start.as_slice(),
        Bound::Unbounded => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unequal_heads_order_keys_as_the_keys_order() {
        let keys: [&[u8]; 9] = [
            b"",
            b"\0",
            b"a",
            b"a\0",
            b"a\x01",
            b"ab",
            b"0123456789abcdef",
            b"0123456789abcdefZ",
            b"0123456789abcdeg",
        ];
        for a in keys {
            for b in keys {
                let (ha, hb) = (key_head(a), key_head(b));
                if ha != hb {
                    assert_eq!(ha.cmp(&hb), a.cmp(b), "{a:?} {b:?}");
                }
            }
        }
        assert_eq!(key_head(b"a"), key_head(b"a\0"));
        assert_ne!(key_head(b"a"), key_head(b"b"));
    }

    #[test]
    fn newest_version_sorts_first() {
        let old = internal_key(b"k", SeqNo(1), ValueKind::Put);
        let new = internal_key(b"k", SeqNo(2), ValueKind::Delete);
        assert_eq!(compare_internal_keys(&new, &old), Ordering::Less);
    }

    #[test]
    fn user_key_order_wins_over_tag_even_for_prefixes() {
        let a = internal_key(b"a", SeqNo(1), ValueKind::Put);
        let ab = internal_key(b"ab", SeqNo(9), ValueKind::Put);
        assert_eq!(compare_internal_keys(&a, &ab), Ordering::Less);
        // Raw bytes would put "a"+tag after "a\0"+tag; user-key order must not.
        let a_nul = internal_key(b"a\x00", SeqNo(1), ValueKind::Put);
        assert_eq!(compare_internal_keys(&a, &a_nul), Ordering::Less);
    }

    #[test]
    fn a_split_key_orders_as_the_key_it_splits() {
        let keys: Vec<Vec<u8>> = [&b""[..], b"a", b"a\0", b"ab", b"b"]
            .into_iter()
            .flat_map(|user| {
                [
                    (1, ValueKind::Put),
                    (2, ValueKind::Delete),
                    (1 << 40, ValueKind::Put),
                ]
                .map(|(seq, kind)| internal_key(user, SeqNo(seq), kind))
            })
            .collect();
        for a in &keys {
            let parsed = parse_internal_key(a).unwrap();
            let tag = tag(parsed.seq, parsed.kind);
            for b in &keys {
                assert_eq!(
                    compare_split_internal_key(parsed.user_key, tag, b),
                    compare_internal_keys(a, b),
                    "{a:?} {b:?}"
                );
            }
        }
    }

    #[test]
    fn parse_round_trips_and_rejects_garbage() {
        let k = internal_key(b"user", SeqNo(42), ValueKind::Delete);
        let p = parse_internal_key(&k).unwrap();
        assert_eq!(
            (p.user_key, p.seq, p.kind),
            (&b"user"[..], SeqNo(42), ValueKind::Delete)
        );
        assert!(parse_internal_key(b"short").is_err());
        let mut bad = k.clone();
        let n = bad.len();
        bad[n - TAG_LEN] = 7;
        assert!(parse_internal_key(&bad).is_err());
    }

    #[test]
    fn lookup_key_precedes_all_visible_versions() {
        let probe = lookup_key(b"k", SeqNo(5));
        let visible = internal_key(b"k", SeqNo(5), ValueKind::Delete);
        let future = internal_key(b"k", SeqNo(6), ValueKind::Put);
        assert_ne!(compare_internal_keys(&probe, &visible), Ordering::Greater);
        assert_eq!(compare_internal_keys(&future, &probe), Ordering::Less);
    }
}
