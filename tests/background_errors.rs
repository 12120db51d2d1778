//! Faults under a live database, on the in-memory [`FaultFs`]: a full disk
//! (once, persistently, then space again), failed log writes, a compaction
//! that fails or panics, damaged table bytes. What must hold:
//! - retryable errors (no space, EIO, EINTR) are retried by themselves and
//!   the database resumes without a reopen; other errors on `Db::resume`;
//! - writes are refused with `Error::ReadOnly` while the database cannot
//!   take them, and every read stays right meanwhile;
//! - a compaction error never stops flushes; a panic in background work is
//!   an error, never a hang; corruption stops writes with an error saying so;
//! - failed work leaves no file behind (no partial table holding the space);
//! - nothing acknowledged is ever lost, before or after a reopen.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::path::Path;
use std::time::{Duration, Instant};

use siftdb::internals::filename::{parse_file_name, FileKind};
use siftdb::internals::fs::FileSystem;
use siftdb::internals::manifest::read_manifest;
use siftdb::{Db, Error, Options};
use siftdb_testkit::{FaultFs, FaultMode, PowerLoss};

const DB: &str = "/db";

/// Far longer than any retry here takes; only a hang runs into it.
const HANG: Duration = Duration::from_secs(120);

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn options(fs: &FaultFs) -> Options {
    Options::default()
        .file_system(fs.shared())
        .memtable_bytes(8 << 10)
        .block_size(512)
        .level0_compaction_trigger(2)
        .level0_stop_writes(4)
        .level1_bytes(16 << 10)
        .table_target_bytes(8 << 10)
        .retry_interval(Duration::from_millis(1))
}

fn key(i: u64) -> Vec<u8> {
    format!("key{:05}", i % 700).into_bytes()
}

fn value(i: u64) -> Vec<u8> {
    let mut v = format!("value{i}:").into_bytes();
    v.resize(100, b'.');
    v
}

/// Writes `key(i)`/`value(i)` for `range`; each acknowledged write goes into
/// the model. Returns the first error, if any (the rest are not tried).
fn write_range(db: &Db, model: &mut Model, range: std::ops::Range<u64>) -> Result<(), Error> {
    for i in range {
        db.put(key(i), value(i))?;
        model.insert(key(i), value(i));
    }
    Ok(())
}

/// Writes `key(i)`/`value(i)` from `from` on until a write fails; returns
/// its number and its error (the acknowledged ones went into the model).
fn write_until_error(db: &Db, model: &mut Model, from: u64) -> (u64, Error) {
    for i in from..from + 100_000 {
        if let Err(e) = write_range(db, model, i..i + 1) {
            return (i, e);
        }
    }
    panic!("100,000 writes from {from}, none failed");
}

/// Retries a write refused with `ReadOnly` until the database takes it.
fn put_until_accepted(db: &Db, model: &mut Model, i: u64) -> u32 {
    let started = Instant::now();
    let mut refusals = 0;
    loop {
        match db.put(key(i), value(i)) {
            Ok(()) => {
                model.insert(key(i), value(i));
                return refusals;
            }
            Err(Error::ReadOnly { .. }) => refusals += 1,
            Err(e) => panic!("write {i}: {e}"),
        }
        assert!(
            started.elapsed() < HANG,
            "writes never resumed: {:?}",
            db.stats()
        );
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Waits until background work is idle and no failure is left.
fn wait_until_idle(db: &Db) {
    let started = Instant::now();
    while let Err(e) = db.wait_for_background() {
        assert!(
            matches!(e, Error::Background { .. }),
            "unexpected error: {e}"
        );
        assert!(started.elapsed() < HANG, "background never recovered: {e}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn check(db: &Db, model: &Model, context: &str) {
    for (k, v) in model {
        let got = db
            .get(k)
            .unwrap_or_else(|e| panic!("{context}: get failed: {e}"));
        assert_eq!(
            got.as_deref(),
            Some(v.as_slice()),
            "{context}: {}",
            String::from_utf8_lossy(k)
        );
    }
    let scanned: Model = db
        .iter()
        .map(|r| {
            let (k, v) = r.unwrap();
            (k.to_vec(), v.to_vec())
        })
        .collect();
    assert!(&scanned == model, "{context}: scan differs from the model");
}

/// Every table and log on disk is one the manifest needs: nothing a failed
/// flush, compaction or open wrote is left holding space.
fn assert_no_stray_files(fs: &FaultFs, context: &str) {
    let state = read_manifest(fs, Path::new(DB)).unwrap().unwrap();
    for name in fs.list(Path::new(DB)).unwrap() {
        match parse_file_name(&name) {
            Some((FileKind::Table, n)) => assert!(
                state.tables.iter().any(|t| t.file_number == n),
                "{context}: table {name} is named by no manifest"
            ),
            Some((FileKind::Wal, n)) => assert!(
                n >= state.log_number,
                "{context}: log {name} is older than the manifest needs"
            ),
            None => assert!(
                name == "MANIFEST" || name == "MANIFEST.copy" || name == "LOCK",
                "{context}: stray file {name}"
            ),
        }
    }
}

/// The end of every case: reads right, no stray file, and the same after
/// a reopen.
fn check_then_reopen(fs: &FaultFs, db: Db, model: &Model, context: &str) {
    check(&db, model, context);
    assert_no_stray_files(fs, context);
    drop(db);
    let db = Db::open_with(DB, options(fs)).unwrap();
    check(&db, model, &format!("{context}, reopened"));
}

/// After a caught panic: reads right, `resume` works, and writes, flushes
/// and compactions go on from write `from`.
fn resume_and_go_on(fs: &FaultFs, db: Db, mut model: Model, from: u64) {
    check(&db, &model, "after the panic");
    db.resume().unwrap();
    write_range(&db, &mut model, from..from + 300).unwrap();
    db.compact().unwrap();
    check_then_reopen(fs, db, &model, "after resume");
}

/// A database on `fs` opened with `opts`, `n` keys written and background
/// work idle.
fn started(opts: Options, n: u64) -> (Db, Model) {
    let db = Db::open_with(DB, opts).unwrap();
    let mut model = Model::new();
    write_range(&db, &mut model, 0..n).unwrap();
    db.wait_for_background().unwrap();
    (db, model)
}

#[test]
fn one_enospc_in_a_flush_then_flushes_and_compactions_resume_without_reopen() {
    let fs = FaultFs::new();
    let (db, mut model) = started(options(&fs), 300);
    let before = db.stats();
    assert!(before.flushes > 0 && before.compactions > 0, "{before:?}");

    // The next table file cannot be created: the disk is full, once.
    fs.fail_matching("create", ".sst", FaultMode::Once, ErrorKind::StorageFull);
    let mut refusals = 0;
    for i in 300..1500 {
        refusals += put_until_accepted(&db, &mut model, i);
    }
    wait_until_idle(&db);
    let after = db.stats();
    assert_eq!(fs.faults_injected(), 1);
    assert!(after.background_errors >= 1, "{after:?}");
    assert!(after.background_retries >= 1, "{after:?}");
    assert!(after.flushes > before.flushes + 5, "{after:?}");
    assert!(after.compactions > before.compactions + 2, "{after:?}");
    assert_eq!(after.background_error, None);
    eprintln!(
        "one ENOSPC in a flush: {refusals} writes refused meanwhile, {} errors, {} retries",
        after.background_errors, after.background_retries
    );
    check_then_reopen(&fs, db, &model, "after the retry");
}

#[test]
fn one_enospc_in_a_compaction_is_retried_by_itself() {
    let fs = FaultFs::new();
    let db = Db::open_with(DB, options(&fs)).unwrap();
    let mut model = Model::new();
    write_range(&db, &mut model, 0..200).unwrap();
    db.flush().unwrap();
    db.wait_for_background().unwrap();
    // The next table written is a compaction's output (nothing else is
    // pending); it fails half way, the disk full.
    fs.fail_matching("append", ".sst", FaultMode::Once, ErrorKind::StorageFull);
    let compactions = db.stats().compactions;
    match db.compact() {
        Ok(()) => panic!("the compaction cannot have succeeded"),
        Err(Error::Background { cause }) => assert!(cause.is_retryable(), "{cause}"),
        Err(e) => panic!("unexpected error: {e}"),
    }
    // Writes and flushes go on meanwhile.
    write_range(&db, &mut model, 200..260).unwrap();
    db.flush().unwrap();
    wait_until_idle(&db);
    let stats = db.stats();
    assert!(stats.compactions > compactions, "{stats:?}");
    assert_eq!(stats.background_error, None);
    check_then_reopen(&fs, db, &model, "after the compaction retry");
}

#[test]
fn a_full_disk_refuses_writes_keeps_reads_right_and_resumes_when_space_returns() {
    let fs = FaultFs::new();
    let (db, mut model) = started(options(&fs), 300);
    // 40 KiB more: enough for a few memtables, not for what follows.
    let limit = fs.used_bytes() + (40 << 10);
    fs.set_space_limit(Some(limit));

    let (failed_at, first_error) = write_until_error(&db, &mut model, 300);
    let next = failed_at + 1;
    assert!(
        first_error.is_retryable(),
        "the first failure is the full disk: {first_error}"
    );
    // Not one more byte fits anywhere (a compaction might otherwise make
    // room by merging overwritten keys): every write is refused, as
    // read-only, the cause named.
    fs.fail_matching("append", "", FaultMode::Persistent, ErrorKind::StorageFull);
    let no_space = |e: &Error| matches!(e, Error::Io { source, .. } if source.kind() == ErrorKind::StorageFull);
    let mut refused = 0;
    for i in next..next + 200 {
        match db.put(key(i), value(i)) {
            Err(Error::ReadOnly { cause }) => {
                assert!(no_space(&cause), "{cause}");
                refused += 1;
            }
            // The memtable may have had room left, if a flush failed first.
            Ok(()) if refused == 0 => {
                model.insert(key(i), value(i));
            }
            Ok(()) => panic!("write {i} accepted on a full disk after a refusal"),
            Err(e) => assert!(no_space(&e) && refused == 0, "write {i}: {e}"),
        }
    }
    assert!(refused > 100, "{refused}");
    assert!(matches!(db.flush(), Err(Error::ReadOnly { .. })));
    // Every read is right, and the failed attempts hold no space.
    check(&db, &model, "on a full disk");
    assert!(fs.used_bytes() <= limit);
    let stats = db.stats();
    assert!(stats.background_error.is_some(), "{stats:?}");
    assert!(stats.background_errors >= 1, "{stats:?}");
    let stray_tables = |fs: &FaultFs| {
        let state = read_manifest(fs, Path::new(DB)).unwrap().unwrap();
        fs.list(Path::new(DB))
            .unwrap()
            .iter()
            .filter_map(|n| parse_file_name(n))
            .filter(|(kind, n)| {
                *kind == FileKind::Table && !state.tables.iter().any(|t| t.file_number == *n)
            })
            .count()
    };
    // Once a retry has run to its end (resume waits for that, and it fails
    // again), what the failed attempts wrote is gone; an automatic retry
    // may have created one (empty) table since.
    let resumed = db.resume();
    assert!(
        matches!(
            resumed,
            Err(Error::ReadOnly { .. } | Error::Background { .. })
        ),
        "{resumed:?}"
    );
    assert!(stray_tables(&fs) <= 1);
    eprintln!(
        "full disk: {} background errors, {} retries so far: {}",
        stats.background_errors,
        stats.background_retries,
        stats.background_error.unwrap()
    );

    // Space again: the database resumes by itself.
    fs.clear_faults();
    fs.set_space_limit(None);
    for i in next + 200..next + 600 {
        put_until_accepted(&db, &mut model, i);
    }
    wait_until_idle(&db);
    db.compact().unwrap();
    assert!(db.stats().background_retries >= 1);
    check_then_reopen(&fs, db, &model, "after space returned");
}

#[test]
fn a_failed_log_write_is_recovered_with_a_new_log_and_loses_nothing() {
    for tear in [false, true] {
        let fs = FaultFs::new();
        fs.tear_failed_appends(tear);
        let db = Db::open_with(DB, options(&fs).sync_writes(true)).unwrap();
        let mut model = Model::new();
        write_range(&db, &mut model, 0..50).unwrap();
        fs.fail_matching("append", ".wal", FaultMode::Once, ErrorKind::StorageFull);
        let err = db.put(b"failed", b"write").unwrap_err();
        assert!(matches!(err, Error::Io { .. }), "{err}");
        // Refused until the recovery (every memtable flushed, a new log)
        // has run by itself; then writes go on, in a new log.
        for i in 50..400 {
            put_until_accepted(&db, &mut model, i);
        }
        wait_until_idle(&db);
        let failed = db.get(b"failed").unwrap();
        assert_eq!(failed, None, "tear {tear}: a failed write is not visible");
        check(&db, &model, "after the log recovered");
        assert_no_stray_files(&fs, "after the log recovered");
        // A crash now loses nothing acknowledged either.
        fs.kill_process();
        drop(db);
        fs.power_loss(PowerLoss::DropUnsynced);
        let db = Db::open_with(DB, options(&fs)).unwrap();
        check(&db, &model, &format!("tear {tear}: after a power loss"));
    }
}

#[test]
fn other_errors_wait_for_resume_which_retries_at_once() {
    let fs = FaultFs::new();
    let db = Db::open_with(DB, options(&fs).retry_interval(Duration::from_secs(3600))).unwrap();
    let mut model = Model::new();
    write_range(&db, &mut model, 0..100).unwrap();
    // A permission-like error, not retryable: flushes fail until resume.
    fs.fail_matching(
        "create",
        ".sst",
        FaultMode::Persistent,
        ErrorKind::PermissionDenied,
    );
    let (_, Error::ReadOnly { cause }) = write_until_error(&db, &mut model, 100) else {
        panic!("writes must be refused once the memtable is full");
    };
    assert!(!cause.is_retryable(), "{cause}");
    check(&db, &model, "while refused");
    // Still failing: resume says so.
    assert!(matches!(db.resume(), Err(Error::ReadOnly { .. })));
    fs.clear_faults();
    db.resume().unwrap();
    write_range(&db, &mut model, 2000..2500).unwrap();
    db.compact().unwrap();
    assert!(db.stats().background_retries >= 2);
    check_then_reopen(&fs, db, &model, "after resume");
}

#[test]
fn a_panic_in_compaction_is_an_error_and_never_stops_flushes_or_hangs_writers() {
    let fs = FaultFs::new();
    let opts = options(&fs).retry_interval(Duration::from_secs(3600));
    let db = Db::open_with(DB, opts).unwrap();
    let mut model = Model::new();
    write_range(&db, &mut model, 0..200).unwrap();
    db.flush().unwrap();
    db.wait_for_background().unwrap();
    fs.panic_matching("create", ".sst");
    match db.compact() {
        Err(Error::Background { cause }) => {
            assert!(matches!(*cause, Error::Panicked(_)), "{cause}");
            assert!(cause.to_string().contains("injected panic"), "{cause}");
        }
        other => panic!("a panicking compaction must be an error: {other:?}"),
    }
    // Flushes go on while compactions wait for resume; once level 0 is
    // full, writers are refused — never left waiting.
    let flushes = db.stats().flushes;
    let (i, Error::ReadOnly { cause }) = write_until_error(&db, &mut model, 200) else {
        panic!("a write failed other than by refusal");
    };
    assert!(matches!(*cause, Error::Panicked(_)), "{cause}");
    assert!(db.stats().flushes > flushes);
    resume_and_go_on(&fs, db, model, i);
}

#[test]
fn a_panic_in_a_flush_is_an_error_not_a_hang() {
    let fs = FaultFs::new();
    let db = Db::open_with(DB, options(&fs).retry_interval(Duration::from_secs(3600))).unwrap();
    let mut model = Model::new();
    write_range(&db, &mut model, 0..30).unwrap();
    fs.panic_matching("create", ".sst");
    match db.flush() {
        Err(Error::Background { cause }) => assert!(matches!(*cause, Error::Panicked(_))),
        other => panic!("a panicking flush must be an error: {other:?}"),
    }
    // Refused once the memtable is full, not stalled.
    let (i, refused) = write_until_error(&db, &mut model, 30);
    assert!(matches!(refused, Error::ReadOnly { .. }), "{refused}");
    resume_and_go_on(&fs, db, model, i);
}

#[test]
fn corruption_found_by_a_compaction_stops_writes_and_says_so() {
    let fs = FaultFs::new();
    let mut model = Model::new();
    // No automatic compaction: the two tables stay until `compact`.
    let opts = || {
        options(&fs)
            .level0_compaction_trigger(8)
            .level0_stop_writes(12)
    };
    {
        let db = Db::open_with(DB, opts()).unwrap();
        write_range(&db, &mut model, 0..50).unwrap();
        db.flush().unwrap();
        write_range(&db, &mut model, 50..100).unwrap();
        db.flush().unwrap();
    }
    // Damage the first data block of a table.
    let table = fs
        .list(Path::new(DB))
        .unwrap()
        .into_iter()
        .find(|n| n.ends_with(".sst"))
        .unwrap();
    let path = Path::new(DB).join(&table);
    let mut bytes = fs.read_all(&path).unwrap().to_vec();
    bytes[40] ^= 0x20;
    let mut f = fs.create(&path).unwrap();
    f.append(&bytes).unwrap();
    f.sync().unwrap();
    drop(f);

    let db = Db::open_with(DB, opts()).unwrap();
    let err = db.compact().unwrap_err();
    assert!(
        matches!(&err, Error::ReadOnly { cause } if cause.is_corruption()),
        "{err}"
    );
    match db.put(b"k", b"v") {
        Err(Error::ReadOnly { cause }) => {
            assert!(cause.is_corruption());
            let text = Error::ReadOnly { cause }.to_string();
            assert!(
                text.contains("corruption") && text.contains(&table),
                "{text}"
            );
        }
        other => panic!("writes must stop after corruption: {other:?}"),
    }
    assert!(matches!(db.resume(), Err(Error::ReadOnly { .. })));
    assert!(db.stats().background_error.is_some());
}

#[test]
fn a_failed_open_leaves_no_table_behind_however_often_it_is_retried() {
    let fs = FaultFs::new();
    let mut model = Model::new();
    {
        let db = Db::open_with(DB, options(&fs).memtable_bytes(1 << 20)).unwrap();
        write_range(&db, &mut model, 0..400).unwrap();
        fs.kill_process();
    }
    let files_before = fs.list(Path::new(DB)).unwrap();
    let used = fs.used_bytes();
    // Room for part of the recovered table only.
    fs.set_space_limit(Some(used + (8 << 10)));
    for attempt in 0..5 {
        let err = Db::open_with(DB, options(&fs).memtable_bytes(1 << 20)).unwrap_err();
        assert!(err.is_retryable(), "attempt {attempt}: {err}");
        assert_eq!(
            fs.list(Path::new(DB)).unwrap(),
            files_before,
            "attempt {attempt}"
        );
        assert_eq!(fs.used_bytes(), used, "attempt {attempt}");
    }
    fs.set_space_limit(None);
    let db = Db::open_with(DB, options(&fs)).unwrap();
    check(&db, &model, "after the failed opens");
}

/// Recovery from a failed log write is itself cut by a power loss at every
/// operation in turn: the next open must work and hold every acknowledged
/// write (the sealed log stays the newest until the manifest moved past it).
#[test]
fn a_power_loss_at_every_step_of_log_recovery_loses_nothing() {
    let prepare = || {
        let fs = FaultFs::new();
        let opts = options(&fs)
            .sync_writes(true)
            .retry_interval(Duration::from_secs(3600));
        let db = Db::open_with(DB, opts).unwrap();
        let mut model = Model::new();
        write_range(&db, &mut model, 0..150).unwrap();
        db.wait_for_background().unwrap();
        fs.tear_failed_appends(true);
        fs.fail_matching("append", ".wal", FaultMode::Once, ErrorKind::Other);
        assert!(db.put(b"failed", b"write").is_err());
        (fs, db, model)
    };
    let (fs, db, _) = prepare();
    let start = fs.op_count();
    db.resume().unwrap();
    let span = fs.op_count() - start;
    drop(db);
    assert!(span > 5, "{span}");
    for n in 1..=span + 1 {
        let (fs, db, model) = prepare();
        fs.power_loss_after(n, PowerLoss::TornUnsynced { seed: n });
        let _ = db.resume();
        drop(db);
        // (When the recovery took fewer operations this time.)
        fs.clear_faults();
        let db = Db::open_with(DB, options(&fs))
            .unwrap_or_else(|e| panic!("power lost at op {n} of recovery: {e}"));
        check(&db, &model, &format!("power lost at op {n} of recovery"));
    }
}

/// `Db::close` reports what a drop can only swallow: a failed final sync of
/// the log is an error of the call, and the writes stay readable after a
/// reopen (they were acknowledged, so they reached the log).
#[test]
fn close_reports_a_failed_final_sync_and_loses_no_acknowledged_write() {
    let fs = FaultFs::new();
    let db = Db::open_with(DB, options(&fs)).unwrap();
    db.put(b"k", b"v").unwrap();
    fs.fail_matching("sync", ".wal", FaultMode::Persistent, ErrorKind::Other);
    let closed = db.close();
    assert!(matches!(closed, Err(Error::Io { .. })), "{closed:?}");
    fs.clear_faults();
    let db = Db::open_with(DB, options(&fs)).unwrap();
    assert_eq!(db.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
    db.close().unwrap();
    let db = Db::open_with(DB, options(&fs)).unwrap();
    assert!(db.recovery_report().closed_cleanly);
    // Closing a read-only handle has no log to close.
    drop(db);
    Db::open_with(DB, options(&fs).read_only(true))
        .unwrap()
        .close()
        .unwrap();
}

/// A clean close while a rotated log's memtable is still unflushed (its
/// flushes fail): the log was made after the last manifest write, so its
/// number is not below the durable next file number. The close must still
/// write a valid manifest — it once failed with `InvalidArgument`
/// ("closed log N is not within ... the next file number N") — and the
/// next open must find every acknowledged write.
#[test]
fn a_close_with_an_unflushed_rotated_log_writes_a_valid_manifest() {
    let fs = FaultFs::new();
    let db = Db::open_with(DB, options(&fs)).unwrap();
    let mut model = Model::new();
    write_range(&db, &mut model, 0..50).unwrap();
    db.flush().unwrap();
    // Every table creation fails from now on: the next rotation's memtable
    // stays unflushed.
    fs.fail_matching("create", ".sst", FaultMode::Persistent, ErrorKind::Other);
    let before = db.stats().flushes;
    let mut i = 50;
    while db.stats().background_errors == 0 {
        assert!(i < 5_000, "no flush was tried");
        let _ = write_range(&db, &mut model, i..i + 1);
        i += 1;
    }
    assert_eq!(db.stats().flushes, before);
    if let Err(e) = db.close() {
        assert!(
            !matches!(e, Error::InvalidArgument(_)),
            "close wrote an invalid manifest: {e}"
        );
    }
    fs.clear_faults();
    let db = Db::open_with(DB, options(&fs)).unwrap();
    for (key, value) in &model {
        assert_eq!(db.get(key).unwrap().as_deref(), Some(value.as_slice()));
    }
}
