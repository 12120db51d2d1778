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
use siftdb_filter::{hash_key, theory, BloomFilter, FilterView, FingerprintBits};
use xorf::Filter as _;

mod compare;
mod filters;
#[path = "../support/mod.rs"]
mod support;

use compare::{compare, paired};
use filters::*;
use support::{bench_queries, cpu_now, key, splitmix64, ThreadCpuTime, BATCH};

/// Runs of each insert in the alternating comparison.
const ALTERNATIONS: usize = 21;

/// A copy of `block` starting `past` bytes after a 64-byte boundary: the
/// buffer and where in it the copy starts.
fn placed(block: &[u8], past: usize) -> (Vec<u8>, usize) {
    let mut buffer = vec![0u8; block.len() + 64 + past];
    let at = buffer.as_ptr().align_offset(64) + past;
    buffer[at..at + block.len()].copy_from_slice(block);
    (buffer, at)
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
