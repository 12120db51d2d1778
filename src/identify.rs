//! Telling a siftdb directory from someone else's: [`check_is_database`].
//!
//! Another engine's directory can hold names siftdb parses as its own
//! (RocksDB and LevelDB write `NNNNNN.sst` tables too): a name alone never
//! makes a directory a database. It is one when it holds siftdb's
//! `MANIFEST`, or a file that opens as a siftdb table (its footer, or at
//! least one block whose checksum holds) or a siftdb log (its header's
//! magic, or at least one record that passes both checksums and decodes as
//! a write batch).
//!
//! Owns: that decision, for `repair`, `verify` and `open`, which each
//! refuse a directory that is not a database with [`Error::NotADatabase`]
//! before they change (or lock) anything in it.
//! Must never: write, create, rename or remove anything, or take the lock —
//! it reads the files it judges and nothing else.

use std::path::Path;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::filename::{parse_file_name, FileKind, MANIFEST_FILE};
use crate::fs::{FileSystem, SharedFs};
use crate::table::{ReadContext, ReadCounters, ReadSettings, Salvaged, TableSalvager};
use crate::wal;

/// At most this many names are listed in the refusal's reason.
const NAMES_SHOWN: usize = 6;

/// `Ok` when the directory `dir` (whose file names are `names`) is a siftdb
/// database, or may be the remains of one: it holds `MANIFEST`, or a file
/// siftdb can read as one of its tables or logs. `NotADatabase` otherwise
/// (an empty directory included). `Err(Io)` when a file cannot be read.
pub(crate) fn check_is_database(fs: &SharedFs, dir: &Path, names: &[String]) -> Result<()> {
    if names.iter().any(|n| n == MANIFEST_FILE) {
        return Ok(());
    }
    let context = ReadContext::new(Arc::clone(fs), ReadSettings::tool(), ReadCounters::new());
    for name in names {
        let own = match parse_file_name(name) {
            Some((FileKind::Table, _)) => opens_as_table(&context, &dir.join(name))?,
            Some((FileKind::Wal, _)) => opens_as_log(fs.as_ref(), &dir.join(name))?,
            None => false,
        };
        if own {
            return Ok(());
        }
    }
    let mut shown: Vec<&str> = names.iter().map(String::as_str).collect();
    shown.sort_unstable();
    let more = shown.len().saturating_sub(NAMES_SHOWN);
    shown.truncate(NAMES_SHOWN);
    let reason = if names.is_empty() {
        "the directory is empty".to_string()
    } else {
        format!(
            "no {MANIFEST_FILE}, and none of its files is a siftdb table or log (it holds {}{}); \
             left as it is",
            shown.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        )
    };
    Err(Error::NotADatabase {
        path: dir.to_path_buf(),
        reason,
    })
}

/// A table file that opens, or holds at least one block whose checksum holds.
fn opens_as_table(context: &Arc<ReadContext>, path: &Path) -> Result<bool> {
    let mut salvager = TableSalvager::open(context, path)?;
    if salvager.table().is_some() {
        return Ok(true);
    }
    while let Some(step) = salvager.next_block() {
        if let Salvaged::Block(_) = step {
            return Ok(true);
        }
    }
    Ok(false)
}

/// A log file whose header has the log's magic, or that holds at least one
/// intact record.
fn opens_as_log(fs: &dyn FileSystem, path: &Path) -> Result<bool> {
    let bytes = fs.read_all(path)?;
    if bytes.get(..wal::MAGIC.len()) == Some(&wal::MAGIC[..]) {
        return Ok(true);
    }
    let salvaged = wal::salvage(&bytes);
    Ok(salvaged.log_number.is_some() || !salvaged.batches.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::OsFileSystem;

    #[test]
    fn foreign_files_under_siftdb_names_are_not_a_database() {
        let dir = tempfile::tempdir().unwrap();
        let fs = OsFileSystem::shared();
        let names = |d: &Path| {
            let mut n = fs.list(d).unwrap();
            n.sort();
            n
        };
        let err = check_is_database(&fs, dir.path(), &names(dir.path())).unwrap_err();
        assert!(matches!(err, Error::NotADatabase { .. }), "{err}");
        for (name, len) in [
            ("000009.sst", 4096),
            ("000004.log", 300),
            ("000005.wal", 64),
        ] {
            let bytes: Vec<u8> = (0..len).map(|i| (i * 131 % 251) as u8).collect();
            std::fs::write(dir.path().join(name), bytes).unwrap();
        }
        let err = check_is_database(&fs, dir.path(), &names(dir.path())).unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, Error::NotADatabase { .. }), "{text}");
        assert!(
            text.contains("000009.sst") && !text.contains('\n'),
            "{text}"
        );

        // A siftdb log (even an empty one) makes it one.
        let wal = dir.path().join("000006.wal");
        drop(crate::wal::WalWriter::create(&OsFileSystem, &wal, 6).unwrap());
        check_is_database(&fs, dir.path(), &names(dir.path())).unwrap();
    }
}
