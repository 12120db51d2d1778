//! A version: the immutable set of live tables, per level, at one moment.
//!
//! Owns: [`Version`] and [`LiveTable`], and the per-level search used by
//! `get` (newest level-0 table first, then at most one table per deeper level).
//! Must never: change after it is published — a new version replaces it
//! whole, so readers holding the old one keep a consistent view.

use std::sync::Arc;

use crate::key::user_key_of;
use crate::manifest::TableRecord;
use crate::table::Table;

/// One open table and what the manifest says of it.
pub(crate) struct LiveTable {
    pub record: TableRecord,
    pub table: Table,
}

impl LiveTable {
    pub fn file_number(&self) -> u64 {
        self.record.file_number
    }

    pub fn smallest_user_key(&self) -> &[u8] {
        user_key_of(&self.record.smallest)
    }

    pub fn largest_user_key(&self) -> &[u8] {
        user_key_of(&self.record.largest)
    }

    pub fn covers(&self, user_key: &[u8]) -> bool {
        self.smallest_user_key() <= user_key && user_key <= self.largest_user_key()
    }

    /// True when the table's user-key range meets `[lo, hi]`.
    pub fn overlaps(&self, lo: &[u8], hi: &[u8]) -> bool {
        self.smallest_user_key() <= hi && lo <= self.largest_user_key()
    }
}

/// The live tables. Level 0 is ordered newest first and may overlap; every
/// deeper level is ordered by key and does not overlap.
#[derive(Clone, Default)]
pub(crate) struct Version {
    pub levels: Vec<Vec<Arc<LiveTable>>>,
}

impl Version {
    pub fn with_levels(count: usize) -> Version {
        Version {
            levels: vec![Vec::new(); count],
        }
    }

    pub fn table_count(&self) -> usize {
        self.levels.iter().map(Vec::len).sum()
    }

    pub fn level_bytes(&self, level: usize) -> u64 {
        self.levels
            .get(level)
            .map(|tables| tables.iter().map(|t| t.record.file_size).sum())
            .unwrap_or(0)
    }

    /// Calls `visit` with each table that may hold `user_key`, in the order
    /// a lookup must ask them (newest data first); stops when it returns false.
    pub fn for_each_candidate(&self, user_key: &[u8], mut visit: impl FnMut(&LiveTable) -> bool) {
        let mut levels = self.levels.iter();
        if let Some(level0) = levels.next() {
            for table in level0 {
                if table.covers(user_key) && !visit(table) {
                    return;
                }
            }
        }
        for level in levels {
            // Tables are sorted and disjoint: the first whose largest key is
            // ≥ user_key is the only candidate.
            let index = level.partition_point(|t| t.largest_user_key() < user_key);
            if let Some(table) = level.get(index) {
                if table.covers(user_key) && !visit(table) {
                    return;
                }
            }
        }
    }

    /// Tables of `level` whose range meets `[lo, hi]`.
    pub fn overlapping(&self, level: usize, lo: &[u8], hi: &[u8]) -> Vec<Arc<LiveTable>> {
        self.levels
            .get(level)
            .map(|tables| {
                tables
                    .iter()
                    .filter(|t| t.overlaps(lo, hi))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The records of every live table, for the manifest.
    pub fn records(&self) -> Vec<TableRecord> {
        self.levels
            .iter()
            .flat_map(|tables| tables.iter().map(|t| t.record.clone()))
            .collect()
    }

    /// A new version with `removed` files gone and `added` tables placed in
    /// their levels in the right order.
    pub fn apply(&self, removed: &[u64], added: Vec<Arc<LiveTable>>) -> Version {
        let mut next = self.clone();
        for tables in &mut next.levels {
            tables.retain(|t| !removed.contains(&t.file_number()));
        }
        for table in added {
            let level = table.record.level as usize;
            if next.levels.len() <= level {
                next.levels.resize(level + 1, Vec::new());
            }
            if let Some(tables) = next.levels.get_mut(level) {
                tables.push(table);
            }
        }
        next.sort();
        next
    }

    pub fn sort(&mut self) {
        let mut levels = self.levels.iter_mut();
        if let Some(level0) = levels.next() {
            level0.sort_by(|a, b| {
                b.record
                    .max_seq
                    .cmp(&a.record.max_seq)
                    .then(b.file_number().cmp(&a.file_number()))
            });
        }
        for level in levels {
            level.sort_by(|a, b| a.smallest_user_key().cmp(b.smallest_user_key()));
        }
    }
}
