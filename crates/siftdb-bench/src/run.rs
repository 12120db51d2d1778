//! Runs one phase against one engine and checks every answer.
//!
//! Owns: [`run_phase`]: the timed loops, the split of read phases across
//! threads, the check of every answer, the page-cache drop before a cold
//! read phase, and the counter and peak-memory snapshots around each phase.
//! Must never: allocate, format or time anything per operation beyond the
//! one-in-eight latency sample (keys and expected values are built on the
//! stack, buffers are reused), or let a wrong answer become a figure.

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::cold::ColdCache;
use super::cpu;
use super::data::{is_sized_value, key, sized_value_into, KEY_LEN};
use super::engine::{Engine, LockRetries, ScanBuffer};
use super::latency::Sampler;
use super::phase::{MixedOp, Phase, Workload, PREFIX_LEN, SCAN_ENTRIES};
use super::report::{
    counter_changes, CounterChange, ErrorLog, PhaseReport, TXN_CONFLICTS, TXN_DEADLOCKS,
    TXN_LOCK_TIMEOUTS,
};
use super::resident;
use super::workers::{across_threads, drive, split_across_threads, Progress, WorkerOutcome};
use super::written;
use super::ycsb_run;

/// How a phase is run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunOptions {
    /// Threads that share a phase's operations (at least 1). The read
    /// phases and fillrandom split their operation numbers into contiguous
    /// ranges, one per thread; mixed gives thread t the operations on the
    /// keys whose Zipfian item is t mod threads, in operation order, so
    /// every get still expects the version the puts before it wrote.
    pub threads: usize,
    /// `--cold`: drop the OS page cache before every read phase (every
    /// phase but fillrandom), after its operations are drawn and before
    /// the engine's counters are read and the clock starts. A drop that
    /// fails fails the phase.
    pub cold: Option<ColdCache>,
    /// Keys per `multi_get` in multigetrandom (at least 1).
    pub batch: usize,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            threads: 1,
            cold: None,
            batch: 32,
        }
    }
}

impl RunOptions {
    /// `threads` threads, warm page cache.
    pub fn threads(threads: usize) -> Self {
        RunOptions {
            threads,
            ..RunOptions::default()
        }
    }
}

fn show(key: &[u8; KEY_LEN]) -> &str {
    std::str::from_utf8(key).unwrap_or("<non-ASCII key>")
}

/// Runs `phase` of `workload` against `engine` and checks every answer.
///
/// Everything the operations need (orders, Zipfian draws, versions) is
/// computed before the clock starts; then, for a cold read phase, the page
/// cache is dropped; the engine's counters are read and the process's peak
/// resident memory reset just before the clock starts, and both read again
/// just after it stops. Errors never stop the phase: it runs to the end and
/// reports how many operations failed. Only a failure to prepare (an order
/// that cannot be allocated, a page cache that cannot be dropped) returns
/// before any operation, as a failed phase.
pub fn run_phase<E: Engine + ?Sized>(
    engine: &E,
    workload: &Workload,
    phase: Phase,
    options: &RunOptions,
    progress: &dyn Progress,
) -> PhaseReport {
    let threads = options.threads.max(1);
    let ops = workload.phase_ops(phase);
    let mut report = PhaseReport {
        phase,
        engine: engine.name(),
        settings: engine.settings(),
        n: workload.n(),
        ops,
        reads: workload.phase_reads(phase),
        threads,
        cold: false,
        elapsed: Duration::ZERO,
        puts_elapsed: None,
        latency: None,
        errors: ErrorLog::default(),
        counters: None,
        peak_rss_bytes: None,
        bytes_written: None,
        cpu_seconds: None,
        user_bytes_put: None,
    };
    let prepared = prepare(workload, phase).and_then(|prepared| {
        if let (Some(cold), true) = (&options.cold, phase.is_read_phase()) {
            progress.stage("dropping the page cache");
            cold.drop_now()?;
            report.cold = true;
        }
        Ok(prepared)
    });
    let (load_order, mixed_ops) = match prepared {
        Ok(prepared) => prepared,
        Err(message) => {
            report.errors.record(format!("{phase}: {message}"));
            return report;
        }
    };
    // deleterange: the versions mixed leaves (the latest put per key, if
    // mixed ran before), then the range deletes, timed apart from the gets.
    let mut latest_versions: HashMap<u64, u64> = HashMap::new();
    if phase == Phase::DeleteRange {
        for op in mixed_ops.iter().filter(|op| op.is_put) {
            latest_versions.insert(op.key_index, op.version);
        }
        progress.stage("range deletes");
        let started = Instant::now();
        for (first, past) in workload.delete_ranges() {
            if let Err(message) = engine.delete_range(&key(2 * first), &key(2 * past)) {
                report.errors.record(format!(
                    "deleterange: delete of items {first}..{past} failed: {message}"
                ));
            }
        }
        report.puts_elapsed = Some(started.elapsed());
    }
    let mixed_ops = if phase == Phase::DeleteRange {
        Vec::new()
    } else {
        mixed_ops
    };
    let mixed_lanes = mixed_lanes(&mixed_ops, threads);
    // The txn phases' key pairs, drawn before the clock starts.
    let txn_pairs = if matches!(phase, Phase::Txn | Phase::TxnUniform | Phase::TxnLocking) {
        match workload.txn_pairs(phase) {
            Ok(pairs) => pairs,
            Err(message) => {
                report.errors.record(format!("{phase}: {message}"));
                return report;
            }
        }
    } else {
        Vec::new()
    };
    // A YCSB workload's operations, drawn over the records the YCSB
    // phases before it left.
    let ycsb_plan = if phase.ycsb_letter().is_some() {
        match ycsb_run::plan(workload, phase, threads) {
            Ok(plan) => {
                report.reads = plan.reads;
                Some(plan)
            }
            Err(message) => {
                report.errors.record(format!("{phase}: {message}"));
                return report;
            }
        }
    } else {
        None
    };
    report.user_bytes_put = match phase {
        Phase::FillRandom => Some(ops.saturating_mul((KEY_LEN + workload.value_len()) as u64)),
        _ if phase.is_ycsb() => Some(ycsb_run::user_bytes_put(
            workload,
            phase,
            ycsb_plan.as_ref(),
        )),
        _ => None,
    };
    let value_len = workload.value_len();
    let conflicts = AtomicU64::new(0);
    let lock_retries = [AtomicU64::new(0), AtomicU64::new(0)];
    let counters_before = engine.counters();
    let peak_reset = resident::reset_peak_rss();
    let written_before = written::bytes_written();
    let cpu_before = cpu::process_cpu_seconds();

    let start = Instant::now();
    let mut outcome = match phase {
        Phase::FillRandom => split_across_threads(ops, threads, |range| {
            let mut value = Vec::with_capacity(value_len);
            drive(range, progress, |p, sampler| {
                fill_op(engine, &load_order, p, &mut value, value_len, sampler)
            })
        }),
        Phase::YcsbLoad => ycsb_run::load(engine, workload, threads, progress),
        Phase::YcsbA | Phase::YcsbB | Phase::YcsbC | Phase::YcsbD | Phase::YcsbE | Phase::YcsbF => {
            match &ycsb_plan {
                Some(plan) => ycsb_run::transactions(engine, workload, phase, plan, progress),
                None => WorkerOutcome::default(),
            }
        }
        Phase::ReadRandom => split_across_threads(ops, threads, |range| {
            let mut buf = Vec::new();
            drive(range, progress, |g, sampler| {
                read_op(
                    engine,
                    phase,
                    workload.read_key_index(g),
                    g,
                    &mut buf,
                    value_len,
                    sampler,
                )
            })
        }),
        Phase::MultiGetRandom => {
            let batch = options.batch.max(1) as u64;
            split_across_threads(ops.div_ceil(batch), threads, |range| {
                drive(range, progress, |b, sampler| {
                    let first = b * batch;
                    multi_get_op(engine, workload, first..(first + batch).min(ops), sampler)
                })
            })
        }
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
                read_op(engine, phase, j, g, &mut buf, value_len, sampler)
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
        Phase::SeekRandomRev => split_across_threads(ops, threads, |range| {
            let mut buf = ScanBuffer::new();
            drive(range, progress, |s, sampler| {
                rev_scan_op(engine, workload, s, &mut buf, sampler)
            })
        }),
        Phase::SeekPrefix => split_across_threads(ops, threads, |range| {
            let mut buf = ScanBuffer::new();
            drive(range, progress, |s, sampler| {
                prefix_scan_op(engine, workload, s, &mut buf, sampler)
            })
        }),
        Phase::SeekEmpty => split_across_threads(ops, threads, |range| {
            let mut buf = ScanBuffer::new();
            drive(range, progress, |g, sampler| {
                empty_scan_op(engine, workload, g, &mut buf, sampler)
            })
        }),
        Phase::DeleteRange => split_across_threads(ops, threads, |range| {
            let mut buf = Vec::new();
            drive(range, progress, |g, sampler| {
                after_delete_op(engine, workload, &latest_versions, g, &mut buf, sampler)
            })
        }),
        Phase::Txn | Phase::TxnUniform => split_across_threads(ops, threads, |range| {
            drive(range, progress, |o, sampler| {
                txn_op(engine, &txn_pairs, o, &conflicts, sampler)
            })
        }),
        Phase::TxnLocking => split_across_threads(ops, threads, |range| {
            drive(range, progress, |o, sampler| {
                locking_txn_op(engine, &txn_pairs, o, &lock_retries, sampler)
            })
        }),
        Phase::Mixed => across_threads(mixed_lanes, |lane| {
            let mut buf = Vec::new();
            let mut value = Vec::with_capacity(value_len);
            let mut at = lane.iter();
            drive(0..lane.len() as u64, progress, |_, sampler| {
                let o = at.next().copied().unwrap_or(u64::MAX);
                mixed_op(
                    engine, &mixed_ops, o, &mut buf, &mut value, value_len, sampler,
                )
            })
        }),
    };
    if phase.is_fill() {
        report.puts_elapsed = Some(start.elapsed());
        progress.stage("flush and wait");
        if let Err(message) = engine.flush_and_wait() {
            outcome
                .errors
                .record(format!("{phase}: flush and wait failed: {message}"));
        }
    }
    report.elapsed = start.elapsed();
    report.cpu_seconds = cpu_before
        .zip(cpu::process_cpu_seconds())
        .map(|(before, after)| (after - before).max(0.0));

    report.bytes_written = written_before
        .zip(written::bytes_written())
        .map(|(before, after)| after.saturating_sub(before));
    report.peak_rss_bytes = if peak_reset {
        resident::peak_rss_bytes()
    } else {
        None
    };
    report.counters = match (counters_before, engine.counters()) {
        (Some(before), Some(after)) => Some(counter_changes(&before, &after)),
        (None, Some(after)) => Some(counter_changes(&Default::default(), &after)),
        _ => None,
    };
    // Conflicts (optimistic), deadlocks and lock timeouts (locking) met
    // and retried by the phase's transactions.
    let retried: &[(&str, &AtomicU64)] = match phase {
        Phase::Txn | Phase::TxnUniform => &[(TXN_CONFLICTS, &conflicts)],
        Phase::TxnLocking => &[
            (TXN_DEADLOCKS, &lock_retries[0]),
            (TXN_LOCK_TIMEOUTS, &lock_retries[1]),
        ],
        _ => &[],
    };
    for (name, count) in retried {
        let count = count.load(Ordering::Relaxed);
        let change = CounterChange {
            delta: i64::try_from(count).unwrap_or(i64::MAX),
            end: count,
        };
        report
            .counters
            .get_or_insert_with(BTreeMap::new)
            .insert((*name).to_string(), change);
    }
    report.latency = outcome.sampler.summary();
    report.errors = outcome.errors;
    report
}

/// One transaction of a txn phase: its latency includes its retries.
fn txn_op<E: Engine + ?Sized>(
    engine: &E,
    pairs: &[(u64, u64)],
    o: u64,
    conflicts: &AtomicU64,
    sampler: &mut Sampler,
) -> Result<(), String> {
    let Some(&(a, b)) = usize::try_from(o).ok().and_then(|o| pairs.get(o)) else {
        return Err(format!("txn op {o}: no such pair was drawn"));
    };
    let met = sampler
        .time(o, || engine.read_modify_write(&key(a), &key(b)))
        .map_err(|e| format!("txn op {o}: keys {a} and {b}: {e}"))?;
    conflicts.fetch_add(met, Ordering::Relaxed);
    Ok(())
}

/// One transaction of the txn-locking phase: its latency includes its
/// retries; `retries` counts deadlocks, then timeouts.
fn locking_txn_op<E: Engine + ?Sized>(
    engine: &E,
    pairs: &[(u64, u64)],
    o: u64,
    retries: &[AtomicU64; 2],
    sampler: &mut Sampler,
) -> Result<(), String> {
    let Some(&(a, b)) = usize::try_from(o).ok().and_then(|o| pairs.get(o)) else {
        return Err(format!("txn op {o}: no such pair was drawn"));
    };
    let LockRetries {
        deadlocks,
        timeouts,
    } = sampler
        .time(o, || engine.locking_read_modify_write(&key(a), &key(b)))
        .map_err(|e| format!("txn op {o}: keys {a} and {b}: {e}"))?;
    let [d, t] = retries;
    d.fetch_add(deadlocks, Ordering::Relaxed);
    t.fetch_add(timeouts, Ordering::Relaxed);
    Ok(())
}

/// What a phase needs before its clock starts: fillrandom's load order,
/// mixed's drawn operations (each empty for the other phases).
fn prepare(workload: &Workload, phase: Phase) -> Result<(Vec<u64>, Vec<MixedOp>), String> {
    Ok(match phase {
        Phase::FillRandom => (workload.load_order()?, Vec::new()),
        // deleterange needs mixed's puts: the values its gets may find.
        Phase::Mixed | Phase::DeleteRange => (Vec::new(), workload.mixed_ops()?),
        _ => (Vec::new(), Vec::new()),
    })
}

/// Mixed's operation numbers per thread: thread t gets, in operation
/// order, the operations on keys whose Zipfian item is t mod `threads`, so
/// each key's puts and gets stay in one thread, in their order.
fn mixed_lanes(ops: &[MixedOp], threads: usize) -> Vec<Vec<u64>> {
    let t = threads.max(1) as u64;
    let mut lanes = vec![Vec::new(); threads.max(1)];
    for (o, op) in (0u64..).zip(ops) {
        let lane = usize::try_from(op.key_index / 2 % t).unwrap_or(0);
        if let Some(lane) = lanes.get_mut(lane) {
            lane.push(o);
        }
    }
    lanes
}

fn fill_op<E: Engine + ?Sized>(
    engine: &E,
    load_order: &[u64],
    p: u64,
    v: &mut Vec<u8>,
    value_len: usize,
    sampler: &mut Sampler,
) -> Result<(), String> {
    let Some(&item) = usize::try_from(p).ok().and_then(|i| load_order.get(i)) else {
        return Err(format!("fillrandom op {p}: no such load-order position"));
    };
    let j = 2 * item;
    let k = key(j);
    sized_value_into(j, 0, value_len, v);
    let v = v.as_slice();
    sampler
        .time(p, || engine.put(&k, v))
        .map_err(|e| format!("fillrandom op {p}: put {} failed: {e}", show(&k)))
}

/// A get of the present key `j` that must return `value(j)`.
fn read_op<E: Engine + ?Sized>(
    engine: &E,
    phase: Phase,
    j: Option<u64>,
    g: u64,
    buf: &mut Vec<u8>,
    value_len: usize,
    sampler: &mut Sampler,
) -> Result<(), String> {
    let Some(j) = j else {
        return Err(format!("{phase} op {g}: no such read-order position"));
    };
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
    if !is_sized_value(buf, j, 0, value_len) {
        return Err(format!(
            "{phase} op {g}: get {} returned a {}-byte value that is not value({j})",
            show(&k),
            buf.len()
        ));
    }
    Ok(())
}

/// multigetrandom's batch: readrandom's keys for ops `gs`, in one
/// `multi_get`, each answer checked as readrandom checks its get.
fn multi_get_op<E: Engine + ?Sized>(
    engine: &E,
    workload: &Workload,
    gs: Range<u64>,
    sampler: &mut Sampler,
) -> Result<(), String> {
    let phase = Phase::MultiGetRandom;
    let first = gs.start;
    let mut indexes = Vec::with_capacity(gs.clone().count());
    for g in gs {
        let j = workload
            .read_key_index(g)
            .ok_or_else(|| format!("{phase} op {g}: no such read-order position"))?;
        indexes.push(j);
    }
    let keys: Vec<Vec<u8>> = indexes.iter().map(|&j| key(j).to_vec()).collect();
    let mut values = Vec::with_capacity(keys.len());
    sampler
        .time(first, || engine.multi_get(&keys, &mut values))
        .map_err(|e| format!("{phase} batch at op {first}: multi_get failed: {e}"))?;
    if values.len() != keys.len() {
        return Err(format!(
            "{phase} batch at op {first}: {} answers for {} keys",
            values.len(),
            keys.len()
        ));
    }
    let value_len = workload.value_len();
    for (&j, value) in indexes.iter().zip(&values) {
        let k = key(j);
        match value {
            Some(v) if is_sized_value(v, j, 0, value_len) => {}
            Some(v) => {
                return Err(format!(
                    "{phase}: {} returned a {}-byte value that is not value({j})",
                    show(&k),
                    v.len()
                ))
            }
            None => {
                return Err(format!(
                    "{phase}: {} found nothing; expected value({j})",
                    show(&k)
                ))
            }
        }
    }
    Ok(())
}

/// deleterange's get `g`: the present key at read-order position `g`,
/// absent when a range delete covered it, else present with `value(j)` or
/// the version mixed left it at.
fn after_delete_op<E: Engine + ?Sized>(
    engine: &E,
    workload: &Workload,
    latest_versions: &HashMap<u64, u64>,
    g: u64,
    buf: &mut Vec<u8>,
    sampler: &mut Sampler,
) -> Result<(), String> {
    let Some(j) = workload.read_key_index(g) else {
        return Err(format!("deleterange op {g}: no such read-order position"));
    };
    let k = key(j);
    buf.clear();
    let found = sampler
        .time(g, || engine.get(&k, buf))
        .map_err(|e| format!("deleterange op {g}: get {} failed: {e}", show(&k)))?;
    let deleted = workload.is_range_deleted(j / 2);
    match (deleted, found) {
        (true, false) => Ok(()),
        (true, true) => Err(format!(
            "deleterange op {g}: get {} returned a value; a range delete covered it",
            show(&k)
        )),
        (false, false) => Err(format!(
            "deleterange op {g}: get {} found nothing; no range delete covered it",
            show(&k)
        )),
        (false, true) => {
            let latest = latest_versions.get(&j).copied();
            let value_len = workload.value_len();
            if is_sized_value(buf, j, 0, value_len)
                || latest.is_some_and(|v| is_sized_value(buf, j, v, value_len))
            {
                Ok(())
            } else {
                Err(format!(
                    "deleterange op {g}: get {} returned a {}-byte value that is not value({j}) \
                     nor its latest version",
                    show(&k),
                    buf.len()
                ))
            }
        }
    }
}

fn missing_op<E: Engine + ?Sized>(
    engine: &E,
    workload: &Workload,
    g: u64,
    buf: &mut Vec<u8>,
    sampler: &mut Sampler,
) -> Result<(), String> {
    let Some(j) = workload.missing_key_index(g) else {
        return Err(format!("readmissing op {g}: no such read-order position"));
    };
    let k = key(j);
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
    let Some((item, expected_len)) = workload.scan(s) else {
        return Err(format!("seekrandom scan {s}: no such read-order position"));
    };
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
    check_entries(
        buf,
        item,
        expected_len,
        workload.value_len(),
        &format!("seekrandom scan {s}: scan from {}", show(&start)),
    )
}

fn rev_scan_op<E: Engine + ?Sized>(
    engine: &E,
    workload: &Workload,
    s: u64,
    buf: &mut ScanBuffer,
    sampler: &mut Sampler,
) -> Result<(), String> {
    let Some((item, expected_len)) = workload.scan_rev(s) else {
        return Err(format!(
            "seekrandom-rev scan {s}: no such read-order position"
        ));
    };
    let end = key(2 * item);
    let what = format!("seekrandom-rev scan {s}: scan down from {}", show(&end));
    buf.clear();
    sampler
        .time(s, || engine.scan_rev(&end, SCAN_ENTRIES, buf))
        .map_err(|e| format!("{what} failed: {e}"))?;
    // Descending from `item`: entry `offset` is item − offset.
    check_items(
        buf,
        expected_len,
        |offset| item - offset,
        workload.value_len(),
        &what,
    )
}

/// Checks that `buf` holds exactly the present keys `2·first`, `2·first +
/// 2`, … (`len` of them) with their first values; `what` names the scan.
fn check_entries(
    buf: &ScanBuffer,
    first: u64,
    len: u64,
    value_len: usize,
    what: &str,
) -> Result<(), String> {
    check_items(buf, len, |offset| first + offset, value_len, what)
}

/// Checks that `buf` holds exactly `len` entries, entry `offset` being the
/// present key `2·item(offset)` with its first value.
fn check_items(
    buf: &ScanBuffer,
    len: u64,
    item: impl Fn(u64) -> u64,
    value_len: usize,
    what: &str,
) -> Result<(), String> {
    if buf.len() as u64 != len {
        return Err(format!(
            "{what} returned {} entries, expected {len}",
            buf.len()
        ));
    }
    for (offset, (got_key, got_value)) in (0u64..).zip(buf.iter()) {
        let j = 2 * item(offset);
        let want = key(j);
        if got_key != want {
            return Err(format!(
                "{what}: entry {offset} is {:?}, expected {}",
                String::from_utf8_lossy(got_key),
                show(&want)
            ));
        }
        if !is_sized_value(got_value, j, 0, value_len) {
            return Err(format!(
                "{what}: entry {offset} ({}) carries a {}-byte value that is not value({j})",
                show(&want),
                got_value.len()
            ));
        }
    }
    Ok(())
}

fn prefix_scan_op<E: Engine + ?Sized>(
    engine: &E,
    workload: &Workload,
    s: u64,
    buf: &mut ScanBuffer,
    sampler: &mut Sampler,
) -> Result<(), String> {
    let Some((j, first, expected_len)) = workload.prefix_scan(s) else {
        return Err(format!("seekprefix scan {s}: no such read-order position"));
    };
    let whole = key(j);
    let prefix = whole.get(..PREFIX_LEN).unwrap_or(&whole);
    let shown = String::from_utf8_lossy(prefix);
    buf.clear();
    sampler
        .time(s, || engine.scan_prefix(prefix, SCAN_ENTRIES, buf))
        .map_err(|e| format!("seekprefix scan {s}: scan of prefix {shown} failed: {e}"))?;
    check_entries(
        buf,
        first,
        expected_len,
        workload.value_len(),
        &format!("seekprefix scan {s}: scan of prefix {shown}"),
    )
}

fn empty_scan_op<E: Engine + ?Sized>(
    engine: &E,
    workload: &Workload,
    g: u64,
    buf: &mut ScanBuffer,
    sampler: &mut Sampler,
) -> Result<(), String> {
    let Some(j) = workload.empty_range(g) else {
        return Err(format!("seekempty scan {g}: no such read-order position"));
    };
    let (start, end) = (key(j), key(j + 1));
    buf.clear();
    sampler
        .time(g, || engine.scan_range(&start, &end, SCAN_ENTRIES, buf))
        .map_err(|e| {
            format!(
                "seekempty scan {g}: scan of {}..{} failed: {e}",
                show(&start),
                show(&end)
            )
        })?;
    if let Some((got, _)) = buf.iter().next() {
        return Err(format!(
            "seekempty scan {g}: {}..{} holds no key, but the scan returned {} entries, the first {:?}",
            show(&start),
            show(&end),
            buf.len(),
            String::from_utf8_lossy(got)
        ));
    }
    Ok(())
}

fn mixed_op<E: Engine + ?Sized>(
    engine: &E,
    ops: &[MixedOp],
    o: u64,
    buf: &mut Vec<u8>,
    value: &mut Vec<u8>,
    value_len: usize,
    sampler: &mut Sampler,
) -> Result<(), String> {
    let Some(&op) = usize::try_from(o).ok().and_then(|o| ops.get(o)) else {
        return Err(format!("mixed op {o}: no such operation was drawn"));
    };
    let j = op.key_index;
    let k = key(j);
    if op.is_put {
        sized_value_into(j, op.version, value_len, value);
        let v = value.as_slice();
        return sampler
            .time(o, || engine.put(&k, v))
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
    if is_sized_value(buf, j, op.version, value_len) {
        return Ok(());
    }
    // Only on failure: name the stale version if it is one.
    match (0..op.version)
        .rev()
        .find(|&v| is_sized_value(buf, j, v, value_len))
    {
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
