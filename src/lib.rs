//! # siftdb
//!
//! An embedded key-value store built as an LSM tree whose read path is built
//! around one idea: every sorted table carries a cache-line-blocked Bloom
//! filter, written beside its data, and a `get` asks that filter first, so a
//! table that cannot hold the key costs no disk read.
//!
//! ```
//! # fn main() -> siftdb::Result<()> {
//! # let dir = tempfile::tempdir().unwrap();
//! use siftdb::{Db, Options, WriteBatch};
//!
//! let db = Db::open_with(dir.path(), Options::default().bloom_bits_per_key(10.0))?;
//! db.put(b"apple", b"red")?;
//!
//! // Several writes that land together or not at all.
//! let mut batch = WriteBatch::new();
//! batch.put(b"banana", b"yellow");
//! batch.delete(b"apple");
//! db.write(batch)?;
//!
//! assert_eq!(db.get(b"apple")?, None);
//! assert_eq!(db.get(b"banana")?.as_deref(), Some(&b"yellow"[..]));
//! for entry in db.prefix(b"b") {
//!     let (key, value) = entry?;
//!     println!("{key:?} = {value:?}");
//! }
//! db.close()?;
//! # Ok(())
//! # }
//! ```
//!
//! The public API is what an application embeds: [`Db`] (with [`Snapshot`]
//! and [`DbIterator`]), [`WriteBatch`], [`Options`] and its enums,
//! [`Error`]/[`Result`], [`Stats`] (with [`Histograms`] of latencies; `MetricsPublisher` with the feature `metrics`), [`FilterPolicy`], [`PrefixExtractor`],
//! [`repair()`], [`backup`] (numbered, incremental backups), `AsyncDb`
//! (feature `tokio`), the size limits
//! [`MAX_KEY_LEN`] and [`MAX_VALUE_LEN`], and the [`filter`] library.
//! The filter is a library of its own: see [`filter`].
//!
//! Data flows one way on the read path: database → version → table →
//! filter → block, never back up.
#![warn(missing_docs)]

#[cfg(feature = "tokio")]
mod async_db;
#[cfg(feature = "tokio")]
mod async_iter;
#[cfg(feature = "tokio")]
mod async_transaction;
pub mod backup;
mod batch;
mod blob;
mod codec;
mod compression;
mod counter;
mod db;
mod error;
mod events;
mod filename;
pub mod histogram;
/// The filter library (the `siftdb-filter` crate): blocked Bloom, binary
/// fuse, counting, scalable and range filters. A program that needs only
/// the filters can depend on `siftdb-filter` alone.
#[doc(inline)]
pub use siftdb_filter as filter;
mod fs;
mod identify;
mod inspect;
mod key;
mod keyspace_settings;
mod manifest;
mod memtable;
mod options;
mod prefetch;
mod prefix;
mod range_tombstone;
mod repair;
mod shared;
mod storage_options;
mod table;
mod wal;
mod write_options;

#[cfg(feature = "tokio")]
pub use async_db::{AsyncDb, AsyncKeyspace};
#[cfg(feature = "tokio")]
pub use async_iter::AsyncIter;
#[cfg(feature = "tokio")]
pub use async_transaction::AsyncTransaction;
pub use batch::WriteBatch;
#[cfg(feature = "metrics")]
pub use db::metrics_bridge::MetricsPublisher;
pub use db::secondary::{CatchUp, Secondary};
pub use db::{
    CheckpointInfo, CompareAndSwap, Db, DbIterator, FilterBuildStats, HistogramStats, Histograms,
    IngestOptions, Keyspace, KeyspaceOptions, KeyspaceStats, ManifestRecovery, RecoveryReport,
    Snapshot, Stats, TableWriter, Transaction, TransactionIter, TransactionOptions, VerifyStats,
};
pub use error::{Error, Result};
pub use events::{
    BackgroundErrorEvent, BackgroundWork, CompactionEvent, CompactionReason, EventListener,
    FlushEvent, StallCause, TableMetadata, WriteStallEvent,
};
pub use filter::FilterPolicy;
pub use histogram::{Histogram, HistogramSummary};
pub use key::{MAX_KEY_LEN, MAX_VALUE_LEN};
pub use memtable::MemtableRangeStats;
pub use options::{
    CompactionDecision, CompactionFilter, Compression, MergeOperator, Options, WriteOptions,
};
pub use prefix::PrefixExtractor;
pub use repair::{
    repair, BlobFileReport, LogAction, LogReport, LostRange, ManifestFinding, RepairOptions,
    RepairReport, TableAction, TableReport,
};
pub use shared::{Cache, RateLimiter, WriteBufferManager};
pub use table::LevelFilterStats;
pub use wal::LostRecord;

/// siftdb's own internals, public only for the project's tools (the CLI,
/// the benchmarks, the test kit and the fuzz targets). Each module here
/// re-exports by name exactly the items the tools and tests use, never a
/// whole module of the crate.
///
/// **No stability promise**: anything here may change or vanish in any
/// release, patch releases included. An application uses the items at the
/// crate root instead.
#[doc(hidden)]
pub mod internals {
    /// Write batches and their log encoding.
    pub mod batch {
        pub use crate::batch::{decode_record, OpKind, RawBatch, WriteBatch};
    }
    /// Blob files: separated values and the pointers to them.
    pub mod blob {
        pub use crate::blob::format::{
            decode_file, decode_header, encode_footer, encode_header, encode_record, BlobCounts,
            BlobRecord, BLOB_FOOTER_LEN, BLOB_HEADER_LEN,
        };
        pub use crate::blob::{
            blob_file_name, parse_blob_file_name, verify_blob_file, BlobFile, BlobFileInfo,
            BlobPointer, BlobWriter, BLOB_FORMAT_VERSION, BLOB_POINTER_LEN,
        };
    }
    /// Checksums and varints.
    pub mod codec {
        pub use crate::codec::crc32_of;
    }
    /// File names of a database directory.
    pub mod filename {
        pub use crate::filename::{
            parse_file_name, table_file_name, wal_file_name, FileKind, MANIFEST_FILE,
        };
    }
    /// The file-system seam (fault injection plugs in here).
    pub mod fs {
        pub use crate::fs::{
            short_read, DirLock, FileSystem, OsFileSystem, RandomAccessFile, SharedFs, WritableFile,
        };
    }
    /// Reports on a database directory and its tables, and `verify`.
    pub mod inspect {
        pub use crate::inspect::{
            inspect_blob_file, inspect_dir, inspect_dir_with, inspect_table, verify_dir,
            BlobDamage, BlobPlace, BlobSummary, DirSummary, FileRole, FilterFigures, FilterSummary,
            Finding, LevelSummary, Problem, RangeFilterSummary, TableSummary, VerifyReport,
        };
    }
    /// Internal keys: user key, sequence number and kind.
    pub mod key {
        pub use crate::key::{
            compare_internal_keys, internal_key, lookup_key, parse_internal_key, tag, user_key_of,
            SeqNo, ValueKind, TAG_LEN,
        };
    }
    /// The manifest file.
    pub mod manifest {
        pub use crate::manifest::{
            decode, encode, read_manifest, read_manifest_copy, write_manifest, BlobFileRecord,
            KeyspaceRecord, KeyspaceSettings, ManifestState, TableRecord, MAX_LEVELS,
        };
    }
    /// The backup metadata file's codec, and what `siftdb inspect` shows
    /// of a backup directory.
    pub mod backup_meta {
        pub use crate::backup::inspect::{inspect_backup_dir, MetaSummary};
        pub use crate::backup::meta::{decode_meta, encode_meta, safe_name, META_HEADER};
    }
    /// A keyspace's tables exported at one sequence number, and a new
    /// keyspace imported from such tables (siftdb-raft's snapshots).
    pub mod keyspace_export {
        pub use crate::db::export::{import_keyspace, KeyspaceExport};
    }
    /// The memtable.
    pub mod memtable {
        pub use crate::memtable::{MemValue, Memtable, MemtableIter};
    }
    /// Option constants.
    pub mod options {
        pub use crate::options::DEFAULT_MULTI_GET_IN_FLIGHT;
    }
    /// Prefix helpers.
    pub mod prefix {
        pub use crate::prefix::successor;
    }
    /// Range tombstones, their fragments and block encoding.
    pub mod range_tombstone {
        pub use crate::range_tombstone::{FragmentedTombstones, RangeTombstone};
    }
    /// Repair's parts.
    pub mod repair {
        pub use crate::repair::LOST_DIR;
    }
    /// Sorted tables: format, builder, reader, salvage.
    pub mod table {
        pub use crate::table::{
            io_uring_available, BlockHandle, BlockKind, Codec, FilterStatus, LookupKey,
            ReadContext, ReadCounters, ReadSettings, Severity, Table, TableBuilder, TableFormat,
            TableInfo, TableKeyspace, TableOptions, TableValue,
        };
        /// Data blocks and their builder.
        pub mod block {
            pub use crate::table::block::{Block, BlockBuilder};
        }
        /// Block compression.
        pub mod compression {
            pub use crate::table::compression::{
                compress_block, decompress, decompress_block, MAX_BLOCK_LEN,
            };
            pub use crate::table::zstd_codec::{
                train_dictionary, ZstdDictionary, ZstdEncoder, MAX_ZSTD_RATIO,
            };
        }
        /// Block trailers and the footer.
        pub mod format {
            pub use crate::table::format::{
                block_checksum, encode_trailer, FOOTER_LEN, TRAILER_LEN,
            };
        }
        /// Prefix probes of the scan filters.
        pub mod scan_filters {
            pub use crate::table::scan_filters::PrefixProbe;
        }
    }
    /// The write-ahead log.
    pub mod wal {
        pub use crate::wal::{
            encode_close_record, encode_file_header, encode_record_into, record_header_len, replay,
            replay_batches, CLOSE_RECORD_LEN, FILE_HEADER_LEN, FORMAT_VERSION,
        };
    }
}
