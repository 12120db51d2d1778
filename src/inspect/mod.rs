//! Looking at a database from the outside: what a table file, a blob file
//! or a database directory holds ([`inspect_table`], [`inspect_blob_file`],
//! [`inspect_dir`]) and whether every byte of it still checks out
//! ([`verify_dir`]).
//!
//! These are the library side of `siftdb inspect` and `siftdb verify`; they
//! return plain structs so tests and tools can use them without parsing
//! text. The command line only formats them.
//!
//! Owns: [`TableSummary`], [`BlobSummary`], [`DirSummary`], [`VerifyReport`] and how they are
//! gathered from the files.
//! Must never: write, create, rename or remove a file, or take the
//! directory lock — they only read, through the [`FileSystem`] seam, so they
//! can run on a closed database, on a directory they may not write, or
//! beside an open one. (Beside an open one [`inspect_dir`] describes one
//! manifest — it starts over when the manifest moved while it read — but
//! [`verify_dir`] may see a log in the middle of an append, or a table that
//! a compaction removes while it reads; run it on a closed database for a
//! definitive answer.)
//!
//! ```
//! use siftdb::{internals::inspect, Db, Options};
//! let dir = tempfile::tempdir()?;
//! {
//!     let db = Db::open_with(dir.path(), Options::default())?;
//!     db.put("apple", "red")?;
//!     db.flush()?;
//! }
//! let report = inspect::verify_dir(dir.path())?;
//! assert!(report.is_clean(), "{:?}", report.problems);
//! let summary = inspect::inspect_dir(dir.path())?;
//! assert_eq!(summary.tables.len(), 1);
//! # Ok::<(), siftdb::Error>(())
//! ```
//!
//! [`FileSystem`]: crate::fs::FileSystem

mod blob;
mod dir;
mod table;
mod verify;
mod versions;

/// Where `repair` has found it (defined below `db` and `inspect`, which
/// both need it).
pub(crate) use crate::identify::check_is_database;
pub use blob::{inspect_blob_file, BlobDamage, BlobPlace, BlobSummary};
pub use dir::{inspect_dir, inspect_dir_with, DirSummary, FileRole, LevelSummary};
pub use table::{inspect_table, RangeFilterSummary, TableSummary};
pub use table::{FilterFigures, FilterSummary};
pub use verify::{verify_dir, verify_dir_with, Finding, Problem, VerifyReport};
