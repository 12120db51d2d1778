//! The key-value state machine and its snapshots in siftdb (openraft's
//! `RaftStateMachine` and `RaftSnapshotBuilder`).
//!
//! Owns: the state keyspaces `state.<n>` of the node's database (user keys
//! under `d`, client sessions under `s`, the last applied log id and
//! membership under `m/`), how a request is applied (exactly once per
//! client session and sequence number, a repeat answered with the first
//! answer, idle sessions expired by the entries' clock), the
//! pointer to the live one and to the live snapshot file (`live` in
//! `raft.meta`, see [`crate::pointer`]), the node's `snapshots/` directory
//! (`snap-<n>.snap`, the live snapshot file, see [`crate::snapshot_file`]),
//! and the in-memory copy of the last applied log id and membership.
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
//! Snapshots. A build reads a `Db::snapshot()` taken when openraft asks for
//! the builder (between two applies), so applies go on while the file is
//! written. An install builds the new state in a fresh keyspace
//! `state.<n+1>` of the same database while reading and checking the
//! received file (and copying it to the new live snapshot file), then
//! writes the pointer naming it, synced: that one write is the commit
//! point, and makes the new keyspace's writes (earlier in the same log)
//! durable with it. A crash before it keeps the old state (open drops the
//! half-built keyspace), after it the new one. The old keyspace is dropped
//! when its last reader (a client read, a snapshot build) lets go of it.

use std::fs::{self, File};
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
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
use siftdb::{Db, Keyspace, WriteBatch, WriteOptions};

use crate::codec::{self, data_key, decode, encode, state_keyspace, user_key, Error, Result};
use crate::log_store::{blocking, Applied, PurgeGate};
use crate::pointer::{sync_dir, Pointer};
use crate::snapshot_file::{self, Meta};
use crate::timings::Timings;
use crate::types::{
    Command, NodeId, OpRef, Request, Response, TypeConfig, SESSION_EXPIRY_MS, SESSION_SWEEP_EVERY,
};

type StorageResult<T> = std::result::Result<T, StorageError<NodeId>>;
type Membership = StoredMembership<NodeId, openraft::BasicNode>;

/// An apply writes a siftdb batch whenever this many bytes have gathered
/// (each batch ends on an entry boundary with the applied id it reaches).
const APPLY_BATCH_BYTES: usize = 32 << 20;
/// An install loads the received snapshot in batches of this size.
const INSTALL_BATCH_BYTES: usize = 8 << 20;
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
    /// Metadata of the live snapshot file (`pointer.snapshot`), if any.
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

fn snapshot_path(dir: &Path, number: u64) -> PathBuf {
    dir.join(SNAPSHOTS).join(format!("snap-{number:020}.snap"))
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
/// files, temporary and partly received files.
fn remove_unreferenced(db: &Db, dir: &Path, pointer: &Pointer) -> Result<()> {
    for name in db.keyspaces() {
        if codec::state_generation(&name).is_some_and(|n| n != pointer.generation) {
            db.drop_keyspace(&name)?;
        }
    }
    let snaps = dir.join(SNAPSHOTS);
    let live_snap = (pointer.snapshot != 0).then(|| snapshot_path(dir, pointer.snapshot));
    for entry in fs::read_dir(&snaps).map_err(io(&snaps))? {
        let entry = entry.map_err(io(&snaps))?;
        if Some(entry.path()) != live_snap {
            fs::remove_file(entry.path()).map_err(io(&entry.path()))?;
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
            let path = snapshot_path(dir, pointer.snapshot);
            let read = File::open(&path)
                .map_err(io(&path))
                .and_then(|f| snapshot_file::read_meta(&mut BufReader::new(f)));
            match read {
                Ok(meta) => Some(meta),
                // The file is only needed to send to a follower: without it
                // openraft builds a new one; the state itself is intact.
                Err(e) => {
                    tracing::warn!("snapshot file {} unusable: {e}", path.display());
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
struct SessionRecord {
    seq: u64,
    last_used_ms: u64,
    response: Response,
}

/// Applies the requests of one `apply` call into a siftdb batch; its reads
/// (compare-and-swap, increment, sessions) see the writes of the requests
/// before them, also those not yet written to the keyspace. Applies are
/// serial (openraft calls `apply` one at a time), so a read-then-write is
/// atomic.
struct Applier<'a> {
    state: &'a Keyspace,
    batch: WriteBatch,
    /// State keys written to `batch` (`None`: deleted), for reads.
    written: std::collections::HashMap<Vec<u8>, Option<Vec<u8>>>,
}

impl<'a> Applier<'a> {
    fn new(state: &'a Keyspace) -> Applier<'a> {
        Applier {
            state,
            batch: WriteBatch::new(),
            written: std::collections::HashMap::new(),
        }
    }

    /// The batch so far, to be written now (later reads go to the
    /// keyspace).
    fn take_batch(&mut self) -> WriteBatch {
        self.written.clear();
        std::mem::take(&mut self.batch)
    }

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if let Some(value) = self.written.get(key) {
            return Ok(value.clone());
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
            Command::Put { .. } | Command::Delete { .. } | Command::Batch(_) => {
                let ops = cmd.ops();
                for op in &ops {
                    match *op {
                        OpRef::Put(key, value) => self.put(data_key(key), value),
                        OpRef::Delete(key) => self.delete(data_key(key)),
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

    /// Makes the file `number` with `meta` the live snapshot if the state
    /// it was built from (`generation`) is still live and it is newer than
    /// the live one; removes the file it replaces (or itself, when not
    /// taken). Readers holding an older file keep reading it.
    fn publish_snapshot(&self, generation: u64, number: u64, meta: &Meta) -> Result<bool> {
        let mut files = self.files.lock();
        let newer = match &files.snapshot_meta {
            Some(live) => meta.last_log_id > live.last_log_id,
            None => true,
        };
        if files.pointer.generation != generation || !newer {
            let path = snapshot_path(&self.dir, number);
            fs::remove_file(&path).map_err(io(&path))?;
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
            let path = snapshot_path(&self.dir, old);
            fs::remove_file(&path).map_err(io(&path))?;
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

/// Builds a snapshot file from a siftdb snapshot of the live state.
pub struct SnapshotBuilder {
    inner: Arc<BuilderInner>,
}

struct BuilderInner {
    /// The whole database at the builder's moment; it reads the state
    /// keyspace even if an install drops it meanwhile.
    view: siftdb::Snapshot,
    generation: Arc<Generation>,
    last_applied: Option<LogId<NodeId>>,
    membership: Membership,
    shared: Arc<Shared>,
}

impl BuilderInner {
    /// Writes snapshot file `number` and makes it live if still newest;
    /// returns the file opened for reading.
    fn build(&self, number: u64, meta: &Meta) -> Result<File> {
        let _timer = self.shared.timings.snapshot_build.start();
        // No flush first: the purge openraft makes behind this snapshot is
        // a synced write to the same log as the applies it covers, later,
        // so it is durable only with them (see the module documentation).
        let path = snapshot_path(&self.shared.dir, number);
        let tmp = path.with_extension("snap.tmp");
        let file = File::create(&tmp).map_err(io(&tmp))?;
        let mut writer = snapshot_file::Writer::new(BufWriter::with_capacity(1 << 20, file), meta)?;
        // The user keys and the client sessions, each record under its
        // state key (prefix byte included).
        for prefix in [codec::DATA_PREFIX, codec::SESSION_PREFIX] {
            for item in self.view.prefix_in(&self.generation.keyspace, [prefix]) {
                let (key, value) = item?;
                writer.record(&key, &value)?;
            }
        }
        let file = writer
            .finish()?
            .into_inner()
            .map_err(|e| Error::io(&tmp, e.into_error()))?;
        file.sync_all().map_err(io(&tmp))?;
        drop(file);
        fs::rename(&tmp, &path).map_err(io(&path))?;
        sync_dir(&self.shared.dir.join(SNAPSHOTS))?;
        // Opened before publishing, which may remove it.
        let file = File::open(&path).map_err(io(&path))?;
        self.shared
            .publish_snapshot(self.generation.number, number, meta)?;
        Ok(file)
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
        // Reading the view and writing the file block: off the async
        // workers.
        let inner = Arc::clone(&self.inner);
        let task_meta = meta.clone();
        let file = blocking(move || inner.build(number, &task_meta))
            .await
            .map_err(err)?;
        shared.snapshots_built.fetch_add(1, Ordering::Relaxed);
        Ok(Snapshot {
            meta,
            snapshot: Box::new(tokio::fs::File::from_std(file)),
        })
    }
}

/// A reader that copies every byte it reads to `copy`.
struct Tee<R, W> {
    input: R,
    copy: W,
}

impl<R: Read, W: Write> Read for Tee<R, W> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.input.read(buf)?;
        if let Some(read) = buf.get(..n) {
            self.copy.write_all(read)?;
        }
        Ok(n)
    }
}

impl Shared {
    /// Builds generation `number` from the snapshot file `input` (checked
    /// against `meta`), copying the file to snapshot `snap_number`; returns
    /// the new generation, not yet live (its writes not yet synced: the
    /// pointer's synced write makes them durable).
    fn build_generation(
        &self,
        input: File,
        meta: &Meta,
        number: u64,
        snap_number: u64,
    ) -> Result<Generation> {
        let name = state_keyspace(number);
        if self.db.keyspaces().contains(&name) {
            // Left by an install whose keyspace could not be dropped.
            self.db.drop_keyspace(&name)?;
        }
        // Discarded (dropped) if anything below fails.
        let generation = open_generation(&self.db, number, true)?;
        let state = &generation.keyspace;
        let write = |batch: WriteBatch| self.db.write_with(batch, WriteOptions::new().sync(false));
        let snap = snapshot_path(&self.dir, snap_number);
        let tmp = snap.with_extension("snap.tmp");
        let copy = File::create(&tmp).map_err(io(&tmp))?;
        let mut tee = Tee {
            input: BufReader::with_capacity(1 << 20, input),
            copy: BufWriter::with_capacity(1 << 20, copy),
        };
        let mut batch = WriteBatch::new();
        let mut write_error = None;
        let read = snapshot_file::read(&mut tee, |key, value| {
            if !codec::is_replicated_state(key) {
                return Err(Error::corruption(
                    "snapshot file",
                    "a record whose key is neither user data nor a client session",
                ));
            }
            batch.put_in(state, key, value);
            if batch.approximate_bytes() >= INSTALL_BATCH_BYTES {
                if let Err(e) = write(std::mem::take(&mut batch)) {
                    write_error = Some(e);
                    return Err(Error::corruption("snapshot install", "write failed"));
                }
            }
            Ok(())
        });
        if let Some(e) = write_error {
            return Err(e.into());
        }
        let file_meta = read?;
        if file_meta != *meta {
            return Err(Error::corruption(
                "snapshot file",
                format!("header says {file_meta}, the leader sent {meta}"),
            ));
        }
        batch.put_in(
            state,
            codec::KEY_APPLIED,
            encode(&meta.last_log_id, "last applied log id")?,
        );
        batch.put_in(
            state,
            codec::KEY_MEMBERSHIP,
            encode(&meta.last_membership, "last membership")?,
        );
        write(batch)?;
        let copy = tee
            .copy
            .into_inner()
            .map_err(|e| Error::io(&tmp, e.into_error()))?;
        copy.sync_all().map_err(io(&tmp))?;
        drop(copy);
        fs::rename(&tmp, &snap).map_err(io(&snap))?;
        sync_dir(&self.dir.join(SNAPSHOTS))?;
        Ok(generation)
    }

    /// Makes `generation` and snapshot `snap_number` live in one synced
    /// pointer write, then retires the old generation and snapshot files.
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
        // Older snapshot files and partly received ones: readers that hold
        // them open keep reading.
        let snaps = self.dir.join(SNAPSHOTS);
        let live_snap = snapshot_path(&self.dir, snap_number);
        for entry in fs::read_dir(&snaps).map_err(io(&snaps))? {
            let entry = entry.map_err(io(&snaps))?;
            let path = entry.path();
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if path != live_snap && (name.ends_with(".snap") || name.ends_with(".part")) {
                fs::remove_file(&path).map_err(io(&path))?;
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
        for entry in entries {
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
        }
        Ok(responses)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        // Between two applies: the view, the applied id and the membership
        // agree.
        let live = self.shared.live.read();
        SnapshotBuilder {
            inner: Arc::new(BuilderInner {
                view: self.shared.db.snapshot(),
                generation: Arc::clone(&live.generation),
                last_applied: live.last_applied,
                membership: live.membership.clone(),
                shared: Arc::clone(&self.shared),
            }),
        }
    }

    async fn begin_receiving_snapshot(&mut self) -> StorageResult<Box<tokio::fs::File>> {
        let n = self.shared.next_receive.fetch_add(1, Ordering::Relaxed);
        let path = self
            .shared
            .dir
            .join(SNAPSHOTS)
            .join(format!("recv-{n:020}.part"));
        let file = tokio::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)
            .await
            .map_err(|e| {
                Error::io(&path, e).storage(ErrorSubject::Snapshot(None), ErrorVerb::Write)
            })?;
        Ok(Box::new(file))
    }

    async fn install_snapshot(
        &mut self,
        meta: &Meta,
        snapshot: Box<tokio::fs::File>,
    ) -> StorageResult<()> {
        let err = |e: Error| {
            self.failed();
            e.storage(
                ErrorSubject::Snapshot(Some(meta.signature())),
                ErrorVerb::Write,
            )
        };
        let mut file = snapshot.into_std().await;
        let shared = Arc::clone(&self.shared);
        let number = shared.live.read().generation.number + 1;
        let snap_number = shared.take_snapshot_number();
        let meta_owned = meta.clone();
        blocking(move || {
            let _timer = shared.timings.snapshot_install.start();
            file.seek(SeekFrom::Start(0))
                .map_err(|e| Error::io_in("received snapshot", e))?;
            let generation = shared.build_generation(file, &meta_owned, number, snap_number)?;
            shared.switch_to(generation, snap_number, &meta_owned)
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
        let path = snapshot_path(&self.shared.dir, files.pointer.snapshot);
        let file = File::open(&path).map_err(|e| {
            Error::io(&path, e).storage(
                ErrorSubject::Snapshot(Some(meta.signature())),
                ErrorVerb::Read,
            )
        })?;
        Ok(Some(Snapshot {
            meta,
            snapshot: Box::new(tokio::fs::File::from_std(file)),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::CommittedLeaderId;

    /// A snapshot file of `records` ending at log index `index`.
    fn snapshot_bytes(index: u64, records: &[(&[u8], &[u8])]) -> (Meta, Vec<u8>) {
        let meta = Meta {
            last_log_id: Some(LogId::new(CommittedLeaderId::new(1, 1), index)),
            last_membership: Membership::default(),
            snapshot_id: format!("test-{index}"),
        };
        let mut writer = snapshot_file::Writer::new(Vec::new(), &meta).unwrap();
        for (key, value) in records {
            writer.record(&data_key(key), value).unwrap();
        }
        (meta, writer.finish().unwrap())
    }

    async fn install(sm: &mut StateMachine, meta: &Meta, bytes: &[u8]) {
        let received = sm.begin_receiving_snapshot().await.unwrap();
        let mut file = received.into_std().await;
        file.write_all(bytes).unwrap();
        sm.install_snapshot(meta, Box::new(tokio::fs::File::from_std(file)))
            .await
            .unwrap();
    }

    /// A reader that took the live generation before an install keeps
    /// reading it; its keyspace is dropped when that reader lets go.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_old_generation_is_dropped_after_its_last_reader() {
        let dir = tempfile::tempdir().unwrap();
        let (_log, mut sm, _) = crate::open_storage(dir.path()).unwrap();
        let (meta, bytes) = snapshot_bytes(5, &[(b"k", b"one")]);
        install(&mut sm, &meta, &bytes).await;
        let held = Arc::clone(&sm.shared.live.read().generation);
        assert_eq!(held.number, 2);

        let (meta, bytes) = snapshot_bytes(9, &[(b"k", b"two")]);
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

    /// A snapshot file that fails its checks leaves the old state live and
    /// no keyspace of the failed install behind.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_damaged_snapshot_leaves_the_old_state_and_no_keyspace() {
        let dir = tempfile::tempdir().unwrap();
        let (_log, mut sm, _) = crate::open_storage(dir.path()).unwrap();
        let (meta, bytes) = snapshot_bytes(5, &[(b"k", b"one")]);
        install(&mut sm, &meta, &bytes).await;
        let (meta, mut bytes) = snapshot_bytes(9, &[(b"k", b"two"), (b"l", b"x")]);
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        let received = sm.begin_receiving_snapshot().await.unwrap();
        let mut file = received.into_std().await;
        file.write_all(&bytes).unwrap();
        let result = sm
            .install_snapshot(&meta, Box::new(tokio::fs::File::from_std(file)))
            .await;
        assert!(result.is_err());
        assert_eq!(sm.reader().stats().generation, 2);
        assert_eq!(sm.reader().get(b"k").unwrap().as_deref(), Some(&b"one"[..]));
        assert!(!sm.shared.db.keyspaces().contains(&state_keyspace(3)));
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
        let snap = leader
            .get_snapshot_builder()
            .await
            .build_snapshot()
            .await
            .unwrap();
        let mut bytes = Vec::new();
        let mut file = snap.snapshot.into_std().await;
        file.seek(SeekFrom::Start(0)).unwrap();
        file.read_to_end(&mut bytes).unwrap();

        let follower_dir = tempfile::tempdir().unwrap();
        let (_log, mut follower, _) = crate::open_storage(follower_dir.path()).unwrap();
        install(&mut follower, &snap.meta, &bytes).await;
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
}
