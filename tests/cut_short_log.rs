//! A log cut short after a clean close is a loss, not a crash: the close
//! records the log's length in the manifest, so wherever the log of a
//! cleanly closed database is cut — at every record boundary, in the middle
//! of every record, in its close record — `verify` reports an error at the
//! offset where its intact records end, the open (read-write and read-only)
//! reports it in `RecoveryReport::log_cut_short`, `paranoid_checks` refuses
//! the open, and `repair` accounts for the lost stretch. Nothing says the
//! reads are correct. After a crash (no clean close) the same cut is still
//! a torn tail.
#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions: a failed assumption is a failed test"
)]

use std::path::{Path, PathBuf};

use siftdb::internals::inspect::verify_dir;
use siftdb::{repair, Db, Error, Options, RepairOptions};

const PUTS: usize = 20;
/// The log's file header.
const HEADER: usize = 20;

fn options() -> Options {
    // Nothing is flushed: every write stays in the log.
    Options::default().memtable_bytes(1 << 20)
}

fn key(i: usize) -> String {
    format!("key{i:02}")
}

fn newest_log(dir: &Path) -> PathBuf {
    let mut logs: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "wal"))
        .collect();
    logs.sort();
    logs.pop().unwrap()
}

/// A database of `PUTS` puts, each its own log record, closed cleanly —
/// or, `crashed`, its files as they were before the close (copied into
/// `dir` from a database still open): what a crash leaves.
fn build(dir: &Path, crashed: bool) {
    let live = tempfile::tempdir().unwrap();
    let at = if crashed { live.path() } else { dir };
    let db = Db::open_with(at, options()).unwrap();
    for i in 0..PUTS {
        db.put(key(i), format!("value {i:02}")).unwrap();
    }
    if crashed {
        copy_dir(at, dir);
    }
    drop(db);
}

fn copy_dir(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
    }
}

/// Keys `0..n` present with their values, the rest absent.
fn holds_first(db: &Db, n: usize) {
    for i in 0..PUTS {
        let want = (i < n).then(|| format!("value {i:02}"));
        let got = db.get(key(i)).unwrap();
        assert_eq!(
            got.as_deref(),
            want.as_deref().map(str::as_bytes),
            "{i} of {n}"
        );
    }
}

#[test]
fn a_cleanly_closed_log_cut_anywhere_is_reported_as_a_loss() {
    let original = tempfile::tempdir().unwrap();
    build(original.path(), false);
    let log_name = newest_log(original.path()).file_name().unwrap().to_owned();
    let whole = std::fs::read(original.path().join(&log_name)).unwrap();
    // Every put is one record of the same length (sequence numbers below
    // 128 take one byte), then the close record: the same puts without a
    // clean close show where it starts.
    let crashed = tempfile::tempdir().unwrap();
    build(crashed.path(), true);
    let open_part = std::fs::read(newest_log(crashed.path())).unwrap();
    assert_eq!(whole[..open_part.len()], open_part[..]);
    let close_at = open_part.len();
    let close_len = whole.len() - close_at;
    let record = (close_at - HEADER) / PUTS;
    assert!(close_len > 0 && close_at == HEADER + PUTS * record);

    // Every record boundary, the middle of every record, inside the close
    // record, and inside the file header (a header cut short reads as one
    // torn while the log was created: no record, a torn tail at 0).
    let mut cuts = Vec::new();
    for i in 0..=PUTS {
        cuts.push(HEADER + i * record);
    }
    for i in 0..PUTS {
        cuts.push(HEADER + i * record + 3);
        cuts.push(HEADER + i * record + record - 1);
    }
    cuts.extend([
        close_at + 1,
        close_at + close_len / 2,
        whole.len() - 1,
        0,
        7,
    ]);
    cuts.sort_unstable();

    let mut verify_errors = 0;
    let mut opened = 0;
    for &cut in &cuts {
        let dir = tempfile::tempdir().unwrap();
        copy_dir(original.path(), dir.path());
        let log = dir.path().join(&log_name);
        std::fs::write(&log, &whole[..cut]).unwrap();
        // Where the intact records end, and how many puts they hold.
        let intact_puts = cut.saturating_sub(HEADER) / record;
        let intact_puts = intact_puts.min(PUTS);
        let intact_end = if cut < HEADER {
            0
        } else {
            HEADER + intact_puts * record
        };

        let report = verify_dir(dir.path()).unwrap();
        let on_log: Vec<_> = report
            .errors()
            .filter(|p| p.file == log_name.to_string_lossy())
            .collect();
        assert!(
            !report.is_clean() && !on_log.is_empty(),
            "cut at {cut}: verify found no error: {:?}",
            report.problems
        );
        if on_log.iter().any(|p| p.detail.contains("may be lost")) {
            verify_errors += 1;
            let loss = on_log
                .iter()
                .find(|p| p.detail.contains("may be lost"))
                .unwrap();
            assert_eq!(loss.offset, Some(intact_end as u64), "cut at {cut}");
        }

        // The read-only open (`siftdb get`) reports the loss at its offset.
        let db = Db::open_read_only(dir.path()).unwrap();
        let (file, offset, what) = db.recovery_report().log_cut_short.clone().unwrap();
        assert_eq!(file, log_name.to_string_lossy(), "cut at {cut}");
        assert_eq!(offset, intact_end as u64, "cut at {cut}");
        assert!(what.contains("may be lost"), "{what}");
        assert!(!db.recovery_report().closed_cleanly, "cut at {cut}");
        holds_first(&db, intact_puts);
        drop(db);

        // Paranoid checks refuse the open, naming repair.
        let err = Db::open_with(dir.path(), options().paranoid_checks(true)).unwrap_err();
        assert!(
            matches!(err, Error::Corruption { .. }),
            "cut at {cut}: {err}"
        );
        assert!(err.to_string().contains("siftdb repair"), "{err}");

        // The read-write open reports it too, and keeps what is there.
        let db = Db::open_with(dir.path(), options()).unwrap();
        let report = db.recovery_report().clone();
        assert_eq!(
            report.log_cut_short.as_ref().map(|l| l.1),
            Some(intact_end as u64),
            "cut at {cut}"
        );
        holds_first(&db, intact_puts);
        drop(db);
        opened += 1;
        // Reported once: that open moved past the log.
        let db = Db::open_with(dir.path(), options()).unwrap();
        assert_eq!(db.recovery_report().log_cut_short, None);
        assert!(db.recovery_report().closed_cleanly);
        holds_first(&db, intact_puts);
    }
    eprintln!(
        "{} cuts of a {}-byte log ({PUTS} records of {record} bytes, a {close_len}-byte close \
         record): verify reported the loss at {verify_errors}, every open ({opened}) reported it",
        cuts.len(),
        whole.len()
    );
    assert_eq!(verify_errors, cuts.len());
    assert_eq!(opened, cuts.len());
}

#[test]
fn repair_salvages_what_is_before_the_cut_and_reports_the_rest_lost() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), false);
    let log = newest_log(dir.path());
    let whole = std::fs::read(&log).unwrap();
    let cut = HEADER + (whole.len() - HEADER) / 2;
    std::fs::write(&log, &whole[..cut]).unwrap();
    let report = repair(dir.path(), RepairOptions::new()).unwrap();
    assert!(report.lost_anything(), "{report:?}");
    let lost = &report
        .logs
        .iter()
        .find(|l| !l.lost.is_empty())
        .unwrap()
        .lost;
    assert_eq!(lost.len(), 1);
    assert!(lost[0].offset <= cut as u64 && lost[0].offset + lost[0].len == whole.len() as u64);
    assert!(!report.uncertain.is_empty());
    let db = Db::open_with(dir.path(), options()).unwrap();
    assert_eq!(db.recovery_report().log_cut_short, None);
    let kept = (0..PUTS)
        .filter(|&i| db.get(key(i)).unwrap().is_some())
        .count();
    assert!(kept > 0 && kept < PUTS, "{kept}");
    drop(db);
    assert!(verify_dir(dir.path()).unwrap().is_clean());
}

#[test]
fn without_a_clean_close_a_cut_is_a_torn_tail_and_a_whole_log_is_no_loss() {
    // After a crash: the same cut is what a crash leaves.
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), true);
    let log = newest_log(dir.path());
    let whole = std::fs::read(&log).unwrap();
    std::fs::write(&log, &whole[..whole.len() - 5]).unwrap();
    let report = verify_dir(dir.path()).unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    let db = Db::open_with(dir.path(), options()).unwrap();
    assert_eq!(db.recovery_report().log_cut_short, None);
    assert!(db.recovery_report().torn_tail.is_some());
    drop(db);

    // A clean close, nothing cut: no loss, closed cleanly.
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), false);
    let report = verify_dir(dir.path()).unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    let db = Db::open_with(dir.path(), options()).unwrap();
    let report = db.recovery_report();
    assert_eq!(report.log_cut_short, None);
    assert!(report.closed_cleanly);
    holds_first(&db, PUTS);
}
