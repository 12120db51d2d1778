//! Filter policies end to end: a database whose levels hold filters of
//! mixed kinds — Bloom filters of different sizes, 8-bit binary fuse
//! filters, none, and a kind this build does not read — answers exactly as a
//! `BTreeMap` across flushes, compactions and reopenings under changing
//! policies; `Stats`, `inspect` and `verify` report each level's filters.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use std::collections::BTreeMap;
use std::path::Path;

use proptest::prelude::*;
use siftdb::filter::FilterKind;
use siftdb::internals::inspect::{inspect_dir, verify_dir, FilterSummary};
use siftdb::internals::table::format::encode_trailer;
use siftdb::internals::table::{BlockKind, Codec, FilterStatus, Table};
use siftdb::{Db, FilterPolicy, Options};

/// The policies a reopen switches between: tables written under each stay
/// in the tree until compaction rewrites them.
/// (A binary fuse filter wins over a Bloom filter of the same bits once
/// tables hold about a thousand keys: smaller sets need more slots per key.)
fn policies() -> [FilterPolicy; 7] {
    [
        FilterPolicy::bits_per_key(10.0),
        FilterPolicy::level_aware(10.0).static_filters_from_level(1),
        FilterPolicy::bits_per_key(12.0).static_filters_from_level(0),
        FilterPolicy::level_aware(6.0).optimize_for_hits(true),
        FilterPolicy::bits_per_key(0.0),
        FilterPolicy::bits_per_key(30.0).static_filters_from_level(1),
        FilterPolicy::level_aware(16.0).static_filters_from_level(1),
    ]
}

fn options(policy: FilterPolicy) -> Options {
    Options::default()
        .memtable_bytes(96 << 10)
        .block_size(1024)
        .level0_compaction_trigger(3)
        .level0_quiet_trigger(3)
        .level1_bytes(96 << 10)
        .level_size_ratio(4)
        .table_target_bytes(48 << 10)
        .filter_policy(policy)
}

/// The key space.
const KEYS: u16 = 8000;

/// Keys 0..KEYS; only even ones are ever written, so odd ones are absent
/// from every table and reach the filters.
fn key(k: u16) -> Vec<u8> {
    format!("key{:05}", k % KEYS).into_bytes()
}

#[derive(Debug, Clone)]
enum Op {
    /// `count` even keys from `first` on, in one batch.
    Fill(u16, u16),
    Put(u16, u8),
    Delete(u16),
    Get(u16),
    MultiGet(Vec<u16>),
    Flush,
    Compact,
    Reopen(usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (any::<u16>(), 100..2000u16).prop_map(|(k, n)| Op::Fill(k & !1, n)),
        12 => (any::<u16>(), any::<u8>()).prop_map(|(k, v)| Op::Put(k & !1, v)),
        2 => any::<u16>().prop_map(|k| Op::Delete(k & !1)),
        4 => any::<u16>().prop_map(Op::Get),
        1 => proptest::collection::vec(any::<u16>(), 0..40).prop_map(Op::MultiGet),
        1 => Just(Op::Flush),
        1 => Just(Op::Compact),
        2 => (0..policies().len()).prop_map(Op::Reopen),
    ]
}

fn value(k: u16, v: u8) -> Vec<u8> {
    let mut out = key(k);
    out.resize(20 + usize::from(v % 32), v);
    out
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// `multi_get` of `keys`, and what the model holds for them.
fn multi_get_and_model(db: &Db, model: &Model, keys: &[Vec<u8>]) -> [Vec<Option<Vec<u8>>>; 2] {
    let got = db.multi_get(keys).unwrap();
    [
        got.into_iter().map(|v| v.map(|b| b.to_vec())).collect(),
        keys.iter().map(|k| model.get(k).cloned()).collect(),
    ]
}

/// Every key, present or not, asked by `get` and in one `multi_get`.
fn check_all(db: &Db, model: &Model) {
    let keys: Vec<Vec<u8>> = (0..KEYS).map(key).collect();
    for k in &keys {
        assert_eq!(
            db.get(k).unwrap().map(|b| b.to_vec()),
            model.get(k).cloned()
        );
    }
    let [got, want] = multi_get_and_model(db, model, &keys);
    assert_eq!(got, want);
    let all: Vec<(Vec<u8>, Vec<u8>)> = db
        .iter()
        .map(|r| {
            let (k, v) = r.unwrap();
            (k.to_vec(), v.to_vec())
        })
        .collect();
    assert_eq!(all, model.clone().into_iter().collect::<Vec<_>>());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn mixed_filter_kinds_answer_as_a_btreemap(
        first in 0..policies().len(),
        ops in proptest::collection::vec(op(), 1..200),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut db = Db::open_with(dir.path(), options(policies()[first])).unwrap();
        let mut model = Model::new();
        for op in ops {
            match op {
                Op::Fill(first, count) => fill(&db, &mut model, first, count),
                Op::Put(k, v) => {
                    db.put(key(k), value(k, v)).unwrap();
                    model.insert(key(k), value(k, v));
                }
                Op::Delete(k) => {
                    db.delete(key(k)).unwrap();
                    model.remove(&key(k));
                }
                Op::Get(k) => {
                    let got = db.get(key(k)).unwrap().map(|b| b.to_vec());
                    prop_assert_eq!(got, model.get(&key(k)).cloned());
                }
                Op::MultiGet(ks) => {
                    let keys: Vec<Vec<u8>> = ks.iter().map(|&k| key(k)).collect();
                    let [got, want] = multi_get_and_model(&db, &model, &keys);
                    prop_assert_eq!(got, want);
                }
                Op::Flush => db.flush().unwrap(),
                Op::Compact => db.compact().unwrap(),
                Op::Reopen(policy) => {
                    drop(db);
                    db = Db::open_with(dir.path(), options(policies()[policy])).unwrap();
                }
            }
        }
        db.wait_for_background().unwrap();
        check_all(&db, &model);
        let stats = db.stats();
        let counted: usize = stats.level_filters.iter().map(|l| l.tables).sum();
        prop_assert_eq!(counted, stats.table_count);
        drop(db);
        let report = verify_dir(dir.path()).unwrap();
        prop_assert!(report.is_clean(), "{:?}", report.problems);
    }
}

/// Writes `count` keys `first, first + 2, …` (wrapping) in one batch.
fn fill(db: &Db, model: &mut Model, first: u16, count: u16) {
    let mut batch = siftdb::WriteBatch::new();
    for i in 0..count {
        let k = first.wrapping_add(2 * i) % KEYS;
        batch.put(key(k), value(k, 7));
        model.insert(key(k), value(k, 7));
    }
    db.write(batch).unwrap();
}

/// Two level-0 tables of 1,500 keys each, merged into level 1 (a lone
/// table would move down with the filter it has).
fn fill_twice_and_merge(db: &Db, model: &mut Model) {
    fill(db, model, 0, 1500);
    db.flush().unwrap();
    fill(db, model, 3000, 1500);
    db.compact().unwrap();
}

/// A fresh database under `policy` holding [`fill_twice_and_merge`]'s
/// keys, closed again.
fn merged_db(policy: FilterPolicy) -> (tempfile::TempDir, Model) {
    let dir = tempfile::tempdir().unwrap();
    let mut model = Model::new();
    let db = Db::open_with(dir.path(), options(policy)).unwrap();
    fill_twice_and_merge(&db, &mut model);
    drop(db);
    (dir, model)
}

/// The kinds of filter in use per level, from `Stats`.
fn kinds(db: &Db) -> Vec<String> {
    db.stats().level_filters.iter().map(|l| l.kinds()).collect()
}

#[test]
fn levels_hold_the_kinds_the_policy_chose_and_answers_stay_exact() {
    let static_policy = FilterPolicy::bits_per_key(12.0).static_filters_from_level(1);
    {
        // A compaction into level 1 builds fuse filters, counted in Stats.
        let fresh = tempfile::tempdir().unwrap();
        let db = Db::open_with(fresh.path(), options(static_policy)).unwrap();
        fill_twice_and_merge(&db, &mut Model::new());
        let built = db.stats().fuse_filter_builds;
        assert!(
            built.tables > 0 && built.keys >= 3000 && built.nanos > 0,
            "{built:?}"
        );
    }
    let (dir, mut model) = merged_db(static_policy);
    {
        let db = Db::open_with(dir.path(), options(static_policy)).unwrap();
        // Compacted tables below level 0 take fuse filters; the flush
        // that follows writes a Bloom filter at level 0.
        fill(&db, &mut model, 1, 500);
        db.flush().unwrap();
        db.wait_for_background().unwrap();
        let kinds = kinds(&db);
        assert_eq!(kinds[0], "bloom", "{kinds:?}");
        assert!(kinds[1..].iter().any(|k| k == "fuse8"), "{kinds:?}");
        // Built since this open: the flush's Bloom filter only (no
        // compaction ran); the fuse builds are counted below.
        let stats = db.stats();
        assert_eq!(stats.fuse_filter_builds.tables, 0);
        assert!(stats.bloom_filter_builds.tables > 0);
        check_all(&db, &model);
        // Odd keys above 1000 are absent everywhere: every level's filters
        // were asked, and measured their rate.
        let stats = db.stats();
        for level in stats.level_filters.iter().filter(|l| l.filtered_keys > 0) {
            assert!(level.measured_fp_rate().is_some(), "{level:?}");
            assert!(level.expected_fp_rate() > 0.0 && level.expected_fp_rate() < 0.05);
        }
    }
    // Reopened under the uniform Bloom policy: old tables keep their fuse
    // filters, new ones get Bloom filters; everything still answers.
    {
        let db = Db::open_with(dir.path(), options(FilterPolicy::bits_per_key(10.0))).unwrap();
        check_all(&db, &model);
        fill(&db, &mut model, 3, 600);
        db.flush().unwrap();
        db.wait_for_background().unwrap();
        check_all(&db, &model);
    }
    let summary = inspect_dir(dir.path()).unwrap();
    let mut seen: Vec<FilterKind> = summary
        .tables
        .iter()
        .filter_map(|t| t.table.as_ref().unwrap().filter_kind())
        .collect();
    seen.sort_by_key(|k| k.name());
    seen.dedup();
    assert!(seen.contains(&FilterKind::BlockedBloom), "{seen:?}");
    assert!(seen.contains(&FilterKind::BinaryFuse8), "{seen:?}");
    for t in &summary.tables {
        if let Some(f) = t.table.as_ref().unwrap().filter_figures() {
            // 20,000 random absent keys per table.
            assert!(f.measured_fp_rate() < 0.05, "{f:?}");
        }
    }
    // Compaction under the uniform policy rewrites every table with Bloom
    // filters.
    let db = Db::open_with(dir.path(), options(FilterPolicy::bits_per_key(10.0))).unwrap();
    db.compact().unwrap();
    assert!(
        kinds(&db).iter().all(|k| k == "bloom" || k == "-"),
        "{:?}",
        kinds(&db)
    );
    check_all(&db, &model);
}

#[test]
fn optimize_for_hits_leaves_the_last_level_without_filters() {
    let policy = FilterPolicy::bits_per_key(10.0).optimize_for_hits(true);
    let (dir, mut model) = merged_db(policy);
    let db = Db::open_with(dir.path(), options(policy)).unwrap();
    fill(&db, &mut model, 1, 300);
    db.flush().unwrap();
    db.wait_for_background().unwrap();
    let stats = db.stats();
    let last = stats
        .level_filters
        .iter()
        .rposition(|l| l.tables > 0)
        .unwrap();
    assert!(last >= 1);
    assert_eq!(stats.level_filters[last].kinds(), "none");
    assert_eq!(stats.level_filters[last].filter_memory, 0);
    assert_eq!(stats.level_filters[0].kinds(), "bloom");
    check_all(&db, &model);
}

/// Rewrites the first four bytes of `table`'s filter block (a magic no
/// build knows) and its trailer's checksum, so only the kind is foreign.
fn make_filter_kind_unknown(path: &Path) {
    let table = Table::open_path(path).unwrap();
    let handle = table.footer().filter.unwrap();
    drop(table);
    let mut bytes = std::fs::read(path).unwrap();
    let start = usize::try_from(handle.offset).unwrap();
    let end = start + usize::try_from(handle.len).unwrap();
    bytes[start..start + 4].copy_from_slice(b"SFX9");
    let trailer = encode_trailer(
        &bytes[start..end],
        BlockKind::Filter,
        Codec::Raw,
        handle.offset,
    );
    bytes[end..end + trailer.len()].copy_from_slice(&trailer);
    std::fs::write(path, &bytes).unwrap();
}

#[test]
fn a_filter_of_an_unknown_kind_fails_open_and_is_reported() {
    let policy = FilterPolicy::bits_per_key(12.0).static_filters_from_level(0);
    let (dir, model) = merged_db(policy);
    let summary = inspect_dir(dir.path()).unwrap();
    let victim = &summary.tables[0];
    let name = format!("{:06}.sst", victim.record.file_number);
    make_filter_kind_unknown(&dir.path().join(&name));

    let table = Table::open_path(&dir.path().join(&name)).unwrap();
    assert!(
        matches!(table.filter_status(), FilterStatus::UnknownKind(reason) if reason.contains("SFX9")),
        "{:?}",
        table.filter_status()
    );
    drop(table);
    {
        let db = Db::open_with(dir.path(), options(policy)).unwrap();
        check_all(&db, &model);
        let stats = db.stats();
        assert_eq!(stats.filter_fallbacks, 1);
        let unusable: usize = stats.level_filters.iter().map(|l| l.unusable_tables).sum();
        assert_eq!(unusable, 1);
        assert!(stats
            .level_filters
            .iter()
            .any(|l| l.kinds().contains("unusable")));
    }
    let report = verify_dir(dir.path()).unwrap();
    assert!(report.errors().next().is_none(), "{:?}", report.problems);
    let warning = report.warnings().next().unwrap();
    assert_eq!(warning.file, name);
    assert!(warning.detail.contains("does not read"), "{warning}");
    let summary = inspect_dir(dir.path()).unwrap();
    let table = summary
        .tables
        .iter()
        .find(|t| t.record.file_number == victim.record.file_number)
        .unwrap();
    assert!(matches!(
        table.table.as_ref().unwrap().filter,
        FilterSummary::UnknownKind(_)
    ));
}
