//! Bank transfers in transactions: 100 accounts, 8 threads of random
//! transfers retried on conflict; the total never changes — in every
//! snapshot taken while they run, and after a SIGKILL of a process doing
//! transfers and the recovery that follows.
//!
//! The killed process is this test binary run again with `CHILD_ENV` set:
//! it then runs only `child_process`.
#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions: a failed assumption is a failed test"
)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use siftdb::{Db, Error, Options, TransactionOptions, WriteBatch};
use siftdb_testkit::SplitMix64;

const CHILD_ENV: &str = "SIFTDB_BANK_CHILD";
const ACCOUNTS: u64 = 100;
const START: u64 = 1000;

fn options() -> Options {
    Options::default()
        .memtable_bytes(16 << 10)
        .level0_compaction_trigger(2)
}

fn account(i: u64) -> String {
    format!("acct{i:03}")
}

fn amount(v: &[u8]) -> u64 {
    std::str::from_utf8(v).unwrap().parse().unwrap()
}

/// Creates the accounts (once).
fn open_bank(dir: &std::path::Path) -> Db {
    let db = Db::open_with(dir, options()).unwrap();
    if db.get(account(0)).unwrap().is_none() {
        let mut batch = WriteBatch::new();
        for i in 0..ACCOUNTS {
            batch.put(account(i), START.to_string());
        }
        db.write(batch).unwrap();
    }
    db
}

/// The sum of every account as `scan` shows them.
fn total(scan: impl Iterator<Item = siftdb::Result<(bytes::Bytes, bytes::Bytes)>>) -> u64 {
    let entries: Vec<_> = scan.collect::<siftdb::Result<_>>().unwrap();
    assert_eq!(entries.len() as u64, ACCOUNTS);
    entries.iter().map(|(_, v)| amount(v)).sum()
}

/// One transfer, retried until it commits; returns the conflicts met.
fn transfer(db: &Db, rng: &mut SplitMix64, options: TransactionOptions) -> u64 {
    let from = rng.below(ACCOUNTS);
    let to = (from + 1 + rng.below(ACCOUNTS - 1)) % ACCOUNTS;
    let mut conflicts = 0;
    loop {
        let mut txn = db.transaction_with(options);
        let a = amount(&txn.get_for_update(account(from)).unwrap().unwrap());
        let b = amount(&txn.get_for_update(account(to)).unwrap().unwrap());
        let moved = rng.below(a + 1);
        txn.put(account(from), (a - moved).to_string()).unwrap();
        txn.put(account(to), (b + moved).to_string()).unwrap();
        match txn.commit() {
            Err(Error::Conflict) => conflicts += 1,
            other => return other.map(|()| conflicts).unwrap(),
        }
    }
}

fn run_bank(options: TransactionOptions) {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(open_bank(dir.path()));
    let stop = Arc::new(AtomicBool::new(false));
    let auditor = {
        let (db, stop) = (Arc::clone(&db), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut audits = 0;
            while !stop.load(Ordering::Acquire) {
                assert_eq!(total(db.snapshot().prefix("acct")), ACCOUNTS * START);
                assert_eq!(
                    total(db.transaction().prefix("acct").rev()),
                    ACCOUNTS * START
                );
                audits += 1;
            }
            audits
        })
    };
    let tellers: Vec<_> = (0..8u64)
        .map(|t| {
            let db = Arc::clone(&db);
            std::thread::spawn(move || {
                let mut rng = SplitMix64::new(t + 11);
                (0..300)
                    .map(|_| transfer(&db, &mut rng, options))
                    .sum::<u64>()
            })
        })
        .collect();
    let conflicts: u64 = tellers.into_iter().map(|t| t.join().unwrap()).sum();
    stop.store(true, Ordering::Release);
    let audits = auditor.join().unwrap();
    assert_eq!(total(db.prefix("acct")), ACCOUNTS * START);
    let stats = db.stats();
    assert_eq!(stats.transaction_commits, 8 * 300);
    assert_eq!(stats.transaction_conflicts, conflicts);
    eprintln!(
        "2400 transfers, {conflicts} conflicts, {audits} audits, oracle {} bytes",
        stats.oracle_bytes
    );
}

#[test]
fn transfers_keep_the_total_under_snapshot_isolation() {
    run_bank(TransactionOptions::new());
}

#[test]
fn transfers_keep_the_total_under_serializable() {
    run_bank(TransactionOptions::serializable());
}

/// The body of one child process (does nothing in the parent).
#[test]
fn child_process() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let db = Arc::new(open_bank(std::path::Path::new(&dir)));
    let tellers: Vec<_> = (0..4u64)
        .map(|t| {
            let db = Arc::clone(&db);
            std::thread::spawn(move || {
                let mut rng = SplitMix64::new(t + std::process::id() as u64);
                for i in 0.. {
                    transfer(&db, &mut rng, TransactionOptions::new());
                    if t == 0 {
                        println!("committed {i}");
                    }
                }
            })
        })
        .collect();
    for t in tellers {
        t.join().unwrap();
    }
}

#[test]
fn the_total_survives_a_kill_in_the_middle_of_transfers() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut rng = SplitMix64::new(0xba4c);
    for round in 0..4 {
        let mut child = Command::new(&exe)
            .args([
                "--exact",
                "child_process",
                "--test-threads",
                "1",
                "--quiet",
                "--nocapture",
            ])
            .env(CHILD_ENV, dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let wanted = 50 + rng.below(500);
        let stdout = child.stdout.take().unwrap();
        let seen = BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .filter(|l| l.starts_with("committed "))
            .take(usize::try_from(wanted).unwrap())
            .count();
        // SIGKILL: no destructor, no close record.
        child.kill().unwrap();
        child.wait().unwrap();
        let db = open_bank(dir.path());
        assert_eq!(total(db.prefix("acct")), ACCOUNTS * START, "round {round}");
        eprintln!("round {round}: killed after {seen} transfers of one teller; total kept");
    }
}
