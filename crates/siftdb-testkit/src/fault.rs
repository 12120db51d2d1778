//! An in-memory file system that loses power and fails on purpose.
//!
//! Owns: [`FaultFs`], a [`FileSystem`] held entirely in memory that knows,
//! for every file, which bytes were synced and which were only written, and
//! for every directory, which entries were made durable by `sync_dir` and
//! which changes (creations, renames, removals) are still pending. On that
//! model it simulates a power loss exactly ([`PowerLoss`]), a process crash,
//! and injected I/O errors on the Nth operation ([`FaultMode`]). In the
//! spirit of RocksDB's `FaultInjectionTestFS`; used by the power-loss tests,
//! and public so fuzz targets and stress runs can use it too.
//! Must never: touch a real file, or let a simulated power loss keep
//! anything a real disk would be allowed to lose in the chosen mode — the
//! tests' guarantees are only as strong as this model is pessimistic.
//!
//! # The model
//!
//! A file is an inode holding its bytes and how many of them are synced;
//! writes only append (`create` always makes a fresh, empty inode and points
//! the name at it). A directory maps names to inodes twice: the *live* map
//! every operation sees, and the *durable* map, which `sync_dir` sets to the
//! live one. Between the two sit the pending changes, in order, each applied
//! atomically (a rename is one change). A power loss:
//!
//! - [`PowerLoss::DropUnsynced`]: every directory reverts to its durable map
//!   and every file to its synced bytes. A file created (or renamed) since
//!   its directory's last sync disappears, even if its data was synced; a
//!   file removed since then comes back with its synced bytes.
//! - [`PowerLoss::TornUnsynced`]: every directory keeps its durable map plus
//!   a random prefix (possibly empty or complete) of its pending changes, and
//!   every file keeps its synced bytes plus a random prefix of the bytes
//!   written since (a torn write): none of them, all of them, or a uniformly
//!   drawn cut, a third of the time each. The draws come from the seed, so a failure
//!   replays.
//! - [`PowerLoss::ReorderedUnsynced`]: the same, but each directory keeps a
//!   random *subset* of its pending changes — all POSIX promises.
//!
//! Directories themselves (`create_dir_all`, and a directory's `rename`)
//! are durable at once.
//!
//! # Which system's rules
//!
//! The rules above are POSIX's, the default. [`FaultFs::with_durability`]
//! chooses [`Durability::WindowsWriteThrough`] instead: the rules siftdb's
//! real file system relies on under Windows, where there is no directory
//! sync. There `sync_dir` makes nothing durable; NTFS journals directory
//! changes in order, so a power loss keeps a prefix of each directory's
//! pending changes (the reordered mode keeps a prefix too); and a `rename`
//! (`MoveFileExW` with `MOVEFILE_WRITE_THROUGH`) or a file's `sync`
//! (`FlushFileBuffers`) commits the journal: every directory change made
//! before it is durable once it returns. Removals, links and creations that
//! no such call followed stay pending.
//!
//! # Processes and boots
//!
//! A power loss also kills the process that was using the disk. Give each
//! process (each `Db::open_with`) its own handle from [`FaultFs::shared`]:
//! that handle, and every file and lock opened through it, belongs to the
//! current *boot*; after a power loss (or [`FaultFs::kill_process`]) every
//! operation through it fails with `Error::Io`, so a database that is still
//! being dropped cannot write into the recovered disk. The [`FaultFs`] value
//! itself is the machine's view: it works in every boot (tests read the disk
//! through it), and any clone of it shares the same disk.
//!
//! # Counted operations and injected faults
//!
//! Every fallible operation counts, from every handle: `create`,
//! `open_append`, `append`, `sync`, `read_all`, `rename`, `remove`,
//! `sync_dir`, `create_dir_all`, `list` and `lock`. `exists` and `is_dir`
//! (which cannot fail) do not; neither does an operation refused because its
//! process is dead. [`FaultFs::fail_after`] makes the Nth counted operation
//! from now fail (and every later one too, with [`FaultMode::Persistent`]);
//! [`FaultFs::fail_after_with`] chooses the error's kind (an ENOSPC-like
//! `StorageFull`, say), and [`FaultFs::fail_matching`] fails the next (or,
//! persistently, every) operation of one name on paths with one ending;
//! [`FaultFs::power_loss_after`] cuts the power just before the Nth one, and
//! [`FaultFs::panic_matching`] panics in the thread that makes a chosen
//! operation (to test that background work survives a panic). A failed
//! operation changes nothing — except a failing `append` when
//! [`FaultFs::tear_failed_appends`] is on: it writes the first half of its
//! bytes first. A failed `sync` leaves the file's bytes unsynced.
//!
//! Reads of tables (`open_read` and each positioned read through the file it
//! returns) are counted apart, as *read operations*, and fail on their own
//! plan ([`FaultFs::fail_reads_after`]), so adding a read to the engine does
//! not move the numbering of the write-side operations that the power-loss
//! sweeps walk through. A file opened for reading keeps its inode alive when
//! its name is removed, as on a real disk; a read past the end of the file
//! is `UnexpectedEof`.
//! # A full disk
//!
//! [`FaultFs::set_space_limit`] models a disk of that many bytes: an
//! `append` that would take the bytes of the files that exist (or are
//! still open) past it writes what fits and fails with
//! `ErrorKind::StorageFull`, as `write(2)` does after a short write; removing
//! a file gives its space back at once (as unlinking a closed file does).
//! [`FaultFs::used_bytes`] tells what the files hold.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;

use siftdb::internals::fs::{
    short_read, DirLock, FileSystem, RandomAccessFile, SharedFs, WritableFile,
};
use siftdb::{Error, Result};

mod disk;
#[cfg(test)]
mod tests;

use disk::{dead_error, not_found, split, Disk, Filter, Inode, InodeId, Plan, Refusal, Trigger};
pub use disk::{Durability, FaultMode, PowerLoss};

struct Machine {
    disk: Mutex<Disk>,
}

/// The in-memory, fault-injecting file system (see the module docs).
/// Cheap to clone; every clone shares the same disk.
#[derive(Clone)]
pub struct FaultFs {
    machine: Arc<Machine>,
    /// The boot this handle's process lives in; `None` for the machine's view.
    boot: Option<u64>,
}

impl Default for FaultFs {
    fn default() -> Self {
        FaultFs::new()
    }
}

impl fmt::Debug for FaultFs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let disk = self.machine.disk.lock();
        f.debug_struct("FaultFs")
            .field("handle_boot", &self.boot)
            .field("boot", &disk.boot)
            .field("ops", &disk.ops)
            .field("files", &disk.inodes.len())
            .finish_non_exhaustive()
    }
}

impl FaultFs {
    /// An empty disk following `durability`'s rules, with no directory yet.
    pub fn with_durability(durability: Durability) -> FaultFs {
        let fs = FaultFs::new();
        fs.machine.disk.lock().durability = durability;
        fs
    }

    /// An empty disk, with no directory yet.
    pub fn new() -> FaultFs {
        FaultFs {
            machine: Arc::new(Machine {
                disk: Mutex::new(Disk::default()),
            }),
            boot: None,
        }
    }

    /// A handle for one process of the current boot: after the next power
    /// loss or [`FaultFs::kill_process`], every operation through it fails.
    pub fn for_process(&self) -> FaultFs {
        FaultFs {
            machine: Arc::clone(&self.machine),
            boot: Some(self.machine.disk.lock().boot),
        }
    }

    /// [`FaultFs::for_process`] as the handle `Options::file_system` takes.
    pub fn shared(&self) -> SharedFs {
        Arc::new(self.for_process())
    }

    /// Cuts the power now (see [`PowerLoss`]): unsynced state is lost as the
    /// mode says, every lock is released, every process handle dies, and any
    /// armed fault is disarmed.
    pub fn power_loss(&self, mode: PowerLoss) {
        self.machine.disk.lock().power_loss(mode);
    }

    /// Cuts the power just before the `n`th counted operation from now
    /// (`n` ≥ 1); that operation fails as its process is dead.
    pub fn power_loss_after(&self, n: u64, mode: PowerLoss) {
        self.arm(n, None, Trigger::PowerLoss(mode));
    }

    fn arm(&self, n: u64, filter: Option<Filter>, trigger: Trigger) {
        let mut disk = self.machine.disk.lock();
        disk.plan = Some(Plan {
            at: disk.ops + n.max(1),
            filter,
            trigger,
        });
    }

    /// Kills the processes of the current boot without a power loss: what
    /// they wrote stays (synced or not), their locks are released, and their
    /// handles die.
    pub fn kill_process(&self) {
        let mut disk = self.machine.disk.lock();
        disk.locks.clear();
        disk.boot += 1;
        for inode in disk.inodes.values_mut() {
            inode.handles = 0;
        }
        disk.collect_garbage();
    }

    /// Makes the `n`th counted operation from now (`n` ≥ 1) fail with
    /// `Error::Io`, and with [`FaultMode::Persistent`] every one after it.
    pub fn fail_after(&self, n: u64, mode: FaultMode) {
        self.fail_after_with(n, mode, std::io::ErrorKind::Other);
    }

    /// [`FaultFs::fail_after`] with an error of `kind`
    /// (`ErrorKind::StorageFull` is what ENOSPC becomes).
    pub fn fail_after_with(&self, n: u64, mode: FaultMode, kind: std::io::ErrorKind) {
        self.arm(n, None, Trigger::Fail(mode, kind));
    }

    /// Makes the next operation named `op` (`"create"`, `"append"`,
    /// `"sync"`, `"rename"`, ...) on a path ending with `path_suffix` fail
    /// with an error of `kind` — and with [`FaultMode::Persistent`] every
    /// such operation until [`FaultFs::clear_faults`]; others go through.
    pub fn fail_matching(
        &self,
        op: &str,
        path_suffix: &str,
        mode: FaultMode,
        kind: std::io::ErrorKind,
    ) {
        let filter = Filter {
            op: op.to_string(),
            path_suffix: path_suffix.to_string(),
        };
        self.arm(1, Some(filter), Trigger::Fail(mode, kind));
    }

    /// Makes the next operation named `op` on a path ending with
    /// `path_suffix` panic, in whichever thread makes it.
    pub fn panic_matching(&self, op: &str, path_suffix: &str) {
        let filter = Filter {
            op: op.to_string(),
            path_suffix: path_suffix.to_string(),
        };
        self.arm(1, Some(filter), Trigger::Panic);
    }

    /// A disk of `limit` bytes (`None`: unlimited, the default): see the
    /// module docs. Lowering it below what the files hold takes nothing away.
    pub fn set_space_limit(&self, limit: Option<u64>) {
        self.machine.disk.lock().space_limit = limit;
    }

    /// Bytes held by files that have a name or an open handle.
    pub fn used_bytes(&self) -> u64 {
        self.machine.disk.lock().used_bytes()
    }

    /// Makes the `n`th read operation from now (`n` ≥ 1: an `open_read` or
    /// a positioned read) fail with `Error::Io`, and with
    /// [`FaultMode::Persistent`] every one after it. Independent of
    /// [`FaultFs::fail_after`], which counts the other operations.
    pub fn fail_reads_after(&self, n: u64, mode: FaultMode) {
        let mut disk = self.machine.disk.lock();
        disk.read_plan = Some((disk.read_ops + n.max(1), mode));
    }

    /// Makes every positioned read from now take at least `latency` (it
    /// sleeps, without holding the disk): a device rather than memory, for
    /// code that adapts to how slow reads are. `None` (the default): none.
    pub fn set_read_latency(&self, latency: Option<std::time::Duration>) {
        self.machine.disk.lock().read_latency = latency;
    }

    /// Read operations (`open_read` and positioned reads) since the disk was made.
    pub fn read_op_count(&self) -> u64 {
        self.machine.disk.lock().read_ops
    }

    /// When on, a failing `append` writes the first half of its bytes (a
    /// torn write) before it returns the error. Off by default.
    pub fn tear_failed_appends(&self, on: bool) {
        self.machine.disk.lock().tear_failed_appends = on;
    }

    /// Disarms any armed fault, read fault or power loss.
    pub fn clear_faults(&self) {
        let mut disk = self.machine.disk.lock();
        disk.plan = None;
        disk.read_plan = None;
    }

    /// Counted operations since the disk was made.
    pub fn op_count(&self) -> u64 {
        self.machine.disk.lock().ops
    }

    /// Operations failed on purpose so far.
    pub fn faults_injected(&self) -> u64 {
        self.machine.disk.lock().faults_injected
    }

    /// Power losses so far (called or armed).
    pub fn power_losses(&self) -> u64 {
        self.machine.disk.lock().power_losses
    }

    /// The current boot: 0 at first, one more after each power loss or killed process.
    pub fn boot(&self) -> u64 {
        self.machine.disk.lock().boot
    }

    /// Bytes written but not synced, over every file still reachable.
    pub fn unsynced_bytes(&self) -> u64 {
        let disk = self.machine.disk.lock();
        disk.inodes
            .values()
            .map(|i| i.data.len().saturating_sub(i.synced) as u64)
            .sum()
    }

    fn with_op<T>(
        &self,
        op: &str,
        path: &Path,
        body: impl FnOnce(&mut Disk) -> Result<T>,
    ) -> Result<T> {
        let mut disk = self.machine.disk.lock();
        disk.begin(self.boot, op, path)
            .map_err(Refusal::into_error)?;
        body(&mut disk)
    }

    /// A handle on `inode` for the process of `boot` (read under the same
    /// lock as the operation that opened it, so a power loss in between
    /// cannot hand a dead process a live handle).
    fn writable(&self, (inode, boot): (InodeId, u64), path: &Path) -> Box<dyn WritableFile> {
        Box::new(FaultFile {
            machine: Arc::clone(&self.machine),
            inode,
            boot,
            path: path.to_path_buf(),
        })
    }
}

struct FaultFile {
    machine: Arc<Machine>,
    inode: InodeId,
    boot: u64,
    path: PathBuf,
}

impl FaultFile {
    fn inode<'d>(&self, disk: &'d mut Disk) -> Result<&'d mut Inode> {
        disk.inodes
            .get_mut(&self.inode)
            .ok_or_else(|| dead_error(&self.path, self.boot))
    }
}

impl WritableFile for FaultFile {
    fn append(&mut self, data: &[u8]) -> Result<()> {
        let mut disk = self.machine.disk.lock();
        match disk.begin(Some(self.boot), "append", &self.path) {
            Ok(()) => {
                let room = disk
                    .space_limit
                    .map(|limit| limit.saturating_sub(disk.used_bytes()));
                let fits = room.map_or(data.len(), |room| {
                    usize::try_from(room).unwrap_or(usize::MAX).min(data.len())
                });
                let written = data.get(..fits).unwrap_or_default();
                self.inode(&mut disk)?.data.extend_from_slice(written);
                if fits < data.len() {
                    disk.faults_injected += 1;
                    return Err(Error::io(
                        &self.path,
                        std::io::Error::new(
                            std::io::ErrorKind::StorageFull,
                            format!("no space left: {} of {} bytes written", fits, data.len()),
                        ),
                    ));
                }
                Ok(())
            }
            Err(Refusal::Injected(e)) => {
                if disk.tear_failed_appends {
                    let half = data.get(..data.len() / 2).unwrap_or_default();
                    self.inode(&mut disk)?.data.extend_from_slice(half);
                }
                Err(e)
            }
            Err(Refusal::Dead(e)) => Err(e),
        }
    }

    fn sync(&mut self) -> Result<()> {
        let mut disk = self.machine.disk.lock();
        disk.begin(Some(self.boot), "sync", &self.path)
            .map_err(Refusal::into_error)?;
        let inode = self.inode(&mut disk)?;
        inode.synced = inode.data.len();
        disk.commit_journal();
        Ok(())
    }
}

impl Drop for FaultFile {
    fn drop(&mut self) {
        release_handle(&self.machine, self.inode, self.boot);
    }
}

/// Closes a handle on `inode` opened in `boot` (a handle of an earlier boot
/// died with its process), then drops what nothing reaches any more.
fn release_handle(machine: &Machine, inode: InodeId, boot: u64) {
    let mut disk = machine.disk.lock();
    if disk.boot != boot {
        return;
    }
    if let Some(inode) = disk.inodes.get_mut(&inode) {
        inode.handles = inode.handles.saturating_sub(1);
    }
    disk.collect_garbage();
}

/// A file opened by `open_read`: positioned reads of its inode.
struct FaultReadFile {
    machine: Arc<Machine>,
    inode: InodeId,
    boot: u64,
    path: PathBuf,
    len: u64,
}

impl RandomAccessFile for FaultReadFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let mut disk = self.machine.disk.lock();
        disk.begin_read(Some(self.boot), "read_at", &self.path)?;
        let data = disk
            .inodes
            .get(&self.inode)
            .map(|i| i.data.as_slice())
            .ok_or_else(|| dead_error(&self.path, self.boot))?;
        let bytes = usize::try_from(offset)
            .ok()
            .and_then(|start| data.get(start..start.checked_add(buf.len())?))
            .ok_or_else(|| short_read(&self.path, buf.len(), offset, data.len() as u64))?;
        buf.copy_from_slice(bytes);
        let latency = disk.read_latency;
        drop(disk);
        if let Some(latency) = latency {
            std::thread::sleep(latency);
        }
        Ok(())
    }

    fn len(&self) -> u64 {
        self.len
    }
}

impl Drop for FaultReadFile {
    fn drop(&mut self) {
        release_handle(&self.machine, self.inode, self.boot);
    }
}

struct FaultLock {
    machine: Arc<Machine>,
    path: PathBuf,
    boot: u64,
}

impl DirLock for FaultLock {}

impl Drop for FaultLock {
    fn drop(&mut self) {
        let mut disk = self.machine.disk.lock();
        // A lock of an earlier boot was released by the power loss; the
        // path may be locked again by a process of this boot.
        if disk.boot == self.boot {
            disk.locks.remove(&self.path);
        }
    }
}

impl FileSystem for FaultFs {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let opened = self.with_op("create", path, |disk| {
            Ok((disk.create_file(path, 1)?, disk.boot))
        })?;
        Ok(self.writable(opened, path))
    }

    fn open_append(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        let opened = self.with_op("open_append", path, |disk| {
            let inode = match disk.lookup(path) {
                Ok(inode) => {
                    if let Some(i) = disk.inodes.get_mut(&inode) {
                        i.handles += 1;
                    }
                    inode
                }
                Err(_) => disk.create_file(path, 1)?,
            };
            Ok((inode, disk.boot))
        })?;
        Ok(self.writable(opened, path))
    }

    fn read_all(&self, path: &Path) -> Result<Bytes> {
        self.with_op("read_all", path, |disk| {
            let inode = disk.lookup(path)?;
            let data = disk
                .inodes
                .get(&inode)
                .map(|i| i.data.as_slice())
                .unwrap_or_default();
            Ok(Bytes::copy_from_slice(data))
        })
    }

    fn open_read(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        let mut disk = self.machine.disk.lock();
        disk.begin_read(self.boot, "open_read", path)?;
        let inode = disk.lookup(path)?;
        let file = disk
            .inodes
            .get_mut(&inode)
            .ok_or_else(|| not_found(path, "no such file"))?;
        file.handles += 1;
        let len = file.data.len() as u64;
        Ok(Arc::new(FaultReadFile {
            machine: Arc::clone(&self.machine),
            inode,
            boot: disk.boot,
            path: path.to_path_buf(),
            len,
        }))
    }

    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.with_op("rename", from, |disk| {
            if disk.dirs.contains_key(from) {
                return disk.rename_dir(from, to);
            }
            let inode = disk.lookup(from)?;
            let (from_dir, from_name) = split(from)?;
            let (to_dir, to_name) = split(to)?;
            disk.dir(&to_dir)?;
            if from_dir == to_dir {
                disk.dir_mut(&from_dir)?
                    .change(vec![(from_name, None), (to_name, Some(inode))]);
            } else {
                disk.dir_mut(&to_dir)?.change(vec![(to_name, Some(inode))]);
                disk.dir_mut(&from_dir)?.change(vec![(from_name, None)]);
            }
            // Windows: `MOVEFILE_WRITE_THROUGH`.
            disk.commit_journal();
            Ok(())
        })
    }

    fn hard_link(&self, from: &Path, to: &Path) -> Result<()> {
        self.with_op("hard_link", to, |disk| {
            let inode = disk.lookup(from)?;
            if disk.dirs.contains_key(to) || disk.lookup(to).is_ok() {
                return Err(Error::io(
                    to,
                    std::io::Error::new(std::io::ErrorKind::AlreadyExists, "the name is taken"),
                ));
            }
            let (to_dir, to_name) = split(to)?;
            disk.dir_mut(&to_dir)?.change(vec![(to_name, Some(inode))]);
            Ok(())
        })
    }

    fn remove(&self, path: &Path) -> Result<()> {
        self.with_op("remove", path, |disk| {
            disk.lookup(path)?;
            let (parent, name) = split(path)?;
            disk.dir_mut(&parent)?.change(vec![(name, None)]);
            Ok(())
        })
    }

    fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.with_op("sync_dir", dir, |disk| {
            if disk.durability == Durability::WindowsWriteThrough {
                // Windows has no directory sync: the real one does nothing.
                disk.dir(dir)?;
                return Ok(());
            }
            let d = disk.dir_mut(dir)?;
            d.durable = d.live.clone();
            d.pending.clear();
            disk.collect_garbage();
            Ok(())
        })
    }

    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        self.with_op("create_dir_all", dir, |disk| {
            for ancestor in dir.ancestors() {
                let (parent, name) = match split(ancestor) {
                    Ok(split) => split,
                    Err(_) => {
                        disk.dirs.entry(ancestor.to_path_buf()).or_default();
                        continue;
                    }
                };
                if disk
                    .dirs
                    .get(&parent)
                    .is_some_and(|d| d.live.contains_key(&name))
                {
                    return Err(Error::io(
                        ancestor,
                        std::io::Error::new(
                            std::io::ErrorKind::AlreadyExists,
                            "a file is in the way",
                        ),
                    ));
                }
                disk.dirs.entry(ancestor.to_path_buf()).or_default();
            }
            Ok(())
        })
    }

    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        self.with_op("list", dir, |disk| {
            let mut names: Vec<String> = disk.dir(dir)?.live.keys().cloned().collect();
            names.extend(disk.dirs.keys().filter_map(|d| {
                (d.parent() == Some(dir))
                    .then(|| d.file_name().map(|n| n.to_string_lossy().into_owned()))
                    .flatten()
            }));
            names.sort();
            Ok(names)
        })
    }

    fn exists(&self, path: &Path) -> bool {
        let disk = self.machine.disk.lock();
        disk.dirs.contains_key(path) || disk.lookup(path).is_ok()
    }

    fn is_dir(&self, path: &Path) -> bool {
        self.machine.disk.lock().dirs.contains_key(path)
    }

    fn lock(&self, path: &Path) -> Result<Box<dyn DirLock>> {
        let boot = self.with_op("lock", path, |disk| {
            if disk.locks.contains(path) {
                return Err(Error::Locked(path.to_path_buf()));
            }
            if disk.lookup(path).is_err() {
                disk.create_file(path, 0)?;
            }
            disk.locks.insert(path.to_path_buf());
            Ok(disk.boot)
        })?;
        Ok(Box::new(FaultLock {
            machine: Arc::clone(&self.machine),
            path: path.to_path_buf(),
            boot,
        }))
    }
}
