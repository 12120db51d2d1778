//! Separated values under SIGKILL: a child process writes batches that
//! each put one key with a value past the blob threshold (and a `last`
//! marker), printing every acknowledged batch, while small memtables make
//! it flush, compact and collect blob files all the time; the parent kills
//! it at a random moment, reopens, and checks that every acknowledged
//! write is there with its value — the whole database is determined by its
//! newest batch — and that `verify_checksums` passes, in a loop, with
//! synced writes and without.
//!
//! The child is this test binary run again with `CHILD_ENV` set: it then
//! runs only `child_process`.
#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions: a failed assumption is a failed test"
)]

use siftdb::{Db, Options, WriteBatch, WriteOptions};
use siftdb_testkit::kill_rounds::{run_kill_rounds, KillRounds};

/// Set (to `DIR`, tab, `sync` or `nosync`) in a child process.
const CHILD_ENV: &str = "SIFTDB_BLOB_CRASH_CHILD";
const KEYS: u64 = 200;
const ROUNDS: u64 = 6;

fn options() -> Options {
    // Small memtables: flushes, compactions and blob collection while it
    // runs; every collection rewrites the oldest half of the blob files.
    Options::default()
        .memtable_bytes(32 << 10)
        .level0_compaction_trigger(2)
        .level1_bytes(128 << 10)
        .table_target_bytes(32 << 10)
        .blob_threshold(Some(128))
        .blob_gc_age_cutoff(0.5)
}

fn key(i: u64) -> String {
    format!("key{:04}", i % KEYS)
}

/// Batch `i`'s value: 100 to 1,500 bytes (most past the threshold).
fn value(i: u64) -> Vec<u8> {
    let mut out = format!("{i}:").into_bytes();
    out.resize(100 + (i * 37 % 1400) as usize, b'a' + (i % 26) as u8);
    out
}

/// The number of the last batch whose `last` marker is in the database.
fn last_batch(db: &Db) -> Option<u64> {
    db.get("last")
        .unwrap()
        .map(|v| std::str::from_utf8(&v).unwrap().parse().unwrap())
}

/// The body of one child process (does nothing in the parent).
#[test]
fn child_process() {
    let Ok(task) = std::env::var(CHILD_ENV) else {
        return;
    };
    let (dir, mode) = task.split_once('\t').unwrap();
    let sync = mode == "sync";
    let db = Db::open_with(dir, options()).unwrap();
    let first = last_batch(&db).map_or(0, |n| n + 1);
    for i in first.. {
        let mut batch = WriteBatch::new();
        batch.put(key(i), value(i));
        batch.put("last", i.to_string());
        db.write_with(batch, WriteOptions::new().sync(sync))
            .unwrap();
        println!("acked {i}");
    }
}

/// The database holds, for every key, the value of the newest batch up to
/// its last one that wrote the key; the last batch is at least `acked`.
fn check(dir: &std::path::Path, acked: Option<u64>) -> Option<u64> {
    let db = Db::open_with(dir, options()).unwrap();
    let last = last_batch(&db);
    assert!(
        last >= acked,
        "batch {acked:?} was acknowledged, the database ends at {last:?}"
    );
    for k in 0..KEYS {
        // The newest batch at or before `last` that wrote key `k`.
        let want = last
            .and_then(|last| last.checked_sub((last % KEYS + KEYS - k) % KEYS))
            .map(value);
        assert_eq!(
            db.get(key(k)).unwrap().map(|v| v.to_vec()),
            want,
            "{} at batch {last:?}",
            key(k)
        );
    }
    let scanned = db.iter().collect::<siftdb::Result<Vec<_>>>().unwrap();
    assert!(scanned.len() as u64 <= KEYS + 1);
    db.verify_checksums().unwrap();
    last
}

#[test]
fn no_separated_value_is_lost_by_a_kill() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let plan = KillRounds {
        child_env: CHILD_ENV,
        rounds: ROUNDS,
        seed: 0x626c_6f62_6372_6173,
        min_acks: 50,
    };
    let acked_total = run_kill_rounds(dir.path(), plan, check);
    assert!(acked_total > ROUNDS * 50);
    // The run made blob files.
    let blobs = std::fs::read_dir(dir.path())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".blob")
        })
        .count();
    assert!(blobs > 0);
}
