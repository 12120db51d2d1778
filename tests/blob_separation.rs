//! Key-value separation (`Options::blob_threshold`): values at or above
//! the threshold live in blob files, and every read path gives them back —
//! gets, `multi_get`, scans both ways, snapshots, transactions and
//! compare-and-swap — through flushes, compactions (which move pointers)
//! and reopens, checked against a `BTreeMap`. A damaged blob file is a
//! typed error for the keys whose values it holds, never a wrong value; a
//! blob file no live table points into is removed once no snapshot pins
//! it; without a threshold no blob file is written.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "test code: a failed assumption is a failed test"
)]

use std::collections::BTreeMap;
use std::path::Path;

use siftdb::{CompareAndSwap, Db, Options};
use siftdb_testkit::files::files_ending;

const THRESHOLD: usize = 100;

fn options() -> Options {
    Options::default()
        .memtable_bytes(64 * 1024)
        .block_size(512)
        .table_target_bytes(16 * 1024)
        .blob_threshold(Some(THRESHOLD))
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

/// Every read path against the model.
fn check(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>, keys: u64) {
    let probes: Vec<Vec<u8>> = (0..keys).map(key).collect();
    for k in &probes {
        assert_eq!(
            db.get(k).unwrap().map(|v| v.to_vec()),
            model.get(k).cloned(),
            "get {}",
            String::from_utf8_lossy(k)
        );
    }
    let answers = db.multi_get(&probes).unwrap();
    for (k, answer) in probes.iter().zip(answers) {
        assert_eq!(
            answer.map(|v| v.to_vec()),
            model.get(k).cloned(),
            "multi_get"
        );
    }
    let want: Vec<(Vec<u8>, Vec<u8>)> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    let forward: Vec<(Vec<u8>, Vec<u8>)> = db
        .iter()
        .map(|r| r.unwrap())
        .map(|(k, v)| (k.to_vec(), v.to_vec()))
        .collect();
    assert_eq!(forward, want, "forward scan");
    let mut backward: Vec<(Vec<u8>, Vec<u8>)> = db
        .iter()
        .rev()
        .map(|r| r.unwrap())
        .map(|(k, v)| (k.to_vec(), v.to_vec()))
        .collect();
    backward.reverse();
    assert_eq!(backward, want, "backward scan");
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
fn separated_values_match_a_model_through_flushes_compactions_and_reopens() {
    let dir = tempfile::tempdir().unwrap();
    let mut db = Db::open_with(dir.path(), options()).unwrap();
    let mut model = BTreeMap::new();
    let mut rng = Rng(0xb10b);
    let keys = 400;
    for write in 0..4000u64 {
        let i = rng.below(keys);
        match rng.below(20) {
            0 => {
                db.delete(key(i)).unwrap();
                model.remove(&key(i));
            }
            1 => {
                let end = (i + 1 + rng.below(20)).min(keys);
                db.delete_range(key(i)..key(end)).unwrap();
                model.retain(|k, _| k < &key(i) || k >= &key(end));
            }
            n => {
                // Small, at the threshold, and large values.
                let len = [10, THRESHOLD - 1, THRESHOLD, 300, 2000][(n % 5) as usize];
                let v = value(i, write, len);
                db.put(key(i), &v).unwrap();
                model.insert(key(i), v);
            }
        }
        match write % 1000 {
            299 => db.flush().unwrap(),
            599 => db.compact().unwrap(),
            999 => {
                check(&db, &model, keys);
                db.close().unwrap();
                db = Db::open_with(dir.path(), options()).unwrap();
            }
            _ => {}
        }
    }
    check(&db, &model, keys);
    assert!(!blob_files(dir.path()).is_empty(), "no blob file written");
    db.compact().unwrap();
    db.wait_for_background().unwrap();
    check(&db, &model, keys);
    let stats = db.verify_checksums().unwrap();
    assert!(stats.tables > 0);
    db.close().unwrap();
    let db = Db::open_with(dir.path(), options()).unwrap();
    check(&db, &model, keys);
}

#[test]
fn a_snapshot_pins_a_blob_file_that_compaction_made_obsolete() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path(), options()).unwrap();
    for i in 0..50 {
        db.put(key(i), value(i, 0, 500)).unwrap();
    }
    db.flush().unwrap();
    let first = blob_files(dir.path());
    assert_eq!(first.len(), 1, "{first:?}");
    let snapshot = db.snapshot();
    for i in 0..50 {
        db.put(key(i), value(i, 1, 500)).unwrap();
    }
    db.flush().unwrap();
    db.compact().unwrap();
    db.wait_for_background().unwrap();
    // Every value of the first file was overwritten and compacted away, but
    // the snapshot still reads them there.
    assert!(blob_files(dir.path()).contains(&first[0]));
    for i in 0..50 {
        assert_eq!(snapshot.get(key(i)).unwrap().unwrap(), value(i, 0, 500));
        assert_eq!(db.get(key(i)).unwrap().unwrap(), value(i, 1, 500));
    }
    drop(snapshot);
    // A compaction moved the pointers of the second file's values, so only
    // the first file lost every table that pointed into it.
    db.put(b"zz", b"tail").unwrap();
    db.flush().unwrap();
    db.compact().unwrap();
    db.wait_for_background().unwrap();
    assert!(
        !blob_files(dir.path()).contains(&first[0]),
        "{:?}",
        blob_files(dir.path())
    );
    for i in 0..50 {
        assert_eq!(db.get(key(i)).unwrap().unwrap(), value(i, 1, 500));
    }
}

#[test]
fn a_damaged_blob_file_fails_its_own_keys_only() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path(), options()).unwrap();
    for i in 0..20 {
        db.put(key(i), value(i, 0, 400)).unwrap();
    }
    db.flush().unwrap();
    let damaged = blob_files(dir.path());
    for i in 20..40 {
        db.put(key(i), value(i, 0, 400)).unwrap();
    }
    db.put(b"small", b"inline").unwrap();
    db.flush().unwrap();
    db.close().unwrap();
    // Flip a byte inside the sixth value of the first file: a 20-byte
    // header, then records of 8 + 8 (key) + 400 (value) + 4 bytes.
    let path = dir.path().join(&damaged[0]);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[20 + 5 * 420 + 16 + 100] ^= 0x20;
    std::fs::write(&path, &bytes).unwrap();
    let db = Db::open_with(dir.path(), options()).unwrap();
    let mut failed = 0;
    for i in 0..20 {
        match db.get(key(i)) {
            Ok(v) => assert_eq!(v.unwrap(), value(i, 0, 400), "a wrong value"),
            Err(e) => {
                assert!(e.is_corruption(), "{e}");
                failed += 1;
            }
        }
    }
    assert_eq!(failed, 1, "one value damaged");
    for i in 20..40 {
        assert_eq!(db.get(key(i)).unwrap().unwrap(), value(i, 0, 400));
    }
    assert_eq!(db.get(b"small").unwrap().unwrap(), &b"inline"[..]);
    // A scan over the damaged value is an error, not a wrong value.
    assert!(db.iter().any(|r| r.is_err()));
    assert!(db.verify_checksums().is_err());
}

#[test]
fn transactions_and_compare_and_swap_see_separated_values() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path(), options()).unwrap();
    let big = value(1, 0, 1000);
    db.put(key(1), &big).unwrap();
    db.flush().unwrap();
    assert_eq!(blob_files(dir.path()).len(), 1);
    let mut txn = db.transaction();
    assert_eq!(txn.get(key(1)).unwrap().unwrap(), big);
    let bigger = value(1, 1, 3000);
    txn.put(key(1), &bigger).unwrap();
    txn.commit().unwrap();
    db.flush().unwrap();
    let swapped = db
        .compare_and_swap(key(1), Some(&bigger), Some(b"short"))
        .unwrap();
    assert!(matches!(swapped, CompareAndSwap::Swapped), "{swapped:?}");
    let mismatch = db
        .compare_and_swap(key(1), Some(&bigger), Some(b"other"))
        .unwrap();
    assert!(matches!(mismatch, CompareAndSwap::Mismatch { .. }));
    assert_eq!(db.get(key(1)).unwrap().unwrap(), &b"short"[..]);
}

#[test]
fn without_a_threshold_no_blob_file_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path(), options().blob_threshold(None)).unwrap();
    for i in 0..100 {
        db.put(key(i), value(i, 0, 5000)).unwrap();
    }
    db.flush().unwrap();
    db.compact().unwrap();
    assert!(blob_files(dir.path()).is_empty());
    for i in 0..100 {
        assert_eq!(db.get(key(i)).unwrap().unwrap(), value(i, 0, 5000));
    }
}

/// Four flushes of distinct keys, then a full compaction: the blob files
/// the flushes wrote, by name, and whether each still exists after.
fn files_kept_by_compaction(cutoff: f64) -> (Vec<String>, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let opts = options()
        .blob_gc_age_cutoff(cutoff)
        .level0_quiet_trigger(100);
    let db = Db::open_with(dir.path(), opts).unwrap();
    for part in 0..4u64 {
        for i in part * 25..(part + 1) * 25 {
            db.put(key(i), value(i, part, 600)).unwrap();
        }
        db.flush().unwrap();
    }
    let before = blob_files(dir.path());
    db.compact().unwrap();
    db.wait_for_background().unwrap();
    for part in 0..4u64 {
        for i in part * 25..(part + 1) * 25 {
            assert_eq!(db.get(key(i)).unwrap().unwrap(), value(i, part, 600));
        }
    }
    db.verify_checksums().unwrap();
    (before, blob_files(dir.path()))
}

#[test]
fn garbage_collection_rewrites_the_oldest_blob_files_values() {
    // Without collection a compaction moves pointers: every file stays.
    let (before, after) = files_kept_by_compaction(0.0);
    assert_eq!(before.len(), 4, "{before:?}");
    assert!(
        before.iter().all(|f| after.contains(f)),
        "{before:?} {after:?}"
    );
    // With the oldest half collected (of the files each compaction step
    // meets), their values moved to the compactions' own files and the two
    // oldest files are gone; the newest kept its values where they were.
    let (before, after) = files_kept_by_compaction(0.5);
    assert!(
        !after.contains(&before[0]) && !after.contains(&before[1]),
        "{before:?} {after:?}"
    );
    assert!(after.contains(&before[3]), "{before:?} {after:?}");
    // All of them collected: every value now lies in new files.
    let (before, after) = files_kept_by_compaction(1.0);
    assert!(
        before.iter().all(|f| !after.contains(f)),
        "{before:?} {after:?}"
    );
    assert!(!after.is_empty());
}

#[test]
fn checkpoints_and_backups_carry_blob_files() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path(), options()).unwrap();
    for i in 0..30 {
        db.put(key(i), value(i, 0, 700)).unwrap();
    }
    db.flush().unwrap();
    let out = tempfile::tempdir().unwrap();
    let checkpoint = out.path().join("checkpoint");
    db.checkpoint(&checkpoint).unwrap();
    assert_eq!(blob_files(&checkpoint), blob_files(dir.path()));
    let backups = siftdb::backup::BackupEngine::open(out.path().join("backups")).unwrap();
    let first = backups.create(&db).unwrap();
    db.put(b"small", b"v").unwrap();
    let second = backups.create(&db).unwrap();
    // The blob file was stored once: the second backup copied only what
    // changed (its manifest and log).
    let blob_bytes: u64 = first
        .files
        .iter()
        .filter(|f| f.name.ends_with(".blob"))
        .map(|f| f.size)
        .sum();
    assert!(blob_bytes > 30 * 700, "{first:?}");
    assert!(second.new_bytes < blob_bytes, "{second:?}");
    drop(db);
    let restored = out.path().join("restored");
    backups.restore(second.id, &restored).unwrap();
    for opened in [checkpoint, restored] {
        let db = Db::open_with(&opened, options()).unwrap();
        for i in 0..30 {
            assert_eq!(db.get(key(i)).unwrap().unwrap(), value(i, 0, 700));
        }
        db.verify_checksums().unwrap();
    }
}

#[test]
fn an_open_removes_blob_files_no_table_points_into() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path(), options()).unwrap();
    for i in 0..10 {
        db.put(key(i), value(i, 0, 300)).unwrap();
    }
    db.flush().unwrap();
    db.close().unwrap();
    let live = blob_files(dir.path());
    // What a flush cut short by a crash leaves: a blob file whose table
    // never reached the manifest.
    std::fs::write(dir.path().join("000999.blob"), b"partial").unwrap();
    let db = Db::open_with(dir.path(), options()).unwrap();
    assert_eq!(blob_files(dir.path()), live);
    for i in 0..10 {
        assert_eq!(db.get(key(i)).unwrap().unwrap(), value(i, 0, 300));
    }
}

/// Appends operands to the value, each after a `+`.
struct Append;

impl siftdb::MergeOperator for Append {
    fn merge(&self, _key: &[u8], existing: Option<&[u8]>, operands: &[&[u8]]) -> Option<Vec<u8>> {
        let mut out = existing.unwrap_or_default().to_vec();
        for operand in operands {
            out.push(b'+');
            out.extend_from_slice(operand);
        }
        Some(out)
    }
}

/// Removes values that end in `x`; shows the values it was asked about.
struct DropX(std::sync::Mutex<Vec<Vec<u8>>>);

impl siftdb::CompactionFilter for DropX {
    fn filter(&self, _level: usize, _key: &[u8], value: &[u8]) -> siftdb::CompactionDecision {
        self.0.lock().unwrap().push(value.to_vec());
        if value.ends_with(b"x") {
            siftdb::CompactionDecision::Remove
        } else {
            siftdb::CompactionDecision::Keep
        }
    }
}

#[test]
fn merges_and_compaction_filters_see_separated_values() {
    let dir = tempfile::tempdir().unwrap();
    let opts = options().merge_operator(std::sync::Arc::new(Append));
    let db = Db::open_with(dir.path(), opts).unwrap();
    let base = value(1, 0, 500);
    db.put(key(1), &base).unwrap();
    db.flush().unwrap();
    db.merge(key(1), b"tail").unwrap();
    db.flush().unwrap();
    db.compact().unwrap();
    let want = [&base[..], b"+tail"].concat();
    assert_eq!(db.get(key(1)).unwrap().unwrap(), want);
    drop(db);

    let dir = tempfile::tempdir().unwrap();
    let filter = std::sync::Arc::new(DropX(std::sync::Mutex::new(Vec::new())));
    let db = Db::open_with(dir.path(), options().compaction_filter(filter.clone())).unwrap();
    let mut gone = value(2, 0, 500);
    gone.push(b'x');
    db.put(key(1), &base).unwrap();
    db.put(key(2), &gone).unwrap();
    db.flush().unwrap();
    db.put(b"zz", b"small").unwrap();
    db.flush().unwrap();
    db.compact().unwrap();
    assert!(
        filter.0.lock().unwrap().contains(&gone),
        "the filter saw a pointer"
    );
    assert_eq!(db.get(key(1)).unwrap().unwrap(), base);
    assert_eq!(db.get(key(2)).unwrap(), None);
}
