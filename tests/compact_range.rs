//! `Db::compact_range` and `Keyspace::compact_range`: the tables holding
//! keys of the range are merged (with every table they overlap), tables
//! wholly outside stay, no read changes, and deleted data of the range
//! leaves the files.
#![expect(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    reason = "test helpers outside #[test] functions: a failed assumption is a failed test"
)]

use siftdb::{Db, Options, Stats};

/// No automatic compaction: every flush leaves a level-0 table.
fn manual() -> Options {
    Options::default()
        .level0_compaction_trigger(64)
        .level0_quiet_trigger(64)
        .level0_stop_writes(128)
}

fn key(i: u32) -> String {
    format!("k{i:04}")
}

/// Writes `keys` with `value` to the default keyspace and flushes: one
/// level-0 table.
fn table(db: &Db, keys: impl IntoIterator<Item = u32>, value: &str) {
    for i in keys {
        db.put(key(i), value).unwrap();
    }
    db.flush().unwrap();
}

fn level0(stats: &Stats) -> usize {
    stats.keyspaces[0].level_tables[0]
}

fn deeper(stats: &Stats) -> usize {
    stats.keyspaces[0].level_tables.iter().skip(1).sum()
}

fn value(db: &Db, i: u32) -> Option<String> {
    db.get(key(i))
        .unwrap()
        .map(|v| String::from_utf8(v.to_vec()).unwrap())
}

/// Two regions of keys, three level-0 tables each: compacting one
/// region's range merges its three tables below level 0 and leaves the
/// other's; a range holding no table, and an empty range, change nothing.
#[test]
fn only_the_tables_of_the_range_are_merged() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path(), manual()).unwrap();
    for round in 0..3 {
        table(&db, 0..100, &format!("a{round}"));
    }
    for round in 0..3 {
        table(&db, 500..600, &format!("b{round}"));
    }
    assert_eq!(level0(&db.stats()), 6);
    db.compact_range(key(0)..key(100)).unwrap();
    let stats = db.stats();
    assert_eq!(level0(&stats), 3, "the other region's tables stay");
    assert_eq!(deeper(&stats), 1, "the range's three tables, merged");
    assert_eq!(value(&db, 50).as_deref(), Some("a2"));
    assert_eq!(value(&db, 550).as_deref(), Some("b2"));

    // Nothing there, or an empty range: no table changes.
    db.compact_range(key(200)..key(300)).unwrap();
    db.compact_range(key(560)..key(540)).unwrap();
    db.compact_range(key(550)..key(550)).unwrap();
    let after = db.stats();
    assert_eq!((level0(&after), deeper(&after)), (3, 1));

    // A bound inside a table takes the whole table, with what it overlaps.
    db.compact_range(key(599)..=key(599)).unwrap();
    let after = db.stats();
    assert_eq!(level0(&after), 0);
    assert_eq!(db.iter().count(), 200);
    assert_eq!(value(&db, 599).as_deref(), Some("b2"));
}

/// A newer table spanning both regions: compacting one region must take it
/// and, since it overlaps them, the other region's older tables too — else
/// it would go below them and their older values would shadow its newer
/// ones.
#[test]
fn a_table_overlapping_the_range_brings_what_it_overlaps() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path(), manual()).unwrap();
    table(&db, 0..100, "old");
    table(&db, 500..600, "old");
    table(&db, [10, 510], "new"); // newest, from region a to region b
    table(&db, 900..950, "far"); // overlaps nothing of the above
    assert_eq!(level0(&db.stats()), 4);
    db.compact_range(key(0)..key(20)).unwrap();
    let stats = db.stats();
    assert_eq!(level0(&stats), 1, "only the far table stays");
    assert_eq!(value(&db, 510).as_deref(), Some("new"));
    assert_eq!(value(&db, 10).as_deref(), Some("new"));
    assert_eq!(value(&db, 511).as_deref(), Some("old"));
    assert_eq!(value(&db, 920).as_deref(), Some("far"));
    drop(db);
    let db = Db::open_with(dir.path(), manual()).unwrap();
    assert_eq!(value(&db, 510).as_deref(), Some("new"));
    assert_eq!(db.iter().count(), 250);
}

/// Range-deleted and overwritten keys of the range leave the keyspace's
/// files; another keyspace is not touched; a dropped handle is refused.
#[test]
fn deleted_data_of_the_range_leaves_the_files() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path(), manual()).unwrap();
    let a = db.keyspace("a").unwrap();
    let b = db.keyspace("b").unwrap();
    let payload = "x".repeat(200);
    for i in 0..2000 {
        a.put(key(i), &payload).unwrap();
        b.put(key(i), &payload).unwrap();
    }
    db.flush().unwrap();
    a.compact().unwrap();
    let bytes = |db: &Db, ks: usize| db.stats().keyspaces[ks].level_bytes.iter().sum::<u64>();
    let (a_before, b_before) = (bytes(&db, 1), bytes(&db, 2));
    a.delete_range(key(0)..key(1500)).unwrap();
    a.compact_range(key(0)..key(1500)).unwrap();
    let a_after = bytes(&db, 1);
    assert!(
        a_after < a_before / 2,
        "{a_after} bytes after, {a_before} before"
    );
    assert_eq!(bytes(&db, 2), b_before, "b untouched");
    assert_eq!(db.stats().keyspaces[2].level_tables[0], 1);
    assert_eq!(a.iter().count(), 500);
    assert_eq!(a.range(key(0)..key(1500)).count(), 0);
    assert_eq!(b.iter().count(), 2000);
    db.drop_keyspace("b").unwrap();
    assert!(b.compact_range(key(0)..key(10)).is_err());
}
