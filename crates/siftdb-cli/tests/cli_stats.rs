//! `siftdb stats DIR`: the built binary on a database built with the
//! library. What must hold: every counter and gauge and every histogram
//! printed by name; each keyspace's line; the histograms empty without a
//! read sample (they live in the process that opened the database) and
//! counting exactly the sample's gets with one; the database left as it
//! was (read-only); a missing directory an error with exit status 2.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use std::process::{Command, Output};

use siftdb::Db;

fn siftdb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_siftdb"))
        .args(args)
        .output()
        .expect("the siftdb binary runs")
}

/// The figures of the row named `name`: its words after the name.
fn row<'a>(out: &'a str, name: &str) -> Vec<&'a str> {
    out.lines()
        .map(str::split_whitespace)
        .find_map(|mut words| (words.next() == Some(name)).then(|| words.collect()))
        .unwrap_or_else(|| panic!("no row {name} in:\n{out}"))
}

#[test]
fn stats_prints_counters_keyspaces_and_histograms() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path()).unwrap();
        let users = db.keyspace("users").unwrap();
        for i in 0..200 {
            db.put(format!("k{i:04}"), "value").unwrap();
        }
        for i in 0..30 {
            users.put(format!("u{i:04}"), "user").unwrap();
        }
        db.flush().unwrap();
        drop(users);
        db.close().unwrap();
    }
    let path = dir.path().to_str().unwrap();

    let out = siftdb(&["stats", path]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    for name in [
        "gets",
        "writes",
        "flushes",
        "block_cache_hits",
        "memory_bytes",
        "table_count",
    ] {
        row(&text, name);
    }
    assert!(text.contains("users: "), "{text}");
    // A fresh open: nothing recorded yet.
    for name in [
        "get_nanos",
        "write_nanos",
        "scan_step_nanos",
        "flush_nanos",
        "compaction_bytes",
    ] {
        assert_eq!(row(&text, name)[0], "0", "{name} in:\n{text}");
    }

    let out = siftdb(&["stats", path, "--read-sample", "50"]);
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    // 50 of the default keyspace's keys and all 30 of users'.
    let gets = row(&text, "get_nanos");
    assert_eq!(gets[0], "80", "{text}");
    assert_ne!(gets[1], "0", "no get was timed:\n{text}");
    assert_eq!(row(&text, "gets")[0], "80");
    assert!(
        text.contains("30 gets, 0 multi_get keys, 1 scans"),
        "{text}"
    );
    // 50 + 30 entries, and the step that found the end of users.
    assert_eq!(row(&text, "scan_step_nanos")[0], "81", "{text}");
    assert_eq!(row(&text, "write_nanos")[0], "0");

    let db = Db::open(dir.path()).unwrap();
    assert_eq!(db.iter().count(), 200);
    db.close().unwrap();

    let out = siftdb(&["stats", dir.path().join("missing").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot open"));
}
