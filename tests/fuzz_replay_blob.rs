//! Replays the `blob_decode` fuzz target on stable Rust: every file of
//! `fuzz/corpus/blob_decode/`, then 200,000 seeded inputs through the same
//! library function libFuzzer runs — random bytes, and mutations (flips,
//! truncations, insertions, splices) of valid blob files and pointers.
//! `cargo test --test fuzz_replay_blob -- --ignored write_seed_corpus`
//! rewrites the seed corpus.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use siftdb::internals::blob::{
    encode_footer, encode_header, encode_record, BlobCounts, BlobPointer,
};
use siftdb_testkit::fuzzing::blob::blob_decode;
use siftdb_testkit::fuzzing::replay::{corpus_dir, replay};

const GENERATED_INPUTS: usize = 200_000;
const TARGET: &str = "blob_decode";

fn file(number: u64, entries: &[(&[u8], &[u8])]) -> Vec<u8> {
    let header = encode_header(number);
    let mut out = header.to_vec();
    let mut counts = BlobCounts::default();
    for (key, value) in entries {
        encode_record(&mut out, key, value);
        counts.records += 1;
        counts.value_bytes += value.len() as u64;
    }
    out.extend_from_slice(&encode_footer(&header, counts));
    out
}

/// The seeds: valid files (empty, one record, several with an empty key
/// and an empty value), a valid pointer, and damaged ones (cut short, a
/// flipped value byte, a record length past the file, an unknown version).
fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    let one = file(7, &[(b"key", &[0x5a; 40])]);
    let several = file(
        12,
        &[
            (b"", b"v"),
            (b"user:1", &[1; 100]),
            (b"user:2", b""),
            (b"z", &[9; 3]),
        ],
    );
    let mut truncated = several.clone();
    truncated.truncate(several.len() - 10);
    let mut flipped = one.clone();
    flipped[30] ^= 0x40;
    let mut long_record = one.clone();
    long_record[24..28].copy_from_slice(&u32::MAX.to_le_bytes());
    let mut version = one.clone();
    version[8] = 2;
    let pointer = BlobPointer {
        file_number: 7,
        offset: 31,
        length: 40,
        checksum: 0x1234_5678,
    }
    .encode()
    .to_vec();
    vec![
        ("valid_empty", file(1, &[])),
        ("valid_one", one),
        ("valid_several", several),
        ("valid_pointer", pointer),
        ("truncated", truncated),
        ("flipped_value", flipped),
        ("long_record", long_record),
        ("unknown_version", version),
    ]
}

/// Regenerates the committed seed corpus.
#[test]
#[ignore = "writes the seed corpus in the source tree; run by hand"]
fn write_seed_corpus() {
    let dir = corpus_dir(TARGET);
    std::fs::create_dir_all(&dir).unwrap();
    for (name, bytes) in seeds() {
        std::fs::write(dir.join(format!("seed_{name}")), bytes).unwrap();
    }
}

#[test]
fn seed_corpus_is_current() {
    for (name, bytes) in seeds() {
        let path = corpus_dir(TARGET).join(format!("seed_{name}"));
        let stored = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(stored, bytes, "{} is stale; regenerate it", path.display());
    }
}

#[test]
fn blob_decode_corpus_and_generated_inputs() {
    replay(TARGET, blob_decode, 0xb10b_5eed, GENERATED_INPUTS);
}
