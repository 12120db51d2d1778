//! The directory lock: one `Db` per directory, whoever asks — another
//! handle in this process or another process — refused with
//! `Error::Locked` on every system; and against processes started by other
//! threads: a child started while a `Db` is open must never hold the lock,
//! so a reopen right after `drop(db)` always succeeds. `flock` locks (the
//! lock's first form) belong to the open file and stay with a forked child
//! until it calls exec: 199 of 200 cycles failed that way. POSIX record
//! locks belong to the process and are not inherited; on Windows the lock
//! belongs to a handle std never lets a child inherit.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use siftdb::{Db, Error};

const CYCLES: u32 = 200;

#[test]
fn reopen_after_drop_never_finds_the_lock_held_while_threads_spawn_processes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let stop = Arc::new(AtomicBool::new(false));
    let spawned = Arc::new(AtomicU64::new(0));
    let spawners: Vec<_> = (0..2)
        .map(|_| {
            let stop = Arc::clone(&stop);
            let spawned = Arc::clone(&spawned);
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    // Any child will do (this test binary listing its
                    // tests runs on every system).
                    let status = Command::new(std::env::current_exe().unwrap())
                        .arg("--list")
                        .stdout(Stdio::null())
                        .status()
                        .unwrap();
                    assert!(status.success());
                    spawned.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let mut lock_errors = 0;
    let mut other_errors = Vec::new();
    for i in 0..CYCLES {
        match Db::open(&path) {
            Ok(db) => {
                db.put(format!("key{i}"), format!("value{i}")).unwrap();
                drop(db);
            }
            Err(Error::Locked(_)) => lock_errors += 1,
            Err(e) => other_errors.push(e.to_string()),
        }
    }
    stop.store(true, Ordering::Relaxed);
    for s in spawners {
        s.join().unwrap();
    }
    eprintln!(
        "{CYCLES} cycles, {lock_errors} lock errors, {} processes spawned meanwhile",
        spawned.load(Ordering::Relaxed)
    );
    assert!(other_errors.is_empty(), "{other_errors:?}");
    assert_eq!(lock_errors, 0, "of {CYCLES} reopens");
    // Every cycle's write is there.
    let db = Db::open(&path).unwrap();
    for i in 0..CYCLES {
        assert_eq!(
            db.get(format!("key{i}")).unwrap().as_deref(),
            Some(format!("value{i}").as_bytes())
        );
    }
}

#[test]
fn a_second_open_in_the_same_process_is_refused_until_the_first_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path()).unwrap();
    for _ in 0..3 {
        assert!(matches!(Db::open(dir.path()), Err(Error::Locked(_))));
    }
    // Another spelling of the same directory is the same lock.
    let other_spelling = dir
        .path()
        .join(".")
        .join("..")
        .join(dir.path().file_name().unwrap());
    assert!(matches!(Db::open(&other_spelling), Err(Error::Locked(_))));
    // The refused opens closed no handle of the held lock's file: still held.
    db.put("k", "v").unwrap();
    assert!(matches!(Db::open(dir.path()), Err(Error::Locked(_))));
    drop(db);
    let db = Db::open(dir.path()).unwrap();
    assert_eq!(db.get("k").unwrap().as_deref(), Some(&b"v"[..]));
}

/// Set (to a database directory) for this binary run as the child of
/// `another_process_is_refused_with_the_same_error`.
const CHILD_DIR: &str = "SIFTDB_DIR_LOCK_CHILD";
/// What the child must find: "locked" or "free".
const CHILD_FINDS: &str = "SIFTDB_DIR_LOCK_CHILD_FINDS";

/// The child's side (does nothing unless run as that child): opens the
/// directory and checks it finds what the parent says.
#[test]
fn child_opens_the_directory_it_was_given() {
    let Some(dir) = std::env::var_os(CHILD_DIR) else {
        return;
    };
    match (std::env::var(CHILD_FINDS).unwrap().as_str(), Db::open(&dir)) {
        ("locked", Err(Error::Locked(path))) => {
            assert!(path.starts_with(&dir), "{}", path.display());
            println!("refused: {}", Error::Locked(path));
        }
        ("free", Ok(db)) => assert_eq!(db.get("k").unwrap().as_deref(), Some(&b"v"[..])),
        (finds, Ok(_)) => panic!("opened a directory that should be {finds}"),
        (finds, Err(e)) => panic!("open of a directory that should be {finds}: {e}"),
    }
}

fn run_child(dir: &std::path::Path, finds: &str) -> String {
    let out = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_opens_the_directory_it_was_given",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_DIR, dir)
        .env(CHILD_FINDS, finds)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "child ({finds}): {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn another_process_is_refused_with_the_same_error() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path()).unwrap();
    db.put("k", "v").unwrap();
    // This process's second open and another process's open: the same error.
    assert!(matches!(Db::open(dir.path()), Err(Error::Locked(_))));
    let stdout = run_child(dir.path(), "locked");
    assert!(stdout.contains("refused: "), "{stdout}");
    // Still held here after the child's refused open and exit.
    assert!(matches!(Db::open(dir.path()), Err(Error::Locked(_))));
    drop(db);
    run_child(dir.path(), "free");
    Db::open(dir.path()).unwrap();
}
