//! The benchmark runner against a correct engine and against engines that
//! answer wrongly in one specific way: every wrong answer must turn the
//! phase into a failure with errors and no figures.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use siftdb_bench::{
    key, run_phase, value, Counters, Engine, MemoryEngine, NoProgress, Phase, PhaseReport,
    Progress, RunOptions, ScanBuffer, Workload,
};
use std::sync::atomic::{AtomicU64, Ordering};

const N: u64 = 2000;

fn run_all<E: Engine>(engine: &E, workload: &Workload, threads: usize) -> Vec<PhaseReport> {
    Phase::ALL
        .iter()
        .map(|&phase| {
            run_phase(
                engine,
                workload,
                phase,
                &RunOptions::threads(threads),
                &NoProgress,
            )
        })
        .collect()
}

/// One latency sample per eight operations; multigetrandom times each
/// batch (its first key's op number is a multiple of the batch size).
fn expected_samples(r: &PhaseReport) -> u64 {
    match r.phase {
        Phase::MultiGetRandom => r.ops.div_ceil(RunOptions::default().batch as u64),
        _ => r.ops.div_ceil(8),
    }
}

#[test]
fn every_phase_passes_on_a_correct_engine() {
    let workload = Workload::new(N).unwrap();
    let engine = MemoryEngine::new();
    let reports = run_all(&engine, &workload, 1);
    assert_eq!(reports.len(), Phase::ALL.len());
    for r in &reports {
        assert!(r.passed(), "{}", r.to_human());
        assert_eq!(r.errors.count, 0);
        assert_eq!(r.ops, workload.phase_ops(r.phase));
        assert!(r.ops_per_sec().is_some(), "{}", r.to_human());
        let latency = r.latency.unwrap();
        assert_eq!(latency.samples, expected_samples(r));
        assert!(latency.p50_ns <= latency.p99_ns);
        let json = r.to_json();
        assert_eq!(json["phase"], r.phase.name());
        assert_eq!(json["errors"], 0);
        assert!(json["ops_per_sec"].as_f64().unwrap() > 0.0);
    }
    assert!(reports[0].puts_elapsed.unwrap() <= reports[0].elapsed);
    // N keys were loaded, mixed added none and deleterange took a tenth;
    // the txn phases wrote back the keys they drew, deleted ones included.
    let len = engine.len() as u64;
    assert!((N - N / 10..=N).contains(&len), "{len}");
}

#[test]
fn counters_are_reported_as_changes_over_each_phase() {
    let workload = Workload::new(N).unwrap();
    let engine = MemoryEngine::new();
    let reports = run_all(&engine, &workload, 1);
    let change = |phase: usize, name: &str| reports[phase].counters.as_ref().unwrap()[name].delta;
    assert_eq!(change(0, "puts"), N as i64);
    assert_eq!(change(0, "flushes"), 1);
    assert_eq!(change(0, "keys"), N as i64);
    assert_eq!(change(1, "gets"), N as i64);
    assert_eq!(change(1, "puts"), 0);
    assert_eq!(change(2, "gets"), N as i64); // multigetrandom
    assert_eq!(change(3, "gets"), N as i64);
    assert_eq!(change(4, "gets"), N as i64);
    assert_eq!(change(5, "scans"), (N / 10) as i64);
    assert_eq!(change(6, "scans"), (N / 10) as i64); // seekrandom-rev
    assert_eq!(change(7, "scans"), (N / 10) as i64);
    assert_eq!(change(8, "scans"), N as i64);
    assert_eq!(change(9, "puts"), (N / 20) as i64);
    assert_eq!(change(9, "gets"), (N - N / 20) as i64);
    assert_eq!(change(9, "keys"), 0);
    assert_eq!(reports[9].counters.as_ref().unwrap()["keys"].end, N);
}

#[test]
fn phases_split_across_threads_do_the_same_work() {
    let workload = Workload::new(N).unwrap();
    let engine = MemoryEngine::new();
    for threads in [2, 3, 7] {
        let reports = run_all(&engine, &workload, threads);
        for r in &reports {
            assert!(r.passed(), "{threads} threads: {}", r.to_human());
            assert_eq!(r.threads, threads);
            let counters = r.counters.as_ref().unwrap();
            let engine_ops = counters["gets"].delta + counters["scans"].delta;
            let expected = match r.phase {
                Phase::FillRandom => 0,
                Phase::Mixed => (N - N / 20) as i64,
                Phase::Txn | Phase::TxnUniform | Phase::TxnLocking => 2 * r.ops as i64,
                _ => r.ops as i64,
            };
            assert_eq!(engine_ops, expected, "{}", r.phase);
            assert_eq!(r.latency.unwrap().samples, expected_samples(r));
        }
    }
}

#[test]
fn progress_adds_up_to_the_operations() {
    struct Count(AtomicU64, AtomicU64);
    impl Progress for Count {
        fn advance(&self, ops: u64) {
            self.0.fetch_add(ops, Ordering::Relaxed);
        }
        fn stage(&self, _label: &str) {
            self.1.fetch_add(1, Ordering::Relaxed);
        }
    }
    let workload = Workload::new(N).unwrap();
    let engine = MemoryEngine::new();
    for (phase, threads) in [(Phase::FillRandom, 1), (Phase::ReadRandom, 3)] {
        let count = Count(AtomicU64::new(0), AtomicU64::new(0));
        run_phase(
            &engine,
            &workload,
            phase,
            &RunOptions::threads(threads),
            &count,
        );
        assert_eq!(count.0.load(Ordering::Relaxed), N);
        let stages = u64::from(phase == Phase::FillRandom);
        assert_eq!(count.1.load(Ordering::Relaxed), stages);
    }
}

#[test]
fn small_and_odd_sizes_run_cleanly() {
    for n in [1, 9, 10, 99, 101, 1001] {
        let workload = Workload::new(n).unwrap();
        let engine = MemoryEngine::new();
        for r in run_all(&engine, &workload, 2) {
            assert!(r.passed(), "n = {n}: {}", r.to_human());
        }
    }
}

/// A correct engine with one deliberate fault.
struct Faulty {
    inner: MemoryEngine,
    fault: Fault,
}

#[derive(Clone, Copy, PartialEq)]
enum Fault {
    /// Overwrites are dropped: gets return the first value ever written.
    IgnoreOverwrites,
    /// The key numbered 2·500 is never found.
    MissKey,
    /// One byte of the values of key 2·700 is flipped.
    CorruptValue,
    /// An absent key (2·300 + 1) is reported present.
    PhantomKey,
    /// Scans lose their third entry.
    DropScanEntry,
    /// Scans return one entry too many.
    LongScan,
    /// Scans come back in descending order.
    ReversedScan,
    /// Every get fails with an engine error.
    GetFails,
    /// The final flush fails.
    FlushFails,
    /// The second entry of a scan carries the first entry's value.
    ScanWrongValue,
    /// Prefix scans start one key late.
    PrefixScanSkipsFirst,
    /// Range scans ignore their end: the next key shows up.
    RangeIgnoresEnd,
    /// Reverse scans skip the key they start at.
    RevScanSkipsStart,
    /// Reverse scans come back in ascending order.
    RevScanAscending,
    /// Range deletes stop one present key short of their end.
    RangeDeleteShort,
}

impl Engine for Faulty {
    fn name(&self) -> String {
        "faulty".into()
    }

    fn delete_range(&self, start: &[u8], end: &[u8]) -> Result<(), String> {
        if self.fault == Fault::RangeDeleteShort {
            // The last present key before `end`: two key numbers below it.
            let digits = std::str::from_utf8(&end[1..]).unwrap();
            let short = key(digits.parse::<u64>().unwrap() - 2);
            return self.inner.delete_range(start, &short);
        }
        self.inner.delete_range(start, end)
    }

    fn read_modify_write(&self, a: &[u8], b: &[u8]) -> Result<u64, String> {
        self.inner.read_modify_write(a, b)
    }

    fn locking_read_modify_write(
        &self,
        a: &[u8],
        b: &[u8],
    ) -> Result<siftdb_bench::LockRetries, String> {
        self.inner.locking_read_modify_write(a, b)
    }

    fn put(&self, k: &[u8], v: &[u8]) -> Result<(), String> {
        if self.fault == Fault::IgnoreOverwrites {
            let mut old = Vec::new();
            if self.inner.get(k, &mut old)? {
                return Ok(());
            }
        }
        self.inner.put(k, v)
    }

    fn get(&self, k: &[u8], v: &mut Vec<u8>) -> Result<bool, String> {
        match self.fault {
            Fault::GetFails => return Err("disk on fire".into()),
            Fault::MissKey if k == key(1000) => return Ok(false),
            Fault::PhantomKey if k == key(601) => {
                v.extend_from_slice(&value(601));
                return Ok(true);
            }
            _ => {}
        }
        let found = self.inner.get(k, v)?;
        if self.fault == Fault::CorruptValue && k == key(1400) {
            if let Some(b) = v.get_mut(50) {
                *b ^= 0x10;
            }
        }
        Ok(found)
    }

    fn scan(&self, start: &[u8], limit: usize, out: &mut ScanBuffer) -> Result<(), String> {
        let mut all = ScanBuffer::new();
        self.inner.scan(start, limit + 1, &mut all)?;
        let mut entries: Vec<(Vec<u8>, Vec<u8>)> =
            all.iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
        match self.fault {
            Fault::LongScan => {}
            _ => entries.truncate(limit),
        }
        if self.fault == Fault::DropScanEntry && entries.len() > 2 {
            entries.remove(2);
        }
        if self.fault == Fault::ReversedScan {
            entries.reverse();
        }
        if self.fault == Fault::ScanWrongValue && entries.len() > 1 {
            entries[1].1 = entries[0].1.clone();
        }
        for (k, v) in &entries {
            out.push(k, v);
        }
        Ok(())
    }

    fn scan_rev(&self, end: &[u8], limit: usize, out: &mut ScanBuffer) -> Result<(), String> {
        let mut all = ScanBuffer::new();
        self.inner.scan_rev(end, limit + 1, &mut all)?;
        let mut entries: Vec<(Vec<u8>, Vec<u8>)> =
            all.iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
        if self.fault == Fault::RevScanSkipsStart && !entries.is_empty() {
            entries.remove(0);
        }
        entries.truncate(limit);
        if self.fault == Fault::RevScanAscending {
            entries.reverse();
        }
        for (k, v) in &entries {
            out.push(k, v);
        }
        Ok(())
    }

    fn scan_prefix(&self, prefix: &[u8], limit: usize, out: &mut ScanBuffer) -> Result<(), String> {
        if self.fault != Fault::PrefixScanSkipsFirst {
            return self.inner.scan_prefix(prefix, limit, out);
        }
        let mut all = ScanBuffer::new();
        self.inner.scan_prefix(prefix, limit + 1, &mut all)?;
        for (k, v) in all.iter().skip(1) {
            out.push(k, v);
        }
        Ok(())
    }

    fn scan_range(
        &self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        out: &mut ScanBuffer,
    ) -> Result<(), String> {
        if self.fault == Fault::RangeIgnoresEnd {
            return self.inner.scan(start, limit, out);
        }
        self.inner.scan_range(start, end, limit, out)
    }

    fn flush_and_wait(&self) -> Result<(), String> {
        if self.fault == Fault::FlushFails {
            return Err("flush went wrong".into());
        }
        self.inner.flush_and_wait()
    }

    fn counters(&self) -> Option<Counters> {
        self.inner.counters()
    }
}

/// Runs every phase on an engine with `fault` and returns the names of the
/// phases that failed, checking that a failure carries errors and no figures.
fn failing_phases(fault: Fault) -> Vec<&'static str> {
    let workload = Workload::new(N).unwrap();
    let engine = Faulty {
        inner: MemoryEngine::new(),
        fault,
    };
    let mut failed = Vec::new();
    for r in run_all(&engine, &workload, 2) {
        if r.passed() {
            continue;
        }
        failed.push(r.phase.name());
        assert!(r.errors.count > 0);
        assert!(!r.errors.samples.is_empty());
        assert_eq!(r.ops_per_sec(), None);
        let json = r.to_json();
        assert_eq!(json["passed"], false);
        assert!(json.get("ops_per_sec").is_none() && json.get("p99_us").is_none());
    }
    failed
}

#[test]
fn a_stale_value_fails_the_mixed_phase() {
    assert_eq!(failing_phases(Fault::IgnoreOverwrites), ["mixed"]);
    let workload = Workload::new(N).unwrap();
    let engine = Faulty {
        inner: MemoryEngine::new(),
        fault: Fault::IgnoreOverwrites,
    };
    run_phase(
        &engine,
        &workload,
        Phase::FillRandom,
        &RunOptions::default(),
        &NoProgress,
    );
    let r = run_phase(
        &engine,
        &workload,
        Phase::Mixed,
        &RunOptions::default(),
        &NoProgress,
    );
    assert!(
        r.errors.samples[0].contains("returned version 0, expected version 1 (stale)"),
        "{:?}",
        r.errors.samples
    );
}

#[test]
fn a_missed_key_fails_every_phase_that_reads_it() {
    let failed = failing_phases(Fault::MissKey);
    // Key 2·500 is read by readrandom; whether readhot, mixed and seekrandom
    // reach it depends on the orders, so require readrandom and nothing else.
    assert!(failed.contains(&"readrandom"), "{failed:?}");
    assert!(!failed.contains(&"readmissing") && !failed.contains(&"fillrandom"));
    let workload = Workload::new(N).unwrap();
    let engine = Faulty {
        inner: MemoryEngine::new(),
        fault: Fault::MissKey,
    };
    run_phase(
        &engine,
        &workload,
        Phase::FillRandom,
        &RunOptions::default(),
        &NoProgress,
    );
    let r = run_phase(
        &engine,
        &workload,
        Phase::ReadRandom,
        &RunOptions::default(),
        &NoProgress,
    );
    assert_eq!(r.errors.count, 1);
    assert!(
        r.errors.samples[0].contains("get k000000000001000 found nothing"),
        "{:?}",
        r.errors.samples
    );
}

#[test]
fn a_corrupt_value_fails_readrandom() {
    let failed = failing_phases(Fault::CorruptValue);
    assert!(failed.contains(&"readrandom"), "{failed:?}");
    assert!(!failed.contains(&"readmissing") && !failed.contains(&"seekrandom"));
}

#[test]
fn a_range_delete_that_stops_short_fails_deleterange() {
    assert_eq!(failing_phases(Fault::RangeDeleteShort), ["deleterange"]);
}

#[test]
fn a_phantom_key_fails_readmissing() {
    assert_eq!(failing_phases(Fault::PhantomKey), ["readmissing"]);
}

#[test]
fn a_dropped_scan_entry_fails_seekrandom() {
    assert_eq!(failing_phases(Fault::DropScanEntry), ["seekrandom"]);
}

#[test]
fn a_scan_beyond_its_limit_fails_seekrandom() {
    assert_eq!(failing_phases(Fault::LongScan), ["seekrandom"]);
}

#[test]
fn a_scan_out_of_order_fails_seekrandom() {
    assert_eq!(failing_phases(Fault::ReversedScan), ["seekrandom"]);
}

#[test]
fn a_reverse_scan_that_skips_its_start_or_ascends_fails_seekrandom_rev() {
    assert_eq!(failing_phases(Fault::RevScanSkipsStart), ["seekrandom-rev"]);
    assert_eq!(failing_phases(Fault::RevScanAscending), ["seekrandom-rev"]);
}

#[test]
fn a_wrong_value_in_a_scan_fails_seekrandom() {
    assert_eq!(failing_phases(Fault::ScanWrongValue), ["seekrandom"]);
}

#[test]
fn engine_errors_fail_the_phase_and_every_op_is_counted() {
    let failed = failing_phases(Fault::GetFails);
    assert_eq!(
        failed,
        [
            "readrandom",
            "multigetrandom",
            "readmissing",
            "readhot",
            "mixed",
            "deleterange"
        ]
    );
    let workload = Workload::new(N).unwrap();
    let engine = Faulty {
        inner: MemoryEngine::new(),
        fault: Fault::GetFails,
    };
    let r = run_phase(
        &engine,
        &workload,
        Phase::ReadMissing,
        &RunOptions::threads(2),
        &NoProgress,
    );
    assert_eq!(r.errors.count, N);
    assert_eq!(r.errors.samples.len(), siftdb_bench::MAX_ERROR_SAMPLES);
    assert!(r.errors.samples[0].contains("disk on fire"));
}

#[test]
fn a_failed_flush_fails_fillrandom() {
    assert_eq!(failing_phases(Fault::FlushFails), ["fillrandom"]);
}

#[test]
fn a_prefix_scan_that_starts_late_fails_seekprefix() {
    assert_eq!(failing_phases(Fault::PrefixScanSkipsFirst), ["seekprefix"]);
}

#[test]
fn a_range_scan_past_its_end_fails_seekempty() {
    assert_eq!(failing_phases(Fault::RangeIgnoresEnd), ["seekempty"]);
}
