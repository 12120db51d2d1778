//! `Keyspace::approximate_memtable_stats` and `Db::approximate_memtable_stats`:
//! the entries (every version) and bytes a key range holds in a keyspace's
//! memtables, estimated from the skiplist's towers. What must hold: a big
//! memtable's half, tenth and whole within a quarter of the true count
//! (an estimate that does not scale its sample, or returns 0, fails); a
//! range of fewer than 400 entries counted exactly, deletes and overwrites
//! included, its bytes the memtable's own in proportion; nothing for an
//! empty, reversed or keyless range or for another keyspace's keys; the
//! memtables waiting for a flush counted; nothing once a flush moved the
//! range into tables (where `approximate_size` now finds it); a dropped
//! keyspace's handle refused.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use std::io::ErrorKind;
use std::ops::RangeBounds;

use siftdb::{Db, Error, KeyspaceStats, MemtableRangeStats, Options, WriteBatch};
use siftdb_testkit::{FaultFs, FaultMode};

/// Entries written to the big memtable.
const N: usize = 100_000;

/// Memtables far larger than the writes here: nothing flushes by itself.
fn options() -> Options {
    Options::default().memtable_bytes(256 << 20)
}

fn key(i: u64) -> String {
    format!("k{i:08}")
}

/// The default keyspace's shape.
fn default_stats(db: &Db) -> KeyspaceStats {
    db.stats().keyspaces.swap_remove(0)
}

/// Within a quarter of `want`: five relative standard errors of an
/// estimate counted from 400 or more sampled nodes, so no draw of tower
/// heights strays that far but about once in a million.
fn assert_near(estimate: u64, want: u64, what: &str) {
    assert!(
        estimate.abs_diff(want) * 4 <= want,
        "{what}: estimated {estimate}, truly {want}"
    );
}

/// A database whose default keyspace's memtable holds `N` entries: puts
/// and, one in ten, deletes, of 70,000 keys drawn from a fixed seed (so
/// about a quarter are further versions of a key written before). Returns
/// the user key of every entry, sorted.
fn big_memtable(dir: &std::path::Path) -> (Db, Vec<String>) {
    let db = Db::open_with(dir, options()).unwrap();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut keys = Vec::with_capacity(N);
    let mut batch = WriteBatch::new();
    for _ in 0..N {
        let draw = next();
        let k = key(draw % 70_000);
        if (draw >> 40) % 10 == 0 {
            batch.delete(&k);
        } else {
            batch.put(&k, format!("value-{draw:016x}"));
        }
        keys.push(k);
        if batch.len() == 1000 {
            db.write(std::mem::take(&mut batch)).unwrap();
        }
    }
    db.write(batch).unwrap();
    keys.sort();
    let shape = default_stats(&db);
    assert_eq!(
        (shape.table_count, shape.immutable_memtables),
        (0, 0),
        "all {N} entries must be in the active memtable: {shape:?}"
    );
    (db, keys)
}

/// How many of the sorted `keys` fall in `range`.
fn true_count<R: RangeBounds<String>>(keys: &[String], range: &R) -> u64 {
    keys.iter().filter(|k| range.contains(*k)).count() as u64
}

#[test]
fn a_big_memtable_is_estimated_within_a_quarter() {
    let dir = tempfile::tempdir().unwrap();
    let (db, keys) = big_memtable(dir.path());
    let memtable_bytes = default_stats(&db).memtable_bytes as u64;

    let whole = db.approximate_memtable_stats::<&str, _>(..).unwrap();
    assert_near(whole.entries, N as u64, "the whole");
    assert_near(whole.bytes, memtable_bytes, "the whole's bytes");

    let median = keys[N / 2].clone();
    let half = ..median.clone();
    let (low, high) = (keys[N * 45 / 100].clone(), keys[N * 55 / 100].clone());
    let tenth = low.clone()..high.clone();
    let upper = median.clone()..;
    for (what, stats, want) in [
        (
            "the lower half",
            db.approximate_memtable_stats(..median.as_str()).unwrap(),
            true_count(&keys, &half),
        ),
        (
            "the upper half",
            db.approximate_memtable_stats(median.as_str()..).unwrap(),
            true_count(&keys, &upper),
        ),
        (
            "a tenth",
            db.approximate_memtable_stats(low.as_str()..high.as_str())
                .unwrap(),
            true_count(&keys, &tenth),
        ),
    ] {
        assert!(want > N as u64 / 12, "{what}: {want}");
        assert_near(stats.entries, want, what);
        // The bytes are the memtable's average entry times the count.
        let bytes_per_entry = memtable_bytes as f64 / N as f64;
        let expected_bytes = stats.entries as f64 * bytes_per_entry;
        assert!(
            (stats.bytes as f64 - expected_bytes).abs() <= bytes_per_entry,
            "{what}: {stats:?}, {bytes_per_entry} bytes an entry"
        );
    }
    // Nothing is in tables yet.
    assert_eq!(db.approximate_size::<&str, _>(..).unwrap(), 0);
}

#[test]
fn empty_reversed_and_keyless_ranges_are_zero() {
    let dir = tempfile::tempdir().unwrap();
    let (db, keys) = big_memtable(dir.path());
    let zero = MemtableRangeStats::default();
    let (first, last) = (keys[0].as_str(), keys[N - 1].as_str());
    let some = keys[N / 3].as_str();
    assert_eq!(db.approximate_memtable_stats(some..some).unwrap(), zero);
    assert_eq!(db.approximate_memtable_stats(last..first).unwrap(), zero);
    // Before the first key, past the last, between two neighbours: fewer
    // than 400 entries there, so counted exactly.
    assert_eq!(db.approximate_memtable_stats(..first).unwrap(), zero);
    let past = format!("{last}\0");
    assert_eq!(
        db.approximate_memtable_stats(past.as_str()..).unwrap(),
        zero
    );
    let gap = (0..70_000)
        .map(key)
        .find(|k| keys.binary_search(k).is_err())
        .unwrap();
    assert_eq!(
        db.approximate_memtable_stats(gap.as_str()..=gap.as_str())
            .unwrap(),
        zero
    );
    // One key: every version of it, exactly.
    let versions = true_count(&keys, &(some.to_string()..=some.to_string()));
    assert!(versions >= 1);
    assert_eq!(
        db.approximate_memtable_stats(some..=some).unwrap().entries,
        versions
    );
}

#[test]
fn small_ranges_count_every_version_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path(), options()).unwrap();
    let other = db.keyspace("other").unwrap();
    // 100 keys, three versions each: a put, an overwrite, a delete.
    for i in 0..100 {
        db.put(key(i), "first").unwrap();
        db.put(key(i), "second version").unwrap();
        db.delete(key(i)).unwrap();
        other.put(key(i), "not in the default keyspace").unwrap();
    }
    let whole = db.approximate_memtable_stats::<&str, _>(..).unwrap();
    // The whole memtable: its count, and its bytes as `Stats` reports them.
    assert_eq!(whole.entries, 300);
    assert_eq!(whole.bytes, default_stats(&db).memtable_bytes as u64);
    assert_eq!(
        db.default_keyspace()
            .approximate_memtable_stats::<&str, _>(..)
            .unwrap(),
        whole
    );
    let (k10, k50) = (key(10), key(50));
    let part = db
        .approximate_memtable_stats(k10.as_str()..k50.as_str())
        .unwrap();
    assert_eq!(part.entries, 120);
    assert_eq!(part.bytes, whole.bytes * 120 / 300);
    assert_eq!(
        db.approximate_memtable_stats(k10.as_str()..=k50.as_str())
            .unwrap()
            .entries,
        123
    );
    // The other keyspace's own, likewise.
    assert_eq!(
        other
            .approximate_memtable_stats(k10.as_str()..k50.as_str())
            .unwrap()
            .entries,
        40
    );
    // A range delete is not an entry of the count.
    db.delete_range(k10.as_str()..k50.as_str()).unwrap();
    assert_eq!(
        db.approximate_memtable_stats::<&str, _>(..)
            .unwrap()
            .entries,
        300
    );
}

#[test]
fn memtables_waiting_for_a_flush_are_counted() {
    const DB: &str = "/db";
    let fs = FaultFs::new();
    let db = Db::open_with(DB, options().file_system(fs.shared())).unwrap();
    for i in 0..300 {
        db.put(key(i), [7u8; 100]).unwrap();
    }
    // No table can be written: the flush seals the memtable and fails,
    // which leaves it waiting, immutable.
    fs.fail_matching(
        "create",
        ".sst",
        FaultMode::Persistent,
        ErrorKind::PermissionDenied,
    );
    assert!(db.flush().is_err());
    let shape = default_stats(&db);
    assert_eq!(
        (shape.immutable_memtables, shape.memtable_bytes),
        (1, 0),
        "{shape:?}"
    );
    let waiting = db.approximate_memtable_stats::<&str, _>(..).unwrap();
    assert_eq!(waiting.entries, 300);
    assert_eq!(waiting.bytes, shape.immutable_memtable_bytes as u64);
    let (k100, k200) = (key(100), key(200));
    assert_eq!(
        db.approximate_memtable_stats(k100.as_str()..k200.as_str())
            .unwrap()
            .entries,
        100
    );
    assert_eq!(db.approximate_size::<&str, _>(..).unwrap(), 0);

    fs.clear_faults();
    db.resume().unwrap();
    db.flush().unwrap();
    assert_eq!(default_stats(&db).immutable_memtables, 0);
    assert_eq!(
        db.approximate_memtable_stats::<&str, _>(..).unwrap(),
        MemtableRangeStats::default()
    );
    assert!(db.approximate_size::<&str, _>(..).unwrap() > 0);
}

#[test]
fn a_flush_moves_the_range_from_memtables_to_tables() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path(), options()).unwrap();
    let events = db.keyspace("events").unwrap();
    for i in 0..5000 {
        events.put(key(i), [7u8; 100]).unwrap();
    }
    let (k1000, k2000) = (key(1000), key(2000));
    let before = events
        .approximate_memtable_stats(k1000.as_str()..k2000.as_str())
        .unwrap();
    assert_near(before.entries, 1000, "before the flush");
    assert!(before.bytes >= before.entries * 100, "{before:?}");
    assert_eq!(
        events
            .approximate_size(k1000.as_str()..k2000.as_str())
            .unwrap(),
        0
    );

    db.flush().unwrap();
    assert_eq!(
        events
            .approximate_memtable_stats(k1000.as_str()..k2000.as_str())
            .unwrap(),
        MemtableRangeStats::default()
    );
    assert!(
        events
            .approximate_size(k1000.as_str()..k2000.as_str())
            .unwrap()
            > 0
    );
    // New writes land in the new memtable and are counted again.
    events.put(key(1500), "again").unwrap();
    assert_eq!(
        events
            .approximate_memtable_stats(k1000.as_str()..k2000.as_str())
            .unwrap()
            .entries,
        1
    );
}

#[test]
fn a_dropped_keyspace_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path()).unwrap();
    let events = db.keyspace("events").unwrap();
    events.put("e", "v").unwrap();
    assert_eq!(
        events
            .approximate_memtable_stats::<&str, _>(..)
            .unwrap()
            .entries,
        1
    );
    db.drop_keyspace("events").unwrap();
    match events.approximate_memtable_stats::<&str, _>(..) {
        Err(Error::InvalidArgument(detail)) => assert!(detail.contains("dropped"), "{detail}"),
        other => panic!("{other:?}"),
    }
    // The name again: a new, empty keyspace.
    let events = db.keyspace("events").unwrap();
    assert_eq!(
        events.approximate_memtable_stats::<&str, _>(..).unwrap(),
        MemtableRangeStats::default()
    );
}
