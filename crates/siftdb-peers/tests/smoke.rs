//! Every engine passes every phase's checks on a small N, and its
//! flush-and-wait returns.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use siftdb_bench::{run_phase, NoProgress, Phase, RunOptions, Workload};
use siftdb_peers::open_engine;

fn passes_every_phase(name: &str, threads: usize) {
    let dir = tempfile::tempdir().unwrap();
    let engine = open_engine(name, dir.path(), 10.0).unwrap();
    let workload = Workload::new(5_000).unwrap();
    for phase in Phase::ALL {
        let report = run_phase(
            engine.as_ref(),
            &workload,
            phase,
            &RunOptions { threads },
            &NoProgress,
        );
        assert!(report.passed(), "{}", report.to_human());
    }
    engine.flush_and_wait().unwrap();
    assert!(!engine.settings().is_empty() || name == "memory");
}

#[test]
fn rocksdb_passes_every_phase() {
    passes_every_phase("rocksdb", 2);
}

#[test]
fn fjall_passes_every_phase() {
    passes_every_phase("fjall", 2);
}

#[test]
fn siftdb_passes_every_phase() {
    passes_every_phase("siftdb", 1);
}

#[test]
fn rocksdb_reports_the_linked_library_version() {
    let dir = tempfile::tempdir().unwrap();
    let engine = open_engine("rocksdb", dir.path(), 10.0).unwrap();
    let name = engine.name();
    assert!(
        name.starts_with("rocksdb ") && !name.ends_with("unknown"),
        "{name}"
    );
}

#[test]
fn unknown_engines_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let err = open_engine("leveldb", dir.path(), 10.0).err().unwrap();
    assert!(err.contains("leveldb"), "{err}");
}
