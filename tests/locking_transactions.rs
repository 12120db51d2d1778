//! Locking (pessimistic) transactions: a held row lock makes others wait
//! and time out with the key; deadlocks of two and of three transactions
//! are refused in one victim while the others commit; locks go at commit,
//! rollback and drop; keyspaces lock apart; a plain write after a read for
//! update fails the commit instead of being lost; bank transfers across two
//! keyspaces under 8 threads against a per-account model; and list-append
//! histories with every read for update, checked by the Elle checker
//! (`siftdb_testkit::elle`) for every anomaly serializability forbids.
#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions: a failed assumption is a failed test"
)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::Duration;

use siftdb::{Db, Error, Options, TransactionOptions};
use siftdb_testkit::elle::{check, Op, Txn};
use siftdb_testkit::SplitMix64;

fn open(dir: &std::path::Path) -> Db {
    Db::open_with(
        dir,
        Options::default()
            .memtable_bytes(16 << 10)
            .level0_compaction_trigger(2),
    )
    .unwrap()
}

/// Long enough that only a deadlock left undetected runs it out.
const PATIENT: Duration = Duration::from_secs(10);

fn locking(timeout: Duration) -> TransactionOptions {
    TransactionOptions::pessimistic().lock_timeout(timeout)
}

#[test]
fn a_held_lock_makes_others_time_out_with_the_key_and_reads_are_current() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    db.put("k", "0").unwrap();
    let mut holder = db.transaction_with(TransactionOptions::pessimistic());
    let mut other = db.transaction_with(locking(Duration::from_millis(30)));
    assert_eq!(
        holder.get_for_update("k").unwrap().as_deref(),
        Some(&b"0"[..])
    );
    match other.get_for_update("k") {
        Err(Error::LockTimeout { key, timeout }) => {
            assert_eq!(key, b"k");
            assert_eq!(timeout, Duration::from_millis(30));
        }
        other => panic!("expected a lock timeout, got {other:?}"),
    }
    // A write waits for the lock too; a key nobody holds does not.
    assert!(matches!(
        other.put("k", "x"),
        Err(Error::LockTimeout { .. })
    ));
    other.put("free", "x").unwrap();
    holder.put("k", "1").unwrap();
    holder.commit().unwrap();
    // `other` started before that commit, and reads it once locked.
    assert_eq!(
        other.get_for_update("k").unwrap().as_deref(),
        Some(&b"1"[..])
    );
    other.put("k", "2").unwrap();
    other.commit().unwrap();
    assert_eq!(db.get("k").unwrap().as_deref(), Some(&b"2"[..]));
    assert_eq!(db.get("free").unwrap().as_deref(), Some(&b"x"[..]));
}

#[test]
fn locks_are_released_at_commit_rollback_and_drop_and_keyspaces_lock_apart() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    let other_space = db.keyspace("other").unwrap();
    let at_once = locking(Duration::ZERO);
    let free = |key: &str| {
        let txn = db.transaction_with(at_once);
        txn.get_for_update(key).map(drop)
    };
    // Dropped.
    let mut txn = db.transaction_with(at_once);
    txn.put("a", "1").unwrap();
    txn.get_for_update("b").unwrap();
    assert!(matches!(free("a"), Err(Error::LockTimeout { .. })));
    assert!(matches!(free("b"), Err(Error::LockTimeout { .. })));
    drop(txn);
    free("a").unwrap();
    free("b").unwrap();
    // Rolled back.
    let mut txn = db.transaction_with(at_once);
    txn.delete("a").unwrap();
    txn.rollback();
    free("a").unwrap();
    // Committed; and the same key in another keyspace is another lock.
    let mut txn = db.transaction_with(at_once);
    txn.put_in(&other_space, "a", "in other").unwrap();
    assert!(free("a").is_ok());
    txn.put("a", "in default").unwrap();
    assert!(matches!(free("a"), Err(Error::LockTimeout { .. })));
    txn.commit().unwrap();
    free("a").unwrap();
    assert_eq!(
        other_space.get("a").unwrap().as_deref(),
        Some(&b"in other"[..])
    );
    // A commit of nothing releases too, and range deletes are refused.
    let mut txn = db.transaction_with(at_once);
    txn.get_for_update("a").unwrap();
    assert!(matches!(
        txn.delete_range("a".."b"),
        Err(Error::InvalidArgument(_))
    ));
    txn.commit().unwrap();
    free("a").unwrap();
}

/// Runs one locking transaction per element of `rings`: transaction `i`
/// locks key `i`, all meet at a barrier, then each locks key `i + 1`
/// (mod n): a cycle of waits. Returns (deadlocks, commits, other errors).
fn ring(n: usize) -> (usize, usize, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(open(dir.path()));
    let barrier = Arc::new(Barrier::new(n));
    let outcomes: Vec<_> = (0..n)
        .map(|i| {
            let (db, barrier) = (Arc::clone(&db), Arc::clone(&barrier));
            std::thread::spawn(move || {
                let mut txn = db.transaction_with(locking(PATIENT));
                txn.get_for_update(format!("k{i}")).unwrap();
                barrier.wait();
                let next = format!("k{}", (i + 1) % n);
                match txn.get_for_update(&next) {
                    Ok(_) => {
                        txn.put(&next, format!("by {i}")).unwrap();
                        txn.commit().map(|()| "commit".to_string())
                    }
                    // The victim rolls back (drops) at once.
                    Err(Error::Deadlock { key }) => {
                        assert_eq!(key, next.as_bytes());
                        Ok("deadlock".to_string())
                    }
                    Err(e) => Err(e),
                }
            })
        })
        .collect();
    let outcomes: Vec<_> = outcomes.into_iter().map(|t| t.join().unwrap()).collect();
    let count = |what: &str| {
        outcomes
            .iter()
            .filter(|o| o.as_ref().is_ok_and(|o| o == what))
            .count()
    };
    let errors = outcomes
        .iter()
        .filter_map(|o| o.as_ref().err().map(ToString::to_string))
        .collect();
    (count("deadlock"), count("commit"), errors)
}

#[test]
fn a_two_transaction_deadlock_has_one_victim_and_the_other_commits() {
    for _ in 0..5 {
        assert_eq!(ring(2), (1, 1, vec![]));
    }
}

#[test]
fn a_three_transaction_deadlock_has_one_victim_and_the_others_commit() {
    for _ in 0..5 {
        assert_eq!(ring(3), (1, 2, vec![]));
    }
}

#[test]
fn a_plain_write_after_a_read_for_update_fails_the_commit_instead_of_being_lost() {
    let dir = tempfile::tempdir().unwrap();
    let db = open(dir.path());
    db.put("n", "1").unwrap();
    let mut txn = db.transaction_with(TransactionOptions::pessimistic());
    let read = txn.get_for_update("n").unwrap();
    assert_eq!(read.as_deref(), Some(&b"1"[..]));
    // A plain write takes no lock: it goes in, after the read.
    db.put("n", "5").unwrap();
    txn.put("n", "2").unwrap();
    assert!(matches!(txn.commit(), Err(Error::Conflict)));
    assert_eq!(db.get("n").unwrap().as_deref(), Some(&b"5"[..]));
    // A plain write before the read is simply read.
    let mut txn = db.transaction_with(TransactionOptions::pessimistic());
    db.put("n", "6").unwrap();
    assert_eq!(txn.get_for_update("n").unwrap().as_deref(), Some(&b"6"[..]));
    txn.put("n", "7").unwrap();
    txn.commit().unwrap();
    assert_eq!(db.get("n").unwrap().as_deref(), Some(&b"7"[..]));
}

const ACCOUNTS: u64 = 16;
const START: i64 = 1000;

fn parse(value: Option<bytes::Bytes>) -> i64 {
    std::str::from_utf8(&value.unwrap())
        .unwrap()
        .parse()
        .unwrap()
}

/// Bank transfers between 16 accounts (even ones in the default keyspace,
/// odd ones in `savings`), hot ones drawn more often, 8 threads: each
/// transfer reads both balances for update and writes both. Deadlocks and
/// timeouts roll back and retry; a conflict must never happen (no writer
/// skips the locks). Every account ends at its start plus the transfers
/// that committed (a lost update would break it), and every snapshot taken
/// meanwhile sums to the total.
#[test]
fn bank_transfers_under_threads_match_the_model_and_keep_the_total() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(open(dir.path()));
    let savings = db.keyspace("savings").unwrap();
    let account = |a: u64| format!("acct{a:02}");
    for a in 0..ACCOUNTS {
        let space = if a.is_multiple_of(2) {
            db.default_keyspace()
        } else {
            savings.clone()
        };
        space.put(account(a), START.to_string()).unwrap();
    }
    let retries = Arc::new(AtomicU64::new(0));
    let done = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let auditor = {
        let (db, savings, done) = (Arc::clone(&db), savings.clone(), Arc::clone(&done));
        std::thread::spawn(move || {
            let mut audits = 0;
            while !done.load(Ordering::Acquire) || audits == 0 {
                let snapshot = db.snapshot();
                let total: i64 = (0..ACCOUNTS)
                    .map(|a| {
                        let space = if a.is_multiple_of(2) {
                            db.default_keyspace()
                        } else {
                            savings.clone()
                        };
                        parse(snapshot.get_in(&space, account(a)).unwrap())
                    })
                    .sum();
                assert_eq!(total, START * ACCOUNTS as i64);
                audits += 1;
            }
        })
    };
    let workers: Vec<_> = (0..8u64)
        .map(|t| {
            let (db, savings, retries) = (Arc::clone(&db), savings.clone(), Arc::clone(&retries));
            std::thread::spawn(move || {
                let mut rng = SplitMix64::new(0xba2c ^ t);
                let mut model: BTreeMap<u64, i64> = BTreeMap::new();
                for _ in 0..150 {
                    // Half the transfers touch the four hot accounts.
                    let pick = |rng: &mut SplitMix64| {
                        if rng.below(2) == 0 {
                            rng.below(4)
                        } else {
                            rng.below(ACCOUNTS)
                        }
                    };
                    let from = pick(&mut rng);
                    let to = (from + 1 + rng.below(ACCOUNTS - 1)) % ACCOUNTS;
                    let amount = 1 + rng.below(20) as i64;
                    let space = |a: u64| {
                        if a.is_multiple_of(2) {
                            db.default_keyspace()
                        } else {
                            savings.clone()
                        }
                    };
                    loop {
                        let mut txn = db.transaction_with(locking(PATIENT));
                        let attempt = (|| {
                            let a = parse(txn.get_for_update_in(&space(from), account(from))?);
                            let b = parse(txn.get_for_update_in(&space(to), account(to))?);
                            txn.put_in(&space(from), account(from), (a - amount).to_string())?;
                            txn.put_in(&space(to), account(to), (b + amount).to_string())
                        })();
                        match attempt {
                            Ok(()) => {
                                txn.commit().unwrap();
                                *model.entry(from).or_default() -= amount;
                                *model.entry(to).or_default() += amount;
                                break;
                            }
                            Err(Error::Deadlock { .. } | Error::LockTimeout { .. }) => {
                                retries.fetch_add(1, Ordering::Relaxed);
                            }
                            Err(e) => panic!("transfer {from} -> {to}: {e}"),
                        }
                    }
                }
                model
            })
        })
        .collect();
    let mut expected: BTreeMap<u64, i64> = (0..ACCOUNTS).map(|a| (a, START)).collect();
    for worker in workers {
        for (a, delta) in worker.join().unwrap() {
            *expected.entry(a).or_default() += delta;
        }
    }
    done.store(true, Ordering::Release);
    auditor.join().unwrap();
    for (a, want) in expected {
        let space = if a.is_multiple_of(2) {
            db.default_keyspace()
        } else {
            savings.clone()
        };
        assert_eq!(parse(space.get(account(a)).unwrap()), want, "account {a}");
    }
    eprintln!(
        "{} deadlocks or timeouts retried",
        retries.load(Ordering::Relaxed)
    );
}

/// List-append transactions whose every read is for update, 8 threads,
/// with flushes and compactions: the history checked by Elle must show no
/// anomaly serializability forbids (G0, G1a/b/c, lost update, G-single,
/// G2). Deadlocked or timed-out transactions are recorded as aborted.
#[test]
fn locking_histories_with_every_read_for_update_are_serializable() {
    const KEYS: u64 = 12;
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(open(dir.path()));
    let key = |k: u64| format!("list{k:02}");
    let decode = |value: Option<bytes::Bytes>| -> Vec<u64> {
        value.map_or_else(Vec::new, |v| {
            v.chunks_exact(8)
                .map(|c| u64::from_be_bytes(c.try_into().unwrap()))
                .collect()
        })
    };
    let elements = Arc::new(AtomicU64::new(0));
    let history = Arc::new(Mutex::new(Vec::new()));
    let workers: Vec<_> = (0..8u64)
        .map(|t| {
            let (db, elements, history) =
                (Arc::clone(&db), Arc::clone(&elements), Arc::clone(&history));
            std::thread::spawn(move || {
                let mut rng = SplitMix64::new(0x10c4 ^ (t + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
                for i in 0..200 {
                    let mut txn = db.transaction_with(locking(PATIENT));
                    let mut ops = Vec::new();
                    let run = (|| {
                        for _ in 0..1 + rng.below(4) {
                            let k = rng.below(KEYS);
                            let list = decode(txn.get_for_update(key(k))?);
                            if rng.below(2) == 0 {
                                ops.push(Op::Read { key: k, list });
                            } else {
                                let element = elements.fetch_add(1, Ordering::Relaxed);
                                let mut list = list;
                                list.push(element);
                                let bytes: Vec<u8> =
                                    list.iter().flat_map(|e| e.to_be_bytes()).collect();
                                txn.put(key(k), bytes)?;
                                ops.push(Op::Append { key: k, element });
                            }
                        }
                        Ok::<(), Error>(())
                    })();
                    let committed = match run {
                        Ok(()) => {
                            txn.commit().unwrap();
                            true
                        }
                        Err(Error::Deadlock { .. } | Error::LockTimeout { .. }) => false,
                        Err(e) => panic!("{e}"),
                    };
                    history.lock().unwrap().push(Txn { ops, committed });
                    if t == 0 && i % 40 == 39 {
                        db.flush().unwrap();
                        db.compact().unwrap();
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    // A last read of every list fixes each key's version order.
    let ops = (0..KEYS)
        .map(|k| Op::Read {
            key: k,
            list: decode(db.get(key(k)).unwrap()),
        })
        .collect();
    let mut history = std::mem::take(&mut *history.lock().unwrap());
    history.push(Txn {
        ops,
        committed: true,
    });
    let report = check(&history);
    let aborted = history.iter().filter(|t| !t.committed).count();
    eprintln!(
        "{} committed, {aborted} aborted (deadlock or timeout); edges ww/wr/rw {:?}",
        report.transactions, report.edges
    );
    assert!(report.transactions > 1000);
    assert!(report.edges.iter().all(|&e| e > 0), "{report:?}");
    assert_eq!(report.serializable_anomalies(), 0, "{report:?}");
}

/// Through the tokio facade: a write's lock is taken on the blocking pool,
/// so a task waiting for one blocks no worker; the lock goes at commit.
#[cfg(feature = "tokio")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_locking_transactions_wait_time_out_and_release() {
    let dir = tempfile::tempdir().unwrap();
    let db = siftdb::AsyncDb::open_with(dir.path(), Options::default())
        .await
        .unwrap();
    let holder = db.transaction_with(TransactionOptions::pessimistic());
    holder.put("k", "1").await.unwrap();
    let other = db.transaction_with(locking(Duration::from_millis(30)));
    assert!(matches!(
        other.put("k", "2").await,
        Err(Error::LockTimeout { .. })
    ));
    assert!(matches!(
        other.get_for_update("k").await,
        Err(Error::LockTimeout { .. })
    ));
    holder.commit().await.unwrap();
    assert_eq!(
        other.get_for_update("k").await.unwrap().as_deref(),
        Some(&b"1"[..])
    );
    other.put("k", "2").await.unwrap();
    other.commit().await.unwrap();
    assert_eq!(db.get("k").await.unwrap().as_deref(), Some(&b"2"[..]));
}
