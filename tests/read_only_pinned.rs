//! A read-only database beside a writer keeps every table of its view
//! readable for as long as it lives, whatever `max_open_files`: with a
//! budget of one (or three) open files and the block cache off, every get
//! and an iterator opened before the writer's full compaction removed all
//! of the view's tables still read them (no "No such file or directory").
//! A read-only open that runs out of file handles (a child process under
//! `ulimit -n 32`, 48 tables) fails at the open with an error saying how
//! many files it holds open and the limit, never later with a bare ENOENT.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use std::collections::BTreeSet;
use std::path::Path;

use std::process::Command;

use siftdb::{Db, Options};

/// Set in the child: the database directory it opens read-only.
const CHILD_ENV: &str = "SIFTDB_READ_ONLY_PINNED_CHILD";

/// Tables of the database the child opens under a lower file limit.
const MANY_TABLES: u64 = 48;

const TABLES: u64 = 8;
const KEYS_PER_TABLE: u64 = 250;

fn key(i: u64) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn value(i: u64) -> Vec<u8> {
    format!("value-{i}-{}", "v".repeat((i % 40) as usize)).into_bytes()
}

fn table_files(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".sst"))
        .collect()
}

fn writer_options() -> Options {
    Options::default()
        .block_size(512)
        // Level 0 keeps its tables until the explicit compaction.
        .level0_compaction_trigger(100)
        .level0_quiet_trigger(100)
        .level0_stop_writes(200)
}

/// A database of `TABLES` level-0 tables, and its writer still open.
fn build(dir: &Path) -> Db {
    let writer = Db::open_with(dir, writer_options()).unwrap();
    for table in 0..TABLES {
        for i in 0..KEYS_PER_TABLE {
            let k = table * KEYS_PER_TABLE + i;
            writer.put(key(k), value(k)).unwrap();
        }
        writer.flush().unwrap();
    }
    writer
}

#[test]
fn a_read_only_view_reads_tables_the_writer_compacted_away_with_few_open_files() {
    for max_open_files in [1, 3] {
        let dir = tempfile::tempdir().unwrap();
        let writer = build(dir.path());
        let before = table_files(dir.path());
        assert!(before.len() as u64 >= TABLES, "{before:?}");
        let reader = Db::open_with(
            dir.path(),
            Options::default()
                .read_only(true)
                .max_open_files(max_open_files)
                .block_cache_bytes(0),
        )
        .unwrap();
        let mut iter = reader.iter();
        let first = iter.next().unwrap().unwrap();
        assert_eq!(&first.0[..], &key(0)[..]);

        // Every table of the reader's view goes.
        writer.put(key(0), b"newer").unwrap();
        writer.flush().unwrap();
        writer.compact().unwrap();
        writer.wait_for_background().unwrap();
        let now = table_files(dir.path());
        assert!(
            before.is_disjoint(&now),
            "the compaction left tables of the view: {before:?} {now:?}"
        );

        let total = TABLES * KEYS_PER_TABLE;
        let mut failed = Vec::new();
        for k in 0..total {
            match reader.get(key(k)) {
                Ok(Some(v)) if v[..] == value(k)[..] => {}
                other => failed.push(format!("{k}: {other:?}")),
            }
        }
        assert!(
            failed.is_empty(),
            "max_open_files {max_open_files}: {} of {total} gets failed, first: {}",
            failed.len(),
            failed[0]
        );
        let mut seen = 1;
        for entry in iter {
            let (k, v) = entry.unwrap_or_else(|e| {
                panic!("max_open_files {max_open_files}: iterator after {seen} keys: {e}")
            });
            assert_eq!(&k[..], &key(seen)[..]);
            assert_eq!(&v[..], &value(seen)[..]);
            seen += 1;
        }
        assert_eq!(seen, total);
        drop(reader);
        writer.close().unwrap();
    }
}

/// The child: opens the database read-only under the parent's file limit
/// and prints the outcome.
#[test]
fn child_process() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    match Db::open_with(&dir, Options::default().read_only(true)) {
        Ok(_) => println!("RESULT opened"),
        Err(e) => println!("RESULT {e}"),
    }
}

#[test]
fn a_read_only_open_out_of_file_handles_says_how_many_it_needs() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let writer = Db::open_with(dir.path(), writer_options()).unwrap();
    for table in 0..MANY_TABLES {
        writer.put(key(table), value(table)).unwrap();
        writer.flush().unwrap();
    }
    writer.close().unwrap();
    let out = Command::new("prlimit")
        .arg("--nofile=32:32")
        .arg(std::env::current_exe().unwrap())
        .args(["--exact", "child_process", "--test-threads", "1"])
        .args(["--quiet", "--nocapture"])
        .env(CHILD_ENV, dir.path())
        .output();
    let out = match out {
        Ok(out) => out,
        Err(e) => {
            eprintln!("skipped: cannot run prlimit: {e}");
            return;
        }
    };
    let stdout = String::from_utf8_lossy(&out.stdout);
    let result = stdout
        .lines()
        .find_map(|l| l.strip_prefix("RESULT "))
        .unwrap_or_else(|| {
            panic!(
                "no result from the child ({}): {stdout}{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            )
        });
    assert!(
        result.contains(&format!("holds every table file open, {MANY_TABLES} here"))
            && result.contains("limit is 32"),
        "{result}"
    );
}
