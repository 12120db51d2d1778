//! Blob files: values at or above a keyspace's blob threshold, kept out of
//! the tables (key-value separation, as WiscKey, RocksDB's integrated
//! BlobDB and fjall's KV separation do), so compaction moves a 24-byte
//! pointer instead of the value.
//!
//! A flush (or a compaction that rewrites values) appends each large value
//! to a new blob file beside the table it writes, and the table entry holds
//! a [`BlobPointer`] under `ValueKind::Blob` instead of the value. Reads
//! resolve the pointer after the table answered (filter → index → block →
//! blob), checking the value against the pointer's checksum.
//!
//! Owns: the blob file format (`format.rs`), writing one (`writer.rs`),
//! reading values from one and the per-database registry of open ones
//! (`reader.rs`), and the sums of pointers a compaction reads (`tally.rs`).
//! Must never: hand out a value that does not match the checksum its
//! pointer holds, or depend on the tables (the tables depend on it).

pub mod format;
pub mod reader;
pub(crate) mod tally;
pub mod writer;

pub use format::{BlobPointer, BLOB_FORMAT_VERSION, BLOB_POINTER_LEN};
pub use reader::{blob_file_name, parse_blob_file_name, verify_blob_file, BlobFile, BlobFiles};
pub use writer::{BlobFileInfo, BlobWriter};
