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

/// What a list-append transaction runs on: a siftdb transaction, or (the
/// checker's control) a snapshot read and a batch written without a check.
trait ListTxn {
    fn get(&self, key: &str) -> siftdb::Result<Option<bytes::Bytes>>;
    fn prefix(&self, prefix: &str) -> Vec<(bytes::Bytes, bytes::Bytes)>;
    fn put(&mut self, key: &str, value: Vec<u8>);
    /// `Ok(false)`: refused with a conflict.
    fn commit(self) -> siftdb::Result<bool>;
}

impl ListTxn for Transaction {
    fn get(&self, key: &str) -> siftdb::Result<Option<bytes::Bytes>> {
        Transaction::get(self, key)
    }
    fn prefix(&self, prefix: &str) -> Vec<(bytes::Bytes, bytes::Bytes)> {
        Transaction::prefix(self, prefix)
            .collect::<siftdb::Result<_>>()
            .unwrap()
    }
    fn put(&mut self, key: &str, value: Vec<u8>) {
        Transaction::put(self, key, value).unwrap();
    }
    fn commit(self) -> siftdb::Result<bool> {
        match Transaction::commit(self) {
            Err(Error::Conflict) => Ok(false),
            other => other.map(|()| true),
        }
    }
}

/// Reads at a snapshot, writes one batch, checks nothing: what the
/// checker must catch.
struct Unchecked<'a> {
    db: &'a Db,
    snapshot: siftdb::Snapshot,
    batch: siftdb::WriteBatch,
    written: std::collections::HashMap<String, Vec<u8>>,
}

impl ListTxn for Unchecked<'_> {
    fn get(&self, key: &str) -> siftdb::Result<Option<bytes::Bytes>> {
        match self.written.get(key) {
            Some(v) => Ok(Some(bytes::Bytes::copy_from_slice(v))),
            None => self.snapshot.get(key),
        }
    }
    fn prefix(&self, prefix: &str) -> Vec<(bytes::Bytes, bytes::Bytes)> {
        let mut entries: Vec<_> = self
            .snapshot
            .prefix(prefix)
            .collect::<siftdb::Result<_>>()
            .unwrap();
        for (k, v) in &self.written {
            entries.retain(|(key, _)| key.as_ref() != k.as_bytes());
            entries.push((bytes::Bytes::from(k.clone()), bytes::Bytes::from(v.clone())));
        }
        entries
    }
    fn put(&mut self, key: &str, value: Vec<u8>) {
        self.batch.put(key, &value);
        self.written.insert(key.to_string(), value);
    }
    fn commit(self) -> siftdb::Result<bool> {
        self.db.write(self.batch).map(|()| true)
    }
}

/// One random transaction: its recorded operations, and whether it committed.
fn run_one(txn: &mut impl ListTxn, rng: &mut SplitMix64, elements: &AtomicU64) -> Vec<Op> {
    let mut ops = Vec::new();
    for _ in 0..1 + rng.below(4) {
        let k = rng.below(KEYS);
        match rng.below(10) {
            0 => {
                // A scan of every list, forward or backward.
                let mut entries = txn.prefix("list");
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
                list: decode(txn.get(&key(k)).unwrap()),
            }),
            _ => {
                let element = elements.fetch_add(1, Ordering::Relaxed);
                let mut list = decode(txn.get(&key(k)).unwrap());
                list.push(element);
                txn.put(&key(k), encode(&list));
                ops.push(Op::Append { key: k, element });
            }
        }
    }
    ops
}

fn phase(
    db: &Arc<Db>,
    options: Option<TransactionOptions>,
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
                    let (ops, committed) = match options {
                        Some(options) => {
                            let mut txn = db.transaction_with(options);
                            let ops = run_one(&mut txn, &mut rng, &elements);
                            (ops, ListTxn::commit(txn).unwrap())
                        }
                        None => {
                            let mut txn = Unchecked {
                                db: &db,
                                snapshot: db.snapshot(),
                                batch: siftdb::WriteBatch::new(),
                                written: std::collections::HashMap::new(),
                            };
                            let ops = run_one(&mut txn, &mut rng, &elements);
                            (ops, ListTxn::commit(txn).unwrap())
                        }
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

fn run(options: Option<TransactionOptions>, seed: u64) -> Report {
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
    let report = run(Some(TransactionOptions::new()), 0x5149);
    assert_eq!(report.snapshot_isolation_anomalies(), 0, "{report:?}");
}

#[test]
fn serializable_histories_show_no_anomaly() {
    let report = run(Some(TransactionOptions::serializable()), 0x5e71);
    assert_eq!(report.serializable_anomalies(), 0, "{report:?}");
}

/// The control: the same workload without conflict checks loses updates,
/// and the checker says so.
#[test]
fn unchecked_read_modify_writes_show_lost_updates() {
    let report = run(None, 0xc0de);
    assert!(report.lost_update > 0, "{report:?}");
    assert!(report.snapshot_isolation_anomalies() > 0);
}
