//! The raft log, the vote and the committed index in siftdb (openraft's
//! `RaftLogStorage` + `RaftLogReader`, storage v2).
//!
//! Owns: two keyspaces of the node's one database — `raft.log`, every
//! entry under its index big-endian, and `raft.meta`'s `vote`, `purged`
//! (the last purged log id) and `committed` — the log writer thread and
//! its queue, the entries appended but not yet written (readable
//! meanwhile) and the newest written ones (`Memory`), and the in-memory
//! bounds of the log (first and last present entry, last purged id), read
//! back once at open.
//! Must never: call an append's callback before the batch holding its
//! entries is on disk; leave a hole in the log (entries reach the database
//! in append order, in whole appends, and a truncation and a purge are each
//! one atomic batch written after every earlier append, so a crash leaves
//! the log before or after each, never between); return an entry whose
//! stored index differs from its key.
//!
//! Durability per write, in the one write-ahead log the node's keyspaces
//! share: appends, the vote, truncations and purges are written synced
//! (`WriteOptions::sync(true)`); the committed index and the state
//! machine's applies are not. A synced write also makes every write logged
//! before it durable (the log is synced in order), which is what lets a
//! purge go without a flush of the state machine first: the applies it
//! relies on precede it in the log.
//!
//! Appends are group-committed. `append` puts the entries in the pending
//! map (so they are readable when it returns, as openraft requires) and
//! queues them; the writer thread takes every append queued at that moment,
//! writes them as one synced siftdb batch (one fsync), then moves them from
//! the pending map to the recent one and fires their callbacks. openraft appends each client
//! write separately on the leader, so without this every client write would
//! cost a leader fsync of its own. A vote, a truncation or a purge first
//! waits until the queue is written ("all write I/O serialized"), then is
//! written synced itself.
//!
//! A leader's own appends are also handed, when queued and before they
//! are written, to the early sends ([`crate::early_send`]), which send
//! them to the followers while the fsync runs; the callback still waits
//! for the fsync, so the leader counts itself towards a quorum only for
//! entries on its disk.
//!
//! The newest written entries stay in memory (up to `RECENT_BYTES`):
//! openraft reads an entry back twice right after its append is durable,
//! to send it to the followers (openraft sends only once the leader's own
//! fsync is done) and to apply it once committed (raft's core waits for that read).
//! Read from the database, each read was a trip to a blocking thread on
//! one client's critical path (measured: 0.26 ms from a follower's answer
//! to the apply, 0.30 ms from the leader's fsync to the first send, on a
//! loaded machine).
//!
//! A truncation or a purge is one range delete (a single range tombstone,
//! whatever the number of entries) in a synced batch; the big-endian keys
//! make a range of indexes a range of keys, every read of a range of
//! indexes one ordered scan, and the last entry at open one backward step.
//! The bounds of the log are kept in memory, so no scan is needed to answer
//! openraft's log state. The committed index is a hint openraft
//! re-applies up to at start: `save_committed` only queues it to the writer
//! thread (openraft awaits it before it applies what was committed, so
//! writing it there would hold up every answer by a write and two thread
//! hand-offs); the writer puts it into the next group of appends, or, with
//! none queued, writes it alone without fsync. It reaches the disk with
//! the next synced write, and a stale value after a power cut only means
//! fewer entries re-applied before the leader's next message.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::ops::{Bound, RangeBounds};
use std::sync::mpsc;
use std::sync::Arc;

use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{Entry, ErrorSubject, ErrorVerb, LogId, RaftLogReader, StorageError, Vote};
use parking_lot::RwLock;
use siftdb::{Db, Keyspace, KeyspaceOptions, WriteBatch, WriteOptions};
use tokio::sync::watch;

use crate::codec::{self, decode, encode, log_index, log_key, Error, Result};
use crate::timings::{Counter, Step, Timings};
use crate::types::{NodeId, TypeConfig};

/// The log keyspace's memtable: entries are purged soon after a snapshot,
/// so most of them should die before they are flushed.
const LOG_MEMTABLE_BYTES: usize = 16 << 20;
/// The meta keyspace holds four keys, overwritten (the committed index at
/// every commit): small, yet large enough that it is never the keyspace
/// whose full memtable rotates the shared log.
const META_MEMTABLE_BYTES: usize = 4 << 20;
/// The writer groups queued appends up to this many bytes per fsync.
const GROUP_BYTES: usize = 64 << 20;
/// Encoded bytes of the newest written entries kept in memory for
/// replication and apply (a follower behind by more reads the database).
const RECENT_BYTES: usize = 16 << 20;

type StorageResult<T> = std::result::Result<T, StorageError<NodeId>>;

/// Runs a blocking engine call off the async workers.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T> + Send + 'static,
) -> Result<T> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| Error::Task(e.to_string()))?
}

/// What the log's reader and writer share.
struct Shared {
    db: Arc<Db>,
    /// `raft.log`: entry index (big-endian) → entry.
    log: Keyspace,
    /// `raft.meta`: vote, last purged id, committed id.
    meta: Keyspace,
    /// The newest entries, written or not.
    memory: RwLock<Memory>,
    timings: Arc<Timings>,
}

/// The entries read without the database: together, the newest entries of
/// the log without a gap (an append group moves from `pending` to `recent`
/// whole, in append order, under one lock; `recent` loses its oldest first;
/// a truncation and a purge cut it at their index, after the queue is
/// written, when nothing is pending).
#[derive(Default)]
struct Memory {
    /// Appended, not yet written: index → entry.
    pending: BTreeMap<u64, Entry<TypeConfig>>,
    /// Written: index → (entry, encoded bytes), below `pending`.
    recent: BTreeMap<u64, (Entry<TypeConfig>, usize)>,
    /// Encoded bytes in `recent`.
    recent_bytes: usize,
}

impl Memory {
    /// The first index held.
    fn first(&self) -> Option<u64> {
        let recent = self.recent.keys().next();
        recent.or_else(|| self.pending.keys().next()).copied()
    }

    /// Entries of `start..=end` held (clones), in index order.
    fn range(&self, start: u64, end: u64) -> impl Iterator<Item = Entry<TypeConfig>> + '_ {
        let recent = self.recent.range(start..=end).map(|(_, (e, _))| e.clone());
        recent.chain(self.pending.range(start..=end).map(|(_, e)| e.clone()))
    }

    /// Moves the written entry `id` (of `bytes` encoded bytes) from pending
    /// to recent, unless a truncation and a new append replaced it
    /// meanwhile; forgets the oldest recent entries past `RECENT_BYTES`.
    fn written(&mut self, id: &LogId<NodeId>, bytes: usize) {
        if self.pending.get(&id.index).is_none_or(|e| e.log_id != *id) {
            return;
        }
        let Some(entry) = self.pending.remove(&id.index) else {
            return;
        };
        self.recent_bytes += bytes;
        if let Some((_, old)) = self.recent.insert(id.index, (entry, bytes)) {
            self.recent_bytes -= old;
        }
        while self.recent_bytes > RECENT_BYTES {
            let Some((_, (_, old))) = self.recent.pop_first() else {
                break;
            };
            self.recent_bytes -= old;
        }
    }

    /// Forgets the recent entries from `index` on.
    fn truncate_recent(&mut self, index: u64) {
        let cut = self.recent.split_off(&index);
        self.recent_bytes -= cut.values().map(|(_, b)| b).sum::<usize>();
    }

    /// Forgets the recent entries up to `index`.
    fn purge_recent(&mut self, index: u64) {
        let kept = index
            .checked_add(1)
            .map(|next| self.recent.split_off(&next))
            .unwrap_or_default();
        self.recent = kept;
        self.recent_bytes = self.recent.values().map(|(_, b)| b).sum();
    }
}

/// Work for the writer thread, done in queue order.
enum Job {
    /// Entries already in `pending`, encoded in `batch` (`bytes` each).
    Append {
        batch: WriteBatch,
        ids: Vec<LogId<NodeId>>,
        bytes: Vec<usize>,
        callback: LogFlushed<TypeConfig>,
    },
    /// The committed index (a hint), written with the next group.
    Committed(Vec<u8>),
    /// Answered once every earlier job is written.
    Barrier(tokio::sync::oneshot::Sender<Result<()>>),
}

/// The log storage of one node.
pub struct LogStore {
    shared: Arc<Shared>,
    queue: mpsc::Sender<Job>,
    /// Joined on drop, so the database is closed when the store is gone
    /// (and can be opened again at once).
    writer: Option<std::thread::JoinHandle<()>>,
    /// First entry present, when any.
    first_index: Option<u64>,
    /// Last entry present, when any.
    last_present: Option<LogId<NodeId>>,
    last_purged: Option<LogId<NodeId>>,
    /// When set, a purge waits until the state machine holds what it removes.
    gate: Option<PurgeGate>,
    /// The committed id last saved (queued, perhaps not yet written).
    committed: Option<Option<LogId<NodeId>>>,
    /// This node's id and where its own leader appends go at once, before
    /// they are written ([`LogStore::send_own_appends`]).
    own_appends: Option<(NodeId, tokio::sync::mpsc::UnboundedSender<OwnAppend>)>,
}

/// Entries this node appended as leader, with the id of the entry before
/// them in its log: an append-entries message the leader may send at once
/// ([`crate::early_send`]).
#[derive(Clone, Debug)]
pub struct OwnAppend {
    /// The entry before `entries` (none: they start the log).
    pub prev: Option<LogId<NodeId>>,
    /// The appended entries, in index order, all of one leader term.
    pub entries: Vec<Entry<TypeConfig>>,
}

/// How far a node's state machine has applied, published by it (see
/// [`crate::StateMachine::purge_gate`]) for the log store's purges.
#[derive(Clone, Copy, Debug, Default)]
pub struct Applied {
    /// The last applied log id (for an installed snapshot, its last one).
    pub last: Option<LogId<NodeId>>,
    /// An apply or an install failed: nothing more will be applied.
    pub failed: bool,
}

/// Makes a purge wait until the state machine has applied the entries it
/// removes.
///
/// Why: openraft 0.9 purges a follower's log up to a received snapshot as
/// soon as it has handed the install to the state-machine task, without
/// waiting for the install to finish. A node killed in between restarts
/// with its log purged past its snapshot and its state, and openraft
/// refuses to start it (purged past the snapshot: the entries in between
/// are nowhere). Found by the kill test (3 of 16 runs). Policy purges
/// (behind a snapshot the node built) never wait: the state machine has
/// applied past them already.
pub struct PurgeGate(watch::Receiver<Applied>);

impl PurgeGate {
    /// A gate on the positions `applied` publishes.
    pub fn new(applied: watch::Receiver<Applied>) -> PurgeGate {
        PurgeGate(applied)
    }

    /// Waits until the state machine has applied `upto`; an error when it
    /// failed (or went away) first.
    async fn covered(&mut self, upto: LogId<NodeId>) -> Result<()> {
        let failed = self
            .0
            .wait_for(|a| a.failed || a.last.is_some_and(|l| l.index >= upto.index))
            .await
            .map_or(true, |a| a.failed);
        if failed {
            return Err(Error::StateMachineFailed(upto.index));
        }
        Ok(())
    }
}

/// A reader of the log, for openraft's replication tasks.
#[derive(Clone)]
pub struct LogReader {
    shared: Arc<Shared>,
}

impl LogStore {
    /// Opens (creating when missing) the log and meta keyspaces of `db`,
    /// reads back the log's bounds and starts its writer thread; its siftdb
    /// calls are timed into `timings`.
    pub fn open(db: Arc<Db>, timings: Arc<Timings>) -> Result<LogStore> {
        let log = db.keyspace_with(
            codec::KEYSPACE_LOG,
            KeyspaceOptions::new().memtable_bytes(LOG_MEMTABLE_BYTES),
        )?;
        let meta = db.keyspace_with(
            codec::KEYSPACE_META,
            KeyspaceOptions::new().memtable_bytes(META_MEMTABLE_BYTES),
        )?;
        let last_purged = match meta.get(codec::KEY_PURGED)? {
            Some(v) => Some(decode::<LogId<NodeId>>(&v, "last purged log id")?),
            None => None,
        };
        let (first_index, last_present) = read_bounds(&log)?;
        if let (Some(first), Some(purged)) = (first_index, &last_purged) {
            if first <= purged.index {
                return Err(Error::corruption(
                    "raft log",
                    format!("entry {first} present at or below the purged id {purged}"),
                ));
            }
        }
        let shared = Arc::new(Shared {
            db,
            log,
            meta,
            memory: RwLock::new(Memory::default()),
            timings,
        });
        let (queue, jobs) = mpsc::channel();
        let writer_shared = Arc::clone(&shared);
        let writer = std::thread::Builder::new()
            .name("siftdb-raft-log".into())
            .spawn(move || write_loop(&writer_shared, &jobs))
            .map_err(|e| Error::io_in("starting the log writer thread", e))?;
        Ok(LogStore {
            shared,
            queue,
            writer: Some(writer),
            first_index,
            last_present,
            last_purged,
            gate: None,
            committed: None,
            own_appends: None,
        })
    }

    /// From now on a purge waits until the state machine has applied what
    /// it removes (see [`PurgeGate`]). A node sets this; openraft's storage
    /// suite runs the log store without a state machine behind it.
    pub fn gate_purges(&mut self, gate: PurgeGate) {
        self.gate = Some(gate);
    }

    /// From now on, each append of entries this node (`id`) made as
    /// leader is also handed to `to` as soon as it is queued, before it is
    /// written: for [`crate::early_send`], which sends it to the followers
    /// while the fsync runs. Appends of other leaders' entries (this node
    /// a follower) are not.
    pub fn send_own_appends(
        &mut self,
        id: NodeId,
        to: tokio::sync::mpsc::UnboundedSender<OwnAppend>,
    ) {
        self.own_appends = Some((id, to));
    }

    fn last_log_id(&self) -> Option<LogId<NodeId>> {
        self.last_present.or(self.last_purged)
    }

    /// Waits until every append queued so far is on disk.
    async fn drain(&self) -> Result<()> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.queue
            .send(Job::Barrier(tx))
            .map_err(|_| Error::Task("log writer stopped".into()))?;
        rx.await
            .map_err(|_| Error::Task("log writer stopped".into()))?
    }

    /// Writes `batch` (synced) once every queued append is written, off the
    /// async workers, timed into the counter `which` picks.
    async fn write_after_queue(
        &self,
        batch: WriteBatch,
        which: fn(&Timings) -> &Counter,
    ) -> Result<()> {
        self.drain().await?;
        let shared = Arc::clone(&self.shared);
        blocking(move || {
            let _timer = which(&shared.timings).start();
            shared.write_synced(batch)
        })
        .await
    }
}

impl Shared {
    /// Writes `batch` and syncs the log before returning.
    fn write_synced(&self, batch: WriteBatch) -> Result<()> {
        self.db
            .write_with(batch, WriteOptions::new().sync(true))
            .map_err(Error::from)
    }
}

impl Drop for LogStore {
    fn drop(&mut self) {
        // The writer ends once its queue is closed, after the jobs queued.
        let (closed, _) = mpsc::channel();
        drop(std::mem::replace(&mut self.queue, closed));
        if let Some(writer) = self.writer.take() {
            if writer.join().is_err() {
                tracing::warn!("the log writer thread panicked");
            }
        }
    }
}

/// An append the writer has taken: its ids, their encoded sizes, its
/// callback.
type Written = (Vec<LogId<NodeId>>, Vec<usize>, LogFlushed<TypeConfig>);

/// The writer thread: takes every queued job, writes the appends among
/// them as one synced batch, then publishes them; ends when the store is
/// dropped.
fn write_loop(shared: &Shared, jobs: &mpsc::Receiver<Job>) {
    loop {
        let first = match jobs.recv() {
            Ok(job) => job,
            Err(mpsc::RecvError) => return,
        };
        let mut group = WriteBatch::new();
        let mut written: Vec<Written> = Vec::new();
        let mut barriers = Vec::new();
        // The last committed id queued: earlier ones are superseded.
        let mut committed = None;
        let mut next = Some(first);
        while let Some(job) = next.take() {
            match job {
                Job::Append {
                    batch,
                    ids,
                    bytes,
                    callback,
                } => {
                    group.append(&batch);
                    written.push((ids, bytes, callback));
                }
                Job::Committed(value) => committed = Some(value),
                Job::Barrier(tx) => {
                    barriers.push(tx);
                    // Appends queued after a barrier are written after it.
                    break;
                }
            }
            if group.approximate_bytes() >= GROUP_BYTES {
                break;
            }
            match jobs.try_recv() {
                Ok(job) => next = Some(job),
                Err(_) => break,
            }
        }
        let result = if group.is_empty() {
            Ok(())
        } else {
            let _timer = shared.timings.log_append.start();
            if let Some(value) = committed.take() {
                group.put_in(&shared.meta, codec::KEY_COMMITTED, value);
            }
            shared.write_synced(group)
        };
        if let Some(value) = committed {
            // No append to ride on: written alone, not synced (a hint).
            let _timer = shared.timings.committed.start();
            let mut batch = WriteBatch::new();
            batch.put_in(&shared.meta, codec::KEY_COMMITTED, value);
            if let Err(e) = shared.db.write_with(batch, WriteOptions::new().sync(false)) {
                // The next synced write fails the same way, and reports it.
                tracing::warn!("writing the committed index: {e}");
            }
        }
        match &result {
            Ok(()) => {
                let mut memory = shared.memory.write();
                for (ids, bytes, _) in &written {
                    for (id, &bytes) in ids.iter().zip(bytes) {
                        memory.written(id, bytes);
                    }
                }
                drop(memory);
                for (ids, _, _) in &written {
                    if let Some(last) = ids.last() {
                        shared.timings.step(
                            Step::Flushed,
                            last.index,
                            false,
                            Step::Appended,
                            |t| &t.flush,
                        );
                    }
                }
                for (_, _, callback) in written {
                    callback.log_io_completed(Ok(()));
                }
            }
            Err(e) => {
                for (_, _, callback) in written {
                    callback.log_io_completed(Err(std::io::Error::other(e.to_string())));
                }
            }
        }
        for tx in barriers {
            let answer = match &result {
                Ok(()) => Ok(()),
                Err(e) => Err(Error::Task(format!("log write failed: {e}"))),
            };
            let _ = tx.send(answer);
        }
    }
}

/// The first and last entry of the log, read once at open: one step from
/// each end. No hole can lie between them (see the module's "Must never"),
/// so nothing in between is read.
fn read_bounds(log: &Keyspace) -> Result<(Option<u64>, Option<LogId<NodeId>>)> {
    let index_of = |key: &[u8]| {
        log_index(key).ok_or_else(|| Error::corruption("raft log", "a log key is not 8 bytes"))
    };
    let Some((first_key, _)) = log.first_key_value()? else {
        return Ok((None, None));
    };
    let first = index_of(&first_key)?;
    let (last_key, last_value) = log
        .last_key_value()?
        .ok_or_else(|| Error::corruption("raft log", "a first entry but no last one"))?;
    let last = index_of(&last_key)?;
    let entry = decode_entry(last, &last_value)?;
    Ok((Some(first), Some(entry.log_id)))
}

fn decode_entry(index: u64, value: &[u8]) -> Result<Entry<TypeConfig>> {
    let entry: Entry<TypeConfig> = decode(value, "raft log entry")?;
    if entry.log_id.index != index {
        return Err(Error::corruption(
            "raft log entry",
            format!(
                "entry stored under index {index} says index {}",
                entry.log_id.index
            ),
        ));
    }
    Ok(entry)
}

/// `start..end` as inclusive bounds; `None` when it holds no index.
fn inclusive(start: Bound<u64>, end: Bound<u64>) -> Option<(u64, u64)> {
    let start = match start {
        Bound::Included(i) => Some(i),
        Bound::Excluded(i) => i.checked_add(1),
        Bound::Unbounded => Some(0),
    }?;
    let end = match end {
        Bound::Included(i) => Some(i),
        Bound::Excluded(i) => i.checked_sub(1),
        Bound::Unbounded => Some(u64::MAX),
    }?;
    (end >= start).then_some((start, end))
}

/// Entries in `start..=end`, in index order:
/// the ones in memory, read first, over the written ones — an entry is
/// written before it can leave memory, so reading memory first cannot
/// miss it.
fn read_range(shared: &Shared, start: u64, end: u64) -> Result<Vec<Entry<TypeConfig>>> {
    let mut out: BTreeMap<u64, Entry<TypeConfig>> = shared
        .memory
        .read()
        .range(start, end)
        .map(|e| (e.log_id.index, e))
        .collect();
    for item in shared.log.range(log_key(start)..=log_key(end)) {
        let (key, value) = item?;
        let index = log_index(&key)
            .ok_or_else(|| Error::corruption("raft log", "a log key is not 8 bytes"))?;
        if let std::collections::btree_map::Entry::Vacant(slot) = out.entry(index) {
            slot.insert(decode_entry(index, &value)?);
        }
    }
    Ok(out.into_values().collect())
}

/// The entries of `start..=end` when every one of them is in memory, read
/// without the database: memory holds the newest part of the log without
/// a gap (`Memory`), so a range starting at or after its first index lies
/// in it entirely.
fn read_memory(shared: &Shared, start: u64, end: u64) -> Option<Vec<Entry<TypeConfig>>> {
    let memory = shared.memory.read();
    let first = memory.first()?;
    (start >= first).then(|| memory.range(start, end).collect())
}

async fn read_entries<RB: RangeBounds<u64>>(
    shared: &Arc<Shared>,
    range: RB,
) -> StorageResult<Vec<Entry<TypeConfig>>> {
    let Some((start, end)) = inclusive(range.start_bound().cloned(), range.end_bound().cloned())
    else {
        return Ok(Vec::new());
    };
    // Replication and apply mostly ask for entries just appended: no trip
    // to a blocking thread for them.
    {
        let _timer = shared.timings.log_read.start();
        if let Some(entries) = read_memory(shared, start, end) {
            return Ok(entries);
        }
    }
    let shared = Arc::clone(shared);
    blocking(move || {
        let _timer = shared.timings.log_read.start();
        read_range(&shared, start, end)
    })
    .await
    .map_err(|e| e.storage(ErrorSubject::Logs, ErrorVerb::Read))
}

impl RaftLogReader<TypeConfig> for LogReader {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> StorageResult<Vec<Entry<TypeConfig>>> {
        read_entries(&self.shared, range).await
    }
}

impl RaftLogReader<TypeConfig> for LogStore {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> StorageResult<Vec<Entry<TypeConfig>>> {
        read_entries(&self.shared, range).await
    }
}

impl RaftLogStorage<TypeConfig> for LogStore {
    type LogReader = LogReader;

    async fn get_log_state(&mut self) -> StorageResult<LogState<TypeConfig>> {
        Ok(LogState {
            last_purged_log_id: self.last_purged,
            last_log_id: self.last_log_id(),
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        LogReader {
            shared: Arc::clone(&self.shared),
        }
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> StorageResult<()> {
        let err = |e: Error| e.storage(ErrorSubject::Vote, ErrorVerb::Write);
        let mut batch = WriteBatch::new();
        batch.put_in(
            &self.shared.meta,
            codec::KEY_VOTE,
            encode(vote, "vote").map_err(err)?,
        );
        // Synced, after every earlier append: on disk before openraft acts
        // on it.
        self.write_after_queue(batch, |t| &t.log_other)
            .await
            .map_err(err)
    }

    async fn read_vote(&mut self) -> StorageResult<Option<Vote<NodeId>>> {
        let err = |e: Error| e.storage(ErrorSubject::Vote, ErrorVerb::Read);
        match self
            .shared
            .meta
            .get(codec::KEY_VOTE)
            .map_err(|e| err(e.into()))?
        {
            Some(v) => decode(&v, "vote").map(Some).map_err(err),
            None => Ok(None),
        }
    }

    async fn save_committed(&mut self, committed: Option<LogId<NodeId>>) -> StorageResult<()> {
        let err = |e: Error| e.storage(ErrorSubject::Store, ErrorVerb::Write);
        let value = encode(&committed, "committed log id").map_err(err)?;
        // Queued, not awaited: openraft awaits this before it applies what
        // was committed, and a hint need not hold up the answers (see the
        // module documentation).
        self.queue
            .send(Job::Committed(value))
            .map_err(|_| err(Error::Task("log writer stopped".into())))?;
        self.committed = Some(committed);
        Ok(())
    }

    async fn read_committed(&mut self) -> StorageResult<Option<LogId<NodeId>>> {
        let err = |e: Error| e.storage(ErrorSubject::Store, ErrorVerb::Read);
        if let Some(committed) = self.committed {
            return Ok(committed);
        }
        match self
            .shared
            .meta
            .get(codec::KEY_COMMITTED)
            .map_err(|e| err(e.into()))?
        {
            Some(v) => decode::<Option<LogId<NodeId>>>(&v, "committed log id").map_err(err),
            None => Ok(None),
        }
    }

    async fn append<I>(&mut self, entries: I, callback: LogFlushed<TypeConfig>) -> StorageResult<()>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + Send,
        I::IntoIter: Send,
    {
        let err = |e: Error| e.storage(ErrorSubject::Logs, ErrorVerb::Write);
        let entries: Vec<Entry<TypeConfig>> = entries.into_iter().collect();
        let mut batch = WriteBatch::new();
        let mut ids = Vec::with_capacity(entries.len());
        let mut bytes = Vec::with_capacity(entries.len());
        for entry in &entries {
            let value = encode(entry, "raft log entry").map_err(err)?;
            bytes.push(value.len());
            batch.put_in(&self.shared.log, log_key(entry.log_id.index), value);
            ids.push(entry.log_id);
        }
        let (Some(first), Some(&last)) = (ids.first().map(|id| id.index), ids.last()) else {
            callback.log_io_completed(Ok(()));
            return Ok(());
        };
        self.shared.timings.stamps.mark(
            Step::Appended,
            last.index,
            std::time::Instant::now(),
            false,
        );
        // A leader's own entries, right after the end of its log: the
        // followers may have them before they are written here.
        let prev = self.last_log_id();
        let own = self.own_appends.as_ref().filter(|(id, _)| {
            last.leader_id.node_id == *id && first == prev.map_or(0, |p| p.index + 1)
        });
        let own = own.map(|(_, to)| (to.clone(), entries.clone()));
        // Readable now; durable when the writer calls back.
        {
            let mut memory = self.shared.memory.write();
            for entry in entries {
                memory.pending.insert(entry.log_id.index, entry);
            }
        }
        if self.first_index.is_none() {
            self.first_index = Some(first);
        }
        self.last_present = Some(last);
        self.queue
            .send(Job::Append {
                batch,
                ids,
                bytes,
                callback,
            })
            .map_err(|_| err(Error::Task("log writer stopped".into())))?;
        if let Some((to, entries)) = own {
            // Gone when the node stops: nothing to send then.
            let _ = to.send(OwnAppend { prev, entries });
        }
        Ok(())
    }

    async fn truncate(&mut self, log_id: LogId<NodeId>) -> StorageResult<()> {
        let err = |e: Error| e.storage(ErrorSubject::Logs, ErrorVerb::Delete);
        let (Some(first), Some(last)) = (self.first_index, self.last_present) else {
            return Ok(());
        };
        if log_id.index > last.index {
            return Ok(());
        }
        let from = log_id.index.max(first);
        let mut batch = WriteBatch::new();
        // One range tombstone for every entry from `from` on.
        batch.delete_range_in(&self.shared.log, log_key(from)..);
        // After the queue is written, nothing is pending: the truncation
        // applies to the database and the recent entries.
        self.write_after_queue(batch, |t| &t.log_other)
            .await
            .map_err(err)?;
        self.shared.memory.write().truncate_recent(from);
        if from > first {
            let prev = from - 1;
            let entry = match self
                .shared
                .log
                .get(log_key(prev))
                .map_err(|e| err(e.into()))?
            {
                Some(v) => decode_entry(prev, &v).map_err(err)?,
                None => {
                    return Err(err(Error::corruption(
                        "raft log",
                        format!("entry {prev} missing below a truncation"),
                    )))
                }
            };
            self.last_present = Some(entry.log_id);
        } else {
            self.first_index = None;
            self.last_present = None;
        }
        Ok(())
    }

    async fn purge(&mut self, log_id: LogId<NodeId>) -> StorageResult<()> {
        let err = |e: Error| e.storage(ErrorSubject::Logs, ErrorVerb::Delete);
        if self.last_purged.is_some_and(|p| p.index >= log_id.index) {
            return Ok(());
        }
        if let Some(gate) = &mut self.gate {
            gate.covered(log_id).await.map_err(err)?;
        }
        // The purged id and the deletes in one batch: after a crash the
        // log starts right after the purged id, never with a gap.
        let mut batch = WriteBatch::new();
        batch.put_in(
            &self.shared.meta,
            codec::KEY_PURGED,
            encode(&log_id, "last purged log id").map_err(err)?,
        );
        // One range tombstone for every entry up to the purged one,
        // however many: no per-entry cost.
        batch.delete_range_in(&self.shared.log, ..=log_key(log_id.index));
        self.write_after_queue(batch, |t| &t.log_other)
            .await
            .map_err(err)?;
        self.shared.memory.write().purge_recent(log_id.index);
        self.last_purged = Some(log_id);
        match self.last_present {
            Some(last) if last.index > log_id.index => {
                self.first_index = Some(log_id.index + 1);
            }
            _ => {
                self.first_index = None;
                self.last_present = None;
            }
        }
        Ok(())
    }
}
