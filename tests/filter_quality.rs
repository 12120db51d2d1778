//! Measured quality of the blocked Bloom filter against its theory: false
//! positive rates, sizing, memory, the fill-based estimate, and LevelDB's
//! varying-lengths criteria. Keys are `k{j:015}`, present j even, absent j odd.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use siftdb::filter::theory::{best_probes, blocked_fp_rate};
use siftdb::filter::{hash_key, BloomFilter};
use siftdb_testkit::numbered_key;

fn build(n: u64, bits_per_key: f64) -> BloomFilter {
    let mut f = BloomFilter::with_bits_per_key(n as usize, bits_per_key).unwrap();
    for i in 0..n {
        f.insert(&numbered_key(2 * i));
    }
    f
}

fn measured_fp(f: &BloomFilter, absent: u64) -> f64 {
    let hits = (0..absent)
        .filter(|i| f.contains(&numbered_key(2 * i + 1)))
        .count();
    hits as f64 / absent as f64
}

fn assert_no_false_negatives(f: &BloomFilter, n: u64) {
    for i in 0..n {
        assert!(f.contains(&numbered_key(2 * i)), "false negative at {i}");
    }
}

#[test]
fn ten_bits_per_key_is_at_most_one_percent() {
    let n = 1_000_000;
    let f = build(n, 10.0);
    assert_no_false_negatives(&f, n);
    let fp = measured_fp(&f, 1_000_000);
    let theory = blocked_fp_rate(10.0, f.hashes());
    println!(
        "10 bits/key: k={} measured {fp:.5} theory {theory:.5}",
        f.hashes()
    );
    assert!(fp <= 0.010, "measured {fp}");
}

#[test]
fn every_bits_per_key_is_within_ten_percent_of_blocked_theory() {
    let n = 1_000_000;
    // More absent keys where the rate is small, so the measurement is tight.
    for (bpk, absent) in [
        (6.0, 1_000_000),
        (8.0, 1_000_000),
        (12.0, 2_000_000),
        (16.0, 5_000_000),
        (20.0, 10_000_000),
    ] {
        let f = build(n, bpk);
        let (k, theory) = best_probes(bpk);
        assert_eq!(f.hashes(), k);
        let fp = measured_fp(&f, absent);
        println!(
            "{bpk} bits/key: k={k} measured {fp:.6} theory {theory:.6} ratio {:.3}",
            fp / theory
        );
        assert!(fp <= 1.10 * theory, "{bpk} bits/key: {fp} vs {theory}");
    }
}

#[test]
fn with_rate_delivers_the_rate() {
    let n = 200_000;
    for p in [0.05, 0.01, 0.001] {
        let mut f = BloomFilter::with_rate(n as usize, p).unwrap();
        for i in 0..n {
            f.insert(&numbered_key(2 * i));
        }
        let absent = if p < 0.005 { 4_000_000 } else { 1_000_000 };
        let fp = measured_fp(&f, absent);
        println!(
            "with_rate({p}): {:.2} bits/key, measured {fp:.5}",
            f.bits() as f64 / n as f64
        );
        assert!(fp <= 1.1 * p, "target {p}, measured {fp}");
    }
}

#[test]
fn memory_is_honest() {
    for n in [1usize, 10, 1000, 123_457, 1_000_000] {
        for bpk in [6.0, 9.5, 10.0, 20.0] {
            let f = BloomFilter::with_bits_per_key(n, bpk).unwrap();
            let bound = 1.02 * bpk * n as f64 + 512.0;
            assert!(f.bits() as f64 <= bound, "n={n} bpk={bpk}: {}", f.bits());
            assert!(f.bits() as f64 >= bpk * n as f64, "n={n} bpk={bpk}");
        }
    }
}

#[test]
fn estimated_items_is_within_five_percent() {
    for n in [10_000u64, 100_000, 1_000_000] {
        let f = build(n, 10.0);
        let est = f.estimated_items();
        println!("n={n}: estimated {est:.0}");
        assert!((est / n as f64 - 1.0).abs() <= 0.05, "n={n} est={est}");
    }
}

#[test]
fn current_fp_rate_predicts_the_measured_rate() {
    let f = build(200_000, 10.0);
    let predicted = f.current_fp_rate();
    let fp = measured_fp(&f, 1_000_000);
    println!("predicted {predicted:.5} measured {fp:.5}");
    assert!((fp / predicted - 1.0).abs() < 0.15, "{predicted} vs {fp}");
}

/// LevelDB util/bloom_test.cc VaryingLengths, at 10 bits per key.
#[test]
fn varying_lengths() {
    let mut lengths: Vec<u64> = (1..10).collect();
    lengths.extend((20..100).step_by(10));
    lengths.extend((200..1000).step_by(100));
    lengths.extend((1000..=10_000).step_by(1000));
    let (mut good, mut mediocre) = (0, 0);
    for n in lengths {
        let mut f = BloomFilter::with_bits_per_key(n as usize, 10.0).unwrap();
        for i in 0..n {
            f.insert(&(i as u32).to_le_bytes());
        }
        for i in 0..n {
            assert!(f.contains(&(i as u32).to_le_bytes()), "length {n}: {i}");
        }
        let fp = (0..10_000u32)
            .filter(|i| f.contains(&(i + 1_000_000_000).to_le_bytes()))
            .count() as f64
            / 10_000.0;
        assert!(fp <= 0.02, "length {n}: {fp}");
        if fp > 0.0125 {
            mediocre += 1;
        } else {
            good += 1;
        }
    }
    println!("good {good}, mediocre {mediocre}");
    assert!(mediocre * 5 <= good, "{mediocre} mediocre vs {good} good");
}

#[test]
fn hash_level_api_matches_key_level_api() {
    let mut by_key = BloomFilter::with_bits_per_key(1000, 10.0).unwrap();
    let mut by_hash = by_key.clone();
    for i in 0..1000 {
        let k = &numbered_key(i * 3);
        by_key.insert(k);
        by_hash.insert_hash(hash_key(k));
    }
    assert_eq!(by_key, by_hash);
}

mod properties {
    use proptest::prelude::*;
    use siftdb::filter::{BloomFilter, FilterView};

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        #[test]
        fn no_false_negatives_ever(
            keys in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 0..300),
            bpk in 0.5f64..40.0,
            seed in any::<u64>(),
        ) {
            let mut f = BloomFilter::with_bits_per_key(keys.len(), bpk).unwrap().with_seed(seed);
            for k in &keys {
                f.insert(k);
            }
            let bytes = f.encode();
            let view = FilterView::parse(&bytes[..]).unwrap();
            let decoded = BloomFilter::decode(&bytes).unwrap();
            for k in &keys {
                prop_assert!(f.contains(k));
                prop_assert!(view.contains(k));
                prop_assert!(decoded.contains(k));
            }
        }
    }
}
