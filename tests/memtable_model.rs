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
use siftdb::internals::key::{internal_key, parse_internal_key, SeqNo, ValueKind};
use siftdb::internals::memtable::{MemValue, Memtable, MemtableIter};

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
            ValueKind::Merge => MemValue::Merge,
            ValueKind::Blob => unreachable!("the memtable refuses blob pointers"),
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

/// Concurrent writers and readers, seeded: writers insert the operations
/// (each sequence number once, keys colliding often) in whatever order the
/// threads interleave; a sequence number becomes "visible" once it and all
/// before it are in, as the database publishes them. Readers meanwhile read
/// at the visible watermark, through `get` and through a cursor, and must
/// see exactly the model's answer at that snapshot, however many newer
/// versions are being inserted around them.
#[test]
fn concurrent_writers_and_snapshot_readers_match_the_model() {
    use siftdb_testkit::SplitMix64;
    use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

    const OPS: usize = 6000;
    const WRITERS: usize = 3;
    const READERS: usize = 2;
    let keys: Vec<Vec<u8>> = (0..40u32)
        .map(|i| match i % 4 {
            0 => format!("k{i}").into_bytes(),
            1 => format!("k{}", i - 1)
                .into_bytes()
                .into_iter()
                .chain([0])
                .collect(),
            2 => vec![b'z'; i as usize],
            _ => format!("key-{i:04}-with-a-longer-body").into_bytes(),
        })
        .collect();

    for seed in 0..4u64 {
        let mut rng = SplitMix64::new(seed);
        // Operation s (0-based) has sequence number s + 1.
        let ops: Vec<Op> = (0..OPS)
            .map(|s| {
                let is_put = rng.chance(75);
                Op {
                    key: rng.index(keys.len()),
                    seq: s as u64 + 1,
                    kind: if is_put {
                        ValueKind::Put
                    } else {
                        ValueKind::Delete
                    },
                    value: if is_put {
                        let len = rng.index(24);
                        rng.bytes(len)
                    } else {
                        Vec::new()
                    },
                }
            })
            .collect();
        let table = Arc::new(Memtable::new());
        let next_op = AtomicUsize::new(0);
        let inserted: Vec<AtomicBool> = (0..OPS).map(|_| AtomicBool::new(false)).collect();
        let visible = AtomicU64::new(0);
        let writers_done = AtomicUsize::new(0);

        // The model at `snapshot`: the newest version of each key at or below it.
        let answer_at = |key: usize, snapshot: u64| -> Option<MemValue> {
            ops[..snapshot as usize]
                .iter()
                .rev()
                .find(|op| op.key == key)
                .map(|op| match op.kind {
                    ValueKind::Put => MemValue::Put(op.value.clone().into()),
                    ValueKind::Delete => MemValue::Deleted,
                    ValueKind::Merge => MemValue::Merge,
                    ValueKind::Blob => unreachable!("the memtable refuses blob pointers"),
                })
        };
        // Advances the watermark past every inserted prefix and returns it.
        let advance = || -> u64 {
            let mut v = visible.load(Ordering::Acquire);
            while (v as usize) < OPS && inserted[v as usize].load(Ordering::Acquire) {
                v = match visible.compare_exchange(v, v + 1, Ordering::AcqRel, Ordering::Acquire) {
                    Ok(_) => v + 1,
                    Err(seen) => seen,
                };
            }
            v
        };

        let (ops, keys, inserted) = (&ops, &keys, &inserted);
        let (next_op, writers_done, visible) = (&next_op, &writers_done, &visible);
        let (answer_at, advance) = (&answer_at, &advance);
        std::thread::scope(|s| {
            for _ in 0..WRITERS {
                let table = &table;
                s.spawn(move || {
                    loop {
                        let i = next_op.fetch_add(1, Ordering::Relaxed);
                        let Some(op) = ops.get(i) else { break };
                        table
                            .insert(&keys[op.key], SeqNo(op.seq), op.kind, &op.value)
                            .unwrap();
                        inserted[i].store(true, Ordering::Release);
                        advance();
                    }
                    writers_done.fetch_add(1, Ordering::Release);
                });
            }
            for r in 0..READERS {
                let table = Arc::clone(&table);
                s.spawn(move || {
                    let mut rng = SplitMix64::new(1000 + r as u64);
                    let mut rounds = 0;
                    loop {
                        let finished = writers_done.load(Ordering::Acquire) == WRITERS;
                        let snapshot = advance();
                        // Point reads at the watermark and a little below it.
                        for _ in 0..20 {
                            let key = rng.index(keys.len());
                            let at = snapshot.saturating_sub(rng.below(50));
                            assert_eq!(
                                table.get(&keys[key], SeqNo(at)),
                                answer_at(key, at),
                                "seed {seed}: key {key} at snapshot {at}"
                            );
                        }
                        // A cursor walk, keeping the versions the snapshot sees.
                        let mut cursor = MemtableIter::new(Arc::clone(&table));
                        cursor.seek_to_first();
                        let mut walked = Vec::new();
                        while cursor.valid() {
                            let p = parse_internal_key(cursor.key()).unwrap();
                            if p.seq.0 <= snapshot {
                                walked.push((
                                    p.user_key.to_vec(),
                                    p.seq.0,
                                    cursor.value().to_vec(),
                                ));
                            }
                            cursor.next();
                        }
                        let mut expected: Vec<_> = ops[..snapshot as usize]
                            .iter()
                            .map(|op| (keys[op.key].clone(), op.seq, op.value.clone()))
                            .collect();
                        expected.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
                        assert_eq!(walked, expected, "seed {seed}: walk at snapshot {snapshot}");
                        rounds += 1;
                        if finished {
                            break;
                        }
                    }
                    assert!(rounds > 0);
                });
            }
        });
        assert_eq!(visible.load(Ordering::Acquire), OPS as u64);
        assert_eq!(table.len(), OPS);
    }
}
