//! `siftdb bench`: the workloads of `WORKLOADS.md` against one engine.
//!
//! Owns: the bench flags, the checks made before any work (phase order,
//! `--cold` permission, sizes that fit the machine), choosing and opening
//! the engine ([`open_engine`], one match arm per engine), the benchmark
//! directory, the progress bar, the human tables, the JSON file and the
//! SVG plot.
//! Must never: measure anything itself — timing and checking belong to
//! `siftdb_bench::run_phase`, so the peers crate measures the same way.

use std::fs::File;
use std::io::{BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use siftdb::FilterPolicy;
use siftdb_bench::plot::{run_svg, write_svg};
use siftdb_bench::{
    check_before_run, check_phase_order, describe_run, device_fraction_line, measure_device,
    parse_count, run_phase, summary_table, ycsb_amplification, CompressionChoice, DeviceBaseline,
    Engine, MemoryEngine, Phase, PhaseReport, Progress, RunOptions, SiftdbConfig, SiftdbEngine,
    Workload, DEFAULT_DEPTHS,
};

/// Exit code when a phase failed its checks.
const EXIT_CHECK_FAILED: u8 = 1;

/// Flags of `siftdb bench`.
#[derive(clap::Args, Debug)]
#[command(after_help = "\
The workloads, the read order every --ops setting uses, and what each phase \
checks are defined in crates/siftdb-bench/WORKLOADS.md.\n\
Counts take k, M and G suffixes (--n 20M --ops 200k).\n\
Exit status: 0 when every phase passed its checks, 1 when a phase failed \
(its errors are printed; it reports no figures), 2 when the benchmark could \
not run.\n\
--json FILE gets one JSON object per phase, one per line.")]
pub struct BenchArgs {
    /// Number of keys loaded (present keys are key(2i) for i in 0..N).
    #[arg(long, default_value = "1000000", value_parser = parse_count)]
    n: u64,

    /// Operations per read phase: gets for readrandom, readmissing and
    /// readhot, scans for seekempty, operations for mixed, M/10 scans for
    /// seekrandom and seekprefix; they use read-order positions g mod
    /// min(M, N) [default: N].
    #[arg(long, value_name = "M", value_parser = parse_count)]
    ops: Option<u64>,

    /// Drop the OS page cache (sync, then 3 into /proc/sys/vm/drop_caches)
    /// before each read phase, so reads start cold. Needs root.
    #[arg(long)]
    cold: bool,

    /// Phases to run, comma-separated, in this order: fillrandom, readrandom,
    /// multigetrandom (not run by default), readmissing, readhot, seekrandom,
    /// seekrandom-rev, seekprefix, seekempty, mixed, deleterange, txn,
    /// txn-uniform, txn-locking (the txn phases, not run by default: M
    /// transactions reading two keys, Zipfian or uniform, and writing both
    /// back, retried on conflict; the summary gives conflicts per commit;
    /// txn-locking: the Zipfian pairs in locking transactions, both keys
    /// read for update, retried on deadlock or lock timeout, which the
    /// summary counts); then the YCSB phases, not run by default:
    /// ycsb-load (N records of `user` keys) and the core workloads ycsb-a
    /// (50% reads, 50% updates), ycsb-b (95/5), ycsb-c (reads), ycsb-d
    /// (95% reads of the latest records, 5% inserts), ycsb-e (95% scans of
    /// 1..=100 records, 5% inserts), ycsb-f (50% reads, 50%
    /// read-modify-writes), requests Zipfian(0.99) over hashed keys, every
    /// read checked against the latest version written; ycsb-load and
    /// ycsb-a, -b, -d, -e, -f run once whatever --rounds says, and write
    /// and space amplification are printed after ycsb-load and at the end.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "fillrandom,readrandom,readmissing,readhot,seekrandom,seekrandom-rev,seekprefix,seekempty,mixed,deleterange"
    )]
    phases: Vec<Phase>,

    /// Instead of the phases: the bulkload comparison — the N keys loaded by
    /// fillrandom's puts into one database and by TableWriter + ingest into
    /// another (keys/s of each), then M random gets on each (the filled one
    /// compacted first).
    #[arg(long)]
    bulkload: bool,

    /// Threads sharing every phase's operations (mixed: by key, so each
    /// key's operations stay in order).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=1024))]
    threads: u16,

    /// Keys per `multi_get` call in the multigetrandom phase.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u16).range(1..=4096))]
    batch: u16,

    /// Runs every read phase again with this many threads right after the
    /// run with --threads, on the same database, and prints the ratio of
    /// the two: a thread-scaling figure both of whose sides met the same
    /// moment of a shared machine.
    #[arg(long, value_name = "T", value_parser = clap::value_parser!(u16).range(1..=1024))]
    compare_threads: Option<u16>,

    /// Runs of each read phase (each followed by its --compare-threads
    /// run); fillrandom runs once.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=100))]
    rounds: u16,

    /// Before the first read phase, measure the device: random 4 KiB
    /// positioned reads (O_DIRECT, past the page cache) over the
    /// database's own files at 1, 4, 16 and 32 reads in flight; every read
    /// phase then also prints its data-block reads from files per second
    /// as a fraction of the device's reads per second at its threads.
    #[arg(long)]
    device_baseline: bool,

    /// Filter bits per key: every table's (uniform), or the average over
    /// every key of the tree (level-aware).
    #[arg(long, default_value_t = 10.0)]
    bits_per_key: f64,

    /// How filter bits are spread over the levels: `uniform` (every table
    /// the same), `level-aware` (more bits per key for the small upper
    /// levels, fewer for the large last level, at the same total) or
    /// `level-aware-static` (that, with binary fuse filters for the tables
    /// compaction writes from level 1 down: siftdb's default policy).
    #[arg(long, value_enum, default_value = "level-aware-static")]
    filter_policy: PolicyArg,

    /// Tables compacted into this level or deeper get a binary fuse filter
    /// where it beats a Bloom filter for the bits [default: 1 with
    /// level-aware-static, else none].
    #[arg(long, value_name = "LEVEL")]
    static_filters_from_level: Option<u32>,

    /// No filter on the last level (for gets that almost always find their key).
    #[arg(long)]
    optimize_for_hits: bool,

    /// Memtable size in bytes [default: the engine's own; siftdb: 64 MiB].
    #[arg(long)]
    memtable_bytes: Option<usize>,

    /// A fixed-length prefix extractor of this many bytes (seekprefix scans
    /// 14-byte prefixes) [default: none].
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u16).range(1..))]
    prefix_len: Option<u16>,

    /// Range filter bits per key in every table [default: none].
    #[arg(long, value_name = "BITS")]
    range_bits: Option<f64>,

    /// siftdb's level-1 size in bytes, tables of half of it [default: the
    /// library's, 256 MiB and 32 MiB tables]: a smaller tree reaches the
    /// levels of a large N with fewer keys (the deeper levels stay 10 times
    /// the one above).
    #[arg(long, value_parser = parse_count)]
    level1_bytes: Option<u64>,

    /// Directory for the database: created if missing, must be empty
    /// [default: a fresh temporary directory, removed afterwards].
    #[arg(long)]
    dir: Option<PathBuf>,

    /// Keep the temporary directory (its path is printed).
    #[arg(long)]
    keep: bool,

    /// Also write the reports to FILE, one JSON object per phase per line.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,

    /// Also draw ops/s and p50/p99 latency per phase into FILE (SVG).
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,

    /// siftdb records no latency or size histograms
    /// (`Options::histograms(false)`): the baseline of their cost.
    #[arg(long)]
    no_histograms: bool,

    /// Bytes of every value, for every phase [default: 100 for the phases
    /// of WORKLOADS.md, so figures published with them stay comparable;
    /// 1000 for the YCSB phases, 10 fields of 100 bytes]. YCSB records
    /// carry a 16-byte stamp, so they need at least 16.
    #[arg(long, value_name = "BYTES", value_parser = parse_count)]
    value_size: Option<u64>,

    /// How siftdb compresses its tables: `lz4` (its default, every level)
    /// or `zstd-bottom` (zstd on the bottommost level, LZ4 above: refused
    /// until siftdb has zstd).
    #[arg(long, value_enum, default_value = "lz4")]
    compression: CompressionChoice,

    /// Engine to measure: `siftdb`, or `memory` (a BTreeMap, which measures
    /// the harness only).
    #[arg(long, default_value = "siftdb")]
    engine: String,
}

/// The rules of `--filter-policy`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum PolicyArg {
    /// The same bits per key for every table.
    Uniform,
    /// The average split across levels to minimise reads per absent key.
    LevelAware,
    /// That, with static filters from level 1 (the library's default).
    LevelAwareStatic,
}

impl BenchArgs {
    /// The filter policy the flags describe.
    fn filter_policy(&self) -> FilterPolicy {
        let policy = match self.filter_policy {
            PolicyArg::Uniform => FilterPolicy::bits_per_key(self.bits_per_key),
            PolicyArg::LevelAware => FilterPolicy::level_aware(self.bits_per_key),
            PolicyArg::LevelAwareStatic => {
                FilterPolicy::level_aware(self.bits_per_key).static_filters_from_level(1)
            }
        };
        let policy = policy.optimize_for_hits(self.optimize_for_hits);
        match self.static_filters_from_level {
            Some(level) => policy.static_filters_from_level(level),
            None => policy,
        }
    }
}

/// What an engine is opened with.
#[derive(Debug)]
pub struct EngineConfig<'a> {
    /// The fresh directory the engine owns for the run.
    pub dir: &'a Path,
    /// How siftdb's tables get their filters (other engines: its average
    /// bits per key).
    pub filter_policy: FilterPolicy,
    /// Memtable size; `None` keeps the engine's default.
    pub memtable_bytes: Option<usize>,
    /// A fixed-length prefix extractor; `None`: none.
    pub prefix_len: Option<usize>,
    /// Range filter bits per key; `None`: no range filter.
    pub range_bits: Option<f64>,
    /// siftdb's level-1 size (tables of half of it); `None`: the default.
    pub level1_bytes: Option<u64>,
    /// siftdb records no histograms.
    pub histograms_off: bool,
    /// `--compression`.
    pub compression: CompressionChoice,
}

/// Opens the engine named `name`. Adding an engine is one arm here.
pub fn open_engine(name: &str, config: &EngineConfig<'_>) -> Result<Box<dyn Engine>, String> {
    match name {
        "siftdb" => Ok(Box::new(SiftdbEngine::open_with(
            config.dir,
            &SiftdbConfig {
                filter_policy: config.filter_policy,
                memtable_bytes: config.memtable_bytes,
                level1_bytes: config.level1_bytes,
                prefix_len: config.prefix_len,
                range_bits_per_key: config.range_bits,
                block_cache_bytes: None,
                direct_reads: false,
                histograms_off: config.histograms_off,
                compression: config.compression,
                blob_threshold: None,
            },
        )?)),
        // Nothing to tune: the map has neither filters nor a memtable.
        "memory" => Ok(Box::new(MemoryEngine::new())),
        other => Err(format!("unknown engine {other:?} (known: siftdb, memory)")),
    }
}

/// `--bulkload`: the bulk-load comparison instead of the phases.
fn run_bulkload_comparison(args: &BenchArgs, ops: u64) -> Result<ExitCode, String> {
    let dir = BenchDir::prepare(args.dir.as_deref(), true)?;
    let mut options = siftdb::Options::default().filter_policy(args.filter_policy());
    if let Some(bytes) = args.memtable_bytes {
        options = options.memtable_bytes(bytes);
    }
    if let Some(bytes) = args.level1_bytes {
        options = options
            .level1_bytes(bytes)
            .table_target_bytes((bytes / 2).max(1));
    }
    let report = siftdb_bench::run_bulkload(dir.path(), args.n, ops, &options)?;
    for line in report.to_lines() {
        println!("{line}");
    }
    Ok(ExitCode::SUCCESS)
}

/// The directory the engine works in for this run.
enum BenchDir {
    Temporary(tempfile::TempDir),
    Given(PathBuf),
}

impl BenchDir {
    /// `dir` must be empty when the run fills it; without fillrandom it
    /// may hold the database a run with `--keep` left (read phases reuse it).
    fn prepare(dir: Option<&Path>, fills: bool) -> Result<Self, String> {
        let Some(dir) = dir else {
            return tempfile::Builder::new()
                .prefix("siftdb-bench-")
                .tempdir()
                .map(BenchDir::Temporary)
                .map_err(|e| format!("cannot create a temporary directory: {e}"));
        };
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let mut entries =
            std::fs::read_dir(dir).map_err(|e| format!("cannot read {}: {e}", dir.display()))?;
        if fills && entries.next().is_some() {
            return Err(format!(
                "{} is not empty; the benchmark needs a fresh directory",
                dir.display()
            ));
        }
        Ok(BenchDir::Given(dir.to_path_buf()))
    }

    fn path(&self) -> &Path {
        match self {
            BenchDir::Temporary(t) => t.path(),
            BenchDir::Given(p) => p,
        }
    }

    /// Removes a temporary directory unless asked to keep it; a given
    /// directory is always left in place.
    fn finish(self, keep: bool) -> Result<Option<PathBuf>, String> {
        match self {
            BenchDir::Temporary(t) if keep => Ok(Some(t.keep())),
            BenchDir::Temporary(t) => {
                let path = t.path().to_path_buf();
                t.close()
                    .map_err(|e| format!("cannot remove {}: {e}", path.display()))?;
                Ok(None)
            }
            BenchDir::Given(p) => Ok(Some(p)),
        }
    }
}

/// A progress bar on stderr for one phase.
struct Bar(ProgressBar);

impl Bar {
    fn new(phase: Phase, ops: u64) -> Self {
        let bar = ProgressBar::new(ops).with_prefix(phase.name());
        let style = ProgressStyle::with_template(
            "{prefix:>12} [{wide_bar}] {human_pos}/{human_len} eta {eta} {msg}",
        )
        .map(|s| s.progress_chars("=> "));
        if let Ok(style) = style {
            bar.set_style(style);
        }
        Bar(bar)
    }
}

impl Progress for Bar {
    fn advance(&self, ops: u64) {
        self.0.inc(ops);
    }

    fn stage(&self, label: &str) {
        self.0.set_message(label.to_string());
    }
}

/// Progress that shows nothing (stderr is not a terminal).
struct Quiet;

impl Progress for Quiet {
    fn advance(&self, _ops: u64) {}
}

/// Creates (or truncates) an output file before any work, so a path that
/// cannot be written fails the run at once rather than after it.
fn create_output(path: &Path) -> Result<File, String> {
    File::create(path).map_err(|e| format!("cannot create {}: {e}", path.display()))
}

/// Runs `siftdb bench`; `Ok` carries the exit code (non-zero when a phase
/// failed its checks), `Err` a reason the benchmark could not run.
pub fn run(args: &BenchArgs) -> Result<ExitCode, String> {
    check_phase_order(&args.phases)?;
    let ops = args.ops.unwrap_or(args.n);
    // Everything that can refuse the run does so before any work.
    let dir_parent = args.dir.clone().unwrap_or_else(std::env::temp_dir);
    let cold = check_before_run(args.n, ops, args.cold, &dir_parent)?;
    if !args.phases.contains(&Phase::FillRandom) {
        eprintln!(
            "note: no fillrandom in --phases: the read phases expect the N keys to be loaded already"
        );
    }
    if args.bulkload {
        return run_bulkload_comparison(args, ops);
    }
    let mut workload = Workload::with_ops(args.n, ops)?.with_phases(&args.phases);
    if let Some(bytes) = args.value_size {
        workload = workload
            .with_value_len(usize::try_from(bytes).map_err(|_| "--value-size is too large")?)?;
    }
    let mut json = match &args.json {
        Some(path) => Some(BufWriter::new(create_output(path)?)),
        None => None,
    };
    if let Some(path) = &args.plot {
        create_output(path)?;
    }
    let filter_policy = args.filter_policy();
    filter_policy.validate().map_err(|e| e.to_string())?;
    let dir = BenchDir::prepare(
        args.dir.as_deref(),
        args.phases.contains(&Phase::FillRandom),
    )?;
    let config = EngineConfig {
        dir: dir.path(),
        filter_policy,
        memtable_bytes: args.memtable_bytes,
        prefix_len: args.prefix_len.map(usize::from),
        range_bits: args.range_bits,
        level1_bytes: args.level1_bytes,
        histograms_off: args.no_histograms,
        compression: args.compression,
    };
    let engine = open_engine(&args.engine, &config)?;

    print_header(args, &workload, engine.as_ref(), dir.path());
    let options = RunOptions {
        threads: usize::from(args.threads),
        cold,
        batch: usize::from(args.batch),
    };
    let show_progress = std::io::stderr().is_terminal();
    let mut reports = Vec::with_capacity(args.phases.len());
    // (phase, round, ops/s at --threads, ops/s at --compare-threads)
    let mut scaling = Vec::new();
    let mut device: Option<DeviceBaseline> = None;
    for &phase in &args.phases {
        if args.device_baseline && device.is_none() && phase != Phase::FillRandom {
            // The tables exist now; the read phases have not warmed anything.
            let measured = measure_device(dir.path(), &DEFAULT_DEPTHS, DEVICE_SECONDS_PER_DEPTH)?;
            print!("{}", measured.to_human());
            device = Some(measured);
        }
        let rounds = if phase.repeatable() { args.rounds } else { 1 };
        for round in 1..=rounds {
            let report = run_one(engine.as_ref(), &workload, phase, &options, show_progress);
            emit(&report, json.as_mut(), args.json.as_deref())?;
            let compared = match args.compare_threads {
                Some(threads) if phase.repeatable() => {
                    let options = RunOptions {
                        threads: usize::from(threads),
                        ..options.clone()
                    };
                    let other = run_one(engine.as_ref(), &workload, phase, &options, show_progress);
                    emit(&other, json.as_mut(), args.json.as_deref())?;
                    Some(other)
                }
                _ => None,
            };
            if let Some(other) = &compared {
                scaling.push((phase, round, report.ops_per_sec(), other.ops_per_sec()));
            }
            let loaded = report.phase == Phase::YcsbLoad && report.passed();
            reports.push(report);
            reports.extend(compared);
            if loaded {
                print_amplification(
                    engine.as_ref(),
                    dir.path(),
                    &workload,
                    &reports,
                    "after ycsb-load",
                    false,
                );
            }
        }
    }
    if reports
        .iter()
        .any(|r| r.phase.is_ycsb() && r.phase != Phase::YcsbLoad)
    {
        print_amplification(
            engine.as_ref(),
            dir.path(),
            &workload,
            &reports,
            "at the end",
            true,
        );
    }
    drop(engine);

    println!();
    print!("{}", summary_table(&reports));
    if let Some(threads) = args.compare_threads {
        println!();
        println!(
            "thread scaling: ops/s with {threads} threads ÷ ops/s with {}, each pair run back to back",
            args.threads
        );
        for (phase, round, base, other) in &scaling {
            let ratio = match (base, other) {
                (Some(base), Some(other)) if *base > 0.0 => format!("{:.2}", other / base),
                _ => "-".to_string(),
            };
            println!(
                "  {:<12} round {round}: {} -> {}  {ratio}",
                phase.name(),
                base.map_or("-".to_string(), |v| format!("{v:.0}")),
                other.map_or("-".to_string(), |v| format!("{v:.0}")),
            );
        }
    }
    if let Some(device) = &device {
        println!();
        print!(
            "{}",
            device_fractions(&reports, device, usize::from(args.batch))
        );
    }
    if args.engine == "siftdb" {
        print_filters(dir.path());
    }
    if let Some(path) = &args.plot {
        write_svg(
            path,
            &run_svg(&plot_title(args, &workload, &reports), &[reports.clone()])?,
        )?;
        println!("plot: {}", path.display());
    }
    if let Some(kept) = dir.finish(args.keep)? {
        println!("database directory: {}", kept.display());
    }
    let failed = reports.iter().filter(|r| !r.passed()).count();
    if failed > 0 {
        eprintln!(
            "siftdb: {failed} of {} phases failed their checks",
            reports.len()
        );
        return Ok(ExitCode::from(EXIT_CHECK_FAILED));
    }
    Ok(ExitCode::SUCCESS)
}

/// Prints the YCSB phases' write and space amplification so far (the
/// memory engine has no files: none).
fn print_amplification(
    engine: &dyn Engine,
    dir: &Path,
    workload: &Workload,
    reports: &[PhaseReport],
    at: &str,
    flush: bool,
) {
    if engine.name() == "memory" {
        return;
    }
    match ycsb_amplification(engine, dir, workload, reports, at, flush) {
        Ok(amplification) => println!("{}", amplification.to_line()),
        Err(e) => eprintln!("note: no amplification {at}: {e}"),
    }
}

/// How long the device is read at each depth.
const DEVICE_SECONDS_PER_DEPTH: Duration = Duration::from_secs(3);

/// Each read phase's data-block reads from files per second as a fraction
/// of the device's reads per second at the phase's concurrency.
fn device_fractions(reports: &[PhaseReport], device: &DeviceBaseline, batch: usize) -> String {
    let mut out = String::from(
        "of the device: data-block reads from files per second ÷ the device's reads per second at the phase's threads\n",
    );
    for r in reports.iter().filter(|r| r.phase != Phase::FillRandom) {
        out.push_str(&device_fraction_line(r, device, batch));
        out.push('\n');
    }
    out
}

/// Runs one phase, with a progress bar when stderr is a terminal, and
/// prints its report.
fn run_one(
    engine: &dyn Engine,
    workload: &Workload,
    phase: Phase,
    options: &RunOptions,
    show_progress: bool,
) -> PhaseReport {
    let report = if show_progress {
        let bar = Bar::new(phase, workload.phase_ops(phase));
        let report = run_phase(engine, workload, phase, options, &bar);
        bar.0.finish_and_clear();
        report
    } else {
        run_phase(engine, workload, phase, options, &Quiet)
    };
    print!("{}", report.to_human());
    report
}

/// Appends `report` to the JSON file, if one was asked for.
fn emit(
    report: &PhaseReport,
    out: Option<&mut BufWriter<File>>,
    path: Option<&Path>,
) -> Result<(), String> {
    if let (Some(out), Some(path)) = (out, path) {
        writeln!(out, "{}", report.to_json())
            .and_then(|()| out.flush())
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(())
}

/// What a run was, in one line: engine, N, M when it differs, threads, cold.
fn run_line(args: &BenchArgs, workload: &Workload, engine: &str) -> String {
    format!(
        "{engine}, {}",
        describe_run(workload, usize::from(args.threads), args.cold)
    )
}

fn plot_title(args: &BenchArgs, workload: &Workload, reports: &[PhaseReport]) -> String {
    let engine = reports
        .first()
        .map_or(args.engine.as_str(), |r| r.engine.as_str());
    format!("siftdb bench: {}", run_line(args, workload, engine))
}

/// The filters per level of the database the run left (`siftdb inspect`'s
/// level table), when it can be read.
fn print_filters(dir: &Path) {
    match siftdb::internals::inspect::inspect_dir(dir) {
        Ok(summary) => {
            println!();
            println!("filters per level at the end of the run:");
            for line in crate::inspect::level_lines(&summary) {
                println!("{line}");
            }
        }
        Err(e) => eprintln!("note: cannot inspect {}: {e}", dir.display()),
    }
}

fn print_header(args: &BenchArgs, workload: &Workload, engine: &dyn Engine, dir: &Path) {
    println!(
        "siftdb bench: engine {}, directory {}",
        run_line(args, workload, &engine.name()),
        dir.display()
    );
    let settings = engine.settings();
    if settings.is_empty() {
        println!("settings: engine defaults");
    } else {
        let shown: Vec<String> = settings.iter().map(|(k, v)| format!("{k}={v}")).collect();
        println!("settings (non-default): {}", shown.join(", "));
    }
    if args.engine == "memory" {
        println!("note: the memory engine measures the harness only, not siftdb");
    }
    println!();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_engines_are_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let config = EngineConfig {
            dir: dir.path(),
            filter_policy: FilterPolicy::default(),
            memtable_bytes: None,
            prefix_len: None,
            range_bits: None,
            level1_bytes: None,
            histograms_off: false,
            compression: CompressionChoice::Lz4,
        };
        assert_eq!(open_engine("memory", &config).unwrap().name(), "memory");
        let err = open_engine("leveldb", &config).err().unwrap();
        assert!(err.contains("leveldb"), "{err}");
    }
}
