//! Backups: 5 incremental backups across writes, flushes and compactions
//! in 2 keyspaces, each restoring to exactly its state; a flipped byte in a
//! stored table found by `verify` and refused by `restore`; `purge_old`
//! keeping exactly what the remaining backups need.
#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions: a failed assumption is a failed test"
)]

use std::collections::BTreeMap;
use std::path::Path;

use bytes::Bytes;
use siftdb::backup::BackupEngine;
use siftdb::{Db, Options};
use siftdb_testkit::SplitMix64;

const KEYSPACES: [&str; 2] = ["default", "events"];

fn options() -> Options {
    siftdb_testkit::busy_tree_options()
}

type Contents = Vec<BTreeMap<Bytes, Bytes>>;

fn contents(db: &Db) -> Contents {
    KEYSPACES
        .iter()
        .map(|name| {
            db.keyspace(name)
                .unwrap()
                .iter()
                .collect::<siftdb::Result<_>>()
                .unwrap()
        })
        .collect()
}

fn write_round(db: &Db, rng: &mut SplitMix64, round: u64) {
    for name in KEYSPACES {
        let space = db.keyspace(name).unwrap();
        for i in 0..400 {
            let key = format!("k{:05}", rng.next() % 3000);
            if i % 9 == 0 {
                space.delete(&key).unwrap();
            } else {
                space
                    .put(&key, format!("r{round}-{i}-{}", "v".repeat(30)))
                    .unwrap();
            }
        }
    }
    match round % 3 {
        0 => db.compact().unwrap(),
        1 => db.flush().unwrap(),
        _ => {} // memtables left unflushed: the backup holds them as logs
    }
}

/// Backups 1..=5 of a database changing between them, with the contents
/// each one holds.
fn five_backups(root: &Path) -> (BackupEngine, Vec<(u64, Contents)>) {
    let db = Db::open_with(root.join("db"), options()).unwrap();
    for name in KEYSPACES {
        db.keyspace(name).unwrap();
    }
    let engine = BackupEngine::open(root.join("backups")).unwrap();
    let mut rng = SplitMix64::new(0x6261_636b);
    let mut made = Vec::new();
    for round in 0..5 {
        write_round(&db, &mut rng, round);
        let info = engine.create(&db).unwrap();
        assert_eq!(info.id, round + 1);
        made.push((info.id, contents(&db)));
    }
    (engine, made)
}

fn restored_contents(dir: &Path) -> Contents {
    let db = Db::open_with(dir, options()).unwrap();
    assert_eq!(db.keyspaces(), KEYSPACES);
    contents(&db)
}

#[test]
fn five_incremental_backups_each_restore_exactly() {
    let root = tempfile::tempdir().unwrap();
    let (engine, made) = five_backups(root.path());
    let list = engine.list().unwrap();
    assert_eq!(
        list.iter().map(|b| b.id).collect::<Vec<_>>(),
        [1, 2, 3, 4, 5]
    );
    // Incremental: some backup stored less than it holds (tables it shares
    // with an earlier one were not copied again).
    assert!(
        list.iter().skip(1).any(|b| b.new_bytes < b.size()),
        "{:?}",
        list.iter()
            .map(|b| (b.new_bytes, b.size()))
            .collect::<Vec<_>>()
    );
    for (id, want) in &made {
        engine.verify(*id).unwrap();
        let target = root.path().join(format!("restore{id}"));
        engine.restore(*id, &target).unwrap();
        assert_eq!(&restored_contents(&target), want, "backup {id}");
    }
    // A restore into an existing directory is refused.
    assert!(engine.restore(1, root.path().join("restore1")).is_err());
    assert!(engine.verify(9).is_err());
}

#[test]
fn a_flipped_byte_is_found_by_verify_and_refused_by_restore() {
    let root = tempfile::tempdir().unwrap();
    let (engine, _) = five_backups(root.path());
    let last = engine.list().unwrap().pop().unwrap();
    let table = last
        .files
        .iter()
        .find(|f| f.stored.starts_with("shared/"))
        .unwrap();
    let path = root.path().join("backups").join(&table.stored);
    let mut bytes = std::fs::read(&path).unwrap();
    let at = bytes.len() / 2;
    if let Some(b) = bytes.get_mut(at) {
        *b ^= 0x01;
    }
    std::fs::write(&path, &bytes).unwrap();
    let err = engine.verify(last.id).unwrap_err();
    assert!(err.is_corruption(), "{err}");
    assert!(err.to_string().contains(&table.stored), "{err}");
    let target = root.path().join("restored");
    assert!(engine.restore(last.id, &target).is_err());
    assert!(!target.exists());
    // A backup not holding that table still restores.
    if let Some(clean) = engine
        .list()
        .unwrap()
        .iter()
        .find(|b| b.files.iter().all(|f| f.stored != table.stored))
    {
        engine.restore(clean.id, &target).unwrap();
    }
}

#[test]
fn purge_old_keeps_what_the_remaining_backups_need() {
    let root = tempfile::tempdir().unwrap();
    let (engine, made) = five_backups(root.path());
    let shared = |root: &Path| {
        std::fs::read_dir(root.join("backups/shared"))
            .unwrap()
            .count()
    };
    let before = shared(root.path());
    assert_eq!(engine.purge_old(2).unwrap(), [1, 2, 3]);
    let list = engine.list().unwrap();
    assert_eq!(list.iter().map(|b| b.id).collect::<Vec<_>>(), [4, 5]);
    // Exactly the files the remaining backups name are left.
    let named: std::collections::BTreeSet<&str> = list
        .iter()
        .flat_map(|b| b.files.iter().map(|f| f.stored.as_str()))
        .filter(|s| s.starts_with("shared/"))
        .collect();
    assert_eq!(shared(root.path()), named.len());
    assert!(named.len() < before);
    let private: Vec<_> = std::fs::read_dir(root.path().join("backups/private"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(private.len(), 2, "{private:?}");
    for (id, want) in made.iter().filter(|(id, _)| *id >= 4) {
        engine.verify(*id).unwrap();
        let target = root.path().join(format!("restore{id}"));
        engine.restore(*id, &target).unwrap();
        assert_eq!(&restored_contents(&target), want, "backup {id}");
    }
    // The next backup is numbered after the newest, never reusing an id.
    let db = Db::open_with(root.path().join("db"), options()).unwrap();
    assert_eq!(engine.create(&db).unwrap().id, 6);
    assert_eq!(engine.purge_old(0).unwrap(), [4, 5, 6]);
    assert_eq!(shared(root.path()), 0);
}
