//! `Keyspace::approximate_size` and `Db::approximate_size`: the bytes a key
//! range takes in a keyspace's tables, against the table bytes `Stats`
//! reports — the whole range exactly, a part in proportion to its keys (a
//! table counted whole where it lies partly in the range fails these),
//! complementary ranges adding up to the whole; nothing outside the keys,
//! for an empty or reversed range, in the memtable or in another keyspace;
//! a damaged table counted whole; a dropped keyspace's handle refused.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    clippy::cast_precision_loss,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use std::ops::Bound;

use siftdb::internals::filename::table_file_name;
use siftdb::internals::fs::OsFileSystem;
use siftdb::internals::key::user_key_of;
use siftdb::internals::manifest::read_manifest;
use siftdb::{Db, Error, Keyspace, Options};
use siftdb_testkit::files::flip_byte;

const N: u32 = 20_000;

fn key(i: u32) -> String {
    format!("k{i:06}")
}

/// 100 bytes no compressor shrinks (splitmix64 of the key and round), so
/// a range's bytes follow its keys.
fn value(i: u32, round: u32) -> Vec<u8> {
    let mut state = u64::from(i) << 32 | u64::from(round);
    let mut next = || {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    };
    (0..13)
        .flat_map(|_| next().to_le_bytes())
        .take(100)
        .collect()
}

fn load(keyspace: &Keyspace, keys: std::ops::Range<u32>, round: u32) {
    for i in keys {
        keyspace.put(key(i), value(i, round)).unwrap();
    }
}

/// Bytes of the keyspace's live tables, as `Stats` counts them.
fn table_bytes(db: &Db, name: &str) -> u64 {
    let stats = db.stats();
    let keyspace = stats.keyspaces.iter().find(|k| k.name == name).unwrap();
    keyspace.level_bytes.iter().sum()
}

fn share(part: u64, whole: u64) -> f64 {
    part as f64 / whole as f64
}

#[test]
fn one_table_whole_halves_and_parts() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path()).unwrap();
    let data = db.keyspace("data").unwrap();
    let other = db.keyspace("other").unwrap();
    load(&data, 0..N, 0);
    // The same keys elsewhere, more of them: none of it is `data`'s.
    load(&other, 0..2 * N, 1);
    load(&db.default_keyspace(), 0..N / 4, 2);
    db.flush().unwrap();
    data.compact().unwrap();

    let full = data.approximate_size::<&str, _>(..).unwrap();
    assert_eq!(full, table_bytes(&db, "data"));
    assert!(full > u64::from(N) * 100, "{full}");
    assert_eq!(data.approximate_size(key(0)..=key(N - 1)).unwrap(), full);
    assert_eq!(data.approximate_size("a".."z").unwrap(), full);
    assert_eq!(
        other.approximate_size::<&str, _>(..).unwrap(),
        table_bytes(&db, "other")
    );
    assert_eq!(
        db.approximate_size::<&str, _>(..).unwrap(),
        table_bytes(&db, "default")
    );
    assert!(table_bytes(&db, "other") > full);

    let first_half = data.approximate_size(..key(N / 2)).unwrap();
    let second_half = data.approximate_size(key(N / 2)..).unwrap();
    let half_share = share(first_half, full);
    assert!(
        (0.35..0.65).contains(&half_share),
        "first half: {half_share}"
    );
    assert_eq!(first_half + second_half, full);
    let quarter = data.approximate_size(key(N / 4)..key(N / 2)).unwrap();
    let quarter_share = share(quarter, full);
    assert!(
        (0.2..0.3).contains(&quarter_share),
        "a quarter: {quarter_share}"
    );
    // 100 keys: a few data blocks, not the table.
    let few = data.approximate_size(key(5000)..key(5100)).unwrap();
    assert!(
        few > 0 && share(few, full) < 0.02,
        "100 keys: {few} of {full}"
    );

    // Outside every key, empty, reversed: nothing.
    assert_eq!(data.approximate_size("a".."k").unwrap(), 0);
    assert_eq!(data.approximate_size(..="k").unwrap(), 0);
    assert_eq!(data.approximate_size("l"..).unwrap(), 0);
    assert_eq!(data.approximate_size(key(N)..).unwrap(), 0);
    assert_eq!(data.approximate_size(key(100)..key(100)).unwrap(), 0);
    let reversed = data.approximate_size(key(N / 2)..key(N / 4)).unwrap();
    assert_eq!(reversed, 0);
    let (k100, k101) = (key(100), key(101));
    let excluded_both = (
        Bound::Excluded(k100.as_str()),
        Bound::Excluded(k100.as_str()),
    );
    assert_eq!(data.approximate_size::<&str, _>(excluded_both).unwrap(), 0);
    let between = (
        Bound::Excluded(k101.as_str()),
        Bound::Included(k100.as_str()),
    );
    assert_eq!(data.approximate_size::<&str, _>(between).unwrap(), 0);
    assert_eq!(data.approximate_size([0xffu8; 70_000]..).unwrap(), 0);

    // Writes still in the memtable are not counted until a flush.
    load(&data, N..N + 2000, 0);
    assert_eq!(data.approximate_size(key(N)..).unwrap(), 0);
    assert_eq!(data.approximate_size::<&str, _>(..).unwrap(), full);
    db.flush().unwrap();
    let flushed = data.approximate_size(key(N)..).unwrap();
    assert!(flushed > 2000 * 100, "{flushed}");
    assert_eq!(
        data.approximate_size::<&str, _>(..).unwrap(),
        table_bytes(&db, "data")
    );
}

#[test]
fn many_tables_on_two_levels_share_the_range_by_keys() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options::default()
        .memtable_bytes(256 << 10)
        .table_target_bytes(128 << 10)
        .block_size(1024)
        .level0_compaction_trigger(100)
        .level0_quiet_trigger(100)
        .level0_stop_writes(200);
    let db = Db::open_with(dir.path(), opts).unwrap();
    let data = db.keyspace("data").unwrap();
    load(&data, 0..N, 0);
    db.compact().unwrap();
    let tables = db.stats().keyspaces[1].table_count;
    assert!(tables >= 10, "{tables} tables");
    let full = data.approximate_size::<&str, _>(..).unwrap();
    assert_eq!(full, table_bytes(&db, "data"));
    // Ten consecutive ranges: each a tenth, together the whole.
    let mut sum = 0;
    for tenth in 0..10 {
        let (from, to) = (key(tenth * N / 10), key((tenth + 1) * N / 10));
        let part = match tenth {
            0 => data.approximate_size(..to).unwrap(),
            9 => data.approximate_size(from..).unwrap(),
            _ => data.approximate_size(from..to).unwrap(),
        };
        let part_share = share(part, full);
        assert!(
            (0.07..0.13).contains(&part_share),
            "tenth {tenth}: {part_share}"
        );
        sum += part;
    }
    assert_eq!(sum, full);

    // Overwritten values count until a compaction drops them (level 0 is
    // not compacted by itself meanwhile: see the options). Tables a
    // snapshot or scan still holds after a compaction replaced them are
    // on disk but no longer live: not counted.
    load(&data, 0..N, 1);
    db.flush().unwrap();
    let with_old = data.approximate_size::<&str, _>(..).unwrap();
    assert_eq!(with_old, table_bytes(&db, "data"));
    let with_old_share = share(full, with_old);
    assert!((0.4..0.6).contains(&with_old_share), "{with_old_share}");
    let half = data.approximate_size(..key(N / 2)).unwrap();
    let half_share = share(half, with_old);
    assert!((0.4..0.6).contains(&half_share), "{half_share}");
    data.compact().unwrap();
    let compacted = data.approximate_size::<&str, _>(..).unwrap();
    let compacted_share = share(compacted, full);
    assert!((0.9..1.1).contains(&compacted_share), "{compacted_share}");
}

#[test]
fn a_damaged_table_counts_whole_where_it_meets_the_range() {
    let dir = tempfile::tempdir().unwrap();
    let opts = || {
        Options::default()
            .memtable_bytes(128 << 10)
            .table_target_bytes(64 << 10)
    };
    {
        let db = Db::open_with(dir.path(), opts()).unwrap();
        load(&db.default_keyspace(), 0..N / 4, 0);
        db.compact().unwrap();
        db.close().unwrap();
    }
    let manifest = read_manifest(&OsFileSystem, dir.path()).unwrap().unwrap();
    assert!(manifest.tables.len() >= 3, "{}", manifest.tables.len());
    let mut records = manifest.tables;
    records.sort_by(|a, b| a.smallest.cmp(&b.smallest));
    let damaged = &records[1];
    let intact = &records[2];
    let path = dir.path().join(table_file_name(damaged.file_number));
    let len = std::fs::metadata(&path).unwrap().len();
    flip_byte(&path, len - 30, 0x21);

    let db = Db::open_with(dir.path(), opts()).unwrap();
    assert_eq!(db.recovery_report().damaged_tables.len(), 1);
    let first_of = |record: &siftdb::internals::manifest::TableRecord| {
        String::from_utf8(user_key_of(&record.smallest).to_vec()).unwrap()
    };
    // One key of each: the damaged table whole, a block or less of the other.
    let damaged_key = first_of(damaged);
    let one_damaged = db
        .approximate_size(damaged_key.as_str()..=damaged_key.as_str())
        .unwrap();
    assert_eq!(one_damaged, damaged.file_size);
    let intact_key = first_of(intact);
    let one_intact = db
        .approximate_size(intact_key.as_str()..=intact_key.as_str())
        .unwrap();
    assert!(
        one_intact < intact.file_size / 4,
        "{one_intact} of {}",
        intact.file_size
    );
    // Past the damaged table it is not counted.
    let rest = db.approximate_size(intact_key.as_str()..).unwrap();
    let after: u64 = records[2..].iter().map(|r| r.file_size).sum();
    assert_eq!(rest, after);
    assert_eq!(
        db.approximate_size::<&str, _>(..).unwrap(),
        records.iter().map(|r| r.file_size).sum::<u64>()
    );
}

#[test]
fn a_dropped_keyspace_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path()).unwrap();
    let events = db.keyspace("events").unwrap();
    load(&events, 0..100, 0);
    db.flush().unwrap();
    assert!(events.approximate_size::<&str, _>(..).unwrap() > 0);
    db.drop_keyspace("events").unwrap();
    match events.approximate_size::<&str, _>(..) {
        Err(Error::InvalidArgument(detail)) => assert!(detail.contains("dropped"), "{detail}"),
        other => panic!("{other:?}"),
    }
    // The name again: a new, empty keyspace.
    let events = db.keyspace("events").unwrap();
    assert_eq!(events.approximate_size::<&str, _>(..).unwrap(), 0);
}
