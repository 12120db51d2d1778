//! The siftdb/peer ratios of one run.
//!
//! Owns: [`Ratio`] (siftdb's figure over a peer's, per phase), the markdown
//! tables a run prints, and the ratio JSON lines.
//! Must never: compare figures from different runs — ratios are computed
//! only between reports of the same process, the same phase and the same N.

use std::fmt::Write as _;

use serde_json::{json, Value};
use siftdb::workload::{group_digits, PhaseReport};

/// siftdb's figures over one peer's for one phase. A side that failed its
/// checks or has no figure gives `None`.
#[derive(Clone, Debug, PartialEq)]
pub struct Ratio {
    /// The phase's name.
    pub phase: &'static str,
    /// The peer's name.
    pub peer: String,
    /// siftdb ops/s ÷ peer ops/s: above 1, siftdb is faster.
    pub ops_per_sec: Option<f64>,
    /// fillrandom only: the same for the puts alone (flush and wait excluded).
    pub puts_ops_per_sec: Option<f64>,
    /// siftdb p50 ÷ peer p50: below 1, siftdb is faster.
    pub p50: Option<f64>,
    /// siftdb p99 ÷ peer p99: below 1, siftdb is faster.
    pub p99: Option<f64>,
}

fn divide(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 && a.is_finite() && b.is_finite() => Some(a / b),
        _ => None,
    }
}

impl Ratio {
    /// The ratio of `ours` (siftdb) to `theirs` (a peer) for one phase.
    pub fn between(ours: &PhaseReport, theirs: &PhaseReport) -> Ratio {
        let latency = |r: &PhaseReport, pick: fn(&siftdb::workload::Latency) -> f64| {
            if r.passed() {
                r.latency.as_ref().map(pick)
            } else {
                None
            }
        };
        Ratio {
            phase: ours.phase.name(),
            peer: theirs.engine.clone(),
            ops_per_sec: divide(ours.ops_per_sec(), theirs.ops_per_sec()),
            puts_ops_per_sec: divide(ours.puts_ops_per_sec(), theirs.puts_ops_per_sec()),
            p50: divide(
                latency(ours, |l| l.p50_us()),
                latency(theirs, |l| l.p50_us()),
            ),
            p99: divide(
                latency(ours, |l| l.p99_us()),
                latency(theirs, |l| l.p99_us()),
            ),
        }
    }

    /// One JSON object, `"kind": "ratio"`.
    pub fn to_json(&self, engine: &str) -> Value {
        json!({
            "kind": "ratio",
            "phase": self.phase,
            "engine": engine,
            "peer": self.peer,
            "ops_per_sec_ratio": self.ops_per_sec,
            "puts_ops_per_sec_ratio": self.puts_ops_per_sec,
            "p50_ratio": self.p50,
            "p99_ratio": self.p99,
        })
    }
}

/// Ratios of siftdb's report to every peer report of the same phase, in
/// phase order then peer order. `runs[e]` holds engine `e`'s reports.
pub fn ratios(ours: &[PhaseReport], peers: &[Vec<PhaseReport>]) -> Vec<Ratio> {
    let mut out = Vec::new();
    for mine in ours {
        for theirs in peers.iter().flatten().filter(|r| r.phase == mine.phase) {
            out.push(Ratio::between(mine, theirs));
        }
    }
    out
}

fn fmt_ratio(r: Option<f64>) -> String {
    r.map_or_else(|| "-".to_string(), |r| format!("{r:.2}"))
}

fn fmt_rate(r: Option<f64>) -> String {
    match r {
        Some(r) if r.is_finite() => group_digits(r.round() as u64),
        _ => "-".to_string(),
    }
}

fn fmt_us(r: &PhaseReport, pick: fn(&siftdb::workload::Latency) -> f64) -> String {
    match (&r.latency, r.passed()) {
        (Some(l), true) => format!("{:.2}", pick(l)),
        _ => "-".to_string(),
    }
}

/// Every engine's figures, one markdown row per phase and engine.
pub fn figures_table(runs: &[Vec<PhaseReport>]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "| phase | engine | ops/s | p50 µs | p99 µs | result |\n|---|---|---:|---:|---:|---|"
    );
    let phases: Vec<_> = runs.first().map_or(Vec::new(), |r| {
        r.iter().map(|report| report.phase).collect()
    });
    for phase in phases {
        for report in runs.iter().flatten().filter(|r| r.phase == phase) {
            let verdict = if report.passed() {
                "ok".to_string()
            } else {
                format!("FAILED ({} errors)", group_digits(report.errors.count))
            };
            let mut rate = fmt_rate(report.ops_per_sec());
            if let Some(puts) = report.puts_ops_per_sec() {
                let _ = write!(rate, " (puts alone {})", fmt_rate(Some(puts)));
            }
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} |",
                phase.name(),
                report.engine,
                rate,
                fmt_us(report, |l| l.p50_us()),
                fmt_us(report, |l| l.p99_us()),
                verdict
            );
        }
    }
    s
}

/// The ratios as a markdown table: one row per phase (fillrandom's puts
/// alone get a row of their own), three columns per peer.
pub fn ratio_table(ratios: &[Ratio]) -> String {
    let mut peers: Vec<&str> = Vec::new();
    for r in ratios {
        if !peers.contains(&r.peer.as_str()) {
            peers.push(&r.peer);
        }
    }
    let mut phases: Vec<&str> = Vec::new();
    for r in ratios {
        if !phases.contains(&r.phase) {
            phases.push(r.phase);
        }
    }
    let mut s = String::new();
    let _ = write!(s, "| phase |");
    for peer in &peers {
        let _ = write!(s, " ops/s ÷ {peer} | p50 ÷ {peer} | p99 ÷ {peer} |");
    }
    let _ = write!(s, "\n|---|");
    for _ in &peers {
        let _ = write!(s, "---:|---:|---:|");
    }
    let _ = writeln!(s);
    let find = |phase: &str, peer: &str| ratios.iter().find(|r| r.phase == phase && r.peer == peer);
    for phase in &phases {
        let _ = write!(s, "| {phase} |");
        for peer in &peers {
            let r = find(phase, peer);
            let _ = write!(
                s,
                " {} | {} | {} |",
                fmt_ratio(r.and_then(|r| r.ops_per_sec)),
                fmt_ratio(r.and_then(|r| r.p50)),
                fmt_ratio(r.and_then(|r| r.p99))
            );
        }
        let _ = writeln!(s);
        if peers
            .iter()
            .any(|peer| find(phase, peer).is_some_and(|r| r.puts_ops_per_sec.is_some()))
        {
            let _ = write!(s, "| {phase}, puts alone |");
            for peer in &peers {
                let r = find(phase, peer);
                let _ = write!(
                    s,
                    " {} | | |",
                    fmt_ratio(r.and_then(|r| r.puts_ops_per_sec))
                );
            }
            let _ = writeln!(s);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use siftdb::workload::{run_phase, MemoryEngine, NoProgress, Phase, RunOptions, Workload};

    fn run(engine: &MemoryEngine, workload: &Workload, phase: Phase) -> PhaseReport {
        run_phase(engine, workload, phase, &RunOptions::default(), &NoProgress)
    }

    #[test]
    fn ratios_pair_the_same_phase_and_divide_ours_by_theirs() {
        let workload = Workload::new(500).unwrap();
        let (a, b) = (MemoryEngine::new(), MemoryEngine::new());
        let ours = vec![
            run(&a, &workload, Phase::FillRandom),
            run(&a, &workload, Phase::ReadRandom),
        ];
        let mut theirs = vec![
            run(&b, &workload, Phase::FillRandom),
            run(&b, &workload, Phase::ReadRandom),
        ];
        theirs[1].engine = "peer".to_string();
        // Twice as long for the peer: siftdb is twice as fast.
        theirs[1].elapsed = ours[1].elapsed * 2;
        let rs = ratios(&ours, &[theirs]);
        assert_eq!(rs.len(), 2);
        assert_eq!(rs[0].phase, "fillrandom");
        assert!(rs[0].puts_ops_per_sec.is_some());
        assert_eq!(rs[1].peer, "peer");
        let r = rs[1].ops_per_sec.unwrap();
        assert!((r - 2.0).abs() < 1e-9, "{r}");
        assert!(rs[1].puts_ops_per_sec.is_none());
        let table = ratio_table(&rs);
        assert!(table.contains("| readrandom |"), "{table}");
        assert!(table.contains("2.00"), "{table}");
        assert!(table.contains("fillrandom, puts alone"), "{table}");
    }

    #[test]
    fn a_failed_phase_has_no_ratio() {
        let workload = Workload::new(200).unwrap();
        let engine = MemoryEngine::new();
        let ours = run(&engine, &workload, Phase::FillRandom);
        let mut theirs = ours.clone();
        theirs.errors.record("wrong value".to_string());
        let r = Ratio::between(&ours, &theirs);
        assert_eq!((r.ops_per_sec, r.p50, r.p99), (None, None, None));
        let table = figures_table(&[vec![ours], vec![theirs]]);
        assert!(table.contains("FAILED (1 errors)"), "{table}");
    }
}
