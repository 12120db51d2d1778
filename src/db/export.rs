//! Keyspace export and import: one keyspace's tables at one sequence
//! number, linked out of the database as they are, and a new keyspace made
//! of such tables (siftdb-raft's snapshots are these: see
//! `docs/replication.md`). Unstable, in `internals::keyspace_export`.
//!
//! Owns: [`KeyspaceExport`] (pin, then link out), [`ExportedTable`] and
//! [`import_keyspace`].
//! Must never: hand out a set of tables that is not exactly the keyspace
//! at the pinned sequence number; stop writes for longer than it takes to
//! pin; make a keyspace whose tables would hide later writes (the
//! database's sequence moves above every imported entry first); add part
//! of an import (one manifest write names the new keyspace with all of its
//! tables, or nothing names any).
//!
//! How an export stays exact while writes go on: under the writer lock
//! (memtable inserts happen under it) it takes the keyspace's
//! super-version and the last sequence number `S`. The super-version's
//! tables hold only writes up to `S` and stay on disk while it is held;
//! its memtables may gain later writes, so their entries are written out
//! as one more level-0 table, every version at or below `S` (a merge
//! operand needs the versions under it) and every range tombstone at or
//! below `S`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::db::flush::{
    build_table, open_live_table, table_options_for, EntrySource, OutputLimits, PendingOutputs,
    TombstoneCuts,
};
use crate::db::handle::Db;
use crate::db::handle_counts::HandleKind;
use crate::db::inner::DbInner;
use crate::db::keyspace::Keyspace;
use crate::db::keyspace_options::KeyspaceOptions;
use crate::db::super_version::SuperVersion;
use crate::db::tree::Tree;
use crate::db::version::LEVELS;
use crate::db::version::{LiveTable, Version};
use crate::db::write;
use crate::error::{Error, Result};
use crate::filename::table_file_name;
use crate::key::{internal_key, parse_internal_key, user_key_of, SeqNo, ValueKind};
use crate::manifest::{valid_keyspace_name, TableRecord};
use crate::range_tombstone::FragmentedTombstones;
use crate::table::Table;

/// One table of an export: its file (in the export's directory) and its
/// manifest record (level, size, bounds, sequence numbers; the file number
/// is the database's and means nothing outside it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportedTable {
    /// The file's name in the directory the export was written to.
    pub file_name: String,
    /// Its record as the exporting database had it.
    pub record: TableRecord,
}

/// A keyspace pinned at one sequence number: [`KeyspaceExport::pin`] is
/// quick (writes wait only for it), [`KeyspaceExport::write_to`] links the
/// tables out later, from any thread. The pinned tables stay on disk while
/// this lives.
pub struct KeyspaceExport {
    inner: Arc<DbInner>,
    tree: Arc<Tree>,
    sv: Arc<SuperVersion>,
    sequence: SeqNo,
}

impl std::fmt::Debug for KeyspaceExport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyspaceExport")
            .field("keyspace", &self.tree.name)
            .field("sequence", &self.sequence.0)
            .finish_non_exhaustive()
    }
}

impl Drop for KeyspaceExport {
    fn drop(&mut self) {
        self.inner.handles.dropped(HandleKind::KeyspaceExport);
    }
}

impl KeyspaceExport {
    /// Pins `keyspace` as of the last write.
    pub fn pin(keyspace: &Keyspace) -> Result<KeyspaceExport> {
        keyspace.tree().check_live()?;
        let inner = keyspace.inner();
        let writer = inner.writer.lock();
        write::check_writable(inner, &writer)?;
        let sv = keyspace.tree().current.load_full();
        let sequence = writer.last_seq;
        drop(writer);
        inner.handles.made(HandleKind::KeyspaceExport);
        Ok(KeyspaceExport {
            inner: Arc::clone(inner),
            tree: Arc::clone(keyspace.tree()),
            sv,
            sequence,
        })
    }

    /// The sequence number the export holds the keyspace at.
    pub fn sequence(&self) -> u64 {
        self.sequence.0
    }

    /// Hard-links every pinned table into `dir` (which must exist; copies
    /// across file systems) and writes the memtables' entries up to the
    /// sequence number as one more level-0 table there, synced; returns the
    /// tables, newest level-0 table first. The memtables' range tombstones
    /// at or below the sequence number go into that table too (siftdb-raft's
    /// replicated range deletes write them).
    pub fn write_to(&self, dir: &Path) -> Result<Vec<ExportedTable>> {
        let fs = self.inner.fs.as_ref();
        let mut out = Vec::new();
        if let Some(table) = self.memtable_table(dir)? {
            out.push(table);
        }
        for table in self.sv.version.levels.iter().flatten() {
            let file_name = table_file_name(table.file_number());
            let (from, to) = (self.inner.path_of(&file_name), dir.join(&file_name));
            if fs.hard_link(&from, &to).is_err() {
                crate::db::checkpoint::copy_file(fs, &from, &to, u64::MAX)?;
            }
            out.push(ExportedTable {
                file_name,
                record: table.record.clone(),
            });
        }
        fs.sync_dir(dir)?;
        Ok(out)
    }

    /// The memtables' versions of each key and range tombstones at or
    /// below the sequence number, as a level-0 table in `dir` (`None` when
    /// there is none).
    fn memtable_table(&self, dir: &Path) -> Result<Option<ExportedTable>> {
        let mems: Vec<_> = std::iter::once(&self.sv.mem)
            .chain(&self.sv.imm)
            .map(|m| &m.mem)
            .collect();
        // One table holds them all: within one source a tombstone hides
        // only the versions older than itself, as in the memtables.
        let lists: Vec<_> = mems.iter().filter_map(|m| m.range_tombstones()).collect();
        let tombstones = FragmentedTombstones::new(
            lists
                .iter()
                .flat_map(|list| list.tombstones())
                .filter(|t| t.seq <= self.sequence),
        );
        // Every version at or below the sequence number, not only each
        // key's newest: a merge operand needs the versions under it.
        let mut newest: BTreeMap<VersionKey<'_>, (ValueKind, &[u8])> = BTreeMap::new();
        for mem in &mems {
            for (key, value) in mem.iter() {
                let parsed = parse_internal_key(key)?;
                if parsed.seq > self.sequence {
                    continue;
                }
                newest.insert(
                    (parsed.user_key, std::cmp::Reverse(parsed.seq)),
                    (parsed.kind, value),
                );
            }
        }
        if newest.is_empty() && tombstones.is_empty() {
            return Ok(None);
        }
        let mut cuts = (!tombstones.is_empty()).then(|| TombstoneCuts::new(tombstones, None));
        let number = self.inner.versions.lock().new_file_number();
        let opts = self.tree.opts.load();
        let options = table_options_for(&opts, &self.sv.version.level_tables(), 0);
        let mut entries = NewestEntries {
            iter: newest.into_iter(),
            key: Vec::new(),
            value: &[],
        };
        let built = build_table(
            self.inner.fs.as_ref(),
            dir,
            &options,
            number,
            &mut entries,
            OutputLimits::default(),
            cuts.as_mut(),
        )?;
        let Some((record, _)) = built else {
            return Ok(None);
        };
        Ok(Some(ExportedTable {
            file_name: table_file_name(number),
            record,
        }))
    }
}

/// An entry's place in internal-key order: user key ascending, then
/// sequence number descending.
type VersionKey<'a> = (&'a [u8], std::cmp::Reverse<SeqNo>);

/// The memtable export's entries in key order, lent one at a time.
struct NewestEntries<'a, I> {
    iter: I,
    key: Vec<u8>,
    value: &'a [u8],
}

impl<'a, I: Iterator<Item = (VersionKey<'a>, (ValueKind, &'a [u8]))>> EntrySource
    for NewestEntries<'a, I>
{
    fn next_entry(&mut self) -> Option<Result<(&[u8], &[u8])>> {
        let ((user_key, std::cmp::Reverse(seq)), (kind, value)) = self.iter.next()?;
        self.key = internal_key(user_key, seq, kind);
        self.value = value;
        Some(Ok((&self.key, self.value)))
    }
}

/// Makes a new keyspace `name` of the table files `tables` (each file with
/// the record an export gave it): the files are hard-linked into the
/// database (copied across file systems; the caller's names stay), not
/// rewritten; the database's sequence number moves above every imported
/// entry, so later
/// writes shadow them. Each file is opened and checked against its record
/// (size, entry count, bounds, sequence numbers) and the levels below 0
/// must not overlap; the keyspace appears with every table in one manifest
/// write, or not at all. `name` must not exist. Tables keep the keyspace
/// they were written for in their properties (what `repair` would go by).
pub fn import_keyspace(db: &Db, name: &str, tables: &[(PathBuf, TableRecord)]) -> Result<Keyspace> {
    let inner = &db.inner;
    if !valid_keyspace_name(name) {
        return Err(Error::invalid(format!(
            "keyspace name {name:?} is not 1-255 bytes of [A-Za-z0-9_.-]"
        )));
    }
    if inner.tree_named(name).is_some() {
        return Err(Error::invalid(format!("keyspace {name:?} already exists")));
    }
    let fs = inner.fs.as_ref();
    for (path, record) in tables {
        check_import(inner, path, record)?;
    }
    check_levels(tables)?;
    let _pending = PendingOutputs::begin(inner);
    let mut writer = inner.writer.lock();
    write::check_writable(inner, &writer)?;
    let mut versions = inner.versions.lock();
    if inner.tree_named(name).is_some() {
        return Err(Error::invalid(format!("keyspace {name:?} already exists")));
    }
    let mut added: Vec<Arc<LiveTable>> = Vec::new();
    let remove_added = |added: &[Arc<LiveTable>]| {
        for table in added {
            let _ = fs.remove(&inner.path_of(&table_file_name(table.file_number())));
        }
    };
    let placed = (|| {
        for (path, record) in tables {
            let number = versions.new_file_number();
            let to = inner.path_of(&table_file_name(number));
            if fs.hard_link(path, &to).is_err() {
                crate::db::checkpoint::copy_file(fs, path, &to, u64::MAX)?;
            }
            let record = TableRecord {
                file_number: number,
                keyspace: 0,
                ..record.clone()
            };
            added.push(open_live_table(&inner.tables, &inner.dir, record)?);
        }
        fs.sync_dir(&inner.dir)
    })();
    if let Err(e) = placed {
        remove_added(&added);
        return Err(e);
    }
    let id = versions.next_keyspace_id;
    let Some(next_id) = id.checked_add(1) else {
        remove_added(&added);
        return Err(Error::invalid(
            "every keyspace id has been given out (2^32 keyspaces created)",
        ));
    };
    versions.next_keyspace_id = next_id;
    let top = tables
        .iter()
        .map(|(_, r)| r.max_seq)
        .max()
        .unwrap_or(SeqNo(0));
    if top > writer.last_seq {
        writer.last_seq = top;
        inner.last_visible.store(top.0, Ordering::Release);
    }
    let version = Version::with_levels(LEVELS).apply(&[], added.clone());
    let tree = Arc::new(Tree::new(
        id,
        name.to_string(),
        inner.opts.clone(),
        KeyspaceOptions::new(),
        version,
        writer.log_number,
    ));
    let before = inner.trees.load_full();
    let mut with = before.as_ref().clone();
    with.push(Arc::clone(&tree));
    inner.trees.store(Arc::new(with));
    if let Err(e) = inner.persist(&mut versions, None) {
        // The id stays given out; the sequence number may stay raised
        // (harmless: numbers are only ever skipped).
        inner.trees.store(before);
        drop(versions);
        remove_added(&added);
        return Err(e);
    }
    drop(versions);
    drop(writer);
    crate::db::background::notify(inner);
    Ok(Keyspace::of(Arc::clone(inner), tree))
}

/// Opens the file at `path` and checks it against `record`.
fn check_import(inner: &DbInner, path: &Path, record: &TableRecord) -> Result<()> {
    let what = || format!("imported table {}", path.display());
    if record.level as usize >= LEVELS {
        return Err(Error::corruption(what(), format!("level {}", record.level)));
    }
    let table = Table::open_with(&inner.fs, path)?;
    let props = table.properties();
    let bad = |detail: String| Err(Error::corruption(what(), detail));
    if table.file_size() != record.file_size {
        return bad(format!(
            "{} bytes, its record says {}",
            table.file_size(),
            record.file_size
        ));
    }
    if props.entries != record.entries {
        return bad(format!(
            "{} entries, its record says {}",
            props.entries, record.entries
        ));
    }
    if props.entries > 0 {
        let within = props.min_seq >= record.min_seq
            && props.max_seq <= record.max_seq
            && user_key_of(&props.smallest) >= user_key_of(&record.smallest)
            && user_key_of(&props.largest) <= user_key_of(&record.largest);
        if !within {
            return bad("keys or sequence numbers outside its record's bounds".into());
        }
    }
    Ok(())
}

/// Levels below 0 must be sorted runs: no two tables' ranges meet.
fn check_levels(tables: &[(PathBuf, TableRecord)]) -> Result<()> {
    for level in 1..LEVELS {
        let mut ranges: Vec<(&[u8], &[u8])> = tables
            .iter()
            .filter(|(_, r)| r.level as usize == level)
            .map(|(_, r)| (user_key_of(&r.smallest), user_key_of(&r.largest)))
            .collect();
        ranges.sort();
        for pair in ranges.windows(2) {
            if let [a, b] = pair {
                if b.0 <= a.1 {
                    return Err(Error::corruption(
                        "imported tables",
                        format!("two tables of level {level} overlap"),
                    ));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A database in `dir/a` whose keyspace `s` holds `k00000`.. (`n` keys,
    /// each `old`) in a table.
    fn old_table(dir: &Path, n: u32) -> (Db, Keyspace) {
        let db = Db::open(dir.join("a")).unwrap();
        let ks = db.keyspace("s").unwrap();
        for i in 0..n {
            ks.put(format!("k{i:05}"), b"old").unwrap();
        }
        db.flush().unwrap();
        (db, ks)
    }

    /// `export` written to the new directory `out`: each table's path and
    /// record, as [`import_keyspace`] takes them.
    fn written_out(export: &KeyspaceExport, out: &Path) -> Vec<(PathBuf, TableRecord)> {
        std::fs::create_dir(out).unwrap();
        let tables = export.write_to(out).unwrap();
        tables
            .iter()
            .map(|t| (out.join(&t.file_name), t.record.clone()))
            .collect()
    }

    /// An export pinned between writes holds exactly the keyspace at the
    /// pin (tables and memtable alike, later writes left out); imported
    /// into another database it reads the same, and writes there after
    /// the import shadow the imported entries.
    #[test]
    fn an_export_imports_as_the_pinned_state() {
        let dir = tempfile::tempdir().unwrap();
        let (_db, ks) = old_table(dir.path(), 2000);
        for i in 0..1000u32 {
            ks.put(format!("k{i:05}"), b"mid").unwrap();
        }
        ks.delete(b"k01999").unwrap();
        let export = KeyspaceExport::pin(&ks).unwrap();
        for i in 0..2000u32 {
            ks.put(format!("k{i:05}"), b"new").unwrap();
        }
        let files = written_out(&export, &dir.path().join("export"));
        assert!(files.len() >= 2, "{files:?}");

        let other = Db::open(dir.path().join("b")).unwrap();
        other.put(b"unrelated", b"1").unwrap();
        let imported = import_keyspace(&other, "t", &files).unwrap();
        for i in 0..2000u32 {
            let want = match i {
                0..=999 => Some(&b"mid"[..]),
                1999 => None,
                _ => Some(&b"old"[..]),
            };
            let got = imported.get(format!("k{i:05}")).unwrap();
            assert_eq!(got.as_deref(), want, "key {i}");
        }
        imported.put(b"k00001", b"later").unwrap();
        assert_eq!(
            imported.get(b"k00001").unwrap().as_deref(),
            Some(&b"later"[..])
        );
        assert!(import_keyspace(&other, "t", &files).is_err());
        drop(imported);
        other.close().unwrap();
        let other = Db::open(dir.path().join("b")).unwrap();
        let reopened = other.keyspace("t").unwrap();
        assert_eq!(
            reopened.get(b"k00001").unwrap().as_deref(),
            Some(&b"later"[..])
        );
        assert_eq!(
            reopened.get(b"k01500").unwrap().as_deref(),
            Some(&b"old"[..])
        );
    }

    /// Range tombstones in the memtable at the pin travel with the export
    /// (over keys in tables and in the memtable, a put after one in the
    /// same memtable surviving it); one written after the pin does not.
    #[test]
    fn an_export_carries_the_memtable_range_tombstones() {
        let dir = tempfile::tempdir().unwrap();
        let (_db, ks) = old_table(dir.path(), 100);
        ks.put(b"k00050", b"mem").unwrap();
        ks.delete_range(&b"k00010"[..]..&b"k00060"[..]).unwrap();
        ks.put(b"k00020", b"after").unwrap();
        let export = KeyspaceExport::pin(&ks).unwrap();
        ks.delete_range(&b"k"[..]..).unwrap();
        let files = written_out(&export, &dir.path().join("export"));

        let other = Db::open(dir.path().join("b")).unwrap();
        let imported = import_keyspace(&other, "t", &files).unwrap();
        for i in 0..100u32 {
            let want = match i {
                20 => Some(&b"after"[..]),
                10..=59 => None,
                _ => Some(&b"old"[..]),
            };
            let got = imported.get(format!("k{i:05}")).unwrap();
            assert_eq!(got.as_deref(), want, "key {i}");
        }
        assert_eq!(imported.iter().count(), 51);
    }
}
