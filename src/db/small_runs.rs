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

use crate::db::compaction::Pick;
use crate::db::version::{LiveTable, Version};
use crate::options::Options;

/// The fewest tables a run merges: fewer would rewrite bytes for little.
pub(crate) const MIN_RUN: usize = 4;

/// The most tables one run merges, which bounds the search: each start is
/// extended at most this far.
const MAX_RUN: usize = 64;

/// The longest qualifying run of small adjacent tables in any level below
/// 0, shallowest level first, as a compaction within its level; `None`
/// when no level has one.
pub(crate) fn small_run_pick(version: &Version, opts: &Options) -> Option<Pick> {
    version
        .levels
        .iter()
        .enumerate()
        .skip(1)
        .find_map(|(level, tables)| {
            let (start, len) = longest_run(tables, opts.table_target_bytes)?;
            Some(Pick {
                inputs: tables.get(start..start + len)?.to_vec(),
                output_level: level,
            })
        })
}

/// The start and length of the longest run of `tables` (one level's, in
/// key order) that qualifies; the first of equal length.
fn longest_run(tables: &[Arc<LiveTable>], target: u64) -> Option<(usize, usize)> {
    if tables.len() < MIN_RUN {
        return None;
    }
    let mut best: Option<(usize, usize)> = None;
    for start in 0..tables.len() {
        let (mut sum, mut largest) = (0u64, 0u64);
        for (len, table) in tables.iter().skip(start).take(MAX_RUN).enumerate() {
            let size = table.record.file_size;
            if table.is_damaged() || sum.saturating_add(size) > target {
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

/// True when `pick` compacts tables within their own level (a run this
/// module found), not down into the next.
pub(crate) fn within_level(pick: &Pick) -> bool {
    pick.inputs
        .iter()
        .all(|t| t.record.level as usize == pick.output_level)
}
