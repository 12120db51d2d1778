//! Durability per write, and the figures an application can read.
//!
//! - A write without sync (the default, `Options::sync_writes(false)`) is in
//!   the write-ahead log, in the operating system's hands, when it returns:
//!   it survives a crash of the process (shown here: a child process is
//!   killed, the database reopens with its writes), not of the machine.
//! - `db.put_with(key, value, WriteOptions::new().sync(true))` (and
//!   `delete_with`, the same on a `Keyspace`, `write_with` for a batch)
//!   returns once the write, and everything logged before it, is on disk
//!   (fsync): it survives a power loss too (RocksDB's `WriteOptions::sync`).
//!   `sync(false)` overrides `Options::sync_writes(true)` for one write.
//! - `db.persist()` makes every write acknowledged so far durable at once,
//!   without a flush (RocksDB's `FlushWAL(true)`, fjall's `persist`).
//!
//! Then `Db::stats()`: writes, group commits, log syncs, stalls, memory.
//!
//! Run with: `cargo run --example durability`

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Instant;

use siftdb::{Db, Options, WriteOptions};

fn main() -> siftdb::Result<()> {
    let mut args = std::env::args().skip(1);
    if let (Some(flag), Some(dir)) = (args.next(), args.next()) {
        if flag == "--write-and-wait" {
            // The child: unsynced writes, then it waits to be killed.
            let db = Db::open(dir)?;
            for i in 0..100 {
                db.put(format!("crash:{i:03}"), "v")?;
            }
            println!("written");
            std::thread::sleep(std::time::Duration::from_secs(60));
            return Ok(());
        }
    }
    let dir = tempfile::tempdir()?;
    let mut child = Command::new(std::env::current_exe()?)
        .arg("--write-and-wait")
        .arg(dir.path())
        .stdout(Stdio::piped())
        .spawn()?;
    if let Some(stdout) = child.stdout.take() {
        BufReader::new(stdout).read_line(&mut String::new())?; // its writes returned
    }
    child.kill()?; // SIGKILL: no close, no destructor, no sync
    let status = child.wait()?;
    let db = Db::open(dir.path())?;
    let report = db.recovery_report();
    println!(
        "child ended by {status}; reopened: closed cleanly {}, {} log records replayed, {} of 100 unsynced writes there",
        report.closed_cleanly,
        report.records_replayed,
        db.prefix("crash:").count()
    );
    assert_eq!(db.prefix("crash:").count(), 100);
    db.close()?;

    // What a sync costs: the same writes with and without it (one run on
    // this disk, an illustration, not a benchmark).
    let dir = tempfile::tempdir()?;
    let db = Db::open_with(dir.path(), Options::default().sync_writes(false))?;
    for (name, options) in [
        ("without sync", WriteOptions::new()),
        ("with sync", WriteOptions::new().sync(true)),
    ] {
        let started = Instant::now();
        for i in 0..200 {
            db.put_with(format!("{name}:{i:03}"), "v", options)?;
        }
        println!("200 writes {name}: {:?}", started.elapsed());
    }
    for i in 0..1000 {
        db.put(format!("bulk:{i:04}"), "v")?;
    }
    db.persist()?; // the 1000 puts above: on disk from here on
    db.flush()?; // a table, so that the table figures below are not zero
    assert!(db.get("bulk:0999")?.is_some());

    let stats = db.stats();
    println!(
        "writes {}, in {} log writes (concurrent writers share one: group commit), {} log syncs, {} stalls ({} us)",
        stats.writes, stats.write_groups, stats.log_syncs, stats.write_stalls, stats.write_stall_micros
    );
    // 200 synced puts and one persist; a flush also syncs the log it leaves.
    assert!(stats.log_syncs >= 201);
    println!(
        "bytes put {}, write amplification {:?} (log not counted)",
        stats.user_bytes_written,
        stats.write_amplification()
    );
    println!(
        "memory: memtable {} B (+ its key filter {} B), block cache {} B, table filters {} B, indexes {} B, range filters {} B, transaction oracle {} B",
        stats.memtable_bytes,
        stats.memtable_filter_bytes,
        stats.block_cache_bytes,
        stats.filter_bytes,
        stats.index_bytes,
        stats.range_filter_bytes,
        stats.oracle_bytes
    );
    println!(
        "tables per level {:?}, bytes per level {:?}, open table files {}",
        stats.level_tables, stats.level_bytes, stats.open_table_files
    );
    println!(
        "background errors {}, stuck on: {:?}",
        stats.background_errors, stats.background_error
    );
    db.close()
}
