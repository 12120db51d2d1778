//! What a phase measured, as JSON and as a human table.
//!
//! Owns: [`PhaseReport`], its JSON object (one per phase, the
//! machine-readable result) and its human rendering, plus
//! [`ErrorLog`] and the counter changes.
//! Must never: show a throughput or a latency for a phase that failed a
//! check — a wrong answer is an error, not a number.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use serde_json::{json, Value};

use super::data::{KEY_LEN, VALUE_LEN};
use super::engine::{Counters, BLOCKS_READ_FROM_FILE, WRITE_STALL_MICROS};
use super::latency::Latency;
use super::phase::{Phase, Workload};

/// Error messages a report keeps; the rest are only counted.
pub const MAX_ERROR_SAMPLES: usize = 10;

/// Failed operations of a phase: how many, and the first few messages.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ErrorLog {
    /// Operations that failed a check or returned an engine error.
    pub count: u64,
    /// The first [`MAX_ERROR_SAMPLES`] messages, in the order seen.
    pub samples: Vec<String>,
}

impl ErrorLog {
    /// Records one failure.
    pub fn record(&mut self, message: String) {
        self.count += 1;
        if self.samples.len() < MAX_ERROR_SAMPLES {
            self.samples.push(message);
        }
    }

    /// Adds another worker's failures after this one's.
    pub fn merge(&mut self, other: ErrorLog) {
        self.count += other.count;
        let room = MAX_ERROR_SAMPLES.saturating_sub(self.samples.len());
        self.samples.extend(other.samples.into_iter().take(room));
    }

    /// True when nothing failed.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
}

/// How one engine counter moved over a phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CounterChange {
    /// End value minus start value (negative for a gauge that fell).
    pub delta: i64,
    /// The value when the phase ended.
    pub end: u64,
}

/// The counter under which a txn phase reports the conflicts its
/// transactions met and retried (the harness's own count, for every engine).
pub const TXN_CONFLICTS: &str = "txn_conflicts";

/// The counter under which the txn-locking phase reports the lock waits
/// refused as deadlocks (each transaction rolled back and run again).
pub const TXN_DEADLOCKS: &str = "txn_deadlocks";

/// The counter under which the txn-locking phase reports the lock waits
/// that timed out (each transaction rolled back and run again).
pub const TXN_LOCK_TIMEOUTS: &str = "txn_lock_timeouts";

/// Counter changes between two snapshots; a counter missing from `before`
/// started at 0.
pub fn counter_changes(before: &Counters, after: &Counters) -> BTreeMap<String, CounterChange> {
    after
        .iter()
        .map(|(name, &end)| {
            let start = before.get(name).copied().unwrap_or(0);
            let delta = i64::try_from(i128::from(end) - i128::from(start)).unwrap_or(i64::MAX);
            (name.clone(), CounterChange { delta, end })
        })
        .collect()
}

/// The outcome of one phase on one engine.
#[derive(Clone, Debug)]
pub struct PhaseReport {
    /// Which phase.
    pub phase: Phase,
    /// The engine's name.
    pub engine: String,
    /// The engine's non-default settings.
    pub settings: Vec<(String, String)>,
    /// Number of present keys.
    pub n: u64,
    /// Operations performed (scans count one each).
    pub ops: u64,
    /// Gets or scans among them (mixed's puts and fillrandom's excluded).
    pub reads: u64,
    /// Threads that shared the operations.
    pub threads: usize,
    /// True when the OS page cache was dropped just before the phase.
    pub cold: bool,
    /// Wall time of the whole phase; for fillrandom it includes the final
    /// flush and the wait for compactions.
    pub elapsed: Duration,
    /// fillrandom only: the wall time of the puts alone.
    pub puts_elapsed: Option<Duration>,
    /// Percentiles over the sampled operations (none without samples).
    pub latency: Option<Latency>,
    /// Failed operations.
    pub errors: ErrorLog,
    /// The engine's counters over the phase, if it keeps any.
    pub counters: Option<BTreeMap<String, CounterChange>>,
    /// The most memory the process had resident during the phase (`VmHWM`
    /// after a reset at the phase's start), where the kernel tells.
    pub peak_rss_bytes: Option<u64>,
    /// Bytes the process passed to write calls during the phase (`wchar`),
    /// where the kernel tells: logs, tables and manifests alike.
    pub bytes_written: Option<u64>,
    /// User plus system CPU seconds of the whole process (every thread,
    /// background work included) from just before the clock started to
    /// just after it stopped: the page-cache drop of a cold phase is not
    /// in it.
    pub cpu_seconds: Option<f64>,
    /// Bytes of keys and values the phase put (fillrandom and the YCSB
    /// phases), the divisor of write amplification.
    pub user_bytes_put: Option<u64>,
}

fn per_second(ops: u64, time: Duration) -> Option<f64> {
    let secs = time.as_secs_f64();
    (secs > 0.0).then(|| ops as f64 / secs)
}

impl PhaseReport {
    /// True when every check passed.
    pub fn passed(&self) -> bool {
        self.errors.is_empty()
    }

    /// Operations per second over the whole phase; `None` when it failed.
    pub fn ops_per_sec(&self) -> Option<f64> {
        if !self.passed() {
            return None;
        }
        per_second(self.ops, self.elapsed)
    }

    /// Data blocks the engine read from its files per get: the change of
    /// its [`BLOCKS_READ_FROM_FILE`] counter over the phase's gets
    /// ([`PhaseReport::reads`]). `None` for a phase without gets
    /// (fillrandom, and the scan phases: siftdb counts the blocks of
    /// lookups, not of scans), a failed phase, or an engine that does not
    /// count them.
    pub fn blocks_read_per_get(&self) -> Option<f64> {
        if !self.passed() || self.reads == 0 || self.phase.is_scan() {
            return None;
        }
        let change = self.counters.as_ref()?.get(BLOCKS_READ_FROM_FILE)?;
        Some(change.delta as f64 / self.reads as f64)
    }

    /// fillrandom and ycsb-load only: bytes the process wrote over the
    /// phase (its final flush and wait included) per byte of keys and
    /// values put — the write amplification of the log and the tree
    /// together.
    pub fn write_amplification(&self) -> Option<f64> {
        if !self.passed() || !self.phase.is_fill() || self.ops == 0 {
            return None;
        }
        let put = self
            .user_bytes_put
            .unwrap_or(self.ops * (KEY_LEN + VALUE_LEN) as u64);
        Some(self.bytes_written? as f64 / put.max(1) as f64)
    }

    /// Seconds writers stalled over the phase, from an engine that counts
    /// them (the counter [`WRITE_STALL_MICROS`]).
    pub fn stall_seconds(&self) -> Option<f64> {
        let change = self.counters.as_ref()?.get(WRITE_STALL_MICROS)?;
        Some(change.delta as f64 / 1e6)
    }

    /// fillrandom only: puts per second, the final flush excluded.
    pub fn puts_ops_per_sec(&self) -> Option<f64> {
        if !self.passed() {
            return None;
        }
        per_second(self.ops, self.puts_elapsed?)
    }

    /// The report as one JSON object. A failed phase carries its errors and
    /// no figure: no throughput, no latency, no counters.
    pub fn to_json(&self) -> Value {
        let settings: serde_json::Map<String, Value> = self
            .settings
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        let mut out = json!({
            "phase": self.phase.name(),
            "engine": self.engine,
            "settings": settings,
            "n": self.n,
            "ops": self.ops,
            "reads": self.reads,
            "threads": self.threads,
            "cold": self.cold,
            "passed": self.passed(),
            "errors": self.errors.count,
        });
        let Some(object) = out.as_object_mut() else {
            return out;
        };
        if !self.passed() {
            object.insert("error_samples".into(), json!(self.errors.samples));
            return out;
        }
        object.insert("seconds".into(), json!(self.elapsed.as_secs_f64()));
        object.insert("ops_per_sec".into(), json!(self.ops_per_sec()));
        if let Some(puts) = self.puts_elapsed {
            object.insert("puts_seconds".into(), json!(puts.as_secs_f64()));
            object.insert("puts_ops_per_sec".into(), json!(self.puts_ops_per_sec()));
        }
        object.insert(
            "latency_samples".into(),
            json!(self.latency.map_or(0, |l| l.samples)),
        );
        object.insert("p50_us".into(), json!(self.latency.map(|l| l.p50_us())));
        object.insert("p99_us".into(), json!(self.latency.map(|l| l.p99_us())));
        object.insert("peak_rss_bytes".into(), json!(self.peak_rss_bytes));
        object.insert("bytes_written".into(), json!(self.bytes_written));
        if let Some(amplification) = self.write_amplification() {
            object.insert("write_amplification".into(), json!(amplification));
        }
        if let Some(stalled) = self.stall_seconds() {
            object.insert("stall_seconds".into(), json!(stalled));
        }
        if let Some(blocks) = self.blocks_read_per_get() {
            object.insert("blocks_read_from_file_per_get".into(), json!(blocks));
        }
        if let Some(counters) = &self.counters {
            let deltas: serde_json::Map<String, Value> = counters
                .iter()
                .map(|(k, c)| (k.clone(), json!(c.delta)))
                .collect();
            let ends: serde_json::Map<String, Value> = counters
                .iter()
                .map(|(k, c)| (k.clone(), json!(c.end)))
                .collect();
            object.insert("counters".into(), Value::Object(deltas));
            object.insert("counters_end".into(), Value::Object(ends));
        }
        out
    }

    /// A few lines for a person: the figures (or the errors), then the
    /// counters with their change per operation.
    pub fn to_human(&self) -> String {
        let mut s = String::new();
        let _ = write!(
            s,
            "{:<12} {} {} ops, {} thread{}{}",
            self.phase.name(),
            self.engine,
            group_digits(self.ops),
            self.threads,
            if self.threads == 1 { "" } else { "s" },
            if self.cold {
                ", page cache dropped"
            } else {
                ""
            }
        );
        if !self.passed() {
            let _ = writeln!(s, ": FAILED, {} errors", group_digits(self.errors.count));
            for message in &self.errors.samples {
                let _ = writeln!(s, "    {message}");
            }
            if self.errors.count > self.errors.samples.len() as u64 {
                let _ = writeln!(
                    s,
                    "    ... and {} more",
                    group_digits(self.errors.count - self.errors.samples.len() as u64)
                );
            }
            return s;
        }
        let _ = writeln!(s);
        let _ = write!(
            s,
            "    {:>14} ops/s   {:.3} s",
            fmt_rate(self.ops_per_sec()),
            self.elapsed.as_secs_f64()
        );
        if let Some(puts) = self.puts_elapsed {
            let _ = write!(
                s,
                "   (puts alone: {} ops/s, {:.3} s)",
                fmt_rate(self.puts_ops_per_sec()),
                puts.as_secs_f64()
            );
        }
        let _ = writeln!(s);
        match self.latency {
            Some(l) => {
                let _ = writeln!(
                    s,
                    "    p50 {:.2} µs   p99 {:.2} µs   ({} samples)",
                    l.p50_us(),
                    l.p99_us(),
                    group_digits(l.samples)
                );
            }
            None => {
                let _ = writeln!(s, "    no latency samples");
            }
        }
        let mut memory = Vec::new();
        if let Some(peak) = self.peak_rss_bytes {
            memory.push(format!("peak RSS {}", fmt_mib(peak)));
        }
        if let Some(blocks) = self.blocks_read_per_get() {
            memory.push(format!("data blocks read from files {blocks:.3}/get"));
        }
        if let Some(written) = self.bytes_written {
            memory.push(format!("written {}", fmt_mib(written)));
        }
        if let Some(amplification) = self.write_amplification() {
            memory.push(format!("write amplification {amplification:.2}"));
        }
        if let Some(stalled) = self.stall_seconds() {
            memory.push(format!("stalled {stalled:.3} s"));
        }
        if !memory.is_empty() {
            let _ = writeln!(s, "    {}", memory.join("   "));
        }
        if let Some(counters) = &self.counters {
            for (name, c) in counters {
                let per_op = if self.ops > 0 {
                    format!("{:.3}/op", c.delta as f64 / self.ops as f64)
                } else {
                    String::new()
                };
                let sign = if c.delta < 0 { '-' } else { '+' };
                let delta = format!("{sign}{}", group_digits(c.delta.unsigned_abs()));
                let _ = writeln!(
                    s,
                    "    {name:<28} {delta:>14}  {per_op:>12}   now {}",
                    group_digits(c.end)
                );
            }
        }
        s
    }
}

impl PhaseReport {
    /// Conflicts met per committed transaction (txn phases only).
    pub fn conflicts_per_txn(&self) -> Option<f64> {
        let conflicts = self.counters.as_ref()?.get(TXN_CONFLICTS)?;
        (self.ops > 0).then(|| conflicts.end as f64 / self.ops as f64)
    }

    /// Deadlocks and lock timeouts met (txn-locking only).
    pub fn lock_retries(&self) -> Option<(u64, u64)> {
        let counters = self.counters.as_ref()?;
        let deadlocks = counters.get(TXN_DEADLOCKS)?.end;
        let timeouts = counters.get(TXN_LOCK_TIMEOUTS)?.end;
        Some((deadlocks, timeouts))
    }
}

/// One line per phase: ops/s, p50, p99, data blocks read from files per
/// get, peak resident memory, and the verdict (with the conflict rate of
/// a txn phase).
pub fn summary_table(reports: &[PhaseReport]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<12} {:<10} {:>14} {:>10} {:>10} {:>10} {:>10}  result",
        "phase", "engine", "ops/s", "p50 µs", "p99 µs", "blk/get", "peak RSS"
    );
    for r in reports {
        let (p50, p99) = match (r.passed(), r.latency) {
            (true, Some(l)) => (format!("{:.2}", l.p50_us()), format!("{:.2}", l.p99_us())),
            _ => ("-".to_string(), "-".to_string()),
        };
        let blocks = r
            .blocks_read_per_get()
            .map_or_else(|| "-".to_string(), |b| format!("{b:.3}"));
        let peak = r.peak_rss_bytes.map_or_else(|| "-".to_string(), fmt_mib);
        let verdict = if r.passed() {
            match (r.conflicts_per_txn(), r.lock_retries()) {
                (Some(rate), _) => format!("ok, {rate:.4} conflicts per committed txn"),
                (None, Some((deadlocks, timeouts))) => {
                    format!("ok, {deadlocks} deadlocks, {timeouts} lock timeouts retried")
                }
                (None, None) => "ok".to_string(),
            }
        } else {
            format!("FAILED ({} errors)", group_digits(r.errors.count))
        };
        let _ = writeln!(
            s,
            "{:<12} {:<10} {:>14} {:>10} {:>10} {blocks:>10} {peak:>10}  {verdict}",
            r.phase.name(),
            r.engine,
            fmt_rate(r.ops_per_sec()),
            p50,
            p99
        );
    }
    s
}

/// Bytes as MiB with one decimal, e.g. `123.4 MiB`.
pub fn fmt_mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / f64::from(1u32 << 20))
}

/// An ops/s figure with digit groups, or `-` when there is none.
pub fn fmt_rate(rate: Option<f64>) -> String {
    match rate {
        Some(r) if r.is_finite() => {
            #[expect(
                clippy::cast_possible_truncation,
                reason = "float-to-int casts saturate"
            )]
            let whole = r.round() as u64;
            group_digits(whole)
        }
        _ => "-".to_string(),
    }
}

/// A run in words, as headers and plot titles show it: N, M and the scans
/// when `--ops` differs from N, threads, and whether the page cache is
/// dropped before each read phase.
pub fn describe_run(workload: &Workload, threads: usize, cold: bool) -> String {
    let mut line = format!("N = {}", group_digits(workload.n()));
    if workload.ops() != workload.n() {
        line.push_str(&format!(
            ", {} ops per read phase ({} scans)",
            group_digits(workload.ops()),
            group_digits(workload.phase_ops(Phase::SeekRandom))
        ));
    }
    line.push_str(&format!(
        ", {threads} thread{}",
        if threads == 1 { "" } else { "s" }
    ));
    if cold {
        line.push_str(", page cache dropped before each read phase");
    }
    line
}

/// `1234567` as `1,234,567`.
pub fn group_digits(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(errors: ErrorLog) -> PhaseReport {
        PhaseReport {
            phase: Phase::FillRandom,
            engine: "memory".into(),
            settings: vec![("bloom_bits_per_key".into(), "12".into())],
            n: 1000,
            ops: 1000,
            reads: 0,
            threads: 1,
            cold: false,
            elapsed: Duration::from_millis(500),
            puts_elapsed: Some(Duration::from_millis(250)),
            latency: Some(Latency {
                samples: 125,
                p50_ns: 1500,
                p99_ns: 9000,
            }),
            errors,
            counters: Some(counter_changes(
                &Counters::from([("puts".into(), 10), ("tables".into(), 5)]),
                &Counters::from([("puts".into(), 1010), ("tables".into(), 3)]),
            )),
            peak_rss_bytes: Some(3 << 20),
            bytes_written: Some(232_000),
            user_bytes_put: None,
            cpu_seconds: Some(0.75),
        }
    }

    #[test]
    fn a_passing_report_carries_its_figures() {
        let r = report(ErrorLog::default());
        assert_eq!(r.ops_per_sec(), Some(2000.0));
        assert_eq!(r.puts_ops_per_sec(), Some(4000.0));
        let j = r.to_json();
        assert_eq!(j["phase"], "fillrandom");
        assert_eq!(j["passed"], true);
        assert_eq!(j["errors"], 0);
        assert_eq!(j["ops_per_sec"], 2000.0);
        assert_eq!(j["puts_ops_per_sec"], 4000.0);
        assert_eq!(j["p50_us"], 1.5);
        assert_eq!(j["p99_us"], 9.0);
        assert_eq!(j["counters"]["puts"], 1000);
        assert_eq!(j["counters"]["tables"], -2);
        assert_eq!(j["counters_end"]["tables"], 3);
        assert_eq!(j["settings"]["bloom_bits_per_key"], "12");
        let human = r.to_human();
        assert!(human.contains("2,000 ops/s"), "{human}");
        assert!(human.contains("p50 1.50 µs"), "{human}");
        assert!(human.contains("1.000/op"), "{human}");
        assert!(human.contains("+1,000") && human.contains("-2 "), "{human}");
        assert!(human.contains("peak RSS 3.0 MiB"), "{human}");
        assert_eq!(j["peak_rss_bytes"], 3 << 20);
        assert_eq!(j["bytes_written"], 232_000);
        // 1000 puts of 116 bytes.
        assert_eq!(j["write_amplification"], 2.0);
        assert_eq!(j["cold"], false);
        // fillrandom issues no gets: no blocks per get.
        assert_eq!(r.blocks_read_per_get(), None);
        assert!(j.get("blocks_read_from_file_per_get").is_none());
    }

    #[test]
    fn blocks_read_from_files_are_divided_by_the_reads() {
        let mut r = report(ErrorLog::default());
        r.phase = Phase::Mixed;
        r.ops = 1000;
        r.reads = 950;
        r.cold = true;
        r.counters = Some(counter_changes(
            &Counters::from([(BLOCKS_READ_FROM_FILE.into(), 50)]),
            &Counters::from([(BLOCKS_READ_FROM_FILE.into(), 145)]),
        ));
        assert_eq!(r.blocks_read_per_get(), Some(0.1));
        let j = r.to_json();
        assert_eq!(j["blocks_read_from_file_per_get"], 0.1);
        assert_eq!(j["reads"], 950);
        assert_eq!(j["cold"], true);
        let human = r.to_human();
        assert!(
            human.contains("data blocks read from files 0.100/get"),
            "{human}"
        );
        assert!(human.contains("page cache dropped"), "{human}");
        let table = summary_table(&[r.clone()]);
        assert!(
            table.contains("0.100") && table.contains("3.0 MiB"),
            "{table}"
        );
        // siftdb counts the blocks of lookups, not of scans.
        r.phase = Phase::SeekRandom;
        assert_eq!(r.blocks_read_per_get(), None);
        r.phase = Phase::Mixed;
        r.counters = None;
        assert_eq!(r.blocks_read_per_get(), None);
    }

    #[test]
    fn a_failed_report_carries_errors_and_no_figures() {
        let mut errors = ErrorLog::default();
        for i in 0..25 {
            errors.record(format!("error {i}"));
        }
        let r = report(errors);
        assert!(!r.passed());
        assert_eq!(r.ops_per_sec(), None);
        assert_eq!(r.puts_ops_per_sec(), None);
        let j = r.to_json();
        assert_eq!(j["passed"], false);
        assert_eq!(j["errors"], 25);
        assert_eq!(
            j["error_samples"].as_array().unwrap().len(),
            MAX_ERROR_SAMPLES
        );
        for absent in ["ops_per_sec", "p50_us", "p99_us", "seconds", "counters"] {
            assert!(j.get(absent).is_none(), "{absent} in {j}");
        }
        let human = r.to_human();
        assert!(
            human.contains("FAILED, 25 errors") && human.contains("15 more"),
            "{human}"
        );
        assert!(!human.contains("ops/s"), "{human}");
        let table = summary_table(&[r]);
        assert!(table.contains("FAILED (25 errors)"), "{table}");
    }

    #[test]
    fn error_logs_merge_in_order_and_keep_counting() {
        let mut a = ErrorLog::default();
        let mut b = ErrorLog::default();
        for i in 0..8 {
            a.record(format!("a{i}"));
            b.record(format!("b{i}"));
        }
        a.merge(b);
        assert_eq!(a.count, 16);
        assert_eq!(a.samples.len(), MAX_ERROR_SAMPLES);
        assert_eq!(a.samples[7], "a7");
        assert_eq!(a.samples[8], "b0");
    }

    #[test]
    fn a_run_is_described_in_one_line() {
        assert_eq!(
            describe_run(&Workload::with_ops(1000, 250).unwrap(), 2, true),
            "N = 1,000, 250 ops per read phase (25 scans), 2 threads, page cache dropped before each read phase"
        );
        assert_eq!(
            describe_run(&Workload::new(1000).unwrap(), 1, false),
            "N = 1,000, 1 thread"
        );
    }

    #[test]
    fn digits_are_grouped_by_thousands() {
        assert_eq!(group_digits(0), "0");
        assert_eq!(group_digits(999), "999");
        assert_eq!(group_digits(1000), "1,000");
        assert_eq!(group_digits(1_234_567), "1,234,567");
    }
}
