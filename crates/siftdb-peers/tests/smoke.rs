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

use siftdb_bench::{run_phase, CompressionChoice, NoProgress, Phase, RunOptions, Workload};
use siftdb_peers::{open_engine, peer_versions, PeerConfig, ROCKSDB_VERSION};

fn plain() -> PeerConfig {
    PeerConfig {
        bits_per_key: 10.0,
        siftdb_policy: None,
        prefix_len: None,
        range_bits: None,
        transactions: false,
        locking: false,
        direct_reads: false,
        compression: CompressionChoice::Lz4,
        blob_threshold: None,
    }
}

/// The peers opened as their optimistic transaction databases, which the
/// txn phases need.
fn transactional() -> PeerConfig {
    PeerConfig {
        transactions: true,
        ..plain()
    }
}

/// The phases an engine opened with `config` runs: the txn phases only
/// on a transactional one.
fn phases(config: &PeerConfig) -> impl Iterator<Item = Phase> + '_ {
    Phase::ALL
        .into_iter()
        .filter(|phase| config.transactions || !matches!(phase, Phase::Txn | Phase::TxnUniform))
        // txn-locking needs RocksDB opened as a TransactionDB (and fjall
        // has no locking transactions).
        .filter(|phase| *phase != Phase::TxnLocking)
}

/// With the scan filters of the measurements: a 14-byte prefix
/// extractor (siftdb and RocksDB) and range filters (siftdb).
fn with_scan_filters() -> PeerConfig {
    PeerConfig {
        prefix_len: Some(14),
        range_bits: Some(16.0),
        ..plain()
    }
}

fn passes_every_phase(name: &str, threads: usize) {
    for config in [plain(), with_scan_filters(), transactional()] {
        passes_every_phase_with(name, threads, &config);
    }
}

fn passes_every_phase_with(name: &str, threads: usize, config: &PeerConfig) {
    let dir = tempfile::tempdir().unwrap();
    let engine = open_engine(name, dir.path(), config).unwrap();
    let workload = Workload::new(5_000).unwrap();
    for phase in phases(config) {
        let report = run_phase(
            engine.as_ref(),
            &workload,
            phase,
            &RunOptions::threads(threads),
            &NoProgress,
        );
        assert!(report.passed(), "{config:?}: {}", report.to_human());
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
    let engine = open_engine("rocksdb", dir.path(), &plain()).unwrap();
    // The version the opened library writes in its log is the bundled
    // source's, 10 or later (no system RocksDB was linked).
    assert_eq!(engine.name(), format!("rocksdb {ROCKSDB_VERSION}"));
    let major: u32 = ROCKSDB_VERSION.split('.').next().unwrap().parse().unwrap();
    assert!(major >= 10, "{ROCKSDB_VERSION}");
    assert!(peer_versions().starts_with(&format!("rocksdb {ROCKSDB_VERSION} ")));
}

/// No option sets RocksDB's compression: with only LZ4 compiled in, its
/// default is LZ4 (siftdb's), as the options it writes to its LOG say.
#[test]
fn rocksdb_compresses_with_lz4_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let _engine = open_engine("rocksdb", dir.path(), &plain()).unwrap();
    let log = std::fs::read_to_string(dir.path().join("LOG")).unwrap();
    let compression: Vec<&str> = log
        .lines()
        .filter_map(|line| line.split_once("Options.compression: "))
        .map(|(_, kind)| kind.trim())
        .collect();
    assert!(!compression.is_empty(), "no Options.compression in LOG");
    assert!(
        compression.iter().all(|&kind| kind == "LZ4"),
        "{compression:?}"
    );
}

#[test]
fn unknown_engines_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let err = open_engine("leveldb", dir.path(), &plain()).err().unwrap();
    assert!(err.contains("leveldb"), "{err}");
}

#[test]
fn every_engine_runs_fewer_ops_than_keys_and_reads_the_same_keys() {
    for name in ["siftdb", "rocksdb", "fjall"] {
        let dir = tempfile::tempdir().unwrap();
        let engine = open_engine(name, dir.path(), &transactional()).unwrap();
        let workload = Workload::with_ops(5_000, 700).unwrap();
        // txn-locking needs RocksDB opened as its locking TransactionDB
        // (checked below) and fjall has no locking transactions.
        for phase in Phase::ALL
            .into_iter()
            .filter(|&phase| name == "siftdb" || phase != Phase::TxnLocking)
        {
            let report = run_phase(
                engine.as_ref(),
                &workload,
                phase,
                &RunOptions::default(),
                &NoProgress,
            );
            assert!(report.passed(), "{name}: {}", report.to_human());
            assert_eq!(report.ops, workload.phase_ops(phase), "{name} {phase}");
        }
    }
    let dir = tempfile::tempdir().unwrap();
    let locking = PeerConfig {
        locking: true,
        ..transactional()
    };
    let engine = open_engine("rocksdb", dir.path(), &locking).unwrap();
    let workload = Workload::with_ops(5_000, 700).unwrap();
    for phase in [Phase::FillRandom, Phase::TxnLocking] {
        let report = run_phase(
            engine.as_ref(),
            &workload,
            phase,
            &RunOptions::default(),
            &NoProgress,
        );
        assert!(report.passed(), "rocksdb: {}", report.to_human());
        assert_eq!(report.ops, workload.phase_ops(phase), "rocksdb {phase}");
    }
}

#[test]
fn the_binary_plots_every_engine_side_by_side() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("peers.svg");
    let json = dir.path().join("peers.jsonl");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_siftdb-peers"))
        .args([
            "--n",
            "3k",
            "--ops",
            "500",
            "--engines",
            "siftdb,memory",
            "--plot",
        ])
        .arg(&svg)
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let picture = std::fs::read_to_string(&svg).unwrap();
    assert!(picture.starts_with("<svg") && picture.trim_end().ends_with("</svg>"));
    for wanted in [
        "\nmemory\n",
        "\nsiftdb 0.1.0\n",
        "N = 3,000, 500 ops per read phase (50 scans)",
    ] {
        assert!(picture.contains(wanted), "{wanted}");
    }
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&json)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines[0]["kind"], "run");
    assert_eq!(lines[0]["ops"], 500);
    assert_eq!(lines[0]["cold"], false);
    let siftdb_readrandom = lines
        .iter()
        .find(|l| {
            l["kind"] == "phase" && l["phase"] == "readrandom" && l["engine"] == "siftdb 0.1.0"
        })
        .unwrap();
    assert_eq!(siftdb_readrandom["ops"], 500);
    assert!(siftdb_readrandom["blocks_read_from_file_per_get"]
        .as_f64()
        .is_some());
    assert!(siftdb_readrandom["peak_rss_bytes"].as_u64().unwrap() > 0);
    assert!(
        stdout.contains("data blocks from files per get"),
        "{stdout}"
    );
}

/// The peers' transactions lose no update: threads that all change the
/// same two keys through `read_modify_write` leave each key's first byte
/// advanced once per committed transaction (conflicts retried on the way).
#[test]
fn peer_transactions_lose_no_update() {
    const THREADS: u8 = 4;
    const PER_THREAD: u8 = 50;
    for name in ["siftdb", "rocksdb", "fjall"] {
        let dir = tempfile::tempdir().unwrap();
        let engine = open_engine(name, dir.path(), &transactional()).unwrap();
        engine.put(b"a", b"\x00a").unwrap();
        engine.put(b"b", b"\x00b").unwrap();
        let conflicts: u64 = std::thread::scope(|s| {
            let handles: Vec<_> = (0..THREADS)
                .map(|_| {
                    s.spawn(|| {
                        (0..PER_THREAD)
                            .map(|_| engine.read_modify_write(b"a", b"b").unwrap())
                            .sum::<u64>()
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).sum()
        });
        for (key, rest) in [(&b"a"[..], b'a'), (&b"b"[..], b'b')] {
            let mut value = Vec::new();
            assert!(engine.get(key, &mut value).unwrap(), "{name}");
            assert_eq!(
                value,
                [THREADS * PER_THREAD, rest],
                "{name}: {conflicts} conflicts"
            );
        }
        let plain_dir = tempfile::tempdir().unwrap();
        let plain_engine = open_engine(name, plain_dir.path(), &plain()).unwrap();
        let refused = plain_engine.read_modify_write(b"a", b"b");
        assert_eq!(refused.is_err(), name != "siftdb", "{name}");
    }
}

/// The YCSB phases of one workload, every read checked.
fn passes_ycsb(name: &str, config: &PeerConfig, workload: &Workload, threads: usize) {
    let dir = tempfile::tempdir().unwrap();
    let engine = open_engine(name, dir.path(), config).unwrap();
    let mut reports = Vec::new();
    for phase in Phase::YCSB {
        let report = run_phase(
            engine.as_ref(),
            workload,
            phase,
            &RunOptions::threads(threads),
            &NoProgress,
        );
        assert!(report.passed(), "{name} {config:?}: {}", report.to_human());
        reports.push(report);
    }
    let end = siftdb_bench::ycsb_amplification(
        engine.as_ref(),
        dir.path(),
        workload,
        &reports,
        "at the end",
        true,
    )
    .unwrap();
    assert!(end.disk_bytes > 0, "{}", end.to_line());
    assert!(
        end.write_amplification().unwrap() > 0.3,
        "{}",
        end.to_line()
    );
}

#[test]
fn every_engine_passes_the_ycsb_phases_at_256_and_1000_bytes() {
    for name in ["siftdb", "rocksdb", "fjall"] {
        for len in [256, 1000] {
            let workload = Workload::with_ops(2_000, 1_000)
                .unwrap()
                .with_value_len(len)
                .unwrap();
            passes_ycsb(name, &plain(), &workload, 2);
        }
    }
}

/// `--blob-threshold` reaches RocksDB (its LOG lists the options it runs
/// with), `--compression zstd-bottom` and `--blob-threshold` reach fjall
/// (its settings say what it does with them) and siftdb, and each passes
/// YCSB at 16 KiB values with them; RocksDB's LOG shows zstd compiled in
/// and at the bottom.
#[test]
fn the_storage_choices_reach_every_engine() {
    let config = PeerConfig {
        compression: CompressionChoice::ZstdBottom,
        blob_threshold: Some(4096),
        ..plain()
    };
    let blobs_only = PeerConfig {
        blob_threshold: Some(4096),
        ..plain()
    };
    let workload = Workload::with_ops(300, 300)
        .unwrap()
        .with_value_len(16 << 10)
        .unwrap();
    passes_ycsb("rocksdb", &config, &workload, 2);
    passes_ycsb("fjall", &config, &workload, 2);
    passes_ycsb("siftdb", &config, &workload, 2);
    let dir = tempfile::tempdir().unwrap();
    let rocks = open_engine("rocksdb", dir.path(), &blobs_only).unwrap();
    let log = std::fs::read_to_string(dir.path().join("LOG")).unwrap();
    for wanted in [
        "Options.enable_blob_files: true",
        "Options.min_blob_size: 4096",
    ] {
        assert!(log.contains(wanted), "{wanted} not in LOG");
    }
    assert!(rocks.settings().iter().any(|(k, _)| k == "blob_files"));
    let dir = tempfile::tempdir().unwrap();
    drop(open_engine("rocksdb", dir.path(), &config).unwrap());
    let log = std::fs::read_to_string(dir.path().join("LOG")).unwrap();
    for wanted in ["kZSTD supported: 1", "Options.bottommost_compression: ZSTD"] {
        assert!(log.contains(wanted), "{wanted} not in LOG");
    }
    let dir = tempfile::tempdir().unwrap();
    let fjall = open_engine("fjall", dir.path(), &config).unwrap();
    let settings = format!("{:?}", fjall.settings());
    assert!(
        settings.contains("separation_threshold(4096)") && settings.contains("no zstd"),
        "{settings}"
    );
    let dir = tempfile::tempdir().unwrap();
    let siftdb = open_engine("siftdb", dir.path(), &config).unwrap();
    let settings = format!("{:?}", siftdb.settings());
    assert!(
        settings.contains("zstd(3)") && settings.contains("4096"),
        "{settings}"
    );
}

#[test]
fn the_binary_prints_ycsb_amplification_per_engine() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_siftdb-peers"))
        .args([
            "--n",
            "2k",
            "--ops",
            "500",
            "--engines",
            "siftdb,rocksdb,fjall",
            "--threads",
            "2",
            "--value-size",
            "256",
            "--phases",
            "ycsb-load,ycsb-a,ycsb-b,ycsb-c,ycsb-d,ycsb-e,ycsb-f",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("## Write and space amplification"),
        "{stdout}"
    );
    for engine in ["siftdb", "rocksdb", "fjall"] {
        assert!(
            stdout
                .lines()
                .any(|l| l.starts_with(&format!("| {engine}")) && l.contains("| at the end |")),
            "{engine}: {stdout}"
        );
    }
    assert!(stdout.contains("| ycsb-e |"), "{stdout}");
}
