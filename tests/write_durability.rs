//! Durability per write: `Db::write_with` with `WriteOptions::sync` and
//! `Db::persist` make writes survive a power loss that drops every byte
//! not synced; writes without them do not (so the tests can fail).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use siftdb::{Db, Options, WriteBatch, WriteOptions};
use siftdb_testkit::{FaultFs, PowerLoss};

const DB: &str = "/db";

fn options(fs: &FaultFs, sync_writes: bool) -> Options {
    // Nothing is flushed: every write lives in the log alone.
    Options::default()
        .file_system(fs.shared())
        .memtable_bytes(1 << 20)
        .sync_writes(sync_writes)
}

fn batch(key: &str) -> WriteBatch {
    let mut b = WriteBatch::new();
    b.put(key, "v");
    b
}

/// Cuts the power (unsynced bytes lost), reopens, and says which keys survived.
fn after_power_loss(fs: &FaultFs, db: Db, keys: &[&str]) -> Vec<bool> {
    fs.power_loss(PowerLoss::DropUnsynced);
    drop(db); // its handles died with the power: its close writes nothing
    let db = Db::open_with(DB, options(fs, false)).unwrap();
    let found = keys.iter().map(|k| db.get(k).unwrap().is_some()).collect();
    db.close().unwrap();
    found
}

#[test]
fn a_synced_write_survives_a_power_loss_and_carries_the_writes_before_it() {
    let fs = FaultFs::new();
    let db = Db::open_with(DB, options(&fs, false)).unwrap();
    db.put("before", "v").unwrap();
    db.write_with(batch("synced"), WriteOptions::new().sync(true))
        .unwrap();
    db.put("after", "v").unwrap();
    assert_eq!(
        after_power_loss(&fs, db, &["before", "synced", "after"]),
        [true, true, false]
    );
}

#[test]
fn persist_makes_every_acknowledged_write_durable_without_a_flush() {
    let fs = FaultFs::new();
    let db = Db::open_with(DB, options(&fs, false)).unwrap();
    for i in 0..100 {
        db.put(format!("k{i}"), "v").unwrap();
    }
    db.persist().unwrap();
    assert_eq!(db.stats().flushes, 0);
    db.put("late", "v").unwrap();
    let keys: Vec<String> = (0..100).map(|i| format!("k{i}")).collect();
    let mut names: Vec<&str> = keys.iter().map(String::as_str).collect();
    names.push("late");
    let found = after_power_loss(&fs, db, &names);
    assert!(
        found[..100].iter().all(|&f| f),
        "a persisted write was lost"
    );
    assert!(
        !found[100],
        "an unsynced write survived: the test cannot tell"
    );
}

#[test]
fn a_write_can_opt_out_of_the_databases_sync_default() {
    let fs = FaultFs::new();
    let db = Db::open_with(DB, options(&fs, true)).unwrap();
    db.put("default-synced", "v").unwrap();
    db.write_with(batch("unsynced"), WriteOptions::new().sync(false))
        .unwrap();
    assert_eq!(
        after_power_loss(&fs, db, &["default-synced", "unsynced"]),
        [true, false]
    );
}

#[test]
fn persist_and_write_with_are_refused_on_a_read_only_handle() {
    let fs = FaultFs::new();
    Db::open_with(DB, options(&fs, false))
        .unwrap()
        .close()
        .unwrap();
    let db = Db::open_with(DB, options(&fs, false).read_only(true)).unwrap();
    assert!(db.persist().is_err());
    assert!(db
        .write_with(batch("k"), WriteOptions::new().sync(true))
        .is_err());
}

/// An empty batch written with a sync still syncs the writes before it.
#[test]
fn an_empty_synced_write_makes_the_writes_before_it_durable() {
    let fs = FaultFs::new();
    let db = Db::open_with(DB, options(&fs, false)).unwrap();
    db.put("before", "v").unwrap();
    db.write_with(WriteBatch::new(), WriteOptions::new().sync(true))
        .unwrap();
    db.put("after", "v").unwrap();
    assert_eq!(
        after_power_loss(&fs, db, &["before", "after"]),
        [true, false]
    );
}

/// `put_with` and `delete_with`, on the database and on a keyspace, each
/// sync their one write (and the plain writes before it) when asked, on a
/// fresh database per call so no other synced write covers for it; the
/// plain write after it is lost (so the test can fail).
#[test]
fn put_with_and_delete_with_each_sync_their_write_on_the_db_and_a_keyspace() {
    type Call = fn(&Db, &siftdb::Keyspace, WriteOptions);
    let calls: [(&str, Call, bool); 4] = [
        (
            "Db::put_with",
            |db, _, o| db.put_with("target", "v", o).unwrap(),
            true,
        ),
        (
            "Keyspace::put_with",
            |_, ks, o| ks.put_with("target", "v", o).unwrap(),
            true,
        ),
        (
            "Db::delete_with",
            |db, _, o| db.delete_with("target", o).unwrap(),
            false,
        ),
        (
            "Keyspace::delete_with",
            |_, ks, o| ks.delete_with("target", o).unwrap(),
            false,
        ),
    ];
    for (name, call, present_after) in calls {
        let fs = FaultFs::new();
        let db = Db::open_with(DB, options(&fs, false)).unwrap();
        let orders = db.keyspace("orders").unwrap();
        // The key a delete removes, made durable first.
        db.put_with("target", "v", WriteOptions::new().sync(true))
            .unwrap();
        orders
            .put_with("target", "v", WriteOptions::new().sync(true))
            .unwrap();
        db.put("before", "v").unwrap();
        call(&db, &orders, WriteOptions::new().sync(true));
        db.put("after", "v").unwrap();
        fs.power_loss(PowerLoss::DropUnsynced);
        drop((db, orders));
        let db = Db::open_with(DB, options(&fs, false)).unwrap();
        let orders = db.keyspace("orders").unwrap();
        let target = if name.starts_with("Db") {
            db.get("target").unwrap()
        } else {
            orders.get("target").unwrap()
        };
        assert_eq!(target.is_some(), present_after, "{name}: its own write");
        assert!(
            db.get("before").unwrap().is_some(),
            "{name}: the write before it"
        );
        assert!(
            db.get("after").unwrap().is_none(),
            "{name}: the plain write after it"
        );
        drop(orders); // a keyspace handle holds the database open
        db.close().unwrap();
    }
}

/// `Stats::log_syncs` counts the log's syncs: none for plain writes, one
/// per synced write (on the database or a keyspace) and per `persist`.
#[test]
fn log_syncs_count_synced_writes_and_persists_only() {
    let fs = FaultFs::new();
    let db = Db::open_with(DB, options(&fs, false)).unwrap();
    let orders = db.keyspace("orders").unwrap();
    let before = db.stats().log_syncs;
    for i in 0..10 {
        db.put(format!("k{i}"), "v").unwrap();
        orders.delete(format!("k{i}")).unwrap();
    }
    assert_eq!(db.stats().log_syncs, before);
    db.put_with("a", "v", WriteOptions::new().sync(true))
        .unwrap();
    orders
        .delete_with("a", WriteOptions::new().sync(true))
        .unwrap();
    db.write_with(batch("b"), WriteOptions::new().sync(true))
        .unwrap();
    db.persist().unwrap();
    assert_eq!(db.stats().log_syncs, before + 4);
    drop(orders); // a keyspace handle holds the database open
    db.close().unwrap();
}

/// `Options::sync_interval`: a write that asked for no sync is on disk
/// once the interval's sync has run (the log synced by the thread, seen in
/// `Stats::log_syncs`), and survives a power loss. The first sync is due a
/// whole interval (1 s) after the open, long after the put below, so it
/// covers it; without the thread no sync ever comes and the wait fails.
#[test]
fn a_sync_interval_makes_unsynced_writes_durable() {
    let fs = FaultFs::new();
    let opts = options(&fs, false).sync_interval(std::time::Duration::from_secs(1));
    let db = Db::open_with(DB, opts).unwrap();
    let syncs = db.stats().log_syncs;
    db.put("unsynced", "v").unwrap();
    let waited = std::time::Instant::now();
    while db.stats().log_syncs == syncs {
        assert!(
            waited.elapsed() < std::time::Duration::from_secs(120),
            "no sync in two minutes under a 1 s sync interval"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(after_power_loss(&fs, db, &["unsynced"]), [true]);
    assert!(Options::default()
        .sync_interval(std::time::Duration::ZERO)
        .validate()
        .is_err());
}
