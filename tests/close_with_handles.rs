//! `Db::close` with handles still open: the handles that hold the database
//! (a `Keyspace`, a `Snapshot`, a `Transaction`, a `KeyspaceExport`) keep
//! its directory locked until they drop, and `close` says so — an error
//! naming them — instead of `Ok` with the directory still locked. Once they
//! drop, the database reopens. Also: no error's text repeats its own
//! prefix ("invalid argument: invalid argument: ...").
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use siftdb::{Db, Error, WriteBatch};

#[test]
fn close_with_a_live_keyspace_and_snapshot_names_them_and_the_lock_goes_with_them() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path()).unwrap();
    db.put(b"k", b"v").unwrap();
    let events = db.keyspace("events").unwrap();
    events.put(b"e", b"1").unwrap();
    let snapshot = db.snapshot();

    let err = db
        .close()
        .expect_err("close with a Keyspace and a Snapshot alive");
    let text = err.to_string();
    assert!(
        text.contains("1 Keyspace") && text.contains("1 Snapshot"),
        "{text}"
    );
    // What the error says: the directory stays locked while they live
    // (their reads go on).
    assert!(matches!(Db::open(dir.path()), Err(Error::Locked(_))));
    assert_eq!(snapshot.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
    assert_eq!(events.get(b"e").unwrap().as_deref(), Some(&b"1"[..]));

    drop(events);
    drop(snapshot);
    let db = Db::open(dir.path()).unwrap();
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
    assert_eq!(
        db.keyspace("events").unwrap().get(b"e").unwrap().as_deref(),
        Some(&b"1"[..])
    );
    db.close().unwrap();
    Db::open(dir.path()).unwrap().close().unwrap();
}

#[test]
fn close_with_a_live_transaction_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path()).unwrap();
    let txn = db.transaction();
    let text = db
        .close()
        .expect_err("close with a Transaction alive")
        .to_string();
    assert!(text.contains("1 Transaction"), "{text}");
    // The transaction's own keyspace and snapshot are not counted apart.
    assert!(
        !text.contains("Keyspace") && !text.contains("Snapshot"),
        "{text}"
    );
    drop(txn);
    Db::open(dir.path()).unwrap().close().unwrap();
}

#[test]
fn close_with_only_an_iterator_alive_releases_the_lock() {
    // An iterator holds its tables, not the database.
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path()).unwrap();
    db.put(b"k", b"v").unwrap();
    let mut iter = db.iter();
    db.close().unwrap();
    let again = Db::open(dir.path()).unwrap();
    assert_eq!(&iter.next().unwrap().unwrap().0[..], b"k");
    again.close().unwrap();
}

#[test]
fn a_reversed_range_in_a_batch_is_invalid_argument_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path()).unwrap();
    let mut batch = WriteBatch::new();
    batch.delete_range(b"z".to_vec()..b"a".to_vec());
    let text = db.write(batch).unwrap_err().to_string();
    assert!(text.starts_with("invalid argument: range start"), "{text}");
    assert_eq!(text.matches("invalid argument").count(), 1, "{text}");
    let text = db
        .delete_range(b"z".to_vec()..b"a".to_vec())
        .unwrap_err()
        .to_string();
    assert_eq!(text.matches("invalid argument").count(), 1, "{text}");
}
