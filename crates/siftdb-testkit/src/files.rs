//! Real files in tests: a directory's exact state, one byte changed, a
//! directory made unwritable, commands run as an unprivileged user, and
//! the test binary run again as a child to kill.
//!
//! Owns: [`snapshot`], [`files_ending`], [`flip_byte`], [`Unwritable`],
//! [`as_unprivileged`] and [`spawn_test_child`].
//! Must never: leave a directory unwritable after a test (a temporary
//! directory could then not be removed): [`Unwritable`] restores it when
//! dropped.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::SystemTime;

/// Every file below `dir` (a subdirectory's as `sub/name`), with its bytes
/// and modification time.
pub fn snapshot(dir: &Path) -> BTreeMap<String, (Vec<u8>, SystemTime)> {
    let mut out = BTreeMap::new();
    let mut pending = vec![(dir.to_path_buf(), String::new())];
    while let Some((at, prefix)) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&at) else {
            continue;
        };
        for entry in entries.flatten() {
            let name = format!("{prefix}{}", entry.file_name().to_string_lossy());
            let path = entry.path();
            if path.is_dir() {
                pending.push((path, format!("{name}/")));
            } else {
                let bytes = std::fs::read(&path).unwrap_or_default();
                let modified = entry
                    .metadata()
                    .and_then(|m| m.modified())
                    .unwrap_or(SystemTime::UNIX_EPOCH);
                out.insert(name, (bytes, modified));
            }
        }
    }
    out
}

/// The files directly in `dir` whose names end with `suffix` (".sst",
/// ".blob"), sorted by path.
///
/// # Panics
/// When `dir` cannot be listed.
#[expect(
    clippy::expect_used,
    reason = "a test helper: a directory that cannot be listed is a failed test"
)]
pub fn files_ending(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("the directory lists")
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| {
            path.file_name()
                .is_some_and(|name| name.to_string_lossy().ends_with(suffix))
        })
        .collect();
    found.sort();
    found
}

/// XORs the byte at `offset` of the file at `path` with `mask`.
///
/// # Panics
/// When the file cannot be read or written, or is shorter than `offset`.
#[expect(
    clippy::expect_used,
    reason = "a test helper: a file that cannot be damaged is a failed test"
)]
pub fn flip_byte(path: &Path, offset: u64, mask: u8) {
    let mut bytes = std::fs::read(path).expect("the file to damage reads");
    let byte = usize::try_from(offset)
        .ok()
        .and_then(|at| bytes.get_mut(at))
        .expect("the offset to damage is in the file");
    *byte ^= mask;
    std::fs::write(path, bytes).expect("the damaged file is written back");
}

/// A directory no one but root may write (mode 0555, its files 0444, its
/// parent opened to others so an unprivileged user reaches it), until
/// dropped (then 0755 again).
/// Unix only: file modes are a unix notion.
#[cfg(unix)]
#[derive(Debug)]
pub struct Unwritable {
    dir: PathBuf,
}

#[cfg(unix)]
fn set_mode(path: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode));
}

#[cfg(unix)]
impl Unwritable {
    /// Makes `dir` (and the files in it) read-only for everyone but root.
    pub fn new(dir: &Path) -> Unwritable {
        if let Some(parent) = dir.parent() {
            set_mode(parent, 0o755);
        }
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            set_mode(&entry.path(), 0o444);
        }
        set_mode(dir, 0o555);
        Unwritable {
            dir: dir.to_path_buf(),
        }
    }
}

#[cfg(unix)]
impl Drop for Unwritable {
    fn drop(&mut self) {
        set_mode(&self.dir, 0o755);
    }
}

/// True when this process runs as root, for whom file permissions do not
/// bind.
#[cfg(unix)]
pub fn running_as_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// Makes `command` run as the unprivileged user `nobody` (65534) when this
/// process is root — for whom [`Unwritable`] would bind nothing; otherwise
/// leaves it as it is (this user is unprivileged already).
#[cfg(unix)]
pub fn as_unprivileged(command: &mut Command) -> &mut Command {
    use std::os::unix::process::CommandExt;
    if running_as_root() {
        command.uid(65534).gid(65534);
    }
    command
}

/// Starts this test binary again as a child process that runs only the
/// test `name` (`--exact`, one thread, output not captured), with the
/// environment variable `env` set to `value`: the subject of a test that
/// kills it. Its stdout is piped (each line as the child prints it), its
/// stderr discarded.
///
/// # Panics
///
/// When the binary cannot be found or started: a failed test.
#[expect(
    clippy::expect_used,
    reason = "a test helper: a child that cannot start is a failed test"
)]
pub fn spawn_test_child(
    name: &str,
    env: &str,
    value: impl AsRef<std::ffi::OsStr>,
) -> std::process::Child {
    let exe = std::env::current_exe().expect("the test binary is known");
    Command::new(exe)
        .args([
            "--exact",
            name,
            "--test-threads",
            "1",
            "--quiet",
            "--nocapture",
        ])
        .env(env, value)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("the child test starts")
}
