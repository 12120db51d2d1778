//! [`TableSummary`]: what one table file holds, from its footer, properties
//! block, filter block and range filter block.
//!
//! Owns: the figures `siftdb inspect` shows per table, the filter's among them.
//! Must never: read a data block — a summary costs the open of a table
//! (footer, index, properties, filter), nothing more.

use std::path::Path;

use crate::error::Result;
use crate::filter::range::RangeMode;
use crate::filter::theory::{blocked_fp_rate, LINE_BITS};
use crate::fs::{OsFileSystem, SharedFs};
use crate::key::{user_key_of, SeqNo};
use crate::table::properties::PrefixFilterInfo;
use crate::table::{
    BlockHandle, FilterStatus, ReadContext, ReadCounters, ReadSettings, Table, TableFormat,
};

/// What a table file holds. Sizes count bytes on disk, block trailers included.
#[derive(Debug, Clone, PartialEq)]
pub struct TableSummary {
    /// The file name.
    pub name: String,
    /// Bytes of the file.
    pub file_size: u64,
    /// The smallest user key.
    pub smallest_user_key: Vec<u8>,
    /// The largest user key.
    pub largest_user_key: Vec<u8>,
    /// The smallest sequence number of any entry.
    pub min_seq: SeqNo,
    /// The largest sequence number of any entry.
    pub max_seq: SeqNo,
    /// Entries (versions), tombstones included.
    pub entries: u64,
    /// Tombstones.
    pub deletions: u64,
    /// Distinct user keys: the keys the filter was built from.
    pub distinct_user_keys: u64,
    /// Data blocks.
    pub data_blocks: u64,
    /// Bytes of all data blocks.
    pub data_bytes: u64,
    /// Bytes of the index block.
    pub index_bytes: u64,
    /// Bytes of the filter block (0 when the table has none).
    pub filter_bytes: u64,
    /// Bytes of the properties block.
    pub properties_bytes: u64,
    /// The table format version (1, 2 or 3).
    pub format_version: u32,
    /// Bytes of memory the filter takes while the table is open (0 when it
    /// has none or it is damaged).
    pub filter_memory: u64,
    /// Bytes of memory the decoded index takes while the table is open.
    pub index_memory: u64,
    /// The filter and its figures.
    pub filter: FilterSummary,
    /// Prefixes in the filter: the extractor's name, whether whole keys are
    /// in too, how many prefixes (format 3).
    pub prefix_filter: Option<PrefixFilterInfo>,
    /// Bytes of the range filter block (0 when the table has none).
    pub range_filter_bytes: u64,
    /// Bytes of memory the range filter takes while the table is open.
    pub range_filter_memory: u64,
    /// The range filter and its figures.
    pub range_filter: RangeFilterSummary,
}

/// The state of a table's range filter.
#[derive(Debug, Clone, PartialEq)]
pub enum RangeFilterSummary {
    /// The table was built without one.
    Missing,
    /// The block failed its checks (the reason): every range may match.
    Corrupt(String),
    /// Verified and in use.
    Present {
        /// Bits per key asked for (the properties').
        configured_bits_per_key: f64,
        /// Bits of the block per distinct user key.
        bits_per_key: f64,
        /// `exact` (dense keys, no false positive) or `hashed` (Grafite).
        mode: &'static str,
    },
}

/// The state of a table's filter, with its figures when it is in use.
#[derive(Debug, Clone, PartialEq)]
pub enum FilterSummary {
    /// The table was built without a filter: every lookup reads a block.
    Missing,
    /// The filter block failed its checks (the reason); lookups treat every
    /// key as "may match", so they stay correct but read more.
    Corrupt(String),
    /// The filter is verified and in use.
    Present(FilterFigures),
}

/// The figures of a filter in use.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FilterFigures {
    /// Bits per key the table was built with (from the properties block).
    pub configured_bits_per_key: f64,
    /// Bits the filter actually has per distinct user key (its 512-bit
    /// lines round the size up).
    pub bits_per_key: f64,
    /// Total bits.
    pub bits: u64,
    /// 512-bit lines.
    pub lines: u64,
    /// Probes per key.
    pub probes: u32,
    /// Where the probes fall in a line (the block's layout id).
    pub layout: crate::filter::Layout,
    /// Bits set.
    pub set_bits: u64,
    /// `set_bits / bits`.
    pub fill_ratio: f64,
    /// Keys estimated from the fill, line by line (Swamidass & Baldi 2007).
    pub estimated_entries: f64,
    /// Entries actually inserted: the distinct user keys, plus the distinct
    /// prefixes with a prefix filter (with prefixes only: the prefixes, a
    /// lower bound, as keys without a prefix are in too).
    pub actual_entries: u64,
    /// The false-positive rate the theory of blocked filters expects at
    /// `bits_per_key` and `probes` (Putze et al. 2007).
    pub expected_fp_rate: f64,
    /// The false-positive rate the actual fill of each line implies.
    pub fill_fp_rate: f64,
}

/// Opens the table at `path` on the real file system and summarises it.
pub fn inspect_table(path: &Path) -> Result<TableSummary> {
    inspect_table_with(&OsFileSystem::shared(), path)
}

/// Opens the table at `path` through `fs` and summarises it.
pub fn inspect_table_with(fs: &SharedFs, path: &Path) -> Result<TableSummary> {
    let tables = ReadContext::new(
        std::sync::Arc::clone(fs),
        ReadSettings::tool(),
        ReadCounters::new(),
    );
    let table = Table::open(&tables, path)?;
    Ok(TableSummary::of(&table))
}

fn on_disk(handle: BlockHandle, format: TableFormat) -> u64 {
    handle.len.saturating_add(format.trailer_len() as u64)
}

impl TableSummary {
    /// The summary of an open table.
    pub fn of(table: &Table) -> TableSummary {
        let properties = table.properties();
        let footer = table.footer();
        let filter = match (table.filter_status(), table.filter_view()) {
            (FilterStatus::Corrupt(reason), _) => FilterSummary::Corrupt(reason.clone()),
            (FilterStatus::Ok, Some(view)) => {
                let header = view.header();
                let bits = header.lines.saturating_mul(LINE_BITS as u64);
                let set_bits: u64 = view.ones_per_line().map(u64::from).sum();
                // Whole keys, plus the prefixes a prefix filter added; with
                // prefixes only, the prefixes (the keys without a prefix,
                // also in, are not counted anywhere).
                let keys = match &properties.prefix_filter {
                    None => properties.distinct_user_keys,
                    Some(p) if p.whole_keys => properties.distinct_user_keys + p.prefixes,
                    Some(p) => p.prefixes,
                };
                let bits_per_key = bits as f64 / keys.max(1) as f64;
                FilterSummary::Present(FilterFigures {
                    configured_bits_per_key: properties.filter_bits_per_key,
                    bits_per_key,
                    bits,
                    lines: header.lines,
                    probes: header.probes,
                    layout: header.layout,
                    set_bits,
                    fill_ratio: set_bits as f64 / bits.max(1) as f64,
                    estimated_entries: view.estimated_items(),
                    actual_entries: keys,
                    expected_fp_rate: blocked_fp_rate(bits_per_key, header.probes),
                    fill_fp_rate: view.current_fp_rate(),
                })
            }
            _ => FilterSummary::Missing,
        };
        let range_filter = match (table.range_filter_status(), table.range_filter_view()) {
            (FilterStatus::Corrupt(reason), _) => RangeFilterSummary::Corrupt(reason.clone()),
            (FilterStatus::Ok, Some(view)) => RangeFilterSummary::Present {
                configured_bits_per_key: properties.range_filter.map_or(0.0, |r| r.bits_per_key),
                bits_per_key: view.bits_per_key(),
                mode: match view.header().mode {
                    RangeMode::Exact => "exact",
                    RangeMode::Hashed => "hashed",
                    RangeMode::Empty => "empty",
                },
            },
            _ => RangeFilterSummary::Missing,
        };
        TableSummary {
            name: table.name().to_string(),
            file_size: table.file_size(),
            smallest_user_key: user_key_of(table.smallest()).to_vec(),
            largest_user_key: user_key_of(table.largest()).to_vec(),
            min_seq: properties.min_seq,
            max_seq: properties.max_seq,
            entries: properties.entries,
            deletions: properties.deletions,
            distinct_user_keys: properties.distinct_user_keys,
            data_blocks: properties.data_blocks,
            data_bytes: properties.data_size,
            index_bytes: on_disk(footer.index, footer.format),
            filter_bytes: footer.filter.map_or(0, |h| on_disk(h, footer.format)),
            properties_bytes: on_disk(footer.properties, footer.format),
            format_version: footer.format.version(),
            filter_memory: table.filter_memory(),
            index_memory: table.index_memory(),
            filter,
            prefix_filter: properties.prefix_filter.clone(),
            range_filter_bytes: properties
                .range_filter
                .map_or(0, |r| on_disk(r.handle, footer.format)),
            range_filter_memory: table.range_filter_memory(),
            range_filter,
        }
    }

    /// The filter's figures, when it is in use.
    pub fn filter_figures(&self) -> Option<&FilterFigures> {
        match &self.filter {
            FilterSummary::Present(figures) => Some(figures),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{internal_key, ValueKind};
    use crate::table::{TableBuilder, TableOptions};

    fn build(path: &Path, bits_per_key: f64, keys: u32) {
        let options = TableOptions {
            bloom_bits_per_key: bits_per_key,
            ..TableOptions::default()
        };
        let mut builder = TableBuilder::create(&OsFileSystem, path, &options).unwrap();
        for i in 0..keys {
            let kind = if i % 10 == 0 {
                ValueKind::Delete
            } else {
                ValueKind::Put
            };
            let key = internal_key(
                format!("key{i:05}").as_bytes(),
                SeqNo(u64::from(i) + 1),
                kind,
            );
            builder.add(&key, b"value").unwrap();
        }
        builder.finish().unwrap();
    }

    #[test]
    fn summary_reports_counts_sizes_and_filter_figures() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("000007.sst");
        build(&path, 10.0, 2000);
        let s = inspect_table(&path).unwrap();
        assert_eq!(s.name, "000007.sst");
        assert_eq!(s.file_size, std::fs::metadata(&path).unwrap().len());
        assert_eq!(
            (s.entries, s.deletions, s.distinct_user_keys),
            (2000, 200, 2000)
        );
        assert_eq!(s.smallest_user_key, b"key00000");
        assert_eq!(s.largest_user_key, b"key01999");
        assert_eq!((s.min_seq, s.max_seq), (SeqNo(1), SeqNo(2000)));
        assert!(s.data_blocks > 1);
        assert!(
            s.data_bytes + s.index_bytes + s.filter_bytes + s.properties_bytes < s.file_size,
            "{s:?}"
        );
        let f = s.filter_figures().unwrap();
        assert_eq!(f.configured_bits_per_key, 10.0);
        assert_eq!(f.bits, f.lines * 512);
        assert!(f.bits_per_key >= 10.0 && f.bits_per_key < 10.3, "{f:?}");
        assert_eq!(f.actual_entries, 2000);
        // The estimate's relative error is about 0.8/sqrt(m) per line-sum; 5% is generous.
        assert!(
            (f.estimated_entries - 2000.0).abs() < 100.0,
            "{}",
            f.estimated_entries
        );
        assert!(f.fill_ratio > 0.3 && f.fill_ratio < 0.7, "{}", f.fill_ratio);
        assert!(
            f.expected_fp_rate > 0.005 && f.expected_fp_rate < 0.015,
            "{}",
            f.expected_fp_rate
        );
        assert!(f.fill_fp_rate > 0.0 && f.fill_fp_rate < 0.03);
        assert_eq!(
            s.filter_bytes,
            64 + f.lines * 64 + 4 + crate::table::format::TRAILER_LEN as u64
        );
        assert_eq!(s.format_version, crate::table::format::FORMAT_VERSION);
        // In memory: the filter block itself, in whole 64-byte lines.
        assert_eq!(s.filter_memory, 64 + f.lines * 64 + 64);
        assert!(s.index_memory >= s.data_blocks * (16 + 16), "{s:?}");
    }

    #[test]
    fn a_table_without_a_filter_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("000001.sst");
        build(&path, 0.0, 10);
        let s = inspect_table(&path).unwrap();
        assert_eq!(s.filter, FilterSummary::Missing);
        assert_eq!(s.filter_bytes, 0);
        assert!(s.filter_figures().is_none());
    }

    #[test]
    fn a_damaged_filter_is_reported_not_fatal() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("000001.sst");
        build(&path, 10.0, 100);
        let table = Table::open_path(&path).unwrap();
        let filter = table.footer().filter.unwrap();
        drop(table);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[usize::try_from(filter.offset).unwrap() + 70] ^= 0x01;
        std::fs::write(&path, &bytes).unwrap();
        let s = inspect_table(&path).unwrap();
        match &s.filter {
            FilterSummary::Corrupt(reason) => assert!(reason.contains("checksum"), "{reason}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_file_that_is_not_a_table_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("junk.sst");
        std::fs::write(&path, b"not a table").unwrap();
        assert!(inspect_table(&path).unwrap_err().is_corruption());
        assert!(inspect_table(&dir.path().join("absent.sst")).is_err());
    }
}
