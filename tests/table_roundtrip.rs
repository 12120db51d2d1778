//! Round trips of random sorted tables against an in-memory model: sizes
//! from one entry to many blocks, user keys of 0 to 1 KiB, values up to
//! 1 MiB, several versions and tombstones per key, every filter setting.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use std::cmp::Ordering;

use siftdb::filter::FingerprintBits;
use siftdb::internals::fs::OsFileSystem;
use siftdb::internals::key::{
    compare_internal_keys, internal_key, parse_internal_key, SeqNo, ValueKind,
};
use siftdb::internals::table::scan_filters::PrefixProbe;
use siftdb::internals::table::TableFormat;
use siftdb::internals::table::{
    LookupKey, ReadContext, ReadCounters, ReadSettings, Table, TableBuilder, TableOptions,
    TableValue,
};
use siftdb::Compression;
use siftdb::Error;
use siftdb::PrefixExtractor;
use siftdb_testkit::tables::build_table;
use siftdb_testkit::SplitMix64;
use std::ops::Bound;

type Entries = Vec<(Vec<u8>, Vec<u8>)>;

fn random_user_key(rng: &mut SplitMix64) -> Vec<u8> {
    let len = match rng.below(100) {
        0..=69 => rng.below(12) as usize,
        70..=94 => 12 + rng.below(52) as usize,
        _ => rng.below(1025) as usize,
    };
    // A small alphabet, so keys share prefixes and collide into versions.
    (0..len).map(|_| b'a' + rng.below(4) as u8).collect()
}

fn random_value(rng: &mut SplitMix64, big_values: &mut u32) -> Vec<u8> {
    if *big_values > 0 && rng.chance(2) {
        *big_values -= 1;
        return rng.bytes(1 << 20);
    }
    let len = if rng.chance(5) {
        rng.below(8192)
    } else {
        rng.below(100)
    };
    rng.bytes(len as usize)
}

/// `n` entries in internal-key order, with unique sequence numbers.
fn random_entries(rng: &mut SplitMix64, n: usize, mut big_values: u32) -> Entries {
    let mut entries: Entries = Vec::with_capacity(n);
    let mut user_keys: Vec<Vec<u8>> = Vec::new();
    for seq in 1..=n as u64 {
        let user_key = if !user_keys.is_empty() && rng.chance(25) {
            user_keys[rng.below(user_keys.len() as u64) as usize].clone()
        } else {
            let key = random_user_key(rng);
            user_keys.push(key.clone());
            key
        };
        let kind = if rng.chance(15) {
            ValueKind::Delete
        } else if rng.chance(10) {
            ValueKind::Merge
        } else {
            ValueKind::Put
        };
        let value = match kind {
            ValueKind::Put | ValueKind::Merge => random_value(rng, &mut big_values),
            // Not generated: a blob pointer's value is no random value.
            ValueKind::Delete | ValueKind::Blob => Vec::new(),
        };
        entries.push((internal_key(&user_key, SeqNo(seq), kind), value));
    }
    entries.sort_by(|a, b| compare_internal_keys(&a.0, &b.0));
    entries
}

/// The model's answer: the newest version of `user_key` with seq ≤ snapshot.
fn model_get(entries: &Entries, user_key: &[u8], snapshot: SeqNo) -> Option<TableValue> {
    entries.iter().find_map(|(key, value)| {
        let parsed = parse_internal_key(key).unwrap();
        (parsed.user_key == user_key && parsed.seq <= snapshot).then(|| match parsed.kind {
            ValueKind::Put => TableValue::Put(value.clone().into()),
            ValueKind::Delete => TableValue::Deleted,
            ValueKind::Merge => TableValue::Merge,
            ValueKind::Blob => unreachable!("not generated"),
        })
    })
}

fn check_table(table: &Table, entries: &Entries, rng: &mut SplitMix64) {
    let properties = table.properties();
    assert_eq!(properties.entries, entries.len() as u64);
    assert_eq!(table.smallest(), &entries[0].0[..]);
    assert_eq!(table.largest(), &entries[entries.len() - 1].0[..]);
    assert!(table.verify().is_empty(), "{:?}", table.verify());

    // A full scan returns exactly the entries.
    let mut it = table.iter();
    it.seek_to_first().unwrap();
    for (key, value) in entries {
        assert!(it.valid());
        assert_eq!(it.key(), &key[..]);
        assert_eq!(&it.value()[..], &value[..]);
        it.next().unwrap();
    }
    assert!(!it.valid());

    // Gets of every version at its own sequence, at the newest, and at a
    // random snapshot; seeks to each key.
    let sample = entries.len().min(400);
    for _ in 0..sample {
        let (key, _) = &entries[rng.below(entries.len() as u64) as usize];
        let parsed = parse_internal_key(key).unwrap();
        let snapshot = SeqNo(rng.below(entries.len() as u64 + 2));
        for at in [parsed.seq, SeqNo::MAX, snapshot] {
            let got = table.get(&LookupKey::new(parsed.user_key, at)).unwrap();
            assert_eq!(
                got,
                model_get(entries, parsed.user_key, at),
                "get at {at:?}"
            );
        }
        it.seek(key).unwrap();
        assert_eq!(it.key(), &key[..]);
    }

    // Absent keys and random seek targets.
    for _ in 0..200 {
        let probe = random_user_key(rng);
        let want = model_get(entries, &probe, SeqNo::MAX);
        assert_eq!(table.get_key(&probe).unwrap(), want);
        let target = internal_key(
            &probe,
            SeqNo(rng.below(entries.len() as u64 + 2)),
            ValueKind::Put,
        );
        it.seek(&target).unwrap();
        let first = entries
            .iter()
            .find(|(k, _)| compare_internal_keys(k, &target) != Ordering::Less);
        assert_eq!(
            it.valid().then(|| it.key().to_vec()),
            first.map(|(k, _)| k.clone())
        );
    }
}

#[test]
fn random_tables_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = SplitMix64::new(2024);
    let sizes = [1usize, 1, 2, 7, 60, 300, 1500, 4000];
    let block_sizes = [64usize, 512, 4096];
    let mut tables = 0;
    for (round, &n) in sizes.iter().cycle().take(24).enumerate() {
        let options = TableOptions {
            block_size: block_sizes[round % 3],
            bloom_bits_per_key: [10.0, 0.0, 3.5][round % 3 / 2 + round % 2],
            static_filter: [
                None,
                Some(FingerprintBits::Eight),
                Some(FingerprintBits::Sixteen),
            ][round / 3 % 3],
            restart_interval: [1, 4, 16][round % 3],
            // Level 0's tables are written without page padding.
            page_aligned_blocks: round % 4 != 2,
            compression: [
                Compression::Lz4,
                Compression::None,
                Compression::zstd(1).unwrap(),
                Compression::zstd(3).unwrap(),
            ][round % 4],
            // zstd with a dictionary trained per table in some rounds.
            zstd_dictionary_bytes: if round % 4 == 3 { 1024 } else { 0 },
            // Format 3 in some rounds: prefixes in the filter (some without
            // whole keys) and a range filter.
            prefix_extractor: (round % 4 == 1).then(|| PrefixExtractor::fixed(2).unwrap()),
            whole_key_filtering: round % 8 != 5,
            range_filter_bits_per_key: [0.0, 16.0, 4.0][round % 3],
            // A keyspace's tables record it in their properties.
            keyspace: (round % 5 == 3).then(|| siftdb::internals::table::TableKeyspace {
                id: 7,
                name: "seven".to_string(),
            }),
        };
        // Two tables carry 1 MiB values.
        let big_values = if round == 5 || round == 14 { 3 } else { 0 };
        let entries = random_entries(&mut rng, n, big_values);
        let name = format!("{round:06}.sst");
        let (path, info) = build_table(dir.path(), &name, &options, &entries);
        assert_eq!(info.entries, n as u64);
        assert_eq!(info.file_size, std::fs::metadata(&path).unwrap().len());
        // Through a block cache of a few blocks, of none, and the map.
        let settings = [
            ReadSettings {
                block_cache_bytes: 3 * 4096,
                ..ReadSettings::default()
            },
            ReadSettings {
                block_cache_bytes: 0,
                ..ReadSettings::default()
            },
            ReadSettings {
                mmap_reads: true,
                ..ReadSettings::default()
            },
        ][round % 3];
        let context = ReadContext::with_prefix_extractor(
            OsFileSystem::shared(),
            settings,
            ReadCounters::new(),
            options.prefix_extractor.clone(),
        );
        let table = Table::open(&context, &path).unwrap();
        assert_eq!(table.name(), name);
        check_table(&table, &entries, &mut rng);
        check_scan_filters(&table, &entries, &options);
        tables += 1;
    }
    println!("{tables} random tables round-tripped");
}

/// Every key the table holds passes its scan filters: the range filter for
/// the key alone and for a range around it, the prefix filter for its prefix.
fn check_scan_filters(table: &Table, entries: &Entries, options: &TableOptions) {
    let range_filter = options.range_filter_bits_per_key > 0.0;
    assert_eq!(table.range_filter_view().is_some(), range_filter);
    let prefixes = options.prefix_extractor.is_some() && options.bloom_bits_per_key > 0.0;
    // Every table is written in the current format, scan filters or not.
    let format = table.footer().format;
    assert_eq!(format, TableFormat::CURRENT, "{format:?}");
    for (key, _) in entries {
        let user_key = parse_internal_key(key).unwrap().user_key;
        assert!(table.scan_may_match(None, Bound::Included(user_key), Bound::Included(user_key)));
        let mut after = user_key.to_vec();
        after.push(0);
        assert!(table.scan_may_match(
            None,
            Bound::Included(b"".as_slice()),
            Bound::Excluded(&after)
        ));
        if let Some(extractor) = &options.prefix_extractor {
            if let Some(prefix) = extractor.prefix(user_key) {
                let probe = PrefixProbe::new(extractor, prefix);
                assert!(table.scan_may_match(Some(&probe), Bound::Unbounded, Bound::Unbounded));
            }
        }
    }
    let stats = table.counters().snapshot();
    assert_eq!(stats.range_filter_skips + stats.prefix_filter_skips, 0);
    assert_eq!(stats.range_filter_checks > 0, range_filter);
    assert_eq!(
        stats.prefix_filter_checks > 0,
        prefixes
            && table
                .properties()
                .prefix_filter
                .as_ref()
                .is_some_and(|p| p.prefixes > 0)
    );
}

#[test]
fn one_mib_values_and_one_kib_keys_round_trip() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = SplitMix64::new(7);
    let mut entries: Entries = (0..6u64)
        .map(|i| {
            let mut user_key = rng.bytes(1024);
            user_key[0] = i as u8;
            (
                internal_key(&user_key, SeqNo(i + 1), ValueKind::Put),
                rng.bytes(1 << 20),
            )
        })
        .collect();
    entries.push((
        internal_key(b"", SeqNo(9), ValueKind::Put),
        b"empty key".to_vec(),
    ));
    entries.sort_by(|a, b| compare_internal_keys(&a.0, &b.0));
    let (path, _) = build_table(dir.path(), "big.sst", &TableOptions::default(), &entries);
    let table = Table::open_path(&path).unwrap();
    assert_eq!(table.data_block_handles().len(), entries.len());
    check_table(&table, &entries, &mut rng);
}

#[test]
fn a_table_of_zero_entries_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("empty.sst");
    let builder = TableBuilder::create(&OsFileSystem, &path, &TableOptions::default()).unwrap();
    assert!(matches!(builder.finish(), Err(Error::InvalidArgument(_))));
    // What is left behind is not a table.
    assert!(Table::open_path(&path).unwrap_err().is_corruption());
}

#[test]
fn out_of_order_input_is_an_error_and_the_table_stays_valid() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("order.sst");
    let mut builder = TableBuilder::create(&OsFileSystem, &path, &TableOptions::default()).unwrap();
    builder
        .add(&internal_key(b"b", SeqNo(2), ValueKind::Put), b"1")
        .unwrap();
    let refused = [
        internal_key(b"a", SeqNo(3), ValueKind::Put),
        internal_key(b"b", SeqNo(2), ValueKind::Put),
        internal_key(b"b", SeqNo(3), ValueKind::Put),
    ];
    for key in refused {
        assert!(matches!(
            builder.add(&key, b"x"),
            Err(Error::InvalidArgument(_))
        ));
    }
    builder
        .add(&internal_key(b"c", SeqNo(1), ValueKind::Put), b"2")
        .unwrap();
    assert_eq!(builder.entries(), 2);
    builder.finish().unwrap();
    let table = Table::open_path(&path).unwrap();
    assert!(table.verify().is_empty());
    assert_eq!(table.get_key(b"a").unwrap(), None);
    assert_eq!(
        table.get_key(b"b").unwrap(),
        Some(TableValue::Put("1".into()))
    );
}
