//! Blob garbage collection by garbage share under SIGKILL: a child process
//! overwrites 200 keys again and again with values mostly past the blob
//! threshold (and a `last` marker), printing every acknowledged batch,
//! while small memtables make it flush, compact and collect blob files
//! past `Options::blob_gc_garbage_ratio` all the time (no collection by
//! age); the parent kills it at a random moment, reopens, and checks that
//! every acknowledged write is there with its value, that the manifest's
//! blob file figures are exact (after a full compaction, what is not
//! garbage is the separated values the keys hold), that no file is left
//! past the ratio and that every blob file on disk is recorded.
//!
//! The child is this test binary run again with `CHILD_ENV` set: it then
//! runs only `child_process`.
#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions: a failed assumption is a failed test"
)]

use siftdb::internals::fs::OsFileSystem;
use siftdb::internals::manifest::read_manifest;
use siftdb::{Db, Options, WriteBatch, WriteOptions};
use siftdb_testkit::kill_rounds::{run_kill_rounds, KillRounds};

/// Set (to `DIR`, tab, `sync` or `nosync`) in a child process.
const CHILD_ENV: &str = "SIFTDB_BLOB_GC_CRASH_CHILD";
const KEYS: u64 = 200;
const ROUNDS: u64 = 6;
const THRESHOLD: usize = 128;
const RATIO: f64 = 1.0 / 3.0;

fn options() -> Options {
    // Small memtables: flushes, compactions and blob collection while it
    // runs; a file is collected once a third of it is garbage.
    Options::default()
        .memtable_bytes(32 << 10)
        .level0_compaction_trigger(2)
        .level1_bytes(128 << 10)
        .table_target_bytes(32 << 10)
        .blob_threshold(Some(THRESHOLD))
        .blob_gc_age_cutoff(0.0)
        .blob_gc_garbage_ratio(Some(RATIO))
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
    // The figures the crash left, made exact by a full compaction.
    db.compact().unwrap();
    db.wait_for_background().unwrap();
    let records = read_manifest(&OsFileSystem, dir)
        .unwrap()
        .unwrap()
        .blob_files;
    let separated: Vec<usize> = scanned
        .iter()
        .map(|(_, v)| v.len())
        .filter(|&len| len >= THRESHOLD)
        .collect();
    let live: u64 = records
        .iter()
        .map(|r| r.total_bytes - r.garbage_bytes)
        .sum();
    assert_eq!(live, separated.iter().sum::<usize>() as u64, "{records:?}");
    let live_values: u64 = records
        .iter()
        .map(|r| r.total_values - r.garbage_values)
        .sum();
    assert_eq!(live_values, separated.len() as u64, "{records:?}");
    for r in &records {
        assert!(
            (r.garbage_bytes as f64) < RATIO * r.total_bytes as f64,
            "{r:?}"
        );
    }
    let mut on_disk: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".blob"))
        .collect();
    on_disk.sort();
    let recorded: Vec<String> = records
        .iter()
        .map(|r| format!("{:06}.blob", r.file_number))
        .collect();
    assert_eq!(on_disk, recorded);
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
        seed: 0x626c_6f62_6763_6373,
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
