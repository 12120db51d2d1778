//! Fuzz target `db_ops`: a sequence of database operations decoded from raw
//! bytes, run against a real directory and checked against a `BTreeMap`.
//!
//! Owns: the op decoding and the invariants — every `get` and every scan
//! (bounded both ways, or not) agrees with the model; an iterator keeps its
//! snapshot while writes, flushes and compactions go on; a clean reopen
//! loses nothing; and after a simulated process crash ([`CrashFs`], armed
//! by an op at any mutating file-system call, including in the middle of an
//! append or inside a background flush or compaction) a reopen holds every
//! acknowledged write, plus at most the one write that failed — whole or
//! not at all — even when the recovery after the crash crashes too.
//! Must never: panic except when an invariant is violated.
//!
//! Input: byte 0 picks the options (bit 0: `sync_writes`, bit 1: no Bloom
//! filters); then each op is an opcode byte followed by its operands; bytes
//! past the end read as zero, and at most [`MAX_OPS`] ops run.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

use crate::fuzzing::crash_fs::CrashFs;
use crate::{Db, Options, WriteBatch};

/// Ops run per input at most (each may touch the disk; keep inputs fast).
pub const MAX_OPS: usize = 96;

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

/// A put (`Some(value)`) or a delete (`None`).
type Op = (Vec<u8>, Option<Vec<u8>>);

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

    fn write_op(&mut self, op_index: usize) -> Op {
        let kind = self.byte();
        let key = self.key();
        let value = (!kind.is_multiple_of(4)).then(|| self.value(op_index));
        (key, value)
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
}

fn options(flags: u8, fs: &Arc<CrashFs>) -> Options {
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
        .file_system(Arc::clone(fs) as crate::fs::SharedFs)
}

fn apply(model: &mut Model, ops: &[Op]) {
    for (key, value) in ops {
        match value {
            Some(v) => model.insert(key.clone(), v.clone()),
            None => model.remove(key),
        };
    }
}

fn batch_of(ops: &[Op]) -> WriteBatch {
    let mut batch = WriteBatch::new();
    for (key, value) in ops {
        match value {
            Some(v) => batch.put(key, v),
            None => batch.delete(key),
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

/// Drains `iter` and compares it with the model's entries in `[lo, hi]`.
fn check_scan(
    iter: crate::DbIterator,
    model: &Model,
    lo: &Bound<Vec<u8>>,
    hi: &Bound<Vec<u8>>,
    what: &str,
) {
    let got: Vec<(Vec<u8>, Vec<u8>)> = iter
        .map(|item| {
            let (k, v) = item.unwrap_or_else(|e| panic!("{what}: scan failed: {e}"));
            (k.to_vec(), v.to_vec())
        })
        .collect();
    let want: Vec<(Vec<u8>, Vec<u8>)> = model
        .iter()
        .filter(|(k, _)| in_range(k, lo, hi))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if got != want {
        let got_keys: Vec<String> = got.iter().map(|(k, _)| show(k)).collect();
        let want_keys: Vec<String> = want.iter().map(|(k, _)| show(k)).collect();
        panic!("{what}: scan of {lo:?}..{hi:?} disagrees with the model\n got keys {got_keys:?}\nwant keys {want_keys:?}");
    }
}

fn check_all(db: &Db, model: &Model, what: &str) {
    check_scan(db.iter(), model, &Bound::Unbounded, &Bound::Unbounded, what);
    for (key, value) in model {
        let got = db
            .get(key)
            .unwrap_or_else(|e| panic!("{what}: get {} failed: {e}", show(key)));
        assert_eq!(
            got.as_deref(),
            Some(value.as_slice()),
            "{what}: get {}",
            show(key)
        );
    }
}

/// The database under test and what it must hold.
struct Run {
    dir: std::path::PathBuf,
    flags: u8,
    fs: Arc<CrashFs>,
    db: Option<Db>,
    model: Model,
    /// Armed by a crash op: the next restart's recovery crashes after this
    /// many mutating calls, an append keeping this many bytes.
    recovery_crash: Option<(u64, usize)>,
}

impl Run {
    fn db(&self) -> &Db {
        self.db.as_ref().expect("the database is open between ops")
    }

    fn open(dir: &Path, flags: u8, fs: &Arc<CrashFs>) -> Db {
        Db::open_with(dir, options(flags, fs))
            .unwrap_or_else(|e| panic!("open of {} failed: {e}", dir.display()))
    }

    /// The simulated process is dead (or was asked to close): drop the
    /// handle, reopen through a fresh file system, and check that the
    /// database holds the model — or the model plus `uncertain`, a write
    /// that failed and so may or may not have reached the log, whole.
    fn restart(&mut self, uncertain: Option<&[Op]>, what: &str) {
        drop(self.db.take());
        self.fs = CrashFs::new();
        if let Some((calls, keep)) = self.recovery_crash.take() {
            // The recovery itself is killed: its files must open next time.
            self.fs.arm(calls, keep);
            match Db::open_with(&self.dir, options(self.flags, &self.fs)) {
                Ok(db) => drop(db),
                Err(e) => assert!(
                    self.fs.crashed(),
                    "{what}: open failed without a crash: {e}"
                ),
            }
            self.fs = CrashFs::new();
        }
        let db = Run::open(&self.dir, self.flags, &self.fs);
        if let Some(ops) = uncertain {
            let mut with = self.model.clone();
            apply(&mut with, ops);
            let scanned: Result<Model, _> = db
                .iter()
                .map(|item| item.map(|(k, v)| (k.to_vec(), v.to_vec())))
                .collect();
            let scanned =
                scanned.unwrap_or_else(|e| panic!("{what}: scan after the crash failed: {e}"));
            if scanned == with {
                self.model = with;
            }
        }
        check_all(&db, &self.model, what);
        self.db = Some(db);
    }

    /// Writes `ops` as one batch; an error must come from the simulated crash.
    fn write(&mut self, ops: &[Op], what: &str) {
        match self.db().write(batch_of(ops)) {
            Ok(()) => apply(&mut self.model, ops),
            Err(e) => {
                assert!(
                    self.fs.crashed(),
                    "{what}: write failed without a crash: {e}"
                );
                self.restart(Some(ops), what);
            }
        }
    }

    /// Runs a flush or compaction; an error must come from the simulated crash.
    fn maintain(&mut self, result: crate::Result<()>, what: &str) {
        if let Err(e) = result {
            assert!(self.fs.crashed(), "{what} failed without a crash: {e}");
            self.restart(None, what);
        }
    }
}

/// Target `db_ops`. See the module docs for the input format.
pub fn db_ops(data: &[u8]) {
    let mut input = Input { rest: data };
    let flags = input.byte();
    let root = scratch_dir();
    let dir = root.path().join("db");
    let fs = CrashFs::new();
    let db = Run::open(&dir, flags, &fs);
    let mut run = Run {
        dir,
        flags,
        fs,
        db: Some(db),
        model: Model::new(),
        recovery_crash: None,
    };

    for op_index in 0..MAX_OPS {
        if input.is_empty() {
            break;
        }
        let what = format!("op {op_index}");
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
                let got = run
                    .db()
                    .get(&key)
                    .unwrap_or_else(|e| panic!("{what}: get {} failed: {e}", show(&key)));
                assert_eq!(
                    got.as_deref(),
                    run.model.get(&key).map(Vec::as_slice),
                    "{what}: get {}",
                    show(&key)
                );
            }
            4 => {
                let (lo, hi) = (input.bound(), input.bound());
                let iter = run.db().range::<Vec<u8>, _>((lo.clone(), hi.clone()));
                check_scan(iter, &run.model, &lo, &hi, &what);
            }
            5 => {
                let result = run.db().flush();
                run.maintain(result, &what);
            }
            6 => {
                let result = run.db().compact();
                run.maintain(result, &what);
            }
            7 => run.restart(None, &what),
            8 => {
                // An iterator keeps its snapshot across writes and maintenance.
                let before = run.model.clone();
                let iter = run.db().iter();
                let ops = [input.write_op(op_index), input.write_op(op_index)];
                run.write(&ops, &what);
                if input.byte().is_multiple_of(2) {
                    let result = run.db().flush();
                    run.maintain(result, &what);
                }
                check_scan(iter, &before, &Bound::Unbounded, &Bound::Unbounded, &what);
            }
            _ => {
                // Crash after this many more mutating calls: 0..=63; an odd
                // third byte also crashes the recovery after that, 0..=31 calls in.
                let calls = u64::from(input.byte() % 64);
                let keep = usize::from(input.byte());
                run.fs.arm(calls, keep);
                let recovery = input.byte();
                run.recovery_crash =
                    (recovery % 2 == 1).then(|| (u64::from(recovery / 2 % 32), keep / 2));
            }
        }
    }
    // A crash that no op noticed (say, in a background flush) is found here.
    run.restart(None, "the final reopen");
}

fn scratch_dir() -> tempfile::TempDir {
    // Every input opens a database, which syncs files: tmpfs makes that free.
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(dir) = tempfile::Builder::new()
            .prefix("siftdb-fuzz-")
            .tempdir_in(shm)
        {
            return dir;
        }
    }
    tempfile::Builder::new()
        .prefix("siftdb-fuzz-")
        .tempdir()
        .expect("a temporary directory")
}
