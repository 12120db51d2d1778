//! A keyspace's own blob threshold (`KeyspaceOptions::blob_threshold`):
//! stored with its settings, so a reopened keyspace keeps it; a keyspace
//! given `None` keeps its values inline while another separates, whatever
//! the database's threshold, and one given a threshold separates when the
//! database does not. Every value reads back either way.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "test code: a failed assumption is a failed test"
)]

use std::path::Path;

use siftdb::{Db, Keyspace, KeyspaceOptions, Options};
use siftdb_testkit::files::files_ending;

const KEYS: u32 = 300;

fn options() -> Options {
    Options::default().memtable_bytes(64 * 1024).block_size(512)
}

/// How many blob files `dir` holds.
fn blob_files(dir: &Path) -> usize {
    files_ending(dir, ".blob").len()
}

fn value(keyspace: &str, i: u32) -> Vec<u8> {
    let mut out = format!("{keyspace}:{i}:").into_bytes();
    out.resize(400, b'v');
    out
}

/// Puts `KEYS` values of 400 bytes into `keyspace` and flushes.
fn fill(db: &Db, keyspace: &Keyspace) {
    for i in 0..KEYS {
        keyspace
            .put(format!("key{i:05}"), value(keyspace.name(), i))
            .unwrap();
    }
    db.flush().unwrap();
}

fn check(keyspace: &Keyspace) {
    for i in 0..KEYS {
        assert_eq!(
            keyspace.get(format!("key{i:05}")).unwrap().as_deref(),
            Some(&value(keyspace.name(), i)[..]),
            "{} key {i}",
            keyspace.name()
        );
    }
    assert_eq!(keyspace.iter().count(), KEYS as usize);
}

#[test]
fn a_keyspace_without_a_threshold_stays_inline_beside_one_that_separates() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open_with(dir.path(), options().blob_threshold(Some(100))).unwrap();
        let inline = db
            .keyspace_with("inline", KeyspaceOptions::new().blob_threshold(None))
            .unwrap();
        fill(&db, &inline);
        assert_eq!(
            blob_files(dir.path()),
            0,
            "a None keyspace wrote a blob file"
        );
        fill(&db, &db.default_keyspace());
        let separated = blob_files(dir.path());
        assert!(separated > 0, "the default keyspace separated nothing");
        check(&inline);
        check(&db.default_keyspace());
    }
    // Reopened, the keyspace keeps its stored None without being told.
    let db = Db::open_with(dir.path(), options().blob_threshold(Some(100))).unwrap();
    let inline = db.keyspace("inline").unwrap();
    check(&inline);
    check(&db.default_keyspace());
    let before = blob_files(dir.path());
    fill(&db, &inline);
    inline.compact().unwrap();
    assert_eq!(
        blob_files(dir.path()),
        before,
        "reopened: a blob file for None"
    );
    check(&inline);
}

#[test]
fn a_keyspace_threshold_separates_when_the_database_does_not() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open_with(dir.path(), options()).unwrap();
        let plain = db.keyspace("plain").unwrap();
        fill(&db, &plain);
        assert_eq!(blob_files(dir.path()), 0);
        let big = db
            .keyspace_with("big", KeyspaceOptions::new().blob_threshold(Some(100)))
            .unwrap();
        fill(&db, &big);
        assert!(blob_files(dir.path()) > 0, "the keyspace separated nothing");
        check(&plain);
        check(&big);
        // A later call that does not name the threshold keeps it.
        db.keyspace_with("big", KeyspaceOptions::new().block_size(1024))
            .unwrap();
    }
    let db = Db::open_with(dir.path(), options()).unwrap();
    let big = db.keyspace("big").unwrap();
    check(&big);
    check(&db.keyspace("plain").unwrap());
    let before = blob_files(dir.path());
    for i in 0..KEYS {
        big.put(format!("more{i:05}"), value("more", i)).unwrap();
    }
    db.flush().unwrap();
    assert!(
        blob_files(dir.path()) > before,
        "reopened: the threshold was lost"
    );
    assert_eq!(
        big.get("more00007").unwrap().as_deref(),
        Some(&value("more", 7)[..])
    );
}

#[test]
fn a_zero_threshold_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path(), options()).unwrap();
    let err = db
        .keyspace_with("zero", KeyspaceOptions::new().blob_threshold(Some(0)))
        .unwrap_err();
    assert!(err.to_string().contains("blob_threshold"), "{err}");
}
