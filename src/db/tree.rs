//! [`Tree`]: one keyspace's state — its options, its own super-version
//! (memtables and tables), compaction pointers, and whether it was dropped
//! — what reads, writes and background work of the keyspace use.
//!
//! Owns: building a tree, sealing and moving its active memtable, and the
//! checks of a dropped or damaged keyspace. Must never: publish a
//! super-version without the writer and version locks its callers hold,
//! or let one keyspace's keys reach another's memtable.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;
use parking_lot::Mutex;

use crate::db::keyspace_options::KeyspaceOptions;
use crate::db::latency::KeyspaceReads;
use crate::db::super_version::{LoggedMemtable, SuperVersion};
use crate::db::version::Version;
use crate::error::{Error, Result};
use crate::manifest::DEFAULT_KEYSPACE_ID;
use crate::memtable::Memtable;
use crate::options::Options;
use crate::shared::write_buffer::MemtableMemory;
use crate::table::TableKeyspace;

/// What the memtables of `trees` hold (each memtable's `memory_bytes`:
/// its arena's blocks, range tombstones and key filter), as a shared
/// memtable budget counts it (`Options::write_buffer_manager`).
pub(crate) fn memtable_memory(trees: &[Arc<Tree>]) -> MemtableMemory {
    let mut memory = MemtableMemory::default();
    for tree in trees {
        let sv = tree.current.load();
        let active = sv.mem.mem.memory_bytes();
        memory.active = memory.active.saturating_add(active);
        if !sv.mem.mem.is_empty() {
            memory.largest_active = memory.largest_active.max(active);
        }
        for waiting in &sv.imm {
            memory.waiting = memory.waiting.saturating_add(waiting.mem.memory_bytes());
        }
    }
    memory
}

/// One keyspace's tree: what reads and background work of the keyspace use.
pub(crate) struct Tree {
    pub id: u32,
    pub name: String,
    /// The database's options with the keyspace's own settings applied
    /// (replaced by `Db::keyspace_with`).
    pub opts: ArcSwap<Options>,
    /// The keyspace's own settings, every `Db::keyspace_with` given since
    /// the open applied over those the manifest stored; the manifest
    /// stores their data part. Locked after the version lock.
    pub given: Mutex<KeyspaceOptions>,
    /// The keyspace's memtables and tables, swapped as one.
    pub current: ArcSwap<SuperVersion>,
    /// Per level, the largest key of the last table compacted out of it.
    pub compact_pointer: Mutex<Vec<Vec<u8>>>,
    /// Set when the keyspace is dropped: its handles are refused from then on.
    pub dropped: AtomicBool,
    /// The keyspace's reads (`KeyspaceStats`).
    pub reads: KeyspaceReads,
}

impl Tree {
    /// A tree of `version` with an empty memtable for log `log_number`;
    /// `opts` are the database's options with `given` applied.
    pub fn new(
        id: u32,
        name: String,
        opts: Options,
        given: KeyspaceOptions,
        version: Version,
        log_number: u64,
    ) -> Tree {
        let mem = Memtable::with_key_filter(opts.memtable_bytes);
        Tree::with_memtable(id, name, opts, given, version, mem, log_number)
    }

    /// A tree of `version` whose active memtable is `mem` (records of logs
    /// from `log_number` on).
    pub fn with_memtable(
        id: u32,
        name: String,
        opts: Options,
        given: KeyspaceOptions,
        version: Version,
        mem: Memtable,
        log_number: u64,
    ) -> Tree {
        let opts = Tree::own_options(id, &name, opts);
        Tree {
            id,
            name,
            opts: ArcSwap::from_pointee(opts),
            given: Mutex::new(given),
            current: ArcSwap::from_pointee(SuperVersion {
                mem: LoggedMemtable {
                    mem: Arc::new(mem),
                    log_number,
                },
                imm: Vec::new(),
                version: Arc::new(version),
            }),
            compact_pointer: Mutex::new(Vec::new()),
            dropped: AtomicBool::new(false),
            reads: KeyspaceReads::default(),
        }
    }

    /// `opts` as this keyspace's: its tables record the keyspace.
    pub fn own_options(id: u32, name: &str, mut opts: Options) -> Options {
        opts.keyspace = (id != DEFAULT_KEYSPACE_ID).then(|| TableKeyspace {
            id,
            name: name.to_string(),
        });
        opts
    }

    /// Replaces the keyspace's settings (for tables written from now on).
    pub fn set_options(&self, opts: Options) {
        self.opts
            .store(Arc::new(Tree::own_options(self.id, &self.name, opts)));
    }

    /// Makes the active memtable the newest immutable one and starts an
    /// empty memtable for log `log_number`. The caller holds the writer and
    /// version locks (so no write and no flush publishes meanwhile).
    pub fn seal_memtable(&self, log_number: u64) {
        let old = self.current.load_full();
        let mut imm = Vec::with_capacity(old.imm.len() + 1);
        imm.push(old.mem.clone());
        imm.extend(old.imm.iter().cloned());
        self.current.store(Arc::new(SuperVersion {
            mem: LoggedMemtable {
                mem: Arc::new(Memtable::with_key_filter(self.opts.load().memtable_bytes)),
                log_number,
            },
            imm,
            version: Arc::clone(&old.version),
        }));
    }

    /// An empty active memtable now belongs to log `log_number` (it holds
    /// no record of an older one). Same locks as [`Tree::seal_memtable`].
    pub fn move_empty_memtable(&self, log_number: u64) {
        let old = self.current.load_full();
        self.current.store(Arc::new(SuperVersion {
            mem: LoggedMemtable {
                mem: Arc::clone(&old.mem.mem),
                log_number,
            },
            imm: old.imm.clone(),
            version: Arc::clone(&old.version),
        }));
    }

    /// This keyspace's tables now, level by level (see `Db::live_tables`).
    pub fn live_tables(&self) -> Vec<crate::events::TableMetadata> {
        let sv = self.current.load();
        sv.version
            .levels
            .iter()
            .flatten()
            .map(|t| t.metadata(&self.name))
            .collect()
    }

    /// `InvalidArgument` once the keyspace was dropped.
    pub fn check_live(&self) -> Result<()> {
        if self.dropped.load(Ordering::Acquire) {
            return Err(Error::invalid(format!(
                "keyspace {:?} was dropped; open it again with Db::keyspace for a new, empty one",
                self.name
            )));
        }
        Ok(())
    }

    /// `Corruption` naming the first table of this keyspace that could not
    /// be opened, if any (a full compaction would have to read it).
    pub fn check_undamaged(&self) -> Result<()> {
        let sv = self.current.load();
        match sv.version.levels.iter().flatten().find(|t| t.is_damaged()) {
            Some(damaged) => damaged.readable().map(|_| ()),
            None => Ok(()),
        }
    }
}
