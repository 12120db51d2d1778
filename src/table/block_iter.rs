//! [`BlockIter`]: a cursor over one block's entries — seeks (a binary search
//! over the restarts, then a short scan), forward and backward steps, the
//! current entry's key rebuilt from its shared prefix.
//!
//! Owns: the cursor and the `Block` methods that make one; the entry
//! layout and its decoding are `block.rs`'s.
//! Must never: panic, read outside the block, or hand out an entry that
//! failed to decode — a cursor that meets a damaged entry is no longer
//! positioned and returns the `Corruption` the block gave.

use std::cmp::Ordering;
use std::ops::Range;

use bytes::Bytes;

use crate::error::Result;
use crate::key::{compare_internal_keys, TAG_LEN};
use crate::prefetch::prefetch_bytes;
use crate::table::block::*;

impl Block {
    /// A cursor over the entries (not positioned; seek first).
    pub fn iter(&self) -> BlockIter {
        self.clone().into_cursor()
    }

    /// [`Block::iter`] without the clone.
    pub fn into_cursor(self) -> BlockIter {
        self.into_cursor_with(Vec::new())
    }

    /// A cursor that rebuilds keys in `key_buffer` (cleared first), so a
    /// caller that keeps one buffer per thread decodes without allocating.
    pub fn into_cursor_with(self, mut key_buffer: Vec<u8>) -> BlockIter {
        key_buffer.clear();
        BlockIter {
            next_offset: self.entries_end,
            block: self,
            offset: 0,
            key: key_buffer,
            value: 0..0,
            valid: false,
        }
    }
}

/// A cursor over one block's entries in order.
#[derive(Debug, Clone)]
pub struct BlockIter {
    pub(super) block: Block,
    pub(super) offset: usize,
    pub(super) next_offset: usize,
    pub(super) key: Vec<u8>,
    pub(super) value: Range<usize>,
    pub(super) valid: bool,
}

impl BlockIter {
    /// Gives the key buffer back, for reuse by the next cursor.
    pub fn into_key_buffer(self) -> Vec<u8> {
        self.key
    }

    /// True when positioned on an entry.
    pub fn valid(&self) -> bool {
        self.valid
    }

    /// The current entry's key (an internal key).
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// The current entry's value, sharing the block's bytes.
    pub fn value(&self) -> Bytes {
        self.block.data.slice(self.value.clone())
    }

    /// The current entry's value as a slice.
    pub fn value_slice(&self) -> &[u8] {
        self.block.bytes(self.value.clone())
    }

    /// Offset of the current entry inside the block.
    pub(super) fn current_offset(&self) -> usize {
        self.offset
    }

    /// Positions on the first entry.
    pub fn seek_to_first(&mut self) -> Result<()> {
        self.key.clear();
        self.decode_at(0)
    }

    /// Moves to the next entry; invalid after the last one.
    pub fn next(&mut self) -> Result<()> {
        if self.next_offset >= self.block.entries_end {
            self.valid = false;
            return Ok(());
        }
        self.decode_at(self.next_offset)
    }

    /// Positions on the first entry whose key is ≥ `target` in internal-key
    /// order; invalid when every key is smaller.
    pub fn seek(&mut self, target: &[u8]) -> Result<()> {
        let result = self.seek_unchecked(target);
        if result.is_err() {
            self.valid = false;
        }
        result
    }

    fn seek_unchecked(&mut self, target: &[u8]) -> Result<()> {
        let restart_count = self.block.restart_count;
        // A block's memory is rarely in the CPU's cache when a get reaches
        // it, and each step below finds its next address in the bytes it
        // just loaded: the lines it will read are requested up front, so
        // their loads overlap instead of following one another.
        if restart_count <= PREFETCHED_RESTARTS {
            for i in 0..restart_count {
                let offset = self.block.restart_offset(i)?;
                prefetch_bytes(self.block.header_span(offset));
            }
        }
        // The first restart whose key is ≥ target; the answer lies after the
        // restart before it.
        let (mut low, mut high) = (0, restart_count);
        while low < high {
            let mid = low + (high - low) / 2;
            if self.block.compare_restart(mid, target)? == Ordering::Less {
                low = mid + 1;
            } else {
                high = mid;
            }
        }
        let start = self.block.restart_offset(low.saturating_sub(1))?;
        // The scan below reads from `start` up to the entry at restart `low`
        // (at most), whose key is ≥ target.
        let scan_end = match low < restart_count {
            true => {
                let next = self.block.restart_offset(low)?;
                next + self.block.header_span(next).len()
            }
            false => self.block.entries_end,
        };
        prefetch_bytes(self.block.bytes(start..scan_end));
        self.key.clear();
        self.decode_at(start)?;
        while self.valid && compare_internal_keys(&self.key, target) == Ordering::Less {
            self.next()?;
        }
        Ok(())
    }

    /// Positions on the last entry; invalid when the block has none.
    pub fn seek_to_last(&mut self) -> Result<()> {
        let result = match self.block.restart_count.checked_sub(1) {
            None => {
                self.valid = false;
                Ok(())
            }
            Some(last) => self
                .block
                .restart_offset(last)
                .and_then(|start| self.decode_run_before(start, self.block.entries_end)),
        };
        if result.is_err() {
            self.valid = false;
        }
        result
    }

    /// Moves to the previous entry; invalid before the first one. No-op
    /// when invalid. Entries are prefix-compressed forward, so the step
    /// decodes from the restart before the current entry up to it.
    pub fn prev(&mut self) -> Result<()> {
        if !self.valid {
            return Ok(());
        }
        let current = self.offset;
        if current == 0 {
            self.valid = false;
            return Ok(());
        }
        // The last restart before the current entry.
        let (mut low, mut high) = (0, self.block.restart_count);
        let mut found = Ok(());
        while low < high {
            let mid = low + (high - low) / 2;
            match self.block.restart_offset(mid) {
                Ok(offset) if offset < current => low = mid + 1,
                Ok(_) => high = mid,
                Err(e) => {
                    found = Err(e);
                    break;
                }
            }
        }
        let result = found
            .and_then(|()| self.block.restart_offset(low.saturating_sub(1)))
            .and_then(|start| self.decode_run_before(start, current));
        if result.is_err() {
            self.valid = false;
        }
        result
    }

    /// Positions on the last entry ≤ `target` in internal-key order;
    /// invalid when every key is larger.
    pub fn seek_for_prev(&mut self, target: &[u8]) -> Result<()> {
        self.seek(target)?;
        if !self.valid {
            return self.seek_to_last();
        }
        if compare_internal_keys(&self.key, target) == Ordering::Greater {
            self.prev()?;
        }
        Ok(())
    }

    /// Decodes from the restart at `start` on to the entry that ends at
    /// `end` (an entry's start, or the end of the entries), and stays on it.
    fn decode_run_before(&mut self, start: usize, end: usize) -> Result<()> {
        if start >= end {
            return Err(self.block.corrupt(format!(
                "restart at {start} is not before the entry at {end}"
            )));
        }
        self.key.clear();
        self.decode_at(start)?;
        while self.next_offset < end {
            self.decode_at(self.next_offset)?;
        }
        if self.next_offset != end {
            self.valid = false;
            return Err(self.block.corrupt(format!(
                "no entry ends at {end}: the one at {} ends at {}",
                self.offset, self.next_offset
            )));
        }
        Ok(())
    }

    fn decode_at(&mut self, offset: usize) -> Result<()> {
        match self.block.entry_at(offset, self.key.len()) {
            Ok(parts) => {
                let delta = self.block.bytes(parts.key_delta.clone());
                self.key.truncate(parts.shared);
                // One growth for the key's two pieces, not one each.
                self.key.reserve(delta.len() + TAG_LEN);
                self.key.extend_from_slice(delta);
                self.key.extend_from_slice(&parts.tag.to_le_bytes());
                self.offset = offset;
                self.next_offset = parts.end();
                self.value = parts.value;
                self.valid = true;
                Ok(())
            }
            Err(e) => {
                self.valid = false;
                Err(e)
            }
        }
    }
}
