//! Measured quality of the binary fuse filter against its theory: no false
//! negatives, false-positive rates within 1.1× of 2⁻⁸ and 2⁻¹⁶, memory per
//! key, LevelDB's varying-lengths criteria, and how often a seed fails.
//! Keys are `k{j:015}`, present j even, absent j odd.
#![allow(
    clippy::unwrap_used,
    clippy::indexing_slicing,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use siftdb::filter::{hash_key, FingerprintBits, FuseFilter, FuseView};
use siftdb_testkit::{numbered_key, SplitMix64};

fn present_hashes(n: u64) -> Vec<u64> {
    (0..n).map(|i| hash_key(&numbered_key(2 * i))).collect()
}

fn build(n: u64, bits: FingerprintBits) -> (Vec<u64>, FuseFilter) {
    let hashes = present_hashes(n);
    let filter = FuseFilter::build(&hashes, bits).unwrap();
    (hashes, filter)
}

/// Absent keys `k{odd}` that match, among `absent` of them.
fn false_positives(f: &FuseFilter, absent: u64) -> u64 {
    (0..absent)
        .filter(|i| f.contains(&numbered_key(2 * i + 1)))
        .count() as u64
}

#[test]
fn eight_bit_rate_is_within_ten_percent_of_two_to_the_minus_eight() {
    let n = 1_000_000;
    let (hashes, f) = build(n, FingerprintBits::Eight);
    assert!(hashes.iter().all(|&h| f.contains_hash(h)), "false negative");
    assert!(
        f.contains_hashes(&hashes).all(|x| x),
        "batched false negative"
    );
    // 10M absent keys: 39,062 expected hits, one standard deviation 198, so
    // the 10% margin is 20 of them.
    let absent = 10_000_000;
    let hits = false_positives(&f, absent);
    let (fp, theory) = (hits as f64 / absent as f64, 1.0 / 256.0);
    println!(
        "fuse8 n={n}: {:.4} bits/key, measured {fp:.6} theory {theory:.6} ratio {:.4}",
        f.bits_per_key(),
        fp / theory
    );
    assert!(fp <= 1.10 * theory, "{fp} vs {theory}");
    assert!(fp >= 0.90 * theory, "{fp} vs {theory}: suspiciously low");
}

#[test]
fn sixteen_bit_rate_is_within_ten_percent_of_two_to_the_minus_sixteen() {
    // An absent key matches when its 16-bit fingerprint equals the XOR of
    // its three slots, and the fingerprint is independent of the slots, so
    // the rate is 2⁻¹⁶ whatever the set. 2²⁸ absent hashes give 4,096
    // expected hits, standard deviation 64: the 10% margin is 6.4 of them
    // (a false alarm once in ~10¹⁰ runs). Random 64-bit hashes stand in for
    // hashed absent keys (a collision with the 100k present hashes has
    // probability ~10⁻⁶), and a 100k-key filter stays in cache, so the 2²⁸
    // queries take seconds.
    let n = 100_000;
    let (hashes, f) = build(n, FingerprintBits::Sixteen);
    assert!(hashes.iter().all(|&h| f.contains_hash(h)), "false negative");
    let mut rng = SplitMix64::new(0xf00d);
    let mut batch = vec![0u64; 1 << 16];
    let mut hits = 0u64;
    let rounds = 1u64 << 12;
    for _ in 0..rounds {
        batch.iter_mut().for_each(|h| *h = rng.next());
        hits += f.contains_hashes(&batch).filter(|&x| x).count() as u64;
    }
    let queries = rounds * batch.len() as u64;
    let (fp, theory) = (hits as f64 / queries as f64, 1.0 / 65536.0);
    println!(
        "fuse16 n={n}: {:.4} bits/key, {hits} hits in {queries}: measured {fp:.3e} theory {theory:.3e} ratio {:.4}",
        f.bits_per_key(),
        fp / theory
    );
    assert!(fp <= 1.10 * theory, "{fp} vs {theory}");
    assert!(fp >= 0.90 * theory, "{fp} vs {theory}: suspiciously low");
    // And real absent keys, hashed: 2M of them, ~31 expected hits.
    let hits = false_positives(&f, 2_000_000);
    assert!(hits <= 70, "{hits} of 2M absent keys");
}

#[test]
fn bits_per_key_shrink_towards_nine_and_eighteen() {
    for (n, lo8, hi8) in [
        (10_000u64, 9.9, 10.6),
        (100_000, 9.3, 9.6),
        (1_000_000, 8.99, 9.05),
    ] {
        let (_, f8) = build(n, FingerprintBits::Eight);
        let (hashes, f16) = build(n, FingerprintBits::Sixteen);
        let (b8, b16) = (f8.bits_per_key(), f16.bits_per_key());
        let block8 = 8.0 * f8.as_bytes().len() as f64 / n as f64;
        println!(
            "n={n}: fuse8 {b8:.4} bits/key ({block8:.4} with header and crc), fuse16 {b16:.4}"
        );
        assert!((lo8..=hi8).contains(&b8), "n={n}: {b8}");
        assert_eq!(b16, 2.0 * b8);
        assert!(f16.contains_hashes(&hashes).all(|x| x));
    }
}

/// LevelDB util/bloom_test.cc VaryingLengths: lengths 1–10, 20–100 by 10,
/// 200–1000 by 100, 2000–10000 by 1000; every added key matches, and the
/// rate over 10,000 other keys stays within bound. For 8-bit fingerprints
/// the expected count is 39 of 10,000 (bound 1%, ten standard deviations
/// above); for 16-bit, 0.15 (bound 0.05%, five hits).
#[test]
fn varying_lengths() {
    let mut lengths: Vec<u32> = (1..=10).collect();
    lengths.extend((20..=100).step_by(10));
    lengths.extend((200..=1000).step_by(100));
    lengths.extend((2000..=10_000).step_by(1000));
    for (bits, bound) in [
        (FingerprintBits::Eight, 0.01),
        (FingerprintBits::Sixteen, 0.0005),
    ] {
        let mut worst = 0.0f64;
        for &n in &lengths {
            let keys: Vec<[u8; 4]> = (0..n).map(|i| i.to_le_bytes()).collect();
            let hashes: Vec<u64> = keys.iter().map(|k| hash_key(k)).collect();
            let f = FuseFilter::build(&hashes, bits).unwrap();
            let view = FuseView::parse(f.as_bytes()).unwrap();
            for k in &keys {
                assert!(view.contains(k), "{bits:?} length {n}: {k:?}");
            }
            assert!(view.contains_keys(&keys).all(|x| x));
            let fp = (0..10_000u32)
                .filter(|i| view.contains(&(i + 1_000_000_000).to_le_bytes()))
                .count() as f64
                / 10_000.0;
            assert!(fp <= bound, "{bits:?} length {n}: {fp}");
            worst = worst.max(fp);
        }
        println!("{bits:?}: worst rate over all lengths {worst}");
    }
}

/// How often the first seed fails, and that no size ever runs out of seeds.
#[test]
fn seeds_rarely_fail() {
    let mut rng = SplitMix64::new(7);
    let mut report = Vec::new();
    for (n, filters) in [
        (10u64, 2000),
        (100, 2000),
        (1000, 1000),
        (10_000, 200),
        (100_000, 20),
    ] {
        let mut retried = 0;
        for _ in 0..filters {
            let hashes: Vec<u64> = (0..n).map(|_| rng.next()).collect();
            let f = FuseFilter::build(&hashes, FingerprintBits::Eight).unwrap();
            retried += (f.header().seed != 0) as u32;
            assert!(hashes.iter().all(|&h| f.contains_hash(h)));
        }
        report.push(format!("n={n}: {retried}/{filters} needed a second seed"));
        assert!(
            retried * 5 <= filters,
            "n={n}: {retried} of {filters} retried"
        );
    }
    println!("{}", report.join("; "));
}

mod properties {
    use proptest::prelude::*;
    use siftdb::filter::{hash_key, AnyFilterView, FingerprintBits, FuseFilter};

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]
        #[test]
        fn no_false_negatives_ever(
            keys in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..40), 0..400),
            wide in any::<bool>(),
        ) {
            let bits = if wide { FingerprintBits::Sixteen } else { FingerprintBits::Eight };
            let hashes: Vec<u64> = keys.iter().map(|k| hash_key(k)).collect();
            let f = FuseFilter::build(&hashes, bits).unwrap();
            let view = AnyFilterView::parse(f.as_bytes()).unwrap();
            for (k, &h) in keys.iter().zip(&hashes) {
                prop_assert!(f.contains(k));
                prop_assert!(view.contains(k));
                prop_assert!(view.contains_hash(h));
            }
            prop_assert!(view.contains_hashes(&hashes).all(|x| x));
        }
    }
}
