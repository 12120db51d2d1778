//! Crash test by process kill: the built `siftdb` binary writes batches as
//! `siftdb stress-child`; it is killed with SIGKILL at random moments, and
//! each round the database is reopened and every key checked against the
//! acknowledged batches (`siftdb::stress`). 20 rounds without and 20 with
//! `sync_writes`; `siftdb stress --rounds 1000` is the long run.

use std::path::PathBuf;

use siftdb::stress::{run, StressConfig, StressReport};

const ROUNDS: u64 = 20;

fn stress(sync: bool, seed: u64) -> StressReport {
    let dir = tempfile::tempdir().unwrap();
    let config = StressConfig {
        dir: dir.path().join("db"),
        rounds: ROUNDS,
        sync,
        seed,
        child: PathBuf::from(env!("CARGO_BIN_EXE_siftdb")),
        kill_after_ms: 10..=250,
    };
    let report = match run(&config, |_| {}) {
        Ok(report) => report,
        Err(failure) => {
            let kept = dir.keep();
            panic!(
                "seed {seed}, sync {sync}: {failure}\n(database kept in {})",
                kept.display()
            );
        }
    };
    println!("sync_writes({sync}), seed {seed}: {report:?}");
    assert_eq!(report.rounds, ROUNDS);
    assert!(
        report.acknowledged > 0,
        "no child ever acknowledged a batch"
    );
    assert!(report.final_entries > 0);
    report
}

#[test]
fn killed_writers_lose_no_acknowledged_batch_without_sync() {
    stress(false, 0x5eed_0001);
}

#[test]
fn killed_writers_lose_no_acknowledged_batch_with_sync() {
    stress(true, 0x5eed_0002);
}
