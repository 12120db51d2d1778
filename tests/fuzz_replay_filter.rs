//! Replays the filter fuzz targets on stable Rust: every file of
//! `fuzz/corpus/filter_decode/`, `fuzz/corpus/filter_roundtrip/`,
//! `fuzz/corpus/range_filter_decode/` and `fuzz/corpus/fuse_decode/`, then
//! seeded random inputs through the same library functions libFuzzer runs
//! (100,000 per Bloom target, 200,000 for the range filter and for the
//! binary fuse filter). For the decoders most random inputs are mutated
//! valid encodings, half of them re-checksummed, so the paths past the
//! checksum run too. `cargo test --test fuzz_replay_filter -- --ignored`
//! rewrites the seed corpus.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use siftdb_testkit::SplitMix64;
use std::path::{Path, PathBuf};

use siftdb::filter::range::{RangeFilter, RangeFilterView};
use siftdb::filter::{BloomFilter, FingerprintBits, FuseFilter, FuseView, Layout};
use siftdb::internals::codec::crc32_of;
use siftdb_testkit::fuzzing::filter::{filter_decode, filter_roundtrip};
use siftdb_testkit::fuzzing::fuse::{fuse_decode, fuse_keys};
use siftdb_testkit::fuzzing::range_filter::range_filter_decode;

const RANDOM_INPUTS: u64 = 100_000;
/// Inputs for `fuse_decode`: the 200,000 garbage inputs of the brief.
const FUSE_INPUTS: u64 = 200_000;

fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target)
}

/// Runs `target` on every corpus file; returns how many there were.
fn replay_corpus(target: &str, run: fn(&[u8])) -> usize {
    let mut files: Vec<PathBuf> = std::fs::read_dir(corpus_dir(target))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    files.sort();
    for file in &files {
        let data = std::fs::read(file).unwrap();
        if std::panic::catch_unwind(|| run(&data)).is_err() {
            panic!("{target} fails on {}", file.display());
        }
    }
    files.len()
}

/// A valid filter block of a few lines holding a few keys.
fn valid_block(rng: &mut SplitMix64) -> Vec<u8> {
    let lines = 1 + rng.index(4) as u64;
    let probes = 1 + rng.index(32) as u32;
    let seed = if rng.index(2) == 0 { 0 } else { rng.next() };
    let mut f = BloomFilter::with_geometry(lines, probes, seed).unwrap();
    for _ in 0..rng.index(64) {
        f.insert(&rng.next().to_le_bytes());
    }
    f.encode()
}

/// Rewrites the trailing crc32 so the block passes the checksum.
fn rechecksum(block: &mut [u8]) {
    if block.len() >= 4 {
        let body = block.len() - 4;
        let crc = crc32_of(&[&block[..body]]);
        block[body..].copy_from_slice(&crc.to_le_bytes());
    }
}

fn mutated_block(rng: &mut SplitMix64) -> Vec<u8> {
    let block = valid_block(rng);
    // The line count, small values included.
    mutate(block, rng, |block, rng| {
        let lines = rng.index(8) as u32;
        if let Some(field) = block.get_mut(8..12) {
            field.copy_from_slice(&lines.to_le_bytes());
        }
    })
}

/// Damages `block` one to three times — a header byte, a bit anywhere, a
/// cut, an extension, or `set_field` — and re-checksums half the results.
fn mutate(
    mut block: Vec<u8>,
    rng: &mut SplitMix64,
    set_field: fn(&mut Vec<u8>, &mut SplitMix64),
) -> Vec<u8> {
    for _ in 0..1 + rng.index(3) {
        match rng.index(6) {
            // A header byte: where the interesting refusals are.
            0 | 1 => {
                let at = rng.index(64.min(block.len()));
                if let Some(byte) = block.get_mut(at) {
                    *byte = rng.next() as u8;
                }
            }
            2 => {
                let at = rng.index(block.len());
                if let Some(byte) = block.get_mut(at) {
                    *byte ^= 1 << rng.index(8);
                }
            }
            3 => block.truncate(rng.index(block.len() + 1)),
            4 => {
                let len = 1 + rng.index(128);
                block.extend(rng.bytes(len));
            }
            _ => set_field(&mut block, rng),
        }
    }
    if rng.index(2) == 0 {
        rechecksum(&mut block);
    }
    block
}

#[test]
fn filter_decode_replays_corpus_and_random_inputs() {
    assert!(replay_corpus("filter_decode", filter_decode) >= 4);
    let mut rng = SplitMix64::new(0xdec0de);
    let mut accepted = 0;
    for i in 0..RANDOM_INPUTS {
        let data = match i % 4 {
            0 => {
                let len = rng.index(300);
                rng.bytes(len)
            }
            1 => valid_block(&mut rng),
            _ => mutated_block(&mut rng),
        };
        filter_decode(&data);
        accepted += BloomFilter::decode(&data).is_ok() as u64;
    }
    // The valid quarter at least, so the accepting path really ran.
    assert!(accepted >= RANDOM_INPUTS / 4, "{accepted} accepted");
}

/// A valid binary fuse block of up to 200 random hashes (sometimes with
/// repeats), either width.
fn valid_fuse_block(rng: &mut SplitMix64) -> Vec<u8> {
    let n = rng.index(200);
    let mut hashes: Vec<u64> = (0..n).map(|_| rng.next()).collect();
    if n > 0 && rng.index(4) == 0 {
        let again = hashes[rng.index(n)];
        hashes.push(again);
    }
    let bits = if rng.index(2) == 0 {
        FingerprintBits::Eight
    } else {
        FingerprintBits::Sixteen
    };
    FuseFilter::build(&hashes, bits).unwrap().into_bytes()
}

fn mutated_fuse_block(rng: &mut SplitMix64) -> Vec<u8> {
    let block = valid_fuse_block(rng);
    mutate(block, rng, |block, rng| {
        if rng.index(2) == 0 {
            // Geometry: small segment lengths (powers of two or not) and counts.
            let length = if rng.index(2) == 0 {
                1u32 << rng.index(8)
            } else {
                rng.index(300) as u32
            };
            let count = rng.index(6) as u32;
            if let Some(field) = block.get_mut(8..16) {
                field[..4].copy_from_slice(&length.to_le_bytes());
                field[4..].copy_from_slice(&count.to_le_bytes());
            }
        } else if let Some(field) = block.get_mut(24..32) {
            // The key count.
            field.copy_from_slice(&(rng.index(2000) as u64).to_le_bytes());
        }
    })
}

#[test]
fn fuse_decode_replays_corpus_and_random_inputs() {
    assert!(replay_corpus("fuse_decode", fuse_decode) >= 8);
    let mut rng = SplitMix64::new(0xf05e);
    let mut accepted = 0;
    for i in 0..FUSE_INPUTS {
        let data = match i % 5 {
            0 => {
                let len = rng.index(300);
                rng.bytes(len)
            }
            // Garbage behind a valid magic and version.
            1 => {
                let len = rng.index(300);
                let mut data = b"SFF1\x01".to_vec();
                data.extend(rng.bytes(len));
                data
            }
            2 => valid_fuse_block(&mut rng),
            _ => mutated_fuse_block(&mut rng),
        };
        fuse_decode(&data);
        accepted += FuseView::parse(&data[..]).is_ok() as u64;
    }
    // The valid fifth at least, so the accepting path really ran.
    assert!(accepted >= FUSE_INPUTS / 5, "{accepted} accepted");
}

#[test]
fn fuse_key_inputs_read_as_documented() {
    let (bits, keys) = fuse_keys(&[1, 2, b'a', b'b', 0, 0x45, b'c']).unwrap();
    assert_eq!(bits, FingerprintBits::Sixteen);
    assert_eq!(keys, vec![&b"ab"[..], &b""[..], &b"c"[..]]);
    assert_eq!(fuse_keys(&[2]).unwrap(), (FingerprintBits::Eight, vec![]));
    assert!(fuse_keys(&[]).is_none());
}

#[test]
fn filter_roundtrip_replays_corpus_and_random_inputs() {
    assert!(replay_corpus("filter_roundtrip", filter_roundtrip) >= 3);
    let mut rng = SplitMix64::new(0x0123_4567);
    for _ in 0..RANDOM_INPUTS {
        let len = rng.index(200);
        filter_roundtrip(&rng.bytes(len));
    }
}

#[test]
fn roundtrip_inputs_cover_the_bits_per_key_range() {
    use siftdb_testkit::fuzzing::filter::{roundtrip_bits_per_key, roundtrip_input};
    assert_eq!(roundtrip_bits_per_key(0, 0), 0.5);
    assert_eq!(roundtrip_bits_per_key(0xff, 0xff), 24.0);
    let (_, layout, seed, keys) = roundtrip_input(&[0, 0, 9, 2, b'a', b'b', 0, 5, b'c']).unwrap();
    assert_eq!((layout, seed), (Layout::DEFAULT, 9));
    // The top two bits of byte 2 chose among layouts that are gone: ignored.
    let (_, layout, seed, _) = roundtrip_input(&[0, 0, 0x89]).unwrap();
    assert_eq!((layout, seed), (Layout::DEFAULT, 9));
    let (_, layout, seed, _) = roundtrip_input(&[0, 0, 0x49]).unwrap();
    assert_eq!((layout, seed), (Layout::DEFAULT, 9));
    assert_eq!(keys, vec![&b"ab"[..], &b""[..], &b"c"[..]]);
    assert!(roundtrip_input(&[1, 2]).is_none());
}

/// A valid range filter block over a few keys: two-letter strings (prefixes
/// of each other, empty ones), the benchmark's key format, or random bytes.
fn valid_range_block(rng: &mut SplitMix64) -> Vec<u8> {
    let n = rng.index(40);
    let shape = rng.index(3);
    let keys: Vec<Vec<u8>> = (0..n)
        .map(|_| match shape {
            0 => {
                let len = rng.index(6);
                (0..len).map(|_| b'a' + rng.index(2) as u8).collect()
            }
            1 => format!("k{:015}", rng.next() % 1_000_000).into_bytes(),
            _ => {
                let len = rng.index(12);
                rng.bytes(len)
            }
        })
        .collect();
    let bits = 3.0 + rng.index(46) as f64;
    RangeFilter::from_keys(&keys, bits).unwrap().into_inner()
}

fn mutated_range_block(rng: &mut SplitMix64) -> Vec<u8> {
    let block = valid_range_block(rng);
    // A count or value field set small (keys, values, universe, smallest
    // and largest value, seed).
    mutate(block, rng, |block, rng| {
        let at = 8 + 8 * rng.index(6);
        let value = rng.index(300) as u64;
        if let Some(field) = block.get_mut(at..at + 8) {
            field.copy_from_slice(&value.to_le_bytes());
        }
    })
}

#[test]
fn range_filter_decode_replays_corpus_and_random_inputs() {
    assert!(replay_corpus("range_filter_decode", range_filter_decode) >= 6);
    let mut rng = SplitMix64::new(0x5af_0001);
    let inputs = 2 * RANDOM_INPUTS;
    let mut accepted = 0;
    for i in 0..inputs {
        let data = match i % 4 {
            0 => {
                let len = rng.index(300);
                rng.bytes(len)
            }
            1 => valid_range_block(&mut rng),
            _ => mutated_range_block(&mut rng),
        };
        range_filter_decode(&data);
        accepted += RangeFilterView::parse(&data[..]).is_ok() as u64;
    }
    // The valid quarter at least, so the accepting path really ran.
    assert!(accepted >= inputs / 4, "{accepted} accepted");
}

#[test]
#[ignore = "rewrites fuzz/corpus; run by hand"]
fn write_seed_corpus() {
    let decode = corpus_dir("filter_decode");
    let roundtrip = corpus_dir("filter_roundtrip");
    std::fs::create_dir_all(&decode).unwrap();
    std::fs::create_dir_all(&roundtrip).unwrap();

    // Every valid block is in the one layout (4).
    let mut small = BloomFilter::with_bits_per_key(20, 10.0).unwrap();
    for j in 0..20u32 {
        small.insert(format!("k{j:015}").as_bytes());
    }
    let valid = small.encode();
    let mut seeded = BloomFilter::with_geometry(3, 11, 0x5eed).unwrap();
    let mut three_rounds = BloomFilter::with_geometry(3, 19, 0).unwrap();
    for j in 0..100u32 {
        seeded.insert(&j.to_le_bytes());
        three_rounds.insert(&j.to_le_bytes());
    }
    let field = |at: usize, value: u8| {
        let mut out = valid.clone();
        out[at] = value;
        rechecksum(&mut out);
        out
    };
    let files: Vec<(&str, Vec<u8>)> = vec![
        ("valid_one_line", valid.clone()),
        ("valid_three_lines_seeded", seeded.encode()),
        ("valid_three_lines_three_rounds", three_rounds.encode()),
        ("old_layout_id_rechecksummed", field(5, 2)),
        ("bad_checksum", {
            let mut out = valid.clone();
            out[70] ^= 0x10;
            out
        }),
        ("truncated", valid[..valid.len() - 1].to_vec()),
        ("bad_magic_rechecksummed", field(0, b'X')),
        ("zero_probes_rechecksummed", field(7, 0)),
        ("reserved_set_rechecksummed", field(30, 1)),
        ("two_lines_claimed_rechecksummed", field(8, 2)),
        ("empty", Vec::new()),
    ];
    for (name, bytes) in files {
        std::fs::write(decode.join(name), bytes).unwrap();
    }
    let round: Vec<(&str, Vec<u8>)> = vec![
        (
            "ten_bits_three_keys",
            vec![0x5d, 0x6a, 0, 3, b'a', b'b', b'c', 0, 1, b'z'],
        ),
        (
            "half_bit_seeded",
            vec![0, 0, 7, 4, 1, 2, 3, 4, 4, 5, 6, 7, 8],
        ),
        ("max_bits_many_keys", {
            let mut v = vec![0xff, 0xff, 0];
            for j in 0..40u8 {
                v.extend([2, j, j.wrapping_mul(7)]);
            }
            v
        }),
        ("no_keys", vec![0x80, 0x40, 1]),
        (
            "top_bits_seeded",
            vec![0x5d, 0x6a, 0xc7, 3, b'a', b'b', b'c', 0, 1, b'z'],
        ),
    ];
    for (name, bytes) in round {
        std::fs::write(roundtrip.join(name), bytes).unwrap();
    }
    write_range_seed_corpus();
}

fn write_range_seed_corpus() {
    let dir = corpus_dir("range_filter_decode");
    std::fs::create_dir_all(&dir).unwrap();
    let bench = (0..20u64).map(|j| format!("k{:015}", 2 * j).into_bytes());
    let exact = RangeFilter::from_keys(bench, 10.0).unwrap().into_inner();
    let mut rng = SplitMix64::new(0x5eed);
    let hashed = RangeFilter::from_keys((0..20).map(|_| rng.next().to_be_bytes()), 10.0)
        .unwrap()
        .into_inner();
    let prefixes = RangeFilter::from_keys([&b""[..], b"a", b"ab", b"abc", b"b"], 16.0)
        .unwrap()
        .into_inner();
    let empty = RangeFilter::from_keys(Vec::<Vec<u8>>::new(), 10.0)
        .unwrap()
        .into_inner();
    let field = |at: usize, value: u8| {
        let mut out = exact.clone();
        out[at] = value;
        rechecksum(&mut out);
        out
    };
    let files: Vec<(&str, Vec<u8>)> = vec![
        ("valid_exact_bench_keys", exact.clone()),
        ("valid_hashed_u64_keys", hashed),
        ("valid_prefix_keys", prefixes),
        ("valid_empty", empty),
        ("bad_checksum", {
            let mut out = exact.clone();
            out[70] ^= 0x10;
            out
        }),
        ("truncated", exact[..exact.len() - 1].to_vec()),
        ("bad_mode_rechecksummed", field(5, 9)),
        ("wide_key_map_rechecksummed", field(60, 65)),
        ("low_bits_mismatch_rechecksummed", field(62, 40)),
        // As a key set (byte 0: bits per key; then length-prefixed keys).
        (
            "key_set_prefixes",
            vec![13, 0, 1, b'a', 2, b'a', b'b', 1, 0],
        ),
        ("empty", Vec::new()),
    ];
    for (name, bytes) in files {
        std::fs::write(dir.join(name), bytes).unwrap();
    }
}

#[test]
#[ignore = "rewrites fuzz/corpus/fuse_decode; run by hand"]
fn write_fuse_seed_corpus() {
    let dir = corpus_dir("fuse_decode");
    std::fs::create_dir_all(&dir).unwrap();
    let hashes: Vec<u64> = (0..20u32)
        .map(|j| siftdb::filter::hash_key(format!("k{j:015}").as_bytes()))
        .collect();
    let eight = FuseFilter::build(&hashes, FingerprintBits::Eight)
        .unwrap()
        .into_bytes();
    let sixteen = FuseFilter::build(&hashes, FingerprintBits::Sixteen)
        .unwrap()
        .into_bytes();
    let empty = FuseFilter::build(&[], FingerprintBits::Eight)
        .unwrap()
        .into_bytes();
    let field = |at: usize, value: &[u8]| {
        let mut out = eight.clone();
        out[at..at + value.len()].copy_from_slice(value);
        rechecksum(&mut out);
        out
    };
    let mut keys = vec![0u8];
    for j in 0..30u8 {
        keys.extend([3, b'k', j, j.wrapping_mul(7)]);
    }
    let files: Vec<(&str, Vec<u8>)> = vec![
        ("valid_8bit_20_keys", eight.clone()),
        ("valid_16bit_20_keys", sixteen),
        ("valid_empty", empty),
        ("bad_checksum", {
            let mut out = eight.clone();
            out[40] ^= 0x10;
            out
        }),
        ("truncated", eight[..eight.len() - 1].to_vec()),
        ("bad_magic_rechecksummed", field(0, b"X")),
        ("width_12_rechecksummed", field(5, &[12])),
        ("arity_4_rechecksummed", field(7, &[4])),
        ("segment_length_3_rechecksummed", field(8, &[3, 0, 0, 0])),
        ("zero_segments_rechecksummed", field(12, &[0, 0, 0, 0])),
        ("too_many_keys_rechecksummed", field(24, &[0xff; 8])),
        ("keys_8bit_30", keys.clone()),
        ("keys_16bit_repeated", {
            let mut out = vec![1u8];
            for _ in 0..5 {
                out.extend([2, b'a', b'b', 0]);
            }
            out
        }),
        ("empty_input", Vec::new()),
    ];
    for (name, bytes) in files {
        std::fs::write(dir.join(name), bytes).unwrap();
    }
}
