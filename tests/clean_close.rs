//! The close record: after a clean close any damaged log record is
//! corruption (the open refuses and names `siftdb repair`); only after a
//! crash is a damaged last record a torn tail, dropped and reported. One
//! damaged byte of the file header or of the close record itself (neither
//! holds a write) is mended and reported.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use std::path::{Path, PathBuf};

use siftdb::{Db, Error, Options};

fn options() -> Options {
    // Nothing is flushed: every write stays in the log.
    Options::default().memtable_bytes(1 << 20)
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

fn flip(path: &Path, from_end: usize) {
    let mut bytes = std::fs::read(path).unwrap();
    let at = bytes.len() - from_end;
    bytes[at] ^= 0x10;
    std::fs::write(path, bytes).unwrap();
}

fn write_some(dir: &Path) {
    let db = Db::open_with(dir, options()).unwrap();
    for i in 0..10 {
        db.put(format!("k{i}"), format!("v{i}")).unwrap();
    }
    drop(db);
}

#[test]
fn a_clean_close_is_recognised_at_the_next_open() {
    let dir = tempfile::tempdir().unwrap();
    write_some(dir.path());
    let db = Db::open_with(dir.path(), options()).unwrap();
    let report = db.recovery_report();
    assert!(report.closed_cleanly, "{report:?}");
    assert_eq!(report.records_replayed, 10);
    assert_eq!(report.torn_tail, None);
    assert_eq!(db.get("k9").unwrap().as_deref(), Some(&b"v9"[..]));
}

#[test]
fn damage_to_a_record_of_a_cleanly_closed_log_refuses_the_open_and_names_repair() {
    // In the last batch record (just before the 27-byte close record).
    for from_end in [33, 40] {
        let dir = tempfile::tempdir().unwrap();
        write_some(dir.path());
        let log = newest_log(dir.path());
        flip(&log, from_end);
        let err = Db::open_with(dir.path(), options()).unwrap_err();
        assert!(matches!(err, Error::Corruption { .. }), "{from_end}: {err}");
        let text = err.to_string();
        assert!(text.contains("siftdb repair"), "{text}");
        assert!(
            text.contains(&log.file_name().unwrap().to_string_lossy().to_string()),
            "{text}"
        );
    }
}

/// The file header follows from the file's number, the close record from
/// the records before it: one damaged byte of either loses no write, and
/// is mended and reported. Two are refused (the damage may be more).
#[test]
fn one_damaged_byte_of_a_log_header_or_close_record_is_mended() {
    let header_len = siftdb::internals::wal::FILE_HEADER_LEN;
    for at_start in [0, 5, 9, header_len - 1] {
        for from_end in [None, Some(1), Some(3), Some(27)] {
            let dir = tempfile::tempdir().unwrap();
            write_some(dir.path());
            let log = newest_log(dir.path());
            let len = std::fs::read(&log).unwrap().len();
            match from_end {
                // One byte of the header.
                None => flip(&log, len - at_start),
                // One byte of the close record.
                Some(from_end) => flip(&log, from_end),
            }
            let db = Db::open_with(dir.path(), options()).unwrap();
            let report = db.recovery_report().clone();
            assert_eq!(report.logs_mended.len(), 1, "{report:?}");
            assert_eq!(
                report.logs_mended[0].0,
                log.file_name().unwrap().to_string_lossy()
            );
            assert!(report.closed_cleanly, "{report:?}");
            assert_eq!(report.records_replayed, 10);
            for i in 0..10 {
                assert_eq!(
                    db.get(format!("k{i}")).unwrap().as_deref(),
                    Some(format!("v{i}").as_bytes())
                );
            }
            drop(db);
            // The mended records went into a table; the log is gone.
            let db = Db::open_with(dir.path(), options()).unwrap();
            assert!(db.recovery_report().logs_mended.is_empty());
            assert_eq!(db.get("k9").unwrap().as_deref(), Some(&b"v9"[..]));
        }
    }
    // Two damaged bytes of the close record, or of the header: refused.
    for (first, second) in [(1, 3), (26, 27)] {
        let dir = tempfile::tempdir().unwrap();
        write_some(dir.path());
        let log = newest_log(dir.path());
        flip(&log, first);
        flip(&log, second);
        let err = Db::open_with(dir.path(), options()).unwrap_err();
        assert!(err.to_string().contains("siftdb repair"), "{err}");
    }
    let dir = tempfile::tempdir().unwrap();
    write_some(dir.path());
    let log = newest_log(dir.path());
    let len = std::fs::read(&log).unwrap().len();
    flip(&log, len - 2);
    flip(&log, len - 12);
    let err = Db::open_with(dir.path(), options()).unwrap_err();
    assert!(err.to_string().contains("siftdb repair"), "{err}");
}

#[test]
fn after_a_crash_a_damaged_last_record_is_a_torn_tail() {
    let dir = tempfile::tempdir().unwrap();
    write_some(dir.path());
    // What a crash leaves: the close record never written.
    let log = newest_log(dir.path());
    let bytes = std::fs::read(&log).unwrap();
    std::fs::write(&log, &bytes[..bytes.len() - 32]).unwrap();
    flip(&log, 3);
    let db = Db::open_with(dir.path(), options()).unwrap();
    let report = db.recovery_report().clone();
    assert!(!report.closed_cleanly);
    assert!(report.torn_tail.is_some(), "{report:?}");
    assert_eq!(report.records_replayed, 9);
    assert_eq!(db.get("k9").unwrap(), None);
    assert_eq!(db.get("k8").unwrap().as_deref(), Some(&b"v8"[..]));
}
