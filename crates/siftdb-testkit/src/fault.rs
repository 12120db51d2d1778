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

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;

use crate::SplitMix64;
use siftdb::internals::fs::{
    short_read, DirLock, FileSystem, RandomAccessFile, SharedFs, WritableFile,
};
use siftdb::{Error, Result};

/// What a simulated power loss keeps of what was not synced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PowerLoss {
    /// Nothing: every file reverts to its synced bytes, every directory to
    /// its entries as of its last `sync_dir`.
    DropUnsynced,
    /// A random part: each file keeps a random prefix of its unsynced bytes,
    /// each directory a random prefix of its unsynced changes, drawn from `seed`.
    TornUnsynced {
        /// Seeds the draws, so a failing case replays.
        seed: u64,
    },
    /// Like [`PowerLoss::TornUnsynced`], but each directory keeps a random
    /// subset of its unsynced changes (applied in their order), not a prefix:
    /// POSIX promises no order between directory changes that no `sync_dir`
    /// separates, though journaling file systems usually keep it.
    ReorderedUnsynced {
        /// Seeds the draws, so a failing case replays.
        seed: u64,
    },
}

/// Which system's durability rules the disk follows (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// POSIX: a directory's changes are durable after its `sync_dir`.
    #[default]
    Posix,
    /// Windows (NTFS) as siftdb's real file system uses it there: no
    /// directory sync; directory changes in order; a write-through `rename`
    /// or a file's `sync` makes every change before it durable.
    WindowsWriteThrough,
}

/// How long an injected fault lasts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FaultMode {
    /// Only the chosen operation fails.
    Once,
    /// The chosen operation and every later one fail, until
    /// [`FaultFs::clear_faults`].
    Persistent,
}

type InodeId = u64;

#[derive(Default)]
struct Inode {
    data: Vec<u8>,
    /// `data[..synced]` survives a power loss.
    synced: usize,
    /// Open handles, writable or readable (an unlinked inode lives while one
    /// is open).
    handles: usize,
}

/// One atomic change to a directory: each name now points at the inode, or
/// at nothing.
type DirChange = Vec<(String, Option<InodeId>)>;

#[derive(Default, Clone)]
struct Dir {
    live: BTreeMap<String, InodeId>,
    durable: BTreeMap<String, InodeId>,
    pending: Vec<DirChange>,
}

impl Dir {
    fn change(&mut self, change: DirChange) {
        apply(&mut self.live, &change);
        self.pending.push(change);
    }
}

fn apply(entries: &mut BTreeMap<String, InodeId>, change: &DirChange) {
    for (name, target) in change {
        match target {
            Some(inode) => entries.insert(name.clone(), *inode),
            None => entries.remove(name),
        };
    }
}

#[derive(Clone, Copy)]
enum Trigger {
    Fail(FaultMode, std::io::ErrorKind),
    PowerLoss(PowerLoss),
    Panic,
}

/// Which operations an armed fault may hit: one name (`"create"`,
/// `"append"`, ...) on paths whose text ends with `path_suffix`.
#[derive(Clone)]
struct Filter {
    op: String,
    path_suffix: String,
}

/// An armed fault: fires at the first counted operation numbered `at` or
/// later that its filter (if any) accepts; a persistent failure at every one.
#[derive(Clone)]
struct Plan {
    at: u64,
    filter: Option<Filter>,
    trigger: Trigger,
}

#[derive(Default)]
struct Disk {
    boot: u64,
    next_inode: InodeId,
    inodes: BTreeMap<InodeId, Inode>,
    dirs: BTreeMap<PathBuf, Dir>,
    locks: BTreeSet<PathBuf>,
    ops: u64,
    plan: Option<Plan>,
    read_ops: u64,
    /// Armed read fault: fires at read operation number `.0`.
    read_plan: Option<(u64, FaultMode)>,
    /// How long every positioned read sleeps (outside the disk's lock).
    read_latency: Option<std::time::Duration>,
    tear_failed_appends: bool,
    space_limit: Option<u64>,
    faults_injected: u64,
    power_losses: u64,
    durability: Durability,
}

/// Why an operation may not go ahead.
enum Refusal {
    /// Injected: the operation fails (a failing append may tear first).
    Injected(Error),
    /// The calling process died with the power.
    Dead(Error),
}

impl Refusal {
    fn into_error(self) -> Error {
        match self {
            Refusal::Injected(e) | Refusal::Dead(e) => e,
        }
    }
}

fn dead_error(path: &Path, boot: u64) -> Error {
    Error::io(
        path,
        std::io::Error::other(format!(
            "simulated power loss: this handle belongs to boot {boot}, whose process died"
        )),
    )
}

fn not_found(path: &Path, what: &str) -> Error {
    Error::io(
        path,
        std::io::Error::new(std::io::ErrorKind::NotFound, what.to_string()),
    )
}

fn split(path: &Path) -> Result<(PathBuf, String)> {
    let name = path
        .file_name()
        .ok_or_else(|| Error::invalid(format!("{} names no file", path.display())))?;
    let parent = path.parent().unwrap_or(Path::new(""));
    Ok((parent.to_path_buf(), name.to_string_lossy().into_owned()))
}

impl Disk {
    /// Counts one operation by a process of `boot` (`None`: the machine's
    /// own view) and fires an armed fault if this is its operation.
    fn begin(
        &mut self,
        boot: Option<u64>,
        op: &str,
        path: &Path,
    ) -> std::result::Result<(), Refusal> {
        if let Some(boot) = boot {
            if boot != self.boot {
                return Err(Refusal::Dead(dead_error(path, boot)));
            }
        }
        self.ops += 1;
        let n = self.ops;
        let Some(plan) = &self.plan else {
            return Ok(());
        };
        let hit = n >= plan.at
            && plan.filter.as_ref().is_none_or(|f| {
                f.op == op && path.to_string_lossy().ends_with(f.path_suffix.as_str())
            });
        if !hit {
            return Ok(());
        }
        let trigger = plan.trigger;
        let what = format!("operation #{n} ({op} {})", path.display());
        match trigger {
            Trigger::Fail(mode, kind) => {
                if mode == FaultMode::Once {
                    self.plan = None;
                }
                self.faults_injected += 1;
                Err(Refusal::Injected(Error::io(
                    path,
                    std::io::Error::new(kind, format!("injected fault at {what}")),
                )))
            }
            Trigger::PowerLoss(mode) => {
                self.power_loss(mode);
                Err(Refusal::Dead(dead_error(path, self.boot - 1)))
            }
            #[expect(
                clippy::panic,
                reason = "an injected panic is what panic_matching asks for: it tests that background work survives one"
            )]
            Trigger::Panic => {
                self.plan = None;
                self.faults_injected += 1;
                // The caller's guard on the disk unlocks as the panic unwinds.
                panic!("injected panic at {what}");
            }
        }
    }

    /// Counts one read operation by a process of `boot` and fails it when
    /// the read plan says so.
    fn begin_read(&mut self, boot: Option<u64>, op: &str, path: &Path) -> Result<()> {
        if let Some(boot) = boot {
            if boot != self.boot {
                return Err(dead_error(path, boot));
            }
        }
        self.read_ops += 1;
        let n = self.read_ops;
        let fires = match self.read_plan {
            Some((at, FaultMode::Once)) if n == at => {
                self.read_plan = None;
                true
            }
            Some((at, FaultMode::Persistent)) => n >= at,
            _ => false,
        };
        if fires {
            self.faults_injected += 1;
            return Err(Error::io(
                path,
                std::io::Error::other(format!("injected fault at read operation #{n} ({op})")),
            ));
        }
        Ok(())
    }

    /// Bytes held by files that have a name or an open handle.
    fn used_bytes(&self) -> u64 {
        let named: BTreeSet<InodeId> = self
            .dirs
            .values()
            .flat_map(|d| d.live.values().copied())
            .collect();
        self.inodes
            .iter()
            .filter(|(id, inode)| inode.handles > 0 || named.contains(id))
            .map(|(_, inode)| inode.data.len() as u64)
            .sum()
    }

    fn dir(&self, dir: &Path) -> Result<&Dir> {
        self.dirs
            .get(dir)
            .ok_or_else(|| not_found(dir, "no such directory"))
    }

    fn dir_mut(&mut self, dir: &Path) -> Result<&mut Dir> {
        self.dirs
            .get_mut(dir)
            .ok_or_else(|| not_found(dir, "no such directory"))
    }

    /// Renames directory `from` (and every directory under it) to `to`,
    /// which must not exist and whose parent must: durable at once, as a
    /// directory's creation is.
    fn rename_dir(&mut self, from: &Path, to: &Path) -> Result<()> {
        if self.dirs.contains_key(to) || self.lookup(to).is_ok() {
            return Err(Error::io(
                to,
                std::io::Error::new(std::io::ErrorKind::AlreadyExists, "the target exists"),
            ));
        }
        if let Some(parent) = to.parent().filter(|p| !p.as_os_str().is_empty()) {
            self.dir(parent)?;
        }
        if to.starts_with(from) {
            return Err(Error::invalid("a directory cannot move into itself"));
        }
        let moved: Vec<PathBuf> = self
            .dirs
            .keys()
            .filter(|d| d.starts_with(from))
            .cloned()
            .collect();
        for old in moved {
            let new = match old.strip_prefix(from) {
                Ok(rest) if !rest.as_os_str().is_empty() => to.join(rest),
                _ => to.to_path_buf(),
            };
            if let Some(dir) = self.dirs.remove(&old) {
                self.dirs.insert(new, dir);
            }
        }
        Ok(())
    }

    fn lookup(&self, path: &Path) -> Result<InodeId> {
        let (parent, name) = split(path)?;
        self.dir(&parent)?
            .live
            .get(&name)
            .copied()
            .ok_or_else(|| not_found(path, "no such file"))
    }

    fn new_inode(&mut self, handles: usize) -> InodeId {
        let id = self.next_inode;
        self.next_inode += 1;
        self.inodes.insert(
            id,
            Inode {
                handles,
                ..Inode::default()
            },
        );
        id
    }

    /// Points `path` at a fresh empty inode (a pending directory change).
    fn create_file(&mut self, path: &Path, handles: usize) -> Result<InodeId> {
        let (parent, name) = split(path)?;
        self.dir(&parent)?;
        let inode = self.new_inode(handles);
        self.dir_mut(&parent)?.change(vec![(name, Some(inode))]);
        Ok(inode)
    }

    /// Under [`Durability::WindowsWriteThrough`], what a write-through
    /// rename or a file flush does: every pending directory change becomes
    /// durable (the journal is committed up to now). Nothing under POSIX.
    fn commit_journal(&mut self) {
        if self.durability != Durability::WindowsWriteThrough {
            return;
        }
        for dir in self.dirs.values_mut() {
            dir.durable = dir.live.clone();
            dir.pending.clear();
        }
        self.collect_garbage();
    }

    fn power_loss(&mut self, mode: PowerLoss) {
        let (mut rng, subsets) = match mode {
            PowerLoss::DropUnsynced => (None, false),
            PowerLoss::TornUnsynced { seed } => (Some(SplitMix64::new(seed)), false),
            // NTFS's journal keeps directory changes in order.
            PowerLoss::ReorderedUnsynced { seed } => (
                Some(SplitMix64::new(seed)),
                self.durability == Durability::Posix,
            ),
        };
        let mut draw = |bound: usize| -> usize {
            match &mut rng {
                Some(rng) => rng.index(bound.saturating_add(1)),
                None => 0,
            }
        };
        for dir in self.dirs.values_mut() {
            let prefix = draw(dir.pending.len());
            for (i, change) in dir.pending.iter().enumerate() {
                let kept = if subsets { draw(1) == 1 } else { i < prefix };
                if kept {
                    apply(&mut dir.durable, change);
                }
            }
            dir.pending.clear();
            dir.live = dir.durable.clone();
        }
        for inode in self.inodes.values_mut() {
            let unsynced = inode.data.len().saturating_sub(inode.synced);
            // None, all, or a uniform cut, a third of the time each: a
            // uniform cut alone would almost never keep a whole record.
            let kept = match draw(2) {
                0 => 0,
                1 => unsynced,
                _ => draw(unsynced),
            };
            let keep = inode.synced + kept;
            inode.data.truncate(keep);
            inode.synced = inode.data.len();
            inode.handles = 0;
        }
        self.locks.clear();
        self.plan = None;
        self.read_plan = None;
        self.boot += 1;
        self.power_losses += 1;
        self.collect_garbage();
    }

    /// Drops inodes no name (live, durable or pending) and no handle reaches.
    fn collect_garbage(&mut self) {
        let mut reachable = BTreeSet::new();
        for dir in self.dirs.values() {
            reachable.extend(dir.live.values().copied());
            reachable.extend(dir.durable.values().copied());
            for change in &dir.pending {
                reachable.extend(change.iter().filter_map(|(_, inode)| *inode));
            }
        }
        self.inodes
            .retain(|id, inode| inode.handles > 0 || reachable.contains(id));
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    fn disk_with_dir() -> FaultFs {
        let fs = FaultFs::new();
        fs.create_dir_all(&p("/db")).unwrap();
        fs
    }

    fn write(fs: &FaultFs, path: &str, data: &[u8], sync: bool) {
        let mut f = fs.create(&p(path)).unwrap();
        f.append(data).unwrap();
        if sync {
            f.sync().unwrap();
        }
    }

    fn read(fs: &FaultFs, path: &str) -> Option<Vec<u8>> {
        fs.read_all(&p(path)).ok().map(|b| b.to_vec())
    }

    #[test]
    fn reads_see_volatile_content_and_list_sees_live_entries() {
        let fs = disk_with_dir();
        write(&fs, "/db/a", b"hello", false);
        let mut f = fs.open_append(&p("/db/a")).unwrap();
        f.append(b" world").unwrap();
        assert_eq!(read(&fs, "/db/a").unwrap(), b"hello world");
        fs.create_dir_all(&p("/db/sub")).unwrap();
        assert_eq!(fs.list(&p("/db")).unwrap(), vec!["a", "sub"]);
        assert!(fs.exists(&p("/db/a")) && fs.exists(&p("/db")) && fs.is_dir(&p("/db")));
        assert!(!fs.is_dir(&p("/db/a")));
        assert!(fs.read_all(&p("/db/missing")).is_err());
        assert!(fs.create(&p("/nodir/x")).is_err());
    }

    #[test]
    fn power_loss_keeps_only_synced_data_under_synced_names() {
        let fs = disk_with_dir();
        write(&fs, "/db/durable", b"kept", true);
        fs.sync_dir(&p("/db")).unwrap();
        let mut f = fs.open_append(&p("/db/durable")).unwrap();
        f.append(b" lost").unwrap();
        write(&fs, "/db/synced_data_only", b"data", true);
        write(&fs, "/db/nothing_synced", b"data", false);
        fs.power_loss(PowerLoss::DropUnsynced);
        assert_eq!(read(&fs, "/db/durable").unwrap(), b"kept");
        assert_eq!(read(&fs, "/db/synced_data_only"), None);
        assert_eq!(read(&fs, "/db/nothing_synced"), None);
        assert_eq!(fs.list(&p("/db")).unwrap(), vec!["durable"]);
        // The dead process's handle can no longer write.
        assert!(f.append(b"x").is_err());
        assert!(f.sync().is_err());
    }

    /// A hard link is a second name for the same data: it outlives the
    /// first name's removal, refuses a taken name, and like any new name
    /// is lost to a power cut unless its directory was synced.
    #[test]
    fn a_hard_link_names_the_same_data_and_needs_a_directory_sync() {
        let fs = disk_with_dir();
        fs.create_dir_all(&p("/other")).unwrap();
        write(&fs, "/db/a", b"data", true);
        fs.sync_dir(&p("/db")).unwrap();
        fs.hard_link(&p("/db/a"), &p("/other/kept")).unwrap();
        fs.hard_link(&p("/db/a"), &p("/other/lost")).unwrap();
        assert!(fs.hard_link(&p("/db/a"), &p("/other/kept")).is_err());
        assert!(fs.hard_link(&p("/db/missing"), &p("/other/x")).is_err());
        fs.remove(&p("/db/a")).unwrap();
        fs.sync_dir(&p("/db")).unwrap();
        assert_eq!(read(&fs, "/other/kept").unwrap(), b"data");
        let mut f = fs.open_append(&p("/other/kept")).unwrap();
        f.append(b"+").unwrap();
        assert_eq!(read(&fs, "/other/lost").unwrap(), b"data+");
        f.sync().unwrap();
        drop(f);
        fs.remove(&p("/other/lost")).unwrap();
        fs.sync_dir(&p("/other")).unwrap();
        fs.hard_link(&p("/other/kept"), &p("/other/unsynced"))
            .unwrap();
        fs.power_loss(PowerLoss::DropUnsynced);
        assert_eq!(read(&fs, "/other/kept").unwrap(), b"data+");
        assert_eq!(read(&fs, "/other/unsynced"), None);
        assert_eq!(read(&fs, "/db/a"), None);
    }

    /// A directory's rename moves it and the directories under it, with
    /// their files, durable at once; it refuses a target that exists.
    #[test]
    fn a_directory_rename_moves_the_tree_and_survives_a_power_loss() {
        let fs = disk_with_dir();
        fs.create_dir_all(&p("/db/tmp/sub")).unwrap();
        write(&fs, "/db/tmp/a", b"a", true);
        write(&fs, "/db/tmp/sub/b", b"b", true);
        fs.sync_dir(&p("/db/tmp")).unwrap();
        fs.sync_dir(&p("/db/tmp/sub")).unwrap();
        fs.create_dir_all(&p("/db/taken")).unwrap();
        assert!(fs.rename(&p("/db/tmp"), &p("/db/taken")).is_err());
        assert!(fs.rename(&p("/db/tmp"), &p("/db/tmp/sub/inside")).is_err());
        assert!(fs.rename(&p("/db/tmp"), &p("/nodir/x")).is_err());
        fs.rename(&p("/db/tmp"), &p("/db/done")).unwrap();
        assert!(!fs.exists(&p("/db/tmp")) && !fs.exists(&p("/db/tmp/a")));
        assert!(fs.is_dir(&p("/db/done/sub")));
        fs.power_loss(PowerLoss::DropUnsynced);
        assert_eq!(read(&fs, "/db/done/a").unwrap(), b"a");
        assert_eq!(read(&fs, "/db/done/sub/b").unwrap(), b"b");
        assert_eq!(fs.list(&p("/db/done")).unwrap(), vec!["a", "sub"]);
    }

    #[test]
    fn unsynced_rename_and_remove_are_undone() {
        let fs = disk_with_dir();
        write(&fs, "/db/old", b"old", true);
        write(&fs, "/db/tmp", b"new", true);
        write(&fs, "/db/doomed", b"d", true);
        fs.sync_dir(&p("/db")).unwrap();
        fs.rename(&p("/db/tmp"), &p("/db/old")).unwrap();
        fs.remove(&p("/db/doomed")).unwrap();
        assert_eq!(read(&fs, "/db/old").unwrap(), b"new");
        assert_eq!(fs.list(&p("/db")).unwrap(), vec!["old"]);
        fs.power_loss(PowerLoss::DropUnsynced);
        assert_eq!(read(&fs, "/db/old").unwrap(), b"old");
        assert_eq!(read(&fs, "/db/tmp").unwrap(), b"new");
        assert_eq!(read(&fs, "/db/doomed").unwrap(), b"d");

        fs.rename(&p("/db/tmp"), &p("/db/old")).unwrap();
        fs.sync_dir(&p("/db")).unwrap();
        fs.power_loss(PowerLoss::DropUnsynced);
        assert_eq!(read(&fs, "/db/old").unwrap(), b"new");
        assert_eq!(read(&fs, "/db/tmp"), None);
    }

    #[test]
    fn torn_power_loss_keeps_prefixes_and_replays_by_seed() {
        let outcome = |seed: u64| {
            let fs = disk_with_dir();
            write(&fs, "/db/a", b"0123", true);
            fs.sync_dir(&p("/db")).unwrap();
            let mut f = fs.open_append(&p("/db/a")).unwrap();
            f.append(b"456789abcdef").unwrap();
            write(&fs, "/db/b", b"b", true);
            fs.rename(&p("/db/b"), &p("/db/c")).unwrap();
            fs.power_loss(PowerLoss::TornUnsynced { seed });
            (read(&fs, "/db/a").unwrap(), fs.list(&p("/db")).unwrap())
        };
        let mut lengths = BTreeSet::new();
        let mut listings = BTreeSet::new();
        for seed in 0..200 {
            let (a, names) = outcome(seed);
            assert!(b"0123456789abcdef".starts_with(&a) && a.len() >= 4, "{a:?}");
            lengths.insert(a.len());
            // Changes apply in order: never the rename without the creation.
            assert!(
                names == ["a"] || names == ["a", "b"] || names == ["a", "c"],
                "{names:?}"
            );
            listings.insert(names);
            assert_eq!(outcome(seed).0, a, "seed {seed} must replay");
        }
        assert!(lengths.contains(&4) && lengths.contains(&16) && lengths.len() > 5);
        assert_eq!(listings.len(), 3);
    }

    #[test]
    fn reordered_power_loss_keeps_any_subset_of_directory_changes() {
        let mut listings = BTreeSet::new();
        for seed in 0..100 {
            let fs = disk_with_dir();
            write(&fs, "/db/first", b"1", true);
            write(&fs, "/db/second", b"2", true);
            fs.power_loss(PowerLoss::ReorderedUnsynced { seed });
            listings.insert(fs.list(&p("/db")).unwrap());
        }
        // Including the later change without the earlier one.
        assert_eq!(listings.len(), 4, "{listings:?}");
        assert!(listings.contains(&vec!["second".to_string()]));
    }

    #[test]
    fn nth_operation_fails_once_or_persistently() {
        let fs = disk_with_dir();
        let start = fs.op_count();
        fs.fail_after(2, FaultMode::Once);
        let mut f = fs.create(&p("/db/a")).unwrap();
        let err = f.append(b"x").unwrap_err();
        assert!(err.to_string().contains("injected fault"), "{err}");
        f.append(b"y").unwrap();
        assert_eq!(read(&fs, "/db/a").unwrap(), b"y");
        assert_eq!(fs.op_count(), start + 4);
        assert_eq!(fs.faults_injected(), 1);

        fs.fail_after(1, FaultMode::Persistent);
        assert!(f.sync().is_err());
        assert!(fs.list(&p("/db")).is_err());
        assert!(fs.sync_dir(&p("/db")).is_err());
        fs.clear_faults();
        f.sync().unwrap();
        assert_eq!(fs.faults_injected(), 4);
    }

    #[test]
    fn matching_faults_hit_only_their_operation_and_path() {
        let fs = disk_with_dir();
        let kind = std::io::ErrorKind::StorageFull;
        fs.fail_matching("create", ".sst", FaultMode::Once, kind);
        write(&fs, "/db/a.wal", b"log", true);
        let err = fs.create(&p("/db/1.sst")).err().unwrap();
        assert!(
            matches!(&err, Error::Io { source, .. } if source.kind() == kind),
            "{err}"
        );
        write(&fs, "/db/2.sst", b"table", true);
        fs.fail_matching("append", "", FaultMode::Persistent, kind);
        let mut f = fs.create(&p("/db/3.sst")).unwrap();
        assert!(f.append(b"x").is_err());
        assert!(f.append(b"y").is_err());
        f.sync().unwrap();
        fs.clear_faults();
        f.append(b"z").unwrap();
        assert_eq!(read(&fs, "/db/3.sst").unwrap(), b"z");
        assert_eq!(fs.faults_injected(), 3);
    }

    #[test]
    fn an_injected_panic_leaves_the_disk_usable() {
        let fs = disk_with_dir();
        fs.panic_matching("create", ".sst");
        write(&fs, "/db/a.wal", b"log", true);
        let other = fs.clone();
        let panicked = std::thread::spawn(move || other.create(&p("/db/1.sst")).map(|_| ()))
            .join()
            .unwrap_err();
        let message = panicked.downcast_ref::<String>().unwrap();
        assert!(message.contains("injected panic"), "{message}");
        write(&fs, "/db/1.sst", b"table", true);
        assert_eq!(read(&fs, "/db/1.sst").unwrap(), b"table");
    }

    #[test]
    fn a_full_disk_writes_what_fits_and_removal_gives_space_back() {
        let fs = disk_with_dir();
        write(&fs, "/db/a", &[1; 100], true);
        assert_eq!(fs.used_bytes(), 100);
        fs.set_space_limit(Some(150));
        let mut f = fs.create(&p("/db/b")).unwrap();
        f.append(&[2; 30]).unwrap();
        let err = f.append(&[3; 30]).unwrap_err();
        assert!(
            matches!(&err, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::StorageFull),
            "{err}"
        );
        assert_eq!(read(&fs, "/db/b").unwrap().len(), 50);
        assert!(f.append(&[4]).is_err());
        // Removed, even before the removal is durable: the space is back.
        fs.remove(&p("/db/a")).unwrap();
        f.append(&[4; 100]).unwrap();
        assert_eq!(fs.used_bytes(), 150);
        fs.set_space_limit(None);
        f.append(&[5; 1000]).unwrap();
    }

    #[test]
    fn a_failed_append_can_tear() {
        let fs = disk_with_dir();
        let mut f = fs.create(&p("/db/a")).unwrap();
        fs.tear_failed_appends(true);
        fs.fail_after(1, FaultMode::Once);
        assert!(f.append(b"abcdef").is_err());
        assert_eq!(read(&fs, "/db/a").unwrap(), b"abc");
    }

    #[test]
    fn power_loss_after_n_operations_kills_the_process() {
        let fs = disk_with_dir();
        let process = fs.for_process();
        fs.power_loss_after(3, PowerLoss::DropUnsynced);
        let mut f = process.create(&p("/db/a")).unwrap();
        f.append(b"x").unwrap();
        assert!(f.sync().is_err());
        assert_eq!(fs.power_losses(), 1);
        assert!(process.create(&p("/db/b")).is_err());
        assert_eq!(read(&fs, "/db/a"), None);
        let next = fs.for_process();
        write(&next, "/db/b", b"b", false);
        assert_eq!(read(&fs, "/db/b").unwrap(), b"b");
    }

    #[test]
    fn locks_are_exclusive_and_die_with_the_power() {
        let fs = disk_with_dir();
        let process = fs.for_process();
        let lock = p("/db/LOCK");
        let held = process.lock(&lock).unwrap();
        assert!(matches!(fs.lock(&lock), Err(Error::Locked(_))));
        drop(held);
        let held = fs.for_process().lock(&lock).unwrap();
        fs.power_loss(PowerLoss::DropUnsynced);
        let again = fs.for_process().lock(&lock).unwrap();
        // The dead process's lock going away must not free the new one.
        drop(held);
        assert!(matches!(fs.lock(&lock), Err(Error::Locked(_))));
        drop(again);
        fs.lock(&lock).unwrap();
    }

    #[test]
    fn a_killed_process_loses_nothing_it_wrote() {
        let fs = disk_with_dir();
        let process = fs.for_process();
        let mut f = process.create(&p("/db/a")).unwrap();
        f.append(b"unsynced").unwrap();
        fs.kill_process();
        assert!(f.append(b"more").is_err());
        assert_eq!(read(&fs, "/db/a").unwrap(), b"unsynced");
        fs.power_loss(PowerLoss::DropUnsynced);
        assert_eq!(read(&fs, "/db/a"), None);
    }

    #[test]
    fn removed_files_are_collected_once_their_removal_is_durable() {
        let fs = disk_with_dir();
        for i in 0..10 {
            write(&fs, &format!("/db/{i}"), &[0u8; 1000], true);
            fs.sync_dir(&p("/db")).unwrap();
            fs.remove(&p(&format!("/db/{i}"))).unwrap();
            fs.sync_dir(&p("/db")).unwrap();
        }
        assert_eq!(fs.machine.disk.lock().inodes.len(), 0);
    }

    #[test]
    fn positioned_reads_fail_on_their_own_plan_and_keep_removed_files() {
        let fs = disk_with_dir();
        write(&fs, "/db/t", b"0123456789", true);
        fs.sync_dir(&p("/db")).unwrap();
        let ops = fs.op_count();
        let file = fs.open_read(&p("/db/t")).unwrap();
        assert_eq!(file.len(), 10);
        let mut buf = [0u8; 4];
        file.read_exact_at(&mut buf, 3).unwrap();
        assert_eq!(&buf, b"3456");
        let err = file.read_exact_at(&mut buf, 8).unwrap_err();
        assert!(
            matches!(&err, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::UnexpectedEof),
            "{err}"
        );
        assert_eq!(fs.op_count(), ops, "reads do not move the write-side count");
        assert_eq!(fs.read_op_count(), 3);

        fs.fail_reads_after(2, FaultMode::Once);
        file.read_exact_at(&mut buf, 0).unwrap();
        assert!(file.read_exact_at(&mut buf, 0).is_err());
        file.read_exact_at(&mut buf, 0).unwrap();
        fs.fail_reads_after(1, FaultMode::Persistent);
        assert!(fs.open_read(&p("/db/t")).is_err());
        assert!(file.read_exact_at(&mut buf, 0).is_err());
        fs.clear_faults();

        // Removed and made durable: still readable through the open file.
        fs.remove(&p("/db/t")).unwrap();
        fs.sync_dir(&p("/db")).unwrap();
        assert!(fs.open_read(&p("/db/t")).is_err());
        file.read_exact_at(&mut buf, 6).unwrap();
        assert_eq!(&buf, b"6789");
        drop(file);
        assert_eq!(fs.machine.disk.lock().inodes.len(), 0);

        // A process's readable file dies with the process.
        write(&fs, "/db/u", b"abc", true);
        let file = fs.for_process().open_read(&p("/db/u")).unwrap();
        fs.kill_process();
        assert!(file.read_exact_at(&mut [0u8; 1], 0).is_err());
    }

    #[test]
    fn is_send_sync_and_a_file_system() {
        fn check<T: Send + Sync + Clone + FileSystem>() {}
        check::<FaultFs>();
    }
}
