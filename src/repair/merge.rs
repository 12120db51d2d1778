//! The merge of a repair without a manifest: every source of a keyspace
//! (salvaged table runs, recovered log memtables) through the database's
//! merging iterator, newest version of each key only, into new tables of
//! the bottom level; and the new tables repair writes.
//!
//! Owns: `Repair::merge_keyspace`, `Repair::new_table`, `Repair::finish`,
//! [`NewTable`], [`SalvagedRun`], `disjoint_runs`.
//! Must never: keep an entry some zone shadows, read a salvaged run
//! backward, or leave a file behind for a table that got no entry.

use std::cmp::Ordering;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering as AtomicOrdering};
use std::sync::Arc;

use bytes::Bytes;

use crate::db::{table_record, InternalIterator, MemSource, MergingIter, LEVELS};
use crate::error::{Error, Result};
use crate::filename::table_file_name;
use crate::key::{
    compare_internal_keys, internal_key, parse_internal_key, user_key_of, SeqNo, ValueKind,
};
use crate::manifest::{TableRecord, DEFAULT_KEYSPACE_ID};
use crate::memtable::Memtable;
use crate::range_tombstone::{inclusive_upper_bound, FragmentedTombstones};
use crate::table::{Salvaged, TableBuilder, TableKeyspace, TableOptions, TableSalvager};

use super::examine::{shadowed, Examined, Zone};
use super::Repair;

/// The level a repair without a manifest puts its one sorted run at.
pub(super) fn bottom_level() -> u32 {
    u32::try_from(LEVELS - 1).unwrap_or(1)
}

impl Repair<'_> {
    /// Starts a new table file of `keyspace` (none in a dry run).
    pub(super) fn new_table(&mut self, keyspace: &TableKeyspace) -> Result<NewTable> {
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
    pub(super) fn finish(&mut self, table: NewTable, level: u32) -> Result<Option<TableRecord>> {
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

    /// Drops an unfinished `table` and its file (none in a dry run).
    pub(super) fn abandon(&self, table: NewTable) {
        drop(table.builder);
        if !self.dry_run {
            let _ = self.fs.remove(&self.path(&table_file_name(table.number)));
        }
    }

    /// One merge of every source of `keyspace` (the database's merging
    /// iterator), newest version of each key only, into tables of the
    /// bottom level appended to `records`. Its tables whose key ranges do
    /// not meet are read one after another as one source (as the engine
    /// reads a sorted level): the merge compares one key per run, not one
    /// per table — a database's deeper levels make few runs. `out` holds
    /// the table being written, for the caller to abandon on an error.
    #[expect(clippy::too_many_arguments, reason = "one merge's inputs and outputs")]
    pub(super) fn merge_keyspace(
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
}

/// A table being written by repair (or counted, in a dry run).
pub(super) struct NewTable {
    pub(super) number: u64,
    pub(super) keyspace: u32,
    pub(super) builder: Option<TableBuilder>,
    pub(super) entries: u64,
    /// (smallest, largest, min seq, max seq) of what was added.
    pub(super) range: Option<(Vec<u8>, Vec<u8>, SeqNo, SeqNo)>,
    /// Range tombstones it carries (see `TableBuilder::set_range_tombstones`).
    pub(super) range_tombstones: Option<(FragmentedTombstones, Option<Vec<u8>>)>,
}

impl NewTable {
    pub(super) fn set_range_tombstones(
        &mut self,
        list: FragmentedTombstones,
        largest_limit: Option<Vec<u8>>,
    ) {
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
    pub(super) fn dry_run_range(&self) -> Option<(Vec<u8>, Vec<u8>, SeqNo, SeqNo)> {
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

    pub(super) fn add(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
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

    pub(super) fn estimated_size(&self) -> u64 {
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
pub(super) fn disjoint_runs(examined: &[Examined]) -> Vec<Vec<usize>> {
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
pub(super) struct SalvagedRun {
    tables: VecDeque<(usize, TableSalvager)>,
    buffered: VecDeque<(Bytes, Bytes)>,
    entry: Option<(Bytes, Bytes)>,
    current: Arc<AtomicUsize>,
    started: bool,
    /// A backward step was asked for (never, by a repair).
    went_backward: bool,
}

impl SalvagedRun {
    pub(super) fn backward(&mut self) {
        self.went_backward = true;
        self.entry = None;
        self.buffered.clear();
        self.tables.clear();
    }

    pub(super) fn new(
        tables: VecDeque<(usize, TableSalvager)>,
        current: Arc<AtomicUsize>,
    ) -> SalvagedRun {
        SalvagedRun {
            tables,
            buffered: VecDeque::new(),
            entry: None,
            current,
            started: false,
            went_backward: false,
        }
    }

    pub(super) fn advance(&mut self) {
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
    use crate::repair::examine::Candidate;

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
