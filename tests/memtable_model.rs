//! The memtable against a plain model: a sorted map of (user key, newest
//! sequence first) → operation. Inserts arrive in any order, as they do from
//! concurrent writers; every read at every snapshot must agree with the model.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;
use siftdb::key::{internal_key, parse_internal_key, SeqNo, ValueKind};
use siftdb::memtable::{MemValue, Memtable, MemtableIter};

/// Few keys, including the empty key and keys that are prefixes of each
/// other, so versions collide and prefix ordering is exercised.
const KEYS: [&[u8]; 6] = [b"", b"a", b"a\0", b"ab", b"b", b"\xff\xff"];

#[derive(Debug, Clone)]
struct Op {
    key: usize,
    seq: u64,
    kind: ValueKind,
    value: Vec<u8>,
}

type Model = BTreeMap<(Vec<u8>, Reverse<u64>), (ValueKind, Vec<u8>)>;

fn ops_strategy() -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(
        (
            0..KEYS.len(),
            1u64..4,
            prop::bool::weighted(0.7),
            prop::collection::vec(any::<u8>(), 0..6),
        ),
        0..60,
    )
    .prop_map(|raw| {
        let mut seq = 0;
        raw.into_iter()
            .map(|(key, gap, is_put, value)| {
                seq += gap;
                let kind = if is_put {
                    ValueKind::Put
                } else {
                    ValueKind::Delete
                };
                let value = if is_put { value } else { Vec::new() };
                Op {
                    key,
                    seq,
                    kind,
                    value,
                }
            })
            .collect::<Vec<_>>()
    })
    .prop_shuffle()
}

fn model_of(ops: &[Op]) -> Model {
    ops.iter()
        .map(|op| {
            (
                (KEYS[op.key].to_vec(), Reverse(op.seq)),
                (op.kind, op.value.clone()),
            )
        })
        .collect()
}

fn model_get(model: &Model, key: &[u8], snapshot: u64) -> Option<MemValue> {
    model
        .range((key.to_vec(), Reverse(snapshot))..)
        .next()
        .filter(|((k, _), _)| k == key)
        .map(|(_, (kind, value))| match kind {
            ValueKind::Put => MemValue::Put(value.clone().into()),
            ValueKind::Delete => MemValue::Deleted,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn memtable_matches_model(ops in ops_strategy(), seek_key in 0..KEYS.len(), seek_seq in 0u64..200) {
        let table = Arc::new(Memtable::new());
        for op in &ops {
            table.insert(KEYS[op.key], SeqNo(op.seq), op.kind, &op.value).unwrap();
        }
        let model = model_of(&ops);
        prop_assert_eq!(table.len(), model.len());
        prop_assert_eq!(table.is_empty(), model.is_empty());
        let max_seq = ops.iter().map(|op| op.seq).max().unwrap_or(0);
        prop_assert_eq!(table.max_seq(), SeqNo(max_seq));

        for key in KEYS {
            for snapshot in 0..=max_seq + 1 {
                prop_assert_eq!(
                    table.get(key, SeqNo(snapshot)),
                    model_get(&model, key, snapshot),
                    "key {:?} at snapshot {}", key, snapshot
                );
            }
        }

        let expected: Vec<_> = model
            .iter()
            .map(|((k, Reverse(seq)), (kind, value))| (k.clone(), *seq, *kind, value.clone()))
            .collect();
        let decode = |(k, v): (&[u8], &[u8])| {
            let parsed = parse_internal_key(k).unwrap();
            (parsed.user_key.to_vec(), parsed.seq.0, parsed.kind, v.to_vec())
        };
        let all: Vec<_> = table.iter().map(decode).collect();
        prop_assert_eq!(&all, &expected);

        // Seeking the owned cursor and the borrowed range agree with the model.
        let target = internal_key(KEYS[seek_key], SeqNo(seek_seq), ValueKind::Put);
        let from_model: Vec<_> = model
            .range((KEYS[seek_key].to_vec(), Reverse(seek_seq))..)
            .map(|((k, Reverse(seq)), (kind, value))| (k.clone(), *seq, *kind, value.clone()))
            .collect();
        let ranged: Vec<_> = table.range_from(&target).map(decode).collect();
        prop_assert_eq!(&ranged, &from_model);
        let mut cursor = MemtableIter::new(Arc::clone(&table));
        cursor.seek(&target);
        let mut walked = Vec::new();
        while cursor.valid() {
            let (k, v) = cursor.entry().unwrap();
            walked.push(decode((k, v)));
            cursor.next();
        }
        prop_assert_eq!(&walked, &from_model);
    }
}
