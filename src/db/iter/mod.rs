//! Scans: merging every source into one ordered view at a snapshot.
//!
//! Owns: the cursor trait every source implements (memtables, tables, a
//! level of disjoint tables), the choice of the tables a scan reads (key
//! range, then the tables' prefix and range filters), the merge (whose
//! seek first hints every source's block read, so reads that reach the
//! device overlap), and [`DbIterator`], which hides older versions,
//! tombstones, the versions a range tombstone the snapshot sees deletes
//! (gathered once per scan from every memtable and every table whose key
//! range meets the scan's, before any filter rules a table out), and
//! writes newer than its snapshot.
//! Must never: show part of a batch (it reads at one sequence number), or
//! see a table vanish under it (it holds the version it started with).
//!
//! Files: `sources` (the cursor trait and the sources), `merging` (the
//! merge), `operands` (merge operands and range-tombstone deletion, shared
//! with compaction), `db_iterator` ([`DbIterator`]), `bounds` (ranges as
//! owned bounds). This file only names them.

mod bounds;
mod db_iterator;
mod merging;
mod operands;
mod sources;

pub(crate) use bounds::{owned_range, prefix_range};
pub use db_iterator::DbIterator;
pub(crate) use merging::MergingIter;
pub(crate) use operands::{apply_merge, deleted_by, gather_operands};
pub(crate) use sources::{InternalIterator, MemSource, TableSource};
