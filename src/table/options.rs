//! [`TableOptions`]: how a table is built — block size, restart interval,
//! filter kind and size, compression, prefix extractor, range filter,
//! keyspace — with their defaults and their checks.
//!
//! Owns: the options' fields, defaults, the conversion from the database's
//! `Options`, and `validate`.
//! Must never: depend on anything else in `table/` (the builder, the
//! reader, the get and the scan filters all look down at it), or accept a
//! value the builder cannot honour (`validate` names the first bad field).

use crate::error::{Error, Result};
use crate::options::{Compression, Options, TableKeyspace};
use crate::prefix::PrefixExtractor;
use siftdb_filter::theory::{MAX_BITS_PER_KEY, MIN_BITS_PER_KEY};
use siftdb_filter::{FilterChoice, FingerprintBits};

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
    /// With zstd: bytes of a dictionary to train from the table's first
    /// data blocks and use for all of them (0: none). Default 0.
    pub zstd_dictionary_bytes: usize,
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
            zstd_dictionary_bytes: 0,
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
    /// [`siftdb_filter::FilterPolicy`] chose for the table): no filter, a
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
            siftdb_filter::range::MIN_BITS_PER_KEY,
            siftdb_filter::range::MAX_BITS_PER_KEY,
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
        self.compression.validate()?;
        let dictionary = self.zstd_dictionary_bytes;
        let (min, max) = (
            Compression::MIN_DICTIONARY_BYTES,
            Compression::MAX_DICTIONARY_BYTES,
        );
        if dictionary != 0 && !(self.compression.is_zstd() && (min..=max).contains(&dictionary)) {
            return Err(Error::invalid(format!(
                "zstd_dictionary_bytes must be 0, or within [{min}, {max}] with zstd, got {dictionary}"
            )));
        }
        Ok(())
    }
}
