//! Repair: a working database rebuilt from what is readable of a damaged
//! one ([`repair`], `siftdb repair DIR`).
//!
//! What it does, in order (`docs/design.md`, "Failures", says what it
//! guarantees and what it cannot):
//!
//! 1. Reads the manifest. When it is intact, its tables and levels are the
//!    starting point; when it is damaged or missing, every table and log
//!    file in the directory is.
//! 2. Checks every table whole (`Table::verify`). A sound table is kept as
//!    it is. A damaged one is salvaged block by block
//!    ([`crate::table::TableSalvager`]): every block that reads whole is
//!    kept, and each lost block is recorded with the key range and the
//!    sequence numbers it may have held.
//! 3. Drops every entry that a lost block may have shadowed — an older
//!    version (sequence number below the damaged table's largest) of a key
//!    within a lost block's range — so that a tombstone or a newer value
//!    lost with the block can never let an older value come back.
//! 4. Replays the logs: an intact log is left for `open` to replay; the
//!    readable records of a damaged one (`wal::salvage`) go into a new
//!    level-0 table.
//! 5. Writes the new tables, then a new manifest (with an intact manifest:
//!    the same levels, each rewritten table in its original's place; without
//!    one: everything merged into one sorted run at the bottom level).
//! 6. Moves the original of everything it replaced into `lost/` in the
//!    database directory, never deleting it.
//!
//! A database with nothing damaged is left untouched, so a second repair
//! changes nothing.
//!
//! Owns: [`repair`], [`RepairOptions`], [`RepairReport`].
//! Must never: invent an entry or bring one back (it keeps only entries
//! read from checksummed blocks and records, and drops whatever a lost part
//! may have shadowed), delete an original (replaced files are moved to
//! `lost/`), or run beside a writer (it takes the directory lock).

use std::cmp::Ordering;
use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
use std::sync::Arc;

use bytes::Bytes;

use crate::batch::DecodedBatch;
use crate::db::cut_short;
use crate::db::{table_record, InternalIterator, MemSource, MergingIter, LEVELS, LOCK_FILE};
use crate::error::{Error, Result};
use crate::filename::{parse_file_name, table_file_name, wal_file_name, FileKind, MANIFEST_FILE};
use crate::fs::FileSystem;
use crate::inspect::check_is_database;
use crate::key::{
    compare_internal_keys, internal_key, parse_internal_key, user_key_of, SeqNo, ValueKind,
};
use crate::manifest::{
    read_manifest, write_manifest, KeyspaceRecord, KeyspaceSettings, ManifestState, TableRecord,
    DEFAULT_KEYSPACE_ID, DEFAULT_KEYSPACE_NAME,
};
use crate::memtable::Memtable;
use crate::options::Options;
use crate::prefix::PrefixExtractor;
use crate::range_tombstone::{inclusive_upper_bound, key_successor, FragmentedTombstones};
use crate::table::format::FOOTER_LEN;
use crate::table::{
    Footer, ReadContext, ReadCounters, ReadSettings, Salvaged, SalvagedTombstones, Table,
    TableBuilder, TableKeyspace, TableOptions, TableProperties, TableSalvager,
};
use crate::wal::{replay, replay_batches, salvage, LostRecord};

/// The folder (inside the database directory) originals are moved to.
pub const LOST_DIR: &str = "lost";

/// How [`repair`] runs.
#[derive(Debug, Clone, Default)]
pub struct RepairOptions {
    options: Options,
    dry_run: bool,
}

impl RepairOptions {
    /// Default options: the real file system, tables written as
    /// `Options::default()` writes them.
    pub fn new() -> RepairOptions {
        RepairOptions::default()
    }

    /// The database options new tables are written with (block size,
    /// compression, filter bits, table size) and the file system used.
    pub fn options(mut self, options: Options) -> Self {
        self.options = options;
        self
    }

    /// Only find out and report what a repair would do: read everything,
    /// write, move and lock nothing. Default false.
    pub fn dry_run(mut self, dry_run: bool) -> Self {
        self.dry_run = dry_run;
        self
    }
}

/// The manifest as repair found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ManifestFinding {
    /// Read and checked: its tables, levels and logs were the starting point.
    Intact,
    /// Damaged (the reason): every table and log in the directory was used.
    Damaged(String),
    /// Absent: every table and log in the directory was used.
    Missing,
}

/// What became of a table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TableAction {
    /// Sound and shadowing nothing lost: kept as it is.
    Kept,
    /// Replaced by a new table holding what was kept (`None`: nothing was
    /// left to keep); the original moved to `lost/`.
    Rewritten {
        /// The new table's file name.
        into: Option<String>,
    },
    /// Merged, with every other source, into the new tables (a repair
    /// without an intact manifest); the original moved to `lost/`.
    Merged,
}

/// Data repair could not read: a block, the rest of a table, a whole table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LostRange {
    /// The table file it was in.
    pub file: String,
    /// Its file offset, when known.
    pub offset: Option<u64>,
    /// The smallest user key it may have held (`None`: unknown, from the
    /// start of the key space).
    pub first_key: Option<Vec<u8>>,
    /// The largest user key it may have held (`None`: unknown, to the end).
    pub last_key: Option<Vec<u8>>,
    /// The largest sequence number it may have held (`None`: unknown).
    pub max_sequence: Option<u64>,
    /// What was wrong.
    pub reason: String,
}

impl LostRange {
    /// True when `user_key` lies within the range.
    pub fn covers(&self, user_key: &[u8]) -> bool {
        self.first_key.as_deref().is_none_or(|lo| lo <= user_key)
            && self.last_key.as_deref().is_none_or(|hi| user_key <= hi)
    }
}

/// What repair found in, and did with, one table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableReport {
    /// The file name.
    pub file: String,
    /// Its level in the intact manifest.
    pub level: Option<u32>,
    /// What became of it.
    pub action: TableAction,
    /// Entries carried into the repaired database.
    pub entries_kept: u64,
    /// Readable entries left out: older versions a lost range may have
    /// shadowed, or entries outside the range the manifest gives the table.
    pub entries_dropped: u64,
    /// What could not be read.
    pub lost: Vec<LostRange>,
    /// Why it could not be kept as it was (empty when sound).
    pub problems: Vec<String>,
}

/// What became of a log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogAction {
    /// Intact: left for the next open to replay.
    Kept,
    /// Damaged: its readable records went into a new table; the original
    /// moved to `lost/`.
    Replaced,
    /// Its records were replayed with every other source into the new
    /// tables (a repair without an intact manifest); moved to `lost/`.
    Merged,
    /// Every record is already in tables (a log a crash left behind, found
    /// without a manifest): moved to `lost/`, not replayed.
    Obsolete,
}

/// What repair found in, and did with, one log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogReport {
    /// The file name.
    pub file: String,
    /// What became of it.
    pub action: LogAction,
    /// Records (write batches) carried into the repaired database.
    pub records_kept: u64,
    /// Stretches given up (their writes are lost; which keys they held is
    /// not known).
    pub lost: Vec<LostRecord>,
    /// A torn end (offset, reason): what a crash leaves; not a loss of an
    /// acknowledged write unless the log had been closed cleanly.
    pub torn_tail: Option<(u64, String)>,
}

/// What [`repair`] found and did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepairReport {
    /// The database directory.
    pub dir: PathBuf,
    /// Nothing was written, moved or locked.
    pub dry_run: bool,
    /// The manifest as found.
    pub manifest: ManifestFinding,
    /// Every table considered.
    pub tables: Vec<TableReport>,
    /// Every log considered.
    pub logs: Vec<LogReport>,
    /// Tables written (or, in a dry run, that would be).
    pub new_tables: Vec<String>,
    /// Originals moved into `lost/`: (from, to), relative to the directory.
    pub moved: Vec<(String, String)>,
    /// A new manifest was written (or would be).
    pub manifest_written: bool,
    /// What this repair cannot vouch for: losses whose keys are unknown, so
    /// that an older value of one of those keys may now be served where the
    /// lost write had replaced or deleted it.
    pub uncertain: Vec<String>,
}

impl RepairReport {
    /// True when the repair changed (or, in a dry run, would change) anything.
    pub fn changed(&self) -> bool {
        self.manifest_written || !self.new_tables.is_empty() || !self.moved.is_empty()
    }

    /// True when any data could not be carried over.
    pub fn lost_anything(&self) -> bool {
        self.lost_ranges().next().is_some()
            || self.logs.iter().any(|l| !l.lost.is_empty())
            || self.tables.iter().any(|t| t.entries_dropped > 0)
    }

    /// Every lost stretch of table data.
    pub fn lost_ranges(&self) -> impl Iterator<Item = &LostRange> {
        self.tables.iter().flat_map(|t| t.lost.iter())
    }
}

/// A key range whose entries older than `max_seq` may have been shadowed by
/// something lost.
#[derive(Clone)]
struct Zone {
    /// The keyspace of the damaged table: the loss shadows only its keys.
    keyspace: u32,
    lo: Option<Vec<u8>>,
    hi: Option<Vec<u8>>,
    max_seq: SeqNo,
    /// The damaged table, when its filter was read intact: a key its
    /// filter rules out was in none of its blocks (a filter has no false
    /// negatives), so the loss shadowed nothing of that key.
    table: Option<Table>,
}

impl Zone {
    fn shadows(&self, user_key: &[u8], seq: SeqNo) -> bool {
        seq < self.max_seq
            && self.lo.as_deref().is_none_or(|lo| lo <= user_key)
            && self.hi.as_deref().is_none_or(|hi| user_key <= hi)
            && self
                .table
                .as_ref()
                .is_none_or(|t| t.may_contain_key(user_key))
    }
}

/// True when some zone shadows `internal_key`.
fn shadowed(zones: &[Zone], keyspace: u32, internal_key: &[u8]) -> bool {
    match parse_internal_key(internal_key) {
        Ok(parsed) => zones
            .iter()
            .any(|z| z.keyspace == keyspace && z.shadows(parsed.user_key, parsed.seq)),
        Err(_) => true,
    }
}

/// A table to consider.
struct Candidate {
    name: String,
    record: Option<TableRecord>,
}

/// A table after its check.
struct Examined {
    candidate: Candidate,
    /// Why it cannot be kept as it is (empty: sound).
    problems: Vec<String>,
    lost: Vec<LostRange>,
    /// Sequence range and user-key range of its readable data (from its
    /// properties, the manifest, or what was read).
    min_seq: SeqNo,
    user_range: Option<(Vec<u8>, Vec<u8>)>,
    /// Largest sequence number it holds, when known.
    max_seq: Option<SeqNo>,
    /// The table, when its footer, index and filter are intact.
    filtered: Option<Table>,
    /// Its keyspace: the manifest's word, else its properties' (the
    /// default keyspace when neither says).
    keyspace: TableKeyspace,
    /// What its properties record of its keyspace's settings (when they
    /// could be read).
    recorded: Option<KeyspaceSettings>,
    /// Its range tombstones, read from the table or found past its damage
    /// (when they cannot be told, its whole range is a lost range).
    range_tombstones: Option<FragmentedTombstones>,
}

struct Repair<'a> {
    fs: &'a dyn FileSystem,
    dir: &'a Path,
    opts: &'a Options,
    dry_run: bool,
    context: Arc<ReadContext>,
    next_number: u64,
    report: RepairReport,
    /// Files to move into `lost/` once the repair is durable.
    replaced: Vec<String>,
}

/// Rebuilds a working database in `path` from what is readable; see the
/// module docs. Returns what was found, kept and lost. `Error::Locked` when
/// the database is open; `Error::NotADatabase` (nothing touched) when
/// `path` holds neither a siftdb manifest nor any file that opens as a
/// siftdb table or log.
pub fn repair(path: impl AsRef<Path>, options: RepairOptions) -> Result<RepairReport> {
    let dir = path.as_ref();
    let opts = &options.options;
    opts.validate()?;
    let fs = opts.fs.as_ref();
    if !fs.is_dir(dir) {
        return Err(Error::invalid(format!(
            "{} is not a directory",
            dir.display()
        )));
    }
    // Another engine's directory (whose `NNNNNN.sst` names look like
    // siftdb's) is refused before anything — the lock file included — is
    // created, moved or written in it.
    check_is_database(&opts.fs, dir, &fs.list(dir)?)?;
    let _lock = if options.dry_run {
        None
    } else {
        Some(fs.lock(&dir.join(LOCK_FILE))?)
    };
    let names = fs.list(dir)?;
    let numbered: Vec<(FileKind, u64)> = names.iter().filter_map(|n| parse_file_name(n)).collect();
    refuse_other_versions(fs, dir, &numbered)?;
    let (state, finding) = match read_manifest(fs, dir) {
        Ok(Some(state)) => (Some(state), ManifestFinding::Intact),
        Ok(None) => (None, ManifestFinding::Missing),
        Err(e) if e.is_corruption() => (None, ManifestFinding::Damaged(e.to_string())),
        Err(e) => return Err(e),
    };
    if state.is_none() && numbered.is_empty() {
        return Err(Error::invalid(format!(
            "{} holds no siftdb database (no {MANIFEST_FILE}, no table, no log)",
            dir.display()
        )));
    }
    let lost_numbers = fs
        .list(&dir.join(LOST_DIR))
        .unwrap_or_default()
        .iter()
        .filter_map(|n| parse_file_name(n.split(".~").next().unwrap_or(n)))
        .map(|(_, n)| n)
        .max()
        .unwrap_or(0);
    let highest = numbered.iter().map(|&(_, n)| n).max().unwrap_or(0);
    let next_number = state
        .as_ref()
        .map_or(0, |s| s.next_file_number)
        .max(highest.max(lost_numbers) + 1);
    let mut repair = Repair {
        fs,
        dir,
        opts,
        dry_run: options.dry_run,
        // The database's extractor, so that a damaged table whose filter
        // kept prefixes only can still rule keys out (without it, that
        // filter answers "may contain" for every key).
        context: ReadContext::with_prefix_extractor(
            Arc::clone(&opts.fs),
            ReadSettings::tool(),
            ReadCounters::new(),
            opts.prefix_extractor.clone(),
        ),
        next_number,
        report: RepairReport {
            dir: dir.to_path_buf(),
            dry_run: options.dry_run,
            manifest: finding,
            tables: Vec::new(),
            logs: Vec::new(),
            new_tables: Vec::new(),
            moved: Vec::new(),
            manifest_written: false,
            uncertain: Vec::new(),
        },
        replaced: Vec::new(),
    };
    match state {
        Some(state) => repair.with_manifest(&state, &numbered)?,
        None => repair.without_manifest(&numbered)?,
    }
    Ok(repair.report)
}

/// `Error::UnsupportedVersion` for the first table or log in `dir` whose
/// (checksum-sound) footer or header names a format version this build does
/// not read, before anything is changed: a salvage would read none of its
/// entries or records and report them all lost.
fn refuse_other_versions(
    fs: &dyn FileSystem,
    dir: &Path,
    numbered: &[(FileKind, u64)],
) -> Result<()> {
    for &(kind, number) in numbered {
        let refused = match kind {
            FileKind::Table => {
                let name = table_file_name(number);
                let file = fs.open_read(&dir.join(&name))?;
                let len = file.len();
                let tail_len = len.min(FOOTER_LEN as u64);
                let mut tail = vec![0u8; usize::try_from(tail_len).unwrap_or(FOOTER_LEN)];
                file.read_exact_at(&mut tail, len - tail_len)?;
                Footer::decode(&tail, len, &name).err().map(|e| (e, name))
            }
            FileKind::Wal => {
                let name = wal_file_name(number);
                let bytes = fs.read_all(&dir.join(&name))?;
                replay(&bytes, &name).err().map(|e| (e, name))
            }
        };
        if let Some((e @ Error::UnsupportedVersion { .. }, name)) = refused {
            return Err(e.at_path(&dir.join(name)));
        }
    }
    Ok(())
}

/// Keyspace `id` of `state`, with its name (its tables record it).
fn keyspace_of(state: &ManifestState, id: u32) -> TableKeyspace {
    TableKeyspace {
        id,
        name: state
            .keyspaces
            .iter()
            .find(|k| k.id == id)
            .map_or_else(|| recovered_keyspace_name(id), |k| k.name.clone()),
    }
}

/// What a keyspace's settings were, as far as its newest readable table
/// records them (the manifest that stored them is lost): see
/// [`recorded_settings`].
fn settings_from_tables(examined: &[Examined]) -> BTreeMap<u32, KeyspaceSettings> {
    let mut newest: BTreeMap<u32, (SeqNo, &KeyspaceSettings)> = BTreeMap::new();
    for e in examined {
        let (Some(recorded), Some(seq)) = (&e.recorded, e.max_seq) else {
            continue;
        };
        let entry = newest.entry(e.keyspace.id).or_insert((seq, recorded));
        if seq > entry.0 {
            *entry = (seq, recorded);
        }
    }
    newest
        .into_iter()
        .map(|(id, (_, recorded))| (id, recorded.clone()))
        .collect()
}

/// What a table's properties record of the settings it was built with,
/// where it differs from what the database's options `opts` give (a value
/// equal to theirs is taken as inherited, and stays so): a fixed prefix
/// extractor (a custom one is given again at the next open, so none is
/// stored and the keyspace takes the database's until then) with
/// whole-key filtering beside it, and range filter bits. The rest (block
/// size, compression, filter policy, memtable bytes) is not recorded: a
/// rebuilt keyspace takes the database's options for them until
/// `keyspace_with` gives them again.
fn recorded_settings(properties: &TableProperties, opts: &Options) -> KeyspaceSettings {
    let mut settings = KeyspaceSettings::default();
    if let Some(prefix) = &properties.prefix_filter {
        if let Some(fixed) = PrefixExtractor::builtin(&prefix.extractor) {
            if opts.prefix_extractor.as_ref() != Some(&fixed) {
                settings.prefix_len = fixed.fixed_len().and_then(|len| u32::try_from(len).ok());
            }
            if opts.whole_key_filtering != prefix.whole_keys {
                settings.whole_key_filtering = Some(prefix.whole_keys);
            }
        }
    }
    if let Some(range) = &properties.range_filter {
        // Range bits no open would accept (a table written by a bug or by
        // hand) are dropped on their own; the extractor still counts.
        let alone = KeyspaceSettings {
            range_filter_bits_per_key: Some(range.bits_per_key),
            ..KeyspaceSettings::default()
        };
        if opts.range_filter_bits_per_key != range.bits_per_key && alone.check().is_ok() {
            settings.range_filter_bits_per_key = Some(range.bits_per_key);
        }
    }
    // The keyspace must open after its repair: a whole that an open would
    // refuse is not stored.
    if settings.check().is_err() {
        return KeyspaceSettings::default();
    }
    settings
}

/// The name repair gives a keyspace whose name nothing records (only its
/// records in a log survived).
fn recovered_keyspace_name(id: u32) -> String {
    if id == DEFAULT_KEYSPACE_ID {
        DEFAULT_KEYSPACE_NAME.to_string()
    } else {
        format!("recovered-{id}")
    }
}

/// The user key of an internal key.
fn user(internal_key: &[u8]) -> Vec<u8> {
    user_key_of(internal_key).to_vec()
}

impl Repair<'_> {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    fn new_number(&mut self) -> u64 {
        let n = self.next_number;
        self.next_number += 1;
        n
    }

    /// Checks a table: sound, or what of it is lost.
    fn examine(&mut self, candidate: Candidate) -> Result<Examined> {
        let record = candidate.record.clone();
        let record_range = record
            .as_ref()
            .map(|r| (user(&r.smallest), user(&r.largest)));
        let mut examined = Examined {
            problems: Vec::new(),
            lost: Vec::new(),
            min_seq: record.as_ref().map_or(SeqNo(0), |r| r.min_seq),
            user_range: record_range.clone(),
            max_seq: record.as_ref().map(|r| r.max_seq),
            filtered: None,
            recorded: None,
            keyspace: TableKeyspace {
                id: record.as_ref().map_or(DEFAULT_KEYSPACE_ID, |r| r.keyspace),
                name: String::new(),
            },
            range_tombstones: None,
            candidate,
        };
        let name = examined.candidate.name.clone();
        let path = self.path(&name);
        if !self.fs.exists(&path) {
            let reason = "named by the manifest but missing".to_string();
            examined.problems.push(reason.clone());
            examined.lost.push(LostRange {
                file: name,
                offset: None,
                first_key: record_range.as_ref().map(|r| r.0.clone()),
                last_key: record_range.map(|r| r.1),
                max_sequence: examined.max_seq.map(|s| s.0),
                reason,
            });
            return Ok(examined);
        }
        let mut salvager = TableSalvager::open(&self.context, &path)?;
        // The bounds of what cannot be read, when the block itself does not say.
        let (mut lo, mut hi) = (
            record_range.as_ref().map(|r| r.0.clone()),
            record_range.as_ref().map(|r| r.1.clone()),
        );
        match salvager.table() {
            Some(table) => {
                let p = table.properties();
                examined.recorded = Some(recorded_settings(p, self.opts));
                if record.is_none() {
                    if let Some(keyspace) = &p.keyspace {
                        examined.keyspace = keyspace.clone();
                    }
                }
                examined.min_seq = p.min_seq;
                examined.max_seq = Some(examined.max_seq.map_or(p.max_seq, |m| m.max(p.max_seq)));
                lo = lo.or_else(|| Some(user(&p.smallest)));
                hi = hi.or_else(|| Some(user(&p.largest)));
                if examined.user_range.is_none() {
                    examined.user_range = Some((user(&p.smallest), user(&p.largest)));
                }
                if let Some(r) = &record {
                    if r.file_size != table.file_size() {
                        examined.problems.push(format!(
                            "{} bytes, the manifest says {}",
                            table.file_size(),
                            r.file_size
                        ));
                    }
                }
                examined.problems.extend(
                    table
                        .verify()
                        .into_iter()
                        .map(|p| format!("{} block at offset {}: {}", p.block, p.offset, p.detail)),
                );
                examined.range_tombstones = table.range_tombstones().map(|l| (**l).clone());
                if examined.problems.is_empty() {
                    return Ok(examined);
                }
                if table.filter_view().is_some() {
                    examined.filtered = Some(table.clone());
                }
            }
            None => examined.problems.push(format!(
                "cannot be opened: {}",
                salvager.open_error().unwrap_or("unknown")
            )),
        }
        // Damaged: walk it to learn what is lost and the range of what is not.
        let mut read_range: Option<(Vec<u8>, Vec<u8>)> = None;
        while let Some(step) = salvager.next_block() {
            match step {
                Salvaged::Block(block) => {
                    if let (Some((first, _)), Some((last, _))) =
                        (block.entries.first(), block.entries.last())
                    {
                        let (first, last) = (user(first), user(last));
                        read_range = Some(match read_range.take() {
                            Some((a, _)) => (a, last),
                            None => (first, last),
                        });
                    }
                }
                Salvaged::Lost(lost) => examined.lost.push(LostRange {
                    file: name.clone(),
                    offset: Some(lost.offset),
                    first_key: lost.after.as_deref().map(user).or_else(|| lo.clone()),
                    last_key: lost.through.as_deref().map(user).or_else(|| hi.clone()),
                    max_sequence: examined.max_seq.map(|s| s.0),
                    reason: lost.reason,
                }),
            }
        }
        if examined.user_range.is_none() {
            examined.user_range = read_range;
        }
        match salvager.range_tombstones() {
            SalvagedTombstones::None => {}
            SalvagedTombstones::Found(list) => examined.range_tombstones = Some(list),
            // A range tombstone lost may have deleted older keys anywhere
            // in the table's range: they are treated as a lost range's.
            SalvagedTombstones::Unknown(why) => examined.lost.push(LostRange {
                file: name,
                offset: None,
                first_key: lo,
                last_key: hi,
                max_sequence: examined.max_seq.map(|s| s.0),
                reason: format!("its range tombstones cannot be read: {why}"),
            }),
        }
        Ok(examined)
    }

    /// The zones of every lost range whose sequence numbers are known; the
    /// others are reported as uncertain.
    fn zones(&mut self, examined: &[Examined]) -> Vec<Zone> {
        let mut zones = Vec::new();
        let lost = examined.iter().flat_map(|e| {
            e.lost
                .iter()
                .map(move |range| (range, &e.filtered, e.keyspace.id))
        });
        for (range, filtered, keyspace) in lost {
            match range.max_sequence {
                Some(max) => zones.push(Zone {
                    keyspace,
                    lo: range.first_key.clone(),
                    hi: range.last_key.clone(),
                    max_seq: SeqNo(max),
                    table: filtered.clone(),
                }),
                None => self.report.uncertain.push(format!(
                    "{}: data lost at {} whose keys and sequence numbers are unknown (no \
                     manifest names the table and its properties are unreadable): a key it \
                     deleted or overwrote may show an older value",
                    range.file,
                    range
                        .offset
                        .map_or("an unknown offset".into(), |o| format!("offset {o}"))
                )),
            }
        }
        zones
    }

    /// Records that `name` is replaced: its original goes to `lost/`.
    fn replace(&mut self, name: &str) {
        self.replaced.push(name.to_string());
    }

    /// Starts a new table file of `keyspace` (none in a dry run).
    fn new_table(&mut self, keyspace: &TableKeyspace) -> Result<NewTable> {
        let number = self.new_number();
        let builder = if self.dry_run {
            None
        } else {
            let options = TableOptions {
                keyspace: (keyspace.id != DEFAULT_KEYSPACE_ID).then(|| keyspace.clone()),
                ..TableOptions::from(self.opts)
            };
            Some(TableBuilder::create(
                self.fs,
                &self.path(&table_file_name(number)),
                &options,
            )?)
        };
        Ok(NewTable {
            number,
            keyspace: keyspace.id,
            builder,
            entries: 0,
            range: None,
            range_tombstones: None,
        })
    }

    /// Finishes `table` at `level`: its manifest record, or `None` when it
    /// got no entry (then no file is left).
    fn finish(&mut self, table: NewTable, level: u32) -> Result<Option<TableRecord>> {
        let name = table_file_name(table.number);
        let path = self.path(&name);
        let range = table.dry_run_range();
        let record = match (table.builder, range) {
            (_, None) => None,
            (None, Some((smallest, largest, min_seq, max_seq))) => Some(TableRecord {
                keyspace: table.keyspace,
                level,
                file_number: table.number,
                file_size: 0,
                entries: table.entries,
                smallest,
                largest,
                min_seq,
                max_seq,
            }),
            (Some(builder), Some(_)) => {
                let info = builder.finish().inspect_err(|_| {
                    let _ = self.fs.remove(&path);
                })?;
                Some(TableRecord {
                    keyspace: table.keyspace,
                    ..table_record(table.number, level, &info)
                })
            }
        };
        if record.is_some() {
            self.report.new_tables.push(name);
        } else if self.fs.exists(&path) {
            let _ = self.fs.remove(&path);
        }
        Ok(record)
    }

    /// The readable entries of table `name`, block by block, into `visit`.
    fn each_entry(
        &self,
        name: &str,
        mut visit: impl FnMut(Bytes, Bytes) -> Result<()>,
    ) -> Result<()> {
        let path = self.path(name);
        if !self.fs.exists(&path) {
            return Ok(());
        }
        let mut salvager = TableSalvager::open(&self.context, &path)?;
        while let Some(step) = salvager.next_block() {
            if let Salvaged::Block(block) = step {
                for (key, value) in block.entries {
                    visit(key, value)?;
                }
            }
        }
        Ok(())
    }

    /// With an intact manifest: each table kept, or rewritten in its place.
    fn with_manifest(&mut self, state: &ManifestState, numbered: &[(FileKind, u64)]) -> Result<()> {
        let mut examined = Vec::with_capacity(state.tables.len());
        for record in &state.tables {
            let candidate = Candidate {
                name: table_file_name(record.file_number),
                record: Some(record.clone()),
            };
            examined.push(self.examine(candidate)?);
        }
        let zones = self.zones(&examined);
        let mut tables = Vec::with_capacity(examined.len());
        let mut changed = false;
        let mut last_sequence = state.last_sequence;
        for e in examined {
            let Some(record) = e.candidate.record.clone() else {
                continue;
            };
            let (smallest, largest) = (record.smallest.clone(), record.largest.clone());
            let in_record = |key: &[u8]| {
                compare_internal_keys(&smallest, key) != Ordering::Greater
                    && compare_internal_keys(key, &largest) != Ordering::Greater
            };
            let keep = |key: &[u8]| in_record(key) && !shadowed(&zones, record.keyspace, key);
            let may_be_shadowed = e.user_range.as_ref().is_none_or(|(lo, hi)| {
                zones.iter().any(|z| {
                    z.keyspace == record.keyspace
                        && e.min_seq < z.max_seq
                        && z.lo.as_deref().is_none_or(|zlo| zlo <= hi.as_slice())
                        && z.hi.as_deref().is_none_or(|zhi| lo.as_slice() <= zhi)
                })
            });
            let mut report = TableReport {
                file: e.candidate.name.clone(),
                level: Some(record.level),
                action: TableAction::Kept,
                entries_kept: record.entries,
                entries_dropped: 0,
                lost: e.lost,
                problems: e.problems,
            };
            if report.problems.is_empty() && may_be_shadowed {
                let mut dropped = 0;
                self.each_entry(&e.candidate.name, |key, _| {
                    dropped += u64::from(!keep(&key));
                    Ok(())
                })?;
                if dropped > 0 {
                    report.problems.push(format!(
                        "{dropped} entries are older versions of keys a lost range may hold \
                         newer versions of"
                    ));
                }
            }
            if report.problems.is_empty() {
                tables.push(record);
                self.report.tables.push(report);
                continue;
            }
            changed = true;
            let keyspace = keyspace_of(state, record.keyspace);
            let mut out = self.new_table(&keyspace)?;
            if let Some(list) = &e.range_tombstones {
                // Within the record's range, which the level's other
                // tables do not meet.
                let (lo, hi) = (user(&record.smallest), user(&record.largest));
                let end = key_successor(&hi);
                out.set_range_tombstones(list.clipped(&lo, end.as_deref()), Some(hi));
            }
            let (mut kept, mut dropped) = (0u64, 0u64);
            let written = self.each_entry(&e.candidate.name, |key, value| {
                if keep(&key) {
                    kept += 1;
                    out.add(&key, &value)
                } else {
                    dropped += 1;
                    Ok(())
                }
            });
            if let Err(err) = written {
                self.abandon(out);
                return Err(err);
            }
            let rewritten = self.finish(out, record.level)?;
            report.entries_kept = kept;
            report.entries_dropped = dropped;
            report.action = TableAction::Rewritten {
                into: rewritten.as_ref().map(|r| table_file_name(r.file_number)),
            };
            if let Some(r) = rewritten {
                last_sequence = last_sequence.max(r.max_seq);
                tables.push(r);
            }
            if self.fs.exists(&self.path(&e.candidate.name)) {
                self.replace(&e.candidate.name);
            }
            self.report.tables.push(report);
        }

        // Logs the manifest does not cover: intact ones stay for `open`.
        let mut logs: Vec<u64> = numbered
            .iter()
            .filter(|&&(kind, n)| kind == FileKind::Wal && n >= state.log_number)
            .map(|&(_, n)| n)
            .collect();
        logs.sort_unstable();
        // Records of a dropped keyspace, or of a log its tables already
        // hold, are not brought back.
        let keyspaces = state.keyspaces.clone();
        let mut recovered = Recovered {
            keep: Some(Box::new(move |id, log, _| {
                keyspaces.iter().any(|k| k.id == id && log >= k.log_number)
            })),
            ..Recovered::default()
        };
        let mut intact = Vec::new();
        for &number in &logs {
            let name = wal_file_name(number);
            let bytes = self.fs.read_all(&self.path(&name))?;
            // The log whose clean close the manifest recorded, cut short
            // since: its records up to the cut are salvaged, the rest is
            // a loss (not a crash's torn tail).
            let cut = state
                .closed_log
                .filter(|c| c.number == number)
                .and_then(|c| {
                    let log = replay(&bytes, &name).ok()?;
                    cut_short(c, &bytes, &log).map(|(offset, what)| LostRecord {
                        offset,
                        len: c.len.saturating_sub(offset),
                        reason: what,
                    })
                });
            if let Some(lost) = cut {
                changed = true;
                let max = self.salvage_log(number, &bytes, LogAction::Replaced, &mut recovered);
                last_sequence = last_sequence.max(max);
                self.report.uncertain.push(format!(
                    "{name}: {}; which keys those writes held is unknown, so a key they deleted \
                     or overwrote may show its older value",
                    lost.reason
                ));
                if let Some(log) = self.report.logs.last_mut() {
                    log.lost.push(lost);
                }
                self.replace(&name);
                continue;
            }
            let sound = replay_batches(&bytes, &name)
                .ok()
                .filter(|r| r.log_number.is_none_or(|n| n == number))
                .map(|r| {
                    (
                        r.batches.len() as u64,
                        r.torn_tail.map(|t| (t.offset, t.reason)),
                    )
                });
            match sound {
                Some((records, torn_tail)) => intact.push((number, records, torn_tail)),
                None => {
                    changed = true;
                    let max = self.salvage_log(number, &bytes, LogAction::Replaced, &mut recovered);
                    last_sequence = last_sequence.max(max);
                    self.replace(&name);
                }
            }
        }
        // A torn tail is allowed only in the newest log that stays.
        let newest = intact.last().map(|&(n, _, _)| n);
        for (number, records, torn_tail) in intact {
            let name = wal_file_name(number);
            if torn_tail.is_some() && Some(number) != newest {
                changed = true;
                let bytes = self.fs.read_all(&self.path(&name))?;
                let max = self.salvage_log(number, &bytes, LogAction::Replaced, &mut recovered);
                last_sequence = last_sequence.max(max);
                self.replace(&name);
                continue;
            }
            self.report.logs.push(LogReport {
                file: name,
                action: LogAction::Kept,
                records_kept: records,
                lost: Vec::new(),
                torn_tail,
            });
        }
        for (id, memtable) in std::mem::take(&mut recovered.mems) {
            let mut out = self.new_table(&keyspace_of(state, id))?;
            if let Some(list) = memtable.range_tombstones() {
                out.set_range_tombstones((*list).clone(), None);
            }
            for (key, value) in memtable.iter() {
                if let Err(err) = out.add(key, value) {
                    self.abandon(out);
                    return Err(err);
                }
            }
            if let Some(record) = self.finish(out, 0)? {
                last_sequence = last_sequence.max(record.max_seq);
                tables.push(record);
            }
        }
        if !changed {
            return Ok(());
        }
        // The clean close stays recorded while its log stays as it was.
        let kept = |number: u64| {
            self.report
                .logs
                .iter()
                .any(|l| l.action == LogAction::Kept && l.file == wal_file_name(number))
        };
        let new_state = ManifestState {
            next_file_number: self.next_number,
            last_sequence,
            log_number: state.log_number,
            closed_log: state.closed_log.filter(|c| kept(c.number)),
            next_keyspace_id: state.next_keyspace_id,
            keyspaces: state.keyspaces.clone(),
            tables,
        };
        // Originals are copied into `lost/` before the manifest that stops
        // naming them, and removed only after it is durable: a crash at any
        // point leaves each either named or safe in `lost/`.
        let copies = self.copy_replaced_to_lost()?;
        self.write_manifest(&new_state)?;
        for (name, _) in copies {
            if !self.dry_run {
                let _ = self.fs.remove(&self.path(&name));
            }
        }
        if !self.dry_run {
            let _ = self.fs.sync_dir(self.dir);
        }
        Ok(())
    }

    /// Without an intact manifest: every readable entry of every table and
    /// log, merged into one sorted run at the bottom level.
    fn without_manifest(&mut self, numbered: &[(FileKind, u64)]) -> Result<()> {
        let mut examined = Vec::new();
        for &(kind, number) in numbered {
            if kind == FileKind::Table {
                let candidate = Candidate {
                    name: table_file_name(number),
                    record: None,
                };
                examined.push(self.examine(candidate)?);
            }
        }
        let zones = self.zones(&examined);
        // Per keyspace, the newest sequence number in its tables: its
        // records at or below it in a log were flushed before the manifest
        // was lost (a keyspace's memtables are flushed oldest first).
        let mut in_tables: BTreeMap<u32, SeqNo> = BTreeMap::new();
        for e in &examined {
            if let Some(max) = e.max_seq {
                let newest = in_tables.entry(e.keyspace.id).or_insert(max);
                *newest = (*newest).max(max);
            }
        }
        let flushed = in_tables.clone();
        let keep = move |id: u32, _log: u64, seq: SeqNo| flushed.get(&id).is_none_or(|&t| seq > t);
        let mut logs: Vec<u64> = numbered
            .iter()
            .filter(|&&(kind, _)| kind == FileKind::Wal)
            .map(|&(_, n)| n)
            .collect();
        logs.sort_unstable();
        let mut last_sequence = in_tables.values().copied().max().unwrap_or(SeqNo(0));
        let mut recovered = Recovered::default();
        for number in logs {
            let name = wal_file_name(number);
            let bytes = self.fs.read_all(&self.path(&name))?;
            let log = salvage(&bytes);
            let unflushed = log.batches.iter().any(|(_, b)| {
                b.ops_with_seq()
                    .any(|(seq, op)| keep(op.keyspace, number, seq))
            });
            let obsolete = !log.batches.is_empty() && log.lost.is_empty() && !unflushed;
            if obsolete {
                self.report.logs.push(LogReport {
                    file: name.clone(),
                    action: LogAction::Obsolete,
                    records_kept: 0,
                    lost: Vec::new(),
                    torn_tail: None,
                });
            } else {
                recovered.keep = Some(Box::new(keep.clone()));
                let max = self.salvage_log(number, &bytes, LogAction::Merged, &mut recovered);
                last_sequence = last_sequence.max(max);
            }
            self.replace(&name);
        }

        // Every keyspace found: in a table's properties, or only in a log.
        let mut keyspaces: BTreeMap<u32, String> = BTreeMap::new();
        keyspaces.insert(DEFAULT_KEYSPACE_ID, DEFAULT_KEYSPACE_NAME.to_string());
        for e in &examined {
            if e.keyspace.id != DEFAULT_KEYSPACE_ID {
                keyspaces
                    .entry(e.keyspace.id)
                    .or_insert_with(|| e.keyspace.name.clone());
            }
        }
        for &id in recovered.mems.keys() {
            keyspaces
                .entry(id)
                .or_insert_with(|| recovered_keyspace_name(id));
        }
        // Two keyspaces under one name (one recreated after a drop whose
        // tables survived): the older keeps the name.
        let mut names_taken = std::collections::HashSet::new();
        for (id, name) in keyspaces.iter_mut() {
            if !crate::manifest::valid_keyspace_name(name) || !names_taken.insert(name.clone()) {
                *name = recovered_keyspace_name(*id);
                names_taken.insert(name.clone());
            }
        }

        let mut settings = settings_from_tables(&examined);
        let runs = disjoint_runs(&examined);
        let mut counts = vec![(0u64, 0u64); examined.len()];
        let mut records = Vec::new();
        let mut out = None;
        let merged = (|| -> Result<()> {
            for (&id, name) in &keyspaces {
                let keyspace = TableKeyspace {
                    id,
                    name: name.clone(),
                };
                let memtable = recovered.mems.remove(&id).unwrap_or_default();
                self.merge_keyspace(
                    &keyspace,
                    &examined,
                    &runs,
                    memtable,
                    &zones,
                    &mut counts,
                    &mut records,
                    &mut out,
                )?;
            }
            Ok(())
        })();
        if let Err(err) = merged {
            if let Some(out) = out {
                self.abandon(out);
            }
            for r in &records {
                let _ = self.fs.remove(&self.path(&table_file_name(r.file_number)));
            }
            return Err(err);
        }
        for (e, (kept, dropped)) in examined.into_iter().zip(counts) {
            self.report.tables.push(TableReport {
                file: e.candidate.name.clone(),
                level: None,
                action: TableAction::Merged,
                entries_kept: kept,
                entries_dropped: dropped,
                lost: e.lost,
                problems: e.problems,
            });
            self.replace(&e.candidate.name);
        }
        if self.fs.exists(&self.path(MANIFEST_FILE)) {
            self.replace(MANIFEST_FILE);
        }
        for r in &records {
            last_sequence = last_sequence.max(r.max_seq);
        }
        let log_number = self.new_number();
        let new_state = ManifestState {
            next_file_number: self.next_number,
            last_sequence,
            log_number,
            closed_log: None,
            next_keyspace_id: keyspaces.keys().max().map_or(1, |&id| id + 1),
            keyspaces: keyspaces
                .into_iter()
                .map(|(id, name)| KeyspaceRecord {
                    id,
                    name,
                    log_number,
                    settings: settings.remove(&id).unwrap_or_default(),
                })
                .collect(),
            tables: records,
        };
        // The new tables hold everything read; the originals go before the
        // manifest is written, so a crash in between leaves a directory
        // whose next repair finds the same data in the new tables.
        if !self.dry_run {
            self.fs.sync_dir(self.dir)?;
        }
        self.move_replaced_to_lost()?;
        self.write_manifest(&new_state)
    }

    /// One merge of every source of `keyspace` (the database's merging
    /// iterator), newest version of each key only, into tables of the
    /// bottom level appended to `records`. Its tables whose key ranges do
    /// not meet are read one after another as one source (as the engine
    /// reads a sorted level): the merge compares one key per run, not one
    /// per table — a database's deeper levels make few runs. `out` holds
    /// the table being written, for the caller to abandon on an error.
    #[expect(clippy::too_many_arguments, reason = "one merge's inputs and outputs")]
    fn merge_keyspace(
        &mut self,
        keyspace: &TableKeyspace,
        examined: &[Examined],
        runs: &[Vec<usize>],
        recovered: Memtable,
        zones: &[Zone],
        counts: &mut [(u64, u64)],
        records: &mut Vec<TableRecord>,
        out: &mut Option<NewTable>,
    ) -> Result<()> {
        let mut sources: Vec<Box<dyn InternalIterator>> = Vec::new();
        // Per run, the examined table its current entry comes from.
        let mut run_tables = Vec::new();
        for run in runs {
            let mut tables = VecDeque::with_capacity(run.len());
            for &at in run {
                if let Some(e) = examined.get(at).filter(|e| e.keyspace.id == keyspace.id) {
                    let path = self.path(&e.candidate.name);
                    if self.fs.exists(&path) {
                        tables.push_back((at, TableSalvager::open(&self.context, &path)?));
                    }
                }
            }
            if tables.is_empty() {
                continue;
            }
            let current = Arc::new(AtomicUsize::new(usize::MAX));
            run_tables.push(Arc::clone(&current));
            sources.push(Box::new(SalvagedRun::new(tables, current)));
        }
        // Every range tombstone read deletes the older entries it covers;
        // in the one sorted run written, nothing is left for it to delete.
        let lists: Vec<FragmentedTombstones> = examined
            .iter()
            .filter(|e| e.keyspace.id == keyspace.id)
            .filter_map(|e| e.range_tombstones.clone())
            .chain(recovered.range_tombstones().map(|l| (*l).clone()))
            .collect();
        let range_tombstones = FragmentedTombstones::merged(&lists);
        sources.push(Box::new(MemSource::new(Arc::new(recovered))));
        let mut merge = MergingIter::new(sources);
        merge.seek_to_first();
        let target = self.opts.table_target_bytes;
        let mut previous_user: Option<Vec<u8>> = None;
        while merge.valid() {
            let (key, value) = (merge.key().to_vec(), merge.value());
            let source = merge
                .current_source()
                .and_then(|s| run_tables.get(s))
                .map(|table| table.load(AtomicOrdering::Relaxed));
            merge.next();
            let user_key = user_key_of(&key);
            let newer_seen = previous_user.as_deref() == Some(user_key);
            let counted = source.and_then(|s| counts.get_mut(s));
            if newer_seen {
                continue;
            }
            previous_user = Some(user_key.to_vec());
            if shadowed(zones, keyspace.id, &key) {
                if let Some(c) = counted {
                    c.1 += 1;
                }
                continue;
            }
            if let Some(c) = counted {
                c.0 += 1;
            }
            // The only level: a tombstone shadows nothing below it.
            let parsed = parse_internal_key(&key).ok();
            let tombstone = parsed.is_some_and(|p| p.kind == ValueKind::Delete);
            let range_deleted = parsed.is_some_and(|p| {
                range_tombstones
                    .covering_seq(p.user_key, SeqNo::MAX)
                    .is_some_and(|deleted_at| deleted_at > p.seq)
            });
            if tombstone || range_deleted {
                continue;
            }
            let table = match out {
                Some(table) => table,
                None => out.insert(self.new_table(keyspace)?),
            };
            table.add(&key, &value)?;
            if table.estimated_size() >= target {
                if let Some(full) = out.take() {
                    records.extend(self.finish(full, bottom_level())?);
                }
            }
        }
        merge.status()?;
        if let Some(last) = out.take() {
            records.extend(self.finish(last, bottom_level())?);
        }
        Ok(())
    }

    /// Reads what can be read of a log into `recovered`; returns the
    /// largest sequence number replayed.
    fn salvage_log(
        &mut self,
        number: u64,
        bytes: &[u8],
        action: LogAction,
        recovered: &mut Recovered,
    ) -> SeqNo {
        let name = wal_file_name(number);
        let log = salvage(bytes);
        let mut max = SeqNo(0);
        for (_, batch) in &log.batches {
            max = max.max(recovered.apply(batch, number));
        }
        if !log.lost.is_empty() {
            self.report.uncertain.push(format!(
                "{name}: {} damaged stretch(es) of records skipped; which keys they wrote is \
                 unknown, so a key they deleted or overwrote may show its older value",
                log.lost.len()
            ));
        }
        self.report.logs.push(LogReport {
            file: name.to_string(),
            action,
            records_kept: log.batches.len() as u64,
            lost: log.lost,
            torn_tail: log.torn_tail.map(|t| (t.offset, t.reason)),
        });
        max
    }

    fn abandon(&self, table: NewTable) {
        drop(table.builder);
        if !self.dry_run {
            let _ = self.fs.remove(&self.path(&table_file_name(table.number)));
        }
    }

    fn write_manifest(&mut self, state: &ManifestState) -> Result<()> {
        self.report.manifest_written = true;
        if self.dry_run {
            return state
                .check()
                .map_err(|reason| Error::invalid(format!("the repaired manifest: {reason}")));
        }
        write_manifest(self.fs, self.dir, state)
    }

    /// A name in `lost/` no earlier repair used for `name`.
    fn lost_name(&self, name: &str, taken: &[String]) -> String {
        let existing = self.fs.list(&self.dir.join(LOST_DIR)).unwrap_or_default();
        let free = |candidate: &String| !existing.contains(candidate) && !taken.contains(candidate);
        std::iter::once(name.to_string())
            .chain((1..).map(|i| format!("{name}.~{i}")))
            .find(free)
            .unwrap_or_else(|| name.to_string())
    }

    /// Copies every replaced original into `lost/` (synced); returns
    /// (name, name in `lost/`).
    fn copy_replaced_to_lost(&mut self) -> Result<Vec<(String, String)>> {
        let lost = self.dir.join(LOST_DIR);
        if !self.dry_run && !self.replaced.is_empty() {
            self.fs.create_dir_all(&lost)?;
        }
        let mut copies = Vec::new();
        let mut taken = Vec::new();
        for name in std::mem::take(&mut self.replaced) {
            let target = self.lost_name(&name, &taken);
            if !self.dry_run {
                let bytes = self.fs.read_all(&self.path(&name))?;
                let mut file = self.fs.create(&lost.join(&target))?;
                file.append(&bytes)?;
                file.sync()?;
            }
            taken.push(target.clone());
            self.report
                .moved
                .push((name.clone(), format!("{LOST_DIR}/{target}")));
            copies.push((name, target));
        }
        if !self.dry_run && !copies.is_empty() {
            self.fs.sync_dir(&lost)?;
        }
        Ok(copies)
    }

    /// Renames every replaced original into `lost/`.
    fn move_replaced_to_lost(&mut self) -> Result<()> {
        let lost = self.dir.join(LOST_DIR);
        if !self.dry_run && !self.replaced.is_empty() {
            self.fs.create_dir_all(&lost)?;
        }
        let mut taken = Vec::new();
        for name in std::mem::take(&mut self.replaced) {
            let target = self.lost_name(&name, &taken);
            if !self.dry_run {
                self.fs.rename(&self.path(&name), &lost.join(&target))?;
            }
            taken.push(target.clone());
            self.report
                .moved
                .push((name, format!("{LOST_DIR}/{target}")));
        }
        if !self.dry_run && !taken.is_empty() {
            self.fs.sync_dir(&lost)?;
            self.fs.sync_dir(self.dir)?;
        }
        Ok(())
    }
}

/// The level a repair without a manifest puts its one sorted run at.
fn bottom_level() -> u32 {
    u32::try_from(LEVELS - 1).unwrap_or(1)
}

/// What logs hold that tables do not, per keyspace id.
#[derive(Default)]
struct Recovered {
    mems: BTreeMap<u32, Memtable>,
    /// Which operations to keep, by (keyspace id, log number, sequence
    /// number); `None`: all. With a manifest: not those of a dropped
    /// keyspace or of a log whose records of their keyspace its tables
    /// hold; without: not those at or below the newest sequence number in
    /// their keyspace's tables (each keyspace flushes its memtables oldest
    /// first, so those are in its tables, or were compacted away).
    keep: Option<KeepOp>,
}

/// Whether to keep an operation of (keyspace id, log number, sequence number).
type KeepOp = Box<dyn Fn(u32, u64, SeqNo) -> bool>;

impl Recovered {
    /// Inserts every operation of `batch` from log `log` (of the keyspaces
    /// kept); returns its last sequence number.
    fn apply(&mut self, batch: &DecodedBatch<'_>, log: u64) -> SeqNo {
        let mut seq = batch.first_seq;
        for op in &batch.ops {
            if self
                .keep
                .as_ref()
                .is_none_or(|keep| keep(op.keyspace, log, seq))
            {
                // Refused only for a (key, sequence) pair already inserted,
                // whose first value stays, or a key or value over 4 GiB,
                // which no record whose checksum held can carry: repair
                // keeps what it can read.
                let memtable = self.mems.entry(op.keyspace).or_default();
                let _ = memtable.apply(op, seq);
            }
            seq = seq.next();
        }
        batch.last_seq().unwrap_or(SeqNo(0))
    }
}

/// A table being written by repair (or counted, in a dry run).
struct NewTable {
    number: u64,
    keyspace: u32,
    builder: Option<TableBuilder>,
    entries: u64,
    /// (smallest, largest, min seq, max seq) of what was added.
    range: Option<(Vec<u8>, Vec<u8>, SeqNo, SeqNo)>,
    /// Range tombstones it carries (see `TableBuilder::set_range_tombstones`).
    range_tombstones: Option<(FragmentedTombstones, Option<Vec<u8>>)>,
}

impl NewTable {
    fn set_range_tombstones(&mut self, list: FragmentedTombstones, largest_limit: Option<Vec<u8>>) {
        if list.is_empty() {
            return;
        }
        if let Some(builder) = &mut self.builder {
            builder.set_range_tombstones(list.clone(), largest_limit.clone());
        }
        self.range_tombstones = Some((list, largest_limit));
    }

    /// What a dry run's record says of the table: its entries' range
    /// widened to its range tombstones', as the builder would.
    fn dry_run_range(&self) -> Option<(Vec<u8>, Vec<u8>, SeqNo, SeqNo)> {
        let Some((list, limit)) = &self.range_tombstones else {
            return self.range.clone();
        };
        let (low, high) = list.seq_range()?;
        let start = list.smallest_key()?;
        let mut upper = inclusive_upper_bound(list.end()?);
        if let Some(limit) = limit.as_ref().filter(|l| upper > **l) {
            upper.clone_from(limit);
        }
        let (smallest, largest, min, max) = self.range.clone().unwrap_or_else(|| {
            let first = internal_key(start, high, ValueKind::Delete);
            (first.clone(), first, high, high)
        });
        let smallest = if start < user_key_of(&smallest) {
            internal_key(start, high, ValueKind::SEEK)
        } else {
            smallest
        };
        let largest = if upper.as_slice() > user_key_of(&largest) {
            internal_key(&upper, SeqNo(0), ValueKind::Delete)
        } else {
            largest
        };
        Some((smallest, largest, min.min(low), max.max(high)))
    }

    fn add(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        if let Some(builder) = &mut self.builder {
            builder.add(key, value)?;
        }
        self.entries += 1;
        let seq = parse_internal_key(key).map_or(SeqNo(0), |p| p.seq);
        self.range = Some(match self.range.take() {
            None => (key.to_vec(), key.to_vec(), seq, seq),
            Some((smallest, _, min, max)) => (smallest, key.to_vec(), min.min(seq), max.max(seq)),
        });
        Ok(())
    }

    fn estimated_size(&self) -> u64 {
        self.builder.as_ref().map_or(
            self.entries.saturating_mul(64),
            TableBuilder::estimated_file_size,
        )
    }
}

/// The examined tables (positions in `examined`) grouped into runs whose
/// user-key ranges do not meet, each run in key order: every table goes
/// to the first run whose last table ends below its first key (the fewest
/// runs for intervals taken by their start). A table whose range is not
/// known is a run of its own.
fn disjoint_runs(examined: &[Examined]) -> Vec<Vec<usize>> {
    // (position, first user key, last user key)
    let mut ranged: Vec<(usize, &[u8], &[u8])> = Vec::new();
    let mut runs: Vec<Vec<usize>> = Vec::new();
    for (at, e) in examined.iter().enumerate() {
        match &e.user_range {
            Some((lo, hi)) => ranged.push((at, lo, hi)),
            None => runs.push(vec![at]),
        }
    }
    ranged.sort_by(|a, b| a.1.cmp(b.1));
    // Per run: the largest user key of its last table.
    let mut ends: Vec<(usize, &[u8])> = Vec::new();
    for (at, lo, hi) in ranged {
        match ends.iter_mut().find(|(_, end)| *end < lo) {
            Some((run, end)) => {
                if let Some(tables) = runs.get_mut(*run) {
                    tables.push(at);
                }
                *end = hi;
            }
            None => {
                ends.push((runs.len(), hi));
                runs.push(vec![at]);
            }
        }
    }
    runs
}

/// Tables read block by block by their salvagers, one after another, as
/// one source of the database's merging iterator: the entries of their
/// readable blocks, in order (the tables' key ranges do not meet); lost
/// stretches are skipped (`examine` reports them). `current` tells which
/// table (its position in `examined`) the current entry comes from. It
/// reads forward only, as a repair's merge does: `seek_to_first` positions
/// at the first entry only before any step, and `seek` moves forward to
/// the target, never back.
struct SalvagedRun {
    tables: VecDeque<(usize, TableSalvager)>,
    buffered: VecDeque<(Bytes, Bytes)>,
    entry: Option<(Bytes, Bytes)>,
    current: Arc<AtomicUsize>,
    started: bool,
    /// A backward step was asked for (never, by a repair).
    went_backward: bool,
}

impl SalvagedRun {
    fn backward(&mut self) {
        self.went_backward = true;
        self.entry = None;
        self.buffered.clear();
        self.tables.clear();
    }

    fn new(tables: VecDeque<(usize, TableSalvager)>, current: Arc<AtomicUsize>) -> SalvagedRun {
        SalvagedRun {
            tables,
            buffered: VecDeque::new(),
            entry: None,
            current,
            started: false,
            went_backward: false,
        }
    }

    fn advance(&mut self) {
        self.started = true;
        self.entry = loop {
            if let Some(entry) = self.buffered.pop_front() {
                break Some(entry);
            }
            let Some((at, salvager)) = self.tables.front_mut() else {
                break None;
            };
            self.current.store(*at, AtomicOrdering::Relaxed);
            match salvager.next_block() {
                Some(Salvaged::Block(block)) => self.buffered.extend(block.entries),
                Some(Salvaged::Lost(_)) => {}
                None => {
                    self.tables.pop_front();
                }
            }
        };
    }
}

impl InternalIterator for SalvagedRun {
    fn seek_to_first(&mut self) {
        if !self.started {
            self.advance();
        }
    }

    fn seek(&mut self, target: &[u8]) {
        self.seek_to_first();
        while self
            .entry
            .as_ref()
            .is_some_and(|(key, _)| compare_internal_keys(key, target) == Ordering::Less)
        {
            self.advance();
        }
    }

    fn valid(&self) -> bool {
        self.entry.is_some()
    }

    fn key(&self) -> &[u8] {
        self.entry.as_ref().map_or(&[], |(key, _)| key)
    }

    fn value(&self) -> Bytes {
        self.entry
            .as_ref()
            .map_or_else(Bytes::new, |(_, value)| value.clone())
    }

    fn next(&mut self) {
        self.advance();
    }

    // A repair's merge only goes forward: the backward steps end the run
    // (and `status` says why) rather than pretend to move.
    fn seek_to_last(&mut self) {
        self.backward();
    }

    fn seek_for_prev(&mut self, _target: &[u8]) {
        self.backward();
    }

    fn prev(&mut self) {
        self.backward();
    }

    fn status(&self) -> Result<()> {
        if self.went_backward {
            return Err(Error::invalid("salvaged tables are read forward only"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::properties::{PrefixFilterInfo, RangeFilterInfo};

    /// A repair stores what a table records of its keyspace's settings: a
    /// fixed extractor with its whole-key choice and range filter bits;
    /// nothing for a custom extractor, nothing the database's options give
    /// already, and nothing at all when a value would not pass an open's
    /// checks.
    #[test]
    fn recorded_settings_keep_what_an_open_accepts() {
        let defaults = Options::default();
        let built_for = |extractor: &str, range_bits: f64, opts: &Options| {
            let mut properties = TableProperties::placeholder();
            properties.prefix_filter = Some(PrefixFilterInfo {
                extractor: extractor.to_owned(),
                whole_keys: false,
                prefixes: 1,
            });
            properties.range_filter = Some(RangeFilterInfo {
                handle: crate::table::BlockHandle { offset: 0, len: 0 },
                bits_per_key: range_bits,
            });
            recorded_settings(&properties, opts)
        };
        let built = |extractor: &str, range_bits: f64| built_for(extractor, range_bits, &defaults);
        let fixed = built("siftdb.fixed:6", 16.0);
        assert_eq!(fixed.prefix_len, Some(6));
        assert_eq!(fixed.whole_key_filtering, Some(false));
        assert_eq!(fixed.range_filter_bits_per_key, Some(16.0));
        let custom = built("my-extractor", 12.0);
        assert_eq!(custom.prefix_len, None);
        assert_eq!(custom.whole_key_filtering, None);
        assert_eq!(custom.range_filter_bits_per_key, Some(12.0));
        // Range bits an open refuses are dropped, and only they.
        for bad in [f64::NAN, 1000.0, -1.0] {
            let kept = built("siftdb.fixed:6", bad);
            assert_eq!(kept.range_filter_bits_per_key, None, "{bad}");
            assert_eq!(kept.prefix_len, Some(6), "{bad}");
            assert_eq!(kept.whole_key_filtering, Some(false), "{bad}");
            assert!(kept.check().is_ok(), "{bad}");
        }
        assert_eq!(
            recorded_settings(&TableProperties::placeholder(), &defaults),
            KeyspaceSettings::default()
        );
        // The database's own extractor, whole-key choice and range bits
        // stay inherited.
        let database = Options::default()
            .prefix_extractor(PrefixExtractor::fixed(6).unwrap())
            .whole_key_filtering(false)
            .range_filter_bits_per_key(16.0);
        assert_eq!(
            built_for("siftdb.fixed:6", 16.0, &database),
            KeyspaceSettings::default()
        );
        let other = built_for("siftdb.fixed:3", 12.0, &database);
        assert_eq!(other.prefix_len, Some(3));
        assert_eq!(other.whole_key_filtering, None);
        assert_eq!(other.range_filter_bits_per_key, Some(12.0));
    }

    fn examined(range: Option<(&str, &str)>) -> Examined {
        Examined {
            candidate: Candidate {
                name: String::new(),
                record: None,
            },
            problems: Vec::new(),
            lost: Vec::new(),
            min_seq: SeqNo(0),
            user_range: range.map(|(lo, hi)| (lo.as_bytes().to_vec(), hi.as_bytes().to_vec())),
            max_seq: None,
            filtered: None,
            recorded: None,
            keyspace: TableKeyspace {
                id: 0,
                name: String::new(),
            },
            range_tombstones: None,
        }
    }

    #[test]
    fn tables_whose_ranges_do_not_meet_share_a_run_in_key_order() {
        let tables = [
            examined(Some(("m", "p"))),
            examined(Some(("a", "c"))),
            examined(Some(("b", "z"))),
            examined(None),
            examined(Some(("d", "f"))),
            // Touches the end of "d".."f": the same user key may not be
            // split across one run.
            examined(Some(("f", "g"))),
        ];
        let runs = disjoint_runs(&tables);
        assert_eq!(runs, vec![vec![3], vec![1, 4, 0], vec![2], vec![5]]);
    }
}
