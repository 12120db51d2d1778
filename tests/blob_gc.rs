//! Blob garbage collection by garbage share
//! (`Options::blob_gc_garbage_ratio`): the manifest keeps each blob file's
//! written and garbage bytes, every compaction that drops or relocates a
//! pointer adds to its file's garbage, and a file past the ratio has its
//! live values moved to a new blob file and goes once no table (of any
//! version a snapshot pins) points into it. Checked against a `BTreeMap`
//! through overwrites, deletes, range deletes, flushes, compactions and
//! reopens; the figures are exact after a full compaction (what is not
//! garbage is what the model holds) and survive a reopen.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "test code: a failed assumption is a failed test"
)]

use std::collections::BTreeMap;
use std::path::Path;

use siftdb::internals::fs::OsFileSystem;
use siftdb::internals::manifest::{read_manifest, BlobFileRecord};
use siftdb::{Db, Options};
use siftdb_testkit::files::files_ending;

const THRESHOLD: usize = 100;

/// Separated values, no collection by age: only the garbage share collects.
fn options(ratio: Option<f64>) -> Options {
    Options::default()
        .memtable_bytes(64 * 1024)
        .block_size(512)
        .table_target_bytes(16 * 1024)
        .blob_threshold(Some(THRESHOLD))
        .blob_gc_age_cutoff(0.0)
        .blob_gc_garbage_ratio(ratio)
}

fn key(i: u64) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

/// A value of `len` bytes that says which key and write it is.
fn value(i: u64, write: u64, len: usize) -> Vec<u8> {
    let mut out = format!("{i}:{write}:").into_bytes();
    out.resize(len.max(out.len()), b'a' + (write % 26) as u8);
    out
}

/// The blob files in `dir`, by name.
fn blob_files(dir: &Path) -> Vec<String> {
    files_ending(dir, ".blob")
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect()
}

/// The blob file records of the manifest on disk.
fn records(dir: &Path) -> Vec<BlobFileRecord> {
    read_manifest(&OsFileSystem, dir)
        .unwrap()
        .unwrap()
        .blob_files
}

/// Gets and a scan against the model.
fn check(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>, keys: u64) {
    for i in 0..keys {
        let k = key(i);
        assert_eq!(
            db.get(&k).unwrap().map(|v| v.to_vec()),
            model.get(&k).cloned(),
            "get {}",
            String::from_utf8_lossy(&k)
        );
    }
    let scanned: Vec<(Vec<u8>, Vec<u8>)> = db
        .iter()
        .map(|r| r.unwrap())
        .map(|(k, v)| (k.to_vec(), v.to_vec()))
        .collect();
    let want: Vec<(Vec<u8>, Vec<u8>)> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    assert_eq!(scanned, want, "scan");
}

/// With every table merged into one run and no snapshot, a blob file's
/// live bytes (total less garbage) are exactly the separated values the
/// model holds: summed over the files, bytes and values.
fn assert_exact(dir: &Path, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    let files = records(dir);
    let live_bytes: u64 = files.iter().map(|f| f.total_bytes - f.garbage_bytes).sum();
    let live_values: u64 = files
        .iter()
        .map(|f| f.total_values - f.garbage_values)
        .sum();
    let separated = model.values().filter(|v| v.len() >= THRESHOLD);
    let want_bytes: u64 = separated.clone().map(|v| v.len() as u64).sum();
    assert_eq!(live_bytes, want_bytes, "{files:?}");
    assert_eq!(live_values, separated.count() as u64, "{files:?}");
    // Every recorded file exists; every file on disk is recorded.
    let on_disk = blob_files(dir);
    let recorded: Vec<String> = files
        .iter()
        .map(|f| format!("{:06}.blob", f.file_number))
        .collect();
    assert_eq!(on_disk, recorded);
}

/// Sixty values in one blob file; fifty of them overwritten, deleted or
/// range-deleted; everything compacted. Returns the first file's name and
/// the blob files left, with the first file's figures once compacted.
fn overwrite_most(ratio: Option<f64>) -> (String, Vec<String>, Option<BlobFileRecord>) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path(), options(ratio)).unwrap();
    let mut model = BTreeMap::new();
    for i in 0..60 {
        db.put(key(i), value(i, 0, 500)).unwrap();
        model.insert(key(i), value(i, 0, 500));
    }
    db.flush().unwrap();
    let first = blob_files(dir.path());
    assert_eq!(first.len(), 1, "{first:?}");
    let first_number: u64 = first[0].trim_end_matches(".blob").parse().unwrap();
    assert_eq!(
        records(dir.path()),
        [BlobFileRecord {
            keyspace: 0,
            file_number: first_number,
            total_bytes: 60 * 500,
            total_values: 60,
            garbage_bytes: 0,
            garbage_values: 0,
        }]
    );
    for i in 0..40 {
        db.put(key(i), value(i, 1, 300)).unwrap();
        model.insert(key(i), value(i, 1, 300));
    }
    for i in 40..45 {
        db.delete(key(i)).unwrap();
        model.remove(&key(i));
    }
    db.delete_range(key(45)..key(50)).unwrap();
    for i in 45..50 {
        model.remove(&key(i));
    }
    db.flush().unwrap();
    db.compact().unwrap();
    db.wait_for_background().unwrap();
    check(&db, &model, 60);
    assert_exact(dir.path(), &model);
    let figures = records(dir.path())
        .into_iter()
        .find(|f| f.file_number == first_number);
    (first[0].clone(), blob_files(dir.path()), figures)
}

#[test]
fn a_blob_file_past_the_garbage_ratio_goes_and_without_it_stays() {
    // Off: the compaction moved the ten live pointers, the file stays with
    // fifty of its sixty values garbage.
    let (first, after, figures) = overwrite_most(None);
    assert!(after.contains(&first), "{first} {after:?}");
    let figures = figures.unwrap();
    assert_eq!(
        (figures.garbage_bytes, figures.garbage_values),
        (50 * 500, 50)
    );
    // At 0.5: 5/6 garbage, so its ten live values moved on and it went.
    let (first, after, figures) = overwrite_most(Some(0.5));
    assert!(!after.contains(&first), "{first} {after:?}");
    assert_eq!(figures, None);
    // At 0.9 it is not past the ratio: it stays.
    let (first, after, _) = overwrite_most(Some(0.9));
    assert!(after.contains(&first), "{first} {after:?}");
}

#[test]
fn a_snapshot_keeps_a_collected_blob_file_until_it_goes() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path(), options(Some(0.5))).unwrap();
    for i in 0..40 {
        db.put(key(i), value(i, 0, 400)).unwrap();
    }
    db.flush().unwrap();
    let first = blob_files(dir.path());
    let snapshot = db.snapshot();
    for i in 0..30 {
        db.put(key(i), value(i, 1, 400)).unwrap();
    }
    db.flush().unwrap();
    db.compact().unwrap();
    db.wait_for_background().unwrap();
    // Collected: no longer in the figures, but on disk for the snapshot,
    // which reads every old value from it.
    assert!(records(dir.path())
        .iter()
        .all(|f| format!("{:06}.blob", f.file_number) != first[0]));
    assert!(blob_files(dir.path()).contains(&first[0]));
    for i in 0..40 {
        assert_eq!(snapshot.get(key(i)).unwrap().unwrap(), value(i, 0, 400));
        let write = u64::from(i < 30);
        assert_eq!(db.get(key(i)).unwrap().unwrap(), value(i, write, 400));
    }
    drop(snapshot);
    assert!(
        !blob_files(dir.path()).contains(&first[0]),
        "{:?}",
        blob_files(dir.path())
    );
    for i in 0..40 {
        let write = u64::from(i < 30);
        assert_eq!(db.get(key(i)).unwrap().unwrap(), value(i, write, 400));
    }
}

/// A small deterministic generator (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[test]
fn garbage_figures_follow_a_model_and_survive_reopens() {
    const KEYS: u64 = 300;
    for ratio in [None, Some(0.3)] {
        let dir = tempfile::tempdir().unwrap();
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        let mut rng = Rng(7);
        // The largest garbage share seen: without collection it passes the
        // ratio the other run keeps every file under.
        let mut largest_share: f64 = 0.0;
        for round in 0..6u64 {
            let db = Db::open_with(dir.path(), options(ratio)).unwrap();
            check(&db, &model, KEYS);
            for write in 0..400u64 {
                let i = rng.below(KEYS);
                match rng.below(20) {
                    0 => {
                        db.delete(key(i)).unwrap();
                        model.remove(&key(i));
                    }
                    1 => {
                        let end = (i + 1 + rng.below(8)).min(KEYS);
                        db.delete_range(key(i)..key(end)).unwrap();
                        for j in i..end {
                            model.remove(&key(j));
                        }
                    }
                    _ => {
                        // Mostly separated, some inline.
                        let len = match rng.below(3) {
                            0 => 40,
                            1 => 150,
                            _ => 700,
                        };
                        let v = value(i, round * 1000 + write, len);
                        db.put(key(i), &v).unwrap();
                        model.insert(key(i), v);
                    }
                }
                if write % 150 == 149 {
                    db.flush().unwrap();
                }
            }
            db.flush().unwrap();
            db.wait_for_background().unwrap();
            check(&db, &model, KEYS);
            if round % 2 == 1 {
                db.compact().unwrap();
                db.wait_for_background().unwrap();
                check(&db, &model, KEYS);
                assert_exact(dir.path(), &model);
            }
            let figures = records(dir.path());
            let stats = db.stats().keyspaces[0].clone();
            assert_eq!(stats.blob_files, figures.len());
            assert_eq!(
                stats.blob_file_bytes,
                figures.iter().map(|f| f.total_bytes).sum::<u64>()
            );
            assert_eq!(
                stats.blob_garbage_bytes,
                figures.iter().map(|f| f.garbage_bytes).sum::<u64>()
            );
            for f in &figures {
                assert!(f.garbage_bytes <= f.total_bytes, "{f:?}");
                largest_share = largest_share.max(f.garbage_bytes as f64 / f.total_bytes as f64);
                if let Some(ratio) = ratio {
                    // Background work is idle: nothing left past the ratio.
                    assert!(
                        f.garbage_bytes as f64 / (f.total_bytes as f64) < ratio,
                        "{f:?}"
                    );
                }
            }
            drop(db);
            // The figures survive the reopen as they were.
            let db = Db::open_with(dir.path(), options(ratio)).unwrap();
            let reopened = db.stats().keyspaces[0].clone();
            assert_eq!(
                (
                    reopened.blob_files,
                    reopened.blob_file_bytes,
                    reopened.blob_garbage_bytes
                ),
                (
                    stats.blob_files,
                    stats.blob_file_bytes,
                    stats.blob_garbage_bytes
                )
            );
            check(&db, &model, KEYS);
            db.verify_checksums().unwrap();
        }
        if ratio.is_none() {
            assert!(largest_share >= 0.3, "{largest_share}");
        }
    }
}
