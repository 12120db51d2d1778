//! Scans past prefix and range filters, against a `BTreeMap`: random puts,
//! deletes, flushes, compactions and reopenings with a different prefix
//! extractor (fixed, custom, none), whole-key filtering on or off, range
//! filters of different widths or none, and point filters on or off, so a
//! database holds tables of every mix; after each step, random prefix scans
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

use siftdb::prefix::PrefixExtractor;
use siftdb::{Db, Options, Stats};
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
    let bloom_bits = if rng.chance(85) { 10.0 } else { 0.0 };
    let description = format!(
        "extractor {:?}, whole keys {whole_keys}, range bits {range_bits}, bloom bits {bloom_bits}",
        extractor.as_ref().map(PrefixExtractor::name)
    );
    let mut opts = Options::default()
        .file_system(fs.shared())
        .memtable_bytes(4096)
        .block_size(256)
        .level0_compaction_trigger(3)
        .level1_bytes(16 << 10)
        .table_target_bytes(4096)
        .bloom_bits_per_key(bloom_bits)
        .whole_key_filtering(whole_keys)
        .range_filter_bits_per_key(range_bits);
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

fn run(seed: u64, steps: usize) -> Stats {
    let fs = FaultFs::new();
    let mut rng = SplitMix64::new(seed);
    let mut model = Model::new();
    let (opts, mut description) = options(&mut rng, &fs);
    let mut db = Db::open_with(DB, opts).unwrap();
    let mut totals = Stats::default();
    let add = |totals: &mut Stats, s: Stats| {
        totals.prefix_filter_checks += s.prefix_filter_checks;
        totals.prefix_filter_skips += s.prefix_filter_skips;
        totals.range_filter_checks += s.range_filter_checks;
        totals.range_filter_skips += s.range_filter_skips;
        totals.scans += s.scans;
        totals.scan_tables += s.scan_tables;
    };
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
        let s = run(seed, 700);
        totals.prefix_filter_checks += s.prefix_filter_checks;
        totals.prefix_filter_skips += s.prefix_filter_skips;
        totals.range_filter_checks += s.range_filter_checks;
        totals.range_filter_skips += s.range_filter_skips;
        totals.scans += s.scans;
        totals.scan_tables += s.scan_tables;
    }
    eprintln!("{totals:?}");
    // The filters were asked and ruled tables out: the model checks above
    // covered scans that skipped tables.
    assert!(totals.prefix_filter_skips > 200, "{totals:?}");
    assert!(totals.range_filter_skips > 200, "{totals:?}");
    assert!(totals.prefix_filter_checks > totals.prefix_filter_skips);
    assert!(totals.range_filter_checks > totals.range_filter_skips);
    assert!(totals.scan_tables >= totals.prefix_filter_checks);
}

/// A table of keys `k00000`, `k00002`, … with a prefix filter and a range
/// filter (format 3), as bytes.
fn filtered_table() -> (Vec<u8>, siftdb::table::TableOptions) {
    use siftdb::key::{internal_key, SeqNo, ValueKind};
    let options = siftdb::table::TableOptions {
        prefix_extractor: Some(PrefixExtractor::fixed(4).unwrap()),
        range_filter_bits_per_key: 16.0,
        ..siftdb::table::TableOptions::default()
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
    use siftdb::table::{FilterStatus, ReadCounters, Severity, Table};
    let (file, _) = filtered_table();
    let table = Table::from_bytes("t.sst", file.clone().into(), ReadCounters::new()).unwrap();
    assert_eq!(table.footer().format, siftdb::table::TableFormat::V3);
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
