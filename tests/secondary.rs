//! Secondary instances (`Db::open_secondary`, `Secondary::try_catch_up`)
//! beside a primary that writes, flushes and compacts.
//!
//! The main test runs the primary in a child process writing a known,
//! deterministic sequence of batches (each of 4 operations: 3 keys and a
//! `last` marker holding the batch number) for `SIFTDB_SECONDARY_SECS`
//! seconds (default 5; the run is 60), with a small memtable so it
//! flushes and compacts all the time, and printing each batch number once
//! the write returned. The parent's secondary catches up every 10 ms and,
//! after each catch-up, checks that its view is exactly the state after
//! batch `m` for some `m`: at least every batch acknowledged before the
//! call (never older than the last catch-up), never part of a batch, its
//! sequence number exactly `4 m`; a second thread checks snapshots taken
//! while catch-ups publish. The lag after each catch-up (batches the
//! parent knew acknowledged when it returned, minus those it shows) is
//! printed as a distribution.
//!
//! Smaller tests, in one process: a record the primary is still writing is
//! not taken; a log the primary's flush removes between the secondary's
//! read of the manifest and its listing of the logs, and a table its
//! compaction removes before the secondary opens it, make the catch-up
//! start over from the newer manifest (a file system that runs the
//! primary's work at that moment); tables removed by the primary's compaction and logs removed
//! by its flush stay readable in the view that uses them; keyspaces
//! created and dropped by the primary appear and go; writes are refused.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use siftdb::internals::batch::RawBatch;
use siftdb::internals::fs::{
    DirLock, FileSystem, OsFileSystem, RandomAccessFile, SharedFs, WritableFile,
};
use siftdb::internals::key::SeqNo;
use siftdb::internals::wal::encode_record_into;
use siftdb::{Db, Error, Options, Secondary, WriteBatch};

/// Set in the child: the primary's directory.
const CHILD_ENV: &str = "SIFTDB_SECONDARY_PRIMARY_CHILD";
/// How long the primary writes, in seconds.
const SECONDS_ENV: &str = "SIFTDB_SECONDARY_SECS";
const DEFAULT_SECONDS: u64 = 5;
/// How often the secondary catches up.
const CATCH_UP_EVERY: Duration = Duration::from_millis(10);

/// Keys the batches write.
const KEYS: u64 = 64;
/// Operations per batch: `KEY_OPS` keys and the `last` marker.
const KEY_OPS: u64 = 3;
const OPS_PER_BATCH: u64 = KEY_OPS + 1;

fn key(k: u64) -> String {
    format!("k{k:04}")
}

/// What batch `n` (from 1) does to its `i`th key: the key, and the value
/// put (`None`: deleted).
fn batch_op(n: u64, i: u64) -> (u64, Option<String>) {
    let k = (n.wrapping_mul(7919) + i * 131) % KEYS;
    if (n + i).is_multiple_of(7) {
        (k, None)
    } else {
        (
            k,
            Some(format!("{n}:{k}:{}", "v".repeat(((n + k) % 48) as usize))),
        )
    }
}

fn batch(n: u64) -> WriteBatch {
    let mut b = WriteBatch::new();
    for i in 0..KEY_OPS {
        match batch_op(n, i) {
            (k, Some(v)) => b.put(key(k), v),
            (k, None) => b.delete(key(k)),
        }
    }
    b.put("last", n.to_string());
    b
}

/// The state after batch `at`, built batch by batch (`at` only grows).
#[derive(Default)]
struct Model {
    at: u64,
    values: BTreeMap<String, String>,
}

impl Model {
    fn advance_to(&mut self, n: u64) {
        assert!(n >= self.at, "went back from batch {} to {n}", self.at);
        while self.at < n {
            self.at += 1;
            for i in 0..KEY_OPS {
                match batch_op(self.at, i) {
                    (k, Some(v)) => self.values.insert(key(k), v),
                    (k, None) => self.values.remove(&key(k)),
                };
            }
        }
    }
}

fn primary_options() -> Options {
    Options::default()
        .memtable_bytes(32 << 10)
        .block_size(1024)
        .table_target_bytes(64 << 10)
        .level1_bytes(128 << 10)
        .level0_compaction_trigger(2)
}

/// The batch number a view shows (`last`), and its keys and values.
fn view_of(snapshot: &siftdb::Snapshot) -> (u64, BTreeMap<String, String>) {
    let last = snapshot
        .get("last")
        .unwrap()
        .map_or(0, |v| std::str::from_utf8(&v).unwrap().parse().unwrap());
    let values = snapshot
        .prefix("k")
        .map(|entry| {
            let (k, v) = entry.unwrap();
            (
                String::from_utf8(k.to_vec()).unwrap(),
                String::from_utf8(v.to_vec()).unwrap(),
            )
        })
        .collect();
    (last, values)
}

/// Checks that `secondary`'s view now is the state after one batch, at
/// least `model.at`: returns that batch number.
fn check_view(secondary: &Secondary, model: &mut Model, what: &str) -> u64 {
    let snapshot = secondary.snapshot();
    let (last, values) = view_of(&snapshot);
    assert!(
        last >= model.at,
        "{what}: the view went back from batch {} to {last}",
        model.at
    );
    model.advance_to(last);
    assert_eq!(
        snapshot.sequence(),
        last * OPS_PER_BATCH,
        "{what}: the view's sequence number is not batch {last}'s end"
    );
    if values != model.values {
        let wrong: Vec<_> = model
            .values
            .iter()
            .filter(|(k, v)| values.get(*k) != Some(*v))
            .map(|(k, v)| format!("{k}: want {v:?}, got {:?}", values.get(k)))
            .chain(
                values
                    .iter()
                    .filter(|(k, _)| !model.values.contains_key(*k))
                    .map(|(k, v)| format!("{k}: want none, got {v:?}")),
            )
            .take(5)
            .collect();
        panic!("{what}: the view at batch {last} is not the state after it: {wrong:?}");
    }
    last
}

/// The body of the primary's child process (does nothing in the parent):
/// writes batches 1, 2, … for the given seconds, printing each number once
/// its write returned, then `done N`.
#[test]
fn child_primary() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let seconds: u64 = std::env::var(SECONDS_ENV)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_SECONDS);
    let db = Db::open_with(&dir, primary_options()).unwrap();
    let start = Instant::now();
    let mut out = std::io::stdout().lock();
    let mut n = 0u64;
    while start.elapsed() < Duration::from_secs(seconds) {
        n += 1;
        db.write(batch(n)).unwrap();
        writeln!(out, "acked {n}").unwrap();
        out.flush().unwrap();
    }
    let stats = db.stats();
    db.close().unwrap();
    writeln!(
        out,
        "done {n} flushes {} compactions {}",
        stats.flushes, stats.compactions
    )
    .unwrap();
}

/// Percentile `p` (0..=100) of sorted `values`.
fn percentile(sorted: &[u64], p: usize) -> u64 {
    sorted[(sorted.len() - 1) * p / 100]
}

#[test]
fn a_secondary_follows_a_primary_that_writes_flushes_and_compacts() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let seconds: u64 = std::env::var(SECONDS_ENV)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_SECONDS);
    let dir = tempfile::tempdir().unwrap();
    let primary_dir = dir.path().join("primary");
    let own_dir = dir.path().join("secondary");
    // The database exists before the child starts writing to it.
    Db::open_with(&primary_dir, primary_options())
        .unwrap()
        .close()
        .unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "child_primary",
            "--test-threads",
            "1",
            "--quiet",
            "--nocapture",
        ])
        .env(CHILD_ENV, &primary_dir)
        .env(SECONDS_ENV, seconds.to_string())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let acked = Arc::new(AtomicU64::new(0));
    let primary_done = Arc::new(AtomicBool::new(false));
    let stdout = child.stdout.take().unwrap();
    let listener = {
        let (acked, primary_done) = (Arc::clone(&acked), Arc::clone(&primary_done));
        std::thread::spawn(move || {
            let mut summary = String::new();
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(n) = line.strip_prefix("acked ") {
                    acked.store(n.parse().unwrap(), Ordering::Release);
                } else if line.starts_with("done ") {
                    summary = line;
                }
            }
            primary_done.store(true, Ordering::Release);
            summary
        })
    };

    let secondary = Arc::new(
        Db::open_secondary(&primary_dir, &own_dir, Options::default().block_size(1024)).unwrap(),
    );
    // Snapshots taken while catch-ups publish are prefixes too.
    let stop = Arc::new(AtomicBool::new(false));
    let reader = {
        let (secondary, stop) = (Arc::clone(&secondary), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut model = Model::default();
            let mut checks = 0u64;
            while !stop.load(Ordering::Acquire) {
                check_view(&secondary, &mut model, "concurrent reader");
                checks += 1;
                std::thread::sleep(Duration::from_millis(1));
            }
            checks
        })
    };
    let mut model = Model::default();
    let mut lags = Vec::new();
    // Reported, not asserted: how long a catch-up takes.
    let mut took_us = Vec::new();
    let mut catch_ups = 0u64;
    let mut manifest_changes = 0u64;
    loop {
        let finished = primary_done.load(Ordering::Acquire);
        let acked_before = acked.load(Ordering::Acquire);
        let began = Instant::now();
        let done = secondary.try_catch_up().unwrap();
        took_us.push(began.elapsed().as_micros() as u64);
        let acked_after = acked.load(Ordering::Acquire);
        catch_ups += 1;
        manifest_changes += u64::from(done.manifest_changed);
        let seen = check_view(&secondary, &mut model, "after a catch-up");
        assert!(
            seen >= acked_before,
            "catch-up {catch_ups}: the view shows batch {seen}, but batch {acked_before} was \
             acknowledged before the call"
        );
        assert_eq!(done.sequence, seen * OPS_PER_BATCH);
        lags.push(acked_after.saturating_sub(seen));
        if finished {
            break;
        }
        std::thread::sleep(CATCH_UP_EVERY);
    }
    stop.store(true, Ordering::Release);
    let reader_checks = reader.join().unwrap();
    let summary = listener.join().unwrap();
    assert!(child.wait().unwrap().success(), "the primary failed");
    let total: u64 = summary
        .split_whitespace()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no summary from the primary: {summary:?}"));
    // After the primary closed, one catch-up shows every batch.
    secondary.try_catch_up().unwrap();
    assert_eq!(check_view(&secondary, &mut model, "at the end"), total);

    lags.sort_unstable();
    took_us.sort_unstable();
    eprintln!(
        "primary: {seconds} s, {summary}; secondary: {catch_ups} catch-ups ({manifest_changes} \
         with a new manifest), {reader_checks} concurrent snapshot checks; lag after a catch-up \
         in batches of {OPS_PER_BATCH} sequence numbers (acknowledged when it returned minus \
         shown): p50 {} p90 {} p99 {} max {}; a catch-up took p50 {} us, p99 {} us, max {} us",
        percentile(&lags, 50),
        percentile(&lags, 90),
        percentile(&lags, 99),
        percentile(&lags, 100),
        percentile(&took_us, 50),
        percentile(&took_us, 99),
        percentile(&took_us, 100),
    );
    assert!(manifest_changes > 1, "the primary never flushed");
}

/// The newest log of the database in `dir`.
fn newest_log(dir: &Path) -> PathBuf {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "wal"))
        .max()
        .unwrap()
}

#[test]
fn a_record_the_primary_is_still_writing_is_not_taken() {
    let dir = tempfile::tempdir().unwrap();
    let (primary_dir, own_dir) = (dir.path().join("p"), dir.path().join("s"));
    let primary = Db::open(&primary_dir).unwrap();
    primary.put("a", "1").unwrap();
    let secondary = Db::open_secondary(&primary_dir, &own_dir, Options::default()).unwrap();
    assert_eq!(secondary.sequence(), 1);

    // Batch 2-3 as the primary would log it, appended a piece at a time
    // as a write in progress shows to a reader.
    let mut next = WriteBatch::new();
    next.put("b", "2");
    next.put("c", "3");
    let mut record = Vec::new();
    encode_record_into(&mut record, &next.encode_record(SeqNo(2))).unwrap();
    let log = newest_log(&primary_dir);
    let mut file = std::fs::OpenOptions::new().append(true).open(log).unwrap();
    for cut in [1, 5, record.len() / 2, record.len() - 1] {
        file.write_all(&record[..cut]).unwrap();
        let done = secondary.try_catch_up().unwrap();
        assert_eq!((done.sequence, done.records_read), (1, 0), "cut at {cut}");
        assert_eq!(secondary.get("b").unwrap(), None);
        assert_eq!(secondary.get("a").unwrap().as_deref(), Some(&b"1"[..]));
        // Taken back, as if the write had not got that far yet.
        file.set_len(file.metadata().unwrap().len() - cut as u64)
            .unwrap();
    }
    file.write_all(&record).unwrap();
    let done = secondary.try_catch_up().unwrap();
    assert_eq!((done.sequence, done.records_read), (3, 1));
    assert_eq!(secondary.get("b").unwrap().as_deref(), Some(&b"2"[..]));
    assert_eq!(secondary.get("c").unwrap().as_deref(), Some(&b"3"[..]));
    // The primary's log no longer ends where it thinks: it is not closed.
    std::mem::forget(primary);
}

#[test]
fn tables_compacted_away_and_logs_flushed_away_stay_readable_in_the_view() {
    let dir = tempfile::tempdir().unwrap();
    let (primary_dir, own_dir) = (dir.path().join("p"), dir.path().join("s"));
    let options = primary_options()
        .level0_compaction_trigger(100)
        .level0_quiet_trigger(100)
        .level0_stop_writes(200);
    let primary = Db::open_with(&primary_dir, options).unwrap();
    for table in 0..4u64 {
        for i in 0..200u64 {
            primary.put(key(i), format!("{table}:{i}")).unwrap();
        }
        primary.flush().unwrap();
    }
    primary.put("in-log", "yes").unwrap();
    let secondary = Db::open_secondary(&primary_dir, &own_dir, Options::default()).unwrap();
    let scan = secondary.iter();
    let tables_before = secondary.live_tables().len();
    assert!(tables_before >= 4, "{tables_before}");
    primary.compact().unwrap();
    primary.put(key(0), "after").unwrap();
    primary.flush().unwrap();
    let on_disk = std::fs::read_dir(&primary_dir).unwrap().count();
    // Every table and log of the view is gone from the directory now.
    for table in secondary.live_tables() {
        let name = format!("{:06}.sst", table.file_number);
        assert!(!primary_dir.join(&name).exists(), "{name} still there");
    }
    assert_eq!(secondary.get(key(7)).unwrap().as_deref(), Some(&b"3:7"[..]));
    assert_eq!(
        secondary.get("in-log").unwrap().as_deref(),
        Some(&b"yes"[..])
    );
    assert_eq!(scan.count(), 201);

    let done = secondary.try_catch_up().unwrap();
    assert!(done.manifest_changed);
    assert_eq!(done.tables, primary.live_tables().len());
    assert_eq!(
        secondary.get(key(0)).unwrap().as_deref(),
        Some(&b"after"[..])
    );
    assert_eq!(secondary.get(key(7)).unwrap().as_deref(), Some(&b"3:7"[..]));
    assert_eq!(
        secondary.get("in-log").unwrap().as_deref(),
        Some(&b"yes"[..])
    );
    assert!(on_disk > 0);
}

#[test]
fn a_primary_closed_and_opened_again_is_followed_across() {
    let dir = tempfile::tempdir().unwrap();
    let (primary_dir, own_dir) = (dir.path().join("p"), dir.path().join("s"));
    let primary = Db::open(&primary_dir).unwrap();
    primary.put("a", "1").unwrap();
    let secondary = Db::open_secondary(&primary_dir, &own_dir, Options::default()).unwrap();
    primary.put("b", "2").unwrap();
    primary.close().unwrap();
    // The log ends with its close record.
    assert_eq!(secondary.try_catch_up().unwrap().sequence, 2);
    assert_eq!(secondary.try_catch_up().unwrap().records_read, 0);
    // The next open moves the closed log's records into a table.
    let primary = Db::open(&primary_dir).unwrap();
    primary.put("c", "3").unwrap();
    let done = secondary.try_catch_up().unwrap();
    assert!(done.manifest_changed);
    assert_eq!(done.sequence, 3);
    for (k, v) in [("a", "1"), ("b", "2"), ("c", "3")] {
        assert_eq!(
            secondary.get(k).unwrap().as_deref(),
            Some(v.as_bytes()),
            "{k}"
        );
    }
}

#[test]
fn keyspaces_the_primary_creates_and_drops_appear_and_go() {
    let dir = tempfile::tempdir().unwrap();
    let (primary_dir, own_dir) = (dir.path().join("p"), dir.path().join("s"));
    let primary = Db::open(&primary_dir).unwrap();
    let secondary = Db::open_secondary(&primary_dir, &own_dir, Options::default()).unwrap();
    let users = primary.keyspace("users").unwrap();
    users.put("ann", "1").unwrap();
    assert!(
        secondary.keyspace("users").is_err(),
        "created on a secondary"
    );
    secondary.try_catch_up().unwrap();
    assert_eq!(secondary.keyspaces(), ["default", "users"]);
    let seen = secondary.keyspace("users").unwrap();
    assert_eq!(seen.get("ann").unwrap().as_deref(), Some(&b"1"[..]));
    users.put("bob", "2").unwrap();
    primary.flush().unwrap();
    secondary.try_catch_up().unwrap();
    assert_eq!(seen.get("bob").unwrap().as_deref(), Some(&b"2"[..]));
    drop(users);
    primary.drop_keyspace("users").unwrap();
    secondary.try_catch_up().unwrap();
    assert_eq!(secondary.keyspaces(), ["default"]);
}

#[test]
fn a_secondary_refuses_writes_and_a_directory_it_cannot_follow() {
    let dir = tempfile::tempdir().unwrap();
    let (primary_dir, own_dir) = (dir.path().join("p"), dir.path().join("s"));
    assert!(matches!(
        Db::open_secondary(&primary_dir, &own_dir, Options::default()),
        Err(Error::NotADatabase { .. })
    ));
    let primary = Db::open(&primary_dir).unwrap();
    primary.put("k", "v").unwrap();
    assert!(matches!(
        Db::open_secondary(&primary_dir, &primary_dir, Options::default()),
        Err(Error::InvalidArgument(_))
    ));
    let secondary = Db::open_secondary(&primary_dir, &own_dir, Options::default()).unwrap();
    for refused in [
        secondary.put("k", "w"),
        secondary.delete("k"),
        secondary.flush(),
        secondary.compact(),
    ] {
        assert!(
            matches!(refused, Err(Error::ReadOnly { .. })),
            "{refused:?}"
        );
    }
    // One secondary per directory of its own.
    assert!(Db::open_secondary(&primary_dir, &own_dir, Options::default()).is_err());
    let names: Vec<_> = std::fs::read_dir(&primary_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    drop(secondary);
    let after: Vec<_> = std::fs::read_dir(&primary_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        names, after,
        "the secondary changed the primary's directory"
    );
    assert_eq!(primary.get("k").unwrap().as_deref(), Some(&b"v"[..]));
}

/// The operating system's file system, which runs a hook (the primary's
/// flush or compaction) at the first listing of a directory, or opening of
/// a table, after it was armed.
#[derive(Default)]
struct HookFs {
    on_list: parking_lot::Mutex<Option<Box<dyn FnOnce() + Send>>>,
    on_open_table: parking_lot::Mutex<Option<Box<dyn FnOnce() + Send>>>,
}

impl HookFs {
    fn run(hook: &parking_lot::Mutex<Option<Box<dyn FnOnce() + Send>>>) {
        let hook = hook.lock().take();
        if let Some(hook) = hook {
            hook();
        }
    }
}

impl FileSystem for HookFs {
    fn create(&self, path: &Path) -> siftdb::Result<Box<dyn WritableFile>> {
        OsFileSystem.create(path)
    }
    fn open_append(&self, path: &Path) -> siftdb::Result<Box<dyn WritableFile>> {
        OsFileSystem.open_append(path)
    }
    fn read_all(&self, path: &Path) -> siftdb::Result<bytes::Bytes> {
        OsFileSystem.read_all(path)
    }
    fn open_read(&self, path: &Path) -> siftdb::Result<Arc<dyn RandomAccessFile>> {
        if path.extension().is_some_and(|e| e == "sst") {
            HookFs::run(&self.on_open_table);
        }
        OsFileSystem.open_read(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> siftdb::Result<()> {
        OsFileSystem.rename(from, to)
    }
    fn remove(&self, path: &Path) -> siftdb::Result<()> {
        OsFileSystem.remove(path)
    }
    fn sync_dir(&self, dir: &Path) -> siftdb::Result<()> {
        OsFileSystem.sync_dir(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> siftdb::Result<()> {
        OsFileSystem.create_dir_all(dir)
    }
    fn list(&self, dir: &Path) -> siftdb::Result<Vec<String>> {
        HookFs::run(&self.on_list);
        OsFileSystem.list(dir)
    }
    fn exists(&self, path: &Path) -> bool {
        OsFileSystem.exists(path)
    }
    fn is_dir(&self, path: &Path) -> bool {
        OsFileSystem.is_dir(path)
    }
    fn lock(&self, path: &Path) -> siftdb::Result<Box<dyn DirLock>> {
        OsFileSystem.lock(path)
    }
}

/// A primary in `dir/p` with no level-0 merges (a flush that leaves the
/// memtables empty would otherwise start a quiet merge, racing a
/// catch-up's count of tables), and a secondary in `dir/s` that reads it
/// through a `HookFs`.
fn primary_and_hooked_secondary(dir: &Path) -> (Arc<Db>, Arc<HookFs>, siftdb::Secondary) {
    let options = Options::default()
        .level0_compaction_trigger(100)
        .level0_quiet_trigger(100)
        .level0_stop_writes(200);
    let primary = Arc::new(Db::open_with(dir.join("p"), options).unwrap());
    let fs = Arc::new(HookFs::default());
    let shared: SharedFs = Arc::clone(&fs) as SharedFs;
    let secondary = Db::open_secondary(
        dir.join("p"),
        dir.join("s"),
        Options::default().file_system(shared),
    )
    .unwrap();
    (primary, fs, secondary)
}

#[test]
fn a_log_flushed_away_before_the_listing_makes_the_catch_up_start_over() {
    let dir = tempfile::tempdir().unwrap();
    let (primary, fs, secondary) = primary_and_hooked_secondary(dir.path());
    primary.put("a", "1").unwrap();
    primary.flush().unwrap();
    primary.put("b", "2").unwrap();
    // After the secondary read the manifest naming the log that holds
    // "b" (a log it never saw), a flush moves "b" into a table and removes
    // that log, and "c" goes to the next log.
    let writer = Arc::clone(&primary);
    *fs.on_list.lock() = Some(Box::new(move || {
        writer.flush().unwrap();
        writer.put("c", "3").unwrap();
    }));
    let done = secondary.try_catch_up().unwrap();
    assert!(fs.on_list.lock().is_none(), "the hook did not run");
    assert_eq!((done.sequence, done.tables), (3, 2));
    for (k, v) in [("a", "1"), ("b", "2"), ("c", "3")] {
        assert_eq!(
            secondary.get(k).unwrap().as_deref(),
            Some(v.as_bytes()),
            "{k}"
        );
    }
}

#[test]
fn a_table_compacted_away_before_it_is_opened_makes_the_catch_up_start_over() {
    let dir = tempfile::tempdir().unwrap();
    let (primary, fs, secondary) = primary_and_hooked_secondary(dir.path());
    for i in 0..3 {
        primary.put(format!("k{i}"), i.to_string()).unwrap();
        primary.flush().unwrap();
    }
    // The secondary read the manifest naming three tables; before it
    // opens the first, a full compaction replaces all three.
    let compactor = Arc::clone(&primary);
    *fs.on_open_table.lock() = Some(Box::new(move || compactor.compact().unwrap()));
    let done = secondary.try_catch_up().unwrap();
    assert!(fs.on_open_table.lock().is_none(), "the hook did not run");
    assert_eq!(done.damaged_tables, Vec::<(String, String)>::new());
    assert_eq!((done.sequence, done.tables), (3, 1));
    for i in 0..3 {
        let value = secondary.get(format!("k{i}")).unwrap();
        assert_eq!(value.as_deref(), Some(i.to_string().as_bytes()));
    }
}
