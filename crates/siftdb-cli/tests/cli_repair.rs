//! `siftdb repair` end to end, and `siftdb get`/`scan` opening read-only:
//! on a damaged database the read that needs the damaged block fails naming
//! it, `repair --dry-run` reports and changes nothing, `repair` rebuilds
//! (exit 1: something was lost, and the JSON says what), `verify` is then
//! clean and a second repair has nothing to do; `get` and `scan` work on a
//! `chmod 555` directory as an unprivileged user and leave it byte for
//! byte as it was.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

use siftdb::filename::table_file_name;
use siftdb::fs::OsFileSystem;
use siftdb::manifest::read_manifest;
use siftdb::table::Table;
use siftdb::{Db, Options};

fn siftdb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_siftdb"))
        .args(args)
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
    format!("key{i:05}")
}

/// A closed database: 2000 keys in level-1 tables, and a log record.
fn build_db(dir: &Path) {
    let db = Db::open_with(
        dir,
        Options::default()
            .block_size(512)
            .table_target_bytes(16 << 10),
    )
    .unwrap();
    for i in 0..2000 {
        db.put(key(i), format!("value-{i}")).unwrap();
    }
    db.compact().unwrap();
    db.put("last", "in the log").unwrap();
}

fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let bytes = if e.path().is_dir() {
                Vec::new()
            } else {
                std::fs::read(e.path()).unwrap()
            };
            (e.file_name().into_string().unwrap(), bytes)
        })
        .collect()
}

#[test]
fn repair_rebuilds_a_damaged_database_and_reports_what_was_lost() {
    let dir = tempfile::tempdir().unwrap();
    let db_dir = dir.path().join("db");
    build_db(&db_dir);
    let d = db_dir.to_str().unwrap();
    let state = read_manifest(&OsFileSystem, &db_dir).unwrap().unwrap();
    let number = state.tables.iter().map(|t| t.file_number).min().unwrap();
    let name = table_file_name(number);
    let path = db_dir.join(&name);
    let block = Table::open_path(&path).unwrap().data_block_handles()[0];
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[block.offset as usize + 3] ^= 0x10;
    std::fs::write(&path, bytes).unwrap();

    // The read that needs the block fails naming it; others work.
    let out = siftdb(&["get", d, &key(0)]);
    assert_eq!(out.status.code(), Some(2), "{}", both(&out));
    assert!(text(&out.stderr).contains(&name), "{}", both(&out));
    let out = siftdb(&["get", d, &key(1999)]);
    assert_eq!(text(&out.stdout), "value-1999\n", "{}", both(&out));

    let before = snapshot(&db_dir);
    let out = siftdb(&["repair", "--dry-run", "--json", d]);
    assert_eq!(out.status.code(), Some(1), "{}", both(&out));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["dry_run"], true);
    assert_eq!(report["lost_anything"], true);
    assert_eq!(snapshot(&db_dir), before);

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
    assert!(db_dir.join("lost").join(&name).exists());

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
fn get_and_scan_work_on_a_read_only_directory_and_change_nothing() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;

    let root = tempfile::tempdir().unwrap();
    let db_dir = root.path().join("db");
    build_db(&db_dir);
    std::fs::remove_file(db_dir.join("LOCK")).unwrap();
    let before = snapshot(&db_dir);
    let mode = |path: &Path, mode: u32| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    mode(root.path(), 0o755);
    for name in before.keys() {
        mode(&db_dir.join(name), 0o444);
    }
    mode(&db_dir, 0o555);
    // As root, permissions do not bind: run the commands as `nobody`.
    let as_root = rustix::process::geteuid().is_root();
    let run = |args: &[&str]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_siftdb"));
        command.args(args);
        if as_root {
            command.uid(65534).gid(65534);
        }
        command.output().unwrap()
    };
    let d = db_dir.to_str().unwrap();
    let put = run(&["put", d, "k", "v"]);
    let get = run(&["get", d, &key(42)]);
    let scan = run(&["scan", d, "--prefix", "key0199"]);
    let last = run(&["get", d, "last"]);
    let inspect = run(&["inspect", d]);
    mode(&db_dir, 0o755);
    assert_eq!(
        put.status.code(),
        Some(2),
        "no write permission: {}",
        both(&put)
    );
    assert_eq!(text(&get.stdout), "value-42\n", "{}", both(&get));
    assert_eq!(text(&scan.stdout).lines().count(), 10, "{}", both(&scan));
    assert_eq!(text(&last.stdout), "in the log\n", "{}", both(&last));
    assert_eq!(inspect.status.code(), Some(0), "{}", both(&inspect));
    assert_eq!(snapshot(&db_dir), before);
}
