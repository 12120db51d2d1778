//! The database's public surface: put/get/delete, batches, scans, options,
//! bad input, locking, reopening.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use std::sync::Arc;

use siftdb::{Db, Error, Options, WriteBatch};

fn small_options() -> Options {
    Options::default()
        .memtable_bytes(16 << 10)
        .block_size(1024)
        .level0_compaction_trigger(3)
        .level1_bytes(64 << 10)
        .table_target_bytes(16 << 10)
}

fn collect(
    iter: impl Iterator<Item = siftdb::Result<(bytes::Bytes, bytes::Bytes)>>,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    iter.map(|r| {
        let (k, v) = r.unwrap();
        (k.to_vec(), v.to_vec())
    })
    .collect()
}

#[test]
fn put_get_delete_and_empty_values() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path()).unwrap();
    assert_eq!(db.get(b"a").unwrap(), None);
    db.put(b"a", b"1").unwrap();
    db.put(b"empty", b"").unwrap();
    assert_eq!(db.get(b"a").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(db.get(b"empty").unwrap().as_deref(), Some(&b""[..]));
    db.put(b"a", b"2").unwrap();
    assert_eq!(db.get(b"a").unwrap().as_deref(), Some(&b"2"[..]));
    db.delete(b"a").unwrap();
    assert_eq!(db.get(b"a").unwrap(), None);
    db.delete(b"never-there").unwrap();
}

#[test]
fn batches_apply_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path()).unwrap();
    let mut b = WriteBatch::new();
    b.put(b"k", b"first");
    b.put(b"k", b"second");
    b.put(b"gone", b"x");
    b.delete(b"gone");
    db.write(b).unwrap();
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"second"[..]));
    assert_eq!(db.get(b"gone").unwrap(), None);
    db.write(WriteBatch::new()).unwrap();
}

#[test]
fn data_survives_flush_compaction_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let key = |i: u32| format!("key{i:06}");
    {
        let db = Db::open_with(dir.path(), small_options()).unwrap();
        for i in 0..3000 {
            db.put(key(i), format!("value{i}")).unwrap();
        }
        for i in (0..3000).step_by(3) {
            db.delete(key(i)).unwrap();
        }
        db.flush().unwrap();
        assert!(db.stats().table_count > 0);
        db.compact().unwrap();
    }
    let db = Db::open_with(dir.path(), small_options()).unwrap();
    for i in 0..3000 {
        let got = db.get(key(i)).unwrap();
        if i % 3 == 0 {
            assert_eq!(got, None, "{i}");
        } else {
            assert_eq!(got.as_deref(), Some(format!("value{i}").as_bytes()), "{i}");
        }
    }
    assert_eq!(db.iter().count(), 2000);
}

#[test]
fn unflushed_writes_are_recovered_from_the_log() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path()).unwrap();
        db.put(b"a", b"1").unwrap();
        db.put(b"b", b"2").unwrap();
        db.delete(b"a").unwrap();
    }
    let db = Db::open(dir.path()).unwrap();
    assert_eq!(db.get(b"a").unwrap(), None);
    assert_eq!(db.get(b"b").unwrap().as_deref(), Some(&b"2"[..]));
    assert!(db.recovery_report().records_replayed >= 3);
    db.put(b"c", b"3").unwrap();
    drop(db);
    let db = Db::open(dir.path()).unwrap();
    assert_eq!(db.get(b"c").unwrap().as_deref(), Some(&b"3"[..]));
    assert_eq!(db.get(b"b").unwrap().as_deref(), Some(&b"2"[..]));
}

#[test]
fn scans_are_ordered_and_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path(), small_options()).unwrap();
    for i in 0..500u32 {
        db.put(format!("p{:03}", i % 50).as_bytes(), i.to_le_bytes())
            .unwrap();
        if i == 250 {
            db.flush().unwrap();
        }
    }
    db.put(b"q", b"x").unwrap();
    db.put(b"o", b"y").unwrap();
    let all = collect(db.iter());
    assert_eq!(all.len(), 52);
    assert!(all.windows(2).all(|w| w[0].0 < w[1].0));
    let range = collect(db.range(b"p010".as_slice()..b"p020".as_slice()));
    assert_eq!(range.len(), 10);
    assert_eq!(range[0].0, b"p010");
    let inclusive = collect(db.range(b"p010".as_slice()..=b"p020".as_slice()));
    assert_eq!(inclusive.len(), 11);
    let prefix = collect(db.prefix(b"p04"));
    assert_eq!(prefix.len(), 10);
    // The newest value wins: p049 was last written at i = 499.
    assert_eq!(prefix[9].1, 499u32.to_le_bytes());
    let from = collect(db.range(b"p048".as_slice()..));
    assert_eq!(
        from.iter().map(|e| e.0.clone()).collect::<Vec<_>>(),
        vec![b"p048".to_vec(), b"p049".to_vec(), b"q".to_vec()]
    );
}

#[test]
fn iterators_see_a_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path(), small_options()).unwrap();
    for i in 0..100u32 {
        db.put(format!("{i:03}"), b"old").unwrap();
    }
    let iter = db.iter();
    for i in 0..100u32 {
        db.put(format!("{i:03}"), b"new").unwrap();
    }
    db.put(b"zzz", b"late").unwrap();
    db.flush().unwrap();
    db.compact().unwrap();
    let seen = collect(iter);
    assert_eq!(seen.len(), 100);
    assert!(seen.iter().all(|(_, v)| v == b"old"));
}

#[test]
fn a_second_open_is_refused_until_the_first_is_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path()).unwrap();
    assert!(matches!(Db::open(dir.path()), Err(Error::Locked(_))));
    drop(db);
    Db::open(dir.path()).unwrap();
}

#[test]
fn bad_paths_and_bad_input_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plain-file");
    std::fs::write(&file, b"hello").unwrap();
    assert!(matches!(Db::open(&file), Err(Error::InvalidArgument(_))));

    let foreign = dir.path().join("foreign");
    std::fs::create_dir(&foreign).unwrap();
    std::fs::write(foreign.join("notes.txt"), b"mine").unwrap();
    assert!(matches!(
        Db::open(&foreign),
        Err(Error::NotADatabase { .. })
    ));

    let db = Db::open(dir.path().join("db")).unwrap();
    let big_key = vec![0u8; siftdb::MAX_KEY_LEN + 1];
    assert!(matches!(
        db.put(&big_key, b"v"),
        Err(Error::InvalidArgument(_))
    ));
    assert!(matches!(db.get(&big_key), Err(Error::InvalidArgument(_))));
    let sixteen_mib = vec![7u8; 16 << 20];
    db.put(b"big", &sixteen_mib).unwrap();
    assert_eq!(db.get(b"big").unwrap().unwrap().len(), 16 << 20);
    let too_big = vec![0u8; siftdb::MAX_VALUE_LEN + 1];
    assert!(matches!(
        db.put(b"k", &too_big),
        Err(Error::InvalidArgument(_))
    ));

    assert!(matches!(
        Db::open_with(
            dir.path().join("x"),
            Options::default().bloom_bits_per_key(f64::NAN)
        ),
        Err(Error::InvalidArgument(_))
    ));
}

#[test]
fn absent_gets_on_a_flushed_database_skip_table_reads() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path(), Options::default().memtable_bytes(256 << 10)).unwrap();
    let key = |j: u64| format!("k{j:015}");
    for i in 0..20_000u64 {
        db.put(key(2 * i), [0u8; 100]).unwrap();
    }
    db.flush().unwrap();
    db.wait_for_background().unwrap();
    let before = db.stats();
    for i in 0..20_000u64 {
        assert_eq!(db.get(key(2 * i + 1)).unwrap(), None);
    }
    let after = db.stats();
    let checks = after.filter_checks - before.filter_checks;
    let skips = after.filter_skips - before.filter_skips;
    let reads = after.data_block_reads - before.data_block_reads;
    let rate = skips as f64 / checks as f64;
    println!(
        "{} tables, {checks} filter checks, {skips} skipped ({:.2}%), {reads} data blocks read",
        after.table_count,
        rate * 100.0
    );
    // Keys outside every table's range never reach a filter.
    assert!(checks >= 19_900, "{checks} filter checks");
    assert!(rate >= 0.97, "skip rate {rate}");
}

/// `multi_get` answers as one `get` per key, and asks each table's filter
/// for all its keys: the same checks and skips, the same data reads.
#[test]
fn multi_get_answers_as_gets_and_counts_as_gets() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path(), Options::default().memtable_bytes(256 << 10)).unwrap();
    let key = |j: u64| format!("k{j:015}");
    for i in 0..20_000u64 {
        db.put(key(2 * i), i.to_le_bytes()).unwrap();
    }
    db.flush().unwrap();
    db.wait_for_background().unwrap();
    for i in (0..20_000u64).step_by(7) {
        db.delete(key(2 * i)).unwrap();
    }
    // Present, deleted, absent, repeated, and outside every table's range.
    let mut keys: Vec<String> = (0..3_000u64).map(|j| key(j * 13 % 40_000)).collect();
    keys.extend([key(4), key(4), "a".into(), "z".into()]);

    let before = db.stats();
    let singles: Vec<Option<bytes::Bytes>> = keys.iter().map(|k| db.get(k).unwrap()).collect();
    let middle = db.stats();
    let batch = db.multi_get(&keys).unwrap();
    let after = db.stats();
    assert_eq!(batch, singles);
    assert!(batch.iter().any(Option::is_some) && batch.iter().any(Option::is_none));
    for (k, got) in keys.iter().zip(&batch) {
        let j: u64 = k.get(1..).and_then(|d| d.parse().ok()).unwrap_or(1);
        let live = j.is_multiple_of(2) && !(j / 2).is_multiple_of(7) && j < 40_000;
        assert_eq!(got.is_some(), live, "{k}");
    }
    let single_checks = middle.filter_checks - before.filter_checks;
    let batch_checks = after.filter_checks - middle.filter_checks;
    assert!(single_checks > 1_000, "{single_checks}");
    assert_eq!(batch_checks, single_checks);
    assert_eq!(
        after.filter_skips - middle.filter_skips,
        middle.filter_skips - before.filter_skips
    );
    assert_eq!(
        after.data_block_reads - middle.data_block_reads,
        middle.data_block_reads - before.data_block_reads
    );
    assert!(matches!(
        db.multi_get(&[vec![0u8; siftdb::MAX_KEY_LEN + 1]]),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(db.multi_get::<&[u8]>(&[]).unwrap(), Vec::new());
}

/// A snapshot keeps showing the database as it was, through overwrites,
/// deletes, flushes and compactions, by get, multi_get and every scan.
#[test]
fn snapshots_see_a_fixed_point() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path(), small_options()).unwrap();
    let key = |i: u32| format!("key{i:05}");
    for i in 0..2_000u32 {
        db.put(key(i), format!("old{i}")).unwrap();
    }
    db.flush().unwrap();
    let snap = db.snapshot();
    for i in 0..2_000u32 {
        if i % 3 == 0 {
            db.delete(key(i)).unwrap();
        } else {
            db.put(key(i), format!("new{i}")).unwrap();
        }
    }
    db.put("key99999", "born later").unwrap();
    db.flush().unwrap();
    db.compact().unwrap();
    db.wait_for_background().unwrap();

    for i in (0..2_000u32).step_by(37) {
        let old = format!("old{i}").into_bytes();
        assert_eq!(snap.get(key(i)).unwrap().as_deref(), Some(&old[..]));
        let now = db.get(key(i)).unwrap();
        assert_eq!(now.is_none(), i % 3 == 0);
    }
    assert_eq!(snap.get("key99999").unwrap(), None);
    let keys: Vec<String> = (0..2_000u32).step_by(11).map(key).collect();
    let old_values: Vec<Option<bytes::Bytes>> = snap.multi_get(&keys).unwrap();
    assert!(old_values
        .iter()
        .zip((0..2_000u32).step_by(11))
        .all(|(v, i)| v.as_deref() == Some(format!("old{i}").as_bytes())));
    let all = collect(snap.iter());
    assert_eq!(all.len(), 2_000);
    assert!(all.iter().all(|(_, v)| v.starts_with(b"old")));
    assert_eq!(collect(snap.range(key(10)..key(20))).len(), 10);
    assert_eq!(collect(snap.prefix("key0001")).len(), 10);
    assert_eq!(collect(db.iter()).len(), 2_000 - 667 + 1);
    assert!(snap.sequence() < db.snapshot().sequence());

    // The snapshot holds the directory: reopening waits for it to go.
    drop(db);
    assert!(Db::open_with(dir.path(), small_options()).is_err());
    assert_eq!(snap.get(key(1)).unwrap().as_deref(), Some(&b"old1"[..]));
    drop(snap);
    let db = Db::open_with(dir.path(), small_options()).unwrap();
    assert_eq!(db.get(key(1)).unwrap().as_deref(), Some(&b"new1"[..]));
}

#[test]
fn filters_can_be_disabled() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path(), Options::default().bloom_bits_per_key(0.0)).unwrap();
    db.put(b"a", b"1").unwrap();
    db.flush().unwrap();
    assert_eq!(db.get(b"a").unwrap().as_deref(), Some(&b"1"[..]));
    assert_eq!(db.get(b"b").unwrap(), None);
    assert_eq!(db.stats().filter_skips, 0);
}

#[test]
fn concurrent_writers_and_readers_read_their_writes() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open_with(dir.path(), small_options()).unwrap());
    let writers: Vec<_> = (0..4u32)
        .map(|t| {
            let db = Arc::clone(&db);
            std::thread::spawn(move || {
                for i in 0..1500u32 {
                    let key = format!("t{t}-{i:05}");
                    db.put(&key, i.to_le_bytes()).unwrap();
                    assert_eq!(db.get(&key).unwrap().as_deref(), Some(&i.to_le_bytes()[..]));
                    if i % 10 == 0 {
                        let mut b = WriteBatch::new();
                        b.put(format!("t{t}-counter"), i.to_le_bytes());
                        b.put(format!("t{t}-counter-copy"), i.to_le_bytes());
                        db.write(b).unwrap();
                    }
                }
            })
        })
        .collect();
    let reader = {
        let db = Arc::clone(&db);
        std::thread::spawn(move || {
            for _ in 0..30 {
                // A batch is atomic: a scan never sees the two keys disagree.
                let entries: Vec<_> = db.prefix(b"t0-counter").map(|r| r.unwrap()).collect();
                if entries.len() == 2 {
                    assert_eq!(entries[0].1, entries[1].1);
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        })
    };
    for w in writers {
        w.join().unwrap();
    }
    reader.join().unwrap();
    db.flush().unwrap();
    db.wait_for_background().unwrap();
    for t in 0..4u32 {
        for i in (0..1500u32).step_by(7) {
            let key = format!("t{t}-{i:05}");
            assert_eq!(db.get(&key).unwrap().as_deref(), Some(&i.to_le_bytes()[..]));
        }
    }
    let stats = db.stats();
    println!("{stats:?}");
    assert!(stats.flushes > 0);
    assert!(stats.write_groups <= stats.writes);
}

#[test]
fn stats_count_bytes_put_and_bytes_written_to_tables() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path(), small_options()).unwrap();
    assert_eq!(db.stats().write_amplification(), None);
    // The active memtable's key filter: a 128th of its 16 KiB.
    assert_eq!(db.stats().memtable_filter_bytes, 128);
    let mut put = 0u64;
    for i in 0..6000u32 {
        let key = format!("key{:06}", (i * 7919) % 6000);
        let value = vec![b'v'; 40 + (i % 50) as usize];
        put += (key.len() + value.len()) as u64;
        db.put(&key, &value).unwrap();
    }
    db.delete("key000001").unwrap();
    put += "key000001".len() as u64;
    db.flush().unwrap();
    db.wait_for_background().unwrap();
    let stats = db.stats();
    assert_eq!(stats.user_bytes_written, put);
    assert!(stats.flushes > 0 && stats.compactions > 0, "{stats:?}");
    // What the flushes and compactions wrote is at least what is live now.
    let live: u64 = stats.level_bytes.iter().sum();
    assert!(stats.flush_bytes_written > 0 && stats.compaction_bytes_written > 0);
    assert!(
        stats.flush_bytes_written + stats.compaction_bytes_written >= live,
        "{stats:?}"
    );
    assert!(stats.compaction_bytes_read > 0);
    let amplification = stats.write_amplification().unwrap();
    let expected = (stats.flush_bytes_written + stats.compaction_bytes_written) as f64 / put as f64;
    assert!((amplification - expected).abs() < 1e-9);
    assert!(amplification > 0.5, "{amplification}");
    // The one memory figure is the sum of the parts it names.
    let parts = stats.block_cache_bytes
        + stats.filter_bytes
        + stats.range_filter_bytes
        + stats.index_bytes
        + stats.spare_filter_bytes
        + (stats.memtable_bytes + stats.immutable_memtable_bytes + stats.memtable_filter_bytes)
            as u64;
    assert_eq!(stats.memory_bytes(), parts);
    assert!(stats.filter_bytes > 0 && stats.index_bytes > 0, "{stats:?}");
}

#[test]
fn write_stalls_are_counted_and_timed() {
    // Tiny memtables and a level 0 that stops writes at 2 tables: writes
    // come much faster than flushes and compactions, so writers stall.
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(
        dir.path(),
        Options::default()
            .memtable_bytes(4096)
            .level0_compaction_trigger(2)
            .level0_stop_writes(2),
    )
    .unwrap();
    let mut puts = 0u64;
    while db.stats().write_stalls == 0 {
        assert!(puts < 200_000, "no write ever stalled");
        for _ in 0..100 {
            db.put(format!("key{puts:08}"), [7u8; 100]).unwrap();
            puts += 1;
        }
    }
    let stats = db.stats();
    // Every stall counts at least a microsecond.
    assert!(stats.write_stall_micros >= stats.write_stalls, "{stats:?}");
    assert_eq!(stats.user_bytes_written, puts * (11 + 100));
}

/// A quiet keyspace (nothing in its memtables) merges level 0 into level 1
/// from `level0_quiet_trigger` tables on, and `wait_for_background` waits
/// for it; a quiet trigger at the busy one turns that off. Every key reads
/// back either way. (A busy keyspace's trigger: the unit test beside
/// `most_urgent`; a test here could not hold the memtable non-empty at the
/// moment a flush completes.)
#[test]
fn a_quiet_keyspace_merges_level0_from_the_quiet_trigger() {
    let level0 = |db: &Db| db.stats().level_tables.first().copied().unwrap_or(0);
    let fill = |db: &Db, round: u32| {
        for i in 0..200u32 {
            db.put(format!("key{i:05}"), round.to_be_bytes()).unwrap();
        }
    };
    let opts = Options::default()
        .level0_compaction_trigger(4)
        .level0_quiet_trigger(2);

    // Quiet: the second flush that leaves the memtable empty merges both
    // level-0 tables down before `wait_for_background` returns.
    let quiet_dir = tempfile::tempdir().unwrap();
    let quiet = Db::open_with(quiet_dir.path(), opts.clone()).unwrap();
    fill(&quiet, 0);
    quiet.flush().unwrap();
    quiet.wait_for_background().unwrap();
    assert_eq!(level0(&quiet), 1, "one table is below the quiet trigger");
    fill(&quiet, 1);
    quiet.flush().unwrap();
    quiet.wait_for_background().unwrap();
    let stats = quiet.stats();
    assert_eq!(stats.level_tables.first().copied(), Some(0), "{stats:?}");
    assert!(
        stats.level_tables.get(1).copied().unwrap_or(0) > 0,
        "{stats:?}"
    );

    // Turned off (quiet trigger at the busy one): two tables stay.
    let off_dir = tempfile::tempdir().unwrap();
    let off = Db::open_with(off_dir.path(), opts.level0_quiet_trigger(4)).unwrap();
    for round in 0..2 {
        fill(&off, round);
        off.flush().unwrap();
        off.wait_for_background().unwrap();
    }
    assert_eq!(level0(&off), 2, "{:?}", off.stats().level_tables);

    for db in [&quiet, &off] {
        for i in 0..200u32 {
            let value = db.get(format!("key{i:05}")).unwrap();
            assert_eq!(value.as_deref(), Some(&1u32.to_be_bytes()[..]));
        }
    }
}

#[test]
fn the_quiet_trigger_is_at_least_two() {
    let dir = tempfile::tempdir().unwrap();
    let err = Db::open_with(dir.path(), Options::default().level0_quiet_trigger(1)).unwrap_err();
    assert!(matches!(err, Error::InvalidArgument(_)), "{err:?}");
}
