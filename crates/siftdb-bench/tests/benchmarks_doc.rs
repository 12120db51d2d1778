//! docs/benchmarks.md is what its command renders from docs/results/, and a
//! run's `--json` lines render as a table that shows only what they hold.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use std::path::PathBuf;

use siftdb_bench::benchmarks_doc::{generated_line, render, render_jsonl, DOCUMENT, RESULTS_DIR};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A hand edit of docs/benchmarks.md, or a result file changed without the
/// command run again, fails here.
#[test]
fn the_committed_document_is_what_the_result_files_give() {
    let rendered = render(&root().join(RESULTS_DIR)).unwrap();
    let committed = std::fs::read_to_string(root().join(DOCUMENT)).unwrap();
    assert!(
        committed.starts_with(&generated_line()),
        "{DOCUMENT} does not say it is generated"
    );
    assert!(
        committed == rendered,
        "{DOCUMENT} differs from what {RESULTS_DIR}/ gives: run `cargo run -p siftdb-bench --bin benchmarks-md`"
    );
}

#[test]
fn a_runs_json_lines_render_as_a_table() {
    let lines = [
        r#"{"kind":"run","n":1000000,"threads":2,"engines":["siftdb","rocksdb"],"bits_per_key":10.0,"rocksdb_version":"11.8.1"}"#,
        r#"{"kind":"phase","phase":"readrandom","engine":"siftdb","passed":true,"errors":0,"ops_per_sec":527577.4,"p50_us":2.361,"p99_us":14.83}"#,
        r#"{"phase":"fillrandom","engine":"rocksdb","passed":false,"errors":3,"error_samples":["x"]}"#,
        r#"{"kind":"ratio","phase":"readrandom","ratio":1.4}"#,
    ]
    .join("\n");
    let section = render_jsonl("in-memory", &lines).unwrap();
    assert!(section.starts_with("## in-memory\n"), "{section}");
    assert!(
        section.contains("N = 1,000,000, 2 thread(s), engines: siftdb, rocksdb"),
        "{section}"
    );
    assert!(
        section.contains("| readrandom | siftdb | 527,577 | 2.36 | 14.83 | ok |"),
        "{section}"
    );
    // A failed phase shows no rate, only that it failed.
    assert!(
        section.contains("| fillrandom | rocksdb | - | - | - | FAILED: 3 errors |"),
        "{section}"
    );
    assert!(render_jsonl("bad", "{not json").is_err());
}

#[test]
fn a_result_file_nothing_renders_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("10-a.md"), "## A\n\nfigures\n").unwrap();
    let text = render(dir.path()).unwrap();
    assert_eq!(text, format!("{}\n\n## A\n\nfigures\n", generated_line()));
    std::fs::write(dir.path().join("20-b.csv"), "x").unwrap();
    assert!(render(dir.path()).is_err());
}
