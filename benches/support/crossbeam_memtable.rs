//! The memtable siftdb had before its arena (up to commit d93de51), kept
//! as the baseline `benches/memtable.rs` measures the arena against:
//! crossbeam-skiplist's `SkipMap` from an internal key to a value, each
//! entry's key and value sharing one `Bytes` buffer, looked up through a
//! borrowed probe (no allocation per get). Only what the benchmark calls.

use std::borrow::Borrow;
use std::cmp::Ordering;
use std::ops::Bound;

use bytes::Bytes;
use crossbeam_skiplist::SkipMap;
use siftdb::internals::key::{tag, user_key_of, SeqNo, ValueKind, TAG_LEN};

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

struct MemKey(Bytes);

impl InternalKeyView for MemKey {
    fn user_key(&self) -> &[u8] {
        user_key_of(&self.0)
    }
    fn tag(&self) -> u64 {
        let split = self.0.len() - TAG_LEN;
        u64::from_le_bytes(self.0[split..].try_into().unwrap())
    }
}

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

impl<'a> Borrow<dyn InternalKeyView + 'a> for MemKey {
    fn borrow(&self) -> &(dyn InternalKeyView + 'a) {
        self
    }
}
impl Ord for MemKey {
    fn cmp(&self, other: &Self) -> Ordering {
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

/// The old memtable: `SkipMap<internal key, value>`.
#[derive(Default)]
pub struct CrossbeamMemtable {
    map: SkipMap<MemKey, Bytes>,
}

impl CrossbeamMemtable {
    pub fn insert(&self, user_key: &[u8], seq: SeqNo, kind: ValueKind, value: &[u8]) {
        let mut buffer = Vec::with_capacity(user_key.len() + TAG_LEN + value.len());
        buffer.extend_from_slice(user_key);
        buffer.extend_from_slice(&tag(seq, kind).to_le_bytes());
        buffer.extend_from_slice(value);
        let buffer = Bytes::from(buffer);
        let key_len = user_key.len() + TAG_LEN;
        let key = buffer.slice(..key_len);
        let value = buffer.slice(key_len..);
        self.map.insert(MemKey(key), value);
    }

    /// The newest visible value's length (`None` when absent or deleted).
    pub fn get(&self, user_key: &[u8], snapshot: SeqNo) -> Option<Bytes> {
        let probe = Probe {
            user_key,
            tag: tag(snapshot, ValueKind::Put),
        };
        let entry = self
            .map
            .lower_bound(Bound::Included(&probe as &dyn InternalKeyView))?;
        (entry.key().user_key() == user_key).then(|| entry.value().clone())
    }

    /// Bytes of every key and value, walked in order (what a flush reads).
    pub fn walk(&self) -> usize {
        self.map
            .iter()
            .map(|e| e.key().0.len() + e.value().len())
            .sum()
    }
}
