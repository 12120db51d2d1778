//! [`TableIter`], a cursor over a table's entries in internal-key order,
//! and the full-table check behind [`Table::verify`].
//!
//! Owns: moving across data blocks; the iterator holds a clone of the
//! [`Table`] handle, so it outlives whatever version listed the table.
//! Must never: skip an entry or a block silently — a damaged block is an
//! `Err` from the call that reached it, and the iterator is invalid after.
#![deny(clippy::unwrap_used, clippy::indexing_slicing, clippy::panic)]

use std::cmp::Ordering;

use bytes::Bytes;

use crate::error::Result;
use crate::filter::{hash_key, FilterView};
use crate::key::{compare_internal_keys, parse_internal_key, user_key_of, SeqNo, ValueKind};
use crate::table::block::{Block, BlockIter};
use crate::table::format::{BlockKind, Checksum};
use crate::table::reader::{FilterStatus, Severity, Table, VerifyProblem};

/// A cursor over a table's entries. Every moving call returns `Err` on a
/// damaged block and leaves the cursor invalid.
///
/// ```
/// # use siftdb::key::{internal_key, SeqNo, ValueKind};
/// # use siftdb::table::{Table, TableBuilder, TableOptions};
/// # let dir = tempfile::tempdir()?;
/// # let path = dir.path().join("t.sst");
/// # let mut b = TableBuilder::create(&siftdb::fs::OsFileSystem, &path, &TableOptions::default())?;
/// # for k in [b"a", b"b", b"c"] { b.add(&internal_key(k, SeqNo(1), ValueKind::Put), b"v")?; }
/// # b.finish()?;
/// let table = Table::open_path(&path)?;
/// let mut it = table.iter();
/// it.seek(&internal_key(b"b", SeqNo::MAX, ValueKind::Put))?;
/// let mut seen = Vec::new();
/// while it.valid() {
///     seen.push(siftdb::key::user_key_of(it.key()).to_vec());
///     it.next()?;
/// }
/// assert_eq!(seen, [b"b".to_vec(), b"c".to_vec()]);
/// # Ok::<(), siftdb::Error>(())
/// ```
#[derive(Debug, Clone)]
pub struct TableIter {
    table: Table,
    block_no: usize,
    entries: Option<BlockIter>,
}

impl TableIter {
    pub(crate) fn new(table: Table) -> TableIter {
        TableIter {
            table,
            block_no: 0,
            entries: None,
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

    /// The current value, sharing the table's map (empty when not valid).
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
        self.guard(|it| match it.table.inner.index.block_for(target) {
            None => {
                it.entries = None;
                Ok(())
            }
            Some(block_no) => {
                it.load(block_no)?;
                it.in_block(|entries| entries.seek(target))?;
                it.skip_exhausted_blocks()
            }
        })
    }

    /// Moves to the next entry; invalid after the last. No-op when invalid.
    #[allow(clippy::should_implement_trait)] // a fallible cursor step, not an Iterator
    pub fn next(&mut self) -> Result<()> {
        self.guard(|it| {
            it.in_block(BlockIter::next)?;
            it.skip_exhausted_blocks()
        })
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

    /// Loads block `block_no`, positioned on its first entry.
    fn load(&mut self, block_no: usize) -> Result<()> {
        let block = self.table.inner.data_block(block_no)?;
        self.block_no = block_no;
        self.entries = Some(block.into_cursor());
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

/// Totals of a full scan, compared with the properties block at the end.
#[derive(Default)]
struct ScanTotals {
    entries: u64,
    deletions: u64,
    distinct_user_keys: u64,
    min_seq: Option<SeqNo>,
    max_seq: SeqNo,
    first_key: Option<Vec<u8>>,
    last_key: Option<Vec<u8>>,
    out_of_order: bool,
    filter_misses: u64,
}

impl ScanTotals {
    /// Checks a block's structure and adds every entry.
    fn add_block(&mut self, block: Block, filter: Option<&FilterView<Bytes>>) -> Result<()> {
        block.check_structure()?;
        let mut entries = block.into_cursor();
        entries.seek_to_first()?;
        while entries.valid() {
            let parsed = parse_internal_key(entries.key())?;
            self.add(entries.key(), parsed.seq, parsed.kind, filter);
            entries.next()?;
        }
        Ok(())
    }

    fn add(&mut self, key: &[u8], seq: SeqNo, kind: ValueKind, filter: Option<&FilterView<Bytes>>) {
        let user_key = user_key_of(key);
        if let Some(last) = &self.last_key {
            if compare_internal_keys(last, key) != Ordering::Less {
                self.out_of_order = true;
            }
        }
        let new_user_key = self
            .last_key
            .as_deref()
            .is_none_or(|last| user_key_of(last) != user_key);
        if new_user_key {
            self.distinct_user_keys += 1;
            if filter.is_some_and(|f| !f.contains_hash(hash_key(user_key))) {
                self.filter_misses += 1;
            }
        }
        self.entries += 1;
        if kind == ValueKind::Delete {
            self.deletions += 1;
        }
        self.min_seq = Some(self.min_seq.map_or(seq, |m| m.min(seq)));
        self.max_seq = self.max_seq.max(seq);
        if self.first_key.is_none() {
            self.first_key = Some(key.to_vec());
        }
        let last = self.last_key.get_or_insert_with(Vec::new);
        last.clear();
        last.extend_from_slice(key);
    }
}

/// See [`Table::verify`].
pub(crate) fn verify_table(table: &Table) -> Vec<VerifyProblem> {
    let inner = &table.inner;
    let footer = inner.footer();
    let mut problems = Vec::new();
    let filter_offset = footer.filter.map(|h| h.offset).unwrap_or_default();
    // Index, properties and filter were verified at open; their checksums
    // are recomputed so that verify vouches for every block.
    let metadata = [
        (BlockKind::Index, Some(footer.index)),
        (BlockKind::Properties, Some(footer.properties)),
        (BlockKind::Filter, footer.filter),
    ];
    for (kind, handle) in metadata {
        let Some(handle) = handle else { continue };
        let damaged_filter = match inner.filter_status() {
            FilterStatus::Corrupt(reason) if kind == BlockKind::Filter => Some(reason.clone()),
            _ => None,
        };
        let detail = match damaged_filter {
            Some(reason) => Some(format!("{reason}; every key may match")),
            None => inner.recheck(kind, handle).err().map(|e| e.to_string()),
        };
        if let Some(detail) = detail {
            problems.push(VerifyProblem {
                block: kind,
                offset: handle.offset,
                detail,
                // A damaged filter only costs reads; it never changes an answer.
                severity: if kind == BlockKind::Filter {
                    Severity::Warning
                } else {
                    Severity::Error
                },
            });
        }
    }
    let mut error = |block, offset, detail: String| {
        problems.push(VerifyProblem {
            block,
            offset,
            detail,
            severity: Severity::Error,
        })
    };

    let mut totals = ScanTotals::default();
    let mut sound = true;
    for (block_no, handle) in inner.index.handles().iter().enumerate() {
        let offset = handle.offset;
        let scanned = inner
            .read_data_block(block_no, Checksum::Verify)
            .and_then(|block| {
                totals
                    .add_block(block, inner.filter())
                    .map_err(|e| inner.locate(block_no, e))
            });
        if let Err(e) = scanned {
            error(BlockKind::Data, offset, e.to_string());
            // Order across the damaged block is unknown; restart the chain.
            totals.last_key = None;
            sound = false;
            continue;
        }
        if totals.last_key.as_deref() != Some(inner.index.separator(block_no)) {
            error(
                BlockKind::Index,
                footer.index.offset,
                format!("separator of data block {block_no} is not its last key"),
            );
        }
        if totals.out_of_order {
            error(
                BlockKind::Data,
                offset,
                "first key does not sort after the previous block's last key".into(),
            );
            totals.out_of_order = false;
        }
    }
    if totals.filter_misses > 0 {
        error(
            BlockKind::Filter,
            filter_offset,
            format!(
                "filter rules out {} user keys the table holds",
                totals.filter_misses
            ),
        );
    }
    if sound {
        let p = inner.properties();
        let counted = (
            totals.entries,
            totals.deletions,
            totals.distinct_user_keys,
            totals.min_seq.unwrap_or_default(),
            totals.max_seq,
        );
        let claimed = (
            p.entries,
            p.deletions,
            p.distinct_user_keys,
            p.min_seq,
            p.max_seq,
        );
        let same_bounds = totals.first_key.as_deref() == Some(p.smallest.as_ref())
            && totals.last_key.as_deref() == Some(p.largest.as_ref());
        if counted != claimed || !same_bounds {
            error(
                BlockKind::Properties,
                footer.properties.offset,
                format!("data holds (entries, deletions, distinct keys, min seq, max seq) = {counted:?}, properties say {claimed:?}, or the key bounds differ"),
            );
        }
    }
    problems
}
