//! Power loss and I/O errors, simulated exactly on the in-memory
//! [`FaultFs`]: what a database must still hold after the machine dies at a
//! random I/O operation (in a write, a flush, a compaction or a recovery),
//! and after the Nth operation of a small workload fails.
//!
//! The guarantees checked:
//! - with `sync_writes(true)`, every acknowledged batch survives a power loss;
//! - with `sync_writes(false)`, what survives is a prefix of the acknowledged
//!   batches (earlier logs were synced when they were rotated out);
//! - a batch is never half applied, deleted keys stay deleted, and the
//!   database always opens again;
//! - an injected I/O error is an `Err` to its caller (never a panic), the
//!   database then keeps working or refuses writes with `Error::ReadOnly`, and
//!   a reopened database holds every write that returned `Ok`.
//!
//! Every failure message names the seed (or N) that replays it.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use std::collections::BTreeMap;

use siftdb_testkit::SplitMix64;
use siftdb_testkit::{FaultFs, FaultMode, PowerLoss};
use std::path::Path;

use siftdb::internals::filename::table_file_name;
use siftdb::internals::fs::FileSystem;
use siftdb::internals::key::{internal_key, SeqNo, ValueKind};
use siftdb::internals::manifest::{
    read_manifest, read_manifest_copy, write_manifest, KeyspaceRecord, KeyspaceSettings,
    ManifestState, TableRecord,
};
use siftdb::{Db, Error, Options, WriteBatch};

const DB: &str = "/db";
/// The key every batch of the power-loss workload writes its number under.
const LAST: &[u8] = b"last";

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// One batch: its operations in order (`None` deletes).
#[derive(Debug, Clone)]
struct Batch(Vec<(Vec<u8>, Option<Vec<u8>>)>);

impl Batch {
    fn to_write_batch(&self) -> WriteBatch {
        let mut batch = WriteBatch::new();
        for (key, value) in &self.0 {
            match value {
                Some(v) => batch.put(key, v),
                None => batch.delete(key),
            }
        }
        batch
    }

    fn apply(&self, model: &mut Model) {
        for (key, value) in &self.0 {
            match value {
                Some(v) => model.insert(key.clone(), v.clone()),
                None => model.remove(key),
            };
        }
    }
}

fn options(fs: &FaultFs, sync: bool) -> Options {
    Options::default()
        .file_system(fs.shared())
        .sync_writes(sync)
        .memtable_bytes(8 << 10)
        .block_size(512)
        .level0_compaction_trigger(2)
        .level0_stop_writes(4)
        .level1_bytes(16 << 10)
        .table_target_bytes(8 << 10)
}

/// Batch `number`'s operations over `keys` keys: a marker (`last` =
/// `number`, or a key of its own with `own_marker`), then 1–6 puts or
/// deletes whose values carry the batch number.
fn batch(rng: &mut SplitMix64, number: usize, keys: u64, own_marker: bool) -> Batch {
    let mut ops = Vec::new();
    if own_marker {
        ops.push((
            format!("m{number:05}").into_bytes(),
            Some(b"present".to_vec()),
        ));
    } else {
        ops.push((LAST.to_vec(), Some(number.to_string().into_bytes())));
    }
    for _ in 0..1 + rng.next() % 6 {
        let key = format!("k{:03}", rng.next() % keys).into_bytes();
        if rng.next().is_multiple_of(5) {
            ops.push((key, None));
        } else {
            let pad = (rng.next() % 160) as usize;
            let mut value = format!("b{number}:").into_bytes();
            value.extend(std::iter::repeat_n(b'x', pad));
            ops.push((key, Some(value)));
        }
    }
    Batch(ops)
}

/// The power-loss workload: batches numbered from 1.
fn workload(seed: u64, count: usize) -> Vec<Batch> {
    let mut rng = SplitMix64::new(seed);
    (1..=count)
        .map(|n| batch(&mut rng, n, 150, false))
        .collect()
}

fn model_after(batches: &[Batch]) -> Model {
    let mut model = Model::new();
    for b in batches {
        b.apply(&mut model);
    }
    model
}

/// Everything the database holds, by a full scan, cross-checked by `get`.
fn contents(db: &Db, context: &str) -> Model {
    let scanned: Model = db
        .iter()
        .map(|r| {
            let (k, v) = r.unwrap_or_else(|e| panic!("{context}: scan failed: {e}"));
            (k.to_vec(), v.to_vec())
        })
        .collect();
    for (key, value) in &scanned {
        let got = db
            .get(key)
            .unwrap_or_else(|e| panic!("{context}: get failed: {e}"));
        assert_eq!(
            got.as_deref(),
            Some(value.as_slice()),
            "{context}: get and scan disagree on {}",
            String::from_utf8_lossy(key)
        );
    }
    scanned
}

fn describe_difference(got: &Model, want: &Model) -> String {
    let mut lines = Vec::new();
    for key in got.keys().chain(want.keys()) {
        let (g, w) = (got.get(key), want.get(key));
        if g != w {
            let show = |v: Option<&Vec<u8>>| {
                v.map_or("<absent>".to_string(), |v| {
                    String::from_utf8_lossy(&v[..v.len().min(12)]).into_owned()
                })
            };
            lines.push(format!(
                "{}: got {}, want {}",
                String::from_utf8_lossy(key),
                show(g),
                show(w)
            ));
        }
        if lines.len() >= 8 {
            break;
        }
    }
    lines.join("; ")
}

/// How one power-loss round ends.
struct Round {
    seed: u64,
    sync: bool,
    mode: PowerLoss,
    crash_at: u64,
}

impl Round {
    fn context(&self) -> String {
        format!(
            "seed {} sync_writes({}) {:?} power lost at op {}",
            self.seed, self.sync, self.mode, self.crash_at
        )
    }
}

/// How far a workload got before the power went.
struct Run {
    /// Batches acknowledged.
    acked: usize,
    /// Whether one more batch was being written.
    in_flight: bool,
    /// Whether the open itself succeeded.
    opened: bool,
    /// Background work done before the power went.
    flushes: u64,
    compactions: u64,
}

/// Opens, then runs `batches` (with an explicit flush or compaction now and
/// then) until a write fails because the power went.
fn run_until_power_loss(fs: &FaultFs, sync: bool, batches: &[Batch], context: &str) -> Run {
    let mut run = Run {
        acked: 0,
        in_flight: false,
        opened: false,
        flushes: 0,
        compactions: 0,
    };
    let Ok(db) = Db::open_with(DB, options(fs, sync)) else {
        assert!(
            fs.power_losses() > 0,
            "{context}: open failed without a fault"
        );
        return run;
    };
    run.opened = true;
    for (i, b) in batches.iter().enumerate() {
        match db.write(b.to_write_batch()) {
            Ok(()) => run.acked = i + 1,
            Err(e) => {
                assert!(
                    fs.power_losses() > 0,
                    "{context}: write failed without a fault: {e}"
                );
                run.in_flight = true;
                break;
            }
        }
        let chores = match i % 97 {
            40 => db.flush(),
            90 => db.compact(),
            _ => Ok(()),
        };
        if let Err(e) = chores {
            assert!(
                fs.power_losses() > 0,
                "{context}: flush/compact failed without a fault: {e}"
            );
            break;
        }
    }
    let stats = db.stats();
    (run.flushes, run.compactions) = (stats.flushes, stats.compactions);
    drop(db);
    run
}

/// What a sweep of power-loss rounds exercised, so that a sweep which
/// stopped reaching the interesting cases fails instead of passing idly.
#[derive(Debug, Default)]
struct Tally {
    rounds: u64,
    /// The power went during the workload (not after its last write).
    during_workload: u64,
    /// ... during the first open.
    during_open: u64,
    /// ... after at least one flush and one compaction.
    after_compaction: u64,
    /// Acknowledged batches were lost (allowed only without sync_writes).
    lost_acknowledged: u64,
    /// The batch in flight survived.
    in_flight_survived: u64,
    /// Recovery dropped a torn log tail.
    torn_tails: u64,
    /// The power went again during recovery.
    recovery_interrupted: u64,
}

fn power_loss_round(round: &Round, batches: &[Batch], tally: &mut Tally) {
    let context = round.context();
    let fs = FaultFs::new();
    fs.power_loss_after(round.crash_at, round.mode);
    let run = run_until_power_loss(&fs, round.sync, batches, &context);
    tally.rounds += 1;
    if fs.power_losses() == 0 {
        fs.power_loss(round.mode);
    } else {
        tally.during_workload += 1;
        tally.during_open += u64::from(!run.opened);
    }
    tally.after_compaction += u64::from(run.flushes > 0 && run.compactions > 0);

    // Sometimes the power goes again while the database recovers.
    let mut rng = SplitMix64::new(round.seed ^ 0x5eed);
    if rng.next().is_multiple_of(3) {
        let again = 1 + rng.next() % 40;
        let before = fs.power_losses();
        fs.power_loss_after(again, round.mode);
        if let Ok(db) = Db::open_with(DB, options(&fs, round.sync)) {
            drop(db);
        }
        fs.clear_faults();
        if fs.power_losses() == before {
            fs.power_loss(round.mode);
        } else {
            tally.recovery_interrupted += 1;
        }
    }

    let db = Db::open_with(DB, options(&fs, round.sync))
        .unwrap_or_else(|e| panic!("{context}: reopen after power loss failed: {e}"));
    tally.torn_tails += u64::from(db.recovery_report().torn_tail.is_some());
    let got = contents(&db, &context);
    let survived: usize = match got.get(LAST) {
        None => 0,
        Some(v) => String::from_utf8_lossy(v)
            .parse()
            .unwrap_or_else(|e| panic!("{context}: marker {v:?}: {e}")),
    };
    let acked = run.acked;
    let attempted = acked + usize::from(run.in_flight);
    assert!(
        survived <= attempted,
        "{context}: batch {survived} survived but only {attempted} were attempted"
    );
    if round.sync {
        assert!(
            survived >= acked,
            "{context}: {acked} batches acknowledged with sync_writes, only {survived} survived"
        );
    }
    tally.lost_acknowledged += u64::from(survived < acked);
    tally.in_flight_survived += u64::from(survived > acked);
    let want = model_after(&batches[..survived]);
    assert!(
        got == want,
        "{context}: recovered state is not the state after batch {survived} ({acked} acknowledged): {}",
        describe_difference(&got, &want)
    );

    // The recovered database keeps working and survives the next power loss.
    let mut next = Batch(vec![(b"after".to_vec(), Some(b"recovery".to_vec()))]);
    next.0
        .push((LAST.to_vec(), Some(survived.to_string().into_bytes())));
    db.write(next.to_write_batch())
        .unwrap_or_else(|e| panic!("{context}: write after recovery: {e}"));
    db.flush()
        .unwrap_or_else(|e| panic!("{context}: flush after recovery: {e}"));
    fs.power_loss(PowerLoss::DropUnsynced);
    drop(db);
    let db = Db::open_with(DB, options(&fs, round.sync))
        .unwrap_or_else(|e| panic!("{context}: second reopen failed: {e}"));
    let mut want = want;
    next.apply(&mut want);
    let got = contents(&db, &context);
    assert!(
        got == want,
        "{context}: a flushed write after recovery was lost: {}",
        describe_difference(&got, &want)
    );
}

/// Counted operations of a whole fault-free run of `batches`.
fn ops_of_clean_run(sync: bool, batches: &[Batch]) -> u64 {
    let fs = FaultFs::new();
    let run = run_until_power_loss(&fs, sync, batches, "clean run");
    assert_eq!(run.acked, batches.len());
    assert!(
        run.flushes > 2 && run.compactions > 0,
        "the workload no longer flushes and compacts"
    );
    fs.op_count()
}

fn mode_for(choice: u64, seed: u64) -> PowerLoss {
    match choice % 3 {
        0 => PowerLoss::DropUnsynced,
        1 => PowerLoss::TornUnsynced { seed },
        _ => PowerLoss::ReorderedUnsynced { seed },
    }
}

/// Checks that a sweep reached what it is meant to test.
fn check_tally(tally: &Tally, sync: bool, every_operation: bool) {
    eprintln!("sync_writes({sync}): {tally:?}");
    assert!(tally.during_workload * 2 >= tally.rounds, "{tally:?}");
    assert!(tally.after_compaction * 5 >= tally.rounds, "{tally:?}");
    if every_operation || !sync {
        assert!(tally.torn_tails > 0, "{tally:?}");
    }
    assert!(tally.recovery_interrupted > 0, "{tally:?}");
    if every_operation {
        assert!(tally.during_open > 0, "{tally:?}");
        if sync {
            // A synced write whose append reached the OS before its sync
            // was cut short may survive; the sweep must see both outcomes.
            assert!(tally.in_flight_survived > 0, "{tally:?}");
        }
    }
    if !sync {
        // Without sync_writes a power loss does lose acknowledged writes:
        // otherwise this sweep would not be testing the prefix rule.
        assert!(tally.lost_acknowledged > 0, "{tally:?}");
    }
}

fn power_loss_rounds(sync: bool, rounds: u64) {
    const BATCHES: usize = 300;
    let sample = workload(0, BATCHES);
    // Crash points cover the whole run and a little past it (a power loss
    // after the last write, while background work may still be running).
    let span = ops_of_clean_run(sync, &sample) * 11 / 10;
    let mut tally = Tally::default();
    for seed in 0..rounds {
        let batches = workload(seed, BATCHES);
        let mut rng = SplitMix64::new(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(sync));
        let round = Round {
            seed,
            sync,
            mode: mode_for(seed, rng.next()),
            crash_at: 1 + rng.next() % span,
        };
        power_loss_round(&round, &batches, &mut tally);
    }
    check_tally(&tally, sync, false);
}

/// A power loss at every counted operation of a short workload in turn
/// (the random rounds rarely land in the narrow windows between a rename
/// and the directory sync that makes it durable).
fn power_loss_at_every_operation(sync: bool) {
    let batches = workload(1000, 100);
    let span = ops_of_clean_run(sync, &batches) + 10;
    let mut tally = Tally::default();
    for crash_at in 1..=span {
        let round = Round {
            seed: 1000 + crash_at,
            sync,
            mode: mode_for(crash_at, crash_at),
            crash_at,
        };
        power_loss_round(&round, &batches, &mut tally);
    }
    check_tally(&tally, sync, true);
}

#[test]
fn synced_writes_survive_power_loss_at_every_operation() {
    power_loss_at_every_operation(true);
}

#[test]
fn unsynced_writes_recover_to_a_prefix_at_every_operation() {
    power_loss_at_every_operation(false);
}

#[test]
fn synced_writes_survive_power_loss_at_any_operation() {
    power_loss_rounds(true, 100);
}

#[test]
fn unsynced_writes_recover_to_a_prefix_after_power_loss() {
    power_loss_rounds(false, 100);
}

#[test]
fn a_process_crash_loses_no_acknowledged_write() {
    for seed in 0..20u64 {
        let context = format!("seed {seed} process crash");
        let batches = workload(seed, 200);
        let fs = FaultFs::new();
        let db = Db::open_with(DB, options(&fs, false)).unwrap();
        let stop = 1 + (SplitMix64::new(seed).next() % 200) as usize;
        for b in &batches[..stop] {
            db.write(b.to_write_batch()).unwrap();
        }
        fs.kill_process();
        drop(db);
        let db = Db::open_with(DB, options(&fs, false))
            .unwrap_or_else(|e| panic!("{context}: reopen failed: {e}"));
        let got = contents(&db, &context);
        let want = model_after(&batches[..stop]);
        assert!(
            got == want,
            "{context}: {}",
            describe_difference(&got, &want)
        );
    }
}

/// What happened to each batch of the I/O-error workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    NotAttempted,
    Ok,
    Failed,
}

const ERROR_BATCHES: usize = 60;

fn error_options(fs: &FaultFs) -> Options {
    options(fs, true).memtable_bytes(4 << 10)
}

/// What the callers of one I/O-error case saw, and what a sweep of cases
/// exercised (so that a sweep which stopped reaching them fails).
#[derive(Debug, Default)]
struct Seen {
    cases: u64,
    /// `Error::Io` returned to a caller.
    io_errors: u64,
    /// `Error::ReadOnly` returned to a caller (a clean refusal).
    poisoned: u64,
    /// An open failed.
    open_failures: u64,
    /// A write failed.
    failed_writes: u64,
    /// A write succeeded after an earlier call failed on the same handle.
    ok_after_failure: u64,
    /// A failed batch was found applied (whole) after reopening.
    failed_but_present: u64,
}

/// Accepts the errors a fault may cause: the injected I/O error itself, or a
/// clean refusal afterwards. Anything else (corruption, a bad argument) is a bug.
fn check_error(e: &Error, seen: &mut Seen, context: &str) {
    match e {
        Error::Io { .. } => seen.io_errors += 1,
        Error::ReadOnly { .. } | Error::Background { .. } => seen.poisoned += 1,
        _ => panic!("{context}: unexpected kind of error: {e}"),
    }
}

/// The I/O-error workload: open, writes with a flush and a compaction in
/// between, close, reopen, more writes. Every call's error is checked and
/// tolerated; returns each batch's outcome.
fn error_workload(fs: &FaultFs, batches: &[Batch], seen: &mut Seen, context: &str) -> Vec<Outcome> {
    let mut outcomes = vec![Outcome::NotAttempted; batches.len()];
    let half = batches.len() / 2;
    for (phase, range) in [(0, 0..half), (1, half..batches.len())] {
        let db = match Db::open_with(DB, error_options(fs)) {
            Ok(db) => db,
            Err(e) => {
                check_error(&e, seen, context);
                seen.open_failures += 1;
                continue;
            }
        };
        let mut failed = false;
        for i in range {
            let b = &batches[i];
            outcomes[i] = match db.write(b.to_write_batch()) {
                Ok(()) => {
                    seen.ok_after_failure += u64::from(failed);
                    Outcome::Ok
                }
                Err(e) => {
                    check_error(&e, seen, context);
                    seen.failed_writes += 1;
                    failed = true;
                    Outcome::Failed
                }
            };
            let chore = match (phase, i % 30) {
                (0, 10) => db.flush(),
                (0, 20) => db.compact(),
                (1, 15) => db.wait_for_background(),
                _ => Ok(()),
            };
            if let Err(e) = chore {
                check_error(&e, seen, context);
                failed = true;
            }
            // Reads never fail: they touch no file.
            for (key, _) in &b.0 {
                db.get(key)
                    .unwrap_or_else(|e| panic!("{context}: get failed: {e}"));
            }
        }
    }
    outcomes
}

/// The state after every batch that is present, in order: each batch that
/// returned `Ok`, and each failed one whose marker survived.
fn expected_state(
    batches: &[Batch],
    outcomes: &[Outcome],
    got: &Model,
    seen: &mut Seen,
    context: &str,
) -> Model {
    let mut model = Model::new();
    for (i, (b, outcome)) in batches.iter().zip(outcomes).enumerate() {
        let marker = &b.0[0].0;
        let present = got.contains_key(marker);
        match outcome {
            Outcome::Ok => assert!(present, "{context}: batch {i} returned Ok but is missing"),
            Outcome::NotAttempted => {
                assert!(
                    !present,
                    "{context}: batch {i} was never written but is present"
                )
            }
            Outcome::Failed => seen.failed_but_present += u64::from(present),
        }
        if present {
            b.apply(&mut model);
        }
    }
    model
}

fn io_error_case(n: u64, mode: FaultMode, batches: &[Batch], total: &mut Seen) {
    let tear = n.is_multiple_of(2);
    let power_loss_after = n.is_multiple_of(3);
    let context = format!(
        "operation {n} fails ({mode:?}, torn append: {tear}, power loss afterwards: {power_loss_after})"
    );
    let fs = FaultFs::new();
    fs.tear_failed_appends(tear);
    fs.fail_after(n, mode);
    let mut seen = Seen::default();
    let outcomes = error_workload(&fs, batches, &mut seen, &context);
    if mode == FaultMode::Once {
        // One failed operation reaches at most one caller as an I/O error;
        // everything after it is either done or refused as ReadOnly.
        assert!(
            seen.io_errors <= 1,
            "{context}: one fault, {} I/O errors: {seen:?}",
            seen.io_errors
        );
    }
    fs.clear_faults();
    if power_loss_after {
        fs.power_loss(PowerLoss::DropUnsynced);
    }

    let db = Db::open_with(DB, error_options(&fs))
        .unwrap_or_else(|e| panic!("{context}: reopen after clearing the fault failed: {e}"));
    let got = contents(&db, &context);
    let want = expected_state(batches, &outcomes, &got, &mut seen, &context);
    assert!(
        got == want,
        "{context}: reopened state is not the acknowledged batches applied in order: {}",
        describe_difference(&got, &want)
    );
    // And it is a working database again.
    db.put(b"after", b"fault")
        .unwrap_or_else(|e| panic!("{context}: write after reopen: {e}"));
    db.compact()
        .unwrap_or_else(|e| panic!("{context}: compact after reopen: {e}"));
    assert_eq!(db.get(b"after").unwrap().as_deref(), Some(&b"fault"[..]));

    total.cases += 1;
    total.io_errors += seen.io_errors;
    total.poisoned += seen.poisoned;
    total.open_failures += seen.open_failures;
    total.failed_writes += seen.failed_writes;
    total.ok_after_failure += seen.ok_after_failure;
    total.failed_but_present += seen.failed_but_present;
}

fn io_error_cases(mode: FaultMode) {
    let mut rng = SplitMix64::new(7);
    let batches: Vec<Batch> = (0..ERROR_BATCHES)
        .map(|n| batch(&mut rng, n, 40, true))
        .collect();
    let fs = FaultFs::new();
    let mut clean = Seen::default();
    let outcomes = error_workload(&fs, &batches, &mut clean, "fault-free run");
    assert!(outcomes.iter().all(|o| *o == Outcome::Ok));
    // A little past the end, as background work varies between runs.
    let span = fs.op_count() + 20;
    assert!(
        span < 1000,
        "the workload grew to {span} operations; keep it small"
    );
    let mut total = Seen::default();
    for n in 1..=span {
        io_error_case(n, mode, &batches, &mut total);
    }
    eprintln!("{mode:?}: {total:?}");
    // Most faults hit a caller's own operation; the rest hit background
    // work (seen as ReadOnly) or fall past the end of a shorter run.
    assert!(total.io_errors * 5 >= total.cases, "{total:?}");
    assert!(total.poisoned > 0 && total.open_failures > 0, "{total:?}");
    assert!(
        total.failed_writes > 0 && total.failed_but_present > 0,
        "{total:?}"
    );
    if mode == FaultMode::Once {
        // A fault in background work leaves the writer able to go on.
        assert!(total.ok_after_failure > 0, "{total:?}");
    }
}

#[test]
fn every_single_io_error_surfaces_and_loses_nothing_acknowledged() {
    io_error_cases(FaultMode::Once);
}

#[test]
fn persistent_io_errors_surface_and_lose_nothing_acknowledged() {
    io_error_cases(FaultMode::Persistent);
}

/// A recovery that the power interrupts must leave a directory the next
/// recovery accepts. The log being recovered ends in a torn record (a write
/// whose append failed half way); the power then goes at every operation of
/// the recovery in turn.
#[test]
fn a_power_loss_at_every_step_of_recovery_keeps_the_database_openable() {
    let batches = workload(99, 21);
    // A memtable that never fills: the only table is the explicit flush's,
    // and no background work can take the operation the fault is aimed at.
    let opts = |fs: &FaultFs| options(fs, true).memtable_bytes(1 << 20);
    let prepare = || {
        let fs = FaultFs::new();
        let db = Db::open_with(DB, opts(&fs)).unwrap();
        for (i, b) in batches[..20].iter().enumerate() {
            db.write(b.to_write_batch()).unwrap();
            if i == 9 {
                db.flush().unwrap();
            }
        }
        db.wait_for_background().unwrap();
        fs.tear_failed_appends(true);
        fs.fail_after(1, FaultMode::Once);
        assert!(db.write(batches[20].to_write_batch()).is_err());
        fs.kill_process();
        drop(db);
        fs
    };
    let fs = prepare();
    let before = fs.op_count();
    let db = Db::open_with(DB, opts(&fs)).unwrap();
    let recovery_ops = fs.op_count() - before;
    drop(db);
    let want = model_after(&batches[..20]);
    let mut interrupted = 0;
    for k in 1..=recovery_ops {
        for mode in [
            PowerLoss::DropUnsynced,
            PowerLoss::TornUnsynced { seed: k },
            PowerLoss::ReorderedUnsynced { seed: k },
        ] {
            let context = format!("power lost at operation {k} of recovery ({mode:?})");
            let fs = prepare();
            fs.power_loss_after(k, mode);
            // (The background thread may take the last operations instead.)
            if let Ok(db) = Db::open_with(DB, opts(&fs)) {
                drop(db);
            }
            if fs.power_losses() == 0 {
                fs.power_loss(mode);
            } else {
                interrupted += 1;
            }
            let db = Db::open_with(DB, opts(&fs))
                .unwrap_or_else(|e| panic!("{context}: the next open failed: {e}"));
            let got = contents(&db, &context);
            assert!(
                got == want,
                "{context}: {}",
                describe_difference(&got, &want)
            );
        }
    }
    assert!(
        interrupted >= recovery_ops,
        "only {interrupted} of {recovery_ops} recoveries were interrupted"
    );
}

/// The directory lock holds on the in-memory disk as on a real one, and a
/// power loss releases it with the process that held it.
#[test]
fn the_lock_holds_until_close_or_power_loss() {
    let fs = FaultFs::new();
    let db = Db::open_with(DB, options(&fs, true)).unwrap();
    assert!(matches!(
        Db::open_with(DB, options(&fs, true)),
        Err(Error::Locked(_))
    ));
    drop(db);
    let db = Db::open_with(DB, options(&fs, true)).unwrap();
    db.put(b"k", b"v").unwrap();
    fs.power_loss(PowerLoss::DropUnsynced);
    let reopened = Db::open_with(DB, options(&fs, true)).unwrap();
    // The dead process lets go of nothing that is no longer its own.
    drop(db);
    assert!(matches!(
        Db::open_with(DB, options(&fs, true)),
        Err(Error::Locked(_))
    ));
    assert_eq!(reopened.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
}

/// A manifest naming three tables (12, 7 and 3) on three levels.
fn manifest_sample() -> ManifestState {
    let table = |level: u32, number: u64, low: &[u8], high: &[u8]| TableRecord {
        keyspace: 0,
        level,
        file_number: number,
        file_size: 4096 * number,
        entries: 10 * number,
        smallest: internal_key(low, SeqNo(5), ValueKind::Put),
        largest: internal_key(high, SeqNo(2), ValueKind::Delete),
        min_seq: SeqNo(2),
        max_seq: SeqNo(5 + number),
    };
    ManifestState {
        next_file_number: 20,
        last_sequence: SeqNo(1000),
        log_number: 19,
        closed_log: None,
        next_keyspace_id: 1,
        keyspaces: vec![KeyspaceRecord {
            id: 0,
            name: "default".to_string(),
            log_number: 19,
            settings: KeyspaceSettings::default(),
        }],
        tables: vec![
            table(0, 12, b"a", b"m"),
            table(1, 7, b"b", b"b"),
            table(15, 3, b"", b"zz"),
        ],
        blob_files: Vec::new(),
    }
}

/// POSIX does not order directory changes that no directory sync
/// separates, so the rename that makes a manifest take effect could reach
/// the disk before the name of a table the manifest lists.
#[test]
fn a_manifest_never_takes_effect_before_the_files_it_names() {
    let dir = Path::new("/db");
    let mut cases_with_new_manifest = 0;
    for seed in 0..64 {
        // The copy and then the manifest: six steps each.
        for n in 1..=14 {
            let fs = FaultFs::new();
            fs.create_dir_all(dir).unwrap();
            let create = |number: u64| {
                let mut f = fs.create(&dir.join(table_file_name(number))).unwrap();
                f.append(b"table").unwrap();
                f.sync().unwrap();
            };
            create(3);
            create(7);
            let mut old = manifest_sample();
            old.tables.retain(|t| t.file_number != 12);
            write_manifest(&fs, dir, &old).unwrap();
            create(12);
            fs.power_loss_after(n, PowerLoss::ReorderedUnsynced { seed });
            let _ = write_manifest(&fs.for_process(), dir, &manifest_sample());
            fs.clear_faults();
            let durable = read_manifest(&fs, dir).unwrap().unwrap();
            if durable == manifest_sample() {
                cases_with_new_manifest += 1;
                // The copy is replaced first: never older than the manifest.
                assert_eq!(
                    read_manifest_copy(&fs, dir).unwrap(),
                    Some(manifest_sample()),
                    "seed {seed}, power lost at step {n}: the copy fell behind"
                );
            }
            for table in &durable.tables {
                let name = table_file_name(table.file_number);
                assert!(
                    fs.exists(&dir.join(&name)),
                    "seed {seed}, power lost at step {n}: the manifest names {name}, which is gone"
                );
            }
        }
    }
    assert!(cases_with_new_manifest > 64);
}
