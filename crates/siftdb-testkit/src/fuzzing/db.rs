//! Fuzz target `db_ops`: a sequence of database operations decoded from raw
//! bytes, run on the in-memory fault-injecting file system ([`FaultFs`]) and
//! checked against a `BTreeMap`.
//!
//! Owns: the op decoding and the invariants — every `get` and every scan
//! (bounded both ways, or not; forward, then backward; through the block
//! cache, or in spans from the files, by turns) agrees with the model,
//! range deletes included, in two keyspaces (`default` and `ks1`, batches
//! across both; `ks1`'s stored settings change from open to open); an
//! iterator keeps its snapshot while writes, flushes and compactions go
//! on; a clean reopen loses nothing; and after a crash armed by an op —
//! the process killed at its n-th file operation (an append may be left
//! torn), or the power cut there, keeping none, a torn part or a
//! reordered part of what was not synced — and possibly a second one
//! during the recovery, the reopened database holds exactly the writes of
//! some prefix of the write sequence: every acknowledged write when no
//! power was lost or `sync_writes` is on, at least those made durable by a
//! `flush`, `compact` or clean close otherwise; the write that failed, if
//! any, whole or not at all; and at the end (when byte 0 says so) a
//! checkpoint, opened as a database of its own, holds what the database
//! holds.
//! Must never: panic except when an invariant is violated.
//!
//! Input: byte 0 picks the options (bit 0: `sync_writes`, bit 1: no Bloom
//! filters) and bit 2 a checkpoint at the end; then each op is an opcode
//! byte followed by its operands; bytes past the end read as zero, and at
//! most [`MAX_OPS`] ops run. A write's kind byte with bit 6 set writes to
//! keyspace `ks1`; a kind byte two more than a multiple of 4 is a merge
//! (an operand appended to the value by the keyspaces' merge operator);
//! reads alternate between the keyspaces by op number.
#![expect(
    clippy::panic,
    clippy::expect_used,
    clippy::indexing_slicing,
    reason = "a fuzz target reports a broken invariant by panicking, which libFuzzer and the replay tests catch; keyspace indexes are below KEYSPACES.len() by construction"
)]

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::{Path, PathBuf};

use crate::{FaultFs, FaultMode, PowerLoss};
use std::sync::Arc;

use siftdb::{
    Compression, Db, FilterPolicy, Keyspace, KeyspaceOptions, MergeOperator, Options,
    PrefixExtractor, WriteBatch,
};

/// Ops run per input at most.
pub const MAX_OPS: usize = 128;

/// The keyspaces: index 0 is `default`.
const KEYSPACES: [&str; 2] = ["default", "ks1"];

/// What a database holds, per keyspace.
type Model = BTreeMap<Vec<u8>, Vec<u8>>;
type Models = [Model; 2];

/// One write of a batch, in keyspace `ks` (an index into [`KEYSPACES`]).
#[derive(Debug, Clone)]
struct Op {
    ks: usize,
    write: Write,
}

#[derive(Debug, Clone)]
enum Write {
    Put(Vec<u8>, Vec<u8>),
    Delete(Vec<u8>),
    /// A merge operand, appended to the value by [`Append`].
    Merge(Vec<u8>, Vec<u8>),
    /// Every key within the bounds (never reversed).
    DeleteRange(Bound<Vec<u8>>, Bound<Vec<u8>>),
}

struct Input<'a> {
    rest: &'a [u8],
}

impl Input<'_> {
    fn byte(&mut self) -> u8 {
        match self.rest.split_first() {
            Some((&b, rest)) => {
                self.rest = rest;
                b
            }
            None => 0,
        }
    }

    fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    /// One of 40 keys: `k00`…`k35`, the empty key, a key of 0xff bytes, a
    /// key just after `k05`, and a long one.
    fn key(&mut self) -> Vec<u8> {
        match self.byte() % 40 {
            36 => Vec::new(),
            37 => vec![0xff; 3],
            38 => b"k05\x00".to_vec(),
            39 => {
                let mut k = b"k2".to_vec();
                k.resize(300, b'~');
                k
            }
            i => format!("k{i:02}").into_bytes(),
        }
    }

    /// A value naming the op that wrote it (so a stale one is recognisable).
    fn value(&mut self, op_index: usize) -> Vec<u8> {
        let len = self.byte();
        if len.is_multiple_of(7) {
            return Vec::new();
        }
        let mut v = format!("{op_index}:").into_bytes();
        v.resize(v.len() + usize::from(len % 120), b'a' + len % 26);
        v
    }

    /// A put, a delete (kind byte a multiple of 4), or a range delete
    /// (kind byte 16 more than a multiple of 32; its two bounds follow).
    fn write_op(&mut self, op_index: usize) -> Op {
        let kind = self.byte();
        let ks = usize::from(kind & 0x40 != 0);
        Op {
            ks,
            write: self.write_of_kind(kind, op_index),
        }
    }

    fn write_of_kind(&mut self, kind: u8, op_index: usize) -> Write {
        if kind % 32 == 16 {
            let (mut lo, mut hi) = (self.bound(), self.bound());
            if let (
                Bound::Included(a) | Bound::Excluded(a),
                Bound::Included(b) | Bound::Excluded(b),
            ) = (&mut lo, &mut hi)
            {
                if a > b {
                    std::mem::swap(a, b);
                }
            }
            return Write::DeleteRange(lo, hi);
        }
        let key = self.key();
        if kind.is_multiple_of(4) {
            Write::Delete(key)
        } else if kind % 4 == 2 {
            Write::Merge(key, self.value(op_index))
        } else {
            Write::Put(key, self.value(op_index))
        }
    }

    fn bound(&mut self) -> Bound<Vec<u8>> {
        let how = self.byte() % 3;
        let key = self.key();
        match how {
            0 => Bound::Unbounded,
            1 => Bound::Included(key),
            _ => Bound::Excluded(key),
        }
    }

    /// A crash: how (byte 1), and at which file operation from now (byte 2: 1..=64).
    fn crash(&mut self, op_index: usize) -> Crash {
        let how = self.byte();
        let after = 1 + u64::from(self.byte() % 64);
        let seed = (op_index as u64) << 16 | u64::from(how) << 8 | after;
        let kind = match how % 4 {
            0 => CrashKind::Kill {
                torn_append: how & 4 != 0,
            },
            1 => CrashKind::PowerLoss(PowerLoss::DropUnsynced),
            2 => CrashKind::PowerLoss(PowerLoss::TornUnsynced { seed }),
            _ => CrashKind::PowerLoss(PowerLoss::ReorderedUnsynced { seed }),
        };
        Crash { kind, after }
    }
}

#[derive(Debug, Clone, Copy)]
enum CrashKind {
    /// The process dies at the operation: it and every later one fail; what
    /// was written stays (a failing append may leave its first half).
    Kill {
        torn_append: bool,
    },
    PowerLoss(PowerLoss),
}

#[derive(Debug, Clone, Copy)]
struct Crash {
    kind: CrashKind,
    after: u64,
}

impl Crash {
    fn arm(self, disk: &FaultFs) {
        match self.kind {
            CrashKind::Kill { torn_append } => {
                disk.tear_failed_appends(torn_append);
                disk.fail_after(self.after, FaultMode::Persistent);
            }
            CrashKind::PowerLoss(mode) => disk.power_loss_after(self.after, mode),
        }
    }
}

fn options(flags: u8, disk: &FaultFs) -> Options {
    Options::default()
        .sync_writes(flags & 1 != 0)
        .bloom_bits_per_key(if flags & 2 != 0 { 0.0 } else { 10.0 })
        .memtable_bytes(4096)
        .block_size(256)
        .level0_compaction_trigger(2)
        .level0_stop_writes(4)
        .level1_bytes(4096)
        .level_size_ratio(2)
        .table_target_bytes(4096)
        .merge_operator(Arc::new(Append))
        .file_system(disk.shared())
}

/// What the `open`-th open of a run gives keyspace `ks1`, in turn: nothing
/// (its stored settings stay), then the smallest uncompressed blocks with
/// a fixed two-byte prefix extractor, prefix-only point filters and range
/// filters, then large compressed blocks with a level-aware policy and
/// whole keys again, then no filters and larger memtables. Its tables of earlier
/// opens keep the settings they were written with, so the keyspace's
/// levels mix them.
fn ks1_options(open: u32) -> KeyspaceOptions {
    match open % 4 {
        1 => KeyspaceOptions::new()
            .block_size(256)
            .compression(Compression::None)
            .prefix_extractor(PrefixExtractor::fixed(2).expect("a fixed length of 2 is valid"))
            .whole_key_filtering(false)
            .range_filter_bits_per_key(12.0),
        2 => KeyspaceOptions::new()
            .block_size(2048)
            .compression(Compression::Lz4)
            .filter_policy(FilterPolicy::level_aware(6.0))
            .whole_key_filtering(true),
        3 => KeyspaceOptions::new()
            .bloom_bits_per_key(0.0)
            .memtable_bytes(8192),
        _ => KeyspaceOptions::new(),
    }
}

/// The merge operator of both keyspaces: each operand appended after a
/// `|` (none before the first), so a lost, repeated or reordered operand
/// shows in the value.
struct Append;

impl MergeOperator for Append {
    fn merge(&self, _key: &[u8], existing: Option<&[u8]>, operands: &[&[u8]]) -> Option<Vec<u8>> {
        let mut value = existing.map(<[u8]>::to_vec).unwrap_or_default();
        for operand in operands {
            append(&mut value, operand);
        }
        Some(value)
    }
}

/// What [`Append`] does with one operand.
fn append(value: &mut Vec<u8>, operand: &[u8]) {
    if !value.is_empty() {
        value.push(b'|');
    }
    value.extend_from_slice(operand);
}

fn apply(models: &mut Models, ops: &[Op]) {
    for op in ops {
        let Some(model) = models.get_mut(op.ks) else {
            continue;
        };
        match &op.write {
            Write::Put(key, value) => {
                model.insert(key.clone(), value.clone());
            }
            Write::Delete(key) => {
                model.remove(key);
            }
            Write::Merge(key, operand) => {
                let value = model.entry(key.clone()).or_default();
                append(value, operand);
            }
            Write::DeleteRange(lo, hi) => model.retain(|key, _| !in_range(key, lo, hi)),
        }
    }
}

fn batch_of(ops: &[Op], spaces: &[Keyspace]) -> WriteBatch {
    let mut batch = WriteBatch::new();
    for op in ops {
        let Some(space) = spaces.get(op.ks) else {
            continue;
        };
        match &op.write {
            Write::Put(key, value) => batch.put_in(space, key, value),
            Write::Delete(key) => batch.delete_in(space, key),
            Write::Merge(key, operand) => batch.merge_in(space, key, operand),
            Write::DeleteRange(lo, hi) => {
                batch.delete_range_in::<Vec<u8>, _>(space, (lo.clone(), hi.clone()));
            }
        }
    }
    batch
}

fn in_range(key: &[u8], lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>) -> bool {
    let above = match lo {
        Bound::Included(l) => key >= l.as_slice(),
        Bound::Excluded(l) => key > l.as_slice(),
        Bound::Unbounded => true,
    };
    let below = match hi {
        Bound::Included(h) => key <= h.as_slice(),
        Bound::Excluded(h) => key < h.as_slice(),
        Bound::Unbounded => true,
    };
    above && below
}

fn show(key: &[u8]) -> String {
    String::from_utf8_lossy(key).into_owned()
}

fn keys_of<'a>(entries: impl Iterator<Item = &'a Vec<u8>>) -> Vec<String> {
    entries.map(|k| show(k)).collect()
}

/// A scan's entries, or the first error.
fn collect(iter: siftdb::DbIterator) -> siftdb::Result<Model> {
    iter.map(|item| item.map(|(k, v)| (k.to_vec(), v.to_vec())))
        .collect()
}

/// The database under test and what it must hold.
struct Run {
    disk: FaultFs,
    dir: PathBuf,
    flags: u8,
    db: Option<Db>,
    /// The open database's keyspaces, in [`KEYSPACES`] order.
    spaces: Vec<Keyspace>,
    /// The boot and the injected-fault count the open database started with:
    /// when either moved, its process is dead.
    boot: u64,
    faults: u64,
    /// Opens so far ([`ks1_options`]).
    opens: u32,
    /// Power losses before the open database started.
    power_losses: u64,
    /// What the database must hold: `durable` plus `since` applied.
    model: Models,
    /// The state a crash can no longer take away.
    durable: Models,
    /// Acknowledged writes since `durable`, in order.
    since: Vec<Vec<Op>>,
    /// Armed by a crash op: the recovery after the next crash crashes too.
    recovery_crash: Option<Crash>,
}

impl Run {
    fn db(&self) -> &Db {
        self.db.as_ref().expect("the database is open between ops")
    }

    fn sync_writes(&self) -> bool {
        self.flags & 1 != 0
    }

    fn open(&mut self, what: &str) -> Db {
        // Taken before the open: the database's background thread starts
        // inside it and may meet an armed crash before `open_with` returns;
        // its process is then dead from the start, and its reads fail.
        self.boot = self.disk.boot();
        self.faults = self.disk.faults_injected();
        self.power_losses = self.disk.power_losses();
        let db = Db::open_with(&self.dir, options(self.flags, &self.disk))
            .unwrap_or_else(|e| panic!("{what}: open failed without a crash: {e}"));
        // `ks1` was made by the first open (before any crash was armed):
        // every later open finds it.
        let tuned = ks1_options(self.opens);
        self.opens += 1;
        self.spaces = KEYSPACES
            .iter()
            .map(|&name| {
                let space = if name == "ks1" {
                    db.keyspace_with(name, tuned.clone())
                } else {
                    db.keyspace(name)
                };
                space.unwrap_or_else(|e| panic!("{what}: keyspace {name}: {e}"))
            })
            .collect();
        db
    }

    /// The open database's keyspace `ks`.
    fn space(&self, ks: usize) -> &Keyspace {
        self.spaces
            .get(ks)
            .expect("two keyspaces while the database is open")
    }

    /// True when the open database's process died (killed or power cut).
    fn dead(&self) -> bool {
        self.disk.boot() != self.boot || self.disk.faults_injected() != self.faults
    }

    /// Everything written so far is durable now.
    fn mark_durable(&mut self) {
        self.durable = self.model.clone();
        self.since.clear();
    }

    /// Closes the database (or buries its dead process), disarms what is
    /// still armed, reopens — through a crashing recovery first, if one was
    /// armed — and checks the result against the model. `failed` is a
    /// write that returned an error: it may be in, whole.
    fn restart(&mut self, failed: Option<&[Op]>, what: &str) {
        // The handles hold the database (and its lock) too.
        self.spaces.clear();
        drop(self.db.take());
        let crashed = self.dead();
        self.disk.clear_faults();
        self.disk.tear_failed_appends(false);
        if crashed {
            // Whatever still runs of the old process dies now.
            self.disk.kill_process();
            if let Some(crash) = self.recovery_crash.take() {
                crash.arm(&self.disk);
                let faults = self.disk.faults_injected();
                let boot = self.disk.boot();
                match Db::open_with(&self.dir, options(self.flags, &self.disk)) {
                    Ok(db) => drop(db),
                    Err(e) => assert!(
                        self.disk.boot() != boot || self.disk.faults_injected() != faults,
                        "{what}: recovery failed without a crash: {e}"
                    ),
                }
                self.disk.clear_faults();
                self.disk.tear_failed_appends(false);
                self.disk.kill_process();
            }
        }
        // Unsynced writes are lost to a power cut, here or in the recovery.
        let power_lost = self.disk.power_losses() != self.power_losses;
        let db = self.open(what);
        let mut found = Models::default();
        for (model, space) in found.iter_mut().zip(&self.spaces) {
            *model = collect(space.iter())
                .unwrap_or_else(|e| panic!("{what}: scan after reopening failed: {e}"));
        }

        // The states the database may be in: the durable one plus a prefix
        // of the later writes (the failed one last).
        let mut writes: Vec<&[Op]> = self.since.iter().map(Vec::as_slice).collect();
        writes.extend(failed);
        let shortest = if !power_lost || self.sync_writes() {
            self.since.len()
        } else {
            0
        };
        let mut state = self.durable.clone();
        let mut matched = None;
        for (k, ops) in std::iter::once(&[][..])
            .chain(writes.iter().copied())
            .enumerate()
        {
            apply(&mut state, ops);
            if k >= shortest && state == found {
                matched = Some(k);
            }
        }
        let Some(k) = matched else {
            panic!(
                "{what}: after {}, the database holds keys {:?}; expected the state after \
                 {shortest}..={} of the {} writes since the last durable point (all: keys {:?})",
                if crashed { "a crash" } else { "a clean close" },
                found.iter().map(|m| keys_of(m.keys())).collect::<Vec<_>>(),
                writes.len(),
                writes.len(),
                self.model
                    .iter()
                    .map(|m| keys_of(m.keys()))
                    .collect::<Vec<_>>()
            )
        };
        let mut state = self.durable.clone();
        for ops in writes.iter().take(k) {
            apply(&mut state, ops);
        }
        for (model, space) in state.iter().zip(&self.spaces) {
            for (key, value) in model {
                let got = space
                    .get(key)
                    .unwrap_or_else(|e| panic!("{what}: get {} after reopening: {e}", show(key)));
                assert_eq!(
                    got.as_deref(),
                    Some(value.as_slice()),
                    "{what}: get {} in {}",
                    show(key),
                    space.name()
                );
            }
        }
        self.model = state;
        // Recovery wrote every record it replayed into a synced table.
        self.mark_durable();
        self.db = Some(db);
    }

    /// Writes `ops` as one batch; an error must come from a crash.
    fn write(&mut self, ops: &[Op], what: &str) {
        match self.db().write(batch_of(ops, &self.spaces)) {
            Ok(()) => {
                apply(&mut self.model, ops);
                if self.sync_writes() {
                    self.mark_durable();
                } else {
                    self.since.push(ops.to_vec());
                }
            }
            Err(e) => {
                assert!(self.dead(), "{what}: write failed without a crash: {e}");
                self.restart(Some(ops), what);
            }
        }
    }

    /// After a flush or a compaction: durable if it succeeded; an error must
    /// come from a crash.
    fn maintain(&mut self, result: siftdb::Result<()>, what: &str) {
        match result {
            Ok(()) => self.mark_durable(),
            Err(e) => {
                assert!(self.dead(), "{what} failed without a crash: {e}");
                self.restart(None, what);
            }
        }
    }

    /// After the final reopen (nothing armed): one more write, so the
    /// memtables hold something, then a checkpoint, opened as a database
    /// of its own, holds what the model holds in both keyspaces.
    fn check_checkpoint(&mut self) {
        let what = "the final checkpoint";
        let last = [Op {
            ks: 1,
            write: Write::Put(b"k07".to_vec(), b"checkpointed".to_vec()),
        }];
        self.write(&last, what);
        let dir = Path::new("/checkpoint");
        self.db()
            .checkpoint(dir)
            .unwrap_or_else(|e| panic!("{what} failed without a crash: {e}"));
        let copy = Db::open_with(dir, options(self.flags, &self.disk))
            .unwrap_or_else(|e| panic!("{what}: open failed: {e}"));
        for (model, name) in self.model.iter().zip(KEYSPACES) {
            let space = copy
                .keyspace(name)
                .unwrap_or_else(|e| panic!("{what}: keyspace {name}: {e}"));
            let found =
                collect(space.iter()).unwrap_or_else(|e| panic!("{what}: scan of {name}: {e}"));
            assert!(
                &found == model,
                "{what}: {name} holds keys {:?}, the database {:?}",
                keys_of(found.keys()),
                keys_of(model.keys())
            );
        }
    }

    /// A read's error must come from a crash; then the database restarts.
    fn read_failed(&mut self, e: &siftdb::Error, what: &str) {
        assert!(self.dead(), "{what}: read failed without a crash: {e}");
        self.restart(None, what);
    }

    fn get(&mut self, ks: usize, key: &[u8], what: &str) {
        match self.space(ks).get(key) {
            Ok(got) => {
                assert_eq!(
                    got.as_deref(),
                    self.model[ks].get(key).map(Vec::as_slice),
                    "{what}: get {} in {}",
                    show(key),
                    KEYSPACES[ks]
                );
                // From memory alone: never "absent" for a key with a value.
                if got.is_some() {
                    assert!(
                        self.space(ks).key_may_exist(key),
                        "{what}: key_may_exist said no to {}, which has a value",
                        show(key)
                    );
                }
            }
            Err(e) => self.read_failed(&e, what),
        }
    }

    fn multi_get(&mut self, ks: usize, keys: &[Vec<u8>], what: &str) {
        match self.space(ks).multi_get(keys) {
            Ok(got) => {
                assert_eq!(got.len(), keys.len(), "{what}: multi_get answers");
                for (key, got) in keys.iter().zip(got) {
                    assert_eq!(
                        got.as_deref(),
                        self.model[ks].get(key).map(Vec::as_slice),
                        "{what}: multi_get {}",
                        show(key)
                    );
                }
            }
            Err(e) => self.read_failed(&e, what),
        }
    }

    /// Checks a scan against `want`, read forward (`next`) or backward
    /// (`next_back`, the same entries in descending order). `from_boot`:
    /// the boot of the process the iterator was made in — when that
    /// process has died since (and the database was reopened), the
    /// iterator reads through its dead process's file handles, so an error
    /// is expected; entries it does return must still match.
    fn scan(
        &mut self,
        iter: siftdb::DbIterator,
        want: &Model,
        (lo, hi): (&Bound<Vec<u8>>, &Bound<Vec<u8>>),
        from_boot: u64,
        backward: bool,
        what: &str,
    ) {
        let process_gone = from_boot != self.boot;
        let entry = |item: siftdb::Result<(bytes::Bytes, bytes::Bytes)>| {
            item.map(|(k, v)| (k.to_vec(), v.to_vec()))
        };
        let got: siftdb::Result<Vec<(Vec<u8>, Vec<u8>)>> = if backward {
            iter.rev().map(entry).collect()
        } else {
            iter.map(entry).collect()
        };
        match got {
            Ok(got) => {
                let mut want: Vec<(Vec<u8>, Vec<u8>)> = want
                    .iter()
                    .filter(|(k, _)| in_range(k, lo, hi))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                if backward {
                    want.reverse();
                }
                assert!(
                    got == want,
                    "{what}: {}scan of {lo:?}..{hi:?} disagrees with the model\n got keys {:?}\nwant keys {:?}",
                    if backward { "reverse " } else { "" },
                    keys_of(got.iter().map(|(k, _)| k)),
                    keys_of(want.iter().map(|(k, _)| k))
                );
            }
            Err(_) if process_gone => {}
            Err(e) => self.read_failed(&e, what),
        }
    }
}

/// Target `db_ops`. See the module docs for the input format.
pub fn db_ops(data: &[u8]) {
    let mut input = Input { rest: data };
    let flags = input.byte();
    let mut run = Run {
        disk: FaultFs::new(),
        dir: Path::new("/db").to_path_buf(),
        flags,
        db: None,
        spaces: Vec::new(),
        boot: 0,
        opens: 0,
        faults: 0,
        power_losses: 0,
        model: Models::default(),
        durable: Models::default(),
        since: Vec::new(),
        recovery_crash: None,
    };
    let db = run.open("the first open");
    run.db = Some(db);

    for op_index in 0..MAX_OPS {
        if input.is_empty() {
            break;
        }
        let what = format!("op {op_index}");
        // The keyspace reads of this op look at.
        let ks = op_index % KEYSPACES.len();
        // Whether this op's scans go through the block cache or read their
        // tables in spans straight from the files (`fill_cache(false)`):
        // each in turn, in both keyspaces.
        let fill_cache = (op_index / KEYSPACES.len()).is_multiple_of(2);
        match input.byte() % 10 {
            0 | 1 => {
                let op = input.write_op(op_index);
                run.write(&[op], &what);
            }
            2 => {
                let n = 1 + usize::from(input.byte() % 6);
                let ops: Vec<Op> = (0..n).map(|_| input.write_op(op_index)).collect();
                run.write(&ops, &what);
            }
            3 => {
                let key = input.key();
                run.get(ks, &key, &what);
                // The same key through `multi_get`, repeated, among fixed ones
                // (no further input bytes, so the corpus keeps its meaning).
                if run.db.is_some() {
                    let keys = [key.clone(), b"k00".to_vec(), key, b"k17".to_vec()];
                    run.multi_get(ks, &keys, &what);
                }
            }
            4 => {
                let (lo, hi) = (input.bound(), input.bound());
                // From the indexes in memory: no I/O, so no error, crash or not.
                let size = run
                    .space(ks)
                    .approximate_size::<Vec<u8>, _>((lo.clone(), hi.clone()));
                assert!(size.is_ok(), "{what}: approximate_size failed: {size:?}");
                // From the memtables' towers: no I/O either.
                let unflushed = run
                    .space(ks)
                    .approximate_memtable_stats::<Vec<u8>, _>((lo.clone(), hi.clone()));
                assert!(
                    unflushed.is_ok(),
                    "{what}: approximate_memtable_stats failed: {unflushed:?}"
                );
                let iter = run
                    .space(ks)
                    .range::<Vec<u8>, _>((lo.clone(), hi.clone()))
                    .fill_cache(fill_cache);
                let model = run.model[ks].clone();
                let boot = run.boot;
                run.scan(iter, &model, (&lo, &hi), boot, false, &what);
                // The same range backwards (no further input bytes).
                if run.db.is_some() && run.boot == boot {
                    let iter = run
                        .space(ks)
                        .range::<Vec<u8>, _>((lo.clone(), hi.clone()))
                        .fill_cache(fill_cache);
                    run.scan(iter, &model, (&lo, &hi), boot, true, &what);
                }
            }
            5 => {
                let result = run.db().flush();
                run.maintain(result, &what);
            }
            6 => {
                // A full compaction, or one of a keyspace's key range.
                let result = if input.byte().is_multiple_of(2) {
                    run.db().compact()
                } else {
                    let range = (input.bound(), input.bound());
                    run.space(ks).compact_range::<Vec<u8>, _>(range)
                };
                run.maintain(result, &what);
            }
            7 => run.restart(None, &what),
            8 => {
                // An iterator keeps its snapshot across writes and maintenance
                // (across a crash and reopen too, as far as it can still read).
                let before = run.model[ks].clone();
                let boot = run.boot;
                let iter = run.space(ks).iter().fill_cache(fill_cache);
                let ops = [input.write_op(op_index), input.write_op(op_index)];
                run.write(&ops, &what);
                if input.byte().is_multiple_of(2) {
                    let result = run.db().flush();
                    run.maintain(result, &what);
                }
                let all = (&Bound::Unbounded, &Bound::Unbounded);
                run.scan(iter, &before, all, boot, false, &what);
            }
            _ => {
                let crash = input.crash(op_index);
                crash.arm(&run.disk);
                // An odd byte: the recovery after this crash crashes too,
                // as the next two bytes say.
                let recovery = input.byte();
                run.recovery_crash = (recovery % 2 == 1).then(|| input.crash(op_index + 1));
            }
        }
        // A crash no op noticed (a background flush died): restart now, so
        // the next write is not refused for a reason the model cannot see.
        if run.dead() {
            run.restart(None, &format!("{what} (crashed in the background)"));
        }
    }
    run.restart(None, "the final reopen");
    if flags & 4 != 0 {
        run.check_checkpoint();
    }
}
