//! Bytes on disk for the same records under three compression choices:
//! LZ4 everywhere (the default), zstd at the bottommost level
//! (`Options::bottommost_compression`), and zstd with a per-table
//! dictionary there (`Options::bottommost_zstd_dictionary_bytes`). Each
//! database is filled, compacted into its bottommost level and measured
//! (the `.sst` files), beside the user bytes it holds.
//!
//! The records (compressible on purpose, stated here): YCSB-shaped, a
//! 16-byte key `user{:012}` in a scrambled order and ten fields of 100
//! bytes each, `fieldN=` then words drawn from a fixed vocabulary of 512
//! pseudo-words (3-9 lowercase letters), skewed towards the first words
//! (the product of two uniform draws), like the repetition of text or
//! JSON; every record differs.
//!
//! `cargo run --release --example compression_space -- N DICTIONARY_BYTES`
//! (N: records, default 50,000; DICTIONARY_BYTES default 16,384).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "an example"
)]

use std::path::Path;

use siftdb::{Compression, Db, Options};

/// A splitmix64 step: the records' only source of randomness.
fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn vocabulary() -> Vec<String> {
    let mut state = 7;
    (0..512)
        .map(|_| {
            let len = 3 + (next(&mut state) % 7) as usize;
            (0..len)
                .map(|_| char::from(b'a' + (next(&mut state) % 26) as u8))
                .collect()
        })
        .collect()
}

/// Record `i`: ten 100-byte fields of skewed words (1,000 bytes and some).
fn record(i: u64, words: &[String]) -> Vec<u8> {
    let mut state = i.wrapping_mul(0xD6E8_FEB8_6659_FD93);
    let mut out = Vec::with_capacity(1100);
    for field in 0..10 {
        let mut value = format!("field{field}=");
        while value.len() < 100 {
            let (a, b) = (next(&mut state) % 512, next(&mut state) % 512);
            value.push_str(&words[(a * b / 512) as usize]);
            value.push(' ');
        }
        value.truncate(100);
        out.extend_from_slice(value.as_bytes());
    }
    out
}

fn sst_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.path().extension().is_some_and(|x| x == "sst"))
        .map(|e| e.metadata().unwrap().len())
        .sum()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: u64 = args.next().map_or(50_000, |s| s.parse().unwrap());
    let dictionary: usize = args.next().map_or(16 << 10, |s| s.parse().unwrap());
    let words = vocabulary();
    let zstd = Compression::zstd(Compression::DEFAULT_ZSTD_LEVEL).unwrap();
    let base = Options::default()
        .memtable_bytes(8 << 20)
        .table_target_bytes(16 << 20);
    let choices = [
        ("lz4 everywhere", base.clone().compression(Compression::Lz4)),
        (
            "zstd(3) at the bottom",
            base.clone().bottommost_compression(zstd),
        ),
        (
            "zstd(3) + dictionary at the bottom",
            base.clone()
                .bottommost_compression(zstd)
                .bottommost_zstd_dictionary_bytes(dictionary),
        ),
    ];
    let mut user_bytes = 0u64;
    let mut first = 0u64;
    println!("{n} records, dictionary {dictionary} bytes");
    for (name, options) in choices {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open_with(dir.path(), options).unwrap();
        user_bytes = 0;
        for j in 0..n {
            // Distinct keys in a scrambled order (an odd multiplier is a
            // bijection modulo 2^40).
            let i = j.wrapping_mul(0x9E37_79B9_7F4A_7C15) & ((1 << 40) - 1);
            let key = format!("user{i:013}");
            let value = record(j, &words);
            user_bytes += (key.len() + value.len()) as u64;
            db.put(&key, &value).unwrap();
        }
        db.flush().unwrap();
        db.compact().unwrap();
        db.wait_for_background().unwrap();
        drop(db);
        let bytes = sst_bytes(dir.path());
        if first == 0 {
            first = bytes;
        }
        println!(
            "{name:<36} {bytes:>12} bytes on disk  {:.3} of the user bytes  {:.3} of lz4's",
            bytes as f64 / user_bytes as f64,
            bytes as f64 / first as f64
        );
    }
    println!("user bytes: {user_bytes}");
}
