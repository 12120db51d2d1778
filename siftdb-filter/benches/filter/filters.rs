//! The filters the bench compares and how each is built from the workload's
//! keys, with the workload itself: the present keys (the even `j`), the
//! random query sequences, the bits per key every Bloom filter gets.
//!
//! Owns: one `*_build` per filter (siftdb's blocked Bloom three ways and at
//! a target rate, siftdb's binary fuse, fastbloom, bloomfilter,
//! sbbf-rs-safe, xorf's BinaryFuse8), each answering the filter and the
//! CPU time its build took with the keys' formatting left out.
//! Must never: time anything but the build (formatting keys is outside the
//! clock), or give one filter a key set or a bit budget another does not get.

use std::hint::black_box;
use std::time::Duration;

use siftdb_filter::{hash_key, theory, BloomFilter, FingerprintBits, FuseFilter};
use xorf::BinaryFuse8;

use crate::support::{cpu_now, key, splitmix64, Key};

pub(crate) const BITS_PER_KEY: usize = 10;
/// Length of each pre-drawn query sequence (a multiple of `BATCH`).
pub(crate) const QUERIES: usize = 1 << 20;
/// Absent keys the false-positive rate is measured over.
pub(crate) const FP_PROBES: u64 = 1_000_000;
/// Keys formatted per chunk while building (the formatting is not timed).
const CHUNK: usize = 4096;

/// `QUERIES` keys drawn at random among the present (`parity` 0) or absent (1) ones.
pub(crate) fn query_keys(n: u64, parity: u64, seed: u64) -> Vec<Key> {
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
pub(crate) fn insert_present(n: u64, mut insert: impl FnMut(&[u8])) -> Duration {
    insert_present_chunks(n, |keys| {
        for k in keys {
            insert(black_box(k));
        }
    })
}

/// Calls `insert` on every chunk of `CHUNK` present keys; returns the time
/// spent inside it only (each chunk is formatted between two clock readings).
pub(crate) fn insert_present_chunks(n: u64, mut insert: impl FnMut(&[[u8; 16]])) -> Duration {
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
pub(crate) fn siftdb_build(n: u64) -> (BloomFilter, Duration) {
    let start = cpu_now();
    let mut f = BloomFilter::with_bits_per_key(n as usize, BITS_PER_KEY as f64).expect("size");
    let alloc = cpu_now() - start;
    let spent = insert_present_chunks(n, |keys| f.insert_keys(keys));
    (f, alloc + spent)
}

/// The same filter with one `insert` call per key.
pub(crate) fn siftdb_each_build(n: u64) -> (BloomFilter, Duration) {
    bloom_build(n, BITS_PER_KEY as f64)
}

/// siftdb's blocked Bloom filter built as a table builds it: every key
/// hashed into a vector as it is added (timed), then the filter sized and
/// filled from the gathered hashes in one batched call.
pub(crate) fn siftdb_gathered_build(n: u64) -> (BloomFilter, Duration) {
    let mut hashes = Vec::with_capacity(n as usize);
    let hashing = insert_present(n, |k| hashes.push(hash_key(k)));
    let start = cpu_now();
    let mut f = BloomFilter::with_bits_per_key(n as usize, BITS_PER_KEY as f64).expect("size");
    f.insert_hashes(&hashes);
    (f, hashing + (cpu_now() - start))
}

/// siftdb's blocked Bloom filter at the bits per key its theory needs for `fp_rate`.
pub(crate) fn bloom_at_rate(n: u64, fp_rate: f64) -> (BloomFilter, Duration) {
    bloom_build(
        n,
        theory::bits_per_key_for_rate(fp_rate).expect("reachable rate"),
    )
}

pub(crate) fn bloom_build(n: u64, bits_per_key: f64) -> (BloomFilter, Duration) {
    let start = cpu_now();
    let mut f = BloomFilter::with_bits_per_key(n as usize, bits_per_key).expect("size");
    let alloc = cpu_now() - start;
    let spent = insert_present(n, |k| f.insert(k));
    (f, alloc + spent)
}

pub(crate) type Fastbloom = fastbloom::BloomFilter;

pub(crate) fn fastbloom_build(n: u64) -> (Fastbloom, Duration) {
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

pub(crate) type Sip = bloomfilter::Bloom<[u8]>;

pub(crate) fn bloomfilter_build(n: u64) -> (Sip, Duration) {
    let start = cpu_now();
    // Its two SipHash keys are the seed's halves; equal halves would make
    // every probe a multiple of one hash (3.3% FP instead of 0.84%).
    let seed: [u8; 32] = std::array::from_fn(|i| i as u8 * 37 + 1);
    let mut f = Sip::new_with_seed(BITS_PER_KEY * n as usize / 8, n as usize, &seed).expect("size");
    let alloc = cpu_now() - start;
    let spent = insert_present(n, |k| f.set(k));
    (f, alloc + spent)
}

pub(crate) fn sbbf_build(n: u64) -> (sbbf_rs_safe::Filter, Duration) {
    let start = cpu_now();
    let mut f = sbbf_rs_safe::Filter::new(BITS_PER_KEY, n as usize);
    let alloc = cpu_now() - start;
    let spent = insert_present(n, |k| {
        f.insert_hash(hash_key(k));
    });
    (f, alloc + spent)
}

pub(crate) fn xorf_build(n: u64) -> (BinaryFuse8, Duration) {
    let mut hashes = Vec::with_capacity(n as usize);
    let hashing = insert_present(n, |k| hashes.push(hash_key(k)));
    let start = cpu_now();
    let f = BinaryFuse8::try_from(&hashes).expect("binary fuse construction");
    (f, hashing + (cpu_now() - start))
}

/// A binary fuse filter: every key hashed (timed), then built from the hashes.
pub(crate) fn fuse_build(n: u64, bits: FingerprintBits) -> (FuseFilter, Duration) {
    let mut hashes = Vec::with_capacity(n as usize);
    let hashing = insert_present(n, |k| hashes.push(hash_key(k)));
    let start = cpu_now();
    let f = FuseFilter::build(&hashes, bits).expect("binary fuse construction");
    (f, hashing + (cpu_now() - start))
}

/// The share of `FP_PROBES` absent keys `contains` answers true for.
pub(crate) fn measured_fp(contains: impl Fn(&[u8]) -> bool) -> f64 {
    let hits = (0..FP_PROBES)
        .filter(|&i| contains(&key(2 * i + 1)))
        .count();
    hits as f64 / FP_PROBES as f64
}
