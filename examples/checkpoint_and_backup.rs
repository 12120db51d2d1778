//! Copies of a live database. `Db::checkpoint` writes an openable copy as
//! of one sequence number while writes go on (tables hard-linked on the same
//! file system, like RocksDB's `Checkpoint`); `siftdb::backup::BackupEngine`
//! keeps numbered, incremental, checksummed backups in a directory of their
//! own and restores one into a new directory (RocksDB's `BackupEngine`).
//! Each copy is opened and checked here.
//!
//! Run with: `cargo run --example checkpoint_and_backup`

use siftdb::backup::BackupEngine;
use siftdb::Db;

fn main() -> siftdb::Result<()> {
    let root = tempfile::tempdir()?;
    let db = Db::open(root.path().join("db"))?;
    let orders = db.keyspace("orders")?;
    for i in 0..1000 {
        db.put(format!("user:{i:04}"), format!("profile {i}"))?;
    }
    db.flush()?; // the users are in a table now
    orders.put("o-1", "paid")?; // this one only in the log and a memtable

    // A checkpoint: every keyspace, memtables included, at one sequence
    // number; the directory must not exist yet and appears whole or not at all.
    let checkpoint = db.checkpoint(root.path().join("checkpoint"))?;
    println!(
        "checkpoint at sequence {}: {} tables ({} hard-linked), {} logs, {} bytes copied",
        checkpoint.sequence,
        checkpoint.tables,
        checkpoint.tables_linked,
        checkpoint.logs,
        checkpoint.bytes_copied
    );
    db.put("user:0000", "changed after the checkpoint")?;
    {
        let copy = Db::open(&checkpoint.dir)?;
        let value = copy.get("user:0000")?;
        println!("checkpoint's user:0000 = {value:?}");
        assert_eq!(value.as_deref(), Some(&b"profile 0"[..]));
        assert_eq!(
            copy.keyspace("orders")?.get("o-1")?.as_deref(),
            Some(&b"paid"[..])
        );
        copy.close()?;
    }

    // Backups: the second stores again only what the first does not hold
    // (here the log with the writes since; the table is shared).
    let backups = BackupEngine::open(root.path().join("backups"))?;
    let first = backups.create(&db)?;
    for i in 1000..2000 {
        db.put(format!("user:{i:04}"), format!("profile {i}"))?;
    }
    orders.put("o-2", "shipped")?;
    let second = backups.create(&db)?;
    for info in backups.list()? {
        println!(
            "backup {}: sequence {}, {} files, {} bytes, {} of them new",
            info.id,
            info.sequence,
            info.files.len(),
            info.size(),
            info.new_bytes
        );
    }
    backups.verify(second.id)?; // every file against its checksum
    drop(orders); // a keyspace handle holds the database open
    db.close()?; // the backups need nothing of the live database

    // Restore each into a new directory, reopen and check.
    for (info, users, has_o2) in [(&first, 1000, false), (&second, 2000, true)] {
        let dir = root.path().join(format!("restored-{}", info.id));
        backups.restore(info.id, &dir)?;
        let restored = Db::open(&dir)?;
        let count = restored.prefix("user:").count();
        let o2 = restored.keyspace("orders")?.get("o-2")?;
        println!(
            "restored backup {} into {}: {count} users, o-2 = {o2:?}",
            info.id,
            dir.display()
        );
        assert_eq!(count, users);
        assert_eq!(o2.is_some(), has_o2);
        restored.close()?;
    }

    // Keep only the newest backup; files it does not name are removed.
    println!("purged backups {:?}", backups.purge_old(1)?);
    Ok(())
}
