//! The single-key query and the batched probes tables use must never
//! disagree: `contains` against `contains_keys` and `contains_hashes` of the
//! filter and of its encoded view, on random keys and every batch size from
//! 0 to `MAX_BATCH` (shorter than, equal to and longer than the pipeline's
//! group of 16, many groups, and a partial last group).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use proptest::prelude::*;
use siftdb::filter::{BloomFilter, FilterView};

/// The largest batch tried; every size from 0 to it is tried.
const MAX_BATCH: usize = 300;

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A random key of 0..40 bytes.
fn random_key(state: &mut u64) -> Vec<u8> {
    let len = (splitmix(state) % 40) as usize;
    (0..len).map(|_| splitmix(state).to_le_bytes()[0]).collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn contains_and_the_batched_probes_agree_on_every_key_and_batch_size(
        seed in any::<u64>(),
        keys in 1usize..3_000,
        // Low bits per key fill the lines, so both answers occur often.
        bits_per_key in 2.0f64..16.0,
        hash_seed in prop_oneof![Just(0u64), any::<u64>()],
    ) {
        let mut state = seed;
        let mut filter = BloomFilter::with_bits_per_key(keys, bits_per_key)
            .unwrap()
            .with_seed(hash_seed);
        let present: Vec<Vec<u8>> = (0..keys).map(|_| random_key(&mut state)).collect();
        filter.insert_keys(&present);
        // Half inserted keys, half others, in random order.
        let queries: Vec<Vec<u8>> = (0..MAX_BATCH)
            .map(|i| {
                if i % 2 == 0 {
                    present[(splitmix(&mut state) % keys as u64) as usize].clone()
                } else {
                    random_key(&mut state)
                }
            })
            .collect();
        let single: Vec<bool> = queries.iter().map(|k| filter.contains(k)).collect();
        for (k, &found) in queries.iter().zip(&single).step_by(2) {
            prop_assert!(found, "false negative for {k:?}");
        }
        let block = filter.encode();
        let view = FilterView::parse(&block[..]).unwrap();
        let hashes: Vec<u64> = queries.iter().map(|k| filter.hash(k)).collect();
        for (k, &h) in queries.iter().zip(&hashes) {
            prop_assert_eq!(filter.contains_hash(h), filter.contains(k));
            prop_assert_eq!(view.contains(k), filter.contains(k));
        }
        for size in 0..=MAX_BATCH {
            let batch = &queries[..size];
            let expected = &single[..size];
            let by_key: Vec<bool> = filter.contains_keys(batch).collect();
            prop_assert_eq!(&by_key[..], expected, "contains_keys, batch of {}", size);
            let by_hash: Vec<bool> = filter.contains_hashes(&hashes[..size]).collect();
            prop_assert_eq!(&by_hash[..], expected, "contains_hashes, batch of {}", size);
            let view_by_key: Vec<bool> = view.contains_keys(batch).collect();
            prop_assert_eq!(&view_by_key[..], expected, "view contains_keys, batch of {}", size);
            let view_by_hash: Vec<bool> = view.contains_hashes(&hashes[..size]).collect();
            prop_assert_eq!(&view_by_hash[..], expected, "view contains_hashes, batch of {}", size);
        }
    }
}
