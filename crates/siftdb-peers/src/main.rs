//! `siftdb-peers`: the shared workloads against siftdb, RocksDB and fjall,
//! back to back in one process, each on a fresh directory (or, with
//! `--rounds`, filled once and read in rounds that rotate the engines), and
//! the ratios siftdb/peer per phase.
//!
//! Owns: the flags, the checks made before any work (phase order, engines,
//! `--cold` permission, sizes that fit the machine), the run directory of
//! each engine, the order engines run in, the printed tables, the JSON
//! lines file and the SVG plot.
//! Must never: measure anything itself (that is `run_phase`'s job), keep
//! an engine open while the next one runs, or compare figures of different
//! rounds (a round's ratio pairs that round's figures; the summary pairs
//! each engine's median round).

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use clap::Parser;
use serde_json::{json, Value};
use siftdb::FilterPolicy;
use siftdb_bench::plot::{run_svg, write_svg};
use siftdb_bench::{
    check_before_run, check_phase_order, describe_run, device_fraction_line, fmt_mib,
    measure_device, parse_count, raw_data_bytes, run_phase, write_back_dirty_pages,
    ycsb_amplification, Amplification, CompressionChoice, DeviceBaseline, Fit, NoProgress, Phase,
    PhaseReport, RunOptions, Workload, DEFAULT_DEPTHS,
};
use siftdb_peers::compare::{
    figures_table, median_rounds, ratio_table, ratios, round_ratio_table, Measured,
};
use siftdb_peers::{open_engine, PeerConfig, ENGINES};

/// How long the device is read at each depth (`--device-baseline`).
const DEVICE_SECONDS_PER_DEPTH: std::time::Duration = std::time::Duration::from_secs(3);

/// Exit code when a phase failed its checks.
const EXIT_CHECK_FAILED: u8 = 1;
/// Exit code when the comparison could not run.
const EXIT_CANNOT_RUN: u8 = 2;

/// The shared siftdb workloads against siftdb, RocksDB and fjall in one
/// process; prints each engine's figures and the ratios siftdb/peer.
#[derive(Parser, Debug)]
#[command(after_help = "\
The workloads, the read order every --ops setting uses, and what each phase \
checks are defined in crates/siftdb-bench/WORKLOADS.md. Counts take k, M and \
G suffixes (--n 20M --ops 200k).\n\
Ratios: ops/s ÷ peer above 1 means siftdb is faster; p50/p99 ÷ peer below 1 \
means siftdb is faster. Exit status: 0 when every phase of every engine passed \
its checks, 1 when one failed, 2 when the comparison could not run.")]
struct Args {
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
    /// before each read phase of every engine. Needs root.
    #[arg(long)]
    cold: bool,

    /// Phases to run, comma-separated, in this order: fillrandom, readrandom,
    /// readmissing, readhot, seekrandom, seekrandom-rev, seekprefix, seekempty, mixed,
    /// deleterange (it deletes 10% of the keys), txn, txn-uniform (with
    /// either, the peers open their optimistic transaction databases for
    /// the whole run), txn-locking (RocksDB opened as its locking
    /// TransactionDB for the whole run, so not with txn or txn-uniform;
    /// fjall has no locking transactions); then the YCSB phases: ycsb-load
    /// and the core workloads ycsb-a … ycsb-f (the same definitions as
    /// `siftdb bench`, every read checked; write and space amplification
    /// per engine after ycsb-load and at the end; with --rounds they run
    /// in the last round only, ycsb-load with the fills).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "fillrandom,readrandom,readmissing,readhot,seekrandom,seekrandom-rev,seekprefix,seekempty,mixed,deleterange"
    )]
    phases: Vec<Phase>,

    /// Engines to run, comma-separated, in the order given (siftdb, rocksdb,
    /// fjall; `memory` measures the harness alone). Ratios need siftdb.
    #[arg(long, value_delimiter = ',', default_value = "siftdb,rocksdb,fjall")]
    engines: Vec<String>,

    /// Threads sharing every phase's operations (mixed: by key, so each
    /// key's operations stay in order).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=1024))]
    threads: u16,

    /// Keys per `multi_get` call in the multigetrandom phase (RocksDB:
    /// its batched MultiGet; fjall: a get per key).
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u16).range(1..=4096))]
    batch: u16,

    /// Bloom filter bits per key, the same for every engine.
    #[arg(long, default_value_t = 10.0)]
    bits_per_key: f64,

    /// A fixed-length prefix extractor of this many bytes for siftdb and
    /// RocksDB (fjall 3 has none); seekprefix scans 14-byte prefixes
    /// [default: none].
    #[arg(long, value_name = "BYTES", value_parser = clap::value_parser!(u16).range(1..))]
    prefix_len: Option<u16>,

    /// Range filter bits per key for siftdb (no peer has range filters)
    /// [default: none].
    #[arg(long, value_name = "BITS")]
    range_bits: Option<f64>,

    /// Directory in which each engine gets a fresh temporary directory,
    /// removed after its run [default: the system's temporary directory].
    #[arg(long)]
    dir: Option<PathBuf>,

    /// siftdb's filter policy at the same average bits per key:
    /// `uniform` (every table --bits-per-key, like the peers),
    /// `level-aware` (Monkey allocation across levels) or
    /// `level-aware-static` (that, with binary fuse filters for the tables
    /// compaction writes from level 1 down: siftdb's default policy).
    #[arg(long, value_enum, default_value = "level-aware-static")]
    siftdb_filters: SiftdbFilters,

    /// Rounds of the read phases: with more than one, every engine fills
    /// first, then each round opens every engine again and runs the read
    /// phases, the engines' order rotated by one per round; the figures and
    /// ratios are each engine's median round per phase, and a table gives
    /// siftdb ÷ the best peer in every round. mixed, deleterange and the
    /// txn phases run in the last round only (they overwrite and delete
    /// keys).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=100))]
    rounds: u16,

    /// Keep each engine's database in DIR/<engine> instead of a temporary
    /// directory. With fillrandom in --phases, DIR/<engine> must not exist
    /// yet; without it, the database a previous run filled there with the
    /// same --n, --bits-per-key, --siftdb-filters and scan filters
    /// (--prefix-len, --range-bits) is opened. So a data set larger than
    /// memory can be loaded once outside a memory limit and read inside one
    /// (drop the page cache between the two, or use --cold).
    #[arg(long, value_name = "DIR", conflicts_with = "dir")]
    keep_in: Option<PathBuf>,

    /// Before the phases, measure the device: random 4 KiB positioned
    /// reads (O_DIRECT, past the page cache) over the files of the kept
    /// siftdb database (DIR/siftdb of --keep-in) at 1, 4, 16 and 32 reads
    /// in flight; each siftdb read phase then also prints its data-block
    /// reads from files per second as a fraction of the device's at its
    /// concurrency.
    #[arg(long, requires = "keep_in")]
    device_baseline: bool,

    /// siftdb reads its data blocks past the page cache (O_DIRECT,
    /// `Options::direct_reads`), so its block cache is their only cache.
    #[arg(long)]
    direct_reads: bool,

    /// Bytes of every value, for every phase [default: 100 for the phases
    /// of WORKLOADS.md, so figures published with them stay comparable;
    /// 1000 for the YCSB phases, 10 fields of 100 bytes].
    #[arg(long, value_name = "BYTES", value_parser = parse_count)]
    value_size: Option<u64>,

    /// How every engine compresses its tables: `lz4` (every engine's
    /// default: siftdb and RocksDB LZ4 on every level, fjall none on L0
    /// and L1 and LZ4 below) or `zstd-bottom` (RocksDB's
    /// bottommost_compression zstd; fjall 3 has no zstd and keeps its
    /// default; siftdb zstd(3) at the bottom).
    #[arg(long, value_enum, default_value = "lz4")]
    compression: CompressionChoice,

    /// Key-value separation from this many bytes: RocksDB's blob files
    /// (enable_blob_files, min_blob_size), fjall's KV separation at the
    /// same threshold; siftdb refuses it until it has
    /// Options::blob_threshold [default: none].
    #[arg(long, value_name = "BYTES", value_parser = parse_count)]
    blob_threshold: Option<u64>,

    /// Also write one JSON object per line to FILE: a run header, every
    /// phase report (`"kind": "phase"`) and every ratio (`"kind": "ratio"`).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,

    /// Also draw every engine's ops/s and p50/p99 latency per phase, side
    /// by side, into FILE (SVG).
    #[arg(long, value_name = "FILE.svg")]
    plot: Option<PathBuf>,
}

fn check_args(args: &Args) -> Result<(), String> {
    check_phase_order(&args.phases)?;
    if args.engines.is_empty() {
        return Err("--engines is empty".to_string());
    }
    for (i, name) in args.engines.iter().enumerate() {
        if !ENGINES.contains(&name.as_str()) {
            return Err(format!(
                "unknown engine {name:?} (known: {})",
                ENGINES.join(", ")
            ));
        }
        if args.engines.iter().take(i).any(|earlier| earlier == name) {
            return Err(format!("engine {name} is listed twice"));
        }
    }
    if args.rounds > 1 && args.engines.iter().any(|name| name == "memory") {
        // Each round opens the engines again; the harness's in-memory map
        // starts empty at every opening.
        return Err("--rounds above 1 needs engines that keep their data: not memory".to_string());
    }
    if args.phases.contains(&Phase::TxnLocking)
        && args
            .phases
            .iter()
            .any(|phase| matches!(phase, Phase::Txn | Phase::TxnUniform))
    {
        // RocksDB is opened as one transactional type for the whole run.
        return Err(
            "txn-locking (RocksDB's TransactionDB) cannot share a run with txn or txn-uniform \
             (its OptimisticTransactionDB): run them apart"
                .to_string(),
        );
    }
    if !(args.bits_per_key > 0.0 && args.bits_per_key.is_finite()) {
        return Err(format!(
            "--bits-per-key must be positive, got {}",
            args.bits_per_key
        ));
    }
    Ok(())
}

struct JsonLines {
    out: BufWriter<File>,
    path: PathBuf,
}

impl JsonLines {
    fn create(path: &PathBuf) -> Result<Self, String> {
        let file =
            File::create(path).map_err(|e| format!("cannot create {}: {e}", path.display()))?;
        Ok(JsonLines {
            out: BufWriter::new(file),
            path: path.clone(),
        })
    }

    fn write(&mut self, value: &Value) -> Result<(), String> {
        writeln!(self.out, "{value}")
            .and_then(|()| self.out.flush())
            .map_err(|e| format!("cannot write {}: {e}", self.path.display()))
    }
}

/// siftdb's filter policy in a comparison (`--siftdb-filters`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum SiftdbFilters {
    Uniform,
    LevelAware,
    LevelAwareStatic,
}

impl SiftdbFilters {
    fn policy(self, bits_per_key: f64) -> FilterPolicy {
        match self {
            SiftdbFilters::Uniform => FilterPolicy::bits_per_key(bits_per_key),
            SiftdbFilters::LevelAware => FilterPolicy::level_aware(bits_per_key),
            SiftdbFilters::LevelAwareStatic => {
                FilterPolicy::level_aware(bits_per_key).static_filters_from_level(1)
            }
        }
    }
}

/// What every engine is opened with: the flags' filters, siftdb's policy.
fn peer_config(args: &Args) -> PeerConfig {
    PeerConfig {
        bits_per_key: args.bits_per_key,
        siftdb_policy: Some(args.siftdb_filters.policy(args.bits_per_key)),
        prefix_len: args.prefix_len.map(usize::from),
        range_bits: args.range_bits,
        direct_reads: args.direct_reads,
        transactions: args
            .phases
            .iter()
            .any(|phase| matches!(phase, Phase::Txn | Phase::TxnUniform)),
        locking: args.phases.contains(&Phase::TxnLocking),
        compression: args.compression,
        blob_threshold: args.blob_threshold,
    }
}

/// Where one engine's database lives during a run.
enum EngineDir {
    /// A fresh directory, removed after the run.
    Temporary(tempfile::TempDir),
    /// `--keep-in`: kept; `marker` records the fill it holds.
    Kept { path: PathBuf, marker: PathBuf },
}

impl EngineDir {
    fn path(&self) -> &Path {
        match self {
            EngineDir::Temporary(dir) => dir.path(),
            EngineDir::Kept { path, .. } => path,
        }
    }
}

/// The line a kept database's marker holds once its fill has passed.
fn fill_marker(name: &str, args: &Args) -> String {
    let policy = if name == "siftdb" {
        format!(" policy={}", args.siftdb_filters.policy(args.bits_per_key))
    } else {
        String::new()
    };
    // The scan filters a fill built its tables with, where the engine has
    // them: a database filled without them would be read without them.
    let prefix = match (name, args.prefix_len) {
        ("siftdb" | "rocksdb", Some(len)) => format!(" prefix_len={len}"),
        _ => String::new(),
    };
    let range = match (name, args.range_bits) {
        ("siftdb", Some(bits)) => format!(" range_bits={bits}"),
        _ => String::new(),
    };
    format!(
        "n={} bits_per_key={}{policy}{prefix}{range}\n",
        args.n, args.bits_per_key
    )
}

fn engine_dir(name: &str, args: &Args) -> Result<EngineDir, String> {
    if let Some(root) = &args.keep_in {
        let path = root.join(name);
        let marker = root.join(format!("{name}.filled"));
        let fills = args.phases.iter().any(|phase| phase.is_fill());
        if fills {
            if path.exists() {
                return Err(format!(
                    "{} exists: --keep-in with fillrandom needs a new directory",
                    path.display()
                ));
            }
        } else {
            let found = std::fs::read_to_string(&marker).unwrap_or_default();
            let wanted = fill_marker(name, args);
            if found != wanted {
                return Err(format!(
                    "{} holds no finished fill of {:?} (marker {}: {:?}); run fillrandom with --keep-in first",
                    path.display(),
                    wanted.trim(),
                    marker.display(),
                    found.trim()
                ));
            }
        }
        std::fs::create_dir_all(&path)
            .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
        return Ok(EngineDir::Kept { path, marker });
    }
    let parent = args.dir.clone().unwrap_or_else(std::env::temp_dir);
    std::fs::create_dir_all(&parent)
        .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    tempfile::Builder::new()
        .prefix(&format!("siftdb-peers-{name}-"))
        .tempdir_in(&parent)
        .map(EngineDir::Temporary)
        .map_err(|e| format!("cannot create a directory in {}: {e}", parent.display()))
}

/// What every phase of a run needs: the flags, the workload, the options.
#[derive(Clone, Copy)]
struct Setup<'a> {
    args: &'a Args,
    workload: &'a Workload,
    options: &'a RunOptions,
    /// The device measured before the phases (`--device-baseline`).
    device: Option<&'a DeviceBaseline>,
}

/// Opens engine `name` on `dir`, runs `phases` against it (printing each
/// report and writing its JSON line, tagged with `round` when there are
/// rounds) and closes it before returning.
fn run_phases(
    name: &str,
    dir: &EngineDir,
    phases: &[Phase],
    round: Option<(usize, usize)>,
    setup: Setup<'_>,
    out: Outputs<'_>,
) -> Result<Vec<Measured>, String> {
    let Outputs {
        json,
        earlier,
        amplification,
    } = out;
    let Setup {
        args,
        workload,
        options,
        device,
    } = setup;
    let engine = open_engine(name, dir.path(), &peer_config(args))?;
    match round {
        Some((round, rounds)) => println!(
            "== {} in {} (round {} of {rounds})",
            engine.name(),
            dir.path().display(),
            round + 1
        ),
        None => println!("== {} in {}", engine.name(), dir.path().display()),
    }
    let settings = engine.settings();
    if settings.is_empty() {
        println!("settings: engine defaults");
    } else {
        for (key, value) in &settings {
            println!("setting (non-default): {key} = {value}");
        }
    }
    let mut reports = Vec::with_capacity(phases.len());
    for &phase in phases {
        eprintln!("{name}: {phase} ...");
        if changes_data(phase) {
            if let EngineDir::Kept { marker, .. } = dir {
                // The phase overwrites values or deletes keys: the read
                // phases of a later run would no longer find what they
                // check.
                match std::fs::remove_file(marker) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(format!("cannot remove {}: {e}", marker.display())),
                }
            }
        }
        let report = run_phase(engine.as_ref(), workload, phase, options, &NoProgress);
        let cpu_seconds = report.cpu_seconds;
        print!("{}", report.to_human());
        if let Some(cpu) = cpu_seconds {
            println!("    process CPU {cpu:.2} s (all threads)");
        }
        if let (Some(device), true) = (device, phase.is_read_only()) {
            println!(
                "    of the device:{}",
                device_fraction_line(&report, device, options.batch)
            );
        }
        let measured = Measured {
            report,
            cpu_seconds,
        };
        if let Some(out) = json.as_mut() {
            let mut line = measured.to_json();
            if let (Some((round, _)), Some(object)) = (round, line.as_object_mut()) {
                object.insert("round".into(), json!(round + 1));
            }
            out.write(&line)?;
        }
        let filled = phase == Phase::FillRandom && measured.report.passed();
        let loaded = phase == Phase::YcsbLoad && measured.report.passed();
        reports.push(measured);
        if loaded {
            let so_far: Vec<PhaseReport> = reports.iter().map(|m| m.report.clone()).collect();
            let amp = ycsb_amplification(
                engine.as_ref(),
                dir.path(),
                workload,
                &so_far,
                "after ycsb-load",
                false,
            )?;
            record_amplification(amp, json, amplification)?;
        }
        if filled {
            if let EngineDir::Kept { marker, .. } = dir {
                std::fs::write(marker, fill_marker(name, args))
                    .map_err(|e| format!("cannot write {}: {e}", marker.display()))?;
            }
        }
    }
    if phases
        .iter()
        .any(|phase| phase.is_ycsb() && *phase != Phase::YcsbLoad)
    {
        let all: Vec<PhaseReport> = earlier
            .iter()
            .cloned()
            .chain(reports.iter().map(|m| m.report.clone()))
            .collect();
        let amp = ycsb_amplification(
            engine.as_ref(),
            dir.path(),
            workload,
            &all,
            "at the end",
            true,
        )?;
        record_amplification(amp, json, amplification)?;
    }
    drop(engine);
    println!();
    Ok(reports)
}

/// Where `run_phases` writes besides stdout: the JSON lines, the
/// amplification figures, and what the engine's earlier openings
/// reported (the YCSB load of a run with rounds).
struct Outputs<'a> {
    json: &'a mut Option<JsonLines>,
    earlier: &'a [PhaseReport],
    amplification: &'a mut Vec<Amplification>,
}

/// Prints one amplification figure, writes its JSON line, keeps it.
fn record_amplification(
    amp: Amplification,
    json: &mut Option<JsonLines>,
    kept: &mut Vec<Amplification>,
) -> Result<(), String> {
    println!("{}", amp.to_line());
    if let Some(out) = json.as_mut() {
        out.write(&amp.to_json())?;
    }
    kept.push(amp);
    Ok(())
}

/// True for the phases after the fill that change the data: mixed and
/// the txn phases overwrite values, deleterange deletes keys.
fn changes_data(phase: Phase) -> bool {
    !phase.is_fill() && !phase.is_read_only()
}

/// Removes a temporary engine directory; says where a kept one is.
fn finish_dir(dir: EngineDir) -> Result<(), String> {
    match dir {
        EngineDir::Temporary(dir) => {
            let path = dir.path().to_path_buf();
            dir.close()
                .map_err(|e| format!("cannot remove {}: {e}", path.display()))
        }
        EngineDir::Kept { path, .. } => {
            println!("kept: {}", path.display());
            Ok(())
        }
    }
}

/// Every engine's phases, as `(round, measured)` per engine in
/// `args.engines` order. One round: each engine in turn runs every phase
/// in one opening (fill and reads together), its directory made before and
/// removed after (unless kept). More rounds: each engine
/// fills in its own opening (then the machine's dirty pages are written
/// back), then every round opens each engine again and
/// runs the read phases, the engines in an order rotated by one each round
/// (round r starts with the r-th), so a slow spell of a shared machine
/// falls on every engine alike; mixed, which overwrites, runs in the last
/// round only.
fn run_rounds(
    setup: Setup<'_>,
    json: &mut Option<JsonLines>,
    amplification: &mut Vec<Amplification>,
) -> Result<Vec<Vec<(usize, Measured)>>, String> {
    let args = setup.args;
    let rounds = usize::from(args.rounds);
    let mut measured: Vec<Vec<(usize, Measured)>> = vec![Vec::new(); args.engines.len()];
    if rounds == 1 {
        // One engine's directory at a time: removed before the next is made.
        for (name, out) in args.engines.iter().zip(measured.iter_mut()) {
            let dir = engine_dir(name, args)?;
            let outputs = Outputs {
                json: &mut *json,
                earlier: &[],
                amplification: &mut *amplification,
            };
            let reports = run_phases(name, &dir, &args.phases, None, setup, outputs)?;
            out.extend(reports.into_iter().map(|m| (0, m)));
            finish_dir(dir)?;
        }
        return Ok(measured);
    }
    // Every engine's database stays until the last round.
    let mut dirs = Vec::with_capacity(args.engines.len());
    for name in &args.engines {
        dirs.push(engine_dir(name, args)?);
    }
    let mut run = |i: usize, phases: &[Phase], round: usize| -> Result<(), String> {
        let (Some(name), Some(dir), Some(out)) =
            (args.engines.get(i), dirs.get(i), measured.get_mut(i))
        else {
            return Ok(());
        };
        let tag = Some((round, rounds));
        let earlier: Vec<PhaseReport> = out.iter().map(|(_, m)| m.report.clone()).collect();
        let outputs = Outputs {
            json: &mut *json,
            earlier: &earlier,
            amplification: &mut *amplification,
        };
        let reports = run_phases(name, dir, phases, tag, setup, outputs)?;
        out.extend(reports.into_iter().map(|m| (round, m)));
        Ok(())
    };
    let fills: Vec<Phase> = args
        .phases
        .iter()
        .copied()
        .filter(|p| p.is_fill())
        .collect();
    if !fills.is_empty() {
        for i in 0..args.engines.len() {
            run(i, &fills, 0)?;
        }
        // The last fill's dirty pages would otherwise be written back
        // during the first round, on the first engine's reads.
        write_back_dirty_pages();
    }
    for round in 0..rounds {
        let reads: Vec<Phase> = args
            .phases
            .iter()
            .copied()
            .filter(|&p| {
                // The rounds after a phase that changes the data would read
                // another database; the YCSB workloads each expect the
                // records the ones before them left, so all run last.
                !p.is_fill() && ((!changes_data(p) && !p.is_ycsb()) || round + 1 == rounds)
            })
            .collect();
        if reads.is_empty() {
            break;
        }
        for k in 0..args.engines.len() {
            run((round + k) % args.engines.len(), &reads, round)?;
        }
    }
    for dir in dirs {
        finish_dir(dir)?;
    }
    Ok(measured)
}

fn run(args: &Args) -> Result<ExitCode, String> {
    check_args(args)?;
    let ops = args.ops.unwrap_or(args.n);
    // Everything that can refuse the run does so before any work.
    let parent = args.dir.clone().unwrap_or_else(std::env::temp_dir);
    let cold = check_before_run(args.n, ops, args.cold, &parent)?;
    if args.rounds > 1 {
        // Every engine's database stays on disk until the last round.
        let at = args.keep_in.as_ref().unwrap_or(&parent);
        let engines = u64::try_from(args.engines.len()).unwrap_or(u64::MAX);
        let data = raw_data_bytes(args.n).saturating_mul(engines);
        if let Some(free) = Fit::of_machine(at)
            .free_disk_bytes
            .filter(|&free| data > free)
        {
            return Err(format!(
                "--rounds keeps all {engines} databases until the last round: {} GiB of keys and values before any engine overhead, more than the {} GiB free",
                data >> 30,
                free >> 30
            ));
        }
    }
    let mut workload = Workload::with_ops(args.n, ops)?.with_phases(&args.phases);
    if let Some(bytes) = args.value_size {
        workload = workload
            .with_value_len(usize::try_from(bytes).map_err(|_| "--value-size is too large")?)?;
    }
    let mut json = args.json.as_ref().map(JsonLines::create).transpose()?;
    if let Some(path) = &args.plot {
        File::create(path).map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    }
    let options = RunOptions {
        threads: usize::from(args.threads),
        cold,
        batch: usize::from(args.batch),
    };
    let started = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let phase_names: Vec<&str> = args.phases.iter().map(|p| p.name()).collect();
    let size = describe_run(&workload, usize::from(args.threads), args.cold);
    println!(
        "siftdb-peers: {size}, phases {}, engines {}, Bloom {} bits/key",
        phase_names.join(","),
        args.engines.join(","),
        args.bits_per_key
    );
    println!("peers: {}", siftdb_peers::peer_versions());
    println!();
    if let Some(out) = json.as_mut() {
        out.write(&json!({
            "kind": "run",
            "unix_time": started,
            "n": args.n,
            "ops": workload.ops(),
            "cold": args.cold,
            "threads": args.threads,
            "phases": phase_names,
            "engines": args.engines,
            "bits_per_key": args.bits_per_key,
            "rocksdb_version": siftdb_peers::ROCKSDB_VERSION,
            "peers": siftdb_peers::peer_versions(),
        }))?;
    }

    let device = match (&args.keep_in, args.device_baseline) {
        (Some(root), true) => {
            let measured = measure_device(
                &root.join("siftdb"),
                &DEFAULT_DEPTHS,
                DEVICE_SECONDS_PER_DEPTH,
            )?;
            print!("{}", measured.to_human());
            println!();
            Some(measured)
        }
        _ => None,
    };
    let setup = Setup {
        args,
        workload: &workload,
        options: &options,
        device: device.as_ref(),
    };
    let mut amplification = Vec::new();
    let measured = run_rounds(setup, &mut json, &mut amplification)?;
    let runs: Vec<(String, Vec<Measured>)> = args
        .engines
        .iter()
        .cloned()
        .zip(measured.iter().map(|rounds| median_rounds(rounds)))
        .collect();

    let all: Vec<Vec<Measured>> = runs.iter().map(|(_, r)| r.clone()).collect();
    if let Some(path) = &args.plot {
        let reports: Vec<_> = all
            .iter()
            .map(|run| run.iter().map(|m| m.report.clone()).collect())
            .collect();
        write_svg(path, &run_svg(&format!("siftdb-peers: {size}"), &reports)?)?;
        println!("plot: {}", path.display());
    }
    println!("## Figures ({size})");
    println!();
    print!("{}", figures_table(&all));
    println!();
    for (_, reports) in &runs {
        if let Some(first) = reports.first().map(|m| &m.report) {
            let shown: Vec<String> = first
                .settings
                .iter()
                .map(|(k, v)| format!("{k} = {v}"))
                .collect();
            let shown = if shown.is_empty() {
                "defaults".to_string()
            } else {
                shown.join("; ")
            };
            println!("- {}: {shown}", first.engine);
        }
    }
    println!();

    let ours = runs.iter().find(|(name, _)| name == "siftdb");
    let peers: Vec<Vec<Measured>> = runs
        .iter()
        .filter(|(name, _)| name != "siftdb")
        .map(|(_, r)| r.clone())
        .collect();
    match ours {
        Some((_, ours)) if !peers.is_empty() => {
            if args.rounds > 1 {
                let index = |wanted: &str| args.engines.iter().position(|name| name == wanted);
                let ours_rounds = index("siftdb").and_then(|i| measured.get(i));
                let peer_rounds: Vec<Vec<(usize, Measured)>> = args
                    .engines
                    .iter()
                    .zip(&measured)
                    .filter(|(name, _)| name.as_str() != "siftdb")
                    .map(|(_, rounds)| rounds.clone())
                    .collect();
                if let Some(ours_rounds) = ours_rounds {
                    println!("## siftdb ops/s ÷ the best peer's, per round");
                    println!();
                    print!("{}", round_ratio_table(ours_rounds, &peer_rounds));
                    println!();
                }
            }
            let rs = ratios(ours, &peers);
            println!("## Ratios siftdb ÷ peer (ops/s above 1: siftdb faster; p50, p99 and CPU below 1: siftdb faster or cheaper)");
            println!();
            print!("{}", ratio_table(&rs));
            if let Some(out) = json.as_mut() {
                let engine = ours.first().map_or("siftdb", |m| m.report.engine.as_str());
                for r in &rs {
                    out.write(&r.to_json(engine))?;
                }
            }
        }
        _ => println!("(no ratios: they need siftdb and at least one peer in --engines)"),
    }

    if !amplification.is_empty() {
        println!();
        println!(
            "## Write and space amplification (YCSB records, {} bytes each)",
            siftdb_bench::ycsb_record_bytes(workload.ycsb_value_len())
        );
        println!();
        print!("{}", amplification_table(&amplification));
    }

    let failed: Vec<String> = runs
        .iter()
        .flat_map(|(_, reports)| reports.iter())
        .filter(|m| !m.report.passed())
        .map(|m| format!("{} {}", m.report.engine, m.report.phase))
        .collect();
    if !failed.is_empty() {
        eprintln!(
            "siftdb-peers: phases failed their checks: {}",
            failed.join(", ")
        );
        return Ok(ExitCode::from(EXIT_CHECK_FAILED));
    }
    Ok(ExitCode::SUCCESS)
}

/// One markdown row per engine and moment: write amplification (bytes
/// the process wrote ÷ bytes put) and space amplification (bytes on disk ÷
/// live bytes), with the figures they divide.
fn amplification_table(amps: &[Amplification]) -> String {
    let mut s = String::from(
        "| engine | when | write amp | written | put | space amp | on disk | live |\n|---|---|---:|---:|---:|---:|---:|---:|\n",
    );
    for a in amps {
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {:.2} | {} | {} |\n",
            a.engine,
            a.at,
            a.write_amplification()
                .map_or_else(|| "-".to_string(), |w| format!("{w:.2}")),
            a.bytes_written.map_or_else(|| "-".to_string(), fmt_mib),
            fmt_mib(a.user_bytes_put),
            a.space_amplification(),
            fmt_mib(a.disk_bytes),
            fmt_mib(a.live_user_bytes),
        ));
    }
    s
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("siftdb-peers: {message}");
            ExitCode::from(EXIT_CANNOT_RUN)
        }
    }
}
