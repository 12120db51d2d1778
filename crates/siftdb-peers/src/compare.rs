//! The siftdb/peer ratios of one run.
//!
//! Owns: [`Measured`] (a phase report plus the process CPU time of the
//! phase), [`Ratio`] (siftdb's figure over a peer's, per phase), the
//! markdown tables a run prints, and the ratio JSON lines.
//! Must never: compare figures from different runs — ratios are computed
//! only between reports of the same process, the same phase and the same N.

use std::fmt::Write as _;

use serde_json::{json, Value};
use siftdb_bench::{fmt_mib, fmt_rate, group_digits, Latency, Phase, PhaseReport};

/// One phase on one engine: the harness's report and the CPU seconds the
/// whole process spent over it (all threads, background work included).
#[derive(Clone, Debug)]
pub struct Measured {
    /// What `run_phase` reported.
    pub report: PhaseReport,
    /// Process CPU seconds from just before to just after `run_phase`.
    pub cpu_seconds: Option<f64>,
}

impl Measured {
    /// CPU seconds, but only for a phase that passed its checks.
    pub fn checked_cpu_seconds(&self) -> Option<f64> {
        self.cpu_seconds.filter(|_| self.report.passed())
    }

    /// The report's JSON object with `"kind": "phase"` and the CPU seconds.
    pub fn to_json(&self) -> Value {
        let mut line = self.report.to_json();
        if let Some(object) = line.as_object_mut() {
            object.insert("kind".into(), json!("phase"));
            if self.report.passed() {
                object.insert("process_cpu_seconds".into(), json!(self.cpu_seconds));
            }
        }
        line
    }

    fn latency(&self, pick: fn(&Latency) -> f64) -> Option<f64> {
        if self.report.passed() {
            self.report.latency.as_ref().map(pick)
        } else {
            None
        }
    }
}

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
    /// siftdb process CPU seconds ÷ peer's for the same work: below 1,
    /// siftdb spends less CPU.
    pub cpu: Option<f64>,
}

fn divide(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 && a.is_finite() && b.is_finite() => Some(a / b),
        _ => None,
    }
}

impl Ratio {
    /// The ratio of `ours` (siftdb) to `theirs` (a peer) for one phase.
    pub fn between(ours: &Measured, theirs: &Measured) -> Ratio {
        Ratio {
            phase: ours.report.phase.name(),
            peer: theirs.report.engine.clone(),
            ops_per_sec: divide(ours.report.ops_per_sec(), theirs.report.ops_per_sec()),
            puts_ops_per_sec: divide(
                ours.report.puts_ops_per_sec(),
                theirs.report.puts_ops_per_sec(),
            ),
            p50: divide(
                ours.latency(Latency::p50_us),
                theirs.latency(Latency::p50_us),
            ),
            p99: divide(
                ours.latency(Latency::p99_us),
                theirs.latency(Latency::p99_us),
            ),
            cpu: divide(ours.checked_cpu_seconds(), theirs.checked_cpu_seconds()),
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
            "cpu_ratio": self.cpu,
        })
    }
}

/// Ratios of siftdb's phases to every peer's phase of the same name, in
/// phase order then peer order. `peers[e]` holds peer `e`'s phases.
pub fn ratios(ours: &[Measured], peers: &[Vec<Measured>]) -> Vec<Ratio> {
    let mut out = Vec::new();
    for mine in ours {
        for theirs in peers
            .iter()
            .flatten()
            .filter(|m| m.report.phase == mine.report.phase)
        {
            out.push(Ratio::between(mine, theirs));
        }
    }
    out
}

/// One figure per phase from an engine's rounds (`(round, measured)`), in
/// the order the phases first appear: the round with the median ops/s (the
/// lower of the two middle ones for an even count), or the first round that
/// failed its checks, so a failure is never hidden behind a median.
pub fn median_rounds(rounds: &[(usize, Measured)]) -> Vec<Measured> {
    let mut phases: Vec<Phase> = Vec::new();
    for (_, m) in rounds {
        if !phases.contains(&m.report.phase) {
            phases.push(m.report.phase);
        }
    }
    let mut out = Vec::with_capacity(phases.len());
    for phase in phases {
        let mut of_phase: Vec<&Measured> = rounds
            .iter()
            .map(|(_, m)| m)
            .filter(|m| m.report.phase == phase)
            .collect();
        if let Some(failed) = of_phase.iter().find(|m| !m.report.passed()) {
            out.push((*failed).clone());
            continue;
        }
        of_phase.sort_by(|a, b| {
            let rate = |m: &Measured| m.report.ops_per_sec().unwrap_or(0.0);
            rate(a).total_cmp(&rate(b))
        });
        if let Some(median) = of_phase.get(of_phase.len().saturating_sub(1) / 2) {
            out.push((*median).clone());
        }
    }
    out
}

/// siftdb's ops/s ÷ the best peer's, per phase and round: one markdown row
/// per phase with each round's ratio (a round where a side has no passed
/// figure shows `-`), the median and the lowest of them.
pub fn round_ratio_table(ours: &[(usize, Measured)], peers: &[Vec<(usize, Measured)>]) -> String {
    let rounds = ours.iter().map(|(r, _)| r + 1).max().unwrap_or(0);
    let mut s = String::new();
    let _ = write!(s, "| phase |");
    for r in 1..=rounds {
        let _ = write!(s, " round {r} |");
    }
    let _ = writeln!(s, " median | lowest |");
    let _ = write!(s, "|---|");
    for _ in 0..rounds {
        let _ = write!(s, "---:|");
    }
    let _ = writeln!(s, "---:|---:|");
    let rate = |m: &Measured| m.report.ops_per_sec().filter(|_| m.report.passed());
    for mine in median_rounds(ours) {
        let phase = mine.report.phase;
        let per_round: Vec<Option<f64>> = (0..rounds)
            .map(|round| {
                let at = |m: &(usize, Measured)| m.0 == round && m.1.report.phase == phase;
                let ours = ours.iter().find(|m| at(m)).and_then(|(_, m)| rate(m));
                let best = peers
                    .iter()
                    .flatten()
                    .filter(|m| at(m))
                    .filter_map(|(_, m)| rate(m))
                    .reduce(f64::max);
                divide(ours, best)
            })
            .collect();
        let mut seen: Vec<f64> = per_round.iter().flatten().copied().collect();
        if seen.is_empty() {
            continue;
        }
        seen.sort_by(f64::total_cmp);
        let _ = write!(s, "| {} |", phase.name());
        for r in &per_round {
            let _ = write!(s, " {} |", fmt_ratio(*r));
        }
        let median = seen.get(seen.len().saturating_sub(1) / 2).copied();
        let _ = writeln!(
            s,
            " {} | {} |",
            fmt_ratio(median),
            fmt_ratio(seen.first().copied())
        );
    }
    s
}

fn fmt_ratio(r: Option<f64>) -> String {
    r.map_or_else(|| "-".to_string(), |r| format!("{r:.2}"))
}

fn fmt_float(r: Option<f64>) -> String {
    r.map_or_else(|| "-".to_string(), |r| format!("{r:.2}"))
}

/// Every engine's figures, one markdown row per phase and engine: ops/s,
/// latency, CPU, data blocks read from files per get (engines that count
/// them: siftdb), the process's peak resident memory over the phase, for
/// fillrandom the bytes the process wrote per byte put (log and tables:
/// the same measure for every engine) and the seconds writers stalled
/// (engines that count them: siftdb, RocksDB), and the verdict (with a txn
/// phase's conflicts per committed transaction, every engine's counted by
/// the runner alike).
pub fn figures_table(runs: &[Vec<Measured>]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "| phase | engine | ops/s | p50 µs | p99 µs | CPU s | data blocks from files per get | peak RSS | write amp | stalled s | result |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    );
    let phases: Vec<_> = runs
        .first()
        .map_or(Vec::new(), |r| r.iter().map(|m| m.report.phase).collect());
    for phase in phases {
        for m in runs.iter().flatten().filter(|m| m.report.phase == phase) {
            let report = &m.report;
            let verdict = if report.passed() {
                match report.conflicts_per_txn() {
                    Some(rate) => format!("ok, {rate:.4} conflicts per committed txn"),
                    None => "ok".to_string(),
                }
            } else {
                format!("FAILED ({} errors)", group_digits(report.errors.count))
            };
            let mut rate = fmt_rate(report.ops_per_sec());
            if let Some(puts) = report.puts_ops_per_sec() {
                let _ = write!(rate, " (puts alone {})", fmt_rate(Some(puts)));
            }
            let blocks = report
                .blocks_read_per_get()
                .map_or_else(|| "-".to_string(), |b| format!("{b:.3}"));
            let peak = report
                .peak_rss_bytes
                .map_or_else(|| "-".to_string(), fmt_mib);
            let amplification = report
                .write_amplification()
                .map_or_else(|| "-".to_string(), |a| format!("{a:.2}"));
            let stalled = report
                .stall_seconds()
                .filter(|_| report.phase == Phase::FillRandom)
                .map_or_else(|| "-".to_string(), |t| format!("{t:.2}"));
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} | {} | {blocks} | {peak} | {amplification} | {stalled} | {} |",
                phase.name(),
                report.engine,
                rate,
                fmt_float(m.latency(Latency::p50_us)),
                fmt_float(m.latency(Latency::p99_us)),
                fmt_float(m.checked_cpu_seconds()),
                verdict
            );
        }
    }
    s
}

/// The ratios as a markdown table: one row per phase (fillrandom's puts
/// alone get a row of their own), four columns per peer.
pub fn ratio_table(ratios: &[Ratio]) -> String {
    let mut peers: Vec<&str> = Vec::new();
    let mut phases: Vec<&str> = Vec::new();
    for r in ratios {
        if !peers.contains(&r.peer.as_str()) {
            peers.push(&r.peer);
        }
        if !phases.contains(&r.phase) {
            phases.push(r.phase);
        }
    }
    let mut s = String::new();
    let _ = write!(s, "| phase |");
    for peer in &peers {
        // "rocksdb 11.8.1" heads its columns as "rocksdb": the figures
        // table names the versions.
        let short = peer.split_whitespace().next().unwrap_or(peer);
        let _ = write!(
            s,
            " ops/s ÷ {short} | p50 ÷ {short} | p99 ÷ {short} | CPU ÷ {short} |"
        );
    }
    let _ = write!(s, "\n|---|");
    for _ in &peers {
        let _ = write!(s, "---:|---:|---:|---:|");
    }
    let _ = writeln!(s);
    let find = |phase: &str, peer: &str| ratios.iter().find(|r| r.phase == phase && r.peer == peer);
    for phase in &phases {
        let _ = write!(s, "| {phase} |");
        for peer in &peers {
            let r = find(phase, peer);
            let _ = write!(
                s,
                " {} | {} | {} | {} |",
                fmt_ratio(r.and_then(|r| r.ops_per_sec)),
                fmt_ratio(r.and_then(|r| r.p50)),
                fmt_ratio(r.and_then(|r| r.p99)),
                fmt_ratio(r.and_then(|r| r.cpu))
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
                    " {} | | | |",
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
    use siftdb_bench::{run_phase, MemoryEngine, NoProgress, Phase, RunOptions, Workload};

    fn run(engine: &MemoryEngine, workload: &Workload, phase: Phase, cpu: f64) -> Measured {
        Measured {
            report: run_phase(engine, workload, phase, &RunOptions::default(), &NoProgress),
            cpu_seconds: Some(cpu),
        }
    }

    #[test]
    fn ratios_pair_the_same_phase_and_divide_ours_by_theirs() {
        let workload = Workload::new(500).unwrap();
        let (a, b) = (MemoryEngine::new(), MemoryEngine::new());
        let ours = vec![
            run(&a, &workload, Phase::FillRandom, 1.0),
            run(&a, &workload, Phase::ReadRandom, 1.0),
        ];
        let mut theirs = vec![
            run(&b, &workload, Phase::FillRandom, 2.0),
            run(&b, &workload, Phase::ReadRandom, 4.0),
        ];
        for m in &mut theirs {
            m.report.engine = "peer 1.0".to_string();
        }
        // Twice as long for the peer: siftdb is twice as fast.
        theirs[1].report.elapsed = ours[1].report.elapsed * 2;
        let rs = ratios(&ours, &[theirs]);
        assert_eq!(rs.len(), 2);
        assert_eq!(rs[0].phase, "fillrandom");
        assert!(rs[0].puts_ops_per_sec.is_some());
        assert_eq!(rs[0].cpu, Some(0.5));
        assert_eq!(rs[1].peer, "peer 1.0");
        let r = rs[1].ops_per_sec.unwrap();
        assert!((r - 2.0).abs() < 1e-9, "{r}");
        assert!(rs[1].puts_ops_per_sec.is_none());
        assert_eq!(rs[1].cpu, Some(0.25));
        let table = ratio_table(&rs);
        assert!(table.contains("| readrandom | 2.00 |"), "{table}");
        assert!(!table.contains("memory"), "{table}");
        assert!(table.contains("ops/s ÷ peer |"), "{table}");
        assert!(table.contains("fillrandom, puts alone"), "{table}");
    }

    #[test]
    fn rounds_give_the_median_round_and_a_ratio_per_round() {
        let workload = Workload::new(300).unwrap();
        let (a, b) = (MemoryEngine::new(), MemoryEngine::new());
        let fill = run(&a, &workload, Phase::FillRandom, 1.0);
        let read = run(&a, &workload, Phase::ReadRandom, 1.0);
        run(&b, &workload, Phase::FillRandom, 1.0);
        let theirs_read = run(&b, &workload, Phase::ReadRandom, 1.0);
        // siftdb's rounds take 1, 3 and 2 times the peer's one duration.
        let slowed = |m: &Measured, by: u32, engine: &str| {
            let mut m = m.clone();
            m.report.elapsed = theirs_read.report.elapsed * by;
            m.report.engine = engine.to_string();
            m
        };
        let ours = vec![
            (0, fill.clone()),
            (0, slowed(&read, 1, "siftdb")),
            (1, slowed(&read, 3, "siftdb")),
            (2, slowed(&read, 2, "siftdb")),
        ];
        let peer: Vec<(usize, Measured)> = (0..3)
            .map(|r| (r, slowed(&theirs_read, 1, "peer")))
            .collect();
        let medians = median_rounds(&ours);
        assert_eq!(medians.len(), 2);
        assert_eq!(medians[0].report.phase, Phase::FillRandom);
        assert_eq!(medians[1].report.elapsed, theirs_read.report.elapsed * 2);
        let table = round_ratio_table(&ours, &[peer]);
        assert!(
            table.contains("| readrandom | 1.00 | 0.33 | 0.50 | 0.50 | 0.33 |"),
            "{table}"
        );
        // A failed round is the phase's figure, whatever the others say.
        let mut failed = slowed(&read, 1, "siftdb");
        failed.report.errors.record("wrong value".to_string());
        let with_failure = vec![(0, slowed(&read, 2, "siftdb")), (1, failed)];
        assert!(!median_rounds(&with_failure)[0].report.passed());
    }

    #[test]
    fn a_failed_phase_has_no_ratio() {
        let workload = Workload::new(200).unwrap();
        let engine = MemoryEngine::new();
        let ours = run(&engine, &workload, Phase::FillRandom, 1.0);
        let mut theirs = ours.clone();
        theirs.report.errors.record("wrong value".to_string());
        let r = Ratio::between(&ours, &theirs);
        assert_eq!(
            (r.ops_per_sec, r.p50, r.p99, r.cpu),
            (None, None, None, None)
        );
        let table = figures_table(&[vec![ours], vec![theirs.clone()]]);
        assert!(table.contains("FAILED (1 errors)"), "{table}");
        assert!(theirs.to_json().get("process_cpu_seconds").is_none());
    }

    #[test]
    fn a_txn_phase_shows_its_conflict_rate() {
        let workload = Workload::new(200).unwrap();
        let engine = MemoryEngine::new();
        let fill = run(&engine, &workload, Phase::FillRandom, 1.0);
        let txn = run(&engine, &workload, Phase::Txn, 1.0);
        let table = figures_table(&[vec![fill, txn]]);
        assert!(
            table.contains("| ok, 0.0000 conflicts per committed txn |"),
            "{table}"
        );
        assert!(table.contains("| ok |"), "{table}");
    }
}
