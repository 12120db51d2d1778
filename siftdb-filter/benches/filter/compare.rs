//! The head-to-head runs, each filter taken in turn in one process so a
//! shared machine's bursts slow all alike: `SIFTDB_BENCH_COMPARE=1`'s
//! single-key comparison of the four filters ([`compare`]) and
//! `SIFTDB_BENCH_PAIRED=1`'s siftdb against sbbf-rs-safe in pairs close in
//! time ([`paired`]); medians, quartiles and ratios printed.
//!
//! Owns: the interleaving of rounds, the query passes, and the summary
//! statistics (`median`, `spread`).
//! Must never: compare figures from different processes or runs, or time
//! a filter's build or queries with another's work inside the clock.

use std::hint::black_box;
use std::time::Duration;

use siftdb_filter::{hash_key, BloomFilter};
use xorf::Filter as _;

use crate::filters::*;
use crate::support::{cpu_now, key, splitmix64};

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

/// `SIFTDB_BENCH_COMPARE=1`: the single-key comparison in one
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
pub(crate) fn compare(n: u64) {
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
pub(crate) fn paired(n: u64) {
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
