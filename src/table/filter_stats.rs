//! [`LevelFilterStats`]: the filters of a group of tables (one level),
//! summed — kinds, keys, bits per key, memory, expected and measured
//! false-positive rates — for `Stats` and `siftdb inspect` alike.
//!
//! Owns: how per-table filter figures add up to a level's.
//! Must never: read a table's file — everything comes from what an open
//! table holds in memory.

use crate::table::reader::Table;
use siftdb_filter::FilterKind;

/// The filters of the tables of one level.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
#[non_exhaustive]
pub struct LevelFilterStats {
    /// Tables counted.
    pub tables: usize,
    /// Tables with a blocked Bloom filter in use.
    pub bloom_tables: usize,
    /// Tables with an 8-bit binary fuse filter in use.
    pub fuse8_tables: usize,
    /// Tables with a 16-bit binary fuse filter in use.
    pub fuse16_tables: usize,
    /// Tables built without a filter.
    pub unfiltered_tables: usize,
    /// Tables whose filter is not used: damaged, or of a kind this build
    /// does not read (every key "may match" in them).
    pub unusable_tables: usize,
    /// Distinct user keys of every table counted.
    pub keys: u64,
    /// Distinct user keys of the tables whose filter is in use.
    pub filtered_keys: u64,
    /// Bits of those filters proper (Bloom lines, fuse slots; headers and
    /// checksums left out).
    pub filter_bits: u64,
    /// Bytes of memory the filters hold (headers included).
    pub filter_memory: u64,
    /// The sum over tables of keys × expected rate (1 for a table whose
    /// filter is missing or unusable).
    pub weighted_expected_fp: f64,
    /// Absent keys the filters answered "absent".
    pub negatives: u64,
    /// Absent keys the filters let through.
    pub false_positives: u64,
}

impl LevelFilterStats {
    /// Adds `table`, whose filter answered `negatives` absent keys correctly
    /// and let `false_positives` through (live counters, or a measurement).
    pub fn add_table(&mut self, table: &Table, negatives: u64, false_positives: u64) {
        let keys = table.properties().distinct_user_keys;
        self.tables += 1;
        self.keys += keys;
        self.filter_memory += table.filter_memory();
        match (table.filter_view(), table.filter_status()) {
            (Some(view), _) => {
                match view.kind() {
                    FilterKind::BlockedBloom => self.bloom_tables += 1,
                    FilterKind::BinaryFuse8 => self.fuse8_tables += 1,
                    FilterKind::BinaryFuse16 => self.fuse16_tables += 1,
                }
                self.filtered_keys += keys;
                self.filter_bits += view.payload_bits();
                // The rate at the filter's own load: prefix entries fill
                // it too.
                let entries = table.properties().point_filter_entries();
                self.weighted_expected_fp += keys as f64 * view.expected_fp_rate(entries);
                self.negatives += negatives;
                self.false_positives += false_positives;
            }
            (None, status) => {
                if status.is_unusable() {
                    self.unusable_tables += 1;
                } else {
                    self.unfiltered_tables += 1;
                }
                self.weighted_expected_fp += keys as f64;
            }
        }
    }

    /// Adds another group's figures (levels into a total).
    pub fn merge(&mut self, other: &LevelFilterStats) {
        self.tables += other.tables;
        self.bloom_tables += other.bloom_tables;
        self.fuse8_tables += other.fuse8_tables;
        self.fuse16_tables += other.fuse16_tables;
        self.unfiltered_tables += other.unfiltered_tables;
        self.unusable_tables += other.unusable_tables;
        self.keys += other.keys;
        self.filtered_keys += other.filtered_keys;
        self.filter_bits += other.filter_bits;
        self.filter_memory += other.filter_memory;
        self.weighted_expected_fp += other.weighted_expected_fp;
        self.negatives += other.negatives;
        self.false_positives += other.false_positives;
    }

    /// Filter bits per key over the tables whose filter is in use (0 when none is).
    pub fn bits_per_key(&self) -> f64 {
        if self.filtered_keys == 0 {
            0.0
        } else {
            self.filter_bits as f64 / self.filtered_keys as f64
        }
    }

    /// The rate at which a lookup of an absent key gets past the level's
    /// filter, by theory, weighted by keys (a table without a usable filter
    /// counts as 1). 0 for no tables.
    pub fn expected_fp_rate(&self) -> f64 {
        if self.keys == 0 {
            0.0
        } else {
            self.weighted_expected_fp / self.keys as f64
        }
    }

    /// `false_positives / (negatives + false_positives)`, when any absent
    /// key was asked.
    pub fn measured_fp_rate(&self) -> Option<f64> {
        let asked = self.negatives + self.false_positives;
        (asked > 0).then(|| self.false_positives as f64 / asked as f64)
    }

    /// The kinds of filter in the level, e.g. `bloom`, `fuse8`,
    /// `bloom+fuse8`, `none`, `bloom+unusable`; `-` for no tables.
    pub fn kinds(&self) -> String {
        let parts: Vec<&str> = [
            (self.bloom_tables, FilterKind::BlockedBloom.name()),
            (self.fuse8_tables, FilterKind::BinaryFuse8.name()),
            (self.fuse16_tables, FilterKind::BinaryFuse16.name()),
            (self.unfiltered_tables, "none"),
            (self.unusable_tables, "unusable"),
        ]
        .into_iter()
        .filter(|(count, _)| *count > 0)
        .map(|(_, name)| name)
        .collect();
        if parts.is_empty() {
            "-".to_string()
        } else {
            parts.join("+")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{internal_key, SeqNo, ValueKind};
    use crate::table::{TableBuilder, TableOptions};

    fn table(options: &TableOptions, keys: u32) -> Table {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.sst");
        let mut b = TableBuilder::create(&crate::fs::OsFileSystem, &path, options).unwrap();
        for i in 0..keys {
            let key = internal_key(format!("k{i:08}").as_bytes(), SeqNo(1), ValueKind::Put);
            b.add(&key, b"v").unwrap();
        }
        b.finish().unwrap();
        Table::open_path(&path).unwrap()
    }

    #[test]
    fn levels_sum_their_tables() {
        let bloom = TableOptions::default();
        let fuse = TableOptions {
            static_filter: Some(siftdb_filter::FingerprintBits::Eight),
            ..TableOptions::default()
        };
        let none = TableOptions {
            bloom_bits_per_key: 0.0,
            ..TableOptions::default()
        };
        let mut level = LevelFilterStats::default();
        assert_eq!(level.kinds(), "-");
        assert_eq!(level.measured_fp_rate(), None);
        level.add_table(&table(&bloom, 20_000), 990, 10);
        level.add_table(&table(&fuse, 20_000), 996, 4);
        assert_eq!(level.kinds(), "bloom+fuse8");
        assert_eq!((level.keys, level.filtered_keys), (40_000, 40_000));
        let bpk = level.bits_per_key();
        assert!((9.5..11.0).contains(&bpk), "{bpk}");
        let expected = level.expected_fp_rate();
        assert!((0.004..0.008).contains(&expected), "{expected}");
        assert_eq!(level.measured_fp_rate(), Some(14.0 / 2000.0));
        level.add_table(&table(&none, 40_000), 5, 5);
        assert_eq!(level.kinds(), "bloom+fuse8+none");
        // The bare table counts as rate 1 for half the keys.
        assert!((level.expected_fp_rate() - (expected / 2.0 + 0.5)).abs() < 1e-9);
        assert_eq!(level.measured_fp_rate(), Some(14.0 / 2000.0));
        let mut total = LevelFilterStats::default();
        total.merge(&level);
        total.merge(&level);
        assert_eq!(total.tables, 6);
        assert_eq!(total.kinds(), level.kinds());
        assert_eq!(total.expected_fp_rate(), level.expected_fp_rate());
    }
}
