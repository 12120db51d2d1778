//! The SVG pictures: well-formed XML, one bar per phase and engine in each
//! panel, every phase and engine named, a failed phase marked instead of
//! drawn; the false-positive curve carries its three series.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use siftdb_bench::plot::{fp_curve_svg, run_svg, write_svg};
use siftdb_bench::{
    measure_fp, run_phase, MemoryEngine, NoProgress, Phase, PhaseReport, RunOptions, Workload,
};

fn run(engine_name: &str, workload: &Workload) -> Vec<PhaseReport> {
    let engine = MemoryEngine::new();
    Phase::ALL
        .iter()
        .map(|&phase| {
            let mut r = run_phase(
                &engine,
                workload,
                phase,
                &RunOptions::default(),
                &NoProgress,
            );
            r.engine = engine_name.to_string();
            r
        })
        .collect()
}

/// Texts of every `<text>` element.
fn texts(doc: &roxmltree::Document<'_>) -> Vec<String> {
    doc.descendants()
        .filter(|n| n.has_tag_name("text"))
        .map(|n| n.text().unwrap_or_default().trim().to_string())
        .collect()
}

/// `<rect>`s filled with `colour` (e.g. `#1F77B4`).
fn rects_filled(doc: &roxmltree::Document<'_>, colour: &str) -> usize {
    doc.descendants()
        .filter(|n| {
            n.has_tag_name("rect")
                && n.attribute("fill")
                    .is_some_and(|f| f.eq_ignore_ascii_case(colour))
        })
        .count()
}

const SIFTDB_BLUE: &str = "#1F77B4";
const PEER_ORANGE: &str = "#FF7F0E";

#[test]
fn a_run_picture_has_a_bar_per_phase_and_engine_in_both_panels() {
    let workload = Workload::new(2000).unwrap();
    let runs = vec![
        run("siftdb 0.1.0", &workload),
        run("rocksdb 7.8.3", &workload),
    ];
    let svg = run_svg("siftdb bench, N = 2,000", &runs).unwrap();
    let doc = roxmltree::Document::parse(&svg).expect("well-formed SVG");
    assert!(doc.root_element().has_tag_name("svg"));
    let texts = texts(&doc);
    for phase in Phase::ALL {
        let count = texts.iter().filter(|t| t.as_str() == phase.name()).count();
        assert_eq!(count, 2, "{phase} is named under both panels: {texts:?}");
    }
    for wanted in ["siftdb 0.1.0", "rocksdb 7.8.3", "siftdb bench, N = 2,000"] {
        assert!(texts.iter().any(|t| t == wanted), "{wanted} in {texts:?}");
    }
    assert!(texts.iter().any(|t| t.contains("throughput")));
    assert!(texts.iter().any(|t| t.contains("p50") && t.contains("p99")));
    // A throughput bar and a p50 bar per phase, and a legend swatch, per engine.
    let bars = 2 * Phase::ALL.len() + 1;
    assert_eq!(rects_filled(&doc, SIFTDB_BLUE), bars);
    assert_eq!(rects_filled(&doc, PEER_ORANGE), bars);
    // A p99 whisker and its cap per phase and engine.
    let whiskers = doc
        .descendants()
        .filter(|n| {
            n.has_tag_name("polyline")
                && n.attribute("stroke")
                    .is_some_and(|s| s.eq_ignore_ascii_case("#000000"))
        })
        .count();
    assert!(whiskers >= 4 * Phase::ALL.len(), "{whiskers} whisker lines");
    assert!(svg.len() < 64 * 1024, "{} bytes", svg.len());
}

#[test]
fn a_failed_phase_is_marked_and_not_drawn() {
    let workload = Workload::new(500).unwrap();
    let mut reports = run("siftdb", &workload);
    reports[2]
        .errors
        .record("readmissing op 3: found a key never written".into());
    let svg = run_svg("one failure", &[reports]).unwrap();
    let doc = roxmltree::Document::parse(&svg).unwrap();
    // Every phase's two bars but the failed one's, and the legend swatch.
    assert_eq!(
        rects_filled(&doc, SIFTDB_BLUE),
        2 * (Phase::ALL.len() - 1) + 1
    );
    assert_eq!(
        texts(&doc)
            .iter()
            .filter(|t| t.as_str() == "failed")
            .count(),
        2
    );
}

#[test]
fn the_fp_curve_has_its_three_series_and_is_written_to_a_file() {
    let points: Vec<_> = [4.0, 8.0, 12.0]
        .iter()
        .map(|&b| measure_fp(5_000, b, 200_000).unwrap())
        .collect();
    let svg = fp_curve_svg("fp curve", &points).unwrap();
    let doc = roxmltree::Document::parse(&svg).expect("well-formed SVG");
    let texts = texts(&doc);
    for wanted in [
        "siftdb filter, measured",
        "blocked Bloom theory (512-bit lines)",
        "standard Bloom theory",
        "bits per key",
        "false-positive rate",
    ] {
        assert!(texts.iter().any(|t| t == wanted), "{wanted} in {texts:?}");
    }
    let circles = doc
        .descendants()
        .filter(|n| n.has_tag_name("circle"))
        .count();
    assert_eq!(circles, 3 + 1, "a point per setting and the legend's");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fp.svg");
    write_svg(&path, &svg).unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), svg);
    let err = write_svg(&dir.path().join("missing/fp.svg"), &svg).unwrap_err();
    assert!(err.contains("cannot write"), "{err}");
}
