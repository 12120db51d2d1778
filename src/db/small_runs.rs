//! Merging runs of small adjacent tables within a level.
//!
//! Owns: finding, in a level below 0, the longest run of side-by-side
//! tables (adjacent in the level's key order) that together fit in one
//! `table_target_bytes` table, counting at least [`MIN_RUN`] tables, none
//! of them more than half the run's bytes; compacting such a run writes
//! it back to the same level as one table. Level-0 compactions of
//! ascending keys leave such runs: each output starts past the level's
//! last key, overlaps nothing, and the level stays under its byte budget,
//! so nothing else would ever merge them, and reads and opens pay per
//! table. The half rule makes it tiered: a byte is rewritten only when its
//! table at least doubles, so at most log2(target / smallest table) times.
//! Must never: take a damaged table, a table that could not share one
//! output with the others (a run never exceeds the target, so a
//! target-sized table is never rewritten by this), or tables that are not
//! neighbours (an output would then overlap a table left between them).

use std::sync::Arc;

use crate::db::version::{LiveTable, Version};
use crate::options::Options;

/// The fewest tables a run merges: fewer would rewrite bytes for little.
pub(crate) const MIN_RUN: usize = 4;

/// The most tables one run merges, which bounds the search: each start is
/// extended at most this far.
const MAX_RUN: usize = 64;

/// The longest qualifying run of small adjacent tables in any level below
/// 0, shallowest level first, with its level (where its output goes too);
/// `None` when no level has one.
pub(crate) fn small_run(version: &Version, opts: &Options) -> Option<(usize, Vec<Arc<LiveTable>>)> {
    version
        .levels
        .iter()
        .enumerate()
        .skip(1)
        .find_map(|(level, tables)| {
            if tables.len() < MIN_RUN {
                return None;
            }
            let sizes: Vec<Option<u64>> = tables
                .iter()
                .map(|t| (!t.is_damaged()).then_some(t.record.file_size))
                .collect();
            let (start, len) = longest_run(&sizes, opts.table_target_bytes)?;
            Some((level, tables.get(start..start + len)?.to_vec()))
        })
}

/// The start and length of the longest run that qualifies among tables of
/// `sizes` (one level's, in key order; `None` for a damaged table, which
/// no run takes); the first of equal length.
fn longest_run(sizes: &[Option<u64>], target: u64) -> Option<(usize, usize)> {
    let mut best: Option<(usize, usize)> = None;
    for start in 0..sizes.len() {
        let (mut sum, mut largest) = (0u64, 0u64);
        for (len, size) in sizes.iter().skip(start).take(MAX_RUN).enumerate() {
            let Some(size) = *size else {
                break;
            };
            if sum.saturating_add(size) > target {
                break;
            }
            sum += size;
            largest = largest.max(size);
            let len = len + 1;
            let qualifies = len >= MIN_RUN && largest.saturating_mul(2) <= sum;
            if qualifies && best.is_none_or(|(_, found)| len > found) {
                best = Some((start, len));
            }
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_needs_four_tables_that_fit_one_target_none_over_half() {
        let small = |n: usize| vec![Some(10u64); n];
        assert_eq!(longest_run(&small(3), 100), None);
        assert_eq!(longest_run(&small(4), 100), Some((0, 4)));
        // No more than the target: ten of ten bytes, not eleven.
        assert_eq!(longest_run(&small(12), 100), Some((0, 10)));
        // A table of half the run or more waits for more neighbours.
        assert_eq!(
            longest_run(&[Some(40), Some(10), Some(10), Some(10)], 100),
            None
        );
        assert_eq!(
            longest_run(&[Some(40), Some(10), Some(10), Some(10), Some(10)], 100),
            Some((0, 5))
        );
        // A target-sized table is never taken; a damaged one splits runs.
        let sizes = [Some(100), Some(10), Some(10), None, Some(10), Some(10)];
        assert_eq!(longest_run(&sizes, 100), None);
        let sizes = [Some(100), Some(10), Some(10), Some(10), Some(10), None];
        assert_eq!(longest_run(&sizes, 100), Some((1, 4)));
    }
}
