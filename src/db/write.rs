//! The write path: group commit into the log, then the memtable.
//!
//! Owns: the writer queue (the first waiting writer leads a group: one log
//! append and at most one fsync for every batch queued behind it), sequence
//! assignment, memtable rotation and write stalls.
//! Must never: acknowledge a batch before its log record reached the OS (and
//! the disk, with `sync_writes`), make part of a batch visible, or write
//! after a failed log append left the log's tail uncertain.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use parking_lot::Mutex;

use crate::batch::WriteBatch;
use crate::db::{background, DbInner, LoggedMemtable, SuperVersion, MAX_IMMUTABLE};
use crate::error::{Error, Result};
use crate::filename::wal_file_name;
use crate::key::SeqNo;
use crate::memtable::Memtable;
use crate::wal::WalWriter;

/// Bytes of batches one group may carry beyond its leader's.
const MAX_GROUP_BYTES: usize = 1 << 20;

/// State only the group leader touches.
pub(crate) struct WriterState {
    pub wal: WalWriter,
    pub log_number: u64,
    pub last_seq: SeqNo,
    /// Set after a failed log write: the tail is uncertain, refuse writes.
    pub poisoned: Option<String>,
}

struct Pending {
    batch: WriteBatch,
    done: Mutex<Option<Result<()>>>,
}

#[derive(Default)]
pub(crate) struct WriteQueue {
    waiting: VecDeque<Arc<Pending>>,
}

pub(crate) fn write(inner: &DbInner, batch: WriteBatch) -> Result<()> {
    let me = Arc::new(Pending {
        batch,
        done: Mutex::new(None),
    });
    let mut queue = inner.queue.lock();
    queue.waiting.push_back(Arc::clone(&me));
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
        inner.queue_cv.wait(&mut queue);
    }

    // This writer leads: take it and the batches queued behind it.
    let mut group = Vec::new();
    let mut bytes = 0;
    for pending in queue.waiting.iter() {
        if !group.is_empty() && bytes + pending.batch.approximate_bytes() > MAX_GROUP_BYTES {
            break;
        }
        bytes += pending.batch.approximate_bytes();
        group.push(Arc::clone(pending));
    }
    drop(queue);

    let result = write_group(inner, &group);

    let mut queue = inner.queue.lock();
    for pending in &group {
        queue.waiting.pop_front();
        if !Arc::ptr_eq(pending, &me) {
            let copy = match &result {
                Ok(()) => Ok(()),
                Err(e) => Err(e.duplicate()),
            };
            *pending.done.lock() = Some(copy);
        }
    }
    inner.queue_cv.notify_all();
    result
}

fn write_group(inner: &DbInner, group: &[Arc<Pending>]) -> Result<()> {
    let mut writer = inner.writer.lock();
    if let Some(reason) = &writer.poisoned {
        return Err(Error::Poisoned(reason.clone()));
    }
    make_room(inner, &mut writer, false)?;

    let first_seq = writer.last_seq.next();
    let merged;
    let batch: &WriteBatch = match group {
        [only] => &only.batch,
        _ => {
            let mut all = WriteBatch::new();
            for pending in group {
                all.append(&pending.batch);
            }
            merged = all;
            &merged
        }
    };
    let record = batch.encode_record(first_seq);
    let sync = inner.opts.sync_writes;
    let logged = writer
        .wal
        .append(&record)
        .and_then(|()| if sync { writer.wal.sync() } else { Ok(()) });
    if let Err(e) = logged {
        writer.poisoned = Some(format!("log write failed: {e}"));
        return Err(e);
    }

    let sv = inner.current.load();
    let mut seq = first_seq;
    for op in batch.iter() {
        sv.mem.mem.insert(op.key, seq, op.kind, op.value);
        seq = seq.next();
    }
    let last = SeqNo(seq.0 - 1);
    writer.last_seq = last;
    inner.last_visible.store(last.0, Ordering::Release);
    inner.counters.write_groups.fetch_add(1, Ordering::Relaxed);
    inner
        .counters
        .writes
        .fetch_add(group.len() as u64, Ordering::Relaxed);
    Ok(())
}

/// Rotates the memtable when it is full (or when `force` and it holds
/// anything), first waiting while background work is too far behind.
fn make_room(inner: &DbInner, writer: &mut WriterState, force: bool) -> Result<()> {
    let behind = || {
        let sv = inner.current.load();
        let level0 = sv.version.levels.first().map_or(0, Vec::len);
        sv.imm.len() >= MAX_IMMUTABLE || level0 >= inner.opts.level0_stop_writes
    };
    let sv = inner.current.load();
    let full = sv.mem.mem.approximate_bytes() >= inner.opts.memtable_bytes;
    if !(full || (force && !sv.mem.mem.is_empty())) {
        return Ok(());
    }
    // Only this writer (holding the writer lock) changes the active
    // memtable, so it is still full after the wait.
    if behind() {
        inner.counters.write_stalls.fetch_add(1, Ordering::Relaxed);
        background::wait_while(inner, behind)?;
    }
    rotate(inner, writer)
}

/// Seals the active memtable (its log synced), starts a new log and memtable.
fn rotate(inner: &DbInner, writer: &mut WriterState) -> Result<()> {
    let result = (|| {
        writer.wal.sync()?;
        let mut versions = inner.versions.lock();
        let log_number = versions.new_file_number();
        let path = inner.path_of(&wal_file_name(log_number));
        let wal = WalWriter::create(inner.fs.as_ref(), &path, log_number)?;
        inner.fs.sync_dir(&inner.dir)?;
        writer.wal = wal;
        writer.log_number = log_number;
        let old = inner.current.load_full();
        let mut imm = Vec::with_capacity(old.imm.len() + 1);
        imm.push(old.mem.clone());
        imm.extend(old.imm.iter().cloned());
        inner.current.store(Arc::new(SuperVersion {
            mem: LoggedMemtable {
                mem: Arc::new(Memtable::new()),
                log_number,
            },
            imm,
            version: Arc::clone(&old.version),
        }));
        drop(versions);
        Ok(())
    })();
    if let Err(e) = &result {
        writer.poisoned = Some(format!("log rotation failed: {e}"));
    }
    background::notify(inner);
    result
}

/// Rotates the memtable if it holds anything (for an explicit flush).
pub(crate) fn rotate_if_nonempty(inner: &DbInner) -> Result<()> {
    let mut writer = inner.writer.lock();
    if let Some(reason) = &writer.poisoned {
        return Err(Error::Poisoned(reason.clone()));
    }
    make_room(inner, &mut writer, true)
}

/// Makes the active log durable.
pub(crate) fn sync_log(inner: &DbInner) -> Result<()> {
    inner.writer.lock().wal.sync()
}
