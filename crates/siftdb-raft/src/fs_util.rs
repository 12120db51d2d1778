//! Small file-system steps the storage modules share.
//!
//! Owns: [`sync_dir`].
//! Must never: report a directory durable whose fsync failed.

use std::fs::File;
use std::path::Path;

use crate::codec::{Error, Result};

/// Makes the names in `dir` (created, renamed, removed files) durable.
pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io(dir, e))
}
