//! A first look at siftdb: open, write, read, scan, and see the filter work.
//!
//! Run with `cargo run --example basic`.

use siftdb::{Db, WriteBatch};

fn main() -> siftdb::Result<()> {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path())?;

    db.put("apple", "red")?;
    db.put("banana", "yellow")?;
    let mut batch = WriteBatch::new();
    batch.put("cherry", "dark red");
    batch.delete("banana");
    db.write(batch)?; // both operations, or neither

    println!("apple  -> {:?}", db.get("apple")?);
    println!("banana -> {:?}", db.get("banana")?);

    for i in 0..10_000 {
        db.put(format!("user:{i:05}"), format!("profile {i}"))?;
    }
    db.flush()?; // the memtable becomes a table with a Bloom filter beside its data

    for entry in db.prefix("user:0000") {
        let (key, value) = entry?;
        println!(
            "{} = {}",
            String::from_utf8_lossy(&key),
            String::from_utf8_lossy(&value)
        );
    }

    for i in 0..10_000 {
        assert!(db.get(format!("nobody:{i}"))?.is_none());
    }
    let stats = db.stats();
    println!(
        "{} tables; {} filter checks, {} table reads skipped by the filter, {} data blocks read",
        stats.table_count, stats.filter_checks, stats.filter_skips, stats.data_block_reads
    );
    Ok(())
}
