//! The memtable at the workload's shape (WORKLOADS.md: 16-byte keys
//! `k{j:015}`, 100-byte values, keys inserted in a shuffled load order):
//! siftdb's arena skiplist against the memtable it replaced
//! (crossbeam-skiplist's `SkipMap`, one `Bytes` buffer per entry:
//! `support/crossbeam_memtable.rs`), in the same run.
//!
//! - `insert/1thread`: a fresh memtable filled with `N` entries;
//! - `insert/2threads`: the same, two threads each inserting half (wall
//!   time: what counts is how the two scale together);
//! - `get`: present keys in read order on a full memtable;
//! - `walk`: every entry in order, as a flush reads them;
//! - `range_count`: the entries of a range of a tenth or a half of a full
//!   memtable, estimated from the skiplist's towers
//!   (`approximate_range_stats`) against counted by walking them (each
//!   iteration the next of 64 ranges of that size, so neither reads one
//!   range's nodes from the caches of the last iteration).
//!
//! The one-thread groups are timed in this thread's CPU time, so other
//! work on a shared machine does not leak into the comparison.
//!
//! Before the timed groups it prints the memory each one holds per entry:
//! the growth of the process's resident set while `N` entries go in (page
//! granular, allocator overhead included), and for the arena what it
//! accounts itself (`approximate_bytes`, what rotation compares).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    missing_docs,
    reason = "benchmark setup: a failed assumption is a failed run"
)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::measurement::Measurement;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use siftdb::internals::key::{compare_internal_keys, lookup_key, SeqNo, ValueKind};
use siftdb::internals::memtable::{MemValue, Memtable};

#[path = "support/crossbeam_memtable.rs"]
mod crossbeam_memtable;
#[path = "../siftdb-filter/benches/support/mod.rs"]
#[expect(
    dead_code,
    reason = "the filter benches' helpers are not all used here"
)]
mod support;
use crossbeam_memtable::CrossbeamMemtable;
use support::{cpu_now, key, splitmix64, Key, ThreadCpuTime};

/// Entries per memtable: about what a 64 MiB memtable holds at this shape.
const N: u64 = 400_000;

fn value(j: u64) -> [u8; 100] {
    let mut state = j;
    let mut out = [0u8; 104];
    for chunk in out.chunks_exact_mut(8) {
        chunk.copy_from_slice(&splitmix64(&mut state).to_le_bytes());
    }
    out[..100].try_into().unwrap()
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

/// The two memtables behind one interface.
trait Table: Default + Sync {
    fn put(&self, key: &[u8], seq: u64, value: &[u8]);
    fn find(&self, key: &[u8]) -> bool;
    fn walk(&self) -> usize;
}

impl Table for Memtable {
    fn put(&self, key: &[u8], seq: u64, value: &[u8]) {
        self.insert(key, SeqNo(seq), ValueKind::Put, value).unwrap();
    }
    fn find(&self, key: &[u8]) -> bool {
        matches!(self.get(key, SeqNo::MAX), Some(MemValue::Put(_)))
    }
    fn walk(&self) -> usize {
        self.iter().map(|(k, v)| k.len() + v.len()).sum()
    }
}

impl Table for CrossbeamMemtable {
    fn put(&self, key: &[u8], seq: u64, value: &[u8]) {
        self.insert(key, SeqNo(seq), ValueKind::Put, value);
    }
    fn find(&self, key: &[u8]) -> bool {
        self.get(key, SeqNo::MAX).is_some()
    }
    fn walk(&self) -> usize {
        CrossbeamMemtable::walk(self)
    }
}

struct Data {
    keys: Vec<Key>,
    values: Vec<[u8; 100]>,
    /// Indexes into `keys` in read order.
    reads: Vec<usize>,
}

fn data() -> Data {
    let load = shuffled(N, 42);
    Data {
        keys: load.iter().map(|&j| key(2 * j)).collect(),
        values: load.iter().map(|&j| value(2 * j)).collect(),
        reads: shuffled(N, 7).into_iter().map(|i| i as usize).collect(),
    }
}

/// Inserts `data` from `threads` threads (thread t takes every t-th
/// entry); one thread is this one.
fn fill<T: Table>(table: &T, data: &Data, threads: usize) {
    if threads == 1 {
        for (i, (key, value)) in data.keys.iter().zip(&data.values).enumerate() {
            table.put(key, i as u64 + 1, value);
        }
        return;
    }
    std::thread::scope(|s| {
        for t in 0..threads {
            s.spawn(move || {
                for i in (t..data.keys.len()).step_by(threads) {
                    table.put(&data.keys[i], i as u64 + 1, &data.values[i]);
                }
            });
        }
    });
}

/// The process's resident bytes (Linux), else `None`.
fn resident() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

fn report_memory() {
    let data = data();
    let per_entry = |bytes: u64| bytes as f64 / N as f64;
    // Each measured alone, dropped before the next, the arena's first.
    let before = resident();
    let arena = Memtable::new();
    fill(&arena, &data, 1);
    if let (Some(a), Some(b)) = (before, resident()) {
        println!(
            "memtable arena: {:.1} resident bytes/entry, {:.1} accounted bytes/entry",
            per_entry(b.saturating_sub(a)),
            per_entry(arena.approximate_bytes() as u64)
        );
    }
    drop(arena);
    let before = resident();
    let old = CrossbeamMemtable::default();
    fill(&old, &data, 1);
    if let (Some(a), Some(b)) = (before, resident()) {
        println!(
            "memtable crossbeam SkipMap: {:.1} resident bytes/entry",
            per_entry(b.saturating_sub(a))
        );
    }
    println!("(payload: 16-byte key + 8-byte tag + 100-byte value = 124 bytes/entry)");
}

/// Time spent filling fresh memtables `iters` times: CPU time of this
/// thread for one thread, wall time for more.
fn time_fills<T: Table>(data: &Data, threads: usize, iters: u64) -> Duration {
    let mut spent = Duration::ZERO;
    for _ in 0..iters {
        let table = T::default();
        if threads == 1 {
            let started = cpu_now();
            fill(&table, data, 1);
            spent += cpu_now() - started;
        } else {
            let started = Instant::now();
            fill(&table, data, threads);
            spent += started.elapsed();
        }
        drop(black_box(table));
    }
    spent
}

fn insert_groups(c: &mut Criterion<ThreadCpuTime>, wall: &mut Criterion, data: &Data) {
    let mut group = c.benchmark_group("memtable_insert");
    group.sample_size(10).throughput(Throughput::Elements(N));
    group.bench_function("arena/1thread", |b| {
        b.iter_custom(|iters| time_fills::<Memtable>(data, 1, iters))
    });
    group.bench_function("crossbeam/1thread", |b| {
        b.iter_custom(|iters| time_fills::<CrossbeamMemtable>(data, 1, iters))
    });
    group.finish();
    let mut group = wall.benchmark_group("memtable_insert");
    group.sample_size(10).throughput(Throughput::Elements(N));
    group.bench_function("arena/2threads", |b| {
        b.iter_custom(|iters| time_fills::<Memtable>(data, 2, iters))
    });
    group.bench_function("crossbeam/2threads", |b| {
        b.iter_custom(|iters| time_fills::<CrossbeamMemtable>(data, 2, iters))
    });
    group.finish();
}

fn read_groups<M: Measurement>(c: &mut Criterion<M>, data: &Data) {
    let arena = Memtable::new();
    fill(&arena, data, 1);
    let old = CrossbeamMemtable::default();
    fill(&old, data, 1);
    let mut group = c.benchmark_group("memtable_get");
    group.throughput(Throughput::Elements(1024));
    bench_gets(&mut group, "arena", &arena, data);
    bench_gets(&mut group, "crossbeam", &old, data);
    group.finish();
    let mut group = c.benchmark_group("memtable_walk");
    group.sample_size(10).throughput(Throughput::Elements(N));
    group.bench_function("arena", |b| b.iter(|| black_box(arena.walk())));
    group.bench_function("crossbeam", |b| b.iter(|| black_box(old.walk())));
    group.finish();
    range_count_group(c, &arena);
}

/// A range's entries on a full memtable: estimated against walked.
fn range_count_group<M: Measurement>(c: &mut Criterion<M>, arena: &Memtable) {
    let mut group = c.benchmark_group("memtable_range_count");
    for (name, parts) in [("tenth", 10), ("half", 2)] {
        let len = N / parts;
        // The keys are key(2j), j < N: 64 ranges of `len` keys spread over
        // the rest, as lookup keys before every version of their ends.
        let ranges: Vec<(Vec<u8>, Vec<u8>)> = (0..64)
            .map(|r| {
                let first = r * (N - len) / 64;
                (
                    lookup_key(&key(2 * first), SeqNo::MAX),
                    lookup_key(&key(2 * (first + len)), SeqNo::MAX),
                )
            })
            .collect();
        let mut at = 0;
        group.bench_function(format!("estimate/{name}"), |b| {
            b.iter(|| {
                let (start, end) = &ranges[at % 64];
                at += 1;
                black_box(arena.approximate_range_stats(Some(start), Some(end)))
            })
        });
        group.bench_function(format!("walk/{name}"), |b| {
            b.iter(|| {
                let (start, end) = &ranges[at % 64];
                at += 1;
                let count = arena
                    .range_from(start)
                    .take_while(|(k, _)| compare_internal_keys(k, end).is_lt())
                    .count();
                assert_eq!(count as u64, len);
                black_box(count)
            })
        });
    }
    group.finish();
}

fn bench_gets<M: Measurement, T: Table>(
    group: &mut criterion::BenchmarkGroup<'_, M>,
    name: &str,
    table: &T,
    data: &Data,
) {
    group.bench_function(name, |b| {
        let mut at = 0;
        b.iter(|| {
            let mut found = 0u32;
            for &i in &data.reads[at..at + 1024] {
                found += u32::from(table.find(black_box(&data.keys[i])));
            }
            at = (at + 1024) % (data.reads.len() - 1024);
            assert_eq!(found, 1024);
        })
    });
}

fn memtable(c: &mut Criterion<ThreadCpuTime>) {
    report_memory();
    let data = data();
    let mut wall = Criterion::default().configure_from_args();
    insert_groups(c, &mut wall, &data);
    read_groups(c, &data);
}

fn cpu_time() -> Criterion<ThreadCpuTime> {
    Criterion::default().with_measurement(ThreadCpuTime)
}

criterion_group! {
    name = benches;
    config = cpu_time();
    targets = memtable
}
criterion_main!(benches);
