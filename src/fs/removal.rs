//! Removing files and directories under each system's rule.
//!
//! Owns: `remove_file`, `remove_dir`, `list_names` and `sweep_removed`
//! under [`super::OsFileSystem`], and the names a removal on Windows gives
//! a file for the moment it lingers (`NAME.removed-PID-N`).
//!
//! Unix: `unlink` and `rmdir`. A file removed while open (a table a scan
//! still reads, a log a checkpoint linked) loses its name at once and
//! lives on for its readers; none of the rest applies.
//!
//! Windows: a file open elsewhere can be removed only when its handles
//! share delete access (the standard library's opens do), and where the
//! system lacks POSIX delete semantics (before Windows 10 1809, FAT and
//! network volumes, Wine) its name stays, "delete pending", until the last
//! handle closes: its directory cannot be removed meanwhile, and on Wine a
//! new file created under that name is deleted when the old handle closes.
//! So a removal renames the file to a name of its own in the same directory
//! first, then deletes it: the engine's name is free at once, and whatever
//! lingers is recognisably garbage — left out of listings, and counted as
//! absent when its directory is removed (such a directory, holding nothing
//! else, is renamed aside the same way). What a crash, or a file another
//! program holds open without delete sharing, leaves under such a name is
//! removed by the next `Db::open` or backup (`sweep_removed`).
//!
//! Must never: report a removal as done while the name the caller gave
//! still names the file; remove or hide a name that is not garbage; change
//! what Linux or macOS do.

use std::io;
use std::path::Path;

/// What a removal on Windows puts between a file's name and the process
/// id and counter that make the lingering name unique.
#[cfg(windows)]
const REMOVED_MARK: &str = ".removed-";

/// True when `name` is one a removal gave a file or directory that
/// lingers (Windows); never elsewhere.
pub(super) fn is_removed_name(name: &str) -> bool {
    #[cfg(windows)]
    {
        name.rsplit_once(REMOVED_MARK).is_some_and(|(_, tail)| {
            tail.split_once('-').is_some_and(|(pid, n)| {
                [pid, n]
                    .iter()
                    .all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
            })
        })
    }
    #[cfg(not(windows))]
    {
        let _ = name;
        false
    }
}

/// A name beside `path` no one else uses: `NAME.removed-PID-N`.
#[cfg(windows)]
fn removed_path(path: &Path) -> io::Result<std::path::PathBuf> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "the path names no file"))?;
    // The time keeps a number a crashed process of the same id used from
    // being taken again.
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let mut removed = name.to_os_string();
    removed.push(format!("{REMOVED_MARK}{}-{stamp}{n}", std::process::id()));
    Ok(path.with_file_name(removed))
}

/// Removes the file at `path` (see the module docs for Windows).
pub(super) fn remove_file(path: &Path) -> io::Result<()> {
    #[cfg(windows)]
    {
        if std::fs::symlink_metadata(path)?.is_dir() {
            // Not a file: the standard library's own error for it.
            return std::fs::remove_file(path);
        }
        let lingering_already = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(is_removed_name);
        if lingering_already {
            return std::fs::remove_file(path);
        }
        let aside = removed_path(path)?;
        // A plain rename: a power cut that undoes it leaves the file under
        // its old name, which the sweep of obsolete files removes as before.
        std::fs::rename(path, &aside)?;
        // Delete pending at worst (gone when its last handle closes); a
        // file that cannot be deleted now (held without delete sharing, or
        // mapped) waits for the next sweep. The caller's name is free.
        let _ = std::fs::remove_file(&aside);
        Ok(())
    }
    #[cfg(not(windows))]
    {
        std::fs::remove_file(path)
    }
}

/// Removes the empty directory `dir`; on Windows a directory holding only
/// lingering removed files counts as empty and is renamed aside.
pub(super) fn remove_dir(dir: &Path) -> io::Result<()> {
    #[cfg(windows)]
    {
        match std::fs::remove_dir(dir) {
            Err(e) if e.kind() == io::ErrorKind::DirectoryNotEmpty => {
                let only_lingering = std::fs::read_dir(dir)?.all(|entry| {
                    entry.is_ok_and(|entry| entry.file_name().to_str().is_some_and(is_removed_name))
                });
                let own_name_lingers = dir
                    .file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(is_removed_name);
                if !only_lingering {
                    return Err(e);
                }
                if own_name_lingers {
                    // Already aside: the sweep tries again later.
                    return Ok(());
                }
                std::fs::rename(dir, removed_path(dir)?)
            }
            other => other,
        }
    }
    #[cfg(not(windows))]
    {
        std::fs::remove_dir(dir)
    }
}

/// The names in `dir`, sorted, without lingering removed ones.
pub(super) fn list_names(dir: &Path) -> io::Result<Vec<String>> {
    let mut names = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        if !is_removed_name(&name) {
            names.push(name);
        }
    }
    names.sort();
    Ok(names)
}

/// Removes what removals left lingering in `dir` (and in lingering
/// directories under it) that can go now. Best effort: what is still open
/// stays for a later sweep. Nothing to do except on Windows.
pub(super) fn sweep_removed(dir: &Path) {
    #[cfg(windows)]
    {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            if !name.to_str().is_some_and(is_removed_name) {
                continue;
            }
            remove_lingering(&entry.path());
        }
    }
    #[cfg(not(windows))]
    {
        let _ = dir;
    }
}

/// Removes `path`, a lingering name, with all it holds (a lingering
/// directory holds only garbage); best effort.
#[cfg(windows)]
fn remove_lingering(path: &Path) {
    if path.is_dir() {
        for entry in std::fs::read_dir(path).into_iter().flatten().flatten() {
            remove_lingering(&entry.path());
        }
        let _ = std::fs::remove_dir(path);
    } else {
        let _ = std::fs::remove_file(path);
    }
}

#[cfg(all(test, windows))]
mod tests {
    use super::*;

    #[test]
    fn removed_names_are_recognised_and_others_are_not() {
        let aside = removed_path(Path::new("dir/000012.sst")).unwrap();
        let name = aside.file_name().unwrap().to_str().unwrap();
        assert!(name.starts_with("000012.sst.removed-"), "{name}");
        assert!(is_removed_name(name));
        for other in [
            "000012.sst",
            "MANIFEST",
            "a.removed-",
            "a.removed-1",
            "a.removed-x-1",
        ] {
            assert!(!is_removed_name(other), "{other}");
        }
    }

    #[test]
    fn a_file_removed_while_open_frees_its_name_and_its_directory() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("d");
        std::fs::create_dir(&dir).unwrap();
        let file = dir.join("f");
        std::fs::write(&file, b"x").unwrap();
        let held = std::fs::File::open(&file).unwrap();
        remove_file(&file).unwrap();
        assert!(!file.exists());
        assert!(list_names(&dir).unwrap().is_empty());
        // A new file under the old name is a file of its own.
        std::fs::write(&file, b"new").unwrap();
        remove_file(&file).unwrap();
        remove_dir(&dir).unwrap();
        assert!(!dir.exists());
        drop(held);
        sweep_removed(root.path());
        assert!(list_names(root.path()).unwrap().is_empty());
        assert!(remove_dir(root.path().join("missing").as_path()).is_err());
        assert!(remove_file(&root.path().join("missing")).is_err());
    }
}
