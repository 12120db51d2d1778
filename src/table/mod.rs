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
mod block_scan;
pub mod builder;
pub mod compression;
pub mod context;
pub mod counters;
mod dictionary_training;
pub mod filter_hash;
pub mod filter_stats;
pub mod format;
mod get;
mod index;
pub mod iter;
pub mod lookup;
mod open;
pub mod options;
pub(crate) mod overlapped;
pub mod properties;
pub mod reader;
pub mod salvage;
mod salvage_dictionary;
mod scan;
pub mod scan_filters;
mod verify;
pub mod zstd_codec;

pub use builder::{TableBuilder, TableInfo};
pub use context::{ReadContext, ReadSettings};
pub use counters::ReadCounters;
pub use filter_stats::LevelFilterStats;
pub use format::{BlockHandle, BlockKind, Codec, Footer, TableFormat};
pub use get::TableValue;
pub use iter::{ScanMode, TableIter};
pub use lookup::LookupKey;
pub use options::TableOptions;
pub use overlapped::io_uring_available;
pub use properties::{TableKeyspace, TableProperties};
pub use reader::{FilterStatus, Table};
pub use salvage::{Salvaged, SalvagedTombstones, TableSalvager};
pub use verify::Severity;
