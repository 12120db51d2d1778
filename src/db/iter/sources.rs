//! The sources a scan or a compaction merges: the cursor trait every
//! source implements, a memtable as a source, disjoint tables (one table,
//! a run, or the picked tables of one level) as one source, and a source
//! that holds only an error.
//!
//! Owns: each source's positioning within its own entries, and moving
//! from one table of a run to the next (or back). Must never: merge
//! sources, hide versions or tombstones (that is the merge's and the
//! scan's work), or swallow a table's read error (it is kept for
//! `status`).

use std::cmp::Ordering;
use std::sync::Arc;

use bytes::Bytes;

use crate::blob::tally::BlobTally;
use crate::db::version::{LiveTable, Version};
use crate::error::{Error, Result};
use crate::key::compare_internal_keys;
use crate::memtable::{Memtable, MemtableIter};
use crate::table::{ScanMode, TableIter};

/// A cursor over internal keys in internal-key order.
pub(crate) trait InternalIterator: Send {
    fn seek_to_first(&mut self);
    /// Positions at the first entry ≥ `target` (an internal key).
    fn seek(&mut self, target: &[u8]);
    fn valid(&self) -> bool;
    fn key(&self) -> &[u8];
    fn value(&self) -> Bytes;
    fn next(&mut self);
    /// Positions at the last entry.
    fn seek_to_last(&mut self);
    /// Positions at the last entry ≤ `target` (an internal key).
    fn seek_for_prev(&mut self, target: &[u8]);
    /// Moves to the previous entry; invalid before the first.
    fn prev(&mut self);
    fn status(&self) -> Result<()>;
    /// Hints the reads a `seek(target)` will make, so that a merge can
    /// have every source's read in flight before it positions the first
    /// (a hint only: nothing moves). Sources that read no files need not.
    fn prefetch_seek(&self, target: &[u8]) {
        let _ = target;
    }
}

/// A memtable as a source.
pub(crate) struct MemSource(MemtableIter);

impl MemSource {
    pub fn new(mem: Arc<Memtable>) -> MemSource {
        MemSource(MemtableIter::new(mem))
    }
}

impl InternalIterator for MemSource {
    fn seek_to_first(&mut self) {
        self.0.seek_to_first()
    }
    fn seek(&mut self, target: &[u8]) {
        self.0.seek(target)
    }
    fn valid(&self) -> bool {
        self.0.valid()
    }
    fn key(&self) -> &[u8] {
        self.0.key()
    }
    fn value(&self) -> Bytes {
        // Copied out: the memtable's arena is not shared as `Bytes`.
        Bytes::copy_from_slice(self.0.value())
    }
    fn next(&mut self) {
        self.0.next()
    }
    fn seek_to_last(&mut self) {
        self.0.seek_to_last()
    }
    fn seek_for_prev(&mut self, target: &[u8]) {
        self.0.seek_for_prev(target)
    }
    fn prev(&mut self) {
        self.0.prev()
    }
    fn status(&self) -> Result<()> {
        Ok(())
    }
}

/// Disjoint tables in key order (a level ≥ 1, or a single table) as one source.
pub(crate) struct TableSource {
    tables: SourceTables,
    mode: ScanMode,
    index: usize,
    current: Option<TableIter>,
    error: Option<Error>,
    /// Show blob pointers as stored (a compaction's inputs), except those
    /// into the listed blob files.
    keep_blob_pointers: Option<Arc<std::collections::BTreeSet<u64>>>,
    /// Where the blob pointers read are counted (a compaction's inputs).
    blob_tally: Option<Arc<BlobTally>>,
}

/// The tables a [`TableSource`] reads, in key order.
enum SourceTables {
    /// One table (a level-0 table, or a compaction input).
    One(Arc<LiveTable>),
    /// Disjoint tables in key order (a compaction's inputs from the level
    /// it writes to).
    Run(Vec<Arc<LiveTable>>),
    /// Tables of one sorted, disjoint level of `version`, by their
    /// positions in it. The version is held once rather than each table:
    /// a scan of a deep level would otherwise add and drop a reference to
    /// dozens of tables, counts that every other reader writes too.
    Level {
        version: Arc<Version>,
        level: usize,
        picked: Positions,
    },
}

/// Positions of tables in a level, ascending.
#[derive(Clone)]
pub(crate) enum Positions {
    /// Every table from one position to another (a scan no filter can
    /// narrow takes the whole run: no per-table work).
    Run(std::ops::Range<usize>),
    /// The tables of a run that the filters did not rule out.
    Listed(Vec<usize>),
}

impl Positions {
    fn get(&self, i: usize) -> Option<usize> {
        match self {
            Positions::Run(run) => run.start.checked_add(i).filter(|&at| at < run.end),
            Positions::Listed(listed) => listed.get(i).copied(),
        }
    }

    pub(super) fn len(&self) -> usize {
        match self {
            Positions::Run(run) => run.len(),
            Positions::Listed(listed) => listed.len(),
        }
    }
}

impl SourceTables {
    fn get(&self, i: usize) -> Option<&LiveTable> {
        match self {
            SourceTables::One(table) => (i == 0).then_some(&**table),
            SourceTables::Run(tables) => tables.get(i).map(|t| &**t),
            SourceTables::Level {
                version,
                level,
                picked,
            } => {
                let at = picked.get(i)?;
                version.levels.get(*level)?.get(at).map(|t| &**t)
            }
        }
    }

    fn len(&self) -> usize {
        match self {
            SourceTables::One(_) => 1,
            SourceTables::Run(tables) => tables.len(),
            SourceTables::Level { picked, .. } => picked.len(),
        }
    }
}

impl TableSource {
    /// One table, read `mode`'s way.
    pub fn new(table: Arc<LiveTable>, mode: ScanMode) -> TableSource {
        TableSource::over(SourceTables::One(table), mode)
    }

    /// `tables`, disjoint and in key order, one after another: to a merge
    /// one source instead of one per table, so each step compares against
    /// one key for all of them.
    pub fn run(tables: Vec<Arc<LiveTable>>, mode: ScanMode) -> TableSource {
        debug_assert!(
            tables.windows(2).all(
                |pair| matches!(pair, [a, b] if a.smallest_user_key() <= b.smallest_user_key())
            ),
            "a run's tables must come in key order"
        );
        TableSource::over(SourceTables::Run(tables), mode)
    }

    /// The tables at positions `picked` of `level` in `version`, a sorted
    /// and disjoint level, one after another.
    pub fn level(
        version: Arc<Version>,
        level: usize,
        picked: Positions,
        mode: ScanMode,
    ) -> TableSource {
        TableSource::over(
            SourceTables::Level {
                version,
                level,
                picked,
            },
            mode,
        )
    }

    fn over(tables: SourceTables, mode: ScanMode) -> TableSource {
        TableSource {
            tables,
            mode,
            index: 0,
            current: None,
            error: None,
            keep_blob_pointers: None,
            blob_tally: None,
        }
    }

    /// Shows entries of kind blob as stored, the pointer as the value (see
    /// [`TableIter::keep_blob_pointers`]): a compaction's inputs. Pointers
    /// into the blob files `collected` are resolved all the same.
    pub fn keeping_blob_pointers(
        mut self,
        collected: Arc<std::collections::BTreeSet<u64>>,
    ) -> TableSource {
        self.keep_blob_pointers = Some(collected);
        self
    }

    /// Counts every blob pointer of the tables read in `tally` (see
    /// [`TableIter::tallying_blobs`]): what a compaction reads of each
    /// blob file.
    pub fn tallying_blobs(mut self, tally: Arc<BlobTally>) -> TableSource {
        self.blob_tally = Some(tally);
        self
    }

    /// Runs a cursor step; an error ends the scan and is kept for `status`.
    fn step(&mut self, f: impl FnOnce(&mut TableIter) -> Result<()>) {
        if let Some(it) = &mut self.current {
            if let Err(e) = f(it) {
                self.error = Some(e);
                self.current = None;
            }
        }
    }

    fn open(&mut self, index: usize, position: impl FnOnce(&mut TableIter) -> Result<()>) {
        self.index = index;
        self.current = None;
        match self.tables.get(index).map(|t| t.readable()) {
            Some(Ok(table)) => {
                let mut iter = table.iter_with(self.mode);
                if let Some(tally) = &self.blob_tally {
                    iter = iter.tallying_blobs(Arc::clone(tally));
                }
                self.current = Some(match &self.keep_blob_pointers {
                    Some(collected) => iter.keep_blob_pointers_except(Arc::clone(collected)),
                    None => iter,
                });
            }
            // A table that could not be opened ends the scan with its error.
            Some(Err(e)) => self.error = Some(e),
            None => {}
        }
        self.step(position);
    }

    /// The first table whose largest key is ≥ `target`: where a seek starts.
    fn table_for(&self, target: &[u8]) -> usize {
        let (mut low, mut high) = (0, self.tables.len());
        while low < high {
            let mid = low + (high - low) / 2;
            let before = self.tables.get(mid).is_some_and(|t| {
                compare_internal_keys(&t.record.largest, target) == Ordering::Less
            });
            if before {
                low = mid + 1;
            } else {
                high = mid;
            }
        }
        low
    }

    /// Moves to following tables while the current one is exhausted.
    fn skip_exhausted(&mut self) {
        while self.current.as_ref().is_some_and(|it| !it.valid()) {
            self.open(self.index + 1, TableIter::seek_to_first);
        }
    }

    /// Moves to preceding tables, onto their last entries, while the
    /// current one is exhausted.
    fn skip_exhausted_back(&mut self) {
        while self.current.as_ref().is_some_and(|it| !it.valid()) {
            match self.index.checked_sub(1) {
                Some(before) => self.open(before, TableIter::seek_to_last),
                None => self.current = None,
            }
        }
    }
}

impl InternalIterator for TableSource {
    fn seek_to_first(&mut self) {
        self.error = None;
        self.open(0, TableIter::seek_to_first);
        self.skip_exhausted();
    }

    fn seek(&mut self, target: &[u8]) {
        self.error = None;
        self.open(self.table_for(target), |it| it.seek(target));
        self.skip_exhausted();
    }

    fn prefetch_seek(&self, target: &[u8]) {
        if let Some(Ok(table)) = self
            .tables
            .get(self.table_for(target))
            .map(|t| t.readable())
        {
            table.prefetch_seek(target);
        }
    }

    fn valid(&self) -> bool {
        self.current.as_ref().is_some_and(|it| it.valid())
    }

    fn key(&self) -> &[u8] {
        self.current.as_ref().map_or(&[], |it| it.key())
    }

    fn value(&self) -> Bytes {
        self.current
            .as_ref()
            .map_or_else(Bytes::new, |it| it.value())
    }

    fn next(&mut self) {
        self.step(TableIter::next);
        self.skip_exhausted();
    }

    fn seek_to_last(&mut self) {
        self.error = None;
        match self.tables.len().checked_sub(1) {
            Some(last) => self.open(last, TableIter::seek_to_last),
            None => self.current = None,
        }
        self.skip_exhausted_back();
    }

    fn seek_for_prev(&mut self, target: &[u8]) {
        self.error = None;
        // The first table whose largest key reaches `target`, or the last
        // table when none does: the answer is in it or before it.
        let Some(last) = self.tables.len().checked_sub(1) else {
            self.current = None;
            return;
        };
        let at = self.table_for(target).min(last);
        self.open(at, |it| it.seek_for_prev(target));
        self.skip_exhausted_back();
    }

    fn prev(&mut self) {
        self.step(TableIter::prev);
        self.skip_exhausted_back();
    }

    fn status(&self) -> Result<()> {
        match &self.error {
            Some(e) => Err(e.duplicate()),
            None => Ok(()),
        }
    }
}

/// A source with nothing in it but an error.
pub(super) struct FailedSource(pub(super) Error);

impl InternalIterator for FailedSource {
    fn seek_to_first(&mut self) {}
    fn seek(&mut self, _target: &[u8]) {}
    fn valid(&self) -> bool {
        false
    }
    fn key(&self) -> &[u8] {
        &[]
    }
    fn value(&self) -> Bytes {
        Bytes::new()
    }
    fn next(&mut self) {}
    fn seek_to_last(&mut self) {}
    fn seek_for_prev(&mut self, _target: &[u8]) {}
    fn prev(&mut self) {}
    fn status(&self) -> Result<()> {
        Err(self.0.duplicate())
    }
}
