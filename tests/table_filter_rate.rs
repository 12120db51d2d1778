//! On a 100,000-key table at 10 bits per key, absent-key gets read a data
//! block for at most 1.2% of gets, measured from the read counters.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use siftdb::internals::key::{internal_key, SeqNo, ValueKind};
use siftdb::internals::table::{ReadCounters, Table, TableOptions};
use siftdb_testkit::tables::{bench_key, build_table};

const KEYS: u64 = 100_000;

#[test]
fn absent_keys_rarely_read_a_data_block() {
    let dir = tempfile::tempdir().unwrap();
    let entries: Vec<_> = (0..KEYS)
        .map(|i| {
            let key = internal_key(&bench_key(2 * i), SeqNo(i + 1), ValueKind::Put);
            (key, i.to_le_bytes().repeat(2))
        })
        .collect();
    let (path, _) = build_table(dir.path(), "000001.sst", &TableOptions::default(), &entries);
    let counters = ReadCounters::new();
    let context = siftdb::internals::table::ReadContext::new(
        siftdb::internals::fs::OsFileSystem::shared(),
        siftdb::internals::table::ReadSettings::default(),
        counters.clone(),
    );
    let table = Table::open(&context, &path).unwrap();

    // Absent keys sort between present ones: the key range cannot rule them out.
    let gets = KEYS - 1;
    for i in 0..gets {
        assert_eq!(table.get_key(&bench_key(2 * i + 1)).unwrap(), None);
    }
    let stats = counters.snapshot();
    let read_rate = stats.data_block_reads as f64 / gets as f64;
    println!(
        "absent gets: {gets}, filter checks: {}, skipped: {}, false positives: {}, \
         data blocks read: {} ({:.3}% of gets)",
        stats.filter_checks,
        stats.filter_skips,
        stats.filter_false_positives,
        stats.data_block_reads,
        100.0 * read_rate
    );
    assert_eq!(stats.filter_checks, gets);
    assert_eq!(stats.filter_skips + stats.filter_false_positives, gets);
    assert_eq!(stats.data_block_reads, stats.filter_false_positives);
    assert!(
        read_rate <= 0.012,
        "{:.3}% of absent gets read a block",
        100.0 * read_rate
    );

    // Present keys are all found, each with exactly one block read.
    let before = counters.snapshot();
    for i in (0..KEYS).step_by(97) {
        assert!(table.get_key(&bench_key(2 * i)).unwrap().is_some());
    }
    let present = counters.snapshot().since(&before);
    assert_eq!(present.data_block_reads, KEYS.div_ceil(97));
    assert_eq!(present.filter_skips, 0);
}
