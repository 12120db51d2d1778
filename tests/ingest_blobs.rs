//! Bulk load with separated values: a `TableWriter` given
//! `Options::blob_threshold` writes the large values to a blob file beside
//! its table, and an ingest (copy or move, into an empty database or over
//! its tables) brings both in; every key reads back, across a reopen, a
//! compaction and a checkpoint.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "test code: a failed assumption is a failed test"
)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use siftdb::{Db, IngestOptions, Options, TableWriter};
use siftdb_testkit::files::files_ending;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn options() -> Options {
    Options::default()
        .memtable_bytes(32 << 10)
        .table_target_bytes(64 << 10)
        .blob_threshold(Some(100))
}

fn key(i: u64) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

/// Every 4th value short (inline), the others 300 bytes (separated).
fn value(i: u64, tag: &str) -> Vec<u8> {
    let mut out = format!("{tag}-{i}-").into_bytes();
    out.resize(if i.is_multiple_of(4) { 30 } else { 300 }, b'x');
    out
}

fn write_file(path: &Path, keys: std::ops::Range<u64>, tag: &str, model: &mut Model) {
    let mut writer = TableWriter::create(path, &options()).unwrap();
    for i in keys {
        writer.put(key(i), value(i, tag)).unwrap();
        model.insert(key(i), value(i, tag));
    }
    writer.finish().unwrap();
}

fn check(db: &Db, model: &Model) {
    for (k, v) in model {
        assert_eq!(
            db.get(k).unwrap().as_deref(),
            Some(&v[..]),
            "{}",
            String::from_utf8_lossy(k)
        );
    }
    let scanned: Vec<(Vec<u8>, Vec<u8>)> = db
        .iter()
        .map(|r| r.unwrap())
        .map(|(k, v)| (k.to_vec(), v.to_vec()))
        .collect();
    let want: Vec<(Vec<u8>, Vec<u8>)> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(scanned, want);
}

#[test]
fn a_table_writer_separates_and_ingest_brings_the_blob_file_in() {
    let out = tempfile::tempdir().unwrap();
    let load = out.path().join("load");
    std::fs::create_dir(&load).unwrap();
    let mut model = Model::new();
    let first = load.join("first.sst");
    write_file(&first, 0..300, "a", &mut model);
    let written = files_ending(&load, ".blob");
    assert_eq!(written.len(), 1, "the writer wrote no blob file");

    let dir = out.path().join("db");
    {
        let db = Db::open_with(&dir, options()).unwrap();
        // Copy into an empty database: the caller's files stay.
        db.ingest(&[&first], IngestOptions::new()).unwrap();
        assert!(first.exists() && written[0].exists());
        assert_eq!(files_ending(&dir, ".blob").len(), 1);
        check(&db, &model);
        // The manifest records the copy's figures (the base of garbage-
        // share collection), as it does a flush's blob file.
        let stats = db.stats().keyspaces[0].clone();
        assert_eq!(stats.blob_files, 1, "{stats:?}");
        assert!(stats.blob_file_bytes > 0, "{stats:?}");

        // Move, over the tables (rewritten at a new sequence number): the
        // caller's table and blob file are gone.
        let second = load.join("second.sst");
        write_file(&second, 150..450, "b", &mut model);
        let second_blob: Vec<PathBuf> = files_ending(&load, ".blob")
            .into_iter()
            .filter(|p| !written.contains(p))
            .collect();
        assert_eq!(second_blob.len(), 1);
        db.ingest(&[&second], IngestOptions::new().move_files(true))
            .unwrap();
        assert!(!second.exists() && !second_blob[0].exists());
        check(&db, &model);
        db.verify_checksums().unwrap();

        // A checkpoint carries the ingested blob files.
        let checkpoint = out.path().join("checkpoint");
        db.checkpoint(&checkpoint).unwrap();
        let copy = Db::open_with(&checkpoint, options()).unwrap();
        check(&copy, &model);
    }
    // The caller's blob file no longer matters to the database.
    std::fs::remove_file(&written[0]).unwrap();
    let db = Db::open_with(&dir, options()).unwrap();
    check(&db, &model);
    db.compact().unwrap();
    check(&db, &model);
    db.verify_checksums().unwrap();
    drop(db);
    let db = Db::open_with(&dir, options()).unwrap();
    check(&db, &model);
}

#[test]
fn a_writer_dropped_unfinished_leaves_no_blob_file() {
    let out = tempfile::tempdir().unwrap();
    let path = out.path().join("t.sst");
    let mut writer = TableWriter::create(&path, &options()).unwrap();
    writer.put(key(1), value(1, "a")).unwrap();
    assert_eq!(files_ending(out.path(), ".blob").len(), 1);
    drop(writer);
    assert!(files_ending(out.path(), ".blob").is_empty());
    assert!(!path.exists());
}

#[test]
fn an_ingest_whose_blob_file_is_missing_is_refused() {
    let out = tempfile::tempdir().unwrap();
    let path = out.path().join("t.sst");
    let mut model = Model::new();
    write_file(&path, 0..50, "a", &mut model);
    for blob in files_ending(out.path(), ".blob") {
        std::fs::remove_file(blob).unwrap();
    }
    let db = Db::open_with(out.path().join("db"), options()).unwrap();
    assert!(db.ingest(&[&path], IngestOptions::new()).is_err());
    assert_eq!(db.iter().count(), 0);
}
