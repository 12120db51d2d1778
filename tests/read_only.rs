//! `Db::open_read_only`: it creates, changes and deletes nothing (checked
//! byte for byte, through a file system that refuses every change, and on a
//! `chmod 555` directory as an unprivileged user), needs no lock, works
//! beside a live writer, and shows a consistent view as of its open: a
//! prefix of the writer's acknowledged writes, never a hole, however the
//! writer flushes and compacts meanwhile. `siftdb::internals::inspect` beside a writer
//! changes nothing either and describes one manifest.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use siftdb::internals::fs::{
    DirLock, FileSystem, OsFileSystem, RandomAccessFile, SharedFs, WritableFile,
};
use siftdb::internals::inspect::{inspect_dir_with, FileRole};
use siftdb::{Db, Error, Options, Result};
use siftdb_testkit::files::snapshot;
#[cfg(unix)]
use siftdb_testkit::files::{as_unprivileged, Unwritable};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn options() -> Options {
    Options::default()
        .memtable_bytes(8 << 10)
        .block_size(512)
        .table_target_bytes(8 << 10)
        .level1_bytes(32 << 10)
        .level0_compaction_trigger(2)
}

fn key(i: u64) -> Vec<u8> {
    format!("key{i:06}").into_bytes()
}

fn value(i: u64) -> Vec<u8> {
    format!("value-{i}-{}", "x".repeat((i % 50) as usize)).into_bytes()
}

/// A closed database: tables at several levels, deletions, and records
/// left in the log.
fn build(dir: &Path) -> Model {
    let mut model = Model::new();
    let db = Db::open_with(dir, options()).unwrap();
    for i in 0..3000 {
        db.put(key(i % 1000), value(i)).unwrap();
        model.insert(key(i % 1000), value(i));
        if i % 7 == 0 {
            db.delete(key(i % 300)).unwrap();
            model.remove(&key(i % 300));
        }
    }
    db.wait_for_background().unwrap();
    for i in 5000..5010 {
        db.put(key(i), value(i)).unwrap();
        model.insert(key(i), value(i));
    }
    drop(db);
    model
}

fn assert_reads(db: &Db, model: &Model) {
    for i in (0..1000).chain(5000..5010) {
        assert_eq!(
            db.get(key(i)).unwrap().as_deref(),
            model.get(&key(i)).map(Vec::as_slice),
            "key {i}"
        );
    }
    let scanned: Model = db
        .iter()
        .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
        .collect();
    assert_eq!(&scanned, model);
}

fn assert_read_only_refusal(e: Error) {
    assert!(matches!(&e, Error::ReadOnly { .. }), "{e}");
    assert!(e.to_string().contains("read-only"), "{e}");
    assert!(!e.is_retryable());
}

#[test]
fn a_read_only_open_reads_everything_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let model = build(dir.path());
    std::fs::remove_file(dir.path().join("LOCK")).unwrap();
    let before = snapshot(dir.path());
    let db = Db::open_read_only(dir.path()).unwrap();
    assert!(db.recovery_report().records_replayed >= 10);
    assert_reads(&db, &model);
    assert_read_only_refusal(db.put(b"k", b"v").unwrap_err());
    assert_read_only_refusal(db.delete(b"k").unwrap_err());
    assert_read_only_refusal(db.flush().unwrap_err());
    assert_read_only_refusal(db.compact().unwrap_err());
    assert_read_only_refusal(db.resume().unwrap_err());
    db.wait_for_background().unwrap();
    assert_eq!(db.get(b"k").unwrap(), None);
    drop(db);
    assert_eq!(snapshot(dir.path()), before);

    // A directory without a database is an error; nothing is created.
    let empty = tempfile::tempdir().unwrap();
    assert!(matches!(
        Db::open_read_only(empty.path()),
        Err(Error::NotADatabase { .. })
    ));
    assert!(Db::open_read_only(empty.path().join("nope")).is_err());
    assert_eq!(std::fs::read_dir(empty.path()).unwrap().count(), 0);
}

/// Run once, at the first table file a reader opens.
type Hook = Box<dyn FnOnce() + Send>;

/// The real file system, refusing (and counting) every change.
struct NoChanges {
    attempts: Mutex<Vec<String>>,
    before_first_table: Mutex<Option<Hook>>,
}

impl NoChanges {
    fn new() -> NoChanges {
        NoChanges {
            attempts: Mutex::new(Vec::new()),
            before_first_table: Mutex::new(None),
        }
    }

    fn refuse(&self, op: &str, path: &Path) -> Error {
        self.attempts
            .lock()
            .unwrap()
            .push(format!("{op} {}", path.display()));
        Error::io(
            path,
            std::io::Error::from(std::io::ErrorKind::PermissionDenied),
        )
    }
}

impl FileSystem for NoChanges {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        Err(self.refuse("create", path))
    }
    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        Err(self.refuse("open_append", path))
    }
    fn read_all(&self, path: &Path) -> Result<Bytes> {
        OsFileSystem.read_all(path)
    }
    fn open_read(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        if path.extension().is_some_and(|e| e == "sst") {
            let hook = self.before_first_table.lock().unwrap().take();
            if let Some(hook) = hook {
                hook();
            }
        }
        OsFileSystem.open_read(path)
    }
    fn rename(&self, from: &Path, _to: &Path) -> Result<()> {
        Err(self.refuse("rename", from))
    }
    fn remove(&self, path: &Path) -> Result<()> {
        Err(self.refuse("remove", path))
    }
    fn sync_dir(&self, dir: &Path) -> Result<()> {
        Err(self.refuse("sync_dir", dir))
    }
    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        Err(self.refuse("create_dir_all", dir))
    }
    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        OsFileSystem.list(dir)
    }
    fn exists(&self, path: &Path) -> bool {
        OsFileSystem.exists(path)
    }
    fn is_dir(&self, path: &Path) -> bool {
        OsFileSystem.is_dir(path)
    }
    fn lock(&self, path: &Path) -> Result<Box<dyn DirLock>> {
        Err(self.refuse("lock", path))
    }
}

#[test]
fn a_read_only_open_asks_the_file_system_for_no_change_at_all() {
    let dir = tempfile::tempdir().unwrap();
    let model = build(dir.path());
    let fs = Arc::new(NoChanges::new());
    let shared: SharedFs = fs.clone();
    let db = Db::open_with(
        dir.path(),
        options().file_system(shared.clone()).read_only(true),
    )
    .unwrap();
    assert_reads(&db, &model);
    let _ = db.put(b"k", b"v");
    let _ = db.flush();
    drop(db);
    assert!(fs.attempts.lock().unwrap().is_empty(), "{:?}", fs.attempts);
    // The same file system refuses a read-write open at once.
    assert!(Db::open_with(dir.path(), options().file_system(shared)).is_err());
}

#[test]
fn inspect_beside_a_writer_describes_one_manifest_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path());
    let writer = Arc::new(Db::open_with(dir.path(), options()).unwrap());
    writer.put(b"newer", b"in a level-0 table").unwrap();
    writer.flush().unwrap();
    writer.wait_for_background().unwrap();
    let fs = Arc::new(NoChanges::new());
    let shared: SharedFs = fs.clone();
    let before = inspect_dir_with(&shared, dir.path()).unwrap();
    // The first table inspect opens is the newest level-0 one; just
    // before, the writer compacts it (and every other table) away.
    let compacting = Arc::clone(&writer);
    *fs.before_first_table.lock().unwrap() = Some(Box::new(move || {
        compacting.compact().unwrap();
    }));
    let summary = inspect_dir_with(&shared, dir.path()).unwrap();
    assert!(fs.before_first_table.lock().unwrap().is_none());
    assert_ne!(
        summary.tables, before.tables,
        "the compaction moved nothing"
    );
    for t in &summary.tables {
        assert!(t.table.is_ok(), "{:?}", t.table);
    }
    assert!(summary
        .files
        .iter()
        .all(|f| !matches!(f.role, FileRole::MissingTable { .. })));
    // It is the manifest as it is now.
    assert_eq!(summary, inspect_dir_with(&shared, dir.path()).unwrap());
    assert!(fs.attempts.lock().unwrap().is_empty(), "{:?}", fs.attempts);
}

#[test]
fn a_read_only_open_beside_a_writer_sees_the_database_as_of_its_open() {
    let dir = tempfile::tempdir().unwrap();
    let mut model = build(dir.path());
    let writer = Db::open_with(dir.path(), options()).unwrap();
    let reader = Db::open_read_only(dir.path()).unwrap();
    assert_reads(&reader, &model);
    // The writer goes on: overwrites, deletes, flushes, compacts every table away.
    for i in 0..1000 {
        writer.put(key(i), b"new").unwrap();
    }
    writer.compact().unwrap();
    assert_reads(&reader, &model);
    for i in 0..1000 {
        model.insert(key(i), b"new".to_vec());
    }
    let later = Db::open_read_only(dir.path()).unwrap();
    assert_reads(&later, &model);
    drop(reader);
    drop(writer);
    drop(later);
    Db::open_with(dir.path(), options()).unwrap();
}

#[test]
fn read_only_opens_during_writes_see_a_prefix_of_them_never_a_hole() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().to_path_buf();
    let writer = Db::open_with(&path, options().sync_writes(false)).unwrap();
    let acknowledged = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let handle = {
        let (acknowledged, stop) = (Arc::clone(&acknowledged), Arc::clone(&stop));
        std::thread::spawn(move || {
            // Each write a new key: a view is right when it holds keys
            // 0..n for some n and nothing after.
            let mut i = 0;
            while !stop.load(Ordering::Relaxed) && i < 60_000 {
                writer.put(key(i), value(i)).unwrap();
                i += 1;
                acknowledged.store(i, Ordering::Release);
            }
            writer
        })
    };
    let mut opens = 0;
    // Until the writer has flushed and compacted many times over.
    while opens < 25 || acknowledged.load(Ordering::Acquire) < 8_000 {
        let before = acknowledged.load(Ordering::Acquire);
        let reader = match Db::open_read_only(&path) {
            Ok(reader) => reader,
            // Before the writer's first manifest: nothing to open yet.
            Err(Error::InvalidArgument(_)) if before == 0 => continue,
            Err(e) => panic!("read-only open {opens}: {e}"),
        };
        let after = acknowledged.load(Ordering::Acquire);
        let mut seen = 0u64;
        for item in reader.iter() {
            let (k, v) = item.unwrap();
            assert_eq!(k.as_ref(), key(seen).as_slice(), "hole before key {seen}");
            assert_eq!(v.as_ref(), value(seen).as_slice());
            seen += 1;
        }
        assert!(
            seen >= before && seen <= after.max(before) + 1,
            "{before} <= {seen} <= {after}"
        );
        opens += 1;
    }
    stop.store(true, Ordering::Relaxed);
    let writer = handle.join().unwrap();
    assert!(writer.stats().flushes > 0);
}

const CHILD_DIR: &str = "SIFTDB_READ_ONLY_TEST_DIR";

/// Run by `a_read_only_open_works_on_a_directory_without_write_permission`
/// in a child process as an unprivileged user.
#[test]
#[ignore = "the child of a_read_only_open_works_on_a_directory_without_write_permission"]
fn read_only_child() {
    let dir = PathBuf::from(std::env::var(CHILD_DIR).unwrap());
    // Without write permission a read-write open fails ...
    assert!(Db::open(&dir).is_err());
    // ... and a read-only one reads everything.
    let db = Db::open_read_only(&dir).unwrap();
    let count = db.iter().map(Result::unwrap).count();
    assert!(count > 500, "{count}");
    assert_eq!(
        db.get(key(5003)).unwrap().as_deref(),
        Some(value(5003).as_slice())
    );
}

#[cfg(unix)]
#[test]
fn a_read_only_open_works_on_a_directory_without_write_permission() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("db");
    build(&dir);
    let before = snapshot(&dir);
    // In a child process: as `nobody` when the tests run as root, for whom
    // permissions do not bind.
    let unwritable = Unwritable::new(&dir);
    let out = as_unprivileged(
        std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "read_only_child", "--ignored", "--nocapture"])
            .env(CHILD_DIR, &dir),
    )
    .output()
    .unwrap();
    drop(unwritable);
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("1 passed"));
    assert_eq!(snapshot(&dir), before);
}

/// A read-only open starts no background work: over a level 0 past its
/// own options' compaction trigger, with a writer closed, the directory
/// stays as it was while the read-only database is open. (The event
/// listeners' change once spawned the flush and compaction threads for a
/// read-only open too, and dropped their handles: they compacted a
/// directory that a writer held, and a read-only open beside it met a
/// half-written table.)
#[test]
fn a_read_only_open_starts_no_compaction() {
    let dir = tempfile::tempdir().unwrap();
    let writer = Db::open_with(
        dir.path(),
        Options::default()
            .level0_compaction_trigger(100)
            .level0_quiet_trigger(100)
            .level0_stop_writes(200),
    )
    .unwrap();
    for table in 0..6u64 {
        for i in 0..50 {
            writer.put(key(i), value(table)).unwrap();
        }
        writer.flush().unwrap();
    }
    writer.close().unwrap();
    let files = |dir: &Path| {
        let mut names: Vec<_> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        names
    };
    let before = files(dir.path());
    // Default options: a trigger of 4, which the 6 tables pass.
    let reader = Db::open_read_only(dir.path()).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(
        files(dir.path()),
        before,
        "the read-only open changed the directory"
    );
    assert_eq!(reader.stats().compactions, 0);
    drop(reader);
}
