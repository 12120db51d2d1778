//! siftdb's blocked Bloom filter and binary fuse filters against the fastest
//! Rust filter crates.
//!
//! Keys are `format!("k{:015}", j)` (16 bytes); the `n` present keys are the
//! even `j`, absent keys the odd `j`. Every Bloom filter gets 10 bits per key
//! (xorf's BinaryFuse8 is static and takes what it needs, about 9). At equal
//! false-positive rates: siftdb's binary fuse filters (`siftdb_fuse8`, 2⁻⁸;
//! `siftdb_fuse16`, 2⁻¹⁶, built from the keys' xxh3 hashes, queried in place
//! over their encoded blocks) beside siftdb's blocked Bloom filter at the
//! bits per key its theory needs for the same rates (`siftdb_bloom12`, 12.1
//! bits, and `siftdb_bloom28`, 28 bits, queried as encoded blocks).
//!
//! ```text
//! cargo bench -p siftdb-filter --bench filter                      # n = 1,000,000: about 2 minutes
//! SIFTDB_BENCH_HUGE=1 cargo bench -p siftdb-filter --bench filter  # n = 100,000,000: about 9 minutes
//! SIFTDB_BENCH_KEYS=4000000 cargo bench -p siftdb-filter --bench filter -- build  # another n
//! ```
//!
//! The huge run peaks at 3.3 GB resident (five filters of 125 MB, two copies
//! of siftdb's encoded block, and xorf's construction over 800 MB of hashes);
//! keys are formatted into stack buffers as they are needed, never stored as
//! `String`s. Building at that size is timed once (printed with the table),
//! not by criterion. (Times above: two cores shared with other work.)
//!
//! Before the timed runs it prints, per filter, the false-positive rate
//! measured over 1,000,000 absent keys and the bits per key actually used,
//! and for siftdb the blocked-layout and standard-Bloom theoretical rates.
//!
//! `siftdb` builds siftdb's filter from its keys in one pass with
//! `insert_keys` (each group of 256 keys hashed onto the stack, eight at
//! a time with AVX-512, then inserted with the batched insert's look-ahead); `siftdb_each` calls
//! `insert` once per key; `siftdb_gathered` builds it as a table builder
//! does: each key's hash pushed to a vector as the key is added (timed),
//! then one batched `insert_hashes` over them (timed), which fetches lines
//! ahead.
//!
//! Before the groups, two comparisons taken in turn, 21 runs each, so a
//! neighbour's burst on a shared machine slows both sides alike (the medians'
//! ratios are the figures to quote): the build with hashing
//! (`siftdb_gathered` and `siftdb` against `sbbf-rs-safe`), and the insert
//! from hashes already gathered (siftdb's `insert_hashes`, sbbf-rs-safe's
//! `insert_hash` loop; allocation included).
//!
//! `SIFTDB_BENCH_COMPARE=1` runs only the single-key comparison the issue
//! asks for (see `compare`): the four filters built and queried one key at a
//! time in one process, in turn, medians and ratios to sbbf-rs-safe.
//! `SIFTDB_BENCH_ISA=avx2` makes siftdb's filters use their AVX2 kernels
//! on a CPU with AVX-512, to measure what a CPU without it runs.
//! `SIFTDB_BENCH_PAIRED=1` runs siftdb against sbbf-rs-safe alone, query
//! slices of the two back to back, and prints the spread of the per-round
//! ratios (see `paired`): the figure to quote on a busy machine.
//!
//! Groups: `build` (ns per key, not at the huge size), `insert_prehashed`
//! (the insert alone, as in the comparison above), `contains_present`,
//! `contains_absent` (keys hashed inside the measured call, each key reaching
//! its filter as a `&[u8]` of run-time length, as in a database, so no
//! filter's hash is compiled for 16-byte keys; `siftdb_view` is an encoded
//! block queried in place, cache-line aligned as a table must store it,
//! `siftdb_view_misaligned` the same 16 bytes off; every filter with xxh3
//! except fastbloom and bloomfilter, which use their own hashers),
//! `absent_prehashed` (the probe alone, for filters taking a hash), the
//! `_batched` rows (one `contains_keys` / `contains_hashes` call per 1,024
//! queries, which fetches lines ahead), and
//! `random_load` — one random 8-byte load from a buffer as large as siftdb's
//! filter, independent and dependent (pointer-chasing): the memory system's
//! limit a one-line filter is measured against. Queries walk a pre-drawn
//! random sequence of keys, so neither the branch predictor nor the cache sees
//! a pattern.
//!
//! Every time is the benchmark thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`),
//! not the wall clock: on a shared machine most wall-clock noise is time spent
//! waiting for a core, which CPU time leaves out, while memory stalls (the
//! thread is running) still count. On an idle machine the two agree.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "benchmark setup: a failed assumption is a failed run"
)]
use std::hint::black_box;
use std::time::Duration;

use criterion::{BenchmarkGroup, Criterion, SamplingMode, Throughput};
use siftdb_filter::{hash_key, theory, BloomFilter, FilterView, FingerprintBits, FuseFilter};
use xorf::{BinaryFuse8, Filter as _};

const BITS_PER_KEY: usize = 10;
/// Length of each pre-drawn query sequence (a multiple of `BATCH`).
const QUERIES: usize = 1 << 20;
/// Absent keys the false-positive rate is measured over.
const FP_PROBES: u64 = 1_000_000;
/// Runs of each insert in the alternating comparison.
const ALTERNATIONS: usize = 21;
/// Keys formatted per chunk while building (the formatting is not timed).
const CHUNK: usize = 4096;

#[path = "support/mod.rs"]
mod support;
use support::{bench_queries, cpu_now, key, splitmix64, Key, ThreadCpuTime, BATCH};

/// `QUERIES` keys drawn at random among the present (`parity` 0) or absent (1) ones.
fn query_keys(n: u64, parity: u64, seed: u64) -> Vec<Key> {
    let mut state = seed;
    (0..QUERIES)
        .map(|_| {
            let i = ((splitmix64(&mut state) as u128 * n as u128) >> 64) as u64;
            key(2 * i + parity)
        })
        .collect()
}

/// Calls `insert` on every present key; returns the time spent inside `insert`
/// only (keys are formatted in chunks between two clock readings).
fn insert_present(n: u64, mut insert: impl FnMut(&[u8])) -> Duration {
    insert_present_chunks(n, |keys| {
        for k in keys {
            insert(black_box(k));
        }
    })
}

/// Calls `insert` on every chunk of `CHUNK` present keys; returns the time
/// spent inside it only (each chunk is formatted between two clock readings).
fn insert_present_chunks(n: u64, mut insert: impl FnMut(&[[u8; 16]])) -> Duration {
    let mut chunk = vec![[0u8; 16]; CHUNK];
    let mut spent = Duration::ZERO;
    let mut next = 0u64;
    while next < n {
        let len = (n - next).min(CHUNK as u64) as usize;
        for (slot, i) in chunk.iter_mut().zip(next..) {
            *slot = key(2 * i);
        }
        let start = cpu_now();
        insert(black_box(&chunk[..len]));
        spent += cpu_now() - start;
        next += len as u64;
    }
    spent
}

/// siftdb's blocked Bloom filter built from its keys in one pass:
/// `insert_keys`, which hashes a group of keys and inserts the group.
fn siftdb_build(n: u64) -> (BloomFilter, Duration) {
    let start = cpu_now();
    let mut f = BloomFilter::with_bits_per_key(n as usize, BITS_PER_KEY as f64).expect("size");
    let alloc = cpu_now() - start;
    let spent = insert_present_chunks(n, |keys| f.insert_keys(keys));
    (f, alloc + spent)
}

/// The same filter with one `insert` call per key.
fn siftdb_each_build(n: u64) -> (BloomFilter, Duration) {
    bloom_build(n, BITS_PER_KEY as f64)
}

/// siftdb's blocked Bloom filter built as a table builds it: every key
/// hashed into a vector as it is added (timed), then the filter sized and
/// filled from the gathered hashes in one batched call.
fn siftdb_gathered_build(n: u64) -> (BloomFilter, Duration) {
    let mut hashes = Vec::with_capacity(n as usize);
    let hashing = insert_present(n, |k| hashes.push(hash_key(k)));
    let start = cpu_now();
    let mut f = BloomFilter::with_bits_per_key(n as usize, BITS_PER_KEY as f64).expect("size");
    f.insert_hashes(&hashes);
    (f, hashing + (cpu_now() - start))
}

/// siftdb's blocked Bloom filter at the bits per key its theory needs for `fp_rate`.
fn bloom_at_rate(n: u64, fp_rate: f64) -> (BloomFilter, Duration) {
    bloom_build(
        n,
        theory::bits_per_key_for_rate(fp_rate).expect("reachable rate"),
    )
}

fn bloom_build(n: u64, bits_per_key: f64) -> (BloomFilter, Duration) {
    let start = cpu_now();
    let mut f = BloomFilter::with_bits_per_key(n as usize, bits_per_key).expect("size");
    let alloc = cpu_now() - start;
    let spent = insert_present(n, |k| f.insert(k));
    (f, alloc + spent)
}

type Fastbloom = fastbloom::BloomFilter;

fn fastbloom_build(n: u64) -> (Fastbloom, Duration) {
    let start = cpu_now();
    let mut f = Fastbloom::with_num_bits(BITS_PER_KEY * n as usize)
        .seed(&42)
        .expected_items(n as usize);
    let alloc = cpu_now() - start;
    let spent = insert_present(n, |k| {
        f.insert(k);
    });
    (f, alloc + spent)
}

type Sip = bloomfilter::Bloom<[u8]>;

fn bloomfilter_build(n: u64) -> (Sip, Duration) {
    let start = cpu_now();
    // Its two SipHash keys are the seed's halves; equal halves would make
    // every probe a multiple of one hash (3.3% FP instead of 0.84%).
    let seed: [u8; 32] = std::array::from_fn(|i| i as u8 * 37 + 1);
    let mut f = Sip::new_with_seed(BITS_PER_KEY * n as usize / 8, n as usize, &seed).expect("size");
    let alloc = cpu_now() - start;
    let spent = insert_present(n, |k| f.set(k));
    (f, alloc + spent)
}

fn sbbf_build(n: u64) -> (sbbf_rs_safe::Filter, Duration) {
    let start = cpu_now();
    let mut f = sbbf_rs_safe::Filter::new(BITS_PER_KEY, n as usize);
    let alloc = cpu_now() - start;
    let spent = insert_present(n, |k| {
        f.insert_hash(hash_key(k));
    });
    (f, alloc + spent)
}

fn xorf_build(n: u64) -> (BinaryFuse8, Duration) {
    let mut hashes = Vec::with_capacity(n as usize);
    let hashing = insert_present(n, |k| hashes.push(hash_key(k)));
    let start = cpu_now();
    let f = BinaryFuse8::try_from(&hashes).expect("binary fuse construction");
    (f, hashing + (cpu_now() - start))
}

/// A binary fuse filter: every key hashed (timed), then built from the hashes.
fn fuse_build(n: u64, bits: FingerprintBits) -> (FuseFilter, Duration) {
    let mut hashes = Vec::with_capacity(n as usize);
    let hashing = insert_present(n, |k| hashes.push(hash_key(k)));
    let start = cpu_now();
    let f = FuseFilter::build(&hashes, bits).expect("binary fuse construction");
    (f, hashing + (cpu_now() - start))
}

/// A copy of `block` starting `past` bytes after a 64-byte boundary: the
/// buffer and where in it the copy starts.
fn placed(block: &[u8], past: usize) -> (Vec<u8>, usize) {
    let mut buffer = vec![0u8; block.len() + 64 + past];
    let at = buffer.as_ptr().align_offset(64) + past;
    buffer[at..at + block.len()].copy_from_slice(block);
    (buffer, at)
}

fn measured_fp(contains: impl Fn(&[u8]) -> bool) -> f64 {
    let hits = (0..FP_PROBES)
        .filter(|&i| contains(&key(2 * i + 1)))
        .count();
    hits as f64 / FP_PROBES as f64
}

/// Like [`bench_queries`], but the whole `BATCH` goes to one call that
/// answers many queries (`contains_keys`, `contains_hashes`).
fn bench_batched<M: criterion::measurement::Measurement, T>(
    group: &mut BenchmarkGroup<'_, M>,
    name: &str,
    items: &[T],
    query: impl Fn(&[T]) -> usize,
) {
    group.bench_function(name, |b| {
        let mut start = 0;
        b.iter(|| {
            let batch = &items[start..start + BATCH];
            start = (start + BATCH) % items.len();
            query(black_box(batch))
        })
    });
}

fn count_true(answers: impl Iterator<Item = bool>) -> usize {
    answers.filter(|&found| found).count()
}

struct Row {
    name: &'static str,
    bits: u64,
    k: String,
    fp: f64,
    build: Duration,
    theory: String,
}

fn print_table(n: u64, rows: &[Row]) {
    println!();
    println!("filter comparison: n = {n} present keys, {BITS_PER_KEY} bits/key requested, FP over {FP_PROBES} absent keys");
    println!(
        "{:<14} {:>9} {:>4} {:>9} {:>12}  theory",
        "filter", "bits/key", "k", "FP %", "build ns/key"
    );
    for r in rows {
        println!(
            "{:<14} {:>9.4} {:>4} {:>9.4} {:>12.1}  {}",
            r.name,
            r.bits as f64 / n as f64,
            r.k,
            r.fp * 100.0,
            r.build.as_nanos() as f64 / n as f64,
            r.theory
        );
    }
    println!();
}

/// The four filters of the single-key comparison, in the order they run.
const COMPARED: [&str; 6] = [
    "siftdb",
    "siftdb_hash_key",
    "siftdb_insert_keys",
    "sbbf-rs-safe",
    "fastbloom",
    "xorf_bfuse8",
];

/// One pass of `queries` through `contains`: CPU ns per query.
fn query_pass(queries: &[&[u8]], contains: impl Fn(&[u8]) -> bool) -> f64 {
    let start = cpu_now();
    let mut hits = 0usize;
    for &k in queries {
        hits += usize::from(contains(black_box(k)));
    }
    black_box(hits);
    (cpu_now() - start).as_secs_f64() * 1e9 / queries.len() as f64
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// `SIFTDB_BENCH_COMPARE=1`: the issue's single-key comparison in one
/// process, and nothing else — siftdb (`insert` per key, and the batched
/// `insert_keys` build), sbbf-rs-safe, fastbloom and xorf's BinaryFuse8,
/// each key a `&[u8]` of run-time length hashed inside the call. Every round
/// builds each filter afresh (ns/key) and runs one pass of absent and one of
/// present queries (`QUERIES` random keys) through each, the filters taken
/// in turn (in a new random order each round), so a neighbour's burst on a
/// shared machine slows all alike;
/// printed are the medians over `SIFTDB_BENCH_ROUNDS` rounds (7) and each
/// median's ratio to sbbf-rs-safe's.
///
/// `SIFTDB_BENCH_ONLY=<name>` (with `SIFTDB_BENCH_PASSES=p`, default 10)
/// builds that one filter and runs `p` absent-query passes and no other
/// work, for `perf stat`: the difference between two runs with different `p`
/// is the queries' own count.
fn compare(n: u64) {
    let rounds: usize = std::env::var("SIFTDB_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(7);
    let only = std::env::var("SIFTDB_BENCH_ONLY").ok();
    let absent_keys = query_keys(n, 1, 0x5eed + 1);
    let present_keys = query_keys(n, 0, 0x5eed);
    let absent: Vec<&[u8]> = absent_keys.iter().map(|k| &k[..]).collect();
    let present: Vec<&[u8]> = present_keys.iter().map(|k| &k[..]).collect();
    if let Some(only) = only {
        // No clock here (valgrind's cachegrind cannot run rustix's vDSO
        // clock): builds and passes only, for counting tools.
        let passes: usize = std::env::var("SIFTDB_BENCH_PASSES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(10);
        let run = |contains: &dyn Fn(&[u8]) -> bool| {
            let mut hits = 0usize;
            for _ in 0..passes {
                for &k in &absent {
                    hits += usize::from(contains(black_box(k)));
                }
            }
            println!("{only}: {passes} absent passes, {hits} hits");
        };
        let siftdb = || {
            let mut f =
                BloomFilter::with_bits_per_key(n as usize, BITS_PER_KEY as f64).expect("size");
            (0..n).for_each(|i| f.insert(black_box(&key(2 * i)[..])));
            f
        };
        let sbbf = || {
            let mut f = sbbf_rs_safe::Filter::new(BITS_PER_KEY, n as usize);
            (0..n).for_each(|i| {
                f.insert_hash(hash_key(black_box(&key(2 * i)[..])));
            });
            f
        };
        let keys_only = || {
            let mut sum = 0u64;
            (0..n).for_each(|i| sum += u64::from(black_box(key(2 * i))[3]));
            sum
        };
        match only.as_str() {
            "siftdb" => {
                let f = siftdb();
                run(&|k| f.contains(k));
            }
            "siftdb_build" => (0..passes).for_each(|_| drop(black_box(siftdb()))),
            "sbbf-rs-safe" => {
                let f = sbbf();
                run(&|k| f.contains_hash(hash_key(k)));
            }
            "sbbf_build" => (0..passes).for_each(|_| drop(black_box(sbbf()))),
            "keys_build" => (0..passes).for_each(|_| {
                black_box(keys_only());
            }),
            other => panic!("SIFTDB_BENCH_ONLY: no filter {other}"),
        }
        return;
    }
    // name → (build ns/key, absent ns, present ns) per round.
    let mut times: Vec<[Vec<f64>; 3]> = COMPARED.iter().map(|_| Default::default()).collect();
    let mut fp = [0.0f64; COMPARED.len()];
    let per_key = |d: Duration| d.as_secs_f64() * 1e9 / n as f64;
    let mut order: Vec<usize> = (0..COMPARED.len()).collect();
    let mut state = 0x0c0f_fee0_u64;
    for _ in 0..rounds {
        // A new order each round (Fisher-Yates), so no filter always runs
        // first or always follows the same one: a build measured right after
        // xorf's, whichever filter's it was, took about 8% longer at 20M
        // when the order was only rotated.
        for top in (1..order.len()).rev() {
            order.swap(top, (splitmix64(&mut state) % (top as u64 + 1)) as usize);
        }
        for &i in &order {
            let (build, a, p, rate) = match COMPARED[i] {
                "siftdb" => {
                    let (f, t) = siftdb_each_build(n);
                    let q = |k: &[u8]| f.contains(k);
                    (
                        t,
                        query_pass(&absent, q),
                        query_pass(&present, q),
                        measured_fp(q),
                    )
                }
                "siftdb_hash_key" => {
                    // The same filter asked by `contains_hash(hash_key(k))`,
                    // the call sbbf-rs-safe gets: the hash's share.
                    let (f, t) = siftdb_each_build(n);
                    let q = |k: &[u8]| f.contains_hash(hash_key(k));
                    (
                        t,
                        query_pass(&absent, q),
                        query_pass(&present, q),
                        measured_fp(q),
                    )
                }
                "siftdb_insert_keys" => {
                    let (f, t) = siftdb_build(n);
                    let q = |k: &[u8]| f.contains(k);
                    (
                        t,
                        query_pass(&absent, q),
                        query_pass(&present, q),
                        measured_fp(q),
                    )
                }
                "sbbf-rs-safe" => {
                    let (f, t) = sbbf_build(n);
                    let q = |k: &[u8]| f.contains_hash(hash_key(k));
                    (
                        t,
                        query_pass(&absent, q),
                        query_pass(&present, q),
                        measured_fp(q),
                    )
                }
                "fastbloom" => {
                    let (f, t) = fastbloom_build(n);
                    let q = |k: &[u8]| f.contains(k);
                    (
                        t,
                        query_pass(&absent, q),
                        query_pass(&present, q),
                        measured_fp(q),
                    )
                }
                _ => {
                    let (f, t) = xorf_build(n);
                    let q = |k: &[u8]| f.contains(&hash_key(k));
                    (
                        t,
                        query_pass(&absent, q),
                        query_pass(&present, q),
                        measured_fp(q),
                    )
                }
            };
            times[i][0].push(per_key(build));
            times[i][1].push(a);
            times[i][2].push(p);
            fp[i] = rate;
        }
    }
    let medians: Vec<[f64; 3]> = times
        .iter_mut()
        .map(|[b, a, p]| [median(b), median(a), median(p)])
        .collect();
    let base = medians[3];
    println!(
        "single-key comparison, n = {n}, {BITS_PER_KEY} bits/key, {rounds} rounds in random \
         orders, medians of CPU ns (ratio to sbbf-rs-safe)"
    );
    println!(
        "{:<20} {:>16} {:>16} {:>16} {:>8}",
        "filter", "absent query", "present query", "build ns/key", "FP %"
    );
    for (i, name) in COMPARED.iter().enumerate() {
        let [b, a, p] = medians[i];
        println!(
            "{name:<20} {a:>8.2} ({:>4.2}x) {p:>8.2} ({:>4.2}x) {b:>8.2} ({:>4.2}x) {:>8.3}",
            a / base[1],
            p / base[2],
            b / base[0],
            fp[i] * 100.0
        );
    }
}

/// Quartiles and extremes of `values`: (min, lower quartile, median, upper
/// quartile, max).
fn spread(values: &mut [f64]) -> [f64; 5] {
    values.sort_by(f64::total_cmp);
    let at = |q: f64| values[((values.len() - 1) as f64 * q).round() as usize];
    [at(0.0), at(0.25), at(0.5), at(0.75), at(1.0)]
}

/// Writes a buffer larger than any cache of the machine (64 MiB), so that
/// what was touched before it is no longer cached.
fn evict_caches() {
    let mut junk = vec![1u8; 64 << 20];
    for at in (0..junk.len()).step_by(64) {
        junk[at] = junk[at].wrapping_add(1);
    }
    black_box(&junk);
}

/// `SIFTDB_BENCH_PAIRED=1`: siftdb's single-key paths against
/// sbbf-rs-safe's alone, in pairs close in time, for a ratio a shared
/// machine's bursts move less than `compare`'s. Each round (`SIFTDB_BENCH_ROUNDS`,
/// 21) builds both filters one `insert` per key and siftdb's also with
/// `insert_keys` (in an order that alternates by round), evicts the caches
/// (or the filter built last would start its queries warm), then runs the
/// absent and the present queries in eight slices, each slice through
/// both filters back to back (which goes first alternates); a round's
/// ratio is siftdb's time over sbbf's. Printed: the quartiles and extremes
/// of the per-round ratios, and the median times.
fn paired(n: u64) {
    let rounds: usize = std::env::var("SIFTDB_BENCH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(21);
    let absent_keys = query_keys(n, 1, 0x5eed + 1);
    let present_keys = query_keys(n, 0, 0x5eed);
    let absent: Vec<&[u8]> = absent_keys.iter().map(|k| &k[..]).collect();
    let present: Vec<&[u8]> = present_keys.iter().map(|k| &k[..]).collect();
    // Per measure: (siftdb ns, sbbf ns) per round.
    const MEASURES: [&str; 4] = [
        "absent query",
        "present query",
        "insert",
        "insert_keys build",
    ];
    let mut times: [Vec<(f64, f64)>; 4] = Default::default();
    let per_key = |d: Duration| d.as_secs_f64() * 1e9 / n as f64;
    let mut fp = (0.0, 0.0);
    for round in 0..rounds {
        let (ours, ours_time, theirs, theirs_time, keys_time) = if round % 2 == 0 {
            let (o, ot) = siftdb_each_build(n);
            let (t, tt) = sbbf_build(n);
            let (_, kt) = siftdb_build(n);
            (o, ot, t, tt, kt)
        } else {
            let (_, kt) = siftdb_build(n);
            let (t, tt) = sbbf_build(n);
            let (o, ot) = siftdb_each_build(n);
            (o, ot, t, tt, kt)
        };
        // The filter built last would start its queries warm in the cache
        // (the build order alternates by round, so the rounds split in two
        // modes): both start cold instead.
        evict_caches();
        times[2].push((per_key(ours_time), per_key(theirs_time)));
        times[3].push((per_key(keys_time), per_key(theirs_time)));
        if round == 0 {
            fp = (
                measured_fp(|k| ours.contains(k)),
                measured_fp(|k| theirs.contains_hash(hash_key(k))),
            );
        }
        for (measure, queries) in [&absent, &present].into_iter().enumerate() {
            let (mut o, mut t) = (0.0, 0.0);
            for (slice, part) in queries.chunks(queries.len() / 8).enumerate() {
                let mine = || query_pass(part, |k| ours.contains(k));
                let sbbf = || query_pass(part, |k| theirs.contains_hash(hash_key(k)));
                if (slice + round) % 2 == 0 {
                    o += mine();
                    t += sbbf();
                } else {
                    t += sbbf();
                    o += mine();
                }
            }
            times[measure].push((o / 8.0, t / 8.0));
        }
    }
    println!(
        "paired with sbbf-rs-safe, n = {n}, {BITS_PER_KEY} bits/key, {rounds} rounds; \
         FP siftdb {:.3}%, sbbf {:.3}%",
        fp.0 * 100.0,
        fp.1 * 100.0
    );
    println!(
        "{:<18} {:>9} {:>9}   siftdb/sbbf per round: min q1 median q3 max",
        "measure", "siftdb ns", "sbbf ns"
    );
    for (name, pairs) in MEASURES.iter().zip(&times) {
        let mut ratios: Vec<f64> = pairs.iter().map(|(o, t)| o / t).collect();
        let mut ours: Vec<f64> = pairs.iter().map(|p| p.0).collect();
        let mut theirs: Vec<f64> = pairs.iter().map(|p| p.1).collect();
        let [lo, q1, mid, q3, hi] = spread(&mut ratios);
        println!(
            "{name:<18} {:>9.2} {:>9.2}   {lo:.2} {q1:.2} {mid:.2} {q3:.2} {hi:.2}",
            median(&mut ours),
            median(&mut theirs)
        );
    }
}

fn main() {
    let huge = std::env::var("SIFTDB_BENCH_HUGE").is_ok_and(|v| v == "1");
    // SIFTDB_BENCH_KEYS=n: another size (the `build` group included).
    let chosen = std::env::var("SIFTDB_BENCH_KEYS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok());
    let n: u64 = chosen.unwrap_or(if huge { 100_000_000 } else { 1_000_000 });
    for j in [0u64, 7, 123_456_789, 999_999_999_999_999] {
        assert_eq!(&key(j)[..], format!("k{j:015}").as_bytes());
    }
    // What a CPU without AVX-512 runs (siftdb's kernels only; x86-64's).
    #[cfg(target_arch = "x86_64")]
    if std::env::var("SIFTDB_BENCH_ISA").is_ok_and(|v| v == "avx2") {
        siftdb_filter::internals::cap_at_avx2();
    }
    if std::env::var("SIFTDB_BENCH_COMPARE").is_ok_and(|v| v == "1") {
        compare(n);
        return;
    }
    if std::env::var("SIFTDB_BENCH_PAIRED").is_ok_and(|v| v == "1") {
        paired(n);
        return;
    }

    let (sift, sift_time) = siftdb_build(n);
    let (gathered, gathered_time) = siftdb_gathered_build(n);
    assert!(gathered == sift, "the batched build sets the same bits");
    assert!(
        siftdb_each_build(n).0 == sift,
        "one insert per key sets the same bits"
    );
    let (fast, fast_time) = fastbloom_build(n);
    let (sip, sip_time) = bloomfilter_build(n);
    let (sbbf, sbbf_time) = sbbf_build(n);
    let (fuse, fuse_time) = xorf_build(n);
    let (fuse8, fuse8_time) = fuse_build(n, FingerprintBits::Eight);
    let (fuse16, fuse16_time) = fuse_build(n, FingerprintBits::Sixteen);
    let (bloom12, bloom12_time) = bloom_at_rate(n, FingerprintBits::Eight.fp_rate());
    let (bloom28, bloom28_time) = bloom_at_rate(n, FingerprintBits::Sixteen.fp_rate());
    // Bloom blocks queried in place, cache-line aligned, as a table holds them.
    let (block12, block28) = (bloom12.encode(), bloom28.encode());
    let (bloom12_buffer, at12) = placed(&block12, 0);
    let bloom12_view =
        FilterView::parse(&bloom12_buffer[at12..at12 + block12.len()]).expect("own encoding");
    let (bloom28_buffer, at28) = placed(&block28, 0);
    let bloom28_view =
        FilterView::parse(&bloom28_buffer[at28..at28 + block28.len()]).expect("own encoding");
    let block = sift.encode();
    // The view as a table sees it: the block starting on a cache line (its
    // 64-byte header keeps every line aligned then), and 16 bytes off, where
    // every line straddles two cache lines.
    let (aligned, at) = placed(&block, 0);
    let view = FilterView::parse(&aligned[at..at + block.len()]).expect("own encoding");
    let (misaligned, off) = placed(&block, 16);
    let off_view = FilterView::parse(&misaligned[off..off + block.len()]).expect("own encoding");
    drop(block);

    let k = sift.hashes();
    let sift_bpk = sift.bits() as f64 / n as f64;
    let rows = [
        Row {
            name: "siftdb",
            bits: sift.bits(),
            k: k.to_string(),
            fp: measured_fp(|key| sift.contains(key)),
            build: sift_time,
            theory: format!(
                "blocked {:.4}%, standard {:.4}%",
                theory::blocked_fp_rate(sift_bpk, k) * 100.0,
                theory::standard_fp_rate(sift.bits() as f64, n as f64, k) * 100.0
            ),
        },
        Row {
            name: "siftdb_gathered",
            bits: gathered.bits(),
            k: gathered.hashes().to_string(),
            fp: measured_fp(|key| gathered.contains(key)),
            build: gathered_time,
            theory: "as siftdb (the same bits)".into(),
        },
        Row {
            name: "fastbloom",
            bits: fast.num_bits() as u64,
            k: fast.num_hashes().to_string(),
            fp: measured_fp(|key| fast.contains(key)),
            build: fast_time,
            theory: format!(
                "standard {:.4}%",
                theory::standard_fp_rate(fast.num_bits() as f64, n as f64, fast.num_hashes())
                    * 100.0
            ),
        },
        Row {
            name: "bloomfilter",
            bits: sip.len(),
            k: sip.number_of_hash_functions().to_string(),
            fp: measured_fp(|key| sip.check(key)),
            build: sip_time,
            theory: format!(
                "standard {:.4}%",
                theory::standard_fp_rate(
                    sip.len() as f64,
                    n as f64,
                    sip.number_of_hash_functions()
                ) * 100.0
            ),
        },
        Row {
            name: "sbbf-rs-safe",
            bits: sbbf.as_bytes().len() as u64 * 8,
            k: "8".into(),
            fp: measured_fp(|key| sbbf.contains_hash(hash_key(key))),
            build: sbbf_time,
            theory: String::new(),
        },
        Row {
            name: "xorf BFuse8",
            bits: fuse.fingerprints.len() as u64 * 8,
            k: "3".into(),
            fp: measured_fp(|key| fuse.contains(&hash_key(key))),
            build: fuse_time,
            theory: "2^-8 = 0.3906%".into(),
        },
        Row {
            name: "siftdb_fuse8",
            bits: fuse8.header().slot_bytes() * 8,
            k: "3".into(),
            fp: measured_fp(|key| fuse8.contains(key)),
            build: fuse8_time,
            theory: "2^-8 = 0.3906%".into(),
        },
        Row {
            name: "siftdb_fuse16",
            bits: fuse16.header().slot_bytes() * 8,
            k: "3".into(),
            fp: measured_fp(|key| fuse16.contains(key)),
            build: fuse16_time,
            theory: "2^-16 = 0.0015%".into(),
        },
        Row {
            name: "siftdb_bloom12",
            bits: bloom12.bits(),
            k: bloom12.hashes().to_string(),
            fp: measured_fp(|key| bloom12_view.contains(key)),
            build: bloom12_time,
            theory: format!(
                "blocked {:.4}%",
                theory::blocked_fp_rate(bloom12.bits() as f64 / n as f64, bloom12.hashes()) * 100.0
            ),
        },
        Row {
            name: "siftdb_bloom28",
            bits: bloom28.bits(),
            k: bloom28.hashes().to_string(),
            fp: measured_fp(|key| bloom28_view.contains(key)),
            build: bloom28_time,
            theory: format!(
                "blocked {:.4}%",
                theory::blocked_fp_rate(bloom28.bits() as f64 / n as f64, bloom28.hashes()) * 100.0
            ),
        },
    ];
    print_table(n, &rows);
    // Every present key must be found, or the timings mean nothing.
    for i in (0..n).step_by((n / 1000) as usize) {
        let k = key(2 * i);
        assert!(sift.contains(&k) && view.contains(&k) && off_view.contains(&k));
        assert!(fast.contains(&k[..]));
        assert!(sip.check(&k[..]) && sbbf.contains_hash(hash_key(&k)));
        assert!(fuse.contains(&hash_key(&k)));
        assert!(fuse8.contains(&k) && fuse16.contains(&k));
        assert!(bloom12_view.contains(&k) && bloom28_view.contains(&k));
    }

    let mut c = Criterion::default()
        .with_measurement(ThreadCpuTime)
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .configure_from_args();

    if !huge {
        // The builds the issue compares, taken in turn (see ALTERNATIONS).
        let (mut ours, mut one_pass, mut theirs) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..ALTERNATIONS {
            ours.push(siftdb_gathered_build(n).1);
            one_pass.push(siftdb_build(n).1);
            theirs.push(sbbf_build(n).1);
        }
        let per_key = |times: &mut Vec<Duration>| {
            times.sort();
            times[times.len() / 2].as_secs_f64() * 1e9 / n as f64
        };
        let (ours, one_pass, theirs) = (
            per_key(&mut ours),
            per_key(&mut one_pass),
            per_key(&mut theirs),
        );
        println!(
            "build of {n} keys (hashing included), {ALTERNATIONS} alternating runs, median ns/key: \
             siftdb_gathered {ours:.2}, siftdb (insert_keys) {one_pass:.2}, \
             sbbf-rs-safe {theirs:.2} (siftdb_gathered / sbbf {:.2}, insert_keys / sbbf {:.2})",
            ours / theirs,
            one_pass / theirs
        );
        let mut g = c.benchmark_group("build");
        g.sampling_mode(SamplingMode::Flat);
        g.throughput(Throughput::Elements(n));
        let mut timed = |name: &str, build: fn(u64) -> Duration| {
            g.bench_function(name, |b| {
                b.iter_custom(|iters| (0..iters).map(|_| build(n)).sum())
            });
        };
        timed("siftdb", |n| siftdb_build(n).1);
        timed("siftdb_each", |n| siftdb_each_build(n).1);
        timed("siftdb_gathered", |n| siftdb_gathered_build(n).1);
        timed("fastbloom", |n| fastbloom_build(n).1);
        timed("bloomfilter", |n| bloomfilter_build(n).1);
        timed("sbbf-rs-safe", |n| sbbf_build(n).1);
        timed("xorf_bfuse8", |n| xorf_build(n).1);
        timed("siftdb_fuse8", |n| fuse_build(n, FingerprintBits::Eight).1);
        timed("siftdb_fuse16", |n| {
            fuse_build(n, FingerprintBits::Sixteen).1
        });
        timed("siftdb_bloom12", |n| {
            bloom_at_rate(n, FingerprintBits::Eight.fp_rate()).1
        });
        timed("siftdb_bloom28", |n| {
            bloom_at_rate(n, FingerprintBits::Sixteen.fp_rate()).1
        });
        g.finish();
    }

    if !huge {
        // The insert alone, from hashes already gathered, as a table builder
        // holds them when its last key is added: allocation and insert timed.
        let hashes: Vec<u64> = (0..n).map(|j| hash_key(&key(2 * j))).collect();
        let siftdb_insert = |hashes: &[u64]| {
            let start = cpu_now();
            let mut f =
                BloomFilter::with_bits_per_key(n as usize, BITS_PER_KEY as f64).expect("size");
            f.insert_hashes(black_box(hashes));
            let spent = cpu_now() - start;
            black_box(&f);
            spent
        };
        let sbbf_insert = |hashes: &[u64]| {
            let start = cpu_now();
            let mut f = sbbf_rs_safe::Filter::new(BITS_PER_KEY, n as usize);
            for &h in black_box(hashes) {
                f.insert_hash(h);
            }
            let spent = cpu_now() - start;
            black_box(&f);
            spent
        };
        // The two inserts taken in turn, so a neighbour's burst on a shared
        // machine slows both: the medians' ratio is the figure to compare.
        let (mut ours, mut theirs) = (Vec::new(), Vec::new());
        for _ in 0..ALTERNATIONS {
            ours.push(siftdb_insert(&hashes));
            theirs.push(sbbf_insert(&hashes));
        }
        let median = |times: &mut Vec<Duration>| {
            times.sort();
            times[times.len() / 2].as_secs_f64() * 1e9 / n as f64
        };
        let (ours, theirs) = (median(&mut ours), median(&mut theirs));
        println!(
            "insert from {n} gathered hashes, {ALTERNATIONS} alternating runs, median ns/key: \
             siftdb {ours:.2}, sbbf-rs-safe {theirs:.2} \
             (siftdb / sbbf {:.2})",
            ours / theirs
        );
        let mut g = c.benchmark_group("insert_prehashed");
        g.sampling_mode(SamplingMode::Flat);
        g.throughput(Throughput::Elements(n));
        g.bench_function("siftdb", |b| {
            b.iter_custom(|iters| (0..iters).map(|_| siftdb_insert(&hashes)).sum())
        });
        g.bench_function("sbbf-rs-safe", |b| {
            b.iter_custom(|iters| (0..iters).map(|_| sbbf_insert(&hashes)).sum())
        });
        g.finish();
    }

    for (group, parity) in [("contains_present", 0), ("contains_absent", 1)] {
        let keys = query_keys(n, parity, 0x5eed + parity);
        let mut g = c.benchmark_group(group);
        g.throughput(Throughput::Elements(BATCH as u64));
        // Keys reach every filter as slices of run-time length, as a
        // database's keys do: no filter's hash is specialised for 16 bytes.
        let slices: Vec<&[u8]> = keys.iter().map(|k| &k[..]).collect();
        bench_queries(&mut g, "siftdb", &slices, |k| sift.contains(k));
        bench_batched(&mut g, "siftdb_batched", &slices, |batch| {
            count_true(sift.contains_keys(batch))
        });
        bench_queries(&mut g, "siftdb_view", &slices, |k| view.contains(k));
        bench_batched(&mut g, "siftdb_view_batched", &slices, |batch| {
            count_true(view.contains_keys(batch))
        });
        bench_queries(&mut g, "siftdb_view_misaligned", &slices, |k| {
            off_view.contains(k)
        });
        bench_queries(&mut g, "fastbloom", &slices, |k| fast.contains(*k));
        bench_queries(&mut g, "bloomfilter", &slices, |k| sip.check(*k));
        bench_queries(&mut g, "sbbf-rs-safe", &slices, |k| {
            sbbf.contains_hash(hash_key(k))
        });
        bench_queries(&mut g, "xorf_bfuse8", &slices, |k| {
            fuse.contains(&hash_key(k))
        });
        bench_queries(&mut g, "siftdb_fuse8", &slices, |k| fuse8.contains(k));
        bench_batched(&mut g, "siftdb_fuse8_batched", &slices, |batch| {
            count_true(fuse8.contains_keys(batch))
        });
        bench_queries(&mut g, "siftdb_fuse16", &slices, |k| fuse16.contains(k));
        bench_queries(&mut g, "siftdb_bloom12_view", &slices, |k| {
            bloom12_view.contains(k)
        });
        bench_batched(&mut g, "siftdb_bloom12_view_batched", &slices, |batch| {
            count_true(bloom12_view.contains_keys(batch))
        });
        bench_queries(&mut g, "siftdb_bloom28_view", &slices, |k| {
            bloom28_view.contains(k)
        });
        g.finish();
    }

    {
        let hashes: Vec<u64> = query_keys(n, 1, 0xab5e)
            .iter()
            .map(|k| hash_key(k))
            .collect();
        let mut g = c.benchmark_group("absent_prehashed");
        g.throughput(Throughput::Elements(BATCH as u64));
        bench_queries(&mut g, "siftdb", &hashes, |&h| sift.contains_hash(h));
        bench_batched(&mut g, "siftdb_batched", &hashes, |batch| {
            count_true(sift.contains_hashes(batch))
        });
        bench_queries(&mut g, "sbbf-rs-safe", &hashes, |&h| sbbf.contains_hash(h));
        bench_queries(&mut g, "xorf_bfuse8", &hashes, |h| fuse.contains(h));
        bench_queries(&mut g, "siftdb_fuse8", &hashes, |&h| fuse8.contains_hash(h));
        bench_batched(&mut g, "siftdb_fuse8_batched", &hashes, |batch| {
            count_true(fuse8.contains_hashes(batch))
        });
        bench_queries(&mut g, "siftdb_fuse16", &hashes, |&h| {
            fuse16.contains_hash(h)
        });
        bench_batched(&mut g, "siftdb_fuse16_batched", &hashes, |batch| {
            count_true(fuse16.contains_hashes(batch))
        });
        bench_queries(&mut g, "siftdb_bloom12_view", &hashes, |&h| {
            bloom12_view.contains_hash(h)
        });
        bench_batched(&mut g, "siftdb_bloom12_view_batched", &hashes, |batch| {
            count_true(bloom12_view.contains_hashes(batch))
        });
        bench_queries(&mut g, "siftdb_bloom28_view", &hashes, |&h| {
            bloom28_view.contains_hash(h)
        });
        g.finish();
    }

    {
        // A buffer as large as siftdb's filter, filled with random words.
        let words = (sift.bits() / 64) as usize;
        let mut state = 1u64;
        let buffer: Vec<u64> = (0..words).map(|_| splitmix64(&mut state)).collect();
        let randoms: Vec<u64> = (0..QUERIES).map(|_| splitmix64(&mut state)).collect();
        let slot = |r: u64| ((r as u128 * words as u128) >> 64) as usize;
        let mut g = c.benchmark_group("random_load");
        g.throughput(Throughput::Elements(BATCH as u64));
        g.bench_function("independent", |b| {
            let mut start = 0;
            b.iter(|| {
                let batch = &randoms[start..start + BATCH];
                start = (start + BATCH) % randoms.len();
                let mut sum = 0u64;
                for &r in batch {
                    sum = sum.wrapping_add(buffer[slot(black_box(r))]);
                }
                sum
            })
        });
        g.bench_function("dependent", |b| {
            let mut start = 0;
            let mut last = 0u64;
            b.iter(|| {
                let batch = &randoms[start..start + BATCH];
                start = (start + BATCH) % randoms.len();
                for &r in batch {
                    // The next address needs the value just loaded: pure latency.
                    last = buffer[slot(r ^ (last & 1))];
                }
                last
            })
        });
        g.finish();
    }

    c.final_summary();
}
