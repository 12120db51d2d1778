//! The latency and size histograms (`Db::histograms`, `Stats::histograms`)
//! and each keyspace's reads (`KeyspaceStats`). What must hold: every get,
//! multi_get, write, scan step, commit, flush and compaction is counted
//! exactly, and some of each timed; sizes recorded per batch, call and
//! table; a reset starts every histogram from zero and later snapshots
//! count only later operations; percentiles of known inputs within the
//! stated relative error; a timed operation at least as long as what it
//! waited for; nothing recorded with `Options::histograms(false)`; each
//! keyspace's gets, multi_get keys and scans counted apart.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use std::time::Duration;

use siftdb::histogram::{RELATIVE_ERROR, SAMPLE_EVERY};
use siftdb::{Db, Histogram, MergeOperator, Options, WriteBatch};

fn key(i: u32) -> String {
    format!("key{i:06}")
}

/// `|reported - expected| <= expected · RELATIVE_ERROR`.
fn assert_close(reported: u64, expected: u64, what: &str) {
    let error = (reported as f64 - expected as f64).abs();
    assert!(
        error <= expected as f64 * RELATIVE_ERROR,
        "{what}: reported {reported}, expected {expected} within {RELATIVE_ERROR}"
    );
}

#[test]
fn every_operation_kind_is_counted_and_some_are_timed() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path()).unwrap();
    for i in 0..400 {
        db.put(key(i), "value").unwrap();
    }
    let mut batch = WriteBatch::new();
    batch.put("batched-a", "1");
    batch.put("batched-b", "2");
    db.write(batch).unwrap();
    for i in 0..200 {
        assert!(db.get(key(i)).unwrap().is_some());
    }
    let keys: Vec<String> = (0..50).map(key).collect();
    db.multi_get(&keys).unwrap();
    db.multi_get(&keys[..10]).unwrap();
    let steps = db.range(key(0)..key(100)).count();
    assert_eq!(steps, 100);
    let mut txn = db.transaction();
    txn.put("txn", "x").unwrap();
    txn.commit().unwrap();
    db.flush().unwrap();
    for i in 400..500 {
        db.put(key(i), "value").unwrap();
    }
    db.flush().unwrap();
    db.compact().unwrap();

    let h = db.histograms();
    assert_eq!(h.get_nanos.ops(), 200);
    assert_eq!(h.multi_get_nanos.ops(), 2);
    assert_eq!(h.multi_get_nanos.samples(), 2);
    assert_eq!(h.multi_get_keys.ops(), 2);
    assert_eq!(h.multi_get_keys.sum(), 60);
    // 500 puts, one batch, one commit.
    assert_eq!(h.write_nanos.ops(), 502);
    assert_eq!(h.write_batch_bytes.ops(), 502);
    // 100 entries and the step that finds the end.
    assert_eq!(h.scan_step_nanos.ops(), 101);
    assert_eq!(h.transaction_commit_nanos.ops(), 1);
    assert_eq!(h.transaction_commit_nanos.samples(), 1);
    let stats = db.stats();
    assert_eq!(h.flush_nanos.ops(), stats.flushes);
    assert_eq!(h.flush_bytes.sum(), stats.flush_bytes_written);
    assert_eq!(h.compaction_nanos.ops(), stats.compactions);
    assert!(stats.compactions >= 1);
    assert_eq!(h.compaction_bytes.sum(), stats.compaction_bytes_written);
    for (name, histogram) in [
        ("get", &h.get_nanos),
        ("write", &h.write_nanos),
        ("scan step", &h.scan_step_nanos),
    ] {
        // The quick kinds: one in SAMPLE_EVERY timed (this thread's shard
        // counts from the database's open, so the first is timed).
        assert!(histogram.samples() >= 1, "{name}: none timed");
        assert!(
            histogram.samples() <= histogram.ops().div_ceil(SAMPLE_EVERY) + 1,
            "{name}: {} of {} timed",
            histogram.samples(),
            histogram.ops()
        );
        assert!(histogram.max() > 0, "{name}");
        assert!(histogram.value_at_quantile(0.5) <= histogram.max());
    }
    // Stats carries the same figures, summarised.
    assert_eq!(stats.histograms.get_nanos.ops, 200);
    assert_eq!(stats.histograms.flush_nanos.ops, stats.flushes);
    assert_eq!(stats.histograms.named().len(), h.named().len());
}

#[test]
fn a_reset_starts_every_histogram_afresh() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path()).unwrap();
    for i in 0..100 {
        db.put(key(i), "v").unwrap();
        db.get(key(i)).unwrap();
    }
    db.flush().unwrap();
    assert_eq!(db.histograms().get_nanos.ops(), 100);
    db.reset_histograms();
    let after = db.histograms();
    for (name, histogram) in after.named() {
        assert_eq!(histogram.ops(), 0, "{name}");
        assert_eq!(histogram.samples(), 0, "{name}");
        assert_eq!(histogram.max(), 0, "{name}");
    }
    assert_eq!(db.stats().histograms.flush_nanos.ops, 0);
    // The counters are not reset.
    assert_eq!(db.stats().gets, 100);
    for i in 0..30 {
        db.get(key(i)).unwrap();
    }
    let later = db.histograms();
    assert_eq!(later.get_nanos.ops(), 30);
    assert_eq!(later.write_nanos.ops(), 0);
    assert_eq!(db.stats().histograms.get_nanos.ops, 30);
}

#[test]
fn percentiles_of_known_inputs_are_within_the_stated_error() {
    let mut uniform = Histogram::default();
    for value in 1..=100_000u64 {
        uniform.record(value);
    }
    assert_eq!(uniform.ops(), 100_000);
    assert_eq!(uniform.sum(), 100_000 * 100_001 / 2);
    assert_close(uniform.value_at_quantile(0.5), 50_000, "p50");
    assert_close(uniform.value_at_quantile(0.9), 90_000, "p90");
    assert_close(uniform.value_at_quantile(0.99), 99_000, "p99");
    assert_close(uniform.value_at_quantile(0.999), 99_900, "p99.9");
    assert_close(uniform.max(), 100_000, "max");
    assert_eq!(uniform.min(), 1);
    let summary = uniform.summary();
    assert_eq!(summary.p99, uniform.value_at_quantile(0.99));
    assert!((summary.mean - 50_000.5).abs() < 1e-6);

    // A fast mode and a slow tail, as latencies look: 0.5% at 1 ms.
    let mut bimodal = Histogram::default();
    for _ in 0..9_950 {
        bimodal.record(2_000);
    }
    for _ in 0..50 {
        bimodal.record(1_000_000);
    }
    assert_close(bimodal.value_at_quantile(0.5), 2_000, "bimodal p50");
    assert_close(bimodal.value_at_quantile(0.99), 2_000, "bimodal p99");
    assert_close(bimodal.value_at_quantile(0.999), 1_000_000, "bimodal p99.9");
    assert_close(bimodal.max(), 1_000_000, "bimodal max");
    // Small values are exact.
    let mut small = Histogram::default();
    for value in [3, 7, 7, 60] {
        small.record(value);
    }
    assert_eq!(small.value_at_quantile(0.5), 7);
    assert_eq!(small.max(), 60);
    assert_eq!(small.buckets().count(), 3);
    // Nothing recorded: zeros, not a panic.
    let empty = Histogram::default();
    assert_eq!(empty.value_at_quantile(0.99), 0);
    assert_eq!(empty.max(), 0);
    assert_eq!(empty.mean(), 0.0);
}

/// Sleeps before adding: a get of a key with merge operands takes at
/// least this long.
struct SlowAdd;

const MERGE_PAUSE: Duration = Duration::from_millis(5);

impl MergeOperator for SlowAdd {
    fn merge(&self, _key: &[u8], existing: Option<&[u8]>, operands: &[&[u8]]) -> Option<Vec<u8>> {
        std::thread::sleep(MERGE_PAUSE);
        let mut value = existing.unwrap_or_default().to_vec();
        for operand in operands {
            value.extend_from_slice(operand);
        }
        Some(value)
    }
}

#[test]
fn a_timed_get_lasts_at_least_what_it_waited_for() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(
        dir.path(),
        Options::default().merge_operator(std::sync::Arc::new(SlowAdd)),
    )
    .unwrap();
    db.merge("slow", "a").unwrap();
    // SAMPLE_EVERY gets in a row: one of them is timed.
    for _ in 0..SAMPLE_EVERY {
        assert_eq!(db.get("slow").unwrap().as_deref(), Some(&b"a"[..]));
    }
    let gets = db.histograms().get_nanos;
    assert!(gets.samples() >= 1);
    let floor = MERGE_PAUSE.as_nanos() as f64 * (1.0 - RELATIVE_ERROR);
    assert!(
        gets.min() as f64 >= floor,
        "a get that slept {MERGE_PAUSE:?} was recorded as {} ns",
        gets.min()
    );
}

#[test]
fn nothing_is_recorded_when_histograms_are_off() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path(), Options::default().histograms(false)).unwrap();
    for i in 0..50 {
        db.put(key(i), "v").unwrap();
        db.get(key(i)).unwrap();
    }
    db.iter().count();
    db.flush().unwrap();
    for (name, histogram) in db.histograms().named() {
        assert_eq!(histogram.ops(), 0, "{name}");
    }
    assert_eq!(db.stats().gets, 50);
}

#[test]
fn each_keyspace_counts_its_own_reads() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path()).unwrap();
    let users = db.keyspace("users").unwrap();
    for i in 0..20 {
        db.put(key(i), "v").unwrap();
        users.put(key(i), "u").unwrap();
    }
    for i in 0..20 {
        users.get(key(i)).unwrap();
    }
    db.get(key(0)).unwrap();
    users.multi_get(&[key(1), key(2), key(3)]).unwrap();
    users.iter().count();
    let snapshot = db.snapshot();
    snapshot.get_in(&users, key(4)).unwrap();
    snapshot.iter_in(&users).count();
    let stats = db.stats();
    let default = stats
        .keyspaces
        .iter()
        .find(|k| k.name == "default")
        .unwrap();
    let of_users = stats.keyspaces.iter().find(|k| k.name == "users").unwrap();
    assert_eq!(
        (default.gets, default.multi_get_keys, default.scans),
        (1, 0, 0)
    );
    assert_eq!(
        (of_users.gets, of_users.multi_get_keys, of_users.scans),
        (21, 3, 2)
    );
    // The database-wide count takes a multi_get's keys as gets.
    assert_eq!(stats.gets, 25);
}
