//! `Db::verify_checksums` and `Keyspace::verify_checksums`: a scrub of a
//! live database finds a byte changed on disk under an open table (naming
//! the table), counts what it checked, and never fails on its own while
//! compactions replace the tables it reads.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;

use siftdb::internals::filename::table_file_name;
use siftdb::internals::manifest::read_manifest;
use siftdb::{Db, Error, Options};
use siftdb_testkit::files::flip_byte;

fn fill(db: &Db, tables: u32) {
    for round in 0..tables {
        for i in 0..500u32 {
            db.put(format!("key{i:05}"), format!("value{round}:{i}"))
                .unwrap();
        }
        db.flush().unwrap();
    }
}

/// Options under which a few flushed tables stay as they are: neither
/// level-0 trigger is reached (a compaction would change the count of
/// tables, and one that read a damaged table would stop writes).
fn no_compaction() -> Options {
    Options::default()
        .level0_compaction_trigger(8)
        .level0_quiet_trigger(8)
}

#[test]
fn a_sound_database_verifies_and_counts_its_tables() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path(), no_compaction()).unwrap();
    fill(&db, 3);
    let events = db.keyspace("events").unwrap();
    events.put("e", "1").unwrap();
    db.flush().unwrap();
    let all = db.verify_checksums().unwrap();
    let stats = db.stats();
    assert_eq!(all.tables, stats.level_tables.iter().sum::<usize>() as u64);
    assert_eq!(all.tables, 4);
    assert!(all.warnings.is_empty(), "{:?}", all.warnings);
    let manifest = read_manifest(&siftdb::internals::fs::OsFileSystem, dir.path())
        .unwrap()
        .unwrap();
    assert_eq!(
        all.bytes,
        manifest.tables.iter().map(|t| t.file_size).sum::<u64>()
    );
    let one = events.verify_checksums().unwrap();
    assert_eq!(one.tables, 1);
    db.drop_keyspace("events").unwrap();
    assert!(matches!(
        events.verify_checksums(),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn a_byte_changed_under_an_open_table_is_found_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path(), no_compaction()).unwrap();
    fill(&db, 2);
    db.verify_checksums().unwrap();
    let manifest = read_manifest(&siftdb::internals::fs::OsFileSystem, dir.path())
        .unwrap()
        .unwrap();
    let damaged = manifest.tables[0].file_number;
    // In the first data block, which no read has cached.
    flip_byte(&dir.path().join(table_file_name(damaged)), 10, 0x40);
    match db.verify_checksums() {
        Err(Error::Corruption { what, .. }) => {
            assert!(what.contains(&table_file_name(damaged)), "{what}");
        }
        other => panic!("a changed byte passed the scrub: {other:?}"),
    }
    // The keyspace's own scrub finds it too; the database goes on.
    assert!(db.default_keyspace().verify_checksums().is_err());
    db.put("after", "scrub").unwrap();
    assert_eq!(db.get("after").unwrap().as_deref(), Some(&b"scrub"[..]));
}

#[test]
fn compactions_during_a_scrub_remove_no_table_it_reads() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(
        Db::open_with(
            dir.path(),
            Options::default()
                .memtable_bytes(16 << 10)
                .level0_compaction_trigger(2)
                .table_target_bytes(16 << 10),
        )
        .unwrap(),
    );
    fill(&db, 2);
    let stop = Arc::new(AtomicBool::new(false));
    let rounds = Arc::new(AtomicU32::new(0));
    let writer = {
        let (db, stop, rounds) = (Arc::clone(&db), Arc::clone(&stop), Arc::clone(&rounds));
        std::thread::spawn(move || {
            let mut round = 0u32;
            while !stop.load(Ordering::Relaxed) {
                for i in 0..200u32 {
                    db.put(
                        format!("key{:05}", (i * 7 + round) % 500),
                        round.to_le_bytes().repeat(16),
                    )
                    .unwrap();
                }
                round += 1;
                if round.is_multiple_of(5) {
                    db.compact().unwrap();
                }
                rounds.store(round, Ordering::Relaxed);
            }
        })
    };
    // Scrubs until the writer has done 20 rounds (four full compactions
    // and the automatic ones of its flushes).
    let mut scrubs = 0u32;
    let mut tables = 0;
    while rounds.load(Ordering::Relaxed) < 20 {
        let checked = db.verify_checksums().unwrap();
        tables += checked.tables;
        scrubs += 1;
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    assert!(
        scrubs >= 2 && tables > 0,
        "{scrubs} scrubs, {tables} tables"
    );
    assert!(db.stats().compactions >= 4);
    Arc::into_inner(db).unwrap().close().unwrap();
}
