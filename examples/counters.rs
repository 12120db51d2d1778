//! Counters without reading them first, and watching the database work.
//!
//! - A merge operator (`Options::merge_operator`) adds each `Db::merge`
//!   operand to the value: page views are counted with one write each, no
//!   read-modify-write, and a read (or a compaction) sums them (RocksDB's
//!   merge operator).
//! - `Db::key_may_exist` answers from the filters, with no data read: most
//!   pages never seen are ruled out at once.
//! - An event listener (`Options::add_event_listener`) sees each flush and
//!   compaction on a thread of its own; `Db::live_tables` lists the tables
//!   and `Db::verify_checksums` scrubs them while the database is open.
//!
//! Run with: `cargo run --example counters`

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use siftdb::{CompactionEvent, Db, EventListener, FlushEvent, MergeOperator, Options};

/// Adds little-endian u64 operands to the value (0 when there is none).
struct Add;

impl MergeOperator for Add {
    fn merge(&self, _key: &[u8], existing: Option<&[u8]>, operands: &[&[u8]]) -> Option<Vec<u8>> {
        let read = |bytes: &[u8]| Some(u64::from_le_bytes(bytes.try_into().ok()?));
        let mut total = existing.map_or(Some(0), read)?;
        for operand in operands {
            total = total.checked_add(read(operand)?)?;
        }
        Some(total.to_le_bytes().to_vec())
    }
}

/// Counts what the background work did.
#[derive(Default)]
struct Watcher {
    flushed_bytes: AtomicU64,
    compactions: AtomicU64,
}

impl EventListener for Watcher {
    fn on_flush(&self, event: &FlushEvent) {
        let bytes = event.table.as_ref().map_or(0, |t| t.bytes);
        self.flushed_bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    fn on_compaction(&self, _event: &CompactionEvent) {
        self.compactions.fetch_add(1, Ordering::Relaxed);
    }
}

fn main() -> siftdb::Result<()> {
    let dir = tempfile::tempdir()?;
    let watcher = Arc::new(Watcher::default());
    let db = Db::open_with(
        dir.path(),
        Options::default()
            .merge_operator(Arc::new(Add))
            .memtable_bytes(256 << 10)
            .add_event_listener(watcher.clone()),
    )?;

    // 200,000 views of 1,000 pages: one merge each.
    for view in 0..200_000u64 {
        let page = (view * 7919) % 1000;
        db.merge(format!("views/page{page:04}"), 1u64.to_le_bytes())?;
    }
    db.flush()?;
    db.compact()?;
    let views = |page: u64| -> siftdb::Result<u64> {
        let value = db.get(format!("views/page{page:04}"))?.unwrap_or_default();
        Ok(value.as_ref().try_into().map_or(0, u64::from_le_bytes))
    };
    println!(
        "page 0: {} views, page 999: {} views",
        views(0)?,
        views(999)?
    );
    assert_eq!((0..1000).map(views).sum::<siftdb::Result<u64>>()?, 200_000);

    // Keys never written, among the written ones: ruled out by the
    // filters (about 1% are false positives), no data read.
    let unseen = (0..10_000u64)
        .filter(|n| !db.key_may_exist(format!("views/page{:04}/old{n}", n % 1000)))
        .count();
    println!("{unseen} of 10,000 unwritten keys ruled out without a read");
    assert!(unseen > 9_500);

    let tables = db.live_tables();
    let checked = db.verify_checksums()?;
    println!(
        "{} tables ({} bytes), {} checked; flushes wrote {} bytes, {} compactions",
        tables.len(),
        tables.iter().map(|t| t.bytes).sum::<u64>(),
        checked.tables,
        watcher.flushed_bytes.load(Ordering::Relaxed),
        watcher.compactions.load(Ordering::Relaxed),
    );
    db.close()
}
