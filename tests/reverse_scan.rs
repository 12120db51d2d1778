//! Scans in both directions against a `BTreeMap` model: random puts and
//! deletes (so keys have many versions and tombstones spread over the
//! memtables and every level), flushes, compactions and reopens; at random
//! points a snapshot, checked later. Every check reads a random range
//! forward, backward, and with `next` and `next_back` mixed at random —
//! which must meet without repeating or skipping an entry — plus
//! `first_key_value` and `last_key_value`.
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
use siftdb::{Db, DbIterator, Options, PrefixExtractor, Snapshot, WriteBatch};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// A range of keys as `Db::range` takes it.
type KeyRange = (Bound<Vec<u8>>, Bound<Vec<u8>>);

fn key(k: u16) -> Vec<u8> {
    format!("k{:03}", k % 300).into_bytes()
}

#[derive(Debug, Clone)]
enum Op {
    Put(u16, u8),
    Delete(u16),
    DeleteRun(u16, u8),
    Flush,
    Compact,
    Reopen,
    Snapshot,
    Scan(u16, u16, u8, u64),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => (any::<u16>(), any::<u8>()).prop_map(|(k, v)| Op::Put(k, v)),
        3 => any::<u16>().prop_map(Op::Delete),
        1 => (any::<u16>(), 1u8..40).prop_map(|(k, n)| Op::DeleteRun(k, n)),
        1 => Just(Op::Flush),
        1 => Just(Op::Compact),
        1 => Just(Op::Reopen),
        1 => Just(Op::Snapshot),
        3 => (any::<u16>(), any::<u16>(), 0u8..6, any::<u64>()).prop_map(|(a, b, bounds, seed)| Op::Scan(a, b, bounds, seed)),
    ]
}

fn options() -> Options {
    Options::default()
        .memtable_bytes(4096)
        .block_size(256)
        .level0_compaction_trigger(2)
        .level1_bytes(8192)
        .table_target_bytes(4096)
        .prefix_extractor(PrefixExtractor::fixed(2).unwrap())
        .range_filter_bits_per_key(8.0)
}

fn value(k: u16, v: u8) -> Vec<u8> {
    let mut out = format!("{k}:{v}:").into_bytes();
    out.resize(20 + usize::from(v % 50), b'.');
    out
}

/// A range of the model's key space: start and end bounds from `a`, `b`
/// and `kind` (inclusive, exclusive, unbounded mixes; reversed or empty
/// ranges included).
fn bounds(a: u16, b: u16, kind: u8) -> KeyRange {
    let (a, b) = (key(a), key(b));
    match kind {
        0 => (Bound::Included(a), Bound::Excluded(b)),
        1 => (Bound::Included(a), Bound::Included(b)),
        2 => (Bound::Excluded(a), Bound::Unbounded),
        3 => (Bound::Unbounded, Bound::Excluded(b)),
        4 => (Bound::Unbounded, Bound::Unbounded),
        _ => (Bound::Excluded(a), Bound::Included(b)),
    }
}

fn model_range(model: &Model, range: &KeyRange) -> Vec<(Vec<u8>, Vec<u8>)> {
    let empty = match (&range.0, &range.1) {
        (Bound::Included(a), Bound::Included(b)) => a > b,
        (Bound::Included(a) | Bound::Excluded(a), Bound::Excluded(b))
        | (Bound::Excluded(a), Bound::Included(b)) => a >= b,
        _ => false,
    };
    if empty {
        return Vec::new();
    }
    model
        .range::<Vec<u8>, _>((range.0.as_ref(), range.1.as_ref()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn pairs(
    it: impl Iterator<Item = siftdb::Result<(bytes::Bytes, bytes::Bytes)>>,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    it.map(|r| {
        let (k, v) = r.unwrap();
        (k.to_vec(), v.to_vec())
    })
    .collect()
}

/// Reads `scan` with `next` and `next_back` drawn from `seed`, and puts the
/// entries back in key order.
fn mixed(mut scan: DbIterator, mut seed: u64) -> Vec<(Vec<u8>, Vec<u8>)> {
    let (mut front, mut back) = (Vec::new(), Vec::new());
    loop {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let item = if seed >> 63 == 0 {
            scan.next().map(|r| (true, r))
        } else {
            scan.next_back().map(|r| (false, r))
        };
        let Some((forward, r)) = item else {
            // One side ended: the other must have nothing left either.
            assert!(
                scan.next().is_none() && scan.next_back().is_none(),
                "one end found more after the other ended"
            );
            break;
        };
        let (k, v) = r.unwrap();
        if forward {
            front.push((k.to_vec(), v.to_vec()));
        } else {
            back.push((k.to_vec(), v.to_vec()));
        }
    }
    back.reverse();
    front.extend(back);
    front
}

fn check(
    read: &dyn Fn(&KeyRange) -> DbIterator,
    model: &Model,
    range: KeyRange,
    seed: u64,
    context: &str,
) {
    let want = model_range(model, &range);
    assert_eq!(pairs(read(&range)), want, "{context}: forward {range:?}");
    let mut backward = pairs(read(&range).rev());
    backward.reverse();
    assert_eq!(backward, want, "{context}: backward {range:?}");
    assert_eq!(
        mixed(read(&range), seed),
        want,
        "{context}: mixed {range:?} seed {seed}"
    );
}

fn check_ends(db: &Db, snapshot: Option<&Snapshot>, model: &Model) {
    let first = model.iter().next().map(|(k, v)| (k.clone(), v.clone()));
    let last = model
        .iter()
        .next_back()
        .map(|(k, v)| (k.clone(), v.clone()));
    let (f, l) = match snapshot {
        Some(s) => (s.first_key_value().unwrap(), s.last_key_value().unwrap()),
        None => (db.first_key_value().unwrap(), db.last_key_value().unwrap()),
    };
    assert_eq!(f.map(|(k, v)| (k.to_vec(), v.to_vec())), first);
    assert_eq!(l.map(|(k, v)| (k.to_vec(), v.to_vec())), last);
}

fn run(ops: Vec<Op>) {
    let dir = tempfile::tempdir().unwrap();
    let mut db = Db::open_with(dir.path(), options()).unwrap();
    let mut model = Model::new();
    let mut snapshots: Vec<(Snapshot, Model)> = Vec::new();
    for (step, op) in ops.into_iter().enumerate() {
        match op {
            Op::Put(k, v) => {
                db.put(key(k), value(k, v)).unwrap();
                model.insert(key(k), value(k, v));
            }
            Op::Delete(k) => {
                db.delete(key(k)).unwrap();
                model.remove(&key(k));
            }
            Op::DeleteRun(k, n) => {
                let mut batch = WriteBatch::new();
                for i in 0..u16::from(n) {
                    batch.delete(key(k.wrapping_add(i)));
                    model.remove(&key(k.wrapping_add(i)));
                }
                db.write(batch).unwrap();
            }
            Op::Flush => db.flush().unwrap(),
            Op::Compact => db.compact().unwrap(),
            Op::Reopen => {
                snapshots.clear();
                drop(db);
                db = Db::open_with(dir.path(), options()).unwrap();
            }
            Op::Snapshot => snapshots.push((db.snapshot(), model.clone())),
            Op::Scan(a, b, kind, seed) => {
                let range = bounds(a, b, kind);
                let context = format!("step {step}, live");
                check(
                    &|r| db.range::<Vec<u8>, _>(r.clone()),
                    &model,
                    range.clone(),
                    seed,
                    &context,
                );
                check_ends(&db, None, &model);
                if let Some((snapshot, then)) =
                    snapshots.get(seed as usize % snapshots.len().max(1))
                {
                    let context = format!("step {step}, snapshot");
                    check(
                        &|r| snapshot.range::<Vec<u8>, _>(r.clone()),
                        then,
                        range,
                        seed,
                        &context,
                    );
                    check_ends(&db, Some(snapshot), then);
                }
            }
        }
    }
    // The whole key space, every way, at the end.
    check(
        &|r| db.range::<Vec<u8>, _>(r.clone()),
        &model,
        (Bound::Unbounded, Bound::Unbounded),
        7,
        "end",
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    #[test]
    fn scans_in_both_directions_match_the_model(ops in proptest::collection::vec(op(), 50..400)) {
        run(ops);
    }
}

/// Many versions of few keys in every level, a snapshot between them, and
/// a reverse scan of it: the newest version at or below the snapshot is the
/// one returned, whichever way the scan goes.
#[test]
fn a_reverse_scan_returns_the_newest_version_its_snapshot_sees() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path(), options()).unwrap();
    for round in 0..6u8 {
        for k in 0..40u16 {
            db.put(key(k), value(k, round)).unwrap();
        }
        db.flush().unwrap();
        if round == 2 {
            db.compact().unwrap();
        }
    }
    let snapshot = db.snapshot();
    for k in 0..40u16 {
        if k % 3 == 0 {
            db.delete(key(k)).unwrap();
        } else {
            db.put(key(k), value(k, 99)).unwrap();
        }
    }
    let seen = pairs(snapshot.iter().rev());
    assert_eq!(seen.len(), 40);
    for (i, (k, v)) in seen.iter().enumerate() {
        let n = 39 - i as u16;
        assert_eq!(k, &key(n));
        assert_eq!(v, &value(n, 5));
    }
    let live = pairs(db.iter().rev());
    let want: Vec<(Vec<u8>, Vec<u8>)> = (0..40u16)
        .rev()
        .filter(|k| k % 3 != 0)
        .map(|k| (key(k), value(k, 99)))
        .collect();
    assert_eq!(live, want);
}

#[test]
fn a_reverse_scan_of_an_empty_or_reversed_range_is_empty() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path(), options()).unwrap();
    assert!(db.iter().next_back().is_none());
    assert_eq!(db.last_key_value().unwrap(), None);
    db.put("b", "1").unwrap();
    db.put("d", "2").unwrap();
    assert_eq!(
        db.range::<&[u8], _>((Bound::Included(&b"d"[..]), Bound::Excluded(&b"b"[..])))
            .rev()
            .count(),
        0
    );
    assert_eq!(db.range("c".."c").rev().count(), 0);
    assert_eq!(pairs(db.range("b"..="d").rev()).len(), 2);
    assert_eq!(
        pairs(db.range("b".."d").rev()),
        [(b"b".to_vec(), b"1".to_vec())]
    );
    let mut it = db.iter();
    assert!(it.next_back().is_some() && it.next_back().is_some());
    assert!(it.next_back().is_none() && it.next().is_none() && it.next_back().is_none());
}

/// A memtable with no entry is no source of a scan (a reopened database's,
/// or one just switched in); one holding only a range tombstone must still
/// delete the flushed keys under it, both ways, and a scan cut short by
/// `take` must resume where it stopped.
#[test]
fn empty_memtables_and_a_tombstone_only_memtable_scan_as_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let mut model = Model::new();
    let db = Db::open_with(dir.path(), options()).unwrap();
    for k in 0..200u16 {
        db.put(key(k), [k as u8]).unwrap();
        model.insert(key(k), vec![k as u8]);
    }
    db.flush().unwrap();
    drop(db);
    let db = Db::open_with(dir.path(), options()).unwrap();
    let check = |db: &Db, model: &Model| {
        let forward: Vec<_> = db.iter().map(|e| e.unwrap()).collect();
        let want: Vec<_> = model.iter().collect();
        assert_eq!(forward.len(), want.len());
        for ((k, v), (mk, mv)) in forward.iter().zip(&want) {
            assert_eq!((k.as_ref(), v.as_ref()), (mk.as_slice(), mv.as_slice()));
        }
        let backward: Vec<_> = db.iter().rev().map(|e| e.unwrap().0).collect();
        let want_back: Vec<_> = model.keys().rev().collect();
        assert_eq!(backward.len(), want_back.len());
        for (k, mk) in backward.iter().zip(want_back) {
            assert_eq!(k.as_ref(), mk.as_slice());
        }
        // Short scans from every key, as a seek-and-take workload makes.
        for k in 0..210u16 {
            let got: Vec<_> = db.range(key(k)..).take(3).map(|e| e.unwrap().0).collect();
            let want: Vec<_> = model.range(key(k)..).take(3).map(|(k, _)| k).collect();
            assert_eq!(got.len(), want.len(), "from {k}");
            for (g, w) in got.iter().zip(want) {
                assert_eq!(g.as_ref(), w.as_slice());
            }
        }
        // `next` after a cut-short `take` resumes at the following entry.
        let mut scan = db.range(key(10)..);
        let mut seen = Vec::new();
        while let Some(entry) = scan.next() {
            seen.push(entry.unwrap().0);
            if seen.len() == 2 {
                let last = scan.next_back().map(|e| e.unwrap().0);
                assert_eq!(last.as_deref(), model.keys().next_back().map(Vec::as_slice));
            }
        }
        // Every entry once: all but the last forward, the last backward.
        let want: Vec<_> = model.range(key(10)..).map(|(k, _)| k).collect();
        assert_eq!(seen.len() + 1, want.len());
        for (g, w) in seen.iter().zip(want) {
            assert_eq!(g.as_ref(), w.as_slice());
        }
    };
    check(&db, &model);
    // Only a range tombstone in the memtable.
    db.delete_range(key(50)..key(120)).unwrap();
    model.retain(|k, _| k.as_slice() < key(50).as_slice() || k.as_slice() >= key(120).as_slice());
    check(&db, &model);
}
