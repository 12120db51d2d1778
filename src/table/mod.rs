//! Sorted tables: immutable files of internal-key → value entries, each with
//! a filter block over its user keys (a blocked Bloom filter, or a binary
//! fuse filter when the table's options ask for a static one) that a `get`
//! asks before it reads any data block.
//!
//! A table is written once by [`TableBuilder`] (entries in strictly
//! increasing internal-key order, streamed to the file, fsynced before
//! `finish` returns) and read through [`Table`], which memory-maps the file,
//! verifies the footer, index, properties and filter at open, and verifies
//! each data block's checksum the first time it is read. The byte layout is
//! in `docs/format.md`, "Table file".
//!
//! Owns: the table file format (one version, `format::FORMAT_VERSION`: a
//! table of any other is `Error::UnsupportedVersion`), its builder, reader
//! (`reader.rs`: the handle and its metadata; `open.rs`: opening;
//! `block_reads.rs`: reading and caching blocks), point lookup (`get.rs`:
//! filter → index → block), scans (`scan.rs`, the cursor in `iter.rs`) and
//! verification (`verify.rs`).
//! Must never: return a wrong value or silently miss a present key — a
//! damaged data, index, properties block or footer is `Error::Corruption`
//! naming the file, the block and its offset; only a damaged filter is
//! tolerated, by failing open (every key "may match"), as is a filter of a
//! kind this build does not read.
//!
//! ```
//! use siftdb::internals::key::{internal_key, SeqNo, ValueKind};
//! use siftdb::internals::table::{Table, TableBuilder, TableOptions, TableValue};
//! use siftdb::internals::fs::OsFileSystem;
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("000001.sst");
//! let mut builder = TableBuilder::create(&OsFileSystem, &path, &TableOptions::default())?;
//! builder.add(&internal_key(b"apple", SeqNo(2), ValueKind::Put), b"red")?;
//! builder.add(&internal_key(b"pear", SeqNo(1), ValueKind::Delete), b"")?;
//! let info = builder.finish()?;
//! assert_eq!(info.entries, 2);
//! let table = Table::open_path(&path)?;
//! assert_eq!(table.get_key(b"apple")?, Some(TableValue::Put("red".into())));
//! assert_eq!(table.get_key(b"pear")?, Some(TableValue::Deleted));
//! assert_eq!(table.get_key(b"plum")?, None);
//! # Ok::<(), siftdb::Error>(())
//! ```

pub mod block;
mod block_buffer;
pub mod block_iter;
mod block_reads;
pub mod builder;
pub mod compression;
pub mod context;
pub mod counters;
pub mod filter_stats;
pub mod format;
mod get;
mod index;
pub mod iter;
pub mod lookup;
mod open;
pub(crate) mod overlapped;
pub mod properties;
pub mod reader;
pub mod salvage;
mod scan;
pub mod scan_filters;
mod verify;

pub use builder::{TableBuilder, TableInfo};
pub use context::{ReadContext, ReadSettings};
pub use counters::{ReadCounters, ReadStats};
pub use filter_stats::LevelFilterStats;
pub use format::{BlockHandle, BlockKind, Codec, Footer, TableFormat};
pub use get::TableValue;
pub use iter::{ScanMode, TableIter};
pub use lookup::LookupKey;
pub use overlapped::io_uring_available;
pub use properties::{TableKeyspace, TableProperties};
pub use reader::{FilterStatus, Table};
pub use salvage::{LostBlock, Salvaged, SalvagedBlock, SalvagedTombstones, TableSalvager};
pub use verify::{Severity, VerifyProblem};

use crate::error::{Error, Result};
use crate::filter::theory::{MAX_BITS_PER_KEY, MIN_BITS_PER_KEY};
use crate::filter::{FilterChoice, FingerprintBits};
use crate::options::{Compression, Options};
use crate::prefix::PrefixExtractor;

/// How a table is built.
#[derive(Debug, Clone, PartialEq)]
pub struct TableOptions {
    /// Target size of a data block in bytes; a block is cut before an entry
    /// that would take it past this (a single larger entry gets its own block).
    /// Default 4096.
    pub block_size: usize,
    /// Bloom filter bits per distinct user key; 0 writes no filter. Default
    /// 10. With `static_filter`, the bits the table is recorded as built
    /// with and the size of the Bloom filter built when the static one
    /// cannot be.
    pub bloom_bits_per_key: f64,
    /// Build a binary fuse filter with fingerprints of this width instead of
    /// a Bloom filter (when `bloom_bits_per_key` > 0). Default `None`.
    pub static_filter: Option<FingerprintBits>,
    /// Entries between restart points in a data block. Default 16.
    pub restart_interval: usize,
    /// Keep a data block that fits in a 4 KiB page off page boundaries
    /// (zero padding before it), so reading it from the file touches one
    /// page. Default true; the database writes level-0 tables without it
    /// (see `src/db/flush.rs`).
    pub page_aligned_blocks: bool,
    /// How data blocks are stored. Default LZ4 (raw when it does not pay).
    pub compression: Compression,
    /// Adds each key's prefix to the filter (`Options::prefix_extractor`);
    /// needs a filter (`bloom_bits_per_key > 0`). Default none.
    pub prefix_extractor: Option<PrefixExtractor>,
    /// With an extractor: keep whole keys in the filter too. Default true.
    pub whole_key_filtering: bool,
    /// Range filter bits per distinct user key; 0 writes none. Default 0.
    pub range_filter_bits_per_key: f64,
    /// The keyspace the table belongs to, recorded in its properties so
    /// repair can put it back without a manifest; `None` for the default
    /// keyspace (recorded as nothing).
    pub keyspace: Option<TableKeyspace>,
}

impl Default for TableOptions {
    fn default() -> Self {
        TableOptions {
            block_size: 4096,
            bloom_bits_per_key: 10.0,
            static_filter: None,
            restart_interval: 16,
            page_aligned_blocks: true,
            compression: Compression::default(),
            prefix_extractor: None,
            whole_key_filtering: true,
            range_filter_bits_per_key: 0.0,
            keyspace: None,
        }
    }
}

impl From<&Options> for TableOptions {
    fn from(options: &Options) -> Self {
        TableOptions {
            block_size: options.block_size,
            bloom_bits_per_key: options.filter_policy.average_bits_per_key(),
            compression: options.compression,
            prefix_extractor: options.prefix_extractor.clone(),
            whole_key_filtering: options.whole_key_filtering,
            range_filter_bits_per_key: options.range_filter_bits_per_key,
            keyspace: options.keyspace.clone(),
            ..TableOptions::default()
        }
    }
}

impl TableOptions {
    /// These options with the filter `choice` (what a
    /// [`crate::filter::FilterPolicy`] chose for the table): no filter, a
    /// Bloom filter, or a binary fuse filter recorded at the bits per key it
    /// was chosen for (with a Bloom filter of those bits as its fallback).
    pub fn with_filter(mut self, choice: FilterChoice) -> TableOptions {
        let clamp = |bits: f64| bits.clamp(MIN_BITS_PER_KEY, MAX_BITS_PER_KEY);
        (self.bloom_bits_per_key, self.static_filter) = match choice {
            FilterChoice::None => (0.0, None),
            FilterChoice::Bloom { bits_per_key } => (clamp(bits_per_key), None),
            FilterChoice::Fuse { bits, bits_per_key } => (clamp(bits_per_key), Some(bits)),
        };
        self
    }

    /// Checks every field; `InvalidArgument` names the first bad one.
    pub fn validate(&self) -> Result<()> {
        let bits = self.bloom_bits_per_key;
        if !(bits == 0.0
            || (bits.is_finite() && (MIN_BITS_PER_KEY..=MAX_BITS_PER_KEY).contains(&bits)))
        {
            return Err(Error::invalid(format!(
                "bloom_bits_per_key must be 0 or within [{MIN_BITS_PER_KEY}, {MAX_BITS_PER_KEY}], got {bits}"
            )));
        }
        let range = self.range_filter_bits_per_key;
        let (min, max) = (
            crate::filter::range::MIN_BITS_PER_KEY,
            crate::filter::range::MAX_BITS_PER_KEY,
        );
        if !(range == 0.0 || (range.is_finite() && (min..=max).contains(&range))) {
            return Err(Error::invalid(format!(
                "range_filter_bits_per_key must be 0 or within [{min}, {max}], got {range}"
            )));
        }
        if !(1..=1 << 28).contains(&self.block_size) {
            return Err(Error::invalid("block_size must be within [1, 256 MiB]"));
        }
        if !(1..=1 << 16).contains(&self.restart_interval) {
            return Err(Error::invalid("restart_interval must be within [1, 65536]"));
        }
        Ok(())
    }
}
