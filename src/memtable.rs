//! The memtable: recent writes, in memory, sorted by internal key, until a
//! flush turns them into a table.
//!
//! Owns: [`Memtable`] (a lock-free skiplist of internal key → value) and
//! [`MemtableIter`], the cursor that keeps its memtable alive.
//! Must never: show a version newer than the reader's snapshot, or order two
//! versions of one key other than newest first
//! ([`compare_internal_keys`](crate::key::compare_internal_keys)).
//!
//! ```
//! use siftdb::key::{SeqNo, ValueKind};
//! use siftdb::memtable::{Memtable, MemValue};
//!
//! let table = Memtable::new();
//! table.insert(b"k", SeqNo(1), ValueKind::Put, b"old");
//! table.insert(b"k", SeqNo(2), ValueKind::Delete, b"");
//! assert_eq!(table.get(b"k", SeqNo(1)), Some(MemValue::Put("old".into())));
//! assert_eq!(table.get(b"k", SeqNo(2)), Some(MemValue::Deleted));
//! assert_eq!(table.get(b"k", SeqNo(0)), None);
//! ```

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::collections::VecDeque;
use std::ops::{Bound, RangeBounds};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering as AtomicOrdering};
use std::sync::Arc;

use bytes::Bytes;
use crossbeam_skiplist::SkipMap;

use crate::key::{tag, user_key_of, SeqNo, ValueKind, TAG_LEN};

/// Bookkeeping bytes charged per entry on top of its key and value (skiplist
/// node, tower, reference counts), so many tiny entries still fill a memtable.
pub const ENTRY_OVERHEAD: usize = 64;

/// What the memtable knows about a key at a snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MemValue {
    /// The newest visible version is this value.
    Put(Bytes),
    /// The newest visible version is a tombstone: the key is deleted, and
    /// older tables must not be consulted.
    Deleted,
}

/// Something that can be compared as an internal key without being one in
/// memory: lets a lookup probe the skiplist from a stack value (no allocation).
trait InternalKeyView {
    fn user_key(&self) -> &[u8];
    fn tag(&self) -> u64;
}

impl Ord for dyn InternalKeyView + '_ {
    fn cmp(&self, other: &Self) -> Ordering {
        self.user_key()
            .cmp(other.user_key())
            .then_with(|| other.tag().cmp(&self.tag()))
    }
}

impl PartialOrd for dyn InternalKeyView + '_ {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for dyn InternalKeyView + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for dyn InternalKeyView + '_ {}

/// An encoded internal key stored in the skiplist.
#[derive(Debug, Clone)]
struct MemKey(Bytes);

fn tag_bytes_of(encoded: &[u8]) -> u64 {
    let split = encoded.len().saturating_sub(TAG_LEN);
    let mut raw = [0u8; TAG_LEN];
    if let (Some(dst), Some(src)) = (raw.get_mut(..encoded.len() - split), encoded.get(split..)) {
        dst.copy_from_slice(src);
    }
    u64::from_le_bytes(raw)
}

impl InternalKeyView for MemKey {
    fn user_key(&self) -> &[u8] {
        user_key_of(&self.0)
    }
    fn tag(&self) -> u64 {
        tag_bytes_of(&self.0)
    }
}

/// A probe: a user key and a tag, compared like the internal key they encode.
struct Probe<'a> {
    user_key: &'a [u8],
    tag: u64,
}

impl InternalKeyView for Probe<'_> {
    fn user_key(&self) -> &[u8] {
        self.user_key
    }
    fn tag(&self) -> u64 {
        self.tag
    }
}

/// An arbitrary encoded internal key used as a probe.
struct RawKey<'a>(&'a [u8]);

impl InternalKeyView for RawKey<'_> {
    fn user_key(&self) -> &[u8] {
        user_key_of(self.0)
    }
    fn tag(&self) -> u64 {
        tag_bytes_of(self.0)
    }
}

impl<'a> Borrow<dyn InternalKeyView + 'a> for MemKey {
    fn borrow(&self) -> &(dyn InternalKeyView + 'a) {
        self
    }
}

impl Ord for MemKey {
    fn cmp(&self, other: &Self) -> Ordering {
        // Through the view, so the skiplist's order and the probes' order
        // are one function (the `Borrow` contract), equal to
        // `compare_internal_keys` (checked by a test).
        (self as &dyn InternalKeyView).cmp(other as &dyn InternalKeyView)
    }
}

impl PartialOrd for MemKey {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl PartialEq for MemKey {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for MemKey {}

/// Sorted, concurrent, in-memory writes: internal key → value.
#[derive(Debug, Default)]
pub struct Memtable {
    map: SkipMap<MemKey, Bytes>,
    approximate_bytes: AtomicUsize,
    max_seq: AtomicU64,
}

impl Memtable {
    /// An empty memtable.
    pub fn new() -> Memtable {
        Memtable::default()
    }

    /// Records that `user_key` got `value` (or a tombstone) at `seq`.
    /// Safe to call from many threads at once; each (key, seq) pair is
    /// expected once — a second insert of the same pair replaces the first.
    pub fn insert(&self, user_key: &[u8], seq: SeqNo, kind: ValueKind, value: &[u8]) {
        // Key and value share one allocation.
        let mut buffer = Vec::with_capacity(user_key.len() + TAG_LEN + value.len());
        buffer.extend_from_slice(user_key);
        buffer.extend_from_slice(&tag(seq, kind).to_le_bytes());
        buffer.extend_from_slice(value);
        let buffer = Bytes::from(buffer);
        let charged = buffer.len() + ENTRY_OVERHEAD;
        let key_len = user_key.len() + TAG_LEN;
        let key = buffer.slice(..key_len);
        let value = buffer.slice(key_len..);
        self.map.insert(MemKey(key), value);
        self.approximate_bytes
            .fetch_add(charged, AtomicOrdering::Relaxed);
        self.max_seq.fetch_max(seq.0, AtomicOrdering::AcqRel);
    }

    /// The newest version of `user_key` with a sequence number at most
    /// `snapshot`, or `None` when the memtable holds no such version.
    pub fn get(&self, user_key: &[u8], snapshot: SeqNo) -> Option<MemValue> {
        // Among versions at one sequence number the Put tag is the largest,
        // so this probe sorts before every version visible at `snapshot`.
        let probe = Probe {
            user_key,
            tag: tag(snapshot, ValueKind::Put),
        };
        let entry = self
            .map
            .lower_bound(Bound::Included(&probe as &dyn InternalKeyView))?;
        let key = entry.key();
        if key.user_key() != user_key {
            return None;
        }
        match ValueKind::from_u8((key.tag() & 0xff) as u8) {
            Some(ValueKind::Put) => Some(MemValue::Put(entry.value().clone())),
            // The memtable only holds keys it encoded itself; an unknown
            // kind cannot occur, and reading it as a tombstone hides nothing older.
            Some(ValueKind::Delete) | None => Some(MemValue::Deleted),
        }
    }

    /// Every entry at or after the internal key `from`, in internal-key
    /// order, as (internal key, value); borrows the memtable.
    pub fn range_from<'a>(&'a self, from: &'a [u8]) -> impl Iterator<Item = (Bytes, Bytes)> + 'a {
        self.map
            .range(OwnedFrom(RawKey(from)))
            .map(|entry| (entry.key().0.clone(), entry.value().clone()))
    }

    /// Every entry in internal-key order, as (internal key, value).
    pub fn iter(&self) -> impl Iterator<Item = (Bytes, Bytes)> + '_ {
        self.map
            .iter()
            .map(|entry| (entry.key().0.clone(), entry.value().clone()))
    }

    /// Bytes held, approximately: keys, values and [`ENTRY_OVERHEAD`] per entry.
    pub fn approximate_bytes(&self) -> usize {
        self.approximate_bytes.load(AtomicOrdering::Relaxed)
    }

    /// Number of entries (versions, not distinct user keys).
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True when nothing was inserted.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The largest sequence number inserted (`SeqNo(0)` when empty).
    pub fn max_seq(&self) -> SeqNo {
        SeqNo(self.max_seq.load(AtomicOrdering::Acquire))
    }
}

/// "Every key at or after this probe", owning the probe so the range can
/// outlive the caller's stack frame.
struct OwnedFrom<'a>(RawKey<'a>);

impl<'a> RangeBounds<dyn InternalKeyView + 'a> for OwnedFrom<'a> {
    fn start_bound(&self) -> Bound<&(dyn InternalKeyView + 'a)> {
        Bound::Included(&self.0)
    }
    fn end_bound(&self) -> Bound<&(dyn InternalKeyView + 'a)> {
        Bound::Unbounded
    }
}

/// How many entries a [`MemtableIter`] copies out of the skiplist per refill.
const ITER_CHUNK: usize = 64;

/// A cursor over a memtable that owns a reference to it, so it can live in
/// the database's merge iterator after the memtable has been replaced.
///
/// It reads ahead in chunks of 64 entries. An entry inserted
/// after the cursor read past its position may be missed; the database never
/// needs it, because such an entry's sequence number is newer than any
/// snapshot taken before the cursor was created.
#[derive(Debug)]
pub struct MemtableIter {
    table: Arc<Memtable>,
    ahead: VecDeque<(Bytes, Bytes)>,
    /// True when `ahead` holds everything up to the end of the memtable.
    at_end: bool,
}

impl MemtableIter {
    /// A cursor over `table`, not yet positioned (invalid until a seek).
    pub fn new(table: Arc<Memtable>) -> MemtableIter {
        MemtableIter {
            table,
            ahead: VecDeque::new(),
            at_end: true,
        }
    }

    /// Positions at the first entry.
    pub fn seek_to_first(&mut self) {
        self.ahead.clear();
        self.fill(Bound::Unbounded);
    }

    /// Positions at the first entry whose internal key is at or after `target`.
    pub fn seek(&mut self, target: &[u8]) {
        self.ahead.clear();
        self.fill(Bound::Included(target));
    }

    /// True while positioned at an entry.
    pub fn valid(&self) -> bool {
        !self.ahead.is_empty()
    }

    /// The current internal key (empty when not valid).
    pub fn key(&self) -> &[u8] {
        self.ahead.front().map_or(&[], |(key, _)| &key[..])
    }

    /// The current value (empty when not valid).
    pub fn value(&self) -> &[u8] {
        self.ahead.front().map_or(&[], |(_, value)| &value[..])
    }

    /// The current entry as shared buffers.
    pub fn entry(&self) -> Option<(&Bytes, &Bytes)> {
        self.ahead.front().map(|(key, value)| (key, value))
    }

    /// Moves to the next entry (no effect when not valid).
    pub fn next(&mut self) {
        let Some((passed, _)) = self.ahead.pop_front() else {
            return;
        };
        if self.ahead.is_empty() && !self.at_end {
            self.fill(Bound::Excluded(&passed));
        }
    }

    /// The memtable this cursor reads.
    pub fn memtable(&self) -> &Arc<Memtable> {
        &self.table
    }

    fn fill(&mut self, start: Bound<&[u8]>) {
        let table = Arc::clone(&self.table);
        let probe;
        let bound: Bound<&dyn InternalKeyView> = match start {
            Bound::Included(key) => {
                probe = RawKey(key);
                Bound::Included(&probe)
            }
            Bound::Excluded(key) => {
                probe = RawKey(key);
                Bound::Excluded(&probe)
            }
            Bound::Unbounded => Bound::Unbounded,
        };
        let mut entries = table
            .map
            .range::<dyn InternalKeyView, _>((bound, Bound::Unbounded));
        for entry in entries.by_ref().take(ITER_CHUNK) {
            self.ahead
                .push_back((entry.key().0.clone(), entry.value().clone()));
        }
        self.at_end = self.ahead.len() < ITER_CHUNK || entries.next().is_none();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{compare_internal_keys, internal_key, parse_internal_key};

    fn put(t: &Memtable, k: &str, seq: u64, v: &str) {
        t.insert(k.as_bytes(), SeqNo(seq), ValueKind::Put, v.as_bytes());
    }

    fn del(t: &Memtable, k: &str, seq: u64) {
        t.insert(k.as_bytes(), SeqNo(seq), ValueKind::Delete, b"");
    }

    fn got(t: &Memtable, k: &str, snapshot: u64) -> Option<String> {
        t.get(k.as_bytes(), SeqNo(snapshot)).map(|v| match v {
            MemValue::Put(b) => String::from_utf8(b.to_vec()).unwrap(),
            MemValue::Deleted => "<deleted>".to_string(),
        })
    }

    #[test]
    fn newest_visible_version_wins() {
        let t = Memtable::new();
        put(&t, "a", 1, "a1");
        put(&t, "a", 5, "a5");
        del(&t, "a", 7);
        put(&t, "a", 9, "a9");
        put(&t, "b", 3, "b3");
        assert_eq!(got(&t, "a", 0), None);
        assert_eq!(got(&t, "a", 1).as_deref(), Some("a1"));
        assert_eq!(got(&t, "a", 4).as_deref(), Some("a1"));
        assert_eq!(got(&t, "a", 6).as_deref(), Some("a5"));
        assert_eq!(got(&t, "a", 7).as_deref(), Some("<deleted>"));
        assert_eq!(got(&t, "a", 8).as_deref(), Some("<deleted>"));
        assert_eq!(got(&t, "a", SeqNo::MAX.0).as_deref(), Some("a9"));
        assert_eq!(got(&t, "b", 2), None);
        assert_eq!(got(&t, "b", 3).as_deref(), Some("b3"));
        assert_eq!(got(&t, "", 100), None);
        assert_eq!(got(&t, "c", 100), None);
        assert_eq!(got(&t, "a\0", 100), None);
        assert_eq!(t.len(), 5);
        assert_eq!(t.max_seq(), SeqNo(9));
    }

    #[test]
    fn prefix_keys_do_not_shadow_each_other() {
        let t = Memtable::new();
        put(&t, "a", 1, "short");
        put(&t, "a\0", 2, "nul");
        put(&t, "ab", 3, "long");
        assert_eq!(got(&t, "a", 10).as_deref(), Some("short"));
        assert_eq!(got(&t, "a\0", 10).as_deref(), Some("nul"));
        assert_eq!(got(&t, "ab", 10).as_deref(), Some("long"));
        let keys: Vec<_> = t
            .iter()
            .map(|(k, _)| parse_internal_key(&k).unwrap().user_key.to_vec())
            .collect();
        assert_eq!(keys, [b"a".to_vec(), b"a\0".to_vec(), b"ab".to_vec()]);
    }

    #[test]
    fn iteration_is_in_internal_key_order() {
        let t = Memtable::new();
        put(&t, "b", 2, "b2");
        put(&t, "a", 1, "a1");
        put(&t, "b", 4, "b4");
        del(&t, "c", 3);
        put(&t, "", 5, "empty key");
        let mut it = MemtableIter::new(Arc::new(Memtable::new()));
        it.seek_to_first();
        assert!(!it.valid());
        let t = {
            let shared = Arc::new(t);
            let mut it = MemtableIter::new(Arc::clone(&shared));
            it.seek_to_first();
            assert_eq!(it.value(), b"empty key");
            drop(it);
            Arc::try_unwrap(shared).unwrap()
        };
        let all: Vec<_> = t
            .iter()
            .map(|(k, v)| {
                let p = parse_internal_key(&k).unwrap();
                (p.user_key.to_vec(), p.seq.0, v.to_vec())
            })
            .collect();
        assert_eq!(
            all,
            [
                (b"".to_vec(), 5, b"empty key".to_vec()),
                (b"a".to_vec(), 1, b"a1".to_vec()),
                (b"b".to_vec(), 4, b"b4".to_vec()),
                (b"b".to_vec(), 2, b"b2".to_vec()),
                (b"c".to_vec(), 3, vec![]),
            ]
        );
        let from = internal_key(b"b", SeqNo(3), ValueKind::Put);
        let seqs: Vec<_> = t
            .range_from(&from)
            .map(|(k, _)| parse_internal_key(&k).unwrap().seq.0)
            .collect();
        assert_eq!(seqs, [2, 3]);
    }

    #[test]
    fn owned_cursor_walks_across_chunks_and_outlives_its_borrow() {
        let t = Arc::new(Memtable::new());
        for i in 0..(3 * ITER_CHUNK as u64 + 5) {
            put(&t, &format!("k{i:04}"), i + 1, "v");
        }
        let mut it = MemtableIter::new(Arc::clone(&t));
        assert!(!it.valid());
        assert_eq!(it.key(), b"");
        it.seek_to_first();
        drop(t);
        let mut n = 0;
        let mut previous: Option<Vec<u8>> = None;
        while it.valid() {
            if let Some(p) = &previous {
                assert_eq!(compare_internal_keys(p, it.key()), Ordering::Less);
            }
            assert_eq!(it.value(), b"v");
            previous = Some(it.key().to_vec());
            it.next();
            n += 1;
        }
        assert_eq!(n, 3 * ITER_CHUNK + 5);
        it.next();
        assert!(!it.valid());

        it.seek(&internal_key(b"k0100", SeqNo::MAX, ValueKind::Put));
        assert_eq!(parse_internal_key(it.key()).unwrap().user_key, b"k0100");
        it.seek(&internal_key(b"k0100", SeqNo(1), ValueKind::Put));
        assert_eq!(parse_internal_key(it.key()).unwrap().user_key, b"k0101");
        it.seek(&internal_key(b"z", SeqNo::MAX, ValueKind::Put));
        assert!(!it.valid());
        assert!(it.entry().is_none());
    }

    #[test]
    fn key_order_equals_compare_internal_keys() {
        let keys: Vec<Vec<u8>> = vec![
            vec![],
            b"abc".to_vec(),
            internal_key(b"", SeqNo(0), ValueKind::Delete),
            internal_key(b"", SeqNo(3), ValueKind::Put),
            internal_key(b"a", SeqNo(3), ValueKind::Put),
            internal_key(b"a", SeqNo(3), ValueKind::Delete),
            internal_key(b"a", SeqNo(4), ValueKind::Delete),
            internal_key(b"a\0", SeqNo(1), ValueKind::Put),
            internal_key(b"ab", SeqNo::MAX, ValueKind::Put),
        ];
        for a in &keys {
            for b in &keys {
                let mem = MemKey(Bytes::copy_from_slice(a)).cmp(&MemKey(Bytes::copy_from_slice(b)));
                assert_eq!(mem, compare_internal_keys(a, b), "{a:?} vs {b:?}");
                let raw = (&RawKey(a) as &dyn InternalKeyView).cmp(&RawKey(b));
                assert_eq!(raw, mem);
            }
        }
    }

    #[test]
    fn accounting_grows_with_inserts() {
        let t = Memtable::new();
        assert!(t.is_empty());
        assert_eq!(t.approximate_bytes(), 0);
        put(&t, "key", 1, "value");
        assert_eq!(t.approximate_bytes(), 3 + 8 + 5 + ENTRY_OVERHEAD);
        assert!(!t.is_empty());
    }

    #[test]
    fn concurrent_inserts_are_all_visible() {
        let t = Arc::new(Memtable::new());
        let threads = 4u64;
        let per_thread = 2000u64;
        std::thread::scope(|s| {
            for th in 0..threads {
                let t = Arc::clone(&t);
                s.spawn(move || {
                    for i in 0..per_thread {
                        let seq = th * per_thread + i + 1;
                        // Every thread writes the shared key too, at its own sequence numbers.
                        put(&t, &format!("t{th}-{i}"), seq, &format!("{seq}"));
                        t.insert(
                            b"shared",
                            SeqNo(seq),
                            ValueKind::Put,
                            seq.to_string().as_bytes(),
                        );
                    }
                });
            }
        });
        let total = threads * per_thread;
        assert_eq!(t.len() as u64, 2 * total);
        assert_eq!(t.max_seq(), SeqNo(total));
        for th in 0..threads {
            for i in (0..per_thread).step_by(97) {
                let seq = th * per_thread + i + 1;
                assert_eq!(got(&t, &format!("t{th}-{i}"), total), Some(seq.to_string()));
            }
        }
        for snapshot in [1, 17, total / 2, total] {
            assert_eq!(got(&t, "shared", snapshot), Some(snapshot.to_string()));
        }
        let order: Vec<_> = t.iter().map(|(k, _)| k).collect();
        assert!(order
            .windows(2)
            .all(|w| compare_internal_keys(&w[0], &w[1]) == Ordering::Less));
    }
}
