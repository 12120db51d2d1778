//! The file-system seam: every byte siftdb reads from or writes to disk goes
//! through [`FileSystem`].
//!
//! Owns: the trait, and [`OsFileSystem`], the real implementation (std::fs,
//! positioned reads with the kernel's read-ahead turned off for tables,
//! memmap2 only for the opt-in `Options::mmap_reads`, and the directory
//! lock: on unix a POSIX record lock no child process inherits, with a
//! per-process table of held lock files; elsewhere the standard library's
//! per-handle lock). What differs per operating system lives in `os`, and
//! how files are removed where an open file keeps its name (Windows) in
//! `removal`.
//! `FaultFs` (in the `siftdb-testkit` crate) is the in-memory stand-in that
//! simulates power loss and injects errors through this same trait.
//! Must never: be bypassed by engine code — a fault-injecting layer for
//! power-loss tests stands in here, and anything that skips it is untested;
//! turn a short file or a failed read into anything but an `Err` (no
//! memory map unless the caller asked for one: a mapped page whose file
//! shrank or whose read failed is a SIGBUS).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;

use crate::error::{Error, Result};

mod os;
mod removal;

pub(crate) use os::open_file_limit;

/// A file opened for appending.
pub trait WritableFile: Send + Sync {
    /// Appends `data`; it has reached the operating system when this returns.
    fn append(&mut self, data: &[u8]) -> Result<()>;
    /// Makes everything appended so far durable (fdatasync).
    fn sync(&mut self) -> Result<()>;
}

/// A file opened for positioned reads: tables, which are immutable once
/// written. Shared between threads; reads do not move a cursor.
pub trait RandomAccessFile: Send + Sync {
    /// Fills `buf` with the bytes at `offset`. Bytes past the end of the
    /// file (it was truncated, or the caller's offset is wrong) are an
    /// `Error::Io` of kind `UnexpectedEof` naming the file, never a signal.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()>;
    /// The `len` bytes at `offset` in a buffer of their own (a data block
    /// read that the block cache then keeps), with `read_exact_at`'s
    /// errors. The default zero-fills a buffer and calls `read_exact_at`;
    /// the real file reads into the buffer's uninitialised capacity, so a
    /// block read from the page cache does not first write 4 KiB of zeros.
    fn read_vec_at(&self, len: usize, offset: u64) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; len];
        self.read_exact_at(&mut buf, offset)?;
        Ok(buf)
    }
    /// [`RandomAccessFile::read_vec_at`] into `buf` (cleared first; its
    /// capacity reused, grown when short), so a reader that recycles its
    /// block buffers allocates none per read. The default zero-fills and
    /// calls `read_exact_at`; the real file reads into the capacity.
    fn read_into_vec_at(&self, buf: &mut Vec<u8>, len: usize, offset: u64) -> Result<()> {
        buf.clear();
        buf.resize(len, 0);
        self.read_exact_at(buf, offset)
    }
    /// The `len` bytes at `offset` read past the operating system's page
    /// cache (`O_DIRECT`: `Options::direct_reads`), in a buffer of their
    /// own; `None` when this file has no such path (the default, every
    /// wrapping file system, and a file system that refuses `O_DIRECT`,
    /// such as tmpfs) or this read could not take it (the kernel refused
    /// it, or it came back short at a truncated file's end): the caller
    /// then reads it through the page cache, which gives the same bytes or
    /// the file's own error.
    fn read_direct_at(&self, len: usize, offset: u64) -> Option<Result<Vec<u8>>> {
        let _ = (len, offset);
        None
    }
    /// True when [`RandomAccessFile::read_direct_at`] has a path past the
    /// page cache for this file (`O_DIRECT` on Linux, `F_NOCACHE` on macOS,
    /// `FILE_FLAG_NO_BUFFERING` on Windows); false by default.
    fn reads_direct(&self) -> bool {
        false
    }
    /// A descriptor of this file opened with `O_DIRECT` (see
    /// [`RandomAccessFile::read_direct_at`]), for `multi_get`'s io_uring
    /// reads, which then read whole aligned spans; `None`
    /// when there is none (the default).
    #[cfg(unix)]
    fn direct_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        None
    }
    /// The file's length when it was opened.
    fn len(&self) -> u64;
    /// True when the file was empty when it was opened.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Hints that `len` bytes at `offset` will be read soon, so the
    /// operating system can start reading them from the device now (the
    /// real implementation: `POSIX_FADV_WILLNEED`, which queues the read and
    /// returns). A hint only: it reads nothing into the caller's memory,
    /// fails silently, and the default does nothing.
    fn will_need(&self, offset: u64, len: usize) {
        let _ = (offset, len);
    }
    /// The file's descriptor, when reads may go straight to the kernel
    /// (`multi_get`'s io_uring path reads through it; a file without one —
    /// the default, and every wrapping file system such as fault
    /// injection — is read with `read_exact_at` on the thread-pool path).
    #[cfg(unix)]
    fn raw_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        None
    }
}

/// A lock held on a database directory until dropped; dropping it releases
/// the lock before `drop` returns.
pub trait DirLock: Send + Sync {}

/// The file operations the engine uses, and nothing more.
pub trait FileSystem: Send + Sync + 'static {
    /// Creates `path` (truncating an existing file) for appending.
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>>;
    /// Opens `path` for appending after its current end, creating it if missing.
    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>>;
    /// The whole content of a file, read into memory (logs and the
    /// manifest at replay).
    fn read_all(&self, path: &Path) -> Result<Bytes>;
    /// Opens an immutable file read-only for positioned reads. The real
    /// implementation tells the kernel the reads are random
    /// (`POSIX_FADV_RANDOM`), so a 4 KiB read does not pull in the device's
    /// read-ahead window around it.
    fn open_read(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>>;
    /// The content of an immutable file as one memory map, for the opt-in
    /// `Options::mmap_reads` only (the real implementation advises
    /// `MADV_RANDOM`). A mapped file that shrinks, or a page whose read
    /// fails, is a SIGBUS in the process that touches it: that is the
    /// hazard `mmap_reads` documents. The default reads the file into memory.
    fn map_read_only(&self, path: &Path) -> Result<Bytes> {
        self.read_all(path)
    }
    /// Atomically renames `from` to `to`, replacing `to`.
    fn rename(&self, from: &Path, to: &Path) -> Result<()>;
    /// Removes a file.
    fn remove(&self, path: &Path) -> Result<()>;
    /// Makes `to` a second name of the file `from` (a hard link), failing
    /// when `to` exists or the two are on different file systems. The
    /// default says it is unsupported: callers then copy.
    fn hard_link(&self, from: &Path, to: &Path) -> Result<()> {
        let _ = from;
        Err(Error::io(
            to,
            std::io::Error::new(std::io::ErrorKind::Unsupported, "no hard links here"),
        ))
    }
    /// Removes an empty directory. The default says it is unsupported.
    fn remove_dir(&self, dir: &Path) -> Result<()> {
        Err(Error::io(
            dir,
            std::io::Error::new(std::io::ErrorKind::Unsupported, "cannot remove directories"),
        ))
    }
    /// Makes the directory's entries (creations, renames, removals) durable.
    fn sync_dir(&self, dir: &Path) -> Result<()>;
    /// Removes what earlier removals left behind in `dir` under names of
    /// their own: on Windows a file removed while still open lingers under
    /// such a name until its last handle closes (the real implementation's
    /// `remove`; see `fs/removal.rs`). Best effort, never an error; the
    /// default (and every system but Windows) has nothing to do.
    fn sweep_removed(&self, dir: &Path) {
        let _ = dir;
    }
    /// Creates a directory and its parents, durably: each new directory's
    /// entry is synced in its parent.
    fn create_dir_all(&self, dir: &Path) -> Result<()>;
    /// File names (not paths) in a directory.
    fn list(&self, dir: &Path) -> Result<Vec<String>>;
    /// True when `path` exists (file or directory).
    fn exists(&self, path: &Path) -> bool;
    /// True when `path` is a directory.
    fn is_dir(&self, path: &Path) -> bool;
    /// Takes an exclusive lock on `path`, failing with `Error::Locked` if
    /// held — by another process, or by another handle in this one. A child
    /// process started by any thread never holds it.
    fn lock(&self, path: &Path) -> Result<Box<dyn DirLock>>;
}

/// The shared handle the engine holds.
pub type SharedFs = Arc<dyn FileSystem>;

/// The real file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct OsFileSystem;

impl OsFileSystem {
    /// The real file system as a shared handle.
    pub fn shared() -> SharedFs {
        Arc::new(OsFileSystem)
    }
}

struct OsWritableFile {
    file: File,
    path: PathBuf,
}

impl WritableFile for OsWritableFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        self.file
            .write_all(data)
            .map_err(|e| Error::io(&self.path, e))
    }

    fn sync(&mut self) -> Result<()> {
        os::sync_data(&self.file).map_err(|e| Error::io(&self.path, e))
    }
}

struct OsReadFile {
    file: File,
    len: u64,
    path: PathBuf,
    /// The same file opened past the page cache on its first direct read
    /// (`os::open_direct`); `None` when the system or the file system
    /// refused it (the reads then go through the page cache, as
    /// `read_direct_at`'s `None` tells the caller).
    direct: std::sync::OnceLock<Option<File>>,
}

impl OsReadFile {
    fn direct_file(&self) -> Option<&File> {
        self.direct
            .get_or_init(|| os::open_direct(&self.path))
            .as_ref()
    }

    /// A failed read's error: past the end, the short read naming the file.
    fn read_error(&self, e: std::io::Error, want: usize, offset: u64) -> Error {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            return short_read(&self.path, want, offset, self.len);
        }
        Error::io(&self.path, e)
    }
}

/// The alignment of `O_DIRECT` reads: offsets, lengths and buffer
/// addresses are multiples of it (4 KiB covers every logical block size
/// of the devices siftdb runs on).
pub(crate) const DIRECT_ALIGN: usize = 4096;

/// The aligned span an `O_DIRECT` read of `len` bytes at `offset` reads:
/// from `start` (`offset` rounded down to [`DIRECT_ALIGN`]), `span` bytes
/// (rounded up), the wanted bytes `skip` bytes in. Near the end of the
/// file the read returns fewer than `span` bytes; it is whole when it
/// returned at least `skip + len`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DirectSpan {
    /// First byte read, aligned.
    pub(crate) start: u64,
    /// Bytes read, aligned.
    pub(crate) span: usize,
    /// Where the wanted bytes begin in the span.
    pub(crate) skip: usize,
}

impl DirectSpan {
    /// The span of `len` bytes at `offset`; `None` when it overflows.
    pub(crate) fn of(len: usize, offset: u64) -> Option<DirectSpan> {
        let align = DIRECT_ALIGN as u64;
        let start = offset - offset % align;
        let skip = usize::try_from(offset - start).ok()?;
        let end = skip.checked_add(len)?;
        let span = end.checked_add(DIRECT_ALIGN - 1)? / DIRECT_ALIGN * DIRECT_ALIGN;
        Some(DirectSpan { start, span, skip })
    }

    /// A buffer for this span (capacity for the span and an alignment's
    /// worth of padding) and where in it the aligned read begins.
    pub(crate) fn buffer(&self) -> Option<(Vec<u8>, usize)> {
        let buffer: Vec<u8> = Vec::with_capacity(self.span.checked_add(DIRECT_ALIGN)?);
        let pad = buffer.as_ptr().align_offset(DIRECT_ALIGN);
        (pad < DIRECT_ALIGN).then_some((buffer, pad))
    }
}

impl RandomAccessFile for OsReadFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        os::read_exact_at(&self.file, buf, offset)
            .map_err(|e| self.read_error(e, buf.len(), offset))
    }

    fn read_vec_at(&self, len: usize, offset: u64) -> Result<Vec<u8>> {
        let mut buf = Vec::with_capacity(len);
        self.read_into_vec_at(&mut buf, len, offset)?;
        Ok(buf)
    }

    fn read_into_vec_at(&self, buf: &mut Vec<u8>, len: usize, offset: u64) -> Result<()> {
        os::read_into_vec(&self.file, buf, len, offset).map_err(|e| self.read_error(e, len, offset))
    }

    fn read_direct_at(&self, len: usize, offset: u64) -> Option<Result<Vec<u8>>> {
        // A short read (the file was truncated) or one the system refused
        // (an alignment it wants larger): `None`, so the caller reads
        // through the page cache (the same bytes, or the file's own error)
        // and counts no direct read.
        os::read_direct(self.direct_file()?, len, offset).map(Ok)
    }

    fn reads_direct(&self) -> bool {
        self.direct_file().is_some()
    }

    #[cfg(unix)]
    fn direct_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        use std::os::fd::AsFd;
        self.direct_file().map(File::as_fd)
    }

    fn len(&self) -> u64 {
        self.len
    }

    fn will_need(&self, offset: u64, len: usize) {
        let len = u64::try_from(len).ok().and_then(std::num::NonZeroU64::new);
        if let Some(len) = len {
            // Advice only: an error (an old kernel, a file system without
            // it) costs the overlap, never an answer.
            os::will_need(&self.file, offset, len);
        }
    }

    #[cfg(unix)]
    fn raw_fd(&self) -> Option<std::os::fd::BorrowedFd<'_>> {
        use std::os::fd::AsFd;
        Some(self.file.as_fd())
    }
}

/// Bytes a chunked read ([`read_chunks`]) reads per step: large enough that
/// a copy or a checksum of a table is a few reads, small enough to hold.
const CHUNK_BYTES: usize = 1 << 20;

/// Reads the first `len` bytes of `path` (all of it when shorter) in steps of
/// 1 MiB, handing each to `each` in order; returns the bytes read. One reader
/// for every whole-file pass (copies, checksums), so none holds a file in
/// memory at once.
pub(crate) fn read_chunks(
    fs: &dyn FileSystem,
    path: &Path,
    len: u64,
    mut each: impl FnMut(&[u8]) -> Result<()>,
) -> Result<u64> {
    let file = fs.open_read(path)?;
    let total = file.len().min(len);
    let mut buf = vec![0u8; CHUNK_BYTES];
    let mut offset = 0u64;
    while offset < total {
        let n = usize::try_from(total - offset).map_or(CHUNK_BYTES, |left| left.min(CHUNK_BYTES));
        let chunk = buf.get_mut(..n).unwrap_or_default();
        file.read_exact_at(chunk, offset)?;
        each(chunk)?;
        offset += n as u64;
    }
    Ok(total)
}

/// The error of a read that ran past the end of a file of `len` bytes (as
/// opened): the file was truncated under the reader, or the offset is wrong.
pub fn short_read(path: &Path, want: usize, offset: u64, len: u64) -> Error {
    Error::io(
        path,
        std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!(
                "read of {want} bytes at offset {offset} ran past the end of the file \
                 ({len} bytes when opened): truncated?"
            ),
        ),
    )
}
impl FileSystem for OsFileSystem {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let file = File::create(path).map_err(|e| Error::io(path, e))?;
        Ok(Box::new(OsWritableFile {
            file,
            path: path.to_path_buf(),
        }))
    }

    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| Error::io(path, e))?;
        Ok(Box::new(OsWritableFile {
            file,
            path: path.to_path_buf(),
        }))
    }

    fn read_all(&self, path: &Path) -> Result<Bytes> {
        std::fs::read(path)
            .map(Bytes::from)
            .map_err(|e| Error::io(path, e))
    }

    fn open_read(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        let file = os::open_no_atime(path).map_err(|e| Error::io(path, e))?;
        let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        // Without this, each 4 KiB block read from a cold file brings in the
        // device's whole read-ahead window (8 MiB on the project's machine).
        // Only advice: a kernel that ignores it reads more, never wrongly.
        os::advise_random(&file);
        Ok(Arc::new(OsReadFile {
            file,
            len,
            path: path.to_path_buf(),
            direct: std::sync::OnceLock::new(),
        }))
    }

    #[expect(
        unsafe_code,
        reason = "memory-maps an immutable file for the opt-in mmap mode; see the SAFETY comment"
    )]
    fn map_read_only(&self, path: &Path) -> Result<Bytes> {
        let file = File::open(path).map_err(|e| Error::io(path, e))?;
        let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
        if len == 0 {
            return Ok(Bytes::new());
        }
        // SAFETY: siftdb never modifies a file it maps (tables are immutable
        // once their builder synced them). What the map cannot rule out — the
        // file shrunk by someone else, a failed page read — raises SIGBUS;
        // `Options::mmap_reads`, the only caller, documents that hazard.
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io(path, e))?;
        // Point reads: no read-ahead around each fault.
        os::advise_map_random(&map);
        Ok(Bytes::from_owner(map))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        os::rename(from, to).map_err(|e| Error::io(from, e))
    }

    fn remove(&self, path: &Path) -> Result<()> {
        removal::remove_file(path).map_err(|e| Error::io(path, e))
    }

    fn hard_link(&self, from: &Path, to: &Path) -> Result<()> {
        std::fs::hard_link(from, to).map_err(|e| Error::io(to, e))
    }

    fn remove_dir(&self, dir: &Path) -> Result<()> {
        removal::remove_dir(dir).map_err(|e| Error::io(dir, e))
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        os::sync_dir(dir).map_err(|e| Error::io(dir, e))
    }

    fn sweep_removed(&self, dir: &Path) {
        removal::sweep_removed(dir);
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        // The directories this call creates, outermost last.
        let missing: Vec<&Path> = dir.ancestors().take_while(|d| !d.exists()).collect();
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        // A new directory's entry lives in its parent: sync the parents, or
        // a power cut can take the whole database directory with it.
        for created in missing.iter().rev() {
            if let Some(parent) = created.parent().filter(|p| !p.as_os_str().is_empty()) {
                self.sync_dir(parent)?;
            }
        }
        Ok(())
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        removal::list_names(dir).map_err(|e| Error::io(dir, e))
    }

    fn exists(&self, path: &Path) -> bool {
        path.exists()
    }

    fn is_dir(&self, path: &Path) -> bool {
        path.is_dir()
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn DirLock>> {
        dir_lock::lock(path)
    }
}

/// Opens (creating, never truncating) a lock file; std opens with
/// O_CLOEXEC, so no child keeps even the descriptor.
fn open_lock_file(path: &Path) -> Result<File> {
    OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| Error::io(path, e))
}

#[cfg(unix)]
mod dir_lock {
    //! The directory lock as LevelDB and RocksDB take it: a POSIX record
    //! lock (`fcntl(F_SETLK)`) on the whole `LOCK` file. Such a lock belongs
    //! to the process, so a child forked by any thread never holds it (an
    //! `flock` lock belongs to the open file, which a forked child shares
    //! until it calls exec: a reopen right after `drop` then found it held).
    //! Two rules follow from "belongs to the process": the kernel grants a
    //! second lock of the same file to the same process, so this process
    //! keeps its own table of the files it holds; and closing *any*
    //! descriptor of a locked file drops the process's lock on it, so a
    //! file in the table is never opened again (its identity is checked by
    //! `stat`, which opens nothing), and the lock's own descriptor is closed
    //! under the table's mutex before the entry goes.

    use std::fs::File;
    use std::os::unix::fs::MetadataExt;
    use std::path::{Path, PathBuf};

    use parking_lot::Mutex;
    use rustix::fs::{fcntl_lock, FlockOperation};
    use rustix::io::Errno;

    use crate::error::{Error, Result};
    use crate::fs::DirLock;

    /// A file's identity: (device, inode).
    type FileId = (u64, u64);

    struct Held {
        id: FileId,
        /// Descriptors of this file opened after a race replaced the path
        /// between the `stat` and the `open`; closing them would drop the
        /// lock, so they live as long as it does.
        strays: Vec<File>,
    }

    /// The lock files this process holds.
    static HELD: Mutex<Vec<Held>> = Mutex::new(Vec::new());

    fn id_of(meta: &std::fs::Metadata) -> FileId {
        (meta.dev(), meta.ino())
    }

    struct PosixDirLock {
        /// `Some` until dropped.
        file: Option<File>,
        id: FileId,
    }

    impl DirLock for PosixDirLock {}

    impl Drop for PosixDirLock {
        fn drop(&mut self) {
            let mut held = HELD.lock();
            if let Some(file) = self.file.take() {
                // Closing the descriptor releases the lock too; the explicit
                // unlock only says so.
                let _ = fcntl_lock(&file, FlockOperation::NonBlockingUnlock);
                drop(file);
            }
            held.retain(|h| h.id != self.id);
        }
    }

    fn locked(path: &Path) -> Error {
        Error::Locked(path.to_path_buf())
    }

    pub(super) fn lock(path: &Path) -> Result<Box<dyn DirLock>> {
        let mut held = HELD.lock();
        let is_held = |held: &[Held], id: FileId| held.iter().any(|h| h.id == id);
        if let Ok(meta) = std::fs::metadata(path) {
            if is_held(&held, id_of(&meta)) {
                return Err(locked(path));
            }
        }
        let file = super::open_lock_file(path)?;
        let id = id_of(&file.metadata().map_err(|e| Error::io(path, e))?);
        if let Some(entry) = held.iter_mut().find(|h| h.id == id) {
            entry.strays.push(file);
            return Err(locked(path));
        }
        match fcntl_lock(&file, FlockOperation::NonBlockingLockExclusive) {
            Ok(()) => {
                held.push(Held {
                    id,
                    strays: Vec::new(),
                });
                Ok(Box::new(PosixDirLock {
                    file: Some(file),
                    id,
                }))
            }
            // POSIX allows either for "held by another process".
            Err(e) if e == Errno::AGAIN || e == Errno::ACCESS => Err(locked(path)),
            Err(e) => Err(Error::io(PathBuf::from(path), e.into())),
        }
    }
}

#[cfg(not(unix))]
mod dir_lock {
    //! Elsewhere the standard library's file lock (no fork to inherit it).

    use std::fs::File;
    use std::path::Path;

    use crate::error::{Error, Result};
    use crate::fs::DirLock;

    struct StdDirLock {
        _file: File,
    }

    impl DirLock for StdDirLock {}

    pub(super) fn lock(path: &Path) -> Result<Box<dyn DirLock>> {
        let file = super::open_lock_file(path)?;
        match file.try_lock() {
            Ok(()) => Ok(Box::new(StdDirLock { _file: file })),
            Err(std::fs::TryLockError::WouldBlock) => Err(Error::Locked(path.to_path_buf())),
            Err(std::fs::TryLockError::Error(e)) => Err(Error::io(path, e)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn direct_spans_are_aligned_and_cover_the_wanted_bytes() {
        for (len, offset) in [
            (1, 0),
            (4096, 0),
            (4101, 0),
            (4101, 4095),
            (5, 8190),
            (0, 12_288),
        ] {
            let span = DirectSpan::of(len, offset).unwrap();
            assert_eq!(span.start % DIRECT_ALIGN as u64, 0);
            assert_eq!(span.span % DIRECT_ALIGN, 0);
            assert_eq!(span.start + span.skip as u64, offset);
            assert!(span.skip + len <= span.span && span.span < span.skip + len + DIRECT_ALIGN);
            let (buffer, pad) = span.buffer().unwrap();
            assert_eq!((buffer.as_ptr() as usize + pad) % DIRECT_ALIGN, 0);
            assert!(pad + span.span <= buffer.capacity());
        }
        assert_eq!(DirectSpan::of(usize::MAX, 1), None);
    }

    #[test]
    fn direct_reads_read_the_same_bytes_as_buffered_ones() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let bytes: Vec<u8> = (0..30_001u32).map(|i| (i * 7 % 253) as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        let file = OsFileSystem.open_read(&path).unwrap();
        for (len, offset) in [(4101usize, 0u64), (100, 4000), (4101, 25_900), (1, 30_000)] {
            let at = usize::try_from(offset).unwrap();
            let want = &bytes[at..at + len];
            match file.read_direct_at(len, offset) {
                Some(read) => assert_eq!(read.unwrap(), want),
                // A file system that refuses O_DIRECT (tmpfs).
                None => assert!(!file.reads_direct()),
            }
        }
        // Past the end: no direct read (the caller reads through the page
        // cache and gets the file's own error).
        assert!(file.read_direct_at(10, 29_995).is_none());
        assert!(file.read_vec_at(10, 29_995).is_err());
    }

    #[test]
    fn nested_directories_are_created_and_existing_ones_accepted() {
        let dir = tempfile::tempdir().unwrap();
        let fs = OsFileSystem;
        let nested = dir.path().join("a").join("b").join("c");
        fs.create_dir_all(&nested).unwrap();
        assert!(fs.is_dir(&nested));
        fs.create_dir_all(&nested).unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, b"x").unwrap();
        assert!(fs.create_dir_all(&file.join("under-a-file")).is_err());
    }

    #[test]
    fn read_vec_at_reads_what_read_exact_at_reads_and_fails_past_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let content: Vec<u8> = (0..10_000u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&path, &content).unwrap();
        let file = OsFileSystem.open_read(&path).unwrap();
        for (len, offset) in [
            (0, 0),
            (1, 0),
            (4096, 0),
            (4096, 5904),
            (1, 9999),
            (10_000, 0),
        ] {
            let got = file.read_vec_at(len, offset as u64).unwrap();
            assert_eq!(got, &content[offset..offset + len], "{len} at {offset}");
            let mut exact = vec![0u8; len];
            file.read_exact_at(&mut exact, offset as u64).unwrap();
            assert_eq!(got, exact);
            // Into a used buffer with more room than the read (a recycled
            // block buffer): exactly the bytes asked for, nothing of before.
            let mut reused = vec![0xeeu8; 12_000];
            file.read_into_vec_at(&mut reused, len, offset as u64)
                .unwrap();
            assert_eq!(reused, exact);
        }
        // Past the end, or the file truncated under the open handle: an
        // error naming the file, as `read_exact_at` gives.
        for (len, offset) in [(2, 9999), (1, 10_000), (4096, 8000)] {
            let err = file.read_vec_at(len, offset).unwrap_err();
            assert!(err.to_string().contains("ran past the end"), "{err}");
        }
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(100)
            .unwrap();
        let err = file.read_vec_at(4096, 0).unwrap_err();
        assert!(err.to_string().contains("ran past the end"), "{err}");
        assert_eq!(file.read_vec_at(100, 0).unwrap(), &content[..100]);
    }

    #[test]
    fn write_read_rename_remove() {
        let dir = tempfile::tempdir().unwrap();
        let fs = OsFileSystem;
        let a = dir.path().join("a");
        let mut f = fs.create(&a).unwrap();
        f.append(b"hello ").unwrap();
        f.append(b"world").unwrap();
        f.sync().unwrap();
        drop(f);
        let mut f = fs.open_append(&a).unwrap();
        f.append(b"!").unwrap();
        drop(f);
        assert_eq!(&fs.read_all(&a).unwrap()[..], b"hello world!");
        assert_eq!(&fs.map_read_only(&a).unwrap()[..], b"hello world!");
        let file = fs.open_read(&a).unwrap();
        assert_eq!(file.len(), 12);
        let mut buf = [0u8; 5];
        file.read_exact_at(&mut buf, 6).unwrap();
        assert_eq!(&buf, b"world");
        let err = file.read_exact_at(&mut buf, 8).unwrap_err();
        assert!(
            matches!(&err, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::UnexpectedEof),
            "{err}"
        );
        assert!(err.to_string().contains("truncated"), "{err}");
        // Closed before the remove: under Windows' legacy delete semantics
        // (Wine; Windows before 10 1903 or off NTFS) a removed file's name
        // stays until its last handle is closed.
        drop(file);
        let b = dir.path().join("b");
        fs.rename(&a, &b).unwrap();
        fs.sync_dir(dir.path()).unwrap();
        assert_eq!(fs.list(dir.path()).unwrap(), vec!["b".to_string()]);
        fs.remove(&b).unwrap();
        assert!(!fs.exists(&b));
        assert!(fs.read_all(&b).is_err());
    }

    #[test]
    fn lock_is_exclusive_until_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let fs = OsFileSystem;
        let path = dir.path().join("LOCK");
        let held = fs.lock(&path).unwrap();
        assert!(matches!(fs.lock(&path), Err(Error::Locked(_))));
        drop(held);
        fs.lock(&path).unwrap();
    }
}
