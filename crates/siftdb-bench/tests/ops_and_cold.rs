//! `--ops` and `--cold` through the runner: every engine is asked for
//! exactly the keys `WORKLOADS.md` ("Operations per read phase") names, in
//! that order, and a cold phase drops the page cache first or fails.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use std::sync::Mutex;

use siftdb_bench::{
    key, run_phase, shuffle, ColdCache, Counters, Engine, MemoryEngine, NoProgress, Phase,
    RunOptions, ScanBuffer, Workload,
};

/// A correct engine that writes down every key it is asked about.
#[derive(Default)]
struct Recording {
    inner: MemoryEngine,
    gets: Mutex<Vec<Vec<u8>>>,
    scans: Mutex<Vec<Vec<u8>>>,
}

impl Recording {
    fn take(&self) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
        (
            std::mem::take(&mut *self.gets.lock().unwrap()),
            std::mem::take(&mut *self.scans.lock().unwrap()),
        )
    }
}

impl Engine for Recording {
    fn name(&self) -> String {
        "recording".into()
    }
    fn put(&self, k: &[u8], v: &[u8]) -> Result<(), String> {
        self.inner.put(k, v)
    }
    fn get(&self, k: &[u8], v: &mut Vec<u8>) -> Result<bool, String> {
        self.gets.lock().unwrap().push(k.to_vec());
        self.inner.get(k, v)
    }
    fn scan(&self, start: &[u8], limit: usize, out: &mut ScanBuffer) -> Result<(), String> {
        self.scans.lock().unwrap().push(start.to_vec());
        self.inner.scan(start, limit, out)
    }
    fn scan_prefix(&self, prefix: &[u8], limit: usize, out: &mut ScanBuffer) -> Result<(), String> {
        self.scans.lock().unwrap().push(prefix.to_vec());
        self.inner.scan_prefix(prefix, limit, out)
    }
    fn scan_range(
        &self,
        start: &[u8],
        end: &[u8],
        limit: usize,
        out: &mut ScanBuffer,
    ) -> Result<(), String> {
        let mut both = start.to_vec();
        both.extend_from_slice(end);
        self.scans.lock().unwrap().push(both);
        self.inner.scan_range(start, end, limit, out)
    }
    fn flush_and_wait(&self) -> Result<(), String> {
        self.inner.flush_and_wait()
    }
    fn counters(&self) -> Option<Counters> {
        self.inner.counters()
    }
}

const N: u64 = 3000;

/// `phase` with default options (one thread, page cache left alone).
fn warm(engine: &impl Engine, workload: &Workload, phase: Phase) -> siftdb_bench::PhaseReport {
    run_phase(engine, workload, phase, &RunOptions::default(), &NoProgress)
}

/// The keys of `WORKLOADS.md`'s rule, computed from the read order alone.
fn expected_gets(phase: Phase, ops: u64) -> Vec<Vec<u8>> {
    let order = shuffle(N, 7).unwrap();
    let positions = ops.min(N);
    let hot = (positions / 100).max(1);
    (0..ops)
        .map(|g| {
            let item = match phase {
                Phase::ReadHot => order[(g % hot) as usize],
                _ => order[(g % positions) as usize],
            };
            let j = if phase == Phase::ReadMissing {
                2 * item + 1
            } else {
                2 * item
            };
            key(j).to_vec()
        })
        .collect()
}

fn expected_scans(ops: u64) -> Vec<Vec<u8>> {
    let order = shuffle(N, 7).unwrap();
    let positions = ops.min(N);
    (0..ops.div_ceil(10))
        .map(|s| key(2 * order[(s % positions) as usize]).to_vec())
        .collect()
}

#[test]
fn every_read_phase_asks_for_the_documented_keys_in_order() {
    for ops in [1, 9, 10, 250, N, 2 * N + 7] {
        let workload = Workload::with_ops(N, ops).unwrap();
        let engine = Recording::default();
        let fill = warm(&engine, &workload, Phase::FillRandom);
        assert!(fill.passed() && fill.ops == N, "{}", fill.to_human());
        for phase in [Phase::ReadRandom, Phase::ReadMissing, Phase::ReadHot] {
            let r = warm(&engine, &workload, phase);
            assert!(r.passed(), "M = {ops}: {}", r.to_human());
            assert_eq!((r.ops, r.reads), (ops, ops));
            let (gets, scans) = engine.take();
            assert!(scans.is_empty());
            assert!(
                gets == expected_gets(phase, ops),
                "M = {ops}, {phase}: other keys"
            );
        }
        let r = warm(&engine, &workload, Phase::SeekRandom);
        assert!(r.passed(), "{}", r.to_human());
        assert_eq!(r.ops, ops.div_ceil(10));
        let (gets, scans) = engine.take();
        assert!(gets.is_empty());
        assert!(scans == expected_scans(ops), "M = {ops}: other scans");
        let r = warm(&engine, &workload, Phase::SeekPrefix);
        assert!(r.passed(), "{}", r.to_human());
        assert_eq!(r.ops, ops.div_ceil(10));
        let (_, scans) = engine.take();
        let prefixes: Vec<Vec<u8>> = expected_scans(ops)
            .into_iter()
            .map(|k| k[..14].to_vec())
            .collect();
        assert!(scans == prefixes, "M = {ops}: other prefixes");
        let r = warm(&engine, &workload, Phase::SeekEmpty);
        assert!(r.passed(), "{}", r.to_human());
        assert_eq!(r.ops, ops);
        let (_, scans) = engine.take();
        let ranges: Vec<Vec<u8>> = expected_gets(Phase::ReadMissing, ops)
            .into_iter()
            .map(|mut k| {
                let j: u64 = std::str::from_utf8(&k[1..]).unwrap().parse().unwrap();
                k.extend_from_slice(&key(j + 1));
                k
            })
            .collect();
        assert!(scans == ranges, "M = {ops}: other ranges");
        let r = warm(&engine, &workload, Phase::Mixed);
        assert!(r.passed(), "{}", r.to_human());
        assert_eq!((r.ops, r.reads), (ops, ops - ops / 20));
        let (gets, _) = engine.take();
        assert_eq!(gets.len() as u64, ops - ops / 20);
    }
}

#[test]
fn threads_share_the_same_operations() {
    let workload = Workload::with_ops(N, 500).unwrap();
    let engine = Recording::default();
    warm(&engine, &workload, Phase::FillRandom);
    for phase in [Phase::ReadRandom, Phase::ReadMissing, Phase::ReadHot] {
        let r = run_phase(
            &engine,
            &workload,
            phase,
            &RunOptions::threads(3),
            &NoProgress,
        );
        assert!(r.passed(), "{}", r.to_human());
        let (mut gets, _) = engine.take();
        let mut expected = expected_gets(phase, 500);
        gets.sort();
        expected.sort();
        assert!(gets == expected, "{phase}");
    }
}

#[test]
fn a_tiny_run_still_scans() {
    let workload = Workload::new(1).unwrap();
    let engine = MemoryEngine::new();
    for phase in Phase::ALL {
        let r = warm(&engine, &workload, phase);
        assert!(r.passed(), "{}", r.to_human());
        assert_eq!(r.ops, 1, "{phase}");
        assert!(r.latency.is_some(), "{phase}: op 0 is always timed");
    }
    // seekrandom, seekrandom-rev, seekprefix and seekempty: one scan each.
    let counters = engine.counters().unwrap();
    assert_eq!(counters["scans"], 4);
}

#[test]
fn a_cold_read_phase_drops_the_page_cache_first() {
    let knob = tempfile::NamedTempFile::new().unwrap();
    let options = RunOptions {
        threads: 1,
        cold: Some(ColdCache::check(knob.path(), true).unwrap()),
        ..RunOptions::default()
    };
    let workload = Workload::with_ops(500, 100).unwrap();
    let engine = MemoryEngine::new();
    let fill = run_phase(&engine, &workload, Phase::FillRandom, &options, &NoProgress);
    assert!(fill.passed() && !fill.cold);
    assert_eq!(
        std::fs::read(knob.path()).unwrap(),
        b"",
        "fillrandom is not a read phase"
    );
    for phase in &Phase::ALL[1..] {
        let r = run_phase(&engine, &workload, *phase, &options, &NoProgress);
        assert!(r.passed() && r.cold, "{}", r.to_human());
        assert_eq!(r.to_json()["cold"], true);
        assert_eq!(std::fs::read(knob.path()).unwrap(), b"3");
        std::fs::write(knob.path(), b"").unwrap();
    }
    // readmissing: deleterange, the last phase, deleted present keys.
    let warm = warm(&engine, &workload, Phase::ReadMissing);
    assert!(warm.passed() && !warm.cold);
}

#[test]
fn a_page_cache_that_cannot_be_dropped_fails_the_phase_before_any_op() {
    let dir = tempfile::tempdir().unwrap();
    let knob = dir.path().join("drop_caches");
    std::fs::write(&knob, b"").unwrap();
    let options = RunOptions {
        threads: 1,
        cold: Some(ColdCache::check(&knob, true).unwrap()),
        ..RunOptions::default()
    };
    std::fs::remove_file(&knob).unwrap();
    let workload = Workload::new(200).unwrap();
    let engine = MemoryEngine::new();
    warm(&engine, &workload, Phase::FillRandom);
    let r = run_phase(&engine, &workload, Phase::ReadRandom, &options, &NoProgress);
    assert!(!r.passed() && !r.cold);
    assert_eq!(r.errors.count, 1);
    assert!(
        r.errors.samples[0].contains("cannot drop the page cache"),
        "{:?}",
        r.errors
    );
    assert_eq!(r.ops_per_sec(), None);
    assert_eq!(engine.counters().unwrap()["gets"], 0, "no get ran");
}

#[test]
fn every_phase_reports_the_peak_memory_of_the_process() {
    let workload = Workload::new(2000).unwrap();
    let engine = MemoryEngine::new();
    for phase in Phase::ALL {
        let r = warm(&engine, &workload, phase);
        let peak = r.peak_rss_bytes.expect("Linux reports VmHWM");
        assert!(peak > 0);
        assert_eq!(r.to_json()["peak_rss_bytes"], peak);
    }
}

#[test]
fn every_phase_reports_the_cpu_time_of_its_timed_section() {
    let workload = Workload::new(2000).unwrap();
    let engine = MemoryEngine::new();
    let mut total = 0.0;
    for phase in Phase::ALL {
        let r = warm(&engine, &workload, phase);
        let cpu = r.cpu_seconds.expect("Linux reports utime and stime");
        assert!(cpu >= 0.0, "{phase}: {cpu}");
        total += cpu;
    }
    // At 10 ms resolution a phase may read 0, but not every phase takes
    // longer on the CPU than the whole run took on the wall clock.
    assert!(total < 60.0, "{total}");
}
