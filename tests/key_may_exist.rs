//! `Db::key_may_exist` / `Keyspace::key_may_exist`: never false for a key
//! that has a value (checked against a `BTreeMap` model through puts,
//! deletes, range deletes, flushes and compactions), exact in the
//! memtables, and false for most absent keys once they are in tables
//! (the filter's answer, no data read).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use std::collections::BTreeMap;

use siftdb::{Db, Options};
use siftdb_testkit::SplitMix64;

const KEYS: u64 = 3000;

fn key(i: u64) -> String {
    format!("key{i:06}")
}

/// Every key of the universe: a key with a value must say "may exist".
/// Returns how many keys without one said "absent".
fn check(db: &Db, model: &BTreeMap<String, u64>, step: &str) -> u64 {
    let mut ruled_out = 0;
    for i in 0..KEYS {
        let k = key(i);
        let may = db.key_may_exist(&k);
        if model.contains_key(&k) {
            assert!(may, "{step}: {k} has a value, yet key_may_exist said no");
        } else if !may {
            ruled_out += 1;
        }
    }
    ruled_out
}

#[test]
fn no_false_negative_through_writes_flushes_and_compactions() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(
        dir.path(),
        Options::default()
            .memtable_bytes(32 << 10)
            .level0_compaction_trigger(3)
            .table_target_bytes(32 << 10),
    )
    .unwrap();
    let mut model = BTreeMap::new();
    let mut rng = SplitMix64::new(38);
    for step in 0..40u64 {
        for _ in 0..200 {
            let i = rng.next() % KEYS;
            match rng.next() % 10 {
                0..=6 => {
                    db.put(key(i), step.to_be_bytes()).unwrap();
                    model.insert(key(i), step);
                }
                7 | 8 => {
                    db.delete(key(i)).unwrap();
                    model.remove(&key(i));
                }
                _ => {
                    let end = (i + 1 + rng.next() % 40).min(KEYS);
                    db.delete_range(key(i)..key(end)).unwrap();
                    model.retain(|k, _| !(key(i)..key(end)).contains(k));
                }
            }
        }
        match step % 8 {
            3 => db.flush().unwrap(),
            7 => db.compact().unwrap(),
            _ => {}
        }
        check(&db, &model, &format!("step {step}"));
    }
    // A key written again after a range delete that covers it, both in
    // one table: its point version is newer than the tombstone.
    db.delete_range(key(0)..key(100)).unwrap();
    db.put(key(50), "back").unwrap();
    model.retain(|k, _| !(key(0)..key(100)).contains(k));
    model.insert(key(50), 0);
    db.flush().unwrap();
    check(&db, &model, "after the range delete and the put");
    db.compact().unwrap();
    let ruled_out = check(&db, &model, "compacted");
    // All in tables now: the filter rules out nearly every absent key
    // (a false positive is about 1%; deleted keys are gone after the
    // compaction).
    let absent = KEYS - model.len() as u64;
    assert!(
        ruled_out * 100 >= absent * 95,
        "{ruled_out} of {absent} absent keys ruled out"
    );
}

#[test]
fn the_memtables_answer_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path()).unwrap();
    assert!(!db.key_may_exist("a"));
    db.put("a", "1").unwrap();
    assert!(db.key_may_exist("a"));
    db.flush().unwrap();
    assert!(db.key_may_exist("a"));
    // A delete in the memtable hides the table's value exactly.
    db.delete("a").unwrap();
    assert!(!db.key_may_exist("a"));
    db.put("b", "2").unwrap();
    db.delete_range("a".."c").unwrap();
    assert!(!db.key_may_exist("b"));

    let other = db.keyspace("other").unwrap();
    other.put("a", "x").unwrap();
    assert!(other.key_may_exist("a"));
    assert!(!db.key_may_exist("a"));
    db.drop_keyspace("other").unwrap();
    assert!(!other.key_may_exist("a"));
}

#[test]
fn without_filters_a_key_in_a_tables_range_may_exist() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path(), Options::default().bloom_bits_per_key(0.0)).unwrap();
    db.put("b", "1").unwrap();
    db.put("d", "1").unwrap();
    db.flush().unwrap();
    // No filter: within the table's range nothing can be ruled out.
    assert!(db.key_may_exist("c"));
    // Outside every table's range: certainly absent.
    assert!(!db.key_may_exist("a"));
    assert!(!db.key_may_exist("e"));
}
