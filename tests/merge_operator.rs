//! `Options::merge_operator` with `Db::merge` / `Keyspace::merge` /
//! `WriteBatch::merge`: against a `BTreeMap` model (an append operator),
//! every read path — `get`, `multi_get`, scans both ways, snapshots — gives
//! the merged value through puts, deletes, range deletes, flushes, automatic
//! and full compactions and a reopen; a merge without an operator is
//! refused; an operator's refusal is `MergeFailed` for that key alone.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use std::collections::BTreeMap;
use std::sync::Arc;

use siftdb::{Db, Error, MergeOperator, Options, WriteBatch};
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

fn model_merge(model: &mut BTreeMap<Vec<u8>, Vec<u8>>, key: &[u8], operand: &[u8]) {
    let value = model.entry(key.to_vec()).or_default();
    if !value.is_empty() {
        value.push(b',');
    }
    value.extend_from_slice(operand);
}

const KEYS: u64 = 200;

fn key(i: u64) -> Vec<u8> {
    format!("k{i:03}").into_bytes()
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

fn check(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>, what: &str) {
    for i in 0..KEYS {
        assert_eq!(
            db.get(key(i)).unwrap().as_deref(),
            model.get(&key(i)).map(Vec::as_slice),
            "{what}: get {i}"
        );
        if model.contains_key(&key(i)) {
            assert!(db.key_may_exist(key(i)), "{what}: key_may_exist {i}");
        }
    }
    let keys: Vec<Vec<u8>> = (0..KEYS).map(key).collect();
    let got = db.multi_get(&keys).unwrap();
    for (i, got) in got.iter().enumerate() {
        assert_eq!(
            got.as_deref(),
            model.get(&keys[i]).map(Vec::as_slice),
            "{what}: multi_get {i}"
        );
    }
    check_scans(|| db.iter(), model, what);
}

/// A full scan from `scan`, forward and backward, equals the model.
fn check_scans<I>(scan: impl Fn() -> I, model: &BTreeMap<Vec<u8>, Vec<u8>>, what: &str)
where
    I: DoubleEndedIterator<Item = siftdb::Result<(bytes::Bytes, bytes::Bytes)>>,
{
    let want: Vec<(Vec<u8>, Vec<u8>)> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    let owned =
        |e: siftdb::Result<(bytes::Bytes, bytes::Bytes)>| e.map(|(k, v)| (k.to_vec(), v.to_vec()));
    let forward: Vec<(Vec<u8>, Vec<u8>)> = scan().map(owned).collect::<Result<_, _>>().unwrap();
    assert_eq!(forward, want, "{what}: forward scan");
    let mut backward: Vec<(Vec<u8>, Vec<u8>)> =
        scan().rev().map(owned).collect::<Result<_, _>>().unwrap();
    backward.reverse();
    assert_eq!(backward, want, "{what}: backward scan");
}

/// What both model tests write through: the database or a transaction.
trait Writes {
    fn merge_key(&mut self, key: &[u8], operand: &[u8]);
    fn put_key(&mut self, key: &[u8], value: &[u8]);
    fn delete_key(&mut self, key: &[u8]);
    fn delete_keys(&mut self, start: &[u8], end: &[u8]);
}

/// `Db` and `Transaction` name their writes alike.
macro_rules! writes_through {
    ($target:ty) => {
        impl Writes for $target {
            fn merge_key(&mut self, key: &[u8], operand: &[u8]) {
                self.merge(key, operand).unwrap();
            }
            fn put_key(&mut self, key: &[u8], value: &[u8]) {
                self.put(key, value).unwrap();
            }
            fn delete_key(&mut self, key: &[u8]) {
                self.delete(key).unwrap();
            }
            fn delete_keys(&mut self, start: &[u8], end: &[u8]) {
                self.delete_range(start..end).unwrap();
            }
        }
    };
}

writes_through!(Db);
writes_through!(siftdb::Transaction);

/// One random write of the mix both model tests use, to `target` and
/// `model` alike, when `pick` (0..18) names one: a merge (0..=10), a put
/// (11..=13), a delete (14, 15) or a range delete of up to `span` keys
/// (16, 17). False for any other `pick`.
fn random_write(
    target: &mut impl Writes,
    model: &mut BTreeMap<Vec<u8>, Vec<u8>>,
    rng: &mut SplitMix64,
    pick: u64,
    span: u64,
    operand: Vec<u8>,
) -> bool {
    let i = rng.next() % KEYS;
    match pick {
        0..=10 => {
            target.merge_key(&key(i), &operand);
            model_merge(model, &key(i), &operand);
        }
        11..=13 => {
            target.put_key(&key(i), &operand);
            model.insert(key(i), operand);
        }
        14 | 15 => {
            target.delete_key(&key(i));
            model.remove(&key(i));
        }
        16 | 17 => {
            let end = (i + 1 + rng.next() % span).min(KEYS);
            target.delete_keys(&key(i), &key(end));
            model.retain(|k, _| !(key(i)..key(end)).contains(k));
        }
        _ => return false,
    }
    true
}

#[test]
fn merges_agree_with_the_model_through_flushes_compactions_and_reopens() {
    let dir = tempfile::tempdir().unwrap();
    let mut db = Db::open_with(dir.path(), options()).unwrap();
    let mut model = BTreeMap::new();
    let mut rng = SplitMix64::new(5);
    // Values deep in the tree first, so that later merges meet compactions
    // that do not reach them (operands kept, not merged, above the bottom).
    for i in 0..KEYS {
        let base = format!("base{i}-{}", "x".repeat(100)).into_bytes();
        db.put(key(i), &base).unwrap();
        model.insert(key(i), base);
    }
    db.compact().unwrap();
    for round in 0..40u64 {
        let snapshot = db.snapshot();
        let before = model.clone();
        for step in 0..150u64 {
            let operand = format!("{round}.{step}").into_bytes();
            let pick = rng.next() % 20;
            // Range deletes one time in 20, like batches.
            let pick = if pick == 17 { 18 } else { pick };
            if !random_write(&mut db, &mut model, &mut rng, pick, 10, operand.clone()) {
                // A batch: a merge and a put of another key, together.
                let i = rng.next() % KEYS;
                let j = (i + 1) % KEYS;
                let mut batch = WriteBatch::new();
                batch.merge(key(i), &operand);
                batch.put(key(j), b"batched");
                db.write(batch).unwrap();
                model_merge(&mut model, &key(i), &operand);
                model.insert(key(j), b"batched".to_vec());
            }
        }
        // A snapshot taken before the round still sees the values before it.
        for i in (0..KEYS).step_by(17) {
            assert_eq!(
                snapshot.get(key(i)).unwrap().as_deref(),
                before.get(&key(i)).map(Vec::as_slice),
                "round {round}: snapshot get {i}"
            );
        }
        drop(snapshot);
        match round % 10 {
            3 => db.flush().unwrap(),
            6 => db.compact().unwrap(),
            9 => {
                db.close().unwrap();
                db = Db::open_with(dir.path(), options()).unwrap();
            }
            _ => {}
        }
        check(&db, &model, &format!("round {round}"));
    }
    db.compact().unwrap();
    check(&db, &model, "compacted");
    // After a full compaction every key is one put: the operator is needed
    // no more, so a database opened without one reads every value.
    db.close().unwrap();
    let plain = Db::open(dir.path()).unwrap();
    check(&plain, &model, "compacted, reopened without an operator");
}

#[test]
fn a_merge_without_an_operator_is_refused_and_a_refusal_fails_that_key_only() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path()).unwrap();
    assert!(matches!(db.merge("k", "x"), Err(Error::InvalidArgument(_))));
    let mut batch = WriteBatch::new();
    batch.put("a", "1");
    batch.merge("k", "x");
    assert!(matches!(db.write(batch), Err(Error::InvalidArgument(_))));
    assert_eq!(db.get("a").unwrap(), None, "a refused batch writes nothing");
    db.close().unwrap();

    let db = Db::open_with(
        dir.path(),
        Options::default().merge_operator(Arc::new(Append)),
    )
    .unwrap();
    let counters = db
        .keyspace_with(
            "counters",
            siftdb::KeyspaceOptions::new().merge_operator(Arc::new(Append)),
        )
        .unwrap();
    counters.merge("c", "1").unwrap();
    counters.merge("c", "2").unwrap();
    assert_eq!(counters.get("c").unwrap().as_deref(), Some(&b"1,2"[..]));
    db.put("k", "base").unwrap();
    db.merge("k", "bad").unwrap();
    db.merge("j", "fine").unwrap();
    match db.get("k") {
        Err(Error::MergeFailed { key, .. }) => assert_eq!(key, b"k"),
        other => panic!("a refused merge read as {other:?}"),
    }
    assert_eq!(db.get("j").unwrap().as_deref(), Some(&b"fine"[..]));
    // A put over the refused operands heals the key.
    db.put("k", "new").unwrap();
    assert_eq!(db.get("k").unwrap().as_deref(), Some(&b"new"[..]));
}

/// A transaction's own reads (`get`, scans both ways) against the model of
/// the database with the transaction's writes applied, and after commit the
/// database itself.
fn check_transaction(txn: &siftdb::Transaction, model: &BTreeMap<Vec<u8>, Vec<u8>>, what: &str) {
    for i in 0..KEYS {
        assert_eq!(
            txn.get(key(i)).unwrap().as_deref(),
            model.get(&key(i)).map(Vec::as_slice),
            "{what}: get {i}"
        );
    }
    check_scans(|| txn.iter(), model, what);
}

#[test]
fn a_transactions_merges_are_seen_by_its_reads_and_written_by_its_commit() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path(), options()).unwrap();
    let mut model = BTreeMap::new();
    let mut rng = SplitMix64::new(11);
    for i in (0..KEYS).step_by(2) {
        db.put(key(i), format!("base{i}")).unwrap();
        model.insert(key(i), format!("base{i}").into_bytes());
    }
    // Operands in the database under the transaction's, too.
    for i in (0..KEYS).step_by(3) {
        db.merge(key(i), "db").unwrap();
        model_merge(&mut model, &key(i), b"db");
    }
    for round in 0..12u64 {
        let mut txn = db.transaction();
        let mut own = model.clone();
        let mut saved = Vec::new();
        for step in 0..60u64 {
            let operand = format!("t{round}.{step}").into_bytes();
            // Range deletes one time in 20, savepoints set and rolled back
            // to one time in 20 each.
            let pick = match rng.next() % 20 {
                17 => 20,
                pick => pick,
            };
            if !random_write(&mut txn, &mut own, &mut rng, pick, 8, operand) {
                if pick == 18 {
                    txn.set_savepoint();
                    saved.push(own.clone());
                } else if let Some(back) = saved.pop() {
                    txn.rollback_to_savepoint().unwrap();
                    own = back;
                }
            }
            if step % 20 == 19 {
                check_transaction(&txn, &own, &format!("round {round} step {step}"));
            }
        }
        check_transaction(&txn, &own, &format!("round {round} before commit"));
        // The database does not see the transaction before its commit.
        check(&db, &model, &format!("round {round} uncommitted"));
        txn.commit().unwrap();
        model = own;
        check(&db, &model, &format!("round {round} committed"));
        if round % 4 == 3 {
            db.flush().unwrap();
        }
    }
}

#[test]
fn a_transactions_merge_conflicts_like_a_write_and_needs_an_operator() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path(), options()).unwrap();
    db.put("k", "0").unwrap();
    let mut txn = db.transaction();
    txn.merge("k", "1").unwrap();
    assert_eq!(txn.get("k").unwrap().as_deref(), Some(&b"0,1"[..]));
    db.put("k", "other").unwrap();
    assert!(matches!(txn.commit(), Err(Error::Conflict)));
    assert_eq!(db.get("k").unwrap().as_deref(), Some(&b"other"[..]));
    // Operands apply at commit to the value then (a blind update), while
    // the transaction's read saw them over its snapshot's.
    let mut txn = db.transaction();
    txn.merge("j", "a").unwrap();
    db.put("unrelated", "x").unwrap();
    txn.commit().unwrap();
    assert_eq!(db.get("j").unwrap().as_deref(), Some(&b"a"[..]));
    // A refused operand fails the transaction's read of that key only.
    let mut txn = db.transaction();
    txn.merge("j", "bad").unwrap();
    assert!(matches!(txn.get("j"), Err(Error::MergeFailed { .. })));
    assert_eq!(txn.get("k").unwrap().as_deref(), Some(&b"other"[..]));
    drop((txn, db));
    let db = Db::open(dir.path()).unwrap();
    let mut txn = db.transaction();
    assert!(matches!(
        txn.merge("k", "1"),
        Err(Error::InvalidArgument(_))
    ));
}
