//! The write path: group commit into the log, then the memtable.
//!
//! Owns: the writer queue (its state in `write_queue.rs`; the first
//! waiting writer leads a group: one log append and at most one fsync for
//! every batch queued behind it), sequence assignment, memtable rotation
//! and write stalls, and the database's side of a shared memtable budget
//! (sealing its largest memtable for it).
//! Must never: acknowledge a batch before its log record reached the OS (and
//! the disk, with `sync_writes`), make part of a batch visible, write after
//! a failed log append left the log's tail uncertain, or seal a memtable
//! while flushes are failing (writes are refused instead, as soon as the
//! active memtable is full).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use parking_lot::{Mutex, MutexGuard};

use crate::batch::{encode_group_into, OpKind, RawBatch, WriteBatch};
use crate::db::background::{self, Blocked};
use crate::db::checks::{self, check_key, check_merge_operator, check_value};
use crate::db::flush;
use crate::db::inner::DbInner;
use crate::db::insert_slot::InsertSlot;
use crate::db::keyspace_options::KeyspaceOptions;
use crate::db::oracle::ConflictCheck;
use crate::db::super_version::MAX_IMMUTABLE;
use crate::db::tree::{memtable_memory, Tree};
use crate::db::version::Version;
use crate::db::version::LEVELS;
use crate::db::write_insert::{apply_at, apply_batch};
use crate::db::write_queue::{Pending, WriterState};
use crate::error::{Error, Result};
use crate::events::{Event, StallCause, WriteStallEvent};
use crate::filename::wal_file_name;
use crate::key::SeqNo;
use crate::manifest::{read_manifest, write_manifest, ClosedLog};
use crate::options::WriteOptions;
use crate::shared::write_buffer::{BufferedMemory, MemtableMemory};
use crate::wal::{WalWriter, CLOSE_RECORD_LEN};

/// A group takes batches behind its leader only while all of its batches
/// (the leader's included) stay within this many bytes.
const MAX_GROUP_BYTES: usize = 1 << 20;

/// How long a waiting writer watches for the end of the group ahead of it
/// before it sleeps on the condition variable. A group usually ends within
/// a few microseconds (one log append and the group's memtable inserts);
/// sleeping and being woken costs two system calls and a scheduler round
/// trip, more than the wait itself, and slowed two writer threads below
/// one. The bound keeps a writer that waits behind a long group (a stall,
/// an fsync) from burning its core.
const SPIN_BEFORE_SLEEP: Duration = Duration::from_micros(20);

/// How long a new leader alone in the queue waits for a batch to join its
/// group when writers have been taking turns (the last group held more than
/// one batch, or this leader waited behind one). Two threads that write in
/// a loop otherwise alternate groups of one batch: each arrives while the
/// other's group is being written, and leads the next group alone. A short
/// wait lets the other thread's next batch share the group's log record
/// and `write` call (and its fsync with `sync_writes`). A writer that
/// neither waited nor followed a shared group never waits: one thread
/// alone, or writers that rarely meet, pay nothing.
const WAIT_FOR_COMPANY: Duration = Duration::from_micros(4);

/// What [`Db::write_with`](crate::Db::write_with) does, for `Db` and its
/// keyspaces: every operation checked, then the batch written (or, empty,
/// the log synced when asked).
pub(crate) fn write_batch(inner: &DbInner, batch: WriteBatch, options: WriteOptions) -> Result<()> {
    write_checked(inner, batch, options, None)
}

/// [`write_batch`] of a transaction's commit, written only if the oracle
/// finds no conflict with `check`.
pub(crate) fn write_checked(
    inner: &DbInner,
    batch: WriteBatch,
    options: WriteOptions,
    check: Option<ConflictCheck>,
) -> Result<()> {
    checks::check_writable(inner)?;
    let mut known = inner.default.id;
    batch.check_ranges()?;
    for op in batch.iter() {
        check_key(op.key)?;
        check_value(op.value)?;
        if op.keyspace != known {
            // A batch's keyspaces are few: each is looked up when it
            // first follows another.
            let tree = inner.tree_by_id(op.keyspace).ok_or_else(|| {
                Error::invalid(format!(
                    "the batch writes to keyspace id {}, which this database does not \
                     have (dropped, or a keyspace of another database)",
                    op.keyspace
                ))
            })?;
            tree.check_live()?;
            known = op.keyspace;
        }
        if op.kind == OpKind::Merge {
            check_merge_operator(inner, op.keyspace)?;
        }
    }
    let sync = options.sync_or(inner.opts.sync_writes);
    if batch.is_empty() {
        // Nothing to log; a sync asked for still covers the writes before.
        return if sync { persist(inner) } else { Ok(()) };
    }
    write(inner, batch, sync, check)
}

pub(crate) fn write(
    inner: &DbInner,
    batch: WriteBatch,
    sync: bool,
    check: Option<ConflictCheck>,
) -> Result<()> {
    let _timing = inner.latency.write_nanos.time_sampled();
    inner
        .latency
        .write_batch_bytes
        .record(batch.approximate_bytes() as u64);
    // Before the queue: a wait for a shared memtable budget holds no lock.
    inner.admit_write();
    let me = Arc::new(Pending {
        batch,
        sync,
        check,
        rejected: AtomicBool::new(false),
        insert: InsertSlot::default(),
        done: Mutex::new(None),
    });
    let mut queue = inner.queue.lock();
    queue.waiting.push_back(Arc::clone(&me));
    inner.writes_queued.fetch_add(1, Ordering::Release);
    let mut waited = false;
    loop {
        if let Some(result) = me.done.lock().take() {
            return result;
        }
        if queue
            .waiting
            .front()
            .is_some_and(|front| Arc::ptr_eq(front, &me))
        {
            break;
        }
        waited = true;
        // Spin first (the lock released), until a group finishes: then
        // this writer's batch may be written, or it may lead the next group.
        let finished_before = inner.write_groups_finished.load(Ordering::Acquire);
        let unchanged = || inner.write_groups_finished.load(Ordering::Acquire) == finished_before;
        MutexGuard::unlocked(&mut queue, || {
            let give_up = Instant::now() + SPIN_BEFORE_SLEEP;
            while unchanged() && Instant::now() < give_up {
                if me.insert.is_offered() {
                    // The leader logged this batch: insert it alongside.
                    me.insert
                        .insert_if_offered(|seq| apply_at(inner, &me.batch, seq));
                }
                std::hint::spin_loop();
            }
        });
        // The count is checked again under the lock before any sleep: a
        // group that ends after this check notifies under the same lock, so
        // no wake-up is lost.
        if unchanged() {
            inner.queue_cv.wait(&mut queue);
        }
    }

    // This writer leads. Alone, after writers met, it first waits a moment
    // for company (the lock released, so a batch can be queued).
    if queue.waiting.len() == 1 && (waited || queue.writers_met) {
        let queued_before = inner.writes_queued.load(Ordering::Acquire);
        MutexGuard::unlocked(&mut queue, || {
            let give_up = Instant::now() + WAIT_FOR_COMPANY;
            while inner.writes_queued.load(Ordering::Acquire) == queued_before
                && Instant::now() < give_up
            {
                std::hint::spin_loop();
            }
        });
    }
    // Take this writer's batch and the batches queued behind it.
    let mut group = Vec::new();
    let mut bytes = 0;
    for pending in queue.waiting.iter() {
        // Past the leader's, at most MAX_GROUP_BYTES: so the group's one
        // record is as small as the leader's batch (which passed
        // `check_limits`) or smaller than 1 MiB.
        if !group.is_empty() && bytes + pending.batch.approximate_bytes() > MAX_GROUP_BYTES {
            break;
        }
        bytes += pending.batch.approximate_bytes();
        group.push(Arc::clone(pending));
    }
    queue.writers_met = waited || group.len() > 1;
    drop(queue);

    let result = write_group(inner, &group);
    inner.report_memtables();

    let mut queue = inner.queue.lock();
    for pending in &group {
        queue.waiting.pop_front();
        if !Arc::ptr_eq(pending, &me) {
            *pending.done.lock() = Some(pending.outcome(&result));
        }
    }
    inner.write_groups_finished.fetch_add(1, Ordering::Release);
    inner.queue_cv.notify_all();
    me.outcome(&result)
}

/// Checks the group's transactions against the oracle (refusing those in
/// conflict) and registers every batch written: under the writer lock, so
/// no other commit comes between a check and the sequence numbers it
/// leads to. Returns how many operations the group writes.
fn check_and_register(inner: &DbInner, group: &[Arc<Pending>], first_seq: SeqNo) -> u64 {
    let mut oracle = inner.oracle.lock();
    let visible = inner.last_visible.load(Ordering::Acquire);
    let mut count = 0u64;
    for pending in group {
        if let Some(check) = &pending.check {
            if !oracle.validate(check) {
                pending.rejected.store(true, Ordering::Release);
                inner
                    .counters
                    .transaction_conflicts
                    .fetch_add(1, Ordering::Relaxed);
                continue;
            }
            inner
                .counters
                .transaction_commits
                .fetch_add(1, Ordering::Relaxed);
        }
        count += pending.batch.len() as u64;
        oracle.register(&pending.batch, first_seq.0 + count - 1, visible);
    }
    count
}

fn write_group(inner: &DbInner, group: &[Arc<Pending>]) -> Result<()> {
    let mut writer = inner.writer.lock();
    check_writable(inner, &writer)?;
    make_room(inner, &mut writer, false)?;

    let first_seq = writer.last_seq.next();
    let count = check_and_register(inner, group, first_seq);
    if count == 0 {
        // Every batch was refused.
        return Ok(());
    }
    let batches = group
        .iter()
        .filter(|p| !p.rejected.load(Ordering::Acquire))
        .map(|p| &p.batch);
    // The group's record is built in the log's own buffer: no merged batch,
    // no record allocated per group.
    // One fsync covers the group: a batch that did not ask for one is
    // synced with a batch that did.
    let sync = group.iter().any(|p| p.sync);
    let logged = writer
        .wal
        .append_with(|out| encode_group_into(first_seq, batches.clone(), out))
        .and_then(|()| {
            if sync {
                sync_log(inner, &mut writer)
            } else {
                Ok(())
            }
        });
    if logged.is_ok() && !sync {
        writer.unsynced = true;
    }
    if let Err(e) = logged {
        // The record may be in the log, whole or torn: its sequence numbers
        // are never handed out again.
        writer.last_seq = SeqNo(first_seq.0 + count.saturating_sub(1));
        inner
            .last_visible
            .store(writer.last_seq.0, Ordering::Release);
        log_failed(inner, &mut writer, &e);
        return Err(e);
    }

    // The other batches' inserts are offered to their writers, each at its
    // first sequence number; the leader inserts its own meanwhile, then
    // each batch nobody took (see `write_insert.rs`).
    let mut seq = first_seq;
    let mut own = None;
    for (i, pending) in group.iter().enumerate() {
        if pending.rejected.load(Ordering::Acquire) {
            continue;
        }
        if i == 0 {
            own = Some(seq);
        } else {
            pending.insert.offer(seq);
        }
        seq = SeqNo(seq.0 + pending.batch.len() as u64);
    }
    let default_sv = inner.default.current.load();
    let mut inserted = match (own, group.first()) {
        (Some(own), Some(leader)) => apply_batch(inner, &default_sv, &leader.batch, own),
        _ => Ok(0),
    };
    for pending in group.iter().skip(1) {
        if !pending.rejected.load(Ordering::Acquire) {
            let theirs = pending
                .insert
                .finish(|seq| apply_at(inner, &pending.batch, seq));
            inserted = inserted.and_then(|bytes| theirs.map(|more| bytes + more));
        }
    }
    let user_bytes = match inserted {
        Ok(bytes) => bytes,
        Err(e) => {
            writer.last_seq = SeqNo(first_seq.0 + count.saturating_sub(1));
            log_failed(inner, &mut writer, &e);
            return Err(e);
        }
    };
    let last = SeqNo(seq.0 - 1);
    writer.last_seq = last;
    inner.last_visible.store(last.0, Ordering::Release);
    inner.counters.write_groups.fetch_add(1, Ordering::Relaxed);
    inner
        .counters
        .user_bytes_written
        .fetch_add(user_bytes, Ordering::Relaxed);
    // The batches written: those the oracle refused are not.
    let written = group
        .iter()
        .filter(|p| !p.rejected.load(Ordering::Acquire))
        .count();
    inner
        .counters
        .writes
        .fetch_add(written as u64, Ordering::Relaxed);
    Ok(())
}

/// Refuses writes the database cannot take now.
pub(crate) fn check_writable(inner: &DbInner, writer: &WriterState) -> Result<()> {
    if writer.closed {
        // A keyspace handle or an AsyncDb outliving the `Db`.
        return Err(Error::Closed);
    }
    if let Some(cause) = &writer.log_failure {
        return Err(Error::read_only(cause));
    }
    match background::writes_refused(inner) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// The log failed with `error`: refuse writes until recovery replaced it.
fn log_failed(inner: &DbInner, writer: &mut WriterState, error: &Error) {
    writer.log_failure = Some(error.duplicate());
    background::log_failed(inner, error);
}

/// Rotates the log when a keyspace's memtable is full (or when `force`
/// and any holds anything), first waiting while background work of a
/// full keyspace is too far behind. While flushes fail it refuses instead:
/// a sealed memtable could not be flushed either.
fn make_room(inner: &DbInner, writer: &mut WriterState, force: bool) -> Result<()> {
    let trees = inner.trees.load();
    let budget = inner.opts.total_memtable_bytes;
    let over_budget = budget.map_or_else(Vec::new, |budget| budget_seals(&trees, budget));
    let must_seal = |tree: &Tree| {
        let sv = tree.current.load();
        let full = sv.mem.mem.approximate_bytes() >= tree.opts.load().memtable_bytes;
        full || (force && !sv.mem.mem.is_empty()) || over_budget.contains(&tree.id)
    };
    let flush_behind = || budget.is_some_and(|budget| waiting_over_budget(&trees, budget));
    let seal = trees.iter().any(|t| must_seal(t));
    if !seal && !flush_behind() {
        return Ok(());
    }
    if let Some(refused) = background::rotation_refused(inner) {
        return Err(refused);
    }
    let blocked = || {
        if flush_behind() {
            return Blocked::OnFlush;
        }
        let mut blocked = Blocked::No;
        for tree in trees.iter().filter(|t| must_seal(t)) {
            let sv = tree.current.load();
            let level0 = sv.version.levels.first().map_or(0, Vec::len);
            if sv.imm.len() >= MAX_IMMUTABLE {
                return Blocked::OnFlush;
            } else if level0 >= inner.opts.level0_stop_writes {
                blocked = Blocked::OnCompaction;
            }
        }
        blocked
    };
    // Only this writer (holding the writer lock) changes the active
    // memtables, so they are still full after the wait.
    let stalled_on = blocked();
    if stalled_on != Blocked::No {
        inner.counters.write_stalls.fetch_add(1, Ordering::Relaxed);
        let started = Instant::now();
        let waited = background::wait_while(inner, blocked);
        // A channel send: the listener runs on its own thread, not under
        // the writer lock held here.
        inner.events.emit(|| {
            Event::WriteStall(WriteStallEvent {
                cause: if stalled_on == Blocked::OnFlush {
                    StallCause::Flush
                } else {
                    StallCause::Level0
                },
                waited: started.elapsed(),
            })
        });
        // Rounded up: every stall counts at least one microsecond.
        let micros = u64::try_from(started.elapsed().as_micros())
            .unwrap_or(u64::MAX)
            .max(1);
        inner
            .counters
            .write_stall_micros
            .fetch_add(micros, Ordering::Relaxed);
        waited?;
    }
    if !seal {
        // Only waited for a flush to bring the memtables under the budget.
        return Ok(());
    }
    rotate(inner, writer, &|tree: &Tree| must_seal(tree))
}

/// Each keyspace's active memtable bytes (with its id) and the bytes of
/// every memtable waiting to be flushed: what `Options::total_memtable_bytes`
/// bounds.
fn memtable_use(trees: &[Arc<Tree>]) -> (Vec<(usize, u32)>, usize) {
    let mut active = Vec::with_capacity(trees.len());
    let mut waiting = 0usize;
    for tree in trees {
        let sv = tree.current.load();
        active.push((sv.mem.mem.approximate_bytes(), tree.id));
        waiting = waiting.saturating_add(sv.immutable_bytes());
    }
    (active, waiting)
}

fn total(active: &[(usize, u32)]) -> usize {
    active.iter().fold(0, |sum, a| sum.saturating_add(a.0))
}

/// The keyspaces whose active memtables `Options::total_memtable_bytes`
/// (`budget`) seals now: none while every memtable, active and waiting to
/// be flushed, holds less than the budget, or the active ones less than
/// half of it (then a flush is behind: see [`waiting_over_budget`]);
/// otherwise the largest active ones, largest first, until those left hold
/// less than half of it.
fn budget_seals(trees: &[Arc<Tree>], budget: usize) -> Vec<u32> {
    let (mut active, waiting) = memtable_use(trees);
    let mut active_bytes = total(&active);
    if active_bytes.saturating_add(waiting) < budget || active_bytes < budget / 2 {
        return Vec::new();
    }
    active.sort_unstable_by_key(|&(bytes, _)| std::cmp::Reverse(bytes));
    let mut seal = Vec::new();
    for (bytes, id) in active {
        if active_bytes < budget / 2 || bytes == 0 {
            break;
        }
        seal.push(id);
        active_bytes -= bytes;
    }
    seal
}

/// Whether writes must wait for a flush under `Options::total_memtable_bytes`
/// (`budget`): the memtables hold the budget or more, and those waiting to
/// be flushed half of it or more (sealing more would not bring them under).
fn waiting_over_budget(trees: &[Arc<Tree>], budget: usize) -> bool {
    let (active, waiting) = memtable_use(trees);
    waiting >= budget / 2 && total(&active).saturating_add(waiting) >= budget
}

/// A database as a member of a shared memtable budget
/// (`Options::write_buffer_manager`, `src/shared/write_buffer.rs`): what
/// its memtables hold, sealing its largest, whether its flushes are going.
/// The budget calls these with no lock of this database held.
impl BufferedMemory for DbInner {
    fn memtable_memory(&self) -> MemtableMemory {
        memtable_memory(&self.trees.load())
    }

    fn seal_largest(&self) -> bool {
        seal_largest(self)
    }

    fn flushes_going(&self) -> bool {
        background::flushes_going(self)
    }
}

/// Makes the database a member of its memtable budget, if it has one
/// (after the open, once it is shared): the budget may seal its memtables
/// from now on.
pub(crate) fn join_write_buffer(inner: &Arc<DbInner>) {
    if let Some(slot) = &inner.write_buffer {
        let weak: Weak<DbInner> = Arc::downgrade(inner);
        slot.attach(weak);
        inner.report_memtables();
    }
}

/// Seals the active memtable holding the most (for a shared memtable
/// budget, `Options::write_buffer_manager`), taking the writer lock: false
/// when none was sealed — the database is closed or failing, none holds
/// anything, or that keyspace has as many memtables waiting for a flush as
/// it may (sealing would stall its writers).
pub(crate) fn seal_largest(inner: &DbInner) -> bool {
    let mut writer = inner.writer.lock();
    if check_writable(inner, &writer).is_err() || background::rotation_refused(inner).is_some() {
        return false;
    }
    let largest = inner
        .trees
        .load()
        .iter()
        .map(|tree| {
            let sv = tree.current.load();
            (sv.mem.mem.approximate_bytes(), sv.imm.len(), tree.id)
        })
        .max_by_key(|&(bytes, ..)| bytes);
    match largest {
        Some((bytes, waiting, id)) if bytes > 0 && waiting < MAX_IMMUTABLE => {
            rotate(inner, &mut writer, &|tree: &Tree| tree.id == id).is_ok()
        }
        _ => false,
    }
}

/// Starts a new log (the old one synced) and seals the memtables of the
/// keyspaces `must_seal` names, and with them every other non-empty
/// memtable that began in a log older than the one now left: so no
/// memtable spans more than two logs, and a keyspace written rarely does
/// not keep old logs (and their replay at the next open) alive for long.
/// An empty memtable moves to the new log.
fn rotate(
    inner: &DbInner,
    writer: &mut WriterState,
    must_seal: &dyn Fn(&Tree) -> bool,
) -> Result<()> {
    let mut created = None;
    let result = (|| {
        sync_log(inner, writer)?;
        let mut versions = inner.versions.lock();
        let log_number = versions.new_file_number();
        let path = inner.path_of(&wal_file_name(log_number));
        created = Some(path.clone());
        let wal = WalWriter::create(inner.fs.as_ref(), &path, log_number)?;
        inner.fs.sync_dir(&inner.dir)?;
        versions.logs.push(log_number);
        let old_log = writer.log_number;
        writer.wal = wal;
        writer.log_number = log_number;
        for tree in inner.trees.load().iter() {
            let sv = tree.current.load();
            if sv.mem.mem.is_empty() {
                tree.move_empty_memtable(log_number);
            } else if must_seal(tree) || sv.mem.log_number < old_log {
                tree.seal_memtable(log_number);
            }
        }
        drop(versions);
        Ok(())
    })();
    if let Err(e) = &result {
        // The new log, if it was made, never took a record.
        if let Some(path) = created {
            let _ = inner.fs.remove(&path);
        }
        log_failed(inner, writer, e);
    }
    background::notify(inner);
    result
}

/// Creates the keyspace `name` (its settings `given` over the database's
/// options), empty, durably: it is in the manifest, settings included,
/// before it is returned. Under the writer lock, so no batch
/// is logged meanwhile (its memtable starts at the active log).
pub(crate) fn create_keyspace(
    inner: &DbInner,
    name: &str,
    given: KeyspaceOptions,
) -> Result<Arc<Tree>> {
    let opts = given.apply(&inner.opts)?;
    let writer = inner.writer.lock();
    check_writable(inner, &writer)?;
    let mut versions = inner.versions.lock();
    // Created meanwhile by another thread: `given` applies over its settings.
    if let Some(tree) = inner.tree_named(name) {
        drop(versions);
        drop(writer);
        update_keyspace_options(inner, &tree, &given)?;
        return Ok(tree);
    }
    let id = versions.next_keyspace_id;
    versions.next_keyspace_id = id.checked_add(1).ok_or_else(|| {
        Error::invalid("every keyspace id has been given out (2^32 keyspaces created)")
    })?;
    let tree = Arc::new(Tree::new(
        id,
        name.to_string(),
        opts,
        given,
        Version::with_levels(LEVELS),
        writer.log_number,
    ));
    let before = inner.trees.load_full();
    let mut with = before.as_ref().clone();
    with.push(Arc::clone(&tree));
    inner.trees.store(Arc::new(with));
    if let Err(e) = inner.persist(&mut versions, None) {
        // The id stays given out: an id is never handed out twice.
        inner.trees.store(before);
        return Err(e);
    }
    Ok(tree)
}

/// Applies `given` over `tree`'s settings; a change of the stored ones is
/// in the manifest (durably) before this returns. On a read-only database
/// the change lasts until the close and nothing is written.
pub(crate) fn update_keyspace_options(
    inner: &DbInner,
    tree: &Arc<Tree>,
    given: &KeyspaceOptions,
) -> Result<()> {
    tree.check_live()?;
    let writer = inner.writer.lock();
    let mut versions = inner.versions.lock();
    let now = tree.given.lock().clone();
    let next = now.overlaid(given);
    let opts = next.apply(&inner.opts)?;
    if next.settings() != now.settings() && !inner.opts.read_only {
        check_writable(inner, &writer)?;
        *tree.given.lock() = next;
        if let Err(e) = inner.persist(&mut versions, None) {
            *tree.given.lock() = now;
            return Err(e);
        }
    } else {
        *tree.given.lock() = next;
    }
    tree.set_options(opts);
    Ok(())
}

/// Drops the keyspace of `tree`: gone from the manifest (durably) before
/// this returns; its tables' files go once no reader holds them.
pub(crate) fn drop_keyspace(inner: &DbInner, tree: &Arc<Tree>) -> Result<()> {
    let writer = inner.writer.lock();
    check_writable(inner, &writer)?;
    let mut versions = inner.versions.lock();
    let before = inner.trees.load_full();
    if !before.iter().any(|t| Arc::ptr_eq(t, tree)) {
        return Ok(());
    }
    let without: Vec<Arc<Tree>> = before
        .iter()
        .filter(|t| !Arc::ptr_eq(t, tree))
        .cloned()
        .collect();
    inner.trees.store(Arc::new(without));
    if let Err(e) = inner.persist(&mut versions, None) {
        inner.trees.store(before);
        return Err(e);
    }
    tree.dropped.store(true, Ordering::Release);
    let obsolete = versions.take_obsolete_logs();
    drop(versions);
    drop(writer);
    flush::remove_logs(inner, &obsolete);
    // Scans and snapshots may still read its tables: each file goes when
    // the last handle on its table does.
    let sv = tree.current.load();
    for table in sv.version.levels.iter().flatten() {
        if let Ok(table) = &table.table {
            table.remove_file_when_unused();
        }
    }
    Ok(())
}

/// Rotates the memtable if it holds anything (for an explicit flush).
pub(crate) fn rotate_if_nonempty(inner: &DbInner) -> Result<()> {
    let mut writer = inner.writer.lock();
    check_writable(inner, &writer)?;
    make_room(inner, &mut writer, true)
}

/// Makes every acknowledged write durable (the active log synced) without
/// a flush. A failed sync leaves the log's tail uncertain: writes are
/// refused until recovery has started a new log, as after a failed append.
pub(crate) fn persist(inner: &DbInner) -> Result<()> {
    let mut writer = inner.writer.lock();
    check_writable(inner, &writer)?;
    if let Err(e) = sync_log(inner, &mut writer) {
        log_failed(inner, &mut writer, &e);
        return Err(e);
    }
    Ok(())
}

/// Syncs the active log and counts it (`Stats::log_syncs`).
fn sync_log(inner: &DbInner, writer: &mut WriterState) -> Result<()> {
    writer.wal.sync()?;
    writer.unsynced = false;
    inner.counters.log_syncs.fetch_add(1, Ordering::Relaxed);
    Ok(())
}

/// `Options::sync_interval`'s thread: every `interval` until shutdown,
/// [`sync_if_unsynced`] (a failure reaches the writers, which it refuses,
/// not this thread).
pub(crate) fn sync_periodically(inner: &DbInner, interval: Duration) {
    while background::sleep_unless_shutdown(inner, interval) {
        let _ = sync_if_unsynced(inner);
    }
}

/// `Options::sync_interval`'s sync: the active log synced when it holds
/// records appended since its last sync; nothing otherwise, nor while the
/// database refuses writes. A failed sync refuses writes until recovery
/// has started a new log, as after a failed synced write.
pub(crate) fn sync_if_unsynced(inner: &DbInner) -> Result<()> {
    let mut writer = inner.writer.lock();
    if !writer.unsynced || check_writable(inner, &writer).is_err() {
        return Ok(());
    }
    if let Err(e) = sync_log(inner, &mut writer) {
        log_failed(inner, &mut writer, &e);
        return Err(e);
    }
    Ok(())
}

/// At a clean close: ends the active log with its close record (synced),
/// so the next open knows no crash cut it short, then records the clean
/// close — the log's number and whole length — in the manifest, so the
/// next open also knows a log cut short afterwards (its close record gone
/// with its tail) for a loss rather than a crash's torn tail. A log that
/// failed (or whose replacement is pending) is left as a crash would leave
/// it.
pub(crate) fn close_log(inner: &DbInner) -> Result<()> {
    let mut writer = inner.writer.lock();
    writer.closed = true;
    if writer.log_failure.is_some() || writer.pending_log.is_some() {
        return writer.wal.sync();
    }
    writer.wal.close()?;
    let closed = ClosedLog {
        number: writer.wal.log_number(),
        // The writer writes the current log format, whose close record
        // has this length.
        len: writer.wal.bytes_written() + CLOSE_RECORD_LEN as u64,
    };
    // The durable state with the clean close added (the background
    // threads have stopped; the lock keeps any other manifest write out).
    let versions = inner.versions.lock();
    let fs = inner.fs.as_ref();
    match read_manifest(fs, &inner.dir)? {
        Some(mut state) if state.log_number <= closed.number => {
            state.closed_log = Some(closed);
            // The log was made after the last manifest write when no flush
            // followed its rotation: its number is then not below the
            // durable next file number. The allocator's is above every
            // number given out, the log's included.
            state.next_file_number = state.next_file_number.max(versions.next_file_number);
            write_manifest(fs, &inner.dir, &state)
        }
        _ => Ok(()),
    }
}
