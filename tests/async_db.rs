//! The tokio facade, used from many tasks at once.
#![cfg(feature = "tokio")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use siftdb::{AsyncDb, Options, WriteBatch, WriteOptions};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_tasks_share_one_database() {
    let dir = tempfile::tempdir().unwrap();
    let db = AsyncDb::open_with(dir.path(), Options::default().memtable_bytes(32 << 10))
        .await
        .unwrap();
    let mut tasks = Vec::new();
    for t in 0..16u32 {
        let db = db.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..200u32 {
                let key = format!("task{t:02}-{i:04}");
                db.put(key.clone(), i.to_le_bytes().to_vec()).await.unwrap();
                let got = db.get(key).await.unwrap();
                assert_eq!(got.as_deref(), Some(&i.to_le_bytes()[..]));
            }
            let mut batch = WriteBatch::new();
            batch.put(format!("done{t:02}"), b"yes");
            db.write(batch).await.unwrap();
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    db.flush().await.unwrap();
    db.compact_range("done00".."done08").await.unwrap();
    db.compact().await.unwrap();
    assert!(db.verify_checksums().await.unwrap().tables >= 1);
    for t in 0..16u32 {
        assert_eq!(
            db.get(format!("done{t:02}")).await.unwrap().as_deref(),
            Some(&b"yes"[..])
        );
        db.delete(format!("done{t:02}")).await.unwrap();
        assert_eq!(db.get(format!("done{t:02}")).await.unwrap(), None);
    }
    assert_eq!(db.stats().writes, 16 * 200 + 16 + 16);
    let keys = vec![
        bytes::Bytes::from("task03-0007"),
        bytes::Bytes::from("done03"),
        bytes::Bytes::from("task15-0199"),
    ];
    let got = db.multi_get(keys).await.unwrap();
    assert_eq!(got[0].as_deref(), Some(&7u32.to_le_bytes()[..]));
    assert_eq!(got[1], None);
    assert_eq!(got[2].as_deref(), Some(&199u32.to_le_bytes()[..]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn range_deletes_through_the_facade() {
    let dir = tempfile::tempdir().unwrap();
    let db = AsyncDb::open_with(dir.path(), Options::default())
        .await
        .unwrap();
    for i in 0..10u32 {
        db.put(format!("k{i}"), "v").await.unwrap();
    }
    db.delete_range("k2".."k5").await.unwrap();
    db.delete_range("k7"..="k7").await.unwrap();
    // Empty: nothing written; reversed: refused before any work.
    db.delete_range("k9".."k9").await.unwrap();
    assert!(db.delete_range("k9".."k1").await.is_err());
    for i in 0..10u32 {
        let deleted = (2..5).contains(&i) || i == 7;
        let got = db.get(format!("k{i}")).await.unwrap();
        assert_eq!(got.is_none(), deleted, "k{i}");
    }
    assert_eq!(db.stats().writes, 12);
}

/// `put_with` and `delete_with` through the facade reach the log with their
/// options: each synced one is one more log sync, a plain one none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_write_options_through_the_facade() {
    let dir = tempfile::tempdir().unwrap();
    let db = AsyncDb::open_with(dir.path(), Options::default().sync_writes(false))
        .await
        .unwrap();
    let before = db.stats().log_syncs;
    db.put_with("a", "v", WriteOptions::new().sync(true))
        .await
        .unwrap();
    db.put("b", "v").await.unwrap();
    db.delete_with("b", WriteOptions::new().sync(true))
        .await
        .unwrap();
    db.delete_with("a", WriteOptions::new()).await.unwrap();
    assert_eq!(db.stats().log_syncs, before + 2);
    assert_eq!(db.get("a").await.unwrap(), None);
    assert_eq!(db.get("b").await.unwrap(), None);
}

/// A keyspace through the facade: its own keys, per-write options, range
/// deletes (a reversed range refused before any work), `multi_get`, a
/// cross-keyspace batch through `AsyncDb::write`, its compaction, its
/// approximate size and its memtables' share.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keyspaces_through_the_facade() {
    let dir = tempfile::tempdir().unwrap();
    let db = AsyncDb::open_with(dir.path(), Options::default().sync_writes(false))
        .await
        .unwrap();
    let users = db.keyspace("users").await.unwrap();
    let other = db.keyspace("other").await.unwrap();
    assert_eq!(users.name(), "users");
    for i in 0..20u32 {
        users
            .put(format!("u{i:02}"), format!("v{i}"))
            .await
            .unwrap();
    }
    let syncs = db.stats().log_syncs;
    users
        .put_with("u05", "synced", WriteOptions::new().sync(true))
        .await
        .unwrap();
    users
        .delete_with("u06", WriteOptions::new().sync(true))
        .await
        .unwrap();
    users.delete("u07").await.unwrap();
    assert_eq!(db.stats().log_syncs, syncs + 2);
    users.delete_range("u10".."u15").await.unwrap();
    users.delete_range("u18"..).await.unwrap();
    assert!(users.delete_range("u09".."u01").await.is_err());
    let mut batch = WriteBatch::new();
    batch.put_in(users.blocking_handle(), "u99", "batched");
    batch.put_in(other.blocking_handle(), "u99", "elsewhere");
    db.write(batch).await.unwrap();
    users.compact_range("u10"..="u15").await.unwrap();
    assert_eq!(users.blocking_handle().range("u10".."u15").count(), 0);
    users.compact().await.unwrap();
    assert_eq!(users.verify_checksums().await.unwrap().tables, 1);
    let got = users
        .multi_get(vec!["u05".into(), "u06".into(), "u12".into(), "u99".into()])
        .await
        .unwrap();
    assert_eq!(got[0].as_deref(), Some(&b"synced"[..]));
    assert_eq!((got[1].is_none(), got[2].is_none()), (true, true));
    assert_eq!(got[3].as_deref(), Some(&b"batched"[..]));
    assert_eq!(
        other.get("u99").await.unwrap().as_deref(),
        Some(&b"elsewhere"[..])
    );
    assert_eq!(
        db.get("u05").await.unwrap(),
        None,
        "the default keyspace is another"
    );
    // 20 keys, minus u06, u07, u10..u14 and u18, u19, plus u99.
    let left = users.blocking_handle().iter().count();
    assert_eq!(left, 20 - 2 - 5 - 2 + 1);
    // Sizes as the synchronous handles give them: the keyspace's table, the
    // default keyspace's (none: its one key is still in the memtable).
    let size = users.approximate_size("u".."v").unwrap();
    assert!(size > 0);
    assert_eq!(
        size,
        users.blocking_handle().approximate_size("u".."v").unwrap()
    );
    assert_eq!(users.approximate_size("a".."b").unwrap(), 0);
    // The memtables' share likewise: the keyspace's one write since its
    // compaction flushed it; the default keyspace's one key until a flush.
    users.put("u50", "late").await.unwrap();
    let unflushed = users.approximate_memtable_stats("u".."v").unwrap();
    assert_eq!(unflushed.entries, 1);
    assert_eq!(
        unflushed,
        users
            .blocking_handle()
            .approximate_memtable_stats("u".."v")
            .unwrap()
    );
    db.put("d", "default").await.unwrap();
    assert_eq!(db.approximate_size::<&str, _>(..).unwrap(), 0);
    assert_eq!(
        db.approximate_memtable_stats::<&str, _>(..)
            .unwrap()
            .entries,
        1
    );
    db.flush().await.unwrap();
    assert!(db.approximate_size::<&str, _>(..).unwrap() > 0);
    assert_eq!(
        db.approximate_memtable_stats::<&str, _>(..)
            .unwrap()
            .entries,
        0
    );
}

/// Scans through the facade: from the front, from the back, both ends
/// meeting (across the chunks each end fetched) with no entry repeated or
/// skipped, chunks, keyspace ranges and prefixes, against the blocking
/// scan of the same data; a checkpoint; and a call cancelled mid-chunk
/// makes the scan refuse to go on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scans_through_the_facade() {
    let dir = tempfile::tempdir().unwrap();
    let db = AsyncDb::open_with(dir.path(), Options::default().memtable_bytes(64 << 10))
        .await
        .unwrap();
    let logs = db.keyspace("logs").await.unwrap();
    for i in 0..700u32 {
        db.put(format!("k{i:04}"), format!("v{i}")).await.unwrap();
        logs.put(format!("l{i:04}"), "x").await.unwrap();
    }
    db.flush().await.unwrap();
    let want: Vec<_> = db
        .blocking_handle()
        .iter()
        .collect::<siftdb::Result<_>>()
        .unwrap();
    assert_eq!(want.len(), 700);

    let mut forward = Vec::new();
    let mut scan = db.iter();
    while let Some(entry) = scan.next().await {
        forward.push(entry.unwrap());
    }
    assert_eq!(forward, want);
    let mut backward = Vec::new();
    let mut scan = db.iter();
    while let Some(entry) = scan.next_back().await {
        backward.push(entry.unwrap());
    }
    backward.reverse();
    assert_eq!(backward, want);

    // Both ends in turn: three fronts per back, until they meet.
    let (mut front, mut back) = (Vec::new(), Vec::new());
    let mut scan = db.iter();
    'meet: loop {
        for _ in 0..3 {
            match scan.next().await {
                Some(entry) => front.push(entry.unwrap()),
                None => break 'meet,
            }
        }
        match scan.next_back().await {
            Some(entry) => back.push(entry.unwrap()),
            None => break,
        }
    }
    back.reverse();
    front.extend(back);
    assert_eq!(front, want);
    assert!(scan.next().await.is_none() && scan.next_back().await.is_none());

    let mut scan = db.range("k0100".."k0400");
    let first = scan.next_chunk(250).await.unwrap();
    let rest = scan.next_chunk(250).await.unwrap();
    assert_eq!((first.len(), rest.len()), (250, 50));
    assert_eq!(first[0], want[100]);
    assert!(scan.next_chunk(10).await.unwrap().is_empty());
    let mut logs_scan = logs.prefix("l06");
    let mut count = 0;
    while let Some(entry) = logs_scan.next().await {
        assert!(entry.unwrap().0.starts_with(b"l06"));
        count += 1;
    }
    assert_eq!(count, 100);
    let mut last = logs.range("l0000".."l0010");
    assert_eq!(last.next_back().await.unwrap().unwrap().0, "l0009");

    let copy = dir.path().join("copy");
    db.checkpoint(&copy).await.unwrap();
    let reopened = AsyncDb::open_with(&copy, Options::default()).await.unwrap();
    assert_eq!(
        reopened.get("k0699").await.unwrap().as_deref(),
        Some(&b"v699"[..])
    );

    // A call dropped while its chunk is read: the scan's position went
    // with it, and the scan says so rather than skip entries. (If the chunk
    // was read before the first poll ended, nothing was lost.)
    let mut scan = db.iter();
    let cancelled = tokio::select! {
        biased;
        _ = scan.next() => false,
        () = std::future::ready(()) => true,
    };
    if cancelled {
        assert!(matches!(
            scan.next().await,
            Some(Err(siftdb::Error::InvalidArgument(_)))
        ));
    }
}

/// Transactions through the facade: reads see the transaction's own
/// writes (points and scans, across keyspaces), a conflicting commit fails
/// and writes nothing, a retry commits, savepoints roll back, and a
/// rolled-back transaction writes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactions_through_the_facade() {
    let dir = tempfile::tempdir().unwrap();
    let db = AsyncDb::open_with(dir.path(), Options::default())
        .await
        .unwrap();
    let orders = db.keyspace("orders").await.unwrap();
    db.put("stock", "3").await.unwrap();

    let txn = db.transaction();
    let stock = txn.get_for_update("stock").await.unwrap().unwrap();
    assert_eq!(stock.as_ref(), b"3");
    txn.put("stock", "2").await.unwrap();
    txn.put_in(&orders, "o1", "one").await.unwrap();
    txn.set_savepoint().await.unwrap();
    txn.put_in(&orders, "o2", "undone").await.unwrap();
    txn.rollback_to_savepoint().await.unwrap();
    assert_eq!(txn.get("stock").await.unwrap().as_deref(), Some(&b"2"[..]));
    assert_eq!(txn.get_in(&orders, "o2").await.unwrap(), None);
    let mut scan = txn.range_in(&orders, "o".."p").await.unwrap();
    assert_eq!(scan.next().await.unwrap().unwrap().0, "o1");
    assert!(scan.next().await.is_none());
    // Another writer gets there first: the commit is refused whole.
    db.put("stock", "0").await.unwrap();
    assert!(matches!(txn.commit().await, Err(siftdb::Error::Conflict)));
    assert_eq!(orders.get("o1").await.unwrap(), None);

    let txn = db.transaction();
    assert_eq!(txn.get("stock").await.unwrap().as_deref(), Some(&b"0"[..]));
    txn.delete("stock").await.unwrap();
    txn.put_in(&orders, "o1", "restocked").await.unwrap();
    txn.commit().await.unwrap();
    assert_eq!(db.get("stock").await.unwrap(), None);
    assert_eq!(
        orders.get("o1").await.unwrap().as_deref(),
        Some(&b"restocked"[..])
    );

    let txn = db.transaction();
    txn.put("never", "written").await.unwrap();
    txn.rollback().await;
    assert_eq!(db.get("never").await.unwrap(), None);
}
