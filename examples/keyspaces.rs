//! Keyspaces (RocksDB's column families, fjall's partitions): named, separate
//! sets of keys in one database, sharing one write-ahead log. Shows opening
//! keyspaces, one atomic `WriteBatch` across two of them (both writes land,
//! or neither does), scans of each keyspace on its own, and dropping one.
//!
//! Run with: `cargo run --example keyspaces`

use bytes::Bytes;
use siftdb::{Db, WriteBatch, MAX_KEY_LEN};

/// Every key of a scan, as text.
fn keys(scan: impl Iterator<Item = siftdb::Result<(Bytes, Bytes)>>) -> siftdb::Result<Vec<String>> {
    scan.map(|entry| entry.map(|(key, _)| String::from_utf8_lossy(&key).into_owned()))
        .collect()
}

fn main() -> siftdb::Result<()> {
    let dir = tempfile::tempdir()?;
    let db = Db::open(dir.path())?;

    // Created on first open; the same call opens them again after a reopen.
    let users = db.keyspace("users")?;
    let by_email = db.keyspace("users-by-email")?;
    println!("keyspaces: {:?}", db.keyspaces());

    // A user and its index entry: one batch, one log record, so a crash
    // leaves both or neither.
    let mut batch = WriteBatch::new();
    batch.put_in(&users, "u1", "ada@example.com");
    batch.put_in(&by_email, "ada@example.com", "u1");
    db.write(batch)?;
    users.put("u2", "grace@example.com")?; // one keyspace, one key
    by_email.put("grace@example.com", "u2")?;

    // A batch that cannot be applied whole is applied not at all: the
    // second write's key is over the size limit, so the first is refused too.
    let mut bad = WriteBatch::new();
    bad.put_in(&users, "u3", "edsger@example.com");
    bad.put_in(&by_email, vec![b'x'; MAX_KEY_LEN + 1], "u3");
    match db.write(bad) {
        Err(e) => println!("batch refused ({e}); users/u3 = {:?}", users.get("u3")?),
        Ok(()) => println!("unexpected: the batch was written"),
    }
    assert_eq!(users.get("u3")?, None);

    // Each keyspace scans only its own keys; the default keyspace (what
    // `db.put`/`db.get` use) is a keyspace of its own.
    db.put("config/version", "1")?;
    println!("users:          {:?}", keys(users.iter())?);
    println!("users-by-email: {:?}", keys(by_email.iter())?);
    println!("default:        {:?}", keys(db.iter())?);
    println!(
        "users, newest key first: {:?}",
        keys(users.range("u1"..="u9").rev())?
    );
    assert_eq!(db.get("u1")?, None);

    // Flushed separately: each keyspace has its own tables.
    db.flush()?;
    for keyspace in db.stats().keyspaces {
        println!("{:>15}: tables {}", keyspace.name, keyspace.table_count);
    }

    // Dropping a keyspace removes it and everything in it, durably; its
    // handles are refused from then on.
    db.drop_keyspace("users-by-email")?;
    println!("after the drop: {:?}", db.keyspaces());
    match by_email.get("ada@example.com") {
        Err(e) => println!("the old handle is refused: {e}"),
        Ok(v) => println!("unexpected: the dropped keyspace answered {v:?}"),
    }
    assert!(by_email.get("ada@example.com").is_err());
    // The same name opens a new, empty keyspace.
    let fresh = db.keyspace("users-by-email")?;
    println!("reopened by name, keys: {}", fresh.iter().count());
    assert_eq!(fresh.iter().count(), 0);
    // Keyspace handles hold the database open: `close` names any still alive.
    drop((users, by_email, fresh));
    db.close()
}
