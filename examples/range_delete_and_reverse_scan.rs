//! Range deletes and scans both ways. `Db::delete_range` removes every key
//! in a range with one range tombstone (one log record, whatever the number
//! of keys: RocksDB's `DeleteRange`); scans take any `RangeBounds`
//! (`a..b`, `a..=b`, `a..`, `..b`, or a pair of `Bound`s) and run backwards
//! with `.rev()` or `next_back()` (what RocksDB's `SeekForPrev`/`Prev` and
//! fjall's `.rev()` do).
//!
//! Run with: `cargo run --example range_delete_and_reverse_scan`

use std::ops::Bound;

use bytes::Bytes;
use siftdb::{Db, WriteBatch};

/// The keys of a scan, as text.
fn keys(scan: impl Iterator<Item = siftdb::Result<(Bytes, Bytes)>>) -> siftdb::Result<Vec<String>> {
    scan.map(|entry| entry.map(|(key, _)| String::from_utf8_lossy(&key).into_owned()))
        .collect()
}

fn main() -> siftdb::Result<()> {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path())?;
    for i in 0..100 {
        db.put(format!("log:{i:04}"), format!("entry {i}"))?;
    }
    db.flush()?; // these keys are in a table now
    for i in 100..120 {
        db.put(format!("log:{i:04}"), format!("entry {i}"))?; // these in the memtable
    }
    db.put("user:ada", "x")?;

    // Bounded scans, forwards and backwards.
    println!(
        "log:0003..log:0007    {:?}",
        keys(db.range("log:0003".."log:0007"))?
    );
    println!(
        "log:0003..=log:0007 rev {:?}",
        keys(db.range("log:0003"..="log:0007").rev())?
    );
    // A pair of `Bound`s for an excluded start (the key type named: a
    // tuple of bounds fits `RangeBounds` two ways).
    let after_115 = (Bound::Excluded("log:0115"), Bound::Unbounded);
    println!(
        "after log:0115        {:?}",
        keys(db.range::<&str, _>(after_115))?
    );
    println!(
        "largest three logs    {:?}",
        keys(db.prefix("log:").rev().take(3))?
    );
    let mut both_ends = db.prefix("log:");
    let first = both_ends.next().transpose()?.map(|(k, _)| k);
    let last = both_ends.next_back().transpose()?.map(|(k, _)| k);
    println!("first and last log    {first:?} {last:?}");

    // One range tombstone removes log:0010..log:0110, across the table and
    // the memtable; a snapshot taken before still sees them.
    let before = db.snapshot();
    db.delete_range("log:0010".."log:0110")?;
    println!(
        "log:0050 now: {:?}, in the snapshot: {:?}",
        db.get("log:0050")?,
        before.get("log:0050")?
    );
    println!(
        "logs left: {} (snapshot: {})",
        db.prefix("log:").count(),
        before.prefix("log:").count()
    );
    println!(
        "around the hole, backwards {:?}",
        keys(db.range("log:0005".."log:0115").rev())?
    );
    assert_eq!(db.prefix("log:").count(), 20);
    assert_eq!(db.range("log:0005".."log:0115").rev().count(), 10);

    // Keys written after the delete are not deleted; a range delete can
    // also go in a batch with other writes (and `Keyspace::delete_range`
    // does the same in a keyspace).
    db.put("log:0050", "rewritten")?;
    let mut batch = WriteBatch::new();
    batch.delete_range("log:0110".."log:0200");
    batch.put("log:9999", "last");
    db.write(batch)?;
    println!(
        "after the batch          {:?}",
        keys(db.prefix("log:").rev().take(4))?
    );
    println!("largest key: {:?}", db.last_key_value()?.map(|(k, _)| k));

    // A reversed range is refused; an empty one is a no-op.
    println!(
        "reversed range: {:?}",
        db.delete_range("b".."a").map_err(|e| e.to_string())
    );

    // Compaction drops what the tombstones cover (once no snapshot needs it).
    drop(before);
    db.compact()?;
    let stats = db.stats();
    println!(
        "after compaction: {} keys, {} tables, {} holding range tombstones",
        db.iter().count(),
        stats.table_count,
        stats.range_tombstone_tables
    );
    db.close()
}
