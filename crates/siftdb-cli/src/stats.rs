//! `siftdb stats`: a database's counters, shape and histograms, as the
//! library's `Db::stats` and `Db::histograms` report them.
//!
//! Owns: its flags, the optional read sample, and the text it prints.
//! Must never: write to the database (it opens it read-only) or print a
//! histogram figure the library did not report.

use std::path::PathBuf;
use std::process::ExitCode;

use siftdb::{Db, Histogram, Stats};

use crate::point::open_for_reading;

/// Flags of `siftdb stats`.
#[derive(clap::Args, Debug)]
#[command(after_help = "\
Opens the database read-only (beside a process writing it, too) and prints \
its counters, each keyspace's shape and reads, and the latency and size \
histograms. Counters and histograms live in the process that opened the \
database and start empty at each open: here they count only what this \
command did. With --read-sample N it scans the first N entries of each \
keyspace and gets each of their keys, so the get and scan-step histograms \
show this machine's reads of this database (every get counted, one in 8 \
timed). A database closed by its writer thus shows no history: its \
counters and histograms went with that process (export them while it runs: \
the library's `metrics` feature). \
Exit status: 0, or 2 on an error.")]
pub struct StatsArgs {
    /// The database directory.
    dir: PathBuf,
    /// Scan and get up to N keys of each keyspace before printing.
    #[arg(long, value_name = "N", default_value_t = 0)]
    read_sample: u64,
}

/// Runs `siftdb stats`.
pub fn run(args: &StatsArgs) -> Result<ExitCode, String> {
    let db = open_for_reading(&args.dir)?;
    if args.read_sample > 0 {
        read_sample(&db, args.read_sample)?;
    }
    let stats = db.stats();
    print_counters(&stats);
    println!();
    print_histograms(&db);
    db.close().map_err(|e| format!("close failed: {e}"))?;
    Ok(ExitCode::SUCCESS)
}

/// Scans the first `n` entries of each keyspace and gets each key.
fn read_sample(db: &Db, n: u64) -> Result<(), String> {
    let limit = usize::try_from(n).unwrap_or(usize::MAX);
    for name in db.keyspaces() {
        let keyspace = db
            .keyspace(&name)
            .map_err(|e| format!("keyspace {name:?}: {e}"))?;
        let keys: Vec<_> = keyspace
            .iter()
            .take(limit)
            .map(|entry| entry.map(|(key, _)| key))
            .collect::<Result<_, _>>()
            .map_err(|e| format!("scanning keyspace {name:?} failed: {e}"))?;
        for key in keys {
            keyspace
                .get(&key)
                .map_err(|e| format!("a get in keyspace {name:?} failed: {e}"))?;
        }
    }
    Ok(())
}

fn print_counters(stats: &Stats) {
    println!("counters (since this open):");
    for (name, value) in stats.counters() {
        println!("  {name:<26} {value}");
    }
    println!("gauges:");
    for (name, value) in stats.gauges() {
        println!("  {name:<26} {value}");
    }
    println!("keyspaces:");
    for ks in &stats.keyspaces {
        println!(
            "  {}: {} tables, {} bytes in tables, {} bytes in memtables; \
             {} gets, {} multi_get keys, {} scans",
            ks.name,
            ks.table_count,
            ks.level_bytes.iter().sum::<u64>(),
            ks.memtable_bytes + ks.immutable_memtable_bytes,
            ks.gets,
            ks.multi_get_keys,
            ks.scans
        );
    }
}

fn print_histograms(db: &Db) {
    println!(
        "histograms (since this open; values within {:.1}%):",
        siftdb::histogram::RELATIVE_ERROR * 100.0
    );
    println!(
        "  {:<26} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "name", "ops", "samples", "p50", "p90", "p99", "p99.9", "max"
    );
    for (name, histogram) in db.histograms().named() {
        print_row(name, histogram);
    }
}

fn print_row(name: &str, histogram: &Histogram) {
    let s = histogram.summary();
    println!(
        "  {name:<26} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
        s.ops, s.samples, s.p50, s.p90, s.p99, s.p999, s.max
    );
}
