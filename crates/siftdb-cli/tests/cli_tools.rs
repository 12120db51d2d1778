//! `siftdb inspect`, `verify`, `repair`, `get`, `put`, `delete` and `scan`
//! end to end: the built binary on a database built with the library,
//! damaged on purpose; exit codes and one-line errors; `get` and `scan`
//! opening read-only (beside a writer, on a directory they may not write).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use std::path::Path;
use std::process::{Command, Output};

use siftdb::internals::filename::table_file_name;
use siftdb::internals::fs::OsFileSystem;
use siftdb::internals::manifest::read_manifest;
use siftdb::internals::table::Table;
use siftdb::{Db, Options};
use siftdb_testkit::files::snapshot;
#[cfg(unix)]
use siftdb_testkit::files::{as_unprivileged, Unwritable};

const KEYS: u32 = 3000;

fn siftdb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_siftdb"))
        .args(args)
        .output()
        .expect("the siftdb binary runs")
}

/// `siftdb` as an unprivileged user (`nobody` when the tests run as root).
#[cfg(unix)]
fn siftdb_unprivileged(args: &[&str]) -> Output {
    as_unprivileged(Command::new(env!("CARGO_BIN_EXE_siftdb")).args(args))
        .output()
        .expect("the siftdb binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn both(out: &Output) -> String {
    format!("{}{}", text(&out.stdout), text(&out.stderr))
}

fn key(i: u32) -> String {
    format!("key{i:06}")
}

fn value(i: u32) -> String {
    format!("value-{i}")
}

/// Options that keep every flushed table at level 0 (no compaction moves
/// a table a test damages or names).
fn options() -> Options {
    // The uniform policy, pinned: inspect's figures below are asserted for a
    // 10-bit Bloom filter. The default level-aware split gives a level-0
    // table its share by how many level-0 tables there are when it is
    // built, which depends on how far the background flushes have got.
    Options::default()
        .bloom_bits_per_key(10.0)
        .memtable_bytes(16 << 10)
        .level0_compaction_trigger(100)
        .level0_quiet_trigger(100)
        .level0_stop_writes(200)
}

/// A closed database of KEYS keys in several level-0 tables.
fn build_db(dir: &Path) {
    let db = Db::open_with(dir, options()).unwrap();
    for i in 0..KEYS {
        db.put(key(i), value(i)).unwrap();
    }
    db.flush().unwrap();
    db.wait_for_background().unwrap();
}

/// The oldest table's file name and path (it holds the smallest keys).
fn first_table(dir: &Path) -> (String, std::path::PathBuf) {
    let state = read_manifest(&OsFileSystem, dir).unwrap().unwrap();
    assert!(state.tables.len() > 2, "{} tables", state.tables.len());
    let number = state.tables.iter().map(|t| t.file_number).min().unwrap();
    let name = table_file_name(number);
    let path = dir.join(&name);
    (name, path)
}

fn flip(path: &Path, offset: u64) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[offset as usize] ^= 0x20;
    std::fs::write(path, &bytes).unwrap();
}

fn assert_one_line_error(out: &Output, code: i32, needle: &str) {
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{}", both(out));
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("siftdb: error: "), "{stderr}");
    assert!(stderr.contains(needle), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn verify_passes_then_names_a_damaged_data_block_by_file_and_offset() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().to_str().unwrap();
    build_db(dir.path());
    let out = siftdb(&["verify", db]);
    assert!(out.status.success(), "{}", both(&out));
    assert!(
        text(&out.stdout).contains("ok: no problem found"),
        "{}",
        both(&out)
    );

    let (name, path) = first_table(dir.path());
    let data = Table::open_path(&path).unwrap().data_block_handles()[1];
    flip(&path, data.offset + 10);
    let out = siftdb(&["verify", db]);
    assert_eq!(out.status.code(), Some(1), "{}", both(&out));
    let stdout = text(&out.stdout);
    let expected = format!("error: {name}: data block at offset {}: ", data.offset);
    assert!(stdout.contains(&expected), "{stdout}");
    assert!(stdout.contains("checksum mismatch"), "{stdout}");
    assert!(stdout.contains("damaged: 1 error"), "{stdout}");
}

#[test]
fn a_damaged_filter_is_a_warning_and_reads_stay_correct() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().to_str().unwrap();
    build_db(dir.path());
    let (name, path) = first_table(dir.path());
    let table = Table::open_path(&path).unwrap();
    let filter = table.footer().filter.unwrap();
    let smallest = table.properties().smallest.clone();
    drop(table);
    flip(&path, filter.offset + 64 + 3);

    let out = siftdb(&["verify", db]);
    assert!(out.status.success(), "{}", both(&out));
    let stdout = text(&out.stdout);
    let expected = format!(
        "warning: {name}: filter block at offset {}: ",
        filter.offset
    );
    assert!(stdout.contains(&expected), "{stdout}");
    assert!(stdout.contains("ok: 1 warning"), "{stdout}");

    let out = siftdb(&["inspect", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", both(&out));
    assert!(text(&out.stdout).contains("DAMAGED"), "{}", both(&out));

    // The oldest table holds key(0): reads through the damaged table still
    // find its keys, and the keys of the others. In process first, where
    // no compaction can replace the table and the fallback is counted.
    assert!(smallest.starts_with(key(0).as_bytes()));
    {
        let opened = Db::open_with(
            dir.path(),
            Options::default()
                .level0_compaction_trigger(100)
                .level0_quiet_trigger(100)
                .level0_stop_writes(200),
        )
        .unwrap();
        for i in 0..KEYS {
            assert_eq!(opened.get(key(i)).unwrap().unwrap(), value(i).as_bytes());
        }
        assert_eq!(opened.stats().filter_fallbacks, 1);
    }
    for i in [0, 1, 7, KEYS / 2, KEYS - 1] {
        let out = siftdb(&["get", db, &key(i)]);
        assert!(out.status.success(), "{i}: {}", both(&out));
        assert_eq!(text(&out.stdout), format!("{}\n", value(i)));
    }
    let out = siftdb(&["get", db, "key999999"]);
    assert_eq!(out.status.code(), Some(1), "{}", both(&out));
    assert!(out.stdout.is_empty());
}

#[test]
fn inspect_shows_the_filter_figures_of_a_table_and_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    build_db(dir.path());
    let (name, path) = first_table(dir.path());
    let out = siftdb(&["inspect", path.to_str().unwrap()]);
    assert!(out.status.success(), "{}", both(&out));
    let stdout = text(&out.stdout);
    for needle in [
        format!("table {name}"),
        "key range         \"key000000\" .. ".to_string(),
        "(10.00 chosen by the policy".to_string(),
        "filter            bloom".to_string(),
        "random absent keys let through".to_string(),
        "filter probes".to_string(),
        "filter fill".to_string(),
        "estimated from the fill".to_string(),
        "expected FP rate  0.".to_string(),
        "data blocks".to_string(),
    ] {
        assert!(stdout.contains(&needle), "{needle:?} in\n{stdout}");
    }
    // Lines of 512 bits round the filter up: a little over the 10 configured.
    let bits_per_key: f64 = stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("filter bits/key"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert!((10.0..13.0).contains(&bits_per_key), "{stdout}");

    let out = siftdb(&["inspect", dir.path().to_str().unwrap()]);
    assert!(out.status.success(), "{}", both(&out));
    let stdout = text(&out.stdout);
    let state = read_manifest(&OsFileSystem, dir.path()).unwrap().unwrap();
    assert!(stdout.contains(&format!(
        "manifest: next file number {}, last sequence {KEYS}, log number {}",
        state.next_file_number, state.log_number
    )));
    for table in &state.tables {
        let name = table_file_name(table.file_number);
        assert!(
            stdout.contains(&format!("table {name}")),
            "{name}\n{stdout}"
        );
    }
    assert_eq!(
        stdout.matches("filter probes").count(),
        state.tables.len(),
        "{stdout}"
    );
    assert_eq!(
        stdout.matches("live table, level 0").count(),
        state.tables.len()
    );
    assert!(stdout.contains("live log"), "{stdout}");
    assert!(stdout.contains("total"), "{stdout}");
    // The level table: filter kinds, bits per key, expected and measured rates.
    let header = stdout.lines().find(|l| l.contains("bits/key")).unwrap();
    for column in ["filter", "exp. FP", "meas. FP", "filter memory"] {
        assert!(header.contains(column), "{header}");
    }
    let level0 = stdout
        .lines()
        .find(|l| l.trim_start().starts_with("0 "))
        .unwrap();
    assert!(level0.contains("bloom"), "{level0}");
}

#[test]
fn put_get_delete_and_scan_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let db = db.to_str().unwrap();
    for (k, v) in [
        ("apple", "red"),
        ("apricot", "orange"),
        ("banana", "yellow"),
    ] {
        let out = siftdb(&["put", db, k, v]);
        assert!(out.status.success(), "{}", both(&out));
    }
    let out = siftdb(&["put", "--hex", db, "6368657272790a", "00ff"]);
    assert!(out.status.success(), "{}", both(&out));

    let out = siftdb(&["get", db, "apricot"]);
    assert_eq!(text(&out.stdout), "orange\n", "{}", both(&out));
    let out = siftdb(&["get", db, "--hex", "6368657272790a"]);
    assert_eq!(text(&out.stdout), "00ff\n", "{}", both(&out));

    let out = siftdb(&["scan", db]);
    assert!(out.status.success(), "{}", both(&out));
    assert_eq!(
        text(&out.stdout),
        "apple\tred\napricot\torange\nbanana\tyellow\ncherry\\n\t\\0\u{fffd}\n"
    );
    let out = siftdb(&["scan", db, "--prefix", "ap"]);
    assert_eq!(text(&out.stdout), "apple\tred\napricot\torange\n");
    let out = siftdb(&["scan", db, "--from", "apricot", "--to", "cherry"]);
    assert_eq!(text(&out.stdout), "apricot\torange\nbanana\tyellow\n");
    let out = siftdb(&["scan", db, "--from", "b"]);
    assert_eq!(text(&out.stdout).lines().count(), 2);
    let out = siftdb(&["scan", db, "--limit", "1", "--hex"]);
    assert_eq!(text(&out.stdout), "6170706c65\t726564\n");

    let out = siftdb(&["delete", db, "apple"]);
    assert!(out.status.success(), "{}", both(&out));
    let out = siftdb(&["get", db, "apple"]);
    assert_eq!(out.status.code(), Some(1), "{}", both(&out));
    assert!(text(&out.stderr).contains("not found"));
    let out = siftdb(&["scan", db, "--prefix", "ap"]);
    assert_eq!(text(&out.stdout), "apricot\torange\n");

    let out = siftdb(&["verify", db]);
    assert!(out.status.success(), "{}", both(&out));
}

/// `siftdb compact`: the whole database, or one keyspace, each keyspace
/// left in one table with its data (the per-keyspace choice is the
/// library's `Keyspace::compact`, tested there: opening with the defaults
/// may already merge a quiet level 0); an unknown keyspace or a directory
/// with no database is an error with exit status 2, and nothing is created.
#[test]
fn compact_merges_the_tables_of_a_database_one_keyspace_or_a_range() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let manual = || {
        Options::default()
            .level0_compaction_trigger(64)
            .level0_quiet_trigger(64)
            .level0_stop_writes(128)
    };
    {
        let db = Db::open_with(&path, manual()).unwrap();
        let events = db.keyspace("events").unwrap();
        for round in 0..3 {
            for i in 0..100 {
                db.put(key(i), value(round)).unwrap();
                events.put(key(i), value(round)).unwrap();
            }
            db.flush().unwrap();
        }
        drop(events);
        db.close().unwrap();
    }
    let db = path.to_str().unwrap();
    // A range of one keyspace: its three tables all hold keys of the range
    // (each holds every key), so they end as one (the CLI opens with the
    // default options, whose quiet trigger may merge them first: only the
    // outcome is asserted; which tables a range takes: tests/compact_range.rs).
    let (from, to) = (key(10), key(20));
    let out = siftdb(&[
        "compact",
        db,
        "--keyspace",
        "events",
        "--from",
        &from,
        "--to",
        &to,
    ]);
    assert!(out.status.success(), "{}", both(&out));
    let printed = text(&out.stdout);
    assert!(
        printed
            .lines()
            .any(|l| l.starts_with("events: ") && l.contains("-> 1 tables,")),
        "{printed}"
    );
    assert_one_line_error(
        &siftdb(&["compact", db, "--hex", "--from", "zz"]),
        2,
        "not hex",
    );
    // The keyspace alone, then everything: the keyspaces named must each
    // end in one table (default's level 0 may or may not have been merged
    // by the quiet trigger in between: not asserted).
    for (args, merged) in [
        (
            &["compact", db, "--keyspace", "events"][..],
            &["events"][..],
        ),
        (&["compact", db], &["default", "events"]),
    ] {
        let out = siftdb(args);
        assert!(out.status.success(), "{}", both(&out));
        let printed = text(&out.stdout);
        for name in merged {
            let prefix = format!("{name}: ");
            assert!(
                printed
                    .lines()
                    .any(|l| l.starts_with(&prefix) && l.contains("-> 1 tables,")),
                "{args:?}: {printed}"
            );
        }
    }
    {
        let db = Db::open_with(&path, manual()).unwrap();
        let events = db.keyspace("events").unwrap();
        assert_eq!(events.iter().count(), 100);
        assert_eq!(
            db.get(key(7)).unwrap().as_deref(),
            Some(value(2).as_bytes())
        );
        let stats = db.stats();
        assert!(
            stats.keyspaces.iter().all(|k| k.table_count == 1),
            "{:?}",
            stats.keyspaces
        );
        drop(events);
        db.close().unwrap();
    }
    assert_one_line_error(
        &siftdb(&["compact", db, "--keyspace", "nope"]),
        2,
        "no keyspace",
    );
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let empty = empty.to_str().unwrap();
    assert_one_line_error(&siftdb(&["compact", empty]), 2, "not a siftdb database");
    assert!(!Path::new(empty).join("MANIFEST").exists());
}

#[test]
fn errors_are_one_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nothing-here");
    let missing = missing.to_str().unwrap();
    let empty = dir.path().to_str().unwrap();

    assert_one_line_error(&siftdb(&["get", missing, "k"]), 2, "not a siftdb database");
    assert_one_line_error(&siftdb(&["delete", empty, "k"]), 2, "not a siftdb database");
    assert_one_line_error(&siftdb(&["scan", empty]), 2, "not a siftdb database");
    assert_one_line_error(&siftdb(&["verify", empty]), 2, "not a siftdb database");
    assert_one_line_error(&siftdb(&["verify", missing]), 2, "not a directory");
    assert_one_line_error(&siftdb(&["inspect", missing]), 2, "cannot inspect");
    assert_one_line_error(&siftdb(&["inspect", empty]), 2, "no MANIFEST");
    assert_one_line_error(&siftdb(&["put", "--hex", empty, "abc", "00"]), 2, "not hex");
    // get/delete/scan never create a database where there was none.
    assert!(!Path::new(missing).exists());

    // A database another handle holds: writes are refused as locked, in
    // one line; reads open it read-only beside the writer.
    let db_dir = dir.path().join("db");
    let db = Db::open(&db_dir).unwrap();
    db.put("k", "v").unwrap();
    let out = siftdb(&["put", db_dir.to_str().unwrap(), "k", "w"]);
    assert_one_line_error(&out, 2, "locked");
    let out = siftdb(&["get", db_dir.to_str().unwrap(), "k"]);
    assert_eq!(text(&out.stdout), "v\n", "{}", both(&out));
    drop(db);

    // Usage errors come from clap, with its exit code 2.
    let out = siftdb(&["scan", empty, "--prefix", "a", "--from", "b"]);
    assert_eq!(out.status.code(), Some(2));
    let out = siftdb(&["get", empty]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn put_into_a_directory_that_is_not_a_database_leaves_no_lock() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "mine").unwrap();
    let out = siftdb(&["put", dir.path().to_str().unwrap(), "k", "v"]);
    assert_one_line_error(&out, 2, "not a siftdb database");
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(names, ["notes.txt"]);
}

#[test]
fn get_escapes_control_bytes_as_scan_does() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let db = db.to_str().unwrap();
    let out = siftdb(&["put", "--hex", db, "6b", "1b5b33316d7265640a07"]);
    assert!(out.status.success(), "{}", both(&out));
    let out = siftdb(&["get", db, "k"]);
    assert_eq!(text(&out.stdout), "\\u{1b}[31mred\\n\\u{7}\n");
    let out = siftdb(&["scan", db]);
    assert_eq!(text(&out.stdout), "k\t\\u{1b}[31mred\\n\\u{7}\n");
    let out = siftdb(&["get", "--hex", db, "6b"]);
    assert_eq!(text(&out.stdout), "1b5b33316d7265640a07\n");
}

#[test]
fn stress_that_cannot_run_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("something"), "x").unwrap();
    let full = dir.path().to_str().unwrap();
    let out = siftdb(&["stress", "--dir", full, "--rounds", "1"]);
    assert_one_line_error(&out, 2, "not empty");
    let out = siftdb(&[
        "stress",
        "--rounds",
        "1",
        "--min-kill-ms",
        "50",
        "--max-kill-ms",
        "10",
    ]);
    assert_one_line_error(&out, 2, "earliest kill (50 ms) is after the latest (10 ms)");
}

#[test]
fn repair_rebuilds_a_damaged_database_and_reports_what_was_lost() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    build_db(dir.path());
    Db::open_with(dir.path(), options())
        .unwrap()
        .put("last", "in the log")
        .unwrap();
    let (name, path) = first_table(dir.path());
    let block = Table::open_path(&path).unwrap().data_block_handles()[0];
    flip(&path, block.offset + 3);

    // The read that needs the block fails naming it; others work.
    let out = siftdb(&["get", d, &key(0)]);
    assert_one_line_error(&out, 2, &name);
    let out = siftdb(&["get", d, &key(KEYS - 1)]);
    assert_eq!(text(&out.stdout), format!("{}\n", value(KEYS - 1)));

    let before = snapshot(dir.path());
    let out = siftdb(&["repair", "--dry-run", "--json", d]);
    assert_eq!(out.status.code(), Some(1), "{}", both(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["dry_run"], true);
    assert_eq!(report["lost_anything"], true);
    assert_eq!(snapshot(dir.path()), before);

    let out = siftdb(&["repair", "--json", d]);
    assert_eq!(out.status.code(), Some(1), "{}", both(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let table = report["tables"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["file"] == name.as_str())
        .unwrap();
    assert_eq!(table["action"], "rewritten");
    let lost = &table["lost"][0];
    assert_eq!(lost["offset"], block.offset);
    assert_eq!(lost["first_key"]["text"], key(0).as_str());
    assert!(dir.path().join("lost").join(&name).exists());

    let out = siftdb(&["verify", d]);
    assert_eq!(out.status.code(), Some(0), "{}", both(&out));
    let out = siftdb(&["get", d, "last"]);
    assert_eq!(text(&out.stdout), "in the log\n", "{}", both(&out));
    let out = siftdb(&["get", d, &key(0)]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "lost, so absent: {}",
        both(&out)
    );
    let out = siftdb(&["repair", d]);
    assert_eq!(out.status.code(), Some(0), "{}", both(&out));
    assert!(
        text(&out.stdout).contains("nothing to repair"),
        "{}",
        both(&out)
    );
}

#[cfg(unix)]
#[test]
fn get_and_scan_work_on_a_directory_they_may_not_write_and_change_nothing() {
    let root = tempfile::tempdir().unwrap();
    let db_dir = root.path().join("db");
    build_db(&db_dir);
    Db::open_with(&db_dir, options())
        .unwrap()
        .put("last", "in the log")
        .unwrap();
    std::fs::remove_file(db_dir.join("LOCK")).unwrap();
    let before = snapshot(&db_dir);
    let d = db_dir.to_str().unwrap();
    let unwritable = Unwritable::new(&db_dir);
    let put = siftdb_unprivileged(&["put", d, "k", "v"]);
    let get = siftdb_unprivileged(&["get", d, &key(42)]);
    let scan = siftdb_unprivileged(&["scan", d, "--prefix", "key00019"]);
    let last = siftdb_unprivileged(&["get", d, "last"]);
    let inspect = siftdb_unprivileged(&["inspect", d]);
    drop(unwritable);
    assert_eq!(
        put.status.code(),
        Some(2),
        "no write permission: {}",
        both(&put)
    );
    assert_eq!(
        text(&get.stdout),
        format!("{}\n", value(42)),
        "{}",
        both(&get)
    );
    assert_eq!(text(&scan.stdout).lines().count(), 10, "{}", both(&scan));
    assert_eq!(text(&last.stdout), "in the log\n", "{}", both(&last));
    assert_eq!(inspect.status.code(), Some(0), "{}", both(&inspect));
    assert_eq!(snapshot(&db_dir), before);
}
