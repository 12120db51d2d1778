//! The background threads: flushes immutable memtables, compacts, and
//! recovers from failures without a reopen.
//!
//! Owns: the two background threads (lanes) and their wake-ups — the
//! *flush* lane flushes memtables and recovers a failed flush or log, the
//! *compaction* lane compacts, so a flush never waits behind a long
//! compaction (writers stall on a full set of immutable memtables only
//! when flushing itself falls behind) — the record of failures
//! by kind (what each one stops, when it is retried: see `docs/design.md`,
//! "Failures"), recovery (automatic retries with backoff and
//! [`crate::Db::resume`]), the removal of what failed work left behind, and
//! the waits of callers who need background progress (stalled writers,
//! `flush`, `compact`).
//! Must never: hold the background lock while taking the writer lock
//! (writers wait under the writer lock for background progress), let a
//! failure or a panic of its work leave a waiter waiting, retry corruption,
//! or keep going after shutdown was asked.
//!
//! Two failure slots, so that a compaction error never stops flushes:
//! - the *flush* slot: a flush failed, or the log did (`log: true`: an
//!   append, a sync or a rotation failed, and no write is accepted until
//!   recovery has flushed every memtable and started a new log). While it
//!   is set no memtable is sealed, so writes are refused as soon as the
//!   active memtable is full;
//! - the *compaction* slot: compactions wait; writes go on unless level 0
//!   is full.
//!
//! Corruption in either slot stops every write and all background work.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::db::background_state::{BgState, Failure};
use crate::db::compaction;
use crate::db::compaction_scope::CompactionScope;
use crate::db::flush;
use crate::db::inner::DbInner;
use crate::error::{Error, FailureClass, Result};
use crate::events::{BackgroundErrorEvent, BackgroundWork, Event};
use crate::filename::{parse_file_name, wal_file_name, FileKind, MANIFEST_TEMP_FILE};
use crate::manifest::read_manifest;
use crate::wal::WalWriter;

/// Backoff doubles after each failed attempt, up to this many times the
/// first interval.
const MAX_BACKOFF_FACTOR: u32 = 64;

impl Failure {
    fn due(&self, now: Instant) -> bool {
        self.retry_at.is_some_and(|at| at <= now)
    }
}

/// The two background threads.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Lane {
    /// Flushes and log/flush recovery: the work writers wait for first.
    Flush = 0,
    /// Compactions, automatic and full.
    Compaction = 1,
}

impl BgState {
    fn stopped(&self) -> bool {
        [&self.flush_failure, &self.compaction_failure]
            .into_iter()
            .flatten()
            .any(|f| f.class == FailureClass::Fatal)
    }
}

#[derive(Clone, Copy)]
enum Work {
    Flush,
    /// Retry the flush slot's failure: seal a failed log, flush every
    /// memtable, start the new log.
    Recover,
    Compact,
    Full(u64),
}

/// Starts the flush and the compaction thread. If the second cannot start,
/// the first is stopped again before the error is returned.
pub(crate) fn spawn(inner: &Arc<DbInner>) -> Result<Vec<std::thread::JoinHandle<()>>> {
    let start = |lane: Lane, name: &str| {
        let inner = Arc::clone(inner);
        std::thread::Builder::new()
            .name(name.into())
            .spawn(move || run(&inner, lane))
            .map_err(Error::from)
    };
    let flush = start(Lane::Flush, "siftdb-flush")?;
    match start(Lane::Compaction, "siftdb-compact") {
        Ok(compaction) => Ok(vec![flush, compaction]),
        Err(e) => {
            shutdown(inner);
            let _ = flush.join();
            Err(e)
        }
    }
}

/// Waits `interval` unless the database shuts down first: true when the
/// whole interval passed (a periodic task's sleep).
pub(crate) fn sleep_unless_shutdown(inner: &DbInner, interval: Duration) -> bool {
    let due = Instant::now() + interval;
    let mut st = inner.bg.lock();
    while !st.shutdown && Instant::now() < due {
        inner.bg_cv.wait_until(&mut st, due);
    }
    !st.shutdown
}

impl BgState {
    fn idle(&self) -> bool {
        self.busy.iter().all(|b| !b)
    }

    /// What `lane` must do for a resume request it has not answered yet:
    /// its slot's retry, if that slot failed (`None` when it has nothing
    /// to retry).
    fn resume_work(&mut self, lane: Lane) -> Option<Work> {
        match lane {
            Lane::Flush => self.flush_failure.is_some().then_some(Work::Recover),
            Lane::Compaction => self.compaction_failure.take().map(|_| {
                if self.full_requested > self.full_done {
                    Work::Full(self.full_requested)
                } else {
                    Work::Compact
                }
            }),
        }
    }
}

/// The work `lane` has to do now (and whether it retries a failure), or
/// how long to sleep (`None`: until woken).
fn next_work(
    inner: &DbInner,
    st: &mut BgState,
    lane: Lane,
) -> std::result::Result<(Work, bool), Option<Duration>> {
    if st.stopped() {
        return Err(None);
    }
    let now = Instant::now();
    if lane == Lane::Flush {
        return match &st.flush_failure {
            Some(f) if f.due(now) => Ok((Work::Recover, true)),
            Some(f) => Err(f.retry_at.map(|at| at.saturating_duration_since(now))),
            None if any_immutable(inner) => Ok((Work::Flush, false)),
            None => Err(None),
        };
    }
    if let Some(f) = &st.compaction_failure {
        if !f.due(now) {
            return Err(f.retry_at.map(|at| at.saturating_duration_since(now)));
        }
    }
    let retry = st.compaction_failure.is_some();
    if st.full_requested > st.full_done {
        return Ok((Work::Full(st.full_requested), retry));
    }
    if compaction::pick_any(inner).is_some() {
        return Ok((Work::Compact, retry));
    }
    // Due for a retry, but nothing is left to compact.
    st.compaction_failure = None;
    Err(None)
}

fn run(inner: &DbInner, lane: Lane) {
    let me = lane as usize;
    loop {
        // A resume request this lane has not answered runs its slot's
        // retry whatever its backoff; otherwise one unit of due work.
        let (work, retry, resume) = {
            let mut st = inner.bg.lock();
            loop {
                if st.shutdown {
                    if let Some(busy) = st.busy.get_mut(me) {
                        *busy = false;
                    }
                    inner.bg_cv.notify_all();
                    return;
                }
                let answered = st.resume_done.get(me).copied().unwrap_or(u64::MAX);
                let requested = st.resume_requested;
                if requested > answered && !st.stopped() {
                    match st.resume_work(lane) {
                        Some(work) => {
                            if let Some(busy) = st.busy.get_mut(me) {
                                *busy = true;
                            }
                            break (work, true, Some(requested));
                        }
                        None => {
                            if let Some(done) = st.resume_done.get_mut(me) {
                                *done = requested;
                            }
                            inner.bg_cv.notify_all();
                            continue;
                        }
                    }
                }
                let had_failure = st.compaction_failure.is_some();
                match next_work(inner, &mut st, lane) {
                    Ok((work, retry)) => {
                        if let Some(busy) = st.busy.get_mut(me) {
                            *busy = true;
                        }
                        break (work, retry, None);
                    }
                    Err(sleep) => {
                        let was_busy = st.busy.get_mut(me).is_some_and(std::mem::take);
                        // A resume asked of a stopped database is answered at once.
                        let requested = st.resume_requested;
                        let answered = st
                            .resume_done
                            .get_mut(me)
                            .is_some_and(|done| std::mem::replace(done, requested) != requested);
                        // A failure found to have nothing left to retry was cleared.
                        let cleared = had_failure && st.compaction_failure.is_none();
                        // Only news wakes the waiters (and the other lane,
                        // which waits on the same condition variable): an
                        // idle lane that woke the other each time it found
                        // nothing to do would keep both spinning.
                        if was_busy || answered || cleared {
                            inner.bg_cv.notify_all();
                        }
                        match sleep {
                            Some(d) => {
                                inner.bg_cv.wait_for(&mut st, d);
                            }
                            None => inner.bg_cv.wait(&mut st),
                        }
                    }
                }
            }
        };
        if retry {
            inner
                .counters
                .background_retries
                .fetch_add(1, Ordering::Relaxed);
        }
        run_unit(inner, work);
        // A flush frees memtable memory a shared budget counts.
        inner.report_memtables();
        if let Some(generation) = resume {
            let mut st = inner.bg.lock();
            if let Some(done) = st.resume_done.get_mut(me) {
                *done = (*done).max(generation);
            }
            inner.bg_cv.notify_all();
        }
    }
}

/// Runs one unit of work, a panic caught as an error, and records the outcome.
fn run_unit(inner: &DbInner, work: Work) {
    let outcome = catch_unwind(AssertUnwindSafe(|| match work {
        Work::Flush => flush::flush_oldest(inner).map(|_| ()),
        Work::Recover => recover(inner),
        Work::Compact => compaction::compact_once(inner),
        Work::Full(_) => {
            let scopes = inner.bg.lock().full_scopes.clone();
            compaction::compact_scopes(inner, &scopes)
        }
    }))
    .unwrap_or_else(|payload| Err(Error::Panicked(panic_message(payload.as_ref()))));
    if outcome.is_err() || matches!(work, Work::Recover) {
        // Before the outcome is published, so whoever sees it sees the
        // files failed work wrote gone already (after a recovery: also a
        // table that a manifest whose rename took effect, though its sync
        // failed, named before the retry replaced it).
        remove_orphans(inner);
    }
    let mut st = inner.bg.lock();
    match (work, outcome) {
        (Work::Flush, Ok(())) => {}
        (Work::Recover, Ok(())) => st.flush_failure = None,
        (Work::Compact | Work::Full(_), Ok(())) => {
            st.compaction_failure = None;
            if let Work::Full(generation) = work {
                st.full_done = st.full_done.max(generation);
                if st.full_done >= st.full_requested {
                    st.full_scopes.clear();
                }
            }
        }
        (Work::Flush | Work::Recover, Err(e)) => {
            let log = st.flush_failure.as_ref().is_some_and(|f| f.log);
            let work = match work {
                Work::Flush => BackgroundWork::Flush,
                _ => BackgroundWork::Recovery,
            };
            st.flush_failure = Some(failure(inner, st.flush_failure.take(), e, log, work));
        }
        (Work::Compact | Work::Full(_), Err(e)) => {
            st.compaction_failures += 1;
            st.compaction_failure = Some(failure(
                inner,
                st.compaction_failure.take(),
                e,
                false,
                BackgroundWork::Compaction,
            ));
        }
    }
    inner.bg_cv.notify_all();
}

/// The failure after `previous` (if it was the same slot's) failed with
/// `error`, sent to the event listeners (a channel send: no listener runs
/// under the background lock this is called with).
fn failure(
    inner: &DbInner,
    previous: Option<Failure>,
    error: Error,
    log: bool,
    work: BackgroundWork,
) -> Failure {
    inner
        .counters
        .background_errors
        .fetch_add(1, Ordering::Relaxed);
    let class = error.class();
    let attempts = previous.map_or(1, |p| p.attempts.saturating_add(1));
    let factor = 1u32
        .checked_shl(attempts.saturating_sub(1))
        .unwrap_or(MAX_BACKOFF_FACTOR)
        .min(MAX_BACKOFF_FACTOR);
    let retry_at = (class == FailureClass::Retryable)
        .then(|| Instant::now() + inner.opts.retry_interval.saturating_mul(factor));
    if class == FailureClass::Fatal {
        inner.writes_stopped.store(true, Ordering::Release);
    }
    inner.events.emit(|| {
        Event::BackgroundError(BackgroundErrorEvent {
            work,
            error: error.duplicate(),
            attempts,
            retry_in: retry_at.map(|at| at.saturating_duration_since(Instant::now())),
            writes_stopped: class == FailureClass::Fatal,
        })
    });
    Failure {
        error,
        class,
        attempts,
        retry_at,
        log,
    }
}

pub(crate) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    format!("background work panicked: {}", panic_text(payload))
}

/// A panic's message, as the payload carries it.
pub(crate) fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic with no message".to_string())
}

/// Retries the flush slot's failure: a failed log's memtable is sealed,
/// every memtable is flushed, and only then is the new log started (so a
/// crash meanwhile leaves the failed log the newest, where a torn tail is
/// allowed).
///
/// Only a failed log needs the writer lock: then every writer is refused
/// before it could wait for background work while holding that lock. (A
/// writer may wait under it for a compaction while a flush failed.)
fn recover(inner: &DbInner) -> Result<()> {
    let log_failed = inner
        .bg
        .lock()
        .flush_failure
        .as_ref()
        .is_some_and(|f| f.log);
    if log_failed {
        seal_failed_log(inner);
    }
    while flush::flush_oldest(inner)? {}
    if log_failed {
        open_pending_log(inner)?;
    }
    Ok(())
}

/// Recovery, first step: when the log failed, seals the active memtable
/// with it and names (without creating) the log that will follow, so the
/// flushes that come next move the manifest past every old log before the
/// new one exists.
fn seal_failed_log(inner: &DbInner) {
    let mut writer = inner.writer.lock();
    if writer.log_failure.is_none() || writer.pending_log.is_some() {
        return;
    }
    let mut versions = inner.versions.lock();
    let log_number = versions.new_file_number();
    // Sealed even when empty: its flush writes no table but the manifest
    // that moves past the failed log, which must happen before the new
    // log exists (a torn record is allowed only in the newest log).
    for tree in inner.trees.load().iter() {
        tree.seal_memtable(log_number);
    }
    drop(versions);
    writer.pending_log = Some(log_number);
}

/// Recovery, last step (every memtable flushed): starts the log
/// [`seal_failed_log`] named and lets writes in again.
fn open_pending_log(inner: &DbInner) -> Result<()> {
    let mut writer = inner.writer.lock();
    let Some(log_number) = writer.pending_log else {
        return Ok(());
    };
    let path = inner.path_of(&wal_file_name(log_number));
    let created = WalWriter::create(inner.fs.as_ref(), &path, log_number)
        .and_then(|wal| inner.fs.sync_dir(&inner.dir).map(|()| wal));
    match created {
        Ok(wal) => {
            inner.versions.lock().logs.push(log_number);
            writer.wal = wal;
            writer.log_number = log_number;
            writer.pending_log = None;
            writer.log_failure = None;
            Ok(())
        }
        Err(e) => {
            let _ = inner.fs.remove(&path);
            Err(e)
        }
    }
}

/// Records that the log failed with `error` (the writer lock is held):
/// writes stop until recovery has started a new log.
pub(crate) fn log_failed(inner: &DbInner, error: &Error) {
    let mut st = inner.bg.lock();
    let previous = st.flush_failure.take();
    st.flush_failure = Some(failure(
        inner,
        previous,
        error.duplicate(),
        true,
        BackgroundWork::Log,
    ));
    inner.bg_cv.notify_all();
}

/// Removes the files no live version and no on-disk manifest names: tables
/// a failed (or panicked) flush or compaction wrote (but none numbered at
/// or after the first output of work still running), logs older than both
/// the durable and the in-memory log number, a leftover `MANIFEST.tmp`.
/// Best effort: what cannot be listed or removed now goes later, at the
/// next removal or the next open.
fn remove_orphans(inner: &DbInner) {
    let fs = inner.fs.as_ref();
    // No manifest write or table installation meanwhile.
    let versions = inner.versions.lock();
    let Ok(Some(durable)) = read_manifest(fs, &inner.dir) else {
        return;
    };
    let Ok(names) = fs.list(&inner.dir) else {
        return;
    };
    let live: Vec<u64> = inner
        .trees
        .load()
        .iter()
        .flat_map(|t| t.current.load().version.records())
        .chain(durable.tables)
        .map(|r| r.file_number)
        .collect();
    let oldest_log = durable.log_number.min(versions.log_number);
    // The other lane's flush or compaction may be writing tables right now.
    let first_pending = versions.first_pending_output();
    for name in names {
        let orphan = match parse_file_name(&name) {
            Some((FileKind::Table, n)) => n < first_pending && !live.contains(&n),
            Some((FileKind::Wal, n)) => n < oldest_log,
            None => name == MANIFEST_TEMP_FILE,
        };
        if orphan {
            let _ = fs.remove(&inner.path_of(&name));
        }
    }
}

/// Wakes the background threads.
pub(crate) fn notify(inner: &DbInner) {
    let _st = inner.bg.lock();
    inner.bg_cv.notify_all();
}

/// What blocks a stalled writer.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Blocked {
    /// Nothing: go on.
    No,
    /// Too many immutable memtables: a flush must finish.
    OnFlush,
    /// Level 0 is full: a compaction must finish.
    OnCompaction,
}

/// The failure that makes writes impossible now, as `ReadOnly`.
pub(crate) fn writes_refused(inner: &DbInner) -> Option<Error> {
    if !inner.writes_stopped.load(Ordering::Acquire) {
        return None;
    }
    let st = inner.bg.lock();
    fatal(&st).map(Error::read_only)
}

fn fatal(st: &BgState) -> Option<&Error> {
    [&st.flush_failure, &st.compaction_failure]
        .into_iter()
        .flatten()
        .find(|f| f.class == FailureClass::Fatal)
        .map(|f| &f.error)
}

/// The failure that forbids sealing the active memtable (a flush is
/// failing, so another memtable could not be flushed either), as `ReadOnly`.
pub(crate) fn rotation_refused(inner: &DbInner) -> Option<Error> {
    let st = inner.bg.lock();
    fatal(&st)
        .or(st.flush_failure.as_ref().map(|f| &f.error))
        .map(Error::read_only)
}

/// Whether the memtables waiting for a flush will be flushed: the flush
/// lane runs (no shutdown) and no flush, log or corruption failure stands.
/// A waiter on a shared memtable budget waits only for such flushes.
pub(crate) fn flushes_going(inner: &DbInner) -> bool {
    let st = inner.bg.lock();
    !st.shutdown && st.flush_failure.is_none() && fatal(&st).is_none()
}

/// Waits while `blocked()` says so, woken by background progress; a
/// failure of the work it waits for ends the wait with `ReadOnly`.
///
/// The condition is checked under the background lock, which the
/// background threads take to record each unit of work after publishing it:
/// so work finished between the caller's own check and this wait is seen
/// here, rather than waited for again (a wait for "one more unit" would
/// hang when that was the last unit there was to do).
pub(crate) fn wait_while(inner: &DbInner, blocked: impl Fn() -> Blocked) -> Result<()> {
    let mut st = inner.bg.lock();
    inner.bg_cv.notify_all();
    loop {
        let failure = match blocked() {
            Blocked::No => return Ok(()),
            Blocked::OnFlush => &st.flush_failure,
            Blocked::OnCompaction => &st.compaction_failure,
        };
        if let Some(f) = failure {
            return Err(Error::read_only(&f.error));
        }
        if let Some(e) = fatal(&st) {
            return Err(Error::read_only(e));
        }
        if st.shutdown {
            return Err(Error::Closed);
        }
        inner.bg_cv.wait_for(&mut st, Duration::from_millis(50));
    }
}

/// The error a caller waiting for background work gets.
fn failed(failure: &Option<Failure>) -> Result<()> {
    match failure {
        Some(f) => Err(Error::background(&f.error)),
        None => Ok(()),
    }
}

fn check_open(st: &BgState) -> Result<()> {
    if st.shutdown {
        return Err(Error::Closed);
    }
    match fatal(st) {
        Some(e) => Err(Error::read_only(e)),
        None => Ok(()),
    }
}

/// Whether any keyspace has an immutable memtable waiting for a flush.
fn any_immutable(inner: &DbInner) -> bool {
    inner
        .trees
        .load()
        .iter()
        .any(|t| !t.current.load().imm.is_empty())
}

/// Waits until no immutable memtable is left.
pub(crate) fn wait_for_flushes(inner: &DbInner) -> Result<()> {
    let mut st = inner.bg.lock();
    inner.bg_cv.notify_all();
    loop {
        check_open(&st)?;
        failed(&st.flush_failure)?;
        if !any_immutable(inner) {
            return Ok(());
        }
        inner.bg_cv.wait_for(&mut st, Duration::from_millis(50));
    }
}

/// Waits until no flush or automatic compaction is pending.
pub(crate) fn wait_for_idle(inner: &DbInner) -> Result<()> {
    let mut st = inner.bg.lock();
    inner.bg_cv.notify_all();
    loop {
        check_open(&st)?;
        failed(&st.flush_failure)?;
        failed(&st.compaction_failure)?;
        let pending = any_immutable(inner)
            || st.full_requested > st.full_done
            || compaction::pick_any(inner).is_some();
        if !pending && st.idle() {
            return Ok(());
        }
        inner.bg_cv.wait_for(&mut st, Duration::from_millis(50));
    }
}

/// At open: when level 0 holds `level0_stop_writes` tables or more, waits
/// until compaction has brought it below that, so that the open returns a
/// database whose level 0 is bounded however briefly it is kept open. (A
/// short-lived writer — open, put, close — replays the previous log into a
/// new level-0 table at each open, and dropping the database stops a
/// compaction that has not started yet: without this wait, level 0 grew by
/// one table per process, past any trigger.) The wait ends early, with the
/// database usable for reads, when compaction fails or cannot run — the
/// failure is recorded as any compaction failure is, and writes meet it as
/// they would a failed compaction.
pub(crate) fn wait_for_level0_at_open(inner: &DbInner) {
    let level0 = || {
        inner
            .trees
            .load()
            .iter()
            .map(|t| t.current.load().version.levels.first().map_or(0, Vec::len))
            .max()
            .unwrap_or(0)
    };
    if level0() < inner.opts.level0_stop_writes {
        return;
    }
    let mut st = inner.bg.lock();
    inner.bg_cv.notify_all();
    loop {
        if level0() < inner.opts.level0_stop_writes
            || st.shutdown
            || st.stopped()
            || st.compaction_failure.is_some()
        {
            return;
        }
        if st.idle() && compaction::pick_any(inner).is_none() {
            return;
        }
        inner.bg_cv.wait_for(&mut st, Duration::from_millis(50));
    }
}

/// Asks for a full compaction of `scope` (every keyspace, one, or a range
/// of one) and waits for it. An earlier compaction failure (not
/// corruption) is retried at once.
pub(crate) fn request_full_compaction(inner: &DbInner, scope: CompactionScope) -> Result<()> {
    let mut st = inner.bg.lock();
    check_open(&st)?;
    st.full_scopes.push(scope);
    st.compaction_failure = None;
    let failures_before = st.compaction_failures;
    st.full_requested += 1;
    let generation = st.full_requested;
    inner.bg_cv.notify_all();
    while st.full_done < generation {
        check_open(&st)?;
        if st.compaction_failures > failures_before {
            failed(&st.compaction_failure)?;
        }
        inner.bg_cv.wait_for(&mut st, Duration::from_millis(50));
    }
    Ok(())
}

/// Retries every failed piece of background work now and waits for the
/// outcome: `Ok` when none is left failing.
pub(crate) fn resume(inner: &DbInner) -> Result<()> {
    let mut st = inner.bg.lock();
    check_open(&st)?;
    if st.flush_failure.is_none() && st.compaction_failure.is_none() {
        return Ok(());
    }
    st.resume_requested += 1;
    let generation = st.resume_requested;
    inner.bg_cv.notify_all();
    while st.resume_done.iter().any(|&done| done < generation) {
        if st.shutdown {
            return Err(Error::Closed);
        }
        inner.bg_cv.wait_for(&mut st, Duration::from_millis(50));
    }
    if let Some(f) = &st.flush_failure {
        return Err(Error::read_only(&f.error));
    }
    failed(&st.compaction_failure)
}

/// The failure background work is stuck on, for `Stats`.
/// The failure background work is stuck on, as the error a waiter gets
/// (the log's or a flush's first: they hold acknowledged writes).
pub(crate) fn standing_failure(inner: &DbInner) -> Result<()> {
    let st = inner.bg.lock();
    failed(&st.flush_failure)?;
    failed(&st.compaction_failure)
}

pub(crate) fn current_failure(inner: &DbInner) -> Option<String> {
    let st = inner.bg.lock();
    let describe = |what: &str, f: &Failure| {
        let next = match (f.class, f.retry_at) {
            (FailureClass::Fatal, _) => "not retried".to_string(),
            (_, Some(at)) => format!(
                "next retry in {:?}",
                at.saturating_duration_since(Instant::now())
            ),
            (_, None) => "waiting for Db::resume".to_string(),
        };
        format!(
            "{what} failed ({} attempts, {next}): {}",
            f.attempts, f.error
        )
    };
    match (&st.flush_failure, &st.compaction_failure) {
        (Some(f), _) if f.log => Some(describe("log", f)),
        (Some(f), _) => Some(describe("flush", f)),
        (None, Some(f)) => Some(describe("compaction", f)),
        (None, None) => None,
    }
}

/// Tells the background threads to stop after their current unit of work.
pub(crate) fn shutdown(inner: &DbInner) {
    for pacer in [&inner.pacer, &inner.flush_pacer].into_iter().flatten() {
        pacer.stop();
    }
    let mut st = inner.bg.lock();
    st.shutdown = true;
    inner.bg_cv.notify_all();
}
