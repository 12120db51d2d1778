//! Transactions: reads of their own writes (points and scans, both
//! directions, deletes and range deletes, across keyspaces) against a
//! model, write skew under snapshot isolation and under serializable, lost
//! updates, compare-and-swap, and bad input.
#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions: a failed assumption is a failed test"
)]

use std::collections::BTreeMap;
use std::sync::Arc;

use bytes::Bytes;
use siftdb::{CompareAndSwap, Db, Error, Options, TransactionOptions};
use siftdb_testkit::SplitMix64;

fn open(dir: &std::path::Path) -> Db {
    Db::open_with(dir, Options::default().memtable_bytes(32 << 10)).unwrap()
}

fn collect(iter: impl Iterator<Item = siftdb::Result<(Bytes, Bytes)>>) -> Vec<(Bytes, Bytes)> {
    iter.collect::<siftdb::Result<_>>().unwrap()
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn model_range(model: &Model, lo: &[u8], hi: &[u8]) -> Vec<(Bytes, Bytes)> {
    model
        .range(lo.to_vec()..hi.to_vec())
        .map(|(k, v)| (Bytes::copy_from_slice(k), Bytes::copy_from_slice(v)))
        .collect()
}

#[test]
fn a_transaction_reads_its_own_writes_in_points_and_scans_both_ways() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let other = db.keyspace("other").unwrap();
    let mut rng = SplitMix64::new(7);
    let key = |i: u64| format!("k{i:03}").into_bytes();
    for round in 0..20 {
        // The database's state, some of it flushed.
        let mut models = [Model::new(), Model::new()];
        for i in 0..60 {
            if rng.below(2) == 0 {
                let v = format!("db{round}-{i}").into_bytes();
                db.put(key(i), &v).unwrap();
                models[0].insert(key(i), v);
            } else {
                db.delete(key(i)).unwrap();
                models[0].remove(&key(i));
            }
            let v = format!("o{round}-{i}").into_bytes();
            other.put(key(i), &v).unwrap();
            models[1].insert(key(i), v);
        }
        if round % 3 == 0 {
            db.flush().unwrap();
        }
        let mut txn = db.transaction();
        // The models at each savepoint still set.
        let mut savepoints: Vec<[Model; 2]> = Vec::new();
        // Written after the transaction started: invisible to it.
        db.put(key(1000), "late").unwrap();
        for _ in 0..40 {
            let space = usize::from(rng.below(2) == 1);
            let ks = if space == 0 {
                db.default_keyspace()
            } else {
                other.clone()
            };
            let i = rng.below(70);
            match rng.below(8) {
                6 => {
                    txn.set_savepoint();
                    savepoints.push(models.clone());
                }
                7 => match savepoints.pop() {
                    Some(saved) => {
                        txn.rollback_to_savepoint().unwrap();
                        models = saved;
                    }
                    None => assert!(matches!(
                        txn.rollback_to_savepoint(),
                        Err(Error::InvalidArgument(_))
                    )),
                },
                0..=2 => {
                    let v = format!("t{round}-{i}").into_bytes();
                    txn.put_in(&ks, key(i), &v).unwrap();
                    models[space].insert(key(i), v);
                }
                3 | 4 => {
                    txn.delete_in(&ks, key(i)).unwrap();
                    models[space].remove(&key(i));
                }
                _ => {
                    let end = i + rng.below(10);
                    if space == 0 {
                        txn.delete_range(key(i)..key(end)).unwrap();
                    } else {
                        txn.delete_range_in(&ks, key(i)..key(end)).unwrap();
                    }
                    let doomed: Vec<_> = models[space]
                        .range(key(i)..key(end))
                        .map(|(k, _)| k.clone())
                        .collect();
                    for k in doomed {
                        models[space].remove(&k);
                    }
                }
            }
            let (lo, hi) = (key(rng.below(40)), key(40 + rng.below(40)));
            let want = model_range(&models[space], &lo, &hi);
            assert_eq!(collect(txn.range_in(&ks, lo.clone()..hi.clone())), want);
            let mut back = collect(txn.range_in(&ks, lo.clone()..hi.clone()).rev());
            back.reverse();
            assert_eq!(back, want);
            // Both ends at once meet without a repeat or a gap.
            let mut both = txn.range_in(&ks, lo.clone()..hi.clone());
            let (mut front, mut tail) = (Vec::new(), Vec::new());
            loop {
                match both.next() {
                    Some(e) => front.push(e.unwrap()),
                    None => break,
                }
                match both.next_back() {
                    Some(e) => tail.push(e.unwrap()),
                    None => break,
                }
            }
            tail.reverse();
            front.extend(tail);
            assert_eq!(front, want);
            let probe = key(rng.below(70));
            assert_eq!(
                txn.get_in(&ks, &probe).unwrap().as_deref(),
                models[space].get(&probe).map(Vec::as_slice)
            );
        }
        assert_eq!(txn.get(key(1000)).unwrap(), None);
        let probes: Vec<_> = (0..70).step_by(7).map(key).collect();
        let want: Vec<_> = probes
            .iter()
            .map(|k| models[1].get(k).map(|v| Bytes::copy_from_slice(v)))
            .collect();
        assert_eq!(txn.multi_get_in(&other, &probes).unwrap(), want);
        if !savepoints.is_empty() {
            // Popped, a savepoint keeps the writes made since.
            txn.pop_savepoint().unwrap();
        }
        let all: Vec<_> = collect(txn.iter());
        txn.commit().unwrap();
        // Committed: the database shows what the transaction showed (with
        // the late write).
        let mut now = collect(db.iter());
        now.retain(|(k, _)| k.as_ref() != key(1000).as_slice());
        assert_eq!(now, all);
        assert_eq!(collect(other.iter()), model_range(&models[1], b"", b"z"));
        db.delete(key(1000)).unwrap();
        for i in 0..70 {
            db.delete(key(i)).unwrap();
            other.delete(key(i)).unwrap();
        }
    }
}

/// Two doctors on call; each goes off call if the other is on. Under
/// snapshot isolation both commit (write skew); serializable refuses one.
fn doctors(options: TransactionOptions) -> (siftdb::Result<()>, siftdb::Result<()>, usize) {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    db.put("oncall/alice", "1").unwrap();
    db.put("oncall/bob", "1").unwrap();
    let mut a = db.transaction_with(options);
    let mut b = db.transaction_with(options);
    let on = |t: &siftdb::Transaction| {
        collect(t.prefix("oncall/"))
            .iter()
            .filter(|(_, v)| v.as_ref() == b"1")
            .count()
    };
    assert_eq!(on(&a), 2);
    assert_eq!(on(&b), 2);
    a.put("oncall/alice", "0").unwrap();
    b.put("oncall/bob", "0").unwrap();
    let (ra, rb) = (a.commit(), b.commit());
    let left = collect(db.prefix("oncall/"))
        .iter()
        .filter(|(_, v)| v.as_ref() == b"1")
        .count();
    (ra, rb, left)
}

#[test]
fn write_skew_is_allowed_under_snapshot_isolation_and_refused_under_serializable() {
    let (a, b, left) = doctors(TransactionOptions::new());
    a.unwrap();
    b.unwrap();
    assert_eq!(left, 0, "snapshot isolation shows write skew");
    let (a, b, left) = doctors(TransactionOptions::serializable());
    a.unwrap();
    assert!(matches!(b, Err(Error::Conflict)), "{b:?}");
    assert_eq!(left, 1);
}

#[test]
fn a_point_read_conflicts_under_serializable_only() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    for serializable in [false, true] {
        let opts = if serializable {
            TransactionOptions::serializable()
        } else {
            TransactionOptions::new()
        };
        let mut t = db.transaction_with(opts);
        t.get("x").unwrap();
        t.put("y", "1").unwrap();
        db.put("x", "2").unwrap(); // a plain write after the snapshot
        assert_eq!(t.commit().is_err(), serializable);
    }
    // A plain write also conflicts with a transaction that wrote the key.
    let mut t = db.transaction();
    t.put("x", "3").unwrap();
    db.put("x", "4").unwrap();
    assert!(matches!(t.commit(), Err(Error::Conflict)));
    // And a range delete with a key read for update.
    let mut t = db.transaction();
    t.get_for_update("x").unwrap();
    t.put("z", "1").unwrap();
    db.delete_range("a".."y").unwrap();
    assert!(matches!(t.commit(), Err(Error::Conflict)));
    let stats = db.stats();
    assert_eq!(stats.transaction_conflicts, 3);
    assert_eq!(stats.transaction_commits, 1);
}

#[test]
fn concurrent_increments_lose_no_update() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(open(dir.path()));
    let threads = 4;
    let per_thread = 200;
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let db = Arc::clone(&db);
            std::thread::spawn(move || {
                let mut conflicts = 0;
                for _ in 0..per_thread {
                    loop {
                        let mut t = db.transaction();
                        let n: u64 = t
                            .get("counter")
                            .unwrap()
                            .map_or(0, |v| std::str::from_utf8(&v).unwrap().parse().unwrap());
                        t.put("counter", (n + 1).to_string()).unwrap();
                        match t.commit() {
                            Ok(()) => break,
                            Err(Error::Conflict) => conflicts += 1,
                            Err(e) => panic!("{e}"),
                        }
                    }
                }
                conflicts
            })
        })
        .collect();
    let conflicts: u64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
    let n = db.get("counter").unwrap().unwrap();
    assert_eq!(n.as_ref(), (threads * per_thread).to_string().as_bytes());
    let stats = db.stats();
    assert_eq!(stats.transaction_commits, threads * per_thread);
    assert_eq!(stats.transaction_conflicts, conflicts);
    eprintln!("{conflicts} conflicts, oracle {} bytes", stats.oracle_bytes);
}

#[test]
fn a_transaction_moves_between_threads() {
    fn assert_send<T: Send>() {}
    assert_send::<siftdb::Transaction>();
    assert_send::<siftdb::TransactionIter>();
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let mut txn = db.transaction();
    txn.put("k", "v").unwrap();
    let txn = std::thread::spawn(move || txn).join().unwrap();
    txn.commit().unwrap();
    assert_eq!(db.get("k").unwrap().as_deref(), Some(&b"v"[..]));
    // A refused commit is not counted as a write.
    let before = db.stats().writes;
    let mut t = db.transaction();
    t.put("k", "w").unwrap();
    db.put("k", "x").unwrap();
    assert!(t.commit().is_err());
    assert_eq!(db.stats().writes, before + 1);
}

#[test]
fn compare_and_swap_swaps_only_the_expected_value() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(open(dir.path()));
    assert!(db
        .compare_and_swap("k", None, Some(b"1"))
        .unwrap()
        .swapped());
    assert_eq!(
        db.compare_and_swap("k", None, Some(b"2")).unwrap(),
        CompareAndSwap::Mismatch {
            current: Some(Bytes::from_static(b"1"))
        }
    );
    assert!(db
        .compare_and_swap("k", Some(b"1"), None)
        .unwrap()
        .swapped());
    assert_eq!(db.get("k").unwrap(), None);
    let ks = db.keyspace("ks").unwrap();
    assert!(ks
        .compare_and_swap("k", None, Some(b"x"))
        .unwrap()
        .swapped());
    assert_eq!(db.get("k").unwrap(), None);
    // Threads increment by compare-and-swap: none is lost.
    db.put("n", "0").unwrap();
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let db = Arc::clone(&db);
            std::thread::spawn(move || {
                for _ in 0..100 {
                    loop {
                        let cur = db.get("n").unwrap().unwrap();
                        let next = (std::str::from_utf8(&cur).unwrap().parse::<u64>().unwrap() + 1)
                            .to_string();
                        if db
                            .compare_and_swap("n", Some(&cur), Some(next.as_bytes()))
                            .unwrap()
                            .swapped()
                        {
                            break;
                        }
                    }
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    assert_eq!(db.get("n").unwrap().unwrap().as_ref(), b"400");
}

#[test]
fn bad_input_is_an_error_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let ks = db.keyspace("doomed").unwrap();
    ks.put("a", "1").unwrap();
    let mut t = db.transaction();
    t.put_in(&ks, "b", "2").unwrap();
    t.put("c", "3").unwrap();
    db.drop_keyspace("doomed").unwrap();
    // Reads go on at the snapshot; writes to the dropped keyspace and the
    // commit are refused, and nothing of the transaction is written.
    assert_eq!(t.get_in(&ks, "a").unwrap().as_deref(), Some(&b"1"[..]));
    assert!(matches!(
        t.put_in(&ks, "d", "4"),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(t.commit(), Err(Error::InvalidArgument(_))));
    assert_eq!(db.get("c").unwrap(), None);
    // Oversized keys and values, a reversed range.
    let mut t = db.transaction();
    assert!(t.put(vec![0u8; siftdb::MAX_KEY_LEN + 1], "v").is_err());
    assert!(t.put("k", vec![0u8; siftdb::MAX_VALUE_LEN + 1]).is_err());
    assert!(t.get(vec![0u8; siftdb::MAX_KEY_LEN + 1]).is_err());
    assert!(t.delete_range_in(&db.default_keyspace(), "b".."a").is_err());
    t.rollback();
    // A transaction on a read-only database commits nothing.
    drop(db);
    let ro = Db::open_read_only(dir.path()).unwrap();
    let mut t = ro.transaction();
    t.put("x", "y").unwrap();
    assert!(matches!(t.commit(), Err(Error::ReadOnly { .. })));
}

#[test]
fn a_commit_is_one_atomic_durable_batch() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = open(dir.path());
        let ks = db.keyspace("ks").unwrap();
        let mut t = db.transaction_with(
            TransactionOptions::serializable()
                .write_options(siftdb::WriteOptions::new().sync(true)),
        );
        t.put("a", "1").unwrap();
        t.put_in(&ks, "b", "2").unwrap();
        t.commit().unwrap();
        assert_eq!(db.stats().writes, 1);
    }
    let db = open(dir.path());
    assert_eq!(db.get("a").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(
        db.keyspace("ks").unwrap().get("b").unwrap().as_deref(),
        Some(&b"2"[..])
    );
}
