//! Cross-keyspace batches under SIGKILL: a child process writes batches
//! that each put the same key and value in three keyspaces (and a `last`
//! marker in each; some also delete a key or a range in each), printing every acknowledged batch; the parent kills it
//! at a random moment, reopens, and checks that every acknowledged batch
//! is there and that no batch is there in part — in a loop, with synced
//! writes and without (a killed process loses nothing the OS has).
//!
//! The child is this test binary run again with `CHILD_ENV` set: it then
//! runs only `child_process`.
#![expect(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    reason = "test helpers outside #[test] functions: a failed assumption is a failed test"
)]

use siftdb::{Db, Options, WriteBatch, WriteOptions};
use siftdb_testkit::kill_rounds::{run_kill_rounds, KillRounds};

/// Set (to `DIR`, tab, `sync` or `nosync`) in a child process.
const CHILD_ENV: &str = "SIFTDB_KEYSPACE_CRASH_CHILD";
const KEYSPACES: [&str; 3] = ["default", "orders", "order-index"];
const KEYS: u64 = 300;
const ROUNDS: u64 = 8;

fn options() -> Options {
    // Small memtables: rotations, flushes and compactions while it runs.
    Options::default()
        .memtable_bytes(16 << 10)
        .level0_compaction_trigger(2)
        .level1_bytes(64 << 10)
        .table_target_bytes(32 << 10)
}

fn key(i: u64) -> String {
    format!("key{:04}", i % KEYS)
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
    let spaces: Vec<_> = KEYSPACES
        .iter()
        .map(|name| db.keyspace(name).unwrap())
        .collect();
    let first = last_batch(&db).map_or(0, |n| n + 1);
    for i in first.. {
        let mut batch = WriteBatch::new();
        let value = i.to_string();
        for space in &spaces {
            batch.put_in(space, key(i), &value);
            batch.put_in(space, "last", &value);
        }
        // Every 7th batch also deletes a key in every keyspace, and every
        // 11th three keys with one range delete in every keyspace.
        if i % 7 == 0 {
            for space in &spaces {
                batch.delete_in(space, key(i + 3));
            }
        }
        if i % 11 == 0 {
            let start = (i + 5) % KEYS;
            let (lo, hi) = (format!("key{start:04}"), format!("key{:04}", start + 3));
            for space in &spaces {
                batch.delete_range_in(space, lo.as_str()..hi.as_str());
            }
        }
        db.write_with(batch, WriteOptions::new().sync(sync))
            .unwrap();
        println!("acked {i}");
    }
}

/// Every keyspace holds the same keys and values (no batch in part), and
/// the newest batch is at least the last one acknowledged.
fn check(dir: &std::path::Path, acked: Option<u64>) -> Option<u64> {
    let db = Db::open_with(dir, options()).unwrap();
    let spaces: Vec<_> = KEYSPACES
        .iter()
        .map(|name| db.keyspace(name).unwrap())
        .collect();
    let contents: Vec<Vec<(bytes::Bytes, bytes::Bytes)>> = spaces
        .iter()
        .map(|s| s.iter().collect::<siftdb::Result<_>>().unwrap())
        .collect();
    for (name, other) in KEYSPACES.iter().zip(&contents).skip(1) {
        assert_eq!(other, &contents[0], "keyspace {name} differs from default");
    }
    let last = last_batch(&db);
    assert!(
        last >= acked,
        "batch {acked:?} was acknowledged, the database ends at {last:?}"
    );
    if let Some(last) = last {
        // The newest batch's key holds its value; deletions aside, so
        // does each key the last KEYS batches wrote.
        assert_eq!(
            db.get(key(last)).unwrap().as_deref(),
            Some(last.to_string().as_bytes())
        );
    }
    last
}

#[test]
fn no_cross_keyspace_batch_is_lost_or_torn_by_a_kill() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let plan = KillRounds {
        child_env: CHILD_ENV,
        rounds: ROUNDS,
        seed: 0x6b73_6372_6173_6800,
        min_acks: 20,
    };
    let acked_total = run_kill_rounds(dir.path(), plan, check);
    assert!(acked_total > ROUNDS * 20);
}
