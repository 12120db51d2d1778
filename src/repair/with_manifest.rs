//! Repair with an intact manifest: the manifest's tables and levels are
//! the starting point; each damaged table is rewritten in its original's
//! place with what of it reads whole, and damaged logs' readable records
//! go into new level-0 tables.
//!
//! Owns: `Repair::with_manifest`, `Repair::each_entry`, `keyspace_of`.
//! Must never: change the level of a kept table, keep an entry a lost
//! block may have shadowed, or delete an original (it goes to `lost/`).

use std::cmp::Ordering;

use bytes::Bytes;

use crate::db::cut_short;
use crate::error::Result;
use crate::filename::{table_file_name, wal_file_name, FileKind};
use crate::key::compare_internal_keys;
use crate::manifest::ManifestState;
use crate::range_tombstone::key_successor;
use crate::table::{Salvaged, TableKeyspace, TableSalvager};
use crate::wal::{replay, replay_batches, LostRecord};

use super::examine::{shadowed, Candidate};
use super::logs::Recovered;
use super::report::{LogAction, LogReport, TableAction, TableReport};
use super::{recovered_keyspace_name, user, Repair};

/// Keyspace `id` of `state`, with its name (its tables record it).
pub(super) fn keyspace_of(state: &ManifestState, id: u32) -> TableKeyspace {
    TableKeyspace {
        id,
        name: state
            .keyspaces
            .iter()
            .find(|k| k.id == id)
            .map_or_else(|| recovered_keyspace_name(id), |k| k.name.clone()),
    }
}

impl Repair<'_> {
    /// The readable entries of table `name`, block by block, into `visit`.
    pub(super) fn each_entry(
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
    pub(super) fn with_manifest(
        &mut self,
        state: &ManifestState,
        numbered: &[(FileKind, u64)],
    ) -> Result<()> {
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
            blob_files: state.blob_files.clone(),
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
}
