//! Replays the `backup_meta_decode` fuzz target on stable Rust: every file
//! of `fuzz/corpus/backup_meta_decode/`, then 100,000 seeded inputs through
//! the same library function libFuzzer runs — random bytes, and mutations
//! (flips, truncations, insertions, splices) of valid metadata files.
//! `cargo test --test fuzz_replay_backup_meta -- --ignored write_seed_corpus`
//! rewrites the seed corpus.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use siftdb::internals::backup_meta::{decode_meta, META_HEADER};
use siftdb::internals::codec::crc32_of;
use siftdb_testkit::fuzzing::backup_meta::backup_meta_decode;
use siftdb_testkit::fuzzing::replay::{corpus_dir, replay};

const GENERATED_INPUTS: usize = 100_000;
const TARGET: &str = "backup_meta_decode";

/// A metadata file as `docs/format.md` describes it: the lines, then the
/// CRC-32 of them.
fn signed(body: &str) -> Vec<u8> {
    let crc = crc32_of(&[body.as_bytes()]);
    format!("{body}crc32 {crc:08x}\n").into_bytes()
}

/// The seeds: a backup without files, one with a shared table and private
/// files, and one whose checksum holds but whose file names leave the
/// directory (to be refused).
fn seeds() -> Vec<Vec<u8>> {
    vec![
        signed(&format!(
            "{META_HEADER}\nid 1\nsequence 0\ncreated 1700000000\nnew_bytes 0\n"
        )),
        signed(&format!(
            "{META_HEADER}\nid 7\nsequence 1234\ncreated 1700000000\nnew_bytes 8192\n\
             file shared/000012_0badf00d_4096.sst 000012.sst 4096 0badf00d\n\
             file private/7/MANIFEST-000003 MANIFEST-000003 512 12345678\n\
             file private/7/000004.log 000004.log 3584 9abcdef0\n"
        )),
        signed(&format!(
            "{META_HEADER}\nid 2\nsequence 5\ncreated 1700000000\nnew_bytes 1\n\
             file ../x ../x 1 00000001\n"
        )),
    ]
}

#[test]
fn the_seeds_are_what_they_say() {
    let seeds = seeds();
    assert!(decode_meta(&seeds[0], 1).is_ok());
    assert!(decode_meta(&seeds[1], 7).is_ok());
    assert!(decode_meta(&seeds[2], 2).is_err());
}

#[test]
#[ignore = "writes the seed corpus in the source tree; run by hand"]
fn write_seed_corpus() {
    std::fs::create_dir_all(corpus_dir(TARGET)).unwrap();
    for (i, seed) in seeds().iter().enumerate() {
        std::fs::write(corpus_dir(TARGET).join(format!("seed-{i}")), seed).unwrap();
    }
}

#[test]
fn backup_meta_decode_corpus_and_generated_inputs() {
    replay(TARGET, backup_meta_decode, 0xbac4_0e7a, GENERATED_INPUTS);
}
