//! Scans past prefix and range filters, against a `BTreeMap`: random puts,
//! deletes, flushes, compactions and reopenings with a different prefix
//! extractor (fixed, custom, none), whole-key filtering on or off, range
//! filters of different widths or none, and point filters on or off (of
//! bits chosen per level by a filter policy, or none on the last level), so
//! a database holds tables of every mix; after each step, random prefix scans
//! and bounded ranges (every kind of bound), on the database and on a
//! snapshot, and gets and multi-gets, must return exactly the model's
//! answer. The filters must also have ruled tables out (else the test
//! would prove nothing about them).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use std::collections::BTreeMap;
use std::ops::Bound;

use siftdb::PrefixExtractor;
use siftdb::{Db, FilterPolicy, Options, Stats};
use siftdb_testkit::{FaultFs, SplitMix64};

/// The database's directory on the in-memory file system (no fsync waits).
const DB: &str = "/scan-filters";

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// Bytes keys are made of: few, so prefixes repeat and ranges hit them, and
/// the extremes, so successors and bounds meet their edge cases.
const ALPHABET: [u8; 6] = [0x00, b':', b'a', b'b', b'c', 0xff];

fn random_key(rng: &mut SplitMix64, max_len: usize) -> Vec<u8> {
    let len = rng.index(max_len + 1);
    (0..len)
        .map(|_| ALPHABET[rng.index(ALPHABET.len())])
        .collect()
}

/// A key of the data: mostly 3..=6 bytes, sometimes shorter than a prefix.
fn data_key(rng: &mut SplitMix64) -> Vec<u8> {
    let mut key = random_key(rng, 2);
    if rng.chance(85) {
        key.extend(random_key(rng, 4));
        if key.len() < 3 {
            key.extend(b"aa");
        }
    }
    key
}

fn up_to_colon() -> PrefixExtractor {
    PrefixExtractor::custom("test.up-to-colon", |key| {
        key.iter().position(|&b| b == b':').map(|at| at + 1)
    })
    .unwrap()
}

/// One of the configurations the database is reopened with.
fn options(rng: &mut SplitMix64, fs: &FaultFs) -> (Options, String) {
    let extractor = match rng.below(5) {
        0 => None,
        1 => Some(PrefixExtractor::fixed(1).unwrap()),
        2 | 3 => Some(PrefixExtractor::fixed(2).unwrap()),
        _ => Some(up_to_colon()),
    };
    let whole_keys = rng.chance(60);
    let range_bits = [0.0, 3.0, 10.0, 16.0, 16.0][rng.index(5)];
    // The point filter that holds the prefixes, sized per level by a
    // policy, or none (on every level, or on the last one). These tables
    // are too small for a binary fuse filter to beat a Bloom filter: see
    // `binary_fuse_filters_hold_prefixes_and_rule_tables_out`.
    let policy = match rng.below(20) {
        0..=2 => FilterPolicy::bits_per_key(0.0),
        3..=5 => FilterPolicy::level_aware(10.0),
        6 => FilterPolicy::level_aware(10.0).optimize_for_hits(true),
        _ => FilterPolicy::bits_per_key(10.0),
    };
    let description = format!(
        "extractor {:?}, whole keys {whole_keys}, range bits {range_bits}, filter policy {policy}",
        extractor.as_ref().map(PrefixExtractor::name)
    );
    let mut opts = Options::default()
        .file_system(fs.shared())
        .memtable_bytes(4096)
        .block_size(256)
        .level0_compaction_trigger(3)
        .level0_quiet_trigger(3)
        .level1_bytes(16 << 10)
        .table_target_bytes(4096)
        .filter_policy(policy)
        .whole_key_filtering(whole_keys)
        .range_filter_bits_per_key(range_bits)
        // No block cache at times: every block a get needs then comes from
        // the file, past the range filter's check (`Table::get`).
        .block_cache_bytes(if rng.chance(30) { 0 } else { 64 << 20 });
    // Reads as slow as a device's at times: gets then ask the range filter
    // before a data block's file read (`Table::get`).
    fs.set_read_latency(rng.chance(20).then(|| std::time::Duration::from_micros(15)));
    if let Some(extractor) = extractor {
        opts = opts.prefix_extractor(extractor);
    }
    (opts, description)
}

fn collect(scan: siftdb::DbIterator) -> Vec<(Vec<u8>, Vec<u8>)> {
    scan.map(|r| {
        let (k, v) = r.unwrap();
        (k.to_vec(), v.to_vec())
    })
    .collect()
}

fn model_range(
    model: &Model,
    start: &Bound<Vec<u8>>,
    end: &Bound<Vec<u8>>,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let empty = match (start, end) {
        (Bound::Included(a), Bound::Included(b)) => a > b,
        (Bound::Included(a) | Bound::Excluded(a), Bound::Excluded(b))
        | (Bound::Excluded(a), Bound::Included(b)) => a >= b,
        _ => false,
    };
    if empty {
        return Vec::new();
    }
    model
        .range((start.clone(), end.clone()))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn random_bound(rng: &mut SplitMix64, near: &[u8]) -> Bound<Vec<u8>> {
    let mut key = near.to_vec();
    match rng.below(4) {
        0 => key.push(ALPHABET[rng.index(ALPHABET.len())]),
        1 => {
            key.pop();
        }
        _ => {}
    }
    match rng.below(9) {
        0 => Bound::Unbounded,
        1..=4 => Bound::Included(key),
        _ => Bound::Excluded(key),
    }
}

/// Random scans of every kind: each against the model.
fn check_scans(rng: &mut SplitMix64, db: &Db, model: &Model, context: &str) {
    let snapshot = db.snapshot();
    for _ in 0..40 {
        // A prefix of a present key, or any short string.
        let base = match model.keys().nth(rng.index(model.len().max(1))) {
            Some(k) if rng.chance(70) => k.clone(),
            _ => data_key(rng),
        };
        let prefix = base[..rng.index(base.len() + 1).min(base.len())].to_vec();
        let want: Vec<_> = model
            .range(prefix.clone()..)
            .take_while(|(k, _)| k.starts_with(&prefix))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        assert_eq!(
            collect(db.prefix(&prefix)),
            want,
            "prefix {prefix:?}; {context}"
        );
        assert_eq!(
            collect(snapshot.prefix(&prefix)),
            want,
            "snapshot prefix {prefix:?}; {context}"
        );

        // A short range near a key (mostly empty gaps), or any two bounds.
        let start = random_bound(rng, &base);
        let end = if rng.chance(70) {
            random_bound(rng, &base)
        } else {
            let near = data_key(rng);
            random_bound(rng, &near)
        };
        let want = model_range(model, &start, &end);
        let got = collect(db.range((start.clone(), end.clone())));
        assert_eq!(got, want, "range {start:?}..{end:?}; {context}");
        let got = collect(snapshot.range((start.clone(), end.clone())));
        assert_eq!(got, want, "snapshot range {start:?}..{end:?}; {context}");
    }
    // Gets and multi-gets: prefix-only filters must not lose a key either.
    let keys: Vec<Vec<u8>> = (0..30).map(|_| data_key(rng)).collect();
    let answers = db.multi_get(&keys).unwrap();
    for (key, answer) in keys.iter().zip(answers) {
        let want = model.get(key);
        assert_eq!(
            answer.as_deref(),
            want.map(Vec::as_slice),
            "multi_get {key:?}; {context}"
        );
        assert_eq!(
            db.get(key).unwrap().as_deref(),
            want.map(Vec::as_slice),
            "get {key:?}; {context}"
        );
    }
}

/// Adds the scan filter counters of `s` to `totals`.
fn add(totals: &mut Stats, s: Stats) {
    totals.prefix_filter_checks += s.prefix_filter_checks;
    totals.prefix_filter_skips += s.prefix_filter_skips;
    totals.range_filter_checks += s.range_filter_checks;
    totals.range_filter_skips += s.range_filter_skips;
    totals.range_filter_point_skips += s.range_filter_point_skips;
    totals.scans += s.scans;
    totals.scan_tables += s.scan_tables;
}

fn run(seed: u64, steps: usize) -> Stats {
    let fs = FaultFs::new();
    let mut rng = SplitMix64::new(seed);
    let mut model = Model::new();
    let (opts, mut description) = options(&mut rng, &fs);
    let mut db = Db::open_with(DB, opts).unwrap();
    let mut totals = Stats::default();
    for step in 0..steps {
        let context = format!("seed {seed}, step {step}, {description}");
        match rng.below(100) {
            0..=59 => {
                let key = data_key(&mut rng);
                let len = rng.index(40);
                let value = rng.bytes(len);
                db.put(&key, &value).unwrap();
                model.insert(key, value);
            }
            60..=74 => {
                // Mostly keys that exist: tombstones must hide them in scans
                // that skip the newer table... never.
                let key = match model.keys().nth(rng.index(model.len().max(1))) {
                    Some(k) if rng.chance(80) => k.clone(),
                    _ => data_key(&mut rng),
                };
                db.delete(&key).unwrap();
                model.remove(&key);
            }
            75..=84 => db.flush().unwrap(),
            85..=88 => db.compact().unwrap(),
            89..=92 => {
                add(&mut totals, db.stats());
                drop(db);
                let (opts, d) = options(&mut rng, &fs);
                description = d;
                db = Db::open_with(DB, opts).unwrap();
            }
            _ => check_scans(&mut rng, &db, &model, &context),
        }
    }
    check_scans(
        &mut rng,
        &db,
        &model,
        &format!("seed {seed}, end, {description}"),
    );
    add(&mut totals, db.stats());
    totals
}

#[test]
fn scans_past_prefix_and_range_filters_match_the_model() {
    let mut totals = Stats::default();
    for seed in 0..24 {
        add(&mut totals, run(seed, 700));
    }
    eprintln!("{totals:?}");
    // The filters were asked and ruled tables out: the model checks above
    // covered scans that skipped tables.
    assert!(totals.prefix_filter_skips > 200, "{totals:?}");
    assert!(totals.range_filter_skips > 200, "{totals:?}");
    // Gets the point filter let through that the range filter spared a
    // file read, and that still matched the model.
    assert!(totals.range_filter_point_skips > 0, "{totals:?}");
    assert!(totals.prefix_filter_checks > totals.prefix_filter_skips);
    assert!(totals.range_filter_checks > totals.range_filter_skips);
    assert!(totals.scan_tables >= totals.prefix_filter_checks);
}

/// A table of keys `k00000`, `k00002`, … with a prefix filter and a range
/// filter (format 3), as bytes.
fn filtered_table() -> (Vec<u8>, siftdb::internals::table::TableOptions) {
    use siftdb::internals::key::{internal_key, SeqNo, ValueKind};
    let options = siftdb::internals::table::TableOptions {
        prefix_extractor: Some(PrefixExtractor::fixed(4).unwrap()),
        range_filter_bits_per_key: 16.0,
        ..siftdb::internals::table::TableOptions::default()
    };
    let entries: Vec<(Vec<u8>, Vec<u8>)> = (0..500u64)
        .map(|i| {
            let key = format!("k{:05}", 2 * i);
            let kind = if i % 7 == 3 {
                ValueKind::Delete
            } else {
                ValueKind::Put
            };
            (
                internal_key(key.as_bytes(), SeqNo(i + 1), kind),
                b"v".to_vec(),
            )
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let (path, _) = siftdb_testkit::tables::build_table(dir.path(), "t.sst", &options, &entries);
    (std::fs::read(path).unwrap(), options)
}

/// Every single-byte change of a table's range filter block leaves the
/// table readable: the range filter is dropped (every range may match),
/// counted as a fallback, reported by verify as a warning, and scans and
/// gets answer as before. A change in the properties' fields fails the open.
#[test]
fn a_damaged_range_filter_fails_open_and_damaged_fields_fail_the_open() {
    use siftdb::internals::table::{FilterStatus, ReadCounters, Severity, Table};
    let (file, _) = filtered_table();
    let table = Table::from_bytes("t.sst", file.clone().into(), ReadCounters::new()).unwrap();
    assert_eq!(
        table.footer().format,
        siftdb::internals::table::TableFormat::CURRENT
    );
    assert_eq!(table.range_filter_status(), FilterStatus::Ok);
    assert!(table.verify().is_empty(), "{:?}", table.verify());
    // Absent: the gap between two present keys.
    let gap = (
        Bound::Included(&b"k00001"[..]),
        Bound::Excluded(&b"k00002"[..]),
    );
    assert!(!table.scan_may_match(None, gap.0, gap.1));
    let info = table.properties().range_filter.unwrap();
    let (start, len) = (info.handle.offset as usize, info.handle.len as usize);
    // The block and its 6-byte trailer.
    for at in start..start + len + 6 {
        let mut bad = file.clone();
        bad[at] ^= 0x20;
        let counters = ReadCounters::new();
        let table = Table::from_bytes("t.sst", bad.into(), counters.clone()).unwrap();
        assert!(
            matches!(table.range_filter_status(), FilterStatus::Corrupt(_)),
            "byte {at}"
        );
        assert!(table.range_filter_view().is_none());
        assert_eq!(counters.snapshot().filter_fallbacks, 1);
        assert!(table.scan_may_match(None, gap.0, gap.1), "byte {at}");
        let problems = table.verify();
        assert!(
            !problems.is_empty() && problems.iter().all(|p| p.severity == Severity::Warning),
            "byte {at}: {problems:?}"
        );
        assert!(table.get_key(b"k00004").unwrap().is_some());
        assert!(table.get_key(b"k00005").unwrap().is_none());
    }
    // The properties block (which holds the fields) is under its checksum.
    let properties = table.footer().properties;
    for at in properties.offset as usize..(properties.offset + properties.len) as usize {
        let mut bad = file.clone();
        bad[at] ^= 0x20;
        let err = Table::from_bytes("t.sst", bad.into(), ReadCounters::new()).unwrap_err();
        assert!(err.is_corruption(), "byte {at}: {err}");
    }
}

/// A database built with a prefix extractor and range filters, reopened
/// without them, and with another extractor: every answer stays the same,
/// the old tables are not asked about prefixes, and compaction rebuilds
/// them with what the database has now.
#[test]
fn changing_the_extractor_is_safe_and_compaction_rebuilds_the_filters() {
    let fs = FaultFs::new();
    let base = || {
        Options::default()
            .file_system(fs.shared())
            .memtable_bytes(4096)
            .block_size(256)
    };
    let scan = |db: &Db| collect(db.prefix(b"ac:"));
    let with = base()
        .prefix_extractor(PrefixExtractor::fixed(3).unwrap())
        .range_filter_bits_per_key(12.0);
    let db = Db::open_with(DB, with).unwrap();
    for i in 0..400u32 {
        let key = format!("{}{i:04}", ["aa:", "ac:", "ae:"][i as usize % 3]);
        db.put(key, i.to_le_bytes()).unwrap();
    }
    db.flush().unwrap();
    let want = scan(&db);
    assert_eq!(want.len(), 133);
    let before = db.stats();
    assert_eq!(collect(db.prefix(b"ab:")), Vec::new());
    let after = db.stats();
    assert!(after.prefix_filter_checks > before.prefix_filter_checks);
    assert_eq!(
        after.prefix_filter_skips - before.prefix_filter_skips,
        after.prefix_filter_checks - before.prefix_filter_checks
    );
    drop(db);

    // Another extractor: the tables are read, not skipped, for prefixes.
    let other = base().prefix_extractor(PrefixExtractor::fixed(2).unwrap());
    let db = Db::open_with(DB, other).unwrap();
    assert_eq!(scan(&db), want);
    assert_eq!(collect(db.prefix(b"ab:")), Vec::new());
    let s = db.stats();
    assert_eq!(s.prefix_filter_checks, 0, "{s:?}");
    // Their range filters still answer.
    assert!(s.range_filter_checks > 0, "{s:?}");
    // After a full compaction the tables carry the new extractor's prefixes
    // and no range filter.
    db.compact().unwrap();
    assert_eq!(scan(&db), want);
    let before = db.stats();
    assert_eq!(collect(db.prefix(b"ad")), Vec::new());
    let after = db.stats();
    assert!(
        after.prefix_filter_skips > before.prefix_filter_skips,
        "{after:?}"
    );
    assert_eq!(after.range_filter_bytes, 0);
    assert_eq!(after.range_filter_checks, before.range_filter_checks);
}

/// Tables whose point filter the policy made a binary fuse filter hold
/// their prefixes in it as a Bloom filter would: with whole keys or
/// prefixes only, every prefix scan and get answers as the model, and
/// prefix scans skip the tables that hold no key of their prefix.
#[test]
fn binary_fuse_filters_hold_prefixes_and_rule_tables_out() {
    const TABLES: u32 = 6;
    const PREFIXES: u32 = 600;
    const KEYS_PER_PREFIX: u32 = 30;
    // Prefix p (4 bytes) lives in table p mod TABLES only; every table's key
    // range spans nearly all of them, so every scan meets every table.
    let key = |p: u32, i: u32| format!("{p:04}:{i:04}").into_bytes();
    for whole_keys in [true, false] {
        let fs = FaultFs::new();
        let opts = Options::default()
            .file_system(fs.shared())
            .memtable_bytes(1 << 20)
            .level0_compaction_trigger(8)
            .level0_quiet_trigger(8)
            // 8-bit fuse filters cost about 10.9 bits per key at 3,000 keys,
            // and beat a Bloom filter of 12.
            .filter_policy(FilterPolicy::bits_per_key(12.0).static_filters_from_level(0))
            .prefix_extractor(PrefixExtractor::fixed(4).unwrap())
            .whole_key_filtering(whole_keys);
        let db = Db::open_with(DB, opts).unwrap();
        for t in 0..TABLES {
            for p in (t..PREFIXES).step_by(TABLES as usize) {
                for i in 0..KEYS_PER_PREFIX {
                    db.put(key(p, i), b"v").unwrap();
                }
            }
            db.flush().unwrap();
        }
        db.wait_for_background().unwrap();
        let stats = db.stats();
        assert_eq!(stats.level_tables.first(), Some(&(TABLES as usize)));
        assert_eq!(stats.fuse_filter_builds.tables, u64::from(TABLES));
        assert_eq!(stats.level_filters[0].fuse8_tables, TABLES as usize);
        let per_table = PREFIXES / TABLES;
        let entries = if whole_keys {
            per_table * KEYS_PER_PREFIX + per_table
        } else {
            per_table
        };
        // Built over keys and prefixes (or prefixes only).
        assert_eq!(
            stats.fuse_filter_builds.keys,
            u64::from(TABLES * entries),
            "whole keys {whole_keys}"
        );

        let before = db.stats();
        let mut present_scans = 0;
        for p in (100..500).step_by(7) {
            let prefix = format!("{p:04}");
            let got = collect(db.prefix(prefix.as_bytes()));
            assert_eq!(got.len(), KEYS_PER_PREFIX as usize, "{prefix}");
            assert!(got.iter().all(|(k, _)| k.starts_with(prefix.as_bytes())));
            present_scans += 1;
            // A prefix no table holds, within every table's key range.
            let absent = format!("{:03}x", p / 10);
            assert_eq!(collect(db.prefix(absent.as_bytes())), Vec::new());
            for i in [0, KEYS_PER_PREFIX - 1] {
                assert!(db.get(key(p, i)).unwrap().is_some());
            }
            assert!(db.get(key(p, KEYS_PER_PREFIX)).unwrap().is_none());
        }
        let after = db.stats();
        let checks = after.prefix_filter_checks - before.prefix_filter_checks;
        let skips = after.prefix_filter_skips - before.prefix_filter_skips;
        // Each present scan's own table is never skipped (the answers above
        // are complete); the others are, but for about 1 in 256.
        let could_skip = checks - present_scans;
        assert!(
            checks >= 2 * u64::from(TABLES) * present_scans && skips * 10 >= could_skip * 9,
            "whole keys {whole_keys}: {skips} skips of {checks} checks, {present_scans} present"
        );
        assert!(skips <= could_skip);
    }
}

/// Point lookups beyond the block cache, with reads as slow as a device's: a
/// key the point filter lets through by mistake is asked of the table's
/// range filter before its data block is read from the file. Absent keys between present ones, keys
/// deleted in a newer table (the range filter holds tombstones' keys too, so
/// a deletion is never skipped) and present keys, by `get` and `multi_get`.
#[test]
fn range_filters_spare_the_file_reads_of_point_false_positives() {
    let fs = FaultFs::new();
    let opts = Options::default()
        .file_system(fs.shared())
        .block_cache_bytes(0)
        // A weak point filter: many false positives to spare.
        .filter_policy(FilterPolicy::bits_per_key(2.0))
        .range_filter_bits_per_key(16.0)
        // Two tables stay: the deletions in the newer one.
        .level0_quiet_trigger(4);
    let db = Db::open_with(DB, opts).unwrap();
    let key = |i: u64| format!("k{i:08}").into_bytes();
    for i in (0..20_000).step_by(2) {
        db.put(key(i), i.to_le_bytes()).unwrap();
    }
    db.flush().unwrap();
    // Every tenth present key deleted, in a newer table.
    for i in (0..20_000).step_by(20) {
        db.delete(key(i)).unwrap();
    }
    db.flush().unwrap();
    let want =
        |i: u64| (i.is_multiple_of(2) && !i.is_multiple_of(20)).then(|| i.to_le_bytes().to_vec());
    // Reads from memory: the range filter is not asked (on present keys
    // the check would cost more than the reads it spares).
    for i in (1..2_000).step_by(2) {
        assert_eq!(db.get(key(i)).unwrap(), None, "get {i}");
    }
    let fast = db.stats();
    assert!(fast.filter_false_positives > 100, "{fast:?}");
    // Not one skip, unless a burst of preemption on a loaded machine made
    // a few reads look slow for a moment (the average then falls back
    // within a read or two): asked on every false positive, the range
    // filter would rule out all of them.
    assert!(
        fast.range_filter_point_skips * 20 < fast.filter_false_positives,
        "{fast:?}"
    );
    // Reads as slow as a device's: the range filter is asked.
    fs.set_read_latency(Some(std::time::Duration::from_micros(20)));
    let before = db.stats();
    for i in 0..20_000 {
        assert_eq!(
            db.get(key(i)).unwrap().as_deref(),
            want(i).as_deref(),
            "get {i}"
        );
    }
    let keys: Vec<Vec<u8>> = (0..20_000).map(key).collect();
    for (chunk, answers) in keys
        .chunks(64)
        .zip(keys.chunks(64).map(|c| db.multi_get(c).unwrap()))
    {
        for (k, answer) in chunk.iter().zip(answers) {
            let i: u64 = std::str::from_utf8(&k[1..]).unwrap().parse().unwrap();
            assert_eq!(answer.as_deref(), want(i).as_deref(), "multi_get {i}");
        }
    }
    let s = db.stats();
    let skips = s.range_filter_point_skips - before.range_filter_point_skips;
    let fps = s.filter_false_positives - before.filter_false_positives;
    let from_file = s.block_reads_from_file - before.block_reads_from_file;
    // 2 bits per key let through ~40% of absent keys; the range filter is
    // exact for these keys, so it rules out every one of them: the only
    // file reads left are those of keys present in the table asked.
    assert!(skips > 4_000, "{s:?}");
    assert!(fps >= skips, "{s:?}");
    assert!(from_file < 2 * 20_000, "{s:?}");
    // A spared read is not a data block read, in `get` nor in `multi_get`:
    // each even key is found once by each, in one block; every other block
    // searched is a false positive the range filter did not rule out.
    let searched = s.data_block_reads - before.data_block_reads;
    assert_eq!(searched, 2 * 10_000 + (fps - skips), "{s:?}");
}
