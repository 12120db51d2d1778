//! `Db::live_tables` / `Keyspace::live_tables`: the tables listed are the
//! manifest's, with their keyspace, level, size, entries and key bounds;
//! deeper levels come sorted and disjoint; a dropped keyspace lists none.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use siftdb::internals::fs::OsFileSystem;
use siftdb::internals::manifest::read_manifest;
use siftdb::{Compression, Db, Options};

#[test]
fn the_live_tables_are_the_manifests() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(
        dir.path(),
        Options::default()
            .compression(Compression::None)
            .level0_compaction_trigger(8)
            .level0_quiet_trigger(8)
            .table_target_bytes(16 << 10),
    )
    .unwrap();
    let logs = db.keyspace("logs").unwrap();
    for round in 0..3u32 {
        for i in 0..300u32 {
            db.put(format!("k{:04}", i * 3 + round), [1u8; 50]).unwrap();
        }
        logs.put(format!("line{round}"), "x").unwrap();
        db.flush().unwrap();
    }
    let listed = db.live_tables();
    let manifest = read_manifest(&OsFileSystem, dir.path()).unwrap().unwrap();
    assert_eq!(listed.len(), manifest.tables.len());
    for table in &listed {
        let record = manifest
            .tables
            .iter()
            .find(|r| r.file_number == table.file_number)
            .unwrap_or_else(|| panic!("{table:?} is not in the manifest"));
        assert_eq!(
            (table.level, table.bytes, table.entries),
            (record.level, record.file_size, record.entries)
        );
        assert!(table.smallest_key <= table.largest_key);
    }
    // Level 0 newest first: the default keyspace's three flushes.
    let default: Vec<_> = listed.iter().filter(|t| t.keyspace == "default").collect();
    assert_eq!(default.len(), 3);
    assert!(default
        .windows(2)
        .all(|w| w[0].file_number > w[1].file_number));
    assert!(default.iter().all(|t| t.entries == 300 && t.level == 0));
    let logs_tables = logs.live_tables();
    assert_eq!(logs_tables.len(), 3);
    assert!(logs_tables
        .iter()
        .all(|t| t.keyspace == "logs" && t.entries == 1));

    // Compacted: several tables in one deeper level, sorted and disjoint.
    db.compact().unwrap();
    let deep = db.default_keyspace().live_tables();
    assert!(deep.len() > 1, "{deep:?}");
    assert!(deep.iter().all(|t| t.level >= 1));
    assert!(deep
        .windows(2)
        .all(|w| w[0].largest_key < w[1].smallest_key));
    assert_eq!(deep.iter().map(|t| t.entries).sum::<u64>(), 900);
    assert_eq!(&deep[0].smallest_key[..], b"k0000");

    db.drop_keyspace("logs").unwrap();
    assert!(logs.live_tables().is_empty());
    assert!(db.live_tables().iter().all(|t| t.keyspace == "default"));
}
