//! A damaged table does not take the database down: `open` succeeds, the
//! reads that need the table fail with `Corruption` naming it, every other
//! read is served right, writes, flushes and compactions go on around it
//! (never through it), and when compaction cannot avoid it any more writes
//! are refused with an error naming it — never a hang. With
//! `Options::paranoid_checks` the open is refused instead, for a damaged
//! data block too.
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
use std::sync::mpsc;
use std::time::Duration;

use siftdb::internals::filename::table_file_name;
use siftdb::internals::fs::OsFileSystem;
use siftdb::internals::key::user_key_of;
use siftdb::internals::manifest::{read_manifest, TableRecord};
use siftdb::internals::table::Table;
use siftdb::{Db, Error, Options};
use siftdb_testkit::files::flip_byte;

/// Far longer than anything here takes; only a hang runs into it.
const HANG: Duration = Duration::from_secs(120);

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn options() -> Options {
    Options::default()
        .block_size(512)
        .memtable_bytes(16 << 10)
        .table_target_bytes(8 << 10)
        .level1_bytes(1 << 30)
        .level0_compaction_trigger(4)
        .level0_stop_writes(8)
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

fn value(tag: u32, i: u32) -> Vec<u8> {
    format!("value-{tag}-{i}-{}", "v".repeat(40)).into_bytes()
}

/// 2000 keys compacted into several level-1 tables, then keys 0..100
/// overwritten into a level-0 table.
fn build(dir: &Path) -> Model {
    let mut model = Model::new();
    let db = Db::open_with(dir, options()).unwrap();
    for i in 0..2000 {
        db.put(key(i), value(1, i)).unwrap();
        model.insert(key(i), value(1, i));
    }
    db.compact().unwrap();
    for i in 0..100 {
        db.put(key(i), value(2, i)).unwrap();
        model.insert(key(i), value(2, i));
    }
    db.flush().unwrap();
    model
}

fn tables(dir: &Path) -> Vec<TableRecord> {
    read_manifest(&OsFileSystem, dir).unwrap().unwrap().tables
}

/// A level-1 table whose range lies past the overwritten keys.
fn deeper_table(dir: &Path) -> (TableRecord, PathBuf) {
    let record = tables(dir)
        .into_iter()
        .filter(|t| t.level == 1)
        .find(|t| user_key_of(&t.smallest) > key(200).as_slice())
        .unwrap();
    let path = dir.join(table_file_name(record.file_number));
    (record, path)
}

fn flip(path: &Path, offset: u64) {
    flip_byte(path, offset, 0x21);
}

fn damage_footer(path: &Path) {
    let len = std::fs::metadata(path).unwrap().len();
    flip(path, len - 30);
}

fn in_range(record: &TableRecord, k: &[u8]) -> bool {
    user_key_of(&record.smallest) <= k && k <= user_key_of(&record.largest)
}

fn assert_names(e: &Error, name: &str) {
    assert!(e.is_corruption(), "{e}");
    assert!(e.to_string().contains(name), "{e}");
}

#[test]
fn reads_outside_a_damaged_table_are_served_and_reads_inside_fail_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let model = build(dir.path());
    let (record, path) = deeper_table(dir.path());
    let name = table_file_name(record.file_number);
    damage_footer(&path);

    let db = Db::open_with(dir.path(), options()).unwrap();
    let report = db.recovery_report();
    assert_eq!(report.damaged_tables.len(), 1, "{report:?}");
    assert_eq!(report.damaged_tables[0].0, name);
    assert_eq!(db.stats().damaged_tables, 1);
    let (mut served, mut failed) = (0, 0);
    for (k, v) in &model {
        match db.get(k) {
            Ok(got) => {
                assert!(!in_range(&record, k));
                assert_eq!(got.as_deref(), Some(v.as_slice()));
                served += 1;
            }
            Err(e) => {
                assert!(in_range(&record, k));
                assert_names(&e, &name);
                failed += 1;
            }
        }
    }
    assert!(served > 1500 && failed > 10, "{served} {failed}");
    // Scans that stay clear of it are whole; one that meets it fails there.
    let below: Vec<_> = db
        .range(key(0)..user_key_of(&record.smallest).to_vec())
        .map(|r| r.unwrap().0.to_vec())
        .collect();
    assert_eq!(
        below.len(),
        model
            .range(key(0)..user_key_of(&record.smallest).to_vec())
            .count()
    );
    let err = db.iter().find_map(Result::err).unwrap();
    assert_names(&err, &name);
    let outside: Vec<Vec<u8>> = vec![key(1), key(150)];
    assert_eq!(db.multi_get(&outside).unwrap().len(), 2);
    let inside = vec![key(1), user_key_of(&record.largest).to_vec()];
    assert_names(&db.multi_get(&inside).unwrap_err(), &name);
    // A snapshot sees the same.
    assert_names(
        &db.snapshot()
            .get(user_key_of(&record.smallest))
            .unwrap_err(),
        &name,
    );
    // A full compaction would have to read it.
    assert_names(&db.compact().unwrap_err(), &name);
    drop(db);
    // Its file is never removed: still named, still damaged at the next open.
    assert!(path.exists());
    let db = Db::open_with(dir.path(), options()).unwrap();
    assert_eq!(db.recovery_report().damaged_tables.len(), 1);
}

#[test]
fn writes_flushes_and_compactions_go_on_around_a_damaged_deeper_table() {
    let dir = tempfile::tempdir().unwrap();
    let mut model = build(dir.path());
    let (record, path) = deeper_table(dir.path());
    damage_footer(&path);
    let db = Db::open_with(dir.path(), options()).unwrap();
    let (done_tx, done_rx) = mpsc::channel();
    let writer = std::thread::spawn(move || {
        // Keys below the damaged range, many times over: flushes and
        // level-0 compactions into level 1 (beside the damaged table).
        let mut model_updates = Vec::new();
        for round in 3..13 {
            for i in 0..150 {
                db.put(key(i), value(round, i)).unwrap();
                model_updates.push((key(i), value(round, i)));
            }
            db.flush().unwrap();
        }
        db.wait_for_background().unwrap();
        let _ = done_tx.send(());
        (db, model_updates)
    });
    done_rx.recv_timeout(HANG).expect("writes hung");
    let (db, updates) = writer.join().unwrap();
    model.extend(updates);
    let stats = db.stats();
    assert!(stats.compactions > 0, "{stats:?}");
    assert_eq!(stats.damaged_tables, 1);
    for (k, v) in &model {
        if !in_range(&record, k) {
            assert_eq!(db.get(k).unwrap().as_deref(), Some(v.as_slice()));
        }
    }
    drop(db);
    let db = Db::open_with(dir.path(), options()).unwrap();
    assert_eq!(db.recovery_report().damaged_tables.len(), 1);
    assert!(tables(dir.path())
        .iter()
        .any(|t| t.file_number == record.file_number));
}

#[test]
fn a_damaged_level0_table_ends_writes_with_an_error_naming_it_not_a_hang() {
    let dir = tempfile::tempdir().unwrap();
    let model = build(dir.path());
    let level0 = tables(dir.path())
        .into_iter()
        .find(|t| t.level == 0)
        .unwrap();
    let name = table_file_name(level0.file_number);
    damage_footer(&dir.path().join(&name));
    let db = Db::open_with(dir.path(), options()).unwrap();
    let (tx, rx) = mpsc::channel();
    let writer = std::thread::spawn(move || {
        // Newer level-0 tables pile up above it (none may move below it)
        // until level 0 is full; then the compaction that must read it fails.
        let mut outcome = None;
        for i in 0..200_000u32 {
            if let Err(e) = db.put(key(3000 + i % 5000), value(9, i)) {
                outcome = Some(e);
                break;
            }
        }
        let _ = tx.send(outcome);
        db
    });
    let outcome = rx.recv_timeout(HANG).expect("writes hung");
    let db = writer.join().unwrap();
    let Some(Error::ReadOnly { cause }) = outcome else {
        panic!("expected ReadOnly, got {outcome:?}");
    };
    assert_names(&cause, &name);
    // Reads outside it are still right.
    for (k, v) in model
        .iter()
        .filter(|(k, _)| !in_range(&level0, k))
        .take(200)
    {
        assert_eq!(db.get(k).unwrap().as_deref(), Some(v.as_slice()));
    }
}

#[test]
fn paranoid_checks_refuse_a_damaged_table_at_open_even_a_data_block() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    let (record, path) = deeper_table(dir.path());
    let name = table_file_name(record.file_number);
    let block = Table::open_path(&path).unwrap().data_block_handles()[2];
    flip(&path, block.offset + 7);
    // A damaged data block: the open finds nothing wrong unless paranoid.
    let db = Db::open_with(dir.path(), options()).unwrap();
    assert!(db.recovery_report().damaged_tables.is_empty());
    drop(db);
    let err = Db::open_with(dir.path(), options().paranoid_checks(true)).unwrap_err();
    assert_names(&err, &name);
    assert!(err.to_string().contains("siftdb repair"), "{err}");
    // A damaged footer refuses a paranoid open too.
    damage_footer(&path);
    let err = Db::open_with(dir.path(), options().paranoid_checks(true)).unwrap_err();
    assert_names(&err, &name);
    let err =
        Db::open_with(dir.path(), options().read_only(true).paranoid_checks(true)).unwrap_err();
    assert_names(&err, &name);
}

#[test]
fn a_missing_table_is_damaged_not_fatal() {
    let dir = tempfile::tempdir().unwrap();
    let model = build(dir.path());
    let (record, path) = deeper_table(dir.path());
    std::fs::remove_file(&path).unwrap();
    let db = Db::open_with(dir.path(), options()).unwrap();
    assert_eq!(db.recovery_report().damaged_tables.len(), 1);
    assert!(db.recovery_report().damaged_tables[0].1.contains("missing"));
    for (k, v) in &model {
        match db.get(k) {
            Ok(got) => assert_eq!(got.as_deref(), Some(v.as_slice())),
            Err(e) => {
                assert!(in_range(&record, k));
                assert_names(&e, &table_file_name(record.file_number));
            }
        }
    }
}
