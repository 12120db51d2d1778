//! The YCSB phases against a correct engine (the in-memory map and
//! siftdb) and against engines that answer wrongly in one specific way:
//! a lost update, a corrupted value, a lost insert, a scan that skips a
//! record — each must turn its phase into a failure, not a figure.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use std::sync::atomic::{AtomicU64, Ordering};

use siftdb_bench::{
    ycsb_amplification, Engine, MemoryEngine, NoProgress, Phase, PhaseReport, RunOptions,
    ScanBuffer, SiftdbConfig, SiftdbEngine, Workload, YCSB_VALUE_LEN,
};

fn run_ycsb(engine: &dyn Engine, workload: &Workload, threads: usize) -> Vec<PhaseReport> {
    Phase::YCSB
        .iter()
        .map(|&phase| {
            siftdb_bench::run_phase(
                engine,
                workload,
                phase,
                &RunOptions::threads(threads),
                &NoProgress,
            )
        })
        .collect()
}

fn assert_all_pass(reports: &[PhaseReport]) {
    assert_eq!(reports.len(), Phase::YCSB.len());
    for r in reports {
        assert!(r.passed(), "{}", r.to_human());
        assert!(r.ops_per_sec().is_some());
    }
}

#[test]
fn every_ycsb_phase_passes_on_a_correct_engine_at_every_value_size() {
    for (n, ops, len) in [
        (2000, 1500, None),
        (2000, 1500, Some(256)),
        (300, 300, Some(16384)),
    ] {
        for threads in [1, 3] {
            let mut workload = Workload::with_ops(n, ops).unwrap();
            if let Some(len) = len {
                workload = workload.with_value_len(len).unwrap();
            }
            let engine = MemoryEngine::new();
            let reports = run_ycsb(&engine, &workload, threads);
            assert_all_pass(&reports);
            // The load put N records of the value size; D and E inserted.
            let final_records = workload.ycsb_state_after(Phase::YcsbF).unwrap().records;
            assert_eq!(engine.len() as u64, final_records);
            assert!(final_records > n, "{final_records}");
            let mut value = Vec::new();
            let key = siftdb_bench::ycsb_key(0);
            assert!(engine.get(&key, &mut value).unwrap());
            assert_eq!(value.len(), len.unwrap_or(YCSB_VALUE_LEN));
            // Reads are counted from the draws: C reads every op.
            assert_eq!(reports[3].reads, ops);
            assert_eq!(
                reports[0].user_bytes_put,
                Some(n * (24 + value.len() as u64))
            );
        }
    }
}

#[test]
fn every_ycsb_phase_passes_on_siftdb_and_reports_amplification() {
    let dir = tempfile::tempdir().unwrap();
    let engine = SiftdbEngine::open_with(dir.path(), &SiftdbConfig::default()).unwrap();
    let workload = Workload::with_ops(3000, 1500).unwrap();
    let reports = run_ycsb(&engine, &workload, 2);
    assert_all_pass(&reports);
    assert!(reports[0].write_amplification().unwrap() > 0.5);
    let after_load = ycsb_amplification(
        &engine,
        dir.path(),
        &workload,
        &reports[..1],
        "after ycsb-load",
        false,
    )
    .unwrap();
    let end =
        ycsb_amplification(&engine, dir.path(), &workload, &reports, "at the end", true).unwrap();
    assert_eq!(after_load.live_user_bytes, 3000 * (24 + 1000));
    assert!(end.live_user_bytes > after_load.live_user_bytes);
    assert!(end.user_bytes_put > after_load.user_bytes_put);
    assert!(end.disk_bytes > 0 && end.space_amplification() > 0.1);
    assert!(
        end.write_amplification().unwrap() > 0.5,
        "{}",
        end.to_line()
    );
}

/// Only the listed YCSB phases shape the records a later one expects.
#[test]
fn a_run_of_some_ycsb_phases_checks_against_those_alone() {
    let phases = [Phase::YcsbLoad, Phase::YcsbB, Phase::YcsbD];
    let workload = Workload::with_ops(1500, 800).unwrap().with_phases(&phases);
    let engine = MemoryEngine::new();
    for phase in phases {
        let r = siftdb_bench::run_phase(
            &engine,
            &workload,
            phase,
            &RunOptions::threads(2),
            &NoProgress,
        );
        assert!(r.passed(), "{}", r.to_human());
    }
    // The full sequence's D expects A's updates: on this engine it fails.
    let full = Workload::with_ops(1500, 800).unwrap();
    let r = siftdb_bench::run_phase(
        &engine,
        &full,
        Phase::YcsbF,
        &RunOptions::default(),
        &NoProgress,
    );
    assert!(!r.passed());
}

/// A correct engine with one fault switched on after the load.
#[derive(Default)]
struct Faulty {
    inner: MemoryEngine,
    fault: AtomicU64,
    count: AtomicU64,
}

const LOSE_UPDATES: u64 = 1;
const CORRUPT_READS: u64 = 2;
const LOSE_INSERTS: u64 = 3;
const SKIP_IN_SCANS: u64 = 4;

impl Faulty {
    fn with(fault: u64) -> (Faulty, Workload) {
        let engine = Faulty::default();
        let workload = Workload::with_ops(2000, 1000).unwrap();
        let load = siftdb_bench::run_phase(
            &engine,
            &workload,
            Phase::YcsbLoad,
            &RunOptions::default(),
            &NoProgress,
        );
        assert!(load.passed(), "{}", load.to_human());
        engine.fault.store(fault, Ordering::Relaxed);
        (engine, workload)
    }

    fn every_tenth(&self) -> bool {
        self.count.fetch_add(1, Ordering::Relaxed) % 10 == 9
    }
}

impl Engine for Faulty {
    fn name(&self) -> String {
        "faulty".into()
    }

    fn put(&self, key: &[u8], value: &[u8]) -> Result<(), String> {
        let mut existing = Vec::new();
        let exists = self.inner.get(key, &mut existing)?;
        match self.fault.load(Ordering::Relaxed) {
            LOSE_UPDATES if exists && self.every_tenth() => Ok(()),
            LOSE_INSERTS if !exists => Ok(()),
            _ => self.inner.put(key, value),
        }
    }

    fn get(&self, key: &[u8], value: &mut Vec<u8>) -> Result<bool, String> {
        let found = self.inner.get(key, value)?;
        if self.fault.load(Ordering::Relaxed) == CORRUPT_READS && found && self.every_tenth() {
            if let Some(last) = value.last_mut() {
                *last ^= 1;
            }
        }
        Ok(found)
    }

    fn scan(&self, start: &[u8], limit: usize, out: &mut ScanBuffer) -> Result<(), String> {
        if self.fault.load(Ordering::Relaxed) != SKIP_IN_SCANS {
            return self.inner.scan(start, limit, out);
        }
        let mut all = ScanBuffer::new();
        self.inner.scan(start, limit + 1, &mut all)?;
        for (i, (k, v)) in all.iter().enumerate() {
            if (i != 2 || all.len() < 4) && out.len() < limit {
                out.push(k, v);
            }
        }
        Ok(())
    }

    fn scan_prefix(&self, prefix: &[u8], limit: usize, out: &mut ScanBuffer) -> Result<(), String> {
        self.inner.scan_prefix(prefix, limit, out)
    }

    fn scan_range(
        &self,
        s: &[u8],
        e: &[u8],
        limit: usize,
        out: &mut ScanBuffer,
    ) -> Result<(), String> {
        self.inner.scan_range(s, e, limit, out)
    }

    fn flush_and_wait(&self) -> Result<(), String> {
        Ok(())
    }
}

fn failure(fault: u64, phase: Phase) -> String {
    let (engine, workload) = Faulty::with(fault);
    let mut report = None;
    for earlier in Phase::YCSB.into_iter().skip(1).filter(|&p| p <= phase) {
        let fault_now = if earlier == phase { fault } else { 0 };
        engine.fault.store(fault_now, Ordering::Relaxed);
        report = Some(siftdb_bench::run_phase(
            &engine,
            &workload,
            earlier,
            &RunOptions::threads(2),
            &NoProgress,
        ));
        let r = report.as_ref().unwrap();
        assert_eq!(r.passed(), earlier != phase, "{}", r.to_human());
    }
    let r = report.unwrap();
    assert!(r.ops_per_sec().is_none());
    r.errors.samples.join("\n")
}

#[test]
fn a_lost_update_is_caught_as_a_stale_read() {
    let errors = failure(LOSE_UPDATES, Phase::YcsbA);
    assert!(errors.contains("(stale)"), "{errors}");
    let errors = failure(LOSE_UPDATES, Phase::YcsbF);
    assert!(errors.contains("(stale)"), "{errors}");
}

#[test]
fn a_corrupted_value_is_caught() {
    let errors = failure(CORRUPT_READS, Phase::YcsbC);
    assert!(errors.contains("is not version"), "{errors}");
}

#[test]
fn a_lost_insert_is_caught_by_the_reads_of_the_latest() {
    let errors = failure(LOSE_INSERTS, Phase::YcsbD);
    assert!(errors.contains("found nothing"), "{errors}");
}

#[test]
fn a_scan_that_skips_a_record_is_caught() {
    let errors = failure(SKIP_IN_SCANS, Phase::YcsbE);
    assert!(errors.contains("a record skipped"), "{errors}");
}

#[test]
fn ycsb_phases_parse_in_order_after_the_others() {
    let names: Vec<&str> = Phase::YCSB.iter().map(|p| p.name()).collect();
    assert_eq!(
        names,
        [
            "ycsb-load",
            "ycsb-a",
            "ycsb-b",
            "ycsb-c",
            "ycsb-d",
            "ycsb-e",
            "ycsb-f"
        ]
    );
    for p in Phase::YCSB {
        assert_eq!(p.name().parse::<Phase>().unwrap(), p);
    }
    assert!(
        siftdb_bench::check_phase_order(&[Phase::FillRandom, Phase::YcsbLoad, Phase::YcsbC])
            .is_ok()
    );
    assert!(siftdb_bench::check_phase_order(&[Phase::YcsbA, Phase::YcsbLoad]).is_err());
    assert_eq!(Phase::ALL.len(), 14);
    // Too small a value for the stamp: refused before any operation.
    let workload = Workload::with_ops(100, 100)
        .unwrap()
        .with_value_len(8)
        .unwrap();
    let r = siftdb_bench::run_phase(
        &MemoryEngine::new(),
        &workload,
        Phase::YcsbA,
        &RunOptions::default(),
        &NoProgress,
    );
    assert!(
        r.errors.samples[0].contains("at least 16"),
        "{:?}",
        r.errors.samples
    );
    assert!(Workload::new(10).unwrap().with_value_len(0).is_err());
}

/// `--value-size` on the phases of WORKLOADS.md: values of that size,
/// checked.
#[test]
fn the_classic_phases_take_a_value_size() {
    let workload = Workload::with_ops(1000, 500)
        .unwrap()
        .with_value_len(300)
        .unwrap();
    let engine = MemoryEngine::new();
    for phase in Phase::ALL {
        let r = siftdb_bench::run_phase(
            &engine,
            &workload,
            phase,
            &RunOptions::threads(2),
            &NoProgress,
        );
        assert!(r.passed(), "{}", r.to_human());
    }
    let mut value = Vec::new();
    assert!(engine.get(&siftdb_bench::key(2), &mut value).unwrap());
    assert_eq!(value.len(), 300);
}
