//! `Options::add_event_listener`: what a listener is shown of flushes,
//! compactions, background failures and write stalls, and that it runs on
//! a thread of its own — it may block, or write to the database it
//! watches, without stopping background work — with every event delivered
//! by the time `Db::close` returns, and a listener's panic reported there.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use std::io::ErrorKind;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use siftdb::{
    BackgroundErrorEvent, BackgroundWork, CompactionEvent, CompactionReason, Db, Error,
    EventListener, FlushEvent, Keyspace, Options, StallCause, WriteStallEvent,
};
use siftdb_testkit::{FaultFs, FaultMode};

/// Far longer than anything here takes; only a hang runs into it.
const HANG: Duration = Duration::from_secs(60);

/// What a test checks of a background error event: what failed, when it
/// is retried, the attempts, whether writes stopped.
type ErrorSeen = (BackgroundWork, Option<Duration>, u32, bool);

/// Every event, in the order delivered.
#[derive(Default)]
struct Recorder {
    flushes: Mutex<Vec<FlushEvent>>,
    compactions: Mutex<Vec<CompactionEvent>>,
    errors: Mutex<Vec<ErrorSeen>>,
    stalls: Mutex<Vec<WriteStallEvent>>,
}

impl EventListener for Recorder {
    fn on_flush(&self, event: &FlushEvent) {
        self.flushes.lock().unwrap().push(event.clone());
    }
    fn on_compaction(&self, event: &CompactionEvent) {
        self.compactions.lock().unwrap().push(event.clone());
    }
    fn on_background_error(&self, event: &BackgroundErrorEvent) {
        self.errors.lock().unwrap().push((
            event.work,
            event.retry_in,
            event.attempts,
            event.writes_stopped,
        ));
    }
    fn on_write_stall(&self, event: &WriteStallEvent) {
        self.stalls.lock().unwrap().push(*event);
    }
}

#[test]
fn flushes_and_compactions_are_shown_with_their_tables() {
    let dir = tempfile::tempdir().unwrap();
    let recorder = Arc::new(Recorder::default());
    let db = Db::open_with(
        dir.path(),
        Options::default()
            .level0_compaction_trigger(3)
            .level0_quiet_trigger(3)
            .add_event_listener(recorder.clone()),
    )
    .unwrap();
    let logs = db.keyspace("logs").unwrap();
    for round in 0..3u32 {
        for i in 0..100u32 {
            db.put(format!("k{i:03}"), round.to_be_bytes()).unwrap();
        }
        db.flush().unwrap();
    }
    db.wait_for_background().unwrap();
    logs.put("line", "1").unwrap();
    db.flush().unwrap();
    db.compact().unwrap();
    drop(logs); // a keyspace handle holds the database open
    db.close().unwrap();

    let flushes = recorder.flushes.lock().unwrap();
    let default_flushes: Vec<_> = flushes.iter().filter(|f| f.keyspace == "default").collect();
    assert_eq!(default_flushes.len(), 3, "{flushes:?}");
    for flush in &default_flushes {
        let table = flush.table.as_ref().expect("a table per flush");
        assert_eq!((table.level, table.entries), (0, 100), "{flush:?}");
        assert!(table.bytes > 0);
    }
    let logs_flush: Vec<_> = flushes.iter().filter(|f| f.keyspace == "logs").collect();
    assert_eq!(logs_flush.len(), 1, "{flushes:?}");
    assert_eq!(logs_flush[0].table.as_ref().unwrap().entries, 1);

    let compactions = recorder.compactions.lock().unwrap();
    // The third level-0 table of `default` triggered a compaction of the
    // three flushed tables.
    let automatic = compactions
        .iter()
        .find(|c| c.reason == CompactionReason::Automatic && c.keyspace == "default")
        .unwrap_or_else(|| panic!("no automatic compaction: {compactions:?}"));
    let flushed: Vec<u64> = default_flushes
        .iter()
        .map(|f| f.table.as_ref().unwrap().file_number)
        .collect();
    let mut inputs: Vec<u64> = automatic.inputs.iter().map(|t| t.file_number).collect();
    inputs.sort_unstable();
    assert_eq!(inputs, flushed, "{automatic:?}");
    assert_eq!(automatic.output_level, 1);
    assert!(!automatic.moved);
    // 100 keys, each written three times: the older versions are gone.
    let outputs: u64 = automatic.outputs.iter().map(|t| t.entries).sum();
    assert_eq!(outputs, 100, "{automatic:?}");
    assert!(automatic.outputs.iter().all(|t| t.level == 1));
    // `compact` asked for the rest: the lone `logs` table moves to level 1
    // as it is.
    let logs_compaction = compactions
        .iter()
        .find(|c| c.keyspace == "logs")
        .unwrap_or_else(|| panic!("no compaction of logs: {compactions:?}"));
    assert_eq!(logs_compaction.reason, CompactionReason::Requested);
    assert!(logs_compaction.moved, "{logs_compaction:?}");
    let (input, output) = (&logs_compaction.inputs[0], &logs_compaction.outputs[0]);
    assert_eq!(input.file_number, output.file_number);
    assert_eq!((input.level, output.level), (0, 1));
}

/// Flushes whose table file cannot be made once: with `kind`, then the
/// flush done (by itself, or by `Db::resume`); the error events.
fn failed_flush(kind: ErrorKind) -> Vec<ErrorSeen> {
    let fs = FaultFs::new();
    let recorder = Arc::new(Recorder::default());
    let db = Db::open_with(
        "/db",
        Options::default()
            .file_system(fs.shared())
            .retry_interval(Duration::from_millis(1))
            .add_event_listener(recorder.clone()),
    )
    .unwrap();
    db.put("k", "v").unwrap();
    fs.fail_matching("create", ".sst", FaultMode::Once, kind);
    // `flush` reports the failure when it sees it before a retry.
    if db.flush().is_err() {
        db.resume().unwrap();
        db.flush().unwrap();
    }
    db.close().unwrap();
    // The flush that succeeded in the end.
    assert_eq!(recorder.flushes.lock().unwrap().len(), 1);
    let errors = recorder.errors.lock().unwrap().clone();
    errors
}

#[test]
fn a_failed_flush_is_shown_with_its_retry() {
    // No space: retried by itself.
    let errors = failed_flush(ErrorKind::StorageFull);
    let (work, retry_in, attempts, stopped) = *errors.first().expect("an error event");
    assert_eq!(
        (work, attempts, stopped),
        (BackgroundWork::Flush, 1, false),
        "{errors:?}"
    );
    assert!(retry_in.is_some(), "{errors:?}");
    // Another error: retried by `Db::resume` only.
    let errors = failed_flush(ErrorKind::Other);
    let (work, retry_in, attempts, stopped) = *errors.first().expect("an error event");
    assert_eq!(
        (work, attempts, stopped),
        (BackgroundWork::Flush, 1, false),
        "{errors:?}"
    );
    assert_eq!(retry_in, None, "{errors:?}");
}

#[test]
fn a_stalled_write_is_shown() {
    let dir = tempfile::tempdir().unwrap();
    let recorder = Arc::new(Recorder::default());
    let db = Db::open_with(
        dir.path(),
        Options::default()
            .memtable_bytes(4096)
            .level0_compaction_trigger(2)
            .level0_stop_writes(2)
            .add_event_listener(recorder.clone()),
    )
    .unwrap();
    let mut puts = 0u64;
    while db.stats().write_stalls == 0 {
        assert!(puts < 200_000, "no write ever stalled");
        for _ in 0..100 {
            db.put(format!("key{puts:08}"), [7u8; 100]).unwrap();
            puts += 1;
        }
    }
    let stalls_counted = db.stats().write_stalls;
    db.close().unwrap();
    let stalls = recorder.stalls.lock().unwrap();
    assert_eq!(stalls.len() as u64, stalls_counted, "{stalls:?}");
    assert!(stalls
        .iter()
        .all(|s| matches!(s.cause, StallCause::Flush | StallCause::Level0)));
}

/// Blocks in its first event until told to go on, then writes to the
/// database it watches (through a keyspace handed over after the open).
struct Blocking {
    go_on: Mutex<Receiver<()>>,
    keyspace: Mutex<Option<Keyspace>>,
    flushes: AtomicU32,
}

impl EventListener for Blocking {
    fn on_flush(&self, _: &FlushEvent) {
        if self.flushes.load(Ordering::Acquire) == 0 {
            self.go_on.lock().unwrap().recv_timeout(HANG).unwrap();
        }
        let flushes = self.flushes.fetch_add(1, Ordering::AcqRel) + 1;
        if let Some(keyspace) = self.keyspace.lock().unwrap().as_ref() {
            keyspace.put(format!("flush{flushes}"), "seen").unwrap();
        }
    }
}

#[test]
fn a_blocked_listener_holds_up_no_flush_and_may_write() {
    let dir = tempfile::tempdir().unwrap();
    let (go_on, wait): (Sender<()>, _) = channel();
    let listener = Arc::new(Blocking {
        go_on: Mutex::new(wait),
        keyspace: Mutex::new(None),
        flushes: AtomicU32::new(0),
    });
    let db = Db::open_with(
        dir.path(),
        Options::default().add_event_listener(listener.clone()),
    )
    .unwrap();
    *listener.keyspace.lock().unwrap() = Some(db.keyspace("audit").unwrap());
    // Five flushes while the listener is stuck in the first one's event:
    // each returns (the listener is not on the flush thread).
    let db = Arc::new(db);
    let (done, finished) = channel();
    let flusher = {
        let db = Arc::clone(&db);
        std::thread::spawn(move || {
            for i in 0..5 {
                db.put(format!("k{i}"), "v").unwrap();
                db.flush().unwrap();
            }
            done.send(()).unwrap();
        })
    };
    finished
        .recv_timeout(HANG)
        .expect("flushes waited for a blocked listener");
    flusher.join().unwrap();
    assert_eq!(listener.flushes.load(Ordering::Acquire), 0);
    go_on.send(()).unwrap();
    // The listener's own writes flush too (more events); closing delivers
    // every event first. The handle it holds goes before the close.
    while listener.flushes.load(Ordering::Acquire) < 5 {
        std::thread::sleep(Duration::from_millis(1));
    }
    let audit = listener.keyspace.lock().unwrap().take().unwrap();
    assert_eq!(audit.get("flush5").unwrap().as_deref(), Some(&b"seen"[..]));
    drop(audit);
    Arc::into_inner(db).unwrap().close().unwrap();
}

struct Panicking;

impl EventListener for Panicking {
    fn on_flush(&self, _: &FlushEvent) {
        panic!("listener failed");
    }
}

#[test]
fn a_listener_panic_is_reported_by_close() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(
        dir.path(),
        Options::default().add_event_listener(Arc::new(Panicking)),
    )
    .unwrap();
    db.put("k", "v").unwrap();
    db.flush().unwrap();
    // Writes and flushes go on after the listener is gone.
    db.put("k2", "v").unwrap();
    db.flush().unwrap();
    match db.close() {
        Err(Error::Panicked(message)) => assert!(message.contains("listener failed"), "{message}"),
        other => panic!("close after a listener's panic: {other:?}"),
    }
    let db = Db::open(dir.path()).unwrap();
    assert_eq!(db.get("k2").unwrap().as_deref(), Some(&b"v"[..]));
}
