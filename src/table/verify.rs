//! The full-table check behind [`Table::verify`].
//!
//! Owns: what "sound" means for a table — every block's checksum, every
//! data block's structure, key order across blocks, separators equal to
//! each block's last key, properties that match the data, and filters that
//! hold every user key (the point filter its key or prefix entries, the
//! range filter the key itself).
//! Must never: stop at the first problem (it reports all of them), or call
//! a damaged filter, or one of a kind this build does not read, an error —
//! it only costs reads, never an answer.

use std::cmp::Ordering;

use crate::error::Result;
use crate::key::{compare_internal_keys, parse_internal_key, user_key_of, SeqNo, ValueKind};
use crate::table::block::Block;
use crate::table::format::BlockKind;
use crate::table::get::point_hash;
use crate::table::iter::SPAN_BYTES;
use crate::table::reader::{FilterStatus, Span, Table, TableInner};
use crate::table::scan_filters::ScanFilters;
use siftdb_filter::hash_key;

/// How bad a problem `verify` found (a `VerifyProblem`) is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    /// Reads stay correct but slower (a damaged filter).
    Warning,
    /// Some reads fail with `Corruption`, or the table contradicts itself.
    Error,
}

/// One problem found by [`Table::verify`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyProblem {
    /// The block the problem is in.
    pub block: BlockKind,
    /// The block's file offset.
    pub offset: u64,
    /// What is wrong.
    pub detail: String,
    /// Whether reads are affected.
    pub severity: Severity,
}

impl Table {
    /// Checks everything, reading the file again (the bytes on disk now,
    /// not those read at open; the block cache is neither used nor filled):
    /// every block's checksum, every data block's structure, the
    /// order of every key across blocks, the index separators, the
    /// properties against the data, and that the filter holds every user key.
    /// Returns every problem found (empty when the table is sound).
    pub fn verify(&self) -> Vec<VerifyProblem> {
        verify_table(self)
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
    range_filter_misses: u64,
}

/// The filters a scan of the data checks every user key against.
#[derive(Clone, Copy)]
struct Filters<'t> {
    inner: &'t TableInner,
    scan: &'t ScanFilters,
}

impl Filters<'_> {
    fn check(&self, user_key: &[u8], totals: &mut ScanTotals) {
        if let Some(filter) = self.inner.filter() {
            let whole = hash_key(user_key);
            let point = point_hash(self.scan, user_key, whole);
            // The key's prefix entry, when the extractor is trusted.
            let prefix = self.scan.prefix_entry(user_key);
            let missing = point
                .iter()
                .chain(&prefix)
                .any(|&h| !filter.contains_hash(h));
            if missing {
                totals.filter_misses += 1;
            }
        }
        if self.scan.range().is_some_and(|r| !r.may_contain(user_key)) {
            totals.range_filter_misses += 1;
        }
    }
}

impl ScanTotals {
    /// Checks a block's structure and adds every entry.
    fn add_block(&mut self, block: Block, filters: Filters<'_>) -> Result<()> {
        block.check_structure()?;
        let mut entries = block.into_cursor();
        entries.seek_to_first()?;
        while entries.valid() {
            let parsed = parse_internal_key(entries.key())?;
            self.add(entries.key(), parsed.seq, parsed.kind, filters);
            entries.next()?;
        }
        Ok(())
    }

    fn add(&mut self, key: &[u8], seq: SeqNo, kind: ValueKind, filters: Filters<'_>) {
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
            filters.check(user_key, self);
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

/// Data block `block_no` read from the file (in spans of consecutive
/// blocks; when a span cannot be read, the block alone), verified.
fn block_from_file(inner: &TableInner, span: &mut Option<Span>, block_no: usize) -> Result<Block> {
    let current = match span.take() {
        Some(s) if s.holds(block_no) => s,
        _ => match inner.read_span(block_no, SPAN_BYTES) {
            Ok(s) => s,
            // A short or failing file: read this block alone, so the blocks
            // before the damage still verify one by one.
            Err(_) => inner.read_span(block_no, 0)?,
        },
    };
    let block = inner.block_in_span(&current, block_no);
    *span = Some(current);
    block
}

/// See [`Table::verify`].
fn verify_table(table: &Table) -> Vec<VerifyProblem> {
    let inner = &table.inner;
    let footer = inner.footer();
    let mut problems = Vec::new();
    let filter_offset = footer.filter.map(|h| h.offset).unwrap_or_default();
    // Index, properties and filter were verified at open; their checksums
    // are recomputed so that verify vouches for every block.
    let range_filter = inner.properties().range_filter.map(|r| r.handle);
    let metadata = [
        (BlockKind::Index, Some(footer.index)),
        (BlockKind::Properties, Some(footer.properties)),
        (BlockKind::Filter, footer.filter),
        (BlockKind::RangeFilter, range_filter),
        (
            BlockKind::RangeTombstones,
            inner.properties().range_tombstones,
        ),
    ];
    for (kind, handle) in metadata {
        let Some(handle) = handle else { continue };
        let is_filter = matches!(kind, BlockKind::Filter | BlockKind::RangeFilter);
        let damaged_filter = match (kind, inner.filter_status()) {
            (BlockKind::RangeFilter, _) => inner.scan.range_error().map(str::to_string),
            (
                BlockKind::Filter,
                FilterStatus::Corrupt(reason) | FilterStatus::UnknownKind(reason),
            ) => Some(reason.clone()),
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
                severity: if is_filter {
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
    let filters = Filters {
        inner,
        scan: &inner.scan,
    };
    let mut sound = true;
    let mut span = None;
    for (block_no, handle) in inner.index.handles().iter().enumerate() {
        let offset = handle.offset;
        let scanned = block_from_file(inner, &mut span, block_no).and_then(|block| {
            totals
                .add_block(block, filters)
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
    if totals.range_filter_misses > 0 {
        error(
            BlockKind::RangeFilter,
            range_filter.map(|h| h.offset).unwrap_or_default(),
            format!(
                "range filter rules out {} user keys the table holds",
                totals.range_filter_misses
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
