//! Short-lived writers: 1,200 processes, each of which opens the database,
//! puts one key (keys ascending) and closes it. Every open replays the
//! previous process's log into a new level-0 table, and each process may
//! exit before any compaction starts; level 0 must still stay at or below
//! `level0_stop_writes` (an open that finds it there compacts before it
//! returns), every key must be there at the end, and once background work
//! settles the tiny tables the level-0 compactions left side by side in
//! level 1 (none overlaps the next, so none is ever merged for overlap)
//! are merged: at most `MOST_TABLES` tables remain.
//!
//! Each process is this test binary run again with `CHILD_ENV` set: it then
//! runs only `child_process`, which does the one put.
#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions: a failed assumption is a failed test"
)]

use std::path::Path;
use std::process::Command;

use siftdb::{Db, Options};

const PROCESSES: usize = 1200;
/// Tables left at most once background work settles.
const MOST_TABLES: usize = 20;
const STOP: usize = 8;
/// Set (to `DIR` and the key's number, tab-separated) in a child process.
const CHILD_ENV: &str = "SIFTDB_SHORT_LIVED_WRITER";

fn options() -> Options {
    Options::default()
        .memtable_bytes(1 << 20)
        .level0_compaction_trigger(4)
        .level0_stop_writes(STOP)
}

fn key(i: usize) -> String {
    format!("key{i:05}")
}

fn level0_tables(dir: &Path) -> usize {
    let db = Db::open_read_only(dir).unwrap();
    db.stats().level_tables.first().copied().unwrap_or(0)
}

/// The body of one child process (does nothing in the parent).
#[test]
fn child_process() {
    let Ok(task) = std::env::var(CHILD_ENV) else {
        return;
    };
    let (dir, i) = task.split_once('\t').unwrap();
    let i: usize = i.parse().unwrap();
    let db = Db::open_with(dir, options()).unwrap();
    db.put(key(i), format!("value {i}")).unwrap();
}

#[test]
fn level0_stays_bounded_and_tables_merge_under_short_lived_writers() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_str().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut most = 0;
    let mut histogram = [0usize; 64];
    for i in 0..PROCESSES {
        let out = Command::new(&exe)
            .args(["--exact", "child_process", "--test-threads", "1", "--quiet"])
            .env(CHILD_ENV, format!("{path}\t{i}"))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "child {i}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let level0 = level0_tables(dir.path());
        most = most.max(level0);
        if let Some(count) = histogram.get_mut(level0) {
            *count += 1;
        }
        assert!(
            level0 <= STOP,
            "after process {i}: {level0} level-0 tables, stop trigger {STOP}"
        );
    }
    let seen: Vec<String> = histogram
        .iter()
        .enumerate()
        .filter(|(_, &n)| n > 0)
        .map(|(tables, n)| format!("{tables}: {n}"))
        .collect();
    eprintln!(
        "{PROCESSES} short-lived writers: at most {most} level-0 tables (stop trigger {STOP}); \
         level-0 tables after each process: {}",
        seen.join(", ")
    );

    let db = Db::open_with(dir.path(), options()).unwrap();
    let level0 = db.stats().level_tables.first().copied().unwrap_or(0);
    assert!(level0 <= STOP, "{level0}");
    let before = db.stats();
    db.wait_for_background().unwrap();
    let after = db.stats();
    eprintln!(
        "tables per level: {:?} at the last open, {:?} once background work settled \
         ({} compaction bytes written by this process)",
        before.level_tables, after.level_tables, after.compaction_bytes_written
    );
    assert!(
        after.table_count <= MOST_TABLES,
        "{} tables once background work settled (per level {:?}), at most {MOST_TABLES} wanted",
        after.table_count,
        after.level_tables
    );
    for i in 0..PROCESSES {
        let value = db.get(key(i)).unwrap();
        assert_eq!(
            value.as_deref(),
            Some(format!("value {i}").as_bytes()),
            "{i}"
        );
    }
    assert_eq!(db.iter().count(), PROCESSES);
}
