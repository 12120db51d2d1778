//! Replays the table fuzz targets on stable Rust: every file of
//! fuzz/corpus/table_open, fuzz/corpus/block_decode and
//! fuzz/corpus/block_decompress, plus seeded random inputs and mutations of
//! valid tables and compressed blocks, through the same functions the fuzzer
//! runs. Tables 7 and 8 carry binary fuse filters, 9 and 10 prefix entries
//! and range filters, 11 all of these, 13 zstd blocks, 14 and 15 zstd
//! blocks with the table's dictionary.
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

use siftdb::filter::FingerprintBits;
use siftdb::internals::fs::OsFileSystem;
use siftdb::internals::key::{internal_key, SeqNo, ValueKind};
use siftdb::internals::range_tombstone::{FragmentedTombstones, RangeTombstone};
use siftdb::internals::table::block::Block;
use siftdb::internals::table::compression::compress_block;
use siftdb::internals::table::compression::ZstdEncoder;
use siftdb::internals::table::{ReadCounters, Table, TableBuilder, TableFormat, TableOptions};
use siftdb::Compression;
use siftdb::PrefixExtractor;
use siftdb_testkit::fuzzing::table::{
    block_decode, block_decompress, fixed_dictionary, table_open,
};

fn corpus(target: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/corpus")
        .join(target);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "the {target} corpus is empty");
    files
}

/// A small valid table: `n` keys, every third with two versions, every
/// fifth deleted.
fn seed_table(n: u64, options: &TableOptions) -> Vec<u8> {
    seed_table_with(n, options, |i| format!("v{i}"))
}

/// [`seed_table`] with values from `value_of`.
fn seed_table_with(n: u64, options: &TableOptions, value_of: fn(u64) -> String) -> Vec<u8> {
    seed_table_full(n, options, value_of, None)
}

/// [`seed_table`] with range tombstones over some of its keys.
fn seed_table_with_range_tombstones(n: u64, options: &TableOptions) -> Vec<u8> {
    let tombstones = FragmentedTombstones::new([
        RangeTombstone::new(b"k002".to_vec(), Some(b"k007".to_vec()), SeqNo(50)),
        RangeTombstone::new(b"k005".to_vec(), None, SeqNo(60)),
    ]);
    seed_table_full(n, options, |i| format!("v{i}"), Some(tombstones))
}

fn seed_table_full(
    n: u64,
    options: &TableOptions,
    value_of: fn(u64) -> String,
    tombstones: Option<FragmentedTombstones>,
) -> Vec<u8> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seed.sst");
    let mut builder = TableBuilder::create(&OsFileSystem, &path, options).unwrap();
    if let Some(tombstones) = tombstones {
        builder.set_range_tombstones(tombstones, None);
    }
    for i in 0..n {
        let user_key = format!("k{i:03}");
        if i % 3 == 0 {
            let newer = internal_key(user_key.as_bytes(), SeqNo(100 + i), ValueKind::Put);
            builder.add(&newer, format!("new{i}").as_bytes()).unwrap();
        }
        let kind = if i % 5 == 4 {
            ValueKind::Delete
        } else if i % 7 == 6 {
            ValueKind::Merge
        } else {
            ValueKind::Put
        };
        let value = match kind {
            ValueKind::Put | ValueKind::Merge => value_of(i),
            ValueKind::Delete | ValueKind::Blob => String::new(),
        };
        let key = internal_key(user_key.as_bytes(), SeqNo(i + 1), kind);
        builder.add(&key, value.as_bytes()).unwrap();
    }
    builder.finish().unwrap();
    std::fs::read(&path).unwrap()
}

fn seed_tables() -> Vec<Vec<u8>> {
    let small = TableOptions {
        block_size: 64,
        restart_interval: 2,
        ..TableOptions::default()
    };
    let no_filter = TableOptions {
        bloom_bits_per_key: 0.0,
        ..small.clone()
    };
    let repetitive = |i| format!("value {i} {}", "abcd".repeat(16));
    let compressed = TableOptions {
        block_size: 512,
        ..TableOptions::default()
    };
    let fuse = |bits| TableOptions {
        static_filter: Some(bits),
        ..small.clone()
    };
    // Format 3: prefix entries in the filter and a range filter block.
    let scan_filters = TableOptions {
        prefix_extractor: Some(PrefixExtractor::fixed(2).unwrap()),
        range_filter_bits_per_key: 16.0,
        ..small.clone()
    };
    let prefixes_only = TableOptions {
        prefix_extractor: Some(PrefixExtractor::fixed(3).unwrap()),
        whole_key_filtering: false,
        range_filter_bits_per_key: 4.0,
        ..TableOptions::default()
    };
    // A binary fuse filter holding whole keys and prefixes, beside a
    // range filter.
    let fuse_scan_filters = TableOptions {
        static_filter: Some(FingerprintBits::Eight),
        ..scan_filters.clone()
    };
    let zstd = TableOptions {
        block_size: 256,
        compression: Compression::zstd(3).unwrap(),
        ..TableOptions::default()
    };
    let zstd_dictionary = TableOptions {
        zstd_dictionary_bytes: 256,
        ..zstd.clone()
    };
    vec![
        seed_table(1, &TableOptions::default()),
        seed_table(3, &small),
        seed_table(12, &small),
        seed_table(12, &no_filter),
        seed_table(40, &TableOptions::default()),
        seed_table_with(20, &compressed, repetitive),
        seed_table_with(12, &TableOptions::default(), repetitive),
        // Binary fuse filter blocks (SFF1).
        seed_table(12, &fuse(FingerprintBits::Eight)),
        seed_table(30, &fuse(FingerprintBits::Sixteen)),
        seed_table(12, &scan_filters),
        seed_table(40, &prefixes_only),
        seed_table(30, &fuse_scan_filters),
        seed_table_with_range_tombstones(12, &small),
        seed_table_with(30, &zstd, repetitive),
        seed_table_with(60, &zstd_dictionary, repetitive),
        seed_table_with_range_tombstones(
            30,
            &TableOptions {
                block_size: 64,
                ..zstd_dictionary.clone()
            },
        ),
    ]
}

/// `block_decompress`'s first byte for each codec (bits 1-2; bit 0 clear:
/// decode): LZ4, zstd, zstd with the fixed dictionary, a dictionary.
const DECODE_LZ4: u8 = 0;
const DECODE_ZSTD: u8 = 2;
const DECODE_ZSTD_DICTIONARY: u8 = 4;
const PARSE_DICTIONARY: u8 = 6;

/// Stored zstd blocks of the raw seed blocks, without and with the fixed
/// dictionary, each with its `block_decompress` mode byte.
fn seed_zstd_blocks() -> Vec<(u8, Vec<u8>)> {
    let mut out = Vec::new();
    for raw in seed_raw_blocks() {
        let mut stored = Vec::new();
        ZstdEncoder::new(3, None)
            .unwrap()
            .compress(&raw, &mut stored);
        out.push((DECODE_ZSTD, stored.clone()));
        ZstdEncoder::new(3, Some(&fixed_dictionary().0))
            .unwrap()
            .compress(&raw, &mut stored);
        out.push((DECODE_ZSTD_DICTIONARY, stored));
    }
    out
}

/// Raw blocks for `block_decompress` seeds, and their LZ4 forms.
fn seed_raw_blocks() -> Vec<Vec<u8>> {
    vec![
        b"abcdabcdabcdabcdabcdabcdabcdabcdabcdabcdabcdabcdabcd".to_vec(),
        format!("value 7 {}", "xyz".repeat(200)).into_bytes(),
        (0..600u32).flat_map(|i| (i % 7).to_le_bytes()).collect(),
    ]
}

fn seed_compressed_blocks() -> Vec<Vec<u8>> {
    seed_raw_blocks()
        .iter()
        .map(|raw| {
            let mut stored = Vec::new();
            compress_block(raw, Compression::Lz4, &mut stored);
            stored
        })
        .collect()
}

/// `block_decode`'s first byte for decoding a data block (even: decode;
/// bit 7 is not read, set as in the seeds written before format 7's
/// coding was the only one).
const CURRENT_DATA_BLOCK: u8 = 0x80;

/// The first data block of a small table, without its trailer.
fn seed_block() -> Vec<u8> {
    let options = TableOptions {
        block_size: 128,
        restart_interval: 2,
        compression: Compression::None,
        ..TableOptions::default()
    };
    let file = seed_table(12, &options);
    let table = Table::from_bytes("seed.sst", file.clone().into(), ReadCounters::new()).unwrap();
    let handle = table.data_block_handles()[0];
    file[handle.offset as usize..(handle.offset + handle.len) as usize].to_vec()
}

#[test]
fn table_open_replays_corpus_and_mutations() {
    let files = corpus("table_open");
    for file in &files {
        table_open(&std::fs::read(file).unwrap());
    }
    let mut rng = SplitMix64::new(0x7AB1E);
    // Until the first release the corpus holds seeds of the current format
    // only (see docs/format.md).
    let version = TableFormat::CURRENT.version();
    for file in &files {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        assert!(
            !name.starts_with("seed-") || name.starts_with(&format!("seed-v{version}-")),
            "{name}: a seed of another format"
        );
    }
    let compressed_blocks: usize = seed_tables()
        .into_iter()
        .map(|file| {
            let table = Table::from_bytes("seed.sst", file.clone().into(), ReadCounters::new());
            let handles = table.unwrap().data_block_handles().to_vec();
            // The codec byte follows the type byte of each trailer.
            handles
                .iter()
                .filter(|h| file[(h.offset + h.len) as usize + 1] == 1)
                .count()
        })
        .sum();
    assert!(
        compressed_blocks >= 2,
        "{compressed_blocks} LZ4 blocks among the seeds"
    );
    // zstd blocks (codec 2) and tables with a dictionary and its blocks
    // (codec 3) are among the seeds.
    let codecs: Vec<u8> = seed_tables()
        .into_iter()
        .flat_map(|file| {
            let table = Table::from_bytes("seed.sst", file.clone().into(), ReadCounters::new());
            let handles = table.unwrap().data_block_handles().to_vec();
            handles
                .iter()
                .map(|h| file[(h.offset + h.len) as usize + 1])
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(codecs.contains(&2) && codecs.contains(&3), "{codecs:?}");
    let with_dictionary = seed_tables()
        .into_iter()
        .filter(|file| {
            let table = Table::from_bytes("seed.sst", file.clone().into(), ReadCounters::new());
            table.unwrap().properties().compression_dictionary.is_some()
        })
        .count();
    assert_eq!(with_dictionary, 2, "seeds with a zstd dictionary");
    let with_range_filter = seed_tables()
        .into_iter()
        .filter(|file| {
            let table = Table::from_bytes("seed.sst", file.clone().into(), ReadCounters::new());
            table.unwrap().range_filter_view().is_some()
        })
        .count();
    assert_eq!(with_range_filter, 3, "seeds with a range filter");
    for seed in seed_tables() {
        table_open(&seed);
        for _ in 0..300 {
            let mut mutated = seed.clone();
            for _ in 0..1 + rng.below(3) {
                let at = rng.below(mutated.len() as u64) as usize;
                mutated[at] ^= 1 << rng.below(8);
            }
            table_open(&mutated);
            let cut = rng.below(seed.len() as u64) as usize;
            table_open(&seed[..cut]);
        }
    }
    for _ in 0..500 {
        let len = rng.below(300) as usize;
        table_open(&rng.bytes(len));
    }
    println!("table_open: replayed {} corpus files", files.len());
}

#[test]
fn block_decode_replays_corpus_and_random_inputs() {
    let files = corpus("block_decode");
    for file in &files {
        block_decode(&std::fs::read(file).unwrap());
    }
    let mut rng = SplitMix64::new(0xB10C);
    let block = seed_block();
    // The mutations start from a block that decodes whole.
    let whole = Block::parse(block.clone().into()).unwrap();
    assert!(whole.check_structure().unwrap() > 1);
    for _ in 0..1000 {
        let mut mutated = [&[CURRENT_DATA_BLOCK][..], &block].concat();
        let at = 1 + rng.below(block.len() as u64) as usize;
        mutated[at] ^= 1 << rng.below(8);
        block_decode(&mutated);
    }
    for _ in 0..2000 {
        let len = rng.below(200) as usize;
        block_decode(&rng.bytes(len));
    }
    println!("block_decode: replayed {} corpus files", files.len());
}

#[test]
fn block_decompress_replays_corpus_and_mutations() {
    let files = corpus("block_decompress");
    assert!(!files.is_empty(), "the block_decompress corpus is empty");
    for file in &files {
        block_decompress(&std::fs::read(file).unwrap());
    }
    let mut rng = SplitMix64::new(0xC0DEC);
    let lz4 = seed_compressed_blocks()
        .into_iter()
        .map(|stored| (DECODE_LZ4, stored));
    let dictionary = (PARSE_DICTIONARY, fixed_dictionary().0.clone());
    for (mode, stored) in lz4.chain(seed_zstd_blocks()).chain([dictionary]) {
        let input = [&[mode][..], &stored].concat();
        block_decompress(&input);
        for _ in 0..500 {
            let mut mutated = input.clone();
            for _ in 0..1 + rng.below(3) {
                let at = 1 + rng.below(stored.len() as u64) as usize;
                mutated[at] ^= 1 << rng.below(8);
            }
            block_decompress(&mutated);
            let cut = 1 + rng.below(stored.len() as u64) as usize;
            block_decompress(&input[..cut]);
        }
    }
    for raw in seed_raw_blocks() {
        for mode in [DECODE_LZ4, DECODE_ZSTD, DECODE_ZSTD_DICTIONARY] {
            block_decompress(&[&[mode | 1][..], &raw].concat());
        }
    }
    for _ in 0..2000 {
        let len = rng.below(300) as usize;
        block_decompress(&rng.bytes(len));
    }
    println!("block_decompress: replayed {} corpus files", files.len());
}

/// Writes the seed corpus; run with `--ignored` after a format change. The
/// tables go to `seed-v{current format}-{i}`. Until the first release a
/// format change replaces the format: the seeds of the old one are
/// removed (from the first release on they stay, and a change adds seeds).
#[test]
#[ignore]
fn write_seed_corpus() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus");
    let version = TableFormat::CURRENT.version();
    for (i, seed) in seed_tables().iter().enumerate() {
        let path = root.join("table_open").join(format!("seed-v{version}-{i}"));
        std::fs::write(path, seed).unwrap();
    }
    // A data block of the current format (packed tags).
    let raw = [&[CURRENT_DATA_BLOCK][..], &seed_block()].concat();
    std::fs::write(root.join("block_decode").join("seed-packed-raw-0"), raw).unwrap();
    // Internal keys (8-byte tags) for a round trip, two versions of one
    // user key among them.
    let tagged: Vec<u8> = [
        (&b"keyAAAAA"[..], 1u64),
        (b"keyAAAAB", 2),
        (b"keyAAAAA", 5),
        (b"keyB", 3),
    ]
    .iter()
    .map(|&(user, seq)| {
        let key = internal_key(user, SeqNo(seq), ValueKind::Put);
        [key.clone(), vec![b'v'; key.len()]].concat()
    })
    .collect::<Vec<_>>()
    .join(&0xff);
    // Mode 0x89: a round trip with a restart interval of 3.
    let input = [&[0x89][..], &tagged].concat();
    std::fs::write(
        root.join("block_decode").join("seed-packed-roundtrip-0"),
        input,
    )
    .unwrap();
    let dir = root.join("block_decompress");
    std::fs::create_dir_all(&dir).unwrap();
    for (i, stored) in seed_compressed_blocks().iter().enumerate() {
        let input = [&[0u8][..], stored].concat();
        std::fs::write(dir.join(format!("seed-lz4-{i}")), input).unwrap();
    }
    for (i, raw) in seed_raw_blocks().iter().enumerate() {
        let input = [&[1u8][..], raw].concat();
        std::fs::write(dir.join(format!("seed-roundtrip-{i}")), input).unwrap();
    }
    // A prefix claiming far more than the stream can expand to.
    let mut hostile = vec![0u8];
    hostile.extend_from_slice(&u32::MAX.to_le_bytes());
    hostile.extend_from_slice(b"\x1fabc");
    std::fs::write(dir.join("seed-claims-too-much"), hostile).unwrap();
    for (i, (mode, stored)) in seed_zstd_blocks().iter().enumerate() {
        let input = [&[*mode][..], stored].concat();
        std::fs::write(dir.join(format!("seed-zstd-{i}")), input).unwrap();
    }
    for (i, raw) in seed_raw_blocks().iter().enumerate() {
        let input = [&[DECODE_ZSTD_DICTIONARY | 1][..], raw].concat();
        std::fs::write(dir.join(format!("seed-zstd-roundtrip-{i}")), input).unwrap();
    }
    let dictionary = [&[PARSE_DICTIONARY][..], &fixed_dictionary().0].concat();
    std::fs::write(dir.join("seed-zstd-dictionary"), dictionary).unwrap();
}
