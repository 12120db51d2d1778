//! Restore, checkpoint and backup that run out of space leave no
//! temporary directory behind (a leftover `DIR.checkpoint-tmp` full of
//! partial tables would keep the file system full for the next attempt).
//!
//! Each case runs in a child process in a mount namespace of its own, with
//! a 64 KiB tmpfs where the copy goes (the database, 1 MiB of tables, and
//! the backups it restores from are on the ordinary file system); the child
//! lists what is left on the tmpfs before it goes. Mounting needs root: a
//! test that cannot mount says why and passes.
//!
//! Linux only (`cfg`): the child's tmpfs comes from `unshare --mount` and
//! `mount -t tmpfs`, which other systems do not have.
#![cfg(target_os = "linux")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use std::path::{Path, PathBuf};
use std::process::Command;

use siftdb::backup::BackupEngine;
use siftdb::{Db, Options};
use siftdb_testkit::SplitMix64;

/// Set in the child: "CASE\tDB\tBACKUPS\tMOUNT".
const CHILD_ENV: &str = "SIFTDB_NO_SPACE_CHILD";

/// A database of about 1 MiB of tables and a few records in its log, and a
/// backup of it, under `root`.
fn build(root: &Path) -> (PathBuf, PathBuf) {
    let db_dir = root.join("db");
    let db = Db::open_with(&db_dir, Options::default()).unwrap();
    let mut rng = SplitMix64::new(0x6e6f_7370_6163_6500);
    for i in 0..8000u32 {
        // Random letters: no compression makes them fit a tiny tmpfs.
        let v: String = (0..120)
            .map(|_| char::from(b'a' + rng.below(26) as u8))
            .collect();
        db.put(format!("key{i:06}"), v).unwrap();
    }
    db.flush().unwrap();
    db.put(b"in-the-log", b"too").unwrap();
    let backups = root.join("backups");
    BackupEngine::open(&backups).unwrap().create(&db).unwrap();
    db.close().unwrap();
    (db_dir, backups)
}

/// Every path below `dir`, relative to it (directories end in `/`).
fn entries(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(at) = pending.pop() {
        for entry in std::fs::read_dir(&at).unwrap() {
            let entry = entry.unwrap();
            let rel = entry
                .path()
                .strip_prefix(dir)
                .unwrap()
                .display()
                .to_string();
            if entry.file_type().unwrap().is_dir() {
                out.push(format!("{rel}/"));
                pending.push(entry.path());
            } else {
                out.push(rel);
            }
        }
    }
    out.sort();
    out
}

/// The child: runs the case onto the tmpfs at MOUNT, prints its result and
/// what the tmpfs holds after it.
#[test]
fn child_process() {
    let Ok(spec) = std::env::var(CHILD_ENV) else {
        return;
    };
    let parts: Vec<&str> = spec.split('\t').collect();
    let (case, db_dir, backups, mount) = (
        parts[0],
        Path::new(parts[1]),
        Path::new(parts[2]),
        Path::new(parts[3]),
    );
    let result = match case {
        "checkpoint" => {
            let db = Db::open(db_dir).unwrap();
            let result = db.checkpoint(mount.join("copy")).map(|_| ());
            db.close().unwrap();
            result
        }
        "backup" => {
            let db = Db::open(db_dir).unwrap();
            let result = BackupEngine::open(mount.join("backups"))
                .and_then(|engine| engine.create(&db))
                .map(|_| ());
            db.close().unwrap();
            result
        }
        "restore" => BackupEngine::open(backups)
            .unwrap()
            .restore(1, mount.join("restored"))
            .map(|_| ()),
        other => panic!("unknown case {other}"),
    };
    println!("RESULT {result:?}");
    for entry in entries(mount) {
        println!("LEFT {entry}");
    }
}

/// Runs `case` in a child process with a 64 KiB tmpfs at `root/mnt`:
/// (its result, what it left on the tmpfs), or `None` when the tmpfs could
/// not be mounted (said on stderr).
fn run_child(case: &str) -> Option<(String, Vec<String>)> {
    let root = tempfile::tempdir().unwrap();
    let (db_dir, backups) = build(root.path());
    let mount = root.path().join("mnt");
    std::fs::create_dir(&mount).unwrap();
    let probe = Command::new("unshare")
        .args([
            "--mount",
            "--propagation",
            "private",
            "mount",
            "-t",
            "tmpfs",
        ])
        .args(["-o", "size=64k", "tmpfs"])
        .arg(&mount)
        .output();
    match probe {
        Ok(out) if out.status.success() => {}
        Ok(out) => {
            eprintln!(
                "skipped: cannot mount a tmpfs in a mount namespace ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
            return None;
        }
        Err(e) => {
            eprintln!("skipped: cannot run unshare: {e}");
            return None;
        }
    }
    let spec = [
        case,
        db_dir.to_str().unwrap(),
        backups.to_str().unwrap(),
        mount.to_str().unwrap(),
    ]
    .join("\t");
    let out = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c"])
        .arg(
            "mount -t tmpfs -o size=64k tmpfs \"$1\" && exec \"$2\" --exact child_process \
             --test-threads 1 --quiet --nocapture",
        )
        .arg("sh")
        .arg(&mount)
        .arg(std::env::current_exe().unwrap())
        .env(CHILD_ENV, spec)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "child ({case}) failed: {}\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let result = stdout
        .lines()
        .find_map(|l| l.strip_prefix("RESULT "))
        .unwrap_or_else(|| panic!("no result from the child: {stdout}"))
        .to_owned();
    let left = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("LEFT "))
        .map(str::to_owned)
        .collect();
    Some((result, left))
}

/// The case failed for lack of space and left nothing named as temporary.
fn check(case: &str, allowed: &[&str]) {
    let Some((result, left)) = run_child(case) else {
        return;
    };
    assert!(
        result.starts_with("Err") && result.contains("StorageFull"),
        "{case} on a full tmpfs: {result}"
    );
    let leftovers: Vec<&String> = left
        .iter()
        .filter(|entry| !allowed.contains(&entry.as_str()))
        .collect();
    assert!(
        leftovers.is_empty(),
        "{case} that ran out of space left {leftovers:?} ({result})"
    );
}

#[test]
fn a_checkpoint_out_of_space_leaves_no_temporary_directory() {
    check("checkpoint", &[]);
}

#[test]
fn a_restore_out_of_space_leaves_no_temporary_directory() {
    check("restore", &[]);
}

#[test]
fn a_backup_out_of_space_leaves_no_temporary_directory() {
    // The backup directory's own layout stays; nothing in it.
    check(
        "backup",
        &[
            "backups/",
            "backups/meta/",
            "backups/private/",
            "backups/shared/",
        ],
    );
}
