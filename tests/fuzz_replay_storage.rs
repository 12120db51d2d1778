//! Replays the storage fuzz targets on stable Rust: every file of the seed
//! corpora in `fuzz/corpus/{wal_replay,manifest_decode}/`, then 100,000
//! deterministic inputs per target — random bytes, and mutations (flips,
//! truncations, insertions, splices) of valid files.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use siftdb_testkit::fuzzing::replay::{corpus_dir, replay};

use siftdb::internals::batch::RawBatch;
use siftdb::internals::key::{internal_key, SeqNo, ValueKind};
use siftdb::internals::manifest::{
    self, BlobFileRecord, KeyspaceRecord, KeyspaceSettings, ManifestState, TableRecord,
};
use siftdb::internals::wal::{encode_close_record, encode_file_header, encode_record_into};
use siftdb::Compression;
use siftdb::WriteBatch;
use siftdb_testkit::fuzzing::storage::{manifest_decode, wal_replay};

const GENERATED_INPUTS: usize = 100_000;

/// A put (`Some(value)`) or a delete (`None`) of a key.
type SeedOp = (&'static str, Option<&'static str>);

/// Valid logs: header only, batches, a torn tail, a zero tail.
fn seed_logs() -> Vec<(&'static str, Vec<u8>)> {
    let log = |number: u64, batches: &[(u64, &[SeedOp])]| {
        let mut out = encode_file_header(number).to_vec();
        for (seq, ops) in batches {
            let mut batch = WriteBatch::new();
            for (key, value) in *ops {
                match value {
                    Some(v) => batch.put(key, v),
                    None => batch.delete(key),
                }
            }
            encode_record_into(&mut out, &batch.encode_record(SeqNo(*seq))).unwrap();
        }
        out
    };
    let three = log(
        7,
        &[
            (1, &[("apple", Some("red")), ("pear", Some("green"))]),
            (3, &[("apple", None)]),
            (4, &[("", Some("")), ("kiwi", Some("brown"))]),
        ],
    );
    let mut torn = three.clone();
    torn.truncate(torn.len() - 5);
    let mut zero_tail = three.clone();
    zero_tail.extend_from_slice(&[0; 64]);
    let mut flipped = three.clone();
    flipped[40] ^= 0x04;
    // After a clean close.
    let mut closed = three.clone();
    closed.extend_from_slice(&encode_close_record(3, three.len() as u64));
    let mut closed_flipped_last = closed.clone();
    closed_flipped_last[three.len() - 3] ^= 0x10;
    let mut close_torn = closed.clone();
    close_torn.truncate(closed.len() - 9);
    // One batch across keyspaces (ids 0, 5 and 300).
    let mut keyspaces = encode_file_header(8).to_vec();
    let mut batch = WriteBatch::new();
    batch.put(b"apple", b"red");
    batch.put_to(5, b"apple", b"green");
    batch.delete_from(300, b"pear");
    encode_record_into(&mut keyspaces, &batch.encode_record(SeqNo(9))).unwrap();
    // A record with range deletes, one in keyspace 5 (operation kind 2), bounded and not.
    let mut ranged = encode_file_header(8).to_vec();
    let mut batch = WriteBatch::new();
    batch.put("apple", "red");
    batch.delete_range("b".."m");
    batch.delete_range("x"..);
    batch.push_range_delete(5, b"c", Some(b"d"));
    encode_record_into(&mut ranged, &batch.encode_record(SeqNo(9))).unwrap();
    vec![
        ("header_only", log(1, &[])),
        ("range_deletes", ranged),
        ("three_batches", three),
        ("keyspaces", keyspaces),
        ("torn_tail", torn),
        ("zero_tail", zero_tail),
        ("flipped_middle", flipped),
        ("torn_header", encode_file_header(2)[..11].to_vec()),
        ("closed", closed),
        ("closed_flipped_last", closed_flipped_last),
        ("close_torn", close_torn),
    ]
}

fn seed_manifests() -> Vec<(&'static str, Vec<u8>)> {
    let table = |level, number: u64, low: &[u8], high: &[u8]| TableRecord {
        keyspace: u32::try_from(number % 2).unwrap(),
        level,
        file_number: number,
        file_size: 1000 + number,
        entries: number,
        smallest: internal_key(low, SeqNo(9), ValueKind::Put),
        largest: internal_key(high, SeqNo(1), ValueKind::Delete),
        min_seq: SeqNo(1),
        max_seq: SeqNo(9),
    };
    let full = ManifestState {
        next_file_number: 10,
        last_sequence: SeqNo(50),
        log_number: 9,
        closed_log: None,
        next_keyspace_id: 2,
        keyspaces: vec![
            KeyspaceRecord {
                id: 0,
                name: "default".to_string(),
                log_number: 9,
                settings: KeyspaceSettings::default(),
            },
            KeyspaceRecord {
                id: 1,
                name: "logs".to_string(),
                log_number: 9,
                settings: KeyspaceSettings {
                    compression: Some(Compression::None),
                    prefix_len: Some(4),
                    compression_per_level: Some(vec![Compression::None, Compression::Lz4]),
                    ..KeyspaceSettings::default()
                },
            },
        ],
        tables: vec![table(0, 8, b"a", b"q"), table(1, 3, b"b", b"c")],
        blob_files: Vec::new(),
    };
    let bytes = manifest::encode(&full);
    let with_blobs = manifest::encode(&ManifestState {
        blob_files: vec![
            BlobFileRecord {
                keyspace: 1,
                file_number: 3,
                total_bytes: 40_000,
                total_values: 10,
                garbage_bytes: 12_000,
                garbage_values: 3,
            },
            BlobFileRecord {
                keyspace: 0,
                file_number: 8,
                total_bytes: 4096,
                total_values: 1,
                ..BlobFileRecord::default()
            },
        ],
        ..full.clone()
    });
    let mut flipped = bytes.clone();
    flipped[20] ^= 1;
    vec![
        ("empty_state", manifest::encode(&ManifestState::default())),
        ("two_tables", bytes.clone()),
        ("blob_files", with_blobs),
        ("truncated", bytes[..bytes.len() - 3].to_vec()),
        ("flipped", flipped),
    ]
}

/// Regenerates the committed seed corpora: `cargo test --test
/// fuzz_replay_storage -- --ignored write_seed_corpora`.
#[test]
#[ignore]
fn write_seed_corpora() {
    for (target, seeds) in [
        ("wal_replay", seed_logs()),
        ("manifest_decode", seed_manifests()),
    ] {
        let dir = corpus_dir(target);
        std::fs::create_dir_all(&dir).unwrap();
        for (name, bytes) in seeds {
            std::fs::write(dir.join(format!("seed_{name}")), bytes).unwrap();
        }
    }
}

fn run(target: &str, check: fn(&[u8]), seed: u64) {
    replay(target, check, seed, GENERATED_INPUTS);
}

#[test]
fn wal_replay_corpus_and_generated_inputs() {
    run("wal_replay", wal_replay, 0x5eed_0001);
}

#[test]
fn manifest_decode_corpus_and_generated_inputs() {
    run("manifest_decode", manifest_decode, 0x5eed_0002);
}

#[test]
fn seed_corpora_are_current() {
    for (target, seeds) in [
        ("wal_replay", seed_logs()),
        ("manifest_decode", seed_manifests()),
    ] {
        for (name, bytes) in seeds {
            let path = corpus_dir(target).join(format!("seed_{name}"));
            let stored = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert_eq!(stored, bytes, "{} is stale; regenerate it", path.display());
        }
    }
}
