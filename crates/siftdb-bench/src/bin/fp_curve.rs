//! `fp-curve`: the measured false-positive rate of siftdb's filter per bits
//! per key, against the blocked-Bloom and the standard-Bloom theory, as a
//! table on stdout and (with `--out`) an SVG picture.
//!
//! ```text
//! cargo run -p siftdb-bench --release --bin fp-curve -- --out docs/fp-curve.svg
//! ```
//!
//! Owns: its flags and output. Measuring is `siftdb_bench::measure_fp`'s,
//! drawing `siftdb_bench::plot::fp_curve_svg`'s.
//! Must never: report a rate it did not measure — a point without a single
//! false positive is printed as 0 and left off the picture's measured line.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use siftdb::filter::theory;
use siftdb_bench::plot::{fp_curve_svg, write_svg, FpPoint};
use siftdb_bench::{group_digits, measure_fp, parse_count, queries_for};

/// The false-positive rate of siftdb's filter (built as a table builds it,
/// over the benchmark's keys) per bits per key, against theory.
#[derive(Parser, Debug)]
struct Args {
    /// Keys in each filter (key(2i) for i in 0..N); k, M, G suffixes accepted.
    #[arg(long, default_value = "1M", value_parser = parse_count)]
    n: u64,

    /// Smallest bits per key.
    #[arg(long, default_value_t = 2.0)]
    from: f64,

    /// Largest bits per key.
    #[arg(long, default_value_t = 24.0)]
    to: f64,

    /// Step between two settings.
    #[arg(long, default_value_t = 1.0)]
    step: f64,

    /// Fewest absent keys asked per setting.
    #[arg(long, default_value = "1M", value_parser = parse_count)]
    min_queries: u64,

    /// Most absent keys asked per setting (the rarest rates need many).
    #[arg(long, default_value = "50M", value_parser = parse_count)]
    max_queries: u64,

    /// Also draw the curve into this SVG file.
    #[arg(long, value_name = "FILE.svg")]
    out: Option<PathBuf>,
}

fn settings(args: &Args) -> Result<Vec<f64>, String> {
    let valid = |x: f64| x.is_finite() && x > 0.0;
    if !(valid(args.from) && valid(args.to) && valid(args.step) && args.from <= args.to) {
        return Err(format!(
            "need 0 < --from <= --to and --step > 0, got {}..{} step {}",
            args.from, args.to, args.step
        ));
    }
    // Settings from --from upwards while they stay within --to (a hair of
    // slack so that 2 + 22 steps of 1 still reaches 24).
    let settings: Vec<f64> = (0..=1000u32)
        .map(|i| args.from + f64::from(i) * args.step)
        .take_while(|b| *b <= args.to + 1e-9)
        .collect();
    if settings.len() > 1000 {
        return Err("more than 1000 settings; raise --step".to_string());
    }
    Ok(settings)
}

fn run(args: &Args) -> Result<(), String> {
    if args.min_queries == 0 || args.min_queries > args.max_queries {
        return Err("need 0 < --min-queries <= --max-queries".to_string());
    }
    let mut points: Vec<FpPoint> = Vec::new();
    println!(
        "| bits/key set | bits/key held | probes | absent keys asked | false positives | measured | blocked theory | standard theory | measured ÷ blocked |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for bits_per_key in settings(args)? {
        let (_, expected) = theory::best_probes(bits_per_key);
        let queries = queries_for(expected, args.min_queries, args.max_queries);
        let p = measure_fp(args.n, bits_per_key, queries)?;
        let ratio = if p.blocked_theory > 0.0 {
            format!("{:.3}", p.measured() / p.blocked_theory)
        } else {
            "-".to_string()
        };
        println!(
            "| {:.2} | {:.3} | {} | {} | {} | {:.3e} | {:.3e} | {:.3e} | {ratio} |",
            p.bits_per_key,
            p.actual_bits_per_key,
            p.probes,
            group_digits(p.queries),
            group_digits(p.false_positives),
            p.measured(),
            p.blocked_theory,
            p.standard_theory
        );
        points.push(p);
    }
    if let Some(path) = &args.out {
        let title = format!(
            "siftdb filter: false-positive rate vs bits per key (n = {})",
            group_digits(args.n)
        );
        write_svg(path, &fp_curve_svg(&title, &points)?)?;
        eprintln!("fp-curve: wrote {}", path.display());
    }
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("fp-curve: error: {message}");
            ExitCode::from(2)
        }
    }
}
