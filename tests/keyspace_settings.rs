//! A keyspace's settings given to `Db::keyspace_with` are stored in the
//! manifest: after a reopen `Db::keyspace` gives the keyspace with them (the
//! tables it builds say so: block size, compression, filter bits, prefix
//! extractor, range filter), later calls change only the fields they give,
//! code (a custom prefix extractor) is not stored, a read-only open writes
//! nothing, a checkpoint carries them, and a repair without the manifest
//! recovers what the tables record of them.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use std::path::Path;

use siftdb::internals::inspect::{inspect_table, FilterSummary, RangeFilterSummary, TableSummary};
use siftdb::{Compression, Db, Keyspace, KeyspaceOptions, Options, PrefixExtractor};

const KEYS: u32 = 2000;

/// Writes `KEYS` keys of 100 compressible bytes into `keyspace`, flushes,
/// and sums up its one newest table.
fn fill_and_inspect(db: &Db, keyspace: &Keyspace, dir: &Path) -> TableSummary {
    for i in 0..KEYS {
        keyspace.put(format!("user{i:06}"), [b'v'; 100]).unwrap();
    }
    db.flush().unwrap();
    newest_table(keyspace, dir)
}

fn newest_table(keyspace: &Keyspace, dir: &Path) -> TableSummary {
    let tables = keyspace.live_tables();
    let newest = tables.iter().map(|t| t.file_number).max().unwrap();
    inspect_table(&dir.join(format!("{newest:06}.sst"))).unwrap()
}

fn tuned() -> KeyspaceOptions {
    KeyspaceOptions::new()
        .block_size(1024)
        .compression(Compression::None)
        .bloom_bits_per_key(20.0)
        .prefix_extractor(PrefixExtractor::fixed(4).unwrap())
        .range_filter_bits_per_key(16.0)
}

/// The table was built with `tuned()`'s settings.
fn assert_tuned(table: &TableSummary) {
    // 2000 × ~115 bytes: ~225 blocks of 1 KiB (57 of the default 4 KiB).
    assert!(table.data_blocks > 150, "{} blocks", table.data_blocks);
    assert!(
        table.data_bytes > u64::from(KEYS) * 100,
        "uncompressed: {} bytes",
        table.data_bytes
    );
    match &table.filter {
        FilterSummary::Present(f) => assert_eq!(f.configured_bits_per_key, 20.0),
        other => panic!("{other:?}"),
    }
    let prefix = table.prefix_filter.as_ref().expect("a prefix filter");
    assert_eq!(prefix.extractor, "siftdb.fixed:4");
    match &table.range_filter {
        RangeFilterSummary::Present {
            configured_bits_per_key,
            ..
        } => assert_eq!(*configured_bits_per_key, 16.0),
        other => panic!("{other:?}"),
    }
}

/// The table was built with the database's defaults.
fn assert_default(table: &TableSummary) {
    assert!(table.data_blocks < 100, "{} blocks", table.data_blocks);
    assert!(table.data_bytes < u64::from(KEYS) * 100);
    assert!(table.prefix_filter.is_none());
}

#[test]
fn settings_given_once_last_across_reopens() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path()).unwrap();
        db.keyspace_with("tuned", tuned()).unwrap();
        db.keyspace("plain").unwrap();
    }
    let db = Db::open(dir.path()).unwrap();
    let tuned_keyspace = db.keyspace("tuned").unwrap();
    assert_tuned(&fill_and_inspect(&db, &tuned_keyspace, dir.path()));
    let plain = db.keyspace("plain").unwrap();
    assert_default(&fill_and_inspect(&db, &plain, dir.path()));
}

#[test]
fn recovery_builds_a_keyspaces_tables_with_its_settings() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path()).unwrap();
        let k = db.keyspace_with("tuned", tuned()).unwrap();
        for i in 0..KEYS {
            k.put(format!("user{i:06}"), [b'v'; 100]).unwrap();
        }
        // Closed without a flush: the next open replays the log into a
        // table of its own.
    }
    let db = Db::open(dir.path()).unwrap();
    let k = db.keyspace("tuned").unwrap();
    assert_eq!(k.live_tables().len(), 1);
    assert_tuned(&newest_table(&k, dir.path()));
    assert_eq!(
        k.get(format!("user{:06}", KEYS - 1)).unwrap().as_deref(),
        Some(&[b'v'; 100][..])
    );
    // The recovered table records its keyspace: a repair without the
    // manifest puts it back there.
    drop((k, db));
    std::fs::remove_file(dir.path().join("MANIFEST")).unwrap();
    siftdb::repair(dir.path(), siftdb::RepairOptions::default()).unwrap();
    let db = Db::open(dir.path()).unwrap();
    assert_eq!(db.keyspaces(), ["default", "tuned"]);
    let k = db.keyspace("tuned").unwrap();
    assert_eq!(
        k.get(format!("user{:06}", KEYS - 1)).unwrap().as_deref(),
        Some(&[b'v'; 100][..])
    );
    // What the tables record of the settings is stored again: the
    // keyspace's next tables have its fixed extractor (prefix entries
    // beside whole keys) and its range filter; the rest is the database's
    // until given again.
    let table = fill_and_inspect(&db, &k, dir.path());
    let prefix = table.prefix_filter.as_ref().expect("a prefix filter");
    assert_eq!(prefix.extractor, "siftdb.fixed:4");
    assert!(prefix.whole_keys);
    match &table.range_filter {
        RangeFilterSummary::Present {
            configured_bits_per_key,
            ..
        } => assert_eq!(*configured_bits_per_key, 16.0),
        other => panic!("{other:?}"),
    }
    assert!(
        table.data_blocks < 100,
        "default blocks: {}",
        table.data_blocks
    );
}

#[test]
fn a_later_call_changes_only_the_fields_it_gives() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path()).unwrap();
        db.keyspace_with("k", tuned()).unwrap();
    }
    {
        let db = Db::open(dir.path()).unwrap();
        // A merge operator (code) and one data setting: the others stay.
        db.keyspace_with(
            "k",
            KeyspaceOptions::new()
                .compression(Compression::Lz4)
                .merge_operator(std::sync::Arc::new(Concat)),
        )
        .unwrap();
    }
    let db = Db::open(dir.path()).unwrap();
    let k = db.keyspace("k").unwrap();
    let table = fill_and_inspect(&db, &k, dir.path());
    assert!(
        table.data_blocks > 150,
        "block size kept: {}",
        table.data_blocks
    );
    assert!(
        table.data_bytes < u64::from(KEYS) * 100,
        "LZ4 now: {} bytes",
        table.data_bytes
    );
    assert_eq!(
        table.prefix_filter.map(|p| p.extractor).as_deref(),
        Some("siftdb.fixed:4")
    );
    // The merge operator was not stored: a merge is refused until it is
    // given again.
    assert!(k.merge("m", "x").is_err());
}

struct Concat;

impl siftdb::MergeOperator for Concat {
    fn merge(&self, _key: &[u8], existing: Option<&[u8]>, operands: &[&[u8]]) -> Option<Vec<u8>> {
        let mut out = existing.unwrap_or_default().to_vec();
        for operand in operands {
            out.extend_from_slice(operand);
        }
        Some(out)
    }
}

#[test]
fn a_custom_prefix_extractor_is_given_at_each_open() {
    let dir = tempfile::tempdir().unwrap();
    let custom =
        PrefixExtractor::custom("first-two", |k: &[u8]| (k.len() >= 2).then_some(2)).unwrap();
    let db_opts = || Options::default().prefix_extractor(PrefixExtractor::fixed(3).unwrap());
    {
        let db = Db::open_with(dir.path(), db_opts()).unwrap();
        let k = db
            .keyspace_with("k", KeyspaceOptions::new().prefix_extractor(custom.clone()))
            .unwrap();
        let table = fill_and_inspect(&db, &k, dir.path());
        assert_eq!(
            table.prefix_filter.map(|p| p.extractor).as_deref(),
            Some("first-two")
        );
    }
    let db = Db::open_with(dir.path(), db_opts()).unwrap();
    let k = db.keyspace("k").unwrap();
    // Not stored, and not replaced by the database's extractor either.
    let table = fill_and_inspect(&db, &k, dir.path());
    assert!(table.prefix_filter.is_none(), "{:?}", table.prefix_filter);
    let k = db
        .keyspace_with("k", KeyspaceOptions::new().prefix_extractor(custom))
        .unwrap();
    let table = fill_and_inspect(&db, &k, dir.path());
    assert_eq!(
        table.prefix_filter.map(|p| p.extractor).as_deref(),
        Some("first-two")
    );
}

#[test]
fn a_read_only_open_applies_settings_without_writing() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path()).unwrap();
        db.keyspace("k").unwrap();
    }
    let manifest = std::fs::read(dir.path().join("MANIFEST")).unwrap();
    {
        let db = Db::open_read_only(dir.path()).unwrap();
        db.keyspace_with("k", tuned()).unwrap();
    }
    assert_eq!(
        std::fs::read(dir.path().join("MANIFEST")).unwrap(),
        manifest
    );
    let db = Db::open(dir.path()).unwrap();
    let k = db.keyspace("k").unwrap();
    assert_default(&fill_and_inspect(&db, &k, dir.path()));
}

#[test]
fn a_checkpoint_carries_the_settings() {
    let dir = tempfile::tempdir().unwrap();
    let copy = tempfile::tempdir().unwrap();
    let copy_dir = copy.path().join("copy");
    {
        let db = Db::open(dir.path()).unwrap();
        db.keyspace_with("k", tuned()).unwrap();
        db.checkpoint(&copy_dir).unwrap();
    }
    let db = Db::open(&copy_dir).unwrap();
    let k = db.keyspace("k").unwrap();
    assert_tuned(&fill_and_inspect(&db, &k, &copy_dir));
}

#[test]
fn invalid_settings_are_refused_and_nothing_is_stored() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path()).unwrap();
    db.keyspace_with("k", KeyspaceOptions::new().block_size(1024))
        .unwrap();
    assert!(db
        .keyspace_with("k", KeyspaceOptions::new().block_size(10))
        .is_err());
    assert!(db
        .keyspace_with("new", KeyspaceOptions::new().memtable_bytes(10))
        .is_err());
    assert_eq!(db.keyspaces(), ["default", "k"]);
    drop(db);
    let db = Db::open(dir.path()).unwrap();
    let k = db.keyspace("k").unwrap();
    let table = fill_and_inspect(&db, &k, dir.path());
    assert!(table.data_blocks > 150, "{}", table.data_blocks);
}

/// Tables of a keyspace whose prefix extractor is its own (the database has
/// none) answer for prefixes: a prefix scan skips the tables that cannot
/// hold the prefix, and a `get` with prefix-only filters is ruled out by
/// them — in the open that built the tables and after a reopen, for a
/// fixed extractor (stored) and a custom one (given again at the reopen,
/// after the tables were opened).
#[test]
fn a_keyspaces_own_prefix_extractor_serves_its_tables_filters() {
    let fixed = || PrefixExtractor::fixed(4).unwrap();
    let custom =
        || PrefixExtractor::custom("first-four", |key| (key.len() >= 4).then_some(4)).unwrap();
    for extractor in [fixed(), custom()] {
        own_prefix_extractor_serves_filters(extractor);
    }
}

fn own_prefix_extractor_serves_filters(extractor: PrefixExtractor) {
    let dir = tempfile::tempdir().unwrap();
    let options = || {
        KeyspaceOptions::new()
            .prefix_extractor(extractor.clone())
            .whole_key_filtering(false)
    };
    let name = extractor.name().to_owned();
    // Every table's key range holds `cccc`, which none holds: each is
    // ruled out by its filter, for the scan and for the get.
    let check = |db: &Db, keyspace: &Keyspace| {
        // A compaction the flushes or the open started would change the
        // tables between the count and the reads.
        db.wait_for_background().unwrap();
        let tables = keyspace.live_tables().len() as u64;
        assert!(tables > 0);
        let before = db.stats();
        assert_eq!(keyspace.prefix("cccc").count(), 0);
        let scanned = db.stats();
        assert_eq!(keyspace.get("cccc0001").unwrap(), None);
        let got = db.stats();
        assert_eq!(
            scanned.prefix_filter_skips - before.prefix_filter_skips,
            tables,
            "{name}: the scan of an absent prefix skipped every table: {scanned:?}"
        );
        assert_eq!(
            got.filter_skips - scanned.filter_skips,
            tables,
            "{name}: the get of an absent prefix was ruled out by every table's filter: {got:?}"
        );
        assert_eq!(
            keyspace.get("aaaa0001").unwrap().as_deref(),
            Some(&b"a"[..])
        );
        assert_eq!(keyspace.prefix("bbbb").count(), 100);
    };
    {
        let db = Db::open_with(dir.path(), two_tables_stay()).unwrap();
        let keyspace = db.keyspace_with("tuned", options()).unwrap();
        for prefixes in [["aaaa", "dddd"], ["bbbb", "eeee"]] {
            for prefix in prefixes {
                for i in 0..100 {
                    keyspace
                        .put(format!("{prefix}{i:04}"), &prefix[..1])
                        .unwrap();
                }
            }
            db.flush().unwrap();
        }
        assert_eq!(keyspace.live_tables().len(), 2);
        check(&db, &keyspace);
        drop(keyspace); // a keyspace handle holds the database open
        db.close().unwrap();
    }
    let db = Db::open_with(dir.path(), two_tables_stay()).unwrap();
    let keyspace = db.keyspace_with("tuned", options()).unwrap();
    check(&db, &keyspace);
}

/// Options under which the test's two flushed tables stay two: a quiet
/// keyspace's level 0 is not merged below the busy trigger (4 tables), so
/// no background compaction changes the tables a check counts.
fn two_tables_stay() -> Options {
    Options::default().level0_quiet_trigger(8)
}
