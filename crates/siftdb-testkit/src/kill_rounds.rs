//! Kill rounds: the parent half of a crash test that SIGKILLs a writer.
//!
//! Owns: [`run_kill_rounds`], which runs the calling test binary again as a
//! child (its test `child_process`, with an environment variable naming the
//! database directory and the sync mode), reads the child's `acked N`
//! lines, kills it after a random number of them, and hands the directory
//! and the last acknowledged batch to the caller's check.
//! Must never: decide what a recovered database must hold (the caller's
//! check does), or kill its child gently (SIGKILL: no destructor, no close
//! record).

use std::fmt::Debug;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};

use crate::SplitMix64;

/// What a kill-round test runs: its child's environment variable, the
/// rounds, the seed of the kill points and the fewest acknowledgements a
/// round waits for.
#[derive(Debug, Clone, Copy)]
pub struct KillRounds<'a> {
    /// Set to `DIR`, tab, `sync` or `nosync` in the child: the test binary
    /// then runs only its `child_process` test, which writes there.
    pub child_env: &'a str,
    /// Rounds, alternately synced and not.
    pub rounds: u64,
    /// Seed of the number of acknowledgements each round waits for.
    pub seed: u64,
    /// A round waits for this many acknowledgements plus up to 1,500 more.
    pub min_acks: u64,
}

/// Runs `plan`'s rounds against the database in `dir`: after each kill,
/// `check(dir, last_acknowledged)` reopens and checks it and returns what
/// it found (printed). Returns the acknowledgements seen over all rounds.
///
/// # Panics
/// When the child cannot be started or killed, or its output is not text:
/// the test fails.
#[expect(
    clippy::unwrap_used,
    reason = "a test driver: a failed spawn, kill or read is a failed test"
)]
pub fn run_kill_rounds<T: Debug>(
    dir: &Path,
    plan: KillRounds<'_>,
    mut check: impl FnMut(&Path, Option<u64>) -> T,
) -> u64 {
    let path = dir.to_str().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut rng = SplitMix64::new(plan.seed);
    let mut acked_total = 0;
    for round in 0..plan.rounds {
        let mode = if round % 2 == 0 { "sync" } else { "nosync" };
        let mut child = Command::new(&exe)
            // --nocapture: the child's acknowledgements must reach the
            // pipe as they happen, not when its (endless) test ends.
            .args([
                "--exact",
                "child_process",
                "--test-threads",
                "1",
                "--quiet",
                "--nocapture",
            ])
            .env(plan.child_env, format!("{path}\t{mode}"))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let wanted = plan.min_acks + rng.below(1500);
        let mut acked = None;
        let mut seen = 0;
        let stdout = child.stdout.take().unwrap();
        for line in BufReader::new(stdout).lines() {
            let line = line.unwrap();
            if let Some(n) = line.strip_prefix("acked ") {
                acked = Some(n.parse::<u64>().unwrap());
                seen += 1;
                if seen >= wanted {
                    break;
                }
            }
        }
        // SIGKILL: no destructor, no close record; a flush or compaction
        // possibly half done.
        child.kill().unwrap();
        child.wait().unwrap();
        acked_total += seen;
        let found = check(dir, acked);
        eprintln!("round {round} ({mode}): {seen} batches acknowledged, database at {found:?}");
    }
    acked_total
}
