//! [`Follower`]: what a secondary instance knows of its primary — the
//! manifest it last applied, the tables of its view (held open), and per
//! live log how far it read and the memtables (one per keyspace) of the
//! records read — and one catch-up: reading the primary's newer manifest
//! and log records, and publishing them as a new view; [`CatchUp`], what
//! one reports.
//!
//! Owns: the order a catch-up reads the primary's files in, and why the
//! view it publishes is a prefix of the primary's write history. The logs
//! are listed after the manifest is read and read after they are listed,
//! every one but the newest to its end (the primary appends only to its
//! newest log); the manifest is read again after them, and the attempt
//! starts over if it moved meanwhile (a flush removed a log it needed). So
//! every write up to the manifest's last sequence number is in its tables
//! or in a log read here, and every record read follows all the earlier
//! ones. Records are added to memtables a published view may share (those
//! of the log being appended): they carry sequence numbers above the
//! published one, hidden from its readers; the new sequence number is
//! published before the new super-versions, so a reader holding an older
//! super-version sees a prefix too, never a version a newer table set
//! dropped.
//! Must never: write to the primary's directory, take a record that is not
//! whole (a write in progress), publish a sequence number before every
//! record up to it is in the view, or reopen a table of the view by name
//! (the primary's compaction may have removed it; an open file keeps it).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::batch::decode_record;
use crate::db::flush::open_live_table_with;
use crate::db::inner::DbInner;
use crate::db::keyspace_options::KeyspaceOptions;
use crate::db::open::{keyspaces_of, logs_from, manifest_exists, read_state, repair_hint};
use crate::db::read_only::out_of_file_handles;
use crate::db::super_version::{LoggedMemtable, SuperVersion};
use crate::db::tree::Tree;
use crate::db::version::{LiveTable, Version, LEVELS};
use crate::error::{Error, Result};
use crate::filename::{table_file_name, wal_file_name};
use crate::fs::SharedFs;
use crate::identify::check_is_database;
use crate::key::SeqNo;
use crate::manifest::{KeyspaceRecord, ManifestState};
use crate::memtable::Memtable;
use crate::table::Table;
use crate::wal::{LogCursor, LogStop};

/// Attempts started over because the primary moved its manifest meanwhile,
/// before a catch-up gives up (the view stays as it was).
const MAX_ATTEMPTS: u32 = 50;

/// What one [`Secondary::try_catch_up`](super::Secondary::try_catch_up) did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CatchUp {
    /// The sequence number of the last write the secondary sees now (the
    /// primary's sequence numbers: one per operation).
    pub sequence: u64,
    /// Log records (write groups of the primary) read by this call.
    pub records_read: u64,
    /// The primary's manifest had changed since the last catch-up (a
    /// flush, a compaction, a keyspace created or dropped).
    pub manifest_changed: bool,
    /// Tables the view reads now.
    pub tables: usize,
    /// Tables the primary's manifest names that could not be opened:
    /// (file, reason). Reads that need one fail with `Corruption` naming
    /// it (with [`Options::paranoid_checks`](crate::Options::paranoid_checks)
    /// the catch-up fails instead).
    pub damaged_tables: Vec<(String, String)>,
}

/// What a secondary knows of its primary between catch-ups.
pub(super) struct Follower {
    primary: PathBuf,
    /// The live logs followed, oldest first.
    logs: Vec<FollowedLog>,
    /// The tables of the published view, by file number, held open.
    tables: HashMap<u64, Arc<LiveTable>>,
    /// The manifest state of the published view.
    applied: Option<ManifestState>,
    /// The largest sequence number read from a log.
    read_seq: SeqNo,
}

/// One live log of the primary, as far as it was read.
struct FollowedLog {
    cursor: LogCursor,
    number: u64,
    /// Read to its end when a newer log existed: it will not grow.
    complete: bool,
    /// Per keyspace id, the records of this log (keyspaces the applied
    /// manifest does not know yet included: the primary may have created
    /// one after it).
    mems: Vec<(u32, Arc<Memtable>)>,
}

impl FollowedLog {
    fn new(number: u64) -> FollowedLog {
        FollowedLog {
            cursor: LogCursor::new(number),
            number,
            complete: false,
            mems: Vec::new(),
        }
    }

    fn mem(&self, keyspace: u32) -> Option<&Arc<Memtable>> {
        self.mems
            .iter()
            .find(|(id, _)| *id == keyspace)
            .map(|(_, mem)| mem)
    }

    /// The memtable of `keyspace`'s records in this log, made when it has
    /// none yet.
    fn mem_or_new(
        mems: &mut Vec<(u32, Arc<Memtable>)>,
        keyspace: u32,
        capacity: usize,
    ) -> Arc<Memtable> {
        if let Some((_, mem)) = mems.iter().find(|(id, _)| *id == keyspace) {
            return Arc::clone(mem);
        }
        let mem = Arc::new(Memtable::with_key_filter(capacity));
        mems.push((keyspace, Arc::clone(&mem)));
        mem
    }
}

/// How one attempt ended.
enum Attempt {
    Published(CatchUp),
    /// The manifest moved under it: start over from this state.
    Moved(ManifestState),
}

/// The primary's manifest state; `NotADatabase` when it has none.
pub(super) fn primary_state(fs: &SharedFs, dir: &Path) -> Result<ManifestState> {
    match read_state(fs.as_ref(), dir)? {
        Some((state, _)) => Ok(state),
        None => {
            if fs.is_dir(dir) && !manifest_exists(fs.as_ref(), dir) {
                // Another engine's files are named as such.
                check_is_database(fs, dir, &fs.list(dir)?)?;
            }
            Err(Error::NotADatabase {
                path: dir.to_path_buf(),
                reason: "it has no MANIFEST; a secondary instance creates nothing there".into(),
            })
        }
    }
}

/// `Moved` when the primary's manifest is no longer `state`; else the
/// error `otherwise`.
fn moved_or(
    inner: &DbInner,
    primary: &Path,
    state: &ManifestState,
    otherwise: Error,
) -> Result<Attempt> {
    let now = primary_state(&inner.fs, primary)?;
    if now == *state {
        return Err(otherwise);
    }
    Ok(Attempt::Moved(now))
}

fn is_not_found(e: &Error) -> bool {
    matches!(e, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
}

impl Follower {
    pub(super) fn new(primary: &Path) -> Follower {
        Follower {
            primary: primary.to_path_buf(),
            logs: Vec::new(),
            tables: HashMap::new(),
            applied: None,
            read_seq: SeqNo(0),
        }
    }

    /// Reads what the primary wrote since the last catch-up and publishes
    /// it in `inner` (see the module docs).
    pub(super) fn catch_up(&mut self, inner: &DbInner) -> Result<CatchUp> {
        let mut state = primary_state(&inner.fs, &self.primary)?;
        for _ in 0..MAX_ATTEMPTS {
            match self.attempt(inner, state)? {
                Attempt::Published(done) => return Ok(done),
                Attempt::Moved(newer) => state = newer,
            }
        }
        Err(Error::io(
            &self.primary,
            std::io::Error::other(format!(
                "the primary's manifest changed during each of {MAX_ATTEMPTS} attempts to catch up"
            )),
        ))
    }

    fn attempt(&mut self, inner: &DbInner, state: ManifestState) -> Result<Attempt> {
        let fs = inner.fs.as_ref();
        let listed = logs_from(&fs.list(&self.primary)?, state.log_number);
        // Older logs are in the manifest's tables.
        self.logs.retain(|log| log.number >= state.log_number);
        for &number in &listed {
            if !self.logs.iter().any(|log| log.number == number) {
                self.logs.push(FollowedLog::new(number));
            }
        }
        self.logs.sort_by_key(|log| log.number);
        let newest = listed.last().copied();
        let mut records_read = 0u64;
        let capacity = inner.opts.memtable_bytes;
        let primary = &self.primary;
        for log in &mut self.logs {
            if log.complete {
                continue;
            }
            let name = wal_file_name(log.number);
            let path = primary.join(&name);
            let file = match fs.open_read(&path) {
                Ok(file) => file,
                Err(e) if is_not_found(&e) => {
                    let gone = Error::corruption(
                        format!("log {name}"),
                        "the primary's manifest needs it, and it is gone",
                    );
                    return moved_or(inner, primary, &state, gone);
                }
                Err(e) => return Err(e),
            };
            let from = log.cursor.offset();
            let len = file.len();
            let Some(new_bytes) = len.checked_sub(from).and_then(|n| usize::try_from(n).ok())
            else {
                return Err(Error::corruption(
                    format!("log {name}"),
                    format!("{len} bytes, shorter than the {from} already read from it"),
                ));
            };
            let mut bytes = vec![0u8; new_bytes];
            file.read_exact_at(&mut bytes, from)?;
            let read_seq = &mut self.read_seq;
            let mems = &mut log.mems;
            let stop = log.cursor.read(&bytes, &name, |payload| {
                let batch = decode_record(payload).map_err(|e| match e {
                    Error::Corruption { detail, .. } => {
                        repair_hint(Error::corruption(format!("log {name}"), detail), primary)
                    }
                    other => other,
                })?;
                let mut seq = batch.first_seq;
                for op in &batch.ops {
                    FollowedLog::mem_or_new(mems, op.keyspace, capacity)
                        .apply(op, seq)
                        .map_err(|e| Error::corruption(format!("log {name}"), e.detail()))?;
                    *read_seq = (*read_seq).max(seq);
                    seq = seq.next();
                }
                records_read += 1;
                Ok(())
            })?;
            let is_newest = Some(log.number) == newest;
            match stop {
                LogStop::Closed => log.complete = true,
                LogStop::End => log.complete = !is_newest,
                // The newest log is being appended: the rest comes next time.
                LogStop::Partial(_) if is_newest => {}
                // A record cut short in a log a newer one follows: the
                // primary stopped mid-write and its recovery is moving the
                // manifest past this log. Nothing after it is read now.
                LogStop::Partial(_) => break,
            }
        }
        let now = primary_state(&inner.fs, &self.primary)?;
        if now != state {
            return Ok(Attempt::Moved(now));
        }
        let mut opened = HashMap::new();
        let mut damaged = Vec::new();
        let mut trees = Vec::new();
        for record in keyspaces_of(&state) {
            let mut live = Vec::new();
            for table in state.tables.iter().filter(|t| t.keyspace == record.id) {
                let held = self.tables.get(&table.file_number);
                let table = match held {
                    Some(held) if held.record == *table => Arc::clone(held),
                    // Moved to another level: the same file, held open.
                    Some(held) if !held.is_damaged() => {
                        let open = held.readable()?.clone();
                        Arc::new(LiveTable::new(table.clone(), Ok(open)))
                    }
                    _ => match open_live_table_with(
                        &inner.tables,
                        &self.primary,
                        table.clone(),
                        Table::open_held,
                    ) {
                        Ok(opened) => opened,
                        // Missing: removed by a compaction after this
                        // manifest was read, unless the manifest still
                        // names it.
                        Err(e) if e.is_corruption() => {
                            let now = primary_state(&inner.fs, &self.primary)?;
                            if now != state {
                                return Ok(Attempt::Moved(now));
                            }
                            if inner.opts.paranoid_checks {
                                return Err(repair_hint(e, &self.primary));
                            }
                            damaged.push((table_file_name(table.file_number), e.to_string()));
                            Arc::new(LiveTable::damaged(table.clone(), &e))
                        }
                        Err(e) => {
                            return Err(out_of_file_handles(e, state.tables.len(), &inner.opts))
                        }
                    },
                };
                opened.insert(table.file_number(), Arc::clone(&table));
                live.push(table);
            }
            trees.push((record, Version::with_levels(LEVELS).apply(&[], live)));
        }
        let manifest_changed = self.applied.as_ref() != Some(&state);
        let sequence = SeqNo(inner.last_visible.load(Ordering::Acquire))
            .max(state.last_sequence)
            .max(self.read_seq);
        self.publish(inner, trees, sequence);
        let done = CatchUp {
            sequence: sequence.0,
            records_read,
            manifest_changed,
            tables: opened.len(),
            damaged_tables: damaged,
        };
        self.tables = opened;
        self.applied = Some(state);
        Ok(Attempt::Published(done))
    }

    /// The super-version of keyspace `record` over `version`: the
    /// memtables of the logs from its oldest needed log on, newest first.
    fn super_version(
        &mut self,
        record: &KeyspaceRecord,
        version: Version,
        capacity: usize,
    ) -> SuperVersion {
        let mut logs = self
            .logs
            .iter_mut()
            .filter(|l| l.number >= record.log_number);
        let newest = logs.next_back();
        let imm = logs
            .rev()
            .filter_map(|log| {
                log.mem(record.id)
                    .filter(|mem| !mem.is_empty())
                    .map(|mem| LoggedMemtable {
                        mem: Arc::clone(mem),
                        log_number: log.number,
                    })
            })
            .collect();
        let mem = match newest {
            // Shared with the log: records read later go into it.
            Some(log) => LoggedMemtable {
                mem: FollowedLog::mem_or_new(&mut log.mems, record.id, capacity),
                log_number: log.number,
            },
            None => LoggedMemtable {
                mem: Arc::new(Memtable::new()),
                log_number: record.log_number,
            },
        };
        SuperVersion {
            mem,
            imm,
            version: Arc::new(version),
        }
    }

    /// Makes `trees` (every keyspace of the manifest, with its tables) and
    /// `sequence` the view: the sequence number first (see the module
    /// docs), then each keyspace's super-version; keyspaces the manifest
    /// no longer has are dropped.
    fn publish(&mut self, inner: &DbInner, trees: Vec<(KeyspaceRecord, Version)>, sequence: SeqNo) {
        let mut writer = inner.writer.lock();
        let _versions = inner.versions.lock();
        let old = inner.trees.load_full();
        let capacity = inner.opts.memtable_bytes;
        let mut published = Vec::with_capacity(trees.len());
        let mut views = Vec::with_capacity(trees.len());
        for (record, version) in trees {
            let known = old.iter().find(|t| t.id == record.id).cloned();
            let settings_changed = self
                .applied
                .as_ref()
                .and_then(|a| a.keyspaces.iter().find(|k| k.id == record.id))
                .is_none_or(|k| k.settings != record.settings);
            let tree = match known {
                Some(tree) => {
                    if settings_changed {
                        tree.set_options(record.settings.apply_to(&inner.opts));
                    }
                    tree
                }
                None => Arc::new(Tree::new(
                    record.id,
                    record.name.clone(),
                    record.settings.apply_to(&inner.opts),
                    KeyspaceOptions::from_settings(record.settings.clone()),
                    Version::with_levels(LEVELS),
                    record.log_number,
                )),
            };
            views.push((
                Arc::clone(&tree),
                self.super_version(&record, version, capacity),
            ));
            published.push(tree);
        }
        // Odd while the sequence number and the super-versions disagree: a
        // snapshot taken meanwhile takes itself again (Snapshot::new).
        inner.view_generation.fetch_add(1, Ordering::SeqCst);
        inner.last_visible.store(sequence.0, Ordering::Release);
        writer.last_seq = sequence;
        for (tree, view) in views {
            tree.current.store(Arc::new(view));
        }
        inner.view_generation.fetch_add(1, Ordering::SeqCst);
        for tree in old.iter() {
            if !published.iter().any(|t| t.id == tree.id) {
                tree.dropped.store(true, Ordering::Release);
            }
        }
        let same = old.len() == published.len()
            && old.iter().zip(&published).all(|(a, b)| Arc::ptr_eq(a, b));
        if !same {
            inner.trees.store(Arc::new(published));
        }
    }
}
