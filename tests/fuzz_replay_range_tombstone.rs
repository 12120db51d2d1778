//! Replays the `range_tombstone_decode` fuzz target on stable Rust: every
//! file of `fuzz/corpus/range_tombstone_decode/`, then 200,000 seeded
//! inputs through the same library function libFuzzer runs — random
//! bytes, and mutations (flips, truncations, insertions, splices) of valid
//! blocks. `cargo test --test fuzz_replay_range_tombstone -- --ignored
//! write_seed_corpus` rewrites the seed corpus.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use siftdb::internals::key::SeqNo;
use siftdb::internals::range_tombstone::{FragmentedTombstones, RangeTombstone};
use siftdb_testkit::fuzzing::range_tombstone::range_tombstone_decode;
use siftdb_testkit::fuzzing::replay::{corpus_dir, replay};

const GENERATED_INPUTS: usize = 200_000;
const TARGET: &str = "range_tombstone_decode";

fn t(start: &str, end: Option<&str>, seq: u64) -> RangeTombstone {
    RangeTombstone::new(
        start.as_bytes().to_vec(),
        end.map(|e| e.as_bytes().to_vec()),
        SeqNo(seq),
    )
}

/// The seeds: valid blocks (one fragment, overlapping tombstones cut into
/// several, an unbounded end, an empty start, large sequence numbers), the
/// empty list, and damaged ones.
fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    let one = FragmentedTombstones::new([t("a", Some("c"), 7)]).encode();
    let overlapping = FragmentedTombstones::new([
        t("b", Some("k"), 3),
        t("e", None, 9),
        t("", Some("f"), 5),
        t("k", Some("kz"), 12),
    ])
    .encode();
    let large = FragmentedTombstones::new([t("user:1", Some("user:9"), SeqNo::MAX.0)]).encode();
    let mut truncated = overlapping.clone();
    truncated.truncate(overlapping.len() - 3);
    let mut out_of_order = one.clone();
    out_of_order.extend_from_slice(&one[1..]);
    out_of_order[0] = 2;
    vec![
        ("valid_one", one),
        ("valid_overlapping", overlapping),
        ("valid_large_seq", large),
        ("valid_empty", FragmentedTombstones::default().encode()),
        ("truncated", truncated),
        ("out_of_order", out_of_order),
        ("huge_count", vec![0xff, 0xff, 0xff, 0xff, 0x0f, 0]),
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
fn range_tombstone_decode_corpus_and_generated_inputs() {
    replay(
        TARGET,
        range_tombstone_decode,
        0x5eed_7007,
        GENERATED_INPUTS,
    );
}
