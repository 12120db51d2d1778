//! The `siftdb` command line.
//!
//! Owns: argument parsing and dispatch to one module per subcommand
//! (`bench.rs` for `siftdb bench`, `backup.rs`, `checkpoint.rs`, `inspect.rs`, `verify.rs`, `repair.rs`,
//! `scan.rs`, `stats.rs`, and `point.rs` for `get`, `put` and `delete`; `text.rs` turns bytes into
//! arguments and output), and turning an error into one line on stderr and
//! an exit code.
//! Must never: panic on bad input or a failed operation — every failure is
//! a message and a non-zero exit code.

mod backup;
mod bench;
mod checkpoint;
mod compact;
mod inspect;
mod point;
mod repair;
mod scan;
mod stats;
mod stress;
mod text;
mod verify;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// siftdb: an embedded LSM key-value store whose reads ask a Bloom filter first.
#[derive(Parser, Debug)]
#[command(name = "siftdb", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the benchmark workloads (crates/siftdb-bench/WORKLOADS.md) and check every answer.
    Bench(bench::BenchArgs),
    /// Numbered, incremental, verified backups: create, list, verify, restore, purge.
    Backup(backup::BackupArgs),
    /// Write an openable copy of a database at one sequence number.
    Checkpoint(checkpoint::CheckpointArgs),
    /// Show what a table file or a database directory holds, filters included.
    Inspect(inspect::InspectArgs),
    /// Check every checksum of every live file, without opening the database.
    Verify(verify::VerifyArgs),
    /// Rebuild a damaged database from what is readable; originals go to DIR/lost/.
    Repair(repair::RepairArgs),
    /// Merge every table (of the database or one keyspace) into one sorted run.
    Compact(compact::CompactArgs),
    /// Print the value of a key.
    Get(point::GetArgs),
    /// Store a value under a key.
    Put(point::PutArgs),
    /// Delete a key.
    Delete(point::DeleteArgs),
    /// Print entries in key order: all, by prefix, or in a range.
    Scan(scan::ScanArgs),
    /// Print a database's counters, shape and latency histograms.
    Stats(stats::StatsArgs),
    /// Crash test: kill a writing child process at random moments, reopen, check every key.
    Stress(stress::StressArgs),
    /// The child `siftdb stress` starts and kills.
    #[command(hide = true)]
    StressChild(stress::StressChildArgs),
}

/// Exit code for a command that could not run (bad arguments, I/O, open).
const EXIT_USAGE: u8 = 2;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Bench(args) => bench::run(&args),
        Command::Backup(args) => backup::run(&args),
        Command::Checkpoint(args) => checkpoint::run(&args),
        Command::Inspect(args) => inspect::run(&args),
        Command::Verify(args) => verify::run(&args),
        Command::Repair(args) => repair::run(&args),
        Command::Compact(args) => compact::run(&args),
        Command::Get(args) => point::get(&args),
        Command::Put(args) => point::put(&args),
        Command::Delete(args) => point::delete(&args),
        Command::Scan(args) => scan::run(&args),
        Command::Stats(args) => stats::run(&args),
        Command::Stress(args) => stress::run_stress(&args),
        Command::StressChild(args) => stress::run_stress_child(&args),
    };
    match outcome {
        Ok(code) => code,
        Err(message) => {
            eprintln!("siftdb: error: {message}");
            ExitCode::from(EXIT_USAGE)
        }
    }
}
