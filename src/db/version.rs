//! A version: the immutable set of live tables, per level, at one moment.
//!
//! Owns: [`Version`] and [`LiveTable`], and the candidate search of point
//! lookups (newest level-0 table first, then at most one table per deeper
//! level), which `get` and `multi_get` both use; the key range is checked
//! here, once per table, from the manifest's bounds. Also the bytes a key
//! range takes in the tables (`Version::approximate_bytes`), estimated
//! from the manifest's bounds and each table's in-memory index, never by
//! reading a data block.
//! Must never: change after it is published — a new version replaces it
//! whole, so readers holding the old one keep a consistent view.

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::filename::table_file_name;
use crate::key::{
    before_start_of, internal_key, key_head, lookup_key, past_end_of, user_key_of, SeqNo,
    ValueKind, KEY_HEAD_BYTES,
};
use crate::manifest::{BlobFileRecord, TableRecord};
use crate::table::Table;
use siftdb_filter::LevelTables;

/// Number of levels, level 0 included.
pub(crate) const LEVELS: usize = 7;

/// Why a table the manifest names could not be opened: kept in the version
/// (so its key range still answers "unreadable", never "absent"), and
/// reported to every read that needs it.
#[derive(Debug, Clone)]
pub(crate) struct Damage {
    pub detail: String,
}

/// A user key's first 16 bytes as a big-endian number (zero-padded), with
/// its length: two keys compare as their heads do, and on equal heads of
/// keys no longer than 16 bytes as their lengths do (the shorter is then a
/// prefix of the longer), so the candidate search of a `get` settles most
/// comparisons with one integer compare and no pointer into the manifest
/// record; only keys longer than 16 bytes with equal heads are compared
/// whole.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct KeyHead {
    head: u128,
    len: usize,
}

impl KeyHead {
    /// Bytes the head holds.
    const BYTES: usize = KEY_HEAD_BYTES;

    pub fn of(key: &[u8]) -> KeyHead {
        KeyHead {
            head: key_head(key),
            len: key.len(),
        }
    }

    /// `key` (whose head is `self`) against `other` (whose head is `head`),
    /// as byte strings compare.
    #[inline]
    fn cmp_keys(self, key: &[u8], head: KeyHead, other: &[u8]) -> Ordering {
        match self.head.cmp(&head.head) {
            Ordering::Equal if self.len <= KeyHead::BYTES && head.len <= KeyHead::BYTES => {
                self.len.cmp(&head.len)
            }
            Ordering::Equal => key.cmp(other),
            unequal => unequal,
        }
    }
}

/// One table and what the manifest says of it.
pub(crate) struct LiveTable {
    pub record: TableRecord,
    /// The open table, or why it could not be opened (the database opened
    /// anyway: every read that needs it gets `Corruption` naming it).
    pub table: std::result::Result<Table, Damage>,
    /// Heads of the record's smallest and largest user keys.
    bounds: (KeyHead, KeyHead),
}

impl LiveTable {
    /// The table `record` names, opened as `table`.
    pub fn new(record: TableRecord, table: std::result::Result<Table, Damage>) -> LiveTable {
        let bounds = (
            KeyHead::of(user_key_of(&record.smallest)),
            KeyHead::of(user_key_of(&record.largest)),
        );
        LiveTable {
            record,
            table,
            bounds,
        }
    }

    /// What an application is shown of this table, a table of keyspace
    /// `keyspace` (`Db::live_tables`, the events of flushes and compactions).
    pub fn metadata(&self, keyspace: &str) -> crate::events::TableMetadata {
        let record = &self.record;
        crate::events::TableMetadata {
            keyspace: keyspace.to_string(),
            file_number: record.file_number,
            level: record.level,
            bytes: record.file_size,
            entries: record.entries,
            smallest_key: self.smallest_user_key().to_vec(),
            largest_key: self.largest_user_key().to_vec(),
        }
    }

    /// A table the manifest names that could not be opened.
    pub fn damaged(record: TableRecord, error: &Error) -> LiveTable {
        LiveTable::new(
            record,
            Err(Damage {
                detail: error.to_string(),
            }),
        )
    }

    /// The open table, or `Corruption` naming the file when it could not be
    /// opened.
    pub fn readable(&self) -> Result<&Table> {
        self.table.as_ref().map_err(|damage| {
            Error::corruption(
                format!("table {}", table_file_name(self.file_number())),
                format!(
                    "unreadable since the database opened ({}); reads of its key range fail, \
                     `siftdb repair` salvages what is readable",
                    damage.detail
                ),
            )
        })
    }

    /// True when the table holds range tombstones.
    pub fn has_range_tombstones(&self) -> bool {
        self.table
            .as_ref()
            .is_ok_and(|t| t.range_tombstones().is_some())
    }

    pub fn is_damaged(&self) -> bool {
        self.table.is_err()
    }

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

    /// [`LiveTable::covers`] for a key whose head is already known.
    #[inline]
    pub fn covers_head(&self, head: KeyHead, user_key: &[u8]) -> bool {
        head.cmp_keys(user_key, self.bounds.0, self.smallest_user_key()) != Ordering::Less
            && !self.ends_before(head, user_key)
    }

    /// True when every key of the table is below `user_key` (head `head`).
    #[inline]
    fn ends_before(&self, head: KeyHead, user_key: &[u8]) -> bool {
        head.cmp_keys(user_key, self.bounds.1, self.largest_user_key()) == Ordering::Greater
    }

    /// True when the table's user-key range meets `[lo, hi]`.
    pub fn overlaps(&self, lo: &[u8], hi: &[u8]) -> bool {
        self.smallest_user_key() <= hi && lo <= self.largest_user_key()
    }

    /// About the bytes of this table's file that keys of `range` take:
    /// none when its keys all lie outside, the whole file when they all lie
    /// inside, else the bytes between the offsets of `targets` (see
    /// [`RangeTargets`]) in its index. A damaged table that meets the range
    /// counts whole: its bytes are on disk, and without its index there is
    /// no telling where in it the range lies.
    fn approximate_bytes(
        &self,
        range: &(Bound<Vec<u8>>, Bound<Vec<u8>>),
        targets: &RangeTargets,
    ) -> u64 {
        let (start, end) = range;
        let (smallest, largest) = (self.smallest_user_key(), self.largest_user_key());
        if before_start_of(start, largest) || past_end_of(end, smallest) {
            return 0;
        }
        let whole = self.record.file_size;
        let inside = !before_start_of(start, smallest) && !past_end_of(end, largest);
        let table = match &self.table {
            Ok(table) if !inside => table,
            _ => return whole,
        };
        let from = targets
            .start
            .as_deref()
            .map_or(0, |t| table.approximate_offset_of(t));
        let to = targets
            .end
            .as_deref()
            .map_or(whole, |t| table.approximate_offset_of(t));
        // An empty or reversed range puts its end at or before its start.
        to.min(whole).saturating_sub(from)
    }
}

/// A key range's ends as internal keys to look up in a table's index:
/// entries ≥ `start` are at or past the range's start, entries ≥ `end`
/// past its end (`None`: unbounded). An included start or excluded end is
/// the key's newest possible version, an excluded start or included end
/// the position after the key's oldest.
pub(crate) struct RangeTargets {
    pub start: Option<Vec<u8>>,
    pub end: Option<Vec<u8>>,
}

impl RangeTargets {
    pub fn of((start, end): &(Bound<Vec<u8>>, Bound<Vec<u8>>)) -> RangeTargets {
        let before_every_version = |key: &[u8]| lookup_key(key, SeqNo::MAX);
        let after_every_version = |key: &[u8]| internal_key(key, SeqNo(0), ValueKind::Delete);
        RangeTargets {
            start: match start {
                Bound::Included(key) => Some(before_every_version(key)),
                Bound::Excluded(key) => Some(after_every_version(key)),
                Bound::Unbounded => None,
            },
            end: match end {
                Bound::Included(key) => Some(after_every_version(key)),
                Bound::Excluded(key) => Some(before_every_version(key)),
                Bound::Unbounded => None,
            },
        }
    }
}

/// The index of the one table of a sorted, disjoint level whose range holds
/// `user_key`: the first whose largest key is ≥ it, if its smallest is ≤ it.
pub(crate) fn sorted_candidate(level: &[Arc<LiveTable>], user_key: &[u8]) -> Option<usize> {
    sorted_candidate_head(level, KeyHead::of(user_key), user_key)
}

/// [`sorted_candidate`] for a key whose head is already known.
#[inline]
fn sorted_candidate_head(
    level: &[Arc<LiveTable>],
    head: KeyHead,
    user_key: &[u8],
) -> Option<usize> {
    let index = level.partition_point(|t| t.ends_before(head, user_key));
    level
        .get(index)
        .is_some_and(|t| t.covers_head(head, user_key))
        .then_some(index)
}

/// The live tables. Level 0 is ordered newest first and may overlap; every
/// deeper level is ordered by key and does not overlap.
#[derive(Clone, Default)]
pub(crate) struct Version {
    pub levels: Vec<Vec<Arc<LiveTable>>>,
    /// How many of the tables hold range tombstones (counted by
    /// [`Version::sort`], which every change of `levels` ends with): a scan
    /// of a version without any gathers none.
    range_tombstone_tables: usize,
    /// Levels a point lookup walks: up to the deepest one holding a table
    /// (set by [`Version::sort`] with the count above), so a get in a
    /// shallow tree does not step through the empty levels below it.
    searched_levels: usize,
    /// The figures of the blob files its tables point into, by number
    /// (those known: written since the figures were recorded), for the
    /// manifest and the garbage-share collection (`blob_garbage`).
    pub blob_files: Arc<BTreeMap<u64, BlobFileRecord>>,
}

impl Version {
    pub fn with_levels(count: usize) -> Version {
        Version {
            levels: vec![Vec::new(); count],
            range_tombstone_tables: 0,
            searched_levels: 0,
            blob_files: Arc::default(),
        }
    }

    /// Tables holding range tombstones.
    pub fn range_tombstone_tables(&self) -> usize {
        self.range_tombstone_tables
    }

    pub fn table_count(&self) -> usize {
        self.levels.iter().map(Vec::len).sum()
    }

    /// Tables and entries per level: the tree as a filter policy sees it.
    pub fn level_tables(&self) -> Vec<LevelTables> {
        self.levels
            .iter()
            .map(|tables| LevelTables {
                tables: tables.len() as u64,
                keys: tables.iter().map(|t| t.record.entries).sum(),
            })
            .collect()
    }

    pub fn level_bytes(&self, level: usize) -> u64 {
        self.levels
            .get(level)
            .map(|tables| tables.iter().map(|t| t.record.file_size).sum())
            .unwrap_or(0)
    }

    /// Calls `visit` with each table whose range holds `user_key`, in the
    /// order a lookup must ask them (newest data first); stops when it
    /// returns false.
    pub fn for_each_candidate<'v>(
        &'v self,
        user_key: &[u8],
        mut visit: impl FnMut(&'v LiveTable) -> bool,
    ) {
        let head = KeyHead::of(user_key);
        let searched = self.levels.get(..self.searched_levels).unwrap_or_default();
        let mut levels = searched.iter();
        if let Some(level0) = levels.next() {
            for table in level0 {
                if table.covers_head(head, user_key) && !visit(table) {
                    return;
                }
            }
        }
        for level in levels {
            if level.is_empty() {
                continue;
            }
            let candidate = sorted_candidate_head(level, head, user_key).and_then(|i| level.get(i));
            if candidate.is_some_and(|table| !visit(table)) {
                return;
            }
        }
    }

    /// The level-0 tables (newest first) and the deeper levels (each sorted
    /// and disjoint), for callers that walk levels themselves (`multi_get`,
    /// with [`sorted_candidate`]).
    pub fn split_level0(&self) -> (&[Arc<LiveTable>], &[Vec<Arc<LiveTable>>]) {
        match self.levels.split_first() {
            Some((level0, deeper)) => (level0, deeper),
            None => (&[], &[]),
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

    /// About the bytes the keys of `range` take in the tables, every level
    /// summed (see [`LiveTable::approximate_bytes`]): from the manifest's
    /// bounds and the tables' in-memory indexes, no data block read. An
    /// empty or reversed range takes none.
    pub fn approximate_bytes(&self, range: &(Bound<Vec<u8>>, Bound<Vec<u8>>)) -> u64 {
        let targets = RangeTargets::of(range);
        self.levels
            .iter()
            .flatten()
            .map(|table| table.approximate_bytes(range, &targets))
            .fold(0, u64::saturating_add)
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
        self.range_tombstone_tables = self
            .levels
            .iter()
            .flatten()
            .filter(|t| t.has_range_tombstones())
            .count();
        self.searched_levels = self
            .levels
            .iter()
            .rposition(|level| !level.is_empty())
            .map_or(0, |deepest| deepest + 1);
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys from a 3-letter alphabet with a zero byte in it, 0 to 20 bytes
    /// long (across the 16-byte head), every pair: heads order them exactly
    /// as bytes do.
    #[test]
    fn key_heads_order_keys_as_their_bytes_do() {
        let mut keys: Vec<Vec<u8>> = Vec::new();
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for len in 0..=20usize {
            for _ in 0..40 {
                let key = (0..len)
                    .map(|_| {
                        state = state
                            .wrapping_mul(6_364_136_223_846_793_005)
                            .wrapping_add(1);
                        [0u8, 1, 0xff][(state >> 60) as usize % 3]
                    })
                    .collect();
                keys.push(key);
            }
        }
        // Keys that differ only past byte 16, or only by trailing zeros.
        keys.push(vec![7; 16]);
        keys.push([vec![7; 16], vec![0]].concat());
        keys.push([vec![7; 16], vec![0, 0]].concat());
        keys.push([vec![7; 16], vec![1]].concat());
        keys.push(vec![7; 15]);
        keys.push([vec![7; 15], vec![0]].concat());
        for a in &keys {
            for b in &keys {
                let (ha, hb) = (KeyHead::of(a), KeyHead::of(b));
                assert_eq!(ha.cmp_keys(a, hb, b), a.cmp(b), "{a:?} vs {b:?}");
            }
        }
    }
}
