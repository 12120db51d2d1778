//! `siftdb::internals::inspect::verify_dir` on sound and damaged databases: every kind
//! of damage is found and named by file (and offset where there is one),
//! damage reads survive is a warning, and verify itself writes nothing and
//! needs no lock.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use siftdb::internals::filename::{parse_file_name, table_file_name, FileKind};
use siftdb::internals::fs::OsFileSystem;
use siftdb::internals::inspect::{verify_dir, VerifyReport};
use siftdb::internals::manifest::{read_manifest, write_manifest, ManifestState};
use siftdb::internals::table::{BlockKind, Severity};
use siftdb::{Db, Options};

fn options() -> Options {
    Options::default()
        .memtable_bytes(16 << 10)
        .level0_compaction_trigger(100)
        .level0_quiet_trigger(100)
        .level0_stop_writes(200)
}

/// A closed database of `keys` keys written in a scattered order (so table
/// key ranges overlap), flushed into several level-0 tables.
fn build_db(dir: &Path, keys: u32) {
    let db = Db::open_with(dir, options()).unwrap();
    for j in 0..keys {
        let i = (j * 7919) % keys;
        db.put(format!("key{i:06}"), format!("value-{i}-padding"))
            .unwrap();
    }
    db.flush().unwrap();
    db.wait_for_background().unwrap();
}

fn manifest(dir: &Path) -> ManifestState {
    read_manifest(&OsFileSystem, dir).unwrap().unwrap()
}

fn log_names(dir: &Path) -> Vec<String> {
    let mut logs: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| matches!(parse_file_name(n), Some((FileKind::Wal, _))))
        .collect();
    logs.sort();
    logs
}

fn errors(report: &VerifyReport) -> Vec<String> {
    report.errors().map(|p| p.to_string()).collect()
}

/// Every file's name and bytes.
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().into_string().unwrap(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

#[test]
fn a_sound_database_is_clean_and_verify_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    build_db(dir.path(), 3000);
    let before = snapshot(dir.path());
    let report = verify_dir(dir.path()).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert!(report.is_clean());
    let state = manifest(dir.path());
    assert!(state.tables.len() > 2, "{}", state.tables.len());
    assert_eq!(report.tables_checked, state.tables.len());
    assert!(report.data_blocks_checked >= state.tables.len() as u64);
    assert_eq!(report.logs_checked, 1);
    assert_eq!(report.manifest.unwrap().last_sequence, state.last_sequence);
    assert_eq!(snapshot(dir.path()), before, "verify changed the directory");
}

#[test]
fn verify_runs_beside_an_open_database_without_its_lock() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path(), options()).unwrap();
    for i in 0..500u32 {
        db.put(format!("k{i}"), "v").unwrap();
    }
    db.flush().unwrap();
    db.put("unflushed", "v").unwrap();
    let report = verify_dir(dir.path()).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    assert!(report.tables_checked >= 1);
    assert!(report.log_records_checked >= 1, "{report:?}");
    drop(db);
}

#[test]
fn a_missing_table_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    build_db(dir.path(), 2000);
    let state = manifest(dir.path());
    let gone = table_file_name(state.tables[1].file_number);
    std::fs::remove_file(dir.path().join(&gone)).unwrap();
    let report = verify_dir(dir.path()).unwrap();
    let errors = errors(&report);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].contains(&gone) && errors[0].contains("named by the manifest but missing"),
        "{errors:?}"
    );
    assert_eq!(report.tables_checked, state.tables.len() - 1);
}

#[test]
fn a_truncated_manifest_is_an_error_and_every_table_is_still_checked() {
    let dir = tempfile::tempdir().unwrap();
    build_db(dir.path(), 2000);
    let tables = manifest(dir.path()).tables.len();
    let path = dir.path().join("MANIFEST");
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 7]).unwrap();
    let report = verify_dir(dir.path()).unwrap();
    assert!(report.manifest.is_none());
    let errors = errors(&report);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].starts_with("error: MANIFEST: ") && errors[0].contains("checksum mismatch"),
        "{errors:?}"
    );
    assert_eq!(report.tables_checked, tables);
    assert_eq!(report.logs_checked, 1);
}

#[test]
fn a_missing_manifest_is_an_error_but_an_empty_directory_is_not_a_database() {
    let dir = tempfile::tempdir().unwrap();
    build_db(dir.path(), 500);
    std::fs::remove_file(dir.path().join("MANIFEST")).unwrap();
    let report = verify_dir(dir.path()).unwrap();
    assert!(
        errors(&report)[0].contains("MANIFEST: missing"),
        "{report:?}"
    );
    assert!(report.tables_checked >= 1);

    let empty = tempfile::tempdir().unwrap();
    assert!(verify_dir(empty.path()).is_err());
}

#[test]
fn a_corrupt_log_record_in_the_middle_is_an_error_with_its_offset() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open_with(dir.path(), options()).unwrap();
        for i in 0..50u32 {
            db.put(format!("key{i}"), format!("value{i}")).unwrap();
        }
    }
    let logs = log_names(dir.path());
    assert_eq!(logs.len(), 1);
    let path = dir.path().join(&logs[0]);
    let mut bytes = std::fs::read(&path).unwrap();
    // First record: 20-byte file header, 7-byte record header, payload.
    bytes[20 + 7 + 3] ^= 0x40;
    std::fs::write(&path, &bytes).unwrap();
    let report = verify_dir(dir.path()).unwrap();
    let errors = errors(&report);
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].contains(&logs[0])
            && errors[0].contains("record at offset 20")
            && errors[0].contains("checksum mismatch"),
        "{errors:?}"
    );
}

/// A database closed cleanly with 10 records in its one log: the log's
/// name, path and bytes.
fn closed_with_one_log(dir: &Path) -> (String, PathBuf, Vec<u8>) {
    {
        let db = Db::open_with(dir, options()).unwrap();
        for i in 0..10u32 {
            db.put(format!("key{i}"), "value").unwrap();
        }
    }
    let logs = log_names(dir);
    let path = dir.join(&logs[0]);
    let bytes = std::fs::read(&path).unwrap();
    (logs[0].clone(), path, bytes)
}

#[test]
fn a_torn_tail_on_the_newest_log_is_only_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let (log, path, bytes) = closed_with_one_log(dir.path());
    // What a crash leaves: no close record, the last record cut short.
    let crashed = bytes.len() - siftdb::internals::wal::CLOSE_RECORD_LEN - 3;
    std::fs::write(&path, &bytes[..crashed]).unwrap();
    // The same cut after the clean close is a loss (tests/cut_short_log.rs).
    let report = verify_dir(dir.path()).unwrap();
    assert!(!report.is_clean(), "{:?}", report.problems);
    // With the manifest as it was before the close recorded the log's
    // length, it is what a crash leaves.
    let fs = siftdb::internals::fs::OsFileSystem;
    let mut state = siftdb::internals::manifest::read_manifest(&fs, dir.path())
        .unwrap()
        .unwrap();
    assert!(state.closed_log.is_some());
    state.closed_log = None;
    siftdb::internals::manifest::write_manifest(&fs, dir.path(), &state).unwrap();
    let report = verify_dir(dir.path()).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    let warnings: Vec<_> = report.warnings().collect();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(warnings[0].file, log);
    assert!(warnings[0].offset.is_some());
    assert!(warnings[0].detail.contains("torn tail"), "{warnings:?}");
    assert_eq!(report.log_records_checked, 9);
}

#[test]
fn a_damaged_last_record_of_a_cleanly_closed_log_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let (log, path, mut bytes) = closed_with_one_log(dir.path());
    // 3 bytes before the end, and 3 bytes before the close record.
    for from_end in [3, siftdb::internals::wal::CLOSE_RECORD_LEN + 3] {
        let at = bytes.len() - from_end;
        bytes[at] ^= 0x10;
        std::fs::write(&path, &bytes).unwrap();
        let report = verify_dir(dir.path()).unwrap();
        let errors = errors(&report);
        assert_eq!(errors.len(), 1, "{from_end}: {:?}", report.problems);
        assert!(errors[0].contains(&log), "{errors:?}");
        bytes[at] ^= 0x10;
    }
}

#[test]
fn a_log_whose_header_number_differs_from_its_name_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    build_db(dir.path(), 200);
    let log = log_names(dir.path()).pop().unwrap();
    let (_, number) = parse_file_name(&log).unwrap();
    let renamed = siftdb::internals::filename::wal_file_name(number + 1);
    std::fs::rename(dir.path().join(&log), dir.path().join(&renamed)).unwrap();
    let report = verify_dir(dir.path()).unwrap();
    let errors = errors(&report);
    assert!(
        errors
            .iter()
            .any(|e| e.contains(&renamed) && e.contains(&format!("header says log {number}"))),
        "{errors:?}"
    );
    // The manifest's own log is now missing: a warning, not an error.
    assert!(report.warnings().any(|w| w.file == log), "{report:?}");
}

#[test]
fn a_table_that_is_not_the_one_the_manifest_records_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    build_db(dir.path(), 2000);
    let state = manifest(dir.path());
    // Two sound tables of different sizes: b's file becomes a copy of a's.
    let a = &state.tables[0];
    let b = state
        .tables
        .iter()
        .find(|t| t.file_size != a.file_size)
        .expect("tables of different sizes");
    let (a, b) = (
        table_file_name(a.file_number),
        table_file_name(b.file_number),
    );
    std::fs::copy(dir.path().join(&a), dir.path().join(&b)).unwrap();
    let report = verify_dir(dir.path()).unwrap();
    let errors = errors(&report);
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(
        errors[0].starts_with(&format!("error: {b}: "))
            && errors[0].contains("bytes, the manifest records"),
        "{errors:?}"
    );
    assert!(
        errors[1].starts_with(&format!("error: {b}: properties block at offset"))
            && errors[1].contains("than the manifest records"),
        "{errors:?}"
    );
}

#[test]
fn overlapping_tables_below_level_0_are_an_error() {
    let dir = tempfile::tempdir().unwrap();
    build_db(dir.path(), 2000);
    let mut state = manifest(dir.path());
    for table in &mut state.tables {
        table.level = 1;
    }
    write_manifest(&OsFileSystem, dir.path(), &state).unwrap();
    let report = verify_dir(dir.path()).unwrap();
    let errors = errors(&report);
    assert!(!errors.is_empty());
    assert!(
        errors
            .iter()
            .all(|e| e.starts_with("error: MANIFEST: level 1: the key ranges of")),
        "{errors:?}"
    );
}

#[test]
fn a_damaged_data_block_is_an_error_and_a_damaged_filter_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    build_db(dir.path(), 2000);
    let state = manifest(dir.path());
    // The largest table has several data blocks (the last flush's may not).
    let largest = state.tables.iter().max_by_key(|t| t.file_size).unwrap();
    let name = table_file_name(largest.file_number);
    let path = dir.path().join(&name);
    let table = siftdb::internals::table::Table::open_path(&path).unwrap();
    let data = table.data_block_handles()[1];
    let filter = table.footer().filter.unwrap();
    drop(table);

    let mut bytes = std::fs::read(&path).unwrap();
    bytes[filter.offset as usize + 100] ^= 0x08;
    std::fs::write(&path, &bytes).unwrap();
    let report = verify_dir(dir.path()).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    let warning = report.warnings().next().unwrap();
    assert_eq!(
        (warning.file.as_str(), warning.block, warning.offset),
        (name.as_str(), Some(BlockKind::Filter), Some(filter.offset))
    );

    bytes[data.offset as usize + 10] ^= 0x08;
    std::fs::write(&path, &bytes).unwrap();
    let report = verify_dir(dir.path()).unwrap();
    assert!(!report.is_clean());
    let error = report.errors().next().unwrap();
    assert_eq!(
        (
            error.file.as_str(),
            error.block,
            error.offset,
            error.severity
        ),
        (
            name.as_str(),
            Some(BlockKind::Data),
            Some(data.offset),
            Severity::Error
        )
    );
}
