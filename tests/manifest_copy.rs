//! The manifest's second copy: a damaged or missing `MANIFEST` beside an
//! intact `MANIFEST.copy` opens from the copy, reports it
//! (`RecoveryReport::manifest_recovered`), serves every key, and the open
//! writes a fresh manifest (the next open reads it and recovers nothing).
//! With the copy damaged or missing too, or naming a table that is gone,
//! or beside a log cut short, the open is refused as before, naming
//! `siftdb repair`: never a state that may lack an acknowledged write.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use std::collections::BTreeMap;
use std::path::Path;

use siftdb::internals::manifest::read_manifest;
use siftdb::{Db, Options};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

const MANIFEST: &str = "MANIFEST";
const COPY: &str = "MANIFEST.copy";

fn options() -> Options {
    Options::default().block_size(256)
}

/// A closed database: a compacted table, a level-0 table overwriting and
/// deleting some of its keys, and writes left in the log.
fn build(dir: &Path) -> Model {
    let mut model = Model::new();
    let db = Db::open_with(dir, options()).unwrap();
    let put = |db: &Db, model: &mut Model, k: String, v: String| {
        db.put(k.as_bytes(), v.as_bytes()).unwrap();
        model.insert(k.into_bytes(), v.into_bytes());
    };
    for i in 0..100 {
        put(&db, &mut model, format!("k{i:03}"), format!("v1-{i}"));
    }
    db.compact().unwrap();
    for i in (0..100).step_by(3) {
        put(&db, &mut model, format!("k{i:03}"), format!("v2-{i}"));
    }
    for i in (1..100).step_by(5) {
        db.delete(format!("k{i:03}").as_bytes()).unwrap();
        model.remove(format!("k{i:03}").as_bytes());
    }
    db.flush().unwrap();
    for i in 90..120 {
        put(&db, &mut model, format!("k{i:03}"), format!("v3-{i}"));
    }
    drop(db);
    model
}

fn check_reads(db: &Db, model: &Model) {
    for i in 0..130 {
        let k = format!("k{i:03}").into_bytes();
        assert_eq!(
            db.get(&k).unwrap().as_deref(),
            model.get(&k).map(Vec::as_slice),
            "{}",
            String::from_utf8_lossy(&k)
        );
    }
    let scanned: Model = db
        .iter()
        .map(|item| {
            let (k, v) = item.unwrap();
            (k.to_vec(), v.to_vec())
        })
        .collect();
    assert_eq!(&scanned, model);
}

fn flip(dir: &Path, name: &str, offset: usize) {
    let path = dir.join(name);
    let mut bytes = std::fs::read(&path).unwrap();
    let at = offset.min(bytes.len() - 1);
    bytes[at] ^= 0x41;
    std::fs::write(&path, bytes).unwrap();
}

/// Opens a database whose `MANIFEST` was damaged (as `damage` did): it must
/// recover from the copy, report `problem`, read whole, and leave a sound
/// manifest that the next open reads.
fn opens_from_copy(damage: impl Fn(&Path), problem: &str) {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("db");
    let model = build(&dir);
    damage(&dir);
    let db = Db::open_with(&dir, options()).unwrap();
    let recovered = db
        .recovery_report()
        .manifest_recovered
        .clone()
        .expect("the recovery is reported");
    assert_eq!(recovered.damaged, MANIFEST);
    assert_eq!(recovered.recovered_from, COPY);
    assert!(
        recovered.problem.contains(problem),
        "{problem:?} not in {:?}",
        recovered.problem
    );
    check_reads(&db, &model);
    drop(db);
    // A fresh manifest, the same bytes as its copy.
    let fs = siftdb::internals::fs::OsFileSystem;
    assert!(read_manifest(&fs, &dir).unwrap().is_some());
    assert_eq!(
        std::fs::read(dir.join(MANIFEST)).unwrap(),
        std::fs::read(dir.join(COPY)).unwrap()
    );
    let db = Db::open_with(&dir, options()).unwrap();
    assert_eq!(db.recovery_report().manifest_recovered, None);
    check_reads(&db, &model);
}

/// The open must be refused as corruption naming `siftdb repair` and `what`.
fn refused(dir: &Path, what: &str) {
    let err = match Db::open_with(dir, options()) {
        Ok(_) => panic!("opened"),
        Err(e) => e,
    };
    assert!(err.is_corruption(), "{err}");
    let message = err.to_string();
    assert!(message.contains("siftdb repair"), "{message}");
    assert!(message.contains(what), "{what:?} not in {message}");
}

#[test]
fn a_flipped_manifest_byte_opens_from_the_copy() {
    for offset in [0, 4, 9, 30, 60, 100, usize::MAX] {
        opens_from_copy(|dir| flip(dir, MANIFEST, offset), "checksum");
    }
}

#[test]
fn a_missing_or_emptied_manifest_opens_from_the_copy() {
    opens_from_copy(
        |dir| std::fs::remove_file(dir.join(MANIFEST)).unwrap(),
        "missing",
    );
    opens_from_copy(
        |dir| std::fs::write(dir.join(MANIFEST), b"").unwrap(),
        "manifest",
    );
}

#[test]
fn a_read_only_open_recovers_from_the_copy_and_writes_nothing() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("db");
    let model = build(&dir);
    flip(&dir, MANIFEST, 20);
    let damaged = std::fs::read(dir.join(MANIFEST)).unwrap();
    let db = Db::open_with(&dir, options().read_only(true)).unwrap();
    assert!(db.recovery_report().manifest_recovered.is_some());
    check_reads(&db, &model);
    drop(db);
    assert_eq!(std::fs::read(dir.join(MANIFEST)).unwrap(), damaged);
}

#[test]
fn a_damaged_or_missing_copy_beside_a_damaged_manifest_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("db");
    build(&dir);
    flip(&dir, MANIFEST, 12);
    flip(&dir, COPY, 40);
    refused(&dir, "its copy cannot be read either");
    std::fs::remove_file(dir.join(MANIFEST)).unwrap();
    refused(&dir, "its copy cannot be read either");
    // Without a copy: the manifest's own refusal, as before copies.
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("db");
    build(&dir);
    flip(&dir, MANIFEST, 12);
    std::fs::remove_file(dir.join(COPY)).unwrap();
    refused(&dir, "MANIFEST");
    // A damaged copy beside an intact manifest is rewritten by the open.
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("db");
    let model = build(&dir);
    flip(&dir, COPY, 12);
    let db = Db::open_with(&dir, options()).unwrap();
    assert_eq!(db.recovery_report().manifest_recovered, None);
    check_reads(&db, &model);
    drop(db);
    assert_eq!(
        std::fs::read(dir.join(MANIFEST)).unwrap(),
        std::fs::read(dir.join(COPY)).unwrap()
    );
}

#[test]
fn a_copy_that_cannot_vouch_for_everything_is_refused() {
    // A table the copy names is gone: the copy may not be the state.
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("db");
    build(&dir);
    flip(&dir, MANIFEST, 12);
    let table = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "sst"))
        .unwrap();
    std::fs::remove_file(&table).unwrap();
    refused(&dir, "cannot be opened");
    // The log the clean close recorded was cut short: acknowledged writes
    // may be lost.
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("db");
    build(&dir);
    flip(&dir, MANIFEST, 12);
    let log = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "wal"))
        .unwrap();
    let bytes = std::fs::read(&log).unwrap();
    std::fs::write(&log, &bytes[..bytes.len() - 20]).unwrap();
    refused(&dir, "cut short");
}
