//! Bulk load: files written by `TableWriter` and added by `Db::ingest`,
//! checked against a `BTreeMap` model — into an empty database (linked at
//! the deepest level), over tables and over a memtable (newer than every
//! write), with a snapshot taken before (which does not see them), across
//! a reopen and a compaction; refused files (unsorted keys, a flipped byte,
//! overlapping each other) leave the database unchanged.
#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions: a failed assumption is a failed test"
)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use bytes::Bytes;
use siftdb::{Db, IngestOptions, Options, TableWriter};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn options() -> Options {
    Options::default()
        .memtable_bytes(32 << 10)
        .table_target_bytes(64 << 10)
}

fn key(i: u64) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

/// Writes keys `range` (step `step`) to `path`: every 5th a delete, the
/// rest `tag`-ed values; applies the same to `model`.
fn write_file(path: &Path, range: std::ops::Range<u64>, step: u64, tag: &str, model: &mut Model) {
    let mut writer = TableWriter::create(path, &options()).unwrap();
    for i in range.step_by(usize::try_from(step).unwrap()) {
        if i % 5 == 0 {
            writer.delete(key(i)).unwrap();
            model.remove(&key(i));
        } else {
            let value = format!("{tag}-{i}").into_bytes();
            writer.put(key(i), &value).unwrap();
            model.insert(key(i), value);
        }
    }
    writer.finish().unwrap();
}

fn contents(db: &Db) -> Model {
    db.iter()
        .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())))
        .collect::<siftdb::Result<_>>()
        .unwrap()
}

fn snapshot_contents(snapshot: &siftdb::Snapshot) -> Model {
    snapshot
        .iter()
        .map(|e| e.map(|(k, v): (Bytes, Bytes)| (k.to_vec(), v.to_vec())))
        .collect::<siftdb::Result<_>>()
        .unwrap()
}

fn file(dir: &Path, name: &str) -> PathBuf {
    dir.join(name)
}

#[test]
fn files_load_into_an_empty_database_and_over_older_writes() {
    let dir = tempfile::tempdir().unwrap();
    let db_dir = dir.path().join("db");
    let db = Db::open_with(&db_dir, options()).unwrap();
    let mut model = Model::new();
    // Into an empty database: copied to the deepest level, the original kept.
    let first = file(dir.path(), "a.sst");
    write_file(&first, 0..5000, 1, "a", &mut model);
    db.ingest(&[&first], IngestOptions::new()).unwrap();
    assert!(first.exists());
    assert_eq!(contents(&db), model);
    let stats = db.stats();
    assert_eq!(stats.level_tables.last().copied(), Some(1), "{stats:?}");
    // The ingest's one sequence number (its entries stay at 0).
    assert_eq!(stats.last_sequence, 1);

    // Writes over part of it, flushed, and some left in the memtable.
    for i in (1000..3000).step_by(3) {
        let value = format!("put-{i}").into_bytes();
        db.put(key(i), &value).unwrap();
        model.insert(key(i), value);
    }
    db.flush().unwrap();
    for i in (2000..2600).step_by(7) {
        db.delete(key(i)).unwrap();
        model.remove(&key(i));
    }
    let before = model.clone();
    let snapshot = db.snapshot();
    // Two files at once: one over the memtable and the tables, one past
    // everything, moved in.
    let (over, past) = (file(dir.path(), "b.sst"), file(dir.path(), "c.sst"));
    write_file(&over, 1500..2700, 2, "b", &mut model);
    write_file(&past, 9000..9500, 1, "c", &mut model);
    db.ingest(&[&past, &over], IngestOptions::new().move_files(true))
        .unwrap();
    assert!(!past.exists() && !over.exists());
    assert_eq!(contents(&db), model);
    for (k, v) in &model {
        assert_eq!(db.get(k).unwrap().as_deref(), Some(v.as_slice()));
    }
    assert_eq!(
        snapshot_contents(&snapshot),
        before,
        "the snapshot saw the ingest"
    );
    drop(snapshot);
    // Across a reopen and a full compaction.
    drop(db);
    let db = Db::open_with(&db_dir, options()).unwrap();
    assert_eq!(contents(&db), model);
    db.compact().unwrap();
    assert_eq!(contents(&db), model);
    // Writes after the ingest are newer than it.
    db.put(key(1502), "later").unwrap();
    model.insert(key(1502), b"later".to_vec());
    assert_eq!(contents(&db), model);
}

#[test]
fn refused_files_leave_the_database_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path().join("db"), options()).unwrap();
    let mut model = Model::new();
    for i in 0..500 {
        db.put(key(i), "v").unwrap();
        model.insert(key(i), b"v".to_vec());
    }
    db.flush().unwrap();
    let tables = db.stats().table_count;

    // Unsorted or repeated keys: refused by the writer.
    let mut writer = TableWriter::create(file(dir.path(), "u.sst"), &options()).unwrap();
    writer.put("b", "1").unwrap();
    assert!(writer.put("a", "2").is_err());
    assert!(writer.put("b", "2").is_err());
    assert!(writer.delete("a").is_err());
    writer.put("c", "3").unwrap();
    writer.finish().unwrap();

    // A flipped byte: refused by the ingest's checks.
    let damaged = file(dir.path(), "d.sst");
    write_file(&damaged, 100..2000, 1, "d", &mut Model::new());
    let mut bytes = std::fs::read(&damaged).unwrap();
    let at = bytes.len() / 3;
    if let Some(b) = bytes.get_mut(at) {
        *b ^= 0x40;
    }
    std::fs::write(&damaged, &bytes).unwrap();
    // A good file beside it is not added either.
    let good = file(dir.path(), "g.sst");
    write_file(&good, 3000..3100, 1, "g", &mut Model::new());
    assert!(db.ingest(&[&good, &damaged], IngestOptions::new()).is_err());

    // Files overlapping each other.
    let (x, y) = (file(dir.path(), "x.sst"), file(dir.path(), "y.sst"));
    write_file(&x, 4000..4100, 1, "x", &mut Model::new());
    write_file(&y, 4050..4200, 1, "y", &mut Model::new());
    assert!(db.ingest(&[&x, &y], IngestOptions::new()).is_err());

    // Not a table at all.
    let junk = file(dir.path(), "junk.sst");
    std::fs::write(&junk, b"not a table").unwrap();
    assert!(db.ingest(&[&junk], IngestOptions::new()).is_err());

    assert_eq!(db.stats().table_count, tables);
    assert_eq!(contents(&db), model);
    let names: Vec<_> = std::fs::read_dir(dir.path().join("db"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".sst"))
        .collect();
    assert_eq!(names.len(), tables, "{names:?}");
    // The good file alone goes in.
    db.ingest(&[&good], IngestOptions::new()).unwrap();
    assert_eq!(db.stats().table_count, tables + 1);
}

#[test]
fn an_ingest_beside_concurrent_writes_keeps_both() {
    let dir = tempfile::tempdir().unwrap();
    let db = std::sync::Arc::new(Db::open_with(dir.path().join("db"), options()).unwrap());
    let writer = {
        let db = std::sync::Arc::clone(&db);
        std::thread::spawn(move || {
            for i in 0..3000u64 {
                db.put(format!("w{i:06}"), "w").unwrap();
            }
        })
    };
    let mut model = Model::new();
    for round in 0..5u64 {
        let path = file(dir.path(), &format!("r{round}.sst"));
        write_file(&path, round * 1000..round * 1000 + 800, 1, "r", &mut model);
        let snapshot = db.snapshot();
        db.ingest(&[&path], IngestOptions::new()).unwrap();
        assert_eq!(snapshot.get(key(round * 1000 + 1)).unwrap(), None);
        assert!(db.get(key(round * 1000 + 1)).unwrap().is_some());
    }
    writer.join().unwrap();
    let all = contents(&db);
    assert_eq!(all.len(), model.len() + 3000);
    for (k, v) in &model {
        assert_eq!(all.get(k), Some(v));
    }
}

#[test]
fn files_load_into_a_keyspace_of_their_own() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path().join("db"), options()).unwrap();
    let events = db.keyspace("events").unwrap();
    let mut model = Model::new();
    let path = file(dir.path(), "e.sst");
    write_file(&path, 0..1000, 1, "e", &mut model);
    events.ingest(&[&path], IngestOptions::new()).unwrap();
    assert!(path.exists());
    let got: Model = events
        .iter()
        .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())))
        .collect::<siftdb::Result<_>>()
        .unwrap();
    assert_eq!(got, model);
    assert_eq!(contents(&db), Model::new(), "the default keyspace got keys");
}

/// Whether a table file of `db_dir` holds the bytes of `source`.
fn copied_as_is(db_dir: &Path, source: &Path) -> bool {
    let bytes = std::fs::read(source).unwrap();
    std::fs::read_dir(db_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "sst"))
        .any(|p| std::fs::read(p).unwrap() == bytes)
}

/// A keyspace's own `table_writer` file is placed as it is (a copy of its
/// bytes), records the keyspace (it survives a repair that rebuilds the
/// manifest from the tables), and holds its keys; a `TableWriter::create`
/// file into the same keyspace is rewritten, and a keyspace's file into
/// another keyspace is rewritten too.
#[test]
fn a_keyspaces_own_table_writer_file_is_placed_without_a_rewrite() {
    let dir = tempfile::tempdir().unwrap();
    let db_dir = dir.path().join("db");
    let db = Db::open_with(&db_dir, options()).unwrap();
    let events = db.keyspace("events").unwrap();
    let other = db.keyspace("other").unwrap();
    let write = |writer: &mut TableWriter, prefix: &str| {
        for i in 0..500u32 {
            writer
                .put(format!("{prefix}{i:04}"), format!("v{i}"))
                .unwrap();
        }
    };
    let own = dir.path().join("own.sst");
    let mut writer = events.table_writer(&own).unwrap();
    write(&mut writer, "a");
    writer.finish().unwrap();
    events.ingest(&[&own], IngestOptions::new()).unwrap();
    assert!(copied_as_is(&db_dir, &own), "copied as it is");

    let plain = dir.path().join("plain.sst");
    let mut writer = TableWriter::create(&plain, &options()).unwrap();
    write(&mut writer, "b");
    writer.finish().unwrap();
    events.ingest(&[&plain], IngestOptions::new()).unwrap();
    assert!(!copied_as_is(&db_dir, &plain), "rewritten");

    let foreign = dir.path().join("foreign.sst");
    let mut writer = events.table_writer(&foreign).unwrap();
    write(&mut writer, "c");
    writer.finish().unwrap();
    other.ingest(&[&foreign], IngestOptions::new()).unwrap();
    assert!(!copied_as_is(&db_dir, &foreign), "rewritten");

    assert_eq!(events.iter().count(), 1000);
    assert_eq!(other.iter().count(), 500);
    assert_eq!(events.get("a0007").unwrap().as_deref(), Some(&b"v7"[..]));
    assert_eq!(other.get("c0499").unwrap().as_deref(), Some(&b"v499"[..]));
    assert_eq!(contents(&db), Model::new(), "the default keyspace got keys");
    drop((events, other)); // the handles hold the database open
    db.close().unwrap();

    // Every table records its keyspace: a repair that rebuilds the manifest
    // from the tables alone puts each key back in its own keyspace.
    std::fs::remove_file(db_dir.join("MANIFEST")).unwrap();
    siftdb::repair(&db_dir, siftdb::RepairOptions::default()).unwrap();
    let db = Db::open_with(&db_dir, options()).unwrap();
    assert_eq!(db.keyspace("events").unwrap().iter().count(), 1000);
    assert_eq!(db.keyspace("other").unwrap().iter().count(), 500);
    assert_eq!(contents(&db), Model::new());
}

/// Set (to the database directory) in the child process of the kill test.
const CHILD_ENV: &str = "SIFTDB_INGEST_CRASH_CHILD";
const KEYS_PER_FILE: u64 = 2000;

fn round_key(round: u64, i: u64) -> String {
    format!("r{round:05}-{i:05}")
}

/// The body of the child process (does nothing in the parent): ingests a
/// file per round (every other round over a key written just before, so
/// both the linked and the rewritten paths run) and prints each round once
/// its ingest returned, until killed.
#[test]
fn child_process() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let dir = Path::new(&dir);
    let db = Db::open_with(dir.join("db"), options()).unwrap();
    let first = (0..)
        .find(|r| db.get(round_key(*r, 1)).unwrap().is_none())
        .unwrap();
    for round in first.. {
        let path = dir.join(format!("f{round}.sst"));
        let mut writer = TableWriter::create(&path, &options()).unwrap();
        for i in 0..KEYS_PER_FILE {
            writer
                .put(round_key(round, i), format!("file-{round}"))
                .unwrap();
        }
        writer.finish().unwrap();
        if round % 2 == 0 {
            db.put(round_key(round, 0), "put").unwrap();
        }
        db.ingest(&[&path], IngestOptions::new().move_files(round % 3 == 0))
            .unwrap();
        println!("ingested {round}");
    }
}

#[test]
fn a_killed_ingest_is_all_or_nothing() {
    use std::io::{BufRead, BufReader};

    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut rng = siftdb_testkit::SplitMix64::new(0x696e_6765_7374);
    let mut acked: Option<u64> = None;
    for _ in 0..5 {
        let mut child =
            siftdb_testkit::files::spawn_test_child("child_process", CHILD_ENV, dir.path());
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let mut lines = stdout.lines();
        // A few ingests, then a kill at a random moment.
        let mut seen = 0;
        while seen < 3 {
            let line = lines.next().unwrap().unwrap();
            if let Some(round) = line.strip_prefix("ingested ") {
                acked = Some(round.parse().unwrap());
                seen += 1;
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(rng.next() % 20));
        child.kill().unwrap();
        for line in lines.map_while(Result::ok) {
            if let Some(round) = line.strip_prefix("ingested ") {
                acked = Some(round.parse().unwrap());
            }
        }
        child.wait().unwrap();
        let db = Db::open_with(dir.path().join("db"), options()).unwrap();
        let last = acked.unwrap();
        for round in 0..=last + 1 {
            let from_file = (0..KEYS_PER_FILE)
                .filter(|i| {
                    db.get(round_key(round, *i)).unwrap().as_deref()
                        == Some(format!("file-{round}").as_bytes())
                })
                .count() as u64;
            assert!(
                from_file == 0 || from_file == KEYS_PER_FILE,
                "round {round}: {from_file} of {KEYS_PER_FILE} keys ingested"
            );
            if round <= last {
                assert_eq!(from_file, KEYS_PER_FILE, "acknowledged round {round} lost");
            }
        }
    }
}
