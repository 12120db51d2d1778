//! Runs one phase against one engine and checks every answer.
//!
//! Owns: [`run_phase`]: the timed loops, the split of read phases across
//! threads, the check of every answer, and the counter snapshots around
//! each phase.
//! Must never: allocate, format or time anything per operation beyond the
//! one-in-eight latency sample (keys and expected values are built on the
//! stack, buffers are reused), or let a wrong answer become a figure.

use std::ops::Range;
use std::time::{Duration, Instant};

use super::data::{is_versioned_value, key, value, versioned_value, KEY_LEN};
use super::engine::{Engine, ScanBuffer};
use super::latency::Sampler;
use super::phase::{MixedOp, Phase, Workload, SCAN_ENTRIES};
use super::report::{counter_changes, ErrorLog, PhaseReport};

/// Operations between two progress reports from one worker.
const PROGRESS_EVERY: u64 = 4096;

/// How a phase is run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunOptions {
    /// Threads that share a read phase's operations (at least 1).
    /// fillrandom and mixed always run on one thread: fillrandom's puts are
    /// specified in load order, and every mixed get expects the version
    /// written by the puts before it in operation order.
    pub threads: usize,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions { threads: 1 }
    }
}

/// Where a running phase reports how far it got (a progress bar, or nothing).
pub trait Progress: Sync {
    /// `ops` more operations completed.
    fn advance(&self, ops: u64);

    /// The phase moved to a stage that is not counted in operations, such
    /// as fillrandom's final flush.
    fn stage(&self, _label: &str) {}
}

/// Progress that goes nowhere.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoProgress;

impl Progress for NoProgress {
    fn advance(&self, _ops: u64) {}
}

/// What one worker brings back.
#[derive(Default)]
struct WorkerOutcome {
    sampler: Sampler,
    errors: ErrorLog,
}

impl WorkerOutcome {
    fn merge(&mut self, other: WorkerOutcome) {
        self.sampler.merge(other.sampler);
        self.errors.merge(other.errors);
    }
}

/// Runs `op` for every operation number in `range`, sampling latency
/// through the `Sampler` it is given and recording the errors it returns.
fn drive(
    range: Range<u64>,
    progress: &dyn Progress,
    mut op: impl FnMut(u64, &mut Sampler) -> Result<(), String>,
) -> WorkerOutcome {
    let mut outcome = WorkerOutcome {
        sampler: Sampler::for_ops(range.end.saturating_sub(range.start)),
        errors: ErrorLog::default(),
    };
    let mut unreported = 0;
    for g in range {
        if let Err(message) = op(g, &mut outcome.sampler) {
            outcome.errors.record(message);
        }
        unreported += 1;
        if unreported == PROGRESS_EVERY {
            progress.advance(unreported);
            unreported = 0;
        }
    }
    progress.advance(unreported);
    outcome
}

/// Splits `0..ops` into `threads` contiguous ranges and runs `worker` on
/// each in its own scoped thread (in place when `threads <= 1`).
fn split_across_threads(
    ops: u64,
    threads: usize,
    worker: impl Fn(Range<u64>) -> WorkerOutcome + Sync,
) -> WorkerOutcome {
    if threads <= 1 {
        return worker(0..ops);
    }
    let t = threads as u64;
    let bounds = |i: u64| ops / t * i + (ops % t).min(i);
    std::thread::scope(|scope| {
        let worker = &worker;
        let handles: Vec<_> = (0..t)
            .map(|i| scope.spawn(move || worker(bounds(i)..bounds(i + 1))))
            .collect();
        let mut total = WorkerOutcome::default();
        for handle in handles {
            match handle.join() {
                Ok(outcome) => total.merge(outcome),
                Err(_) => total
                    .errors
                    .record("a worker thread panicked; its operations are lost".to_string()),
            }
        }
        total
    })
}

fn show(key: &[u8; KEY_LEN]) -> &str {
    std::str::from_utf8(key).unwrap_or("<non-ASCII key>")
}

/// Runs `phase` of `workload` against `engine` and checks every answer.
///
/// Everything the operations need (orders, Zipfian draws, versions) is
/// computed before the clock starts; the engine's counters are read just
/// before and just after. Errors never stop the phase: it runs to the end
/// and reports how many operations failed.
pub fn run_phase<E: Engine + ?Sized>(
    engine: &E,
    workload: &Workload,
    phase: Phase,
    options: &RunOptions,
    progress: &dyn Progress,
) -> PhaseReport {
    let threads = if phase.is_read_only() {
        options.threads.max(1)
    } else {
        1
    };
    let ops = phase.ops(workload.n());
    let mixed_ops = match phase {
        Phase::Mixed => workload.mixed_ops(),
        _ => Vec::new(),
    };
    let counters_before = engine.counters();

    let start = Instant::now();
    let mut puts_elapsed: Option<Duration> = None;
    let mut outcome = match phase {
        Phase::FillRandom => drive(0..ops, progress, |p, sampler| {
            fill_op(engine, workload, p, sampler)
        }),
        Phase::ReadRandom => split_across_threads(ops, threads, |range| {
            let mut buf = Vec::new();
            drive(range, progress, |g, sampler| {
                read_op(
                    engine,
                    phase,
                    workload.read_key_index(g),
                    g,
                    &mut buf,
                    sampler,
                )
            })
        }),
        Phase::ReadHot => split_across_threads(ops, threads, |range| {
            let mut buf = Vec::new();
            // `g mod hot` by counting, not dividing: a 64-bit division per
            // operation costs as much as the rest of the harness.
            let hot = workload.hot_positions();
            let mut position = range.start % hot;
            drive(range, progress, |g, sampler| {
                let j = workload.read_key_index(position);
                debug_assert_eq!(j, workload.hot_key_index(g));
                position += 1;
                if position == hot {
                    position = 0;
                }
                read_op(engine, phase, j, g, &mut buf, sampler)
            })
        }),
        Phase::ReadMissing => split_across_threads(ops, threads, |range| {
            let mut buf = Vec::new();
            drive(range, progress, |g, sampler| {
                missing_op(engine, workload, g, &mut buf, sampler)
            })
        }),
        Phase::SeekRandom => split_across_threads(ops, threads, |range| {
            let mut buf = ScanBuffer::new();
            drive(range, progress, |s, sampler| {
                scan_op(engine, workload, s, &mut buf, sampler)
            })
        }),
        Phase::Mixed => {
            let mut buf = Vec::new();
            drive(0..ops, progress, |o, sampler| {
                mixed_op(engine, &mixed_ops, o, &mut buf, sampler)
            })
        }
    };
    if phase == Phase::FillRandom {
        puts_elapsed = Some(start.elapsed());
        progress.stage("flush and wait");
        if let Err(message) = engine.flush_and_wait() {
            outcome
                .errors
                .record(format!("fillrandom: flush and wait failed: {message}"));
        }
    }
    let elapsed = start.elapsed();

    let counters = match (counters_before, engine.counters()) {
        (Some(before), Some(after)) => Some(counter_changes(&before, &after)),
        (None, Some(after)) => Some(counter_changes(&Default::default(), &after)),
        _ => None,
    };
    PhaseReport {
        phase,
        engine: engine.name(),
        settings: engine.settings(),
        n: workload.n(),
        ops,
        threads,
        elapsed,
        puts_elapsed,
        latency: outcome.sampler.summary(),
        errors: outcome.errors,
        counters,
    }
}

fn fill_op<E: Engine + ?Sized>(
    engine: &E,
    workload: &Workload,
    p: u64,
    sampler: &mut Sampler,
) -> Result<(), String> {
    let j = workload.fill_key_index(p);
    let k = key(j);
    let v = value(j);
    sampler
        .time(p, || engine.put(&k, &v))
        .map_err(|e| format!("fillrandom op {p}: put {} failed: {e}", show(&k)))
}

/// A get of the present key `j` that must return `value(j)`.
fn read_op<E: Engine + ?Sized>(
    engine: &E,
    phase: Phase,
    j: u64,
    g: u64,
    buf: &mut Vec<u8>,
    sampler: &mut Sampler,
) -> Result<(), String> {
    let k = key(j);
    buf.clear();
    let found = sampler
        .time(g, || engine.get(&k, buf))
        .map_err(|e| format!("{phase} op {g}: get {} failed: {e}", show(&k)))?;
    if !found {
        return Err(format!(
            "{phase} op {g}: get {} found nothing; expected value({j})",
            show(&k)
        ));
    }
    if !is_versioned_value(buf, j, 0) {
        return Err(format!(
            "{phase} op {g}: get {} returned a {}-byte value that is not value({j})",
            show(&k),
            buf.len()
        ));
    }
    Ok(())
}

fn missing_op<E: Engine + ?Sized>(
    engine: &E,
    workload: &Workload,
    g: u64,
    buf: &mut Vec<u8>,
    sampler: &mut Sampler,
) -> Result<(), String> {
    let k = key(workload.missing_key_index(g));
    buf.clear();
    let found = sampler
        .time(g, || engine.get(&k, buf))
        .map_err(|e| format!("readmissing op {g}: get {} failed: {e}", show(&k)))?;
    if found {
        return Err(format!(
            "readmissing op {g}: get {} (never written) returned a {}-byte value",
            show(&k),
            buf.len()
        ));
    }
    Ok(())
}

fn scan_op<E: Engine + ?Sized>(
    engine: &E,
    workload: &Workload,
    s: u64,
    buf: &mut ScanBuffer,
    sampler: &mut Sampler,
) -> Result<(), String> {
    let (item, expected_len) = workload.scan(s);
    let start = key(2 * item);
    buf.clear();
    sampler
        .time(s, || engine.scan(&start, SCAN_ENTRIES, buf))
        .map_err(|e| {
            format!(
                "seekrandom scan {s}: scan from {} failed: {e}",
                show(&start)
            )
        })?;
    if buf.len() as u64 != expected_len {
        return Err(format!(
            "seekrandom scan {s}: scan from {} returned {} entries, expected {expected_len}",
            show(&start),
            buf.len()
        ));
    }
    for (offset, (got_key, got_value)) in (0u64..).zip(buf.iter()) {
        let j = 2 * (item + offset);
        let want = key(j);
        if got_key != want {
            return Err(format!(
                "seekrandom scan {s}: entry {offset} from {} is {:?}, expected {}",
                show(&start),
                String::from_utf8_lossy(got_key),
                show(&want)
            ));
        }
        if !is_versioned_value(got_value, j, 0) {
            return Err(format!(
                "seekrandom scan {s}: entry {offset} ({}) carries a {}-byte value that is not value({j})",
                show(&want),
                got_value.len()
            ));
        }
    }
    Ok(())
}

fn mixed_op<E: Engine + ?Sized>(
    engine: &E,
    ops: &[MixedOp],
    o: u64,
    buf: &mut Vec<u8>,
    sampler: &mut Sampler,
) -> Result<(), String> {
    let Some(&op) = usize::try_from(o).ok().and_then(|o| ops.get(o)) else {
        return Err(format!("mixed op {o}: no such operation was drawn"));
    };
    let j = op.key_index;
    let k = key(j);
    if op.is_put {
        let v = versioned_value(j, op.version);
        return sampler
            .time(o, || engine.put(&k, &v))
            .map_err(|e| format!("mixed op {o}: put {} failed: {e}", show(&k)));
    }
    buf.clear();
    let found = sampler
        .time(o, || engine.get(&k, buf))
        .map_err(|e| format!("mixed op {o}: get {} failed: {e}", show(&k)))?;
    if !found {
        return Err(format!(
            "mixed op {o}: get {} found nothing; expected version {}",
            show(&k),
            op.version
        ));
    }
    if is_versioned_value(buf, j, op.version) {
        return Ok(());
    }
    // Only on failure: name the stale version if it is one.
    match (0..op.version).rev().find(|&v| is_versioned_value(buf, j, v)) {
        Some(stale) => Err(format!(
            "mixed op {o}: get {} returned version {stale}, expected version {} (stale)",
            show(&k),
            op.version
        )),
        None => Err(format!(
            "mixed op {o}: get {} returned a {}-byte value that is no version of key {j}; expected version {}",
            show(&k),
            buf.len(),
            op.version
        )),
    }
}
