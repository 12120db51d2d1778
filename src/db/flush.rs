//! Turning memtables into level-0 tables, and opening tables as live ones.
//!
//! Owns: building a table from a sorted stream of entries (with the filter
//! the policy chooses for its level, [`table_options_for`]), the flush of
//! the oldest immutable memtable, and the manifest update that follows it.
//! Must never: name a table in the manifest before its file is synced, or
//! remove a log before a durable manifest no longer needs it.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use crate::blob::blob_file_name;
use crate::db::blob_garbage::{with_edit, BlobEdit};
use crate::db::blob_output::BlobOutput;
use crate::db::inner::DbInner;
use crate::db::pacing::Pacer;
use crate::db::super_version::SuperVersion;
use crate::db::version::{LiveTable, Version};
use crate::error::{Error, Result};
use crate::events::{Event, FlushEvent};
use crate::filename::{table_file_name, wal_file_name};
use crate::fs::FileSystem;
use crate::manifest::TableRecord;
use crate::memtable::Memtable;
use crate::options::Options;
use crate::range_tombstone::{key_successor, FragmentedTombstones};
use crate::table::{ReadContext, Table, TableBuilder, TableInfo, TableOptions};
use siftdb_filter::LevelTables;

/// The options a table written to `level` is built with: the database's,
/// with the filter its policy chooses for a tree shaped as `tree` (the tree
/// as it will be with the new table in place).
///
/// Level-0 tables are written for reads from memory: a flush's table
/// holds the newest data, is read while its pages are still in the
/// operating system's cache, and is rewritten by the next level-0
/// compaction, usually within minutes. So its blocks restart prefix
/// compression every [`LEVEL0_RESTART_INTERVAL`] entries instead of 16 (a
/// lookup scans half as many entries after its binary search; about 1% more
/// bytes, written once), and carry no page padding (the padding that keeps
/// a block in one page, about half an entry per 4 KiB block, would be
/// written for little). Deeper levels hold most of the bytes, are rewritten
/// again and again, and are what is read from disk.
pub(crate) fn table_options_for(
    opts: &Options,
    tree: &[LevelTables],
    level: usize,
) -> TableOptions {
    let defaults = TableOptions::from(opts);
    // The bottommost level: below level 0, with no table in a deeper level.
    let bottommost = level > 0 && tree.iter().skip(level + 1).all(|below| below.tables == 0);
    let (compression, zstd_dictionary_bytes) = opts.compression_for(level, bottommost);
    TableOptions {
        compression,
        zstd_dictionary_bytes,
        page_aligned_blocks: level > 0,
        restart_interval: if level == 0 {
            LEVEL0_RESTART_INTERVAL
        } else {
            defaults.restart_interval
        },
        ..defaults
    }
    .with_filter(opts.filter_policy.choose(tree, level))
}

/// Entries between restart points in a level-0 table's data blocks (see
/// [`table_options_for`]). With 2 threads reading 1M benchmark keys, all in
/// level 0: readrandom +9%, seekrandom +13%, mixed +10% against 16, at 1.0%
/// more table bytes (docs/design.md, "Reading tables").
pub(crate) const LEVEL0_RESTART_INTERVAL: usize = 8;

/// Opens the table a manifest record names (its filter and index into
/// memory); a missing file is corruption.
pub(crate) fn open_live_table(
    tables: &Arc<ReadContext>,
    dir: &Path,
    record: TableRecord,
) -> Result<Arc<LiveTable>> {
    open_live_table_with(tables, dir, record, Table::open)
}

/// [`open_live_table`] through `open_table` (a read-only database holds
/// its files open: `Table::open_held`).
pub(crate) fn open_live_table_with(
    tables: &Arc<ReadContext>,
    dir: &Path,
    record: TableRecord,
    open_table: fn(&Arc<ReadContext>, &Path) -> Result<Table>,
) -> Result<Arc<LiveTable>> {
    let name = table_file_name(record.file_number);
    let path = dir.join(&name);
    let missing =
        || Error::corruption(format!("table {name}"), "named by the manifest but missing");
    if !tables.fs.exists(&path) {
        return Err(missing());
    }
    // Gone between the check and the open (a writer's compaction removed
    // it under a read-only open): missing too, not an I/O failure, so the
    // read-only open sees the manifest moved and tries again.
    let table = open_table(tables, &path).map_err(|e| match e {
        Error::Io { ref source, .. } if source.kind() == std::io::ErrorKind::NotFound => missing(),
        e => e,
    })?;
    if table.file_size() != record.file_size {
        return Err(Error::corruption(
            format!("table {name}"),
            format!(
                "{} bytes, the manifest says {}",
                table.file_size(),
                record.file_size
            ),
        ));
    }
    Ok(Arc::new(LiveTable::new(record, Ok(table))))
}

/// A sorted stream of `(internal key, value)` entries lent one at a time,
/// so a table can be built without copying each entry out of its source.
pub(crate) trait EntrySource {
    /// The next entry, `None` at the end, or the error that ended the stream.
    fn next_entry(&mut self) -> Option<Result<(&[u8], &[u8])>>;

    /// False while the entries next to come are more versions of the user
    /// key last given: a table must not end there (a level below 0 keeps
    /// each user key in one table).
    fn at_key_boundary(&self) -> bool {
        true
    }
}

/// A memtable's entries, borrowed in place (for `'a`).
struct MemtableEntries<'a, I>(I, std::marker::PhantomData<&'a [u8]>);

impl<'a, I: Iterator<Item = (&'a [u8], &'a [u8])>> EntrySource for MemtableEntries<'a, I> {
    fn next_entry(&mut self) -> Option<Result<(&[u8], &[u8])>> {
        self.0.next().map(Ok)
    }
}

/// Range tombstones to hand out to the tables a stream of entries is cut
/// into: each table takes the fragments from where the previous one's
/// stopped up to the successor of its own last key (the last table: all
/// that remain), so together the tables cover every tombstone, with no gap
/// between two tables' key ranges for a key to fall into.
pub(crate) struct TombstoneCuts {
    list: FragmentedTombstones,
    /// Where the next table's share starts (`None`: nothing remains).
    from: Option<Vec<u8>>,
    /// The largest key the last table's bounds may claim (a compaction's:
    /// the largest key of its inputs, past which the level's next table
    /// may start).
    last_limit: Option<Vec<u8>>,
}

impl TombstoneCuts {
    pub(crate) fn new(list: FragmentedTombstones, last_limit: Option<Vec<u8>>) -> TombstoneCuts {
        TombstoneCuts {
            list,
            from: Some(Vec::new()),
            last_limit,
        }
    }

    /// The share of a table whose last key is `last_user_key`, and the
    /// largest key its bounds may claim; `None`: the last table, which
    /// takes what remains.
    fn take(&mut self, last_user_key: Option<&[u8]>) -> (FragmentedTombstones, Option<Vec<u8>>) {
        let Some(from) = self.from.take() else {
            return (FragmentedTombstones::default(), None);
        };
        let until = last_user_key.and_then(key_successor);
        let share = self.list.clipped(&from, until.as_deref());
        self.from = until;
        let limit = match last_user_key {
            Some(last) => Some(last.to_vec()),
            None => self.last_limit.clone(),
        };
        (share, limit)
    }
}

/// How [`build_table`] sizes and paces one output.
#[derive(Clone, Copy, Default)]
pub(crate) struct OutputLimits<'a> {
    /// Stop after this many bytes (callers that split output must hold one
    /// version per user key, so a cut never separates a key's versions).
    pub stop_after_bytes: Option<u64>,
    /// Take the bytes written from this bucket as they are written
    /// (`Options::compaction_bytes_per_sec`, `Options::rate_limiter`).
    pub pacer: Option<&'a Pacer>,
    /// Puts with values of at least this many bytes go to a blob file
    /// beside the table (`Options::blob_threshold`; `blob_output.rs`).
    pub blob_threshold: Option<usize>,
}

/// The bytes written between two asks of a [`Pacer`].
const PACED_BYTES: u64 = 64 << 10;

/// Streams sorted `(internal key, value)` entries into table `number`,
/// within `limits`, with its share of `tombstones`; returns its manifest
/// record (level left at 0) and what its builder reported, or `None` when
/// it would be empty.
///
/// A failure removes the partial file: it must not hold the space that ran
/// out, nor linger until the next open.
pub(crate) fn build_table(
    fs: &dyn FileSystem,
    dir: &Path,
    options: &TableOptions,
    number: u64,
    entries: &mut dyn EntrySource,
    limits: OutputLimits<'_>,
    tombstones: Option<&mut TombstoneCuts>,
) -> Result<Option<(TableRecord, TableInfo)>> {
    let path = dir.join(table_file_name(number));
    let built = write_table(fs, &path, options, number, entries, limits, tombstones);
    if built.is_err() {
        // The blob file beside it too, if it got one.
        for path in [path, dir.join(blob_file_name(number))] {
            if fs.exists(&path) {
                let _ = fs.remove(&path);
            }
        }
    }
    built
}

fn write_table(
    fs: &dyn FileSystem,
    path: &Path,
    options: &TableOptions,
    number: u64,
    entries: &mut dyn EntrySource,
    limits: OutputLimits<'_>,
    tombstones: Option<&mut TombstoneCuts>,
) -> Result<Option<(TableRecord, TableInfo)>> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut blobs = BlobOutput::new(limits.blob_threshold, number);
    let mut builder: Option<TableBuilder> = None;
    let mut cut = false;
    let mut paced = 0u64;
    while let Some(entry) = entries.next_entry() {
        let (key, value) = entry?;
        let builder = match &mut builder {
            Some(b) => b,
            None => builder.insert(TableBuilder::create(fs, path, options)?),
        };
        let (key, value) = blobs.entry(fs, dir, key, value)?;
        builder.add(key, value)?;
        let written = builder.estimated_file_size();
        if let Some(pacer) = limits.pacer {
            if written.saturating_sub(paced) >= PACED_BYTES {
                pacer.take(written - paced);
                paced = written;
            }
        }
        if limits
            .stop_after_bytes
            .is_some_and(|limit| written >= limit)
            && entries.at_key_boundary()
        {
            cut = true;
            break;
        }
    }
    if let Some(tombstones) = tombstones {
        let last = builder
            .as_ref()
            .filter(|_| cut)
            .map(|b| b.last_user_key().to_vec());
        let (share, largest_limit) = tombstones.take(last.as_deref());
        if !share.is_empty() {
            let builder = match &mut builder {
                Some(b) => b,
                None => builder.insert(TableBuilder::create(fs, path, options)?),
            };
            builder.set_range_tombstones(share, largest_limit);
        }
    }
    let Some(builder) = builder else {
        return Ok(None);
    };
    // The blob file is synced before the table that points into it.
    let blob = blobs.finish()?;
    let mut info = builder.finish()?;
    info.blob = blob;
    // The table's last bytes (under PACED_BYTES, or all of a small table)
    // pass the limiter too: a shared limit counts every byte written.
    if let Some(pacer) = limits.pacer {
        pacer.take(info.file_size.saturating_sub(paced));
    }
    Ok(Some((table_record(number, 0, &info), info)))
}

/// The manifest record of table `number` at `level`, as its builder
/// finished it.
pub(crate) fn table_record(number: u64, level: u32, info: &TableInfo) -> TableRecord {
    TableRecord {
        // Set to the table's keyspace when the manifest is written.
        keyspace: 0,
        level,
        file_number: number,
        file_size: info.file_size,
        entries: info.entries,
        smallest: info.smallest.to_vec(),
        largest: info.largest.to_vec(),
        min_seq: info.min_seq,
        max_seq: info.max_seq,
    }
}

/// Writes a whole memtable as level-0 table `number` of the tree `version`
/// (removed again if it cannot be opened); returns it with what its builder
/// reported.
pub(crate) fn write_level0_table(
    tables: &Arc<ReadContext>,
    dir: &Path,
    opts: &Options,
    version: &Version,
    number: u64,
    mem: &Memtable,
    pacer: Option<&Pacer>,
) -> Result<Option<(Arc<LiveTable>, TableInfo)>> {
    let mut tree = version.level_tables();
    if tree.is_empty() {
        tree.push(LevelTables::default());
    }
    if let Some(level0) = tree.first_mut() {
        level0.tables += 1;
        level0.keys += mem.len() as u64;
    }
    let options = table_options_for(opts, &tree, 0);
    let mut entries = MemtableEntries(mem.iter(), std::marker::PhantomData);
    let mut tombstones = mem
        .range_tombstones()
        .map(|list| TombstoneCuts::new(FragmentedTombstones::clone(&list), None));
    let built = build_table(
        tables.fs.as_ref(),
        dir,
        &options,
        number,
        &mut entries,
        OutputLimits {
            pacer,
            blob_threshold: opts.blob_threshold,
            ..OutputLimits::default()
        },
        tombstones.as_mut(),
    )?;
    let Some((record, info)) = built else {
        return Ok(None);
    };
    open_live_table(tables, dir, record)
        .map(|table| Some((table, info)))
        .inspect_err(|_| {
            let _ = tables.fs.remove(&dir.join(table_file_name(number)));
        })
}

/// While it lives, the tables a flush or compaction writes are protected
/// from the orphan removal that failed work on the other background lane
/// runs (they are named by no manifest until installed).
pub(crate) struct PendingOutputs<'a> {
    inner: &'a DbInner,
    mark: u64,
}

impl<'a> PendingOutputs<'a> {
    pub(crate) fn begin(inner: &'a DbInner) -> PendingOutputs<'a> {
        let mark = inner.versions.lock().begin_outputs();
        PendingOutputs { inner, mark }
    }
}

impl Drop for PendingOutputs<'_> {
    fn drop(&mut self) {
        self.inner.versions.lock().end_outputs(self.mark);
    }
}

/// Flushes the oldest immutable memtable of any keyspace (the one whose
/// log is oldest, so logs go as early as they can), if any. Returns
/// whether it did.
pub(crate) fn flush_oldest(inner: &DbInner) -> Result<bool> {
    let oldest = inner
        .trees
        .load()
        .iter()
        .filter_map(|tree| {
            let sv = tree.current.load_full();
            let log = sv.imm.last()?.log_number;
            Some((log, Arc::clone(tree), sv))
        })
        .min_by_key(|(log, ..)| *log);
    let Some((_, tree, sv)) = oldest else {
        return Ok(false);
    };
    let Some(oldest) = sv.imm.last().cloned() else {
        return Ok(false);
    };
    let started = Instant::now();
    let _pending = PendingOutputs::begin(inner);
    let number = inner.versions.lock().new_file_number();
    let table = write_level0_table(
        &inner.tables,
        &inner.dir,
        &tree.opts.load(),
        &sv.version,
        number,
        &oldest.mem,
        inner.flush_pacer.as_ref(),
    )?;
    let mut blob_edit = BlobEdit::default();
    let added: Vec<_> = table
        .map(|(table, info)| {
            inner.counters.filter_builds.record(&info);
            blob_edit.added.extend(info.blob);
            table
        })
        .into_iter()
        .collect();

    let written: u64 = added.iter().map(|t| t.record.file_size).sum();
    let new_table = added.first().map(|t| t.metadata(&tree.name));
    let mut versions = inner.versions.lock();
    let current = tree.current.load_full();
    let version = Arc::new(with_edit(current.version.apply(&[], added), &blob_edit));
    let remaining: Vec<_> = current
        .imm
        .iter()
        .filter(|m| !Arc::ptr_eq(&m.mem, &oldest.mem))
        .cloned()
        .collect();
    let flushed = SuperVersion {
        mem: current.mem.clone(),
        imm: remaining,
        version,
    };
    inner.persist(
        &mut versions,
        Some((&tree, &flushed.version, flushed.oldest_log())),
    )?;
    tree.current.store(Arc::new(flushed));
    // Logs older than every keyspace's oldest memtable are now fully in
    // tables; a log that cannot be removed now goes later.
    let obsolete = versions.take_obsolete_logs();
    drop(versions);
    remove_logs(inner, &obsolete);
    inner.counters.flushes.fetch_add(1, Ordering::Relaxed);
    inner
        .counters
        .flush_bytes_written
        .fetch_add(written, Ordering::Relaxed);
    inner.latency.flush_nanos.record_duration(started.elapsed());
    inner.latency.flush_bytes.record(written);
    inner.events.emit(|| {
        Event::Flush(FlushEvent {
            keyspace: tree.name.clone(),
            table: new_table,
            duration: started.elapsed(),
        })
    });
    Ok(true)
}

/// Removes the files of `logs` (best effort: what stays goes at the next
/// open, or with the next orphan removal).
pub(crate) fn remove_logs(inner: &DbInner, logs: &[u64]) {
    for &number in logs {
        let path = inner.path_of(&wal_file_name(number));
        if inner.fs.exists(&path) {
            let _ = inner.fs.remove(&path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn level0_tables_restart_more_often_and_are_not_page_padded() {
        let opts = Options::default();
        let tree = vec![LevelTables::default(); 3];
        let level0 = table_options_for(&opts, &tree, 0);
        assert_eq!(level0.restart_interval, LEVEL0_RESTART_INTERVAL);
        assert!(!level0.page_aligned_blocks);
        for level in [1, 2] {
            let deeper = table_options_for(&opts, &tree, level);
            assert_eq!(
                deeper.restart_interval,
                TableOptions::default().restart_interval
            );
            assert!(deeper.page_aligned_blocks);
        }
    }
}
