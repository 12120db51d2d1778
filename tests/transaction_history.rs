//! List-append histories checked for isolation anomalies (the Elle checker
//! of `siftdb_testkit::elle`): 8 threads run a few thousand transactions
//! that read lists (by point reads and by scans) and append unique elements,
//! with flushes and compactions meanwhile and one reopen halfway; every
//! transaction's operations and outcome are recorded and the history
//! checked. Snapshot isolation must show no G0, G1a, G1b, G1c, lost update
//! or G-single; serializable no G2 either.
#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions: a failed assumption is a failed test"
)]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use siftdb::{Db, Error, Options, Transaction, TransactionOptions};
use siftdb_testkit::elle::{check, Op, Report, Txn};
use siftdb_testkit::SplitMix64;

const KEYS: u64 = 12;
const THREADS: u64 = 8;
const TXNS_PER_THREAD_PER_PHASE: u64 = 200;

fn key(k: u64) -> String {
    format!("list{k:02}")
}

fn decode(value: Option<bytes::Bytes>) -> Vec<u64> {
    value.map_or_else(Vec::new, |v| {
        v.chunks_exact(8)
            .map(|c| u64::from_be_bytes(c.try_into().unwrap()))
            .collect()
    })
}

fn encode(list: &[u64]) -> Vec<u8> {
    list.iter().flat_map(|e| e.to_be_bytes()).collect()
}

/// One random transaction: its recorded operations, and whether it committed.
fn run_one(txn: &mut Transaction, rng: &mut SplitMix64, elements: &AtomicU64) -> Vec<Op> {
    let mut ops = Vec::new();
    for _ in 0..1 + rng.below(4) {
        let k = rng.below(KEYS);
        match rng.below(10) {
            0 => {
                // A scan of every list, forward or backward.
                let forward = rng.below(2) == 0;
                let scan = txn.prefix("list");
                let mut entries: Vec<_> = if forward {
                    scan.collect::<siftdb::Result<_>>().unwrap()
                } else {
                    scan.rev().collect::<siftdb::Result<_>>().unwrap()
                };
                entries.sort();
                for k in 0..KEYS {
                    let found = entries
                        .iter()
                        .find(|(name, _)| name.as_ref() == key(k).as_bytes());
                    ops.push(Op::Read {
                        key: k,
                        list: decode(found.map(|(_, v)| v.clone())),
                    });
                }
            }
            1..=4 => ops.push(Op::Read {
                key: k,
                list: decode(txn.get(key(k)).unwrap()),
            }),
            _ => {
                let element = elements.fetch_add(1, Ordering::Relaxed);
                let mut list = decode(txn.get(key(k)).unwrap());
                list.push(element);
                txn.put(key(k), encode(&list)).unwrap();
                ops.push(Op::Append { key: k, element });
            }
        }
    }
    ops
}

fn phase(
    db: &Arc<Db>,
    options: TransactionOptions,
    seed: u64,
    elements: &Arc<AtomicU64>,
    history: &Arc<Mutex<Vec<Txn>>>,
) {
    let workers: Vec<_> = (0..THREADS)
        .map(|t| {
            let (db, elements, history) =
                (Arc::clone(db), Arc::clone(elements), Arc::clone(history));
            std::thread::spawn(move || {
                let mut rng = SplitMix64::new(seed ^ (t + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
                for i in 0..TXNS_PER_THREAD_PER_PHASE {
                    let mut txn = db.transaction_with(options);
                    let ops = run_one(&mut txn, &mut rng, &elements);
                    let committed = match txn.commit() {
                        Err(Error::Conflict) => false,
                        other => other.map(|()| true).unwrap(),
                    };
                    history.lock().unwrap().push(Txn { ops, committed });
                    if t == 0 && i % 40 == 39 {
                        if rng.below(2) == 0 {
                            db.flush().unwrap();
                        } else {
                            db.compact().unwrap();
                        }
                    }
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
}

fn run(options: TransactionOptions, seed: u64) -> Report {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options::default()
        .memtable_bytes(16 << 10)
        .level0_compaction_trigger(2);
    let elements = Arc::new(AtomicU64::new(0));
    let history = Arc::new(Mutex::new(Vec::new()));
    for round in 0..2 {
        let db = Arc::new(Db::open_with(dir.path(), opts.clone()).unwrap());
        phase(&db, options, seed + round, &elements, &history);
        Arc::try_unwrap(db).unwrap().close().unwrap();
    }
    // A last read of every list fixes each key's version order.
    let db = Db::open_with(dir.path(), opts).unwrap();
    let txn = db.transaction();
    let ops = (0..KEYS)
        .map(|k| Op::Read {
            key: k,
            list: decode(txn.get(key(k)).unwrap()),
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
        "{} transactions committed, {aborted} aborted; edges ww/wr/rw {:?}; anomalies: \
         G0 {} G1a {} G1b {} G1c {} lost update {} G-single {} G2 {} incompatible {}; {:?}",
        report.transactions,
        report.edges,
        report.g0,
        report.g1a,
        report.g1b,
        report.g1c,
        report.lost_update,
        report.g_single,
        report.g2,
        report.incompatible_order,
        report.examples
    );
    assert!(report.transactions > 1000);
    report
}

#[test]
fn snapshot_isolation_histories_show_no_anomaly_it_forbids() {
    let report = run(TransactionOptions::new(), 0x5149);
    assert_eq!(report.snapshot_isolation_anomalies(), 0, "{report:?}");
}

#[test]
fn serializable_histories_show_no_anomaly() {
    let report = run(TransactionOptions::serializable(), 0x5e71);
    assert_eq!(report.serializable_anomalies(), 0, "{report:?}");
}
