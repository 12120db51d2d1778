//! Repair of a database with separated values (`Options::blob_threshold`):
//! it keeps the blob files the tables point into (a rebuild without the
//! manifest loses nothing), keeps the pointers of a salvaged table valid,
//! and reports a missing blob file — whose keys then fail to read with
//! `Corruption`, never an older or wrong value.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "test code: a failed assumption is a failed test"
)]

use std::collections::BTreeMap;
use std::path::Path;

use siftdb::{repair, Db, Error, Options, RepairOptions};
use siftdb_testkit::files::files_ending;

const KEYS: u32 = 400;

fn options() -> Options {
    Options::default()
        .memtable_bytes(64 * 1024)
        .block_size(512)
        .table_target_bytes(16 * 1024)
        .blob_threshold(Some(100))
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// Every third value is short (inline), the others go to blob files.
fn value(i: u32, write: u32) -> Vec<u8> {
    let mut out = format!("{i}:{write}:").into_bytes();
    let len = if i.is_multiple_of(3) { 20 } else { 300 };
    out.resize(len, b'a' + (write % 26) as u8);
    out
}

/// Two writes of every key, each flushed (so older versions lie below
/// newer ones), then compacted once; returns the model.
fn build(dir: &Path) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let db = Db::open_with(dir, options()).unwrap();
    let mut model = BTreeMap::new();
    for write in 0..2 {
        for i in 0..KEYS {
            db.put(key(i), value(i, write)).unwrap();
            model.insert(key(i), value(i, write));
        }
        db.flush().unwrap();
        if write == 0 {
            db.compact().unwrap();
        }
    }
    db.wait_for_background().unwrap();
    model
}

fn check(dir: &Path, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    let db = Db::open_with(dir, options()).unwrap();
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
    db.verify_checksums().unwrap();
}

#[test]
fn repair_without_the_manifest_keeps_every_separated_value() {
    let dir = tempfile::tempdir().unwrap();
    let model = build(dir.path());
    let blobs = files_ending(dir.path(), ".blob");
    assert!(!blobs.is_empty());
    std::fs::remove_file(dir.path().join("MANIFEST")).unwrap();
    let _ = std::fs::remove_file(dir.path().join("MANIFEST.copy"));
    let report = repair(dir.path(), RepairOptions::new().options(options())).unwrap();
    assert!(!report.lost_anything(), "{report:?}");
    assert!(report.blob_files.is_empty(), "{:?}", report.blob_files);
    check(dir.path(), &model);
    // Compaction after the repair still reads every value.
    {
        let db = Db::open_with(dir.path(), options()).unwrap();
        db.compact().unwrap();
    }
    check(dir.path(), &model);
    // A second repair finds nothing to do.
    let again = repair(dir.path(), RepairOptions::new().options(options())).unwrap();
    assert!(!again.lost_anything(), "{again:?}");
}

#[test]
fn a_damaged_table_salvaged_keeps_its_pointers_valid() {
    let dir = tempfile::tempdir().unwrap();
    let model = build(dir.path());
    // Damage the tail of the newest table's properties region: the table is
    // rewritten from its readable blocks, whose blob pointers still resolve.
    let tables = files_ending(dir.path(), ".sst");
    let newest = tables.last().unwrap();
    let mut bytes = std::fs::read(newest).unwrap();
    let at = bytes.len() / 3;
    bytes[at] ^= 0x40;
    std::fs::write(newest, &bytes).unwrap();
    let report = repair(dir.path(), RepairOptions::new().options(options())).unwrap();
    assert!(report.changed(), "{report:?}");
    assert!(report.blob_files.is_empty(), "{:?}", report.blob_files);
    // Every key reads its newest value, or (where the lost block held it)
    // fails or reads nothing — never a value the model does not hold for
    // it at some write.
    let db = Db::open_with(dir.path(), options()).unwrap();
    let mut read = 0;
    for (k, v) in &model {
        let i: u32 = String::from_utf8_lossy(&k[3..]).parse().unwrap();
        if let Ok(Some(got)) = db.get(k) {
            assert!(got[..] == v[..] || got[..] == value(i, 0)[..], "key {i}");
            read += 1;
        }
    }
    assert!(read > 0);
    db.verify_checksums().unwrap();
}

#[test]
fn a_missing_blob_file_is_reported_and_never_read_as_a_wrong_value() {
    let dir = tempfile::tempdir().unwrap();
    let model = build(dir.path());
    let blobs = files_ending(dir.path(), ".blob");
    let gone = blobs.last().unwrap();
    let gone_name = gone.file_name().unwrap().to_string_lossy().into_owned();
    std::fs::remove_file(gone).unwrap();
    std::fs::remove_file(dir.path().join("MANIFEST")).unwrap();
    let _ = std::fs::remove_file(dir.path().join("MANIFEST.copy"));
    let report = repair(dir.path(), RepairOptions::new().options(options())).unwrap();
    assert!(report.lost_anything(), "{report:?}");
    let found: Vec<&str> = report.blob_files.iter().map(|b| b.file.as_str()).collect();
    assert_eq!(found, [gone_name.as_str()], "{report:?}");
    assert_eq!(report.blob_files[0].problem, "missing");
    assert!(!report.blob_files[0].tables.is_empty());

    let db = Db::open_with(dir.path(), options()).unwrap();
    let (mut right, mut failed) = (0, 0);
    for (k, v) in &model {
        match db.get(k) {
            Ok(got) => {
                assert_eq!(
                    got.as_deref(),
                    Some(&v[..]),
                    "{}",
                    String::from_utf8_lossy(k)
                );
                right += 1;
            }
            Err(Error::Corruption { what, .. }) => {
                assert!(what.contains(&gone_name) || what.contains("blob"), "{what}");
                failed += 1;
            }
            Err(e) => panic!("{e}"),
        }
    }
    assert!(failed > 0 && right > 0, "{right} read, {failed} failed");
    // The inline values (every third key) all read.
    for i in (0..KEYS).step_by(3) {
        assert_eq!(
            db.get(key(i)).unwrap().as_deref(),
            Some(&model[&key(i)][..])
        );
    }
    // A repair with the manifest intact reports it as well.
    drop(db);
    let again = repair(dir.path(), RepairOptions::new().options(options())).unwrap();
    assert_eq!(again.blob_files.len(), 1, "{again:?}");
}
