//! The blob-file half of `Db::verify_checksums`: every blob file a live
//! table points into, read whole and checked (header, each record's
//! checksum, footer and its counts), and every blob pointer of every live
//! table resolved (the value it names read and checked against the
//! pointer's checksum).
//!
//! Owns: that check and its counts.
//! Must never: change anything, or pass a table whose pointer names a
//! missing file, lands outside its file or on bytes that do not match.

use std::collections::BTreeSet;

use crate::db::tree::Tree;
use crate::db::version::Version;
use crate::error::{Error, Result};
use crate::table::ScanMode;

/// Checks the blob files of `version` (of `tree`) and the pointers into
/// them; returns how many files it checked.
pub(crate) fn verify_blobs(tree: &Tree, version: &Version) -> Result<u64> {
    let mut checked = BTreeSet::new();
    for live in version.levels.iter().flatten() {
        let table = live.readable()?;
        if table.blob_files().is_empty() {
            continue;
        }
        for file in table.blob_files() {
            if checked.insert(file.number()) {
                file.verify().map_err(|e| in_keyspace(tree, e))?;
            }
        }
        // A scan resolves every pointer: each value read is checked
        // against its pointer's checksum.
        let mut it = table.iter_with(ScanMode::Sequential);
        it.seek_to_first().map_err(|e| in_keyspace(tree, e))?;
        while it.valid() {
            it.next().map_err(|e| in_keyspace(tree, e))?;
        }
    }
    Ok(checked.len() as u64)
}

fn in_keyspace(tree: &Tree, e: Error) -> Error {
    match e {
        Error::Corruption { what, detail } => Error::Corruption {
            what: format!("{what} (keyspace {:?})", tree.name),
            detail,
        },
        e => e,
    }
}
