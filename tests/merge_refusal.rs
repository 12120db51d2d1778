//! A merge operand the operator refuses fails the reads of its key alone:
//! flushes and compactions keep it (and the operands around it) unmerged,
//! so writes of other keys go on, reopens work, `Stats::merges_refused`
//! counts it, and a put, delete or range delete of the key repairs it.
//! Checked directly, and against a `BTreeMap` model in which some merges
//! are refused.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use std::collections::BTreeMap;
use std::sync::Arc;

use siftdb::{Db, Error, MergeOperator, Options};
use siftdb_testkit::SplitMix64;

/// Appends each operand after a comma; refuses an operand "bad".
struct Append;

impl MergeOperator for Append {
    fn merge(&self, _key: &[u8], existing: Option<&[u8]>, operands: &[&[u8]]) -> Option<Vec<u8>> {
        let mut value = existing.map(<[u8]>::to_vec).unwrap_or_default();
        for operand in operands {
            if *operand == b"bad" {
                return None;
            }
            if !value.is_empty() {
                value.push(b',');
            }
            value.extend_from_slice(operand);
        }
        Some(value)
    }
}

fn options() -> Options {
    Options::default()
        .merge_operator(Arc::new(Append))
        .memtable_bytes(8 << 10)
        .level0_compaction_trigger(3)
        .table_target_bytes(4 << 10)
        .level1_bytes(8 << 10)
        .compression(siftdb::Compression::None)
}

fn other(i: usize) -> String {
    format!("other{i:05}")
}

fn value(i: usize, round: usize) -> String {
    format!("value {i} of round {round} {}", "x".repeat(40))
}

fn assert_refused(db: &Db, key: &str, what: &str) {
    match db.get(key) {
        Err(Error::MergeFailed { key: failed, .. }) => {
            assert_eq!(failed, key.as_bytes(), "{what}");
        }
        other => panic!("{what}: {key} read as {other:?}, not MergeFailed"),
    }
}

/// Writes `count` keys of round `round`, each put acknowledged, with a
/// flush every 500 and a full compaction every 1,500.
fn write_round(db: &Db, count: usize, round: usize) {
    for i in 0..count {
        db.put(other(i), value(i, round))
            .unwrap_or_else(|e| panic!("round {round}: put {i}: {e}"));
        if i % 500 == 499 {
            db.flush().unwrap();
        }
        if i % 1500 == 1499 {
            db.compact().unwrap();
        }
    }
}

fn check_others(db: &Db, count: usize, round: usize, what: &str) {
    for i in (0..count).step_by(7) {
        assert_eq!(
            db.get(other(i)).unwrap().as_deref(),
            Some(value(i, round).as_bytes()),
            "{what}: {i}"
        );
    }
}

#[test]
fn a_refused_merge_fails_its_key_alone_through_compactions_and_reopens() {
    const PUTS: usize = 3000;
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path(), options()).unwrap();
    // "p" has a value at the bottom under its refused operand; "d" and "r"
    // are repaired by a delete and a range delete.
    db.put("p", "base").unwrap();
    db.compact().unwrap();
    for key in ["k", "p", "d", "r"] {
        db.merge(key, "one").unwrap();
        db.merge(key, "bad").unwrap();
        db.merge(key, "two").unwrap();
    }
    db.flush().unwrap();
    db.compact().unwrap();
    assert!(db.stats().merges_refused > 0, "{:?}", db.stats());
    write_round(&db, PUTS, 0);
    for key in ["k", "p", "d", "r"] {
        assert_refused(&db, key, "after compactions");
    }
    check_others(&db, PUTS, 0, "after compactions");
    db.close().unwrap();

    // Reopened: background compactions meet the key again.
    let db = Db::open_with(dir.path(), options()).unwrap();
    assert_refused(&db, "k", "reopened");
    write_round(&db, PUTS, 1);
    assert_refused(&db, "k", "reopened, written");
    check_others(&db, PUTS, 1, "reopened, written");
    assert!(db.stats().merges_refused > 0, "{:?}", db.stats());

    // Repairs: a put, a delete, a range delete.
    db.put("k", "reset").unwrap();
    db.put("p", "fixed").unwrap();
    db.delete("d").unwrap();
    db.delete_range("r".."r\0").unwrap();
    let repaired = |db: &Db, what: &str| {
        assert_eq!(
            db.get("k").unwrap().as_deref(),
            Some(&b"reset"[..]),
            "{what}"
        );
        assert_eq!(
            db.get("p").unwrap().as_deref(),
            Some(&b"fixed"[..]),
            "{what}"
        );
        assert_eq!(db.get("d").unwrap(), None, "{what}");
        assert_eq!(db.get("r").unwrap(), None, "{what}");
    };
    repaired(&db, "repaired");
    db.compact().unwrap();
    repaired(&db, "repaired, compacted");
    db.merge("k", "more").unwrap();
    db.merge("d", "new").unwrap();
    db.close().unwrap();

    let db = Db::open_with(dir.path(), options()).unwrap();
    db.compact().unwrap();
    assert_eq!(db.get("k").unwrap().as_deref(), Some(&b"reset,more"[..]));
    assert_eq!(db.get("d").unwrap().as_deref(), Some(&b"new"[..]));
    check_others(&db, PUTS, 1, "repaired, reopened");
    assert_eq!(db.stats().background_errors, 0, "{:?}", db.stats());
}

/// What the model holds for a key: its value, or a refused merge.
#[derive(Clone, Debug, PartialEq)]
enum Model {
    Value(Vec<u8>),
    Refused,
}

const KEYS: u64 = 150;

fn key(i: u64) -> Vec<u8> {
    format!("k{i:03}").into_bytes()
}

fn check_model(db: &Db, model: &BTreeMap<Vec<u8>, Model>, what: &str) {
    for i in 0..KEYS {
        let got = db.get(key(i));
        match model.get(&key(i)) {
            Some(Model::Refused) => assert!(
                matches!(got, Err(Error::MergeFailed { .. })),
                "{what}: get {i}: {got:?}"
            ),
            Some(Model::Value(v)) => {
                assert_eq!(got.unwrap().as_deref(), Some(v.as_slice()), "{what}: {i}");
            }
            None => assert_eq!(got.unwrap(), None, "{what}: get {i}"),
        }
    }
    // A scan of the keys before the first refused one reads them right.
    let first_refused = model
        .iter()
        .find(|(_, m)| **m == Model::Refused)
        .map(|(k, _)| k.clone());
    let end = first_refused.unwrap_or_else(|| b"l".to_vec());
    let got: Vec<(Vec<u8>, Vec<u8>)> = db
        .range(b"k".to_vec()..end.clone())
        .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())))
        .collect::<Result<_, _>>()
        .unwrap();
    let want: Vec<(Vec<u8>, Vec<u8>)> = model
        .range(b"k".to_vec()..end)
        .map(|(k, m)| match m {
            Model::Value(v) => (k.clone(), v.clone()),
            Model::Refused => unreachable!(),
        })
        .collect();
    assert_eq!(got, want, "{what}: scan");
}

#[test]
fn refused_merges_agree_with_the_model_through_flushes_compactions_and_reopens() {
    let dir = tempfile::tempdir().unwrap();
    let mut db = Db::open_with(dir.path(), options()).unwrap();
    let mut model: BTreeMap<Vec<u8>, Model> = BTreeMap::new();
    let mut rng = SplitMix64::new(58);
    for i in 0..KEYS {
        let base = format!("base{i}-{}", "x".repeat(60)).into_bytes();
        db.put(key(i), &base).unwrap();
        model.insert(key(i), Model::Value(base));
    }
    db.compact().unwrap();
    for round in 0..30u64 {
        for step in 0..150u64 {
            let i = rng.next() % KEYS;
            let k = key(i);
            match rng.next() % 20 {
                // A refused operand, one merge in about ten.
                0 => {
                    db.merge(&k, "bad").unwrap();
                    model.insert(k, Model::Refused);
                }
                1..=10 => {
                    let operand = format!("{round}.{step}").into_bytes();
                    db.merge(&k, &operand).unwrap();
                    let entry = model.entry(k).or_insert(Model::Value(Vec::new()));
                    if let Model::Value(v) = entry {
                        if !v.is_empty() {
                            v.push(b',');
                        }
                        v.extend_from_slice(&operand);
                    }
                }
                11..=14 => {
                    let v = format!("put{round}.{step}").into_bytes();
                    db.put(&k, &v).unwrap();
                    model.insert(k, Model::Value(v));
                }
                15..=17 => {
                    db.delete(&k).unwrap();
                    model.remove(&k);
                }
                _ => {
                    let end = key((i + 1 + rng.next() % 5).min(KEYS));
                    db.delete_range(k.clone()..end.clone()).unwrap();
                    model.retain(|key, _| !(k.clone()..end.clone()).contains(key));
                }
            }
        }
        match round % 10 {
            3 => db.flush().unwrap(),
            6 => db.compact().unwrap(),
            9 => {
                db.close().unwrap();
                db = Db::open_with(dir.path(), options()).unwrap();
            }
            _ => {}
        }
        check_model(&db, &model, &format!("round {round}"));
    }
    db.compact().unwrap();
    check_model(&db, &model, "compacted");
    assert!(db.stats().merges_refused > 0);
    assert_eq!(db.stats().background_errors, 0, "{:?}", db.stats());
}
