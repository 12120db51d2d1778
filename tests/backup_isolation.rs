//! A backup shares no storage with the database it protects: every file
//! of a backup is a copy (no inode in common with the live directory), so
//! a byte damaged in a live table after `create` leaves the backup whole:
//! `verify` passes and `restore` gives back exactly what was backed up.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

use bytes::Bytes;
use siftdb::backup::BackupEngine;
use siftdb::{Db, Options};

fn contents(db: &Db) -> BTreeMap<Bytes, Bytes> {
    db.iter().collect::<siftdb::Result<_>>().unwrap()
}

/// A file's (device, inode).
#[cfg(unix)]
fn file_id(meta: &std::fs::Metadata) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    Some((meta.dev(), meta.ino()))
}

/// Stable std has no file identity on other systems: there the damage
/// tests alone show that nothing is shared.
#[cfg(not(unix))]
fn file_id(_meta: &std::fs::Metadata) -> Option<(u64, u64)> {
    None
}

/// (device, inode) of every file below `dir`.
fn inodes(dir: &Path) -> BTreeSet<(u64, u64)> {
    let mut out = BTreeSet::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(at) = pending.pop() {
        for entry in std::fs::read_dir(&at).unwrap() {
            let entry = entry.unwrap();
            let meta = entry.metadata().unwrap();
            if meta.is_dir() {
                pending.push(entry.path());
            } else {
                out.extend(file_id(&meta));
            }
        }
    }
    out
}

/// Flips one byte in the middle of the file at `path`, in place (the same
/// inode, as a failing disk or a stray write would).
fn flip_byte_in_place(path: &Path) {
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let middle = file.metadata().unwrap().len() / 2;
    let mut byte = [0u8];
    file.seek(SeekFrom::Start(middle)).unwrap();
    file.read_exact(&mut byte).unwrap();
    file.seek(SeekFrom::Start(middle)).unwrap();
    file.write_all(&[byte[0] ^ 0x5a]).unwrap();
    file.sync_all().unwrap();
}

#[test]
fn damage_to_a_live_table_after_a_backup_leaves_the_backup_whole() {
    let root = tempfile::tempdir().unwrap();
    let db_dir = root.path().join("db");
    let db = Db::open(&db_dir).unwrap();
    for i in 0..3000u32 {
        db.put(
            format!("key{i:06}"),
            format!("value-{i}-{}", "x".repeat(40)),
        )
        .unwrap();
    }
    db.flush().unwrap();
    db.put(b"in-the-log", b"too").unwrap();
    let backups = BackupEngine::open(root.path().join("backups")).unwrap();
    let info = backups.create(&db).unwrap();
    let expected = contents(&db);
    db.close().unwrap();

    let shared: Vec<_> = inodes(&db_dir)
        .intersection(&inodes(backups.path()))
        .copied()
        .collect();
    assert!(
        shared.is_empty(),
        "the backup shares {} files with the live database",
        shared.len()
    );

    let tables: Vec<_> = std::fs::read_dir(&db_dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "sst"))
        .collect();
    assert!(!tables.is_empty());
    for table in &tables {
        flip_byte_in_place(table);
    }

    backups
        .verify(info.id)
        .unwrap_or_else(|e| panic!("verify after damage to the live tables: {e}"));
    let restored = root.path().join("restored");
    backups
        .restore(info.id, &restored)
        .unwrap_or_else(|e| panic!("restore after damage to the live tables: {e}"));
    let db = Db::open(&restored).unwrap();
    assert_eq!(contents(&db), expected);
}

#[test]
fn an_incremental_backup_shares_tables_with_earlier_backups_only() {
    let root = tempfile::tempdir().unwrap();
    let db_dir = root.path().join("db");
    // Level 0 keeps each round's table: the next backup finds it stored.
    let options = Options::default()
        .level0_compaction_trigger(100)
        .level0_quiet_trigger(100)
        .level0_stop_writes(200);
    let db = Db::open_with(&db_dir, options).unwrap();
    let backups = BackupEngine::open(root.path().join("backups")).unwrap();
    for round in 0..3u32 {
        for i in 0..500u32 {
            db.put(format!("r{round}-{i:05}"), "v".repeat(50)).unwrap();
        }
        db.flush().unwrap();
        let info = backups.create(&db).unwrap();
        if round > 0 {
            // Tables of earlier rounds are not stored again.
            assert!(info.new_bytes < info.size(), "{info:?}");
        }
    }
    db.close().unwrap();
    assert!(inodes(&db_dir).is_disjoint(&inodes(backups.path())));
    for id in 1..=3 {
        backups.verify(id).unwrap();
    }
}
