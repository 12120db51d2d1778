//! The per-system file primitives under [`super::OsFileSystem`]: positioned
//! reads, reads past the page cache, read-ahead hints, durable syncs and
//! renames, each with one body per operating system.
//!
//! Owns: which system call keeps each promise where. Linux: `pread`,
//! `O_DIRECT`, `O_NOATIME`, `posix_fadvise`, `fdatasync`, a directory
//! `fsync`. macOS: `pread`, `F_NOCACHE`, `F_RDADVISE`, `F_FULLFSYNC` (a plain
//! `fsync` there leaves the writes in the drive's cache). Windows:
//! `ReadFile` at an offset, `FILE_FLAG_NO_BUFFERING`, `FlushFileBuffers`,
//! `MoveFileExW` with `MOVEFILE_WRITE_THROUGH`, and no directory sync (the
//! system has none: a rename or creation is durable once the call that
//! made it returns with write-through, or at the next flush of the file).
//! Must never: weaken a promise silently on one system — a primitive a
//! system lacks is either a hint (skipped), an optional path the caller
//! already falls back from (`None`), or an error; never a positioned read
//! that moves a shared cursor or a sync that does less than the others.

use std::fs::File;
use std::io;
use std::path::Path;

use super::DirectSpan;

/// Fills `buf` with the bytes at `offset`; past the end of the file an
/// error of kind `UnexpectedEof`.
pub(super) fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileExt;
        file.read_exact_at(buf, offset)
    }
    #[cfg(windows)]
    {
        // `seek_read` reads at the offset it is given (an overlapped
        // offset), whatever the handle's cursor: tables are only ever read
        // at offsets, so the cursor it leaves behind is never used.
        use std::os::windows::fs::FileExt;
        let mut done = 0usize;
        while let Some(rest) = buf.get_mut(done..).filter(|rest| !rest.is_empty()) {
            let at = offset.saturating_add(done as u64);
            match file.seek_read(rest, at) {
                Ok(0) => return Err(io::Error::from(io::ErrorKind::UnexpectedEof)),
                Ok(read) => done += read,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
    #[cfg(not(any(unix, windows)))]
    {
        let _ = (file, buf, offset);
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }
}

/// Reads the `len` bytes at `offset` into `buf` (cleared first, its
/// capacity reused); past the end of the file an error of kind
/// `UnexpectedEof`. On unix into the buffer's uninitialised capacity, so
/// a block read from the page cache does not first write zeros; elsewhere
/// into zeros.
pub(super) fn read_into_vec(
    file: &File,
    buf: &mut Vec<u8>,
    len: usize,
    offset: u64,
) -> io::Result<()> {
    buf.clear();
    #[cfg(unix)]
    {
        buf.reserve(len);
        while buf.len() < len {
            let at = offset.saturating_add(buf.len() as u64);
            // Into the spare capacity, at most the bytes still wanted (a
            // recycled buffer's capacity may reach past `len`); the length
            // then grows by what the kernel wrote, so no byte is ever seen
            // before it was read.
            let done = buf.len();
            let spare = buf.spare_capacity_mut();
            let wanted = (len - done).min(spare.len());
            let spare = match spare.split_at_mut_checked(wanted) {
                Some((spare, _)) => spare,
                None => spare,
            };
            match rustix::io::pread(file, spare, at).map(|(read, _)| read.len()) {
                Ok(0) => return Err(io::Error::from(io::ErrorKind::UnexpectedEof)),
                Ok(read) => {
                    let filled = done + read;
                    #[expect(
                        unsafe_code,
                        reason = "the kernel initialised `read` bytes of the spare capacity past `buf.len()`"
                    )]
                    // SAFETY: the kernel wrote the first `read` bytes of
                    // `spare`, which starts at `buf.len()` within the capacity.
                    unsafe {
                        buf.set_len(filled);
                    }
                }
                Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }
    #[cfg(not(unix))]
    {
        buf.resize(len, 0);
        read_exact_at(file, buf, offset)
    }
}

/// `path` opened a second time for reads past the page cache, or `None`
/// where the system or the file system has no such reads (tmpfs refuses
/// `O_DIRECT`; systems other than Linux, macOS and Windows have no path
/// here): the caller then reads through the page cache.
pub(super) fn open_direct(path: &Path) -> Option<File> {
    #[cfg(target_os = "linux")]
    {
        use rustix::fs::{Mode, OFlags};
        let flags = OFlags::RDONLY | OFlags::DIRECT | OFlags::CLOEXEC;
        rustix::fs::open(path, flags, Mode::empty())
            .ok()
            .map(File::from)
    }
    #[cfg(target_vendor = "apple")]
    {
        // macOS has no O_DIRECT: F_NOCACHE on the descriptor turns the
        // cache off for its reads (aligned ones bypass it entirely).
        let file = File::open(path).ok()?;
        rustix::fs::fcntl_nocache(&file, true).ok()?;
        Some(file)
    }
    #[cfg(windows)]
    {
        // Reads must then start at, last for and land in multiples of the
        // volume's sector size: `DirectSpan`'s 4 KiB covers 512-byte and
        // 4 KiB sectors; a larger one fails the read, which falls back.
        use std::os::windows::fs::OpenOptionsExt;
        use windows_sys::Win32::Storage::FileSystem::FILE_FLAG_NO_BUFFERING;
        std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(FILE_FLAG_NO_BUFFERING)
            .open(path)
            .ok()
    }
    #[cfg(not(any(target_os = "linux", target_vendor = "apple", windows)))]
    {
        let _ = path;
        None
    }
}

/// The `len` bytes at `offset` read from `direct` (a file [`open_direct`]
/// gave) as one aligned read of their span; `None` when the read was
/// refused or came back short (the file's end), for the caller to read
/// through the page cache.
pub(super) fn read_direct(direct: &File, len: usize, offset: u64) -> Option<Vec<u8>> {
    let span = DirectSpan::of(len, offset)?;
    #[cfg(unix)]
    {
        let (mut buffer, pad) = span.buffer()?;
        let spare = buffer.spare_capacity_mut().get_mut(pad..pad + span.span)?;
        loop {
            match rustix::io::pread(direct, &mut *spare, span.start) {
                // The span's bytes the kernel wrote (fewer at the file's
                // end); a copy of the wanted ones, so the block cache
                // keeps no padding.
                Ok((read, _)) => break read.get(span.skip..span.skip + len).map(<[u8]>::to_vec),
                Err(rustix::io::Errno::INTR) => {}
                Err(_) => break None,
            }
        }
    }
    #[cfg(windows)]
    {
        use std::os::windows::fs::FileExt;
        // Zeroed up to the span's end (`seek_read` wants initialised
        // bytes), within the capacity, so the aligned start stays put.
        let (mut buffer, pad) = span.buffer()?;
        buffer.resize(pad + span.span, 0);
        let place = buffer.get_mut(pad..)?;
        loop {
            match direct.seek_read(place, span.start) {
                Ok(read) => {
                    break place
                        .get(..read)?
                        .get(span.skip..span.skip + len)
                        .map(<[u8]>::to_vec)
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => break None,
            }
        }
    }
    #[cfg(not(any(unix, windows)))]
    {
        let _ = (direct, span);
        None
    }
}

/// Opens `path` read-only; on Linux without access-time updates
/// (`O_NOATIME`): a table is read once per block-cache miss, and the
/// kernel's atime check on every positioned read costs about 1.5% of an
/// in-memory get. Only the file's owner (or a privileged process) may ask
/// it; anyone else gets the file opened as usual.
pub(super) fn open_no_atime(path: &Path) -> io::Result<File> {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::fs::OpenOptionsExt;
        let no_atime = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(rustix::fs::OFlags::NOATIME.bits() as i32)
            .open(path);
        match no_atime {
            Err(e) if e.kind() == io::ErrorKind::PermissionDenied => File::open(path),
            other => other,
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        File::open(path)
    }
}

/// Tells the system a file's reads are random, so a 4 KiB read does not
/// pull in the device's read-ahead window around it
/// (`POSIX_FADV_RANDOM`; macOS and Windows have no such advice for a
/// descriptor: nothing). Advice only: errors are ignored.
pub(super) fn advise_random(file: &File) {
    #[cfg(any(target_os = "linux", target_os = "android", target_os = "freebsd"))]
    let _ = rustix::fs::fadvise(file, 0, None, rustix::fs::Advice::Random);
    #[cfg(not(any(target_os = "linux", target_os = "android", target_os = "freebsd")))]
    let _ = file;
}

/// Asks the system to start reading `len` bytes at `offset` from the
/// device now (`POSIX_FADV_WILLNEED`, macOS's `F_RDADVISE`; nothing on
/// Windows). Advice only: an error costs the overlap, never an answer.
pub(super) fn will_need(file: &File, offset: u64, len: std::num::NonZeroU64) {
    #[cfg(any(target_os = "linux", target_os = "android", target_os = "freebsd"))]
    let _ = rustix::fs::fadvise(file, offset, Some(len), rustix::fs::Advice::WillNeed);
    #[cfg(target_vendor = "apple")]
    let _ = rustix::fs::fcntl_rdadvise(file, offset, len.get());
    #[cfg(not(any(
        target_os = "linux",
        target_os = "android",
        target_os = "freebsd",
        target_vendor = "apple"
    )))]
    let _ = (file, offset, len);
}

/// Point reads through a memory map: no read-ahead around each fault
/// (`MADV_RANDOM` on unix; Windows has no such advice).
pub(super) fn advise_map_random(map: &memmap2::Mmap) {
    #[cfg(unix)]
    let _ = map.advise(memmap2::Advice::Random);
    #[cfg(not(unix))]
    let _ = map;
}

/// Makes a file's written bytes durable, down through the drive's cache:
/// `fdatasync` on Linux, `F_FULLFSYNC` on macOS (whose `fsync` stops at
/// the drive's cache), `FlushFileBuffers` on Windows.
pub(super) fn sync_data(file: &File) -> io::Result<()> {
    #[cfg(target_vendor = "apple")]
    {
        rustix::fs::fcntl_fullfsync(file).map_err(io::Error::from)
    }
    #[cfg(not(target_vendor = "apple"))]
    {
        file.sync_data()
    }
}

/// Makes a directory's entries (creations, renames, removals) durable.
/// Windows has no directory sync (a directory cannot even be opened as a
/// file there): renames are made durable by [`rename`]'s write-through,
/// and a new file's entry with the file's own flush, so this does nothing.
pub(super) fn sync_dir(dir: &Path) -> io::Result<()> {
    #[cfg(windows)]
    {
        let _ = dir;
        Ok(())
    }
    #[cfg(not(windows))]
    {
        let dir = File::open(dir)?;
        #[cfg(target_vendor = "apple")]
        {
            rustix::fs::fcntl_fullfsync(&dir).map_err(io::Error::from)
        }
        #[cfg(not(target_vendor = "apple"))]
        {
            dir.sync_all()
        }
    }
}

/// Atomically renames `from` to `to`, replacing `to`. On Windows with
/// `MOVEFILE_WRITE_THROUGH`, so the rename is on disk when this returns
/// (the system has no directory sync to make it so afterwards); when that
/// is refused (`to` open without delete sharing), the standard library's
/// rename, which retries with POSIX semantics. Where those are missing
/// (before Windows 10 1809, off NTFS, Wine) a `to` that another handle
/// holds open cannot be replaced at all: a read-only `Db::open` reading
/// `MANIFEST` while the writer replaces it. Such reads are short, so a
/// refusal is retried for up to two seconds before it is the error.
pub(super) fn rename(from: &Path, to: &Path) -> io::Result<()> {
    #[cfg(windows)]
    {
        let mut waited = std::time::Duration::ZERO;
        let mut pause = std::time::Duration::from_millis(1);
        loop {
            match rename_write_through(from, to) {
                Err(e)
                    if e.kind() == io::ErrorKind::PermissionDenied
                        && waited < std::time::Duration::from_secs(2) =>
                {
                    std::thread::sleep(pause);
                    waited += pause;
                    pause = (pause * 2).min(std::time::Duration::from_millis(50));
                }
                other => return other,
            }
        }
    }
    #[cfg(not(windows))]
    {
        std::fs::rename(from, to)
    }
}

/// One attempt of [`rename`] on Windows.
#[cfg(windows)]
fn rename_write_through(from: &Path, to: &Path) -> io::Result<()> {
    {
        use std::os::windows::ffi::OsStrExt;
        use windows_sys::Win32::Storage::FileSystem::{
            MoveFileExW, MOVEFILE_REPLACE_EXISTING, MOVEFILE_WRITE_THROUGH,
        };
        let wide = |p: &Path| -> Vec<u16> { p.as_os_str().encode_wide().chain([0]).collect() };
        let (from_w, to_w) = (wide(from), wide(to));
        #[expect(
            unsafe_code,
            reason = "MoveFileExW takes two NUL-terminated wide strings; see the SAFETY comment"
        )]
        // SAFETY: both pointers are to live, NUL-terminated UTF-16 buffers
        // owned by this frame, which the call only reads.
        let moved = unsafe {
            MoveFileExW(
                from_w.as_ptr(),
                to_w.as_ptr(),
                MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH,
            )
        };
        if moved != 0 {
            return Ok(());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::PermissionDenied {
            return Err(e);
        }
        std::fs::rename(from, to)
    }
}

/// The open-file limit of this process, when the system has one
/// (`RLIMIT_NOFILE` on unix; Windows handles have no such limit).
pub(crate) fn open_file_limit() -> Option<u64> {
    #[cfg(unix)]
    {
        rustix::process::getrlimit(rustix::process::Resource::Nofile).current
    }
    #[cfg(not(unix))]
    {
        None
    }
}
