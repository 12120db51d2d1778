//! The merge of several sources into one cursor in internal-key order.
//!
//! Owns: choosing, at each step, the source with the next key (on equal
//! keys the earlier source wins), and hinting every source's block read
//! before a seek positions them, so reads that reach the device overlap.
//! Must never: hide versions, tombstones or writes newer than a snapshot
//! (it shows every entry of every source; the scan and compaction decide
//! what is visible), or turn round mid-way (a merge moves in the direction
//! it was last positioned in).

use std::cmp::Ordering;

use bytes::Bytes;

use super::sources::InternalIterator;
use crate::error::Result;
use crate::key::compare_internal_keys;

/// The union of several sources; on equal keys the earlier source wins.
/// A merge moves in the direction it was last positioned in: `seek_to_first`
/// and `seek` position every source for `next`, `seek_to_last` and
/// `seek_for_prev` for `prev` (a scan that turns round uses a second merge).
pub(crate) struct MergingIter {
    sources: Vec<Box<dyn InternalIterator>>,
    current: Option<usize>,
}

impl MergingIter {
    pub fn new(sources: Vec<Box<dyn InternalIterator>>) -> MergingIter {
        MergingIter {
            sources,
            current: None,
        }
    }

    fn find_largest(&mut self) {
        let mut best: Option<usize> = None;
        for (i, source) in self.sources.iter().enumerate() {
            if !source.valid() {
                continue;
            }
            best = match best.and_then(|b| self.sources.get(b)) {
                Some(b) if compare_internal_keys(source.key(), b.key()) != Ordering::Greater => {
                    best
                }
                _ => Some(i),
            };
        }
        self.current = best;
    }

    fn find_smallest(&mut self) {
        let mut best: Option<usize> = None;
        for (i, source) in self.sources.iter().enumerate() {
            if !source.valid() {
                continue;
            }
            best = match best.and_then(|b| self.sources.get(b)) {
                Some(b) if compare_internal_keys(source.key(), b.key()) != Ordering::Less => best,
                _ => Some(i),
            };
        }
        self.current = best;
    }

    fn current(&self) -> Option<&dyn InternalIterator> {
        self.current
            .and_then(|i| self.sources.get(i))
            .map(|s| s.as_ref())
    }

    /// Which source (its position in the `sources` given to `new`) the
    /// current entry comes from; `None` when not positioned.
    pub fn current_source(&self) -> Option<usize> {
        self.current.filter(|_| self.valid())
    }
}

impl InternalIterator for MergingIter {
    fn seek_to_first(&mut self) {
        for s in &mut self.sources {
            s.seek_to_first();
        }
        self.find_smallest();
    }

    fn seek(&mut self, target: &[u8]) {
        // Each source's seek may read a block from a file; hinted first,
        // reads that reach the device overlap instead of queuing one
        // behind another.
        if self.sources.len() > 1 {
            for s in &self.sources {
                s.prefetch_seek(target);
            }
        }
        for s in &mut self.sources {
            s.seek(target);
        }
        self.find_smallest();
    }

    fn valid(&self) -> bool {
        self.current().is_some_and(|s| s.valid())
    }

    fn key(&self) -> &[u8] {
        self.current().map_or(&[], |s| s.key())
    }

    fn value(&self) -> Bytes {
        self.current().map_or_else(Bytes::new, |s| s.value())
    }

    fn next(&mut self) {
        if let Some(source) = self.current.and_then(|i| self.sources.get_mut(i)) {
            source.next();
        }
        self.find_smallest();
    }

    fn seek_to_last(&mut self) {
        for s in &mut self.sources {
            s.seek_to_last();
        }
        self.find_largest();
    }

    fn seek_for_prev(&mut self, target: &[u8]) {
        for s in &mut self.sources {
            s.seek_for_prev(target);
        }
        self.find_largest();
    }

    fn prev(&mut self) {
        if let Some(source) = self.current.and_then(|i| self.sources.get_mut(i)) {
            source.prev();
        }
        self.find_largest();
    }

    fn status(&self) -> Result<()> {
        self.sources.iter().try_for_each(|s| s.status())
    }
}
