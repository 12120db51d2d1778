//! The parent side of a stress run: spawn a child, kill it at a random
//! moment, reopen the database and check it against the model — round
//! after round on the same directory.
//!
//! Owns: [`StressConfig`], [`StressReport`], [`RoundReport`],
//! [`StressError`], [`run`], the child's command line and reading its
//! protocol.
//! Must never: let a checked round pass without reopening, comparing every
//! key and verifying the closed files; end a run on a chained round; or
//! start a child while the database is open.

use std::io::Read;
use std::ops::RangeInclusive;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::stress::model::Model;
use crate::stress::plan::SplitMix64;
use crate::stress::{stress_options, verify_database};
use siftdb::Db;

/// How to run a stress test.
#[derive(Debug, Clone)]
pub struct StressConfig {
    /// The database directory: absent or empty when the run starts.
    pub dir: PathBuf,
    /// Kill-and-check rounds to run.
    pub rounds: u64,
    /// `sync_writes` for the child (and the parent's reopen).
    pub sync: bool,
    /// Seeds the batches and the kill times.
    pub seed: u64,
    /// The `siftdb` binary; each child runs
    /// `<child> stress-child --dir D --seed S --start-batch B [--sync]`.
    pub child: PathBuf,
    /// The child is killed this many milliseconds after it was spawned
    /// (uniform; it needs a few to start and open the database, so the
    /// low end also kills it while it recovers).
    pub kill_after_ms: RangeInclusive<u64>,
    /// Percent of rounds (never the last) that skip the reopen and check:
    /// the next child then recovers from the kill itself, and may be killed
    /// while it does; the next checked round covers both.
    pub chain_percent: u8,
}

/// What one round saw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RoundReport {
    /// 1-based.
    pub round: u64,
    /// When the child was killed, after it was spawned.
    pub kill_after: Duration,
    /// Whether the child had opened the database before the kill.
    pub child_opened: bool,
    /// Batches the child acknowledged.
    pub acknowledged: u64,
    /// Whether the parent reopened and checked the database (otherwise the
    /// round was chained: the next child recovers).
    pub checked: bool,
    /// Whether the check found the batch in flight at the kill, whole.
    pub in_flight_present: bool,
    /// The torn log tail the reopen dropped, if any: (file, offset, reason).
    pub torn_tail: Option<(String, u64, String)>,
    /// Flushes and compactions the child last reported.
    pub child_flushes: u64,
    /// See `child_flushes`.
    pub child_compactions: u64,
    /// Entries the database holds after the round.
    pub entries: usize,
}

/// Totals over a run.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StressReport {
    /// Rounds run, all passed.
    pub rounds: u64,
    /// Rounds the parent reopened and checked (the others were chained).
    pub checked_rounds: u64,
    /// Acknowledged batches, all found.
    pub acknowledged: u64,
    /// Checked rounds where the batch in flight had reached the database.
    pub in_flight_present: u64,
    /// Chained rounds whose in-flight batch the next child found in the database.
    pub settled_by_child: u64,
    /// Rounds where the child was killed before it had opened the database.
    pub killed_before_open: u64,
    /// Rounds whose reopen dropped a torn log tail.
    pub torn_tails: u64,
    /// Flushes the children reported (a lower bound: the count since each
    /// child's last report is lost with it).
    pub child_flushes: u64,
    /// Compactions the children reported (a lower bound, likewise).
    pub child_compactions: u64,
    /// Keys compared by `get` (each round also compares them all by scan).
    pub keys_checked: u64,
    /// Entries in the database at the end.
    pub final_entries: usize,
}

/// Why a stress run stopped before its last round passed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StressError {
    /// The run could not start or go on — a bad configuration, a directory
    /// that is not empty, a child that cannot be started: nothing was found
    /// wrong with the database.
    CouldNotRun(String),
    /// A round failed its checks: what was wrong, with the round.
    Failed(String),
}

impl std::fmt::Display for StressError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StressError::CouldNotRun(why) => write!(f, "could not run: {why}"),
            StressError::Failed(what) => f.write_str(what),
        }
    }
}

impl StressConfig {
    /// Refuses a configuration no run can follow: an empty kill window, a
    /// directory that is not empty.
    pub fn validate(&self) -> Result<(), StressError> {
        let (low, high) = (self.kill_after_ms.start(), self.kill_after_ms.end());
        if low > high {
            return Err(StressError::CouldNotRun(format!(
                "the earliest kill ({low} ms) is after the latest ({high} ms)"
            )));
        }
        let dir = &self.dir;
        if dir.exists() {
            let mut entries = std::fs::read_dir(dir).map_err(|e| {
                StressError::CouldNotRun(format!("cannot read {}: {e}", dir.display()))
            })?;
            if entries.next().is_some() {
                return Err(StressError::CouldNotRun(format!(
                    "{} is not empty; a stress run starts from an empty directory",
                    dir.display()
                )));
            }
        }
        Ok(())
    }
}

/// Runs `config.rounds` kill-reopen-check rounds; `on_round` hears about each
/// passed round. A failure names the round and what was wrong; the
/// directory is left as the failing round found it.
pub fn run(
    config: &StressConfig,
    mut on_round: impl FnMut(&RoundReport),
) -> Result<StressReport, StressError> {
    config.validate()?;
    std::fs::create_dir_all(&config.dir).map_err(|e| {
        StressError::CouldNotRun(format!("cannot create {}: {e}", config.dir.display()))
    })?;
    let mut model = Model::new(config.seed);
    let mut rng = SplitMix64::new(config.seed ^ 0x6b69_6c6c_7469_6d65);
    let mut report = StressReport::default();
    let (low, high) = (*config.kill_after_ms.start(), *config.kill_after_ms.end());
    for round in 1..=config.rounds {
        let kill_after = Duration::from_millis(low + rng.below(high - low + 1));
        // Now and then the next child, not the parent, recovers from the
        // kill — and may be killed while it recovers. The last round checks.
        let chained = round < config.rounds && rng.below(100) < u64::from(config.chain_percent);
        let seen = run_child_once(config, model.next_batch(), kill_after).map_err(|e| match e {
            StressError::CouldNotRun(e) => StressError::CouldNotRun(format!("round {round}: {e}")),
            StressError::Failed(e) => StressError::Failed(format!("round {round}: {e}")),
        })?;
        let failed = |e: String| StressError::Failed(format!("round {round}: {e}"));
        model
            .record_child(seen.start_present, &seen.acks)
            .map_err(failed)?;

        let (outcome, torn_tail) = if chained {
            (None, None)
        } else {
            let db = Db::open_with(&config.dir, stress_options(config.sync))
                .map_err(|e| failed(format!("reopening after the kill: {e}")))?;
            let torn_tail = db.recovery_report().torn_tail.clone();
            let outcome = model.check(&db).map_err(|e| {
                failed(format!(
                    "(killed after {kill_after:?}, {} batches acknowledged): {e}",
                    seen.acks.len()
                ))
            })?;
            drop(db);
            (Some(outcome), torn_tail)
        };
        // The manifest and the tables it names are whole even right after a kill.
        verify_database(&config.dir).map_err(|e| failed(format!("verify: {e}")))?;

        let round_report = RoundReport {
            round,
            kill_after,
            child_opened: seen.opened,
            acknowledged: seen.acks.len() as u64,
            checked: outcome.is_some(),
            in_flight_present: outcome.is_some_and(|o| o.in_flight_present),
            torn_tail,
            child_flushes: seen.flushes,
            child_compactions: seen.compactions,
            entries: model.len(),
        };
        report.rounds += 1;
        report.checked_rounds += u64::from(round_report.checked);
        report.acknowledged += round_report.acknowledged;
        report.in_flight_present += u64::from(round_report.in_flight_present);
        report.settled_by_child += u64::from(seen.start_present == Some(true));
        report.killed_before_open += u64::from(!seen.opened);
        report.torn_tails += u64::from(round_report.torn_tail.is_some());
        report.child_flushes += seen.flushes;
        report.child_compactions += seen.compactions;
        report.keys_checked += outcome.map_or(0, |o| o.keys_checked);
        report.final_entries = model.len();
        on_round(&round_report);
    }
    Ok(report)
}

/// What the parent heard from one child.
#[derive(Debug, Default)]
struct Heard {
    opened: bool,
    /// Whether the start batch was in the database (`None`: not reported).
    start_present: Option<bool>,
    acks: Vec<u64>,
    flushes: u64,
    compactions: u64,
}

/// Kills `child` when dropped, so an early return never leaves one running.
struct Reaper(Child);

impl Drop for Reaper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn run_child_once(
    config: &StressConfig,
    start_batch: u64,
    kill_after: Duration,
) -> Result<Heard, StressError> {
    let could_not_run = StressError::CouldNotRun;
    let failed = StressError::Failed;
    let mut command = Command::new(&config.child);
    command
        .arg("stress-child")
        .arg("--dir")
        .arg(&config.dir)
        .arg("--seed")
        .arg(config.seed.to_string())
        .arg("--start-batch")
        .arg(start_batch.to_string());
    if config.sync {
        command.arg("--sync");
    }
    let mut child = Reaper(
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| could_not_run(format!("cannot start {}: {e}", config.child.display())))?,
    );
    let stdout =
        (child.0.stdout.take()).ok_or_else(|| could_not_run("child has no stdout".into()))?;
    let stderr =
        (child.0.stderr.take()).ok_or_else(|| could_not_run("child has no stderr".into()))?;
    let lines = read_lines(stdout);
    let errors = read_all(stderr);

    std::thread::sleep(kill_after);
    let exited_early = child
        .0
        .try_wait()
        .map_err(|e| could_not_run(format!("waiting for the child: {e}")))?;
    // SIGKILL on Unix: no destructor, no flush, no chance to finish a write.
    let _ = child.0.kill();
    let status = child
        .0
        .wait()
        .map_err(|e| could_not_run(format!("waiting for the child: {e}")))?;
    let lines = lines
        .join()
        .map_err(|_| could_not_run("the stdout reader panicked".into()))?;
    let errors = errors
        .join()
        .map_err(|_| could_not_run("the stderr reader panicked".into()))?;
    if exited_early.is_some() || !killed_by_us(&status) {
        return Err(failed(format!(
            "the child exited on its own ({status}) before the kill: {}",
            errors.trim()
        )));
    }
    parse_protocol(&lines.map_err(could_not_run)?).map_err(failed)
}

#[cfg(unix)]
fn killed_by_us(status: &std::process::ExitStatus) -> bool {
    use std::os::unix::process::ExitStatusExt;
    status.signal() == Some(9)
}

#[cfg(not(unix))]
fn killed_by_us(status: &std::process::ExitStatus) -> bool {
    !status.success()
}

/// Reads the child's whole output and returns its complete lines: a line
/// the kill cut short (no newline) was never a promise and is dropped.
fn read_lines(mut stream: impl Read + Send + 'static) -> JoinHandle<Result<Vec<String>, String>> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        stream
            .read_to_end(&mut bytes)
            .map_err(|e| format!("reading the child's output: {e}"))?;
        let text = String::from_utf8_lossy(&bytes);
        let mut lines: Vec<String> = text.split('\n').map(str::to_string).collect();
        // The piece after the last newline: empty, or a cut line.
        lines.pop();
        Ok(lines)
    })
}

fn read_all(mut stream: impl Read + Send + 'static) -> JoinHandle<String> {
    std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stream.read_to_string(&mut text);
        text
    })
}

/// Reads the child's complete lines.
fn parse_protocol(lines: &[String]) -> Result<Heard, String> {
    let mut heard = Heard::default();
    for line in lines {
        let mut words = line.split(' ');
        let parsed = match (words.next(), words.next(), words.next(), words.next()) {
            (Some("open"), None, None, None) => {
                heard.opened = true;
                Some(())
            }
            (Some(verdict @ ("present" | "absent")), Some(_), None, None) => {
                heard.start_present = Some(verdict == "present");
                Some(())
            }
            (Some("ack"), Some(b), None, None) => b.parse().ok().map(|b| heard.acks.push(b)),
            (Some("stats"), Some(f), Some(c), None) => match (f.parse(), c.parse()) {
                (Ok(f), Ok(c)) => {
                    (heard.flushes, heard.compactions) = (f, c);
                    Some(())
                }
                _ => None,
            },
            _ => None,
        };
        if parsed.is_none() {
            return Err(format!("the child printed {line:?}"));
        }
    }
    Ok(heard)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_protocol_parses() {
        let lines: Vec<String> = ["open", "present 3", "ack 4", "stats 2 1", "ack 5"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        let heard = parse_protocol(&lines).unwrap();
        assert!(heard.opened);
        assert_eq!(heard.start_present, Some(true));
        assert_eq!(heard.acks, [4, 5]);
        assert_eq!((heard.flushes, heard.compactions), (2, 1));
        let bad: Vec<String> = ["ack x", "ack 5"].iter().map(|s| s.to_string()).collect();
        assert!(parse_protocol(&bad).is_err());
    }
}
