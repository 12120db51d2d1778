//! `Table::get` of present and absent keys on a table of 1M entries, with
//! the filter on (10 bits per key) and off. Keys and values follow
//! crates/siftdb-bench/WORKLOADS.md: key(j) = `k` + 15 digits, present keys
//! key(2i), absent keys key(2i+1) (between present ones, so only the filter
//! can rule them out), 100-byte values, reads in a shuffled order.
//! Prints the data blocks read per get from the table's counters.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "benchmark setup: a failed assumption is a failed run"
)]

use std::cell::Cell;
use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion};
use siftdb::internals::fs::OsFileSystem;
use siftdb::internals::key::{internal_key, SeqNo, ValueKind};
use siftdb::internals::table::{LookupKey, Table, TableBuilder, TableOptions};

const N: u64 = 1_000_000;

fn splitmix64(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn key(j: u64) -> Vec<u8> {
    format!("k{j:015}").into_bytes()
}

fn value(j: u64) -> Vec<u8> {
    let mut state = j;
    let mut out: Vec<u8> = (0..13)
        .flat_map(|_| splitmix64(&mut state).to_le_bytes())
        .collect();
    out.truncate(100);
    out
}

fn shuffled(n: u64, seed: u64) -> Vec<u64> {
    let mut order: Vec<u64> = (0..n).collect();
    let mut state = seed;
    for i in (1..order.len()).rev() {
        let j = (splitmix64(&mut state) % (i as u64 + 1)) as usize;
        order.swap(i, j);
    }
    order
}

fn build(dir: &Path, name: &str, bits_per_key: f64) -> Table {
    let path = dir.join(name);
    let options = TableOptions {
        bloom_bits_per_key: bits_per_key,
        ..TableOptions::default()
    };
    let mut builder = TableBuilder::create(&OsFileSystem, &path, &options).unwrap();
    for i in 0..N {
        let j = 2 * i;
        let ikey = internal_key(&key(j), SeqNo(i + 1), ValueKind::Put);
        builder.add(&ikey, &value(j)).unwrap();
    }
    let info = builder.finish().unwrap();
    eprintln!(
        "{name}: {} entries, {} bytes, {bits_per_key} filter bits per key",
        info.entries, info.file_size
    );
    Table::open_path(&path).unwrap()
}

fn bench_gets(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let tables = [
        ("filter_on", build(dir.path(), "on.sst", 10.0)),
        ("filter_off", build(dir.path(), "off.sst", 0.0)),
    ];
    let order = shuffled(N, 7);
    let present: Arc<Vec<Vec<u8>>> = Arc::new(order.iter().map(|&i| key(2 * i)).collect());
    let absent: Arc<Vec<Vec<u8>>> = Arc::new(order.iter().map(|&i| key(2 * i + 1)).collect());

    let mut group = c.benchmark_group("table_get");
    for (filter, table) in &tables {
        for (kind, keys) in [("present", &present), ("absent", &absent)] {
            let gets = Cell::new(0u64);
            let before = table.counters().snapshot();
            group.bench_function(format!("{kind}/{filter}"), |b| {
                let mut at = 0usize;
                b.iter(|| {
                    let k = &keys[at];
                    at = (at + 1) % keys.len();
                    let got = table.get(&LookupKey::new(k, SeqNo::MAX)).unwrap();
                    gets.set(gets.get() + 1);
                    black_box(got)
                })
            });
            let stats = table.counters().snapshot().since(&before);
            eprintln!(
                "table_get/{kind}/{filter}: {} gets, {:.4} data blocks read per get, \
                 {} filter skips, {} false positives",
                gets.get(),
                stats.data_block_reads as f64 / gets.get().max(1) as f64,
                stats.filter_skips,
                stats.filter_false_positives
            );
        }
    }
    group.finish();
}

criterion_group!(benches, bench_gets);
criterion_main!(benches);
