//! What batch `b` of a stress run writes, computed from the seed alone.
//!
//! Owns: the key space, the marker keys, the value format (every value
//! names the batch that wrote it), drawn from [`SplitMix64`].
//! Must never: depend on anything but `(seed, batch number)` — the parent
//! recomputes any batch the child may have written, including the one in
//! flight when it was killed.

pub use crate::SplitMix64;
use siftdb::WriteBatch;

/// Data keys `key00000` … `key01999`.
pub const KEYSPACE: u64 = 2000;
/// Half of a batch's keys come from the first `HOT_KEYS`, so overwrites are frequent.
pub const HOT_KEYS: u64 = 64;
/// Marker keys `batch:0000` … `batch:1023`; batch `b` writes slot `b % MARKER_SLOTS`.
pub const MARKER_SLOTS: u64 = 1024;
/// Every batch writes between this many data keys …
pub const MIN_KEYS_PER_BATCH: usize = 3;
/// … and this many.
pub const MAX_KEYS_PER_BATCH: usize = 8;
/// Filler appended to a value: up to this many bytes (so memtables fill).
pub const MAX_FILLER: usize = 240;

/// One operation of a planned batch: a put (`Some(value)`) or a delete (`None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedOp {
    /// The user key.
    pub key: Vec<u8>,
    /// The value put, or `None` for a delete.
    pub value: Option<Vec<u8>>,
}

/// Everything batch `number` writes: its marker first, then its data keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedBatch {
    /// The batch number (1, 2, …).
    pub number: u64,
    /// The operations, marker first; keys are distinct.
    pub ops: Vec<PlannedOp>,
}

impl PlannedBatch {
    /// The batch as the database takes it.
    pub fn to_write_batch(&self) -> WriteBatch {
        let mut batch = WriteBatch::new();
        for op in &self.ops {
            match &op.value {
                Some(value) => batch.put(&op.key, value),
                None => batch.delete(&op.key),
            }
        }
        batch
    }

    /// The marker operation (always a put).
    pub fn marker(&self) -> Option<&PlannedOp> {
        self.ops.first()
    }
}

/// The data key with index `i` (`key00042`).
pub fn data_key(i: u64) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// The marker key batch `b` writes (`batch:0042`).
pub fn marker_key(b: u64) -> Vec<u8> {
    format!("batch:{:04}", b % MARKER_SLOTS).into_bytes()
}

/// Every key a stress database can hold: the data keys, then the markers.
pub fn all_keys() -> impl Iterator<Item = Vec<u8>> {
    (0..KEYSPACE)
        .map(data_key)
        .chain((0..MARKER_SLOTS).map(marker_key))
}

/// The batch that wrote `value`: values start with `b{number}:`.
pub fn batch_of_value(value: &[u8]) -> Option<u64> {
    let rest = value.strip_prefix(b"b")?;
    let end = rest.iter().position(|&c| c == b':')?;
    std::str::from_utf8(rest.get(..end)?).ok()?.parse().ok()
}

/// What batch `b` of the run seeded `seed` writes.
pub fn plan_batch(seed: u64, b: u64) -> PlannedBatch {
    let mut rng = SplitMix64::new(seed ^ b.wrapping_mul(0xd6e8_feb8_6659_fd93));
    let filler = b'a' + (b % 26) as u8;
    let value_for = |rng: &mut SplitMix64, key: &[u8]| {
        let mut value = format!("b{b}:").into_bytes();
        value.extend_from_slice(key);
        value.push(b':');
        value.resize(value.len() + rng.index(MAX_FILLER + 1), filler);
        value
    };
    let marker = marker_key(b);
    let mut ops = vec![PlannedOp {
        value: Some(value_for(&mut rng, &marker)),
        key: marker,
    }];
    let wanted = MIN_KEYS_PER_BATCH + rng.index(MAX_KEYS_PER_BATCH - MIN_KEYS_PER_BATCH + 1);
    while ops.len() < wanted + 1 {
        let index = if rng.below(2) == 0 {
            rng.below(HOT_KEYS)
        } else {
            rng.below(KEYSPACE)
        };
        let key = data_key(index);
        if ops.iter().any(|op| op.key == key) {
            continue;
        }
        let value = (rng.below(8) != 0).then(|| value_for(&mut rng, &key));
        ops.push(PlannedOp { key, value });
    }
    PlannedBatch { number: b, ops }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_are_deterministic_distinct_and_name_their_writer() {
        for b in 1..500 {
            let batch = plan_batch(7, b);
            assert_eq!(batch, plan_batch(7, b));
            let keys = batch.ops.len() - 1;
            assert!((MIN_KEYS_PER_BATCH..=MAX_KEYS_PER_BATCH).contains(&keys));
            assert_eq!(batch.marker().unwrap().key, marker_key(b));
            for (i, op) in batch.ops.iter().enumerate() {
                assert!(batch.ops[i + 1..].iter().all(|o| o.key != op.key));
                if let Some(value) = &op.value {
                    assert_eq!(batch_of_value(value), Some(b));
                }
            }
        }
        assert_ne!(plan_batch(7, 3), plan_batch(8, 3));
    }

    #[test]
    fn values_parse_back_to_their_batch_and_nothing_else_does() {
        assert_eq!(batch_of_value(b"b12:key00001:xx"), Some(12));
        assert_eq!(batch_of_value(b"b:"), None);
        assert_eq!(batch_of_value(b"12:"), None);
        assert_eq!(batch_of_value(b"b12"), None);
    }
}
