//! Cold reads: dropping the OS page cache before a read phase (`--cold`).
//!
//! Owns: [`ColdCache`], the permission check made before any work (root,
//! and `/proc/sys/vm/drop_caches` open for writing) and the drop itself
//! (`sync`, then `3` written to that file: page cache, dentries and inodes);
//! [`write_back_dirty_pages`], the `sync` alone.
//! Must never: drop anything inside a timed section or from a run that did
//! not ask for it, or let a failed drop pass as a cold phase.
//!
//! Only the kernel's cache is dropped: an engine's own block cache stays
//! as the previous phase left it, for every engine alike.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

/// The kernel's knob: writing `3` frees clean page cache, dentries and inodes.
pub const DROP_CACHES: &str = "/proc/sys/vm/drop_caches";

/// Writes the machine's dirty pages back (`sync`) and drops nothing: a run
/// calls it between loading and the phases it times, so the write-back of
/// what one engine just wrote does not fall on the next engine's reads.
pub fn write_back_dirty_pages() {
    // Windows has no system-wide sync: nothing (and no `--cold` there).
    #[cfg(unix)]
    rustix::fs::sync();
}

/// True when this process runs as root (effective uid 0); never elsewhere.
fn running_as_root() -> bool {
    #[cfg(unix)]
    {
        rustix::process::geteuid().is_root()
    }
    #[cfg(not(unix))]
    {
        false
    }
}

/// A checked way to drop the OS page cache.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ColdCache {
    path: PathBuf,
}

impl ColdCache {
    /// The page cache of this machine, if this process may drop it: it must
    /// run as root (effective uid 0) and be able to open
    /// `/proc/sys/vm/drop_caches` for writing. The error is one line.
    pub fn for_this_machine() -> Result<ColdCache, String> {
        ColdCache::check(Path::new(DROP_CACHES), running_as_root())
    }

    /// [`ColdCache::for_this_machine`] with the file and the identity given,
    /// so the refusals can be tested: refused when `is_root` is false or
    /// `path` cannot be opened for writing. Opening writes nothing.
    pub fn check(path: &Path, is_root: bool) -> Result<ColdCache, String> {
        if !is_root {
            return Err(format!(
                "--cold drops the OS page cache by writing to {}, which needs root; run as root (e.g. with sudo) or leave out --cold",
                path.display()
            ));
        }
        OpenOptions::new().write(true).open(path).map_err(|e| {
            format!(
                "--cold cannot open {} for writing ({e}); the page cache cannot be dropped here",
                path.display()
            )
        })?;
        Ok(ColdCache {
            path: path.to_path_buf(),
        })
    }

    /// The file a drop writes to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes dirty pages back (`sync`), then drops the page cache, dentries
    /// and inodes. Clean pages only are dropped, hence the sync first.
    pub fn drop_now(&self) -> Result<(), String> {
        write_back_dirty_pages();
        OpenOptions::new()
            .write(true)
            .open(&self.path)
            .and_then(|mut f| f.write_all(b"3"))
            .map_err(|e| {
                format!(
                    "cannot drop the page cache through {}: {e}",
                    self.path.display()
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_that_is_not_root_is_refused_in_one_line() {
        let file = tempfile::NamedTempFile::new().unwrap();
        let err = ColdCache::check(file.path(), false).unwrap_err();
        assert!(
            err.contains("needs root") && err.contains("--cold"),
            "{err}"
        );
        assert_eq!(err.lines().count(), 1);
    }

    #[test]
    fn a_file_that_cannot_be_opened_for_writing_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("no-such-knob");
        let err = ColdCache::check(&missing, true).unwrap_err();
        assert!(
            err.contains("cannot open") && err.contains("no-such-knob"),
            "{err}"
        );
        assert_eq!(err.lines().count(), 1);
        // A directory cannot be opened for writing either.
        assert!(ColdCache::check(dir.path(), true).is_err());
        assert!(!missing.exists(), "the check must not create the file");
    }

    #[test]
    fn a_drop_writes_three_to_the_knob() {
        let file = tempfile::NamedTempFile::new().unwrap();
        let cold = ColdCache::check(file.path(), true).unwrap();
        assert_eq!(
            std::fs::read(file.path()).unwrap(),
            b"",
            "checking writes nothing"
        );
        cold.drop_now().unwrap();
        assert_eq!(std::fs::read(file.path()).unwrap(), b"3");
        assert_eq!(cold.path(), file.path());
    }

    #[test]
    fn this_machine_is_checked_by_the_same_rule() {
        let root = running_as_root();
        let writable = OpenOptions::new().write(true).open(DROP_CACHES).is_ok();
        assert_eq!(ColdCache::for_this_machine().is_ok(), root && writable);
    }
}
