//! A scrub of a live database: `Db::verify_checksums` and
//! `Keyspace::verify_checksums` (RocksDB's `VerifyChecksum`).
//!
//! Owns: reading every live table of the keyspaces asked for from its file
//! again and checking it whole ([`crate::table::Table::verify`]: every
//! block's checksum and structure, key order, index, properties, filters),
//! and what the answer is: `Corruption` naming the first table with an
//! error, or the count of what was checked and the warnings.
//! Must never: change anything, use or fill the block cache (it reads the
//! bytes on disk now), read a table no version pins (it holds the version
//! it loaded, so a compaction meanwhile removes no file it reads), or fail
//! on a warning (a damaged filter costs reads, never an answer).

use std::sync::Arc;

use crate::db::tree::Tree;
use crate::db::verify_blobs::verify_blobs;
use crate::error::{Error, Result};
use crate::filename::table_file_name;
use crate::table::Severity;

/// What [`crate::Db::verify_checksums`] checked.
#[non_exhaustive]
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerifyStats {
    /// Tables read and checked.
    pub tables: u64,
    /// Their files' bytes.
    pub bytes: u64,
    /// Blob files read and checked, with every pointer into them.
    pub blob_files: u64,
    /// Problems that leave every read right (a damaged filter: reads of
    /// its table go to the index instead), one line each, naming the table.
    pub warnings: Vec<String>,
}

/// Checks every live table of `trees` (each as of one version).
pub(crate) fn verify_trees<'a>(
    trees: impl IntoIterator<Item = &'a Arc<Tree>>,
) -> Result<VerifyStats> {
    let mut stats = VerifyStats::default();
    for tree in trees {
        let sv = tree.current.load_full();
        for live in sv.version.levels.iter().flatten() {
            // A table that could not be opened: `Corruption` naming it.
            let table = live.readable()?;
            let problems = table.verify();
            stats.tables += 1;
            stats.bytes += live.record.file_size;
            let name = table_file_name(live.file_number());
            let mut errors = problems.iter().filter(|p| p.severity == Severity::Error);
            if let Some(first) = errors.next() {
                return Err(Error::corruption(
                    format!("table {name} of keyspace {:?}", tree.name),
                    format!(
                        "{} ({:?} block at offset {}; {} more error(s) in this table); \
                         `siftdb repair` salvages what is readable",
                        first.detail,
                        first.block,
                        first.offset,
                        errors.count()
                    ),
                ));
            }
            stats.warnings.extend(
                problems
                    .iter()
                    .map(|p| format!("table {name}: {}", p.detail)),
            );
        }
        stats.blob_files += verify_blobs(tree, &sv.version)?;
    }
    Ok(stats)
}
