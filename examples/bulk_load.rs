//! Bulk load of sorted data (RocksDB's `SstFileWriter` and
//! `IngestExternalFile`): `TableWriter` writes strictly ascending keys into
//! a table file, with its filters, outside the database; `Db::ingest` adds
//! such files atomically (all or none, also after a crash). A file that
//! overlaps nothing in the keyspace is copied (or moved) in as it is, with
//! no write-ahead log and no compaction; one that overlaps existing data is
//! rewritten once as newer than every write.
//!
//! Run with: `cargo run --example bulk_load`

use siftdb::{Db, IngestOptions, Options, TableWriter};

/// Writes `item:{i:06}` for `i` in `range` to a table file at `path`.
fn write_table(
    path: &std::path::Path,
    range: std::ops::Range<u32>,
    options: &Options,
) -> siftdb::Result<u64> {
    let mut writer = TableWriter::create(path, options)?;
    for i in range {
        writer.put(format!("item:{i:06}"), format!("loaded {i}"))?;
    }
    writer.finish() // synced; returns the file's size
}

fn main() -> siftdb::Result<()> {
    let root = tempfile::tempdir()?;
    let options = Options::default(); // the database's: same block size, compression, filters
    let db = Db::open_with(root.path().join("db"), options.clone())?;
    db.put("item:999999", "written before the load")?;
    let before = db.snapshot();

    // Two files of 50,000 sorted keys each, not overlapping each other.
    let files = [
        root.path().join("part-0.sst"),
        root.path().join("part-1.sst"),
    ];
    for (n, file) in (0u32..).zip(&files) {
        let bytes = write_table(file, n * 50_000..(n + 1) * 50_000, &options)?;
        println!("{}: {bytes} bytes", file.display());
    }

    // Keys out of order are refused while writing.
    let mut unsorted = TableWriter::create(root.path().join("bad.sst"), &options)?;
    unsorted.put("b", "1")?;
    println!(
        "out of order: {}",
        unsorted
            .put("a", "2")
            .map_err(|e| e.to_string())
            .err()
            .unwrap_or_default()
    );

    // Moved in (renamed), not copied: they overlap nothing in the database.
    db.ingest(&files, IngestOptions::new().move_files(true))?;
    let stats = db.stats();
    println!(
        "ingested: {} tables at levels {:?}; {} bytes written through the log (the one put: a load adds none)",
        stats.table_count, stats.level_tables, stats.user_bytes_written
    );
    println!("item:042042 = {:?}", db.get("item:042042")?);
    println!("item:123456 = {:?} (never loaded)", db.get("item:123456")?);
    println!(
        "scan from item:099998: {:?}",
        db.range("item:099998"..)
            .map(|e| e.map(|(k, _)| k))
            .collect::<siftdb::Result<Vec<_>>>()?
    );
    println!(
        "a snapshot taken before sees {} items",
        before.prefix("item:").count()
    );
    assert_eq!(db.prefix("item:").count(), 100_001);
    assert_eq!(before.prefix("item:").count(), 1);

    // A file overlapping what is there: its keys become newer than every
    // write, and a `delete` in it hides an older value.
    db.put("item:000007", "written, then overwritten by the load")?;
    let patch = root.path().join("patch.sst");
    let mut writer = TableWriter::create(&patch, &options)?;
    writer.put("item:000007", "patched")?;
    writer.delete("item:000008")?;
    writer.finish()?;
    db.ingest(&[&patch], IngestOptions::new())?; // the original stays the caller's
    println!(
        "item:000007 = {:?}, item:000008 = {:?}",
        db.get("item:000007")?,
        db.get("item:000008")?
    );
    assert_eq!(db.get("item:000007")?.as_deref(), Some(&b"patched"[..]));
    assert_eq!(db.get("item:000008")?, None);

    // Into a keyspace of its own: `Keyspace::ingest` of a file from that
    // keyspace's `table_writer` (its options, and the keyspace recorded in
    // the file), copied in as it is. A `TableWriter::create` file records
    // the default keyspace and would be rewritten once on the way in.
    let archive = db.keyspace("archive")?;
    let archived = root.path().join("archive.sst");
    let mut writer = archive.table_writer(&archived)?;
    for i in 0..1000u32 {
        writer.put(format!("item:{i:06}"), format!("archived {i}"))?;
    }
    writer.finish()?;
    archive.ingest(&[&archived], IngestOptions::new())?;
    println!("archive holds {} items", archive.iter().count());
    assert_eq!(archive.iter().count(), 1000);
    drop((archive, before)); // handles hold the database open
    db.close()
}
