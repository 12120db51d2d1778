//! `siftdb stress`: crash testing by process kill, and its hidden child
//! `siftdb stress-child`.
//!
//! Owns: the flags of both subcommands, the run directory, progress lines
//! and the summary.
//! Must never: check anything itself — the rounds, the model and the
//! verification belong to `siftdb_testkit::stress`, which the tests call too.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use siftdb_testkit::stress::{run, run_child, RoundReport, StressConfig, StressError};

/// Exit code when a round failed its checks.
const EXIT_CHECK_FAILED: u8 = 1;

/// Flags of `siftdb stress`.
#[derive(clap::Args, Debug)]
#[command(after_help = "\
Each round starts `siftdb stress-child` on the directory, kills it with \
SIGKILL after a random delay, reopens the database and checks every key \
against the acknowledged batches, then verifies the closed files.\n\
Exit status: 0 when every round passed, 1 when a round failed (the \
directory is kept and its path printed), 2 when the test could not run.")]
pub struct StressArgs {
    /// Database directory: created if missing, must be empty [default: a
    /// fresh temporary directory, removed after a passing run].
    #[arg(long)]
    dir: Option<PathBuf>,

    /// Kill-reopen-check rounds.
    #[arg(long, default_value_t = 100)]
    rounds: u64,

    /// Open with sync_writes(true) (every write fsyncs the log).
    #[arg(long)]
    sync: bool,

    /// Seed for the batches and the kill times [default: from the clock].
    #[arg(long)]
    seed: Option<u64>,

    /// Earliest kill, in milliseconds after the child starts.
    #[arg(long, default_value_t = 10)]
    min_kill_ms: u64,

    /// Latest kill, in milliseconds after the child starts.
    #[arg(long, default_value_t = 300)]
    max_kill_ms: u64,

    /// Percent of rounds (never the last) whose kill the next child
    /// recovers from instead of the parent (which skips its check): the
    /// recovery itself then gets killed now and then.
    #[arg(long, default_value_t = 25, value_parser = clap::value_parser!(u8).range(0..=100))]
    chain_percent: u8,
}

/// Flags of `siftdb stress-child` (started by `siftdb stress`, not by hand).
#[derive(clap::Args, Debug)]
pub struct StressChildArgs {
    /// Database directory.
    #[arg(long)]
    dir: PathBuf,

    /// Seed the batches are planned from.
    #[arg(long)]
    seed: u64,

    /// First batch to write.
    #[arg(long)]
    start_batch: u64,

    /// Open with sync_writes(true).
    #[arg(long)]
    sync: bool,
}

/// Runs `siftdb stress`.
pub fn run_stress(args: &StressArgs) -> Result<ExitCode, String> {
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
    });
    let temporary = match &args.dir {
        Some(_) => None,
        None => Some(
            tempfile::Builder::new()
                .prefix("siftdb-stress-")
                .tempdir()
                .map_err(|e| format!("cannot create a temporary directory: {e}"))?,
        ),
    };
    let dir = match (&args.dir, &temporary) {
        (Some(dir), _) => dir.clone(),
        (None, Some(t)) => t.path().to_path_buf(),
        (None, None) => return Err("no directory".to_string()),
    };
    let config = StressConfig {
        dir: dir.clone(),
        rounds: args.rounds,
        sync: args.sync,
        seed,
        child: std::env::current_exe()
            .map_err(|e| format!("cannot find the siftdb binary: {e}"))?,
        kill_after_ms: args.min_kill_ms..=args.max_kill_ms,
        chain_percent: args.chain_percent,
    };
    config.validate().map_err(|e| e.to_string())?;
    eprintln!(
        "siftdb stress: {} rounds, sync_writes({}), seed {seed}, kill after {}-{} ms, in {}",
        args.rounds,
        args.sync,
        args.min_kill_ms,
        args.max_kill_ms,
        dir.display()
    );
    let started = Instant::now();
    let every = (args.rounds / 20).max(1);
    let progress = |r: &RoundReport| {
        if r.round.is_multiple_of(every) || r.round == args.rounds {
            let in_flight = match (r.checked, r.in_flight_present) {
                (false, _) => "unchecked (chained)",
                (true, true) => "present",
                (true, false) => "absent",
            };
            eprintln!(
                "round {:>6}: {:>7} batches acknowledged, in flight {in_flight}, {} entries, {:.0?} elapsed",
                r.round,
                r.acknowledged,
                r.entries,
                started.elapsed()
            );
        }
    };
    match run(&config, progress) {
        Ok(report) => {
            println!("siftdb stress: PASSED");
            println!("  seed                      {seed}");
            println!("  sync_writes               {}", args.sync);
            println!("  rounds                    {}", report.rounds);
            println!("  rounds checked            {}", report.checked_rounds);
            println!("  acknowledged batches      {}", report.acknowledged);
            println!(
                "  in-flight batch present   {} rounds (whole)",
                report.in_flight_present
            );
            println!(
                "  in flight, settled later  {} (found by the next child)",
                report.settled_by_child
            );
            println!(
                "  killed before open        {} rounds",
                report.killed_before_open
            );
            println!("  torn log tails dropped    {}", report.torn_tails);
            println!("  flushes (children, >=)    {}", report.child_flushes);
            println!("  compactions (children,>=) {}", report.child_compactions);
            println!("  keys checked by get       {}", report.keys_checked);
            println!("  entries at the end        {}", report.final_entries);
            println!("  elapsed                   {:.1?}", started.elapsed());
            if let Some(t) = temporary {
                t.close()
                    .map_err(|e| format!("cannot remove {}: {e}", dir.display()))?;
            }
            Ok(ExitCode::SUCCESS)
        }
        // Nothing was checked wrong: the usage exit code, and a temporary
        // directory goes.
        Err(StressError::CouldNotRun(why)) => Err(why),
        Err(StressError::Failed(failure)) => {
            let kept = match temporary {
                Some(t) => t.keep(),
                None => dir,
            };
            eprintln!("siftdb stress: FAILED (seed {seed}): {failure}");
            eprintln!("the database is kept in {}", kept.display());
            Ok(ExitCode::from(EXIT_CHECK_FAILED))
        }
    }
}

/// Runs `siftdb stress-child`: writes until killed.
pub fn run_stress_child(args: &StressChildArgs) -> Result<ExitCode, String> {
    let mut out = std::io::stdout().lock();
    run_child(&args.dir, args.seed, args.start_batch, args.sync, &mut out)?;
    Ok(ExitCode::SUCCESS)
}
