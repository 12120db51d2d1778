//! # siftdb
//!
//! An embedded key-value store built as an LSM tree whose read path is built
//! around one idea: every sorted table carries a cache-line-blocked Bloom
//! filter, written beside its data, and a `get` asks that filter first, so a
//! table that cannot hold the key costs no disk read.
//!
//! The filter is also a library of its own: see [`filter`].
//!
//! Data flows one way on the read path: database → version → table →
//! filter → block, never back up.
#![warn(missing_docs)]

#[cfg(feature = "tokio")]
mod async_db;
pub mod batch;
pub mod codec;
mod counter;
mod db;
pub mod error;
pub mod filename;
pub mod filter;
pub mod fs;
pub mod inspect;
pub mod key;
pub mod manifest;
pub mod memtable;
pub mod options;
mod prefetch;
pub mod prefix;
pub mod repair;
pub mod table;
pub mod wal;

#[cfg(feature = "tokio")]
pub use async_db::AsyncDb;
pub use batch::WriteBatch;
pub use db::{Db, DbIterator, FilterBuildStats, RecoveryReport, Snapshot, Stats};
pub use error::{Error, Result};
pub use filter::FilterPolicy;
pub use options::Options;
pub use prefix::PrefixExtractor;
pub use repair::{repair, RepairOptions, RepairReport};
