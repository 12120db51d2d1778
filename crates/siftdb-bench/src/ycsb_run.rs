//! Runs the YCSB phases against one engine and checks every answer.
//!
//! Owns: the plan of a YCSB workload (its drawn operations, the records
//! the YCSB phases before it left, the key order scans are checked
//! against, the operations of each thread), the load and workload loops,
//! and the check of every read and scan against the latest version
//! written.
//! Must never: allocate, format or time anything per operation beyond the
//! one-in-eight latency sample (keys are built on the stack, values into
//! reused buffers, everything else drawn before the clock starts), or let
//! a wrong, stale or missing record pass.

use super::engine::{Engine, ScanBuffer};
use super::latency::Sampler;
use super::phase::{Phase, Workload};
use super::workers::{across_threads, drive, split_across_threads, Progress, WorkerOutcome};
use super::ycsb::{
    draw_ycsb, ycsb_key, ycsb_stamp, ycsb_value_into, ycsb_value_matches, YcsbMix, YcsbOp,
    YcsbOpKind, YcsbState, YCSB_KEY_LEN, YCSB_STAMP_LEN,
};

/// Everything a YCSB workload's operations need, drawn before the clock.
pub(super) struct YcsbPlan {
    ops: Vec<YcsbOp>,
    /// The records once every operation ran (workload E, the one with
    /// scans, updates none, so its versions are those at its start too).
    state: YcsbState,
    /// Records that existed when the phase started.
    records_before: u64,
    /// Scans only: the keys of those records in key order, with their
    /// record numbers.
    sorted: Vec<([u8; YCSB_KEY_LEN], u64)>,
    /// Per thread, in operation order, the operations on the records whose
    /// number is the thread's modulo the threads: a record's inserts,
    /// updates and reads stay in one thread, in their order.
    lanes: Vec<Vec<u64>>,
    /// Gets, scans and read-modify-writes among the operations.
    pub(super) reads: u64,
}

impl Workload {
    /// The records and their versions once the YCSB phases of this run
    /// up to `phase` (included) have run: the load's N records, then every
    /// listed workload before `phase` and `phase` itself drawn over them.
    pub fn ycsb_state_after(&self, phase: Phase) -> Result<YcsbState, String> {
        let mut state = self.ycsb_state_before(phase)?;
        if let Some(mix) = phase.ycsb_letter().and_then(YcsbMix::of) {
            draw_ycsb(mix, &mut state, self.ops())?;
        }
        Ok(state)
    }

    /// The records the YCSB phases listed before `phase` leave.
    fn ycsb_state_before(&self, phase: Phase) -> Result<YcsbState, String> {
        let mut state = YcsbState::loaded(self.n());
        for earlier in self.ycsb_phases().iter().filter(|&&p| p < phase) {
            if let Some(mix) = earlier.ycsb_letter().and_then(YcsbMix::of) {
                draw_ycsb(mix, &mut state, self.ops())?;
            }
        }
        Ok(state)
    }
}

/// The plan of YCSB workload `phase` (A … F) for `threads` threads.
pub(super) fn plan(workload: &Workload, phase: Phase, threads: usize) -> Result<YcsbPlan, String> {
    let mix = phase
        .ycsb_letter()
        .and_then(YcsbMix::of)
        .ok_or_else(|| format!("{phase} is not a YCSB workload"))?;
    if workload.ycsb_value_len() < YCSB_STAMP_LEN {
        return Err(format!(
            "YCSB records carry a {YCSB_STAMP_LEN}-byte stamp: --value-size must be at least {YCSB_STAMP_LEN}"
        ));
    }
    let mut state = workload.ycsb_state_before(phase)?;
    let records_before = state.records;
    let ops = draw_ycsb(mix, &mut state, workload.ops())?;
    let mut sorted = Vec::new();
    if mix.scan > 0.0 {
        let count = usize::try_from(records_before).map_err(|_| "too many records".to_string())?;
        sorted
            .try_reserve_exact(count)
            .map_err(|_| format!("cannot allocate the key order of {records_before} records"))?;
        sorted.extend((0..records_before).map(|r| (ycsb_key(r), r)));
        sorted.sort_unstable();
    }
    let t = threads.max(1) as u64;
    let mut lanes = vec![Vec::new(); threads.max(1)];
    let mut reads = 0;
    for (o, op) in (0u64..).zip(&ops) {
        reads += u64::from(op.kind != YcsbOpKind::Update && op.kind != YcsbOpKind::Insert);
        if let Some(lane) = lanes.get_mut(usize::try_from(op.record % t).unwrap_or(0)) {
            lane.push(o);
        }
    }
    Ok(YcsbPlan {
        ops,
        state,
        records_before,
        sorted,
        lanes,
        reads,
    })
}

fn show(key: &[u8]) -> &str {
    std::str::from_utf8(key).unwrap_or("<non-ASCII key>")
}

/// ycsb-load: records `0..N`, version 0, split across threads in
/// contiguous ranges of record numbers.
pub(super) fn load<E: Engine + ?Sized>(
    engine: &E,
    workload: &Workload,
    threads: usize,
    progress: &dyn Progress,
) -> WorkerOutcome {
    let len = workload.ycsb_value_len();
    split_across_threads(workload.n(), threads, |range| {
        let mut value = Vec::with_capacity(len);
        drive(range, progress, |record, sampler| {
            let k = ycsb_key(record);
            ycsb_value_into(record, 0, len, &mut value);
            sampler
                .time(record, || engine.put(&k, &value))
                .map_err(|e| format!("ycsb-load record {record}: put {} failed: {e}", show(&k)))
        })
    })
}

/// A YCSB workload's operations, each thread its lane of them.
pub(super) fn transactions<E: Engine + ?Sized>(
    engine: &E,
    workload: &Workload,
    phase: Phase,
    plan: &YcsbPlan,
    progress: &dyn Progress,
) -> WorkerOutcome {
    let len = workload.ycsb_value_len();
    across_threads(plan.lanes.iter().collect(), |lane: &Vec<u64>| {
        let mut buffers = Buffers {
            read: Vec::with_capacity(len),
            write: Vec::with_capacity(len),
            scan: ScanBuffer::new(),
        };
        let mut at = lane.iter();
        drive(0..lane.len() as u64, progress, |_, sampler| {
            let o = at.next().copied().unwrap_or(u64::MAX);
            let Some(&op) = usize::try_from(o).ok().and_then(|o| plan.ops.get(o)) else {
                return Err(format!("{phase} op {o}: no such operation was drawn"));
            };
            one_op(engine, phase, plan, len, o, op, &mut buffers, sampler)
        })
    })
}

/// The buffers one thread reuses for every operation.
struct Buffers {
    read: Vec<u8>,
    write: Vec<u8>,
    scan: ScanBuffer,
}

#[expect(
    clippy::too_many_arguments,
    reason = "one operation's inputs, all borrowed from the worker's loop"
)]
fn one_op<E: Engine + ?Sized>(
    engine: &E,
    phase: Phase,
    plan: &YcsbPlan,
    len: usize,
    o: u64,
    op: YcsbOp,
    buffers: &mut Buffers,
    sampler: &mut Sampler,
) -> Result<(), String> {
    let k = ycsb_key(op.record);
    let what = || format!("{phase} op {o}: {:?} of {}", op.kind, show(&k));
    match op.kind {
        YcsbOpKind::Read => {
            buffers.read.clear();
            let found = sampler
                .time(o, || engine.get(&k, &mut buffers.read))
                .map_err(|e| format!("{} failed: {e}", what()))?;
            check_record(found, &buffers.read, op.record, op.version, len)
                .map_err(|e| format!("{}: {e}", what()))
        }
        YcsbOpKind::Update | YcsbOpKind::Insert => {
            ycsb_value_into(op.record, op.version, len, &mut buffers.write);
            sampler
                .time(o, || engine.put(&k, &buffers.write))
                .map_err(|e| format!("{} failed: {e}", what()))
        }
        YcsbOpKind::ReadModifyWrite => {
            ycsb_value_into(op.record, op.version, len, &mut buffers.write);
            buffers.read.clear();
            let Buffers { read, write, .. } = buffers;
            let found = sampler
                .time(o, || {
                    let found = engine.get(&k, read)?;
                    engine.put(&k, write)?;
                    Ok::<bool, String>(found)
                })
                .map_err(|e| format!("{} failed: {e}", what()))?;
            check_record(found, read, op.record, op.version.saturating_sub(1), len)
                .map_err(|e| format!("{}: {e}", what()))
        }
        YcsbOpKind::Scan => {
            let limit = usize::try_from(op.scan_len).unwrap_or(usize::MAX);
            buffers.scan.clear();
            sampler
                .time(o, || engine.scan(&k, limit, &mut buffers.scan))
                .map_err(|e| format!("{} failed: {e}", what()))?;
            check_scan(plan, &k, limit, len, &buffers.scan)
                .map_err(|e| format!("{} ({} records): {e}", what(), op.scan_len))
        }
    }
}

/// A get's answer must be version `version` of `record`, whole.
fn check_record(
    found: bool,
    bytes: &[u8],
    record: u64,
    version: u64,
    len: usize,
) -> Result<(), String> {
    if !found {
        return Err(format!("found nothing; expected version {version}"));
    }
    if ycsb_value_matches(bytes, record, version, len) {
        return Ok(());
    }
    Err(match ycsb_stamp(bytes) {
        Some((r, v)) if r == record && v != version => format!(
            "returned version {v}, expected version {version}{}",
            if v < version { " (stale)" } else { "" }
        ),
        Some((r, _)) if r != record => format!("returned record {r}'s value"),
        _ => format!(
            "returned a {}-byte value that is not version {version} of record {record} ({len} bytes)",
            bytes.len()
        ),
    })
}

/// A scan from `start` must return, in key order, the records that
/// existed when the phase began from `start` on with none skipped, each at
/// its latest version, plus any record inserted during the phase (another
/// thread's insert may or may not be seen); `limit` of them unless the
/// keys ran out.
fn check_scan(
    plan: &YcsbPlan,
    start: &[u8],
    limit: usize,
    len: usize,
    got: &ScanBuffer,
) -> Result<(), String> {
    if got.len() > limit {
        return Err(format!("returned {} records", got.len()));
    }
    let mut next = plan.sorted.partition_point(|(k, _)| k.as_slice() < start);
    let mut previous: Option<&[u8]> = None;
    for (i, (key, value)) in got.iter().enumerate() {
        if key < start || previous.is_some_and(|p| key <= p) {
            return Err(format!("entry {i} ({}) is out of key order", show(key)));
        }
        previous = Some(key);
        let Some((record, _)) = ycsb_stamp(value) else {
            return Err(format!("entry {i} ({}) carries no record stamp", show(key)));
        };
        if ycsb_key(record) != key {
            return Err(format!(
                "entry {i} ({}) carries record {record}'s value",
                show(key)
            ));
        }
        let version = if record < plan.records_before {
            match plan.sorted.get(next) {
                Some((want, _)) if want.as_slice() == key => next += 1,
                Some((want, _)) => {
                    return Err(format!(
                        "entry {i} is {}; expected {} (a record skipped)",
                        show(key),
                        show(want)
                    ))
                }
                None => return Err(format!("entry {i} ({}) is past the last key", show(key))),
            }
            plan.state.version(record)
        } else if record < plan.state.records {
            0
        } else {
            return Err(format!("entry {i} ({}) is no record written", show(key)));
        };
        if !ycsb_value_matches(value, record, version, len) {
            return Err(format!(
                "entry {i} ({}) is not version {version} of record {record}",
                show(key)
            ));
        }
    }
    if got.len() < limit && next < plan.sorted.len() {
        return Err(format!(
            "returned {} records while {} follow",
            got.len(),
            plan.sorted.len() - next
        ));
    }
    Ok(())
}

/// Keys and values of one record at `value_len` bytes: what a YCSB phase
/// puts per insert or update, for write amplification.
pub fn ycsb_record_bytes(value_len: usize) -> u64 {
    (YCSB_KEY_LEN + value_len) as u64
}

/// The user bytes `phase` puts: N records for the load, its updates,
/// inserts and read-modify-writes for a workload.
pub(super) fn user_bytes_put(workload: &Workload, phase: Phase, plan: Option<&YcsbPlan>) -> u64 {
    let per = ycsb_record_bytes(workload.ycsb_value_len());
    let puts = match (phase, plan) {
        (Phase::YcsbLoad, _) => workload.n(),
        (_, Some(plan)) => plan
            .ops
            .iter()
            .filter(|op| {
                matches!(
                    op.kind,
                    YcsbOpKind::Update | YcsbOpKind::Insert | YcsbOpKind::ReadModifyWrite
                )
            })
            .count() as u64,
        _ => 0,
    };
    puts.saturating_mul(per)
}
