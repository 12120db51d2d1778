//! The key-value state machine and its snapshots in siftdb (openraft's
//! `RaftStateMachine` and `RaftSnapshotBuilder`).
//!
//! Owns: the state keyspaces `state.<n>` of the node's database (user keys
//! under `d`, client sessions under `s`, the last applied log id and
//! membership under `m/`), writing the batches `apply.rs` gathers
//! (requests applied exactly once per client session and sequence number)
//! with the applied position they reach, the
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

use std::collections::HashMap;
use std::fs;
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

use crate::apply::Applier;
use crate::codec::{self, data_key, decode, encode, state_keyspace, user_key, Error, Result};
use crate::log_store::{blocking, Applied, PurgeGate};
use crate::pointer::{sync_dir, Pointer};
use crate::snapshot_file::{self, Header, Meta, SnapshotStream, TableEntry};
use crate::timings::{Step, Timings};
use crate::types::{NodeId, Response, TypeConfig, SESSION_SWEEP_EVERY};

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
            if applier.pending_bytes() >= APPLY_BATCH_BYTES {
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
mod tests;
