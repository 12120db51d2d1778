//! The command line on a cleanly closed database whose log was cut short:
//! `siftdb verify` reports the loss at its offset and exits 1 (never "reads
//! are correct"), `siftdb get` still reads what is before the cut, and the
//! first `siftdb put` warns of the loss on stderr.
#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions: a failed assumption is a failed test"
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use siftdb::Db;

fn siftdb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_siftdb"))
        .args(args)
        .output()
        .unwrap()
}

fn newest_log(dir: &Path) -> PathBuf {
    let mut logs: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "wal"))
        .collect();
    logs.sort();
    logs.pop().unwrap()
}

#[test]
fn verify_and_put_report_a_log_cut_to_half_after_a_clean_close() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path()).unwrap();
        for i in 0..1000u32 {
            db.put(format!("key{:03}", i % 857), format!("value {i}"))
                .unwrap();
        }
    }
    let log = newest_log(dir.path());
    let bytes = std::fs::read(&log).unwrap();
    std::fs::write(&log, &bytes[..bytes.len() / 2]).unwrap();
    let path = dir.path().to_str().unwrap();

    let out = siftdb(&["verify", path]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("may be lost"), "{stdout}");
    assert!(stdout.contains("damaged: 1 error"), "{stdout}");
    assert!(!stdout.contains("reads are correct"), "{stdout}");

    let out = siftdb(&["get", path, "key000"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let out = siftdb(&["put", path, "new", "value"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("siftdb: warning: ") && stderr.contains("may be lost"),
        "{stderr}"
    );
    // Reported once: that open moved the database past the cut log.
    let out = siftdb(&["put", path, "newer", "value"]);
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = siftdb(&["verify", path]);
    assert!(out.status.success());
}
