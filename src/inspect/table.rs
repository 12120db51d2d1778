//! [`TableSummary`]: what one table file holds, from its footer, properties
//! block, filter block and range filter block.
//!
//! Owns: the figures `siftdb inspect` shows per table, the filter's among them.
//! Must never: read a data block — a summary costs the open of a table
//! (footer, index, properties, filter), nothing more.

use std::path::Path;

use crate::error::Result;
use crate::fs::{OsFileSystem, SharedFs};
use crate::key::{user_key_of, SeqNo};
use crate::table::format::TRAILER_LEN;
use crate::table::properties::PrefixFilterInfo;
use crate::table::{BlockHandle, FilterStatus, ReadContext, ReadCounters, ReadSettings, Table};
use siftdb_filter::range::RangeMode;
use siftdb_filter::theory::LINE_BITS;
use siftdb_filter::{AlignedBytes, AnyFilterView, FilterKind, Layout};

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

/// Absent keys each table's filter is asked by a summary, to measure its
/// false-positive rate (random 64-bit hashes, which match none of the
/// table's keys but with probability keys / 2⁶⁴).
pub const FP_PROBES: u64 = 20_000;
/// The seed of those hashes.
const FP_PROBE_SEED: u64 = 0x5eed_f11e_0000_0001;

/// The state of a table's filter, with its figures when it is in use.
#[derive(Debug, Clone, PartialEq)]
pub enum FilterSummary {
    /// The table was built without a filter: every lookup reads a block.
    Missing,
    /// The filter block failed its checks (the reason); lookups treat every
    /// key as "may match", so they stay correct but read more.
    Corrupt(String),
    /// The filter block is of a kind this build does not read (the reason);
    /// lookups treat every key as "may match".
    UnknownKind(String),
    /// The filter is verified and in use.
    Present(FilterFigures),
}

/// The figures of a filter in use.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FilterFigures {
    /// The kind of filter.
    pub kind: FilterKind,
    /// Bits per key the table was built with (from the properties block:
    /// what the filter policy chose for it).
    pub configured_bits_per_key: f64,
    /// Bits the filter actually has per entry of `actual_entries` (Bloom:
    /// its 512-bit lines round the size up; fuse: its slots).
    pub bits_per_key: f64,
    /// Total bits of the filter proper (header and checksum left out).
    pub bits: u64,
    /// Probes per key (a binary fuse filter: its 3 slots).
    pub probes: u32,
    /// Entries the filter was built over: the distinct user keys, plus the
    /// distinct prefixes with a prefix filter (with prefixes only: the
    /// prefixes, a lower bound, as keys without a prefix are in too).
    pub actual_entries: u64,
    /// The false-positive rate theory expects: for a blocked Bloom filter
    /// at `bits_per_key` and `probes` (Putze et al. 2007), for a binary fuse
    /// filter 2⁻ʷ.
    pub expected_fp_rate: f64,
    /// Random absent keys asked (`FP_PROBES`, 20,000) and how many the filter let
    /// through: the measured rate is their ratio.
    pub probed: u64,
    /// See `probed`.
    pub probe_positives: u64,
    /// The Bloom filter's own figures (`None` for a binary fuse filter).
    pub bloom: Option<BloomFigures>,
}

impl FilterFigures {
    /// `probe_positives / probed`.
    pub fn measured_fp_rate(&self) -> f64 {
        self.probe_positives as f64 / self.probed.max(1) as f64
    }
}

/// What only a blocked Bloom filter has: lines, layout and fill.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BloomFigures {
    /// 512-bit lines.
    pub lines: u64,
    /// Where the probes fall in a line (the block's layout id).
    pub layout: Layout,
    /// Bits set.
    pub set_bits: u64,
    /// `set_bits / bits`.
    pub fill_ratio: f64,
    /// Keys estimated from the fill, line by line (Swamidass & Baldi 2007).
    pub estimated_entries: f64,
    /// The false-positive rate the actual fill of each line implies.
    pub fill_fp_rate: f64,
}

/// How many of [`FP_PROBES`] random absent keys `view` lets through.
pub(crate) fn probe_positives(view: &AnyFilterView<AlignedBytes>) -> u64 {
    let hashes: Vec<u64> = (0..FP_PROBES)
        .map(|i| xxhash_rust::xxh3::xxh3_64_with_seed(&i.to_le_bytes(), FP_PROBE_SEED))
        .collect();
    view.contains_hashes(&hashes).filter(|&maybe| maybe).count() as u64
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

fn on_disk(handle: BlockHandle) -> u64 {
    handle.len.saturating_add(TRAILER_LEN as u64)
}

impl TableSummary {
    /// The summary of an open table.
    pub fn of(table: &Table) -> TableSummary {
        let properties = table.properties();
        let footer = table.footer();
        let filter = match (table.filter_status(), table.filter_view()) {
            (FilterStatus::Corrupt(reason), _) => FilterSummary::Corrupt(reason.clone()),
            (FilterStatus::UnknownKind(reason), _) => FilterSummary::UnknownKind(reason.clone()),
            (FilterStatus::Ok, Some(view)) => FilterSummary::Present(figures_of(
                view,
                properties.filter_bits_per_key,
                properties.point_filter_entries(),
            )),
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
            index_bytes: on_disk(footer.index),
            filter_bytes: footer.filter.map_or(0, on_disk),
            properties_bytes: on_disk(footer.properties),
            format_version: footer.format.version(),
            filter_memory: table.filter_memory(),
            index_memory: table.index_memory(),
            filter,
            prefix_filter: properties.prefix_filter.clone(),
            range_filter_bytes: properties.range_filter.map_or(0, |r| on_disk(r.handle)),
            range_filter_memory: table.range_filter_memory(),
            range_filter,
        }
    }

    /// The filter's kind, when it is in use.
    pub fn filter_kind(&self) -> Option<FilterKind> {
        self.filter_figures().map(|f| f.kind)
    }

    /// The filter's figures, when it is in use.
    pub fn filter_figures(&self) -> Option<&FilterFigures> {
        match &self.filter {
            FilterSummary::Present(figures) => Some(figures),
            _ => None,
        }
    }
}

/// The figures of a filter in use over `keys` entries, built at
/// `configured` bits per key.
fn figures_of(view: &AnyFilterView<AlignedBytes>, configured: f64, keys: u64) -> FilterFigures {
    let bits = view.payload_bits();
    let (probes, bloom) = match view {
        AnyFilterView::Bloom(bloom) => {
            let header = bloom.header();
            let set_bits: u64 = bloom.ones_per_line().map(u64::from).sum();
            let line_bits = header.lines.saturating_mul(u64::from(LINE_BITS));
            let figures = BloomFigures {
                lines: header.lines,
                layout: header.layout,
                set_bits,
                fill_ratio: set_bits as f64 / line_bits.max(1) as f64,
                estimated_entries: bloom.estimated_items(),
                fill_fp_rate: bloom.current_fp_rate(),
            };
            (header.probes, Some(figures))
        }
        AnyFilterView::Fuse(_) => (u32::from(siftdb_filter::fuse::ARITY), None),
    };
    FilterFigures {
        kind: view.kind(),
        configured_bits_per_key: configured,
        bits_per_key: bits as f64 / keys.max(1) as f64,
        bits,
        probes,
        actual_entries: keys,
        expected_fp_rate: view.expected_fp_rate(keys),
        probed: FP_PROBES,
        probe_positives: probe_positives(view),
        bloom,
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
        assert_eq!(f.kind, FilterKind::BlockedBloom);
        assert_eq!(f.configured_bits_per_key, 10.0);
        let measured = f.measured_fp_rate();
        assert!(measured > 0.003 && measured < 0.02, "{measured}");
        let b = f.bloom.unwrap();
        assert_eq!(f.bits, b.lines * 512);
        assert!(f.bits_per_key >= 10.0 && f.bits_per_key < 10.3, "{f:?}");
        assert_eq!(f.actual_entries, 2000);
        // The estimate's relative error is about 0.8/sqrt(m) per line-sum; 5% is generous.
        assert!(
            (b.estimated_entries - 2000.0).abs() < 100.0,
            "{}",
            b.estimated_entries
        );
        assert!(b.fill_ratio > 0.3 && b.fill_ratio < 0.7, "{}", b.fill_ratio);
        assert!(
            f.expected_fp_rate > 0.005 && f.expected_fp_rate < 0.015,
            "{}",
            f.expected_fp_rate
        );
        assert!(b.fill_fp_rate > 0.0 && b.fill_fp_rate < 0.03);
        assert_eq!(
            s.filter_bytes,
            64 + b.lines * 64 + 4 + crate::table::format::TRAILER_LEN as u64
        );
        assert_eq!(s.format_version, crate::table::format::FORMAT_VERSION);
        // In memory: the filter block itself, in whole 64-byte lines.
        assert_eq!(s.filter_memory, 64 + b.lines * 64 + 64);
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
