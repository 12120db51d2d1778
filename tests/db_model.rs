//! Model-based test: random operation sequences against a `BTreeMap`,
//! interleaved with flushes, compactions and reopenings; point reads by
//! `get` and by `multi_get`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use std::collections::BTreeMap;

use proptest::prelude::*;
use siftdb::{Db, Options, WriteBatch};

#[derive(Debug, Clone)]
enum Op {
    Put(u8, Vec<u8>),
    Delete(u8),
    Batch(Vec<(u8, Option<Vec<u8>>)>),
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

fn op() -> impl Strategy<Value = Op> {
    let value = proptest::collection::vec(any::<u8>(), 0..300);
    prop_oneof![
        6 => (any::<u8>(), value.clone()).prop_map(|(k, v)| Op::Put(k, v)),
        2 => any::<u8>().prop_map(Op::Delete),
        2 => proptest::collection::vec((any::<u8>(), proptest::option::of(value)), 0..6).prop_map(Op::Batch),
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
            .range(lo..hi)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    } else {
        Vec::new()
    };
    assert_eq!(got, want);
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
                Op::Batch(ops) => {
                    let mut batch = WriteBatch::new();
                    for (k, v) in ops {
                        match v {
                            Some(v) => {
                                batch.put(key(k), &v);
                                model.insert(key(k), v);
                            }
                            None => {
                                batch.delete(key(k));
                                model.remove(&key(k));
                            }
                        }
                    }
                    db.write(batch).unwrap();
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
                        prop_assert_eq!(all, want);
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
