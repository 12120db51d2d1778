//! The key-value state machine and its snapshots in siftdb (openraft's
//! `RaftStateMachine` and `RaftSnapshotBuilder`).
//!
//! Owns: the state keyspaces `state.<n>` of the node's database (user keys
//! under `d`, client sessions under `s`, the last applied log id and
//! membership under `m/`), how a request is applied (exactly once per
//! client session and sequence number, a repeat answered with the first
//! answer, idle sessions expired by the entries' clock), the
//! pointer to the live one and to the live snapshot (`live` in
//! `raft.meta`, see [`crate::pointer`]), the node's `snapshots/` directory
//! (`snap-<n>/`, the live snapshot's directory, `recv-<n>/` one being
//! received, see [`crate::snapshot_file`]), and the in-memory copy of the
//! last applied log id and membership.
//! Must never: apply part of an entry, or an entry without the last applied
//! log id that covers it (each siftdb batch carries whole entries and the
//! applied id and membership they end at, so a crash leaves a prefix of the
//! log applied and the id saying which); let a crash during an install
//! leave anything but the old state or the new one; stop writes while a
//! snapshot is built; drop a state keyspace a reader still uses.
//!
//! Applies are not synced: a process kill loses nothing (siftdb has logged
//! them), and after a power cut openraft re-applies from the log what the
//! unsynced tail lost. The log store's purges are synced writes to the same
//! write-ahead log, after the applies they rely on, so a purge is durable
//! only with the state it purges behind: a snapshot build needs no flush.
//!
//! Snapshots are the state keyspace's own table files, never a second
//! copy of the state. A build pins the live keyspace when openraft asks
//! for the builder (between two applies, so the pin, the applied id and
//! the membership agree; writes wait only for the pin), then, off the
//! apply path, hard-links the pinned tables into `snapshots/snap-<n>/` and
//! writes the memtables' entries up to the pin as one more table there
//! (siftdb's `KeyspaceExport`), with a header naming each file's level,
//! bounds and CRC-32. The directory is sent as it is, framed and checked
//! ([`crate::snapshot_file`]). An install receives the files into
//! `snapshots/recv-<n>/` (each frame and each whole file checked on
//! arrival), renames it to the new snapshot directory, links its tables
//! into a fresh keyspace `state.<n+1>` (siftdb's `import_keyspace`: one
//! manifest write, no table rewritten), checks that the keyspace's applied
//! id and membership are the snapshot's, then writes the pointer naming
//! both, synced: that one write is the commit point. A crash before it
//! keeps the old state (open drops the imported keyspace and every
//! snapshot directory the pointer does not name), after it the new one.
//! The old keyspace is dropped when its last reader (a client read, a
//! snapshot build) lets go of it; its tables go with it, but for those the
//! live snapshot directory still links.

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{
    Entry, EntryPayload, ErrorSubject, ErrorVerb, LogId, RaftSnapshotBuilder, StorageError,
    StoredMembership,
};
use parking_lot::{Mutex, RwLock};
use siftdb::internals::key::SeqNo;
use siftdb::internals::keyspace_export::{import_keyspace, KeyspaceExport};
use siftdb::internals::manifest::TableRecord;
use siftdb::{Db, Keyspace, WriteBatch, WriteOptions};

use crate::codec::{self, data_key, decode, encode, state_keyspace, user_key, Error, Result};
use crate::log_store::{blocking, Applied, PurgeGate};
use crate::pointer::{sync_dir, Pointer};
use crate::snapshot_file::{self, Header, Meta, SnapshotStream, TableEntry};
use crate::timings::{Step, Timings};
use crate::types::{
    Command, NodeId, OpRef, Request, Response, TypeConfig, SESSION_EXPIRY_MS, SESSION_SWEEP_EVERY,
};

type StorageResult<T> = std::result::Result<T, StorageError<NodeId>>;
type Membership = StoredMembership<NodeId, openraft::BasicNode>;

/// An apply writes a siftdb batch whenever this many bytes have gathered
/// (each batch ends on an entry boundary with the applied id it reaches).
const APPLY_BATCH_BYTES: usize = 32 << 20;
const SNAPSHOTS: &str = "snapshots";

/// One state keyspace.
struct Generation {
    number: u64,
    keyspace: Keyspace,
    /// When set, the keyspace is dropped once the last handle on this
    /// generation goes: set while it is being built (a failed install
    /// leaves nothing) and once an install has replaced it.
    discard: AtomicBool,
    db: Arc<Db>,
}

impl Drop for Generation {
    fn drop(&mut self) {
        if self.discard.load(Ordering::Acquire) {
            // Best effort: open drops every state keyspace the pointer does
            // not name.
            if let Err(e) = self.db.drop_keyspace(self.keyspace.name()) {
                tracing::warn!("dropping old state {}: {e}", self.keyspace.name());
            }
        }
    }
}

/// What reads see: the live state and the applied position.
struct Live {
    generation: Arc<Generation>,
    last_applied: Option<LogId<NodeId>>,
    membership: Membership,
}

/// The live files, changed under one lock.
struct Files {
    pointer: Pointer,
    /// Metadata of the live snapshot (`pointer.snapshot`), if any.
    snapshot_meta: Option<Meta>,
    next_snapshot: u64,
}

struct Shared {
    /// The node directory (its `snapshots/`).
    dir: PathBuf,
    db: Arc<Db>,
    /// `raft.meta`, where the live pointer is.
    meta: Keyspace,
    live: RwLock<Live>,
    files: Mutex<Files>,
    next_receive: AtomicU64,
    /// CRC-32 of the state's table files by their file number in the
    /// database (a table file never changes): a build reads only the
    /// tables the last one did not.
    table_crcs: Mutex<HashMap<u64, u32>>,
    snapshots_built: AtomicU64,
    snapshots_installed: AtomicU64,
    timings: Arc<Timings>,
    /// `live.last_applied` (and failures) for the log store's purges.
    applied: tokio::sync::watch::Sender<Applied>,
}

/// The state machine of one node.
pub struct StateMachine {
    shared: Arc<Shared>,
}

/// A clone-able read handle on a node's state machine (local reads: pair
/// with `Raft::ensure_linearizable` for linearizable ones).
#[derive(Clone)]
pub struct StateReader {
    shared: Arc<Shared>,
}

/// Counters of a state machine.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SmStats {
    /// The last applied log index, if any.
    pub last_applied: Option<u64>,
    /// Snapshots built since open.
    pub snapshots_built: u64,
    /// Snapshots installed since open.
    pub snapshots_installed: u64,
    /// The live state keyspace's generation (`state.<generation>`).
    pub generation: u64,
}

fn snapshot_dir(dir: &Path, number: u64) -> PathBuf {
    dir.join(SNAPSHOTS).join(format!("snap-{number:020}"))
}

/// Removes the file or directory at `path`.
fn remove_path(path: &Path) -> Result<()> {
    let removed = if path.is_dir() {
        fs::remove_dir_all(path)
    } else {
        fs::remove_file(path)
    };
    removed.map_err(io(path))
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |e| Error::io(path, e)
}

/// Opens (creating when missing) the state keyspace of `number`;
/// `discard` as [`Generation::discard`].
fn open_generation(db: &Arc<Db>, number: u64, discard: bool) -> Result<Generation> {
    let keyspace = db.keyspace(&state_keyspace(number))?;
    Ok(Generation {
        number,
        keyspace,
        discard: AtomicBool::new(discard),
        db: Arc::clone(db),
    })
}

fn read_applied(state: &Keyspace) -> Result<(Option<LogId<NodeId>>, Membership)> {
    let applied = match state.get(codec::KEY_APPLIED)? {
        Some(v) => decode::<Option<LogId<NodeId>>>(&v, "last applied log id")?,
        None => None,
    };
    let membership = match state.get(codec::KEY_MEMBERSHIP)? {
        Some(v) => decode::<Membership>(&v, "last membership")?,
        None => Membership::default(),
    };
    Ok((applied, membership))
}

/// Drops what the pointer does not name: other state keyspaces (what an
/// interrupted install or a retired generation left), other snapshot
/// directories, unfinished and partly received ones.
fn remove_unreferenced(db: &Db, dir: &Path, pointer: &Pointer) -> Result<()> {
    for name in db.keyspaces() {
        if codec::state_generation(&name).is_some_and(|n| n != pointer.generation) {
            db.drop_keyspace(&name)?;
        }
    }
    let snaps = dir.join(SNAPSHOTS);
    let live_snap = (pointer.snapshot != 0).then(|| snapshot_dir(dir, pointer.snapshot));
    for entry in fs::read_dir(&snaps).map_err(io(&snaps))? {
        let entry = entry.map_err(io(&snaps))?;
        if Some(entry.path()) != live_snap {
            remove_path(&entry.path())?;
        }
    }
    Ok(())
}

impl StateMachine {
    /// Opens (creating when missing) the state machine in `db`, its
    /// snapshot files under `dir/snapshots`: reads the live pointer, drops
    /// what an interrupted build or install left, opens the live state and
    /// reads the live snapshot's header.
    pub fn open(db: Arc<Db>, dir: &Path, timings: Arc<Timings>) -> Result<StateMachine> {
        fs::create_dir_all(dir.join(SNAPSHOTS)).map_err(io(dir))?;
        let meta = db.keyspace(codec::KEYSPACE_META)?;
        let stored = Pointer::read(&meta)?;
        let pointer = stored.unwrap_or(Pointer {
            generation: 1,
            snapshot: 0,
        });
        remove_unreferenced(&db, dir, &pointer)?;
        let generation = open_generation(&db, pointer.generation, false)?;
        if stored.is_none() {
            pointer.store(&db, &meta)?;
        }
        let (last_applied, membership) = read_applied(&generation.keyspace)?;
        let snapshot_meta = if pointer.snapshot == 0 {
            None
        } else {
            let path = snapshot_dir(dir, pointer.snapshot);
            match Header::read_dir(&path) {
                Ok(header) => Some(header.meta),
                // The snapshot is only needed to send to a follower:
                // without it openraft builds a new one; the state itself is
                // intact.
                Err(e) => {
                    tracing::warn!("snapshot {} unusable: {e}", path.display());
                    None
                }
            }
        };
        sync_dir(&dir.join(SNAPSHOTS))?;
        Ok(StateMachine {
            shared: Arc::new(Shared {
                dir: dir.to_path_buf(),
                db,
                meta,
                live: RwLock::new(Live {
                    generation: Arc::new(generation),
                    last_applied,
                    membership,
                }),
                files: Mutex::new(Files {
                    pointer,
                    snapshot_meta,
                    next_snapshot: pointer.snapshot + 1,
                }),
                next_receive: AtomicU64::new(1),
                table_crcs: Mutex::new(HashMap::new()),
                snapshots_built: AtomicU64::new(0),
                snapshots_installed: AtomicU64::new(0),
                timings,
                applied: tokio::sync::watch::Sender::new(Applied {
                    last: last_applied,
                    failed: false,
                }),
            }),
        })
    }

    /// What the node's log store waits on before a purge (see
    /// [`PurgeGate`]).
    pub fn purge_gate(&self) -> PurgeGate {
        PurgeGate::new(self.shared.applied.subscribe())
    }

    /// Tells a waiting purge that nothing more will be applied.
    fn failed(&self) {
        self.shared.applied.send_modify(|a| a.failed = true);
    }

    /// A read handle on this state machine.
    pub fn reader(&self) -> StateReader {
        StateReader {
            shared: Arc::clone(&self.shared),
        }
    }
}

impl StateReader {
    /// The value of user key `key` in the local state (as of the last
    /// applied entry).
    pub fn get(&self, key: &[u8]) -> Result<Option<Bytes>> {
        let generation = Arc::clone(&self.shared.live.read().generation);
        Ok(generation.keyspace.get(data_key(key))?)
    }

    /// Every user key and value of the local state starting with `prefix`,
    /// at one moment, in key order.
    pub fn scan(&self, prefix: &[u8]) -> Result<Vec<(Bytes, Bytes)>> {
        let generation = Arc::clone(&self.shared.live.read().generation);
        let mut out = Vec::new();
        for item in generation.keyspace.prefix(data_key(prefix)) {
            let (key, value) = item?;
            if user_key(&key).is_some() {
                out.push((key.slice(1..), value));
            }
        }
        Ok(out)
    }

    /// Counters and the applied position.
    pub fn stats(&self) -> SmStats {
        let (last_applied, generation) = {
            let live = self.shared.live.read();
            (live.last_applied.map(|l| l.index), live.generation.number)
        };
        SmStats {
            last_applied,
            snapshots_built: self.shared.snapshots_built.load(Ordering::Relaxed),
            snapshots_installed: self.shared.snapshots_installed.load(Ordering::Relaxed),
            generation,
        }
    }
}

/// A client session as the state keeps it: the last sequence number
/// applied, the entry clock when it was, and what it answered.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct SessionRecord {
    pub(crate) seq: u64,
    pub(crate) last_used_ms: u64,
    pub(crate) response: Response,
}

/// Removes the entries of `map` whose keys lie in `range`; their values,
/// in key order.
fn remove_range<V>(map: &mut BTreeMap<Vec<u8>, V>, range: (Bound<&[u8]>, Bound<&[u8]>)) -> Vec<V> {
    let keys: Vec<Vec<u8>> = map
        .range::<[u8], _>(range)
        .map(|(k, _)| k.clone())
        .collect();
    keys.iter().filter_map(|key| map.remove(key)).collect()
}

/// Ranges of state keys deleted by the batch being gathered, merged into
/// disjoint half-open ranges keyed by their start.
#[derive(Default)]
struct DeletedRanges(BTreeMap<Vec<u8>, Vec<u8>>);

impl DeletedRanges {
    /// Adds `[start, end)`, merged with the ranges it meets.
    fn insert(&mut self, mut start: Vec<u8>, mut end: Vec<u8>) {
        if let Some((before, before_end)) = self
            .0
            .range::<[u8], _>((Bound::Unbounded, Bound::Included(start.as_slice())))
            .next_back()
        {
            if *before_end >= start {
                start.clone_from(before);
                end = end.max(before_end.clone());
            }
        }
        let met = remove_range(
            &mut self.0,
            (
                Bound::Included(start.as_slice()),
                Bound::Included(end.as_slice()),
            ),
        );
        for to in met {
            end = end.max(to);
        }
        self.0.insert(start, end);
    }

    /// Whether a range holds `key`.
    fn covers(&self, key: &[u8]) -> bool {
        self.0
            .range::<[u8], _>((Bound::Unbounded, Bound::Included(key)))
            .next_back()
            .is_some_and(|(_, end)| key < end.as_slice())
    }
}

/// Applies the requests of one `apply` call into a siftdb batch; its reads
/// (compare-and-swap, increment, sessions) see the writes of the requests
/// before them, also those not yet written to the keyspace. Applies are
/// serial (openraft calls `apply` one at a time), so a read-then-write is
/// atomic.
struct Applier<'a> {
    state: &'a Keyspace,
    batch: WriteBatch,
    /// State keys written to `batch` (`None`: deleted), for reads; a key
    /// here was written after every range in `deleted` that holds it.
    written: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    /// What the range deletes in `batch` cover, for reads of the keys not
    /// in `written`.
    deleted: DeletedRanges,
}

impl<'a> Applier<'a> {
    fn new(state: &'a Keyspace) -> Applier<'a> {
        Applier {
            state,
            batch: WriteBatch::new(),
            written: BTreeMap::new(),
            deleted: DeletedRanges::default(),
        }
    }

    /// The batch so far, to be written now (later reads go to the
    /// keyspace).
    fn take_batch(&mut self) -> WriteBatch {
        self.written.clear();
        self.deleted = DeletedRanges::default();
        std::mem::take(&mut self.batch)
    }

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if let Some(value) = self.written.get(key) {
            return Ok(value.clone());
        }
        if self.deleted.covers(key) {
            return Ok(None);
        }
        Ok(self.state.get(key)?.map(|v| v.to_vec()))
    }

    fn put(&mut self, key: Vec<u8>, value: &[u8]) {
        self.batch.put_in(self.state, &key, value);
        self.written.insert(key, Some(value.to_vec()));
    }

    fn delete(&mut self, key: Vec<u8>) {
        self.batch.delete_in(self.state, &key);
        self.written.insert(key, None);
    }

    /// Deletes the user keys in `[start, end)` (`end: None`: from `start`
    /// on) with one range delete over their data keys only.
    fn delete_range(&mut self, start: &[u8], end: Option<&[u8]>) {
        let (start, end) = codec::data_range(start, end);
        self.batch
            .delete_range_in(self.state, start.as_slice()..end.as_slice());
        remove_range(
            &mut self.written,
            (
                Bound::Included(start.as_slice()),
                Bound::Excluded(end.as_slice()),
            ),
        );
        self.deleted.insert(start, end);
    }

    /// Applies `req` of an entry stamped `time_ms`: once per (client, seq).
    fn request(&mut self, req: &Request, time_ms: u64) -> Result<Response> {
        let Some(session) = req.session else {
            return self.command(&req.command);
        };
        if session.seq == 0 {
            return Ok(Response::Rejected {
                reason: "sequence numbers start at 1".into(),
            });
        }
        let key = codec::session_key(session.client);
        let record = match self.get(&key)? {
            Some(v) => Some(decode::<SessionRecord>(&v, "client session")?),
            None => None,
        };
        match record {
            // A repeat: the first answer, nothing applied.
            Some(r) if r.seq == session.seq => return Ok(r.response),
            Some(r) if r.seq > session.seq => return Ok(Response::Stale),
            None if session.seq > 1 => return Ok(Response::SessionExpired),
            _ => {}
        }
        let response = self.command(&req.command)?;
        let record = SessionRecord {
            seq: session.seq,
            last_used_ms: time_ms,
            response: response.clone(),
        };
        self.put(key.to_vec(), &encode(&record, "client session")?);
        Ok(response)
    }

    /// Applies `cmd`, or says why it is rejected (then nothing is written,
    /// on any node).
    fn command(&mut self, cmd: &Command) -> Result<Response> {
        if let Err(reason) = cmd.validate() {
            return Ok(Response::Rejected { reason });
        }
        match cmd {
            Command::CompareAndSwap { key, expected, new } => {
                let key = data_key(key);
                let current = self.get(&key)?;
                if current != *expected {
                    return Ok(Response::CasFailed { current });
                }
                match new {
                    Some(value) => self.put(key, value),
                    None => self.delete(key),
                }
                Ok(Response::Swapped)
            }
            Command::Increment { key, delta } => {
                let key = data_key(key);
                let old = match self.get(&key)? {
                    None => 0,
                    Some(v) => match <[u8; 8]>::try_from(v.as_slice()) {
                        Ok(bytes) => u64::from_be_bytes(bytes),
                        Err(_) => {
                            return Ok(Response::Rejected {
                                reason: format!("the value is {} bytes, not a counter", v.len()),
                            })
                        }
                    },
                };
                let value = old.wrapping_add(*delta);
                self.put(key, &value.to_be_bytes());
                Ok(Response::Counter { value })
            }
            Command::Put { .. }
            | Command::Delete { .. }
            | Command::Batch(_)
            | Command::DeleteRange { .. } => {
                let ops = cmd.ops();
                for op in &ops {
                    match *op {
                        OpRef::Put(key, value) => self.put(data_key(key), value),
                        OpRef::Delete(key) => self.delete(data_key(key)),
                        OpRef::DeleteRange(start, end) => self.delete_range(start, end),
                    }
                }
                Ok(Response::Applied { ops: ops.len() })
            }
        }
    }

    /// Removes the sessions idle for more than [`SESSION_EXPIRY_MS`] at
    /// `time_ms` (by the entries' clock: every node removes the same).
    fn sweep(&mut self, time_ms: u64) -> Result<()> {
        let mut expired = Vec::new();
        for item in self.state.prefix([codec::SESSION_PREFIX]) {
            let (key, value) = item?;
            if self.written.contains_key(key.as_ref()) {
                continue;
            }
            let record = decode::<SessionRecord>(&value, "client session")?;
            if record.last_used_ms.saturating_add(SESSION_EXPIRY_MS) < time_ms {
                expired.push(key.to_vec());
            }
        }
        for key in expired {
            self.delete(key);
        }
        Ok(())
    }
}

impl Shared {
    /// Writes `batch` with the applied position it reaches, then publishes
    /// that position.
    async fn commit_batch(
        &self,
        generation: &Arc<Generation>,
        mut batch: WriteBatch,
        applied: LogId<NodeId>,
        membership: &Membership,
    ) -> Result<()> {
        let state = &generation.keyspace;
        batch.put_in(
            state,
            codec::KEY_APPLIED,
            encode(&Some(applied), "last applied log id")?,
        );
        batch.put_in(
            state,
            codec::KEY_MEMBERSHIP,
            encode(membership, "last membership")?,
        );
        let db = Arc::clone(&self.db);
        let timings = Arc::clone(&self.timings);
        blocking(move || {
            let _timer = timings.apply.start();
            // Not synced: see the module documentation.
            db.write_with(batch, WriteOptions::new().sync(false))
                .map_err(Error::from)
        })
        .await?;
        let mut live = self.live.write();
        live.last_applied = Some(applied);
        live.membership = membership.clone();
        drop(live);
        self.applied.send_modify(|a| a.last = Some(applied));
        Ok(())
    }

    /// Makes the snapshot directory `number` with `meta` the live snapshot
    /// if the state it was built from (`generation`) is still live and it
    /// is newer than the live one; removes the directory it replaces (or
    /// itself, when not taken). Senders holding an older one's files open
    /// keep reading them.
    fn publish_snapshot(&self, generation: u64, number: u64, meta: &Meta) -> Result<bool> {
        let mut files = self.files.lock();
        let newer = match &files.snapshot_meta {
            Some(live) => meta.last_log_id > live.last_log_id,
            None => true,
        };
        if files.pointer.generation != generation || !newer {
            remove_path(&snapshot_dir(&self.dir, number))?;
            return Ok(false);
        }
        let old = files.pointer.snapshot;
        let pointer = Pointer {
            generation,
            snapshot: number,
        };
        pointer.store(&self.db, &self.meta)?;
        files.pointer = pointer;
        files.snapshot_meta = Some(meta.clone());
        if old != 0 {
            remove_path(&snapshot_dir(&self.dir, old))?;
        }
        Ok(true)
    }

    fn take_snapshot_number(&self) -> u64 {
        let mut files = self.files.lock();
        let n = files.next_snapshot;
        files.next_snapshot += 1;
        n
    }
}

/// Builds a snapshot directory from the state keyspace pinned when
/// openraft asked for the builder.
pub struct SnapshotBuilder {
    inner: Arc<BuilderInner>,
}

struct BuilderInner {
    /// The state keyspace pinned at the builder's moment (its tables stay
    /// on disk while this lives, even if an install drops the keyspace).
    export: std::result::Result<KeyspaceExport, String>,
    generation: Arc<Generation>,
    last_applied: Option<LogId<NodeId>>,
    membership: Membership,
    shared: Arc<Shared>,
}

impl BuilderInner {
    /// Writes snapshot directory `number` and makes it live if still
    /// newest; returns it opened for sending.
    fn build(&self, number: u64, meta: &Meta) -> Result<snapshot_file::Sender> {
        let _timer = self.shared.timings.snapshot_build.start();
        let export = self
            .export
            .as_ref()
            .map_err(|e| Error::corruption("snapshot build", e))?;
        // No flush first: the purge openraft makes behind this snapshot is
        // a synced write to the same log as the applies it covers, later,
        // so it is durable only with them (see the module documentation).
        let dir = snapshot_dir(&self.shared.dir, number);
        let tmp = dir.with_extension("tmp");
        fs::create_dir(&tmp).map_err(io(&tmp))?;
        let built = (|| {
            let tables = export.write_to(&tmp)?;
            let mut entries = Vec::with_capacity(tables.len());
            let mut crcs = self.shared.table_crcs.lock().clone();
            crcs.retain(|n, _| tables.iter().any(|t| t.record.file_number == *n));
            for (i, table) in tables.iter().enumerate() {
                let path = tmp.join(snapshot_file::table_file(i));
                let from = tmp.join(&table.file_name);
                fs::rename(&from, &path).map_err(io(&from))?;
                let record = &table.record;
                let crc32 = match crcs.get(&record.file_number) {
                    Some(&crc) => crc,
                    None => {
                        let crc = snapshot_file::file_crc32(&path)?;
                        crcs.insert(record.file_number, crc);
                        crc
                    }
                };
                entries.push(TableEntry {
                    level: record.level,
                    file_size: record.file_size,
                    entries: record.entries,
                    smallest: record.smallest.clone(),
                    largest: record.largest.clone(),
                    min_seq: record.min_seq.0,
                    max_seq: record.max_seq.0,
                    crc32,
                });
            }
            *self.shared.table_crcs.lock() = crcs;
            let header = Header::new(meta.clone(), entries)?;
            let path = tmp.join(snapshot_file::HEADER_FILE);
            fs::write(&path, &header.bytes)
                .and_then(|()| fs::File::open(&path)?.sync_all())
                .map_err(io(&path))?;
            sync_dir(&tmp)?;
            fs::rename(&tmp, &dir).map_err(io(&dir))?;
            sync_dir(&self.shared.dir.join(SNAPSHOTS))
        })();
        if let Err(e) = built {
            let _ = fs::remove_dir_all(&tmp);
            return Err(e);
        }
        // Opened before publishing, which may remove it.
        let sender = snapshot_file::Sender::open(&dir)?;
        self.shared
            .publish_snapshot(self.generation.number, number, meta)?;
        Ok(sender)
    }
}

fn snapshot_id(last: Option<LogId<NodeId>>, number: u64) -> String {
    match last {
        Some(l) => format!(
            "{}-{}-{}-{number}",
            l.leader_id.term, l.leader_id.node_id, l.index
        ),
        None => format!("none-{number}"),
    }
}

impl RaftSnapshotBuilder<TypeConfig> for SnapshotBuilder {
    async fn build_snapshot(&mut self) -> StorageResult<Snapshot<TypeConfig>> {
        let shared = Arc::clone(&self.inner.shared);
        let number = shared.take_snapshot_number();
        let meta = Meta {
            last_log_id: self.inner.last_applied,
            last_membership: self.inner.membership.clone(),
            snapshot_id: snapshot_id(self.inner.last_applied, number),
        };
        let err = |e: Error| {
            e.storage(
                ErrorSubject::Snapshot(Some(meta.signature())),
                ErrorVerb::Write,
            )
        };
        // Linking, writing the memtables' table and checksumming new
        // tables block: off the async workers.
        let inner = Arc::clone(&self.inner);
        let task_meta = meta.clone();
        let sender = blocking(move || inner.build(number, &task_meta))
            .await
            .map_err(err)?;
        shared.snapshots_built.fetch_add(1, Ordering::Relaxed);
        Ok(Snapshot {
            meta,
            snapshot: Box::new(SnapshotStream::Send(Box::new(sender))),
        })
    }
}

impl Shared {
    /// Makes generation `number` of the received snapshot in `snap_dir`
    /// (its tables linked in, not copied); returns it, not yet live, after
    /// checking that its applied id and membership are the snapshot's.
    fn import_generation(
        &self,
        snap_dir: &Path,
        header: &Header,
        number: u64,
    ) -> Result<Generation> {
        let name = state_keyspace(number);
        if self.db.keyspaces().contains(&name) {
            // Left by an install whose keyspace could not be dropped.
            self.db.drop_keyspace(&name)?;
        }
        let tables: Vec<(PathBuf, TableRecord)> = header
            .tables
            .iter()
            .enumerate()
            .map(|(i, t)| {
                (
                    snap_dir.join(snapshot_file::table_file(i)),
                    TableRecord {
                        keyspace: 0,
                        level: t.level,
                        file_number: 0,
                        file_size: t.file_size,
                        entries: t.entries,
                        smallest: t.smallest.clone(),
                        largest: t.largest.clone(),
                        min_seq: SeqNo(t.min_seq),
                        max_seq: SeqNo(t.max_seq),
                    },
                )
            })
            .collect();
        let keyspace = import_keyspace(&self.db, &name, &tables)?;
        // Discarded (dropped) if anything below fails.
        let generation = Generation {
            number,
            keyspace,
            discard: AtomicBool::new(true),
            db: Arc::clone(&self.db),
        };
        let (applied, membership) = read_applied(&generation.keyspace)?;
        if applied != header.meta.last_log_id || membership != header.meta.last_membership {
            return Err(Error::corruption(
                "snapshot",
                format!(
                    "its tables hold applied id {applied:?}, its header says {}",
                    header.meta
                ),
            ));
        }
        Ok(generation)
    }

    /// Makes `generation` and snapshot `snap_number` live in one synced
    /// pointer write, then retires the old generation and snapshot
    /// directories.
    fn switch_to(&self, generation: Generation, snap_number: u64, meta: &Meta) -> Result<()> {
        let mut files = self.files.lock();
        let pointer = Pointer {
            generation: generation.number,
            snapshot: snap_number,
        };
        // Kept from here on even if the write fails: its outcome is then
        // unknown, and open drops whichever generation the pointer does
        // not name.
        generation.discard.store(false, Ordering::Release);
        // The commit point of the install.
        pointer.store(&self.db, &self.meta)?;
        files.pointer = pointer;
        files.snapshot_meta = Some(meta.clone());
        let old = {
            let mut live = self.live.write();
            let old = std::mem::replace(&mut live.generation, Arc::new(generation));
            live.last_applied = meta.last_log_id;
            live.membership = meta.last_membership.clone();
            old
        };
        // Dropped now, or when its last reader lets go.
        old.discard.store(true, Ordering::Release);
        drop(old);
        drop(files);
        self.applied.send_modify(|a| a.last = meta.last_log_id);
        // Older snapshot directories: senders that hold their files open
        // keep reading.
        let snaps = self.dir.join(SNAPSHOTS);
        let live_snap = snapshot_dir(&self.dir, snap_number);
        for entry in fs::read_dir(&snaps).map_err(io(&snaps))? {
            let entry = entry.map_err(io(&snaps))?;
            let path = entry.path();
            let name = entry.file_name();
            if path != live_snap && name.to_string_lossy().starts_with("snap-") {
                remove_path(&path)?;
            }
        }
        Ok(())
    }
}

impl RaftStateMachine<TypeConfig> for StateMachine {
    type SnapshotBuilder = SnapshotBuilder;

    async fn applied_state(&mut self) -> StorageResult<(Option<LogId<NodeId>>, Membership)> {
        let live = self.shared.live.read();
        Ok((live.last_applied, live.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> StorageResult<Vec<Vec<Response>>>
    where
        I: IntoIterator<Item = Entry<TypeConfig>> + Send,
        I::IntoIter: Send,
    {
        let err = |e: Error| {
            self.failed();
            e.storage(ErrorSubject::StateMachine, ErrorVerb::Write)
        };
        let (generation, mut membership) = {
            let live = self.shared.live.read();
            (Arc::clone(&live.generation), live.membership.clone())
        };
        let mut responses = Vec::new();
        let mut applier = Applier::new(&generation.keyspace);
        let mut last = None;
        let handed = std::time::Instant::now();
        let mut first = None;
        for entry in entries {
            first = first.or(Some(entry.log_id.index));
            let response = match &entry.payload {
                EntryPayload::Blank => Vec::new(),
                EntryPayload::Normal(proposal) => {
                    let mut answers = Vec::with_capacity(proposal.requests.len());
                    for req in &proposal.requests {
                        answers.push(applier.request(req, proposal.time_ms).map_err(err)?);
                    }
                    if entry.log_id.index % SESSION_SWEEP_EVERY == 0 {
                        applier.sweep(proposal.time_ms).map_err(err)?;
                    }
                    answers
                }
                EntryPayload::Membership(m) => {
                    membership = StoredMembership::new(Some(entry.log_id), m.clone());
                    Vec::new()
                }
            };
            responses.push(response);
            last = Some(entry.log_id);
            if applier.batch.approximate_bytes() >= APPLY_BATCH_BYTES {
                let full = applier.take_batch();
                self.shared
                    .commit_batch(&generation, full, entry.log_id, &membership)
                    .await
                    .map_err(err)?;
            }
        }
        if let Some(last) = last {
            let rest = applier.take_batch();
            self.shared
                .commit_batch(&generation, rest, last, &membership)
                .await
                .map_err(err)?;
            let timings = &self.shared.timings;
            timings.since(|t| &t.to_apply, Step::Answered, last.index, handed);
            let now = std::time::Instant::now();
            let from = first
                .unwrap_or(last.index)
                .max(last.index.saturating_sub(64));
            for index in from..=last.index {
                timings.stamps.mark(Step::Applied, index, now, false);
            }
        }
        Ok(responses)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        // Between two applies: the pin, the applied id and the membership
        // agree.
        let live = self.shared.live.read();
        SnapshotBuilder {
            inner: Arc::new(BuilderInner {
                export: KeyspaceExport::pin(&live.generation.keyspace).map_err(|e| e.to_string()),
                generation: Arc::clone(&live.generation),
                last_applied: live.last_applied,
                membership: live.membership.clone(),
                shared: Arc::clone(&self.shared),
            }),
        }
    }

    async fn begin_receiving_snapshot(&mut self) -> StorageResult<Box<SnapshotStream>> {
        let n = self.shared.next_receive.fetch_add(1, Ordering::Relaxed);
        let path = self
            .shared
            .dir
            .join(SNAPSHOTS)
            .join(format!("recv-{n:020}"));
        let receiver = snapshot_file::Receiver::create(path)
            .map_err(|e| e.storage(ErrorSubject::Snapshot(None), ErrorVerb::Write))?;
        Ok(Box::new(SnapshotStream::Receive(Box::new(receiver))))
    }

    async fn install_snapshot(
        &mut self,
        meta: &Meta,
        snapshot: Box<SnapshotStream>,
    ) -> StorageResult<()> {
        let err = |e: Error| {
            self.failed();
            e.storage(
                ErrorSubject::Snapshot(Some(meta.signature())),
                ErrorVerb::Write,
            )
        };
        let receiver = match *snapshot {
            SnapshotStream::Receive(receiver) => receiver,
            // A snapshot handed over whole (openraft's storage suite does):
            // received from itself into a directory of this node's.
            SnapshotStream::Send(sender) => {
                let n = self.shared.next_receive.fetch_add(1, Ordering::Relaxed);
                let path = self
                    .shared
                    .dir
                    .join(SNAPSHOTS)
                    .join(format!("recv-{n:020}"));
                blocking(move || snapshot_file::receive_whole(*sender, path))
                    .await
                    .map_err(err)?
            }
        };
        let shared = Arc::clone(&self.shared);
        let number = shared.live.read().generation.number + 1;
        let snap_number = shared.take_snapshot_number();
        let meta_owned = meta.clone();
        blocking(move || {
            let _timer = shared.timings.snapshot_install.start();
            let (received, header) = receiver.finish()?;
            let snap = snapshot_dir(&shared.dir, snap_number);
            let installed = (|| {
                if header.meta != meta_owned {
                    return Err(Error::corruption(
                        "snapshot",
                        format!("header says {}, the leader sent {meta_owned}", header.meta),
                    ));
                }
                fs::rename(&received, &snap).map_err(io(&snap))?;
                sync_dir(&shared.dir.join(SNAPSHOTS))?;
                let generation = shared.import_generation(&snap, &header, number)?;
                shared.switch_to(generation, snap_number, &meta_owned)
            })();
            if installed.is_err() {
                // Best effort: open removes what the pointer does not name.
                let _ = fs::remove_dir_all(&received);
                if shared.files.lock().pointer.snapshot != snap_number {
                    let _ = fs::remove_dir_all(&snap);
                }
            }
            installed
        })
        .await
        .map_err(err)?;
        self.shared
            .snapshots_installed
            .fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> StorageResult<Option<Snapshot<TypeConfig>>> {
        let files = self.shared.files.lock();
        let Some(meta) = files.snapshot_meta.clone() else {
            return Ok(None);
        };
        let path = snapshot_dir(&self.shared.dir, files.pointer.snapshot);
        let sender = snapshot_file::Sender::open(&path).map_err(|e| {
            e.storage(
                ErrorSubject::Snapshot(Some(meta.signature())),
                ErrorVerb::Read,
            )
        })?;
        Ok(Some(Snapshot {
            meta,
            snapshot: Box::new(SnapshotStream::Send(Box::new(sender))),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Op;
    use openraft::CommittedLeaderId;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn put(index: u64, key: &[u8], value: &[u8]) -> Entry<TypeConfig> {
        entry(
            index,
            0,
            vec![Request::unsessioned(Command::Put {
                key: key.to_vec(),
                value: value.to_vec(),
            })],
        )
    }

    /// The stream of a snapshot of a fresh node that applied `entries`.
    async fn snapshot_of(entries: Vec<Entry<TypeConfig>>) -> (Meta, Vec<u8>) {
        let dir = tempfile::tempdir().unwrap();
        let (_log, mut sm, _) = crate::open_storage(dir.path()).unwrap();
        sm.apply(entries).await.unwrap();
        build(&mut sm).await
    }

    /// A snapshot of `sm` now: its meta and its stream.
    async fn build(sm: &mut StateMachine) -> (Meta, Vec<u8>) {
        let snap = sm
            .get_snapshot_builder()
            .await
            .build_snapshot()
            .await
            .unwrap();
        let mut bytes = Vec::new();
        let mut data = snap.snapshot;
        data.read_to_end(&mut bytes).await.unwrap();
        (snap.meta, bytes)
    }

    /// Receives `bytes` and installs them as the snapshot `meta`.
    async fn try_install(sm: &mut StateMachine, meta: &Meta, bytes: &[u8]) -> bool {
        let mut received = sm.begin_receiving_snapshot().await.unwrap();
        // In chunks, one of them sent twice (as after a lost answer).
        let mut offset = 0;
        for chunk in bytes.chunks(1000) {
            use tokio::io::AsyncSeekExt;
            received
                .seek(std::io::SeekFrom::Start(offset as u64))
                .await
                .unwrap();
            if received.write_all(chunk).await.is_err() {
                return false;
            }
            if offset == 0 && chunk.len() == 1000 {
                received.seek(std::io::SeekFrom::Start(0)).await.unwrap();
                received.write_all(chunk).await.unwrap();
            }
            offset += chunk.len();
        }
        sm.install_snapshot(meta, received).await.is_ok()
    }

    async fn install(sm: &mut StateMachine, meta: &Meta, bytes: &[u8]) {
        assert!(try_install(sm, meta, bytes).await);
    }

    /// A reader that took the live generation before an install keeps
    /// reading it; its keyspace is dropped when that reader lets go.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_old_generation_is_dropped_after_its_last_reader() {
        let dir = tempfile::tempdir().unwrap();
        let (_log, mut sm, _) = crate::open_storage(dir.path()).unwrap();
        let (meta, bytes) = snapshot_of(vec![put(5, b"k", b"one")]).await;
        install(&mut sm, &meta, &bytes).await;
        let held = Arc::clone(&sm.shared.live.read().generation);
        assert_eq!(held.number, 2);

        let (meta, bytes) = snapshot_of(vec![put(9, b"k", b"two")]).await;
        install(&mut sm, &meta, &bytes).await;
        assert_eq!(sm.reader().get(b"k").unwrap().as_deref(), Some(&b"two"[..]));
        // Retired but held: still there, still read.
        assert!(sm.shared.db.keyspaces().contains(&state_keyspace(2)));
        assert_eq!(
            held.keyspace.get(data_key(b"k")).unwrap().as_deref(),
            Some(&b"one"[..])
        );
        drop(held);
        assert!(!sm.shared.db.keyspaces().contains(&state_keyspace(2)));
        assert!(sm.shared.db.keyspaces().contains(&state_keyspace(3)));
    }

    /// A snapshot that fails its checks (a flipped byte anywhere: header,
    /// frame, frame checksum) leaves the old state live, no keyspace of
    /// the failed install and no received files behind.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_damaged_snapshot_leaves_the_old_state_and_no_keyspace() {
        let dir = tempfile::tempdir().unwrap();
        let (_log, mut sm, _) = crate::open_storage(dir.path()).unwrap();
        let (meta, bytes) = snapshot_of(vec![put(5, b"k", b"one")]).await;
        install(&mut sm, &meta, &bytes).await;
        let (meta, bytes) = snapshot_of(vec![put(8, b"k", b"two"), put(9, b"l", b"x")]).await;
        for at in [3, bytes.len() / 2, bytes.len() - 1] {
            let mut damaged = bytes.clone();
            damaged[at] ^= 1;
            assert!(!try_install(&mut sm, &meta, &damaged).await, "byte {at}");
            assert_eq!(sm.reader().stats().generation, 2);
            assert_eq!(sm.reader().get(b"k").unwrap().as_deref(), Some(&b"one"[..]));
            assert!(!sm.shared.db.keyspaces().contains(&state_keyspace(3)));
            let left: Vec<_> = fs::read_dir(dir.path().join(SNAPSHOTS))
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect();
            assert_eq!(left.len(), 1, "{left:?}");
        }
        // The same snapshot undamaged installs.
        install(&mut sm, &meta, &bytes).await;
        assert_eq!(sm.reader().get(b"l").unwrap().as_deref(), Some(&b"x"[..]));
    }

    fn entry(index: u64, time_ms: u64, requests: Vec<Request>) -> Entry<TypeConfig> {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(1, 1), index),
            payload: EntryPayload::Normal(crate::types::Proposal { time_ms, requests }),
        }
    }

    fn incr(client: u64, seq: u64) -> Request {
        Request {
            session: Some(crate::types::Session { client, seq }),
            command: Command::Increment {
                key: b"n".to_vec(),
                delta: 1,
            },
        }
    }

    fn counter(sm: &StateMachine) -> u64 {
        let v = sm.reader().get(b"n").unwrap().unwrap();
        u64::from_be_bytes(v.as_ref().try_into().unwrap())
    }

    /// A repeated (client, seq) is answered with the first answer and not
    /// applied again, in the same entry, in a later entry and in a later
    /// `apply` call; a lower seq is `Stale`; an unknown session above seq 1
    /// is `SessionExpired`; requests without a session apply every time.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_repeated_request_is_applied_once() {
        let dir = tempfile::tempdir().unwrap();
        let (_log, mut sm, _) = crate::open_storage(dir.path()).unwrap();
        let out = sm
            .apply(vec![
                entry(1, 10, vec![incr(7, 1), incr(7, 1), incr(8, 1)]),
                entry(2, 10, vec![incr(7, 1), incr(7, 2)]),
            ])
            .await
            .unwrap();
        let c = |value| Response::Counter { value };
        assert_eq!(out, vec![vec![c(1), c(1), c(2)], vec![c(1), c(3)]]);
        let out = sm
            .apply(vec![entry(
                3,
                11,
                vec![
                    incr(7, 2),
                    incr(7, 1),
                    incr(9, 5),
                    Request::unsessioned(Command::Increment {
                        key: b"n".to_vec(),
                        delta: 1,
                    }),
                    Request::unsessioned(Command::Increment {
                        key: b"n".to_vec(),
                        delta: 1,
                    }),
                ],
            )])
            .await
            .unwrap();
        assert_eq!(
            out,
            vec![vec![
                c(3),
                Response::Stale,
                Response::SessionExpired,
                c(4),
                c(5)
            ]]
        );
        assert_eq!(counter(&sm), 5);
    }

    /// Compare-and-swap reads the writes of earlier requests of the same
    /// `apply` call, and answers what it found when it fails.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn compare_and_swap_sees_earlier_writes() {
        let dir = tempfile::tempdir().unwrap();
        let (_log, mut sm, _) = crate::open_storage(dir.path()).unwrap();
        let cas = |expected: Option<&[u8]>, new: Option<&[u8]>| {
            Request::unsessioned(Command::CompareAndSwap {
                key: b"r".to_vec(),
                expected: expected.map(<[u8]>::to_vec),
                new: new.map(<[u8]>::to_vec),
            })
        };
        let out = sm
            .apply(vec![
                entry(1, 0, vec![cas(None, Some(b"a")), cas(None, Some(b"b"))]),
                entry(2, 0, vec![cas(Some(b"a"), Some(b"c"))]),
            ])
            .await
            .unwrap();
        assert_eq!(
            out,
            vec![
                vec![
                    Response::Swapped,
                    Response::CasFailed {
                        current: Some(b"a".to_vec())
                    }
                ],
                vec![Response::Swapped]
            ]
        );
        let out = sm
            .apply(vec![entry(
                3,
                0,
                vec![cas(Some(b"c"), None), cas(None, None)],
            )])
            .await
            .unwrap();
        assert_eq!(out, vec![vec![Response::Swapped, Response::Swapped]]);
        assert_eq!(sm.reader().get(b"r").unwrap(), None);
    }

    /// An idle session is removed by the sweep at an index that is a
    /// multiple of `SESSION_SWEEP_EVERY` once the entries' clock passed its
    /// expiry; a session used recently stays.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn idle_sessions_expire_by_the_entries_clock() {
        let dir = tempfile::tempdir().unwrap();
        let (_log, mut sm, _) = crate::open_storage(dir.path()).unwrap();
        sm.apply(vec![entry(1, 1_000, vec![incr(1, 1), incr(2, 1)])])
            .await
            .unwrap();
        let late = 1_000 + SESSION_EXPIRY_MS + 1;
        // Client 2 is used just before the sweep; client 1 is idle.
        sm.apply(vec![
            entry(SESSION_SWEEP_EVERY - 1, late, vec![incr(2, 2)]),
            entry(SESSION_SWEEP_EVERY, late, vec![]),
        ])
        .await
        .unwrap();
        let out = sm
            .apply(vec![entry(
                SESSION_SWEEP_EVERY + 1,
                late,
                vec![incr(1, 2), incr(2, 3)],
            )])
            .await
            .unwrap();
        assert_eq!(
            out,
            vec![vec![
                Response::SessionExpired,
                Response::Counter { value: 4 }
            ]]
        );
    }

    /// Sessions travel in snapshots: a follower that installed one answers
    /// a repeat with the first answer.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn sessions_survive_a_snapshot_install() {
        let leader_dir = tempfile::tempdir().unwrap();
        let (_log, mut leader, _) = crate::open_storage(leader_dir.path()).unwrap();
        leader
            .apply(vec![entry(1, 5, vec![incr(3, 1), incr(3, 2)])])
            .await
            .unwrap();
        let (meta, bytes) = build(&mut leader).await;

        let follower_dir = tempfile::tempdir().unwrap();
        let (_log, mut follower, _) = crate::open_storage(follower_dir.path()).unwrap();
        install(&mut follower, &meta, &bytes).await;
        let out = follower
            .apply(vec![entry(2, 6, vec![incr(3, 2), incr(3, 3)])])
            .await
            .unwrap();
        assert_eq!(
            out,
            vec![vec![
                Response::Counter { value: 2 },
                Response::Counter { value: 3 }
            ]]
        );
        assert_eq!(counter(&follower), 3);
    }

    fn req(command: Command) -> Request {
        Request::unsessioned(command)
    }

    fn put_cmd(key: &[u8], value: &[u8]) -> Command {
        Command::Put {
            key: key.to_vec(),
            value: value.to_vec(),
        }
    }

    fn range_cmd(start: &[u8], end: Option<&[u8]>) -> Command {
        Command::DeleteRange {
            start: start.to_vec(),
            end: end.map(<[u8]>::to_vec),
        }
    }

    fn cas_cmd(key: &[u8], expected: Option<&[u8]>, new: &[u8]) -> Command {
        Command::CompareAndSwap {
            key: key.to_vec(),
            expected: expected.map(<[u8]>::to_vec),
            new: Some(new.to_vec()),
        }
    }

    /// Every user key and value of `sm`'s state.
    fn contents(sm: &StateMachine) -> Vec<(Vec<u8>, Vec<u8>)> {
        let scanned = sm.reader().scan(b"").unwrap();
        scanned
            .into_iter()
            .map(|(k, v)| (k.to_vec(), v.to_vec()))
            .collect()
    }

    /// Inside one entry, reads after a range delete see the keys it covers
    /// absent (those already stored and those the entry put before it),
    /// but a put after it present; the keyspace ends the same.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn reads_in_the_entry_of_a_range_delete_see_it() {
        let dir = tempfile::tempdir().unwrap();
        let (_log, mut sm, _) = crate::open_storage(dir.path()).unwrap();
        sm.apply(vec![entry(
            1,
            0,
            vec![req(put_cmd(b"a", b"1")), req(put_cmd(b"b", b"22"))],
        )])
        .await
        .unwrap();
        let applied = Response::Applied { ops: 1 };
        let out = sm
            .apply(vec![entry(
                2,
                0,
                vec![
                    // Stored keys, then a read of each.
                    req(range_cmd(b"a", Some(b"c"))),
                    req(cas_cmd(b"a", None, b"new-a")),
                    req(Command::Increment {
                        key: b"b".to_vec(),
                        delta: 5,
                    }),
                    // A put of this entry, deleted, then read.
                    req(put_cmd(b"p", b"early")),
                    req(Command::Batch(vec![
                        Op::Put {
                            key: b"q".to_vec(),
                            value: b"early".to_vec(),
                        },
                        Op::DeleteRange {
                            start: b"p".to_vec(),
                            end: Some(b"r".to_vec()),
                        },
                    ])),
                    req(cas_cmd(b"p", None, b"p-absent")),
                    req(cas_cmd(b"q", Some(b"early"), b"q-present")),
                    // Deleted, put again, read.
                    req(put_cmd(b"x", b"early")),
                    req(range_cmd(b"x", Some(b"y"))),
                    req(put_cmd(b"x", b"late")),
                    req(cas_cmd(b"x", Some(b"late"), b"x-late")),
                ],
            )])
            .await
            .unwrap();
        assert_eq!(
            out,
            vec![vec![
                applied.clone(),
                Response::Swapped,
                Response::Counter { value: 5 },
                applied.clone(),
                Response::Applied { ops: 2 },
                Response::Swapped,
                Response::CasFailed { current: None },
                applied.clone(),
                applied.clone(),
                applied,
                Response::Swapped,
            ]]
        );
        assert_eq!(
            contents(&sm),
            vec![
                (b"a".to_vec(), b"new-a".to_vec()),
                (b"b".to_vec(), 5u64.to_be_bytes().to_vec()),
                (b"p".to_vec(), b"p-absent".to_vec()),
                (b"x".to_vec(), b"x-late".to_vec()),
            ]
        );
    }

    /// A range delete over every user key leaves the client sessions (a
    /// repeat is still answered with its first answer, in the same entry
    /// and later) and the keys under `m/`.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_range_delete_leaves_sessions_and_metadata() {
        let dir = tempfile::tempdir().unwrap();
        let (_log, mut sm, _) = crate::open_storage(dir.path()).unwrap();
        let state = Arc::clone(&sm.shared.live.read().generation);
        state.keyspace.put(b"m/marker", b"kept").unwrap();
        let c = |value| Response::Counter { value };
        let out = sm
            .apply(vec![
                entry(1, 5, vec![incr(7, 1), incr(7, 2)]),
                entry(
                    2,
                    5,
                    vec![
                        incr(8, 1),
                        incr(8, 2),
                        req(range_cmd(b"", None)),
                        incr(8, 2),
                        incr(8, 3),
                    ],
                ),
            ])
            .await
            .unwrap();
        assert_eq!(
            out,
            vec![
                vec![c(1), c(2)],
                vec![c(3), c(4), Response::Applied { ops: 1 }, c(4), c(1)]
            ]
        );
        let out = sm
            .apply(vec![entry(3, 5, vec![incr(7, 2), incr(7, 3)])])
            .await
            .unwrap();
        assert_eq!(out, vec![vec![c(2), c(2)]]);
        assert_eq!(
            state.keyspace.get(b"m/marker").unwrap().as_deref(),
            Some(&b"kept"[..])
        );
        for client in [7, 8] {
            assert!(state
                .keyspace
                .get(codec::session_key(client))
                .unwrap()
                .is_some());
        }
        let (applied, _) = read_applied(&state.keyspace).unwrap();
        assert_eq!(applied.map(|id| id.index), Some(3));
    }

    /// A range delete without an end removes every user key from its
    /// start on, the longest included; one from the empty key removes all.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_range_delete_without_an_end_reaches_the_last_key() {
        let dir = tempfile::tempdir().unwrap();
        let (_log, mut sm, _) = crate::open_storage(dir.path()).unwrap();
        let longest = vec![0xff; crate::types::MAX_KEY_LEN];
        sm.apply(vec![entry(
            1,
            0,
            vec![
                req(put_cmd(b"a", b"1")),
                req(put_cmd(b"b", b"2")),
                req(put_cmd(b"\xff", b"3")),
                req(put_cmd(&longest, b"4")),
            ],
        )])
        .await
        .unwrap();
        sm.apply(vec![entry(2, 0, vec![req(range_cmd(b"b", None))])])
            .await
            .unwrap();
        assert_eq!(contents(&sm), vec![(b"a".to_vec(), b"1".to_vec())]);
        sm.apply(vec![entry(3, 0, vec![req(range_cmd(b"", None))])])
            .await
            .unwrap();
        assert_eq!(contents(&sm), vec![]);
    }

    /// What a command does to a map of the user keys, and its answer.
    fn model_apply(model: &mut BTreeMap<Vec<u8>, Vec<u8>>, cmd: &Command) -> Response {
        if let Err(reason) = cmd.validate() {
            return Response::Rejected { reason };
        }
        match cmd {
            Command::CompareAndSwap { key, expected, new } => {
                let current = model.get(key).cloned();
                if current != *expected {
                    return Response::CasFailed { current };
                }
                match new {
                    Some(value) => model.insert(key.clone(), value.clone()),
                    None => model.remove(key),
                };
                Response::Swapped
            }
            Command::Increment { key, delta } => {
                let old = match model.get(key) {
                    None => 0,
                    Some(v) => match <[u8; 8]>::try_from(v.as_slice()) {
                        Ok(bytes) => u64::from_be_bytes(bytes),
                        Err(_) => {
                            return Response::Rejected {
                                reason: format!("the value is {} bytes, not a counter", v.len()),
                            }
                        }
                    },
                };
                let value = old.wrapping_add(*delta);
                model.insert(key.clone(), value.to_be_bytes().to_vec());
                Response::Counter { value }
            }
            _ => {
                let ops = cmd.ops();
                for op in &ops {
                    match *op {
                        OpRef::Put(key, value) => {
                            model.insert(key.to_vec(), value.to_vec());
                        }
                        OpRef::Delete(key) => {
                            model.remove(key);
                        }
                        OpRef::DeleteRange(start, end) => {
                            model.retain(|k, _| {
                                k.as_slice() < start || end.is_some_and(|end| k.as_slice() >= end)
                            });
                        }
                    }
                }
                Response::Applied { ops: ops.len() }
            }
        }
    }

    /// A random command over a few short keys (an invalid range now and
    /// then).
    fn random_command(rng: &mut siftdb_testkit::SplitMix64) -> Command {
        fn key(rng: &mut siftdb_testkit::SplitMix64, min_len: usize) -> Vec<u8> {
            let len = min_len + rng.index(3 - min_len);
            (0..len).map(|_| b"abcd"[rng.index(4)]).collect()
        }
        fn value(rng: &mut siftdb_testkit::SplitMix64) -> Vec<u8> {
            if rng.chance(30) {
                rng.below(4).to_be_bytes().to_vec()
            } else {
                vec![b'v'; rng.index(3)]
            }
        }
        fn range(rng: &mut siftdb_testkit::SplitMix64) -> (Vec<u8>, Option<Vec<u8>>) {
            let start = key(rng, 0);
            let end = if rng.chance(25) {
                None
            } else {
                let end = key(rng, 0);
                // Mostly a range that holds keys.
                if end <= start && rng.chance(80) {
                    let mut past = start.clone();
                    past.push(b'z');
                    Some(past)
                } else {
                    Some(end)
                }
            };
            (start, end)
        }
        match rng.index(7) {
            0 => Command::Put {
                key: key(rng, 1),
                value: value(rng),
            },
            1 => Command::Delete { key: key(rng, 1) },
            2 | 3 => {
                let (start, end) = range(rng);
                Command::DeleteRange { start, end }
            }
            4 => Command::Batch(
                (0..1 + rng.index(4))
                    .map(|_| match rng.index(3) {
                        0 => Op::Put {
                            key: key(rng, 1),
                            value: value(rng),
                        },
                        1 => Op::Delete { key: key(rng, 1) },
                        _ => {
                            let (start, end) = range(rng);
                            Op::DeleteRange { start, end }
                        }
                    })
                    .collect(),
            ),
            5 => Command::CompareAndSwap {
                key: key(rng, 1),
                expected: rng.chance(50).then(|| value(rng)),
                new: rng.chance(80).then(|| value(rng)),
            },
            _ => Command::Increment {
                key: key(rng, 1),
                delta: rng.below(3),
            },
        }
    }

    /// Random puts, deletes, range deletes, batches, compare-and-swaps and
    /// increments, several to an entry and several entries to an apply
    /// call, answer and store what a map does with them; now and then the
    /// state is flushed (range deletes into tables), and at the end a
    /// snapshot of it installed on another node holds the same.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn random_commands_match_a_model() {
        for seed in 1..=4u64 {
            let mut rng = siftdb_testkit::SplitMix64::new(seed);
            let dir = tempfile::tempdir().unwrap();
            let (_log, mut sm, _) = crate::open_storage(dir.path()).unwrap();
            let mut model = BTreeMap::new();
            let mut index = 0;
            for call in 0..150 {
                let mut entries = Vec::new();
                let mut want = Vec::new();
                for _ in 0..1 + rng.index(3) {
                    index += 1;
                    let commands: Vec<Command> = (0..rng.index(7))
                        .map(|_| random_command(&mut rng))
                        .collect();
                    want.push(
                        commands
                            .iter()
                            .map(|cmd| model_apply(&mut model, cmd))
                            .collect::<Vec<_>>(),
                    );
                    entries.push(entry(index, 0, commands.into_iter().map(req).collect()));
                }
                let got = sm.apply(entries.clone()).await.unwrap();
                assert_eq!(got, want, "seed {seed}, call {call}: {entries:?}");
                let expected: Vec<_> = model.clone().into_iter().collect();
                assert_eq!(contents(&sm), expected, "seed {seed}, call {call}");
                if rng.chance(10) {
                    sm.shared.db.flush().unwrap();
                }
            }
            let (meta, bytes) = build(&mut sm).await;
            let other_dir = tempfile::tempdir().unwrap();
            let (_log, mut other, _) = crate::open_storage(other_dir.path()).unwrap();
            install(&mut other, &meta, &bytes).await;
            let expected: Vec<_> = model.into_iter().collect();
            assert_eq!(contents(&other), expected, "seed {seed}, installed");
        }
    }
}
