//! The decoded index: which data block may hold a key.
//!
//! The index block is decoded once at open into dense arrays — each
//! separator's head (the first 16 bytes of its user key as a number), the
//! separators back to back, their start offsets, and the block handles — so
//! the binary search of every get compares numbers in one compact array and
//! reads a separator's bytes only where heads tie.
//!
//! Owns: [`Index`], its checks at open, and `block_for`.
//! Must never: accept an index whose separators are out of order, whose
//! handles overlap or leave the data region, or that disagrees with the
//! properties — the single-block lookup of `get` depends on all three.

use std::cmp::Ordering;

use crate::codec::ByteReader;
use crate::error::{Error, Result};
use crate::key::{compare_internal_keys, key_head, parse_internal_key, user_key_of};
use crate::prefetch::prefetch_line;
use crate::table::block::Block;
use crate::table::format::{BlockHandle, BlockLocation};
use crate::table::properties::TableProperties;

/// One separator per data block (the block's last internal key) and the
/// block's handle, in key order.
#[derive(Debug)]
pub(crate) struct Index {
    /// [`key_head`] of separator `i`'s user key.
    heads: Vec<u128>,
    /// Every [`TOP_STRIDE`]th head (`heads[k * TOP_STRIDE]`): a search
    /// first narrows to one run of that many heads over this array, small
    /// enough to stay in the CPU's caches, then reads that run alone (two
    /// cache lines) instead of a dozen scattered lines of `heads`.
    tops: Vec<u128>,
    separators: Vec<u8>,
    /// `starts[i]..starts[i + 1]` is separator `i`; `len() + 1` elements
    /// (u32: an index block is under 4 GiB, see `decode`).
    starts: Vec<u32>,
    handles: Vec<BlockHandle>,
}

impl Index {
    /// Decodes a verified index block and checks it: at least one entry;
    /// separators that are internal keys in strictly increasing order;
    /// handles (two varints, each offset counted from the end of the block
    /// before) in file order, without overlap, inside
    /// `properties.data_size`; as many entries as the properties count data
    /// blocks; the last separator equal to the table's largest key.
    pub(crate) fn decode(
        block: &Block,
        location: &BlockLocation<'_>,
        properties: &TableProperties,
    ) -> Result<Index> {
        let mut index = Index::empty();
        let mut data_end = 0u64;
        // Errors inside are located once, below.
        let corrupt = |detail: String| Error::corruption("index", detail);
        block
            .for_each_unshared(|separator, value| {
                let entry = index.len();
                parse_internal_key(separator)
                    .map_err(|e| corrupt(format!("separator {entry}: {e}")))?;
                if entry > 0
                    && compare_internal_keys(index.separator(entry - 1), separator)
                        != Ordering::Less
                {
                    return Err(corrupt(format!("separator {entry} is out of order")));
                }
                let mut reader = ByteReader::new(value, "index entry");
                let handle = BlockHandle::decode_compact(&mut reader, data_end)?;
                reader.finish()?;
                let end = handle
                    .end_with_trailer()
                    .filter(|&end| handle.offset >= data_end && end <= properties.data_size);
                let Some(end) = end else {
                    return Err(corrupt(format!(
                        "data block {entry} (offset {}, length {}) overlaps its predecessor \
                         or leaves the {} bytes of data",
                        handle.offset, handle.len, properties.data_size
                    )));
                };
                data_end = end;
                index.separators.extend_from_slice(separator);
                let start = u32::try_from(index.separators.len())
                    .map_err(|_| corrupt(format!("separator {entry} ends past 4 GiB")))?;
                index.starts.push(start);
                index.heads.push(key_head(user_key_of(separator)));
                index.handles.push(handle);
                Ok(())
            })
            .map_err(|e| location.relocate(e))?;
        if index.len() as u64 != properties.data_blocks {
            return Err(location.corruption(format!(
                "{} entries, but the properties count {} data blocks",
                index.len(),
                properties.data_blocks
            )));
        }
        if index.len() == 0 || index.separator(index.len() - 1) != properties.largest.as_ref() {
            return Err(location.corruption("the last separator is not the table's largest key"));
        }
        // Held for the table's life: no growth slack.
        index.sample_tops();
        index.heads.shrink_to_fit();
        index.separators.shrink_to_fit();
        index.starts.shrink_to_fit();
        index.handles.shrink_to_fit();
        Ok(index)
    }

    /// An index of no blocks (a placeholder until one is decoded).
    pub(crate) fn empty() -> Index {
        Index {
            heads: Vec::new(),
            tops: Vec::new(),
            separators: Vec::new(),
            starts: vec![0],
            handles: Vec::new(),
        }
    }

    /// Bytes of memory the decoded index holds.
    pub(crate) fn heap_bytes(&self) -> usize {
        (self.heads.capacity() + self.tops.capacity()) * std::mem::size_of::<u128>()
            + self.separators.capacity()
            + self.starts.capacity() * std::mem::size_of::<u32>()
            + self.handles.capacity() * std::mem::size_of::<BlockHandle>()
    }

    /// Number of data blocks.
    pub(crate) fn len(&self) -> usize {
        self.handles.len()
    }

    /// Separator `i` (empty when out of range).
    pub(crate) fn separator(&self, i: usize) -> &[u8] {
        let start = self.starts.get(i).copied().unwrap_or_default();
        let end = self.starts.get(i + 1).copied().unwrap_or(start);
        self.separators
            .get(start as usize..end as usize)
            .unwrap_or_default()
    }

    /// Handle of data block `i`.
    pub(crate) fn handle(&self, i: usize) -> Option<BlockHandle> {
        self.handles.get(i).copied()
    }

    /// Requests the line holding handle `i` from memory (a hint: nothing
    /// is read, any `i` is safe), for a caller that will read it soon.
    #[inline]
    pub(crate) fn prefetch_handle(&self, i: usize) {
        prefetch_line(self.handles.as_ptr().wrapping_add(i).cast());
    }

    /// Every data block's handle, in key order.
    pub(crate) fn handles(&self) -> &[BlockHandle] {
        &self.handles
    }

    /// The only data block that can hold the first entry ≥ `target`: the
    /// first whose separator (its last key) is ≥ `target`. `head` is
    /// [`key_head`] of `target`'s user key (a get has it already).
    ///
    /// Heads never decrease along the index, and where two differ their
    /// keys compare as they do; so the search first finds, over the heads
    /// alone, the run of separators whose head equals `head`, and compares
    /// whole keys only inside that run (usually empty: keys that share
    /// their first 16 bytes with a separator).
    pub(crate) fn block_for(&self, head: u128, target: &[u8]) -> Option<usize> {
        let first = self.first_head_at_least(head);
        let tied = match self.heads.get(first..) {
            Some(rest) if rest.first() == Some(&head) => rest.partition_point(|&h| h == head),
            _ => 0,
        };
        let (mut low, mut high) = (first, first + tied);
        while low < high {
            let mid = low + (high - low) / 2;
            if compare_internal_keys(self.separator(mid), target) == Ordering::Less {
                low = mid + 1;
            } else {
                high = mid;
            }
        }
        (low < self.len()).then_some(low)
    }
}

impl Index {
    /// Fills [`Index::tops`] from the heads (once they are all in).
    fn sample_tops(&mut self) {
        self.tops = self.heads.iter().step_by(TOP_STRIDE).copied().collect();
    }

    /// The first position whose head is ≥ `head` (`len()` when none is):
    /// the first top ≥ it bounds the answer to the run of heads from the
    /// top before it, which alone is searched.
    #[inline]
    fn first_head_at_least(&self, head: u128) -> usize {
        if self.tops.is_empty() {
            return first_at_least(&self.heads, head);
        }
        let top = first_at_least(&self.tops, head);
        // heads[top * S] ≥ head (or past the end) and heads[(top - 1) * S]
        // < head: the answer is in (start, end], and is `end` when no head
        // of the run is ≥ `head`.
        let end = top.saturating_mul(TOP_STRIDE).min(self.heads.len());
        let start = top.saturating_sub(1) * TOP_STRIDE;
        let run = self.heads.get(start..end).unwrap_or_default();
        let run_start = run.as_ptr();
        prefetch_line(run_start.cast());
        prefetch_line(run_start.wrapping_add(run.len().saturating_sub(1)).cast());
        start + first_at_least(run, head)
    }
}

/// Heads per entry of [`Index::tops`]: a run of 8 heads is 128 bytes.
const TOP_STRIDE: usize = 8;

/// The first position in `heads` (ascending) whose head is ≥ `head`
/// (`heads.len()` when none is). A branch-free halving search: which half
/// to keep becomes a conditional move, not a branch the CPU must guess,
/// and both places the next step may look at are requested from memory
/// before this step's comparison is known, so the search of a large index
/// waits on overlapping loads rather than on one cache miss after another.
fn first_at_least(heads: &[u128], head: u128) -> usize {
    let mut base = 0usize;
    let mut size = heads.len();
    while size > 1 {
        let half = size / 2;
        let next = size - half;
        prefetch_line(heads.as_ptr().wrapping_add(base + next / 2).cast());
        prefetch_line(heads.as_ptr().wrapping_add(base + half + next / 2).cast());
        let below = heads.get(base + half).is_some_and(|&h| h < head);
        base = std::hint::select_unpredictable(below, base + half, base);
        size = next;
    }
    base + usize::from(heads.get(base).is_some_and(|&h| h < head))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{internal_key, SeqNo, ValueKind};

    fn index_of(separators: &[Vec<u8>]) -> Index {
        let mut index = Index::empty();
        for (i, separator) in separators.iter().enumerate() {
            index.separators.extend_from_slice(separator);
            index
                .starts
                .push(u32::try_from(index.separators.len()).unwrap());
            index.heads.push(key_head(user_key_of(separator)));
            index.sample_tops();
            let offset = i as u64 * 100;
            index.handles.push(BlockHandle { offset, len: 90 });
        }
        index
    }

    /// Separators whose user keys share 16-byte heads in runs (long keys
    /// with a common start, several versions of one key) and keys shorter
    /// than a head: the search agrees with a comparison of whole keys for
    /// every target around every separator, at every index length.
    #[test]
    fn block_for_agrees_with_comparing_whole_keys() {
        let mut users: Vec<Vec<u8>> = Vec::new();
        for a in 0..6u8 {
            users.push(vec![b'a' + a]);
            for b in 0..5u8 {
                let mut long = vec![b'p'; 16];
                long[15] = b'a' + a;
                long.extend_from_slice(&[b'0' + b; 3]);
                users.push(long);
            }
        }
        users.sort();
        let mut separators = Vec::new();
        for (i, user) in users.iter().enumerate() {
            separators.push(internal_key(user, SeqNo(9), ValueKind::Put));
            if i % 3 == 0 {
                separators.push(internal_key(user, SeqNo(4), ValueKind::Put));
            }
        }
        for len in 0..=separators.len() {
            let index = index_of(&separators[..len]);
            for user in users.iter().chain([&Vec::new(), &vec![0xff; 20]]) {
                for seq in [0, 4, 5, 9, 10] {
                    let target = internal_key(user, SeqNo(seq), ValueKind::Put);
                    let expected = separators[..len]
                        .iter()
                        .position(|s| compare_internal_keys(s, &target) != Ordering::Less);
                    let head = key_head(user_key_of(&target));
                    assert_eq!(index.block_for(head, &target), expected, "len {len}");
                }
            }
        }
    }
}
