//! Model-based test: random operation sequences against a `BTreeMap`,
//! interleaved with flushes, compactions and reopenings; point reads by
//! `get` and by `multi_get`; range deletes with every kind of bound (alone
//! and in batches); scans forward, backward and in mixed directions, live
//! and at snapshots.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use std::collections::BTreeMap;
use std::ops::Bound;

use proptest::prelude::*;
use siftdb::{Db, Options, WriteBatch};

/// A range's bounds: which key and 0 included, 1 excluded, 2 unbounded.
type Bounds = ((u8, u8), (u8, u8));

#[derive(Debug, Clone)]
enum BatchEntry {
    Put(u8, Vec<u8>),
    Delete(u8),
    DeleteRange(Bounds),
}

#[derive(Debug, Clone)]
enum Op {
    Put(u8, Vec<u8>),
    Delete(u8),
    DeleteRange(Bounds),
    Batch(Vec<BatchEntry>),
    /// A scan of a range read by `next` (true) and `next_back` (false) in
    /// this order, then to its end forward; live and at the snapshot.
    Mixed(Bounds, Vec<bool>),
    Get(u8),
    MultiGet(Vec<u8>),
    Snapshot,
    Range(u8, u8),
    Prefix(u8),
    Flush,
    Compact,
    Reopen,
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn key(k: u8) -> Vec<u8> {
    format!("key{:02}", k % 64).into_bytes()
}

fn bounds() -> impl Strategy<Value = Bounds> {
    ((any::<u8>(), 0u8..3), (any::<u8>(), 0u8..3))
}

fn bound(side: (u8, u8)) -> Bound<Vec<u8>> {
    match side.1 {
        0 => Bound::Included(key(side.0)),
        1 => Bound::Excluded(key(side.0)),
        _ => Bound::Unbounded,
    }
}

fn range_of(b: Bounds) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    (bound(b.0), bound(b.1))
}

/// True when `b`'s start sorts after its end (`delete_range` refuses it).
fn reversed(b: Bounds) -> bool {
    let (start, end) = range_of(b);
    match (start, end) {
        (Bound::Included(s) | Bound::Excluded(s), Bound::Included(e) | Bound::Excluded(e)) => s > e,
        _ => false,
    }
}

fn in_range(b: Bounds, k: &[u8]) -> bool {
    let (start, end) = range_of(b);
    let after_start = match &start {
        Bound::Included(s) => k >= s.as_slice(),
        Bound::Excluded(s) => k > s.as_slice(),
        Bound::Unbounded => true,
    };
    let before_end = match &end {
        Bound::Included(e) => k <= e.as_slice(),
        Bound::Excluded(e) => k < e.as_slice(),
        Bound::Unbounded => true,
    };
    after_start && before_end
}

fn model_delete_range(model: &mut Model, b: Bounds) {
    model.retain(|k, _| !in_range(b, k));
}

/// The scan `directions` describe (see `Op::Mixed`) against the model:
/// each step takes from its end, the ends meet without repeat or gap.
fn check_mixed(mut scan: siftdb::DbIterator, model: &Model, b: Bounds, directions: &[bool]) {
    let mut want: std::collections::VecDeque<(Vec<u8>, Vec<u8>)> = model
        .iter()
        .filter(|(k, _)| in_range(b, k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let owned = |item: Option<siftdb::Result<(bytes::Bytes, bytes::Bytes)>>| {
        item.map(|r| {
            let (k, v) = r.unwrap();
            (k.to_vec(), v.to_vec())
        })
    };
    for &forward in directions {
        if forward {
            assert_eq!(owned(scan.next()), want.pop_front(), "next in {b:?}");
        } else {
            assert_eq!(
                owned(scan.next_back()),
                want.pop_back(),
                "next_back in {b:?}"
            );
        }
    }
    let rest: Vec<_> = scan.map(|r| owned(Some(r)).unwrap()).collect();
    assert_eq!(rest, Vec::from(want), "the rest of {b:?}");
}

fn op() -> impl Strategy<Value = Op> {
    let value = proptest::collection::vec(any::<u8>(), 0..300);
    let entry = prop_oneof![
        3 => (any::<u8>(), value.clone()).prop_map(|(k, v)| BatchEntry::Put(k, v)),
        1 => any::<u8>().prop_map(BatchEntry::Delete),
        1 => bounds().prop_map(BatchEntry::DeleteRange),
    ];
    prop_oneof![
        6 => (any::<u8>(), value.clone()).prop_map(|(k, v)| Op::Put(k, v)),
        2 => any::<u8>().prop_map(Op::Delete),
        2 => bounds().prop_map(Op::DeleteRange),
        2 => proptest::collection::vec(entry, 0..6).prop_map(Op::Batch),
        2 => (bounds(), proptest::collection::vec(any::<bool>(), 0..12))
            .prop_map(|(b, d)| Op::Mixed(b, d)),
        4 => any::<u8>().prop_map(Op::Get),
        2 => proptest::collection::vec(any::<u8>(), 0..24).prop_map(Op::MultiGet),
        1 => Just(Op::Snapshot),
        1 => (any::<u8>(), any::<u8>()).prop_map(|(a, b)| Op::Range(a, b)),
        1 => (0u8..7).prop_map(Op::Prefix),
        1 => Just(Op::Flush),
        1 => Just(Op::Compact),
        1 => Just(Op::Reopen),
    ]
}

fn options() -> Options {
    Options::default()
        .memtable_bytes(4096)
        .block_size(256)
        .level0_compaction_trigger(2)
        .level1_bytes(8192)
        .table_target_bytes(4096)
}

fn check_scan(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>, lo: Vec<u8>, hi: Vec<u8>) {
    let got: Vec<(Vec<u8>, Vec<u8>)> = db
        .range(lo.clone()..hi.clone())
        .map(|r| {
            let (k, v) = r.unwrap();
            (k.to_vec(), v.to_vec())
        })
        .collect();
    let want: Vec<(Vec<u8>, Vec<u8>)> = if lo < hi {
        model
            .range(lo.clone()..hi.clone())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    } else {
        Vec::new()
    };
    assert_eq!(got, want);
    let mut back: Vec<(Vec<u8>, Vec<u8>)> = db
        .range(lo..hi)
        .rev()
        .map(|r| {
            let (k, v) = r.unwrap();
            (k.to_vec(), v.to_vec())
        })
        .collect();
    back.reverse();
    assert_eq!(back, want);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn matches_a_btreemap(ops in proptest::collection::vec(op(), 1..120)) {
        let dir = tempfile::tempdir().unwrap();
        let mut db = Db::open_with(dir.path(), options()).unwrap();
        let mut model = BTreeMap::new();
        // The latest snapshot and the model as it was then; every Get also
        // asks the snapshot, which must keep answering from that model.
        let mut frozen: Option<(siftdb::Snapshot, Model)> = None;
        for op in ops {
            match op {
                Op::Put(k, v) => {
                    db.put(key(k), &v).unwrap();
                    model.insert(key(k), v);
                }
                Op::Delete(k) => {
                    db.delete(key(k)).unwrap();
                    model.remove(&key(k));
                }
                Op::DeleteRange(b) => {
                    let result = db.delete_range(range_of(b));
                    if reversed(b) {
                        prop_assert!(result.is_err());
                    } else {
                        result.unwrap();
                        model_delete_range(&mut model, b);
                    }
                }
                Op::Batch(ops) => {
                    let mut batch = WriteBatch::new();
                    let mut after = model.clone();
                    let mut refused = false;
                    for entry in ops {
                        match entry {
                            BatchEntry::Put(k, v) => {
                                batch.put(key(k), &v);
                                after.insert(key(k), v);
                            }
                            BatchEntry::Delete(k) => {
                                batch.delete(key(k));
                                after.remove(&key(k));
                            }
                            BatchEntry::DeleteRange(b) => {
                                batch.delete_range(range_of(b));
                                refused |= reversed(b);
                                model_delete_range(&mut after, b);
                            }
                        }
                    }
                    let result = db.write(batch);
                    if refused {
                        prop_assert!(result.is_err());
                    } else {
                        result.unwrap();
                        model = after;
                    }
                }
                Op::Mixed(b, directions) => {
                    if !reversed(b) {
                        check_mixed(db.range(range_of(b)), &model, b, &directions);
                        if let Some((snap, then)) = &frozen {
                            check_mixed(snap.range(range_of(b)), then, b, &directions);
                        }
                    }
                }
                Op::Get(k) => {
                    let got = db.get(key(k)).unwrap().map(|b| b.to_vec());
                    prop_assert_eq!(got, model.get(&key(k)).cloned());
                    if let Some((snap, then)) = &frozen {
                        let got = snap.get(key(k)).unwrap().map(|b| b.to_vec());
                        prop_assert_eq!(got, then.get(&key(k)).cloned());
                    }
                }
                Op::Snapshot => {
                    if let Some((snap, then)) = frozen.take() {
                        let all: Vec<Vec<u8>> = snap.iter().map(|r| r.unwrap().0.to_vec()).collect();
                        let want: Vec<Vec<u8>> = then.keys().cloned().collect();
                        prop_assert_eq!(all, want.clone());
                        let mut back: Vec<Vec<u8>> = snap.iter().rev().map(|r| r.unwrap().0.to_vec()).collect();
                        back.reverse();
                        prop_assert_eq!(back, want);
                        let keys: Vec<Vec<u8>> = (0..64).map(key).collect();
                        let got: Vec<Option<Vec<u8>>> = snap.multi_get(&keys).unwrap().into_iter().map(|v| v.map(|b| b.to_vec())).collect();
                        let want: Vec<Option<Vec<u8>>> = keys.iter().map(|k| then.get(k).cloned()).collect();
                        prop_assert_eq!(got, want);
                    }
                    frozen = Some((db.snapshot(), model.clone()));
                }
                Op::MultiGet(ks) => {
                    let keys: Vec<Vec<u8>> = ks.iter().map(|&k| key(k)).collect();
                    let got: Vec<Option<Vec<u8>>> = db
                        .multi_get(&keys)
                        .unwrap()
                        .into_iter()
                        .map(|v| v.map(|b| b.to_vec()))
                        .collect();
                    let want: Vec<Option<Vec<u8>>> = keys.iter().map(|k| model.get(k).cloned()).collect();
                    prop_assert_eq!(got, want);
                }
                Op::Range(a, b) => check_scan(&db, &model, key(a), key(b)),
                Op::Prefix(p) => {
                    let prefix = format!("key{p}").into_bytes();
                    let got: Vec<Vec<u8>> = db.prefix(&prefix).map(|r| r.unwrap().0.to_vec()).collect();
                    let want: Vec<Vec<u8>> = model.keys().filter(|k| k.starts_with(&prefix)).cloned().collect();
                    prop_assert_eq!(got, want);
                }
                Op::Flush => db.flush().unwrap(),
                Op::Compact => db.compact().unwrap(),
                Op::Reopen => {
                    // A snapshot holds the directory lock.
                    frozen = None;
                    drop(db);
                    db = Db::open_with(dir.path(), options()).unwrap();
                }
            }
        }
        let all: Vec<(Vec<u8>, Vec<u8>)> = db.iter().map(|r| {
            let (k, v) = r.unwrap();
            (k.to_vec(), v.to_vec())
        }).collect();
        let want: Vec<(Vec<u8>, Vec<u8>)> = model.into_iter().collect();
        prop_assert_eq!(all, want);
    }
}
