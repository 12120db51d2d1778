//! A table's scans: [`Table::iter`] and [`Table::iter_with`] (the cursor
//! is `iter.rs`'s), [`Table::scan_may_match`], and its range filter as tools
//! see it.
//!
//! Owns: the `Table` methods of a scan — its cursor, the questions asked of
//! the scan filters (`scan_filters.rs`; the reader reads the range filter
//! block at open), and the hint a seek gives before it reads its data block.
//! Must never: rule a table out for a range that holds one of its keys
//! (the rules are `ScanFilters`').

use std::ops::Bound;

use crate::key::{key_head, user_key_of};
use crate::table::iter::{ScanMode, TableIter};
use crate::table::reader::{FilterStatus, Table};
use crate::table::scan_filters::PrefixProbe;
use siftdb_filter::range::RangeFilterView;

impl Table {
    /// Hints the operating system to start reading the data block a seek
    /// to `target` (an internal key) will read — when this database's
    /// recent block reads reached the device and the block cache does not
    /// hold the block — so a scan that positions several tables waits for
    /// their reads together instead of one after another. A hint only: no
    /// counter moves, no answer changes, nothing fails.
    pub(crate) fn prefetch_seek(&self, target: &[u8]) {
        let inner = &*self.inner;
        if !inner.context().file_reads_are_slow() {
            return;
        }
        let head = key_head(user_key_of(target));
        if let Some(block_no) = inner.index.block_for(head, target) {
            inner.will_need_block(block_no);
        }
    }

    /// Whether the table may hold a key within the bounds, as its filters
    /// see it: the point filter about `prefix` (only when the table was
    /// built with the probe's extractor), then the range filter when both
    /// bounds are given. `true` when neither can tell. Counts each question
    /// asked and each table ruled out (`prefix_filter_*`, `range_filter_*`).
    pub fn scan_may_match(
        &self,
        prefix: Option<&PrefixProbe<'_>>,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
    ) -> bool {
        let inner = &*self.inner;
        inner.scan.may_match(
            inner.filter(),
            inner.properties(),
            &inner.context().counters,
            prefix,
            (start, end),
        )
    }

    /// The verified range filter, held in memory; `None` when the table has
    /// none or it failed its checks (see [`Table::range_filter_status`]).
    pub fn range_filter_view(&self) -> Option<&RangeFilterView<Vec<u8>>> {
        self.inner.scan.range()
    }

    /// Whether the range filter is in use.
    pub fn range_filter_status(&self) -> FilterStatus {
        let scan = &self.inner.scan;
        match (scan.range(), scan.range_error()) {
            (Some(_), _) => FilterStatus::Ok,
            (None, Some(reason)) => FilterStatus::Corrupt(reason.to_string()),
            (None, None) => FilterStatus::Missing,
        }
    }

    /// Bytes of memory the table's range filter holds (0 without one).
    pub fn range_filter_memory(&self) -> u64 {
        self.inner.scan.range_bytes()
    }

    /// A cursor over every entry through the block cache (not positioned;
    /// seek first).
    pub fn iter(&self) -> TableIter {
        TableIter::new(self.clone(), ScanMode::Cached)
    }

    /// A cursor over every entry that reads `mode`'s way.
    pub fn iter_with(&self, mode: ScanMode) -> TableIter {
        TableIter::new(self.clone(), mode)
    }
}
