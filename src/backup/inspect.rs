//! What `siftdb inspect` shows of a backup directory: each metadata file
//! with the format version it names and what it holds.
//!
//! Owns: [`inspect_backup_dir`] and [`MetaSummary`].
//! Must never: write, create or remove anything (it runs on a backup
//! directory it may not write), or show a version or a field from a file
//! whose checksum did not match.

use std::path::Path;

use super::meta::{decode_meta, meta_version, BackupInfo, META_VERSION};
use super::META_DIR;
use crate::error::{Error, Result};
use crate::fs::{FileSystem, OsFileSystem};

/// One metadata file of a backup directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MetaSummary {
    /// Its name in `meta/` (the backup's number).
    pub name: String,
    /// The format version it names behind a matching checksum, this
    /// build's or another; `None` when damaged.
    pub format_version: Option<u64>,
    /// The backup it describes, or why it cannot be read.
    pub backup: std::result::Result<BackupInfo, String>,
}

/// Every metadata file of the backup directory `dir`, by name.
/// `InvalidArgument` when `dir` has no `meta/`.
pub fn inspect_backup_dir(dir: &Path) -> Result<Vec<MetaSummary>> {
    let fs = OsFileSystem;
    let meta_dir = dir.join(META_DIR);
    if !fs.is_dir(&meta_dir) {
        return Err(Error::invalid(format!(
            "{} is not a backup directory (no {META_DIR}/)",
            dir.display()
        )));
    }
    let mut names = fs.list(&meta_dir)?;
    names.sort();
    Ok(names
        .into_iter()
        .map(|name| {
            let bytes = fs.read_all(&meta_dir.join(&name));
            let format_version = bytes.as_deref().ok().and_then(meta_version);
            let backup = match (&bytes, name.parse::<u64>()) {
                (Err(e), _) => Err(e.to_string()),
                (Ok(_), Err(_)) => Err("not a backup's number".to_string()),
                (Ok(_), Ok(_)) if format_version.is_some_and(|v| v != META_VERSION) => Err(
                    format!("a format version this build does not read (it reads {META_VERSION})"),
                ),
                (Ok(bytes), Ok(id)) => decode_meta(bytes, id),
            };
            MetaSummary {
                name,
                format_version,
                backup,
            }
        })
        .collect())
}
