//! The `bulkload` comparison (siftdb only: bulk load is siftdb's own API,
//! not part of the [`crate::Engine`] seam): the N present keys loaded by
//! fillrandom's puts into one database and by `TableWriter` + `Db::ingest`
//! into another, then the same random gets on both.
//!
//! Owns: the two loads, their timing, and the checks of every get.
//! Must never: time work outside the load it measures (the fill's
//! compaction before its reads is not timed), or report a figure of a run
//! whose gets returned a wrong value.

use std::path::Path;
use std::time::Instant;

use siftdb::{Db, IngestOptions, Options, TableWriter};

use crate::{key, shuffle, value, KEY_LEN, LOAD_ORDER_SEED, READ_ORDER_SEED, VALUE_LEN};

/// Bytes of one bulk-load file (about the size of a compaction's tables).
const FILE_BYTES: u64 = 64 << 20;

/// What the comparison measured.
#[derive(Debug, Clone, PartialEq)]
pub struct BulkloadReport {
    /// Keys loaded.
    pub n: u64,
    /// Gets per read run.
    pub ops: u64,
    /// fillrandom: puts per second (flush and background work included).
    pub fill_per_sec: f64,
    /// TableWriter + ingest: keys per second (files written, synced and ingested).
    pub load_per_sec: f64,
    /// Files the bulk load wrote.
    pub files: usize,
    /// Gets per second on the filled database after a full compaction.
    pub read_filled_per_sec: f64,
    /// Gets per second on the bulk-loaded database.
    pub read_loaded_per_sec: f64,
}

impl BulkloadReport {
    /// The report as lines of text.
    pub fn to_lines(&self) -> Vec<String> {
        vec![
            format!(
                "bulkload: N={} fillrandom {:.0} puts/s, TableWriter+ingest {:.0} keys/s ({} files): {:.2}x",
                self.n,
                self.fill_per_sec,
                self.load_per_sec,
                self.files,
                self.load_per_sec / self.fill_per_sec
            ),
            format!(
                "bulkload: readrandom {} gets: filled+compacted {:.0} gets/s, bulk-loaded {:.0} gets/s: {:.2}x",
                self.ops,
                self.read_filled_per_sec,
                self.read_loaded_per_sec,
                self.read_loaded_per_sec / self.read_filled_per_sec
            ),
        ]
    }
}

fn per_sec(count: u64, started: Instant) -> f64 {
    count as f64 / started.elapsed().as_secs_f64().max(1e-9)
}

/// Runs the comparison in `dir` (which gets `filled/`, `loaded/` and
/// `files/`), with `options` for both databases.
pub fn run_bulkload(
    dir: &Path,
    n: u64,
    ops: u64,
    options: &Options,
) -> Result<BulkloadReport, String> {
    fn err(what: &'static str) -> impl Fn(siftdb::Error) -> String {
        move |e| format!("bulkload: {what}: {e}")
    }
    // fillrandom: the load order's puts, then a flush and the background
    // work they caused.
    let order = shuffle(n, LOAD_ORDER_SEED)?;
    let filled = Db::open_with(dir.join("filled"), options.clone()).map_err(err("open"))?;
    let started = Instant::now();
    for &i in &order {
        filled.put(key(2 * i), value(2 * i)).map_err(err("put"))?;
    }
    filled.flush().map_err(err("flush"))?;
    filled.wait_for_background().map_err(err("background"))?;
    let fill_per_sec = per_sec(n, started);
    drop(order);
    filled.compact().map_err(err("compact"))?;

    // TableWriter + ingest: sorted keys into files, then one ingest.
    let files_dir = dir.join("files");
    std::fs::create_dir_all(&files_dir).map_err(|e| format!("bulkload: {e}"))?;
    let per_file = (FILE_BYTES / (KEY_LEN + VALUE_LEN) as u64).max(1);
    let loaded = Db::open_with(dir.join("loaded"), options.clone()).map_err(err("open"))?;
    let started = Instant::now();
    let mut files = Vec::new();
    let mut i = 0;
    while i < n {
        let path = files_dir.join(format!("{:06}.sst", files.len()));
        let mut writer = TableWriter::create(&path, options).map_err(err("create"))?;
        for i in i..(i + per_file).min(n) {
            writer.put(key(2 * i), value(2 * i)).map_err(err("write"))?;
        }
        writer.finish().map_err(err("finish"))?;
        files.push(path);
        i += per_file;
    }
    loaded
        .ingest(&files, IngestOptions::new().move_files(true))
        .map_err(err("ingest"))?;
    let load_per_sec = per_sec(n, started);

    let reads = shuffle(n, READ_ORDER_SEED)?;
    let read = |db: &Db| -> Result<f64, String> {
        let started = Instant::now();
        for g in 0..ops {
            let i = reads
                .get(usize::try_from(g % n.max(1)).unwrap_or(0))
                .copied()
                .unwrap_or(0);
            let got = db.get(key(2 * i)).map_err(err("get"))?;
            if got.as_deref() != Some(&value(2 * i)[..]) {
                return Err(format!("bulkload: key {} read wrong", 2 * i));
            }
        }
        Ok(per_sec(ops, started))
    };
    let read_filled_per_sec = read(&filled)?;
    let read_loaded_per_sec = read(&loaded)?;
    Ok(BulkloadReport {
        n,
        ops,
        fill_per_sec,
        load_per_sec,
        files: files.len(),
        read_filled_per_sec,
        read_loaded_per_sec,
    })
}
