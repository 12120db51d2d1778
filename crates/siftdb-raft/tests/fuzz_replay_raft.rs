//! Replays the `raft_decode` and `snapshot_stream` fuzz targets on stable
//! Rust: every file of `fuzz/corpus/raft_decode/` and
//! `fuzz/corpus/snapshot_stream/`, then 100,000 seeded inputs each through
//! the same functions libFuzzer runs. `cargo test -p siftdb-raft --test
//! fuzz_replay_raft -- --ignored write_seed_corpus` rewrites the seeds.
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed assumption is a failed test"
)]

use siftdb_raft::fuzzing::{
    raft_decode, raft_decode_seeds, snapshot_stream, snapshot_stream_seeds,
};
use siftdb_testkit::fuzzing::replay::{corpus_dir, replay};

const GENERATED_INPUTS: usize = 100_000;

#[test]
#[ignore = "writes the seed corpus in the source tree; run by hand"]
fn write_seed_corpus() {
    for (target, seeds) in [
        ("raft_decode", raft_decode_seeds()),
        ("snapshot_stream", snapshot_stream_seeds()),
    ] {
        std::fs::create_dir_all(corpus_dir(target)).unwrap();
        for (i, seed) in seeds.iter().enumerate() {
            std::fs::write(corpus_dir(target).join(format!("seed-{i}")), seed).unwrap();
        }
    }
}

#[test]
fn the_seeds_decode() {
    // No seed breaks an invariant (that each value seed decodes as what
    // its choice byte says is the fuzzing module's unit test).
    for seed in raft_decode_seeds() {
        raft_decode(&seed);
    }
    for seed in snapshot_stream_seeds() {
        snapshot_stream(&seed);
    }
}

#[test]
fn raft_decode_corpus_and_generated_inputs() {
    replay("raft_decode", raft_decode, 0x7a4f_dec0, GENERATED_INPUTS);
}

#[test]
fn snapshot_stream_corpus_and_generated_inputs() {
    replay(
        "snapshot_stream",
        snapshot_stream,
        0x5eed_5a4b,
        GENERATED_INPUTS,
    );
}
