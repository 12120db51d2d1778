//! A compaction filter (RocksDB's `CompactionFilter`): a callback that sees
//! the newest value of each key a compaction rewrites and keeps it, removes
//! the key, or replaces the value. Here it drops soft-deleted records and
//! migrates old-format values (`v1:` to `v2:`) lazily, with no pass over the
//! data of the application's own. It runs only when compaction rewrites a
//! table (not on writes, not on data still in memtables), from background
//! threads: it must be quick and must not call into the database. For
//! expiry by age see the `ttl` example.
//!
//! Run with: `cargo run --example compaction_filter`

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use siftdb::{CompactionDecision, CompactionFilter, Db, Keyspace, KeyspaceOptions};

/// Removes values marked `deleted`, rewrites `v1:` values as `v2:`.
#[derive(Default)]
struct CleanUp {
    asked: AtomicU64,
}

impl CompactionFilter for CleanUp {
    fn filter(&self, _level: usize, _key: &[u8], value: &[u8]) -> CompactionDecision {
        self.asked.fetch_add(1, Ordering::Relaxed);
        if value == b"deleted" {
            CompactionDecision::Remove
        } else if let Some(payload) = value.strip_prefix(b"v1:") {
            CompactionDecision::Change([&b"v2:"[..], payload].concat())
        } else {
            CompactionDecision::Keep
        }
    }
}

fn show(docs: &Keyspace, when: &str) -> siftdb::Result<()> {
    println!("{when}:");
    for entry in docs.iter() {
        let (key, value) = entry?;
        println!(
            "  {} = {}",
            String::from_utf8_lossy(&key),
            String::from_utf8_lossy(&value)
        );
    }
    Ok(())
}

fn main() -> siftdb::Result<()> {
    let dir = tempfile::tempdir()?;
    let clean_up = Arc::new(CleanUp::default());
    // For every keyspace: `Options::default().compaction_filter(..)`. For one
    // keyspace (RocksDB: per column family), given at each open of it:
    let db = Db::open(dir.path())?;
    let docs = db.keyspace_with(
        "docs",
        KeyspaceOptions::new().compaction_filter(clean_up.clone()),
    )?;
    docs.put("doc:1", "v1:hello")?;
    docs.put("doc:2", "v2:already new")?;
    docs.put("doc:3", "deleted")?;
    db.flush()?;
    docs.put("doc:4", "v1:world")?;
    docs.put("doc:5", "deleted")?;
    db.put("doc:3", "deleted")?; // the default keyspace has no filter

    // Writes and flushes do not ask the filter: everything is as written.
    show(&docs, "before compaction")?;
    println!(
        "filter asked {} times",
        clean_up.asked.load(Ordering::Relaxed)
    );
    let before = db.snapshot();

    // A compaction rewrites every table and asks the filter about each key.
    db.compact()?;
    show(&docs, "after compaction")?;
    println!(
        "filter asked {} times",
        clean_up.asked.load(Ordering::Relaxed)
    );
    assert_eq!(docs.get("doc:1")?.as_deref(), Some(&b"v2:hello"[..]));
    assert_eq!(docs.get("doc:3")?, None);
    assert_eq!(docs.iter().count(), 3);
    println!(
        "default keyspace's doc:3 = {:?} (not filtered)",
        db.get("doc:3")?
    );
    assert!(db.get("doc:3")?.is_some());

    // A snapshot taken before the compaction still reads what it pinned.
    println!(
        "the older snapshot's doc:1 = {:?}",
        before.get_in(&docs, "doc:1")?
    );
    assert_eq!(
        before.get_in(&docs, "doc:1")?.as_deref(),
        Some(&b"v1:hello"[..])
    );
    drop((before, docs)); // handles hold the database open
    db.close()
}
