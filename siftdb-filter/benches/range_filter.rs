//! siftdb's range filter (Grafite over an order-preserving key map), and a
//! prefix-Bloom hierarchy in the manner of Rosetta built on the same keys.
//!
//! ```text
//! cargo bench -p siftdb-filter --bench range_filter        # about 3 minutes
//! ```
//!
//! Three key sets of `N` = 1,000,000 keys:
//! - `bench`: the workload's present keys `format!("k{:015}", 2i)`; the key
//!   map's span fits the reduced universe, so the filter runs in exact mode;
//! - `sparse`: the same format with 1,000,000 random `j < 10^15` (hashed mode);
//! - `u64`: random 64-bit integers as 8-byte big-endian keys (hashed mode;
//!   the key map is the identity on them, so ℓ is the same in both spaces).
//!
//! Before the timed runs it prints, per set and bits per key: the mode, the
//! bits per key used, one build's ns/key, and the false-positive rate of
//! 200,000 empty ranges of ℓ = 1, 4, 16, 64 consecutive keys (integers `j`
//! or `x`) beside the mean proven bound `ℓ_mapped · m/u` of the same
//! queries; for `bench` also the `seekempty` shape, `range(key(2i+1) ..
//! key(2i+2))`. Then the Rosetta-style hierarchy on `u64` at the same bits
//! per key with three memory splits over its 7 levels (ranges ≤ 64).
//!
//! Criterion groups (thread CPU time, see `benches/filter.rs`):
//! `range_build` (ns per key), `range_empty` (queries of empty ranges: the
//! `seekempty` gaps for `bench`, ℓ = 16 for the others, Rosetta beside),
//! `range_present` (ranges of ℓ = 16 holding a key).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "benchmark setup: a failed assumption is a failed run"
)]
use std::collections::BTreeSet;
use std::hint::black_box;
use std::ops::Bound;
use std::time::Duration;

use criterion::{Criterion, SamplingMode, Throughput};
use siftdb_filter::range::{RangeFilter, RangeFilterBuilder, RangeFilterView};
use siftdb_filter::BloomFilter;

#[path = "support/mod.rs"]
mod support;
use support::{bench_queries, cpu_now, key, splitmix64, ThreadCpuTime, BATCH};

const N: u64 = 1_000_000;
const FP_QUERIES: usize = 200_000;
const QUERIES: usize = 1 << 18;
const LENGTHS: [u64; 4] = [1, 4, 16, 64];
const SPARSE_SPACE: u64 = 1_000_000_000_000_000;

/// A key set: its keys as integers (sorted, distinct) and how an integer
/// becomes a key.
struct KeySet {
    name: &'static str,
    ints: Vec<u64>,
    space: u64,
    key_of: fn(u64) -> Vec<u8>,
}

fn key_sets() -> Vec<KeySet> {
    let mut state = 0x5eed_u64;
    let mut random = |space: u64| -> Vec<u64> {
        let set: BTreeSet<u64> = (0..N)
            .map(|_| ((splitmix64(&mut state) as u128 * space as u128) >> 64) as u64)
            .collect();
        set.into_iter().collect()
    };
    vec![
        KeySet {
            name: "bench",
            ints: (0..N).map(|i| 2 * i).collect(),
            space: 2 * N,
            key_of: |j| key(j).to_vec(),
        },
        KeySet {
            name: "sparse",
            ints: random(SPARSE_SPACE),
            space: SPARSE_SPACE,
            key_of: |j| key(j).to_vec(),
        },
        KeySet {
            name: "u64",
            ints: random(u64::MAX),
            space: u64::MAX,
            key_of: |x| x.to_be_bytes().to_vec(),
        },
    ]
}

/// Builds from keys streamed in sorted order; returns the filter and the
/// CPU time of `add` + `finish` + `parse` (key formatting excluded).
fn build(set: &KeySet, bits: f64) -> (RangeFilter, Duration) {
    let keys: Vec<Vec<u8>> = set.ints.iter().map(|&j| (set.key_of)(j)).collect();
    let start = cpu_now();
    let mut builder = RangeFilterBuilder::new(bits).expect("bits");
    for k in &keys {
        builder.add(k).expect("sorted");
    }
    let filter = RangeFilterView::parse(builder.finish().expect("build")).expect("own block");
    (filter, cpu_now() - start)
}

/// `count` starts of empty ranges `[x, x + len)` drawn at random (the set
/// must have such ranges: not `bench` for `len > 1`).
fn empty_starts(set: &KeySet, len: u64, count: usize, seed: u64) -> Vec<u64> {
    let mut state = seed;
    let mut out = Vec::with_capacity(count);
    while out.len() < count {
        let x = ((splitmix64(&mut state) as u128 * (set.space - len) as u128) >> 64) as u64;
        let at = set.ints.partition_point(|&k| k < x);
        if set.ints.get(at).is_none_or(|&k| k >= x + len) {
            out.push(x);
        }
    }
    out
}

/// (measured FP, mean proven bound) over empty ranges of `len` integers.
fn measure(set: &KeySet, filter: &RangeFilter, len: u64) -> (f64, f64) {
    let (mut hits, mut bound) = (0usize, 0f64);
    for x in empty_starts(set, len, FP_QUERIES, 0xf00d + len) {
        let (a, b) = ((set.key_of)(x), (set.key_of)(x + len - 1));
        hits += usize::from(filter.may_contain_range(&a, &b));
        if let Some((lo, hi)) = filter.mapped_range(Bound::Included(&a), Bound::Included(&b)) {
            bound += filter.fp_bound(hi - lo + 1);
        }
    }
    (hits as f64 / FP_QUERIES as f64, bound / FP_QUERIES as f64)
}

/// A prefix-Bloom hierarchy in the manner of Rosetta (Luo et al., SIGMOD
/// 2020): level `j` holds every key's `x >> j` in a Bloom filter; a range is
/// cut into dyadic pieces, and a piece that passes its level is doubted
/// down to level 0 through both halves.
struct Rosetta {
    levels: Vec<BloomFilter>,
}

impl Rosetta {
    fn build(ints: &[u64], bits_per_key: f64, shares: &[f64]) -> Rosetta {
        let levels = shares
            .iter()
            .enumerate()
            .map(|(j, share)| {
                let mut prefixes: Vec<u64> = ints.iter().map(|x| x >> j).collect();
                prefixes.dedup();
                let bits = bits_per_key * share * ints.len() as f64;
                let per_prefix = (bits / prefixes.len() as f64).clamp(0.5, 128.0);
                let mut f =
                    BloomFilter::with_bits_per_key(prefixes.len(), per_prefix).expect("size");
                for p in prefixes {
                    f.insert(&p.to_le_bytes());
                }
                f
            })
            .collect();
        Rosetta { levels }
    }

    fn bits(&self) -> u64 {
        self.levels.iter().map(BloomFilter::bits).sum()
    }

    fn doubt(&self, level: usize, prefix: u64) -> bool {
        if !self.levels[level].contains(&prefix.to_le_bytes()) {
            return false;
        }
        level == 0 || self.doubt(level - 1, prefix << 1) || self.doubt(level - 1, prefix << 1 | 1)
    }

    /// May a key lie in `[lo, hi]`? (Ranges wider than the top level's
    /// pieces are cut into more pieces.)
    fn may_contain(&self, mut lo: u64, hi: u64) -> bool {
        let top = self.levels.len() - 1;
        loop {
            let mut level = (lo.trailing_zeros() as usize).min(top);
            while level > 0
                && lo
                    .checked_add((1u64 << level) - 1)
                    .is_none_or(|end| end > hi)
            {
                level -= 1;
            }
            if self.doubt(level, lo >> level) {
                return true;
            }
            match lo.checked_add(1u64 << level) {
                Some(next) if next <= hi => lo = next,
                _ => return false,
            }
        }
    }
}

/// Memory splits over Rosetta's 7 levels (ℓ ≤ 64): name and shares.
fn rosetta_splits() -> [(&'static str, [f64; 7]); 3] {
    let rest = |bottom: f64| {
        let mut s = [(1.0 - bottom) / 6.0; 7];
        s[0] = bottom;
        s
    };
    [
        ("uniform", [1.0 / 7.0; 7]),
        ("half-bottom", rest(0.5)),
        ("3/4-bottom", rest(0.75)),
    ]
}

fn time_per_query(queries: &[(Vec<u8>, Vec<u8>)], f: impl Fn(&[u8], &[u8]) -> bool) -> f64 {
    let start = cpu_now();
    let mut hits = 0usize;
    for (a, b) in queries {
        hits += usize::from(f(black_box(a), black_box(b)));
    }
    black_box(hits);
    (cpu_now() - start).as_nanos() as f64 / queries.len() as f64
}

fn print_tables(sets: &[KeySet]) {
    println!("\nrange filter: N = {N} keys per set, FP over {FP_QUERIES} empty ranges of ℓ keys");
    println!(
        "{:<7} {:>4} {:>7} {:>9} {:>9}   FP % (mean bound %) for ℓ = 1, 4, 16, 64",
        "set", "bits", "mode", "bits/key", "ns/key"
    );
    for set in sets {
        for bits in [10.0, 16.0] {
            let (filter, took) = build(set, bits);
            let mut cells = String::new();
            for len in LENGTHS {
                if set.name == "bench" && len > 1 {
                    // Every other integer is a key: no longer empty range.
                    cells += "  -";
                    continue;
                }
                let (fp, bound) = measure(set, &filter, len);
                cells += &format!("  {:.4} ({:.4})", fp * 100.0, bound * 100.0);
            }
            println!(
                "{:<7} {:>4} {:>7} {:>9.2} {:>9.1} {cells}",
                set.name,
                bits,
                format!("{:?}", filter.header().mode),
                filter.bits_per_key(),
                took.as_nanos() as f64 / set.ints.len() as f64
            );
            if set.name == "bench" {
                let gaps = (0..N - 1)
                    .filter(|&i| filter.may_contain_half_open(&key(2 * i + 1), &key(2 * i + 2)))
                    .count();
                println!(
                    "        seekempty range(key(2i+1)..key(2i+2)): {gaps} of {} answer maybe",
                    N - 1
                );
            }
        }
    }

    let set = sets.iter().find(|s| s.name == "u64").expect("u64 set");
    println!("\nRosetta-style prefix-Bloom hierarchy on the u64 set (same keys), FP % and query ns for ℓ = 1, 4, 16, 64");
    for bits in [10.0, 16.0] {
        let (grafite, _) = build(set, bits);
        let mut line = format!(
            "{:<22} {:>4} {:>6.2} b/k",
            "siftdb (Grafite)",
            bits,
            grafite.bits_per_key()
        );
        for len in LENGTHS {
            let queries = empty_queries(set, len);
            let (fp, _) = measure(set, &grafite, len);
            let ns = time_per_query(&queries, |a, b| grafite.may_contain_range(a, b));
            line += &format!("  {:.4}% {:>5.0} ns", fp * 100.0, ns);
        }
        println!("{line}");
        for (name, shares) in rosetta_splits() {
            let rosetta = Rosetta::build(&set.ints, bits, &shares);
            let mut line = format!(
                "{:<22} {:>4} {:>6.2} b/k",
                format!("rosetta {name}"),
                bits,
                rosetta.bits() as f64 / set.ints.len() as f64
            );
            for len in LENGTHS {
                let starts = empty_starts(set, len, FP_QUERIES, 0xf00d + len);
                let fp = starts
                    .iter()
                    .filter(|&&x| rosetta.may_contain(x, x + len - 1))
                    .count() as f64
                    / starts.len() as f64;
                let queries = empty_queries(set, len);
                let ns = time_per_query(&queries, |a, b| {
                    let lo = u64::from_be_bytes(a.try_into().expect("8 bytes"));
                    let hi = u64::from_be_bytes(b.try_into().expect("8 bytes"));
                    rosetta.may_contain(lo, hi)
                });
                line += &format!("  {:.4}% {:>5.0} ns", fp * 100.0, ns);
            }
            println!("{line}");
        }
    }
    println!();
}

/// `QUERIES` empty ranges of `len` keys as inclusive key pairs.
fn empty_queries(set: &KeySet, len: u64) -> Vec<(Vec<u8>, Vec<u8>)> {
    empty_starts(set, len, QUERIES, 0xbeef + len)
        .into_iter()
        .map(|x| ((set.key_of)(x), (set.key_of)(x + len - 1)))
        .collect()
}

fn main() {
    let sets = key_sets();
    print_tables(&sets);

    let mut c = Criterion::default()
        .with_measurement(ThreadCpuTime)
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .configure_from_args();

    {
        let mut g = c.benchmark_group("range_build");
        g.sampling_mode(SamplingMode::Flat);
        g.throughput(Throughput::Elements(N));
        for set in &sets {
            g.bench_function(format!("{}_16bits", set.name), |b| {
                b.iter_custom(|iters| (0..iters).map(|_| build(set, 16.0).1).sum())
            });
        }
        g.finish();
    }

    let mut state = 0x9e37_u64;
    for set in &sets {
        let (filter, _) = build(set, 16.0);
        let empty: Vec<(Vec<u8>, Vec<u8>)> = if set.name == "bench" {
            // seekempty: range(key(2i+1)..key(2i+2)), half-open.
            (0..QUERIES)
                .map(|_| {
                    let i = ((splitmix64(&mut state) as u128 * (N - 1) as u128) >> 64) as u64;
                    (key(2 * i + 1).to_vec(), key(2 * i + 2).to_vec())
                })
                .collect()
        } else {
            empty_queries(set, 16)
        };
        let present: Vec<(Vec<u8>, Vec<u8>)> = (0..QUERIES)
            .map(|_| {
                let k = set.ints
                    [((splitmix64(&mut state) as u128 * set.ints.len() as u128) >> 64) as usize];
                let lo = k.saturating_sub(8);
                ((set.key_of)(lo), (set.key_of)(lo + 15))
            })
            .collect();
        let mut g = c.benchmark_group("range_empty");
        g.throughput(Throughput::Elements(BATCH as u64));
        if set.name == "bench" {
            bench_queries(&mut g, "bench_seekempty", &empty, |(a, b)| {
                filter.may_contain_half_open(a, b)
            });
        } else {
            bench_queries(&mut g, &format!("{}_len16", set.name), &empty, |(a, b)| {
                filter.may_contain_range(a, b)
            });
        }
        if set.name == "u64" {
            let (_, shares) = rosetta_splits()[1];
            let rosetta = Rosetta::build(&set.ints, 16.0, &shares);
            bench_queries(&mut g, "u64_len16_rosetta_half_bottom", &empty, |(a, b)| {
                let lo = u64::from_be_bytes(a.as_slice().try_into().expect("8 bytes"));
                let hi = u64::from_be_bytes(b.as_slice().try_into().expect("8 bytes"));
                rosetta.may_contain(lo, hi)
            });
        }
        g.finish();
        let mut g = c.benchmark_group("range_present");
        g.throughput(Throughput::Elements(BATCH as u64));
        bench_queries(
            &mut g,
            &format!("{}_len16", set.name),
            &present,
            |(a, b)| filter.may_contain_range(a, b),
        );
        g.finish();
    }

    c.final_summary();
}
