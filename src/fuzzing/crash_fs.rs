//! A file system that "crashes" the process at a chosen mutating call:
//! that call (an append may still leave a prefix of its bytes, as a kill in
//! the middle of a `write` does) and every mutating call after it fail;
//! reads keep working. What is on disk afterwards is exactly what a process
//! kill at that moment leaves, so reopening the directory through the real
//! file system tests recovery from it.
//!
//! Owns: [`CrashFs`], used by the `db_ops` fuzz target and the crash tests.
//! Must never: let a mutating call through after the crash, or lose a byte
//! written before it — it simulates a process kill, not a power cut (which
//! also loses what was not synced).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;

use crate::error::{Error, Result};
use crate::fs::{DirLock, FileSystem, OsFileSystem, WritableFile};

#[derive(Debug, Default)]
struct CrashState {
    /// Mutating calls still allowed; `None` when disarmed.
    calls_left: Option<u64>,
    /// Bytes of the crashing append that still reach the file.
    torn_keep: usize,
    crashed: bool,
    mutating_calls: u64,
}

/// The real file system, until the crash. Clone the `Arc` into
/// `Options::file_system`; keep one to arm it and to ask whether it crashed.
#[derive(Debug, Default)]
pub struct CrashFs {
    state: Arc<Mutex<CrashState>>,
}

/// What one mutating call may do.
enum Step {
    Proceed,
    /// This call is the crash: an append keeps this many bytes, then fails.
    Crash(usize),
    /// The process is already dead.
    Dead,
}

impl CrashFs {
    /// A file system that does not crash until armed.
    pub fn new() -> Arc<CrashFs> {
        Arc::new(CrashFs::default())
    }

    /// A file system whose `n`-th mutating call from now (1-based) crashes.
    pub fn crashing_at(n: u64) -> Arc<CrashFs> {
        let fs = CrashFs::new();
        fs.arm(n.saturating_sub(1), 0);
        fs
    }

    /// Crashes after `calls` more mutating calls succeed; a crashing append
    /// leaves `torn_keep` of its bytes (at most all but one) in the file.
    pub fn arm(&self, calls: u64, torn_keep: usize) {
        let mut st = self.state.lock();
        st.calls_left = Some(calls);
        st.torn_keep = torn_keep;
    }

    /// True once the crash happened.
    pub fn crashed(&self) -> bool {
        self.state.lock().crashed
    }

    /// Mutating calls made so far (the crashing one included).
    pub fn mutating_calls(&self) -> u64 {
        self.state.lock().mutating_calls
    }

    fn step(&self) -> Step {
        step(&self.state)
    }
}

fn step(state: &Mutex<CrashState>) -> Step {
    let mut st = state.lock();
    if st.crashed {
        return Step::Dead;
    }
    st.mutating_calls += 1;
    match st.calls_left {
        Some(0) => {
            st.crashed = true;
            Step::Crash(st.torn_keep)
        }
        Some(n) => {
            st.calls_left = Some(n - 1);
            Step::Proceed
        }
        None => Step::Proceed,
    }
}

fn crash_error(path: &Path) -> Error {
    Error::io(path, std::io::Error::other("simulated crash"))
}

/// Fails unless the call may proceed.
fn proceed(step: Step, path: &Path) -> Result<()> {
    match step {
        Step::Proceed => Ok(()),
        Step::Crash(_) | Step::Dead => Err(crash_error(path)),
    }
}

struct CrashFile {
    inner: Box<dyn WritableFile>,
    state: Arc<Mutex<CrashState>>,
    path: PathBuf,
}

impl WritableFile for CrashFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        match step(&self.state) {
            Step::Proceed => self.inner.append(data),
            Step::Crash(keep) => {
                let keep = keep.min(data.len().saturating_sub(1));
                if let Some(prefix) = data.get(..keep) {
                    if !prefix.is_empty() {
                        self.inner.append(prefix)?;
                    }
                }
                Err(crash_error(&self.path))
            }
            Step::Dead => Err(crash_error(&self.path)),
        }
    }

    fn sync(&mut self) -> Result<()> {
        proceed(step(&self.state), &self.path)?;
        self.inner.sync()
    }
}

impl CrashFs {
    fn wrap(&self, path: &Path, inner: Box<dyn WritableFile>) -> Box<dyn WritableFile> {
        Box::new(CrashFile {
            inner,
            state: Arc::clone(&self.state),
            path: path.to_path_buf(),
        })
    }
}

impl FileSystem for CrashFs {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        proceed(self.step(), path)?;
        Ok(self.wrap(path, OsFileSystem.create(path)?))
    }

    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        proceed(self.step(), path)?;
        Ok(self.wrap(path, OsFileSystem.open_append(path)?))
    }

    fn read_all(&self, path: &Path) -> Result<Bytes> {
        OsFileSystem.read_all(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        proceed(self.step(), from)?;
        OsFileSystem.rename(from, to)
    }

    fn remove(&self, path: &Path) -> Result<()> {
        proceed(self.step(), path)?;
        OsFileSystem.remove(path)
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        proceed(self.step(), dir)?;
        OsFileSystem.sync_dir(dir)
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        proceed(self.step(), dir)?;
        OsFileSystem.create_dir_all(dir)
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        OsFileSystem.list(dir)
    }

    fn exists(&self, path: &Path) -> bool {
        OsFileSystem.exists(path)
    }

    fn is_dir(&self, path: &Path) -> bool {
        OsFileSystem.is_dir(path)
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn DirLock>> {
        OsFileSystem.lock(path)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_crashing_append_leaves_a_prefix_and_nothing_after_it() {
        let dir = tempfile::tempdir().unwrap();
        let fs = CrashFs::new();
        let path = dir.path().join("f");
        let mut file = fs.create(&path).unwrap();
        file.append(b"hello ").unwrap();
        fs.arm(0, 3);
        assert!(file.append(b"world").is_err());
        assert!(fs.crashed());
        assert!(file.append(b"!").is_err());
        assert!(file.sync().is_err());
        assert!(fs.remove(&path).is_err());
        assert_eq!(&fs.read_all(&path).unwrap()[..], b"hello wor");
        assert_eq!(fs.mutating_calls(), 3);
    }
}
