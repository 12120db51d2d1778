//! Compaction filters against a `BTreeMap` model: a filter that removes
//! keys whose value has a property (and rewrites others) applies at every
//! compaction that rewrites them; snapshots taken before a compaction still
//! see what it removed; per keyspace, only that keyspace's filter applies.
#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions: a failed assumption is a failed test"
)]

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use siftdb::{CompactionDecision, CompactionFilter, Db, KeyspaceOptions, Options};
use siftdb_testkit::SplitMix64;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Removes values starting with `x`, upper-cases values starting with `u`.
#[derive(Default)]
struct DropX {
    asked: AtomicU64,
}

impl CompactionFilter for DropX {
    fn filter(&self, _level: usize, _key: &[u8], value: &[u8]) -> CompactionDecision {
        self.asked.fetch_add(1, Ordering::Relaxed);
        match value.first() {
            Some(b'x') => CompactionDecision::Remove,
            Some(b'u') => CompactionDecision::Change(value.to_ascii_uppercase()),
            _ => CompactionDecision::Keep,
        }
    }
}

/// What the filter leaves of `model`.
fn filtered(model: &Model) -> Model {
    model
        .iter()
        .filter(|(_, v)| v.first() != Some(&b'x'))
        .map(|(k, v)| {
            let v = if v.first() == Some(&b'u') {
                v.to_ascii_uppercase()
            } else {
                v.clone()
            };
            (k.clone(), v)
        })
        .collect()
}

fn contents(iter: siftdb::DbIterator) -> Model {
    iter.map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())))
        .collect::<siftdb::Result<_>>()
        .unwrap()
}

fn options() -> Options {
    siftdb_testkit::busy_tree_options()
}

#[test]
fn the_filter_removes_and_rewrites_while_older_snapshots_see_the_old_state() {
    let dir = tempfile::tempdir().unwrap();
    let filter = Arc::new(DropX::default());
    let db = Db::open_with(dir.path(), options().compaction_filter(filter.clone())).unwrap();
    let mut rng = SplitMix64::new(0x6366);
    let mut model = Model::new();
    for round in 0..4 {
        for i in 0..800 {
            let key = format!("k{:04}", rng.next() % 600).into_bytes();
            let value = match rng.next() % 4 {
                0 => format!("x-{round}-{i}"),
                1 => format!("u-{round}-{i}"),
                _ => format!("k-{round}-{i}"),
            }
            .into_bytes();
            if rng.next().is_multiple_of(10) {
                db.delete(&key).unwrap();
                model.remove(&key);
            } else {
                db.put(&key, &value).unwrap();
                model.insert(key, value);
            }
        }
        let before = contents(db.iter());
        let snapshot = db.snapshot();
        db.compact().unwrap();
        // Everything is compacted: the filter saw every value.
        model = filtered(&model);
        assert_eq!(contents(db.iter()), model, "round {round}");
        for (k, v) in &model {
            assert_eq!(db.get(k).unwrap().as_deref(), Some(v.as_slice()));
        }
        // The snapshot still sees what the compaction removed or changed.
        assert_eq!(contents(snapshot.iter()), before, "round {round}");
        assert!(before.values().any(|v| v.first() == Some(&b'x')) || round > 0);
    }
    assert!(filter.asked.load(Ordering::Relaxed) > 0);
    drop(db);
    // Across a reopen (without the filter): what it removed stays removed.
    let db = Db::open_with(dir.path(), options()).unwrap();
    assert_eq!(contents(db.iter()), model);
}

#[test]
fn a_keyspace_filter_applies_to_its_keyspace_only() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path(), options()).unwrap();
    let filtered_space = db
        .keyspace_with(
            "filtered",
            KeyspaceOptions::new().compaction_filter(Arc::new(DropX::default())),
        )
        .unwrap();
    let plain = db.keyspace("plain").unwrap();
    for i in 0..500 {
        let key = format!("k{i:04}");
        let value = if i % 2 == 0 { "x-gone" } else { "keep" };
        filtered_space.put(&key, value).unwrap();
        plain.put(&key, value).unwrap();
    }
    db.compact().unwrap();
    assert_eq!(contents(filtered_space.iter()).len(), 250);
    assert_eq!(contents(plain.iter()).len(), 500);
}
