//! The format version each file of a database directory carries, as
//! `siftdb inspect` shows it: a manifest's, a table's footer's, a log's
//! header's.
//!
//! Owns: reading the version field of a manifest, a table and a log.
//! Must never: report a version from bytes whose checksum did not match
//! (a damaged file has none to show), or read more of a file than the part
//! that holds its version (a log's header, a table's footer).

use std::path::Path;

use crate::error::Error;
use crate::fs::FileSystem;
use crate::table::format::FOOTER_LEN;
use crate::table::Footer;

/// The version `e` names when it is `UnsupportedVersion`.
fn found(e: Error) -> Option<u64> {
    match e {
        Error::UnsupportedVersion { found, .. } => Some(found),
        _ => None,
    }
}

/// The format version of the manifest (or its copy) at `path`, this
/// build's or another; `None` when missing, unreadable or damaged.
pub(crate) fn manifest_version(fs: &dyn FileSystem, path: &Path) -> Option<u64> {
    let name = path.file_name()?.to_string_lossy().into_owned();
    let bytes = fs.read_all(path).ok()?;
    match crate::manifest::decode(&bytes, &name) {
        Ok(_) => Some(u64::from(crate::manifest::FORMAT_VERSION)),
        Err(e) => found(e),
    }
}

/// The format version the footer of the table at `path` names.
pub(crate) fn table_version(fs: &dyn FileSystem, path: &Path) -> Option<u64> {
    let name = path.file_name()?.to_string_lossy().into_owned();
    let file = fs.open_read(path).ok()?;
    let len = file.len();
    let tail_len = len.min(FOOTER_LEN as u64);
    let mut tail = vec![0u8; usize::try_from(tail_len).ok()?];
    file.read_exact_at(&mut tail, len - tail_len).ok()?;
    match Footer::decode(&tail, len, &name) {
        Ok(footer) => Some(u64::from(footer.format.version())),
        Err(e) => found(e),
    }
}

/// The format version the header of the log at `path` names.
pub(crate) fn log_version(fs: &dyn FileSystem, path: &Path) -> Option<u64> {
    let file = fs.open_read(path).ok()?;
    let mut header = [0u8; crate::wal::FILE_HEADER_LEN];
    file.read_exact_at(&mut header, 0).ok()?;
    crate::wal::header_version(&header).map(u64::from)
}
