//! The disk under [`super::FaultFs`]: what a real disk would hold, and
//! what it may lose.
//!
//! Owns: the inodes (bytes written, how many synced, open handles), the
//! directories (live entries, durable entries, the changes pending between
//! them), the operation counters and the armed fault plans, the space
//! limit, and the power loss itself ([`PowerLoss`]: which unsynced bytes
//! and directory changes survive).
//! Must never: keep anything across a power loss that a real disk would be
//! allowed to lose in the chosen mode, or touch a real file.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::SplitMix64;
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

/// Which system's durability rules the disk follows (see the docs of
/// `fault`).
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

pub(super) type InodeId = u64;

#[derive(Default)]
pub(super) struct Inode {
    pub(super) data: Vec<u8>,
    /// `data[..synced]` survives a power loss.
    pub(super) synced: usize,
    /// Open handles, writable or readable (an unlinked inode lives while one
    /// is open).
    pub(super) handles: usize,
}

/// One atomic change to a directory: each name now points at the inode, or
/// at nothing.
type DirChange = Vec<(String, Option<InodeId>)>;

#[derive(Default, Clone)]
pub(super) struct Dir {
    pub(super) live: BTreeMap<String, InodeId>,
    pub(super) durable: BTreeMap<String, InodeId>,
    pub(super) pending: Vec<DirChange>,
}

impl Dir {
    pub(super) fn change(&mut self, change: DirChange) {
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
pub(super) enum Trigger {
    Fail(FaultMode, std::io::ErrorKind),
    PowerLoss(PowerLoss),
    Panic,
}

/// Which operations an armed fault may hit: one name (`"create"`,
/// `"append"`, ...) on paths whose text ends with `path_suffix`.
#[derive(Clone)]
pub(super) struct Filter {
    pub(super) op: String,
    pub(super) path_suffix: String,
}

/// An armed fault: fires at the first counted operation numbered `at` or
/// later that its filter (if any) accepts; a persistent failure at every one.
#[derive(Clone)]
pub(super) struct Plan {
    pub(super) at: u64,
    pub(super) filter: Option<Filter>,
    pub(super) trigger: Trigger,
}

#[derive(Default)]
pub(super) struct Disk {
    pub(super) boot: u64,
    pub(super) next_inode: InodeId,
    pub(super) inodes: BTreeMap<InodeId, Inode>,
    pub(super) dirs: BTreeMap<PathBuf, Dir>,
    pub(super) locks: BTreeSet<PathBuf>,
    pub(super) ops: u64,
    pub(super) plan: Option<Plan>,
    pub(super) read_ops: u64,
    /// Armed read fault: fires at read operation number `.0`.
    pub(super) read_plan: Option<(u64, FaultMode)>,
    /// How long every positioned read sleeps (outside the disk's lock).
    pub(super) read_latency: Option<std::time::Duration>,
    pub(super) tear_failed_appends: bool,
    pub(super) space_limit: Option<u64>,
    pub(super) faults_injected: u64,
    pub(super) power_losses: u64,
    pub(super) durability: Durability,
}

/// Why an operation may not go ahead.
pub(super) enum Refusal {
    /// Injected: the operation fails (a failing append may tear first).
    Injected(Error),
    /// The calling process died with the power.
    Dead(Error),
}

impl Refusal {
    pub(super) fn into_error(self) -> Error {
        match self {
            Refusal::Injected(e) | Refusal::Dead(e) => e,
        }
    }
}

pub(super) fn dead_error(path: &Path, boot: u64) -> Error {
    Error::io(
        path,
        std::io::Error::other(format!(
            "simulated power loss: this handle belongs to boot {boot}, whose process died"
        )),
    )
}

pub(super) fn not_found(path: &Path, what: &str) -> Error {
    Error::io(
        path,
        std::io::Error::new(std::io::ErrorKind::NotFound, what.to_string()),
    )
}

pub(super) fn split(path: &Path) -> Result<(PathBuf, String)> {
    let name = path
        .file_name()
        .ok_or_else(|| Error::invalid(format!("{} names no file", path.display())))?;
    let parent = path.parent().unwrap_or(Path::new(""));
    Ok((parent.to_path_buf(), name.to_string_lossy().into_owned()))
}

impl Disk {
    /// Counts one operation by a process of `boot` (`None`: the machine's
    /// own view) and fires an armed fault if this is its operation.
    pub(super) fn begin(
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
    pub(super) fn begin_read(&mut self, boot: Option<u64>, op: &str, path: &Path) -> Result<()> {
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
    pub(super) fn used_bytes(&self) -> u64 {
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

    pub(super) fn dir(&self, dir: &Path) -> Result<&Dir> {
        self.dirs
            .get(dir)
            .ok_or_else(|| not_found(dir, "no such directory"))
    }

    pub(super) fn dir_mut(&mut self, dir: &Path) -> Result<&mut Dir> {
        self.dirs
            .get_mut(dir)
            .ok_or_else(|| not_found(dir, "no such directory"))
    }

    /// Renames directory `from` (and every directory under it) to `to`,
    /// which must not exist and whose parent must: durable at once, as a
    /// directory's creation is.
    pub(super) fn rename_dir(&mut self, from: &Path, to: &Path) -> Result<()> {
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

    pub(super) fn lookup(&self, path: &Path) -> Result<InodeId> {
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
    pub(super) fn create_file(&mut self, path: &Path, handles: usize) -> Result<InodeId> {
        let (parent, name) = split(path)?;
        self.dir(&parent)?;
        let inode = self.new_inode(handles);
        self.dir_mut(&parent)?.change(vec![(name, Some(inode))]);
        Ok(inode)
    }

    /// Under [`Durability::WindowsWriteThrough`], what a write-through
    /// rename or a file flush does: every pending directory change becomes
    /// durable (the journal is committed up to now). Nothing under POSIX.
    pub(super) fn commit_journal(&mut self) {
        if self.durability != Durability::WindowsWriteThrough {
            return;
        }
        for dir in self.dirs.values_mut() {
            dir.durable = dir.live.clone();
            dir.pending.clear();
        }
        self.collect_garbage();
    }

    pub(super) fn power_loss(&mut self, mode: PowerLoss) {
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
    pub(super) fn collect_garbage(&mut self) {
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
