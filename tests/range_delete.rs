//! Range deletes: `Db::delete_range` and `WriteBatch::delete_range` against
//! gets, `multi_get`, scans in both directions and snapshots, in the
//! memtable, in level 0 and across levels (a tombstone in level 0 over keys
//! in level 3), through flushes, compactions and reopens; the rule that a
//! table's point filter never hides its range tombstone; bad ranges.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "test code: a failed assumption is a failed test"
)]

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;

use siftdb::internals::fs::OsFileSystem;
use siftdb::internals::manifest::{read_manifest, write_manifest};
use siftdb::{Db, Error, FilterPolicy, Options, Snapshot, WriteBatch};

fn key(i: u32) -> Vec<u8> {
    format!("key{i:05}").into_bytes()
}

fn options() -> Options {
    Options::default()
        .memtable_bytes(64 * 1024)
        .block_size(512)
        .table_target_bytes(16 * 1024)
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Bounds of `&str` as bounds of owned keys (a pair of `Bound<&str>` is a
/// `RangeBounds<str>`, whose `str` is not sized).
trait MapBoth {
    fn map_both(self) -> (Bound<Vec<u8>>, Bound<Vec<u8>>);
}

impl MapBoth for (Bound<&str>, Bound<&str>) {
    fn map_both(self) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
        let owned = |b: Bound<&str>| b.map(|s| s.as_bytes().to_vec());
        (owned(self.0), owned(self.1))
    }
}

/// Every read the database offers, against `model`.
fn check(db: &Db, model: &Model) {
    check_reads(
        model,
        |k| db.get(k).unwrap().map(|v| v.to_vec()),
        |keys| db.multi_get(keys).unwrap(),
        |range| db.range(range).map(|r| r.unwrap()).collect(),
        |range| db.range(range).rev().map(|r| r.unwrap()).collect(),
    );
}

fn check_snapshot(snap: &Snapshot, model: &Model) {
    check_reads(
        model,
        |k| snap.get(k).unwrap().map(|v| v.to_vec()),
        |keys| snap.multi_get(keys).unwrap(),
        |range| snap.range(range).map(|r| r.unwrap()).collect(),
        |range| snap.range(range).rev().map(|r| r.unwrap()).collect(),
    );
}

type Range = (Bound<Vec<u8>>, Bound<Vec<u8>>);
type Entries = Vec<(bytes::Bytes, bytes::Bytes)>;

fn check_reads(
    model: &Model,
    get: impl Fn(&[u8]) -> Option<Vec<u8>>,
    multi_get: impl Fn(&[Vec<u8>]) -> Vec<Option<bytes::Bytes>>,
    forward: impl Fn(Range) -> Entries,
    backward: impl Fn(Range) -> Entries,
) {
    let probes: Vec<Vec<u8>> = (0..2100).step_by(7).map(key).collect();
    for k in &probes {
        assert_eq!(
            get(k),
            model.get(k).cloned(),
            "get {:?}",
            String::from_utf8_lossy(k)
        );
    }
    let answers = multi_get(&probes);
    for (k, answer) in probes.iter().zip(answers) {
        assert_eq!(
            answer.map(|v| v.to_vec()),
            model.get(k).cloned(),
            "multi_get"
        );
    }
    for (lo, hi) in [(0, 2100), (95, 1333), (1000, 1010), (1499, 1700)] {
        let range: Range = (Bound::Included(key(lo)), Bound::Excluded(key(hi)));
        let want: Vec<(Vec<u8>, Vec<u8>)> = model
            .range(range.clone())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let got: Vec<(Vec<u8>, Vec<u8>)> = forward(range.clone())
            .into_iter()
            .map(|(k, v)| (k.to_vec(), v.to_vec()))
            .collect();
        assert_eq!(got, want, "forward {lo}..{hi}");
        let mut got: Vec<(Vec<u8>, Vec<u8>)> = backward(range)
            .into_iter()
            .map(|(k, v)| (k.to_vec(), v.to_vec()))
            .collect();
        got.reverse();
        assert_eq!(got, want, "backward {lo}..{hi}");
    }
}

fn model_delete_range(model: &mut Model, range: Range) {
    let doomed: Vec<Vec<u8>> = model.range(range).map(|(k, _)| k.clone()).collect();
    for k in doomed {
        model.remove(&k);
    }
}

#[test]
fn range_deletes_hide_keys_in_memtables_tables_and_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    // No automatic level-0 compaction until the test compacts: the count
    // below checks that the flushed tombstones are in a table, and a merge
    // of level 0 into level 1 (here the bottom) drops them. The quiet
    // trigger asks for one after every flush that empties the memtables;
    // on a loaded machine the first flush's merge ran after the second
    // flush and took the tombstones' table with it (a CI failure).
    let manual = options()
        .level0_compaction_trigger(64)
        .level0_quiet_trigger(64)
        .level0_stop_writes(128);
    let mut db = Db::open_with(dir.path(), manual).unwrap();
    let mut model = Model::new();
    for i in 0..2000 {
        db.put(key(i), format!("v{i}")).unwrap();
        model.insert(key(i), format!("v{i}").into_bytes());
    }
    db.flush().unwrap();
    let before = db.snapshot();
    let before_model = model.clone();

    // In the memtable, over keys in level 0.
    db.delete_range(key(100)..key(300)).unwrap();
    model_delete_range(
        &mut model,
        (Bound::Included(key(100)), Bound::Excluded(key(300))),
    );
    // Any kind of bound, and keys written after a tombstone live.
    db.delete_range((Bound::Excluded(key(500)), Bound::Included(key(600))))
        .unwrap();
    model_delete_range(
        &mut model,
        (Bound::Excluded(key(500)), Bound::Included(key(600))),
    );
    db.put(key(550), "back").unwrap();
    model.insert(key(550), b"back".to_vec());
    let mut batch = WriteBatch::new();
    batch.delete_range(key(1900)..);
    batch.put(key(1950), "after, same batch");
    db.write(batch).unwrap();
    model_delete_range(&mut model, (Bound::Included(key(1900)), Bound::Unbounded));
    model.insert(key(1950), b"after, same batch".to_vec());
    let middle = db.snapshot();
    let middle_model = model.clone();
    check(&db, &model);

    db.delete_range(..key(50)).unwrap();
    model_delete_range(&mut model, (Bound::Unbounded, Bound::Excluded(key(50))));
    check(&db, &model);

    db.flush().unwrap();
    check(&db, &model);
    db.wait_for_background().unwrap();
    assert!(db.stats().range_tombstone_tables > 0);
    db.delete_range(key(1200)..=key(1250)).unwrap();
    model_delete_range(
        &mut model,
        (Bound::Included(key(1200)), Bound::Included(key(1250))),
    );
    db.flush().unwrap();
    check(&db, &model);
    check_snapshot(&before, &before_model);
    check_snapshot(&middle, &middle_model);

    db.compact().unwrap();
    check(&db, &model);
    check_snapshot(&before, &before_model);
    check_snapshot(&middle, &middle_model);
    drop((before, middle));
    db.compact().unwrap();
    check(&db, &model);

    db.delete_range(key(700)..key(800)).unwrap();
    model_delete_range(
        &mut model,
        (Bound::Included(key(700)), Bound::Excluded(key(800))),
    );
    db.close().unwrap();
    // The last tombstone comes back from the log, the others from tables.
    db = Db::open_with(dir.path(), options()).unwrap();
    check(&db, &model);
    db.flush().unwrap();
    db.compact().unwrap();
    check(&db, &model);
    // Compaction at the bottom dropped the tombstones with what they deleted.
    assert_eq!(db.stats().range_tombstone_tables, 0);
    db.delete_range(key(1400)..key(1450)).unwrap();
    model_delete_range(
        &mut model,
        (Bound::Included(key(1400)), Bound::Excluded(key(1450))),
    );
    drop(db);
    // A read-only open replays the last range delete from the log.
    let reader = Db::open_read_only(dir.path()).unwrap();
    check(&reader, &model);
    drop(reader);
    let db = Db::open_with(dir.path(), options()).unwrap();
    check(&db, &model);
}

#[test]
fn bad_and_empty_ranges() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path()).unwrap();
    db.put("b", "1").unwrap();
    let seq = db.stats().last_sequence;
    for result in [
        db.delete_range("b".."a"),
        db.delete_range("z"..="y"),
        db.delete_range((Bound::Excluded("c"), Bound::Included("b")).map_both()),
        db.delete_range(vec![0u8; siftdb::MAX_KEY_LEN + 1]..),
    ] {
        assert!(
            matches!(result, Err(Error::InvalidArgument(_))),
            "{result:?}"
        );
    }
    // Empty ranges succeed and write nothing.
    db.delete_range("a".."a").unwrap();
    db.delete_range((Bound::Excluded("b"), Bound::Excluded("b")).map_both())
        .unwrap();
    db.delete_range((Bound::Excluded("b"), Bound::Included("b")).map_both())
        .unwrap();
    assert_eq!(db.stats().last_sequence, seq);
    // A reversed range in a batch fails the whole batch.
    let mut batch = WriteBatch::new();
    batch.put("c", "2");
    batch.delete_range("q".."p");
    assert!(matches!(db.write(batch), Err(Error::InvalidArgument(_))));
    assert_eq!(db.get("c").unwrap(), None);
    assert_eq!(db.stats().last_sequence, seq);
    // One range delete takes one sequence number.
    db.delete_range("a"..).unwrap();
    assert_eq!(db.stats().last_sequence, seq + 1);
    assert_eq!(db.get("b").unwrap(), None);
    // A bound of the maximum length is accepted on either side.
    let longest = vec![0xffu8; siftdb::MAX_KEY_LEN];
    db.put(&longest, "top").unwrap();
    db.delete_range((Bound::Excluded(longest.clone()), Bound::Unbounded))
        .unwrap();
    assert!(db.get(&longest).unwrap().is_some());
    db.delete_range(..=longest.clone()).unwrap();
    assert_eq!(db.get(&longest).unwrap(), None);
    db.flush().unwrap();
    db.compact().unwrap();
    assert_eq!(db.iter().count(), 0);
}

/// Moves every table of a closed database down to `level` (the manifest is
/// rewritten; tables above nothing stay where the tree allows them).
fn move_tables_to_level(dir: &Path, level: u32) {
    let mut state = read_manifest(&OsFileSystem, dir).unwrap().unwrap();
    for table in &mut state.tables {
        table.level = level;
    }
    write_manifest(&OsFileSystem, dir, &state).unwrap();
}

#[test]
fn a_level0_tombstone_hides_level3_keys_whatever_the_filter_says() {
    let dir = tempfile::tempdir().unwrap();
    // Level 0 keeps its two tables until the reopen below asks for a merge
    // (the quiet trigger too: it would merge them after the second flush).
    let opts = options()
        .filter_policy(FilterPolicy::bits_per_key(10.0))
        .level0_compaction_trigger(100)
        .level0_quiet_trigger(100)
        .level0_stop_writes(200);
    let mut model = Model::new();
    {
        let db = Db::open_with(dir.path(), opts.clone()).unwrap();
        for i in (0..2000).step_by(2) {
            db.put(key(i), format!("old{i}")).unwrap();
            model.insert(key(i), format!("old{i}").into_bytes());
        }
        db.flush().unwrap();
        db.compact().unwrap();
        db.close().unwrap();
    }
    move_tables_to_level(dir.path(), 3);
    let db = Db::open_with(dir.path(), opts.clone()).unwrap();
    assert!(
        db.stats().level_tables[3] > 0,
        "{:?}",
        db.stats().level_tables
    );
    // A level-0 table of a few keys inside the range (its filter says
    // "present" for them and "absent" for the level-3 keys), a snapshot
    // between, then the tombstone, flushed into its own level-0 table
    // with one key the filter holds.
    db.put(key(1001), "new1001").unwrap();
    model.insert(key(1001), b"new1001".to_vec());
    db.flush().unwrap();
    let between = db.snapshot();
    let between_model = model.clone();
    db.delete_range(key(900)..key(1100)).unwrap();
    model_delete_range(
        &mut model,
        (Bound::Included(key(900)), Bound::Excluded(key(1100))),
    );
    db.put(key(1050), "newest").unwrap();
    model.insert(key(1050), b"newest".to_vec());
    db.flush().unwrap();
    assert_eq!(db.stats().level_tables[0], 2);
    assert_eq!(db.stats().range_tombstone_tables, 1);

    check(&db, &model);
    check_snapshot(&between, &between_model);

    // The filter-skip rule, directly: a key under the tombstone that the
    // tombstone's table does not hold is ruled out by that table's filter,
    // yet the table answers "deleted" from its tombstone; the level-3 table
    // below is never asked.
    let before = db.stats();
    assert_eq!(db.get(key(1000)).unwrap(), None);
    let after = db.stats();
    assert_eq!(after.range_tombstone_hits - before.range_tombstone_hits, 1);
    assert_eq!(after.tables_consulted - before.tables_consulted, 1);
    assert_eq!(after.filter_skips - before.filter_skips, 1);
    assert_eq!(after.data_block_reads, before.data_block_reads);
    // A key the table holds, newer than its tombstone: its filter says
    // "present" and the point version answers.
    assert_eq!(db.get(key(1050)).unwrap().as_deref(), Some(&b"newest"[..]));
    // Outside the tombstone the filter skips the table as ever.
    let before = db.stats();
    assert!(db.get(key(1500)).unwrap().is_some());
    let after = db.stats();
    assert_eq!(after.range_tombstone_hits, before.range_tombstone_hits);

    check_snapshot(&between, &between_model);
    drop(between);

    // Compaction of level 0 into level 1 carries the tombstone (level 3
    // below still holds the keys it deletes), and drops the older level-0
    // key under it.
    drop(db);
    let db = Db::open_with(dir.path(), opts.clone().level0_compaction_trigger(2)).unwrap();
    db.wait_for_background().unwrap();
    let stats = db.stats();
    assert_eq!(stats.level_tables[0], 0, "{stats:?}");
    assert!(
        stats.level_tables[1] > 0 && stats.level_tables[3] > 0,
        "{stats:?}"
    );
    assert_eq!(stats.range_tombstone_tables, 1);
    check(&db, &model);

    // A compaction to the bottom drops it with the keys it deleted.
    db.compact().unwrap();
    check(&db, &model);
    assert_eq!(db.stats().range_tombstone_tables, 0);
}

#[test]
fn a_table_wholly_covered_by_a_newer_tombstone_is_not_read_by_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let opts = options()
        .level0_compaction_trigger(100)
        .level0_stop_writes(200);
    let db = Db::open_with(dir.path(), opts).unwrap();
    for i in 0..500u32 {
        // Values LZ4 cannot shrink, so the level holds several tables.
        let value: Vec<u8> = (0..100u32)
            .map(|j| (i.wrapping_mul(2_654_435_761) ^ j.wrapping_mul(40_503)).to_le_bytes()[1])
            .collect();
        db.put(key(i), value).unwrap();
    }
    db.flush().unwrap();
    db.compact().unwrap();
    let level1 = db.stats().level_tables[1];
    assert!(level1 > 1, "{level1}");
    db.delete_range(key(0)..key(400)).unwrap();
    db.put(key(450), "y").unwrap();
    db.flush().unwrap();
    db.compact().unwrap();
    let stats = db.stats();
    assert!(stats.compaction_tables_deleted > 0, "{stats:?}");
    assert_eq!(db.iter().count(), 100);
    assert_eq!(db.get(key(450)).unwrap().as_deref(), Some(&b"y"[..]));
    assert_eq!(db.get(key(399)).unwrap(), None);
}

/// A database whose newest table holds a range tombstone over keys of an
/// older table, and a log holding another range delete; the keys each
/// deletes, and the keys that stay.
fn build_for_repair(dir: &Path) -> Model {
    let opts = options()
        .level0_compaction_trigger(100)
        .level0_stop_writes(200);
    let db = Db::open_with(dir, opts).unwrap();
    let mut model = Model::new();
    for i in 0..600 {
        db.put(key(i), format!("v{i}")).unwrap();
        model.insert(key(i), format!("v{i}").into_bytes());
    }
    db.flush().unwrap();
    db.compact().unwrap();
    db.delete_range(key(100)..key(200)).unwrap();
    model_delete_range(
        &mut model,
        (Bound::Included(key(100)), Bound::Excluded(key(200))),
    );
    db.flush().unwrap();
    db.delete_range(key(400)..key(450)).unwrap();
    model_delete_range(
        &mut model,
        (Bound::Included(key(400)), Bound::Excluded(key(450))),
    );
    db.close().unwrap();
    model
}

/// The level-0 table holding the range tombstone.
fn tombstone_table(dir: &Path) -> std::path::PathBuf {
    let state = read_manifest(&OsFileSystem, dir).unwrap().unwrap();
    let record = state.tables.iter().find(|t| t.level == 0).unwrap();
    dir.join(format!("{:06}.sst", record.file_number))
}

fn flip_at(path: &Path, offset: u64) {
    let mut bytes = std::fs::read(path).unwrap();
    let at = usize::try_from(offset).unwrap();
    bytes[at] ^= 0x40;
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn repair_keeps_range_tombstones_of_tables_and_logs() {
    // A damaged data block (the table opens), a damaged footer (the table
    // is scanned), and no manifest (every table and log merged).
    for damage in ["data block", "footer", "manifest"] {
        let dir = tempfile::tempdir().unwrap();
        let model = build_for_repair(dir.path());
        let table = tombstone_table(dir.path());
        let len = std::fs::metadata(&table).unwrap().len();
        match damage {
            "data block" => flip_at(&table, 3),
            "footer" => flip_at(&table, len - 20),
            _ => std::fs::remove_file(dir.path().join("MANIFEST")).unwrap(),
        }
        let report =
            siftdb::repair(dir.path(), siftdb::RepairOptions::new().options(options())).unwrap();
        let db = Db::open_with(dir.path(), options()).unwrap();
        for (i, k) in (0..600).map(|i| (i, key(i))) {
            let got = db.get(&k).unwrap().map(|v| v.to_vec());
            // The damaged block held the table's one point entry, a delete
            // its own tombstone already made: nothing else is lost.
            assert_eq!(got, model.get(&k).cloned(), "{damage}: key {i}; {report:?}");
        }
        let scanned = db.iter().count();
        assert_eq!(scanned, model.len(), "{damage}");
    }
}
