//! `Options::create_if_missing` and `Options::error_if_exists`: an open
//! that may not create refuses a directory without a database and leaves
//! no trace; one that must create refuses an existing database and leaves
//! it as it was.

use siftdb::{Db, Error, Options};

/// Off, an open of a missing directory or of an empty one fails with
/// `NotADatabase` and creates nothing; on (the default) it creates.
#[test]
fn create_if_missing_off_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let no_create = || Options::default().create_if_missing(false);
    let refused = Db::open_with(&missing, no_create());
    assert!(
        matches!(refused, Err(Error::NotADatabase { .. })),
        "{refused:?}"
    );
    assert!(!missing.exists(), "the directory was created");
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let refused = Db::open_with(&empty, no_create());
    assert!(
        matches!(refused, Err(Error::NotADatabase { .. })),
        "{refused:?}"
    );
    assert_eq!(
        std::fs::read_dir(&empty).unwrap().count(),
        0,
        "a file was left"
    );

    let db = Db::open(&missing).unwrap();
    db.put("k", "v").unwrap();
    db.close().unwrap();
    let db = Db::open_with(&missing, no_create()).unwrap();
    assert_eq!(db.get("k").unwrap().as_deref(), Some(&b"v"[..]));
}

/// On, an open of a directory holding a database fails with
/// `AlreadyExists` and the database is unchanged; a fresh one is created.
#[test]
fn error_if_exists_refuses_an_existing_database() {
    let dir = tempfile::tempdir().unwrap();
    let fresh = || Options::default().error_if_exists(true);
    let db = Db::open_with(dir.path(), fresh()).unwrap();
    db.put("k", "v").unwrap();
    db.close().unwrap();
    let refused = Db::open_with(dir.path(), fresh());
    assert!(
        matches!(refused, Err(Error::AlreadyExists(_))),
        "{refused:?}"
    );
    let db = Db::open(dir.path()).unwrap();
    assert_eq!(db.get("k").unwrap().as_deref(), Some(&b"v"[..]));
    drop(db);
    let both = Options::default().error_if_exists(true).read_only(true);
    assert!(matches!(
        Db::open_with(dir.path(), both),
        Err(Error::InvalidArgument(_))
    ));
}
