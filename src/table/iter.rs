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

use bytes::Bytes;

use crate::error::Result;
use crate::key::{compare_internal_keys, key_head, user_key_of};
use crate::table::block::{Block, BlockIter};
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
}

impl TableIter {
    pub(crate) fn new(table: Table, mode: ScanMode) -> TableIter {
        TableIter {
            table,
            mode,
            block_no: 0,
            entries: None,
            span: None,
        }
    }

    /// True when positioned on an entry.
    pub fn valid(&self) -> bool {
        self.entries.as_ref().is_some_and(BlockIter::valid)
    }

    /// The current internal key (empty when not valid).
    pub fn key(&self) -> &[u8] {
        self.entries
            .as_ref()
            .map(BlockIter::key)
            .unwrap_or_default()
    }

    /// The current value, sharing the block's bytes (empty when not valid).
    pub fn value(&self) -> Bytes {
        self.entries
            .as_ref()
            .map(BlockIter::value)
            .unwrap_or_default()
    }

    /// Positions on the first entry.
    pub fn seek_to_first(&mut self) -> Result<()> {
        self.guard(|it| {
            it.load(0)?;
            it.skip_exhausted_blocks()
        })
    }

    /// Positions on the first entry ≥ `target` (an internal key); invalid
    /// when every entry is smaller.
    pub fn seek(&mut self, target: &[u8]) -> Result<()> {
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
    #[expect(
        clippy::should_implement_trait,
        reason = "a fallible cursor step, not an Iterator"
    )]
    pub fn next(&mut self) -> Result<()> {
        self.guard(|it| {
            it.in_block(BlockIter::next)?;
            it.skip_exhausted_blocks()
        })
    }

    /// Positions on the last entry.
    pub fn seek_to_last(&mut self) -> Result<()> {
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
        self.seek(target)?;
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
        let result = step(self);
        if result.is_err() {
            self.entries = None;
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
