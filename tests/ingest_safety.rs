//! What an ingest must not share or miss: the database never keeps an inode
//! its caller can still write (the default copies the file, `move_files`
//! takes the caller's name away, `TableWriter` never truncates a file in
//! place), a file whose filter block fails its checksum is refused with the
//! database unchanged, and a transaction that read what an ingest then
//! covers fails to commit — for a file rewritten with a new sequence number
//! and for one placed as it is, in the default keyspace and in another.
#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions: a failed assumption is a failed test"
)]

use std::path::Path;

use siftdb::{Db, Error, IngestOptions, Keyspace, Options, TableWriter, TransactionOptions};

fn options() -> Options {
    Options::default().memtable_bytes(32 << 10)
}

fn a_key(i: u32) -> String {
    format!("a{i:05}")
}

/// Writes `a00000..a{count}` with values `tag-i` to `path`.
fn write_a_keys(path: &Path, count: u32, tag: &str) {
    let mut writer = TableWriter::create(path, &options()).unwrap();
    for i in 0..count {
        writer.put(a_key(i), format!("{tag}-{i}")).unwrap();
    }
    writer.finish().unwrap();
}

/// Writes `keys` (ascending) with value `value` to `path`, for `keyspace`
/// when given.
fn write_keys(path: &Path, keyspace: Option<&Keyspace>, keys: &[&str], value: &str) {
    let mut writer = match keyspace {
        Some(keyspace) => keyspace.table_writer(path).unwrap(),
        None => TableWriter::create(path, &options()).unwrap(),
    };
    for key in keys {
        writer.put(key, value).unwrap();
    }
    writer.finish().unwrap();
}

fn check_a_keys(db: &Db, count: u32, tag: &str) {
    for i in [0, count / 2, count - 1] {
        let want = format!("{tag}-{i}");
        assert_eq!(
            db.get(a_key(i)).unwrap().as_deref(),
            Some(want.as_bytes()),
            "{}",
            a_key(i)
        );
    }
    let scanned = db.range(a_key(0)..a_key(count)).count();
    assert_eq!(scanned, count as usize);
}

/// A file's hard-link count.
#[cfg(unix)]
fn links(meta: &std::fs::Metadata) -> u64 {
    use std::os::unix::fs::MetadataExt;
    meta.nlink()
}

/// Stable std has no link count on other systems: 1 stands for "unknown",
/// and the in-place rewrite checks show what a shared file would.
#[cfg(not(unix))]
fn links(_meta: &std::fs::Metadata) -> u64 {
    1
}

/// The `.sst` files of `dir` and their link counts.
fn table_links(dir: &Path) -> Vec<(String, u64)> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".sst"))
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                links(&e.metadata().unwrap()),
            )
        })
        .collect();
    files.sort();
    files
}

#[test]
fn rewriting_the_source_name_after_an_ingest_keeps_the_ingested_keys() {
    let dir = tempfile::tempdir().unwrap();
    let db_dir = dir.path().join("db");
    let db = Db::open_with(&db_dir, options()).unwrap();
    let bulk = dir.path().join("bulk.sst");
    write_a_keys(&bulk, 10_000, "first");
    db.ingest(&[&bulk], IngestOptions::new()).unwrap();
    // The application's next batch, under the same name.
    let mut writer = TableWriter::create(&bulk, &options()).unwrap();
    for i in 0..100u32 {
        writer.put(format!("b{i:05}"), "next").unwrap();
    }
    check_a_keys(&db, 10_000, "first");
    writer.finish().unwrap();
    check_a_keys(&db, 10_000, "first");
    drop(db);
    let db = Db::open_with(&db_dir, options()).unwrap();
    check_a_keys(&db, 10_000, "first");
    assert_eq!(db.verify_checksums().unwrap().tables, 1);
    // The next batch is whole, and goes in beside the first.
    db.ingest(&[&bulk], IngestOptions::new()).unwrap();
    assert_eq!(db.iter().count(), 10_100);
}

#[test]
fn the_default_copy_leaves_the_source_untouched_and_unshared() {
    let dir = tempfile::tempdir().unwrap();
    let db_dir = dir.path().join("db");
    let db = Db::open_with(&db_dir, options()).unwrap();
    let source = dir.path().join("load.sst");
    write_a_keys(&source, 2000, "v");
    let before = std::fs::read(&source).unwrap();
    db.ingest(&[&source], IngestOptions::new()).unwrap();
    assert_eq!(std::fs::read(&source).unwrap(), before);
    assert_eq!(links(&std::fs::metadata(&source).unwrap()), 1);
    let tables = table_links(&db_dir);
    assert_eq!(tables.len(), 1, "{tables:?}");
    assert!(tables.iter().all(|(_, links)| *links == 1), "{tables:?}");
    // The caller writes over its file in place: the database has its own.
    let mut garbage = before.clone();
    garbage.iter_mut().for_each(|b| *b = !*b);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&source)
        .and_then(|mut f| std::io::Write::write_all(&mut f, &garbage))
        .unwrap();
    check_a_keys(&db, 2000, "v");
    drop(db);
    let db = Db::open_with(&db_dir, options()).unwrap();
    check_a_keys(&db, 2000, "v");
}

#[test]
fn move_files_takes_the_source_name_and_the_data_stays_readable() {
    let dir = tempfile::tempdir().unwrap();
    let db_dir = dir.path().join("db");
    let db = Db::open_with(&db_dir, options()).unwrap();
    // One placed as it is, then one over it (rewritten).
    let first = dir.path().join("first.sst");
    write_a_keys(&first, 2000, "first");
    db.ingest(&[&first], IngestOptions::new().move_files(true))
        .unwrap();
    assert!(!first.exists());
    let second = dir.path().join("second.sst");
    write_a_keys(&second, 1000, "second");
    db.ingest(&[&second], IngestOptions::new().move_files(true))
        .unwrap();
    assert!(!second.exists());
    let tables = table_links(&db_dir);
    assert_eq!(tables.len(), 2, "{tables:?}");
    assert!(tables.iter().all(|(_, links)| *links == 1), "{tables:?}");
    // A new file under the old name changes nothing.
    write_a_keys(&first, 10, "other");
    assert_eq!(
        db.get(a_key(1500)).unwrap().as_deref(),
        Some(&b"first-1500"[..])
    );
    assert_eq!(db.get(a_key(5)).unwrap().as_deref(), Some(&b"second-5"[..]));
    drop(db);
    let db = Db::open_with(&db_dir, options()).unwrap();
    assert_eq!(db.iter().count(), 2000);
    assert_eq!(
        db.get(a_key(999)).unwrap().as_deref(),
        Some(&b"second-999"[..])
    );
    assert_eq!(
        db.get(a_key(1999)).unwrap().as_deref(),
        Some(&b"first-1999"[..])
    );
}

#[test]
fn a_table_writer_replaces_an_existing_file_only_when_it_finishes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("load.sst");
    write_a_keys(&path, 500, "old");
    let old = std::fs::read(&path).unwrap();
    let mut writer = TableWriter::create(&path, &options()).unwrap();
    writer.put("b", "new").unwrap();
    let now = std::fs::read(&path).unwrap();
    assert!(
        now == old,
        "create changed the file: {} bytes, {} before",
        now.len(),
        old.len()
    );
    writer.finish().unwrap();
    let db = Db::open_with(dir.path().join("db"), options()).unwrap();
    db.ingest(&[&path], IngestOptions::new()).unwrap();
    assert_eq!(db.iter().count(), 1);
    let names = |dir: &Path| {
        let mut names: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    assert_eq!(names(dir.path()), ["db", "load.sst"]);

    // A writer dropped unfinished (or refused at finish, given no key)
    // leaves the old file and nothing beside it.
    let mut writer = TableWriter::create(&path, &options()).unwrap();
    writer.put("c", "dropped").unwrap();
    drop(writer);
    assert!(TableWriter::create(&path, &options())
        .unwrap()
        .finish()
        .is_err());
    let fresh = dir.path().join("fresh.sst");
    drop(TableWriter::create(&fresh, &options()).unwrap());
    assert_eq!(names(dir.path()), ["db", "load.sst"]);
    let table = siftdb::internals::table::Table::open_path(&path).unwrap();
    assert_eq!(table.properties().entries, 1);
}

#[test]
fn a_file_whose_filter_block_fails_its_checksum_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db_dir = dir.path().join("db");
    let db = Db::open_with(&db_dir, options()).unwrap();
    db.put("z", "kept").unwrap();
    let path = dir.path().join("damaged.sst");
    write_a_keys(&path, 2000, "v");
    let table = siftdb::internals::table::Table::open_path(&path).unwrap();
    let filter = table.footer().filter.unwrap();
    drop(table);
    let mut bytes = std::fs::read(&path).unwrap();
    let at = usize::try_from(filter.offset).unwrap() + 100;
    bytes[at] ^= 0x08;
    std::fs::write(&path, &bytes).unwrap();

    let refused = db.ingest(&[&path], IngestOptions::new().move_files(true));
    match &refused {
        Err(Error::Corruption { what, detail }) => {
            assert!(what.contains("damaged.sst"), "{what}");
            assert!(detail.contains("filter"), "{detail}");
        }
        other => panic!("ingest of a damaged filter: {other:?}"),
    }
    assert!(path.exists(), "a refused move took the file");
    assert_eq!(db.live_tables().len(), 0);
    assert_eq!(table_links(&db_dir), []);
    assert_eq!(db.iter().count(), 1);
    assert_eq!(db.get(a_key(7)).unwrap(), None);
}

/// What a transaction's reads were: `get_for_update` of a key, or a
/// serializable scan of a range.
#[derive(Debug, Clone, Copy)]
enum Read {
    ForUpdate,
    SerializableScan,
}

/// Where the ingested file goes.
#[derive(Debug, Clone, Copy)]
enum Placement {
    /// Over a table holding the key: rewritten with a new sequence number.
    Rewritten,
    /// Into a key range holding nothing: placed as it is at sequence 0.
    AsIs,
}

/// A transaction reads `c5` (`get_for_update`, or a serializable scan of
/// `[c, d)`), an ingest then adds `c5`, and the transaction writes it:
/// the commit must fail, and the ingested value stay. Returns what went
/// wrong instead.
fn read_ingest_commit(
    keyspace_name: Option<&str>,
    read: Read,
    placement: Placement,
) -> Option<String> {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path().join("db"), options()).unwrap();
    let keyspace = keyspace_name.map(|name| db.keyspace(name).unwrap());
    let space = keyspace.clone().unwrap_or_else(|| db.default_keyspace());
    if let Placement::Rewritten = placement {
        space.put("c5", "old").unwrap();
        space.put("c7", "old").unwrap();
        db.flush().unwrap();
    }
    let options = match read {
        Read::ForUpdate => TransactionOptions::new(),
        Read::SerializableScan => TransactionOptions::serializable(),
    };
    let mut txn = db.transaction_with(options);
    match read {
        Read::ForUpdate => {
            txn.get_for_update_in(&space, "c5").unwrap();
        }
        Read::SerializableScan => {
            assert!(txn.range_in(&space, "c".."d").all(|e| e.is_ok()));
        }
    }
    let file = dir.path().join("c.sst");
    write_keys(&file, keyspace.as_ref(), &["c5"], "ingested");
    space.ingest(&[&file], IngestOptions::new()).unwrap();
    txn.put_in(&space, "c5", "txn").unwrap();
    let case = format!("{keyspace_name:?} {read:?} {placement:?}");
    match txn.commit() {
        Err(Error::Conflict) => {}
        other => return Some(format!("{case}: commit after the ingest: {other:?}")),
    }
    assert_eq!(
        space.get("c5").unwrap().as_deref(),
        Some(&b"ingested"[..]),
        "{case}"
    );
    // A transaction that began after the ingest commits.
    let mut txn = db.transaction_with(options);
    txn.get_for_update_in(&space, "c5").unwrap();
    assert_eq!(
        txn.range_in(&space, "c".."d").count(),
        1 + usize::from(matches!(placement, Placement::Rewritten))
    );
    txn.put_in(&space, "c5", "after").unwrap();
    txn.commit().unwrap();
    assert_eq!(
        space.get("c5").unwrap().as_deref(),
        Some(&b"after"[..]),
        "{case}"
    );
    None
}

/// Runs `read` for both placements, in the default keyspace and another.
fn every_case(read: Read) {
    let mut failed = Vec::new();
    for placement in [Placement::Rewritten, Placement::AsIs] {
        for keyspace in [None, Some("events")] {
            failed.extend(read_ingest_commit(keyspace, read, placement));
        }
    }
    assert!(failed.is_empty(), "{failed:#?}");
}

#[test]
fn get_for_update_then_an_ingest_of_the_key_fails_the_commit() {
    every_case(Read::ForUpdate);
}

#[test]
fn a_serializable_scan_then_an_ingest_into_the_range_fails_the_commit() {
    every_case(Read::SerializableScan);
}

#[test]
fn an_ingest_elsewhere_does_not_fail_the_commit() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path().join("db"), options()).unwrap();
    let events = db.keyspace("events").unwrap();
    let mut txn = db.transaction_with(TransactionOptions::serializable());
    txn.get_for_update("c5").unwrap();
    assert_eq!(txn.range("c".."d").count(), 0);
    // Other keys of the same keyspace, and the same key in another.
    let file = dir.path().join("elsewhere.sst");
    write_keys(&file, None, &["e1", "e2"], "v");
    db.ingest(&[&file], IngestOptions::new()).unwrap();
    let file = dir.path().join("events.sst");
    write_keys(&file, Some(&events), &["c5"], "v");
    events.ingest(&[&file], IngestOptions::new()).unwrap();
    txn.put("c5", "txn").unwrap();
    txn.commit().unwrap();
    assert_eq!(db.get("c5").unwrap().as_deref(), Some(&b"txn"[..]));
}
