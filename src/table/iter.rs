//! [`TableIter`], a cursor over a table's entries in internal-key order
//! (made by `Table::iter` and `Table::iter_with`, in `scan.rs`).
//!
//! Owns: moving across data blocks, in one of two [`ScanMode`]s — through
//! the block cache (user scans), or in spans of consecutive blocks read
//! with one positioned read each, bypassing the cache (compaction and
//! verify, which read a whole table once and would only evict what point
//! lookups need). The iterator holds a clone of the [`Table`] handle, so it
//! outlives whatever version listed the table.
//! Must never: skip an entry or a block silently — a damaged block is an
//! `Err` from the call that reached it, and the iterator is invalid after.

use std::cmp::Ordering;
use std::collections::BTreeSet;
use std::sync::Arc;

use bytes::Bytes;

use crate::blob::tally::BlobTally;
use crate::error::Result;
use crate::key::{compare_internal_keys, key_head, split_internal_key, user_key_of, ValueKind};
use crate::table::block::Block;
use crate::table::block_iter::BlockIter;
use crate::table::reader::{Span, Table};

/// Bytes read at once by a [`ScanMode::Sequential`] scan: enough that a
/// disk streams, small enough not to matter in memory.
pub const SPAN_BYTES: u64 = 256 << 10;

/// How a [`TableIter`] reads data blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScanMode {
    /// One block at a time through the block cache (and its counters).
    Cached,
    /// Spans of up to [`SPAN_BYTES`] of consecutive blocks, one positioned
    /// read each, every block verified, nothing cached or counted.
    Sequential,
}

/// A cursor over a table's entries. Every moving call returns `Err` on a
/// damaged block and leaves the cursor invalid.
///
/// ```
/// # use siftdb::internals::key::{internal_key, SeqNo, ValueKind};
/// # use siftdb::internals::table::{Table, TableBuilder, TableOptions};
/// # let dir = tempfile::tempdir()?;
/// # let path = dir.path().join("t.sst");
/// # let mut b = TableBuilder::create(&siftdb::internals::fs::OsFileSystem, &path, &TableOptions::default())?;
/// # for k in [b"a", b"b", b"c"] { b.add(&internal_key(k, SeqNo(1), ValueKind::Put), b"v")?; }
/// # b.finish()?;
/// let table = Table::open_path(&path)?;
/// let mut it = table.iter();
/// it.seek(&internal_key(b"b", SeqNo::MAX, ValueKind::Put))?;
/// let mut seen = Vec::new();
/// while it.valid() {
///     seen.push(siftdb::internals::key::user_key_of(it.key()).to_vec());
///     it.next()?;
/// }
/// assert_eq!(seen, [b"b".to_vec(), b"c".to_vec()]);
/// # Ok::<(), siftdb::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct TableIter {
    table: Table,
    mode: ScanMode,
    block_no: usize,
    entries: Option<BlockIter>,
    /// The last span read ([`ScanMode::Sequential`]).
    span: Option<Span>,
    /// The cursor last moved backward: a span read now ends at the block
    /// asked for instead of starting there.
    backward: bool,
    /// Entries of kind blob are shown as puts of the values they point to
    /// (every reader but a compaction, which moves the pointers).
    resolve_blobs: bool,
    /// With `resolve_blobs` off, the blob files whose pointers are
    /// resolved all the same (a compaction's garbage collection).
    resolve_in: Option<Arc<BTreeSet<u64>>>,
    /// The entry the cursor stands on, when it is a blob pointer resolved:
    /// its key with the kind put, and the value read from the blob file.
    resolved: Option<(Vec<u8>, Bytes)>,
    /// Where every blob pointer the cursor stands on is counted (a
    /// compaction's inputs: what it reads of each blob file).
    tally: Option<Arc<BlobTally>>,
}

impl TableIter {
    pub(crate) fn new(table: Table, mode: ScanMode) -> TableIter {
        TableIter {
            table,
            mode,
            block_no: 0,
            entries: None,
            span: None,
            backward: false,
            resolve_blobs: true,
            resolve_in: None,
            resolved: None,
            tally: None,
        }
    }

    /// Shows entries of kind blob as they are stored (the pointer as the
    /// value) instead of resolving them: what a compaction reads, so it
    /// moves pointers rather than values.
    pub fn keep_blob_pointers(mut self) -> TableIter {
        self.resolve_blobs = false;
        self
    }

    /// [`TableIter::keep_blob_pointers`] except for pointers into the blob
    /// files `numbers`, which are resolved (their values move on).
    pub(crate) fn keep_blob_pointers_except(mut self, numbers: Arc<BTreeSet<u64>>) -> TableIter {
        self.resolve_blobs = false;
        self.resolve_in = Some(numbers);
        self
    }

    /// Counts in `tally` every blob pointer the cursor stands on.
    pub(crate) fn tallying_blobs(mut self, tally: Arc<BlobTally>) -> TableIter {
        self.tally = Some(tally);
        self
    }

    /// Resolves the entry the cursor stands on when it is a blob pointer.
    fn resolve_current(&mut self) -> Result<()> {
        let Some(entries) = self.entries.as_ref().filter(|e| e.valid()) else {
            return Ok(());
        };
        let key = entries.key();
        let Some((user_key, tag)) = split_internal_key(key) else {
            return Ok(());
        };
        if tag & 0xff != ValueKind::Blob as u64 {
            return Ok(());
        }
        let inner = &self.table.inner;
        let pointer = entries.value();
        let (file, pointer) = inner
            .blob_for(&pointer)
            .map_err(|e| inner.locate(self.block_no, e))?;
        if let Some(tally) = &self.tally {
            tally.add(&pointer);
        }
        let collected = |numbers: &Arc<BTreeSet<u64>>| numbers.contains(&pointer.file_number);
        if !self.resolve_blobs && !self.resolve_in.as_ref().is_some_and(collected) {
            return Ok(());
        }
        let value = file.read_value(&pointer)?;
        let mut shown = Vec::with_capacity(key.len());
        shown.extend_from_slice(user_key);
        shown.extend_from_slice(&(((tag >> 8) << 8) | ValueKind::Put as u64).to_le_bytes());
        self.resolved = Some((shown, value));
        Ok(())
    }

    /// True when positioned on an entry.
    pub fn valid(&self) -> bool {
        self.entries.as_ref().is_some_and(BlockIter::valid)
    }

    /// The current internal key (empty when not valid).
    pub fn key(&self) -> &[u8] {
        if let Some((key, _)) = &self.resolved {
            return key;
        }
        self.entries
            .as_ref()
            .map(BlockIter::key)
            .unwrap_or_default()
    }

    /// The current value, sharing the block's bytes (empty when not valid).
    pub fn value(&self) -> Bytes {
        if let Some((_, value)) = &self.resolved {
            return value.clone();
        }
        self.entries
            .as_ref()
            .map(BlockIter::value)
            .unwrap_or_default()
    }

    /// Positions on the first entry.
    pub fn seek_to_first(&mut self) -> Result<()> {
        self.backward = false;
        self.guard(|it| {
            it.load(0)?;
            it.skip_exhausted_blocks()
        })
    }

    /// Positions on the first entry ≥ `target` (an internal key); invalid
    /// when every entry is smaller.
    pub fn seek(&mut self, target: &[u8]) -> Result<()> {
        self.backward = false;
        self.seek_from(target)
    }

    /// [`TableIter::seek`] without choosing the direction of span reads.
    fn seek_from(&mut self, target: &[u8]) -> Result<()> {
        self.guard(|it| {
            match it
                .table
                .inner
                .index
                .block_for(key_head(user_key_of(target)), target)
            {
                None => {
                    it.entries = None;
                    Ok(())
                }
                Some(block_no) => {
                    it.load(block_no)?;
                    it.in_block(|entries| entries.seek(target))?;
                    it.skip_exhausted_blocks()
                }
            }
        })
    }

    /// Moves to the next entry; invalid after the last. No-op when invalid.
    pub fn next(&mut self) -> Result<()> {
        self.backward = false;
        self.guard(|it| {
            it.in_block(BlockIter::next)?;
            it.skip_exhausted_blocks()
        })
    }

    /// Positions on the last entry.
    pub fn seek_to_last(&mut self) -> Result<()> {
        self.backward = true;
        self.guard(|it| match it.table.inner.index.len().checked_sub(1) {
            None => {
                it.entries = None;
                Ok(())
            }
            Some(last) => {
                it.load(last)?;
                it.in_block(BlockIter::seek_to_last)?;
                it.skip_exhausted_blocks_back()
            }
        })
    }

    /// Positions on the last entry ≤ `target` (an internal key); invalid
    /// when every entry is larger.
    pub fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        // The steps after it go backward: a span read ends at the target's
        // block.
        self.backward = true;
        self.seek_from(target)?;
        if !self.valid() {
            return self.seek_to_last();
        }
        if compare_internal_keys(self.key(), target) == Ordering::Greater {
            self.prev()?;
        }
        Ok(())
    }

    /// Moves to the previous entry; invalid before the first. No-op when
    /// invalid.
    pub fn prev(&mut self) -> Result<()> {
        self.backward = true;
        self.guard(|it| {
            it.in_block(BlockIter::prev)?;
            it.skip_exhausted_blocks_back()
        })
    }

    /// Steps into the preceding blocks, onto their last entries, while the
    /// current one is used up.
    fn skip_exhausted_blocks_back(&mut self) -> Result<()> {
        while self.entries.as_ref().is_some_and(|e| !e.valid()) {
            let Some(before) = self.block_no.checked_sub(1) else {
                self.entries = None;
                return Ok(());
            };
            self.load(before)?;
            self.in_block(BlockIter::seek_to_last)?;
        }
        Ok(())
    }

    fn guard(&mut self, step: impl FnOnce(&mut Self) -> Result<()>) -> Result<()> {
        self.resolved = None;
        let mut result = step(self);
        if result.is_ok()
            && (self.resolve_blobs || self.resolve_in.is_some() || self.tally.is_some())
        {
            result = self.resolve_current();
        }
        if result.is_err() {
            self.entries = None;
            self.resolved = None;
        }
        result
    }

    /// Runs a step of the current block's cursor, locating its error.
    fn in_block(&mut self, step: impl FnOnce(&mut BlockIter) -> Result<()>) -> Result<()> {
        match &mut self.entries {
            Some(entries) => step(entries).map_err(|e| self.table.inner.locate(self.block_no, e)),
            None => Ok(()),
        }
    }

    /// Block `block_no`, read the scan's way.
    fn block(&mut self, block_no: usize) -> Result<Block> {
        let inner = &self.table.inner;
        match self.mode {
            ScanMode::Cached => inner.data_block(block_no),
            ScanMode::Sequential => {
                let span = match self.span.take() {
                    Some(span) if span.holds(block_no) => span,
                    _ if self.backward => inner.read_span_ending(block_no, SPAN_BYTES)?,
                    _ => inner.read_span(block_no, SPAN_BYTES)?,
                };
                let block = inner.block_in_span(&span, block_no);
                self.span = Some(span);
                block
            }
        }
    }

    /// Loads block `block_no`, positioned on its first entry.
    fn load(&mut self, block_no: usize) -> Result<()> {
        let block = self.block(block_no)?;
        self.block_no = block_no;
        // The previous block's key buffer is reused: a scan crossing
        // blocks allocates no new one.
        let buffer = self
            .entries
            .take()
            .map(BlockIter::into_key_buffer)
            .unwrap_or_default();
        self.entries = Some(block.into_cursor_with(buffer));
        self.in_block(BlockIter::seek_to_first)
    }

    /// Steps into the following blocks while the current one is used up.
    fn skip_exhausted_blocks(&mut self) -> Result<()> {
        while self.entries.as_ref().is_some_and(|e| !e.valid()) {
            let next = self.block_no + 1;
            if next >= self.table.inner.index.len() {
                self.entries = None;
                return Ok(());
            }
            self.load(next)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::OsFileSystem;
    use crate::key::{internal_key, SeqNo, ValueKind};
    use crate::table::{TableBuilder, TableOptions};

    const ENTRIES: u32 = 20_000;

    fn table(dir: &std::path::Path) -> Table {
        let path = dir.join("t.sst");
        let mut builder =
            TableBuilder::create(&OsFileSystem, &path, &TableOptions::default()).unwrap();
        for i in 0..ENTRIES {
            // About a thousand blocks, a few spans.
            let value: Vec<u8> = (0..200u32)
                .flat_map(|j| {
                    i.wrapping_mul(2_654_435_761)
                        .wrapping_add(j * 40_503)
                        .to_le_bytes()
                })
                .take(200)
                .collect();
            builder
                .add(
                    &internal_key(format!("k{i:06}").as_bytes(), SeqNo(1), ValueKind::Put),
                    &value,
                )
                .unwrap();
        }
        builder.finish().unwrap();
        Table::open_path(&path).unwrap()
    }

    /// Walks the whole table one way; returns the keys and how many spans
    /// were read.
    fn walk(table: &Table, backward: bool) -> (Vec<Vec<u8>>, usize) {
        let mut it = TableIter::new(table.clone(), ScanMode::Sequential);
        if backward {
            it.seek_to_last().unwrap();
        } else {
            it.seek_to_first().unwrap();
        }
        let (mut keys, mut spans, mut last_span) = (Vec::new(), 0, None);
        while it.valid() {
            keys.push(it.key().to_vec());
            let span = it.span.as_ref().map(Span::blocks);
            if span != last_span {
                spans += 1;
                last_span = span;
            }
            if backward {
                it.prev().unwrap();
            } else {
                it.next().unwrap();
            }
        }
        (keys, spans)
    }

    #[test]
    fn sequential_scans_read_spans_the_way_they_go() {
        let dir = tempfile::tempdir().unwrap();
        let table = table(dir.path());
        let bytes = std::fs::metadata(dir.path().join("t.sst")).unwrap().len();
        let most = usize::try_from(bytes / SPAN_BYTES).unwrap() + 2;
        let (forward, forward_spans) = walk(&table, false);
        let (mut backward, backward_spans) = walk(&table, true);
        assert_eq!(forward.len(), ENTRIES as usize);
        backward.reverse();
        assert_eq!(backward, forward);
        // A backward span ends at the block asked for: reading spans that
        // start there would take one span per block.
        assert!(
            forward_spans <= most,
            "{forward_spans} spans for {bytes} bytes"
        );
        assert!(
            backward_spans <= most,
            "{backward_spans} spans for {bytes} bytes"
        );
        // A seek for the previous entry from the middle, then back.
        let mut it = TableIter::new(table.clone(), ScanMode::Sequential);
        let middle = internal_key(b"k010000", SeqNo(0), ValueKind::Delete);
        it.seek_for_prev(&middle).unwrap();
        assert_eq!(user_key_of(it.key()), b"k010000");
        let span = it.span.as_ref().map(Span::blocks).unwrap();
        assert_eq!(span.1, it.block_no, "the span ends at the block sought");
        for _ in 0..100 {
            it.prev().unwrap();
        }
        assert_eq!(user_key_of(it.key()), b"k009900");
    }
}
