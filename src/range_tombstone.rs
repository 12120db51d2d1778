//! Range tombstones: "every key in `[start, end)` is deleted at sequence
//! number `seq`", as written by `Db::delete_range`, and their fragmented
//! form, in which memtables, tables and scans look them up.
//!
//! A range is kept half-open, `[start, end)`, with an unbounded end
//! (`None`) for a range with no upper bound; [`normalize_range`] turns any
//! `RangeBounds` into that form (an excluded start or an included end
//! becomes the next key, [`key_successor`]). Overlapping tombstones are cut
//! into *fragments* (after RocksDB's `FragmentedRangeTombstoneList`): pieces
//! that do not overlap, in key order, each with the sequence numbers of
//! every tombstone that covers it, newest first. A lookup is then a binary
//! search for the one fragment holding the key and a walk down its
//! sequence numbers to the first the reader's snapshot sees.
//!
//! Owns: [`RangeTombstone`], [`normalize_range`], [`key_successor`],
//! [`FragmentedTombstones`] (fragmenting, lookup, clipping to a table's
//! range, the question "does a newer tombstone cover this whole key
//! range"), and the range tombstone block's byte layout
//! (`docs/format.md`, "Range tombstone block") with its decoder.
//! Must never: lose the coverage of a tombstone when fragmenting, merging
//! or clipping (within the clipped range), accept a block whose fragments
//! overlap, are out of order or whose sequence numbers are not strictly
//! decreasing, panic on untrusted bytes, or allocate from a count it has
//! not bounded by the bytes that remain.
//!
//! ```
//! use siftdb::internals::key::SeqNo;
//! use siftdb::internals::range_tombstone::{FragmentedTombstones, RangeTombstone};
//!
//! let list = FragmentedTombstones::new([
//!     RangeTombstone::new(b"a".to_vec(), Some(b"m".to_vec()), SeqNo(5)),
//!     RangeTombstone::new(b"f".to_vec(), None, SeqNo(9)),
//! ]);
//! // Three fragments: [a, f) at 5, [f, m) at 9 and 5, [m, ∞) at 9.
//! assert_eq!(list.len(), 3);
//! assert_eq!(list.covering_seq(b"g", SeqNo::MAX), Some(SeqNo(9)));
//! assert_eq!(list.covering_seq(b"g", SeqNo(8)), Some(SeqNo(5)));
//! assert_eq!(list.covering_seq(b"zz", SeqNo(8)), None);
//! let decoded = FragmentedTombstones::decode(&list.encode())?;
//! assert_eq!(decoded, list);
//! # Ok::<(), siftdb::Error>(())
//! ```

use std::cmp::{Ordering, Reverse};
use std::collections::BTreeMap;
use std::ops::{Bound, RangeBounds};

use crate::codec::{put_varint, ByteReader};
use crate::error::{Error, Result};
use crate::key::{SeqNo, MAX_KEY_LEN};

const WHAT: &str = "range tombstone block";

/// The fewest bytes one encoded fragment takes: an empty start (its
/// length), an unbounded end (one byte), one sequence number (its count and
/// the number).
const MIN_FRAGMENT_LEN: usize = 4;

/// Every key in `[start, end)` deleted at `seq`; `end: None` has no upper
/// bound.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeTombstone {
    /// The first key deleted.
    pub start: Vec<u8>,
    /// The first key past the range; `None`: no key is past it.
    pub end: Option<Vec<u8>>,
    /// The sequence number of the delete.
    pub seq: SeqNo,
}

impl RangeTombstone {
    /// The tombstone of `[start, end)` at `seq`.
    pub fn new(start: Vec<u8>, end: Option<Vec<u8>>, seq: SeqNo) -> RangeTombstone {
        RangeTombstone { start, end, seq }
    }

    /// True when no key lies in the range.
    pub fn is_empty(&self) -> bool {
        self.end
            .as_deref()
            .is_some_and(|end| end <= self.start.as_slice())
    }
}

/// The smallest key of at most [`MAX_KEY_LEN`] bytes that sorts after
/// `key`, or `None` when none does (`key` is [`MAX_KEY_LEN`] bytes of
/// `0xff`). Below the limit it is `key ‖ 0`; at the limit, the key with its
/// trailing `0xff` bytes cut and its last byte incremented (the keys in
/// between would be longer than any key the database takes).
pub fn key_successor(key: &[u8]) -> Option<Vec<u8>> {
    if key.len() < MAX_KEY_LEN {
        let mut next = Vec::with_capacity(key.len() + 1);
        next.extend_from_slice(key);
        next.push(0);
        return Some(next);
    }
    let kept = key.iter().rposition(|&b| b != 0xff)?;
    let mut next = key.get(..=kept)?.to_vec();
    if let Some(last) = next.last_mut() {
        *last += 1;
    }
    Some(next)
}

/// A range as `(start, end)`: `[start, end)`, `end: None` unbounded.
pub type HalfOpen = (Vec<u8>, Option<Vec<u8>>);

/// The half-open form `[start, end)` of `range` (`end: None`: unbounded),
/// or `None` when the range holds no key. `InvalidArgument` for a bound
/// longer than [`MAX_KEY_LEN`] or a range whose start sorts after its end
/// (`b..a`); a range of no key (`a..a`) is not an error.
pub fn normalize_range<K: AsRef<[u8]>>(range: &impl RangeBounds<K>) -> Result<Option<HalfOpen>> {
    let start = range.start_bound().map(AsRef::as_ref);
    let end = range.end_bound().map(AsRef::as_ref);
    for bound in [start, end] {
        if let Bound::Included(key) | Bound::Excluded(key) = bound {
            if key.len() > MAX_KEY_LEN {
                return Err(Error::invalid(format!(
                    "range bound of {} bytes exceeds the maximum key length of {MAX_KEY_LEN}",
                    key.len()
                )));
            }
        }
    }
    if let (Bound::Included(s) | Bound::Excluded(s), Bound::Included(e) | Bound::Excluded(e)) =
        (start, end)
    {
        if s > e {
            return Err(Error::invalid(format!(
                "range start {:?} sorts after its end {:?}",
                bytes::Bytes::copy_from_slice(s),
                bytes::Bytes::copy_from_slice(e)
            )));
        }
    }
    let start = match start {
        Bound::Included(key) => key.to_vec(),
        Bound::Excluded(key) => match key_successor(key) {
            Some(next) => next,
            None => return Ok(None),
        },
        Bound::Unbounded => Vec::new(),
    };
    let end = match end {
        Bound::Included(key) => key_successor(key),
        Bound::Excluded(key) => Some(key.to_vec()),
        Bound::Unbounded => None,
    };
    if end.as_deref().is_some_and(|end| end <= start.as_slice()) {
        return Ok(None);
    }
    Ok(Some((start, end)))
}

/// The largest key of at most [`MAX_KEY_LEN`] bytes below the exclusive
/// end `end`, when it is `end` without a trailing zero byte; otherwise
/// `end` itself (an inclusive bound one key too wide, which costs a
/// table a lookup it answers with nothing). For an unbounded end,
/// [`MAX_KEY_LEN`] bytes of `0xff`: the largest key there is.
pub fn inclusive_upper_bound(end: Option<&[u8]>) -> Vec<u8> {
    match end {
        Some([kept @ .., 0]) => kept.to_vec(),
        Some(end) => end.to_vec(),
        None => vec![0xff; MAX_KEY_LEN],
    }
}

/// One piece of a [`FragmentedTombstones`]: `[start, end)` covered by
/// tombstones of the sequence numbers `seqs`, newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fragment {
    /// The first key covered.
    pub start: Vec<u8>,
    /// The first key past it; `None`: unbounded.
    pub end: Option<Vec<u8>>,
    /// The sequence numbers of the tombstones that cover it, strictly
    /// decreasing, never empty.
    pub seqs: Vec<SeqNo>,
}

impl Fragment {
    fn contains(&self, key: &[u8]) -> bool {
        self.start.as_slice() <= key && self.end.as_deref().is_none_or(|end| key < end)
    }

    /// The newest sequence number covering the fragment.
    pub fn newest(&self) -> SeqNo {
        self.seqs.first().copied().unwrap_or_default()
    }
}

/// Range tombstones cut into fragments that do not overlap, in key order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FragmentedTombstones {
    fragments: Vec<Fragment>,
}

/// An end bound compared with another (`None` is past every key).
fn cmp_end(a: Option<&[u8]>, b: Option<&[u8]>) -> Ordering {
    match (a, b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Greater,
        (Some(_), None) => Ordering::Less,
        (Some(a), Some(b)) => a.cmp(b),
    }
}

impl FragmentedTombstones {
    /// The fragments of `tombstones` (empty ones ignored).
    pub fn new(tombstones: impl IntoIterator<Item = RangeTombstone>) -> FragmentedTombstones {
        let tombstones: Vec<RangeTombstone> =
            tombstones.into_iter().filter(|t| !t.is_empty()).collect();
        // A sweep over every start and end: at each boundary the set of
        // tombstones covering the keys up to the next one is known.
        let mut events: Vec<(&[u8], bool, SeqNo)> = Vec::with_capacity(tombstones.len() * 2);
        for t in &tombstones {
            events.push((&t.start, true, t.seq));
            if let Some(end) = &t.end {
                events.push((end, false, t.seq));
            }
        }
        events.sort_by(|a, b| a.0.cmp(b.0));
        let mut active: BTreeMap<Reverse<SeqNo>, usize> = BTreeMap::new();
        let mut fragments: Vec<Fragment> = Vec::new();
        let mut at = 0;
        while let Some(&(key, _, _)) = events.get(at) {
            while let Some(&(_, add, seq)) = events.get(at).filter(|e| e.0 == key) {
                if add {
                    *active.entry(Reverse(seq)).or_default() += 1;
                } else if let Some(count) = active.get_mut(&Reverse(seq)) {
                    *count -= 1;
                    if *count == 0 {
                        active.remove(&Reverse(seq));
                    }
                }
                at += 1;
            }
            if active.is_empty() {
                continue;
            }
            let seqs: Vec<SeqNo> = active.keys().map(|s| s.0).collect();
            let end = events.get(at).map(|e| e.0.to_vec());
            match fragments.last_mut() {
                // Two pieces side by side with the same tombstones are one.
                Some(last) if last.end.as_deref() == Some(key) && last.seqs == seqs => {
                    last.end = end;
                }
                _ => fragments.push(Fragment {
                    start: key.to_vec(),
                    end,
                    seqs,
                }),
            }
        }
        FragmentedTombstones { fragments }
    }

    /// The fragments of every tombstone of every list in `lists`.
    pub fn merged<'a>(
        lists: impl IntoIterator<Item = &'a FragmentedTombstones>,
    ) -> FragmentedTombstones {
        FragmentedTombstones::new(lists.into_iter().flat_map(FragmentedTombstones::tombstones))
    }

    /// The tombstones the fragments stand for, one per fragment and
    /// sequence number (covering exactly what the originals covered).
    pub fn tombstones(&self) -> impl Iterator<Item = RangeTombstone> + '_ {
        self.fragments.iter().flat_map(|f| {
            f.seqs
                .iter()
                .map(|&seq| RangeTombstone::new(f.start.clone(), f.end.clone(), seq))
        })
    }

    /// The fragments, in key order.
    pub fn fragments(&self) -> &[Fragment] {
        &self.fragments
    }

    /// Number of fragments.
    pub fn len(&self) -> usize {
        self.fragments.len()
    }

    /// True when no key is covered.
    pub fn is_empty(&self) -> bool {
        self.fragments.is_empty()
    }

    /// The newest sequence number at most `snapshot` of a tombstone
    /// covering `key`, if any.
    pub fn covering_seq(&self, key: &[u8], snapshot: SeqNo) -> Option<SeqNo> {
        let after = self
            .fragments
            .partition_point(|f| f.start.as_slice() <= key);
        let fragment = self
            .fragments
            .get(after.checked_sub(1)?)
            .filter(|f| f.contains(key))?;
        fragment.seqs.iter().copied().find(|&seq| seq <= snapshot)
    }

    /// The same coverage as seen at `snapshot`: only sequence numbers at or
    /// below it, and of those only the newest per fragment.
    pub fn visible_at(&self, snapshot: SeqNo) -> FragmentedTombstones {
        let fragments = self
            .fragments
            .iter()
            .filter_map(|f| {
                let seq = f.seqs.iter().copied().find(|&seq| seq <= snapshot)?;
                Some(Fragment {
                    start: f.start.clone(),
                    end: f.end.clone(),
                    seqs: vec![seq],
                })
            })
            .collect();
        FragmentedTombstones { fragments }
    }

    /// The part within `[lo, hi)` (`hi: None`: no upper limit).
    pub fn clipped(&self, lo: &[u8], hi: Option<&[u8]>) -> FragmentedTombstones {
        let fragments = self
            .fragments
            .iter()
            .filter_map(|f| {
                let start = f.start.as_slice().max(lo);
                let end = match cmp_end(f.end.as_deref(), hi) {
                    Ordering::Greater => hi,
                    _ => f.end.as_deref(),
                };
                if end.is_some_and(|end| end <= start) {
                    return None;
                }
                Some(Fragment {
                    start: start.to_vec(),
                    end: end.map(<[u8]>::to_vec),
                    seqs: f.seqs.clone(),
                })
            })
            .collect();
        FragmentedTombstones { fragments }
    }

    /// The fragments holding any key from `lo` to `hi` (both included;
    /// `None`: no limit), whole (not clipped): found by binary search.
    pub fn overlapping(&self, lo: Option<&[u8]>, hi: Option<&[u8]>) -> FragmentedTombstones {
        // Fragments are disjoint and in order: their ends increase too.
        let first = lo.map_or(0, |lo| {
            self.fragments
                .partition_point(|f| f.end.as_deref().is_some_and(|end| end <= lo))
        });
        let past = hi.map_or(self.fragments.len(), |hi| {
            self.fragments.partition_point(|f| f.start.as_slice() <= hi)
        });
        let fragments = self
            .fragments
            .get(first..past.max(first))
            .unwrap_or_default()
            .to_vec();
        FragmentedTombstones { fragments }
    }

    /// True when tombstones newer than `above` cover every key from
    /// `smallest` to `largest` (both included): then every entry of a table
    /// of that key range whose sequence numbers are at most `above` is
    /// deleted.
    pub fn covers_range(&self, smallest: &[u8], largest: &[u8], above: SeqNo) -> bool {
        let first = self
            .fragments
            .partition_point(|f| f.start.as_slice() <= smallest);
        let Some(mut at) = first.checked_sub(1) else {
            return false;
        };
        let mut from = smallest;
        while let Some(f) = self.fragments.get(at) {
            if !f.contains(from) || f.newest() <= above {
                return false;
            }
            match f.end.as_deref() {
                None => return true,
                Some(end) if end > largest => return true,
                Some(end) => from = end,
            }
            at += 1;
        }
        false
    }

    /// The first key covered.
    pub fn smallest_key(&self) -> Option<&[u8]> {
        self.fragments.first().map(|f| f.start.as_slice())
    }

    /// The end of the last fragment (`Some(None)`: unbounded), or `None`
    /// when empty.
    pub fn end(&self) -> Option<Option<&[u8]>> {
        self.fragments.last().map(|f| f.end.as_deref())
    }

    /// The smallest and largest sequence numbers of any tombstone.
    pub fn seq_range(&self) -> Option<(SeqNo, SeqNo)> {
        let seqs = self.fragments.iter().flat_map(|f| f.seqs.iter().copied());
        seqs.fold(None, |range, seq| match range {
            None => Some((seq, seq)),
            Some((lo, hi)) => Some((lo.min(seq), hi.max(seq))),
        })
    }

    /// Bytes of memory held (keys and sequence numbers).
    pub fn heap_bytes(&self) -> usize {
        self.fragments
            .iter()
            .map(|f| {
                std::mem::size_of::<Fragment>()
                    + f.start.len()
                    + f.end.as_ref().map_or(0, Vec::len)
                    + f.seqs.len() * 8
            })
            .sum()
    }

    /// The block's bytes (`docs/format.md`, "Range tombstone block"):
    /// `varint count`, then per fragment `varint start length ‖ start`,
    /// `varint (end length + 1) ‖ end` (0 for an unbounded end),
    /// `varint seq count`, the newest sequence number as a varint and each
    /// older one as a varint of its distance from the one before.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        put_varint(&mut out, self.fragments.len() as u64);
        for f in &self.fragments {
            put_varint(&mut out, f.start.len() as u64);
            out.extend_from_slice(&f.start);
            match &f.end {
                Some(end) => {
                    put_varint(&mut out, end.len() as u64 + 1);
                    out.extend_from_slice(end);
                }
                None => out.push(0),
            }
            put_varint(&mut out, f.seqs.len() as u64);
            let mut previous: Option<SeqNo> = None;
            for &seq in &f.seqs {
                put_varint(&mut out, previous.map_or(seq.0, |p| p.0 - seq.0));
                previous = Some(seq);
            }
        }
        out
    }

    /// Decodes [`FragmentedTombstones::encode`]'s bytes. `Corruption` when
    /// they are short or long, a key is longer than [`MAX_KEY_LEN`], a
    /// fragment is empty, overlaps or precedes the one before it, an
    /// unbounded fragment is not the last, or sequence numbers are not
    /// strictly decreasing within [`SeqNo::MAX`].
    pub fn decode(bytes: &[u8]) -> Result<FragmentedTombstones> {
        let mut reader = ByteReader::new(bytes, WHAT);
        let count = reader.varint(u64::from(u32::MAX))?;
        let possible = reader.remaining() / MIN_FRAGMENT_LEN;
        if count > possible as u64 {
            return Err(Error::corruption(
                WHAT,
                format!(
                    "{count} fragments cannot fit in the {} bytes that remain",
                    reader.remaining()
                ),
            ));
        }
        let count = usize::try_from(count).unwrap_or(usize::MAX);
        let mut fragments: Vec<Fragment> = Vec::with_capacity(count);
        for index in 0..count {
            let fragment = read_fragment(&mut reader).map_err(|e| {
                Error::corruption(WHAT, format!("fragment {index}: {}", e.detail()))
            })?;
            if let Some(before) = fragments.last() {
                let in_order = before
                    .end
                    .as_deref()
                    .is_some_and(|end| end <= fragment.start.as_slice());
                if !in_order {
                    return Err(Error::corruption(
                        WHAT,
                        format!("fragment {index} overlaps or precedes the one before it"),
                    ));
                }
            }
            fragments.push(fragment);
        }
        reader.finish()?;
        Ok(FragmentedTombstones { fragments })
    }
}

fn read_fragment(reader: &mut ByteReader<'_>) -> Result<Fragment> {
    let start = reader.varint_prefixed(MAX_KEY_LEN as u64)?.to_vec();
    let end = match reader.varint(MAX_KEY_LEN as u64 + 1)? {
        0 => None,
        len_plus_one => {
            let len = usize::try_from(len_plus_one - 1).unwrap_or(usize::MAX);
            Some(reader.take(len)?.to_vec())
        }
    };
    if end.as_deref().is_some_and(|end| end <= start.as_slice()) {
        return Err(Error::corruption(WHAT, "an empty fragment"));
    }
    let count = reader.varint(u64::from(u32::MAX))?;
    if count == 0 || count > reader.remaining() as u64 {
        return Err(Error::corruption(
            WHAT,
            format!("{count} sequence numbers in {} bytes", reader.remaining()),
        ));
    }
    let count = usize::try_from(count).unwrap_or(usize::MAX);
    let mut seqs = Vec::with_capacity(count);
    let mut previous: Option<SeqNo> = None;
    for _ in 0..count {
        let raw = reader.varint(SeqNo::MAX.0)?;
        let seq = match previous {
            None => SeqNo(raw),
            Some(p) => match p.0.checked_sub(raw) {
                Some(seq) if raw > 0 => SeqNo(seq),
                _ => {
                    return Err(Error::corruption(
                        WHAT,
                        "sequence numbers not strictly decreasing",
                    ))
                }
            },
        };
        seqs.push(seq);
        previous = Some(seq);
    }
    Ok(Fragment { start, end, seqs })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(start: &str, end: Option<&str>, seq: u64) -> RangeTombstone {
        RangeTombstone::new(
            start.as_bytes().to_vec(),
            end.map(|e| e.as_bytes().to_vec()),
            SeqNo(seq),
        )
    }

    fn snapshot_max() -> u64 {
        SeqNo::MAX.0
    }

    /// The newest seq ≤ snapshot covering `key`, from the tombstones as given.
    fn brute(tombstones: &[RangeTombstone], key: &[u8], snapshot: SeqNo) -> Option<SeqNo> {
        tombstones
            .iter()
            .filter(|t| {
                t.seq <= snapshot
                    && t.start.as_slice() <= key
                    && t.end.as_deref().is_none_or(|e| key < e)
            })
            .map(|t| t.seq)
            .max()
    }

    #[test]
    fn fragments_answer_as_the_tombstones_do() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut rand = |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        let key = |i: u64| vec![b'a' + (i % 26) as u8; 1 + (i / 26) as usize % 2];
        for _round in 0..200 {
            let tombstones: Vec<RangeTombstone> = (0..rand(8))
                .map(|i| {
                    let start = key(rand(52));
                    let end = (rand(5) != 0).then(|| key(rand(52)));
                    RangeTombstone::new(start, end, SeqNo(1 + i * 3 + rand(3)))
                })
                .collect();
            let list = FragmentedTombstones::new(tombstones.clone());
            for pair in list.fragments().windows(2) {
                assert!(pair[0]
                    .end
                    .as_deref()
                    .is_some_and(|e| e <= pair[1].start.as_slice()));
            }
            assert_eq!(FragmentedTombstones::decode(&list.encode()).unwrap(), list);
            assert_eq!(FragmentedTombstones::merged([&list, &list]), list);
            for probe in 0..60 {
                let k = key(probe);
                for snapshot in [0, 2, 5, 9, 30] {
                    assert_eq!(
                        list.covering_seq(&k, SeqNo(snapshot)),
                        brute(&tombstones, &k, SeqNo(snapshot)),
                        "{k:?} at {snapshot} in {tombstones:?}"
                    );
                    assert_eq!(
                        list.visible_at(SeqNo(snapshot))
                            .covering_seq(&k, SeqNo::MAX),
                        brute(&tombstones, &k, SeqNo(snapshot))
                    );
                }
                let near = list.overlapping(Some(b"c"), Some(b"p"));
                let in_near = k.as_slice() >= b"c".as_slice() && k.as_slice() <= b"p".as_slice();
                if in_near {
                    assert_eq!(
                        near.covering_seq(&k, SeqNo(snapshot_max())),
                        list.covering_seq(&k, SeqNo(snapshot_max()))
                    );
                }
                let clipped = list.clipped(b"c", Some(b"p"));
                let inside = k.as_slice() >= b"c".as_slice() && k.as_slice() < b"p".as_slice();
                assert_eq!(
                    clipped.covering_seq(&k, SeqNo::MAX),
                    if inside {
                        brute(&tombstones, &k, SeqNo::MAX)
                    } else {
                        None
                    }
                );
            }
        }
    }

    #[test]
    fn whole_ranges_are_covered_only_by_newer_contiguous_fragments() {
        let list = FragmentedTombstones::new([t("b", Some("f"), 10), t("f", Some("k"), 12)]);
        assert!(list.covers_range(b"b", b"j", SeqNo(9)));
        assert!(list.covers_range(b"c", b"jzzz", SeqNo(9)));
        assert!(!list.covers_range(b"b", b"k", SeqNo(9)));
        assert!(!list.covers_range(b"a", b"c", SeqNo(9)));
        assert!(!list.covers_range(b"b", b"j", SeqNo(10)));
        assert!(list.covers_range(b"g", b"j", SeqNo(11)));
        let gap = FragmentedTombstones::new([t("b", Some("f"), 10), t("g", None, 12)]);
        assert!(!gap.covers_range(b"c", b"h", SeqNo(1)));
        assert!(gap.covers_range(b"g", b"\xff\xff", SeqNo(1)));
    }

    #[test]
    fn ranges_normalize_to_half_open_form() {
        let n = |r: (Bound<&[u8]>, Bound<&[u8]>)| {
            normalize_range(&(r.0.map(<[u8]>::to_vec), r.1.map(<[u8]>::to_vec)))
        };
        use Bound::{Excluded as X, Included as I, Unbounded as U};
        assert_eq!(
            n((I(b"a"), X(b"c"))).unwrap(),
            Some((b"a".to_vec(), Some(b"c".to_vec())))
        );
        assert_eq!(
            n((X(b"a"), I(b"c"))).unwrap(),
            Some((b"a\0".to_vec(), Some(b"c\0".to_vec())))
        );
        assert_eq!(n((U, U)).unwrap(), Some((Vec::new(), None)));
        assert_eq!(n((I(b"a"), X(b"a"))).unwrap(), None);
        assert_eq!(n((X(b"a"), I(b"a"))).unwrap(), None);
        assert_eq!(
            n((I(b"a"), I(b"a"))).unwrap(),
            Some((b"a".to_vec(), Some(b"a\0".to_vec())))
        );
        assert!(matches!(
            n((I(b"b"), X(b"a"))),
            Err(Error::InvalidArgument(_))
        ));
        let long = vec![1u8; MAX_KEY_LEN + 1];
        assert!(matches!(n((I(&long), U)), Err(Error::InvalidArgument(_))));
        let top = vec![0xffu8; MAX_KEY_LEN];
        assert_eq!(n((X(&top), U)).unwrap(), None);
        assert_eq!(n((I(b"a"), I(&top))).unwrap(), Some((b"a".to_vec(), None)));
        let mut edge = vec![7u8; MAX_KEY_LEN];
        edge[MAX_KEY_LEN - 1] = 0xff;
        let mut next = vec![7u8; MAX_KEY_LEN - 1];
        next[MAX_KEY_LEN - 2] = 8;
        assert_eq!(key_successor(&edge), Some(next));
        assert_eq!(inclusive_upper_bound(Some(b"ab\0")), b"ab".to_vec());
        assert_eq!(inclusive_upper_bound(Some(b"ab")), b"ab".to_vec());
    }

    #[test]
    fn the_block_layout_is_as_documented() {
        let list = FragmentedTombstones::new([t("a", Some("m"), 5), t("f", None, 9)]);
        let expected = [
            3, 1, b'a', 2, b'f', 1, 5, 1, b'f', 2, b'm', 2, 9, 4, 1, b'm', 0, 1, 9,
        ];
        assert_eq!(list.encode(), expected);
    }

    #[test]
    fn damaged_blocks_are_refused() {
        let list = FragmentedTombstones::new([t("a", Some("c"), 7), t("b", None, 9)]);
        let bytes = list.encode();
        for len in 0..bytes.len() {
            assert!(FragmentedTombstones::decode(&bytes[..len]).is_err());
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(FragmentedTombstones::decode(&longer).is_err());
        // Out of order, empty and overlapping fragments, equal seqs.
        let bad = [
            vec![2, 1, b'b', 2, b'c', 1, 1, 1, b'a', 2, b'b', 1, 1],
            vec![1, 1, b'b', 2, b'b', 1, 1],
            vec![2, 1, b'a', 0, 1, 1, 1, b'b', 2, b'c', 1, 1],
            vec![1, 1, b'a', 2, b'b', 2, 5, 0],
            vec![0xff, 0xff, 0xff, 0xff, 0x0f],
        ];
        for block in bad {
            assert!(FragmentedTombstones::decode(&block).is_err(), "{block:?}");
        }
    }
}
