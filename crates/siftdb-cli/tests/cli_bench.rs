//! `siftdb bench` end to end: the built binary, its JSON file, exit codes
//! and one-line errors.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use std::path::Path;
use std::process::{Command, Output};

fn siftdb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_siftdb"))
        .args(args)
        .output()
        .expect("the siftdb binary runs")
}

fn json_lines(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn bench_runs_every_phase_and_writes_one_json_object_per_phase() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("bench.json");
    let out = siftdb(&[
        "bench",
        "--engine",
        "memory",
        "--n",
        "2000",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let reports = json_lines(&json);
    let phases: Vec<&str> = reports
        .iter()
        .map(|r| r["phase"].as_str().unwrap())
        .collect();
    assert_eq!(
        phases,
        [
            "fillrandom",
            "readrandom",
            "readmissing",
            "readhot",
            "seekrandom",
            "seekrandom-rev",
            "seekprefix",
            "seekempty",
            "mixed",
            "deleterange",
        ]
    );
    for r in &reports {
        assert_eq!(r["errors"], 0, "{r}");
        assert_eq!(r["passed"], true, "{r}");
        assert_eq!(r["engine"], "memory");
        assert_eq!(r["n"], 2000);
        assert!(r["ops_per_sec"].as_f64().unwrap() > 0.0, "{r}");
        assert!(
            r["p50_us"].as_f64().unwrap() <= r["p99_us"].as_f64().unwrap(),
            "{r}"
        );
        assert!(r["counters"].is_object(), "{r}");
    }
    assert_eq!(reports[4]["ops"], 200);
    assert!(reports[0]["puts_ops_per_sec"].as_f64().unwrap() > 0.0);
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("mixed") && stdout.contains("ok"),
        "{stdout}"
    );
    // stderr is not a terminal here: no progress bar.
    assert!(out.stderr.is_empty(), "{}", text(&out.stderr));
}

#[test]
fn compare_threads_runs_each_read_phase_twice_per_round_and_prints_the_ratios() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("bench.json");
    let flags = "bench --engine memory --n 2000 --phases fillrandom,readrandom,readmissing \
                 --compare-threads 2 --rounds 2 --json";
    let mut args: Vec<&str> = flags.split_whitespace().collect();
    args.push(json.to_str().unwrap());
    let out = siftdb(&args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let runs: Vec<(String, u64)> = json_lines(&json)
        .iter()
        .map(|r| {
            (
                r["phase"].as_str().unwrap().to_string(),
                r["threads"].as_u64().unwrap(),
            )
        })
        .collect();
    let expected: Vec<(String, u64)> = [
        ("fillrandom", 1),
        ("readrandom", 1),
        ("readrandom", 2),
        ("readrandom", 1),
        ("readrandom", 2),
        ("readmissing", 1),
        ("readmissing", 2),
        ("readmissing", 1),
        ("readmissing", 2),
    ]
    .iter()
    .map(|(p, t)| (p.to_string(), *t))
    .collect();
    assert_eq!(runs, expected);
    let stdout = text(&out.stdout);
    assert!(stdout.contains("thread scaling"), "{stdout}");
    assert_eq!(stdout.matches("round 2:").count(), 2, "{stdout}");
}

#[test]
fn a_phase_that_fails_its_checks_exits_non_zero_and_reports_no_figures() {
    // Nothing loaded: every get of a present key misses.
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("bench.json");
    let out = siftdb(&[
        "bench",
        "--engine",
        "memory",
        "--n",
        "100",
        "--phases",
        "readrandom,readmissing",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let reports = json_lines(&json);
    assert_eq!(reports[0]["phase"], "readrandom");
    assert_eq!(reports[0]["passed"], false);
    assert_eq!(reports[0]["errors"], 100);
    assert!(reports[0].get("ops_per_sec").is_none());
    assert_eq!(reports[1]["passed"], true);
    let stdout = text(&out.stdout);
    assert!(stdout.contains("FAILED"), "{stdout}");
    assert!(stdout.contains("found nothing"), "{stdout}");
    assert!(!text(&out.stderr).contains("panicked"));
}

#[test]
fn bad_arguments_are_one_line_errors_not_panics() {
    let cases: &[&[&str]] = &[
        &[
            "bench",
            "--engine",
            "memory",
            "--phases",
            "mixed,readrandom",
        ],
        &["bench", "--engine", "memory", "--phases", "readall"],
        &["bench", "--engine", "nosuchengine", "--n", "10"],
        &["bench", "--engine", "memory", "--n", "0"],
        &["bench", "--engine", "memory", "--threads", "0"],
    ];
    for args in cases {
        let out = siftdb(args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert!(stderr.contains("error"), "{args:?}: {stderr}");
    }
    let out = siftdb(&[
        "bench",
        "--engine",
        "memory",
        "--phases",
        "mixed,readrandom",
    ]);
    let stderr = text(&out.stderr);
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.contains("readrandom comes after mixed"), "{stderr}");
}

#[test]
fn a_given_directory_must_be_empty_and_is_left_in_place() {
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("db");
    let args = ["bench", "--engine", "memory", "--n", "50", "--dir"];
    let out = siftdb(&[&args[..], &[dir.to_str().unwrap()]].concat());
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(dir.is_dir());
    std::fs::write(dir.join("leftover"), b"x").unwrap();
    let out = siftdb(&[&args[..], &[dir.to_str().unwrap()]].concat());
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("not empty"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn keep_leaves_the_temporary_directory_and_prints_it() {
    let out = siftdb(&["bench", "--engine", "memory", "--n", "50", "--keep"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let kept = stdout
        .lines()
        .find_map(|l| l.strip_prefix("database directory: "))
        .unwrap_or_else(|| panic!("no kept directory in {stdout}"));
    assert!(Path::new(kept).is_dir());
    std::fs::remove_dir_all(kept).unwrap();
}

#[test]
fn ops_sets_the_operations_of_every_read_phase() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("bench.json");
    let out = siftdb(&[
        "bench",
        "--engine",
        "memory",
        "--n",
        "2k",
        "--ops",
        "300",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let ops: Vec<(String, u64, u64)> = json_lines(&json)
        .iter()
        .map(|r| {
            assert_eq!(r["passed"], true, "{r}");
            assert_eq!(r["n"], 2000);
            (
                r["phase"].as_str().unwrap().to_string(),
                r["ops"].as_u64().unwrap(),
                r["reads"].as_u64().unwrap(),
            )
        })
        .collect();
    let expected = [
        ("fillrandom", 2000, 0),
        ("readrandom", 300, 300),
        ("readmissing", 300, 300),
        ("readhot", 300, 300),
        ("seekrandom", 30, 30),
        ("seekrandom-rev", 30, 30),
        ("seekprefix", 30, 30),
        ("seekempty", 300, 300),
        ("mixed", 300, 285),
        ("deleterange", 300, 300),
    ];
    let expected: Vec<(String, u64, u64)> = expected
        .iter()
        .map(|(p, o, r)| (p.to_string(), *o, *r))
        .collect();
    assert_eq!(ops, expected);
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("N = 2,000, 300 ops per read phase (30 scans)"),
        "{stdout}"
    );
}

#[test]
fn a_single_key_still_runs_one_scan() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("bench.json");
    let out = siftdb(&[
        "bench",
        "--engine",
        "memory",
        "--n",
        "1",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let reports = json_lines(&json);
    assert_eq!(reports[4]["phase"], "seekrandom");
    assert_eq!(reports[4]["ops"], 1);
    assert!(reports.iter().all(|r| r["ops"] == 1 && r["passed"] == true));
}

#[test]
fn sizes_beyond_the_machine_are_one_line_errors_before_any_work() {
    for args in [
        &["bench", "--n", "100000000000"][..],
        &["bench", "--n", "100G"],
        &["bench", "--engine", "memory", "--n", "10", "--ops", "1000G"],
    ] {
        let out = siftdb(args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(
            stderr.contains("more than this machine's") && stderr.contains("of memory"),
            "{args:?}: {stderr}"
        );
        assert!(out.stdout.is_empty(), "{args:?}: no run started");
    }
    for bad in ["1.5M", "0x10", "-1"] {
        let flag = format!("--ops={bad}");
        let out = siftdb(&["bench", "--engine", "memory", &flag]);
        assert_eq!(out.status.code(), Some(2), "{bad}");
        assert!(text(&out.stderr).contains("not a count"), "{bad}");
    }
    let out = siftdb(&["bench", "--engine", "memory", "--n", "10", "--ops", "0"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("operations per read phase"));
}

#[test]
fn plot_writes_an_svg_with_every_phase() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("bench.svg");
    let out = siftdb(&[
        "bench",
        "--engine",
        "memory",
        "--n",
        "3000",
        "--plot",
        svg.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let picture = std::fs::read_to_string(&svg).unwrap();
    assert!(picture.starts_with("<svg") && picture.trim_end().ends_with("</svg>"));
    for wanted in [
        "fillrandom",
        "seekrandom",
        "mixed",
        "\nmemory\n",
        "siftdb bench: memory, N = 3,000, 1 thread",
    ] {
        assert!(picture.contains(wanted), "{wanted}");
    }
    assert!(text(&out.stdout).contains("plot: "));
    // A plot path that cannot be written fails before the run.
    let out = siftdb(&[
        "bench",
        "--engine",
        "memory",
        "--n",
        "3000",
        "--plot",
        dir.path().join("missing/bench.svg").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("cannot create"));
    assert!(out.stdout.is_empty());
}

#[test]
fn help_cites_the_workloads_at_their_committed_path() {
    let cited = "crates/siftdb-bench/WORKLOADS.md";
    let out = siftdb(&["bench", "--help"]);
    assert!(text(&out.stdout).contains(cited));
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    assert!(root.join(cited).is_file());
    let readme = std::fs::read_to_string(root.join("README.md")).unwrap();
    assert!(readme.contains(cited));
}

/// `--device-baseline` reads the database's own files past the page cache
/// before the first read phase and ends the run with each read phase as a
/// fraction of the device; where the file system refuses O_DIRECT the run
/// fails and says so, rather than measure the page cache.
#[test]
fn device_baseline_measures_the_device_before_the_reads_or_says_why_not() {
    let parent = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let dir = parent.path().join("db");
    let out = siftdb(&[
        "bench",
        "--n",
        "20000",
        "--phases",
        "fillrandom,readrandom",
        "--device-baseline",
        "--dir",
        dir.to_str().unwrap(),
    ]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    if out.status.success() {
        for depth in [1, 4, 16, 32] {
            assert!(
                stdout.contains(&format!("{depth:>3} in flight: ")),
                "{stdout}"
            );
        }
        let device_at = stdout.find("device: random 4 KiB reads").unwrap();
        let reads_at = stdout.find("readrandom   siftdb").unwrap();
        assert!(
            device_at < reads_at,
            "the device is measured before the reads: {stdout}"
        );
        assert!(stdout.contains("of the device at 1 in flight"), "{stdout}");
    } else {
        assert!(stderr.contains("O_DIRECT"), "{stdout}{stderr}");
    }
}

/// The YCSB phases through `siftdb bench`: every read checked, a value
/// size of its own, write and space amplification after the load and at
/// the end; a YCSB workload listed before the load is refused.
#[test]
fn bench_runs_the_ycsb_phases_and_prints_amplification() {
    let out = siftdb(&[
        "bench",
        "--n",
        "2000",
        "--ops",
        "600",
        "--threads",
        "2",
        "--rounds",
        "2",
        "--value-size",
        "512",
        "--phases",
        "ycsb-load,ycsb-a,ycsb-b,ycsb-c,ycsb-d,ycsb-e,ycsb-f",
    ]);
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", text(&out.stderr));
    for wanted in [
        "after ycsb-load: write amplification",
        "at the end: write amplification",
        "space amplification",
    ] {
        assert!(stdout.contains(wanted), "{wanted}: {stdout}");
    }
    // ycsb-c alone runs each round; the workloads that write run once.
    let rows = |phase: &str| {
        stdout
            .lines()
            .filter(|l| l.starts_with(&format!("{phase} ")) && l.ends_with("ok"))
            .count()
    };
    assert_eq!((rows("ycsb-a"), rows("ycsb-c")), (1, 2), "{stdout}");
    let out = siftdb(&["bench", "--phases", "ycsb-a,ycsb-load"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("ycsb-load comes after ycsb-a"));
}
