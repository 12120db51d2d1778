//! `siftdb inspect` and `siftdb verify` on a database with separated values
//! (`Options::blob_threshold`): blob files are listed as blob files with
//! their format version, values and value bytes; inspecting one checks
//! every checksum and names the damaged record; verify reports a damaged
//! or missing blob file a table points into as a typed finding.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use siftdb::internals::inspect::{inspect_blob_file, verify_dir, BlobPlace, Finding};
use siftdb::{Db, Options};

const KEYS: u32 = 200;
const VALUE_LEN: usize = 300;

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

/// A closed database whose KEYS values (300 bytes) are all in one blob file.
fn build_db(dir: &Path) -> PathBuf {
    let db = Db::open_with(dir, Options::default().blob_threshold(Some(100))).unwrap();
    for i in 0..KEYS {
        let mut value = format!("value-{i}-").into_bytes();
        value.resize(VALUE_LEN, b'v');
        db.put(format!("key{i:06}"), value).unwrap();
    }
    db.flush().unwrap();
    drop(db);
    let blobs: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "blob"))
        .collect();
    assert_eq!(blobs.len(), 1, "{blobs:?}");
    blobs.into_iter().next().unwrap()
}

#[test]
fn inspect_lists_blob_files_and_checks_one() {
    let dir = tempfile::tempdir().unwrap();
    let blob = build_db(dir.path());
    let name = blob.file_name().unwrap().to_string_lossy().into_owned();

    let out = siftdb(&["inspect", dir.path().to_str().unwrap()]);
    assert!(out.status.success(), "{}", both(&out));
    let stdout = text(&out.stdout);
    let line = stdout
        .lines()
        .find(|l| l.contains(&name))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(line.contains("format version 1"), "{line}");
    assert!(
        line.contains("blob file a live table points into"),
        "{line}"
    );
    assert!(line.contains("200 values of 60,000 bytes"), "{line}");
    assert!(!line.contains("not a database file"), "{line}");

    let out = siftdb(&["inspect", blob.to_str().unwrap()]);
    assert!(out.status.success(), "{}", both(&out));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("200 (60,000 bytes)"), "{stdout}");
    assert!(stdout.contains("checksums: ok"), "{stdout}");

    // A byte of the 8th record's value: that record, by index and offset.
    let summary = inspect_blob_file(&blob).unwrap();
    assert!(summary.is_sound());
    let record_len = 8 + 9 + VALUE_LEN as u64 + 4;
    let offset = 20 + 7 * record_len;
    let mut bytes = std::fs::read(&blob).unwrap();
    bytes[(offset + 8 + 9 + 40) as usize] ^= 0x20;
    std::fs::write(&blob, &bytes).unwrap();
    let out = siftdb(&["inspect", blob.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", both(&out));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains(&format!("DAMAGED: record 7 at offset {offset}: ")),
        "{stdout}"
    );
    assert!(stdout.contains("checksum mismatch"), "{stdout}");

    // verify: a typed finding, and exit 1.
    let report = verify_dir(dir.path()).unwrap();
    assert!(!report.is_clean());
    let number: u64 = name.trim_end_matches(".blob").parse().unwrap();
    assert!(
        report.problems.iter().any(|p| p.finding
            == Finding::DamagedBlobFile {
                blob_file: number,
                place: Some(BlobPlace::Record { index: 7, offset })
            }),
        "{:?}",
        report.problems
    );
    let out = siftdb(&["verify", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", both(&out));
    assert!(
        text(&out.stdout).contains(&format!("error: {name}: offset {offset}: record 7")),
        "{}",
        both(&out)
    );
}

#[test]
fn verify_reports_a_missing_blob_file() {
    let dir = tempfile::tempdir().unwrap();
    let blob = build_db(dir.path());
    let out = siftdb(&["verify", dir.path().to_str().unwrap()]);
    assert!(out.status.success(), "{}", both(&out));
    std::fs::remove_file(&blob).unwrap();
    let name = blob.file_name().unwrap().to_string_lossy().into_owned();
    let number: u64 = name.trim_end_matches(".blob").parse().unwrap();
    let report = verify_dir(dir.path()).unwrap();
    assert!(
        report.problems.iter().any(|p| matches!(
            p.finding,
            Finding::MissingBlobFile { blob_file, .. } if blob_file == number
        )),
        "{:?}",
        report.problems
    );
    let out = siftdb(&["verify", dir.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", both(&out));
    assert!(
        text(&out.stdout).contains("not in the directory"),
        "{}",
        both(&out)
    );
    let out = siftdb(&["inspect", dir.path().to_str().unwrap()]);
    assert!(
        text(&out.stdout).contains("MISSING: blob file a live table points into"),
        "{}",
        both(&out)
    );
}
