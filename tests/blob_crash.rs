//! Separated values under SIGKILL: a child process writes batches that
//! each overwrite one of 200 keys with a value mostly past the blob
//! threshold (and a `last` marker), printing every acknowledged batch,
//! while small memtables make it flush, compact and collect blob files all
//! the time — by age (the oldest half of the files rewritten by each
//! compaction) in one test, by garbage share
//! (`Options::blob_gc_garbage_ratio`, no collection by age) in the other;
//! the parent kills it at a random moment, reopens, and checks that every
//! acknowledged write is there with its value — the whole database is
//! determined by its newest batch — and that `verify_checksums` passes, in
//! a loop, with synced writes and without. Collecting by share, it also
//! checks the manifest's blob file figures: after a full compaction what
//! is not garbage is exactly the separated values the keys hold, no file
//! is left past the ratio, and every blob file on disk is recorded.
//!
//! The child is this test binary run again with the collection's
//! `child_env` set: it then runs only `child_process`.
#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions: a failed assumption is a failed test"
)]

use std::path::Path;

use siftdb::internals::fs::OsFileSystem;
use siftdb::internals::manifest::read_manifest;
use siftdb::{Db, Options, WriteBatch, WriteOptions};
use siftdb_testkit::kill_rounds::{run_kill_rounds, KillRounds};

const KEYS: u64 = 200;
const ROUNDS: u64 = 6;
const THRESHOLD: usize = 128;
const RATIO: f64 = 1.0 / 3.0;

/// How the child's database collects blob files.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Collection {
    ByAge,
    ByShare,
}

impl Collection {
    /// Set (to `DIR`, tab, `sync` or `nosync`) in a child process.
    fn child_env(self) -> &'static str {
        match self {
            Collection::ByAge => "SIFTDB_BLOB_CRASH_CHILD",
            Collection::ByShare => "SIFTDB_BLOB_GC_CRASH_CHILD",
        }
    }

    fn options(self) -> Options {
        // Small memtables: flushes, compactions and blob collection while
        // it runs.
        let options = Options::default()
            .memtable_bytes(32 << 10)
            .level0_compaction_trigger(2)
            .level1_bytes(128 << 10)
            .table_target_bytes(32 << 10)
            .blob_threshold(Some(THRESHOLD));
        match self {
            // Every collection rewrites the oldest half of the blob files.
            Collection::ByAge => options.blob_gc_age_cutoff(0.5),
            // A file is collected once a third of it is garbage.
            Collection::ByShare => options
                .blob_gc_age_cutoff(0.0)
                .blob_gc_garbage_ratio(Some(RATIO)),
        }
    }
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
    let Some((collection, task)) = [Collection::ByAge, Collection::ByShare]
        .into_iter()
        .find_map(|c| Some((c, std::env::var(c.child_env()).ok()?)))
    else {
        return;
    };
    let (dir, mode) = task.split_once('\t').unwrap();
    let sync = mode == "sync";
    let db = Db::open_with(dir, collection.options()).unwrap();
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
/// Collecting by share, also the manifest's blob figures (see the module
/// doc).
fn check(collection: Collection, dir: &Path, acked: Option<u64>) -> Option<u64> {
    let db = Db::open_with(dir, collection.options()).unwrap();
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
    if collection == Collection::ByShare {
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
    }
    last
}

/// Kill rounds with `collection`, checked after each, and blob files made.
fn kill_rounds(collection: Collection, seed: u64) {
    if std::env::var(collection.child_env()).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let plan = KillRounds {
        child_env: collection.child_env(),
        rounds: ROUNDS,
        seed,
        min_acks: 50,
    };
    let acked_total = run_kill_rounds(dir.path(), plan, |dir, acked| check(collection, dir, acked));
    assert!(acked_total > ROUNDS * 50);
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

#[test]
fn no_separated_value_is_lost_by_a_kill() {
    kill_rounds(Collection::ByAge, 0x626c_6f62_6372_6173);
}

#[test]
fn collection_by_garbage_share_loses_nothing_and_keeps_exact_figures() {
    kill_rounds(Collection::ByShare, 0x626c_6f62_6763_6373);
}
